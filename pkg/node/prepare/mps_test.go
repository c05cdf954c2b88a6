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
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/mpsdaemon"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/mpsdaemon/mpsdaemontest"
)

// mpsEnv is testEnv with MPS on, its daemons run by the fake control
// program (mpsdaemontest).
type mpsEnv struct {
	*testEnv
	control string
	env     []string
}

func newMPSEnv(t *testing.T, extraEnv ...string) *mpsEnv {
	env := newTestEnv(t)
	// A socket's path must fit in 108 bytes, and t.TempDir holds the
	// test's name.
	short, err := os.MkdirTemp("", "mps")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(short) })
	env.stateRoot = filepath.Join(short, "state")
	sharedMount(t, env.stateRoot)
	e := &mpsEnv{testEnv: env, control: mpsdaemontest.Control(t), env: extraEnv}
	// No daemon outlives its test, whatever the test left.
	t.Cleanup(func() {
		if p, err := mpsdaemon.Adopt(testContext(t), e.daemonConfig()); err == nil {
			_ = mpsdaemon.Quit(testContext(t), e.daemonConfig(), p)
		}
	})
	return e
}

func (e *mpsEnv) options() Options {
	opts := e.testEnv.options()
	opts.MPS = &MPSOptions{Control: e.control, Env: e.env}
	return opts
}

// newManager starts a manager whose context ends with the test, as a
// plugin's ends at its shutdown: its supervisors stop then.
func (e *mpsEnv) newManager(t *testing.T) *Manager {
	return e.newManagerWith(t, e.options())
}

func (e *mpsEnv) newManagerWith(t *testing.T, opts Options) *Manager {
	ctx, cancel := context.WithCancel(testContext(t))
	t.Cleanup(cancel)
	m, err := NewManager(ctx, opts)
	require.NoError(t, err)
	return m
}

// daemonConfig is gpu-0's daemon.
func (e *mpsEnv) daemonConfig() mpsdaemon.Config {
	return mpsdaemon.Config{Control: e.control, Env: e.env, GPU: uuid0, Dir: filepath.Join(e.stateRoot, "mps", uuid0)}
}

// daemon returns gpu-0's daemon that answers, or ok false.
func (e *mpsEnv) daemon(t *testing.T) (mpsdaemon.Process, bool) {
	p, err := mpsdaemon.Adopt(testContext(t), e.daemonConfig())
	if errors.Is(err, mpsdaemon.ErrNotRunning) {
		return mpsdaemon.Process{}, false
	}
	require.NoError(t, err)
	return p, true
}

// settings are the defaults gpu-0's daemon holds.
func (e *mpsEnv) settings(t *testing.T) mpsdaemon.Settings {
	s, err := mpsdaemon.Read(testContext(t), e.daemonConfig())
	require.NoError(t, err)
	return s
}

// record is gpu-0's daemon record in the checkpoint, nil when none.
func (e *mpsEnv) record(t *testing.T) *daemonRecord {
	cp, err := loadCheckpoint(layout{stateRoot: e.stateRoot}.checkpointPath())
	require.NoError(t, err)
	return cp.Daemons[uuid0]
}

// noDaemonLeft asserts that gpu-0 has no daemon, no record and no
// directory.
func (e *mpsEnv) noDaemonLeft(t *testing.T) {
	t.Helper()
	_, running := e.daemon(t)
	assert.False(t, running, "no daemon without claims")
	assert.Nil(t, e.record(t))
	assert.NoDirExists(t, e.daemonConfig().Dir)
}

// mpsClaim asks for a share of gpu-0's MPS device.
func mpsClaim(uid, shareID, memory, cores string) *resourceapi.ResourceClaim {
	return newClaim(uid, "infer").result("gpu", "gpu-0-mps", memory, cores, shareID).obj()
}

func fileVersion(t *testing.T, e *mpsEnv) int {
	data, err := os.ReadFile(layout{stateRoot: e.stateRoot}.checkpointPath())
	require.NoError(t, err)
	var file struct {
		Version int `json:"version"`
	}
	require.NoError(t, json.Unmarshal(data, &file))
	return file.Version
}

