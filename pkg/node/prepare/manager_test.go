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
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	oci "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"tags.cncf.io/container-device-interface/pkg/cdi"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/region"
)

const (
	claimA = "a0000000-0000-4000-8000-000000000001"
	claimB = "b0000000-0000-4000-8000-000000000002"
	shareA = "5a000000-0000-4000-8000-00000000000a"
)

// twoGPUClaim asks for 4Gi/30 cores on gpu-0 (shared) and 8Gi/0 cores on gpu-1.
func twoGPUClaim(uid string) *resourceapi.ResourceClaim {
	return newClaim(uid, "train").
		result("big", "gpu-0", "4Gi", "30", shareA).
		result("small", "gpu-1", "8Gi", "0", "").
		config(resourceapi.AllocationConfigSourceClass, nil, `"computePolicy":"workConserving"`).
		config(resourceapi.AllocationConfigSourceClaim, []string{"big", "small"}, `"priority":"high","logLevel":"debug"`).
		obj()
}

func prepareOne(t *testing.T, m *Manager, claim *resourceapi.ResourceClaim) kubeletplugin.PrepareResult {
	t.Helper()
	results, err := m.PrepareResourceClaims(testContext(t), []*resourceapi.ResourceClaim{claim})
	require.NoError(t, err)
	require.Len(t, results, 1)
	res := results[claim.UID]
	require.NoError(t, res.Err)
	return res
}

func unprepare(t *testing.T, m *Manager, uids ...string) map[types.UID]error {
	t.Helper()
	var objs []kubeletplugin.NamespacedObject
	for _, uid := range uids {
		objs = append(objs, kubeletplugin.NamespacedObject{UID: types.UID(uid)})
	}
	results, err := m.UnprepareResourceClaims(testContext(t), objs)
	require.NoError(t, err)
	require.Len(t, results, len(uids))
	return results
}

func envValue(env []string, key string) (string, bool) {
	for _, kv := range env {
		if k, v, ok := cutEnv(kv); ok && k == key {
			return v, true
		}
	}
	return "", false
}

func cutEnv(kv string) (string, string, bool) {
	for i := range len(kv) {
		if kv[i] == '=' {
			return kv[:i], kv[i+1:], true
		}
	}
	return "", "", false
}

func mountAt(mounts []*cdispec.Mount, containerPath string) *cdispec.Mount {
	for _, m := range mounts {
		if m.ContainerPath == containerPath {
			return m
		}
	}
	return nil
}

