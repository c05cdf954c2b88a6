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
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/claimcdi"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/discovery"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/discovery/discoverytest"
)

const (
	migDevice3g = "gpu-2-mig-3g-71gb-4"
)

// migEnv is a node with the two plain GPUs of testEnv and, as gpu-2, an
// H200 in MIG mode from go-nvml's mock, its instances created through the
// real discovery.MIGController, and a procfs with the driver's capability files.
type migEnv struct {
	*testEnv
	dev  *server.Device
	fake *discoverytest.MIG
	mig  discovery.MIGInfo
	proc string
	// lifecycle is what managers use; tests may wrap it.
	lifecycle MIGLifecycle
}

func newMIGEnv(t *testing.T) *migEnv {
	env := newTestEnv(t)
	s, err := server.New(server.WithGPUs(gpus.H200_SXM5_141GB))
	require.NoError(t, err)
	dev := s.Devices[0].(*server.Device)
	_, ret := dev.SetMigMode(nvml.DEVICE_MIG_ENABLE)
	require.Equal(t, nvml.SUCCESS, ret)
	fake := discoverytest.EnableMIG(dev)
	mig, err := discovery.ReadMIG(dev, false)
	require.NoError(t, err)
	proc := t.TempDir()
	// The driver publishes a capability file per GPU and compute instance.
	for gi := 0; gi < 32; gi++ {
		writeAccess(t, proc, fmt.Sprintf("gpu2/mig/gi%d", gi), 1000+gi*10)
		for ci := 0; ci < 2; ci++ {
			writeAccess(t, proc, fmt.Sprintf("gpu2/mig/gi%d/ci%d", gi, ci), 1000+gi*10+1+ci)
		}
	}
	e := &migEnv{testEnv: env, dev: dev, fake: fake, mig: *mig, proc: proc, lifecycle: discovery.NewMIGController(discovery.WithNVML(s))}
	return e
}

func writeAccess(t *testing.T, proc, rel string, minor int) {
	p := filepath.Join(proc, "driver/nvidia/capabilities", rel, "access")
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(fmt.Sprintf("DeviceFileMinor: %d\nDeviceFileMode: 292\n", minor)), 0o644))
}

func (e *migEnv) options() Options {
	opts := e.testEnv.options()
	opts.Devices["gpu-2"] = discovery.Info{UUID: e.dev.UUID, Index: 2, Minor: 2, MemoryBytes: uint64(141 * gib), PCIBusID: "0000:5c:00.0"}
	opts.GPUEdits = parentEdits{base: e.edits, uuid: e.dev.UUID}
	opts.MIGGPUs = map[string]discovery.MIGInfo{"gpu-2": e.mig}
	opts.MIG = e.lifecycle
	opts.ProcRoot = e.proc
	return opts
}

func (e *migEnv) newManager(t *testing.T) *Manager {
	// Background retries end with the test.
	ctx, cancel := context.WithCancel(testContext(t))
	t.Cleanup(cancel)
	m, err := NewManager(ctx, e.options())
	require.NoError(t, err)
	return m
}

// parentEdits answers for the MIG GPU with gpu-0's common edits and its own
// device node; the vendor spec knows only the plain GPUs.
type parentEdits struct {
	base claimcdi.GPUEditsSource
	uuid string
}

func (p parentEdits) ContainerEdits(ctx context.Context, uuid string) (*claimcdi.GPUEdits, error) {
	if uuid != p.uuid {
		return p.base.ContainerEdits(ctx, uuid)
	}
	e, err := p.base.ContainerEdits(ctx, uuid0)
	if err != nil {
		return nil, err
	}
	return &claimcdi.GPUEdits{Common: e.Common, Device: cdispec.ContainerEdits{DeviceNodes: []*cdispec.DeviceNode{{Path: "/dev/nvidia2"}}}}, nil
}

func migClaim(uid, device, shareID string) *resourceapi.ResourceClaim {
	return newClaim(uid, "mig").result("r", device, "10Gi", "30", shareID).obj()
}

// instances lists the GPU instances that exist on the MIG GPU as
// "<profile id>@<start>/<compute instances>".
func (e *migEnv) instances(t *testing.T) []string {
	list, err := e.lifecycle.Instances(testContext(t), e.dev.UUID)
	require.NoError(t, err)
	var out []string
	for _, inst := range list {
		out = append(out, fmt.Sprintf("%d@%d/%d", inst.ProfileID, inst.Placement.Start, len(inst.Compute)))
	}
	return out
}

