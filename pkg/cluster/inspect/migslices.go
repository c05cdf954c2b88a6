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
	"cmp"
	"fmt"
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/names"
)

// This file reads MIG out of the published slices (docs/mig.md): a MIG
// device carries its profile, placement and parent GPU; the whole-GPU
// device of a GPU in MIG mode carries migEnabled; both consume counters
// of the GPU's counter set, which is what keeps them apart.

// migDev is what a MIG device publishes of its instance.
type migDev struct {
	profile     string
	start, size int64
	parentUUID  string
	parentIndex int64
	static      bool
}

// readMIG fills in g's MIG attributes from its device.
func readMIG(g *gpu) {
	d := g.device
	if a, ok := d.Attributes[names.AttrMIGEnabled]; ok && ptr.Deref(a.BoolValue, false) {
		g.migEnabled = true
	}
	profile := stringAttr(d, names.AttrProfile)
	if profile == "" {
		return
	}
	m := &migDev{profile: profile, parentUUID: stringAttr(d, names.AttrParentUUID), parentIndex: -1}
	m.start, _ = intAttr(d, names.AttrPlacementStart)
	m.size, _ = intAttr(d, names.AttrPlacementSize)
	if v, ok := intAttr(d, names.AttrParentIndex); ok {
		m.parentIndex = v
	}
	if a, ok := d.Attributes[names.AttrStatic]; ok && ptr.Deref(a.BoolValue, false) {
		m.static = true
	}
	g.mig = m
	g.index = m.parentIndex
}

func intAttr(d *resourceapi.Device, name resourceapi.QualifiedName) (int64, bool) {
	if a, ok := d.Attributes[name]; ok && a.IntValue != nil {
		return *a.IntValue, true
	}
	return 0, false
}

// describe names a MIG device as people do: "3g.71gb at slice 4".
func (m *migDev) describe() string {
	return fmt.Sprintf("%s at slice %d", m.profile, m.start)
}

// counterTotals are the published counter sets of a pool, by set name,
// read from the slices once per pool.
func (inv *inventory) counterTotals(pool string) map[string]map[string]int64 {
	if out, ok := inv.totals[pool]; ok {
		return out
	}
	out := map[string]map[string]int64{}
	for i := range inv.snap.Slices {
		s := &inv.snap.Slices[i]
		if s.Spec.Driver != names.DriverName || s.Spec.Pool.Name != pool || s.Spec.Pool.Generation != inv.newest[pool] {
			continue
		}
		for _, set := range s.Spec.SharedCounters {
			m := map[string]int64{}
			for name, c := range set.Counters {
				m[name] = c.Value.Value()
			}
			out[set.Name] = m
		}
	}
	if inv.totals == nil {
		inv.totals = map[string]map[string]map[string]int64{}
	}
	inv.totals[pool] = out
	return out
}

// counterBlockers are the allocated devices of g's pool that consume
// counters of one of g's counter sets.
func (inv *inventory) counterBlockers(g *gpu) []*gpu {
	sets := map[string]bool{}
	for _, c := range g.device.ConsumesCounters {
		sets[c.CounterSet] = true
	}
	var out []*gpu
	for _, o := range inv.ordered {
		if o == g || o.key.pool != g.key.pool || o.granted.shares == 0 {
			continue
		}
		for _, c := range o.device.ConsumesCounters {
			if sets[c.CounterSet] {
				out = append(out, o)
				break
			}
		}
	}
	return out
}

// counterReasons explain why the counters of g's GPU leave no room for g:
// software slices hold the whole GPU, MIG devices hold it or a memory
// slice of g's placement, the compute slices or a profile's instances are
// used up. Empty when the counters allow g.
func (inv *inventory) counterReasons(g *gpu) []string {
	if len(g.device.ConsumesCounters) == 0 {
		return nil
	}
	if reasons := inv.modeReasons(g); len(reasons) > 0 {
		return reasons
	}
	blockers := inv.counterBlockers(g)
	var reasons []string
	if g.mig == nil {
		// The whole-GPU device of a GPU in MIG mode: any MIG device
		// allocated takes some of its counters.
		var held []string
		for _, o := range blockers {
			if o.mig != nil {
				held = append(held, o.mig.describe()+" ("+strings.Join(o.claims, ", ")+")")
			}
		}
		if len(held) > 0 {
			reasons = append(reasons, fmt.Sprintf("GPU %d is in MIG use: %s allocated", g.index, strings.Join(held, ", ")))
		}
		return reasons
	}
	mine := counterUse(g.device)
	var overlapping []string
	for _, o := range blockers {
		if o.mig == nil {
			reasons = append(reasons, fmt.Sprintf("the whole GPU %d is taken by software slices (%d claims)", g.mig.parentIndex, o.granted.shares))
			continue
		}
		theirs := counterUse(o.device)
		for name := range mine {
			if strings.HasPrefix(name, "memory-slice-") && theirs[name] > 0 {
				overlapping = append(overlapping, "a "+o.mig.describe())
				break
			}
		}
	}
	if len(overlapping) > 0 {
		reasons = append(reasons, fmt.Sprintf("no free placement for %s: %s blocks it", g.mig.describe(), strings.Join(overlapping, " and ")))
	}
	if len(reasons) > 0 {
		return reasons
	}
	// Counters that add up: compute slices, a profile's instance count.
	used := map[string]int64{}
	for _, o := range blockers {
		for name, v := range counterUse(o.device) {
			used[name] += v
		}
	}
	for _, c := range g.device.ConsumesCounters {
		totals := inv.counterTotals(g.key.pool)[c.CounterSet]
		for _, name := range sortedNames(mine) {
			total, ok := totals[name]
			if !ok || used[name]+mine[name] <= total {
				continue
			}
			switch {
			case name == names.CounterComputeSlices:
				reasons = append(reasons, fmt.Sprintf("compute slices: %s needs %d, %d of %d are free", g.mig.profile, mine[name], max(total-used[name], 0), total))
			case strings.HasSuffix(name, "-instances"):
				reasons = append(reasons, fmt.Sprintf("%s: all %d instances the GPU allows are allocated", g.mig.profile, total))
			default:
				reasons = append(reasons, fmt.Sprintf("counter %s: %d of %d used", name, used[name], total))
			}
		}
	}
	return reasons
}

