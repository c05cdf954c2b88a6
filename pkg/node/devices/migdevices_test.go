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
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/names"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/discovery"
)

// geometries are go-nvml's mock GPUs with their MIG tables.
var geometries = []struct {
	name   string
	config gpus.Config
}{
	{"A100-40GB", gpus.A100_SXM4_40GB},
	{"A100-80GB", gpus.A100_SXM4_80GB},
	{"H100-80GB", gpus.H100_SXM5_80GB},
	{"H200-141GB", gpus.H200_SXM5_141GB},
}

// mockMIG reads the MIG state of a mock GPU of config in MIG mode, with the
// given instances (profile id, placement start) created first.
func mockMIG(t *testing.T, config gpus.Config, instances ...[2]int) *discovery.MIGInfo {
	t.Helper()
	dev := server.NewDeviceFromConfig(config, 0)
	_, ret := dev.SetMigMode(nvml.DEVICE_MIG_ENABLE)
	require.Equal(t, nvml.SUCCESS, ret)
	for _, inst := range instances {
		info, ret := dev.GetGpuInstanceProfileInfo(inst[0])
		require.Equal(t, nvml.SUCCESS, ret)
		pl := nvml.GpuInstancePlacement{Start: uint32(inst[1])}
		for _, p := range config.MIGProfiles.GpuInstancePlacements[inst[0]] {
			if int(p.Start) == inst[1] {
				pl = p
			}
		}
		_, ret = dev.CreateGpuInstanceWithPlacement(&info, &pl)
		require.Equal(t, nvml.SUCCESS, ret)
	}
	mig, err := discovery.ReadMIG(dev, false)
	require.NoError(t, err)
	require.NotNil(t, mig)
	return mig
}

// migGPU is GPU index of config in MIG mode, with its parent's facts from
// the mock.
func migGPU(t *testing.T, index int, config gpus.Config, instances ...[2]int) GPU {
	info := h100(index)
	info.ProductName = config.Name
	info.MemoryBytes = config.MemoryMB << 20
	return GPU{Info: info, MIG: mockMIG(t, config, instances...)}
}

var partitionable = MIGOptions{PartitionableDevices: true}

func counterValues(c map[string]resourceapi.Counter) map[string]int64 {
	out := map[string]int64{}
	for k, v := range c {
		out[k] = v.Value.Value()
	}
	return out
}

func slicesCounters(n int, extra map[string]int64) map[string]int64 {
	out := map[string]int64{names.CounterComputeSlices: 7}
	for i := 0; i < n; i++ {
		out[MemorySliceCounter(i)] = 1
	}
	for k, v := range extra {
		out[k] = v
	}
	return out
}

func TestMIGCounters(t *testing.T) {
	tests := map[string]map[string]int64{
		// A100: 8 memory slices; the +me profile is limited to one per GPU;
		// 1g.10gb's 4 two-slice placements bound it by themselves.
		"A100-40GB": slicesCounters(8, map[string]int64{"1g-5gb-me-instances": 1}),
		"A100-80GB": slicesCounters(8, map[string]int64{"1g-10gb-me-instances": 1}),
		// The Hopper mocks count 7 memory slices and give 1g.20gb/1g.35gb
		// one-slice placements with at most 4 instances.
		"H100-80GB":  slicesCounters(7, map[string]int64{"1g-10gb-me-instances": 1, "1g-20gb-instances": 4}),
		"H200-141GB": slicesCounters(7, map[string]int64{"1g-18gb-me-instances": 1, "1g-35gb-instances": 4}),
	}
	for _, g := range geometries {
		t.Run(g.name, func(t *testing.T) {
			assert.Equal(t, tests[g.name], counterValues(MIGCounters(*mockMIG(t, g.config))))
		})
	}
}

