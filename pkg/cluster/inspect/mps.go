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
	"fmt"
	"slices"
	"strings"

	"k8s.io/utils/ptr"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/names"
)

// This file reads MPS out of the published slices (docs/mps.md): a GPU not
// in MIG mode whose plugin runs with --mps publishes its whole-GPU device
// gpu-<i> and its MPS device gpu-<i>-mps (attribute mps), both consuming
// the one counter of the GPU's counter set, so the claims allocated on one
// of them decide the GPU's sharing mode.

// Sharing modes of a GPU row (GPURow.Mode): which of the GPU's devices
// hold allocations.
const (
	ModeTimeSliced = "time-sliced"
	ModeMPS        = "mps"
	ModeMIG        = "mig"
	ModeFree       = "free"
)

// readMPS marks g's device as an MPS device.
func readMPS(g *gpu) {
	if a, ok := g.device.Attributes[names.AttrMPS]; ok && ptr.Deref(a.BoolValue, false) {
		g.mps = true
	}
}

// mpsRows folds the MPS devices of inv into their GPU's row (rows holds
// the rows of the whole-GPU devices), matched by node and UUID: their
// claims, allocated memory and cores, and used memory count in the GPU's.
func mpsRows(inv *inventory, rows []GPURow) []GPURow {
	byUUID := map[string]int{}
	for i, r := range rows {
		byUUID[r.Node+"/"+r.UUID] = i
	}
	for _, g := range inv.ordered {
		if !g.mps {
			continue
		}
		i, ok := byUUID[g.node+"/"+g.uuid]
		if !ok {
			// Only the MPS device is published: a row of its own, so
			// that its claims are not hidden.
			rows = append(rows, GPURow{Node: g.node, GPU: strings.TrimSuffix(g.key.device, "-mps"), UUID: g.uuid, Product: g.product,
				MemoryCapacity: g.memory, CoresCapacity: g.cores, Health: HealthHealthy, Mode: ModeFree})
			i = len(rows) - 1
			byUUID[g.node+"/"+g.uuid] = i
		}
		rows[i].MPSDevice = g.key.device
		if g.granted.shares == 0 {
			continue
		}
		rows[i].Mode = ModeMPS
		rows[i].Claims += g.granted.shares
		rows[i].MemoryAllocated += g.granted.memory
		rows[i].CoresAllocated += g.granted.cores
		if g.usedSeen {
			rows[i].MemoryUsed = ptr.To(ptr.Deref(rows[i].MemoryUsed, 0) + g.usedSum)
		}
	}
	return rows
}

// modeReasons explain why the sharing-mode counter of g's GPU leaves no
// room for g: the GPU's other device, of the other mode, holds claims.
// Empty when g is not a device of a GPU with an MPS device, or the other
// device holds none.
func (inv *inventory) modeReasons(g *gpu) []string {
	if g.mig != nil || g.migEnabled {
		return nil
	}
	for _, o := range inv.counterBlockers(g) {
		if o.mig != nil || o.mps == g.mps {
			continue
		}
		claims := strings.Join(slices.Sorted(slices.Values(o.claims)), ", ")
		gpuName := strings.TrimSuffix(g.key.device, "-mps")
		if o.mps {
			return []string{fmt.Sprintf("%s serves MPS claims (%s); a time-sliced or whole-GPU claim fits once they are gone", gpuName, claims)}
		}
		return []string{fmt.Sprintf("%s serves time-sliced or whole-GPU claims (%s); an MPS claim fits once they are gone", gpuName, claims)}
	}
	return nil
}
