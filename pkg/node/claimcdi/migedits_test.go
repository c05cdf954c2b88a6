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
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"tags.cncf.io/container-device-interface/pkg/cdi"
	cdispec "tags.cncf.io/container-device-interface/specs-go"
)

const testMIGUUID = "MIG-3f1c2a9e-8b7d-5c4e-a1f0-0123456789ab"

// writeCapability writes an access file the way the driver publishes it.
func writeCapability(t *testing.T, procRoot, rel string, minor string) {
	t.Helper()
	p := filepath.Join(procRoot, "driver/nvidia/capabilities", rel, "access")
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte("DeviceFileMinor: "+minor+"\nDeviceFileMode: 292\nDeviceFileModify: 1\n"), 0o444))
}

func TestMIGEdits(t *testing.T) {
	proc := t.TempDir()
	writeCapability(t, proc, "gpu3/mig/gi2", "39")
	writeCapability(t, proc, "gpu3/mig/gi2/ci0", "40")
	// Another instance's files must not be picked.
	writeCapability(t, proc, "gpu3/mig/gi1", "30")
	writeCapability(t, proc, "gpu3/mig/gi1/ci0", "31")

	edits, err := MIGEdits{ProcRoot: proc}.Edits(MIGInstance{ParentMinor: 3, GPUInstanceID: 2, ComputeInstanceID: 0, UUID: testMIGUUID})
	require.NoError(t, err)
	var paths []string
	for _, n := range edits.DeviceNodes {
		paths = append(paths, n.Path)
	}
	assert.Equal(t, []string{
		"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia3",
		"/dev/nvidia-caps/nvidia-cap39", "/dev/nvidia-caps/nvidia-cap40",
	}, paths)
	assert.Equal(t, []string{
		"NVIDIA_VISIBLE_DEVICES=" + testMIGUUID,
		"CUDA_VISIBLE_DEVICES=" + testMIGUUID,
	}, edits.Env)

	// The edits form a valid claim spec that a runtime reads back.
	dir := t.TempDir()
	specs, err := NewClaimSpecs(dir)
	require.NoError(t, err)
	name := claimUID + "-gpu-3-mig-3g-71gb-4"
	require.NoError(t, specs.Write(claimUID, cdispec.ContainerEdits{}, []cdispec.Device{{Name: name, ContainerEdits: edits}}))
	cache, err := cdi.NewCache(cdi.WithSpecDirs(dir), cdi.WithAutoRefresh(false))
	require.NoError(t, err)
	assert.Empty(t, cache.GetErrors())
	require.NotNil(t, cache.GetDevice(QualifiedName(name)))
}

func TestMIGEditsHostDevRoot(t *testing.T) {
	proc := t.TempDir()
	writeCapability(t, proc, "gpu1/mig/gi3", "5")
	writeCapability(t, proc, "gpu1/mig/gi3/ci0", "6")
	inst := MIGInstance{ParentMinor: 1, GPUInstanceID: 3, ComputeInstanceID: 0, UUID: testMIGUUID}

	// A vendor spec for a driver root of its own names the GPU's node there.
	gpu := cdispec.ContainerEdits{DeviceNodes: []*cdispec.DeviceNode{
		{Path: "/dev/nvidia0", HostPath: "/elsewhere/nvidia0"},
		{Path: "/dev/nvidia1", HostPath: "/run/driver-root/dev/nvidia1"},
	}}
	root := HostDevRoot(gpu, 1)
	assert.Equal(t, "/run/driver-root/dev", root)
	edits, err := MIGEdits{ProcRoot: proc, HostDevRoot: root}.Edits(inst)
	require.NoError(t, err)
	hosts := map[string]string{}
	for _, n := range edits.DeviceNodes {
		hosts[n.Path] = n.HostPath
	}
	assert.Equal(t, map[string]string{
		"/dev/nvidiactl":               "/run/driver-root/dev/nvidiactl",
		"/dev/nvidia-uvm":              "/run/driver-root/dev/nvidia-uvm",
		"/dev/nvidia-uvm-tools":        "/run/driver-root/dev/nvidia-uvm-tools",
		"/dev/nvidia1":                 "/run/driver-root/dev/nvidia1",
		"/dev/nvidia-caps/nvidia-cap5": "/run/driver-root/dev/nvidia-caps/nvidia-cap5",
		"/dev/nvidia-caps/nvidia-cap6": "/run/driver-root/dev/nvidia-caps/nvidia-cap6",
	}, hosts)

	// The host's own /dev, or no host path at all: the runtime uses the paths.
	for _, g := range []cdispec.ContainerEdits{
		{DeviceNodes: []*cdispec.DeviceNode{{Path: "/dev/nvidia1", HostPath: "/dev/nvidia1"}}},
		{DeviceNodes: []*cdispec.DeviceNode{{Path: "/dev/nvidia1"}}},
		{DeviceNodes: []*cdispec.DeviceNode{{Path: "/dev/nvidia1", HostPath: "/somewhere/gpu1"}}},
		{},
	} {
		assert.Empty(t, HostDevRoot(g, 1), "%+v", g.DeviceNodes)
	}
	edits, err = MIGEdits{ProcRoot: proc, HostDevRoot: "/dev"}.Edits(inst)
	require.NoError(t, err)
	for _, n := range edits.DeviceNodes {
		assert.Empty(t, n.HostPath, n.Path)
	}
}

func TestMIGEditsErrors(t *testing.T) {
	proc := t.TempDir()
	inst := MIGInstance{ParentMinor: 0, GPUInstanceID: 1, ComputeInstanceID: 0, UUID: testMIGUUID}

	_, err := MIGEdits{ProcRoot: proc}.Edits(inst)
	require.ErrorIs(t, err, os.ErrNotExist, "no capability file for the GPU instance")
	assert.Contains(t, err.Error(), "GPU instance 1")

	writeCapability(t, proc, "gpu0/mig/gi1", "12")
	_, err = MIGEdits{ProcRoot: proc}.Edits(inst)
	require.ErrorIs(t, err, os.ErrNotExist, "no capability file for the compute instance")
	assert.Contains(t, err.Error(), "compute instance 0")

	writeCapability(t, proc, "gpu0/mig/gi1/ci0", "x")
	_, err = MIGEdits{ProcRoot: proc}.Edits(inst)
	assert.ErrorContains(t, err, `bad DeviceFileMinor "x"`)

	p := filepath.Join(proc, "driver/nvidia/capabilities/gpu0/mig/gi1/ci0/access")
	require.NoError(t, os.Chmod(p, 0o644))
	require.NoError(t, os.WriteFile(p, []byte("DeviceFileMode: 292\n"), 0o644))
	_, err = MIGEdits{ProcRoot: proc}.Edits(inst)
	assert.ErrorContains(t, err, "no DeviceFileMinor")

	inst.UUID = "GPU-3f1c2a9e-8b7d-5c4e-a1f0-0123456789ab"
	_, err = MIGEdits{ProcRoot: proc}.Edits(inst)
	assert.ErrorContains(t, err, "not a MIG UUID")
}
