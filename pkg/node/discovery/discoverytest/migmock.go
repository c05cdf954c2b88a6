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

package discoverytest

import (
	"cmp"
	"maps"
	"slices"
	"strconv"
	"sync"

	"github.com/google/uuid"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// MIG fills in what go-nvml's mock device lacks for creating and destroying
// MIG instances the way the hardware does: GetGpuInstanceById, MIG device
// handles with a fresh MIG- UUID per compute instance, and the real error
// codes (NOT_SUPPORTED outside MIG mode, INSUFFICIENT_RESOURCES for a
// placement overlapping an instance or past the profile's instance count,
// IN_USE for a GPU instance that still has compute instances).
type MIG struct {
	dev *server.Device

	mu sync.Mutex
	// uuids holds the MIG UUID of every live compute instance.
	uuids   map[*server.ComputeInstance]string
	created int
}

// EnableMIG installs MIG's create and destroy behaviour on dev (which must
// be in MIG mode for creation to succeed) and returns the handle tests use
// to inspect it.
func EnableMIG(dev *server.Device) *MIG {
	m := &MIG{dev: dev, uuids: map[*server.ComputeInstance]string{}}
	createGI := dev.CreateGpuInstanceWithPlacementFunc
	dev.CreateGpuInstanceWithPlacementFunc = func(info *nvml.GpuInstanceProfileInfo, pl *nvml.GpuInstancePlacement) (nvml.GpuInstance, nvml.Return) {
		if mode, _, _ := dev.GetMigMode(); mode != nvml.DEVICE_MIG_ENABLE {
			return nil, nvml.ERROR_NOT_SUPPORTED
		}
		if !m.validPlacement(info, pl) {
			return nil, nvml.ERROR_INVALID_ARGUMENT
		}
		count := 0
		for _, gi := range m.GPUInstances() {
			if gi.Info.ProfileId == info.Id {
				count++
			}
			if pl.Start < gi.Info.Placement.Start+gi.Info.Placement.Size && gi.Info.Placement.Start < pl.Start+pl.Size {
				return nil, nvml.ERROR_INSUFFICIENT_RESOURCES
			}
		}
		if count >= int(info.InstanceCount) {
			return nil, nvml.ERROR_INSUFFICIENT_RESOURCES
		}
		gi, ret := createGI(info, pl)
		if ret == nvml.SUCCESS {
			m.wrapGPUInstance(gi.(*server.GpuInstance))
		}
		return gi, ret
	}
	dev.GetGpuInstanceByIdFunc = func(id int) (nvml.GpuInstance, nvml.Return) {
		for _, gi := range m.GPUInstances() {
			if int(gi.Info.Id) == id {
				return gi, nvml.SUCCESS
			}
		}
		return nil, nvml.ERROR_NOT_FOUND
	}
	dev.GetMaxMigDeviceCountFunc = func() (int, nvml.Return) { return 7, nvml.SUCCESS }
	dev.GetMigDeviceHandleByIndexFunc = func(index int) (nvml.Device, nvml.Return) {
		devs := m.migDevices()
		if index < 0 || index >= 7 {
			return nil, nvml.ERROR_INVALID_ARGUMENT
		}
		if index >= len(devs) {
			return nil, nvml.ERROR_NOT_FOUND
		}
		return devs[index], nvml.SUCCESS
	}
	return m
}

func (m *MIG) validPlacement(info *nvml.GpuInstanceProfileInfo, pl *nvml.GpuInstancePlacement) bool {
	for _, p := range m.dev.Config.MIGProfiles.GpuInstancePlacements[int(info.Id)] {
		if p == *pl {
			return true
		}
	}
	return false
}

func (m *MIG) wrapGPUInstance(gi *server.GpuInstance) {
	destroyGI := gi.DestroyFunc
	gi.DestroyFunc = func() nvml.Return {
		gi.RLock()
		n := len(gi.ComputeInstances)
		gi.RUnlock()
		if n > 0 {
			return nvml.ERROR_IN_USE
		}
		return destroyGI()
	}
	createCI := gi.CreateComputeInstanceFunc
	gi.CreateComputeInstanceFunc = func(info *nvml.ComputeInstanceProfileInfo) (nvml.ComputeInstance, nvml.Return) {
		gi.RLock()
		n := len(gi.ComputeInstances)
		gi.RUnlock()
		if n > 0 {
			// Every compute instance here spans its GPU instance.
			return nil, nvml.ERROR_INSUFFICIENT_RESOURCES
		}
		ci, ret := createCI(info)
		if ret != nvml.SUCCESS {
			return ci, ret
		}
		sci := ci.(*server.ComputeInstance)
		m.mu.Lock()
		m.created++
		m.uuids[sci] = "MIG-" + uuid.NewSHA1(uuid.NameSpaceOID, []byte(m.dev.UUID+"/"+strconv.Itoa(m.created))).String()
		m.mu.Unlock()
		destroyCI := sci.DestroyFunc
		sci.DestroyFunc = func() nvml.Return {
			ret := destroyCI()
			if ret == nvml.SUCCESS {
				m.mu.Lock()
				delete(m.uuids, sci)
				m.mu.Unlock()
			}
			return ret
		}
		return ci, ret
	}
}

// GPUInstances returns the GPU instances that exist on the device.
func (m *MIG) GPUInstances() []*server.GpuInstance {
	m.dev.RLock()
	defer m.dev.RUnlock()
	out := make([]*server.GpuInstance, 0, len(m.dev.GpuInstances))
	for gi := range m.dev.GpuInstances {
		out = append(out, gi)
	}
	return out
}

// ComputeInstances returns how many compute instances exist on the device.
func (m *MIG) ComputeInstances() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.uuids)
}

// migDevices returns a MIG device handle per live compute instance, in
// (GPU instance, compute instance) order: each GetMigDeviceHandleByIndex
// call lists them afresh, so the order must not change between calls.
func (m *MIG) migDevices() []nvml.Device {
	m.mu.Lock()
	defer m.mu.Unlock()
	cis := slices.SortedFunc(maps.Keys(m.uuids), func(a, b *server.ComputeInstance) int {
		return cmp.Or(cmp.Compare(a.Info.GpuInstance.(*server.GpuInstance).Info.Id, b.Info.GpuInstance.(*server.GpuInstance).Info.Id),
			cmp.Compare(a.Info.Id, b.Info.Id))
	})
	var out []nvml.Device
	for _, ci := range cis {
		u := m.uuids[ci]
		giID := int(ci.Info.GpuInstance.(*server.GpuInstance).Info.Id)
		ciID := int(ci.Info.Id)
		out = append(out, &mock.Device{
			GetGpuInstanceIdFunc:     func() (int, nvml.Return) { return giID, nvml.SUCCESS },
			GetComputeInstanceIdFunc: func() (int, nvml.Return) { return ciID, nvml.SUCCESS },
			GetUUIDFunc:              func() (string, nvml.Return) { return u, nvml.SUCCESS },
		})
	}
	return out
}

// Reset destroys every instance, as a reboot or GPU reset does.
func (m *MIG) Reset() {
	m.dev.Lock()
	m.dev.GpuInstances = map[*server.GpuInstance]struct{}{}
	m.dev.Unlock()
	m.mu.Lock()
	m.uuids = map[*server.ComputeInstance]string{}
	m.mu.Unlock()
}
