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

package webview

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/cluster/allocator"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/cluster/inspect"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/names"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/devices"
	nvgpu "github.com/vgpu-dra/vgpu-dra-driver/pkg/node/discovery"
)

const gi = int64(1) << 30

// The fixture: node-a with two 16Gi GPUs, gpu-0 shared by team-a/train
// (8Gi, 6Gi used) and team-b/notebook (4Gi guarantee, 12Gi limit, 2Gi
// burst granted, 5Gi used, 3 refusals), gpu-1 holding team-b/infer (4Gi,
// no usage reported); node-m with an H200
// in MIG mode, one 1g.18gb instance at slice 4 holding team-a/mig-small;
// pod team-b/big Pending, its claim asking 14Gi.

func plainGPU(index int) resourceapi.Device {
	mem := resource.NewQuantity(16*gi, resource.BinarySI)
	return resourceapi.Device{
		Name: fmt.Sprintf("gpu-%d", index),
		Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			names.AttrUUID:        {StringValue: ptr.To(fmt.Sprintf("GPU-a%d", index))},
			names.AttrIndex:       {IntValue: ptr.To(int64(index))},
			names.AttrProductName: {StringValue: ptr.To("NVIDIA A10")},
		},
		AllowMultipleAllocations: ptr.To(true),
		Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
			names.CapacityMemory: {Value: *mem, RequestPolicy: &resourceapi.CapacityRequestPolicy{Default: mem,
				ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: ptr.To(resource.MustParse("256Mi")), Step: ptr.To(resource.MustParse("1Mi")), Max: mem}}},
			names.CapacityCores: {Value: resource.MustParse("100"), RequestPolicy: &resourceapi.CapacityRequestPolicy{Default: ptr.To(resource.MustParse("0")),
				ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: ptr.To(resource.MustParse("0")), Step: ptr.To(resource.MustParse("1")), Max: ptr.To(resource.MustParse("100"))}}},
		},
	}
}

func readyNode(name string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi"), corev1.ResourcePods: resource.MustParse("110")},
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
}

func vgpuClaim(ns, name, class, memory string) *resourceapi.ResourceClaim {
	req := &resourceapi.ExactDeviceRequest{DeviceClassName: class, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1}
	if memory != "" {
		req.Capacity = &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{names.CapacityMemory: resource.MustParse(memory)}}
	}
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("claim-" + name)},
		Spec:       resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: req}}}},
	}
}

// allocate places c on a device of a pool for pod, as a share with
// consumed memory and cores (whole when memory is empty), and writes the
// usage the plugin's monitor reports (none when usage is nil).
func allocate(c *resourceapi.ResourceClaim, pod, pool, device, memory, cores string, usage map[string]any) *resourceapi.ResourceClaim {
	res := resourceapi.DeviceRequestAllocationResult{Request: "gpu", Driver: names.DriverName, Pool: pool, Device: device}
	if memory != "" {
		res.ShareID = ptr.To(types.UID("share-" + c.Name))
		res.ConsumedCapacity = map[resourceapi.QualifiedName]resource.Quantity{names.CapacityMemory: resource.MustParse(memory), names.CapacityCores: resource.MustParse(cores)}
	}
	c.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{res}}}
	c.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: pod, UID: types.UID("pod-" + pod)}}
	if usage != nil {
		data, _ := json.Marshal(usage)
		c.Status.Devices = []resourceapi.AllocatedDeviceStatus{{Driver: names.DriverName, Pool: pool, Device: device, Data: &k8sruntime.RawExtension{Raw: data}}}
	}
	return c
}

func withLimit(c *resourceapi.ResourceClaim, limit string) *resourceapi.ResourceClaim {
	params, _ := json.Marshal(map[string]any{"apiVersion": "vgpu.dra.dev/v1alpha1", "kind": "VGPUConfig", "memoryLimit": limit})
	c.Status.Allocation.Devices.Config = []resourceapi.DeviceAllocationConfiguration{{
		Source: resourceapi.AllocationConfigSourceClaim, Requests: []string{"gpu"},
		DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{
			Driver: names.DriverName, Parameters: k8sruntime.RawExtension{Raw: params}}},
	}}
	return c
}