func TestPrepareMPSSharesOneDaemonStoppedByLastUnprepare(t *testing.T) {
	env := newMPSEnv(t)
	m := env.newManager(t)

	prepareOne(t, m, mpsClaim(claimA, shareA, "8Gi", "30"))
	first, running := env.daemon(t)
	require.True(t, running, "the first claim's prepare starts the daemon")
	assert.Equal(t, mpsdaemon.Settings{ActiveThreadPercent: 30, PinnedMemoryLimitGiB: 8}, env.settings(t))
	rec := env.record(t)
	require.NotNil(t, rec)
	assert.Equal(t, daemonRunning, rec.State)
	assert.Equal(t, first, rec.process())
	assert.Equal(t, []types.UID{claimA}, rec.Claims)
	assert.Equal(t, checkpointVersion3, fileVersion(t, env), "a checkpoint holding a daemon is version 3")

	// A larger claim raises the ceiling of the same daemon.
	prepareOne(t, m, mpsClaim(claimB, shareB, "1536Mi", "50"))
	second, _ := env.daemon(t)
	assert.Equal(t, first, second, "the second claim joins the running daemon")
	assert.Equal(t, mpsdaemon.Settings{ActiveThreadPercent: 50, PinnedMemoryLimitGiB: 8}, env.settings(t))
	assert.ElementsMatch(t, []types.UID{claimA, claimB}, env.record(t).Claims)

	// Its unprepare lowers it again.
	for _, err := range unprepare(t, m, claimB) {
		require.NoError(t, err)
	}
	assert.Equal(t, mpsdaemon.Settings{ActiveThreadPercent: 30, PinnedMemoryLimitGiB: 8}, env.settings(t))

	for _, err := range unprepare(t, m, claimA) {
		require.NoError(t, err)
	}
	env.noDaemonLeft(t)
	assert.Equal(t, checkpointVersion1, fileVersion(t, env), "without daemons the checkpoint goes back to the lowest version")
}

func TestMPSClaimEditsAndConfig(t *testing.T) {
	env := newMPSEnv(t)
	m := env.newManager(t)
	prepareOne(t, m, mpsClaim(claimA, shareA, "1536Mi", "30"))

	dev := specDevice(t, env.testEnv, claimA)
	pipe := "/usr/local/vgpu/mps/" + uuid0
	assert.Contains(t, dev.ContainerEdits.Env, "CUDA_MPS_PIPE_DIRECTORY="+pipe)
	assert.Contains(t, dev.ContainerEdits.Env, "CUDA_DEVICE_SM_LIMIT_0=0", "no time share under MPS, where the variable could lower the config's")
	assert.Contains(t, dev.ContainerEdits.Mounts, &cdispec.Mount{HostPath: env.daemonConfig().PipeDir(), ContainerPath: pipe,
		Options: []string{"rw", "nosuid", "nodev", "noexec", "bind"}})
	assert.Contains(t, dev.ContainerEdits.Mounts, &cdispec.Mount{HostPath: "/dev/shm", ContainerPath: "/dev/shm",
		Options: []string{"rw", "nosuid", "nodev", "noexec", "bind"}})
	assert.Contains(t, dev.ContainerEdits.DeviceNodes, &cdispec.DeviceNode{Path: "/dev/nvidia0", Type: "c", Major: 195, Minor: 0},
		"the GPU's own edits stay")

	config := configOf(t, env.testEnv, claimA)
	assert.Contains(t, config, "device.0.uuid="+uuid0+"\n")
	assert.Contains(t, config, "mps.activeThreadPercent.0=30\n")
	assert.Contains(t, config, "device.0.sm_limit_percent=0\n", "MPS holds the SM share; the limiter does not time-slice it")
	assert.Contains(t, config, "mps.pinnedMemoryLimit.0=1610612736\n")
}

func TestMPSDaemonFailingToStartFailsPrepare(t *testing.T) {
	const reason = "Failed to start: the GPU is in exclusive-process mode"
	failFile := filepath.Join(t.TempDir(), "fail")
	require.NoError(t, os.WriteFile(failFile, []byte(reason), 0o644))
	env := newMPSEnv(t, mpsdaemontest.FailEnv+"="+failFile)
	m := env.newManager(t)

	results, err := m.PrepareResourceClaims(testContext(t), []*resourceapi.ResourceClaim{mpsClaim(claimA, shareA, "8Gi", "30")})
	require.NoError(t, err)
	require.Error(t, results[claimA].Err)
	assert.Contains(t, results[claimA].Err.Error(), uuid0, "names the GPU")
	assert.Contains(t, results[claimA].Err.Error(), reason, "quotes the daemon's last log line")
	assert.Equal(t, absent, env.diskState(t, claimA))
	env.noDaemonLeft(t)

	// Once the daemon can start, the claim prepares.
	require.NoError(t, os.Remove(failFile))
	prepareOne(t, m, mpsClaim(claimA, shareA, "8Gi", "30"))
	_, running := env.daemon(t)
	assert.True(t, running)
}