func TestMIGPlacementCounters(t *testing.T) {
	a100 := mockMIG(t, gpus.A100_SXM4_40GB)
	h200 := mockMIG(t, gpus.H200_SXM5_141GB)
	profile := func(m *discovery.MIGInfo, id int) discovery.MIGProfile {
		p, ok := m.Profile(id)
		require.True(t, ok)
		return p
	}
	tests := []struct {
		name string
		p    discovery.MIGProfile
		pl   discovery.MIGPlacement
		want map[string]int64
	}{
		{"A100 3g at 4 takes four memory slices", profile(a100, nvml.GPU_INSTANCE_PROFILE_3_SLICE), discovery.MIGPlacement{Start: 4, Size: 4},
			map[string]int64{"memory-slice-4": 1, "memory-slice-5": 1, "memory-slice-6": 1, "memory-slice-7": 1, names.CounterComputeSlices: 3}},
		{"A100 7g takes all", profile(a100, nvml.GPU_INSTANCE_PROFILE_7_SLICE), discovery.MIGPlacement{Start: 0, Size: 8},
			slicesCounters(8, map[string]int64{})},
		{"H200 1g at 4", profile(h200, nvml.GPU_INSTANCE_PROFILE_1_SLICE), discovery.MIGPlacement{Start: 4, Size: 1},
			map[string]int64{"memory-slice-4": 1, names.CounterComputeSlices: 1}},
		{"H200 1g+me at 6 takes the one +me", profile(h200, nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1), discovery.MIGPlacement{Start: 6, Size: 1},
			map[string]int64{"memory-slice-6": 1, names.CounterComputeSlices: 1, "1g-18gb-me-instances": 1}},
		{"H200 4g", profile(h200, nvml.GPU_INSTANCE_PROFILE_4_SLICE), discovery.MIGPlacement{Start: 0, Size: 4},
			map[string]int64{"memory-slice-0": 1, "memory-slice-1": 1, "memory-slice-2": 1, "memory-slice-3": 1, names.CounterComputeSlices: 4}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, counterValues(PlacementCounters(tc.p, tc.pl)))
		})
	}
}

func TestProfileLabel(t *testing.T) {
	for name, want := range map[string]string{
		"3g.71gb": "3g-71gb", "1g.18gb+me": "1g-18gb-me", "1g.10gb-me": "1g-10gb-nome",
		"1g.23gb+me.all": "1g-23gb-meall", "2g.48gb+gfx": "2g-48gb-gfx", "7g.141gb": "7g-141gb",
	} {
		assert.Equal(t, want, profileLabel(name), name)
		assert.Empty(t, validation.IsDNS1123Label("gpu-7-mig-"+want+"-6"), name)
	}
}

func deviceNames(devs []resourceapi.Device) []string {
	var out []string
	for _, d := range devs {
		out = append(out, d.Name)
	}
	return out
}

func TestGPUDevicesH200(t *testing.T) {
	g := migGPU(t, 0, gpus.H200_SXM5_141GB)
	res := GPUDevices(g, Options{}, partitionable)
	assert.Empty(t, res.Notes)
	require.NotNil(t, res.CounterSet)
	assert.Equal(t, "gpu-0-slices", res.CounterSet.Name)
	// The whole GPU, then 7+7+7 one-slice, 3 2g, 2 3g, one 4g, one 7g.
	require.Len(t, res.Devices, 1+7+7+7+3+2+1+1)
	whole := res.Devices[0]
	assert.Equal(t, "gpu-0", whole.Name)
	assert.Equal(t, ptr.To(true), whole.Attributes[names.AttrMIGEnabled].BoolValue)
	assert.Equal(t, int64(112), *whole.Attributes[names.AttrMultiprocessors].IntValue, "the 7g instance's SMs")
	wholeMem := whole.Capacity[names.CapacityMemory].Value
	assert.Equal(t, int64(144384)<<20, wholeMem.Value())
	require.Len(t, whole.ConsumesCounters, 1)
	assert.Equal(t, counterValues(res.CounterSet.Counters), counterValues(whole.ConsumesCounters[0].Counters), "the whole GPU consumes every counter")

	byName := map[string]resourceapi.Device{}
	for _, d := range res.Devices {
		byName[d.Name] = d
	}
	threeG, ok := byName["gpu-0-mig-3g-71gb-4"]
	require.True(t, ok, "devices: %v", deviceNames(res.Devices))
	assert.Equal(t, map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
		"profile":               {StringValue: ptr.To("3g.71gb")},
		"placementStart":        {IntValue: ptr.To[int64](4)},
		"placementSize":         {IntValue: ptr.To[int64](3)},
		"parentUUID":            {StringValue: ptr.To(g.Info.UUID)},
		"parentIndex":           {IntValue: ptr.To[int64](0)},
		"multiprocessors":       {IntValue: ptr.To[int64](48)},
		"productName":           {StringValue: ptr.To("NVIDIA H200 141GB HBM3e")},
		"brand":                 {StringValue: ptr.To("NVIDIA")},
		"architecture":          {StringValue: ptr.To("Hopper")},
		"cudaComputeCapability": {VersionValue: ptr.To("9.0.0")},
		"driverVersion":         {VersionValue: ptr.To("580.95.5")},
		"cudaDriverVersion":     {VersionValue: ptr.To("12.9.0")},
		"pcieBusID":             {StringValue: ptr.To("0000:18:00.0")},
		"numaNode":              {IntValue: ptr.To[int64](0)},
	}, threeG.Attributes)
	assert.Equal(t, ptr.To(true), threeG.AllowMultipleAllocations, "software slices inside a MIG instance")
	mem := threeG.Capacity[names.CapacityMemory]
	assert.Equal(t, int64(72704)<<20, mem.Value.Value())
	assert.Equal(t, int64(72704)<<20, mem.RequestPolicy.Default.Value(), "no request takes the whole instance")
	cores := threeG.Capacity[names.CapacityCores]
	assert.Equal(t, int64(100), cores.Value.Value(), "percent of the instance")
	assert.Equal(t, map[string]int64{"memory-slice-4": 1, "memory-slice-5": 1, "memory-slice-6": 1, names.CounterComputeSlices: 3},
		counterValues(threeG.ConsumesCounters[0].Counters))
}

