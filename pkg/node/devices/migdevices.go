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

package devices

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/utils/ptr"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/names"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/discovery"
)

// This file builds what the scheduler sees of GPUs in MIG mode
// (docs/mig.md): per GPU a counter set of its memory slices and compute
// slices, the whole-GPU device for software slices consuming every counter,
// and one device per (GPU-instance profile, placement) consuming exactly
// that placement's slices. The structured allocator charges a shareable
// device's counters once, at its first share, so these counters alone keep
// software slices and MIG instances of one GPU apart and MIG instances from
// overlapping. Everything here is a pure function of discovered state; the
// plugin does not publish it yet (docs/mig.md, "Status").

// GPU is one GPU as the publisher sees it: what NVML reported and, for a
// MIG-capable GPU, its MIG state.
type GPU struct {
	Info discovery.Info
	// MIG is nil for a GPU without MIG support.
	MIG *discovery.MIGInfo
	// Owned are the existing GPU instances the plugin created (from its
	// checkpoint), matched by profile and placement. Every other existing
	// instance is an admin's: published as a fixed device, never touched.
	Owned []discovery.MIGInstance
	// Blocked are owned instances being destroyed (NVML said in use):
	// not offered themselves, they block their placement, every placement
	// overlapping it and the whole-GPU device, as an admin's instance
	// does, until they are gone.
	Blocked []discovery.MIGInstance
}

// MIGOptions says which cluster features the published devices may use.
type MIGOptions struct {
	// PartitionableDevices is the DRAPartitionableDevices feature (beta and
	// on by default in Kubernetes 1.37): counter sets and devices consuming
	// them. Without it, a GPU in MIG mode is published as its whole-GPU
	// device only (plus an admin's fixed instances), without counters.
	PartitionableDevices bool
	// MPS publishes, with PartitionableDevices, every GPU not in MIG mode
	// with a counter set of one sharing-mode counter, consumed whole by its
	// whole-GPU device and by its MPS device (docs/mps.md): one GPU serves
	// time-sliced or MPS claims, never both at once.
	MPS bool
}

// Counter names of a GPU's counter set besides names.CounterComputeSlices.
// Counter names must be DNS labels.
const (
	// counterMemorySlicePrefix is followed by the memory slice's number;
	// each memory slice is a counter of 1.
	counterMemorySlicePrefix = "memory-slice-"
	// counterInstancesSuffix follows a profile's label for the counter
	// that bounds how many instances of the profile one GPU holds, where
	// NVML's instance count is below what the placements alone allow
	// (e.g. one 1g.18gb+me per GPU, it takes the GPU's only OFA engine).
	counterInstancesSuffix = "-instances"
)

// CounterSetName is the name of the counter set of the GPU with NVML index
// index.
func CounterSetName(index int) string {
	return fmt.Sprintf("gpu-%d-slices", index)
}

// MemorySliceCounter is the counter of memory slice i.
func MemorySliceCounter(i int) string {
	return fmt.Sprintf("%s%d", counterMemorySlicePrefix, i)
}

// MIGDeviceName names the device of profile p at the placement that starts
// at memory slice start on the GPU with NVML index index, e.g.
// "gpu-0-mig-3g-71gb-4" or "gpu-0-mig-1g-18gb-me-0".
func MIGDeviceName(index int, p discovery.MIGProfile, start int) string {
	return fmt.Sprintf("gpu-%d-mig-%s-%d", index, profileLabel(p.Name), start)
}

// ParseMIGDeviceName splits a name MIGDeviceName built into the GPU's NVML
// index, the profile label and the placement's start. ok is false for any
// other name (a whole GPU's "gpu-<index>" included).
func ParseMIGDeviceName(name string) (index int, label string, start int, ok bool) {
	rest, found := strings.CutPrefix(name, "gpu-")
	if !found {
		return 0, "", 0, false
	}
	idx, rest, found := strings.Cut(rest, "-mig-")
	if !found {
		return 0, "", 0, false
	}
	cut := strings.LastIndexByte(rest, '-')
	if cut <= 0 {
		return 0, "", 0, false
	}
	label, st := rest[:cut], rest[cut+1:]
	index, err1 := strconv.Atoi(idx)
	start, err2 := strconv.Atoi(st)
	if err1 != nil || err2 != nil || index < 0 || start < 0 ||
		strconv.Itoa(index) != idx || strconv.Itoa(start) != st {
		return 0, "", 0, false
	}
	return index, label, start, true
}

