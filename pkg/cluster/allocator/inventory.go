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
	"cmp"
	"slices"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/names"
)

// gpu is what scoring needs to know about one published GPU of this driver.
type gpuState struct {
	id     structured.DeviceID
	node   string
	memory int64 // published memory capacity in bytes
	// defaultMemory is what a request without a memory request consumes
	// (the capacity's request policy default; all of it without one).
	defaultMemory int64
	cores         int64 // published cores capacity (100)
	// pcieRoot and numa group GPUs for topology; empty/-1 when unknown.
	pcieRoot string
	numa     int64
	// slice and index locate the device in its ResourceSlice, so that the
	// slice can be handed to the allocator with its devices reordered.
	slice *resourceapi.ResourceSlice
	index int

	// Consumption, refreshed from the allocation tracker when it changes.
	fill      float64 // 0 (idle) .. 1 (full), see refresh
	freeMem   int64
	freeCores int64
}

// nodeInventory is one node as the allocator sees it.
type nodeInventory struct {
	name string
	gpus []*gpuState
	// fill is the mean fill of the node's GPUs; defaultFits counts the GPUs
	// that can take a request without a memory request. Refreshed with the
	// GPUs.
	fill        float64
	defaultFits int
	// topology says whether some GPUs share a PCIe root or a NUMA node, so
	// that trying to keep a claim within one is worth an allocator run.
	sharedPCIeRoot, sharedNUMA bool
	// slices is what the structured allocator gets for this node: every
	// slice of every pool with a slice on the node (a pool must be complete
	// to be used), plus the slices not bound to one node.
	slices []*resourceapi.ResourceSlice
}

// inventory indexes the published ResourceSlices by node. It is rebuilt
// when slices change, which is rare next to allocations.
type inventory struct {
	nodes map[string]*nodeInventory
	gpus  map[structured.DeviceID]*gpuState
	// shared holds slices without a node name (network-attached devices);
	// they are relevant to every node.
	shared []*resourceapi.ResourceSlice
}

type poolKey struct{ driver, pool string }

func newInventory(driverName string, all []*resourceapi.ResourceSlice) *inventory {
	inv := &inventory{nodes: map[string]*nodeInventory{}, gpus: map[structured.DeviceID]*gpuState{}}
	pools := map[poolKey][]*resourceapi.ResourceSlice{}
	nodePools := map[string][]poolKey{}
	for _, s := range all {
		key := poolKey{s.Spec.Driver, s.Spec.Pool.Name}
		pools[key] = append(pools[key], s)
		node := ptr.Deref(s.Spec.NodeName, "")
		if node == "" {
			inv.shared = append(inv.shared, s)
			continue
		}
		if !slices.Contains(nodePools[node], key) {
			nodePools[node] = append(nodePools[node], key)
		}
	}
	for node, keys := range nodePools {
		n := &nodeInventory{name: node}
		for _, key := range keys {
			poolSlices := pools[key]
			n.slices = append(n.slices, poolSlices...)
			if key.driver != driverName {
				continue
			}
			// Only the newest generation counts, as for the allocator.
			newest := slices.MaxFunc(poolSlices, func(a, b *resourceapi.ResourceSlice) int {
				return cmp.Compare(a.Spec.Pool.Generation, b.Spec.Pool.Generation)
			}).Spec.Pool.Generation
			for _, s := range poolSlices {
				if s.Spec.Pool.Generation != newest || ptr.Deref(s.Spec.NodeName, "") != node {
					continue
				}
				for i := range s.Spec.Devices {
					g := newGPU(driverName, node, key.pool, &s.Spec.Devices[i])
					g.slice, g.index = s, i
					n.gpus = append(n.gpus, g)
					inv.gpus[g.id] = g
				}
			}
		}
		n.slices = append(n.slices, inv.shared...)
		roots, numas := sets.New[string](), sets.New[int64]()
		for _, g := range n.gpus {
			if g.pcieRoot != "" {
				n.sharedPCIeRoot = n.sharedPCIeRoot || roots.Has(g.pcieRoot)
				roots.Insert(g.pcieRoot)
			}
			if g.numa >= 0 {
				n.sharedNUMA = n.sharedNUMA || numas.Has(g.numa)
				numas.Insert(g.numa)
			}
		}
		inv.nodes[node] = n
	}
	return inv
}

func newGPU(driverName, node, pool string, d *resourceapi.Device) *gpuState {
	g := &gpuState{id: structured.MakeDeviceID(driverName, pool, d.Name), node: node, numa: -1}
	if c, ok := d.Capacity[names.CapacityMemory]; ok {
		g.memory = c.Value.Value()
		g.defaultMemory = g.memory
		if c.RequestPolicy != nil && c.RequestPolicy.Default != nil {
			g.defaultMemory = c.RequestPolicy.Default.Value()
		}
	}
	if c, ok := d.Capacity[names.CapacityCores]; ok {
		g.cores = c.Value.Value()
	}
	if a, ok := d.Attributes[names.AttrPCIeRoot]; ok && a.StringValue != nil {
		g.pcieRoot = *a.StringValue
	}
	if a, ok := d.Attributes[names.AttrNUMANode]; ok && a.IntValue != nil {
		g.numa = *a.IntValue
	}
	return g
}

// refresh recomputes a GPU's consumption from the allocation tracker. A GPU's fill is
// the mean of its used memory and used cores fractions (HAMi weighs the
// two alike); a GPU held exclusively is full.
func (g *gpuState) refresh(tr *allocationTracker) {
	usedMem, usedCores, exclusive := tr.used(g.id, names.CapacityMemory, names.CapacityCores)
	if exclusive {
		g.fill, g.freeMem, g.freeCores = 1, 0, 0
		return
	}
	g.freeMem, g.freeCores = max(g.memory-usedMem, 0), max(g.cores-usedCores, 0)
	g.fill = (fraction(usedMem, g.memory) + fraction(usedCores, g.cores)) / 2
}

// refresh recomputes the node's summary from its GPUs.
func (n *nodeInventory) refresh() {
	n.fill, n.defaultFits = 0, 0
	for _, g := range n.gpus {
		n.fill += g.fill
		// A request without a memory request takes all of a GPU whose
		// default is all its memory, so each needs a GPU of its own with
		// nothing used. A GPU with a smaller default always counts: the
		// count stays a bound that never prunes a node that would fit.
		if g.defaultMemory < g.memory || g.freeMem >= g.memory {
			n.defaultFits++
		}
	}
	if len(n.gpus) > 0 {
		n.fill /= float64(len(n.gpus))
	}
}

// mayFit reports whether the node can possibly take the demand: enough
// GPUs, a GPU it can take whole for each device asked for without memory,
// and for each request a GPU with its memory and cores left together. A GPU
// with free memory and another with free cores are not a GPU with both, and
// binpack's fullest nodes are mostly such: checking them here spares a
// structured allocator run over each (50 per decision at 1,000 nodes).
func (n *nodeInventory) mayFit(d demand) bool {
	if len(n.gpus) < d.devices || n.defaultFits < d.wholeMemory {
		return false
	}
	for _, need := range d.perRequest {
		if !slices.ContainsFunc(n.gpus, func(g *gpuState) bool {
			return g.freeMem >= need.memory && g.freeCores >= need.cores
		}) {
			return false
		}
	}
	return true
}

func fraction(used, total int64) float64 {
	if total <= 0 {
		return 0
	}
	return min(float64(used)/float64(total), 1)
}
