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

package names

import (
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/deviceattribute"
)

// DriverName is the DRA driver name; unqualified attribute and capacity
// names below live in its domain.
const DriverName = "vgpu.dra.dev"

// Attribute and capacity names of a published GPU (docs/devices.md).
const (
	AttrUUID                  resourceapi.QualifiedName = "uuid"
	AttrIndex                 resourceapi.QualifiedName = "index"
	AttrMinor                 resourceapi.QualifiedName = "minor"
	AttrProductName           resourceapi.QualifiedName = "productName"
	AttrBrand                 resourceapi.QualifiedName = "brand"
	AttrArchitecture          resourceapi.QualifiedName = "architecture"
	AttrCUDAComputeCapability resourceapi.QualifiedName = "cudaComputeCapability"
	AttrDriverVersion         resourceapi.QualifiedName = "driverVersion"
	AttrCUDADriverVersion     resourceapi.QualifiedName = "cudaDriverVersion"
	AttrPCIeBusID             resourceapi.QualifiedName = "pcieBusID"
	AttrPCIeRoot                                        = deviceattribute.StandardDeviceAttributePCIeRoot
	AttrNUMANode              resourceapi.QualifiedName = "numaNode"
	AttrMultiprocessors       resourceapi.QualifiedName = "multiprocessors"

	CapacityMemory resourceapi.QualifiedName = "memory"
	CapacityCores  resourceapi.QualifiedName = "cores"
)

// CoresCapacity is every GPU's published compute capacity: percent of its
// SM time.
const CoresCapacity int64 = 100

// DeviceClasses users select (deviceclasses/, docs/api.md). The default
// class carries the driver's name.
const (
	DeviceClass               = DriverName
	DeviceClassWorkConserving = "vgpu-work-conserving.dra.dev"
	DeviceClassUnenforced     = "vgpu-unenforced.dra.dev"
)

// DeviceClasses returns every class of the driver, the default first.
func DeviceClasses() []string {
	return []string{DeviceClass, DeviceClassWorkConserving, DeviceClassUnenforced, MIGDeviceClass, MPSDeviceClass}
}

// TaintKeyXID is the key of the ResourceSlice device taint a GPU gets when
// NVML reports a critical XID on it; the value is the XID.
const TaintKeyXID = DriverName + "/xid"

// CDIVendor is the vendor of the claims' CDI devices ("<vendor>/claim=...").
const CDIVendor = "k8s." + DriverName

// Environment variables the CDI spec sets in a claim's containers and
// libvgpu.so reads (vgpu-core/include/vgpu_env.h spells the same names; a
// test compares them). The limits are per CUDA device index: the prefix is
// followed by the index.
const (
	EnvMemoryLimitPrefix = "CUDA_DEVICE_MEMORY_LIMIT_"
	EnvSMLimitPrefix     = "CUDA_DEVICE_SM_LIMIT_"
	EnvSharedRegion      = "CUDA_DEVICE_MEMORY_SHARED_CACHE"
	// EnvCUDADeviceOrder is CUDA's own: set to PCI_BUS_ID so CUDA device 0
	// is the claim's first GPU in bus order, as NVML and the limits count.
	EnvCUDADeviceOrder = "CUDA_DEVICE_ORDER"
)