// counterUse sums the counters d consumes, by counter name.
func counterUse(d *resourceapi.Device) map[string]int64 {
	out := map[string]int64{}
	for _, c := range d.ConsumesCounters {
		for name, v := range c.Counters {
			out[name] += v.Value.Value()
		}
	}
	return out
}

func sortedNames(m map[string]int64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// MIGInstanceRow is one MIG instance of a GPU in `kubectl vgpu nodes`:
// an admin's (static) or one allocated to claims.
type MIGInstanceRow struct {
	Device         string   `json:"device"`
	Profile        string   `json:"profile"`
	PlacementStart int64    `json:"placementStart"`
	PlacementSize  int64    `json:"placementSize"`
	Static         bool     `json:"static"`
	Claims         []string `json:"claims,omitempty"`
}

// migRows folds the MIG devices of inv into their GPU's row: rows holds
// the rows of the other devices; a GPU whose whole-GPU device is not
// published (an admin's instances) gets a row of its own, its memory
// unknown (0). An instance that holds claims is allocated from its GPU
// whole: its memory and its share of the GPU's compute slices count in
// the row's allocated memory and cores, what its claims use in the row's
// used memory.
func migRows(inv *inventory, rows []GPURow) []GPURow {
	byUUID := map[string]int{}
	for i, r := range rows {
		if r.UUID != "" {
			byUUID[r.Node+"/"+r.UUID] = i
		}
	}
	for _, g := range inv.ordered {
		if g.mig == nil {
			continue
		}
		key := g.node + "/" + g.mig.parentUUID
		i, ok := byUUID[key]
		if !ok {
			rows = append(rows, GPURow{Node: g.node, GPU: fmt.Sprintf("gpu-%d", g.mig.parentIndex), UUID: g.mig.parentUUID,
				Product: g.product, CoresCapacity: names.CoresCapacity, Health: HealthHealthy})
			i = len(rows) - 1
			byUUID[key] = i
		}
		rows[i].MIG = MIGModeOn
		if !g.mig.static && g.granted.shares == 0 {
			continue
		}
		rows[i].Instances = append(rows[i].Instances, MIGInstanceRow{
			Device: g.key.device, Profile: g.mig.profile, PlacementStart: g.mig.start, PlacementSize: g.mig.size,
			Static: g.mig.static, Claims: slices.Sorted(slices.Values(g.claims)),
		})
		rows[i].Claims += g.granted.shares
		if g.granted.shares > 0 {
			rows[i].Mode = ModeMIG
			rows[i].MemoryAllocated += g.memory
			rows[i].CoresAllocated += inv.computeShare(g)
		}
		if g.usedSeen {
			rows[i].MemoryUsed = ptr.To(ptr.Deref(rows[i].MemoryUsed, 0) + g.usedSum)
		}
	}
	slices.SortStableFunc(rows, func(a, b GPURow) int { return cmp.Or(cmp.Compare(a.Node, b.Node), gpuLess(a.GPU, b.GPU)) })
	for i := range rows {
		slices.SortFunc(rows[i].Instances, func(a, b MIGInstanceRow) int {
			return cmp.Or(cmp.Compare(a.PlacementStart, b.PlacementStart), cmp.Compare(a.Device, b.Device))
		})
	}
	return rows
}

// computeShare is the percent of its GPU's SM time MIG device g takes: its
// compute slices over those of the GPU's counter set; 0 where the slices
// publish no counters.
func (inv *inventory) computeShare(g *gpu) int64 {
	for _, c := range g.device.ConsumesCounters {
		total := inv.counterTotals(g.key.pool)[c.CounterSet][names.CounterComputeSlices]
		if used, ok := c.Counters[names.CounterComputeSlices]; ok && total > 0 {
			return used.Value.Value() * names.CoresCapacity / total
		}
	}
	return 0
}

// MIGModeOn is GPURow.MIG of a GPU in MIG mode.
const MIGModeOn = "MIG"
