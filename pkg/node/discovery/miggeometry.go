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

package discovery

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/klog/v2"
)

// MIGPlacement is where a GPU instance sits on a MIG-capable GPU: Size
// consecutive memory slices from Start, as NVML's placements count them.
type MIGPlacement struct {
	Start, Size int
}

// End is the first memory slice after the placement.
func (p MIGPlacement) End() int { return p.Start + p.Size }

// Overlaps reports whether two placements share a memory slice.
func (p MIGPlacement) Overlaps(q MIGPlacement) bool {
	return p.Start < q.End() && q.Start < p.End()
}

// MIGProfile is one GPU-instance profile of a MIG-enabled GPU with the
// placements NVML allows for it.
type MIGProfile struct {
	// ID is NVML's GPU-instance profile id (nvml.GPU_INSTANCE_PROFILE_*).
	ID int
	// Name is the profile as nvidia-smi spells it, e.g. "3g.71gb" or
	// "1g.18gb+me".
	Name string
	// Slices is the number of compute slices (GPCs) of one instance.
	Slices int
	// InstanceCount is the most instances of this profile one GPU holds.
	InstanceCount int
	// Multiprocessors is the SM count of one instance.
	Multiprocessors int
	// MemoryBytes is the memory of one instance.
	MemoryBytes uint64
	// Placements are the possible placements, ordered by start.
	Placements []MIGPlacement
}

// MIGInstance is a GPU instance that exists on the GPU, made by an admin
// (nvidia-smi mig -cgi) or by the plugin.
type MIGInstance struct {
	// ID is NVML's GPU instance id, unique on the GPU while it exists.
	ID int
	// ProfileID is the GPU-instance profile the instance was created with.
	ProfileID int
	// Placement is where the instance sits.
	Placement MIGPlacement
	// ComputeInstances is how many compute instances it holds; CUDA can only
	// use an instance that has at least one.
	ComputeInstances int
}

// MIGInfo is the MIG state of one MIG-capable GPU.
type MIGInfo struct {
	// Enabled is the current MIG mode; Pending is the mode after the next
	// GPU reset (an admin's `nvidia-smi -mig 1` on a busy GPU).
	Enabled, Pending bool
	// Profiles are the GPU-instance profiles, ordered by slices, memory and
	// id. Empty when MIG is not enabled: NVML reports profiles only then.
	Profiles []MIGProfile
	// Instances are the GPU instances that exist, ordered by placement.
	Instances []MIGInstance
}

// MemorySlices is the number of memory slices placements are counted in
// (8 on A100 and H100 hardware): the end of the furthest placement.
func (m MIGInfo) MemorySlices() int {
	n := 0
	for _, p := range m.Profiles {
		for _, pl := range p.Placements {
			n = max(n, pl.End())
		}
	}
	return n
}

// ComputeSlices is the number of compute slices of the GPU: those of its
// largest profile (7 on A100, H100 and H200).
func (m MIGInfo) ComputeSlices() int {
	n := 0
	for _, p := range m.Profiles {
		n = max(n, p.Slices)
	}
	return n
}

// FullProfile is the profile whose single placement covers every memory
// slice and which has every compute slice (7g.80gb on an H100): the
// instance that gives the whole GPU to CUDA while MIG is enabled.
func (m MIGInfo) FullProfile() (MIGProfile, bool) {
	slices, compute := m.MemorySlices(), m.ComputeSlices()
	for _, p := range m.Profiles {
		if p.Slices != compute {
			continue
		}
		for _, pl := range p.Placements {
			if pl.Start == 0 && pl.Size == slices {
				return p, true
			}
		}
	}
	return MIGProfile{}, false
}

// Profile returns the profile with NVML id id.
func (m MIGInfo) Profile(id int) (MIGProfile, bool) {
	for _, p := range m.Profiles {
		if p.ID == id {
			return p, true
		}
	}
	return MIGProfile{}, false
}

// MIGDevice is the part of an NVML device that MIG discovery reads;
// nvml.Device and go-nvml's mocks satisfy it.
type MIGDevice interface {
	GetMigMode() (int, int, nvml.Return)
	GetGpuInstanceProfileInfo(profile int) (nvml.GpuInstanceProfileInfo, nvml.Return)
	GetGpuInstancePossiblePlacements(info *nvml.GpuInstanceProfileInfo) ([]nvml.GpuInstancePlacement, nvml.Return)
	GetGpuInstances(info *nvml.GpuInstanceProfileInfo) ([]nvml.GpuInstance, nvml.Return)
}

// migProfileNamer is the versioned profile call of a real NVML device,
// whose answer carries NVML's own profile name ("MIG 7g.80gb"). go-nvml's
// mocks cannot answer it: its handler calls the C library.
type migProfileNamer interface {
	GetGpuInstanceProfileInfoV(profile int) nvml.GpuInstanceProfileInfoHandler
}