func TestGPUDevicesWithoutMIG(t *testing.T) {
	plain := h100(0)
	// Not MIG-capable, and MIG-capable with MIG off: today's device.
	for _, mig := range []*discovery.MIGInfo{nil, {}, {Pending: true}} {
		res := GPUDevices(GPU{Info: plain, MIG: mig}, Options{}, partitionable)
		assert.Equal(t, []resourceapi.Device{Device(plain, Options{})}, res.Devices)
		assert.Nil(t, res.CounterSet)
		assert.Equal(t, mig != nil && mig.Pending, len(res.Notes) == 1, "a pending mode is noted")
	}
}

func TestGPUDevicesFeatureGateOff(t *testing.T) {
	g := migGPU(t, 0, gpus.H100_SXM5_80GB)
	res := GPUDevices(g, Options{}, MIGOptions{})
	require.Len(t, res.Devices, 1, "only the whole-GPU device")
	assert.Equal(t, "gpu-0", res.Devices[0].Name)
	assert.Empty(t, res.Devices[0].ConsumesCounters)
	assert.Nil(t, res.CounterSet)
	require.Len(t, res.Notes, 1)
	assert.Contains(t, res.Notes[0], "DRAPartitionableDevices")

	pool, notes := MIGPool([]GPU{g}, Options{}, MIGOptions{})
	assert.Len(t, notes, 1)
	require.Len(t, pool.Slices, 1)
	assert.Empty(t, pool.Slices[0].SharedCounters)
}

func TestGPUDevicesStaticInstances(t *testing.T) {
	// An admin made a 3g at 0 and a 1g at 4 (nvidia-smi mig -cgi); the
	// plugin made the 1g at 6.
	g := migGPU(t, 0, gpus.H200_SXM5_141GB,
		[2]int{nvml.GPU_INSTANCE_PROFILE_3_SLICE, 0}, [2]int{nvml.GPU_INSTANCE_PROFILE_1_SLICE, 4}, [2]int{nvml.GPU_INSTANCE_PROFILE_1_SLICE, 6})
	for _, inst := range g.MIG.Instances {
		if inst.Placement.Start == 6 {
			g.Owned = append(g.Owned, inst)
		}
	}
	res := GPUDevices(g, Options{}, partitionable)
	require.Len(t, res.Notes, 1)
	assert.Contains(t, res.Notes[0], "no whole-GPU device")
	var static []string
	for _, d := range res.Devices {
		assert.NotEqual(t, "gpu-0", d.Name, "no whole-GPU device next to an admin's instances")
		start := *d.Attributes[names.AttrPlacementStart].IntValue
		size := *d.Attributes[names.AttrPlacementSize].IntValue
		if d.Attributes[names.AttrStatic].BoolValue != nil {
			static = append(static, d.Name)
			continue
		}
		overlaps := start < 3 || (start <= 4 && start+size > 4)
		assert.False(t, overlaps, "%s overlaps an admin's instance", d.Name)
	}
	assert.Equal(t, []string{"gpu-0-mig-3g-71gb-0", "gpu-0-mig-1g-18gb-4"}, static)
	assert.Contains(t, deviceNames(res.Devices), "gpu-0-mig-1g-18gb-6", "the plugin's own instance stays allocatable")
	assert.Contains(t, deviceNames(res.Devices), "gpu-0-mig-1g-18gb-3", "placements clear of the fixed instances stay")
	assert.NotContains(t, deviceNames(res.Devices), "gpu-0-mig-2g-35gb-2", "2g at 2 overlaps the 3g at 0")
}

