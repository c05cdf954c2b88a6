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

package mpsdaemon

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2/ktesting"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/mpsdaemon/mpsdaemontest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	mpsdaemontest.RemoveBuilt()
	os.Exit(code)
}

const testGPU = "GPU-00000000-1111-2222-3333-444444444444"

// quickBackoff restarts at once: the tests wait for events, not time.
var quickBackoff = wait.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 1, Cap: time.Hour}

func testContext(t *testing.T) context.Context {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	return ctx
}

// fakeConfig is a GPU's daemon run by the fake control program.
func fakeConfig(t *testing.T, extraEnv ...string) Config {
	return Config{
		Control: mpsdaemontest.Control(t),
		Dir:     filepath.Join(shortTempDir(t), testGPU),
		GPU:     testGPU,
		Env:     extraEnv,
	}
}

// shortTempDir is a temporary directory with a short path: a socket's
// path must fit in 108 bytes, and t.TempDir holds the test's name.
func shortTempDir(t *testing.T) string {
	dir, err := os.MkdirTemp("", "mps")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// controlLog is the daemon's control.log.
func controlLog(t *testing.T, cfg Config) string {
	data, err := os.ReadFile(filepath.Join(cfg.LogDir(), controlLogName))
	require.NoError(t, err)
	return string(data)
}

// exited waits until p is gone (the daemon is not the test's child).
func exited(t *testing.T, p Process) {
	gone, err := waitExit(testContext(t), p)
	require.NoError(t, err)
	require.True(t, gone)
}

// lifecycle runs what the plugin does with one GPU's daemon against cfg's
// control program: start, settings, queries, adoption, a crash and its
// restart, quit.
func lifecycle(t *testing.T, cfg Config) {
	ctx := testContext(t)
	s := Settings{ActiveThreadPercent: 30, PinnedMemoryLimitGiB: 2}
	p, err := Start(ctx, cfg, s)
	require.NoError(t, err)
	t.Cleanup(func() { _ = kill(p, cfg) })
	assert.True(t, alive(p))

	for _, name := range []string{"control", pidFileName} {
		assert.FileExists(t, filepath.Join(cfg.PipeDir(), name))
	}
	st, err := os.Stat(cfg.PipeDir())
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(pipeDirMode), st.Mode().Perm())

	// NVIDIA's control socket is a SOCK_SEQPACKET one: what the fake
	// driver's CUDA clients connect to.
	client, err := net.Dial("unixpacket", filepath.Join(cfg.PipeDir(), "control"))
	require.NoError(t, err)
	_ = client.Close()
	have, err := Read(ctx, cfg)
	require.NoError(t, err)
	assert.Equal(t, s, have)
	servers, err := Command(ctx, cfg, "get_server_list")
	require.NoError(t, err)
	assert.Empty(t, servers)
	assert.Contains(t, controlLog(t, cfg), "set_default_active_thread_percentage 30")

	// The daemon ignores a value it does not take; Apply says so.
	err = Apply(ctx, cfg, Settings{ActiveThreadPercent: 101})
	assert.ErrorContains(t, err, "activeThreadPercent")

	// A restarted plugin adopts the daemon instead of starting another.
	adopted, err := Adopt(ctx, cfg)
	require.NoError(t, err)
	assert.Equal(t, p, adopted)

	// Supervised: killed, it is started again with its settings.
	restarted := make(chan Process, 1)
	sv := Supervise(ctx, cfg, s, p, SupervisorOptions{Backoff: quickBackoff, OnRestart: func(np Process) { restarted <- np }})
	require.NoError(t, unix.Kill(p.PID, unix.SIGKILL))
	var np Process
	select {
	case np = <-restarted:
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	t.Cleanup(func() { _ = kill(np, cfg) })
	assert.NotEqual(t, p, np)
	assert.Equal(t, 1, sv.Restarts())
	have, err = Read(ctx, cfg)
	require.NoError(t, err)
	assert.Equal(t, s, have)

	// Settings changed under supervision hold for the daemon.
	s2 := Settings{ActiveThreadPercent: 60, PinnedMemoryLimitGiB: 4}
	require.NoError(t, sv.SetSettings(ctx, s2))
	have, err = Read(ctx, cfg)
	require.NoError(t, err)
	assert.Equal(t, s2, have)

	// Quit: the daemon exits, is not restarted, and its directory goes.
	require.NoError(t, sv.Quit(ctx))
	exited(t, np)
	assert.NoDirExists(t, cfg.Dir)
	assert.Equal(t, 1, sv.Restarts())
	_, err = Adopt(ctx, cfg)
	assert.ErrorIs(t, err, ErrNotRunning)
}

func TestLifecycleOnFakeControl(t *testing.T) {
	lifecycle(t, fakeConfig(t))
}

// A CUDA client holds its connection for as long as it runs: the fake
// answers commands beside it, as NVIDIA's daemon serves its clients and
// tools at once.
func TestFakeAnswersBesideAConnectedClient(t *testing.T) {
	cfg := fakeConfig(t)
	ctx := testContext(t)
	p, err := Start(ctx, cfg, Settings{ActiveThreadPercent: 30})
	require.NoError(t, err)
	t.Cleanup(func() { _ = kill(p, cfg) })
	client, err := net.Dial("unixpacket", filepath.Join(cfg.PipeDir(), "control"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })
	have, err := Read(ctx, cfg)
	require.NoError(t, err)
	assert.Equal(t, 30, have.ActiveThreadPercent)
}

// The plugin's container has a read-only root file system: running the
// control program must not need a writable temporary directory.
func TestRunNeedsNoTemporaryDirectory(t *testing.T) {
	cfg := fakeConfig(t)
	t.Setenv("TMPDIR", filepath.Join(t.TempDir(), "missing"))
	p, err := Start(testContext(t), cfg, Settings{ActiveThreadPercent: 40})
	require.NoError(t, err)
	t.Cleanup(func() { _ = kill(p, cfg) })
	have, err := Read(testContext(t), cfg)
	require.NoError(t, err)
	assert.Equal(t, 40, have.ActiveThreadPercent)
}

func TestStartFailureNamesGPUAndQuotesLog(t *testing.T) {
	const reason = "Failed to start: the GPU is in exclusive-process mode for another user"
	failFile := filepath.Join(t.TempDir(), "fail")
	require.NoError(t, os.WriteFile(failFile, []byte(reason), 0o644))
	cfg := fakeConfig(t, mpsdaemontest.FailEnv+"="+failFile)
	_, err := Start(testContext(t), cfg, Settings{ActiveThreadPercent: 50})
	require.Error(t, err)
	assert.Contains(t, err.Error(), testGPU)
	assert.Contains(t, err.Error(), "its last log line")
	assert.Contains(t, err.Error(), reason)
	// Nothing is left behind.
	assert.NoDirExists(t, cfg.Dir)
}

func TestStartReplacesStaleDaemonOfTheDirectory(t *testing.T) {
	// A daemon started by a plugin that crashed before recording it.
	cfg := fakeConfig(t)
	ctx := testContext(t)
	stale, err := Start(ctx, cfg, Settings{ActiveThreadPercent: 10})
	require.NoError(t, err)
	p, err := Start(ctx, cfg, Settings{ActiveThreadPercent: 20})
	require.NoError(t, err)
	t.Cleanup(func() { _ = kill(p, cfg) })
	exited(t, stale)
	have, err := Read(ctx, cfg)
	require.NoError(t, err)
	assert.Equal(t, 20, have.ActiveThreadPercent)
}

func TestCommandWithoutDaemon(t *testing.T) {
	cfg := fakeConfig(t)
	require.NoError(t, makeDir(cfg.PipeDir(), pipeDirMode))
	_, err := Command(testContext(t), cfg, "get_server_list")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Cannot find MPS control daemon process")
	_, err = Adopt(testContext(t), cfg)
	assert.ErrorIs(t, err, ErrNotRunning)
}

func TestAdoptRefusesAReusedPid(t *testing.T) {
	cfg := fakeConfig(t)
	require.NoError(t, makeDir(cfg.PipeDir(), pipeDirMode))
	// The pid file names a live process that is not a control daemon.
	require.NoError(t, os.WriteFile(filepath.Join(cfg.PipeDir(), pidFileName), []byte(strconv.Itoa(os.Getpid())), 0o644))
	_, err := Adopt(testContext(t), cfg)
	assert.ErrorIs(t, err, ErrNotRunning)
	assert.ErrorContains(t, err, "not the control daemon")
}

func TestParseGiB(t *testing.T) {
	for in, want := range map[string]uint64{"2G": 2, "1T": 1024} {
		got, err := parseGiB(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, bad := range []string{"", "G", "12", "5M", "xG"} {
		_, err := parseGiB(bad)
		assert.Error(t, err, bad)
	}
}

func TestProcStatOfSelf(t *testing.T) {
	comm, start, err := procStat(os.Getpid())
	require.NoError(t, err)
	assert.NotZero(t, start)
	assert.True(t, strings.HasPrefix(filepath.Base(os.Args[0]), comm), comm)
}

// startWatcher passes every run to the exec runner and sends the result
// of each start (-d, then the pid file) on starts while it has room.
type startWatcher struct {
	cfg    *Config
	starts chan error
}

func (w startWatcher) Run(ctx context.Context, inv Invocation) ([]byte, error) {
	out, err := ExecRunner{}.Run(ctx, inv)
	if len(inv.Args) == 1 && inv.Args[0] == "-d" {
		if err == nil {
			_, err = running(*w.cfg)
		}
		select {
		case w.starts <- err:
		default: // the test reads the first few only
		}
	}
	return out, err
}

func TestSupervisorRetriesFailedRestarts(t *testing.T) {
	ctx := testContext(t)
	failFile := filepath.Join(t.TempDir(), "fail")
	cfg := fakeConfig(t, mpsdaemontest.FailEnv+"="+failFile)
	starts := make(chan error, 16)
	cfg.Runner = startWatcher{cfg: &cfg, starts: starts}
	s := Settings{ActiveThreadPercent: 40}
	p, err := Start(ctx, cfg, s)
	require.NoError(t, err)
	require.NoError(t, <-starts)

	restarted := make(chan Process, 1)
	sv := Supervise(ctx, cfg, s, p, SupervisorOptions{Backoff: quickBackoff, OnRestart: func(np Process) { restarted <- np }})
	// The daemon dies and cannot start for a while (e.g. the driver being
	// upgraded): the supervisor keeps trying.
	require.NoError(t, os.WriteFile(failFile, []byte("Failed to start: driver/library version mismatch"), 0o644))
	require.NoError(t, unix.Kill(p.PID, unix.SIGKILL))
	for range 2 {
		assert.Error(t, <-starts)
	}
	assert.Equal(t, 0, sv.Restarts())
	require.NoError(t, os.Remove(failFile))
	np := <-restarted
	t.Cleanup(func() { _ = kill(np, cfg) })
	assert.Equal(t, 1, sv.Restarts())
	have, err := Read(ctx, cfg)
	require.NoError(t, err)
	assert.Equal(t, s, have)
	require.NoError(t, sv.Quit(ctx))
	exited(t, np)
}

func TestStartWithMemAcctAppliesConfigFile(t *testing.T) {
	ctx := testContext(t)
	cfg := fakeConfig(t)
	cfg.MemAcct = true
	p, err := Start(ctx, cfg, Settings{ActiveThreadPercent: 50})
	require.NoError(t, err)
	t.Cleanup(func() { _ = kill(p, cfg) })
	data, err := os.ReadFile(cfg.ConfigFile())
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(cfg.Dir, "config.toml"), cfg.ConfigFile())
	assert.Contains(t, string(data), "[features.memacct]\nenabled = true\n")
	assert.Contains(t, controlLog(t, cfg), mpsdaemontest.MemAcctLogLine, "the daemon took the file")

	// Without MemAcct (a driver before r615) no file and no -a.
	require.NoError(t, Quit(ctx, cfg, p))
	cfg.MemAcct = false
	p, err = Start(ctx, cfg, Settings{ActiveThreadPercent: 50})
	require.NoError(t, err)
	t.Cleanup(func() { _ = kill(p, cfg) })
	assert.NoFileExists(t, cfg.ConfigFile())
	assert.NotContains(t, controlLog(t, cfg), mpsdaemontest.MemAcctLogLine)
}

func TestSupervisorGuard(t *testing.T) {
	ctx := testContext(t)
	cfg := fakeConfig(t)
	s := Settings{ActiveThreadPercent: 40}
	p, err := Start(ctx, cfg, s)
	require.NoError(t, err)

	// The caller took the daemon over (stopped or replaced it): the
	// supervisor starts nothing and ends.
	guarded := make(chan Process, 1)
	sv := Supervise(ctx, cfg, s, p, SupervisorOptions{Backoff: quickBackoff,
		Guard: func(dead Process) (func(), bool, error) {
			guarded <- dead
			return func() {}, false, nil
		},
		OnRestart: func(Process) { t.Error("restarted against the guard") }})
	require.NoError(t, unix.Kill(p.PID, unix.SIGKILL))
	assert.Equal(t, p, <-guarded, "the guard is asked about the dead daemon")
	<-sv.Done()
	assert.Equal(t, 0, sv.Restarts())
	_, err = Adopt(ctx, cfg)
	assert.ErrorIs(t, err, ErrNotRunning)

	// The guard lets it restart: OnRestart runs inside it.
	p, err = Start(ctx, cfg, s)
	require.NoError(t, err)
	var inside bool
	held := false
	restarted := make(chan Process, 1)
	sv = Supervise(ctx, cfg, s, p, SupervisorOptions{Backoff: quickBackoff,
		Guard: func(Process) (func(), bool, error) {
			held = true
			return func() { held = false }, true, nil
		},
		// The caller's settings now, not the last ones given.
		Settings:  func() Settings { return Settings{ActiveThreadPercent: 70} },
		OnRestart: func(np Process) { inside = held; restarted <- np }})
	require.NoError(t, unix.Kill(p.PID, unix.SIGKILL))
	np := <-restarted
	t.Cleanup(func() { _ = kill(np, cfg) })
	sv.Stop()
	<-sv.Done()
	assert.True(t, inside, "OnRestart runs with the guard's locks held")
	have, err := Read(ctx, cfg)
	require.NoError(t, err)
	assert.Equal(t, Settings{ActiveThreadPercent: 70}, have)
	assert.True(t, alive(np), "Stop leaves the daemon running")
	assert.Equal(t, 1, sv.Restarts())
}

func TestDefaultBackoffDoublesToFiveMinutes(t *testing.T) {
	b := DefaultBackoff
	var got []time.Duration
	for range 12 {
		got = append(got, b.Step())
	}
	want := []time.Duration{1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300}
	for i := range want {
		want[i] *= time.Second
	}
	assert.Equal(t, want, got)
}
