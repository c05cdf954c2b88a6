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

package devices

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	api "github.com/vgpu-dra/vgpu-dra-driver/api/vgpu.dra.dev/v1alpha1"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/names"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/discovery"
)

const nodeName = "node-a"

// features are those a 1.37 kube-scheduler runs with by default.
var features = structured.Features{
	AdminAccess:          true,
	ConsumableCapacity:   true,
	DeviceTaints:         true,
	PartitionableDevices: true,
	PrioritizedList:      true,
}

// classLister serves the shipped DeviceClasses to the allocator.
type classLister map[string]*resourceapi.DeviceClass

func (l classLister) List() ([]*resourceapi.DeviceClass, error) {
	var out []*resourceapi.DeviceClass
	for _, c := range l {
		out = append(out, c)
	}
	return out, nil
}

func (l classLister) Get(name string) (*resourceapi.DeviceClass, error) {
	if c, ok := l[name]; ok {
		return c, nil
	}
	return nil, fmt.Errorf("device class %q not found", name)
}

// yamlDocs reads a file of one or more YAML documents.
func yamlDocs(t *testing.T, path string) [][]byte {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var docs [][]byte
	for _, doc := range strings.Split(string(data), "\n---\n") {
		if strings.TrimSpace(doc) != "" {
			docs = append(docs, []byte(doc))
		}
	}
	return docs
}

// loadClasses decodes deviceclasses/*.yaml strictly, so a typo in a shipped
// manifest fails here rather than on a user's cluster.
func loadClasses(t *testing.T) classLister {
	t.Helper()
	files, err := filepath.Glob("../../../deviceclasses/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	classes := classLister{}
	for _, f := range files {
		for _, doc := range yamlDocs(t, f) {
			var class resourceapi.DeviceClass
			require.NoError(t, yaml.UnmarshalStrict(doc, &class), f)
			require.Equal(t, "DeviceClass", class.Kind, f)
			require.Equal(t, class.Name+".yaml", filepath.Base(f), "file is named after its class")
			for i, cfg := range class.Spec.Config {
				if cfg.Opaque != nil && cfg.Opaque.Driver == names.DriverName {
					_, err := api.Resolve([]api.Layer{{FromClass: true, Raw: cfg.Opaque.Parameters.Raw}})
					require.NoError(t, err, "%s config %d", f, i)
				}
			}
			classes[class.Name] = &class
		}
	}
	return classes
}

// cluster is one node with GPUs and the allocations made so far, tracked the
// way the scheduler does between pods.
type cluster struct {
	t       *testing.T
	classes classLister
	slices  []*resourceapi.ResourceSlice
	state   structured.AllocatedState
	claims  int
}

func newCluster(t *testing.T, infos []discovery.Info, opts Options) *cluster {
	c := &cluster{
		t:       t,
		classes: loadClasses(t),
		state: structured.AllocatedState{
			AllocatedDevices:         sets.New[structured.DeviceID](),
			AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
			AggregatedCapacity:       structured.NewConsumedCapacityCollection(),
		},
	}
	pool := DriverResources(nodeName, infos, opts).Pools[nodeName]
	for i, s := range pool.Slices {
		c.slices = append(c.slices, &resourceapi.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", nodeName, i)},
			Spec: resourceapi.ResourceSliceSpec{
				Driver:   names.DriverName,
				Pool:     resourceapi.ResourcePool{Name: nodeName, Generation: 1, ResourceSliceCount: int64(len(pool.Slices))},
				NodeName: ptr.To(nodeName),
				Devices:  s.Devices,
			},
		})
	}
	return c
}