func pod(ns, name, claim, nodeName string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("pod-" + name)},
		Spec: corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "c"}},
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To(claim)}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
	if nodeName != "" {
		p.Status.Phase = corev1.PodRunning
	}
	return p
}

func class(name, expr string) *resourceapi.DeviceClass {
	return &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: resourceapi.DeviceClassSpec{
		Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: expr}}}}}
}

// migSlices publishes node-m's H200 in MIG mode the way the plugin does
// (go-nvml's mock geometry through devices.MIGPool) and returns the
// slices and the name of the 1g.18gb device at slice 4.
func migSlices(t *testing.T) ([]k8sruntime.Object, string) {
	t.Helper()
	config := gpus.H200_SXM5_141GB
	dev := server.NewDeviceFromConfig(config, 0)
	_, ret := dev.SetMigMode(nvml.DEVICE_MIG_ENABLE)
	require.Equal(t, nvml.SUCCESS, ret)
	mig, err := nvgpu.ReadMIG(dev, false)
	require.NoError(t, err)
	info := nvgpu.Info{UUID: "GPU-m0", Index: 0, ProductName: config.Name, MemoryBytes: config.MemoryMB << 20, Multiprocessors: 132}
	pool, _ := devices.MIGPool([]devices.GPU{{Info: info, MIG: mig}}, devices.Options{}, devices.MIGOptions{PartitionableDevices: true})
	var out []k8sruntime.Object
	instance := ""
	for i, s := range pool.Slices {
		for _, d := range s.Devices {
			a := d.Attributes[names.AttrProfile]
			if a.StringValue != nil && *a.StringValue == "1g.18gb" && *d.Attributes[names.AttrPlacementStart].IntValue == 4 {
				instance = d.Name
			}
		}
		out = append(out, &resourceapi.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-m-%d", i)},
			Spec: resourceapi.ResourceSliceSpec{Driver: names.DriverName, NodeName: ptr.To("node-m"),
				Pool:    resourceapi.ResourcePool{Name: "node-m", Generation: 1, ResourceSliceCount: int64(len(pool.Slices))},
				Devices: s.Devices, SharedCounters: s.SharedCounters},
		})
	}
	require.NotEmpty(t, instance, "a 1g.18gb placement at slice 4")
	return out, instance
}

func fixture(t *testing.T) *fake.Clientset {
	t.Helper()
	objs, instance := migSlices(t)
	objs = append(objs,
		readyNode("node-a"), readyNode("node-m"),
		&resourceapi.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: "node-a-vgpu"},
			Spec: resourceapi.ResourceSliceSpec{Driver: names.DriverName, NodeName: ptr.To("node-a"),
				Pool:    resourceapi.ResourcePool{Name: "node-a", Generation: 1, ResourceSliceCount: 1},
				Devices: []resourceapi.Device{plainGPU(0), plainGPU(1)}},
		},
		class("vgpu.dra.dev", `device.driver == "vgpu.dra.dev" && !("profile" in device.attributes["vgpu.dra.dev"])`),
		class("mig.vgpu.dra.dev", `device.driver == "vgpu.dra.dev" && "profile" in device.attributes["vgpu.dra.dev"]`),
		allocate(vgpuClaim("team-a", "train", "vgpu.dra.dev", "8Gi"), "train", "node-a", "gpu-0", "8Gi", "50",
			map[string]any{"memoryUsed": "6Gi"}),
		withLimit(allocate(vgpuClaim("team-b", "notebook", "vgpu.dra.dev", "4Gi"), "notebook", "node-a", "gpu-0", "4Gi", "20",
			map[string]any{"memoryUsed": "5Gi", "memoryBurst": "2Gi", "memoryRefusals": 3}), "12Gi"),
		allocate(vgpuClaim("team-b", "infer", "vgpu.dra.dev", "4Gi"), "infer", "node-a", "gpu-1", "4Gi", "30", nil),
		pod("team-b", "infer", "infer", "node-a"),
		allocate(vgpuClaim("team-a", "mig-small", "mig.vgpu.dra.dev", ""), "mig-small", "node-m", instance, "", "", nil),
		pod("team-a", "train", "train", "node-a"),
		pod("team-b", "notebook", "notebook", "node-a"),
		pod("team-a", "mig-small", "mig-small", "node-m"),
		vgpuClaim("team-b", "big", "vgpu.dra.dev", "14Gi"),
		pod("team-b", "big", "big", ""),
		// A Pending pod without claims of this driver is not listed.
		pod("team-c", "other", "not-ours", ""),
	)
	return fake.NewClientset(objs...)
}