// checkSliceLimits checks what the apiserver's validation would reject:
// the limits of the resource.k8s.io/v1 API and references that resolve.
func checkSliceLimits(t *testing.T, pool resourceslice.Pool) {
	t.Helper()
	setCounters := map[string]map[string]resourceapi.Counter{}
	deviceNames := sets.New[string]()
	for i, s := range pool.Slices {
		assert.False(t, len(s.Devices) > 0 && len(s.SharedCounters) > 0, "slice %d: only one of devices and sharedCounters", i)
		assert.LessOrEqual(t, len(s.SharedCounters), resourceapi.ResourceSliceMaxCounterSets, "slice %d", i)
		for _, cs := range s.SharedCounters {
			assert.Empty(t, validation.IsDNS1123Label(cs.Name), cs.Name)
			assert.NotContains(t, setCounters, cs.Name, "counter set names are unique in the pool")
			assert.LessOrEqual(t, len(cs.Counters), resourceapi.ResourceSliceMaxCountersPerCounterSet, cs.Name)
			for name := range cs.Counters {
				assert.Empty(t, validation.IsDNS1123Label(name), name)
			}
			setCounters[cs.Name] = cs.Counters
		}
		consuming := false
		for _, d := range s.Devices {
			consuming = consuming || len(d.ConsumesCounters) > 0
		}
		if consuming {
			assert.LessOrEqual(t, len(s.Devices), resourceapi.ResourceSliceMaxDevicesWithAdvancedFeatures, "slice %d", i)
		}
		assert.LessOrEqual(t, len(s.Devices), resourceapi.ResourceSliceMaxDevices, "slice %d", i)
	}
	for _, s := range pool.Slices {
		for _, d := range s.Devices {
			assert.Empty(t, validation.IsDNS1123Label(d.Name), d.Name)
			assert.False(t, deviceNames.Has(d.Name), "device %s twice in the pool", d.Name)
			deviceNames.Insert(d.Name)
			assert.LessOrEqual(t, len(d.Attributes)+len(d.Capacity), resourceapi.ResourceSliceMaxAttributesAndCapacitiesPerDevice, d.Name)
			for n, a := range d.Attributes {
				if a.StringValue != nil {
					assert.LessOrEqual(t, len(*a.StringValue), resourceapi.DeviceAttributeMaxValueLength, "%s %s", d.Name, n)
				}
			}
			for n, c := range d.Capacity {
				if p := c.RequestPolicy; p != nil && p.ValidRange != nil {
					assert.True(t, p.ValidRange.Min.Cmp(c.Value) <= 0, "%s %s: min <= value", d.Name, n)
					assert.True(t, p.ValidRange.Max.Cmp(c.Value) <= 0, "%s %s: max <= value", d.Name, n)
					assert.True(t, p.Default.Cmp(c.Value) <= 0, "%s %s: default <= value", d.Name, n)
				}
			}
			assert.LessOrEqual(t, len(d.ConsumesCounters), resourceapi.ResourceSliceMaxDeviceCounterConsumptionsPerDevice, d.Name)
			for _, cc := range d.ConsumesCounters {
				available, ok := setCounters[cc.CounterSet]
				require.True(t, ok, "%s consumes from unknown set %s", d.Name, cc.CounterSet)
				assert.LessOrEqual(t, len(cc.Counters), resourceapi.ResourceSliceMaxCountersPerDeviceCounterConsumption, d.Name)
				for name, c := range cc.Counters {
					a, ok := available[name]
					require.True(t, ok, "%s consumes unknown counter %s/%s", d.Name, cc.CounterSet, name)
					assert.True(t, c.Value.Cmp(a.Value) <= 0, "%s consumes more %s than there is", d.Name, name)
				}
			}
		}
	}
}

func TestMIGPoolLimits(t *testing.T) {
	for _, g := range geometries {
		for _, count := range []int{1, 8, 9, 17} {
			t.Run(fmt.Sprintf("%s x%d", g.name, count), func(t *testing.T) {
				var list []GPU
				for i := 0; i < count; i++ {
					list = append(list, migGPU(t, i, g.config))
				}
				// A plain GPU on the same node keeps today's shape.
				list = append(list, GPU{Info: h100(count)})
				pool, notes := MIGPool(list, Options{}, partitionable)
				assert.Empty(t, notes)
				checkSliceLimits(t, pool)
				sets, devices := 0, 0
				for _, s := range pool.Slices {
					sets += len(s.SharedCounters)
					devices += len(s.Devices)
				}
				assert.Equal(t, count, sets)
				perGPU := len(GPUDevices(list[0], Options{}, partitionable).Devices)
				assert.Equal(t, count*perGPU+1, devices)
				wantSetSlices := (count + 7) / 8
				wantDeviceSlices := (devices + 63) / 64
				assert.Len(t, pool.Slices, wantSetSlices+wantDeviceSlices)
			})
		}
	}
	// No MIG GPU: exactly today's pool.
	plain := []discovery.Info{h100(0), h100(1)}
	pool, _ := MIGPool([]GPU{{Info: plain[0]}, {Info: plain[1]}}, Options{}, partitionable)
	assert.Equal(t, Pool(plain, Options{}), pool)
}

func newMIGCluster(t *testing.T, list []GPU) *cluster {
	return newPoolCluster(t, list, partitionable)
}