func TestPrepareUnprepare(t *testing.T) {
	env := newTestEnv(t)
	m := env.newManager(t)
	claim := twoGPUClaim(claimA)

	res := prepareOne(t, m, claim)
	share := types.UID(shareA)
	assert.Equal(t, []kubeletplugin.Device{
		{Requests: []string{"big"}, PoolName: nodeName, DeviceName: "gpu-0", ShareID: &share,
			CDIDeviceIDs: []string{"k8s.vgpu.dra.dev/claim=" + claimA + "-gpu-0-" + shareA}},
		{Requests: []string{"small"}, PoolName: nodeName, DeviceName: "gpu-1",
			CDIDeviceIDs: []string{"k8s.vgpu.dra.dev/claim=" + claimA + "-gpu-1"}},
	}, res.Devices)

	// The config file, in the contract format; gpu-1 comes first by PCI bus ID.
	claimDir := filepath.Join(env.stateRoot, "claims", claimA)
	config, err := os.ReadFile(filepath.Join(claimDir, "config"))
	require.NoError(t, err)
	assert.Equal(t, `version=1
claim=`+claimA+`
compute_policy=workConserving
priority=high
log_level=debug
enforcement=enabled
device.count=2
device.0.uuid=`+uuid1+`
device.0.memory_limit_bytes=8589934592
device.0.sm_limit_percent=0
device.1.uuid=`+uuid0+`
device.1.memory_limit_bytes=4294967296
device.1.sm_limit_percent=30
`, string(config))
	info, err := os.Stat(filepath.Join(claimDir, "config"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o644), info.Mode().Perm())

	info, err = os.Stat(filepath.Join(claimDir, "shm"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o755), info.Mode().Perm(), "containers get the region file alone; no one but the plugin writes the directory")
	info, err = os.Stat(filepath.Join(claimDir, "shm", "region"))
	require.NoError(t, err)
	assert.EqualValues(t, region.Size, info.Size())
	info, err = os.Stat(filepath.Join(claimDir, "host"))
	require.NoError(t, err)
	assert.True(t, info.IsDir())
	assert.Equal(t, os.FileMode(0o755), info.Mode().Perm(), "only the plugin writes the host directory")

	preload, err := os.ReadFile(filepath.Join(env.stateRoot, "ld.so.preload"))
	require.NoError(t, err)
	assert.Equal(t, "/usr/local/vgpu/libvgpu.so\n", string(preload))

	// The CDI spec, read back with the CDI library: claim-wide edits once at
	// spec level, the limits and the GPU's own edits per device.
	spec := readSpec(t, env, claimA)
	assert.Equal(t, "k8s.vgpu.dra.dev/claim", spec.Kind)
	common := spec.ContainerEdits
	v, _ := envValue(common.Env, "CUDA_DEVICE_MEMORY_SHARED_CACHE")
	assert.Equal(t, "/usr/local/vgpu/claims/"+claimA+"/shm/region", v)
	v, _ = envValue(common.Env, "CUDA_DEVICE_ORDER")
	assert.Equal(t, "PCI_BUS_ID", v)
	v, _ = envValue(common.Env, "NVIDIA_VISIBLE_DEVICES")
	assert.Equal(t, "void", v, "common edits of the vendor spec are included")
	require.Len(t, common.DeviceNodes, 1)
	assert.Equal(t, "/dev/nvidiactl", common.DeviceNodes[0].Path)
	assert.Len(t, common.Hooks, 1, "the GPUs' identical common edits are added once")
	for path, want := range map[string]cdispec.Mount{
		"/usr/local/vgpu/libvgpu.so":                       {HostPath: env.libVGPU, Options: readOnlyBind},
		"/etc/ld.so.preload":                               {HostPath: filepath.Join(env.stateRoot, "ld.so.preload"), Options: readOnlyBind},
		"/usr/local/vgpu/claims/" + claimA + "/config":     {HostPath: filepath.Join(claimDir, "config"), Options: readOnlyBind},
		"/usr/local/vgpu/claims/" + claimA + "/shm/region": {HostPath: filepath.Join(claimDir, "shm", "region"), Options: []string{"rw", "nosuid", "nodev", "noexec", "bind"}},
		"/usr/local/vgpu/claims/" + claimA + "/host":       {HostPath: filepath.Join(claimDir, "host"), Options: readOnlyBind},
	} {
		got := mountAt(common.Mounts, path)
		require.NotNil(t, got, "mount %s", path)
		assert.Equal(t, want.HostPath, got.HostPath, path)
		assert.Equal(t, want.Options, got.Options, path)
	}

	dev0 := spec.GetDevice(claimA + "-gpu-0-" + shareA)
	require.NotNil(t, dev0)
	dev1 := spec.GetDevice(claimA + "-gpu-1")
	require.NotNil(t, dev1)
	assert.Equal(t, []string{"CUDA_DEVICE_MEMORY_LIMIT_1=4096m", "CUDA_DEVICE_SM_LIMIT_1=30"}, dev0.ContainerEdits.Env)
	assert.Equal(t, []string{"CUDA_DEVICE_MEMORY_LIMIT_0=8192m", "CUDA_DEVICE_SM_LIMIT_0=0"}, dev1.ContainerEdits.Env)
	require.Len(t, dev0.ContainerEdits.DeviceNodes, 1)
	assert.Equal(t, "/dev/nvidia0", dev0.ContainerEdits.DeviceNodes[0].Path)
	require.Len(t, dev1.ContainerEdits.DeviceNodes, 1)
	assert.Equal(t, "/dev/nvidia1", dev1.ContainerEdits.DeviceNodes[0].Path)

	assert.Equal(t, prepared, env.diskState(t, claimA))
	claims := m.PreparedClaims()
	require.Len(t, claims, 1)
	assert.Equal(t, types.UID(claimA), claims[0].UID)
	assert.Equal(t, "train", claims[0].Name)
	assert.Equal(t, filepath.Join(claimDir, "shm", "region"), claims[0].RegionPath)
	assert.Equal(t, filepath.Join(claimDir, "host", "pids"), claims[0].HostPIDsPath)
	assert.Equal(t, []GPULimit{
		{UUID: uuid1, MemoryLimitBytes: uint64(8 * gib), SMLimitPercent: 0},
		{UUID: uuid0, MemoryLimitBytes: uint64(4 * gib), SMLimitPercent: 30},
	}, claims[0].GPUs)

	for uid, err := range unprepare(t, m, claimA) {
		assert.NoError(t, err, uid)
	}
	assert.Equal(t, absent, env.diskState(t, claimA))
	assert.Empty(t, m.PreparedClaims())

	// Unpreparing again, or a claim never seen, succeeds.
	for uid, err := range unprepare(t, m, claimA, claimB, "not-a-uid") {
		assert.NoError(t, err, uid)
	}
}