// ReadMIG reads the MIG mode of dev and, when MIG is enabled, its
// GPU-instance profiles with their placements and the GPU instances that
// exist. It returns nil for a GPU that does not support MIG. With
// nvmlNames, profile names come from NVML's versioned profile call where dev
// offers it; otherwise (and where NVML gives none) MIGProfileName derives
// them.
func ReadMIG(dev MIGDevice, nvmlNames bool) (*MIGInfo, error) {
	current, pending, ret := dev.GetMigMode()
	switch {
	case errors.Is(ret, nvml.ERROR_NOT_SUPPORTED), errors.Is(ret, nvml.ERROR_FUNCTION_NOT_FOUND):
		return nil, nil
	case ret != nvml.SUCCESS:
		return nil, fmt.Errorf("get MIG mode: %w", ret)
	}
	info := &MIGInfo{
		Enabled: current == nvml.DEVICE_MIG_ENABLE,
		Pending: pending == nvml.DEVICE_MIG_ENABLE,
	}
	if !info.Enabled {
		return info, nil
	}
	for id := 0; id < nvml.GPU_INSTANCE_PROFILE_COUNT; id++ {
		p, ret := dev.GetGpuInstanceProfileInfo(id)
		switch {
		case errors.Is(ret, nvml.ERROR_NOT_SUPPORTED), errors.Is(ret, nvml.ERROR_INVALID_ARGUMENT):
			continue // this GPU has no such profile
		case ret != nvml.SUCCESS:
			return nil, fmt.Errorf("get GPU-instance profile %d: %w", id, ret)
		}
		profile, instances, err := readProfile(dev, id, &p)
		if namer, ok := dev.(migProfileNamer); ok && nvmlNames && err == nil {
			if v2, ret := namer.GetGpuInstanceProfileInfoV(id).V2(); ret == nvml.SUCCESS {
				if name := strings.TrimPrefix(cString(v2.Name[:]), "MIG "); name != "" {
					profile.Name = name
				}
			}
		}
		if err != nil {
			return nil, fmt.Errorf("GPU-instance profile %d (%s): %w", id, profile.Name, err)
		}
		info.Profiles = append(info.Profiles, profile)
		info.Instances = append(info.Instances, instances...)
	}
	sort.Slice(info.Profiles, func(i, j int) bool {
		a, b := info.Profiles[i], info.Profiles[j]
		if a.Slices != b.Slices {
			return a.Slices < b.Slices
		}
		if a.MemoryBytes != b.MemoryBytes {
			return a.MemoryBytes < b.MemoryBytes
		}
		return a.ID < b.ID
	})
	sort.Slice(info.Instances, func(i, j int) bool {
		a, b := info.Instances[i], info.Instances[j]
		if a.Placement.Start != b.Placement.Start {
			return a.Placement.Start < b.Placement.Start
		}
		return a.ID < b.ID
	})
	return info, nil
}

func readProfile(dev MIGDevice, id int, p *nvml.GpuInstanceProfileInfo) (MIGProfile, []MIGInstance, error) {
	profile := MIGProfile{
		ID:              id,
		Name:            MIGProfileName(id, int(p.SliceCount), p.MemorySizeMB),
		Slices:          int(p.SliceCount),
		InstanceCount:   int(p.InstanceCount),
		Multiprocessors: int(p.MultiprocessorCount),
		MemoryBytes:     p.MemorySizeMB << 20,
	}
	placements, ret := dev.GetGpuInstancePossiblePlacements(p)
	if ret != nvml.SUCCESS {
		return profile, nil, fmt.Errorf("get placements: %w", ret)
	}
	for _, pl := range placements {
		profile.Placements = append(profile.Placements, MIGPlacement{Start: int(pl.Start), Size: int(pl.Size)})
	}
	sort.Slice(profile.Placements, func(i, j int) bool { return profile.Placements[i].Start < profile.Placements[j].Start })

	gis, ret := dev.GetGpuInstances(p)
	if ret != nvml.SUCCESS {
		return profile, nil, fmt.Errorf("list GPU instances: %w", ret)
	}
	var instances []MIGInstance
	for _, gi := range gis {
		giInfo, ret := gi.GetInfo()
		if ret != nvml.SUCCESS {
			return profile, nil, fmt.Errorf("get GPU instance info: %w", ret)
		}
		cis, err := countComputeInstances(gi)
		if err != nil {
			return profile, nil, fmt.Errorf("GPU instance %d: %w", giInfo.Id, err)
		}
		instances = append(instances, MIGInstance{
			ID:               int(giInfo.Id),
			ProfileID:        id,
			Placement:        MIGPlacement{Start: int(giInfo.Placement.Start), Size: int(giInfo.Placement.Size)},
			ComputeInstances: cis,
		})
	}
	return profile, instances, nil
}