// startSource runs a Source on client until the test ends.
func startSource(t *testing.T, client *fake.Clientset) *Source {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	s := NewSource(client, SourceOptions{Interval: 1})
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	return s
}

// waitFor blocks until the source publishes a model for which ok holds.
func waitFor(t *testing.T, s *Source, ok func(*Model) bool) *Model {
	t.Helper()
	for {
		m, _, updated := s.Current()
		if m != nil && ok(m) {
			return m
		}
		select {
		case <-updated:
		case <-t.Context().Done():
			t.Fatal("the source published no model that passes")
		}
	}
}

// built holds for a model with everything listed.
func built(m *Model) bool { return !m.Listing }

func explained(m *Model) bool { return len(m.Pending) > 0 && m.Pending[0].Why != nil }

// explain asks s for the explanation of team-b/big and waits for it.
func explain(t *testing.T, s *Source) *Model {
	t.Helper()
	waitFor(t, s, built)
	s.Explain("team-b/big")
	return waitFor(t, s, explained)
}

func findGPU(t *testing.T, m *Model, node, gpu string) GPU {
	t.Helper()
	for _, n := range m.Nodes {
		for _, g := range n.GPUs {
			if n.Name == node && g.GPU == gpu {
				return g
			}
		}
	}
	t.Fatalf("no GPU %s/%s in the model", node, gpu)
	return GPU{}
}

func TestModelOfSharedGPUWithBurst(t *testing.T) {
	m := waitFor(t, startSource(t, fixture(t)), built)
	require.Len(t, m.Nodes, 2)
	assert.Equal(t, "node-a", m.Nodes[0].Name)
	assert.Equal(t, []string{"team-a", "team-b"}, m.Namespaces)

	g := findGPU(t, m, "node-a", "gpu-0")
	assert.Equal(t, 16*gi, g.MemoryCapacity)
	assert.Equal(t, 12*gi, g.MemoryAllocated, "both bookings")
	assert.Equal(t, 11*gi, *g.MemoryUsed)
	assert.Equal(t, int64(70), g.CoresAllocated)
	assert.Equal(t, 2*gi, g.MemoryBurst, "the notebook's burst")
	require.Len(t, g.Claims, 2)
	nb := g.Claims[1]
	assert.Equal(t, "team-b/notebook", nb.Namespace+"/"+nb.Claim)
	assert.Equal(t, []string{"notebook"}, nb.Pods)
	assert.Equal(t, 4*gi, nb.MemoryGranted)
	assert.Equal(t, 12*gi, nb.MemoryLimit)
	assert.Equal(t, 2*gi, *nb.MemoryBurst)
	assert.Equal(t, int64(3), *nb.Refusals)
	assert.Empty(t, g.Instances)

	unreported := findGPU(t, m, "node-a", "gpu-1")
	assert.Equal(t, 4*gi, unreported.MemoryAllocated)
	assert.Nil(t, unreported.MemoryUsed, "no claim reports its use")
	require.Len(t, unreported.Claims, 1)
	assert.Nil(t, unreported.Claims[0].MemoryUsed)
}