func TestMPSRequestsRefused(t *testing.T) {
	env := newMPSEnv(t)
	m := env.newManager(t)
	for name, tc := range map[string]struct {
		claim *resourceapi.ResourceClaim
		want  string
	}{
		"no share": {mpsClaim(claimA, shareA, "8Gi", "0"), `status.allocation.devices.results[0].consumedCapacity[cores]: Invalid value: 0: an MPS device's share of the SMs must be 1..100`},
		"work-conserving": {
			newClaim(claimA, "infer").result("gpu", "gpu-0-mps", "8Gi", "30", shareA).
				config(resourceapi.AllocationConfigSourceClaim, nil, `"computePolicy": "workConserving"`).obj(),
			"computePolicy workConserving does not apply to an MPS device",
		},
		"with a time-sliced share of the same GPU": {
			newClaim(claimA, "infer").result("gpu", "gpu-0-mps", "8Gi", "30", shareA).result("more", "gpu-0", "8Gi", "30", shareB).obj(),
			"a GPU serves MPS claims or others, not both",
		},
		"with an MPS share of another GPU": {
			newClaim(claimA, "infer").result("gpu", "gpu-0-mps", "8Gi", "30", shareA).result("more", "gpu-1-mps", "8Gi", "30", shareB).obj(),
			"the claim has MPS devices of two GPUs",
		},
	} {
		t.Run(name, func(t *testing.T) {
			results, err := m.PrepareResourceClaims(testContext(t), []*resourceapi.ResourceClaim{tc.claim})
			require.NoError(t, err)
			require.ErrorContains(t, results[claimA].Err, tc.want)
			env.noDaemonLeft(t)
		})
	}
}

func TestMPSDeviceUnknownWithoutMPS(t *testing.T) {
	env := newMPSEnv(t)
	m := env.testEnv.newManager(t)
	results, err := m.PrepareResourceClaims(testContext(t), []*resourceapi.ResourceClaim{mpsClaim(claimA, shareA, "8Gi", "30")})
	require.NoError(t, err)
	require.ErrorContains(t, results[claimA].Err, `status.allocation.devices.results[0].device: Not found: "gpu-0-mps"`)
}

func TestRecoveryAdoptsRunningMPSDaemon(t *testing.T) {
	env := newMPSEnv(t)
	m := env.newManager(t)
	prepareOne(t, m, mpsClaim(claimA, shareA, "8Gi", "30"))
	before, _ := env.daemon(t)

	restarted := env.newManager(t)
	after, running := env.daemon(t)
	require.True(t, running)
	assert.Equal(t, before, after, "a restarted plugin adopts the daemon, its clients keep their server")
	assert.Equal(t, prepared, env.diskState(t, claimA))
	for _, err := range unprepare(t, restarted, claimA) {
		require.NoError(t, err)
	}
	env.noDaemonLeft(t)
}

func TestRecoveryRestartsDeadMPSDaemon(t *testing.T) {
	env := newMPSEnv(t)
	m := env.newManager(t)
	prepareOne(t, m, mpsClaim(claimA, shareA, "8Gi", "30"))
	before, _ := env.daemon(t)
	// The fake daemon is no child of the test: its pidfd tells when it
	// is gone.
	fd, err := unix.PidfdOpen(before.PID, 0)
	require.NoError(t, err)
	defer func() { _ = unix.Close(fd) }()
	require.NoError(t, unix.Kill(before.PID, unix.SIGKILL))
	for {
		_, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, -1)
		if !errors.Is(err, unix.EINTR) {
			require.NoError(t, err)
			break
		}
	}

	env.newManager(t)
	after, running := env.daemon(t)
	require.True(t, running, "a daemon of prepared claims is started again")
	assert.NotEqual(t, before, after)
	assert.Equal(t, mpsdaemon.Settings{ActiveThreadPercent: 30, PinnedMemoryLimitGiB: 8}, env.settings(t))
	rec := env.record(t)
	assert.Equal(t, daemonRunning, rec.State)
	assert.Equal(t, after, rec.process())
}

// hostRunner is the mps-host server as the plugin meets it: down, it
// answers nothing (the pod not running yet, or being replaced), as
// mpshost.Runner's failed dial does; up, it runs the control program.
type hostRunner struct{ down atomic.Bool }

func (r *hostRunner) Run(ctx context.Context, inv mpsdaemon.Invocation) ([]byte, error) {
	if r.down.Load() {
		return nil, fmt.Errorf("mps-host does not answer: %w", mpsdaemon.ErrRunnerUnavailable)
	}
	return mpsdaemon.ExecRunner{}.Run(ctx, inv)
}