func TestPrepareIdempotent(t *testing.T) {
	env := newTestEnv(t)
	m := env.newManager(t)
	claim := twoGPUClaim(claimA)
	first := prepareOne(t, m, claim)
	specBefore := readSpec(t, env, claimA).Spec

	// A process initialised the region; then the config and spec vanish.
	l := layout{stateRoot: env.stateRoot}
	require.NoError(t, os.WriteFile(l.regionPath(claimA), append([]byte("VGPUREG1"), make([]byte, region.Size-8)...), 0o666))
	require.NoError(t, os.Remove(l.configPath(claimA)))
	require.NoError(t, os.RemoveAll(env.cdiRoot))

	second := prepareOne(t, m, claim)
	assert.Equal(t, first, second)
	assert.Equal(t, prepared, env.diskState(t, claimA))
	assert.Equal(t, specBefore, readSpec(t, env, claimA).Spec)
	data, err := os.ReadFile(l.regionPath(claimA))
	require.NoError(t, err)
	assert.Equal(t, "VGPUREG1", string(data[:8]), "an existing region is never reset")

	// The same UID with another allocation is refused, the prepared claim kept.
	changed := newClaim(claimA, "train").result("big", "gpu-0", "8Gi", "30", shareA).obj()
	results, err := m.PrepareResourceClaims(testContext(t), []*resourceapi.ResourceClaim{changed})
	require.NoError(t, err)
	require.Error(t, results[claimA].Err)
	assert.Contains(t, results[claimA].Err.Error(), "different allocation")
	assert.Equal(t, prepared, env.diskState(t, claimA))
}

func TestRestartFromCheckpoint(t *testing.T) {
	env := newTestEnv(t)
	m := env.newManager(t)
	res := prepareOne(t, m, twoGPUClaim(claimA))
	before := m.PreparedClaims()

	restarted := env.newManager(t)
	assert.Equal(t, before, restarted.PreparedClaims())
	assert.Equal(t, res, prepareOne(t, restarted, twoGPUClaim(claimA)))

	for _, err := range unprepare(t, restarted, claimA) {
		require.NoError(t, err)
	}
	assert.Equal(t, absent, env.diskState(t, claimA))
	assert.Empty(t, env.newManager(t).PreparedClaims())
}

func TestRebootRecreatesSpecs(t *testing.T) {
	env := newTestEnv(t)
	m := env.newManager(t)
	prepareOne(t, m, twoGPUClaim(claimA))
	specBefore := readSpec(t, env, claimA).Spec

	// A reboot empties the tmpfs CDI root and changes the boot ID.
	require.NoError(t, os.RemoveAll(env.cdiRoot))
	env.setBootID(t, "boot-2")

	restarted := env.newManager(t)
	assert.Equal(t, prepared, env.diskState(t, claimA))
	assert.Equal(t, specBefore, readSpec(t, env, claimA).Spec)
	cp, err := loadCheckpoint(restarted.layout.checkpointPath())
	require.NoError(t, err)
	assert.Equal(t, "boot-2", cp.BootID)
}