// noInstancesLeft polls instances while the manager's background retry may
// destroy an instance between NVML's listing and its query: a listing cut
// short that way is "not yet", not a failure.
func (e *migEnv) noInstancesLeft(t *testing.T) func() bool {
	return func() bool {
		list, err := e.lifecycle.Instances(testContext(t), e.dev.UUID)
		return err == nil && len(list) == 0
	}
}

// record is the checkpoint's record of the MIG GPU's only owned instance.
func (e *migEnv) record(t *testing.T) *instanceRecord {
	cp, err := loadCheckpoint(layout{stateRoot: e.stateRoot}.checkpointPath())
	require.NoError(t, err)
	list := cp.Instances[e.dev.UUID]
	if len(list) == 0 {
		return nil
	}
	require.Len(t, list, 1)
	return list[0]
}

func configOf(t *testing.T, e *testEnv, uid string) string {
	data, err := os.ReadFile(layout{stateRoot: e.stateRoot}.configPath(types.UID(uid)))
	require.NoError(t, err)
	return string(data)
}

func specDevice(t *testing.T, e *testEnv, uid string) cdispec.Device {
	spec := readSpec(t, e, uid)
	require.Len(t, spec.Devices, 1)
	return spec.Devices[0]
}

var threeGAt4 = fmt.Sprintf("%d@4/1", nvml.GPU_INSTANCE_PROFILE_3_SLICE)

func TestPrepareMIGDeviceSharedAndDestroyedByLastUnprepare(t *testing.T) {
	env := newMIGEnv(t)
	m := env.newManager(t)

	res := prepareOne(t, m, migClaim(claimA, migDevice3g, shareA))
	require.Len(t, res.Devices, 1)
	assert.Equal(t, migDevice3g, res.Devices[0].DeviceName)
	assert.Equal(t, []string{threeGAt4}, env.instances(t))
	rec := env.record(t)
	require.NotNil(t, rec)
	assert.Equal(t, instanceReady, rec.State)
	assert.Equal(t, []types.UID{claimA}, rec.Claims)
	assert.Equal(t, migPlacement{Start: 4, Size: 3}, rec.Placement)
	require.True(t, strings.HasPrefix(rec.UUID, "MIG-"), rec.UUID)
	migUUID := rec.UUID
	// The publisher learns that the instance is the plugin's, not an admin's.
	assert.Equal(t, map[string][]discovery.MIGInstance{env.dev.UUID: {{ID: *rec.GPUInstanceID, ProfileID: rec.ProfileID,
		Placement: discovery.MIGPlacement{Start: 4, Size: 3}}}}, m.OwnedMIGInstances())

	// The config is keyed by the instance, with the instance's limits.
	cfg := configOf(t, env.testEnv, claimA)
	assert.Contains(t, cfg, "device.0.uuid="+migUUID+"\n")
	assert.Contains(t, cfg, fmt.Sprintf("device.0.memory_limit_bytes=%d\n", 10*gib))
	assert.NotContains(t, cfg, env.dev.UUID)

	// The CDI spec injects the instance, not the parent GPU's own edits.
	dev := specDevice(t, env.testEnv, claimA)
	v, _ := envValue(dev.ContainerEdits.Env, "CUDA_VISIBLE_DEVICES")
	assert.Equal(t, migUUID, v)
	v, _ = envValue(dev.ContainerEdits.Env, "NVIDIA_VISIBLE_DEVICES")
	assert.Equal(t, migUUID, v)
	var nodes []string
	for _, n := range dev.ContainerEdits.DeviceNodes {
		nodes = append(nodes, n.Path)
	}
	gi, ci := *rec.GPUInstanceID, *rec.ComputeInstanceID
	assert.Equal(t, []string{"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia2",
		fmt.Sprintf("/dev/nvidia-caps/nvidia-cap%d", 1000+gi*10), fmt.Sprintf("/dev/nvidia-caps/nvidia-cap%d", 1000+gi*10+1+ci)}, nodes)

	// Preparing again changes nothing.
	again := prepareOne(t, m, migClaim(claimA, migDevice3g, shareA))
	assert.Equal(t, res, again)
	assert.Equal(t, []string{threeGAt4}, env.instances(t))

	// A second claim shares the instance.
	prepareOne(t, m, migClaim(claimB, migDevice3g, shareB))
	assert.Equal(t, []string{threeGAt4}, env.instances(t))
	rec = env.record(t)
	assert.ElementsMatch(t, []types.UID{claimA, claimB}, rec.Claims)
	assert.Contains(t, configOf(t, env.testEnv, claimB), "device.0.uuid="+migUUID+"\n")

	for _, err := range unprepare(t, m, claimA) {
		require.NoError(t, err)
	}
	assert.Equal(t, []string{threeGAt4}, env.instances(t), "claim B still uses the instance")
	assert.Equal(t, []types.UID{claimB}, env.record(t).Claims)

	for _, err := range unprepare(t, m, claimB) {
		require.NoError(t, err)
	}
	assert.Empty(t, env.instances(t), "the last unprepare destroys the instance")
	assert.Nil(t, env.record(t))
	assert.Empty(t, m.OwnedMIGInstances())
	data, err := os.ReadFile(m.layout.checkpointPath())
	require.NoError(t, err)
	assert.Contains(t, string(data), `"version": 1`, "without owned instances the checkpoint is version 1 again")
}