// A plugin whose pod was replaced can start before the node's mps-host
// pod serves: the daemon of its prepared claims runs on, a prepare on the
// GPU fails naming mps-host (the kubelet retries it) and kills nothing,
// and once mps-host answers the daemon is adopted, not started again.
func TestPluginStartingBeforeMPSHostKeepsTheDaemon(t *testing.T) {
	env := newMPSEnv(t)
	runner := &hostRunner{}
	opts := env.options()
	opts.MPS.Runner = runner
	m := env.newManagerWith(t, opts)
	prepareOne(t, m, mpsClaim(claimA, shareA, "8Gi", "30"))
	before, _ := env.daemon(t)

	runner.down.Store(true)
	restarted := env.newManagerWith(t, opts)
	after, running := env.daemon(t)
	require.True(t, running, "the daemon runs on")
	assert.Equal(t, before, after)
	assert.Equal(t, daemonRunning, env.record(t).State)
	assert.Equal(t, before, env.record(t).process())

	results, err := restarted.PrepareResourceClaims(testContext(t), []*resourceapi.ResourceClaim{mpsClaim(claimB, shareB, "4Gi", "50")})
	require.NoError(t, err)
	require.ErrorIs(t, results[claimB].Err, mpsdaemon.ErrRunnerUnavailable)
	assert.ErrorContains(t, results[claimB].Err, uuid0, "the error names the GPU")
	after, running = env.daemon(t)
	require.True(t, running, "a failed prepare leaves the daemon of the prepared claim")
	assert.Equal(t, before, after)
	assert.Equal(t, mpsdaemon.Settings{ActiveThreadPercent: 30, PinnedMemoryLimitGiB: 8}, env.settings(t), "the ceiling of the prepared claim")

	runner.down.Store(false)
	prepareOne(t, restarted, mpsClaim(claimB, shareB, "4Gi", "50"))
	after, running = env.daemon(t)
	require.True(t, running)
	assert.Equal(t, before, after, "adopted once mps-host answers")
	assert.Equal(t, mpsdaemon.Settings{ActiveThreadPercent: 50, PinnedMemoryLimitGiB: 8}, env.settings(t))
	for _, err := range unprepare(t, restarted, claimA, claimB) {
		require.NoError(t, err)
	}
	env.noDaemonLeft(t)
}

var (
	mpsPrepareSteps = []step{stepCheckpointStarted, stepMPSDaemonStart, stepMPSDaemonSettings,
		stepConfig, stepRegionMount, stepRegion, stepCDISpec, stepCheckpointCompleted}
	mpsUnprepareSteps = []step{stepRemoveCDISpec, stepRegionUnmount, stepRemoveClaimDir, stepCheckpointRemoved, stepMPSDaemonQuit}
)

func TestMPSStepTablesCoverPlainSteps(t *testing.T) {
	for _, s := range prepareSteps {
		assert.Contains(t, mpsPrepareSteps, s)
	}
	for _, s := range unprepareSteps {
		assert.Contains(t, mpsUnprepareSteps, s)
	}
}

func TestCrashDuringMPSPrepare(t *testing.T) {
	for _, at := range mpsPrepareSteps {
		t.Run(string(at), func(t *testing.T) {
			env := newMPSEnv(t)
			m := env.newManager(t)
			crashAfter(m, at, claimA, func() {
				_, _ = m.PrepareResourceClaims(testContext(t), []*resourceapi.ResourceClaim{mpsClaim(claimA, shareA, "8Gi", "30")})
			})

			env.newManager(t)
			if at == stepCheckpointCompleted {
				assert.Equal(t, prepared, env.diskState(t, claimA))
				_, running := env.daemon(t)
				assert.True(t, running, "no claim without its daemon")
			} else {
				assert.Equal(t, absent, env.diskState(t, claimA), "after recovery the claim is either fully prepared or gone")
				env.noDaemonLeft(t)
			}

			restarted := env.newManager(t)
			prepareOne(t, restarted, mpsClaim(claimA, shareA, "8Gi", "30"))
			assert.Equal(t, prepared, env.diskState(t, claimA))
			assert.Equal(t, mpsdaemon.Settings{ActiveThreadPercent: 30, PinnedMemoryLimitGiB: 8}, env.settings(t))
			for _, err := range unprepare(t, restarted, claimA) {
				require.NoError(t, err)
			}
			env.noDaemonLeft(t)
		})
	}
}