// MIGProfileByLabel returns the profile of mig whose device-name label is
// label.
func MIGProfileByLabel(mig discovery.MIGInfo, label string) (discovery.MIGProfile, bool) {
	for _, p := range mig.Profiles {
		if profileLabel(p.Name) == label {
			return p, true
		}
	}
	return discovery.MIGProfile{}, false
}

// profileLabel turns a profile name into a DNS label: "3g.71gb" becomes
// "3g-71gb", and the variants keep distinct labels: "+me" "me", "-me"
// "nome", "+me.all" "meall", "+gfx" "gfx".
func profileLabel(name string) string {
	base, suffix := name, ""
	if i := strings.IndexAny(name, "+-"); i >= 0 {
		base, suffix = name[:i], name[i:]
	}
	label := strings.ReplaceAll(base, ".", "-")
	switch {
	case suffix == "":
	case strings.HasPrefix(suffix, "-"):
		label += "-no" + dnsChars(suffix[1:])
	default:
		label += "-" + dnsChars(suffix[1:])
	}
	return strings.ToLower(label)
}

// dnsChars keeps the letters and digits of s.
func dnsChars(s string) string {
	var b strings.Builder
	for _, c := range strings.ToLower(s) {
		if (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') {
			b.WriteRune(c)
		}
	}
	return b.String()
}

// maxDisjoint is the most placements that can coexist without sharing a
// memory slice (earliest end first is optimal for intervals).
func maxDisjoint(placements []discovery.MIGPlacement) int {
	sorted := append([]discovery.MIGPlacement(nil), placements...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].End() < sorted[j].End() })
	n, end := 0, -1
	for _, p := range sorted {
		if p.Start >= end {
			n++
			end = p.End()
		}
	}
	return n
}

// instanceCounter is the name of p's instance counter and whether p needs
// one.
func instanceCounter(p discovery.MIGProfile) (string, bool) {
	if p.InstanceCount <= 0 || p.InstanceCount >= maxDisjoint(p.Placements) {
		return "", false
	}
	return profileLabel(p.Name) + counterInstancesSuffix, true
}

func counter(n int64) resourceapi.Counter {
	return resourceapi.Counter{Value: *resource.NewQuantity(n, resource.DecimalSI)}
}

// MIGCounters are the counters of a GPU in MIG mode: one per memory slice
// (value 1), its compute slices, and an instance counter for each profile
// whose instance count the placements do not already bound.
func MIGCounters(mig discovery.MIGInfo) map[string]resourceapi.Counter {
	counters := map[string]resourceapi.Counter{
		names.CounterComputeSlices: counter(int64(mig.ComputeSlices())),
	}
	for i := 0; i < mig.MemorySlices(); i++ {
		counters[MemorySliceCounter(i)] = counter(1)
	}
	for _, p := range mig.Profiles {
		if name, ok := instanceCounter(p); ok {
			counters[name] = counter(int64(p.InstanceCount))
		}
	}
	return counters
}

// PlacementCounters are what one instance of p at placement pl consumes:
// its memory slices, its compute slices and, where p has one, one of its
// instance counter.
func PlacementCounters(p discovery.MIGProfile, pl discovery.MIGPlacement) map[string]resourceapi.Counter {
	counters := map[string]resourceapi.Counter{
		names.CounterComputeSlices: counter(int64(p.Slices)),
	}
	for i := pl.Start; i < pl.End(); i++ {
		counters[MemorySliceCounter(i)] = counter(1)
	}
	if name, ok := instanceCounter(p); ok {
		counters[name] = counter(1)
	}
	return counters
}

// MIGResult is what a GPU contributes to the pool.
type MIGResult struct {
	// Devices in publishing order: the whole-GPU device first, then MIG
	// devices by profile (smallest first) and placement.
	Devices []resourceapi.Device
	// CounterSet is nil when no device consumes counters.
	CounterSet *resourceapi.CounterSet
	// Notes say what was left out and why, for the caller to log once.
	Notes []string
}

