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

package hami

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/names"
)

var update = flag.Bool("update", false, "rewrite the golden files from the current output")

// goldenInput is one testdata/*.in.yaml case.
type goldenInput struct {
	Namespace string `json:"namespace"`
	Products  []struct {
		Name    string            `json:"name"`
		Memory  resource.Quantity `json:"memory"`
		Profile string            `json:"profile"`
	} `json:"products"`
	Pod corev1.Pod `json:"pod"`
}

// goldenOutput is what a case must produce: templates and patch, or error.
type goldenOutput struct {
	Error     string                               `json:"error,omitempty"`
	Templates []*resourceapi.ResourceClaimTemplate `json:"templates,omitempty"`
	Patch     []PatchOp                            `json:"patch,omitempty"`
}

// hamiNames are HAMi's own resource names, the controller's defaults.
var hamiNames = ResourceNames{
	Count:            DefaultCountResource,
	Memory:           DefaultMemoryResource,
	MemoryPercentage: DefaultMemoryPercentageResource,
	Cores:            DefaultCoresResource,
	Priority:         DefaultPriorityResource,
}

func testConfig() Config {
	return Config{Resources: hamiNames, DeviceClassName: "vgpu.dra.dev", MIGDeviceClassName: "mig.vgpu.dra.dev", MPSDeviceClassName: "mps.vgpu.dra.dev", DriverName: names.DriverName}
}

func TestTranslateGolden(t *testing.T) {
	inputs, err := filepath.Glob(filepath.Join("testdata", "*.in.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, inputs)
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".in.yaml")
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(in)
			require.NoError(t, err)
			var input goldenInput
			require.NoError(t, yaml.UnmarshalStrict(raw, &input))
			var products []Product
			for _, p := range input.Products {
				products = append(products, Product{Name: p.Name, MemoryBytes: p.Memory.Value(), Profile: p.Profile})
			}

			tr, trErr := Translate(input.Namespace, &input.Pod, testConfig(), products)
			var got goldenOutput
			if trErr != nil {
				require.Nil(t, tr)
				got.Error = trErr.Error()
			} else if tr != nil {
				got.Templates, got.Patch = tr.Templates, tr.Patch
				checkPatchedPod(t, &input.Pod, tr)
			}
			// Round-trip through JSON so the comparison sees what the API
			// server would see, not Go types.
			gotYAML := toYAML(t, got)
			goldenPath := filepath.Join("testdata", name+".golden.yaml")
			if *update {
				require.NoError(t, os.WriteFile(goldenPath, gotYAML, 0o644))
			}
			want, err := os.ReadFile(goldenPath)
			require.NoError(t, err, "missing golden file; run go test ./pkg/cluster/hami -update")
			assert.Equal(t, string(want), string(gotYAML))

			again, againErr := Translate(input.Namespace, &input.Pod, testConfig(), products)
			assert.Equal(t, trErr, againErr, "translation must be deterministic")
			assert.Equal(t, tr, again, "translation must be deterministic")
		})
	}
}

func toYAML(t *testing.T, v any) []byte {
	t.Helper()
	raw, err := json.Marshal(v)
	require.NoError(t, err)
	out, err := yaml.JSONToYAML(raw)
	require.NoError(t, err)
	return out
}

// checkPatchedPod applies the patch as the API server would and checks the
// result: no HAMi resource left, every container that had one references a
// pod claim whose template is among the translation's templates.
func checkPatchedPod(t *testing.T, pod *corev1.Pod, tr *Translation) {
	t.Helper()
	podJSON, err := json.Marshal(pod)
	require.NoError(t, err)
	patchJSON, err := json.Marshal(tr.Patch)
	require.NoError(t, err)
	p, err := jsonpatch.DecodePatch(patchJSON)
	require.NoError(t, err)
	patched, err := p.Apply(podJSON)
	require.NoError(t, err)
	var out corev1.Pod
	require.NoError(t, json.Unmarshal(patched, &out))

	templates := map[string]bool{}
	for _, tmpl := range tr.Templates {
		templates[tmpl.Name] = true
	}
	podClaims := map[string]string{}
	for _, c := range out.Spec.ResourceClaims {
		if c.ResourceClaimTemplateName != nil {
			podClaims[c.Name] = *c.ResourceClaimTemplateName
		}
	}
	for _, c := range append(out.Spec.InitContainers, out.Spec.Containers...) {
		for _, name := range hamiNames.all() {
			assert.NotContains(t, c.Resources.Limits, name, "container %s", c.Name)
			assert.NotContains(t, c.Resources.Requests, name, "container %s", c.Name)
		}
		for _, claim := range c.Resources.Claims {
			tmpl, ok := podClaims[claim.Name]
			if !ok {
				continue
			}
			assert.True(t, templates[tmpl], "container %s references template %s that the translation does not create", c.Name, tmpl)
		}
	}
	for _, c := range out.Spec.ResourceClaims {
		if c.ResourceClaimTemplateName != nil {
			assert.True(t, templates[*c.ResourceClaimTemplateName], "pod claim %s references an unknown template", c.Name)
		}
	}
	translated := 0
	for _, op := range tr.Patch {
		if op.Op == "replace" {
			translated++
		}
	}
	assert.Len(t, out.Spec.ResourceClaims, len(pod.Spec.ResourceClaims)+translated, "one new pod claim per translated container")
}

