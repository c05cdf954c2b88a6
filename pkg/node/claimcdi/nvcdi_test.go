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
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	cdispec "tags.cncf.io/container-device-interface/specs-go"
)

// mockDriverVersion is the driver version the dgxa100 mock reports; nvcdi
// locates the driver libraries by it.
const mockDriverVersion = "550.54.15"

// newMockNVML returns go-nvml's DGX A100 mock, completed with the one query
// nvcdi makes that the mock does not answer.
func newMockNVML() *server.Server {
	srv := dgxa100.New()
	for _, d := range srv.Devices {
		d.(*server.Device).IsMigDeviceHandleFunc = func() (bool, nvml.Return) { return false, nvml.SUCCESS }
	}
	return srv
}

// newDriverRoot lays out the files nvcdi looks for in a driver root.
func newDriverRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for _, f := range []string{
		"usr/lib/x86_64-linux-gnu/libcuda.so." + mockDriverVersion,
		"usr/lib/x86_64-linux-gnu/libnvidia-ml.so." + mockDriverVersion,
	} {
		p := filepath.Join(root, f)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, nil, 0o644))
	}
	return root
}

func mountFor(edits *cdispec.ContainerEdits, containerPath string) *cdispec.Mount {
	for _, m := range edits.Mounts {
		if m.ContainerPath == containerPath {
			return m
		}
	}
	return nil
}

func TestNVCDISourceEdits(t *testing.T) {
	ctx := context.Background()
	srv := newMockNVML()
	dev, ret := srv.DeviceGetHandleByIndex(3)
	require.Equal(t, nvml.SUCCESS, ret)
	uuid, ret := dev.GetUUID()
	require.Equal(t, nvml.SUCCESS, ret)

	root := newDriverRoot(t)
	const hostRoot = "/host/driver"
	src, err := NewNVCDISource(ctx, NVCDIOptions{DriverRoot: root, HostDriverRoot: hostRoot, NVML: srv})
	require.NoError(t, err)

	first, err := src.ContainerEdits(ctx, uuid)
	require.NoError(t, err)
	libcuda := mountFor(&first.Common, "/usr/lib/x86_64-linux-gnu/libcuda.so."+mockDriverVersion)
	require.NotNil(t, libcuda, "driver library discovered by nvcdi must be mounted: %+v", first.Common.Mounts)
	assert.Equal(t, hostRoot+"/usr/lib/x86_64-linux-gnu/libcuda.so."+mockDriverVersion, libcuda.HostPath,
		"host paths are rewritten from the plugin's driver root to the host's")
	assert.Contains(t, first.Common.Env, "NVIDIA_VISIBLE_DEVICES=void", "the toolkit runtime must not inject devices a second time")
	for _, m := range first.Common.Mounts {
		assert.False(t, strings.HasPrefix(m.HostPath, root), "mount %s still points into the plugin's view", m.HostPath)
	}

	for _, h := range first.Common.Hooks {
		assert.NotContains(t, h.Args, uuid, "GPU-specific hooks belong to the device edits, not the common ones")
	}

	// The common edits are cached; a second call must not rewrite them twice.
	second, err := src.ContainerEdits(ctx, uuid)
	require.NoError(t, err)
	assert.Equal(t, first, second)

	_, err = src.ContainerEdits(ctx, "GPU-00000000-0000-0000-0000-000000000000")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "GPU-00000000-0000-0000-0000-000000000000")
}

func TestNVCDISourceOptions(t *testing.T) {
	ctx := context.Background()
	_, err := NewNVCDISource(ctx, NVCDIOptions{})
	assert.ErrorContains(t, err, "driver root")
	_, err = NewNVCDISource(ctx, NVCDIOptions{DriverRoot: "/", NVIDIACDIHookPath: "bin/hook"})
	assert.ErrorContains(t, err, "nvidia-cdi-hook path")
}
