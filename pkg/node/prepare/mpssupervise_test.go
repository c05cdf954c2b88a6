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
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/mpsdaemon"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/mpsdaemon/mpsdaemontest"
)

// quickRestart restarts a dead daemon at once: the tests wait for the
// restart, not for a time.
var quickRestart = wait.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 1}

func (e *mpsEnv) supervisedManager(t *testing.T) *Manager {
	opts := e.options()
	opts.MPS.RestartBackoff = quickRestart
	return e.newManagerWith(t, opts)
}

// killDaemon SIGKILLs p and waits until it is gone.
func killDaemon(t *testing.T, p mpsdaemon.Process) {
	t.Helper()
	fd, err := unix.PidfdOpen(p.PID, 0)
	require.NoError(t, err)
	defer func() { _ = unix.Close(fd) }()
	require.NoError(t, unix.Kill(p.PID, unix.SIGKILL))
	for {
		_, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, -1)
		if !errors.Is(err, unix.EINTR) {
			require.NoError(t, err)
			return
		}
	}
}

// restartedDaemon waits until the checkpoint records a Running daemon of
// gpu-0 other than dead that answers, and returns it.
func (e *mpsEnv) restartedDaemon(t *testing.T, dead mpsdaemon.Process) mpsdaemon.Process {
	t.Helper()
	var got mpsdaemon.Process
	err := wait.PollUntilContextTimeout(testContext(t), 10*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		rec := e.record(t)
		if rec == nil || rec.State != daemonRunning || rec.process() == dead {
			return false, nil
		}
		p, running := e.daemon(t)
		got = p
		return running && p == rec.process(), nil
	})
	require.NoError(t, err, "the dead daemon is started again and recorded")
	return got
}

func restartsOf(m *Manager, gpu string) int {
	for _, st := range m.MPSDaemons(context.Background()) {
		if st.GPU == gpu {
			return st.Restarts
		}
	}
	return -1
}

func TestMPSDaemonRestartedWhileClaimsUseIt(t *testing.T) {
	env := newMPSEnv(t)
	m := env.supervisedManager(t)
	prepareOne(t, m, mpsClaim(claimA, shareA, "8Gi", "30"))
	prepareOne(t, m, mpsClaim(claimB, shareB, "4Gi", "50"))
	first, _ := env.daemon(t)
	assert.Equal(t, []MPSDaemonStatus{{GPU: uuid0, Up: true}}, m.MPSDaemons(testContext(t)))

	killDaemon(t, first)
	second := env.restartedDaemon(t, first)
	assert.Equal(t, mpsdaemon.Settings{ActiveThreadPercent: 50, PinnedMemoryLimitGiB: 8}, env.settings(t),
		"the restarted daemon holds its claims' ceiling")
	assert.Equal(t, []MPSDaemonStatus{{GPU: uuid0, Up: true, Restarts: 1}}, m.MPSDaemons(testContext(t)))

	// A ceiling set after the restart holds for the next one.
	for _, err := range unprepare(t, m, claimB) {
		require.NoError(t, err)
	}
	killDaemon(t, second)
	env.restartedDaemon(t, second)
	assert.Equal(t, mpsdaemon.Settings{ActiveThreadPercent: 30, PinnedMemoryLimitGiB: 8}, env.settings(t))
	assert.Equal(t, 2, restartsOf(m, uuid0))

	// The last unprepare ends the supervision with the daemon.
	sv := m.mps.supervisors[uuid0]
	require.NotNil(t, sv)
	for _, err := range unprepare(t, m, claimA) {
		require.NoError(t, err)
	}
	<-sv.Done()
	env.noDaemonLeft(t)
	assert.Empty(t, m.mps.supervisors)
}

func TestMPSSupervisionEndsWithThePluginAndTheDaemonIsAdopted(t *testing.T) {
	env := newMPSEnv(t)
	opts := env.options()
	opts.MPS.RestartBackoff = quickRestart
	ctx, cancel := context.WithCancel(testContext(t))
	defer cancel()
	m, err := NewManager(ctx, opts)
	require.NoError(t, err)
	prepareOne(t, m, mpsClaim(claimA, shareA, "8Gi", "30"))
	p, _ := env.daemon(t)
	sv := m.mps.supervisors[uuid0]
	require.NotNil(t, sv)

	// The plugin shuts down: its supervisors end, the daemon stays for
	// the next plugin instance to adopt.
	cancel()
	<-sv.Done()
	still, running := env.daemon(t)
	require.True(t, running)
	assert.Equal(t, p, still)

	next := env.supervisedManager(t)
	assert.Equal(t, p, env.record(t).process(), "adopted, not restarted")
	require.NotNil(t, next.mps.supervisors[uuid0], "the adopted daemon is supervised")
	killDaemon(t, p)
	env.restartedDaemon(t, p)
	assert.Equal(t, 1, restartsOf(next, uuid0))
}