// GPUDevices builds the devices of one GPU. A GPU without MIG support or
// with MIG off gets today's device (Device), and with migOpts.MPS and
// migOpts.PartitionableDevices also its MPS device and a counter set that
// keeps the two apart (mpsGPUDevices); a GPU in MIG mode gets the
// counter set, the whole-GPU device consuming all of it (realised at
// prepare as a full-size instance) and one device per placement of every
// profile. An admin's instances are published as fixed devices (static:
// true), and neither the whole-GPU device nor any placement overlapping
// them is published, since neither could be created; the same holds for
// g.Blocked, which are not published themselves.
func GPUDevices(g GPU, opts Options, migOpts MIGOptions) MIGResult {
	info := g.Info
	if g.MIG == nil || !g.MIG.Enabled {
		var notes []string
		if g.MIG != nil && g.MIG.Pending {
			notes = append(notes, fmt.Sprintf("GPU %s: MIG mode is enabled but pending until the GPU is reset; published as a plain GPU", info.UUID))
		}
		if migOpts.MPS && migOpts.PartitionableDevices {
			res := mpsGPUDevices(info, opts)
			res.Notes = notes
			return res
		}
		return MIGResult{Devices: []resourceapi.Device{Device(info, opts)}, Notes: notes}
	}
	mig := *g.MIG
	var res MIGResult

	var static []discovery.MIGInstance
	for _, inst := range mig.Instances {
		if !owned(g.Owned, inst) {
			static = append(static, inst)
		}
	}
	blocking := append(append([]discovery.MIGInstance(nil), static...), g.Blocked...)
	// The whole-GPU device needs the full-size instance to be creatable.
	full, hasFull := mig.FullProfile()
	switch {
	case !hasFull:
		res.Notes = append(res.Notes, fmt.Sprintf("GPU %s: no full-size MIG profile; no whole-GPU device", info.UUID))
	case len(static) > 0:
		res.Notes = append(res.Notes, fmt.Sprintf("GPU %s: %d GPU instances made outside the plugin; no whole-GPU device", info.UUID, len(static)))
	case len(g.Blocked) > 0:
		// Not a note: it lasts only until the retry destroys them.
	default:
		res.Devices = append(res.Devices, wholeMIGDevice(info, full, mig, opts, migOpts))
	}

	for _, inst := range static {
		p, ok := mig.Profile(inst.ProfileID)
		if !ok {
			res.Notes = append(res.Notes, fmt.Sprintf("GPU %s: GPU instance %d has unknown profile %d; not published", info.UUID, inst.ID, inst.ProfileID))
			continue
		}
		dev := migDevice(info, p, inst.Placement, opts, migOpts)
		dev.Attributes[names.AttrStatic] = resourceapi.DeviceAttribute{BoolValue: ptr.To(true)}
		res.Devices = append(res.Devices, dev)
	}

	if migOpts.PartitionableDevices {
		for _, p := range mig.Profiles {
			for _, pl := range p.Placements {
				if overlapsAny(pl, blocking) {
					continue
				}
				res.Devices = append(res.Devices, migDevice(info, p, pl, opts, migOpts))
			}
		}
		res.CounterSet = &resourceapi.CounterSet{Name: CounterSetName(info.Index), Counters: MIGCounters(mig)}
	} else {
		res.Notes = append(res.Notes, fmt.Sprintf("GPU %s is in MIG mode, but DRAPartitionableDevices is off: only its whole-GPU device and fixed instances are published", info.UUID))
	}
	return res
}

func owned(list []discovery.MIGInstance, inst discovery.MIGInstance) bool {
	for _, o := range list {
		if o.ProfileID == inst.ProfileID && o.Placement == inst.Placement {
			return true
		}
	}
	return false
}

func overlapsAny(pl discovery.MIGPlacement, instances []discovery.MIGInstance) bool {
	for _, inst := range instances {
		if pl.Overlaps(inst.Placement) {
			return true
		}
	}
	return false
}

