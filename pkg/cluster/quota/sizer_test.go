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

package quota

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/cluster/allocator"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/devices"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/discovery"
)

const mi = int64(1) << 20

// publishedGPU is the device the plugin publishes for a GPU of memory
// bytes, with the default policy (min 256Mi, step 1Mi) unless opts say
// otherwise.
func publishedGPU(index int, product string, memory int64, opts devices.Options) resourceapi.Device {
	return devices.Device(discovery.Info{
		UUID: fmt.Sprintf("GPU-%08d-0000-0000-0000-000000000000", index), Index: index, Minor: index,
		ProductName: product, Brand: "NVIDIA", Architecture: "Hopper", MemoryBytes: uint64(memory),
		PCIBusID: fmt.Sprintf("0000:%02x:00.0", index+1), NUMANode: -1,
	}, opts)
}

// testSizer sizes against one node's slice of gpus, with this driver's
// class "vgpu.dra.dev" (and a work-conserving one) and a NIC class.
func testSizer(t testing.TB, gpus ...resourceapi.Device) *Sizer {
	slices := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	require.NoError(t, slices.Add(&resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "node-a-vgpu"},
		Spec: resourceapi.ResourceSliceSpec{
			Driver: "vgpu.dra.dev", NodeName: new("node-a"),
			Pool:    resourceapi.ResourcePool{Name: "node-a", Generation: 1, ResourceSliceCount: 1},
			Devices: gpus,
		},
	}))
	classes := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for name, expr := range map[string]string{
		"vgpu.dra.dev":                 `device.driver == "vgpu.dra.dev"`,
		"vgpu-work-conserving.dra.dev": `device.driver == 'vgpu.dra.dev'`,
		"nic.example.com":              `device.driver == "nic.example.com"`,
	} {
		require.NoError(t, classes.Add(&resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: resourceapi.DeviceClassSpec{
			Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: expr}}},
		}}))
	}
	return NewSizer("vgpu.dra.dev", allocator.ClassLister(resourcelisters.NewDeviceClassLister(classes)), resourcelisters.NewResourceSliceLister(slices))
}

func capacity(requests map[resourceapi.QualifiedName]string) *resourceapi.CapacityRequirements {
	if requests == nil {
		return nil
	}
	c := &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{}}
	for k, v := range requests {
		c.Requests[k] = resource.MustParse(v)
	}
	return c
}

