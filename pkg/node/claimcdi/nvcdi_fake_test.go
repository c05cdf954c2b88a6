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

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vgpu-dra/vgpu-dra-driver/internal/testenv"
)

// defaultFakeNVML is where "make -C vgpu-core" puts the fake NVML library.
const defaultFakeNVML = "../../../vgpu-core/build/fake/libnvidia-ml.so.1"

// TestNVCDISourceWithFakeNVML loads vgpu-core's fake libnvidia-ml.so.1 the
// way the demo's simulated nodes do and generates edits for its first GPU.
func TestNVCDISourceWithFakeNVML(t *testing.T) {
	lib := os.Getenv("VGPU_FAKE_NVML_LIB")
	if lib == "" {
		lib = defaultFakeNVML
	}
	if _, err := os.Stat(lib); err != nil {
		testenv.Unavailable(t, "fake NVML %s not built (make -C vgpu-core fakes, or set VGPU_FAKE_NVML_LIB): %v", lib, err)
	}
	ctx := context.Background()
	// The fake's state and device nodes are this test's, never the host's.
	t.Setenv("VGPU_FAKE_STATE_DIR", t.TempDir())

	nvmlLib := nvml.New(nvml.WithLibraryPath(lib))
	require.Equal(t, nvml.SUCCESS, nvmlLib.Init())
	version, ret := nvmlLib.SystemGetDriverVersion()
	require.Equal(t, nvml.SUCCESS, ret)
	dev, ret := nvmlLib.DeviceGetHandleByIndex(0)
	require.Equal(t, nvml.SUCCESS, ret)
	uuid, ret := dev.GetUUID()
	require.Equal(t, nvml.SUCCESS, ret)
	require.Equal(t, nvml.SUCCESS, nvmlLib.Shutdown())

	root := t.TempDir()
	for _, name := range []string{"libcuda.so." + version, "libnvidia-ml.so." + version} {
		p := filepath.Join(root, "usr/lib/x86_64-linux-gnu", name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, nil, 0o644))
	}
	src, err := NewNVCDISource(ctx, NVCDIOptions{DriverRoot: root, NVML: nvmlLib})
	require.NoError(t, err)
	edits, err := src.ContainerEdits(ctx, uuid)
	require.NoError(t, err)
	assert.NotNil(t, mountFor(&edits.Common, "/usr/lib/x86_64-linux-gnu/libcuda.so."+version), "mounts: %+v", edits.Common.Mounts)
}
