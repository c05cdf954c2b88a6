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
	"cmp"
	"fmt"
	"slices"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/names"
)

// GPUUse is what the allocated claims consume of one published GPU.
type GPUUse struct {
	Pool, Device             string
	MemoryCapacity, CoresCap int64
	Memory, Cores            int64
	Allocations              int
}

// Packing sums up how the claims are spread over the GPUs.
type Packing struct {
	// GPUs is the number of published GPUs, Used those with at least one
	// allocation, Nodes the nodes with at least one used GPU.
	GPUs, Used, Nodes int
	// FreeOnPartial is the free memory, in bytes, of GPUs that are used
	// but not full: memory that only claims small enough can still use.
	FreeOnPartial int64
	// Allocations is the number of device allocations counted.
	Allocations int
}

// Pack adds the consumed capacity of every allocation of driver in claims
// onto the GPUs published in slices. It returns the packing and one message
// per GPU whose memory or cores are over capacity, or per allocation of a
// device that is not published.
func Pack(driver string, rs []resourceapi.ResourceSlice, claims []resourceapi.ResourceClaim) (Packing, []string) {
	gpus := map[[2]string]*GPUUse{}
	for _, s := range rs {
		if s.Spec.Driver != driver {
			continue
		}
		for _, d := range s.Spec.Devices {
			u := &GPUUse{Pool: s.Spec.Pool.Name, Device: d.Name}
			if c, ok := d.Capacity[names.CapacityMemory]; ok {
				u.MemoryCapacity = c.Value.Value()
			}
			if c, ok := d.Capacity[names.CapacityCores]; ok {
				u.CoresCap = c.Value.Value()
			}
			gpus[[2]string{u.Pool, u.Device}] = u
		}
	}
	var problems []string
	var p Packing
	for _, c := range claims {
		if c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			if r.Driver != driver {
				continue
			}
			u, ok := gpus[[2]string{r.Pool, r.Device}]
			if !ok {
				problems = append(problems, fmt.Sprintf("claim %s/%s is allocated %s/%s, which is not published", c.Namespace, c.Name, r.Pool, r.Device))
				continue
			}
			p.Allocations++
			u.Allocations++
			if r.ConsumedCapacity == nil {
				// An allocation without consumed capacity holds the device whole.
				u.Memory += u.MemoryCapacity
				u.Cores += u.CoresCap
				continue
			}
			if q, ok := r.ConsumedCapacity[names.CapacityMemory]; ok {
				u.Memory += q.Value()
			}
			if q, ok := r.ConsumedCapacity[names.CapacityCores]; ok {
				u.Cores += q.Value()
			}
		}
	}
	all := make([]*GPUUse, 0, len(gpus))
	for _, u := range gpus {
		all = append(all, u)
	}
	slices.SortFunc(all, func(a, b *GPUUse) int { return cmp.Or(cmp.Compare(a.Pool, b.Pool), cmp.Compare(a.Device, b.Device)) })
	nodes := map[string]bool{}
	p.GPUs = len(all)
	for _, u := range all {
		if u.Memory > u.MemoryCapacity || u.Cores > u.CoresCap {
			problems = append(problems, fmt.Sprintf("GPU %s/%s is over capacity: %d allocations consume memory %d of %d bytes, cores %d of %d",
				u.Pool, u.Device, u.Allocations, u.Memory, u.MemoryCapacity, u.Cores, u.CoresCap))
		}
		if u.Allocations == 0 {
			continue
		}
		p.Used++
		nodes[u.Pool] = true
		if u.Memory < u.MemoryCapacity {
			p.FreeOnPartial += u.MemoryCapacity - u.Memory
		}
	}
	p.Nodes = len(nodes)
	return p, problems
}