// allocate runs one claim through a fresh allocator over the current state,
// as the scheduler does per pod. It returns nil when the claim does not fit.
func (c *cluster) allocate(spec resourceapi.ResourceClaimSpec) *resourceapi.AllocationResult {
	t := c.t
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	defaultSpec(&spec)
	c.claims++
	claim := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("claim-%d", c.claims), Namespace: "default",
			UID: types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", c.claims))},
		Spec: spec,
	}
	allocator, err := structured.NewAllocator(ctx, features, c.state, c.classes, c.slices,
		cel.NewCache(10, cel.Features{EnableConsumableCapacity: features.ConsumableCapacity}))
	require.NoError(t, err)
	results, err := allocator.Allocate(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}, []*resourceapi.ResourceClaim{claim})
	require.NoError(t, err)
	if len(results) == 0 {
		return nil
	}
	result := &results[0]
	for _, d := range result.Devices.Results {
		id := structured.MakeDeviceID(d.Driver, d.Pool, d.Device)
		c.state.AllocatedSharedDeviceIDs.Insert(structured.MakeSharedDeviceID(id, d.ShareID))
		c.state.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(id, d.ConsumedCapacity))
	}
	return result
}

// release deallocates r, as the scheduler's view does once the claim is
// deallocated.
func (c *cluster) release(r *resourceapi.AllocationResult) {
	for _, d := range r.Devices.Results {
		id := structured.MakeDeviceID(d.Driver, d.Pool, d.Device)
		c.state.AllocatedSharedDeviceIDs.Delete(structured.MakeSharedDeviceID(id, d.ShareID))
		c.state.AggregatedCapacity.Remove(structured.NewDeviceConsumedCapacity(id, d.ConsumedCapacity))
	}
}

// fill allocates copies of spec until one does not fit and returns the
// results of those that did.
func (c *cluster) fill(spec resourceapi.ResourceClaimSpec) []*resourceapi.AllocationResult {
	var out []*resourceapi.AllocationResult
	for len(out) < 1000 {
		r := c.allocate(*spec.DeepCopy())
		if r == nil {
			return out
		}
		out = append(out, r)
	}
	c.t.Fatal("no end to allocations: capacity is not consumed")
	return nil
}

// defaultSpec applies the apiserver's defaults the allocator relies on.
func defaultSpec(spec *resourceapi.ResourceClaimSpec) {
	for i := range spec.Devices.Requests {
		if e := spec.Devices.Requests[i].Exactly; e != nil {
			if e.AllocationMode == "" {
				e.AllocationMode = resourceapi.DeviceAllocationModeExactCount
			}
			if e.AllocationMode == resourceapi.DeviceAllocationModeExactCount && e.Count == 0 {
				e.Count = 1
			}
		}
	}
}

func gpuRequest(class string, capacity map[string]string) resourceapi.ResourceClaimSpec {
	req := &resourceapi.ExactDeviceRequest{DeviceClassName: class}
	if len(capacity) > 0 {
		req.Capacity = &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{}}
		for k, v := range capacity {
			req.Capacity.Requests[resourceapi.QualifiedName(k)] = resource.MustParse(v)
		}
	}
	return resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
		Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: req}},
	}}
}

func consumed(t *testing.T, r *resourceapi.AllocationResult) (memory, cores int64) {
	t.Helper()
	require.Len(t, r.Devices.Results, 1)
	cc := r.Devices.Results[0].ConsumedCapacity
	m, c := cc[names.CapacityMemory], cc[names.CapacityCores]
	return m.Value(), c.Value()
}

func withMemory(info discovery.Info, bytes int64) discovery.Info {
	info.MemoryBytes = uint64(bytes)
	return info
}

func TestAllocateHowManyFit(t *testing.T) {
	tests := []struct {
		name     string
		memory   int64
		capacity map[string]string
		want     int
	}{
		// Cores are the limit: 3 x 30 <= 100 < 4 x 30.
		{name: "4Gi+30 cores on 80Gi", memory: 80 * gi, capacity: map[string]string{"memory": "4Gi", "cores": "30"}, want: 3},
		// Memory is the limit when no cores are asked for (best effort).
		{name: "4Gi on 80Gi", memory: 80 * gi, capacity: map[string]string{"memory": "4Gi"}, want: 20},
		{name: "4Gi on H100 81559Mi", memory: int64(h100Memory), capacity: map[string]string{"memory": "4Gi"}, want: 19},
		{name: "4Gi on H200 141Gi", memory: 141 * gi, capacity: map[string]string{"memory": "4Gi"}, want: 35},
		{name: "10Gi+25 cores on 80Gi", memory: 80 * gi, capacity: map[string]string{"memory": "10Gi", "cores": "25"}, want: 4},
		{name: "1Gi+1 core on 80Gi", memory: 80 * gi, capacity: map[string]string{"memory": "1Gi", "cores": "1"}, want: 80},
		{name: "more than the GPU", memory: 80 * gi, capacity: map[string]string{"memory": "81Gi"}, want: 0},
		{name: "more than 100 cores", memory: 80 * gi, capacity: map[string]string{"cores": "101"}, want: 0},
		{name: "capacity the device lacks", memory: 80 * gi, capacity: map[string]string{"bandwidth": "1"}, want: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, []discovery.Info{withMemory(h100(0), tc.memory)}, Options{})
			results := c.fill(gpuRequest("vgpu.dra.dev", tc.capacity))
			assert.Len(t, results, tc.want)
			for _, r := range results {
				d := r.Devices.Results[0]
				assert.Equal(t, "gpu-0", d.Device)
				assert.Equal(t, nodeName, d.Pool)
				assert.NotNil(t, d.ShareID, "shared allocations carry a share ID")
			}
		})
	}
}

