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

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/cluster/webview"
)

// run executes the plugin with args against a fake API server holding one
// 16Gi GPU on node-a and a 4Gi claim on it in namespace team-a.
func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	mem := resource.MustParse("16Gi")
	share := ptr.To(k8stypes.UID("share-1"))
	client := fake.NewClientset(
		&resourceapi.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: "node-a-vgpu"},
			Spec: resourceapi.ResourceSliceSpec{Driver: "vgpu.dra.dev", NodeName: ptr.To("node-a"),
				Pool: resourceapi.ResourcePool{Name: "node-a", Generation: 1, ResourceSliceCount: 1},
				Devices: []resourceapi.Device{{Name: "gpu-0", AllowMultipleAllocations: ptr.To(true),
					Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"memory": {Value: mem}, "cores": {Value: resource.MustParse("100")}}}}},
		},
		&resourceapi.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "small"},
			Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
				Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "vgpu.dra.dev"}}}}},
			Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
				Results: []resourceapi.DeviceRequestAllocationResult{{Request: "gpu", Driver: "vgpu.dra.dev", Pool: "node-a", Device: "gpu-0", ShareID: share,
					ConsumedCapacity: map[resourceapi.QualifiedName]resource.Quantity{"memory": resource.MustParse("4Gi"), "cores": resource.MustParse("30")}}}}}},
		},
	)
	return runOn(t, client, args...)
}

// runOn executes the plugin with args against client.
func runOn(t *testing.T, client kubernetes.Interface, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := newRootCommand(genericiooptions.IOStreams{Out: &out, ErrOut: &errOut}, func() (kubernetes.Interface, error) { return client, nil })
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(t.Context())
	return out.String() + errOut.String(), err
}

func TestNodesTable(t *testing.T) {
	out, err := run(t, "nodes")
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 2, out)
	assert.Regexp(t, `^node-a\s+gpu-0\s+time-sliced\s+-\s+16Gi\s+4Gi \(25%\)\s+-\s+100\s+30 \(30%\)\s+1\s+Healthy\s+<none>$`, lines[1])
}

