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

package claimcdi

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	cdispec "tags.cncf.io/container-device-interface/specs-go"
)

// DefaultProcRoot is where the kernel publishes the NVIDIA driver's
// capability files (/proc/driver/nvidia/capabilities/...).
const DefaultProcRoot = "/proc"

// Environment variables that name the MIG device a container may use:
// NVIDIA's container runtime hook reads the first, CUDA the second.
const (
	EnvNVIDIAVisibleDevices = "NVIDIA_VISIBLE_DEVICES"
	EnvCUDAVisibleDevices   = "CUDA_VISIBLE_DEVICES"
)

// MIGInstance names one MIG instance whose edits MIGEdits builds.
type MIGInstance struct {
	// ParentMinor is the /dev/nvidia<minor> number of the physical GPU.
	ParentMinor int
	// GPUInstanceID and ComputeInstanceID are NVML's ids of the instance.
	GPUInstanceID, ComputeInstanceID int
	// UUID is the MIG device's "MIG-<uuid>".
	UUID string
}

// MIGEdits builds the container edits that give a container exactly one
// MIG instance: the control and UVM device nodes, the parent GPU's device
// node, the capability device nodes of the instance's GPU and compute
// instance (without them the driver refuses to open the instance), and the
// MIG UUID in NVIDIA_VISIBLE_DEVICES and CUDA_VISIBLE_DEVICES.
type MIGEdits struct {
	// ProcRoot is the procfs the capability files are read from; empty
	// means DefaultProcRoot. Tests point it at a temporary directory.
	ProcRoot string
	// HostDevRoot is the directory in which the container runtime finds the
	// driver's device nodes, where that is not /dev (a driver root of its
	// own, the e2e's fake one): each node then names its host path under
	// it, as the GPU's own edits name /dev/nvidia<minor> (HostDevRoot
	// derives it from them). Empty means /dev: no host paths.
	HostDevRoot string
}

// Edits returns the edits of instance inst.
func (b MIGEdits) Edits(inst MIGInstance) (cdispec.ContainerEdits, error) {
	if !strings.HasPrefix(inst.UUID, "MIG-") || strings.ContainsAny(inst.UUID, "\n=,") {
		return cdispec.ContainerEdits{}, fmt.Errorf("MIG instance %d/%d of GPU minor %d: %q is not a MIG UUID",
			inst.GPUInstanceID, inst.ComputeInstanceID, inst.ParentMinor, inst.UUID)
	}
	root := b.ProcRoot
	if root == "" {
		root = DefaultProcRoot
	}
	migDir := filepath.Join(root, "driver/nvidia/capabilities", "gpu"+strconv.Itoa(inst.ParentMinor), "mig")
	giDir := filepath.Join(migDir, "gi"+strconv.Itoa(inst.GPUInstanceID))
	giCap, err := capabilityMinor(filepath.Join(giDir, "access"))
	if err != nil {
		return cdispec.ContainerEdits{}, fmt.Errorf("GPU instance %d of GPU minor %d: %w", inst.GPUInstanceID, inst.ParentMinor, err)
	}
	ciCap, err := capabilityMinor(filepath.Join(giDir, "ci"+strconv.Itoa(inst.ComputeInstanceID), "access"))
	if err != nil {
		return cdispec.ContainerEdits{}, fmt.Errorf("compute instance %d of GPU instance %d of GPU minor %d: %w",
			inst.ComputeInstanceID, inst.GPUInstanceID, inst.ParentMinor, err)
	}
	var nodes []*cdispec.DeviceNode
	for _, p := range []string{
		"/dev/nvidiactl",
		"/dev/nvidia-uvm",
		"/dev/nvidia-uvm-tools",
		"/dev/nvidia" + strconv.Itoa(inst.ParentMinor),
		"/dev/nvidia-caps/nvidia-cap" + strconv.Itoa(giCap),
		"/dev/nvidia-caps/nvidia-cap" + strconv.Itoa(ciCap),
	} {
		n := &cdispec.DeviceNode{Path: p}
		if b.HostDevRoot != "" && filepath.Clean(b.HostDevRoot) != "/dev" {
			n.HostPath = filepath.Join(b.HostDevRoot, strings.TrimPrefix(p, "/dev/"))
		}
		nodes = append(nodes, n)
	}
	return cdispec.ContainerEdits{
		Env: []string{
			EnvNVIDIAVisibleDevices + "=" + inst.UUID,
			EnvCUDAVisibleDevices + "=" + inst.UUID,
		},
		DeviceNodes: nodes,
	}, nil
}

// HostDevRoot returns the host directory of the driver's device nodes as a
// GPU's own edits name it: the directory of the host path of their node
// /dev/nvidia<minor> (a vendor spec for a driver root other than /, e.g.
// nvidia-ctk's --dev-root, names one). Empty when they name none, or the
// node is /dev's own.
func HostDevRoot(gpu cdispec.ContainerEdits, minor int) string {
	want := "/dev/nvidia" + strconv.Itoa(minor)
	for _, n := range gpu.DeviceNodes {
		if n == nil || filepath.Clean(n.Path) != want || n.HostPath == "" {
			continue
		}
		host := filepath.Clean(n.HostPath)
		if filepath.Base(host) != filepath.Base(want) || host == want {
			return ""
		}
		return filepath.Dir(host)
	}
	return ""
}

// capabilityMinor reads the "DeviceFileMinor: <n>" line of a capability's
// access file: n is the minor of /dev/nvidia-caps/nvidia-cap<n>.
func capabilityMinor(path string) (int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("read capability file: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		key, value, ok := strings.Cut(sc.Text(), ":")
		if !ok || strings.TrimSpace(key) != "DeviceFileMinor" {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(value))
		if err != nil || n < 0 {
			return 0, fmt.Errorf("capability file %s: bad DeviceFileMinor %q", path, strings.TrimSpace(value))
		}
		return n, nil
	}
	return 0, fmt.Errorf("capability file %s has no DeviceFileMinor line", path)
}