func TestModelOfMIGGPU(t *testing.T) {
	m := waitFor(t, startSource(t, fixture(t)), built)
	g := findGPU(t, m, "node-m", "gpu-0")
	assert.Equal(t, inspect.MIGModeOn, g.MIG)
	assert.Empty(t, g.Claims, "the claim is inside an instance, not on the whole GPU")
	require.Len(t, g.Instances, 1)
	in := g.Instances[0]
	assert.Equal(t, "1g.18gb", in.Profile)
	assert.Equal(t, int64(4), in.PlacementStart)
	assert.Equal(t, int64(1), in.PlacementSize)
	assert.False(t, in.Static)
	require.Len(t, in.ClaimRows, 1)
	assert.Equal(t, "mig-small", in.ClaimRows[0].Claim)
	assert.Equal(t, int64(8), g.MIGSlices)
	assert.Positive(t, g.MemoryAllocated, "the instance is taken whole")
}

func TestModelOfPendingPod(t *testing.T) {
	m := explain(t, startSource(t, fixture(t)))
	require.Len(t, m.Pending, 1, "team-c/other asks for no vGPU")
	p := m.Pending[0]
	assert.Equal(t, "team-b/big", p.Namespace+"/"+p.Name)
	assert.Equal(t, []string{"big"}, p.Claims)
	assert.Empty(t, p.WhyError)
	assert.Contains(t, p.Why.Summary, "fit on none of 2 nodes")
	var reasons []string
	for _, v := range p.Why.GPUs {
		if v.Node == "node-a" && v.GPU == "gpu-0" {
			reasons = v.Reasons
		}
	}
	assert.Contains(t, strings.Join(reasons, "; "), "memory: asks 14Gi, 4Gi left of 16Gi")
	assert.Contains(t, p.Why.Suggestion, "fits on node node-a gpu-1 if the request is memory <= 12Gi")
}

func TestModelFollowsTheWatch(t *testing.T) {
	client := fixture(t)
	s := startSource(t, client)
	waitFor(t, s, built)
	require.NoError(t, client.CoreV1().Pods("team-b").Delete(t.Context(), "big", metav1.DeleteOptions{}))
	m := waitFor(t, s, func(m *Model) bool { return len(m.Pending) == 0 })
	assert.Len(t, m.Nodes, 2)
}

func TestFilter(t *testing.T) {
	m := waitFor(t, startSource(t, fixture(t)), built)

	byNS := Filter{Namespace: "team-a"}.Apply(m)
	var gpus []string
	for _, n := range byNS.Nodes {
		for _, g := range n.GPUs {
			gpus = append(gpus, n.Name+"/"+g.GPU)
			for _, c := range g.Claims {
				assert.Equal(t, "team-a", c.Namespace)
			}
		}
	}
	assert.Equal(t, []string{"node-a/gpu-0", "node-m/gpu-0"}, gpus, "only the GPUs team-a holds")
	assert.Len(t, findGPU(t, byNS, "node-a", "gpu-0").Claims, 1)
	assert.Empty(t, byNS.Pending, "the Pending pod is team-b's")

	byNode := Filter{Node: "-m"}.Apply(m)
	require.Len(t, byNode.Nodes, 1)
	assert.Equal(t, "node-m", byNode.Nodes[0].Name)
	assert.Len(t, byNode.Pending, 1)
	assert.Len(t, m.Nodes, 2, "Apply leaves the model alone")
}