func TestAllocateConsumedCapacity(t *testing.T) {
	c := newCluster(t, []discovery.Info{withMemory(h100(0), 80*gi)}, Options{})
	r := c.allocate(gpuRequest("vgpu.dra.dev", map[string]string{"memory": "4Gi", "cores": "30"}))
	require.NotNil(t, r)
	memory, cores := consumed(t, r)
	assert.Equal(t, 4*gi, memory)
	assert.Equal(t, int64(30), cores)

	// Memory only: cores default to 0 (best effort, no throttle).
	r = c.allocate(gpuRequest("vgpu.dra.dev", map[string]string{"memory": "1Gi"}))
	require.NotNil(t, r)
	memory, cores = consumed(t, r)
	assert.Equal(t, gi, memory)
	assert.Zero(t, cores)
}

func TestAllocateNothingRequestedTakesWholeGPU(t *testing.T) {
	c := newCluster(t, []discovery.Info{withMemory(h100(0), int64(h100Memory))}, Options{})
	whole := c.allocate(gpuRequest("vgpu.dra.dev", nil))
	require.NotNil(t, whole)
	memory, cores := consumed(t, whole)
	assert.Equal(t, 81559*mi, memory, "all published memory")
	assert.Zero(t, cores)
	assert.Nil(t, c.allocate(gpuRequest("vgpu.dra.dev", map[string]string{"memory": "256Mi"})), "nothing fits next to an exclusive claim")
	assert.Nil(t, c.allocate(gpuRequest("vgpu.dra.dev", map[string]string{"cores": "1"})), "cores alone still need the memory minimum")

	// The other way round: an exclusive claim needs an untouched GPU.
	c = newCluster(t, []discovery.Info{withMemory(h100(0), 80*gi), withMemory(h100(1), 80*gi)}, Options{})
	require.NotNil(t, c.allocate(gpuRequest("vgpu.dra.dev", map[string]string{"memory": "256Mi"})))
	whole = c.allocate(gpuRequest("vgpu.dra.dev", nil))
	require.NotNil(t, whole)
	assert.Equal(t, "gpu-1", whole.Devices.Results[0].Device)
	assert.Nil(t, c.allocate(gpuRequest("vgpu.dra.dev", nil)))
}

func TestAllocateRounding(t *testing.T) {
	tests := []struct {
		name    string
		opts    Options
		request string
		want    int64
	}{
		{name: "MiB multiple is kept", request: "1000Mi", want: 1000 * mi},
		{name: "decimal rounds up to next MiB", request: "1000M", want: 954 * mi},
		{name: "odd bytes round up", request: "4294967297", want: 4*gi + mi},
		{name: "below minimum rounds up to it", request: "100Mi", want: 256 * mi},
		{name: "zero rounds up to minimum", request: "0", want: 256 * mi},
		{name: "256Mi step: 100M", opts: Options{MemoryStep: 256 * mi}, request: "100M", want: 256 * mi},
		{name: "256Mi step: 300Mi", opts: Options{MemoryStep: 256 * mi}, request: "300Mi", want: 512 * mi},
		{name: "1Gi minimum", opts: Options{MemoryMin: gi}, request: "300Mi", want: gi},
		{name: "decimal step counts from min", opts: Options{MemoryStep: 100_000_000}, request: "1G", want: 256*mi + 8*100_000_000},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, []discovery.Info{withMemory(h100(0), 80*gi)}, tc.opts)
			r := c.allocate(gpuRequest("vgpu.dra.dev", map[string]string{"memory": tc.request, "cores": "10"}))
			require.NotNil(t, r)
			memory, cores := consumed(t, r)
			assert.Equal(t, tc.want, memory)
			assert.Equal(t, int64(10), cores)
		})
	}
}

