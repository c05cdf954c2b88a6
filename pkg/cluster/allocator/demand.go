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
	resourceapi "k8s.io/api/resource/v1"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/names"
)

// demand is a lower bound of what a pod's claims need on one node. It only
// prunes nodes that certainly cannot fit and sizes the topology search; the
// structured allocator decides.
type demand struct {
	// perRequest holds, for each request, the memory and cores that some
	// GPU of the node must have left together (the least of its
	// alternatives).
	perRequest []gpuNeed
	// devices is the least number of this driver's devices needed;
	// wholeMemory how many of them are asked for without a memory request,
	// which consumes the GPU's default: on our GPUs, all of its memory.
	devices, wholeMemory int
	// bounded is false when a request may be served by another driver or
	// needs an unknown number of devices; then nothing is pruned.
	bounded bool
}

// demandOf reads the requests of claims; isOurs tells this driver's classes.
func demandOf(claims []*resourceapi.ResourceClaim, isOurs func(class string) bool) demand {
	d := demand{bounded: true}
	for _, claim := range claims {
		for i := range claim.Spec.Devices.Requests {
			req := &claim.Spec.Devices.Requests[i]
			alts := alternatives(req)
			first := true
			var mem, cores int64
			var count, whole int
			for _, a := range alts {
				if !isOurs(a.class) || a.all {
					d.bounded = false
				}
				if a.all {
					// "All" of our GPUs: at least two is what matters for
					// the topology search.
					a.count = 2
				}
				w := 0
				if a.memoryUnset {
					w = a.count
				}
				if first {
					mem, cores, count, whole, first = a.memory, a.cores, a.count, w, false
					continue
				}
				mem, cores, count, whole = min(mem, a.memory), min(cores, a.cores), min(count, a.count), min(whole, w)
			}
			d.perRequest = append(d.perRequest, gpuNeed{memory: mem, cores: cores})
			d.devices += count
			d.wholeMemory += whole
		}
	}
	return d
}

// gpuNeed is what one GPU must have free.
type gpuNeed struct {
	memory, cores int64
}

type alternative struct {
	class         string
	all           bool
	count         int
	memory, cores int64
	// memoryUnset: no memory request, so the device's default is consumed.
	memoryUnset bool
}

func alternatives(req *resourceapi.DeviceRequest) []alternative {
	if req.Exactly != nil {
		return []alternative{newAlternative(req.Exactly.DeviceClassName, req.Exactly.AllocationMode, req.Exactly.Count, req.Exactly.Capacity)}
	}
	out := make([]alternative, 0, len(req.FirstAvailable))
	for _, s := range req.FirstAvailable {
		out = append(out, newAlternative(s.DeviceClassName, s.AllocationMode, s.Count, s.Capacity))
	}
	return out
}

func newAlternative(class string, mode resourceapi.DeviceAllocationMode, count int64, capacity *resourceapi.CapacityRequirements) alternative {
	a := alternative{class: class, all: mode == resourceapi.DeviceAllocationModeAll, count: int(max(count, 1)), memoryUnset: true}
	if capacity != nil {
		var memorySet bool
		a.memory, memorySet = requested(capacity, names.CapacityMemory)
		a.cores, _ = requested(capacity, names.CapacityCores)
		a.memoryUnset = !memorySet
	}
	return a
}

// requested reads a capacity request by its short or driver-qualified name;
// false when there is none.
func requested(c *resourceapi.CapacityRequirements, name resourceapi.QualifiedName) (int64, bool) {
	if q, ok := c.Requests[name]; ok {
		return q.Value(), true
	}
	if q, ok := c.Requests[resourceapi.QualifiedName(names.DriverName+"/")+name]; ok {
		return q.Value(), true
	}
	return 0, false
}