func TestPrepareWholeGPUInMIGMode(t *testing.T) {
	env := newMIGEnv(t)
	m := env.newManager(t)
	full, ok := env.mig.FullProfile()
	require.True(t, ok)

	prepareOne(t, m, migClaim(claimA, "gpu-2", shareA))
	prepareOne(t, m, migClaim(claimB, "gpu-2", shareB))
	assert.Equal(t, []string{fmt.Sprintf("%d@0/1", full.ID)}, env.instances(t), "software slices share the full-size instance")
	rec := env.record(t)
	assert.Equal(t, migPlacement{Start: 0, Size: env.mig.MemorySlices()}, rec.Placement)
	assert.Contains(t, configOf(t, env.testEnv, claimA), "device.0.uuid="+rec.UUID+"\n")
	v, _ := envValue(specDevice(t, env.testEnv, claimB).ContainerEdits.Env, "CUDA_VISIBLE_DEVICES")
	assert.Equal(t, rec.UUID, v)

	// A plain GPU next to it is prepared as before.
	prepareOne(t, m, newClaim("c0000000-0000-4000-8000-000000000003", "plain").result("r", "gpu-0", "1Gi", "5", "").obj())
	for _, err := range unprepare(t, m, claimA, claimB) {
		require.NoError(t, err)
	}
	assert.Empty(t, env.instances(t))
}

func TestPrepareMIGRejectsWhatCannotBeRealised(t *testing.T) {
	env := newMIGEnv(t)
	m := env.newManager(t)
	results, err := m.PrepareResourceClaims(testContext(t), []*resourceapi.ResourceClaim{
		// No 3g placement starts at slice 2; no 9g profile.
		migClaim(claimA, "gpu-2-mig-3g-71gb-2", shareA),
		migClaim(claimB, "gpu-2-mig-9g-1gb-0", shareB),
		// More memory than the 1g instance has.
		newClaim("c0000000-0000-4000-8000-000000000003", "big").result("r", "gpu-2-mig-1g-18gb-0", "20Gi", "10", shareA).obj(),
	})
	require.NoError(t, err)
	for uid, res := range results {
		assert.Error(t, res.Err, uid)
	}
	assert.ErrorContains(t, results[claimA].Err, "gpu-2-mig-3g-71gb-2")
	assert.ErrorContains(t, results["c0000000-0000-4000-8000-000000000003"].Err, "more than the")
	assert.Empty(t, env.instances(t))
}