// newPoolCluster is a node whose GPUs are published as MIGPool does with
// migOpts.
func newPoolCluster(t *testing.T, list []GPU, migOpts MIGOptions) *cluster {
	pool, notes := MIGPool(list, Options{}, migOpts)
	for _, n := range notes {
		t.Log(n)
	}
	checkSliceLimits(t, pool)
	c := &cluster{
		t:       t,
		classes: loadClasses(t),
		state: structured.AllocatedState{
			AllocatedDevices:         sets.New[structured.DeviceID](),
			AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
			AggregatedCapacity:       structured.NewConsumedCapacityCollection(),
		},
	}
	for i, s := range pool.Slices {
		c.slices = append(c.slices, &resourceapi.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", nodeName, i)},
			Spec: resourceapi.ResourceSliceSpec{
				Driver:         names.DriverName,
				Pool:           resourceapi.ResourcePool{Name: nodeName, Generation: 1, ResourceSliceCount: int64(len(pool.Slices))},
				NodeName:       ptr.To(nodeName),
				Devices:        s.Devices,
				SharedCounters: s.SharedCounters,
			},
		})
	}
	return c
}

// migRequest asks mig.vgpu.dra.dev for one device matching the CEL
// condition cond (on attributes a, e.g. `a.profile == "3g.71gb"`).
func migRequest(cond string, capacity map[string]string) resourceapi.ResourceClaimSpec {
	spec := gpuRequest(names.MIGDeviceClass, capacity)
	if cond != "" {
		spec.Devices.Requests[0].Exactly.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: strings.ReplaceAll(cond, "a.", `device.attributes["vgpu.dra.dev"].`),
		}}}
	}
	return spec
}

func allocated(r *resourceapi.AllocationResult) string {
	if r == nil {
		return ""
	}
	return r.Devices.Results[0].Device
}

var firstOneG = map[string]string{"H100-80GB": "gpu-0-mig-1g-10gb-3", "H200-141GB": "gpu-0-mig-1g-18gb-3"}

func TestAllocateMIGTwoThreeG(t *testing.T) {
	for _, g := range geometries {
		t.Run(g.name, func(t *testing.T) {
			c := newMIGCluster(t, []GPU{migGPU(t, 0, g.config)})
			profile := map[string]string{
				"A100-40GB": "3g.20gb", "A100-80GB": "3g.40gb", "H100-80GB": "3g.40gb", "H200-141GB": "3g.71gb",
			}[g.name]
			results := c.fill(migRequest(fmt.Sprintf(`a.profile == %q`, profile), nil))
			var got []string
			for _, r := range results {
				got = append(got, allocated(r))
			}
			label := profileLabel(profile)
			assert.Equal(t, []string{"gpu-0-mig-" + label + "-0", "gpu-0-mig-" + label + "-4"}, got, "two 3g fit, a third does not")
			assert.Nil(t, c.allocate(gpuRequest(names.DeviceClass, map[string]string{"memory": "1Gi"})), "no software slice next to MIG instances")
			oneG := allocated(c.allocate(migRequest(`a.profile.startsWith("1g.")`, nil)))
			if g.config.MIGProfiles.GpuInstancePlacements[nvml.GPU_INSTANCE_PROFILE_3_SLICE][0].Size == 4 {
				assert.Empty(t, oneG, "two 3g take all eight memory slices")
			} else {
				// The Hopper mocks place 3g on 3 of 7 memory slices: slice 3
				// stays free for one 1g, and the 7th compute slice with it.
				assert.Equal(t, firstOneG[g.name], oneG)
				assert.Nil(t, c.allocate(migRequest("", nil)), "all seven compute slices taken")
			}
		})
	}
}

func TestAllocateMIGExcludesSoftwareSlices(t *testing.T) {
	h200 := gpus.H200_SXM5_141GB
	t.Run("software slice first", func(t *testing.T) {
		c := newMIGCluster(t, []GPU{migGPU(t, 0, h200)})
		r := c.allocate(gpuRequest(names.DeviceClass, map[string]string{"memory": "10Gi", "cores": "30"}))
		assert.Equal(t, "gpu-0", allocated(r))
		assert.Nil(t, c.allocate(migRequest(`a.profile == "1g.18gb"`, nil)), "no MIG instance on a GPU with software slices")
		// More software slices still share the whole-GPU device: its
		// counters were charged once, at its first share.
		r = c.allocate(gpuRequest(names.DeviceClass, map[string]string{"memory": "10Gi", "cores": "30"}))
		assert.Equal(t, "gpu-0", allocated(r))
	})
	t.Run("MIG first", func(t *testing.T) {
		c := newMIGCluster(t, []GPU{migGPU(t, 0, h200), {Info: h100(1)}})
		assert.Equal(t, "gpu-0-mig-1g-18gb-0", allocated(c.allocate(migRequest(`a.profile == "1g.18gb"`, nil))))
		r := c.allocate(gpuRequest(names.DeviceClass, map[string]string{"memory": "10Gi", "cores": "30"}))
		assert.Equal(t, "gpu-1", allocated(r), "the software slice lands on the plain GPU")
		assert.Nil(t, c.allocate(gpuRequest(names.DeviceClass, nil)), "no whole GPU is left")
	})
	t.Run("whole GPU", func(t *testing.T) {
		c := newMIGCluster(t, []GPU{migGPU(t, 0, h200)})
		r := c.allocate(gpuRequest(names.DeviceClass, nil))
		require.Equal(t, "gpu-0", allocated(r))
		memory, _ := consumed(t, r)
		assert.Equal(t, int64(144384)<<20, memory, "all of the 7g instance")
		assert.Nil(t, c.allocate(migRequest("", nil)))
	})
}