func TestAllocateClassConfig(t *testing.T) {
	tests := []struct {
		name        string
		class       string
		claimConfig string
		want        api.VGPUConfig
		wantErr     string
	}{
		{
			name:        "work-conserving class, claim adds priority",
			class:       "vgpu-work-conserving.dra.dev",
			claimConfig: `"priority":"high"`,
			want:        api.VGPUConfig{ComputePolicy: api.ComputePolicyWorkConserving, Priority: api.PriorityHigh, LogLevel: api.DefaultLogLevel, Enforcement: api.EnforcementEnabled},
		},
		{
			name:        "claim overrides the class policy",
			class:       "vgpu-work-conserving.dra.dev",
			claimConfig: `"computePolicy":"strict"`,
			want:        api.VGPUConfig{ComputePolicy: api.ComputePolicyStrict, Priority: api.DefaultPriority, LogLevel: api.DefaultLogLevel, Enforcement: api.EnforcementEnabled},
		},
		{
			name:  "admin class disables enforcement",
			class: "vgpu-unenforced.dra.dev",
			want:  api.VGPUConfig{ComputePolicy: api.DefaultComputePolicy, Priority: api.DefaultPriority, LogLevel: api.DefaultLogLevel, Enforcement: api.EnforcementDisabled},
		},
		{
			name:        "a claim cannot disable enforcement",
			class:       "vgpu.dra.dev",
			claimConfig: `"enforcement":"disabled"`,
			wantErr:     "enforcement",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, []discovery.Info{withMemory(h100(0), 80*gi)}, Options{})
			spec := gpuRequest(tc.class, map[string]string{"memory": "2Gi", "cores": "20"})
			if tc.claimConfig != "" {
				spec.Devices.Config = []resourceapi.DeviceClaimConfiguration{{
					Requests: []string{"gpu"},
					DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{
						Driver:     names.DriverName,
						Parameters: rawJSON(`{"apiVersion":"vgpu.dra.dev/v1alpha1","kind":"VGPUConfig",` + tc.claimConfig + `}`),
					}},
				}}
			}
			r := c.allocate(spec)
			require.NotNil(t, r)
			// The allocation result lists class configs, then claim configs:
			// exactly the layers the kubelet plugin resolves.
			var layers []api.Layer
			for _, cfg := range r.Devices.Config {
				require.NotNil(t, cfg.Opaque)
				layers = append(layers, api.Layer{FromClass: cfg.Source == resourceapi.AllocationConfigSourceClass, Raw: cfg.Opaque.Parameters.Raw})
			}
			resolved, err := api.Resolve(layers)
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			tc.want.TypeMeta = resolved.TypeMeta
			tc.want.Burst, tc.want.ReclaimGracePeriodSeconds = api.DefaultBurst, ptr.To(api.DefaultReclaimGracePeriodSeconds)
			assert.Equal(t, tc.want, resolved)
		})
	}
}