// wholeMIGDevice is today's device for a GPU in MIG mode: CUDA sees only
// the full-size instance there, so memory and SM count are the instance's.
// It consumes every counter of the GPU, so it and MIG devices exclude each
// other.
func wholeMIGDevice(info discovery.Info, full discovery.MIGProfile, mig discovery.MIGInfo, opts Options, migOpts MIGOptions) resourceapi.Device {
	info.MemoryBytes = full.MemoryBytes
	info.Multiprocessors = full.Multiprocessors
	dev := Device(info, opts)
	dev.Attributes[names.AttrMIGEnabled] = resourceapi.DeviceAttribute{BoolValue: ptr.To(true)}
	if migOpts.PartitionableDevices {
		dev.ConsumesCounters = []resourceapi.DeviceCounterConsumption{{
			CounterSet: CounterSetName(info.Index),
			Counters:   MIGCounters(mig),
		}}
	}
	return dev
}

// migDevice is the device of profile p at placement pl: the GPU-wide
// attributes of its parent, the profile and placement, and consumable
// memory and cores (percent of the instance's SMs), so that several claims
// can share one instance under libvgpu's limits.
func migDevice(info discovery.Info, p discovery.MIGProfile, pl discovery.MIGPlacement, opts Options, migOpts MIGOptions) resourceapi.Device {
	parent := Device(info, opts)
	attrs := parent.Attributes
	for _, n := range []resourceapi.QualifiedName{names.AttrUUID, names.AttrIndex, names.AttrMinor, names.AttrMultiprocessors} {
		delete(attrs, n)
	}
	attrs[names.AttrProfile] = stringAttr(p.Name)
	attrs[names.AttrPlacementStart] = intAttr(int64(pl.Start))
	attrs[names.AttrPlacementSize] = intAttr(int64(pl.Size))
	attrs[names.AttrParentUUID] = stringAttr(info.UUID)
	attrs[names.AttrParentIndex] = intAttr(int64(info.Index))
	if p.Multiprocessors > 0 {
		attrs[names.AttrMultiprocessors] = intAttr(int64(p.Multiprocessors))
	}
	dev := resourceapi.Device{
		Name:                     MIGDeviceName(info.Index, p, pl.Start),
		Attributes:               attrs,
		AllowMultipleAllocations: ptr.To(true),
		Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
			names.CapacityMemory: memoryCapacity(p.MemoryBytes, opts.withDefaults()),
			names.CapacityCores:  coresCapacity(),
		},
	}
	if migOpts.PartitionableDevices {
		dev.ConsumesCounters = []resourceapi.DeviceCounterConsumption{{
			CounterSet: CounterSetName(info.Index),
			Counters:   PlacementCounters(p, pl),
		}}
	}
	return dev
}

// MIGPool describes all GPUs of a node as one pool, MIG-enabled ones
// included, within the API's limits: counter sets in slices of their own
// (at most 8 per slice), then the devices in NVML index order, at most 64
// per slice when any device consumes counters (128 otherwise, as Pool).
// Notes say what was left out, for the caller to log once.
func MIGPool(gpus []GPU, opts Options, migOpts MIGOptions) (resourceslice.Pool, []string) {
	var (
		devices []resourceapi.Device
		sets    []resourceapi.CounterSet
		notes   []string
	)
	for _, g := range gpus {
		res := GPUDevices(g, opts, migOpts)
		devices = append(devices, res.Devices...)
		if res.CounterSet != nil {
			sets = append(sets, *res.CounterSet)
		}
		notes = append(notes, res.Notes...)
	}
	var slices []resourceslice.Slice
	for start := 0; start < len(sets); start += resourceapi.ResourceSliceMaxCounterSets {
		end := min(start+resourceapi.ResourceSliceMaxCounterSets, len(sets))
		slices = append(slices, resourceslice.Slice{SharedCounters: sets[start:end]})
	}
	perSlice := resourceapi.ResourceSliceMaxDevices
	if len(sets) > 0 {
		perSlice = resourceapi.ResourceSliceMaxDevicesWithAdvancedFeatures
	}
	// start == 0 runs once for an empty node: it still gets one (empty) slice.
	for start := 0; start < len(devices) || start == 0; start += perSlice {
		end := min(start+perSlice, len(devices))
		slices = append(slices, resourceslice.Slice{Devices: devices[start:end]})
	}
	return resourceslice.Pool{Slices: slices}, notes
}
