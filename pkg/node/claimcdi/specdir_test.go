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
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
	cdispec "tags.cncf.io/container-device-interface/specs-go"
)

const (
	gpuA = "GPU-11111111-2222-3333-4444-555555555555"
	gpuB = "GPU-66666666-7777-8888-9999-aaaaaaaaaaaa"
)

// writeVendorSpec writes a spec shaped like nvidia-ctk's output with the
// uuid device-name strategy.
func writeVendorSpec(t *testing.T, dir string, libVersion string) {
	t.Helper()
	spec := cdispec.Spec{
		Version: "0.6.0",
		Kind:    DefaultVendorKind,
		Devices: []cdispec.Device{
			{Name: gpuA, ContainerEdits: cdispec.ContainerEdits{DeviceNodes: []*cdispec.DeviceNode{{Path: "/dev/nvidia0"}}}},
			{Name: gpuB, ContainerEdits: cdispec.ContainerEdits{DeviceNodes: []*cdispec.DeviceNode{{Path: "/dev/nvidia1"}}}},
		},
		ContainerEdits: cdispec.ContainerEdits{
			Env:         []string{"NVIDIA_VISIBLE_DEVICES=void"},
			DeviceNodes: []*cdispec.DeviceNode{{Path: "/dev/nvidiactl"}},
			Mounts: []*cdispec.Mount{{
				HostPath:      "/usr/lib/x86_64-linux-gnu/libcuda.so." + libVersion,
				ContainerPath: "/usr/lib/x86_64-linux-gnu/libcuda.so." + libVersion,
				Options:       []string{"ro", "nosuid", "nodev", "bind"},
			}},
		},
	}
	data, err := yaml.Marshal(spec)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "nvidia.yaml"), data, 0o644))
}

func TestSpecDirSource(t *testing.T) {
	ctx := context.Background()
	low, high := t.TempDir(), t.TempDir()
	writeVendorSpec(t, high, "580.1")

	src, err := NewSpecDirSource(DefaultVendorKind, []string{low, high})
	require.NoError(t, err)

	edits, err := src.ContainerEdits(ctx, gpuB)
	require.NoError(t, err)
	require.Len(t, edits.Device.DeviceNodes, 1)
	assert.Equal(t, "/dev/nvidia1", edits.Device.DeviceNodes[0].Path)
	require.Len(t, edits.Common.DeviceNodes, 1)
	assert.Equal(t, "/dev/nvidiactl", edits.Common.DeviceNodes[0].Path)
	assert.Equal(t, []string{"NVIDIA_VISIBLE_DEVICES=void"}, edits.Common.Env)
	require.Len(t, edits.Common.Mounts, 1)
	assert.Equal(t, "/usr/lib/x86_64-linux-gnu/libcuda.so.580.1", edits.Common.Mounts[0].HostPath)

	// A regenerated vendor spec (driver upgrade) is picked up without a restart.
	writeVendorSpec(t, high, "580.2")
	edits, err = src.ContainerEdits(ctx, gpuA)
	require.NoError(t, err)
	assert.Equal(t, "/dev/nvidia0", edits.Device.DeviceNodes[0].Path)
	require.Len(t, edits.Common.Mounts, 1)
	assert.Equal(t, "/usr/lib/x86_64-linux-gnu/libcuda.so.580.2", edits.Common.Mounts[0].HostPath)
}

func TestSpecDirSourceMissingDevice(t *testing.T) {
	dir := t.TempDir()
	// A spec generated with the default index naming has no device named by UUID.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "nvidia.yaml"), []byte(`cdiVersion: 0.6.0
kind: nvidia.com/gpu
devices:
- name: "0"
  containerEdits:
    deviceNodes:
    - path: /dev/nvidia0
`), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "broken.yaml"), []byte("cdiVersion: [\n"), 0o644))

	src, err := NewSpecDirSource(DefaultVendorKind, []string{dir})
	require.NoError(t, err)
	_, err = src.ContainerEdits(context.Background(), gpuA)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "nvidia.com/gpu="+gpuA)
	assert.Contains(t, err.Error(), "--device-name-strategy=uuid")
	assert.Contains(t, err.Error(), "broken.yaml", "problems of other specs are reported with the miss")
}

func TestNewSpecDirSourceValidation(t *testing.T) {
	_, err := NewSpecDirSource("nvidia.com", []string{"/etc/cdi"})
	assert.ErrorContains(t, err, `"nvidia.com"`)
	_, err = NewSpecDirSource(DefaultVendorKind, nil)
	assert.ErrorContains(t, err, "at least one directory")
	_, err = NewSpecDirSource(DefaultVendorKind, []string{"etc/cdi"})
	assert.ErrorContains(t, err, `"etc/cdi"`)
}
