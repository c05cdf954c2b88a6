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
	"slices"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/labels"
	resourcelisters "k8s.io/client-go/listers/resource/v1"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/names"
)

var (
	gpuLabels   = []string{"node", "device", "device_uuid", "device_index", "product"}
	claimLabels = []string{"namespace", "claim", "pod", "node", "device", "device_uuid", "device_index"}

	memoryCapacityDesc = prometheus.NewDesc("vgpu_dra_gpu_memory_capacity_bytes",
		"GPU memory that the GPU's ResourceSlice publishes for allocation.", gpuLabels, nil)
	memoryAllocatedDesc = prometheus.NewDesc("vgpu_dra_gpu_memory_allocated_bytes",
		"GPU memory granted to allocated claims on the GPU.", gpuLabels, nil)
	coresCapacityDesc = prometheus.NewDesc("vgpu_dra_gpu_cores_capacity",
		"SM time that the GPU publishes, in percent of the GPU (100).", gpuLabels, nil)
	coresAllocatedDesc = prometheus.NewDesc("vgpu_dra_gpu_cores_allocated",
		"SM time granted to allocated claims on the GPU, in percent of the GPU.", gpuLabels, nil)
	sharesDesc = prometheus.NewDesc("vgpu_dra_gpu_shares",
		"Number of allocated claim shares on the GPU.", gpuLabels, nil)
	claimMemoryDesc = prometheus.NewDesc("vgpu_dra_claim_memory_granted_bytes",
		"GPU memory granted to the claim on one GPU.", claimLabels, nil)
	claimCoresDesc = prometheus.NewDesc("vgpu_dra_claim_cores_granted",
		"SM time granted to the claim on one GPU, in percent of the GPU (0 = best effort).", claimLabels, nil)
	largestFreeDesc = prometheus.NewDesc("vgpu_dra_node_largest_free_memory_bytes",
		"Largest unallocated GPU memory on a single GPU of the node: the biggest memory request that still fits there.", []string{"node"}, nil)
	freeDesc = prometheus.NewDesc("vgpu_dra_node_free_memory_bytes",
		"Unallocated GPU memory summed over the node's GPUs.", []string{"node"}, nil)
)

// Collector computes the allocation metrics from informer caches.
type Collector struct {
	DriverName string
	Slices     resourcelisters.ResourceSliceLister
	Claims     resourcelisters.ResourceClaimLister
}

type deviceKey struct{ pool, device string }

type gpu struct {
	node, uuid, index, product string
	memory, cores              int64
	memoryAllocated            int64
	coresAllocated             int64
	shares                     int
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{memoryCapacityDesc, memoryAllocatedDesc, coresCapacityDesc, coresAllocatedDesc,
		sharesDesc, claimMemoryDesc, claimCoresDesc, largestFreeDesc, freeDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	gpus, err := c.gpus()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(memoryCapacityDesc, err)
		return
	}
	claims, err := c.Claims.List(labels.Everything())
	if err != nil {
		ch <- prometheus.NewInvalidMetric(claimMemoryDesc, err)
		return
	}
	for _, claim := range claims {
		if claim.Status.Allocation == nil {
			continue
		}
		pod := podOf(claim)
		for _, r := range claim.Status.Allocation.Devices.Results {
			if r.Driver != c.DriverName {
				continue
			}
			g, known := gpus[deviceKey{r.Pool, r.Device}]
			if !known {
				// The slice is gone (node removed): report the grant with
				// what the result itself says.
				g = &gpu{node: r.Pool}
			}
			memory, cores := g.memory, int64(0)
			if q, ok := r.ConsumedCapacity[names.CapacityMemory]; ok {
				memory = q.Value()
			}
			if q, ok := r.ConsumedCapacity[names.CapacityCores]; ok {
				cores = q.Value()
			}
			g.memoryAllocated += memory
			g.coresAllocated += cores
			g.shares++
			values := []string{claim.Namespace, claim.Name, pod, g.node, r.Device, g.uuid, g.index}
			ch <- prometheus.MustNewConstMetric(claimMemoryDesc, prometheus.GaugeValue, float64(memory), values...)
			ch <- prometheus.MustNewConstMetric(claimCoresDesc, prometheus.GaugeValue, float64(cores), values...)
		}
	}

	// A GPU published with its MPS device (docs/mps.md) is two devices of
	// one UUID, gpu-<i> and gpu-<i>-mps, of which at most one holds claims
	// (they consume the GPU's one sharing-mode counter): its free memory
	// counts once, what neither device's claims hold.
	type physical struct{ memory, allocated int64 }
	byGPU := map[[2]string]*physical{}
	for key, g := range gpus {
		values := []string{g.node, key.device, g.uuid, g.index, g.product}
		ch <- prometheus.MustNewConstMetric(memoryCapacityDesc, prometheus.GaugeValue, float64(g.memory), values...)
		ch <- prometheus.MustNewConstMetric(memoryAllocatedDesc, prometheus.GaugeValue, float64(g.memoryAllocated), values...)
		ch <- prometheus.MustNewConstMetric(coresCapacityDesc, prometheus.GaugeValue, float64(g.cores), values...)
		ch <- prometheus.MustNewConstMetric(coresAllocatedDesc, prometheus.GaugeValue, float64(g.coresAllocated), values...)
		ch <- prometheus.MustNewConstMetric(sharesDesc, prometheus.GaugeValue, float64(g.shares), values...)
		id := [2]string{g.node, g.uuid}
		if g.uuid == "" {
			id[1] = "device:" + key.device
		}
		p := byGPU[id]
		if p == nil {
			p = &physical{}
			byGPU[id] = p
		}
		p.memory = max(p.memory, g.memory)
		p.allocated += g.memoryAllocated
	}
	largest := map[string]int64{}
	free := map[string]int64{}
	for id, p := range byGPU {
		left := max(p.memory-p.allocated, 0)
		largest[id[0]] = max(largest[id[0]], left)
		free[id[0]] += left
	}
	for node, v := range largest {
		ch <- prometheus.MustNewConstMetric(largestFreeDesc, prometheus.GaugeValue, float64(v), node)
		ch <- prometheus.MustNewConstMetric(freeDesc, prometheus.GaugeValue, float64(free[node]), node)
	}
}

