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
	"fmt"
	"path/filepath"
	"strings"

	cdispec "tags.cncf.io/container-device-interface/specs-go"
)

// Paths inside containers. The libraries go where a distribution's dynamic
// loader finds them without an ld.so.cache entry.
const (
	containerLibDir    = "/usr/lib/x86_64-linux-gnu"
	containerConfig    = "/etc/vgpu-fake/config"
	containerStateDir  = "/var/run/vgpu-fake-state"
	envFakeConfig      = "VGPU_FAKE_CONFIG"
	envFakeStateDir    = "VGPU_FAKE_STATE_DIR"
	uuidPrefix         = "GPU-"
	defaultVendorClass = "nvidia.com/gpu"
)

// specInput is what the spec is made of: the discovered GPUs and the host
// files that make them visible in a container.
type specInput struct {
	Kind        string
	UUIDs       []string
	CUDALibrary string // host path of the fake libcuda.so.1
	NVMLLibrary string // host path of the fake libnvidia-ml.so.1
	FakeConfig  string // host path of the VGPU_FAKE_CONFIG file
	StateDir    string // host path of the VGPU_FAKE_STATE_DIR directory
	// DevRoot is the host directory of the fake device nodes
	// (vgpu-core/fake/mkdriverroot.sh's DIR/dev). When set, each GPU's
	// device gets its node /dev/nvidia<minor> and every container the
	// control nodes, as nvidia-ctk's spec does: the fake drivers then show a
	// container exactly its GPUs. Minors (NVML minor numbers, parallel to
	// UUIDs) name the nodes.
	DevRoot string
	Minors  []int
}

func (in specInput) validate() error {
	var errs []error
	if len(in.UUIDs) == 0 {
		errs = append(errs, errors.New("no GPUs: the fake NVML reported none"))
	}
	seen := map[string]bool{}
	for i, u := range in.UUIDs {
		if !strings.HasPrefix(u, uuidPrefix) {
			errs = append(errs, fmt.Errorf("GPU %d: UUID %q does not start with %q", i, u, uuidPrefix))
		}
		if seen[u] {
			errs = append(errs, fmt.Errorf("GPU %d: UUID %q reported twice", i, u))
		}
		seen[u] = true
	}
	if in.DevRoot != "" {
		if !filepath.IsAbs(in.DevRoot) {
			errs = append(errs, fmt.Errorf("--dev-root: %q is not an absolute path", in.DevRoot))
		}
		if len(in.Minors) != len(in.UUIDs) {
			errs = append(errs, fmt.Errorf("%d minor numbers for %d GPUs", len(in.Minors), len(in.UUIDs)))
		}
	}
	for _, p := range []struct{ flag, value string }{
		{"cuda-library", in.CUDALibrary}, {"nvml-library", in.NVMLLibrary},
		{"fake-config", in.FakeConfig}, {"fake-state-dir", in.StateDir},
	} {
		if !filepath.IsAbs(p.value) {
			errs = append(errs, fmt.Errorf("--%s: %q is not an absolute path", p.flag, p.value))
		}
	}
	return errors.Join(errs...)
}

// buildSpec returns the vendor spec. Per-device edits stay empty: simulated
// GPUs have no device nodes, and environment edits of several devices would
// collide. Everything a container needs to use any of them is a common edit.
func buildSpec(in specInput) (*cdispec.Spec, error) {
	if err := in.validate(); err != nil {
		return nil, err
	}
	spec := &cdispec.Spec{
		Version: cdispec.CurrentVersion,
		Kind:    in.Kind,
		ContainerEdits: cdispec.ContainerEdits{
			Env: []string{
				envFakeConfig + "=" + containerConfig,
				envFakeStateDir + "=" + containerStateDir,
			},
			Mounts: []*cdispec.Mount{
				readOnlyMount(in.CUDALibrary, filepath.Join(containerLibDir, "libcuda.so.1")),
				readOnlyMount(in.NVMLLibrary, filepath.Join(containerLibDir, "libnvidia-ml.so.1")),
				readOnlyMount(in.FakeConfig, containerConfig),
				{HostPath: in.StateDir, ContainerPath: containerStateDir, Type: "bind",
					Options: []string{"rw", "nosuid", "nodev", "bind"}},
			},
		},
	}
	if in.DevRoot != "" {
		for _, n := range controlNodes {
			spec.ContainerEdits.DeviceNodes = append(spec.ContainerEdits.DeviceNodes, deviceNode(in.DevRoot, n))
		}
	}
	for i, u := range in.UUIDs {
		// The annotation-like env names the GPU for people reading a
		// container's environment.
		edits := cdispec.ContainerEdits{Env: []string{"VGPU_FAKE_GPU_" + envSuffix(u) + "=1"}}
		if in.DevRoot != "" {
			edits.DeviceNodes = []*cdispec.DeviceNode{deviceNode(in.DevRoot, fmt.Sprintf("nvidia%d", in.Minors[i]))}
		}
		spec.Devices = append(spec.Devices, cdispec.Device{Name: u, ContainerEdits: edits})
	}
	return spec, nil
}

// controlNodes are the device nodes every GPU container gets.
var controlNodes = []string{"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"}

// deviceNode maps the fake node name under devRoot to /dev/name; the
// runtime takes its type and numbers from the host node.
func deviceNode(devRoot, name string) *cdispec.DeviceNode {
	return &cdispec.DeviceNode{Path: "/dev/" + name, HostPath: filepath.Join(devRoot, name)}
}

func readOnlyMount(host, container string) *cdispec.Mount {
	return &cdispec.Mount{HostPath: host, ContainerPath: container, Type: "bind",
		Options: []string{"ro", "nosuid", "nodev", "bind"}}
}

// envSuffix turns a UUID into an environment-variable-safe suffix.
func envSuffix(uuid string) string {
	return strings.ToUpper(strings.NewReplacer("-", "_").Replace(strings.TrimPrefix(uuid, uuidPrefix)))
}