// TestExamples decodes every example in docs/examples strictly and
// allocates each ResourceClaimTemplate on a node with two GPUs, with the
// DeviceClasses an example file defines next to the shipped ones.
func TestExamples(t *testing.T) {
	files, err := filepath.Glob("../../../docs/examples/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	templates := 0
	for _, f := range files {
		classes := classLister{}
		var tmpls []resourceapi.ResourceClaimTemplate
		for _, doc := range yamlDocs(t, f) {
			var meta metav1.TypeMeta
			require.NoError(t, yaml.Unmarshal(doc, &meta), f)
			switch meta.Kind {
			case "ResourceClaimTemplate":
				var tmpl resourceapi.ResourceClaimTemplate
				require.NoError(t, yaml.UnmarshalStrict(doc, &tmpl), f)
				tmpls = append(tmpls, tmpl)
			case "DeviceClass":
				var class resourceapi.DeviceClass
				require.NoError(t, yaml.UnmarshalStrict(doc, &class), f)
				classes[class.Name] = &class
			case "Pod":
				var pod v1.Pod
				require.NoError(t, yaml.UnmarshalStrict(doc, &pod), f)
				assert.NotEmpty(t, pod.Spec.Containers, f)
			case "Deployment":
				var d appsv1.Deployment
				require.NoError(t, yaml.UnmarshalStrict(doc, &d), f)
				assert.NotEmpty(t, d.Spec.Template.Spec.Containers, f)
			default:
				t.Errorf("%s: unexpected kind %q", f, meta.Kind)
			}
		}
		for _, tmpl := range tmpls {
			t.Run(tmpl.Name, func(t *testing.T) {
				checkExample(t, tmpl.Spec.Spec, classes)
			})
			templates++
		}
	}
	assert.GreaterOrEqual(t, templates, 4)
}

// checkExample resolves each request's configs (its class's, then the
// claim's) and allocates the claim.
func checkExample(t *testing.T, spec resourceapi.ResourceClaimSpec, extra classLister) {
	c := newCluster(t, []discovery.Info{withMemory(h100(0), 80*gi), withMemory(h100(1), 80*gi)}, Options{})
	for name, class := range extra {
		c.classes[name] = class
	}
	for _, req := range spec.Devices.Requests {
		var layers []api.Layer
		if req.Exactly != nil {
			class, ok := c.classes[req.Exactly.DeviceClassName]
			require.True(t, ok, "request %s: class %s exists", req.Name, req.Exactly.DeviceClassName)
			for _, cfg := range class.Spec.Config {
				if cfg.Opaque != nil && cfg.Opaque.Driver == names.DriverName {
					layers = append(layers, api.Layer{FromClass: true, Raw: cfg.Opaque.Parameters.Raw})
				}
			}
		}
		for _, cfg := range spec.Devices.Config {
			if cfg.Opaque != nil && cfg.Opaque.Driver == names.DriverName && (len(cfg.Requests) == 0 || slices.Contains(cfg.Requests, req.Name)) {
				layers = append(layers, api.Layer{Raw: cfg.Opaque.Parameters.Raw})
			}
		}
		_, err := api.Resolve(layers)
		require.NoError(t, err, "configs of request %s", req.Name)
	}
	r := c.allocate(spec)
	require.NotNil(t, r, "example must be allocatable")
	devices := map[string]bool{}
	for _, d := range r.Devices.Results {
		assert.False(t, devices[d.Device], "device %s allocated twice to one claim", d.Device)
		devices[d.Device] = true
	}
}

func TestAllocateTwoGPUsDistinct(t *testing.T) {
	c := newCluster(t, []discovery.Info{withMemory(h100(0), 80*gi), withMemory(h100(1), 80*gi)}, Options{})
	spec := gpuRequest("vgpu.dra.dev", map[string]string{"memory": "8Gi", "cores": "50"})
	spec.Devices.Requests[0].Exactly.Count = 2
	spec.Devices.Constraints = []resourceapi.DeviceConstraint{{
		Requests:          []string{"gpu"},
		DistinctAttribute: ptr.To(resourceapi.FullyQualifiedName(names.DriverName + "/uuid")),
	}}
	results := c.fill(spec)
	// Each claim takes 50 cores on both GPUs: two claims fill both.
	require.Len(t, results, 2)
	for _, r := range results {
		require.Len(t, r.Devices.Results, 2)
		assert.NotEqual(t, r.Devices.Results[0].Device, r.Devices.Results[1].Device)
	}
}

func rawJSON(s string) runtime.RawExtension {
	return runtime.RawExtension{Raw: []byte(s)}
}

// The manifests ship exactly the classes the code names (names.DeviceClasses).
func TestShippedClassesAreTheNamedOnes(t *testing.T) {
	var shipped []string
	for name := range loadClasses(t) {
		shipped = append(shipped, name)
	}
	assert.ElementsMatch(t, names.DeviceClasses(), shipped)
}