func TestStaticInstanceNeverTouched(t *testing.T) {
	env := newMIGEnv(t)
	// An admin's 1g at slice 0, made before the plugin started.
	giID, err := env.lifecycle.CreateGPUInstance(testContext(t), env.dev.UUID, nvml.GPU_INSTANCE_PROFILE_1_SLICE, discovery.MIGPlacement{Start: 0, Size: 1})
	require.NoError(t, err)
	_, _, err = env.lifecycle.CreateComputeInstance(testContext(t), env.dev.UUID, giID)
	require.NoError(t, err)
	static := fmt.Sprintf("%d@0/1", nvml.GPU_INSTANCE_PROFILE_1_SLICE)

	m := env.newManager(t)
	prepareOne(t, m, migClaim(claimA, migDevice3g, shareA))
	assert.Equal(t, []string{static, threeGAt4}, env.instances(t))
	env.newManager(t)
	assert.Equal(t, []string{static, threeGAt4}, env.instances(t))
	for _, err := range unprepare(t, m, claimA) {
		require.NoError(t, err)
	}
	env.newManager(t)
	assert.Equal(t, []string{static}, env.instances(t), "the admin's instance stays")

	// A claim on a placement the admin's instance overlaps fails cleanly.
	results, err := m.PrepareResourceClaims(testContext(t), []*resourceapi.ResourceClaim{migClaim(claimB, "gpu-2-mig-3g-71gb-0", shareB)})
	require.NoError(t, err)
	require.ErrorIs(t, results[claimB].Err, discovery.ErrMIGInsufficientResources)
	assert.Equal(t, absent, env.diskState(t, claimB))
	assert.Equal(t, []string{static}, env.instances(t))
	assert.Nil(t, env.record(t))
}

func TestRecoveryRecreatesVanishedInstance(t *testing.T) {
	env := newMIGEnv(t)
	m := env.newManager(t)
	prepareOne(t, m, migClaim(claimA, migDevice3g, shareA))
	prepareOne(t, m, migClaim(claimB, migDevice3g, shareB))
	old := env.record(t).UUID

	// A reboot or GPU reset destroys every instance.
	env.fake.Reset()
	env.setBootID(t, "boot-2")
	require.NoError(t, os.RemoveAll(env.cdiRoot))
	env.newManager(t)

	assert.Equal(t, []string{threeGAt4}, env.instances(t), "recreated at the same placement, once for both claims")
	rec := env.record(t)
	assert.Equal(t, instanceReady, rec.State)
	assert.NotEqual(t, old, rec.UUID)
	for _, uid := range []string{claimA, claimB} {
		assert.Equal(t, prepared, env.diskState(t, uid))
		assert.Contains(t, configOf(t, env.testEnv, uid), "device.0.uuid="+rec.UUID+"\n")
		v, _ := envValue(specDevice(t, env.testEnv, uid).ContainerEdits.Env, "CUDA_VISIBLE_DEVICES")
		assert.Equal(t, rec.UUID, v, "the CDI spec names the new instance")
	}
}

func TestRecoveryRewritesSpecOfRecreatedInstanceWithoutReboot(t *testing.T) {
	env := newMIGEnv(t)
	m := env.newManager(t)
	prepareOne(t, m, migClaim(claimA, migDevice3g, shareA))
	old := env.record(t).UUID
	env.fake.Reset() // a GPU reset: the CDI spec still exists but is stale
	env.newManager(t)
	rec := env.record(t)
	require.NotEqual(t, old, rec.UUID)
	v, _ := envValue(specDevice(t, env.testEnv, claimA).ContainerEdits.Env, "CUDA_VISIBLE_DEVICES")
	assert.Equal(t, rec.UUID, v)
}

// inUse makes the compute instances of the MIG GPU report IN_USE while set.
type inUse struct {
	MIGLifecycle
	mu   sync.Mutex
	busy bool
}

func (u *inUse) set(b bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.busy = b
}

func (u *inUse) DestroyComputeInstance(ctx context.Context, gpuUUID string, gi, ci int) error {
	u.mu.Lock()
	busy := u.busy
	u.mu.Unlock()
	if busy {
		return fmt.Errorf("destroy: %w: %w", discovery.ErrMIGInUse, nvml.ERROR_IN_USE)
	}
	return u.MIGLifecycle.DestroyComputeInstance(ctx, gpuUUID, gi, ci)
}

