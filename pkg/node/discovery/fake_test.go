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
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2/ktesting"

	"github.com/vgpu-dra/vgpu-dra-driver/internal/testenv"
)

// fakeNVMLEnv names the fake libnvidia-ml.so.1 built by vgpu-core
// (vgpu-core/build/fake/libnvidia-ml.so.1); `make test` sets it.
const fakeNVMLEnv = "VGPU_FAKE_NVML_LIB"

var uuidPattern = regexp.MustCompile(`^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// TestDiscoverFakeNVMLLibrary loads vgpu-core's fake NVML through go-nvml's
// real dlopen path, as the demo and e2e nodes do, and checks that the GPUs
// it was configured with are discovered and that injected XIDs reach the
// watcher. Both share one fake configuration because the library may keep
// it for the life of the process.
func TestDiscoverFakeNVMLLibrary(t *testing.T) {
	lib := os.Getenv(fakeNVMLEnv)
	if lib == "" {
		testenv.Unavailable(t, "%s is not set; build vgpu-core's fakes (make -C vgpu-core fakes) and point it at libnvidia-ml.so.1", fakeNVMLEnv)
	}
	require.FileExists(t, lib)

	// The fake reads its configuration at nvmlInit; the environment is the
	// documented fallback when no VGPU_FAKE_CONFIG file is named.
	t.Setenv("VGPU_FAKE_CONFIG", "")
	require.NoError(t, os.Unsetenv("VGPU_FAKE_CONFIG"))
	t.Setenv("VGPU_FAKE_GPU_COUNT", "3")
	t.Setenv("VGPU_FAKE_GPU_MEMORY", "24Gi")
	t.Setenv("VGPU_FAKE_GPU_PRODUCT", "NVIDIA L4")
	t.Setenv("VGPU_FAKE_UUID_SEED", t.Name())
	t.Setenv("VGPU_FAKE_DRIVER_VERSION", "570.86.10")
	t.Setenv("VGPU_FAKE_CUDA_VERSION", "12.8")
	t.Setenv("VGPU_FAKE_COMPUTE_CAPABILITY", "8.9")
	t.Setenv("VGPU_FAKE_MULTIPROCESSORS", "58")
	t.Setenv("VGPU_FAKE_NUMA_NODE", "1")
	stateDir := t.TempDir()
	t.Setenv("VGPU_FAKE_STATE_DIR", stateDir)

	var infos []Info
	t.Run("devices", func(t *testing.T) { infos = discoverFake(t, lib) })
	if len(infos) == 3 {
		t.Run("xid watcher", func(t *testing.T) { watchFake(t, lib, stateDir, infos) })
	}
}

func discoverFake(t *testing.T, lib string) []Info {
	_, ctx := ktesting.NewTestContext(t)
	d := NewDiscoverer(WithLibraryPath(lib))
	infos, err := d.Devices(ctx)
	require.NoError(t, err)
	require.Len(t, infos, 3)

	seen := map[string]bool{}
	for i, info := range infos {
		assert.Regexp(t, uuidPattern, info.UUID)
		assert.False(t, seen[info.UUID], "UUID %s repeated", info.UUID)
		seen[info.UUID] = true
		assert.Equal(t, i, info.Index)
		assert.Equal(t, "NVIDIA L4", info.ProductName)
		assert.Equal(t, uint64(24)<<30, info.MemoryBytes)
		assert.Equal(t, "570.86.10", info.DriverVersion)
		assert.Equal(t, "12.8", info.CUDADriverVersion)
		assert.Equal(t, "8.9", info.CUDAComputeCapability)
		assert.Equal(t, "Ada", info.Architecture)
		assert.Equal(t, 58, info.Multiprocessors)
		assert.Equal(t, 1, info.NUMANode)
		assert.Regexp(t, `^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$`, info.PCIBusID)
	}

	// Same seed, same GPUs: a restarted plugin must find the devices it published.
	again, err := d.Devices(ctx)
	require.NoError(t, err)
	assert.Equal(t, infos, again)
	return infos
}

// watchFake injects XIDs through the fake's event file (lines "<index> <xid>"
// appended to <state dir>/xid-events) and expects the watcher to report the
// hardware ones and skip the application ones.
func watchFake(t *testing.T, lib, stateDir string, infos []Info) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events := make(chan XIDEvent, 100)
	done := make(chan error, 1)
	go func() {
		done <- NewXIDWatcher(DefaultIgnoredXIDs(), WithLibraryPath(lib)).Watch(ctx, func(e XIDEvent) { events <- e })
	}()

	inject := func(line string) {
		f, err := os.OpenFile(filepath.Join(stateDir, "xid-events"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		require.NoError(t, err)
		_, err = f.WriteString(line + "\n")
		require.NoError(t, err)
		require.NoError(t, f.Close())
	}
	// The fake delivers only lines written after the event set exists, so
	// repeat the first event until the watcher is listening.
	deadline := time.After(20 * time.Second)
	first := func() XIDEvent {
		for {
			inject("1 79")
			select {
			case e := <-events:
				return e
			case <-time.After(100 * time.Millisecond):
			case <-deadline:
				t.Fatal("no XID event reported by the watcher")
			}
		}
	}()
	assert.Equal(t, XIDEvent{UUID: infos[1].UUID, XID: 79, GPUInstanceID: NoInstance, ComputeInstanceID: NoInstance}, first)

	inject("0 13")
	inject("2 48")
	for {
		select {
		case e := <-events:
			if e.XID == 79 {
				continue // a repeat of the first injection
			}
			assert.Equal(t, XIDEvent{UUID: infos[2].UUID, XID: 48, GPUInstanceID: NoInstance, ComputeInstanceID: NoInstance}, e, "XID 13 is an application error and must be skipped")
			cancel()
			require.NoError(t, <-done)
			return
		case err := <-done:
			t.Fatalf("watcher stopped early: %v", err)
		case <-deadline:
			t.Fatal("XID 48 not reported")
		}
	}
}

// fakeMIGChildEnv names the MIG geometry a re-executed test process gives the
// fake NVML: the fake keeps its configuration for the life of the process,
// so each geometry gets a process of its own.
const fakeMIGChildEnv = "VGPU_FAKE_MIG_TEST_GEOMETRY"

// TestReadMIGFakeMatchesMock checks that vgpu-core's fake NVML, loaded
// through go-nvml's real dlopen path, answers the MIG discovery exactly as
// go-nvml's mock GPUs do: the same profiles, placements and, after the same
// instances are created through go-nvml, the same instances (ids aside: the
// fake numbers GPU instances from 1, the mock from 0).
func TestReadMIGFakeMatchesMock(t *testing.T) {
	lib := os.Getenv(fakeNVMLEnv)
	if lib == "" {
		testenv.Unavailable(t, "%s is not set; build vgpu-core's fakes (make -C vgpu-core fakes) and point it at libnvidia-ml.so.1", fakeNVMLEnv)
	}
	require.FileExists(t, lib)
	configs := map[string]gpus.Config{"h100-80gb": gpus.H100_SXM5_80GB, "h200-141gb": gpus.H200_SXM5_141GB}
	if geometry := os.Getenv(fakeMIGChildEnv); geometry != "" {
		config, ok := configs[geometry]
		require.True(t, ok, "unknown geometry %q", geometry)
		compareFakeMIG(t, lib, config)
		return
	}
	for geometry := range configs {
		t.Run(geometry, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestReadMIGFakeMatchesMock$", "-test.v")
			cmd.Env = append(os.Environ(),
				fakeMIGChildEnv+"="+geometry,
				"VGPU_FAKE_CONFIG=",
				"VGPU_FAKE_GPU_COUNT=2",
				"VGPU_FAKE_GPU0_MIG_GEOMETRY="+geometry,
				"VGPU_FAKE_GPU0_MIG_MODE=enabled",
				"VGPU_FAKE_GPU1_MIG_GEOMETRY="+geometry,
				"VGPU_FAKE_GPU1_MIG_MODE=disabled",
				"VGPU_FAKE_STATE_DIR="+t.TempDir())
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s", out)
		})
	}
}

func compareFakeMIG(t *testing.T, lib string, config gpus.Config) {
	_, ctx := ktesting.NewTestContext(t)
	fake, err := NewDiscoverer(WithLibraryPath(lib)).MIG(ctx)
	require.NoError(t, err)
	mock, err := NewDiscoverer(WithNVML(migServer(t, config))).MIG(ctx)
	require.NoError(t, err)
	require.Len(t, fake, 2)
	require.Len(t, mock, 2)
	for i := range mock {
		assert.Equal(t, mock[i].MIG, fake[i].MIG, "GPU %d", i)
	}

	// The same instances created through go-nvml on both.
	l := nvml.New(nvml.WithLibraryPath(lib))
	require.Equal(t, nvml.SUCCESS, l.Init())
	defer func() { assert.Equal(t, nvml.SUCCESS, l.Shutdown()) }()
	fakeDev, ret := l.DeviceGetHandleByIndex(0)
	require.Equal(t, nvml.SUCCESS, ret)
	mockDev := migServer(t, config).Devices[0]
	read := func(dev nvml.Device) []MIGInstance {
		createMIG(t, dev, nvml.GPU_INSTANCE_PROFILE_3_SLICE, 4, 1)
		createMIG(t, dev, nvml.GPU_INSTANCE_PROFILE_1_SLICE, 0, 0)
		createMIG(t, dev, nvml.GPU_INSTANCE_PROFILE_2_SLICE, 2, 2)
		mig, err := ReadMIG(dev, false)
		require.NoError(t, err)
		require.NotNil(t, mig)
		for i := range mig.Instances {
			mig.Instances[i].ID = 0
		}
		return mig.Instances
	}
	want := read(mockDev)
	assert.Len(t, want, 3)
	assert.Equal(t, want, read(fakeDev))
}

// createMIG creates a GPU instance of profile at the placement starting at
// start, with cis 1-slice compute instances, through go-nvml.
func createMIG(t *testing.T, dev nvml.Device, profile int, start uint32, cis int) {
	t.Helper()
	info, ret := dev.GetGpuInstanceProfileInfo(profile)
	require.Equal(t, nvml.SUCCESS, ret)
	pl, ret := dev.GetGpuInstancePossiblePlacements(&info)
	require.Equal(t, nvml.SUCCESS, ret)
	for _, p := range pl {
		if p.Start != start {
			continue
		}
		gi, ret := dev.CreateGpuInstanceWithPlacement(&info, &p)
		require.Equal(t, nvml.SUCCESS, ret)
		for i := 0; i < cis; i++ {
			ciInfo, ret := gi.GetComputeInstanceProfileInfo(nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
			require.Equal(t, nvml.SUCCESS, ret)
			_, ret = gi.CreateComputeInstance(&ciInfo)
			require.Equal(t, nvml.SUCCESS, ret)
		}
		return
	}
	t.Fatalf("profile %d has no placement at %d", profile, start)
}