// A GPU published with its MPS device (plugin --mps) is one row whose
// MODE says which device holds its claims; the MPS claims are listed on
// the MPS device.
func TestNodesAndClaimsWithMPS(t *testing.T) {
	mem := resource.MustParse("16Gi")
	counters := []resourceapi.DeviceCounterConsumption{{CounterSet: "gpu-0-slices", Counters: map[string]resourceapi.Counter{"sharing-mode": {Value: resource.MustParse("1")}}}}
	gpu := resourceapi.Device{Name: "gpu-0", AllowMultipleAllocations: ptr.To(true), ConsumesCounters: counters,
		Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"uuid": {StringValue: ptr.To("GPU-0")}, "index": {IntValue: ptr.To(int64(0))}},
		Capacity:   map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"memory": {Value: mem}, "cores": {Value: resource.MustParse("100")}}}
	mps := *gpu.DeepCopy()
	mps.Name = "gpu-0-mps"
	mps.Attributes["mps"] = resourceapi.DeviceAttribute{BoolValue: ptr.To(true)}
	claim := func(name, memory, cores string) *resourceapi.ResourceClaim {
		return &resourceapi.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name},
			Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
				Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "mps.vgpu.dra.dev"}}}}},
			Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
				Results: []resourceapi.DeviceRequestAllocationResult{{Request: "gpu", Driver: "vgpu.dra.dev", Pool: "node-a", Device: "gpu-0-mps", ShareID: ptr.To(k8stypes.UID("share-" + name)),
					ConsumedCapacity: map[resourceapi.QualifiedName]resource.Quantity{"memory": resource.MustParse(memory), "cores": resource.MustParse(cores)}}}}}},
		}
	}
	client := fake.NewClientset(
		&resourceapi.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: "node-a-vgpu"},
			Spec: resourceapi.ResourceSliceSpec{Driver: "vgpu.dra.dev", NodeName: ptr.To("node-a"),
				Pool:           resourceapi.ResourcePool{Name: "node-a", Generation: 1, ResourceSliceCount: 1},
				SharedCounters: []resourceapi.CounterSet{{Name: "gpu-0-slices", Counters: map[string]resourceapi.Counter{"sharing-mode": {Value: resource.MustParse("1")}}}},
				Devices:        []resourceapi.Device{gpu, mps}},
		},
		claim("a", "4Gi", "30"), claim("b", "2Gi", "70"),
	)
	out, err := runOn(t, client, "nodes")
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 2, out)
	assert.Regexp(t, `^node-a\s+gpu-0\s+mps\s+-\s+16Gi\s+6Gi \(37%\)\s+-\s+100\s+100 \(100%\)\s+2\s+Healthy\s+<none>$`, lines[1])

	out, err = runOn(t, client, "nodes", "-o", "json")
	require.NoError(t, err)
	var nodes struct {
		Items []struct {
			GPU  string `json:"gpu"`
			Mode string `json:"mode"`
		} `json:"items"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &nodes), out)
	require.Len(t, nodes.Items, 1)
	assert.Equal(t, "mps", nodes.Items[0].Mode)

	out, err = runOn(t, client, "claims", "-n", "team-a")
	require.NoError(t, err)
	lines = strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3, out)
	assert.Regexp(t, `^a\s+<none>\s+Allocated\s+node-a\s+gpu-0-mps\s+4Gi\s+4Gi\s+-\s+30\s`, lines[1])
	assert.Regexp(t, `^b\s+<none>\s+Allocated\s+node-a\s+gpu-0-mps\s+2Gi\s+2Gi\s+-\s+70\s`, lines[2])
}

func TestClaimsJSONAndYAML(t *testing.T) {
	for _, format := range []string{"json", "yaml"} {
		out, err := run(t, "claims", "-n", "team-a", "-o", format)
		require.NoError(t, err)
		var got struct {
			Kind  string `json:"kind"`
			Items []struct {
				Claim         string `json:"claim"`
				MemoryGranted int64  `json:"memoryGranted"`
			} `json:"items"`
		}
		if format == "json" {
			require.NoError(t, json.Unmarshal([]byte(out), &got), out)
		} else {
			require.NoError(t, yaml.Unmarshal([]byte(out), &got), out)
		}
		assert.Equal(t, "VGPUClaimList", got.Kind)
		require.Len(t, got.Items, 1)
		assert.Equal(t, "small", got.Items[0].Claim)
		assert.Equal(t, int64(4)<<30, got.Items[0].MemoryGranted)
	}
	out, err := run(t, "claims", "-n", "team-b")
	require.NoError(t, err)
	assert.Equal(t, "No vGPU claims found in team-b namespace.\n", out)
}

func TestBadInput(t *testing.T) {
	_, err := run(t, "nodes", "-o", "table")
	require.EqualError(t, err, `--output "table": must be wide, json or yaml`)
	_, err = run(t, "why")
	require.ErrorContains(t, err, "accepts 1 arg(s), received 0")
	_, err = run(t, "why", "-n", "team-a", "ghost")
	require.EqualError(t, err, "pod team-a/ghost not found")
	_, err = run(t, "ui", "--port", "70000")
	require.EqualError(t, err, "--port 70000: must be 0 (any free port) to 65535")
	_, err = run(t, "ui", "--explain", "0")
	require.EqualError(t, err, "--explain 0: must be at least 1")
}

// ui sets a soft memory limit unless the user set GOMEMLIMIT.
func TestSoftMemoryLimit(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	assert.Equal(t, int64(uiMemoryLimit), softMemoryLimit(uiMemoryLimit))
	assert.Equal(t, int64(uiMemoryLimit), debug.SetMemoryLimit(-1))

	debug.SetMemoryLimit(before)
	t.Setenv("GOMEMLIMIT", "1GiB")
	assert.Equal(t, before, softMemoryLimit(uiMemoryLimit))
	assert.Equal(t, before, debug.SetMemoryLimit(-1), "the user's limit stays")
}

// gcPercent reads the runtime's GOGC without changing it.
func gcPercent() int {
	p := debug.SetGCPercent(-1)
	debug.SetGCPercent(p)
	return p
}

// ui collects garbage only at the memory limit until the cluster is
// listed, then paces the collector as before; a GOGC of the user's stays.
func TestGCPacingOffUntilListed(t *testing.T) {
	before := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(before) })
	source := webview.NewSource(fake.NewClientset(), webview.SourceOptions{})
	restore := gcPacingOff()
	assert.Equal(t, -1, gcPercent(), "off while listing")
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- source.Run(ctx) }()
	waitListed(ctx, source)
	require.NoError(t, ctx.Err(), "waitListed returned before ctx ended: the cluster is listed")
	m, _, _ := source.Current()
	require.NotNil(t, m)
	assert.False(t, m.Listing)
	restore()
	assert.Equal(t, 100, gcPercent())
	cancel()
	require.NoError(t, <-done)

	t.Setenv("GOGC", "50")
	gcPacingOff()
	assert.Equal(t, 100, gcPercent(), "the user's GOGC stays")
}

// --debug-pprof serves Go's profiles beside the page, which keeps every
// other path.
func TestWithProfiles(t *testing.T) {
	h := withProfiles(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "page "+r.URL.Path)
	}))
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://127.0.0.1"+path, nil))
		return rec.Code, rec.Body.String()
	}
	code, body := get("/debug/pprof/")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "heap")
	code, _ = get("/debug/pprof/heap")
	assert.Equal(t, http.StatusOK, code)
	_, body = get("/fragment")
	assert.Equal(t, "page /fragment", body)
}
