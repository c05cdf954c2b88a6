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