// gpus indexes the driver's published devices. Only the newest generation
// of each pool counts: older slices are being replaced.
func (c *Collector) gpus() (map[deviceKey]*gpu, error) {
	all, err := c.Slices.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	newest := map[string]int64{}
	for _, s := range all {
		if s.Spec.Driver == c.DriverName {
			newest[s.Spec.Pool.Name] = max(newest[s.Spec.Pool.Name], s.Spec.Pool.Generation)
		}
	}
	out := map[deviceKey]*gpu{}
	for _, s := range all {
		if s.Spec.Driver != c.DriverName || s.Spec.Pool.Generation != newest[s.Spec.Pool.Name] {
			continue
		}
		node := s.Spec.Pool.Name
		if s.Spec.NodeName != nil && *s.Spec.NodeName != "" {
			node = *s.Spec.NodeName
		}
		for _, d := range s.Spec.Devices {
			g := &gpu{node: node, uuid: stringAttr(d, names.AttrUUID), product: stringAttr(d, names.AttrProductName)}
			if a, ok := d.Attributes[names.AttrIndex]; ok && a.IntValue != nil {
				g.index = strconv.FormatInt(*a.IntValue, 10)
			}
			if cp, ok := d.Capacity[names.CapacityMemory]; ok {
				g.memory = cp.Value.Value()
			}
			if cp, ok := d.Capacity[names.CapacityCores]; ok {
				g.cores = cp.Value.Value()
			}
			out[deviceKey{s.Spec.Pool.Name, d.Name}] = g
		}
	}
	return out, nil
}

func stringAttr(d resourceapi.Device, name resourceapi.QualifiedName) string {
	if a, ok := d.Attributes[name]; ok && a.StringValue != nil {
		return *a.StringValue
	}
	return ""
}

// podOf names the pod a claim belongs to: its owner for claims made from a
// template, else its only consumer. A claim shared by several pods has no
// single pod and gets "".
func podOf(claim *resourceapi.ResourceClaim) string {
	for _, o := range claim.OwnerReferences {
		if o.Kind == "Pod" && o.APIVersion == "v1" {
			return o.Name
		}
	}
	pods := slices.DeleteFunc(slices.Clone(claim.Status.ReservedFor), func(r resourceapi.ResourceClaimConsumerReference) bool {
		return r.Resource != "pods" || r.APIGroup != ""
	})
	if len(pods) == 1 {
		return pods[0].Name
	}
	return ""
}
