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

package allocator

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/names"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/devices"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/discovery"
)

const (
	gi        = int64(1) << 30
	testClass = "vgpu.dra.dev"
)

// fakeClasses serves the driver's default class.
type fakeClasses map[string]*resourceapi.DeviceClass

func (l fakeClasses) List() ([]*resourceapi.DeviceClass, error) {
	out := make([]*resourceapi.DeviceClass, 0, len(l))
	for _, c := range l {
		out = append(out, c)
	}
	return out, nil
}

func (l fakeClasses) Get(name string) (*resourceapi.DeviceClass, error) {
	if c, ok := l[name]; ok {
		return c, nil
	}
	return nil, fmt.Errorf("device class %q not found", name)
}

var testClasses = fakeClasses{testClass: {
	ObjectMeta: metav1.ObjectMeta{Name: testClass},
	Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{
		CEL: &resourceapi.CELDeviceSelector{Expression: `device.driver == "vgpu.dra.dev"`},
	}}},
}}

func isTestClass(class string) bool { return class == testClass }

func newTestAllocator(fit NodeFitter) *Allocator {
	return New(Config{DriverName: names.DriverName, Classes: testClasses, IsOurs: isTestClass, Fit: fit})
}

// gpuSlice publishes n 80Gi GPUs on a node the way the kubelet plugin does.
// GPUs 0-3 sit under PCIe root A on NUMA node 0, 4-7 under B on NUMA 1.
func gpuSlice(t testing.TB, node string, n int) *resourceapi.ResourceSlice {
	t.Helper()
	devs := make([]resourceapi.Device, n)
	for i := range n {
		devs[i] = devices.Device(discovery.Info{
			UUID: fmt.Sprintf("GPU-%08x-0000-0000-0000-%012d", i, len(node)), Index: i, Minor: i,
			ProductName: "NVIDIA H100 80GB HBM3", MemoryBytes: uint64(80 * gi), NUMANode: i / 4,
			PCIBusID: fmt.Sprintf("0000:%02x:00.0", 0x18+i),
		}, devices.Options{SysfsRoot: "/nonexistent"})
		devs[i].Attributes[names.AttrPCIeRoot] = resourceapi.DeviceAttribute{StringValue: ptr.To(fmt.Sprintf("pci0000:%d", i/4))}
	}
	return &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-" + names.DriverName},
		Spec: resourceapi.ResourceSliceSpec{
			Driver:   names.DriverName,
			Pool:     resourceapi.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1},
			NodeName: ptr.To(node),
			Devices:  devs,
		},
	}
}

func testNode(name string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("32"), corev1.ResourceMemory: resource.MustParse("256Gi"), corev1.ResourcePods: resource.MustParse("110"),
		}},
	}
}

var claimCounter int

// gpuClaim asks for count GPUs (distinct when more than one) with memory
// and cores each; empty strings ask for nothing.
func gpuClaim(name string, count int64, memory, cores string) *resourceapi.ResourceClaim {
	claimCounter++
	req := &resourceapi.ExactDeviceRequest{DeviceClassName: testClass, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count}
	if memory != "" || cores != "" {
		req.Capacity = &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{}}
		if memory != "" {
			req.Capacity.Requests[names.CapacityMemory] = resource.MustParse(memory)
		}
		if cores != "" {
			req.Capacity.Requests[names.CapacityCores] = resource.MustParse(cores)
		}
	}
	claim := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", claimCounter))},
		Spec:       resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: req}}}},
	}
	if count > 1 {
		claim.Spec.Devices.Constraints = []resourceapi.DeviceConstraint{{
			Requests: []string{"gpu"}, DistinctAttribute: ptr.To(resourceapi.FullyQualifiedName(names.DriverName + "/" + string(names.AttrUUID))),
		}}
	}
	return claim
}

func testPod(name string, claims ...*resourceapi.ResourceClaim) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("pod-" + name)},
		Spec: corev1.PodSpec{
			Containers:      []corev1.Container{{Name: "app", Image: "cuda"}},
			SchedulingGates: []corev1.PodSchedulingGate{{Name: SchedulingGate}},
		},
	}
	for _, c := range claims {
		pod.Spec.ResourceClaims = append(pod.Spec.ResourceClaims, corev1.PodResourceClaim{Name: c.Name, ResourceClaimName: ptr.To(c.Name)})
	}
	return pod
}

// place allocates one pod's claims and returns the decision.
func place(t testing.TB, a *Allocator, nodes []*corev1.Node, pol Policies, claims ...*resourceapi.ResourceClaim) *Decision {
	t.Helper()
	d, err := a.Allocate(t.Context(), Request{Pod: testPod("p", claims...), Claims: claims, Nodes: nodes, Policies: pol})
	require.NoError(t, err)
	return d
}

// observeOn records a claim that someone else (the scheduler) allocated on
// a device, as the informer would show it.
func observeOn(a *Allocator, node, device, memory, cores string) *resourceapi.ResourceClaim {
	claim := gpuClaim("sched-"+node+"-"+device, 1, memory, cores)
	share := types.UID(fmt.Sprintf("11111111-0000-0000-0000-%012d", claimCounter))
	claim.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
		Request: "gpu", Driver: names.DriverName, Pool: node, Device: device, ShareID: &share,
		ConsumedCapacity: map[resourceapi.QualifiedName]resource.Quantity{names.CapacityMemory: resource.MustParse(memory), names.CapacityCores: resource.MustParse(cores)},
	}}}}
	a.Observe(claim)
	return claim
}