// The grant is what the structured allocator consumes on the published
// devices: rounded up to min + n*step, the default where nothing is asked.
func TestSizerRoundsLikeTheAllocator(t *testing.T) {
	ctx := context.Background()
	coarse := devices.Options{MemoryMin: 1 << 30, MemoryStep: 512 * mi}
	s := testSizer(t,
		publishedGPU(0, "NVIDIA H100 80GB HBM3", 80*gi, devices.Options{}),
		publishedGPU(1, "Tesla T4", 16*gi, coarse))
	tests := []struct {
		name      string
		selectors []resourceapi.DeviceSelector
		requests  map[resourceapi.QualifiedName]string
		want      Usage
	}{
		{name: "one byte is the larger minimum", requests: map[resourceapi.QualifiedName]string{"memory": "1"}, want: Usage{MemoryBytes: 1 * gi}},
		{name: "1Ki", requests: map[resourceapi.QualifiedName]string{"memory": "1Ki"}, want: Usage{MemoryBytes: 1 * gi}},
		{name: "1m", requests: map[resourceapi.QualifiedName]string{"memory": "1m"}, want: Usage{MemoryBytes: 1 * gi}},
		{name: "up to the step", requests: map[resourceapi.QualifiedName]string{"memory": "1100Mi", "cores": "7"}, want: Usage{MemoryBytes: 1536 * mi, Cores: 7}},
		{name: "nothing asked: a whole GPU, no cores", want: Usage{MemoryBytes: 80 * gi}},
		{name: "only cores: a whole GPU's memory", requests: map[resourceapi.QualifiedName]string{"cores": "30"}, want: Usage{MemoryBytes: 80 * gi, Cores: 30}},
		{
			name:      "selectors narrow the devices",
			selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: `device.attributes["vgpu.dra.dev"].productName == "NVIDIA H100 80GB HBM3"`}}},
			requests:  map[resourceapi.QualifiedName]string{"memory": "1"},
			want:      Usage{MemoryBytes: 256 * mi},
		},
		{
			name:      "whole T4",
			selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: `device.attributes["vgpu.dra.dev"].productName.contains("T4")`}}},
			want:      Usage{MemoryBytes: 16 * gi},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.Grant(ctx, "vgpu.dra.dev", tc.selectors, capacity(tc.requests))
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}

	_, err := s.Grant(ctx, "vgpu.dra.dev", []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: `device.attributes["vgpu.dra.dev"].productName == "A100"`}}}, nil)
	assert.ErrorIs(t, err, ErrNoDevice)
	_, err = s.Grant(ctx, "vgpu.dra.dev", nil, capacity(map[resourceapi.QualifiedName]string{"memory": "100Gi"}))
	assert.ErrorIs(t, err, ErrNoDevice, "more than any GPU has")
	_, err = s.Grant(ctx, "vgpu.dra.dev", nil, capacity(map[resourceapi.QualifiedName]string{"vgpu.dra.dev/memory": "1Gi"}))
	assert.ErrorIs(t, err, ErrNoDevice, "the allocator matches capacity names exactly: no device publishes a qualified one")
	_, err = testSizer(t).Grant(ctx, "vgpu.dra.dev", nil, nil)
	assert.ErrorIs(t, err, ErrNoDevice, "no GPU published")
}

// Many GPUs of one kind are sized once, not once per GPU, and a tainted
// GPU still counts (it may recover).
func TestSizerGroupsDevices(t *testing.T) {
	var gpus []resourceapi.Device
	for i := range 16 {
		gpus = append(gpus, publishedGPU(i, "NVIDIA H100 80GB HBM3", 80*gi, devices.Options{}))
	}
	gpus[0].Taints = []resourceapi.DeviceTaint{{Key: "vgpu.dra.dev/xid", Value: "79", Effect: resourceapi.DeviceTaintEffectNoExecute}}
	s := testSizer(t, gpus...)
	groups, _, err := s.deviceGroups()
	require.NoError(t, err)
	assert.Len(t, groups, 1)
	got, err := s.Grant(context.Background(), "vgpu.dra.dev", nil, capacity(map[resourceapi.QualifiedName]string{"memory": "1"}))
	require.NoError(t, err)
	assert.Equal(t, Usage{MemoryBytes: 256 * mi}, got)
}

// Grouping every published device is done once per change of the slices,
// not once per admitted claim.
func TestSizerReusesGroupsUntilTheSlicesChange(t *testing.T) {
	slice := func(name, rv string, memory int64, n int) *resourceapi.ResourceSlice {
		var gpus []resourceapi.Device
		for i := range n {
			gpus = append(gpus, publishedGPU(i, "GPU", memory, devices.Options{}))
		}
		return &resourceapi.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: rv},
			Spec: resourceapi.ResourceSliceSpec{
				Driver: "vgpu.dra.dev", NodeName: new(name),
				Pool:    resourceapi.ResourcePool{Name: name, Generation: 1, ResourceSliceCount: 1},
				Devices: gpus,
			},
		}
	}
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	require.NoError(t, indexer.Add(slice("node-a", "1", 80*gi, 8)))
	s := testSizer(t)
	s.Slices = resourcelisters.NewResourceSliceLister(indexer)
	whole := func() int64 {
		t.Helper()
		u, err := s.Grant(context.Background(), "vgpu.dra.dev", nil, nil)
		require.NoError(t, err)
		return u.MemoryBytes
	}

	first, _, err := s.deviceGroups()
	require.NoError(t, err)
	again, _, err := s.deviceGroups()
	require.NoError(t, err)
	require.Len(t, again, 1)
	assert.Same(t, &first[0][0], &again[0][0], "unchanged slices: the groups are reused")
	assert.Equal(t, 80*gi, whole())

	require.NoError(t, indexer.Update(slice("node-a", "2", 141*gi, 8)))
	assert.Equal(t, 141*gi, whole(), "an updated slice is seen")

	require.NoError(t, indexer.Add(slice("node-b", "3", 192*gi, 8)))
	groups, _, err := s.deviceGroups()
	require.NoError(t, err)
	assert.Len(t, groups, 2, "a new slice is seen")
	assert.Equal(t, 192*gi, whole())

	require.NoError(t, indexer.Delete(slice("node-b", "3", 192*gi, 8)))
	assert.Equal(t, 141*gi, whole(), "a deleted slice is gone")
}