// The plugin's own publishing with --mps: the MPS device, folded into its
// GPU's row by inspect.Nodes already, brings its claims to the GPU,
// counted once.
func TestModelOfMPSGPUAsThePluginPublishesIt(t *testing.T) {
	pool, _ := devices.MIGPool([]devices.GPU{{Info: nvgpu.Info{UUID: "GPU-5", Index: 0, ProductName: "NVIDIA A10", MemoryBytes: 16 << 30}}},
		devices.Options{}, devices.MIGOptions{PartitionableDevices: true, MPS: true})
	var published []resourceapi.ResourceSlice
	for i, s := range pool.Slices {
		published = append(published, resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-s-%d", i)}, Spec: resourceapi.ResourceSliceSpec{
			Driver: names.DriverName, NodeName: ptr.To("node-s"), Pool: resourceapi.ResourcePool{Name: "node-s", Generation: 1, ResourceSliceCount: int64(len(pool.Slices))},
			Devices: s.Devices, SharedCounters: s.SharedCounters}})
	}
	snap := &inspect.Snapshot{
		Nodes:  []corev1.Node{*readyNode("node-s")},
		Slices: published,
		Claims: []resourceapi.ResourceClaim{
			*allocate(vgpuClaim("team-a", "a", names.MPSDeviceClass, "4Gi"), "a", "node-s", "gpu-0-mps", "4Gi", "30", nil),
			*allocate(vgpuClaim("team-a", "b", names.MPSDeviceClass, "2Gi"), "b", "node-s", "gpu-0-mps", "2Gi", "70", nil),
		},
	}
	m := Build(snap)
	require.Len(t, m.Nodes, 1)
	require.Len(t, m.Nodes[0].GPUs, 1, "one GPU, its MPS device folded in")
	g := m.Nodes[0].GPUs[0]
	assert.Equal(t, ModeMPS, g.Mode)
	assert.Empty(t, g.Claims)
	require.Len(t, g.MPSClaims, 2)
	assert.Equal(t, "gpu-0-mps", g.MPSClaims[0].GPU)
	assert.Equal(t, 6*gi, g.MemoryAllocated)
}

// The source explains only the pods pages ask for, in the background:
// its models come without explanations until then.
func TestSourceExplainsOnlyWhatIsAsked(t *testing.T) {
	s := startSource(t, fixture(t))
	m := waitFor(t, s, built)
	require.Len(t, m.Pending, 1)
	assert.Nil(t, m.Pending[0].Why, "published before any explanation")
	s.Explain("team-c/other", "team-b/nope")
	s.mu.Lock()
	assert.Empty(t, s.queue, "not Pending pods of this driver")
	s.mu.Unlock()

	m = explain(t, s)
	assert.Contains(t, m.Pending[0].Why.Summary, "fit on none of 2 nodes")
	s.Explain("team-b/big")
	s.mu.Lock()
	assert.Empty(t, s.queue, "explained from the current model already")
	s.mu.Unlock()
}

// An explanation that takes longer than its deadline stops and says so.
func TestSourceBoundsAnExplanation(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	s := NewSource(fixture(t), SourceOptions{Interval: 1, ExplainTimeout: time.Nanosecond})
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()
	waitFor(t, s, built)
	s.Explain("team-b/big")
	m := waitFor(t, s, func(m *Model) bool { return len(m.Pending) == 1 && m.Pending[0].WhyError != "" })
	assert.Nil(t, m.Pending[0].Why)
	assert.Equal(t, "Working this out took longer than 1ns at this cluster's size: kubectl vgpu why -n team-b big", m.Pending[0].WhyError)
}

// The informers' cache keeps what the views read and drops the rest.
func TestTrimForCache(t *testing.T) {
	c := allocate(vgpuClaim("team", "c", "vgpu.dra.dev", "4Gi"), "p", "node-a", "gpu-0", "4Gi", "10", map[string]any{"memoryUsed": "1Gi"})
	c.Annotations = map[string]string{"big": strings.Repeat("x", 1000)}
	c.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kube-scheduler"}}
	c.Status.Devices[0].Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue}}
	c.Status.Devices[0].NetworkData = &resourceapi.NetworkDeviceData{InterfaceName: "eth1"}
	trim := newTrimmer().trim
	obj, err := trim(c.DeepCopy())
	require.NoError(t, err)
	got := obj.(*resourceapi.ResourceClaim)
	assert.Nil(t, got.Annotations)
	assert.Nil(t, got.ManagedFields)
	assert.Nil(t, got.Status.Devices[0].Conditions)
	assert.Nil(t, got.Status.Devices[0].NetworkData)
	assert.JSONEq(t, `{"memoryUsed":"1Gi"}`, string(got.Status.Devices[0].Data.Raw), "the plugin's data stays")
	assert.NotNil(t, got.Status.Allocation)
	assert.Equal(t, "gpu", got.Spec.Devices.Requests[0].Name)

	// The claims of one template share their spec.
	other := c.DeepCopy()
	other.Name = "other"
	obj, err = trim(other)
	require.NoError(t, err)
	assert.Same(t, &got.Spec.Devices.Requests[0], &obj.(*resourceapi.ResourceClaim).Spec.Devices.Requests[0])
}