// countComputeInstances counts the compute instances of gi over every
// compute-instance profile it offers (shared engines, the only kind NVML
// creates today).
func countComputeInstances(gi nvml.GpuInstance) (int, error) {
	n := 0
	for id := 0; id < nvml.COMPUTE_INSTANCE_PROFILE_COUNT; id++ {
		info, ret := gi.GetComputeInstanceProfileInfo(id, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
		switch {
		case errors.Is(ret, nvml.ERROR_NOT_SUPPORTED), errors.Is(ret, nvml.ERROR_INVALID_ARGUMENT):
			continue
		case ret != nvml.SUCCESS:
			return 0, fmt.Errorf("get compute-instance profile %d: %w", id, ret)
		}
		cis, ret := gi.GetComputeInstances(&info)
		if ret != nvml.SUCCESS {
			return 0, fmt.Errorf("list compute instances of profile %d: %w", id, ret)
		}
		n += len(cis)
	}
	return n, nil
}

// migProfileSuffixes are the name suffixes nvidia-smi gives profiles that
// differ from the plain one of the same size in their media engines or
// graphics support.
var migProfileSuffixes = map[int]string{
	nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1:   "+me",
	nvml.GPU_INSTANCE_PROFILE_2_SLICE_REV1:   "+me",
	nvml.GPU_INSTANCE_PROFILE_1_SLICE_GFX:    "+gfx",
	nvml.GPU_INSTANCE_PROFILE_2_SLICE_GFX:    "+gfx",
	nvml.GPU_INSTANCE_PROFILE_3_SLICE_GFX:    "+gfx",
	nvml.GPU_INSTANCE_PROFILE_4_SLICE_GFX:    "+gfx",
	nvml.GPU_INSTANCE_PROFILE_1_SLICE_NO_ME:  "-me",
	nvml.GPU_INSTANCE_PROFILE_2_SLICE_NO_ME:  "-me",
	nvml.GPU_INSTANCE_PROFILE_1_SLICE_ALL_ME: "+me.all",
	nvml.GPU_INSTANCE_PROFILE_2_SLICE_ALL_ME: "+me.all",
}

// MIGProfileName names a GPU-instance profile the way nvidia-smi does:
// compute slices, "g.", memory in GB rounded up, "gb", and a suffix for the
// media-engine and graphics variants (e.g. "1g.18gb+me").
func MIGProfileName(id, slices int, memoryMB uint64) string {
	gb := (memoryMB + 1023) / 1024
	return fmt.Sprintf("%dg.%dgb%s", slices, gb, migProfileSuffixes[id])
}

// migSymbols are the NVML entry points ReadMIG calls (go-nvml picks the
// versioned variants of the placement call itself).
var migSymbols = []string{
	"nvmlDeviceGetMigMode",
	"nvmlDeviceGetGpuInstanceProfileInfo",
	"nvmlDeviceGetGpuInstances",
	"nvmlGpuInstanceGetInfo",
	"nvmlGpuInstanceGetComputeInstanceProfileInfo",
	"nvmlGpuInstanceGetComputeInstances",
}

// GPUMIG is the MIG state of the GPU with the given UUID.
type GPUMIG struct {
	UUID string
	MIG  MIGInfo
}

// MIG initialises NVML and reads the MIG state of every MIG-capable GPU,
// ordered by NVML index. A library without MIG entry points (older drivers,
// vgpu-core's fake NVML today) yields no entry rather than an error:
// go-nvml aborts the process on a call to a symbol the library lacks.
func (d *Discoverer) MIG(ctx context.Context) ([]GPUMIG, error) {
	logger := klog.FromContext(ctx)
	if err := initNVML(d.lib); err != nil {
		return nil, err
	}
	defer shutdownNVML(logger, d.lib)
	for _, sym := range migSymbols {
		if !d.hasSymbol(sym) {
			logger.V(2).Info("NVML lacks a MIG entry point; no GPU is treated as MIG-capable", "symbol", sym)
			return nil, nil
		}
	}
	nvmlNames := d.hasSymbol("nvmlDeviceGetGpuInstanceProfileInfoV")
	count, ret := d.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("get device count: %w", ret)
	}
	var out []GPUMIG
	for i := 0; i < count; i++ {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("discover MIG: %w", err)
		}
		dev, ret := d.lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("GPU at NVML index %d: get handle: %w", i, ret)
		}
		uuid, ret := dev.GetUUID()
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("GPU at NVML index %d: get UUID: %w", i, ret)
		}
		mig, err := ReadMIG(dev, nvmlNames)
		if err != nil {
			return nil, fmt.Errorf("GPU %s: %w", uuid, err)
		}
		if mig == nil {
			continue
		}
		logger.V(4).Info("Discovered MIG-capable GPU", "uuid", uuid, "enabled", mig.Enabled,
			"pending", mig.Pending, "profiles", len(mig.Profiles), "instances", len(mig.Instances))
		out = append(out, GPUMIG{UUID: uuid, MIG: *mig})
	}
	return out, nil
}