func TestRecoveryRetriesWhenEditsFail(t *testing.T) {
	env := newTestEnv(t)
	prepareOne(t, env.newManager(t), twoGPUClaim(claimA))
	require.NoError(t, os.RemoveAll(env.cdiRoot))

	// The GPU's edits cannot be produced at start (driver not loaded yet).
	env.edits.failFor(uuid0)
	saved := restoreRetryInterval
	restoreRetryInterval = 10 * time.Millisecond
	t.Cleanup(func() { restoreRetryInterval = saved })
	ctx, cancel := context.WithCancel(testContext(t))
	t.Cleanup(cancel)
	m, err := NewManager(ctx, env.options())
	require.NoError(t, err, "a claim that cannot be restored yet does not stop the plugin")
	state := env.diskState(t, claimA)
	assert.False(t, state.spec)
	assert.Equal(t, statePrepareCompleted, state.state, "the claim is not forgotten")
	assert.Len(t, m.PreparedClaims(), 1)

	// Once the edits can be produced, the background retry restores the spec
	// without any call from the kubelet.
	env.edits.clearFailures()
	assert.Eventually(t, func() bool { return env.diskState(t, claimA) == prepared }, 10*time.Second, 10*time.Millisecond)
}

func TestSharedGPUInOneClaim(t *testing.T) {
	env := newTestEnv(t)
	m := env.newManager(t)
	claim := newClaim(claimA, "pair").
		result("a", "gpu-0", "4Gi", "30", shareA).
		result("b", "gpu-0", "2Gi", "20", "5b000000-0000-4000-8000-00000000000b").
		obj()
	prepareOne(t, m, claim)
	claims := m.PreparedClaims()
	require.Len(t, claims, 1)
	assert.Equal(t, []GPULimit{{UUID: uuid0, MemoryLimitBytes: uint64(6 * gib), SMLimitPercent: 50}}, claims[0].GPUs,
		"a claim's shares of one GPU add up")
	spec := readSpec(t, env, claimA)
	require.Len(t, spec.Devices, 2)
	for _, d := range spec.Devices {
		v, _ := envValue(d.ContainerEdits.Env, "CUDA_DEVICE_MEMORY_LIMIT_0")
		assert.Equal(t, "6144m", v)
	}

	assert.Equal(t, int64(0), mergeCores(30, 0), "a best-effort share keeps the GPU unthrottled")
	assert.Equal(t, int64(100), mergeCores(70, 60))
}

func TestEnforcementDisabledByClass(t *testing.T) {
	env := newTestEnv(t)
	m := env.newManager(t)
	claim := newClaim(claimA, "debug").
		result("gpu", "gpu-0", "4Gi", "10", "").
		config(resourceapi.AllocationConfigSourceClass, nil, `"enforcement":"disabled"`).
		obj()
	prepareOne(t, m, claim)
	config, err := os.ReadFile(layout{stateRoot: env.stateRoot}.configPath(claimA))
	require.NoError(t, err)
	assert.Contains(t, string(config), "\nenforcement=disabled\n")
	spec := readSpec(t, env, claimA)
	assert.Nil(t, mountAt(spec.ContainerEdits.Mounts, "/etc/ld.so.preload"), "no preload when enforcement is off")
	assert.NotNil(t, mountAt(spec.ContainerEdits.Mounts, "/usr/local/vgpu/libvgpu.so"))
}

func TestSubrequestConfig(t *testing.T) {
	env := newTestEnv(t)
	m := env.newManager(t)
	claim := newClaim(claimA, "alt").
		result("gpu/small", "gpu-0", "2Gi", "10", "").
		config(resourceapi.AllocationConfigSourceClaim, []string{"gpu"}, `"computePolicy":"disabled"`).
		config(resourceapi.AllocationConfigSourceClaim, []string{"other"}, `"priority":"high"`).
		obj()
	prepareOne(t, m, claim)
	claims := m.PreparedClaims()
	require.Len(t, claims, 1)
	assert.Equal(t, Settings{ComputePolicy: "disabled", Priority: "low", LogLevel: "warning", Enforcement: "enabled"}, claims[0].Settings,
		"a config for the parent request applies to its subrequest; configs of other requests do not")
}