// Prepares and unprepares of another claim on the GPU while its daemon is
// killed again and again: every restart goes through the manager's lock,
// so in the end the checkpoint names the one daemon that runs, set to the
// ceiling (run with -race).
func TestMPSRestartsDoNotRaceWithPrepare(t *testing.T) {
	env := newMPSEnv(t)
	m := env.supervisedManager(t)
	prepareOne(t, m, mpsClaim(claimA, shareA, "8Gi", "30"))

	for range 2 {
		// Killed while no call runs: its supervisor restarts it, maybe
		// while the prepare below runs.
		if p, running := env.daemon(t); running {
			require.NoError(t, unix.Kill(p.PID, unix.SIGKILL))
		}
		results, err := m.PrepareResourceClaims(testContext(t), []*resourceapi.ResourceClaim{mpsClaim(claimB, shareB, "4Gi", "60")})
		require.NoError(t, err)
		// A prepare may meet a daemon killed a moment ago and fail; the
		// kubelet retries it.
		_ = results[claimB].Err
		// Killed between the calls, again.
		if p, running := env.daemon(t); running {
			require.NoError(t, unix.Kill(p.PID, unix.SIGKILL))
		}
		for range unprepare(t, m, claimB) {
		}
	}

	// Whatever the last kill left, the GPU's daemon runs again, recorded.
	env.restartedDaemon(t, mpsdaemon.Process{})
	for _, err := range unprepare(t, m, claimB) {
		require.NoError(t, err)
	}
	p := env.restartedDaemon(t, mpsdaemon.Process{})
	assert.Equal(t, p, env.record(t).process())
	assert.Equal(t, mpsdaemon.Settings{ActiveThreadPercent: 30, PinnedMemoryLimitGiB: 8}, env.settings(t))
	for _, err := range unprepare(t, m, claimA) {
		require.NoError(t, err)
	}
	env.noDaemonLeft(t)
}

func TestMPSDaemonStartsWithMemAcctFromDriver615(t *testing.T) {
	for _, tc := range []struct {
		driver  string
		memAcct bool
	}{
		{"615.20.01", true},
		{"580.95.05", false},
	} {
		t.Run(tc.driver, func(t *testing.T) {
			env := newMPSEnv(t)
			opts := env.options()
			devs := testDevices()
			for name, info := range devs {
				info.DriverVersion = tc.driver
				devs[name] = info
			}
			opts.Devices = devs
			m := env.newManagerWith(t, opts)
			prepareOne(t, m, mpsClaim(claimA, shareA, "8Gi", "30"))
			config := filepath.Join(env.daemonConfig().Dir, "config.toml")
			controlLog, err := os.ReadFile(filepath.Join(env.daemonConfig().LogDir(), "control.log"))
			require.NoError(t, err)
			claimConfig := configOf(t, env.testEnv, claimA)
			if tc.memAcct {
				data, err := os.ReadFile(config)
				require.NoError(t, err)
				assert.Contains(t, string(data), "[features.memacct]\nenabled = true\n")
				assert.Contains(t, string(controlLog), mpsdaemontest.MemAcctLogLine)
				assert.Contains(t, claimConfig, "mps.driverMemoryLimit.0=8589934592\n",
					"the claim's limit for the driver that reads NVIDIA_GPU_MEMORY_LIMITS")
			} else {
				assert.NoFileExists(t, config)
				assert.NotContains(t, string(controlLog), mpsdaemontest.MemAcctLogLine)
				assert.NotContains(t, claimConfig, "mps.driverMemoryLimit", "a driver before r615 reads no NVIDIA_GPU_MEMORY_LIMITS")
			}
			assert.NoError(t, checkBytes(t, []byte(claimConfig)), "the library applies the config")
		})
	}
}

func TestMPSDaemonsReportsADeadDaemonDown(t *testing.T) {
	env := newMPSEnv(t)
	opts := env.options()
	// Its restart waits: the dead daemon stays down while the test looks.
	opts.MPS.RestartBackoff = wait.Backoff{Duration: time.Hour, Steps: 1}
	m := env.newManagerWith(t, opts)
	assert.Empty(t, m.MPSDaemons(testContext(t)), "no daemon, no series")
	prepareOne(t, m, mpsClaim(claimA, shareA, "8Gi", "30"))
	p, _ := env.daemon(t)
	killDaemon(t, p)
	assert.Equal(t, []MPSDaemonStatus{{GPU: uuid0, Up: false}}, m.MPSDaemons(testContext(t)))

	// A prepare that finds it dead starts it again, and counts it.
	prepareOne(t, m, mpsClaim(claimB, shareB, "4Gi", "30"))
	assert.Equal(t, []MPSDaemonStatus{{GPU: uuid0, Up: true, Restarts: 1}}, m.MPSDaemons(testContext(t)))
}

func TestMemAcctDriver(t *testing.T) {
	for v, want := range map[string]bool{
		"615.20.01": true, "620.10": true, "1000.1": true,
		"614.99.99": false, "580.95.05": false, "": false, "r615": false,
	} {
		assert.Equal(t, want, memAcctDriver(v), v)
	}
}