// A pod and a node keep in the cache what the page and the scheduler's
// fit checks of inspect.Why read, and nothing else.
func TestTrimPodsAndNodesForCache(t *testing.T) {
	p := pod("team", "p", "c", "")
	p.Labels = map[string]string{"app": "x"}
	p.OwnerReferences = []metav1.OwnerReference{{Kind: "Job", Name: "j"}}
	p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "gate"}}
	p.Spec.Tolerations = []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}}
	p.Spec.NodeSelector = map[string]string{"zone": "a"}
	required := &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
		{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}}}}
	p.Spec.Affinity = &corev1.Affinity{
		NodeAffinity:    &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: required},
		PodAntiAffinity: &corev1.PodAntiAffinity{},
	}
	p.Spec.Volumes = []corev1.Volume{{Name: "token"}}
	requests := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	p.Spec.Containers = []corev1.Container{{Name: "c", Image: "app:1", Env: []corev1.EnvVar{{Name: "A", Value: "1"}},
		Resources: corev1.ResourceRequirements{Requests: requests, Limits: requests}}}
	p.Spec.InitContainers = []corev1.Container{{Name: "side", Image: "side:1", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)}}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Message: strings.Repeat("x", 1000)}}
	p.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To("c")}}
	p.Spec.Overhead = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}
	usage := allocator.UsageOf(p)
	trim := newTrimmer().trim
	obj, err := trim(p.DeepCopy())
	require.NoError(t, err)
	got := obj.(*corev1.Pod)
	assert.Nil(t, got.Labels)
	assert.Nil(t, got.OwnerReferences)
	assert.Equal(t, usage, allocator.UsageOf(got), "the fit checks read the same requests")
	containers := got.Spec.Containers
	got.Spec.Containers = nil
	assert.Equal(t, corev1.PodSpec{
		ResourceClaims:  []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("c")}},
		SchedulingGates: []corev1.PodSchedulingGate{{Name: "gate"}},
		Tolerations:     []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}},
		NodeSelector:    map[string]string{"zone": "a"},
		Affinity:        &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: required}},
	}, got.Spec)
	assert.Equal(t, corev1.PodStatus{Phase: corev1.PodPending,
		ResourceClaimStatuses: []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To("c")}}}, got.Status)

	// A second pod of the same workload shares the first one's requests
	// and placement.
	other := p.DeepCopy()
	other.Name = "other"
	obj, err = trim(other)
	require.NoError(t, err)
	second := obj.(*corev1.Pod)
	assert.Same(t, &containers[0], &second.Spec.Containers[0])
	assert.Equal(t, reflect.ValueOf(got.Spec.NodeSelector).Pointer(), reflect.ValueOf(second.Spec.NodeSelector).Pointer())
	assert.Same(t, &got.Spec.Tolerations[0], &second.Spec.Tolerations[0])

	n := readyNode("node-a")
	n.Annotations = map[string]string{"big": strings.Repeat("x", 1000)}
	n.Spec.Taints = []corev1.Taint{{Key: "gpu", Effect: corev1.TaintEffectNoSchedule}}
	n.Spec.Unschedulable = true
	n.Status.Capacity = n.Status.Allocatable
	n.Status.Conditions = append([]corev1.NodeCondition{{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse}},
		corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Message: "kubelet is posting ready status"})
	n.Status.Images = []corev1.ContainerImage{{Names: []string{"app:1"}}}
	n.Status.NodeInfo = corev1.NodeSystemInfo{KubeletVersion: "v1.37.2"}
	obj, err = newTrimmer().trim(n)
	require.NoError(t, err)
	gotNode := obj.(*corev1.Node)
	assert.Nil(t, gotNode.Annotations)
	assert.Equal(t, map[string]string{corev1.LabelHostname: "node-a"}, gotNode.Labels)
	assert.Equal(t, corev1.NodeSpec{Unschedulable: true, Taints: []corev1.Taint{{Key: "gpu", Effect: corev1.TaintEffectNoSchedule}}}, gotNode.Spec)
	assert.Equal(t, corev1.NodeStatus{Allocatable: readyNode("node-a").Status.Allocatable,
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}, gotNode.Status)
}

