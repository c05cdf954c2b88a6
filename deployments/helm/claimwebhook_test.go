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

package chart

import (
	"fmt"
	"testing"

	"github.com/google/cel-go/cel"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// TestClaimWebhookMatchesOnlyThisDriversClaims evaluates the claim webhook's
// match condition: claims and templates that name one of the driver's
// classes or carry its opaque config are judged; others never wait on the
// controller.
func TestClaimWebhookMatchesOnlyThisDriversClaims(t *testing.T) {
	objs := mustRender(t, nil, map[string]any{"controller": map[string]any{"webhook": map[string]any{"extraDeviceClasses": []any{"team-gpu.example.com"}}}})
	v, _ := webhookConfigs(t, objs)
	require.Len(t, v.Webhooks, 1)
	require.Len(t, v.Webhooks[0].MatchConditions, 1)
	expr := v.Webhooks[0].MatchConditions[0].Expression

	env, err := cel.NewEnv(cel.Variable("request", cel.DynType), cel.Variable("object", cel.DynType))
	require.NoError(t, err)
	ast, iss := env.Compile(expr)
	require.NoError(t, iss.Err(), expr)
	prg, err := env.Program(ast)
	require.NoError(t, err)

	claimSpec := `
devices:
  requests:
  - name: a
    exactly: {deviceClassName: other.example.com}
  - name: b
    firstAvailable:
    - {name: x, deviceClassName: other.example.com}
    - {name: y, deviceClassName: %s}
`
	for name, tc := range map[string]struct {
		resource string
		object   string
		want     bool
	}{
		"claim naming the main class":    {"resourceclaims", "spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: vgpu.dra.dev}}]}}", true},
		"claim naming the admin class":   {"resourceclaims", "spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: vgpu-unenforced.dra.dev}}]}}", true},
		"claim naming the MPS class":     {"resourceclaims", "spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: mps.vgpu.dra.dev}}]}}", true},
		"claim naming a listed class":    {"resourceclaims", "spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: team-gpu.example.com}}]}}", true},
		"claim of another driver":        {"resourceclaims", "spec: {devices: {requests: [{name: nic, exactly: {deviceClassName: other.example.com}}]}}", false},
		"claim without devices":          {"resourceclaims", "spec: {}", false},
		"template with a subrequest":     {"resourceclaimtemplates", "spec: {spec: " + yamlFlow(t, claimSpec, "vgpu-work-conserving.dra.dev") + "}", true},
		"template of another driver":     {"resourceclaimtemplates", "spec: {spec: " + yamlFlow(t, claimSpec, "other2.example.com") + "}", false},
		"config for this driver":         {"resourceclaims", "spec: {devices: {requests: [{name: g, exactly: {deviceClassName: custom}}], config: [{opaque: {driver: vgpu.dra.dev, parameters: {}}}]}}", true},
		"config for another driver only": {"resourceclaims", "spec: {devices: {requests: [{name: g, exactly: {deviceClassName: custom}}], config: [{opaque: {driver: x.example.com, parameters: {}}}]}}", false},
	} {
		t.Run(name, func(t *testing.T) {
			var object map[string]any
			require.NoError(t, yaml.Unmarshal([]byte(tc.object), &object))
			out, _, err := prg.Eval(map[string]any{
				"request": map[string]any{"resource": map[string]any{"group": "resource.k8s.io", "version": "v1", "resource": tc.resource}},
				"object":  object,
			})
			require.NoError(t, err)
			assert.Equal(t, tc.want, out.Value())
		})
	}
}

// yamlFlow renders the block YAML spec with the class filled in as one JSON
// line, to embed in a flow mapping.
func yamlFlow(t *testing.T, spec, class string) string {
	t.Helper()
	b, err := yaml.YAMLToJSON([]byte(fmt.Sprintf(spec, class)))
	require.NoError(t, err)
	return string(b)
}
