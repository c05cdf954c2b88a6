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

package inspect

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/names"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

const gi = int64(1) << 30

// golden compares got with testdata/NAME, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "golden file (go test -update writes it)")
	require.Equal(t, string(want), got, "output differs from %s (go test ./pkg/cluster/inspect -update rewrites it)", path)
}

// gpuDevice is a device as the kubelet plugin publishes it: 16Gi of
// memory in 256Mi..16Gi steps of 1Mi, 100 cores, shareable.
func gpuDevice(index int, memory int64) resourceapi.Device {
	mem := resource.NewQuantity(memory, resource.BinarySI)
	return resourceapi.Device{
		Name: fmt.Sprintf("gpu-%d", index),
		Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			names.AttrUUID:        {StringValue: ptr.To(fmt.Sprintf("GPU-0000000%d-aaaa-bbbb-cccc-dddddddddddd", index))},
			names.AttrIndex:       {IntValue: ptr.To(int64(index))},
			names.AttrProductName: {StringValue: ptr.To("NVIDIA A10")},
		},
		AllowMultipleAllocations: ptr.To(true),
		Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
			names.CapacityMemory: {Value: *mem, RequestPolicy: &resourceapi.CapacityRequestPolicy{
				Default: mem,
				ValidRange: &resourceapi.CapacityRequestPolicyRange{
					Min: ptr.To(resource.MustParse("256Mi")), Step: ptr.To(resource.MustParse("1Mi")), Max: mem,
				},
			}},
			names.CapacityCores: {Value: resource.MustParse("100"), RequestPolicy: &resourceapi.CapacityRequestPolicy{
				Default:    ptr.To(resource.MustParse("0")),
				ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: ptr.To(resource.MustParse("0")), Step: ptr.To(resource.MustParse("1")), Max: ptr.To(resource.MustParse("100"))},
			}},
		},
	}
}

func slice(node string, devs ...resourceapi.Device) resourceapi.ResourceSlice {
	return resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-vgpu"},
		Spec: resourceapi.ResourceSliceSpec{
			Driver: names.DriverName, NodeName: ptr.To(node),
			Pool:    resourceapi.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1},
			Devices: devs,
		},
	}
}

func node(name string, taints ...corev1.Taint) corev1.Node {
	return corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}},
		Spec:       corev1.NodeSpec{Taints: taints},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi"), corev1.ResourcePods: resource.MustParse("110")},
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
}

var uidCounter int

// claim asks for one GPU with memory and cores ("" = not asked).
func claim(ns, name, memory, cores string) resourceapi.ResourceClaim {
	uidCounter++
	req := &resourceapi.ExactDeviceRequest{DeviceClassName: "vgpu.dra.dev", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1}
	reqs := map[resourceapi.QualifiedName]resource.Quantity{}
	if memory != "" {
		reqs[names.CapacityMemory] = resource.MustParse(memory)
	}
	if cores != "" {
		reqs[names.CapacityCores] = resource.MustParse(cores)
	}
	if len(reqs) > 0 {
		req.Capacity = &resourceapi.CapacityRequirements{Requests: reqs}
	}
	return resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(fmt.Sprintf("uid-%d", uidCounter))},
		Spec:       resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: req}}}},
	}
}

// allocated places a claim on a GPU with its consumed capacity and,
// when used is not empty, the status the plugin's monitor writes.
func allocated(c resourceapi.ResourceClaim, pod, nodeName, device, memory, cores, used string, smUtil int64) resourceapi.ResourceClaim {
	share := types.UID("share-" + string(c.UID))
	c.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
		Request: "gpu", Driver: names.DriverName, Pool: nodeName, Device: device, ShareID: &share,
		ConsumedCapacity: map[resourceapi.QualifiedName]resource.Quantity{names.CapacityMemory: resource.MustParse(memory), names.CapacityCores: resource.MustParse(cores)},
	}}}}
	c.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: pod, UID: types.UID("pod-" + pod)}}
	if used != "" {
		data, _ := json.Marshal(map[string]any{"uuid": "x", "memoryLimit": memory, "coresLimit": cores, "memoryUsed": used, "smUtilization": smUtil})
		c.Status.Devices = []resourceapi.AllocatedDeviceStatus{{Driver: names.DriverName, Pool: nodeName, Device: device, ShareID: ptr.To(string(share)), Data: &runtime.RawExtension{Raw: data}}}
	}
	return c
}