// Devices of equal capacities share one capacity map, across slices, and
// a slice's devices share the attribute values they have in common; the
// slices read the same as before.
func TestTrimSharesDeviceParts(t *testing.T) {
	slice := func(node string) *resourceapi.ResourceSlice {
		s := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node}, Spec: resourceapi.ResourceSliceSpec{
			Driver: names.DriverName, NodeName: ptr.To(node), Pool: resourceapi.ResourcePool{Name: node, ResourceSliceCount: 1}}}
		for g := range 3 {
			s.Spec.Devices = append(s.Spec.Devices, plainGPU(g))
		}
		small := plainGPU(3)
		small.Capacity[names.CapacityMemory] = resourceapi.DeviceCapacity{Value: resource.MustParse("8Gi")}
		s.Spec.Devices = append(s.Spec.Devices, small)
		return s
	}
	trim := newTrimmer().trim
	var got []*resourceapi.ResourceSlice
	for _, node := range []string{"node-a", "node-b"} {
		obj, err := trim(slice(node))
		require.NoError(t, err)
		got = append(got, obj.(*resourceapi.ResourceSlice))
		assert.True(t, apiequality.Semantic.DeepEqual(slice(node), got[len(got)-1]), "the slice reads the same")
	}
	capacity := func(s, d int) uintptr { return reflect.ValueOf(got[s].Spec.Devices[d].Capacity).Pointer() }
	assert.Equal(t, capacity(0, 0), capacity(0, 1))
	assert.Equal(t, capacity(0, 0), capacity(1, 2), "shared across slices")
	assert.NotEqual(t, capacity(0, 0), capacity(0, 3), "a different capacity keeps its own map")
	assert.Equal(t, capacity(0, 3), capacity(1, 3))
	product := func(d int) *string { return got[0].Spec.Devices[d].Attributes[names.AttrProductName].StringValue }
	assert.Same(t, product(0), product(2))
	uuid := func(d int) *string { return got[0].Spec.Devices[d].Attributes[names.AttrUUID].StringValue }
	assert.NotEqual(t, *uuid(0), *uuid(1))
}

// mpsGPU is the MPS device the plugin publishes with --mps beside
// plainGPU(index): same UUID and capacities, attribute mps true.
func mpsGPU(index int) resourceapi.Device {
	d := plainGPU(index)
	d.Name = fmt.Sprintf("gpu-%d-mps", index)
	d.Attributes[names.AttrMPS] = resourceapi.DeviceAttribute{BoolValue: ptr.To(true)}
	return d
}

