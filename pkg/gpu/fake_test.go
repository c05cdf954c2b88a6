package gpu

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2/ktesting"
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
		t.Skipf("%s is not set; build vgpu-core's fakes (make -C vgpu-core fakes) and point it at libnvidia-ml.so.1", fakeNVMLEnv)
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
	assert.Equal(t, XIDEvent{UUID: infos[1].UUID, XID: 79}, first)

	inject("0 13")
	inject("2 48")
	for {
		select {
		case e := <-events:
			if e.XID == 79 {
				continue // a repeat of the first injection
			}
			assert.Equal(t, XIDEvent{UUID: infos[2].UUID, XID: 48}, e, "XID 13 is an application error and must be skipped")
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
