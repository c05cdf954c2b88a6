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

package scale

import (
	"fmt"
	"math/rand/v2"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/names"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/devices"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/discovery"
)

// KWOK manages the nodes that carry this annotation (the controller runs
// with --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake);
// the taint keeps anything but the benchmark's pods off them, as KWOK's
// documentation recommends.
const (
	KWOKAnnotation = "kwok.x-k8s.io/node"
	KWOKValue      = "fake"
	NodeTypeLabel  = "type"
	NodeTypeValue  = "kwok"
)

// DeviceClass is the class every benchmark claim asks for.
const DeviceClass = "vgpu.dra.dev"

// Product is a simulated GPU model: what NVML would report for it.
type Product struct {
	Name         string
	Architecture string
	Capability   string
	MemoryBytes  uint64
	SMs          int
}

// Products are the two GPU models of the simulated fleet; even nodes carry
// the first, odd nodes the second. The memory sizes are what NVML reports
// for these boards.
var Products = []Product{
	{Name: "NVIDIA H100 80GB HBM3", Architecture: "Hopper", Capability: "9.0", MemoryBytes: 81559 << 20, SMs: 132},
	{Name: "NVIDIA H200", Architecture: "Hopper", Capability: "9.0", MemoryBytes: 143771 << 20, SMs: 132},
}

// NodeName is the name of simulated node i.
func NodeName(i int) string { return fmt.Sprintf("gpu-node-%04d", i) }

// GPUs are the simulated GPUs of node i, as the plugin's NVML discovery
// would return them.
func GPUs(node, gpus int) []discovery.Info {
	p := Products[node%len(Products)]
	infos := make([]discovery.Info, gpus)
	for g := range infos {
		infos[g] = discovery.Info{
			UUID:                  fmt.Sprintf("GPU-%08x-%04x-4000-8000-%012x", node, g, node*gpus+g),
			Index:                 g,
			Minor:                 g,
			ProductName:           p.Name,
			Brand:                 "NVIDIA",
			Architecture:          p.Architecture,
			CUDAComputeCapability: p.Capability,
			DriverVersion:         "580.95.05",
			CUDADriverVersion:     "12.9",
			MemoryBytes:           p.MemoryBytes,
			PCIBusID:              fmt.Sprintf("0000:%02x:00.0", 0x18+g*0x10),
			NUMANode:              g * 2 / gpus,
			Multiprocessors:       p.SMs,
		}
	}
	return infos
}

// NodePods is the pod capacity of a simulated node: above what binpack can
// put on eight GPUs with the workload's mix, so that pod count never limits
// the packing.
const NodePods = 250

// Node is simulated node i: KWOK's annotation, label and taint, a large
// CPU and memory allocatable. KWOK makes it Ready and keeps its lease.
func Node(i int) *corev1.Node {
	name := NodeName(i)
	alloc := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("128"),
		corev1.ResourceMemory: resource.MustParse("1Ti"),
		corev1.ResourcePods:   *resource.NewQuantity(NodePods, resource.DecimalSI),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{KWOKAnnotation: KWOKValue},
			Labels: map[string]string{
				NodeTypeLabel:            NodeTypeValue,
				"kubernetes.io/hostname": name,
				"kubernetes.io/os":       "linux",
				"kubernetes.io/arch":     "amd64",
			},
		},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: KWOKAnnotation, Value: KWOKValue, Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{
			Allocatable: alloc,
			Capacity:    alloc,
			Phase:       corev1.NodeRunning,
		},
	}
}

// SliceOptions are the plugin's default memory policy; the sysfs root is
// empty so that, as on a simulated node, no PCIe root is published.
func SliceOptions(emptySysfs string) devices.Options {
	return devices.Options{SysfsRoot: emptySysfs}
}

// Shape is one kind of claim in the workload.
type Shape struct {
	// Name is also the ResourceClaimTemplate's name.
	Name string
	// Memory is the requested GPU memory; empty asks for none, which takes
	// the whole GPU (the device's default).
	Memory string
	// Cores is the requested percent of SM time, 0 for none.
	Cores int64
	// Weight is the shape's share of the pods, in percent.
	Weight int
}

// Mix is the workload: small inference slices, mid-size and large
// slices, and whole GPUs.
var Mix = []Shape{
	{Name: "gpu-1g-5", Memory: "1Gi", Cores: 5, Weight: 30},
	{Name: "gpu-4g-10", Memory: "4Gi", Cores: 10, Weight: 30},
	{Name: "gpu-10g-30", Memory: "10Gi", Cores: 30, Weight: 20},
	{Name: "gpu-40g-60", Memory: "40Gi", Cores: 60, Weight: 10},
	{Name: "gpu-whole", Weight: 10},
}

// Shapes returns the shape of each of n pods: the Mix's proportions in an
// order shuffled with a fixed seed, so that every arm of a run, and every
// run, gets the same sequence.
func Shapes(n int) []Shape {
	var table []Shape
	for _, s := range Mix {
		for range s.Weight {
			table = append(table, s)
		}
	}
	rng := rand.New(rand.NewPCG(15, 1000))
	out := make([]Shape, n)
	for i := range out {
		out[i] = table[rng.IntN(len(table))]
	}
	return out
}

// Template is the ResourceClaimTemplate of a shape: one request for one GPU
// of DeviceClass with the shape's capacity.
func Template(namespace string, s Shape) *resourceapi.ResourceClaimTemplate {
	req := resourceapi.ExactDeviceRequest{DeviceClassName: DeviceClass}
	caps := map[resourceapi.QualifiedName]resource.Quantity{}
	if s.Memory != "" {
		caps[names.CapacityMemory] = resource.MustParse(s.Memory)
	}
	if s.Cores > 0 {
		caps[names.CapacityCores] = *resource.NewQuantity(s.Cores, resource.DecimalSI)
	}
	if len(caps) > 0 {
		req.Capacity = &resourceapi.CapacityRequirements{Requests: caps}
	}
	return &resourceapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: namespace},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{
			Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &req}}},
		}},
	}
}

// PodLabel marks the benchmark's pods; its value is the arm.
const PodLabel = "scale.vgpu.dra.dev/arm"

// Pod is workload pod name of shape s. Without claim it is the baseline's
// pod: the same pod without the GPU. Its container never runs (KWOK only
// reports it Running).
func Pod(namespace, name, arm string, s Shape, claim bool) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: namespace,
			Labels: map[string]string{PodLabel: arm, "scale.vgpu.dra.dev/shape": s.Name},
		},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:  "work",
				Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU:    resource.MustParse("100m"),
					corev1.ResourceMemory: resource.MustParse("128Mi"),
				}},
			}},
			Tolerations: []corev1.Toleration{{Key: KWOKAnnotation, Operator: corev1.TolerationOpEqual, Value: KWOKValue, Effect: corev1.TaintEffectNoSchedule}},
			Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchExpressions: []corev1.NodeSelectorRequirement{{Key: NodeTypeLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{NodeTypeValue}}},
				}}},
			}},
			TerminationGracePeriodSeconds: ptr.To[int64](0),
		},
	}
	if claim {
		pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To(s.Name)}}
		pod.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}}
	}
	return pod
}