// A node of the plugin with --mps: GPU 0 serves two MPS claims, GPU 1 a
// time-sliced one, GPU 2 nothing.
func mpsSnapshot() *inspect.Snapshot {
	slice := resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "node-p-vgpu"},
		Spec: resourceapi.ResourceSliceSpec{Driver: names.DriverName, NodeName: ptr.To("node-p"),
			Pool:    resourceapi.ResourcePool{Name: "node-p", Generation: 1, ResourceSliceCount: 1},
			Devices: []resourceapi.Device{plainGPU(0), mpsGPU(0), plainGPU(1), mpsGPU(1), plainGPU(2), mpsGPU(2)}},
	}
	claims := []*resourceapi.ResourceClaim{
		allocate(vgpuClaim("team-a", "mps-a", "mps.vgpu.dra.dev", "4Gi"), "mps-a", "node-p", "gpu-0-mps", "4Gi", "30", map[string]any{"memoryUsed": "1Gi"}),
		allocate(vgpuClaim("team-b", "mps-b", "mps.vgpu.dra.dev", "2Gi"), "mps-b", "node-p", "gpu-0-mps", "2Gi", "20", nil),
		allocate(vgpuClaim("team-a", "ts", "vgpu.dra.dev", "8Gi"), "ts", "node-p", "gpu-1", "8Gi", "50", nil),
	}
	snap := &inspect.Snapshot{
		Nodes:  []corev1.Node{*readyNode("node-p")},
		Slices: []resourceapi.ResourceSlice{slice},
		Classes: []resourceapi.DeviceClass{
			*class("vgpu.dra.dev", `device.driver == "vgpu.dra.dev" && !("mps" in device.attributes["vgpu.dra.dev"])`),
			*class("mps.vgpu.dra.dev", `device.driver == "vgpu.dra.dev" && "mps" in device.attributes["vgpu.dra.dev"]`),
		},
	}
	for _, c := range claims {
		snap.Claims = append(snap.Claims, *c)
		snap.Pods = append(snap.Pods, pod(c.Namespace, c.Name, c.Name, "node-p"))
	}
	return snap
}

// A GPU's MPS device is folded into the GPU: its claims listed under it,
// its bookings in the GPU's figures, and the GPU's mode says MPS.
func TestModelOfMPSGPU(t *testing.T) {
	m := Build(mpsSnapshot())
	require.Len(t, m.Nodes, 1)
	require.Len(t, m.Nodes[0].GPUs, 3, "the MPS devices are not GPUs of their own")

	g := findGPU(t, m, "node-p", "gpu-0")
	assert.Equal(t, ModeMPS, g.Mode)
	assert.Empty(t, g.Claims)
	require.Len(t, g.MPSClaims, 2)
	assert.Equal(t, "mps-a", g.MPSClaims[0].Claim)
	assert.Equal(t, 6*gi, g.MemoryAllocated)
	assert.Equal(t, int64(50), g.CoresAllocated)
	assert.Equal(t, 2, g.GPURow.Claims)
	assert.Equal(t, 1*gi, *g.MemoryUsed)

	assert.Equal(t, ModeTimeSliced, findGPU(t, m, "node-p", "gpu-1").Mode)
	assert.Equal(t, ModeFree, findGPU(t, m, "node-p", "gpu-2").Mode)
	assert.Equal(t, 14*gi, m.Nodes[0].MemoryAllocated)
	assert.Equal(t, 3, m.Nodes[0].Claims)

	byNS := Filter{Namespace: "team-b"}.Apply(m)
	require.Len(t, byNS.Nodes, 1)
	require.Len(t, byNS.Nodes[0].GPUs, 1, "team-b holds only an MPS claim on gpu-0")
	assert.Equal(t, []string{"mps-b"}, []string{byNS.Nodes[0].GPUs[0].MPSClaims[0].Claim})
}

// The GPUs are published while claims and pods are still being listed,
// marked so; the whole model follows.
func TestSourcePublishesTheGPUsFirst(t *testing.T) {
	client := fixture(t)
	release := make(chan struct{})
	client.PrependReactor("list", "pods", func(k8stesting.Action) (bool, k8sruntime.Object, error) {
		<-release
		return false, nil, nil
	})
	s := startSource(t, client)
	m := waitFor(t, s, func(*Model) bool { return true })
	assert.True(t, m.Listing)
	assert.Len(t, m.Nodes, 2, "every node")
	assert.Len(t, findGPU(t, m, "node-a", "gpu-0").Claims, 0, "no claims listed yet")
	assert.Empty(t, m.Pending)
	close(release)
	m = waitFor(t, s, built)
	assert.Len(t, findGPU(t, m, "node-a", "gpu-0").Claims, 2)
	assert.Len(t, m.Pending, 1)
}