func TestClaimWithoutOurDevices(t *testing.T) {
	env := newTestEnv(t)
	m := env.newManager(t)
	claim := newClaim(claimA, "other").modify(func(c *resourceapi.ResourceClaim) {
		c.Status.Allocation.Devices.Results = []resourceapi.DeviceRequestAllocationResult{{Request: "nic", Driver: "net.example.com", Pool: nodeName, Device: "eth0"}}
	}).obj()
	res := prepareOne(t, m, claim)
	assert.Empty(t, res.Devices)
	assert.Equal(t, absent, env.diskState(t, claimA))
}

func TestPreparedClaimsSorted(t *testing.T) {
	env := newTestEnv(t)
	m := env.newManager(t)
	results, err := m.PrepareResourceClaims(testContext(t), []*resourceapi.ResourceClaim{
		newClaim(claimA, "zeta").result("r", "gpu-0", "1Gi", "1", "").obj(),
		newClaim(claimB, "alpha").result("r", "gpu-0", "1Gi", "1", "").obj(),
	})
	require.NoError(t, err)
	for _, r := range results {
		require.NoError(t, r.Err)
	}
	var names []string
	for _, c := range m.PreparedClaims() {
		names = append(names, c.Name)
	}
	assert.True(t, slices.IsSorted(names))
	assert.Len(t, names, 2)
}

// TestInjectIntoContainer applies the returned CDI device IDs to an OCI spec
// the way a container runtime does.
func TestInjectIntoContainer(t *testing.T) {
	env := newTestEnv(t)
	m := env.newManager(t)
	res := prepareOne(t, m, twoGPUClaim(claimA))

	cache, err := cdi.NewCache(cdi.WithSpecDirs(env.cdiRoot), cdi.WithAutoRefresh(false))
	require.NoError(t, err)
	container := &oci.Spec{Process: &oci.Process{}, Linux: &oci.Linux{}}
	var ids []string
	for _, d := range res.Devices {
		ids = append(ids, d.CDIDeviceIDs...)
	}
	unresolved, err := cache.InjectDevices(container, ids...)
	require.NoError(t, err)
	assert.Empty(t, unresolved)

	for _, kv := range []string{
		"CUDA_DEVICE_MEMORY_LIMIT_0=8192m", "CUDA_DEVICE_SM_LIMIT_0=0",
		"CUDA_DEVICE_MEMORY_LIMIT_1=4096m", "CUDA_DEVICE_SM_LIMIT_1=30",
		"CUDA_DEVICE_MEMORY_SHARED_CACHE=/usr/local/vgpu/claims/" + claimA + "/shm/region",
		"CUDA_DEVICE_ORDER=PCI_BUS_ID",
	} {
		assert.Contains(t, container.Process.Env, kv)
	}
	var devices []string
	for _, d := range container.Linux.Devices {
		devices = append(devices, d.Path)
	}
	assert.ElementsMatch(t, []string{"/dev/nvidia0", "/dev/nvidia1", "/dev/nvidiactl"}, devices)
	var destinations []string
	for _, mnt := range container.Mounts {
		destinations = append(destinations, mnt.Destination)
	}
	assert.ElementsMatch(t, []string{
		"/usr/local/vgpu/libvgpu.so", "/etc/ld.so.preload",
		"/usr/local/vgpu/claims/" + claimA + "/config", "/usr/local/vgpu/claims/" + claimA + "/shm/region",
		"/usr/local/vgpu/claims/" + claimA + "/host",
	}, destinations)
	require.NotNil(t, container.Hooks)
	assert.Len(t, container.Hooks.CreateContainer, 1, "hooks run once per container, not once per GPU")
}
