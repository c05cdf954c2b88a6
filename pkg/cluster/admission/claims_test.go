/*
Copyright 2026 The vgpu-dra Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/yaml"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/cluster/allocator"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/cluster/quota"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/devices"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/discovery"
)

const gi = int64(1) << 30

// fakeQuota refuses claims over a fixed memory amount and records calls.
type fakeQuota struct {
	maxMemory int64
	dryRuns   []bool
}

func (q *fakeQuota) Admit(_ context.Context, claim *resourceapi.ResourceClaim, dryRun bool) error {
	q.dryRuns = append(q.dryRuns, dryRun)
	for _, r := range claim.Spec.Devices.Requests {
		if r.Exactly != nil && r.Exactly.Capacity != nil {
			if m, ok := r.Exactly.Capacity.Requests["memory"]; ok && m.Value() > q.maxMemory {
				return fmt.Errorf("%w in namespace %q: memory: requested %s", quota.ErrExceeded, claim.Namespace, m.String())
			}
		}
	}
	return nil
}

func testValidator(q QuotaAdmitter) *ClaimValidator {
	return &ClaimValidator{
		DriverName:       "vgpu.dra.dev",
		Classes:          &ClassMatcher{DriverName: "vgpu.dra.dev", Names: sets.New("vgpu.dra.dev", "vgpu-work-conserving.dra.dev", "vgpu-unenforced.dra.dev", "mig.vgpu.dra.dev")},
		AdminOnlyClasses: sets.New("vgpu-unenforced.dra.dev"),
		AdminNamespaces:  sets.New("kube-system", "gpu-admin"),
		MaxMemoryBytes:   1 << 40,
		LargestGPUMemory: func() int64 { return 80 * gi },
		Quota:            q,
	}
}

// claimSpec parses a spec written as YAML, as users write it.
func claimSpec(t testing.TB, y string) resourceapi.ResourceClaimSpec {
	t.Helper()
	var spec resourceapi.ResourceClaimSpec
	require.NoError(t, yaml.UnmarshalStrict([]byte(y), &spec))
	return spec
}

const opaqueHeader = `apiVersion: vgpu.dra.dev/v1alpha1, kind: VGPUConfig`

func TestClaimValidation(t *testing.T) {
	tests := []struct {
		name      string
		namespace string
		spec      string
		template  bool
		op        admissionv1.Operation
		wantDeny  []string // substrings of the denial; empty: allowed
		wantWarn  []string
	}{
		{
			name: "valid slice",
			spec: `{devices: {requests: [{name: gpu, exactly: {deviceClassName: vgpu.dra.dev, capacity: {requests: {memory: 4Gi, cores: "30"}}}}]}}`,
		},
		{
			name: "qualified capacity names",
			spec: `{devices: {requests: [{name: gpu, exactly: {deviceClassName: vgpu.dra.dev, capacity: {requests: {vgpu.dra.dev/memory: 4Gi, vgpu.dra.dev/cores: "30"}}}}]}}`,
			wantDeny: []string{`spec.devices.requests[0].exactly.capacity.requests[vgpu.dra.dev/memory]`, `write "memory"`,
				`spec.devices.requests[0].exactly.capacity.requests[vgpu.dra.dev/cores]`, `write "cores"`, "could never be allocated"},
		},
		{
			name: "valid claim config",
			spec: `{devices: {requests: [{name: gpu, exactly: {deviceClassName: vgpu.dra.dev}}],
			        config: [{opaque: {driver: vgpu.dra.dev, parameters: {` + opaqueHeader + `, computePolicy: workConserving, priority: high}}}]}}`,
		},
		{
			name: "unknown config field",
			spec: `{devices: {requests: [{name: gpu, exactly: {deviceClassName: vgpu.dra.dev}}],
			        config: [{opaque: {driver: vgpu.dra.dev, parameters: {` + opaqueHeader + `, memory: 4Gi}}}]}}`,
			wantDeny: []string{"spec.devices.config[0].opaque.parameters", `unknown field "memory"`},
		},
		{
			name: "wrong config type",
			spec: `{devices: {requests: [{name: gpu, exactly: {deviceClassName: vgpu.dra.dev}}],
			        config: [{opaque: {driver: other.example.com, parameters: {x: 1}}}, {opaque: {driver: vgpu.dra.dev, parameters: {` + opaqueHeader + `, priority: 0}}}]}}`,
			wantDeny: []string{"spec.devices.config[1].opaque.parameters", "priority"},
		},
		{
			name: "wrong config apiVersion",
			spec: `{devices: {requests: [{name: gpu, exactly: {deviceClassName: vgpu.dra.dev}}],
			        config: [{opaque: {driver: vgpu.dra.dev, parameters: {apiVersion: vgpu.dra.dev/v1, kind: VGPUConfig}}}]}}`,
			wantDeny: []string{"spec.devices.config[0].opaque.parameters", "apiVersion", `"vgpu.dra.dev/v1alpha1"`},
		},
		{
			name: "out of range config value",
			spec: `{devices: {requests: [{name: gpu, exactly: {deviceClassName: vgpu.dra.dev}}],
			        config: [{opaque: {driver: vgpu.dra.dev, parameters: {` + opaqueHeader + `, computePolicy: force}}}]}}`,
			wantDeny: []string{"computePolicy", `"force"`},
		},
		{
			name: "class-only field from a claim",
			spec: `{devices: {requests: [{name: gpu, exactly: {deviceClassName: vgpu.dra.dev}}],
			        config: [{opaque: {driver: vgpu.dra.dev, parameters: {` + opaqueHeader + `, enforcement: disabled}}}]}}`,
			wantDeny: []string{"spec.devices.config[0].opaque.parameters.enforcement: Forbidden"},
		},
		{
			name:     "class-only field in a template",
			template: true,
			spec: `{devices: {requests: [{name: gpu, exactly: {deviceClassName: vgpu.dra.dev}}],
			        config: [{opaque: {driver: vgpu.dra.dev, parameters: {` + opaqueHeader + `, enforcement: enabled}}}]}}`,
			wantDeny: []string{"ResourceClaimTemplate", "spec.spec.devices.config[0].opaque.parameters.enforcement: Forbidden"},
		},
		{
			name:     "unknown capacity",
			spec:     `{devices: {requests: [{name: gpu, exactly: {deviceClassName: vgpu.dra.dev, capacity: {requests: {bandwidth: 1G}}}}]}}`,
			wantDeny: []string{"spec.devices.requests[0].exactly.capacity.requests[bandwidth]", `supported values: "memory", "cores"`},
		},
		{
			name:     "capacity of another domain",
			spec:     `{devices: {requests: [{name: gpu, exactly: {deviceClassName: vgpu.dra.dev, capacity: {requests: {example.com/memory: 1Gi}}}}]}}`,
			wantDeny: []string{"capacity.requests[example.com/memory]"},
		},
		{
			name:     "negative memory",
			spec:     `{devices: {requests: [{name: gpu, exactly: {deviceClassName: vgpu.dra.dev, capacity: {requests: {memory: -1Gi}}}}]}}`,
			wantDeny: []string{"capacity.requests[memory]", "must be positive"},
		},
		{
			name:     "zero memory",
			spec:     `{devices: {requests: [{name: gpu, exactly: {deviceClassName: vgpu.dra.dev, capacity: {requests: {memory: "0"}}}}]}}`,
			wantDeny: []string{"capacity.requests[memory]", "must be positive"},
		},
		{
			name:     "absurd memory",
			spec:     `{devices: {requests: [{name: gpu, exactly: {deviceClassName: vgpu.dra.dev, capacity: {requests: {memory: 4Pi}}}}]}}`,
			wantDeny: []string{"capacity.requests[memory]", "more than any GPU has", "1Ti"},
		},
		{
			name:     "memory above the largest GPU warns",
			template: true,
			spec:     `{devices: {requests: [{name: gpu, exactly: {deviceClassName: vgpu.dra.dev, capacity: {requests: {memory: 100Gi}}}}]}}`,
			wantWarn: []string{`request "gpu" asks for 100Gi`, "largest GPU published has 80Gi"},
		},
		{
			name:     "cores above 100",
			spec:     `{devices: {requests: [{name: gpu, exactly: {deviceClassName: vgpu.dra.dev, capacity: {requests: {cores: "150"}}}}]}}`,
			wantDeny: []string{"capacity.requests[cores]", `"150"`, "between 0 and 100"},
		},
		{
			name:     "fractional cores",
			spec:     `{devices: {requests: [{name: gpu, exactly: {deviceClassName: vgpu.dra.dev, capacity: {requests: {cores: 500m}}}}]}}`,
			wantDeny: []string{"capacity.requests[cores]", "whole number"},
		},
		{
			name:     "negative cores",
			spec:     `{devices: {requests: [{name: gpu, exactly: {deviceClassName: vgpu.dra.dev, capacity: {requests: {cores: "-1"}}}}]}}`,
			wantDeny: []string{"capacity.requests[cores]"},
		},
		{
			name:     "two GPUs without distinct constraint",
			spec:     `{devices: {requests: [{name: gpu, exactly: {deviceClassName: vgpu.dra.dev, count: 2, capacity: {requests: {memory: 4Gi}}}}]}}`,
			wantDeny: []string{"spec.devices.requests[0].exactly.count", "could all be allocated on one GPU", "distinctAttribute: vgpu.dra.dev/uuid"},
		},
		{
			name: "two GPUs with distinct constraint",
			spec: `{devices: {requests: [{name: gpu, exactly: {deviceClassName: vgpu.dra.dev, count: 2}}],
			        constraints: [{requests: [gpu], distinctAttribute: vgpu.dra.dev/uuid}]}}`,
		},
		{
			name: "distinct constraint on another request does not count",
			spec: `{devices: {requests: [{name: gpu, exactly: {deviceClassName: vgpu.dra.dev, count: 2}}, {name: other, exactly: {deviceClassName: vgpu.dra.dev}}],
			        constraints: [{requests: [other], distinctAttribute: vgpu.dra.dev/uuid}]}}`,
			wantDeny: []string{"spec.devices.requests[0].exactly.count"},
		},
		{
			name:     "two requests that may share a GPU warn",
			spec:     `{devices: {requests: [{name: a, exactly: {deviceClassName: vgpu.dra.dev}}, {name: b, exactly: {deviceClassName: vgpu-work-conserving.dra.dev}}]}}`,
			wantWarn: []string{`requests ["a" "b"] may be allocated on the same GPU`},
		},
		{
			name: "firstAvailable subrequest checked",
			spec: `{devices: {requests: [{name: gpu, firstAvailable: [
			        {name: big, deviceClassName: vgpu.dra.dev, capacity: {requests: {memory: 8Gi}}},
			        {name: small, deviceClassName: vgpu.dra.dev, capacity: {requests: {cores: "101"}}}]}]}}`,
			wantDeny: []string{"spec.devices.requests[0].firstAvailable[1].capacity.requests[cores]"},
		},
		{
			name:     "unenforced class outside admin namespaces",
			spec:     `{devices: {requests: [{name: gpu, exactly: {deviceClassName: vgpu-unenforced.dra.dev}}]}}`,
			wantDeny: []string{"spec.devices.requests[0].exactly.deviceClassName: Forbidden", "vgpu-unenforced.dra.dev", "[gpu-admin kube-system]"},
		},
		{
			name:     "unenforced class in a template outside admin namespaces",
			template: true,
			spec:     `{devices: {requests: [{name: gpu, firstAvailable: [{name: a, deviceClassName: vgpu-unenforced.dra.dev}]}]}}`,
			wantDeny: []string{"spec.spec.devices.requests[0].firstAvailable[0].deviceClassName: Forbidden"},
		},
		{
			name:      "unenforced class in an admin namespace",
			namespace: "gpu-admin",
			spec:      `{devices: {requests: [{name: gpu, exactly: {deviceClassName: vgpu-unenforced.dra.dev}}]}}`,
		},
		{
			name: "other drivers are not judged",
			spec: `{devices: {requests: [{name: nic, exactly: {deviceClassName: nic.example.com, count: 4, capacity: {requests: {bandwidth: 10G}}}}]}}`,
		},
		{
			name: "updates are not judged",
			op:   admissionv1.Update,
			spec: `{devices: {requests: [{name: gpu, exactly: {deviceClassName: vgpu.dra.dev, capacity: {requests: {cores: "150"}}}}]}}`,
		},
		{
			name:     "quota exceeded",
			spec:     `{devices: {requests: [{name: gpu, exactly: {deviceClassName: vgpu.dra.dev, capacity: {requests: {memory: 40Gi}}}}]}}`,
			wantDeny: []string{"GPU quota exceeded", `namespace "team"`, "requested 40Gi"},
		},
		{
			name: "memoryLimit above the guarantee",
			spec: `{devices: {requests: [{name: gpu, exactly: {deviceClassName: vgpu.dra.dev, capacity: {requests: {memory: 4Gi}}}}],
			        config: [{opaque: {driver: vgpu.dra.dev, parameters: {` + opaqueHeader + `, memoryLimit: 12Gi}}}]}}`,
		},
		{
			name: "memoryLimit equal to the guarantee",
			spec: `{devices: {requests: [{name: gpu, exactly: {deviceClassName: vgpu.dra.dev, capacity: {requests: {memory: 4Gi}}}}],
			        config: [{opaque: {driver: vgpu.dra.dev, parameters: {` + opaqueHeader + `, memoryLimit: "4294967296"}}}]}}`,
		},
		{
			name: "memoryLimit not a quantity",
			spec: `{devices: {requests: [{name: gpu, exactly: {deviceClassName: vgpu.dra.dev, capacity: {requests: {memory: 4Gi}}}}],
			        config: [{opaque: {driver: vgpu.dra.dev, parameters: {` + opaqueHeader + `, memoryLimit: 12Gx}}}]}}`,
			wantDeny: []string{"spec.devices.config[0].opaque.parameters.memoryLimit: Invalid value: \"12Gx\": must be a quantity such as \"12Gi\""},
		},
		{
			name: "memoryLimit an object",
			spec: `{devices: {requests: [{name: gpu, exactly: {deviceClassName: vgpu.dra.dev, capacity: {requests: {memory: 4Gi}}}}],
			        config: [{opaque: {driver: vgpu.dra.dev, parameters: {` + opaqueHeader + `, memoryLimit: {value: 12Gi}}}}]}}`,
			wantDeny: []string{"spec.devices.config[0].opaque.parameters.memoryLimit: Invalid value:", "must be a quantity"},
		},
		{
			name: "memoryLimit below the guarantee",
			spec: `{devices: {requests: [{name: gpu, exactly: {deviceClassName: vgpu.dra.dev, capacity: {requests: {memory: 4Gi}}}}],
			        config: [{opaque: {driver: vgpu.dra.dev, parameters: {` + opaqueHeader + `, memoryLimit: 3Gi}}}]}}`,
			wantDeny: []string{"spec.devices.config[0].opaque.parameters.memoryLimit: Invalid value: \"3Gi\"", `less than the 4Gi of memory request "gpu" asks for`},
		},
		{
			name:     "memoryLimit below the guarantee in a template",
			template: true,
			spec: `{devices: {requests: [{name: gpu, exactly: {deviceClassName: vgpu.dra.dev, capacity: {requests: {memory: 4Gi}}}}],
			        config: [{opaque: {driver: vgpu.dra.dev, parameters: {` + opaqueHeader + `, memoryLimit: 1Gi}}}]}}`,
			wantDeny: []string{"ResourceClaimTemplate", "spec.spec.devices.config[0].opaque.parameters.memoryLimit", "less than the 4Gi"},
		},
		{
			name: "memoryLimit above the largest GPU",
			spec: `{devices: {requests: [{name: gpu, exactly: {deviceClassName: vgpu.dra.dev, capacity: {requests: {memory: 4Gi}}}}],
			        config: [{opaque: {driver: vgpu.dra.dev, parameters: {` + opaqueHeader + `, memoryLimit: 81Gi}}}]}}`,
			wantDeny: []string{"spec.devices.config[0].opaque.parameters.memoryLimit", `"81Gi"`, "more than the largest GPU published has (80Gi)"},
		},
		{
			name: "memoryLimit beyond int64 is above every GPU",
			spec: `{devices: {requests: [{name: gpu, exactly: {deviceClassName: vgpu.dra.dev, capacity: {requests: {memory: 4Gi}}}}],
			        config: [{opaque: {driver: vgpu.dra.dev, parameters: {` + opaqueHeader + `, memoryLimit: 100Ei}}}]}}`,
			wantDeny: []string{"memoryLimit", "more than the largest GPU published"},
		},
		{
			name: "memoryLimit not a whole number of bytes",
			spec: `{devices: {requests: [{name: gpu, exactly: {deviceClassName: vgpu.dra.dev, capacity: {requests: {memory: 4Gi}}}}],
			        config: [{opaque: {driver: vgpu.dra.dev, parameters: {` + opaqueHeader + `, memoryLimit: 5000000000500m}}}]}}`,
			wantDeny: []string{"memoryLimit", "whole number of bytes"},
		},
		{
			name: "memoryLimit for a request without memory",
			spec: `{devices: {requests: [{name: gpu, exactly: {deviceClassName: vgpu.dra.dev, capacity: {requests: {cores: "10"}}}}],
			        config: [{opaque: {driver: vgpu.dra.dev, parameters: {` + opaqueHeader + `, memoryLimit: 8Gi}}}]}}`,
			wantDeny: []string{"memoryLimit", `request "gpu" asks for no memory`},
		},
		{
			name: "memoryLimit checked only against the requests it applies to",
			spec: `{devices: {requests: [{name: a, exactly: {deviceClassName: vgpu.dra.dev, capacity: {requests: {memory: 4Gi}}}},
			                          {name: b, exactly: {deviceClassName: vgpu.dra.dev, capacity: {requests: {memory: 9Gi}}}}],
			        constraints: [{distinctAttribute: vgpu.dra.dev/uuid}],
			        config: [{requests: [a], opaque: {driver: vgpu.dra.dev, parameters: {` + opaqueHeader + `, memoryLimit: 8Gi}}}]}}`,
		},
		{
			name: "memoryLimit below one of the requests it applies to",
			spec: `{devices: {requests: [{name: a, exactly: {deviceClassName: vgpu.dra.dev, capacity: {requests: {memory: 4Gi}}}},
			                          {name: b, exactly: {deviceClassName: vgpu.dra.dev, capacity: {requests: {memory: 9Gi}}}}],
			        constraints: [{distinctAttribute: vgpu.dra.dev/uuid}],
			        config: [{opaque: {driver: vgpu.dra.dev, parameters: {` + opaqueHeader + `, memoryLimit: 8Gi}}}]}}`,
			wantDeny: []string{"memoryLimit", `request "b" asks for`},
		},
		{
			name: "memoryLimit checks every subrequest of a request",
			spec: `{devices: {requests: [{name: gpu, firstAvailable: [
			        {name: big, deviceClassName: vgpu.dra.dev, capacity: {requests: {memory: 16Gi}}},
			        {name: small, deviceClassName: vgpu.dra.dev, capacity: {requests: {memory: 4Gi}}}]}],
			        config: [{requests: [gpu], opaque: {driver: vgpu.dra.dev, parameters: {` + opaqueHeader + `, memoryLimit: 8Gi}}}]}}`,
			wantDeny: []string{"memoryLimit", `request "gpu/big" asks for`},
		},
		{
			name: "memoryLimit for one subrequest",
			spec: `{devices: {requests: [{name: gpu, firstAvailable: [
			        {name: big, deviceClassName: vgpu.dra.dev, capacity: {requests: {memory: 16Gi}}},
			        {name: small, deviceClassName: vgpu.dra.dev, capacity: {requests: {memory: 4Gi}}}]}],
			        config: [{requests: [gpu/small], opaque: {driver: vgpu.dra.dev, parameters: {` + opaqueHeader + `, memoryLimit: 8Gi}}}]}}`,
		},
		{
			name: "burst policy from a claim",
			spec: `{devices: {requests: [{name: gpu, exactly: {deviceClassName: vgpu.dra.dev, capacity: {requests: {memory: 4Gi}}}}],
			        config: [{opaque: {driver: vgpu.dra.dev, parameters: {` + opaqueHeader + `, burst: allowed, reclaimGracePeriodSeconds: 600}}}]}}`,
			wantDeny: []string{"spec.devices.config[0].opaque.parameters.burst: Forbidden", "spec.devices.config[0].opaque.parameters.reclaimGracePeriodSeconds: Forbidden"},
		},
		{
			name: "time-sliced cores 0 is best effort",
			spec: `{devices: {requests: [{name: gpu, exactly: {deviceClassName: vgpu.dra.dev, capacity: {requests: {cores: "0"}}}}]}}`,
		},
		{
			name: "MPS slice",
			spec: `{devices: {requests: [{name: gpu, exactly: {deviceClassName: mps.vgpu.dra.dev, capacity: {requests: {memory: 8Gi, cores: "30"}}}}]}}`,
		},
		{
			name: "MPS slice without cores gets all SMs",
			spec: `{devices: {requests: [{name: gpu, exactly: {deviceClassName: mps.vgpu.dra.dev, capacity: {requests: {memory: 8Gi}}}}]}}`,
		},
		{
			name:     "MPS cores 0",
			spec:     `{devices: {requests: [{name: gpu, exactly: {deviceClassName: mps.vgpu.dra.dev, capacity: {requests: {memory: 8Gi, cores: "0"}}}}]}}`,
			wantDeny: []string{`spec.devices.requests[0].exactly.capacity.requests[cores]: Invalid value: "0"`, `DeviceClass "mps.vgpu.dra.dev" is MPS`, "between 1 and 100"},
		},
		{
			name:     "MPS cores above 100",
			spec:     `{devices: {requests: [{name: gpu, exactly: {deviceClassName: mps.vgpu.dra.dev, capacity: {requests: {cores: "101"}}}}]}}`,
			wantDeny: []string{`spec.devices.requests[0].exactly.capacity.requests[cores]: Invalid value: "101"`, "between 1 and 100"},
		},
		{
			name:     "MPS cores 0 in a template",
			template: true,
			spec:     `{devices: {requests: [{name: gpu, exactly: {deviceClassName: mps.vgpu.dra.dev, capacity: {requests: {cores: "0"}}}}]}}`,
			wantDeny: []string{"ResourceClaimTemplate", `spec.spec.devices.requests[0].exactly.capacity.requests[cores]`, "between 1 and 100"},
		},
		{
			name: "MPS cores 0 in a firstAvailable subrequest",
			spec: `{devices: {requests: [{name: gpu, firstAvailable: [
			        {name: ts, deviceClassName: vgpu.dra.dev, capacity: {requests: {cores: "0"}}},
			        {name: mps, deviceClassName: mps.vgpu.dra.dev, capacity: {requests: {cores: "0"}}}]}]}}`,
			wantDeny: []string{`spec.devices.requests[0].firstAvailable[1].capacity.requests[cores]`, "is MPS"},
		},
		{
			name: "MPS with a strict claim config",
			spec: `{devices: {requests: [{name: gpu, exactly: {deviceClassName: mps.vgpu.dra.dev}}],
			        config: [{opaque: {driver: vgpu.dra.dev, parameters: {` + opaqueHeader + `, computePolicy: strict}}}]}}`,
		},
		{
			name: "MPS with a work-conserving claim config",
			spec: `{devices: {requests: [{name: gpu, exactly: {deviceClassName: mps.vgpu.dra.dev}}],
			        config: [{opaque: {driver: vgpu.dra.dev, parameters: {` + opaqueHeader + `, computePolicy: workConserving}}}]}}`,
			wantDeny: []string{`spec.devices.config[0].opaque.parameters.computePolicy: Invalid value: "workConserving"`, `request "gpu" of the MPS DeviceClass`, "use strict"},
		},
		{
			name:     "MPS with compute policy disabled in a template",
			template: true,
			spec: `{devices: {requests: [{name: gpu, firstAvailable: [{name: mps, deviceClassName: mps.vgpu.dra.dev}]}],
			        config: [{requests: [gpu], opaque: {driver: vgpu.dra.dev, parameters: {` + opaqueHeader + `, computePolicy: disabled}}}]}}`,
			wantDeny: []string{`spec.spec.devices.config[0].opaque.parameters.computePolicy: Invalid value: "disabled"`, `request "gpu/mps"`},
		},
		{
			name: "work-conserving config for the time-sliced request of a claim with MPS",
			spec: `{devices: {requests: [{name: ts, exactly: {deviceClassName: vgpu.dra.dev}}, {name: mps, exactly: {deviceClassName: mps.vgpu.dra.dev}}],
			        constraints: [{distinctAttribute: vgpu.dra.dev/uuid}],
			        config: [{requests: [ts], opaque: {driver: vgpu.dra.dev, parameters: {` + opaqueHeader + `, computePolicy: workConserving}}}]}}`,
		},
		{
			name: "MPS with a memoryLimit",
			spec: `{devices: {requests: [{name: gpu, exactly: {deviceClassName: mps.vgpu.dra.dev, capacity: {requests: {memory: 4Gi}}}}],
			        config: [{opaque: {driver: vgpu.dra.dev, parameters: {` + opaqueHeader + `, memoryLimit: 8Gi}}}]}}`,
			wantDeny: []string{"spec.devices.config[0].opaque.parameters.memoryLimit: Forbidden", "MPS claims do not burst"},
		},
		{
			name: "MPS and time-sliced matched to one GPU",
			spec: `{devices: {requests: [{name: ts, exactly: {deviceClassName: vgpu.dra.dev}}, {name: mps, exactly: {deviceClassName: mps.vgpu.dra.dev}}],
			        constraints: [{requests: [ts, mps], matchAttribute: vgpu.dra.dev/uuid}]}}`,
			wantDeny: []string{`spec.devices.constraints[0].matchAttribute: Invalid value: "vgpu.dra.dev/uuid"`, `MPS request "mps" on the same GPU as the requests ["ts"]`},
		},
		{
			name:     "MPS and MIG matched to one GPU in a template",
			template: true,
			spec: `{devices: {requests: [{name: mig, exactly: {deviceClassName: mig.vgpu.dra.dev}}, {name: mps, exactly: {deviceClassName: mps.vgpu.dra.dev}}],
			        constraints: [{matchAttribute: vgpu.dra.dev/index}]}}`,
			wantDeny: []string{`spec.spec.devices.constraints[0].matchAttribute`, `MPS request "mps" on the same GPU as the requests ["mig"]`},
		},
		{
			name: "two MPS requests matched to one GPU",
			spec: `{devices: {requests: [{name: a, exactly: {deviceClassName: mps.vgpu.dra.dev}}, {name: b, exactly: {deviceClassName: mps.vgpu.dra.dev}}],
			        constraints: [{distinctAttribute: vgpu.dra.dev/productName}, {requests: [a, b], matchAttribute: vgpu.dra.dev/pcieBusID}]}}`,
			wantDeny: []string{`spec.devices.constraints[1].matchAttribute`, `MPS request "a"`, `["b"]`},
		},
		{
			name:     "two MPS devices in one request",
			spec:     `{devices: {requests: [{name: gpu, exactly: {deviceClassName: mps.vgpu.dra.dev, count: 2}}]}}`,
			wantDeny: []string{`spec.devices.requests[0].exactly.count: Invalid value: 2`, "an MPS request asks for one device"},
		},
		{
			name:     "every MPS device in a template",
			template: true,
			spec:     `{devices: {requests: [{name: gpu, firstAvailable: [{name: mps, deviceClassName: mps.vgpu.dra.dev, allocationMode: All}]}]}}`,
			wantDeny: []string{`spec.spec.devices.requests[0].firstAvailable[0].allocationMode: Invalid value: "All"`},
		},
		{
			name:     "two MPS requests",
			spec:     `{devices: {requests: [{name: a, exactly: {deviceClassName: mps.vgpu.dra.dev}}, {name: b, exactly: {deviceClassName: mps.vgpu.dra.dev}}]}}`,
			wantDeny: []string{`spec.devices.requests[1].name: Invalid value: "b"`, `a second MPS request next to "a"`, "one claim per MPS GPU"},
		},
		{
			name: "an MPS request next to one that may be time-sliced",
			spec: `{devices: {requests: [{name: a, exactly: {deviceClassName: mps.vgpu.dra.dev}}, {name: b, firstAvailable: [
			        {name: mps, deviceClassName: mps.vgpu.dra.dev}, {name: ts, deviceClassName: vgpu.dra.dev}]}]}}`,
			wantWarn: []string{`may be allocated on the same GPU`},
		},
		{
			name: "MPS and time-sliced of one product",
			spec: `{devices: {requests: [{name: ts, exactly: {deviceClassName: vgpu.dra.dev}}, {name: mps, exactly: {deviceClassName: mps.vgpu.dra.dev}}],
			        constraints: [{requests: [ts, mps], matchAttribute: vgpu.dra.dev/productName}]}}`,
			wantWarn: []string{`requests ["ts" "mps"] may be allocated on the same GPU`},
		},
		{
			name: "MPS alternative next to a time-sliced one matched to one GPU",
			spec: `{devices: {requests: [{name: ts, exactly: {deviceClassName: vgpu.dra.dev}}, {name: either, firstAvailable: [
			        {name: mps, deviceClassName: mps.vgpu.dra.dev}, {name: ts, deviceClassName: vgpu.dra.dev}]}],
			        constraints: [{matchAttribute: vgpu.dra.dev/uuid}]}}`,
			wantWarn: []string{`may be allocated on the same GPU`},
		},
		{
			name:     "several errors are all reported",
			spec:     `{devices: {requests: [{name: gpu, exactly: {deviceClassName: vgpu.dra.dev, count: 3, capacity: {requests: {memory: -1, cores: "300"}}}}]}}`,
			wantDeny: []string{"capacity.requests[memory]", "capacity.requests[cores]", "exactly.count"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q := &fakeQuota{maxMemory: 10 * gi}
			srv := serve(t, testValidator(q).Admit)
			ns := tc.namespace
			if ns == "" {
				ns = "team"
			}
			op := tc.op
			if op == "" {
				op = admissionv1.Create
			}
			spec := claimSpec(t, tc.spec)
			var body []byte
			if tc.template {
				body = reviewBody(t, templateKind, op, ns, resourceapi.ResourceClaimTemplate{
					ObjectMeta: metav1.ObjectMeta{Name: "obj", Namespace: ns}, Spec: resourceapi.ResourceClaimTemplateSpec{Spec: spec}}, false)
			} else {
				body = reviewBody(t, claimKind, op, ns, resourceapi.ResourceClaim{
					ObjectMeta: metav1.ObjectMeta{Name: "obj", Namespace: ns, UID: "claim-uid"}, Spec: spec}, false)
			}
			resp := post(t, srv, body)
			if len(tc.wantDeny) > 0 {
				require.False(t, resp.Allowed, "must be denied")
				require.NotNil(t, resp.Result)
				for _, s := range tc.wantDeny {
					assert.Contains(t, resp.Result.Message, s)
				}
				return
			}
			require.True(t, resp.Allowed, "denied: %v", resp.Result)
			if len(tc.wantWarn) == 0 {
				assert.Empty(t, resp.Warnings)
			}
			for _, s := range tc.wantWarn {
				assert.Contains(t, strings.Join(resp.Warnings, "\n"), s)
			}
		})
	}
}

func TestClaimValidationQuotaCalls(t *testing.T) {
	q := &fakeQuota{maxMemory: 10 * gi}
	srv := serve(t, testValidator(q).Admit)
	claim := resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Spec: claimSpec(t, `{devices: {requests: [{name: gpu, exactly: {deviceClassName: vgpu.dra.dev, capacity: {requests: {memory: 1Gi}}}}]}}`)}
	assert.True(t, post(t, srv, reviewBody(t, claimKind, admissionv1.Create, "team", claim, true)).Allowed)
	assert.True(t, post(t, srv, reviewBody(t, claimKind, admissionv1.Create, "team", claim, false)).Allowed)
	assert.Equal(t, []bool{true, false}, q.dryRuns, "the dry-run flag reaches the quota")

	bad := claim
	bad.Spec = claimSpec(t, `{devices: {requests: [{name: gpu, exactly: {deviceClassName: vgpu.dra.dev, capacity: {requests: {cores: "101"}}}}]}}`)
	assert.False(t, post(t, srv, reviewBody(t, claimKind, admissionv1.Create, "team", bad, false)).Allowed)
	assert.Len(t, q.dryRuns, 2, "an invalid claim is not charged")
}

func TestClaimValidationBadObjects(t *testing.T) {
	srv := serve(t, testValidator(nil).Admit)
	resp := post(t, srv, reviewBody(t, claimKind, admissionv1.Create, "team", map[string]any{"spec": "not an object"}, false))
	assert.False(t, resp.Allowed)
	assert.Contains(t, resp.Result.Message, "decode ResourceClaim")
	assert.EqualValues(t, 400, resp.Result.Code)

	resp = post(t, srv, reviewBody(t, metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, admissionv1.Create, "team", map[string]any{}, false))
	assert.False(t, resp.Allowed)
	assert.Contains(t, resp.Result.Message, "check the webhook configuration")

	raw, err := json.Marshal(map[string]any{"spec": map[string]any{"spec": 7}})
	require.NoError(t, err)
	resp = post(t, srv, reviewBody(t, templateKind, admissionv1.Create, "team", json.RawMessage(raw), false))
	assert.False(t, resp.Allowed)
	assert.Contains(t, resp.Result.Message, "decode ResourceClaimTemplate")
}

func TestClassMatcherRecognisesAdminClasses(t *testing.T) {
	m := &ClassMatcher{DriverName: "vgpu.dra.dev", Names: sets.New("vgpu.dra.dev")}
	assert.True(t, m.IsOurs("vgpu.dra.dev"))
	assert.False(t, m.IsOurs("custom"), "without a lister only names match")

	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, c := range []*resourceapi.DeviceClass{
		{ObjectMeta: metav1.ObjectMeta{Name: "by-selector"}, Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{
			{CEL: &resourceapi.CELDeviceSelector{Expression: `device.driver == "vgpu.dra.dev" && device.attributes["vgpu.dra.dev"].productName == "X"`}}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "by-config"}, Spec: resourceapi.DeviceClassSpec{Config: []resourceapi.DeviceClassConfiguration{
			{DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{Driver: "vgpu.dra.dev"}}}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "nic"}, Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{
			{CEL: &resourceapi.CELDeviceSelector{Expression: `device.driver == "nic.example.com"`}}}}},
	} {
		require.NoError(t, indexer.Add(c))
	}
	m.Classes = resourcelisters.NewDeviceClassLister(indexer)
	assert.True(t, m.IsOurs("by-selector"))
	assert.True(t, m.IsOurs("by-config"))
	assert.False(t, m.IsOurs("nic"))
	assert.False(t, m.IsOurs("missing"))
}

// An admin's class that selects MPS devices is an MPS class; the classes
// that exclude them or only read other attributes are not.
func TestClassMatcherRecognisesMPSClasses(t *testing.T) {
	shipped := func(file, name string) *resourceapi.DeviceClass {
		raw, err := os.ReadFile(filepath.Join("..", "..", "..", "deviceclasses", file))
		require.NoError(t, err)
		var class resourceapi.DeviceClass
		require.NoError(t, yaml.UnmarshalStrict(raw, &class))
		class.Name = name
		return &class
	}
	selecting := func(name, expr string) *resourceapi.DeviceClass {
		return &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: resourceapi.DeviceClassSpec{
			Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: expr}}}}}
	}
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, c := range []*resourceapi.DeviceClass{
		shipped("mps.vgpu.dra.dev.yaml", "team-mps"),
		shipped("vgpu.dra.dev.yaml", "team-sliced"),
		shipped("mig.vgpu.dra.dev.yaml", "team-mig"),
		selecting("by-value", `device.driver == "vgpu.dra.dev" && device.attributes["vgpu.dra.dev"].mps`),
		selecting("by-product", `device.driver == "vgpu.dra.dev" && device.attributes["vgpu.dra.dev"].productName == "T4"`),
	} {
		require.NoError(t, indexer.Add(c))
	}
	m := &ClassMatcher{DriverName: "vgpu.dra.dev", Names: sets.New("vgpu.dra.dev"), Classes: resourcelisters.NewDeviceClassLister(indexer)}
	assert.True(t, m.IsMPS("mps.vgpu.dra.dev"), "the class by its name")
	assert.True(t, m.IsOurs("mps.vgpu.dra.dev"))
	assert.True(t, m.IsMPS("team-mps"))
	assert.True(t, m.IsOurs("team-mps"))
	assert.True(t, m.IsMPS("by-value"))
	assert.False(t, m.IsMPS("team-sliced"))
	assert.False(t, m.IsMPS("team-mig"))
	assert.False(t, m.IsMPS("by-product"))
	assert.False(t, m.IsMPS("vgpu.dra.dev"))
	assert.False(t, m.IsMPS("missing"))
}

// Whether a class is this driver's does not depend on how its selector is
// spelled: every equivalent expression is recognised, and expressions that
// do not restrict devices to this driver are not.
func TestClassMatcherIgnoresSpelling(t *testing.T) {
	ours := []string{
		`device.driver == "vgpu.dra.dev"`,
		`device.driver == 'vgpu.dra.dev'`,
		`device.driver=='vgpu.dra.dev'`,
		`'vgpu.dra.dev' == device.driver`,
		`device.driver in ["vgpu.dra.dev", "other.example.com"]`,
		`device.driver.startsWith("vgpu.dra.") && device.driver.endsWith(".dev")`,
		`(device.driver == "vgpu.dra.dev")
		  && device.attributes["vgpu.dra.dev"].productName.lowerAscii().contains("a100")`,
		`device.attributes["vgpu.dra.dev"].productName == "T4" && device.driver == "vgpu.dra.dev"`,
		`!(device.driver != "vgpu.dra.dev")`,
		`device.driver == "vgpu" + ".dra.dev"`,
	}
	notOurs := []string{
		`device.driver == "nic.example.com"`,
		`device.driver != "vgpu.dra.dev"`,
		`true`,
		`device.driver != "nic.example.com"`,
		`device.driver == "vgpu.dra.dev.evil.example.com"`,
	}
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	add := func(name, expr string) {
		require.NoError(t, indexer.Add(&resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: resourceapi.DeviceClassSpec{
			Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: expr}}}}}))
	}
	for i, expr := range ours {
		add(fmt.Sprintf("ours-%d", i), expr)
	}
	for i, expr := range notOurs {
		add(fmt.Sprintf("not-ours-%d", i), expr)
	}
	// Two selectors: one restricts the driver, one a product.
	require.NoError(t, indexer.Add(&resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "two-selectors"}, Spec: resourceapi.DeviceClassSpec{
		Selectors: []resourceapi.DeviceSelector{
			{CEL: &resourceapi.CELDeviceSelector{Expression: `device.attributes["vgpu.dra.dev"].productName == "T4"`}},
			{CEL: &resourceapi.CELDeviceSelector{Expression: `device.driver=="vgpu.dra.dev"`}},
		}}}))
	require.NoError(t, indexer.Add(&resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "no-selectors"}}))
	m := &ClassMatcher{DriverName: "vgpu.dra.dev", Names: sets.New[string](), Classes: resourcelisters.NewDeviceClassLister(indexer)}
	for i, expr := range ours {
		assert.True(t, m.IsOurs(fmt.Sprintf("ours-%d", i)), "%s", expr)
	}
	for i, expr := range notOurs {
		assert.False(t, m.IsOurs(fmt.Sprintf("not-ours-%d", i)), "%s", expr)
	}
	assert.True(t, m.IsOurs("two-selectors"))
	assert.False(t, m.IsOurs("no-selectors"), "a class without selectors is every driver's; name it to make it ours")
}

// A claim may not set memoryLimit on a request whose DeviceClass says
// burst: never; the webhook reads the class's configs.
func TestClaimValidationBurstNever(t *testing.T) {
	classes := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	opaque := func(params string) resourceapi.DeviceClassConfiguration {
		return resourceapi.DeviceClassConfiguration{DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{
			Driver: "vgpu.dra.dev", Parameters: runtime.RawExtension{Raw: []byte(`{"apiVersion":"vgpu.dra.dev/v1alpha1","kind":"VGPUConfig"` + params + `}`)}}}}
	}
	for _, c := range []*resourceapi.DeviceClass{
		{ObjectMeta: metav1.ObjectMeta{Name: "no-burst"}, Spec: resourceapi.DeviceClassSpec{Config: []resourceapi.DeviceClassConfiguration{opaque(`,"burst":"never"`)}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "burst-again"}, Spec: resourceapi.DeviceClassSpec{Config: []resourceapi.DeviceClassConfiguration{
			opaque(`,"burst":"never"`), opaque(`,"burst":"allowed"`)}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "bursty"}, Spec: resourceapi.DeviceClassSpec{Config: []resourceapi.DeviceClassConfiguration{opaque(`,"priority":"high"`)}}},
	} {
		require.NoError(t, classes.Add(c))
	}
	v := testValidator(nil)
	v.Classes.Classes = resourcelisters.NewDeviceClassLister(classes)
	srv := serve(t, v.Admit)
	for _, tc := range []struct {
		class    string
		wantDeny string
	}{
		{class: "no-burst", wantDeny: `spec.devices.config[0].opaque.parameters.memoryLimit: Forbidden: request "gpu" uses DeviceClass "no-burst", which sets burst: never`},
		{class: "burst-again"},
		{class: "bursty"},
	} {
		claim := resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", UID: "u"}, Spec: claimSpec(t,
			`{devices: {requests: [{name: gpu, exactly: {deviceClassName: `+tc.class+`, capacity: {requests: {memory: 4Gi}}}}],
			  config: [{opaque: {driver: vgpu.dra.dev, parameters: {`+opaqueHeader+`, memoryLimit: 8Gi}}}]}}`)}
		resp := post(t, srv, reviewBody(t, claimKind, admissionv1.Create, "team", claim, false))
		if tc.wantDeny == "" {
			assert.True(t, resp.Allowed, "%s: %v", tc.class, resp.Result)
			continue
		}
		require.False(t, resp.Allowed, tc.class)
		assert.Contains(t, resp.Result.Message, tc.wantDeny)

		// Without a memoryLimit the class is fine.
		claim.Spec.Devices.Config = nil
		assert.True(t, post(t, srv, reviewBody(t, claimKind, admissionv1.Create, "team", claim, false)).Allowed, tc.class)
	}
}

// Before any GPU is published, a memoryLimit is held only to the typo
// bound every memory request is.
func TestClaimValidationMemoryLimitWithoutGPUs(t *testing.T) {
	v := testValidator(nil)
	v.LargestGPUMemory = func() int64 { return 0 }
	srv := serve(t, v.Admit)
	for limit, wantDeny := range map[string]string{"96Gi": "", "2Ti": "more than any GPU has (limit 1Ti)"} {
		claim := resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", UID: "u"}, Spec: claimSpec(t,
			`{devices: {requests: [{name: gpu, exactly: {deviceClassName: vgpu.dra.dev, capacity: {requests: {memory: 4Gi}}}}],
			  config: [{opaque: {driver: vgpu.dra.dev, parameters: {`+opaqueHeader+`, memoryLimit: `+limit+`}}}]}}`)}
		resp := post(t, srv, reviewBody(t, claimKind, admissionv1.Create, "team", claim, false))
		if wantDeny == "" {
			assert.True(t, resp.Allowed, "%s: %v", limit, resp.Result)
			continue
		}
		require.False(t, resp.Allowed, limit)
		assert.Contains(t, resp.Result.Message, "spec.devices.config[0].opaque.parameters.memoryLimit")
		assert.Contains(t, resp.Result.Message, wantDeny)
	}
}

// Admission warns when the published policy rounds a request up by more
// than 10%, with the amount the limit and the quota will be; the sizes
// come from the structured allocator over a published GPU.
func TestClaimValidationWarnsAboutRounding(t *testing.T) {
	slices := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	require.NoError(t, slices.Add(&resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "node-a"},
		Spec: resourceapi.ResourceSliceSpec{
			Driver: "vgpu.dra.dev", NodeName: new("node-a"),
			Pool: resourceapi.ResourcePool{Name: "node-a", Generation: 1, ResourceSliceCount: 1},
			Devices: []resourceapi.Device{devices.Device(discovery.Info{
				UUID: "GPU-00000000-0000-0000-0000-000000000000", ProductName: "Tesla T4", MemoryBytes: uint64(16 * gi), NUMANode: -1,
			}, devices.Options{})},
		},
	}))
	classes := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	require.NoError(t, classes.Add(&resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "vgpu.dra.dev"}, Spec: resourceapi.DeviceClassSpec{
		Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: `device.driver == "vgpu.dra.dev"`}}},
	}}))
	v := testValidator(nil)
	v.Grants = quota.NewSizer("vgpu.dra.dev", allocator.ClassLister(resourcelisters.NewDeviceClassLister(classes)), resourcelisters.NewResourceSliceLister(slices))
	srv := serve(t, v.Admit)

	for _, tc := range []struct {
		memory string
		warn   string
	}{
		{memory: "1", warn: `request "gpu" asks for 1 of GPU memory, which the GPUs' published minimum and step round up to 256Mi`},
		{memory: "1m", warn: "round up to 256Mi"},
		{memory: "200Mi", warn: "round up to 256Mi"},
		{memory: "240Mi"}, // within 10%
		{memory: "4Gi"},
		{memory: "1000000001", warn: ""}, // rounded to the next MiB: far below 10%
	} {
		claim := resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", UID: "u"}, Spec: claimSpec(t,
			`{devices: {requests: [{name: gpu, exactly: {deviceClassName: vgpu.dra.dev, capacity: {requests: {memory: "`+tc.memory+`", cores: "5"}}}}]}}`)}
		resp := post(t, srv, reviewBody(t, claimKind, admissionv1.Create, "team", claim, false))
		require.True(t, resp.Allowed, tc.memory)
		if tc.warn == "" {
			assert.Empty(t, resp.Warnings, tc.memory)
			continue
		}
		require.Len(t, resp.Warnings, 1, tc.memory)
		assert.Contains(t, resp.Warnings[0], tc.warn)
		assert.Contains(t, resp.Warnings[0], "quota")
	}
}