func TestAllocateMIGPlacements(t *testing.T) {
	h200 := gpus.H200_SXM5_141GB
	t.Run("1g at slice 4 blocks the 3g at slice 4", func(t *testing.T) {
		c := newMIGCluster(t, []GPU{migGPU(t, 0, h200)})
		require.Equal(t, "gpu-0-mig-1g-18gb-4", allocated(c.allocate(migRequest(`a.profile == "1g.18gb" && a.placementStart == 4`, nil))))
		assert.Nil(t, c.allocate(migRequest(`a.profile == "3g.71gb" && a.placementStart == 4`, nil)))
		assert.Equal(t, "gpu-0-mig-3g-71gb-0", allocated(c.allocate(migRequest(`a.profile == "3g.71gb"`, nil))))
		assert.Nil(t, c.allocate(migRequest(`a.profile == "3g.71gb"`, nil)), "no free placement for a second 3g")
	})
	t.Run("1g at slice 4 leaves the 4g, 1g at slice 0 blocks it", func(t *testing.T) {
		c := newMIGCluster(t, []GPU{migGPU(t, 0, h200)})
		require.NotNil(t, c.allocate(migRequest(`a.profile == "1g.18gb" && a.placementStart == 4`, nil)))
		assert.Equal(t, "gpu-0-mig-4g-71gb-0", allocated(c.allocate(migRequest(`a.profile == "4g.71gb"`, nil))),
			"4g sits on slices 0-3, clear of slice 4, as on the hardware")

		c = newMIGCluster(t, []GPU{migGPU(t, 0, h200)})
		require.NotNil(t, c.allocate(migRequest(`a.profile == "1g.18gb" && a.placementStart == 0`, nil)))
		assert.Nil(t, c.allocate(migRequest(`a.profile == "4g.71gb"`, nil)))
		assert.Nil(t, c.allocate(migRequest(`a.profile == "7g.141gb"`, nil)))
	})
	t.Run("seven 1g fill the GPU", func(t *testing.T) {
		c := newMIGCluster(t, []GPU{migGPU(t, 0, h200)})
		results := c.fill(migRequest(`a.profile == "1g.18gb"`, nil))
		assert.Len(t, results, 7)
		assert.Nil(t, c.allocate(migRequest("", nil)))
	})
	t.Run("one 1g+me per GPU", func(t *testing.T) {
		c := newMIGCluster(t, []GPU{migGPU(t, 0, h200)})
		assert.Len(t, c.fill(migRequest(`a.profile == "1g.18gb+me"`, nil)), 1)
		assert.Len(t, c.fill(migRequest(`a.profile == "1g.18gb"`, nil)), 6)
	})
	t.Run("at most four 1g.35gb", func(t *testing.T) {
		c := newMIGCluster(t, []GPU{migGPU(t, 0, h200)})
		assert.Len(t, c.fill(migRequest(`a.profile == "1g.35gb"`, nil)), 4)
	})
	t.Run("A100 3g and 4g share the GPU", func(t *testing.T) {
		c := newMIGCluster(t, []GPU{migGPU(t, 0, gpus.A100_SXM4_40GB)})
		assert.Equal(t, "gpu-0-mig-4g-20gb-0", allocated(c.allocate(migRequest(`a.profile == "4g.20gb"`, nil))))
		assert.Equal(t, "gpu-0-mig-3g-20gb-4", allocated(c.allocate(migRequest(`a.profile == "3g.20gb"`, nil))))
		assert.Nil(t, c.allocate(migRequest("", nil)))
	})
	t.Run("placements never overlap", func(t *testing.T) {
		// Every profile in turn, largest first, until nothing fits: the
		// allocated placements are pairwise disjoint and within 7 compute slices.
		for _, g := range geometries {
			c := newMIGCluster(t, []GPU{migGPU(t, 0, g.config)})
			var taken []discovery.MIGPlacement
			slices := 0
			for {
				r := c.allocate(migRequest("", nil))
				if r == nil {
					break
				}
				dev := findDevice(t, c, allocated(r))
				pl := discovery.MIGPlacement{Start: int(*dev.Attributes[names.AttrPlacementStart].IntValue), Size: int(*dev.Attributes[names.AttrPlacementSize].IntValue)}
				for _, o := range taken {
					assert.False(t, pl.Overlaps(o), "%s: %v overlaps %v", g.name, pl, o)
				}
				taken = append(taken, pl)
				n := dev.ConsumesCounters[0].Counters[names.CounterComputeSlices].Value
				slices += int(n.Value())
			}
			assert.LessOrEqual(t, slices, 7, g.name)
			assert.NotEmpty(t, taken, g.name)
		}
	})
}