func TestTranslateSharesTemplatesBetweenEqualShapes(t *testing.T) {
	limits := corev1.ResourceList{DefaultMemoryResource: resource.MustParse("3000"), DefaultCoresResource: resource.MustParse("30")}
	pod := func(name string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{Containers: []corev1.Container{
				{Name: "a", Resources: corev1.ResourceRequirements{Limits: limits}},
				{Name: "b", Resources: corev1.ResourceRequirements{Limits: limits}},
			}},
		}
	}
	one, err := Translate("ns", pod("one"), testConfig(), nil)
	require.NoError(t, err)
	two, err := Translate("ns", pod("two"), testConfig(), nil)
	require.NoError(t, err)
	require.Len(t, one.Templates, 1, "two containers with one shape need one template")
	assert.Equal(t, one.Templates[0].Name, two.Templates[0].Name)

	other, err := Translate("other", pod("one"), testConfig(), nil)
	require.NoError(t, err)
	assert.Equal(t, "other", other.Templates[0].Namespace)
}

func TestTranslateNoHAMiResources(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{
		Name:      "app",
		Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}},
	}}}}
	tr, err := Translate("ns", pod, testConfig(), nil)
	require.NoError(t, err)
	assert.Nil(t, tr)
}

func TestTranslateConfigurableNames(t *testing.T) {
	cfg := testConfig()
	cfg.Resources.Count = "example.com/vgpu"
	cfg.Resources.Memory = "example.com/vgpu-memory"
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{
		Name: "app",
		Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
			"example.com/vgpu": resource.MustParse("1"), "example.com/vgpu-memory": resource.MustParse("1024"),
			DefaultCountResource: resource.MustParse("1"),
		}},
	}}}}
	tr, err := Translate("ns", pod, cfg, nil)
	require.NoError(t, err)
	require.Len(t, tr.Templates, 1)
	req := tr.Templates[0].Spec.Spec.Devices.Requests[0].Exactly
	require.NotNil(t, req)
	assert.Equal(t, "1Gi", ptr.To(req.Capacity.Requests[names.CapacityMemory]).String())
	res, ok := tr.Patch[0].Value.(corev1.ResourceRequirements)
	require.True(t, ok)
	assert.Contains(t, res.Limits, DefaultCountResource, "names that are not configured stay untouched")
	assert.NotContains(t, res.Limits, corev1.ResourceName("example.com/vgpu"))
}

func TestProducts(t *testing.T) {
	dev := func(product string, memory string) resourceapi.Device {
		attrs := map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{}
		if product != "" {
			attrs[names.AttrProductName] = resourceapi.DeviceAttribute{StringValue: ptr.To(product)}
		}
		capacity := map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{}
		if memory != "" {
			capacity[names.CapacityMemory] = resourceapi.DeviceCapacity{Value: resource.MustParse(memory)}
		}
		return resourceapi.Device{Name: "gpu", Attributes: attrs, Capacity: capacity}
	}
	slices := []*resourceapi.ResourceSlice{
		{Spec: resourceapi.ResourceSliceSpec{Driver: names.DriverName, Devices: []resourceapi.Device{
			dev("NVIDIA H100 80GB HBM3", "80Gi"), dev("NVIDIA A100-SXM4-40GB", "40Gi"), dev("", "10Gi"), dev("No memory", ""),
		}}},
		{Spec: resourceapi.ResourceSliceSpec{Driver: names.DriverName, Devices: []resourceapi.Device{
			dev("NVIDIA H100 80GB HBM3", "80Gi"), dev("NVIDIA A100-SXM4-40GB", "39Gi"),
		}}},
		{Spec: resourceapi.ResourceSliceSpec{Driver: "other.example.com", Devices: []resourceapi.Device{dev("Other", "1Gi")}}},
	}
	mig := dev("NVIDIA H100 80GB HBM3", "40Gi")
	mig.Attributes[names.AttrProfile] = resourceapi.DeviceAttribute{StringValue: ptr.To("3g.40gb")}
	slices[1].Spec.Devices = append(slices[1].Spec.Devices, mig, mig)
	assert.Equal(t, []Product{
		{Name: "NVIDIA A100-SXM4-40GB", MemoryBytes: 39 << 30},
		{Name: "NVIDIA A100-SXM4-40GB", MemoryBytes: 40 << 30},
		{Name: "NVIDIA H100 80GB HBM3", MemoryBytes: 40 << 30, Profile: "3g.40gb"},
		{Name: "NVIDIA H100 80GB HBM3", MemoryBytes: 80 << 30},
	}, Products(slices, names.DriverName))
}
