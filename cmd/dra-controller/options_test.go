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
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/common/flags"
)

func TestValidate(t *testing.T) {
	valid := func() *options {
		o := newOptions()
		o.podNamespace = "vgpu-system"
		return o
	}
	require.NoError(t, valid().validate(), "defaults plus the namespace are valid")

	tests := []struct {
		name    string
		mutate  func(*options)
		wantErr string
	}{
		{"namespace missing", func(o *options) { o.podNamespace = "" }, "--pod-namespace (or $POD_NAMESPACE) is required"},
		{"empty cert", func(o *options) { o.tlsCertFile = "" }, "--tls-cert-file: must not be empty"},
		{"empty resource name", func(o *options) { o.hamiMemory = "" }, "--hami-resource-memory: must not be empty"},
		{"zero interval", func(o *options) { o.tlsReloadInterval = 0 }, "--tls-reload-interval: must be positive"},
		{"touch too close to grace", func(o *options) { o.templateTouch = 6 * time.Minute }, "--hami-template-touch-interval (6m0s) must be at most half"},
		{"renew not below lease", func(o *options) { o.renewDeadline = o.leaseDuration }, "--leader-elect-renew-deadline"},
		{"no classes", func(o *options) { o.deviceClasses = nil }, "--device-classes"},
		{"bad allocation mode", func(o *options) { o.policyAllocation = "on" }, `--policy-allocation: "on" is not a policy allocation mode`},
		{"bad node policy", func(o *options) { o.defaultNodePolicy = "pack" }, `--default-node-policy: "pack" is not a placement policy`},
		{"bad GPU policy", func(o *options) { o.defaultGPUPolicy = "" }, `--default-gpu-policy: "" is not a placement policy`},
		{"zero fallback delay", func(o *options) { o.fallbackAfter = 0 }, "--policy-fallback-delay: must be positive"},
		{"zero memory cap", func(o *options) { o.maxMemory = resource.MustParse("0") }, "--max-memory-per-device: must be positive"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := valid()
			tc.mutate(o)
			err := o.validate()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.wantErr)
		})
	}
}

func TestDefaultAPIRateKeepsUpWithTheScheduler(t *testing.T) {
	// Three writes and an event per policy-allocated pod: at 20 QPS the
	// allocator managed 4 pods/s in the scale benchmark, a fifth of what
	// kube-scheduler binds.
	o := newOptions()
	assert.GreaterOrEqual(t, o.kube.QPS, float32(100))
	assert.GreaterOrEqual(t, o.kube.Burst, 2*int(o.kube.QPS))
}

func TestHelpDocumentsEveryFlagWithItsVariable(t *testing.T) {
	cmd := newCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--help"})
	require.NoError(t, cmd.Execute())
	help := out.String()
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Name == "help" || f.Name == "version" {
			return // added by cobra, documented by it
		}
		assert.Contains(t, help, "--"+f.Name, "flag missing from --help")
		assert.NotEmpty(t, strings.TrimSpace(f.Usage), "flag %s has no usage", f.Name)
	})
	for _, env := range []string{"$POD_NAMESPACE", "$POD_NAME", "$KUBECONFIG", "$VGPU_DRA_WEBHOOK_ADDRESS", "$VGPU_DRA_HAMI_COMPAT_ALL_NAMESPACES", "$VGPU_DRA_ADMIN_NAMESPACES"} {
		assert.Contains(t, help, env)
	}
}

func TestEnvironmentSetsFlags(t *testing.T) {
	cmd := newCommand()
	t.Setenv("VGPU_DRA_HAMI_RESOURCE_MEMORY", "example.com/vgpu-memory")
	t.Setenv("VGPU_DRA_ADMIN_NAMESPACES", "ops,gpu-admin")
	t.Setenv("POD_NAMESPACE", "vgpu-system")
	require.NoError(t, cmd.Flags().Parse([]string{"--admin-namespaces=cli-wins"}))
	require.NoError(t, flags.Apply(cmd.Flags()))
	get := func(name string) string { return cmd.Flags().Lookup(name).Value.String() }
	assert.Equal(t, "example.com/vgpu-memory", get("hami-resource-memory"))
	assert.Equal(t, "vgpu-system", get("pod-namespace"))
	assert.Equal(t, "[cli-wins]", get("admin-namespaces"))
}