func TestInstanceInUseIsRetried(t *testing.T) {
	env := newMIGEnv(t)
	busy := &inUse{MIGLifecycle: env.lifecycle}
	env.lifecycle = busy
	m := env.newManager(t)
	prepareOne(t, m, migClaim(claimA, migDevice3g, shareA))

	busy.set(true)
	results := unprepare(t, m, claimA)
	require.ErrorIs(t, results[claimA], discovery.ErrMIGInUse, "the kubelet retries the unprepare")
	assert.Equal(t, absent, env.diskState(t, claimA), "the claim's files are gone")
	assert.Equal(t, instanceDestroying, env.record(t).State)
	assert.Equal(t, []string{threeGAt4}, env.instances(t))

	// A new claim on the placement waits until the old instance is gone.
	res, err := m.PrepareResourceClaims(testContext(t), []*resourceapi.ResourceClaim{migClaim(claimB, migDevice3g, shareB)})
	require.NoError(t, err)
	require.ErrorIs(t, res[claimB].Err, discovery.ErrMIGInsufficientResources)
	assert.Equal(t, absent, env.diskState(t, claimB))
	assert.Equal(t, instanceDestroying, env.record(t).State, "only the old record is left")

	// The retry succeeds once the processes are gone.
	busy.set(false)
	for _, err := range unprepare(t, m, claimA) {
		require.NoError(t, err)
	}
	assert.Empty(t, env.instances(t))
	assert.Nil(t, env.record(t))

	// At start, an instance in use is retried in the background.
	prepareOne(t, m, migClaim(claimA, migDevice3g, shareA))
	busy.set(true)
	_ = unprepare(t, m, claimA)
	saved := restoreRetryInterval
	restoreRetryInterval = 10 * time.Millisecond
	t.Cleanup(func() { restoreRetryInterval = saved })
	ctx, cancel := context.WithCancel(testContext(t))
	defer cancel()
	_, err = NewManager(ctx, env.options())
	require.NoError(t, err)
	assert.Equal(t, []string{threeGAt4}, env.instances(t))
	busy.set(false)
	require.Eventually(t, env.noInstancesLeft(t), 5*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool { return env.record(t) == nil }, 5*time.Second, 10*time.Millisecond)
}

var (
	migPrepareSteps = []step{stepCheckpointStarted, stepGPUInstanceCreate, stepComputeInstanceCreate,
		stepConfig, stepRegionMount, stepRegion, stepCDISpec, stepCheckpointCompleted}
	migUnprepareSteps = []step{stepRemoveCDISpec, stepRegionUnmount, stepRemoveClaimDir, stepCheckpointRemoved,
		stepComputeInstanceDestroy, stepGPUInstanceDestroy}
)

func TestMIGStepTablesCoverPlainSteps(t *testing.T) {
	for _, s := range prepareSteps {
		assert.Contains(t, migPrepareSteps, s)
	}
	for _, s := range unprepareSteps {
		assert.Contains(t, migUnprepareSteps, s)
	}
}

func TestCrashDuringMIGPrepare(t *testing.T) {
	for _, at := range migPrepareSteps {
		t.Run(string(at), func(t *testing.T) {
			env := newMIGEnv(t)
			m := env.newManager(t)
			crashAfter(m, at, claimA, func() {
				_, _ = m.PrepareResourceClaims(testContext(t), []*resourceapi.ResourceClaim{migClaim(claimA, migDevice3g, shareA)})
			})

			env.newManager(t)
			if at == stepCheckpointCompleted {
				assert.Equal(t, prepared, env.diskState(t, claimA))
				assert.Equal(t, []string{threeGAt4}, env.instances(t))
			} else {
				assert.Equal(t, absent, env.diskState(t, claimA), "after recovery the claim is either fully prepared or gone")
				assert.Empty(t, env.instances(t), "no leaked instance")
				assert.Nil(t, env.record(t))
			}

			restarted := env.newManager(t)
			prepareOne(t, restarted, migClaim(claimA, migDevice3g, shareA))
			assert.Equal(t, prepared, env.diskState(t, claimA))
			assert.Equal(t, []string{threeGAt4}, env.instances(t))
			for _, err := range unprepare(t, restarted, claimA) {
				require.NoError(t, err)
			}
			assert.Empty(t, env.instances(t))
		})
	}
}

// crashInNVML dies right after NVML created a GPU or compute instance,
// before the checkpoint records its id.
type crashInNVML struct {
	MIGLifecycle
	gi, ci bool
}

func (c *crashInNVML) CreateGPUInstance(ctx context.Context, gpuUUID string, profile int, pl discovery.MIGPlacement) (int, error) {
	id, err := c.MIGLifecycle.CreateGPUInstance(ctx, gpuUUID, profile, pl)
	if c.gi {
		runtime.Goexit()
	}
	return id, err
}

