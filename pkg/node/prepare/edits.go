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

package prepare

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strconv"

	"k8s.io/apimachinery/pkg/types"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	api "github.com/vgpu-dra/vgpu-dra-driver/api/vgpu.dra.dev/v1alpha1"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/claimconfig"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/names"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/claimcdi"
)

const bytesPerMiB = 1 << 20

// Mount options. Everything a container may write is also noexec, so that
// nothing written there can be run, setuid or not.
var (
	readOnlyBind  = []string{"ro", "nosuid", "nodev", "bind"}
	readWriteBind = []string{"rw", "nosuid", "nodev", "noexec", "bind"}
)

// cdiDeviceName is the claim-spec device of one allocation result:
// <claimUID>-<device>[-<shareID>], unique per node and never reused.
func cdiDeviceName(uid types.UID, d PreparedDevice) string {
	name := string(uid) + "-" + d.Device
	if d.ShareID != "" {
		name += "-" + string(d.ShareID)
	}
	return name
}

// claimSpec builds the claim spec's content. Spec-level edits, applied once
// per container whichever of the claim's devices it gets: the driver's
// claim-wide env and mounts, then the common GPU edits. Per device: the
// indexed limit variables, then the GPU's own edits.
func (m *Manager) claimSpec(ctx context.Context, c *PreparedClaim) (cdispec.ContainerEdits, []cdispec.Device, error) {
	common := m.claimEdits(c)
	gpuEdits := make([]*claimcdi.GPUEdits, len(c.GPUs))
	var seen []cdispec.ContainerEdits
	for i, g := range c.GPUs {
		edits, err := m.opts.GPUEdits.ContainerEdits(ctx, g.UUID)
		if err != nil {
			return cdispec.ContainerEdits{}, nil, fmt.Errorf("GPU base edits for %s: %w", g.UUID, err)
		}
		gpuEdits[i] = edits
		// GPUs of one node normally share their common edits; adding them
		// once keeps hooks from running once per GPU.
		if !slices.ContainsFunc(seen, func(e cdispec.ContainerEdits) bool { return reflect.DeepEqual(e, edits.Common) }) {
			seen = append(seen, edits.Common)
			appendEdits(&common, &edits.Common)
		}
	}
	// A limit of a sharing mode gets the mode's device edits instead of
	// the whole GPU's (a MIG instance: its own nodes and UUID).
	modeEdits := make([]*cdispec.ContainerEdits, len(c.GPUs))
	for i, g := range c.GPUs {
		mode := m.modeOf(g)
		if mode == nil {
			continue
		}
		edits, err := mode.deviceEdits(g, gpuEdits[i].Device)
		if err != nil {
			return cdispec.ContainerEdits{}, nil, err
		}
		modeEdits[i] = &edits
	}
	devices := make([]cdispec.Device, 0, len(c.Devices))
	for _, d := range c.Devices {
		edits := limitEdits(c, d.GPU)
		if modeEdits[d.GPU] != nil {
			appendEdits(&edits, modeEdits[d.GPU])
		} else {
			appendEdits(&edits, &gpuEdits[d.GPU].Device)
		}
		devices = append(devices, cdispec.Device{Name: cdiDeviceName(c.UID, d), ContainerEdits: edits})
	}
	return common, devices, nil
}

// limitEdits sets the HAMi variables for the claim's GPU at gpuIndex.
//
// The index is the GPU's position in the claim (PCI bus order), which is its
// CUDA ordinal when the container sees only this claim's GPUs. CDI merges
// env by name, so in a container with several claims the variables of
// different claims can collide; libvgpu.so takes its limits from the config
// files (keyed by UUID) and lets the variables only lower them.
// docs/prepare.md explains this.
func limitEdits(c *PreparedClaim, gpuIndex int) cdispec.ContainerEdits {
	g := c.GPUs[gpuIndex]
	i := strconv.Itoa(gpuIndex)
	return cdispec.ContainerEdits{Env: []string{
		names.EnvMemoryLimitPrefix + i + "=" + strconv.FormatUint(g.MemoryLimitBytes/bytesPerMiB, 10) + "m",
		names.EnvSMLimitPrefix + i + "=" + strconv.FormatInt(timeShare(g), 10),
	}}
}

// claimEdits are the driver's claim-wide edits: the region variable, the
// device order, libvgpu.so, the claim's files (config and region files,
// host directory) and (unless enforcement is disabled) ld.so.preload.
func (m *Manager) claimEdits(c *PreparedClaim) cdispec.ContainerEdits {
	edits := cdispec.ContainerEdits{
		Env: []string{
			names.EnvSharedRegion + "=" + containerRegionPath(c.UID),
			names.EnvCUDADeviceOrder + "=PCI_BUS_ID",
		},
		Mounts: []*cdispec.Mount{
			{HostPath: m.opts.LibVGPUPath, ContainerPath: ContainerLibVGPUPath, Options: readOnlyBind},
			{HostPath: m.layout.configPath(c.UID), ContainerPath: containerClaimDir(c.UID) + "/" + claimconfig.FileName, Options: readOnlyBind},
			// The region file alone, not its directory: the container can
			// read and write the region but cannot create files next to it.
			{HostPath: m.layout.regionPath(c.UID), ContainerPath: containerRegionPath(c.UID), Options: readWriteBind},
			// The directory, not the file in it: the plugin replaces its
			// files by rename, and a file bind mount would keep showing the
			// inode it was made with.
			{HostPath: m.layout.hostDir(c.UID), ContainerPath: containerClaimDir(c.UID) + "/" + hostDirName, Options: readOnlyBind},
		},
	}
	if c.Settings.Enforcement != api.EnforcementDisabled {
		edits.Mounts = append(edits.Mounts, &cdispec.Mount{
			HostPath: m.layout.preloadPath(), ContainerPath: ContainerPreloadPath, Options: readOnlyBind,
		})
	}
	return edits
}

// appendEdits appends the edits of src to dst.
func appendEdits(dst, src *cdispec.ContainerEdits) {
	dst.Env = append(dst.Env, src.Env...)
	dst.DeviceNodes = append(dst.DeviceNodes, src.DeviceNodes...)
	dst.NetDevices = append(dst.NetDevices, src.NetDevices...)
	dst.Hooks = append(dst.Hooks, src.Hooks...)
	dst.Mounts = append(dst.Mounts, src.Mounts...)
	dst.AdditionalGIDs = append(dst.AdditionalGIDs, src.AdditionalGIDs...)
	if src.IntelRdt != nil {
		dst.IntelRdt = src.IntelRdt
	}
}

// writeCDISpec writes the claim's transient CDI spec.
func (m *Manager) writeCDISpec(ctx context.Context, c *PreparedClaim) error {
	common, devices, err := m.claimSpec(ctx, c)
	if err != nil {
		return err
	}
	return m.specs.Write(string(c.UID), common, devices)
}

// cdiDeviceIDs returns the qualified CDI device ID of every device.
func cdiDeviceIDs(c *PreparedClaim) []string {
	ids := make([]string, len(c.Devices))
	for i, d := range c.Devices {
		ids[i] = claimcdi.QualifiedName(cdiDeviceName(c.UID, d))
	}
	return ids
}
