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

package burstnode

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vgpu-dra/vgpu-dra-driver/internal/testenv"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/region"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/burstgrant"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/prepare"
)

// coreBuild is vgpu-core's build directory: VGPU_CORE_BUILD (make test sets
// it) or the default relative to this package.
func coreBuild() string {
	if dir := os.Getenv("VGPU_CORE_BUILD"); dir != "" {
		return dir
	}
	return "../../../vgpu-core/build"
}

// needLibrary returns the absolute path of a vgpu-core build output, or
// skips the test where it is not built (fails under CI, where `make test`
// builds it first: testenv.Unavailable).
func needLibrary(t *testing.T, rel string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join(coreBuild(), rel))
	require.NoError(t, err)
	if _, err := os.Stat(p); err != nil {
		testenv.Unavailable(t, "%s not built (make vgpu-core): %v", p, err)
	}
	return p
}

// fakeGPUUUID is the UUID of GPU 0 of vgpu-core's fake NVML with its state
// in stateDir.
func fakeGPUUUID(t *testing.T, lib, stateDir string) string {
	t.Helper()
	t.Setenv("VGPU_FAKE_STATE_DIR", stateDir)
	t.Setenv("VGPU_FAKE_GPU_COUNT", "1")
	t.Setenv("VGPU_FAKE_GPU_MEMORY", "16Gi")
	n := nvml.New(nvml.WithLibraryPath(lib))
	require.Equal(t, nvml.SUCCESS, n.Init())
	defer func() { _ = n.Shutdown() }()
	dev, ret := n.DeviceGetHandleByIndex(0)
	require.Equal(t, nvml.SUCCESS, ret)
	uuid, ret := dev.GetUUID()
	require.Equal(t, nvml.SUCCESS, ret)
	return uuid
}

// TestLibraryAsksThePlugin runs libvgpu.so (over the fake driver, in a
// private mount namespace with the claim's config mounted read-only as the
// plugin injects it) against this package's socket server and the real
// Book: the wire protocol of vgpu-core/include/vgpu_burstsock.h as both sides
// speak it. Needs root.
func TestLibraryAsksThePlugin(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.Unavailable(t, "needs root for a private mount namespace")
	}
	lib := needLibrary(t, "libvgpu.so")
	probe := needLibrary(t, "test/burst_test")
	claimsNS := needLibrary(t, "claims-ns")
	fakeNVML := needLibrary(t, "fake/libnvidia-ml.so.1")

	state := shortDir(t)
	uuid := fakeGPUUUID(t, fakeNVML, state)
	root := filepath.Join(state, "claims")
	uid := types.UID("a0000000-0000-4000-8000-000000000001")
	dir := filepath.Join(root, string(uid))
	host := filepath.Join(dir, "host")
	require.NoError(t, os.MkdirAll(host, 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "shm"), 0o755))
	config := fmt.Sprintf("version=1\nclaim=%s\ndevice.count=1\ndevice.0.uuid=%s\n"+
		"device.0.memory_limit_bytes=%d\ndevice.0.sm_limit_percent=0\n", uid, uuid, gib)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config"), []byte(config), 0o644))
	regionPath := filepath.Join(dir, "shm", "region")
	require.NoError(t, os.WriteFile(regionPath, nil, 0o666))
	require.NoError(t, os.Truncate(regionPath, int64(region.Size)))

	// Guarantee 1 GiB, ceiling 2 GiB, on a 16 GiB GPU.
	e := newEnv(t)
	e.book.SetGPU(uuid, 16*gib, 0)
	require.NoError(t, e.node.Start(e.ctx, nil))
	c := prepare.PreparedClaim{UID: uid, Namespace: "ns", Name: "a", RegionPath: regionPath,
		HostPIDsPath: filepath.Join(host, "pids"), BurstPath: filepath.Join(host, "burst"),
		BurstSocketPath: filepath.Join(host, "burst.sock"),
		GPUs:            []prepare.GPULimit{{UUID: uuid, MemoryLimitBytes: gib, BurstLimitBytes: 2 * gib}}}
	require.NoError(t, e.node.EnsureClaim(e.ctx, &c))

	run := func(ops ...string) {
		t.Helper()
		args := append([]string{root, probe, "probe"}, ops...)
		cmd := exec.CommandContext(e.ctx, claimsNS, args...)
		cmd.Env = append(os.Environ(), "LD_PRELOAD="+lib, "VGPU_CLAIMS_ROOT="+root,
			"BURST_TEST_CLAIM="+dir, "BURST_TEST_UUID="+uuid,
			"LD_LIBRARY_PATH="+filepath.Dir(fakeNVML))
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "probe %v:\n%s", ops, out)
	}

	// 768 + 512 MiB crosses the guarantee by 256 MiB: one chunk granted,
	// the totals show it; 1024 MiB more would need 1280 MiB above the
	// guarantee, beyond the 1 GiB room: refused (limit), OOM.
	run("a:768:ok", "a:512:ok", "t:1280", "a:1024:oom", "t:1280", "f")
	assert.Equal(t, map[string]uint64{uuid: burstgrant.ChunkBytes}, e.book.Grants(uid))
	data, err := os.ReadFile(c.BurstPath)
	require.NoError(t, err)
	assert.Equal(t, fmt.Sprintf("version=1\ngpu %s %d\n", uuid, burstgrant.ChunkBytes), string(data))
	assert.InDelta(t, 1, testutil.ToFloat64(e.node.metrics.refusals.WithLabelValues("limit")), 0)

	// The grant already given is used without asking again; a need the
	// GPU cannot hold (others booked it) is refused (full).
	e.book.SetGPU(uuid, gib+burstgrant.ChunkBytes, 0)
	run("a:1280:ok", "a:64:oom", "f")
	assert.InDelta(t, 1, testutil.ToFloat64(e.node.metrics.refusals.WithLabelValues("full")), 0)
	assert.Equal(t, map[string]uint64{uuid: burstgrant.ChunkBytes}, e.book.Grants(uid))
}