func (c *crashInNVML) CreateComputeInstance(ctx context.Context, gpuUUID string, gi int) (int, string, error) {
	id, uuid, err := c.MIGLifecycle.CreateComputeInstance(ctx, gpuUUID, gi)
	if c.ci {
		runtime.Goexit()
	}
	return id, uuid, err
}

func TestCrashBeforeNVMLResultIsRecorded(t *testing.T) {
	for _, tc := range []struct {
		name   string
		gi, ci bool
	}{{"gpu-instance", true, false}, {"compute-instance", false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			env := newMIGEnv(t)
			real := env.lifecycle
			env.lifecycle = &crashInNVML{MIGLifecycle: real, gi: tc.gi, ci: tc.ci}
			m := env.newManager(t)
			done := make(chan struct{})
			go func() {
				defer close(done)
				_, _ = m.PrepareResourceClaims(testContext(t), []*resourceapi.ResourceClaim{migClaim(claimA, migDevice3g, shareA)})
			}()
			<-done
			assert.Equal(t, []string{fmt.Sprintf("%d@4/%d", nvml.GPU_INSTANCE_PROFILE_3_SLICE, map[bool]int{true: 1}[tc.ci])}, env.instances(t))

			env.lifecycle = real
			env.newManager(t)
			assert.Empty(t, env.instances(t), "the Creating entry matches the instance by profile and placement")
			assert.Nil(t, env.record(t))
			assert.Equal(t, absent, env.diskState(t, claimA))
		})
	}
}

func TestFailureDuringMIGPrepare(t *testing.T) {
	for _, at := range migPrepareSteps {
		t.Run(string(at), func(t *testing.T) {
			env := newMIGEnv(t)
			m := env.newManager(t)
			m.afterStep = func(s step, u types.UID) error {
				if s == at && u == claimA {
					return errors.New("injected failure")
				}
				return nil
			}
			results, err := m.PrepareResourceClaims(testContext(t), []*resourceapi.ResourceClaim{
				migClaim(claimA, migDevice3g, shareA),
				migClaim(claimB, "gpu-2-mig-3g-71gb-0", shareB),
			})
			require.NoError(t, err)
			require.ErrorContains(t, results[claimA].Err, "injected failure")
			require.NoError(t, results[claimB].Err, "another claim in the same call succeeds")
			assert.Equal(t, absent, env.diskState(t, claimA))
			assert.Equal(t, prepared, env.diskState(t, claimB))
			assert.Equal(t, []string{fmt.Sprintf("%d@0/1", nvml.GPU_INSTANCE_PROFILE_3_SLICE)}, env.instances(t), "the failed claim's instance is destroyed")
		})
	}
}

func TestCrashDuringMIGUnprepare(t *testing.T) {
	for _, at := range migUnprepareSteps {
		t.Run(string(at), func(t *testing.T) {
			env := newMIGEnv(t)
			m := env.newManager(t)
			prepareOne(t, m, migClaim(claimA, migDevice3g, shareA))
			crashAfter(m, at, claimA, func() {
				_, _ = m.UnprepareResourceClaims(testContext(t), []kubeletplugin.NamespacedObject{{UID: claimA}})
			})

			restarted := env.newManager(t)
			switch at {
			case stepRemoveCDISpec, stepRegionUnmount, stepRemoveClaimDir:
				// Still in the checkpoint: recovery makes it whole again.
				assert.Equal(t, prepared, env.diskState(t, claimA))
				assert.Equal(t, []string{threeGAt4}, env.instances(t))
			default:
				assert.Equal(t, absent, env.diskState(t, claimA))
				assert.Empty(t, env.instances(t), "recovery destroys the instance no claim uses")
				assert.Nil(t, env.record(t))
			}

			for _, err := range unprepare(t, restarted, claimA) {
				require.NoError(t, err)
			}
			assert.Equal(t, absent, env.diskState(t, claimA))
			assert.Empty(t, env.instances(t))
		})
	}
}

