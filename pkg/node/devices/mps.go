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
	"strconv"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/names"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/discovery"
)

// MPSDeviceName is the name of the MPS device of the GPU with NVML index
// index: "gpu-<index>-mps" (docs/mps.md).
func MPSDeviceName(index int) string {
	return Name(index) + "-mps"
}

// ParseMPSDeviceName returns the NVML index of the GPU whose MPS device is
// name; ok is false for any other name.
func ParseMPSDeviceName(name string) (index int, ok bool) {
	rest, found := strings.CutPrefix(name, "gpu-")
	if !found {
		return 0, false
	}
	idx, found := strings.CutSuffix(rest, "-mps")
	if !found {
		return 0, false
	}
	index, err := strconv.Atoi(idx)
	if err != nil || index < 0 || strconv.Itoa(index) != idx {
		return 0, false
	}
	return index, true
}

// sharingModeCounters is the counter set of a GPU not in MIG mode that
// publishes its MPS device, and what its whole-GPU device and its MPS
// device each consume: all of it. The structured allocator charges a
// shareable device's counters once, at its first share, so while either
// device holds a claim the other does not fit, and more claims still share
// the one that holds them.
func sharingModeCounters() map[string]resourceapi.Counter {
	return map[string]resourceapi.Counter{names.CounterSharingMode: counter(1)}
}

// mpsGPUDevices are the devices of a GPU not in MIG mode published with
// MPS: the whole-GPU device and the MPS device, each consuming the GPU's
// sharing-mode counter.
func mpsGPUDevices(info discovery.Info, opts Options) MIGResult {
	consumes := []resourceapi.DeviceCounterConsumption{{
		CounterSet: CounterSetName(info.Index),
		Counters:   sharingModeCounters(),
	}}
	whole := Device(info, opts)
	whole.ConsumesCounters = consumes
	mps := Device(info, opts)
	mps.Name = MPSDeviceName(info.Index)
	mps.Attributes[names.AttrMPS] = resourceapi.DeviceAttribute{BoolValue: ptr.To(true)}
	mps.Capacity[names.CapacityCores] = mpsCoresCapacity()
	mps.ConsumesCounters = []resourceapi.DeviceCounterConsumption{*consumes[0].DeepCopy()}
	return MIGResult{
		Devices:    []resourceapi.Device{whole, mps},
		CounterSet: &resourceapi.CounterSet{Name: CounterSetName(info.Index), Counters: sharingModeCounters()},
	}
}

// mpsCoresCapacity is the cores capacity of an MPS device: percent of the
// GPU's SMs each of a claim's processes may use at once (MPS's active-thread
// percentage), which is never 0. A request without cores gets all of them,
// as one without memory gets all the memory.
func mpsCoresCapacity() resourceapi.DeviceCapacity {
	c := coresCapacity()
	c.RequestPolicy.Default = resource.NewQuantity(names.CoresCapacity, resource.DecimalSI)
	c.RequestPolicy.ValidRange.Min = resource.NewQuantity(1, resource.DecimalSI)
	return c
}