// A request of a shape sized before is answered from the cache until the
// slices or the class change.
func TestSizerCachesGrantsPerShape(t *testing.T) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	require.NoError(t, indexer.Add(&resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "node-a", ResourceVersion: "1"},
		Spec: resourceapi.ResourceSliceSpec{
			Driver: "vgpu.dra.dev", NodeName: new("node-a"),
			Pool:    resourceapi.ResourcePool{Name: "node-a", Generation: 1, ResourceSliceCount: 1},
			Devices: []resourceapi.Device{publishedGPU(0, "GPU", 80*gi, devices.Options{})},
		},
	}))
	s := testSizer(t)
	s.Slices = resourcelisters.NewResourceSliceLister(indexer)
	ask := capacity(map[resourceapi.QualifiedName]string{"memory": "4Gi", "cores": "10"})
	grant := func() Usage {
		t.Helper()
		u, err := s.Grant(context.Background(), "vgpu.dra.dev", nil, ask)
		require.NoError(t, err)
		return u
	}
	want := Usage{MemoryBytes: 4 * gi, Cores: 10}
	require.Equal(t, want, grant())
	require.Len(t, s.grants, 1, "the grant is cached")

	// Plant a different answer: only a cache hit can return it.
	planted := Usage{MemoryBytes: 1}
	for k := range s.grants {
		s.grants[k] = planted
	}
	assert.Equal(t, planted, grant(), "the same shape again is answered from the cache")
	other, err := s.Grant(context.Background(), "vgpu.dra.dev", nil, capacity(map[resourceapi.QualifiedName]string{"memory": "8Gi"}))
	require.NoError(t, err)
	assert.Equal(t, Usage{MemoryBytes: 8 * gi}, other, "another shape is sized")

	for k := range s.grants {
		s.grants[k] = planted
	}
	require.NoError(t, indexer.Update(&resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "node-a", ResourceVersion: "2"},
		Spec: resourceapi.ResourceSliceSpec{
			Driver: "vgpu.dra.dev", NodeName: new("node-a"),
			Pool:    resourceapi.ResourcePool{Name: "node-a", Generation: 2, ResourceSliceCount: 1},
			Devices: []resourceapi.Device{publishedGPU(0, "GPU", 80*gi, devices.Options{})},
		},
	}))
	assert.Equal(t, want, grant(), "a slice change empties the cache")

	// A class that now selects nothing of this driver: sized afresh, and fails.
	for k := range s.grants {
		s.grants[k] = planted
	}
	classes := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	require.NoError(t, classes.Add(&resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "vgpu.dra.dev", ResourceVersion: "9"}, Spec: resourceapi.DeviceClassSpec{
		Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: `device.driver == "other.example.com"`}}},
	}}))
	s.Classes = allocator.ClassLister(resourcelisters.NewDeviceClassLister(classes))
	_, err = s.Grant(context.Background(), "vgpu.dra.dev", nil, ask)
	assert.ErrorIs(t, err, ErrNoDevice, "a changed class is sized afresh")
}