func TestFailureDuringMIGUnprepare(t *testing.T) {
	for _, at := range migUnprepareSteps {
		t.Run(string(at), func(t *testing.T) {
			env := newMIGEnv(t)
			m := env.newManager(t)
			prepareOne(t, m, migClaim(claimA, migDevice3g, shareA))
			m.afterStep = func(s step, u types.UID) error {
				if s == at && u == claimA {
					return errors.New("injected failure")
				}
				return nil
			}
			assert.ErrorContains(t, unprepare(t, m, claimA)[claimA], "injected failure")

			m.afterStep = nil
			for _, err := range unprepare(t, m, claimA) {
				require.NoError(t, err)
			}
			assert.Equal(t, absent, env.diskState(t, claimA))
			assert.Empty(t, env.instances(t))
			assert.Nil(t, env.record(t))
		})
	}
}

func TestCheckpointWithInstances(t *testing.T) {
	env := newMIGEnv(t)
	m := env.newManager(t)
	prepareOne(t, m, migClaim(claimA, migDevice3g, shareA))
	path := m.layout.checkpointPath()
	data, err := os.ReadFile(path)
	require.NoError(t, err)

	var file struct {
		Version   int                                     `json:"version"`
		Instances map[string][]map[string]json.RawMessage `json:"instances"`
	}
	require.NoError(t, json.Unmarshal(data, &file))
	assert.Equal(t, 2, file.Version)
	require.Len(t, file.Instances[env.dev.UUID], 1)
	entry := file.Instances[env.dev.UUID][0]
	for _, k := range []string{"profileID", "placement", "gpuInstanceID", "computeInstanceID", "uuid", "claims", "state"} {
		assert.Contains(t, entry, k)
	}
	assert.JSONEq(t, `{"start":4,"size":3}`, string(entry["placement"]))
	assert.JSONEq(t, `"Ready"`, string(entry["state"]))

	for name, mutate := range map[string]func(string) string{
		"changed instance": func(s string) string { return strings.Replace(s, `"start": 4`, `"start": 0`, 1) },
		"version 1 with instances": func(s string) string {
			return strings.Replace(s, `"version": 2`, `"version": 1`, 1)
		},
	} {
		t.Run(name, func(t *testing.T) {
			corrupt := mutate(string(data))
			require.NotEqual(t, string(data), corrupt)
			_, err := decodeCheckpoint([]byte(corrupt))
			assert.Error(t, err)
		})
	}

	// An instance naming a claim the checkpoint lacks is refused.
	cp, err := decodeCheckpoint(data)
	require.NoError(t, err)
	cp.Instances[env.dev.UUID][0].Claims = append(cp.Instances[env.dev.UUID][0].Claims, claimB)
	enc, err := cp.encode()
	require.NoError(t, err)
	_, err = decodeCheckpoint(enc)
	assert.ErrorContains(t, err, claimB)
}

func TestVersion1CheckpointStillDecodes(t *testing.T) {
	env := newTestEnv(t)
	m := env.newManager(t)
	prepareOne(t, m, twoGPUClaim(claimA))
	// A checkpoint as the previous plugin wrote it (version 1, no
	// instances, checksum over the claims alone) is read as is.
	data, err := os.ReadFile(m.layout.checkpointPath())
	require.NoError(t, err)
	require.Contains(t, string(data), `"version": 1`)
	require.NotContains(t, string(data), `"instances"`)
	cp, err := decodeCheckpoint(data)
	require.NoError(t, err)
	assert.Empty(t, cp.Instances)
	assert.Contains(t, cp.Claims, types.UID(claimA))
	env.newManager(t)
	assert.Equal(t, prepared, env.diskState(t, claimA))
}

func TestCrashWhileRecreatingVanishedInstance(t *testing.T) {
	for _, tc := range []struct {
		name   string
		gi, ci bool
	}{{"gpu-instance", true, false}, {"compute-instance", false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			env := newMIGEnv(t)
			m := env.newManager(t)
			prepareOne(t, m, migClaim(claimA, migDevice3g, shareA))
			env.fake.Reset()

			// The restarted plugin dies while recreating the instance.
			real := env.lifecycle
			env.lifecycle = &crashInNVML{MIGLifecycle: real, gi: tc.gi, ci: tc.ci}
			done := make(chan struct{})
			go func() {
				defer close(done)
				_, _ = NewManager(testContext(t), env.options())
			}()
			<-done
			require.Len(t, env.instances(t), 1)

			env.lifecycle = real
			env.newManager(t)
			assert.Equal(t, []string{threeGAt4}, env.instances(t), "the half-made instance is replaced by one whole one")
			rec := env.record(t)
			require.NotNil(t, rec)
			assert.Equal(t, instanceReady, rec.State)
			assert.Equal(t, []types.UID{claimA}, rec.Claims)
			assert.Equal(t, prepared, env.diskState(t, claimA))
			assert.Contains(t, configOf(t, env.testEnv, claimA), "device.0.uuid="+rec.UUID+"\n")
		})
	}
}