func findDevice(t *testing.T, c *cluster, name string) resourceapi.Device {
	t.Helper()
	for _, s := range c.slices {
		for _, d := range s.Spec.Devices {
			if d.Name == name {
				return d
			}
		}
	}
	t.Fatalf("no device %s", name)
	return resourceapi.Device{}
}

func TestAllocateMIGShared(t *testing.T) {
	c := newMIGCluster(t, []GPU{migGPU(t, 0, gpus.H200_SXM5_141GB)})
	spec := migRequest(`a.profile == "3g.71gb"`, map[string]string{"memory": "10Gi", "cores": "30"})
	var got []string
	for _, r := range c.fill(spec) {
		got = append(got, allocated(r))
		memory, cores := consumed(t, r)
		assert.Equal(t, 10*gi, memory)
		assert.Equal(t, int64(30), cores)
		assert.NotNil(t, r.Devices.Results[0].ShareID)
	}
	// 100 cores of each instance take three claims of 30; both 3g
	// instances are shared before anything else is considered.
	assert.Equal(t, []string{
		"gpu-0-mig-3g-71gb-0", "gpu-0-mig-3g-71gb-0", "gpu-0-mig-3g-71gb-0",
		"gpu-0-mig-3g-71gb-4", "gpu-0-mig-3g-71gb-4", "gpu-0-mig-3g-71gb-4",
	}, got)
	// Memory limits within one instance: 72704Mi holds seven 10Gi claims.
	c = newMIGCluster(t, []GPU{migGPU(t, 0, gpus.H200_SXM5_141GB)})
	mem := c.fill(migRequest(`a.profile == "3g.71gb" && a.placementStart == 0`, map[string]string{"memory": "10Gi"}))
	assert.Len(t, mem, 7)
	assert.Nil(t, c.allocate(gpuRequest(names.DeviceClass, map[string]string{"memory": "1Gi"})), "the GPU is in MIG use")
	assert.Equal(t, "gpu-0-mig-3g-71gb-4", allocated(c.allocate(migRequest(`a.profile == "3g.71gb"`, nil))))
}

// withFeatures runs the allocator of c with f until the test ends.
func withFeatures(t *testing.T, f structured.Features) {
	saved := features
	features = f
	t.Cleanup(func() { features = saved })
}

func TestAllocateMIGFeatureGateOff(t *testing.T) {
	off := features
	off.PartitionableDevices = false
	withFeatures(t, off)
	h200 := gpus.H200_SXM5_141GB

	// With counters published, a scheduler without the gate allocates no
	// device that consumes them: not even the whole GPU. This is why the
	// plugin must publish without counters when the gate is off.
	c := newMIGCluster(t, []GPU{migGPU(t, 0, h200)})
	assert.Nil(t, c.allocate(gpuRequest(names.DeviceClass, map[string]string{"memory": "1Gi"})))
	assert.Nil(t, c.allocate(migRequest("", nil)))

	// Published for a cluster without the gate: software slices work.
	pool, notes := MIGPool([]GPU{migGPU(t, 0, h200)}, Options{}, MIGOptions{})
	require.Len(t, notes, 1)
	checkSliceLimits(t, pool)
	c.slices = []*resourceapi.ResourceSlice{{
		ObjectMeta: metav1.ObjectMeta{Name: nodeName + "-0"},
		Spec: resourceapi.ResourceSliceSpec{
			Driver:   names.DriverName,
			Pool:     resourceapi.ResourcePool{Name: nodeName, Generation: 2, ResourceSliceCount: 1},
			NodeName: ptr.To(nodeName),
			Devices:  pool.Slices[0].Devices,
		},
	}}
	assert.Len(t, c.fill(gpuRequest(names.DeviceClass, map[string]string{"memory": "10Gi", "cores": "10"})), 10)
	assert.Nil(t, c.allocate(migRequest("", nil)), "no MIG devices without the gate")
}