func TestFailureDuringMPSPrepare(t *testing.T) {
	for _, at := range mpsPrepareSteps {
		t.Run(string(at), func(t *testing.T) {
			env := newMPSEnv(t)
			m := env.newManager(t)
			m.afterStep = func(s step, u types.UID) error {
				if s == at && u == claimA {
					return errors.New("injected failure")
				}
				return nil
			}
			results, err := m.PrepareResourceClaims(testContext(t), []*resourceapi.ResourceClaim{mpsClaim(claimA, shareA, "8Gi", "30")})
			require.NoError(t, err)
			require.ErrorContains(t, results[claimA].Err, "injected failure")
			assert.Equal(t, absent, env.diskState(t, claimA))
			env.noDaemonLeft(t)
		})
	}
}

func TestCrashDuringMPSUnprepare(t *testing.T) {
	for _, at := range mpsUnprepareSteps {
		t.Run(string(at), func(t *testing.T) {
			env := newMPSEnv(t)
			m := env.newManager(t)
			prepareOne(t, m, mpsClaim(claimA, shareA, "8Gi", "30"))
			crashAfter(m, at, claimA, func() {
				_, _ = m.UnprepareResourceClaims(testContext(t), []kubeletplugin.NamespacedObject{{UID: claimA}})
			})

			restarted := env.newManager(t)
			switch at {
			case stepRemoveCDISpec, stepRegionUnmount, stepRemoveClaimDir:
				// Still in the checkpoint: recovery makes it whole again.
				assert.Equal(t, prepared, env.diskState(t, claimA))
				_, running := env.daemon(t)
				assert.True(t, running, "no claim without its daemon")
			default:
				assert.Equal(t, absent, env.diskState(t, claimA))
				env.noDaemonLeft(t)
			}

			for _, err := range unprepare(t, restarted, claimA) {
				require.NoError(t, err)
			}
			assert.Equal(t, absent, env.diskState(t, claimA))
			env.noDaemonLeft(t)
		})
	}
}

func TestFailureDuringMPSUnprepare(t *testing.T) {
	for _, at := range mpsUnprepareSteps {
		t.Run(string(at), func(t *testing.T) {
			env := newMPSEnv(t)
			m := env.newManager(t)
			prepareOne(t, m, mpsClaim(claimA, shareA, "8Gi", "30"))
			m.afterStep = func(s step, u types.UID) error {
				if s == at && u == claimA {
					return errors.New("injected failure")
				}
				return nil
			}
			results := unprepare(t, m, claimA)
			require.ErrorContains(t, results[claimA], "injected failure")

			// The kubelet retries.
			m.afterStep = nil
			for _, err := range unprepare(t, m, claimA) {
				require.NoError(t, err)
			}
			assert.Equal(t, absent, env.diskState(t, claimA))
			env.noDaemonLeft(t)
		})
	}
}

func TestCheckpointVersion2StillLoadsWithMPS(t *testing.T) {
	env := newMPSEnv(t)
	m := env.newManager(t)
	prepareOne(t, m, shareClaim(claimA, shareA, "8Gi", "30"))
	assert.Equal(t, checkpointVersion1, fileVersion(t, env), "a node without MPS writes no daemon section")
	// What a plugin of version 2 wrote loads.
	path := layout{stateRoot: env.stateRoot}.checkpointPath()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var file map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(data, &file))
	file["version"] = json.RawMessage("2")
	data, err = json.Marshal(file)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, data, 0o600))
	env.newManager(t)
	assert.Equal(t, prepared, env.diskState(t, claimA))
}

func TestCheckpointWithDaemons(t *testing.T) {
	cp := newCheckpoint("boot-1")
	cp.Daemons = map[string]*daemonRecord{uuid0: {State: daemonRunning, PID: 42, StartTime: 7}}
	data, err := cp.encode()
	require.NoError(t, err)
	back, err := decodeCheckpoint(data)
	require.NoError(t, err)
	assert.Equal(t, cp.Daemons, back.Daemons)
	var file struct {
		Version int `json:"version"`
	}
	require.NoError(t, json.Unmarshal(data, &file))
	assert.Equal(t, checkpointVersion3, file.Version)

	// A hand-edited section is refused, naming the entry.
	cp.Daemons = map[string]*daemonRecord{uuid0: {State: daemonRunning, Claims: []types.UID{claimA}}, "gpu-0": {State: "Gone"}}
	data, err = cp.encode()
	require.NoError(t, err)
	_, err = decodeCheckpoint(data)
	require.Error(t, err)
	for _, want := range []string{
		"mpsDaemons[" + uuid0 + "]: a Running daemon has a pid",
		"mpsDaemons[" + uuid0 + "].claims: " + claimA + " is not a claim of the checkpoint",
		"mpsDaemons[gpu-0]: must be a GPU UUID",
		`mpsDaemons[gpu-0].state: unsupported value "Gone"`,
	} {
		assert.Contains(t, err.Error(), want)
	}
}