func TestMIGOptions(t *testing.T) {
	env := newMIGEnv(t)
	opts := env.options()
	opts.MIG = nil
	opts.MIGGPUs["gpu-9"] = env.mig
	_, err := NewManager(testContext(t), opts)
	require.Error(t, err)
	assert.ErrorContains(t, err, "need a MIG lifecycle")
	assert.ErrorContains(t, err, "gpu-9")
}

func TestMIGDeviceNamesWithoutMIGMode(t *testing.T) {
	// A GPU not in MIG mode has no MIG devices: the name is unknown.
	env := newTestEnv(t)
	m := env.newManager(t)
	results, err := m.PrepareResourceClaims(testContext(t), []*resourceapi.ResourceClaim{migClaim(claimA, "gpu-0-mig-3g-71gb-4", shareA)})
	require.NoError(t, err)
	assert.ErrorContains(t, results[claimA].Err, "gpu-0-mig-3g-71gb-4")
	assert.Equal(t, absent, env.diskState(t, claimA))
}

// An instance NVML will not destroy (in use) is reported to the publisher,
// which must not offer its placement, and is destroyed in the background
// even if the kubelet never retries the unprepare; the publisher hears
// of that too.
func TestInstanceInUseBlocksUntilBackgroundRetryDestroysIt(t *testing.T) {
	saved := restoreRetryInterval
	restoreRetryInterval = 10 * time.Millisecond
	t.Cleanup(func() { restoreRetryInterval = saved })
	env := newMIGEnv(t)
	busy := &inUse{MIGLifecycle: env.lifecycle}
	env.lifecycle = busy
	ctx, cancel := context.WithCancel(testContext(t))
	defer cancel()
	m, err := NewManager(ctx, env.options())
	require.NoError(t, err)
	prepareOne(t, m, migClaim(claimA, migDevice3g, shareA))
	assert.Empty(t, m.BlockedMIGInstances(), "a Ready instance blocks nothing")
	drain := func() {
		for {
			select {
			case <-m.MIGChanges():
			default:
				return
			}
		}
	}
	drain()

	busy.set(true)
	require.ErrorIs(t, unprepare(t, m, claimA)[claimA], discovery.ErrMIGInUse)
	select {
	case <-m.MIGChanges():
	default:
		t.Fatal("the publisher is not told of the instance left in use")
	}
	blocked := m.BlockedMIGInstances()[env.dev.UUID]
	require.Len(t, blocked, 1)
	assert.Equal(t, discovery.MIGPlacement{Start: 4, Size: 3}, blocked[0].Placement)
	assert.Equal(t, int(nvml.GPU_INSTANCE_PROFILE_3_SLICE), blocked[0].ProfileID)
	time.Sleep(50 * time.Millisecond)
	assert.Equal(t, []string{threeGAt4}, env.instances(t), "still in use")

	busy.set(false)
	require.Eventually(t, env.noInstancesLeft(t), 5*time.Second, 10*time.Millisecond,
		"destroyed without another unprepare")
	require.Eventually(t, func() bool { return len(m.BlockedMIGInstances()) == 0 }, 5*time.Second, 10*time.Millisecond)
	select {
	case <-m.MIGChanges():
	case <-time.After(5 * time.Second):
		t.Fatal("the publisher is not told that the instance is gone")
	}

	// A second instance left in use starts a new retry.
	prepareOne(t, m, migClaim(claimB, migDevice3g, shareB))
	busy.set(true)
	require.ErrorIs(t, unprepare(t, m, claimB)[claimB], discovery.ErrMIGInUse)
	busy.set(false)
	require.Eventually(t, env.noInstancesLeft(t), 5*time.Second, 10*time.Millisecond)
}
