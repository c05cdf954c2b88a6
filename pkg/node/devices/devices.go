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
	"strconv"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/dynamic-resource-allocation/deviceattribute"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/utils/ptr"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/names"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/discovery"
)

// Name is the device name of the GPU with NVML index i.
func Name(index int) string {
	return fmt.Sprintf("gpu-%d", index)
}

// Device describes one GPU as a shareable DRA device. Attributes whose value
// is unknown (NUMA node, SM count, PCIe root) or cannot be expressed
// (a version that is not numeric) are left out rather than published wrong.
func Device(info discovery.Info, opts Options) resourceapi.Device {
	opts = opts.withDefaults()
	attrs := map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
		names.AttrUUID:         stringAttr(info.UUID),
		names.AttrIndex:        intAttr(int64(info.Index)),
		names.AttrMinor:        intAttr(int64(info.Minor)),
		names.AttrProductName:  stringAttr(info.ProductName),
		names.AttrBrand:        stringAttr(info.Brand),
		names.AttrArchitecture: stringAttr(info.Architecture),
		names.AttrPCIeBusID:    stringAttr(info.PCIBusID),
	}
	for name, v := range map[resourceapi.QualifiedName]string{
		names.AttrCUDAComputeCapability: info.CUDAComputeCapability,
		names.AttrDriverVersion:         info.DriverVersion,
		names.AttrCUDADriverVersion:     info.CUDADriverVersion,
	} {
		if semver, ok := SemVer(v); ok {
			attrs[name] = resourceapi.DeviceAttribute{VersionValue: &semver}
		}
	}
	if info.NUMANode >= 0 {
		attrs[names.AttrNUMANode] = intAttr(int64(info.NUMANode))
	}
	if info.Multiprocessors > 0 {
		attrs[names.AttrMultiprocessors] = intAttr(int64(info.Multiprocessors))
	}
	if root, err := deviceattribute.GetPCIeRootAttributeByPCIBusID(info.PCIBusID,
		deviceattribute.WithFSFromRoot(opts.SysfsRoot)); err == nil {
		attrs[root.Name] = root.Value
	}

	return resourceapi.Device{
		Name:                     Name(info.Index),
		Attributes:               attrs,
		AllowMultipleAllocations: ptr.To(true),
		Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
			names.CapacityMemory: memoryCapacity(info.MemoryBytes, opts),
			names.CapacityCores:  coresCapacity(),
		},
	}
}

// memoryCapacity publishes the largest value reachable as min + n*step, so
// that max and default (both the whole value) satisfy the API's step rule.
// With the default min being a multiple of the step this is the GPU memory
// rounded down to the step. A GPU too small for even min+step can only be
// taken whole.
func memoryCapacity(total uint64, opts Options) resourceapi.DeviceCapacity {
	step, minimum := uint64(opts.MemoryStep), uint64(opts.MemoryMin)
	if total < minimum+step {
		value := (total / step) * step
		q := bytesQuantity(value)
		return resourceapi.DeviceCapacity{
			Value: q,
			RequestPolicy: &resourceapi.CapacityRequestPolicy{
				Default:    ptr.To(q.DeepCopy()),
				ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: ptr.To(q.DeepCopy()), Max: ptr.To(q.DeepCopy())},
			},
		}
	}
	value := minimum + (total-minimum)/step*step
	q := bytesQuantity(value)
	return resourceapi.DeviceCapacity{
		Value: q,
		RequestPolicy: &resourceapi.CapacityRequestPolicy{
			Default: ptr.To(q.DeepCopy()),
			ValidRange: &resourceapi.CapacityRequestPolicyRange{
				Min:  ptr.To(bytesQuantity(minimum)),
				Max:  ptr.To(q.DeepCopy()),
				Step: ptr.To(bytesQuantity(step)),
			},
		},
	}
}

// coresCapacity publishes 100 percent of SM time; not asking for cores
// means 0, best effort without a guaranteed share, as in HAMi.
func coresCapacity() resourceapi.DeviceCapacity {
	return resourceapi.DeviceCapacity{
		Value: *resource.NewQuantity(names.CoresCapacity, resource.DecimalSI),
		RequestPolicy: &resourceapi.CapacityRequestPolicy{
			Default: resource.NewQuantity(0, resource.DecimalSI),
			ValidRange: &resourceapi.CapacityRequestPolicyRange{
				Min:  resource.NewQuantity(0, resource.DecimalSI),
				Max:  resource.NewQuantity(names.CoresCapacity, resource.DecimalSI),
				Step: resource.NewQuantity(1, resource.DecimalSI),
			},
		},
	}
}

// bytesQuantity renders bytes in binary units (e.g. 80Gi) where exact.
// Byte counts of real GPUs fit int64 by many orders of magnitude.
func bytesQuantity(b uint64) resource.Quantity {
	return *resource.NewQuantity(int64(b), resource.BinarySI)
}

// Pool describes all GPUs of a node as one ResourceSlice pool. Devices are
// listed in NVML index order, the order in which the first-fit scheduler
// tries them; more GPUs than fit one slice spill into further slices.
func Pool(infos []discovery.Info, opts Options) resourceslice.Pool {
	var slices []resourceslice.Slice
	// start == 0 runs once for an empty node: it still gets one (empty) slice.
	for start := 0; start < len(infos) || start == 0; start += resourceapi.ResourceSliceMaxDevices {
		end := min(start+resourceapi.ResourceSliceMaxDevices, len(infos))
		devices := make([]resourceapi.Device, 0, end-start)
		for _, info := range infos[start:end] {
			devices = append(devices, Device(info, opts))
		}
		slices = append(slices, resourceslice.Slice{Devices: devices})
	}
	return resourceslice.Pool{Slices: slices}
}

// DriverResources is what the kubelet plugin publishes for a node: one pool
// named after the node (docs/architecture.md), with an empty slice when the node has no
// GPU so that the scheduler knows the pool is complete.
func DriverResources(nodeName string, infos []discovery.Info, opts Options) resourceslice.DriverResources {
	return resourceslice.DriverResources{
		Pools: map[string]resourceslice.Pool{nodeName: Pool(infos, opts)},
	}
}

// SemVer turns a dotted numeric version ("9.0", "580.95.05", "12.9") into a
// semantic version ("9.0.0", "580.95.5", "12.9.0"): missing parts become 0
// and leading zeros, which semver forbids, are dropped. ok is false for
// anything else.
func SemVer(v string) (string, bool) {
	parts := strings.Split(v, ".")
	if v == "" || len(parts) > 3 {
		return "", false
	}
	nums := []uint64{0, 0, 0}
	for i, p := range parts {
		if p == "" || strings.TrimLeft(p, "0123456789") != "" {
			return "", false
		}
		n, err := strconv.ParseUint(p, 10, 64)
		if err != nil {
			return "", false
		}
		nums[i] = n
	}
	return fmt.Sprintf("%d.%d.%d", nums[0], nums[1], nums[2]), true
}

func stringAttr(s string) resourceapi.DeviceAttribute {
	// The API caps string attributes; NVML names are far shorter, the cut
	// only guards against a misbehaving library.
	if len(s) > resourceapi.DeviceAttributeMaxValueLength {
		s = s[:resourceapi.DeviceAttributeMaxValueLength]
	}
	return resourceapi.DeviceAttribute{StringValue: &s}
}

func intAttr(i int64) resourceapi.DeviceAttribute {
	return resourceapi.DeviceAttribute{IntValue: &i}
}