// bursting gives an allocated claim a memoryLimit (its VGPUConfig, as the
// allocation carries it) and, when burst is not empty, the burst grant its
// node reports in the status data.
func bursting(c resourceapi.ResourceClaim, limit, burst string) resourceapi.ResourceClaim {
	params, _ := json.Marshal(map[string]any{"apiVersion": "vgpu.dra.dev/v1alpha1", "kind": "VGPUConfig", "memoryLimit": limit})
	c.Status.Allocation.Devices.Config = append(c.Status.Allocation.Devices.Config, resourceapi.DeviceAllocationConfiguration{
		Source: resourceapi.AllocationConfigSourceClaim, Requests: []string{"gpu"},
		DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{
			Driver: names.DriverName, Parameters: runtime.RawExtension{Raw: params}}},
	})
	if burst != "" {
		var data map[string]any
		_ = json.Unmarshal(c.Status.Devices[0].Data.Raw, &data)
		data["memoryBurst"] = burst
		c.Status.Devices[0].Data.Raw, _ = json.Marshal(data)
	}
	return c
}

func pendingPod(ns, name string, claims ...string) corev1.Pod {
	p := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("pod-" + name)},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}},
		Status:     corev1.PodStatus{Phase: corev1.PodPending},
	}
	for _, c := range claims {
		p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, corev1.PodResourceClaim{Name: c, ResourceClaimName: ptr.To(c)})
	}
	return p
}

// cluster is the fixture of the golden tests: node-a with two 16Gi GPUs,
// gpu-0 holding 12Gi in two claims and gpu-1 4Gi; node-b with one 16Gi GPU,
// tainted for everyone; node-c with one 16Gi GPU that its plugin tainted
// for an XID. Pod big asks 14Gi, which fits on no GPU of node-a, on
// node-b only with a node toleration and on node-c only with a device one.
func cluster() *Snapshot {
	return &Snapshot{
		Nodes: []corev1.Node{
			node("node-a"),
			node("node-b", corev1.Taint{Key: "dedicated", Value: "batch", Effect: corev1.TaintEffectNoSchedule}),
			node("node-c"),
		},
		Slices: []resourceapi.ResourceSlice{
			slice("node-a", gpuDevice(0, 16*gi), gpuDevice(1, 16*gi)),
			slice("node-b", gpuDevice(0, 16*gi)),
			slice("node-c", xid(gpuDevice(0, 16*gi))),
		},
		Classes: []resourceapi.DeviceClass{{
			ObjectMeta: metav1.ObjectMeta{Name: "vgpu.dra.dev"},
			Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{
				CEL: &resourceapi.CELDeviceSelector{Expression: `device.driver == "vgpu.dra.dev"`}}}},
		}},
		Claims: []resourceapi.ResourceClaim{
			allocated(claim("team-a", "train-0", "8Gi", "50"), "train-0", "node-a", "gpu-0", "8Gi", "50", "6656Mi", 47),
			bursting(allocated(claim("team-a", "notebook", "4Gi", "20"), "notebook", "node-a", "gpu-0", "4Gi", "20", "1Gi", 3), "12Gi", "2Gi"),
			bursting(allocated(claim("team-b", "infer", "4Gi", "30"), "infer", "node-a", "gpu-1", "4Gi", "30", "", 0), "6Gi", ""),
			claim("team-b", "big", "14Gi", "30"),
		},
		Pods: []*corev1.Pod{ptr.To(pendingPod("team-b", "big", "big"))},
	}
}

func xid(d resourceapi.Device) resourceapi.Device {
	d.Taints = []resourceapi.DeviceTaint{{Key: names.TaintKeyXID, Value: "79", Effect: resourceapi.DeviceTaintEffectNoSchedule}}
	return d
}
