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

package allocmetrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/names"
)

const driver = "vgpu.dra.dev"

func device(name, uuid string, index int64, memory string) resourceapi.Device {
	return resourceapi.Device{
		Name: name,
		Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			names.AttrUUID:        {StringValue: ptr.To(uuid)},
			names.AttrIndex:       {IntValue: ptr.To(index)},
			names.AttrProductName: {StringValue: ptr.To("H100")},
		},
		Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
			names.CapacityMemory: {Value: resource.MustParse(memory)},
			names.CapacityCores:  {Value: resource.MustParse("100")},
		},
	}
}

func result(device, memory, cores string) resourceapi.DeviceRequestAllocationResult {
	r := resourceapi.DeviceRequestAllocationResult{Request: "gpu", Driver: driver, Pool: "node-a", Device: device}
	if memory != "" {
		r.ConsumedCapacity = map[resourceapi.QualifiedName]resource.Quantity{
			names.CapacityMemory: resource.MustParse(memory), names.CapacityCores: resource.MustParse(cores),
		}
	}
	return r
}

func claim(name string, owner string, reservedFor []string, results ...resourceapi.DeviceRequestAllocationResult) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team"}}
	if owner != "" {
		c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: owner, UID: "u"}}
	}
	for _, p := range reservedFor {
		c.Status.ReservedFor = append(c.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: p, UID: "u"})
	}
	if results != nil {
		c.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: results}}
	}
	return c
}

func TestCollector(t *testing.T) {
	slices := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, s := range []*resourceapi.ResourceSlice{
		{ObjectMeta: metav1.ObjectMeta{Name: "node-a-old"}, Spec: resourceapi.ResourceSliceSpec{
			Driver: driver, NodeName: ptr.To("node-a"), Pool: resourceapi.ResourcePool{Name: "node-a", Generation: 1},
			Devices: []resourceapi.Device{device("gpu-0", "GPU-stale", 0, "1Gi")}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}, Spec: resourceapi.ResourceSliceSpec{
			Driver: driver, NodeName: ptr.To("node-a"), Pool: resourceapi.ResourcePool{Name: "node-a", Generation: 2},
			Devices: []resourceapi.Device{device("gpu-0", "GPU-0", 0, "80Gi"), device("gpu-1", "GPU-1", 1, "80Gi")}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "other"}, Spec: resourceapi.ResourceSliceSpec{
			Driver: "other.example.com", NodeName: ptr.To("node-a"), Pool: resourceapi.ResourcePool{Name: "node-a", Generation: 9},
			Devices: []resourceapi.Device{device("nic-0", "NIC", 0, "1Gi")}}},
	} {
		require.NoError(t, slices.Add(s))
	}
	claims := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, c := range []*resourceapi.ResourceClaim{
		claim("a", "pod-a", []string{"pod-a"}, result("gpu-0", "4Gi", "30")),
		claim("b", "", []string{"pod-b"}, result("gpu-0", "60Gi", "20")),
		claim("shared", "", []string{"x", "y"}, result("gpu-1", "10Gi", "0")),
		claim("whole", "", nil, result("gpu-1", "", "")),
		claim("pending", "pod-p", nil),
	} {
		require.NoError(t, claims.Add(c))
	}
	c := &Collector{DriverName: driver, Slices: resourcelisters.NewResourceSliceLister(slices), Claims: resourcelisters.NewResourceClaimLister(claims)}

	want := `
# HELP vgpu_dra_claim_cores_granted SM time granted to the claim on one GPU, in percent of the GPU (0 = best effort).
# TYPE vgpu_dra_claim_cores_granted gauge
vgpu_dra_claim_cores_granted{claim="a",device="gpu-0",device_index="0",device_uuid="GPU-0",namespace="team",node="node-a",pod="pod-a"} 30
vgpu_dra_claim_cores_granted{claim="b",device="gpu-0",device_index="0",device_uuid="GPU-0",namespace="team",node="node-a",pod="pod-b"} 20
vgpu_dra_claim_cores_granted{claim="shared",device="gpu-1",device_index="1",device_uuid="GPU-1",namespace="team",node="node-a",pod=""} 0
vgpu_dra_claim_cores_granted{claim="whole",device="gpu-1",device_index="1",device_uuid="GPU-1",namespace="team",node="node-a",pod=""} 0
# HELP vgpu_dra_claim_memory_granted_bytes GPU memory granted to the claim on one GPU.
# TYPE vgpu_dra_claim_memory_granted_bytes gauge
vgpu_dra_claim_memory_granted_bytes{claim="a",device="gpu-0",device_index="0",device_uuid="GPU-0",namespace="team",node="node-a",pod="pod-a"} 4.294967296e+09
vgpu_dra_claim_memory_granted_bytes{claim="b",device="gpu-0",device_index="0",device_uuid="GPU-0",namespace="team",node="node-a",pod="pod-b"} 6.442450944e+10
vgpu_dra_claim_memory_granted_bytes{claim="shared",device="gpu-1",device_index="1",device_uuid="GPU-1",namespace="team",node="node-a",pod=""} 1.073741824e+10
vgpu_dra_claim_memory_granted_bytes{claim="whole",device="gpu-1",device_index="1",device_uuid="GPU-1",namespace="team",node="node-a",pod=""} 8.589934592e+10
# HELP vgpu_dra_gpu_memory_allocated_bytes GPU memory granted to allocated claims on the GPU.
# TYPE vgpu_dra_gpu_memory_allocated_bytes gauge
vgpu_dra_gpu_memory_allocated_bytes{device="gpu-0",device_index="0",device_uuid="GPU-0",node="node-a",product="H100"} 6.8719476736e+10
vgpu_dra_gpu_memory_allocated_bytes{device="gpu-1",device_index="1",device_uuid="GPU-1",node="node-a",product="H100"} 9.6636764160e+10
# HELP vgpu_dra_gpu_shares Number of allocated claim shares on the GPU.
# TYPE vgpu_dra_gpu_shares gauge
vgpu_dra_gpu_shares{device="gpu-0",device_index="0",device_uuid="GPU-0",node="node-a",product="H100"} 2
vgpu_dra_gpu_shares{device="gpu-1",device_index="1",device_uuid="GPU-1",node="node-a",product="H100"} 2
# HELP vgpu_dra_node_largest_free_memory_bytes Largest unallocated GPU memory on a single GPU of the node: the biggest memory request that still fits there.
# TYPE vgpu_dra_node_largest_free_memory_bytes gauge
vgpu_dra_node_largest_free_memory_bytes{node="node-a"} 1.7179869184e+10
# HELP vgpu_dra_node_free_memory_bytes Unallocated GPU memory summed over the node's GPUs.
# TYPE vgpu_dra_node_free_memory_bytes gauge
vgpu_dra_node_free_memory_bytes{node="node-a"} 1.7179869184e+10
`
	require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(want),
		"vgpu_dra_claim_cores_granted", "vgpu_dra_claim_memory_granted_bytes", "vgpu_dra_gpu_memory_allocated_bytes",
		"vgpu_dra_gpu_shares", "vgpu_dra_node_largest_free_memory_bytes", "vgpu_dra_node_free_memory_bytes"))
	require.Equal(t, 2, testutil.CollectAndCount(c, "vgpu_dra_gpu_memory_capacity_bytes"), "the stale generation and other drivers are ignored")
}

