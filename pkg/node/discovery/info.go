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

// Info describes one physical GPU as discovered on the node. Version strings
// are dotted numbers ("9.0", "580.95.05", "12.9") that callers normalise to
// semantic versions.
type Info struct {
	// UUID is NVML's device UUID, "GPU-" followed by 8-4-4-4-12 hex digits.
	UUID string
	// Index is the NVML device index; Minor is the /dev/nvidia<minor> number.
	Index, Minor int
	// ProductName is the marketing name, e.g. "NVIDIA H100 80GB HBM3".
	ProductName string
	// Brand is the NVML brand, e.g. "NVIDIA" or "Tesla".
	Brand string
	// Architecture is the NVML architecture, e.g. "Hopper".
	Architecture string
	// CUDAComputeCapability is "major.minor", e.g. "9.0".
	CUDAComputeCapability string
	// DriverVersion is the kernel driver version, e.g. "580.95.05".
	DriverVersion string
	// CUDADriverVersion is the CUDA version the driver supports, e.g. "12.9".
	CUDADriverVersion string
	// MemoryBytes is the total device memory.
	MemoryBytes uint64
	// PCIBusID is the lowercase domain:bus:device.function, e.g. "0000:3b:00.0".
	PCIBusID string
	// NUMANode is the NUMA node closest to the GPU, -1 when unknown.
	NUMANode int
	// Multiprocessors is the number of streaming multiprocessors, 0 when unknown.
	Multiprocessors int
}
