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

package main

import (
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"tags.cncf.io/container-device-interface/pkg/cdi"
)

// specName is the file name of the written spec (the extension picks JSON); one
// fixed name so that rewriting it replaces the previous one.
const specName = "vgpu-dra-e2e-fake-gpus.json"

func main() {
	in := specInput{Kind: defaultVendorClass}
	var outDir string
	flag.StringVar(&in.Kind, "kind", in.Kind, "CDI kind of the written spec (the plugin's --vendor-cdi-kind)")
	flag.StringVar(&in.NVMLLibrary, "nvml-library", "", "host path of the fake libnvidia-ml.so.1; loaded to discover the GPUs and mounted into containers")
	flag.StringVar(&in.CUDALibrary, "cuda-library", "", "host path of the fake libcuda.so.1, mounted into containers")
	flag.StringVar(&in.FakeConfig, "fake-config", os.Getenv(envFakeConfig), "host path of the fake drivers' configuration file, mounted read-only into containers")
	flag.StringVar(&in.StateDir, "fake-state-dir", os.Getenv(envFakeStateDir), "host path of the simulated GPU state directory, mounted read-write into containers")
	flag.StringVar(&in.DevRoot, "dev-root", "", "host directory of the fake device nodes (mkdriverroot.sh's DIR/dev); when set, each GPU brings its /dev/nvidia<minor> and containers see only their GPUs")
	flag.StringVar(&outDir, "output-dir", "", "CDI spec directory to write the spec into")
	flag.Parse()

	if err := run(in, outDir); err != nil {
		fmt.Fprintf(os.Stderr, "fake-gpu-cdi: %v\n", err)
		os.Exit(1)
	}
}

func run(in specInput, outDir string) error {
	if outDir == "" {
		return errors.New("--output-dir: required")
	}
	uuids, minors, err := discoverGPUs(in.NVMLLibrary)
	if err != nil {
		return err
	}
	in.UUIDs, in.Minors = uuids, minors
	spec, err := buildSpec(in)
	if err != nil {
		return err
	}
	cache, err := cdi.NewCache(cdi.WithSpecDirs(outDir), cdi.WithAutoRefresh(false))
	if err != nil {
		return fmt.Errorf("open CDI spec directory %s: %w", outDir, err)
	}
	if err := cache.WriteSpec(spec, specName); err != nil {
		return fmt.Errorf("write CDI spec %s into %s: %w", specName, outDir, err)
	}
	for _, u := range uuids {
		fmt.Println(in.Kind + "=" + u)
	}
	return nil
}

// discoverGPUs lists the GPUs' UUIDs and minor numbers in NVML index order.
func discoverGPUs(library string) ([]string, []int, error) {
	if library == "" {
		return nil, nil, errors.New("--nvml-library: required")
	}
	lib := nvml.New(nvml.WithLibraryPath(library))
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return nil, nil, fmt.Errorf("initialise NVML from %s: %s", library, nvml.ErrorString(ret))
	}
	defer func() { _ = lib.Shutdown() }()
	count, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, nil, fmt.Errorf("count GPUs: %s", nvml.ErrorString(ret))
	}
	uuids := make([]string, 0, count)
	minors := make([]int, 0, count)
	for i := range count {
		dev, ret := lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			return nil, nil, fmt.Errorf("GPU %d: get handle: %s", i, nvml.ErrorString(ret))
		}
		uuid, ret := dev.GetUUID()
		if ret != nvml.SUCCESS {
			return nil, nil, fmt.Errorf("GPU %d: get UUID: %s", i, nvml.ErrorString(ret))
		}
		minor, ret := dev.GetMinorNumber()
		if ret != nvml.SUCCESS {
			return nil, nil, fmt.Errorf("GPU %d: get minor number: %s", i, nvml.ErrorString(ret))
		}
		uuids = append(uuids, uuid)
		minors = append(minors, minor)
	}
	return uuids, minors, nil
}