// A GPU published with its MPS device has two devices of one UUID: each
// gets its series, the MPS claims are on the MPS device, and the node's
// free memory counts the GPU once.
func TestCollectorMPS(t *testing.T) {
	mps := device("gpu-0-mps", "GPU-0", 0, "80Gi")
	mps.Attributes[names.AttrMPS] = resourceapi.DeviceAttribute{BoolValue: ptr.To(true)}
	slices := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	require.NoError(t, slices.Add(&resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}, Spec: resourceapi.ResourceSliceSpec{
		Driver: driver, NodeName: ptr.To("node-a"), Pool: resourceapi.ResourcePool{Name: "node-a", Generation: 1},
		Devices: []resourceapi.Device{device("gpu-0", "GPU-0", 0, "80Gi"), mps, device("gpu-1", "GPU-1", 1, "80Gi")}}}))
	claims := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, c := range []*resourceapi.ResourceClaim{
		claim("a", "pod-a", nil, result("gpu-0-mps", "20Gi", "30")),
		claim("b", "pod-b", nil, result("gpu-0-mps", "10Gi", "50")),
		claim("c", "pod-c", nil, result("gpu-1", "70Gi", "10")),
	} {
		require.NoError(t, claims.Add(c))
	}
	c := &Collector{DriverName: driver, Slices: resourcelisters.NewResourceSliceLister(slices), Claims: resourcelisters.NewResourceClaimLister(claims)}

	want := `
# HELP vgpu_dra_gpu_cores_allocated SM time granted to allocated claims on the GPU, in percent of the GPU.
# TYPE vgpu_dra_gpu_cores_allocated gauge
vgpu_dra_gpu_cores_allocated{device="gpu-0",device_index="0",device_uuid="GPU-0",node="node-a",product="H100"} 0
vgpu_dra_gpu_cores_allocated{device="gpu-0-mps",device_index="0",device_uuid="GPU-0",node="node-a",product="H100"} 80
vgpu_dra_gpu_cores_allocated{device="gpu-1",device_index="1",device_uuid="GPU-1",node="node-a",product="H100"} 10
# HELP vgpu_dra_node_largest_free_memory_bytes Largest unallocated GPU memory on a single GPU of the node: the biggest memory request that still fits there.
# TYPE vgpu_dra_node_largest_free_memory_bytes gauge
vgpu_dra_node_largest_free_memory_bytes{node="node-a"} 5.36870912e+10
# HELP vgpu_dra_node_free_memory_bytes Unallocated GPU memory summed over the node's GPUs.
# TYPE vgpu_dra_node_free_memory_bytes gauge
vgpu_dra_node_free_memory_bytes{node="node-a"} 6.442450944e+10
`
	require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(want),
		"vgpu_dra_gpu_cores_allocated", "vgpu_dra_node_largest_free_memory_bytes", "vgpu_dra_node_free_memory_bytes"))
}
