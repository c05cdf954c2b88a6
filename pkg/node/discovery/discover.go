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

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/klog/v2"
)

// Discoverer lists the node's GPUs (and their MIG geometry) through NVML.
type Discoverer struct {
	lib nvml.Interface
}

// NewDiscoverer returns a Discoverer on the NVML library selected by opts
// (default: libnvidia-ml.so.1 from the dynamic loader path).
func NewDiscoverer(opts ...Option) *Discoverer {
	return &Discoverer{lib: NewNVML(opts...)}
}

// Devices initialises NVML, reads every GPU and shuts NVML down again, so
// that a driver upgrade between calls is picked up.
func (d *Discoverer) Devices(ctx context.Context) ([]Info, error) {
	logger := klog.FromContext(ctx)
	if err := initNVML(d.lib); err != nil {
		return nil, err
	}
	defer shutdownNVML(logger, d.lib)

	driverVersion, ret := d.lib.SystemGetDriverVersion()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("get driver version: %w", ret)
	}
	cudaDriverVersion, ret := d.lib.SystemGetCudaDriverVersion()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("get CUDA driver version: %w", ret)
	}
	count, ret := d.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("get device count: %w", ret)
	}

	infos := make([]Info, 0, count)
	for i := 0; i < count; i++ {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("discover GPUs: %w", err)
		}
		info, err := d.device(i)
		if err != nil {
			return nil, fmt.Errorf("GPU at NVML index %d: %w", i, err)
		}
		info.DriverVersion = driverVersion
		info.CUDADriverVersion = cudaVersion(cudaDriverVersion)
		logger.V(4).Info("Discovered GPU", "uuid", info.UUID, "index", info.Index,
			"product", info.ProductName, "memoryBytes", info.MemoryBytes, "pciBusID", info.PCIBusID)
		infos = append(infos, info)
	}
	logger.V(2).Info("GPU discovery done", "count", len(infos), "driverVersion", driverVersion)
	return infos, nil
}

// initNVML loads and initialises NVML with an error that tells a missing
// library apart from a driver that does not answer.
func initNVML(lib nvml.Interface) error {
	ret := lib.Init()
	switch {
	case ret == nvml.SUCCESS:
		return nil
	case errors.Is(ret, nvml.ERROR_LIBRARY_NOT_FOUND):
		return fmt.Errorf("load NVML (libnvidia-ml.so.1): is the NVIDIA driver installed and its library on the loader path? %w", ret)
	default:
		return fmt.Errorf("initialise NVML: %w", ret)
	}
}

func shutdownNVML(logger klog.Logger, lib nvml.Interface) {
	if ret := lib.Shutdown(); ret != nvml.SUCCESS {
		logger.Error(ret, "NVML shutdown failed")
	}
}

func (d *Discoverer) device(i int) (Info, error) {
	dev, ret := d.lib.DeviceGetHandleByIndex(i)
	if ret != nvml.SUCCESS {
		return Info{}, fmt.Errorf("get handle: %w", ret)
	}
	info := Info{NUMANode: -1}
	if info.UUID, ret = dev.GetUUID(); ret != nvml.SUCCESS {
		return Info{}, fmt.Errorf("get UUID: %w", ret)
	}
	if info.Index, ret = dev.GetIndex(); ret != nvml.SUCCESS {
		return Info{}, fmt.Errorf("get index: %w", ret)
	}
	if info.Minor, ret = dev.GetMinorNumber(); ret != nvml.SUCCESS {
		return Info{}, fmt.Errorf("get minor number: %w", ret)
	}
	if info.ProductName, ret = dev.GetName(); ret != nvml.SUCCESS {
		return Info{}, fmt.Errorf("get product name: %w", ret)
	}
	brand, ret := dev.GetBrand()
	if ret != nvml.SUCCESS {
		return Info{}, fmt.Errorf("get brand: %w", ret)
	}
	info.Brand = brandName(brand)
	arch, ret := dev.GetArchitecture()
	if ret != nvml.SUCCESS {
		return Info{}, fmt.Errorf("get architecture: %w", ret)
	}
	info.Architecture = architectureName(arch)
	major, minor, ret := dev.GetCudaComputeCapability()
	if ret != nvml.SUCCESS {
		return Info{}, fmt.Errorf("get CUDA compute capability: %w", ret)
	}
	info.CUDAComputeCapability = fmt.Sprintf("%d.%d", major, minor)
	mem, ret := dev.GetMemoryInfo()
	if ret != nvml.SUCCESS {
		return Info{}, fmt.Errorf("get memory info: %w", ret)
	}
	info.MemoryBytes = mem.Total
	pci, ret := dev.GetPciInfo()
	if ret != nvml.SUCCESS {
		return Info{}, fmt.Errorf("get PCI info: %w", ret)
	}
	busID, err := normalizePCIBusID(cString(pci.BusId[:]))
	if err != nil {
		return Info{}, err
	}
	info.PCIBusID = busID

	// NUMA node and SM count are optional: older drivers, virtual machines
	// and fake libraries may not offer them, and the GPU is usable without.
	if d.hasSymbol("nvmlDeviceGetNumaNodeId") {
		node, ret := dev.GetNumaNodeId()
		switch ret {
		case nvml.SUCCESS:
			info.NUMANode = node
		case nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_FUNCTION_NOT_FOUND:
		default:
			return Info{}, fmt.Errorf("get NUMA node: %w", ret)
		}
	}
	if d.hasSymbol("nvmlDeviceGetAttributes_v2") || d.hasSymbol("nvmlDeviceGetAttributes") {
		attrs, ret := dev.GetAttributes()
		switch ret {
		case nvml.SUCCESS:
			info.Multiprocessors = int(attrs.MultiprocessorCount)
		case nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_FUNCTION_NOT_FOUND:
		default:
			return Info{}, fmt.Errorf("get device attributes (multiprocessor count): %w", ret)
		}
	}
	return info, nil
}

// hasSymbol reports whether the loaded library exports name. go-nvml binds
// symbols lazily, and calling one the library lacks aborts the process, so
// optional entry points are checked first.
func (d *Discoverer) hasSymbol(name string) bool {
	return d.lib.Extensions().LookupSymbol(name) == nil
}