func TestAllocateMIGStaticInstances(t *testing.T) {
	// An admin's 3g at 0: claims get it as a fixed device, the 4g and the
	// whole GPU are not offered, the other 3g is.
	c := newMIGCluster(t, []GPU{migGPU(t, 0, gpus.H200_SXM5_141GB, [2]int{nvml.GPU_INSTANCE_PROFILE_3_SLICE, 0})})
	assert.Nil(t, c.allocate(gpuRequest(names.DeviceClass, map[string]string{"memory": "1Gi"})), "no whole-GPU device")
	assert.Nil(t, c.allocate(migRequest(`a.profile == "4g.71gb"`, nil)))
	assert.Equal(t, "gpu-0-mig-3g-71gb-0", allocated(c.allocate(migRequest(`a.profile == "3g.71gb" && a.static`, nil))))
	assert.Equal(t, "gpu-0-mig-3g-71gb-4", allocated(c.allocate(migRequest(`a.profile == "3g.71gb"`, nil))))
	assert.Equal(t, "gpu-0-mig-1g-18gb-3", allocated(c.allocate(migRequest(`a.profile == "1g.18gb"`, nil))))
	assert.Nil(t, c.allocate(migRequest("", nil)))
}

func TestParseMIGDeviceName(t *testing.T) {
	s, err := server.New(server.WithGPUs(gpus.H200_SXM5_141GB))
	require.NoError(t, err)
	dev := s.Devices[0].(*server.Device)
	_, ret := dev.SetMigMode(nvml.DEVICE_MIG_ENABLE)
	require.Equal(t, nvml.SUCCESS, ret)
	mig, err := discovery.ReadMIG(dev, false)
	require.NoError(t, err)
	n := 0
	for _, p := range mig.Profiles {
		for _, pl := range p.Placements {
			name := MIGDeviceName(12, p, pl.Start)
			index, label, start, ok := ParseMIGDeviceName(name)
			require.True(t, ok, name)
			assert.Equal(t, 12, index, name)
			assert.Equal(t, pl.Start, start, name)
			back, ok := MIGProfileByLabel(*mig, label)
			require.True(t, ok, name)
			assert.Equal(t, p.ID, back.ID, name)
			n++
		}
	}
	assert.Equal(t, 28, n)
	for _, bad := range []string{"gpu-0", "gpu-0-mig-", "gpu-0-mig-3g-71gb", "gpu-x-mig-3g-71gb-4", "gpu-0-mig-3g-71gb-04",
		"gpu-00-mig-3g-71gb-4", "mig-3g-71gb-4", "gpu-0-mig--4", "gpu--1-mig-3g-71gb-4"} {
		_, _, _, ok := ParseMIGDeviceName(bad)
		assert.False(t, ok, bad)
	}
	_, ok := MIGProfileByLabel(*mig, "9g-1gb")
	assert.False(t, ok)
}

func TestAllocateMIGBlockedInstance(t *testing.T) {
	// The plugin's 3g at 4 is stuck being destroyed (NVML said in use):
	// nothing that prepare would refuse is offered, neither the 3g at 4
	// itself, nor what overlaps it, nor the whole GPU; the rest is.
	g := migGPU(t, 0, gpus.H200_SXM5_141GB, [2]int{nvml.GPU_INSTANCE_PROFILE_3_SLICE, 4})
	g.Owned = g.MIG.Instances
	g.Blocked = g.MIG.Instances
	res := GPUDevices(g, Options{}, partitionable)
	assert.Empty(t, res.Notes, "a passing state, not logged")
	assert.NotContains(t, deviceNames(res.Devices), "gpu-0", "no whole-GPU device")
	assert.NotContains(t, deviceNames(res.Devices), "gpu-0-mig-3g-71gb-4", "not offered while it is destroyed")
	for _, d := range res.Devices {
		assert.Nil(t, d.Attributes[names.AttrStatic].BoolValue, "%s: not a fixed device", d.Name)
	}

	c := newMIGCluster(t, []GPU{g})
	assert.Nil(t, c.allocate(gpuRequest(names.DeviceClass, map[string]string{"memory": "1Gi"})), "no software slice")
	assert.Equal(t, "gpu-0-mig-3g-71gb-0", allocated(c.allocate(migRequest(`a.profile == "3g.71gb"`, nil))))
	assert.Nil(t, c.allocate(migRequest(`a.profile == "3g.71gb"`, nil)), "the 3g at 4 is not offered")
	assert.Nil(t, c.allocate(migRequest(`a.profile == "1g.18gb" && a.placementStart >= 4`, nil)), "what overlaps it neither")

	// Once it is gone, everything is offered again.
	g.Blocked = nil
	g.MIG.Instances = nil
	c = newMIGCluster(t, []GPU{g})
	assert.Equal(t, "gpu-0", allocated(c.allocate(gpuRequest(names.DeviceClass, map[string]string{"memory": "1Gi"}))))
}
