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

package mpshost

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
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

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/mpsdaemon"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/mpsdaemon/mpsdaemontest"
)

const testGPU = "GPU-00000000-1111-2222-3333-444444444444"

// The test binary doubles as a plugin that starts a daemon through the
// server and then waits to be killed (clientEnv), and as the mps-host
// container's server (serverEnv).
const (
	clientEnv = "MPSHOST_TEST_CLIENT"
	serverEnv = "MPSHOST_TEST_SERVER"
)

func TestMain(m *testing.M) {
	if v := os.Getenv(clientEnv); v != "" {
		os.Exit(testClient(v))
	}
	if v := os.Getenv(serverEnv); v != "" {
		os.Exit(testServer(v))
	}
	code := m.Run()
	mpsdaemontest.RemoveBuilt()
	os.Exit(code)
}

// setup is one node: its state root's mps directory, the fake control
// program and the GPU's daemon config run through Runner.
type setup struct {
	socket, dir, control string
}

func newSetup(t *testing.T) setup {
	// A socket's path must fit in 108 bytes.
	root, err := os.MkdirTemp("", "mpshost")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(root) })
	return setup{socket: filepath.Join(root, "mps", "host.sock"), dir: filepath.Join(root, "mps"), control: mpsdaemontest.Control(t)}
}

// encode passes a setup to a subprocess.
func (s setup) encode() string {
	return strings.Join([]string{s.socket, s.dir, s.control}, "|")
}

func decode(v string) setup {
	f := strings.Split(v, "|")
	return setup{socket: f[0], dir: f[1], control: f[2]}
}

func (s setup) server(reap bool) *Server {
	return &Server{Socket: s.socket, Control: s.control, Dir: s.dir, Env: os.Environ(), Reap: reap}
}

func (s setup) config() mpsdaemon.Config {
	return mpsdaemon.Config{Control: s.control, Dir: filepath.Join(s.dir, testGPU), GPU: testGPU, Runner: Runner{Socket: s.socket}}
}

func testContext(t *testing.T) context.Context {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	return ctx
}

// serveInProcess runs the server until the test ends.
func serveInProcess(t *testing.T, s setup) {
	ctx, cancel := context.WithCancel(testContext(t))
	done := make(chan error, 1)
	go func() { done <- s.server(false).Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		assert.NoError(t, <-done)
	})
	waitForSocket(t, s.socket)
}

func waitForSocket(t *testing.T, socket string) {
	require.NoError(t, wait.PollUntilContextTimeout(testContext(t), 10*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		_, err := os.Stat(socket)
		return err == nil, nil
	}), "the server listens")
}

func quitAtEnd(t *testing.T, cfg mpsdaemon.Config, p mpsdaemon.Process) {
	t.Cleanup(func() { _ = mpsdaemon.Quit(context.Background(), cfg, p) })
}

func TestRunnerStartsAndCommandsTheDaemonThroughTheServer(t *testing.T) {
	s := newSetup(t)
	serveInProcess(t, s)
	ctx := testContext(t)
	cfg := s.config()
	settings := mpsdaemon.Settings{ActiveThreadPercent: 40, PinnedMemoryLimitGiB: 2}
	p, err := mpsdaemon.Start(ctx, cfg, settings)
	require.NoError(t, err)
	quitAtEnd(t, cfg, p)
	have, err := mpsdaemon.Read(ctx, cfg)
	require.NoError(t, err)
	assert.Equal(t, settings, have)
	adopted, err := mpsdaemon.Adopt(ctx, cfg)
	require.NoError(t, err)
	assert.Equal(t, p, adopted)

	st, err := os.Stat(s.socket)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm(), "only root talks to the server")

	// The daemon's start with memacct passes its config.toml.
	require.NoError(t, mpsdaemon.Quit(ctx, cfg, p))
	cfg.MemAcct = true
	p, err = mpsdaemon.Start(ctx, cfg, settings)
	require.NoError(t, err)
	quitAtEnd(t, cfg, p)
	log, err := os.ReadFile(filepath.Join(cfg.LogDir(), "control.log"))
	require.NoError(t, err)
	assert.Contains(t, string(log), mpsdaemontest.MemAcctLogLine)
	require.NoError(t, mpsdaemon.Quit(ctx, cfg, p))
	_, err = mpsdaemon.Adopt(ctx, cfg)
	assert.ErrorIs(t, err, mpsdaemon.ErrNotRunning)
}

// The mps-host container has a read-only root file system: serving a
// request must not need a writable temporary directory.
func TestServerNeedsNoTemporaryDirectory(t *testing.T) {
	s := newSetup(t)
	t.Setenv("TMPDIR", filepath.Join(t.TempDir(), "missing"))
	serveInProcess(t, s)
	ctx := testContext(t)
	cfg := s.config()
	p, err := mpsdaemon.Start(ctx, cfg, mpsdaemon.Settings{ActiveThreadPercent: 40})
	require.NoError(t, err)
	quitAtEnd(t, cfg, p)
	have, err := mpsdaemon.Read(ctx, cfg)
	require.NoError(t, err)
	assert.Equal(t, 40, have.ActiveThreadPercent)
}

func TestServerRunsOnlyTheControlProgram(t *testing.T) {
	s := newSetup(t)
	serveInProcess(t, s)
	r := Runner{Socket: s.socket}
	for name, tc := range map[string]struct {
		inv  mpsdaemon.Invocation
		want string
	}{
		"another program":         {mpsdaemon.Invocation{Path: "/bin/sh", Args: []string{"-c", "id"}}, `path: "/bin/sh" is not the control program`},
		"another argument":        {mpsdaemon.Invocation{Path: s.control, Args: []string{"-f"}}, `args: ["-f"] are not none, -d, or -d -a <config.toml>`},
		"a config file elsewhere": {mpsdaemon.Invocation{Path: s.control, Args: []string{"-d", "-a", "/etc/config.toml"}}, `args: "/etc/config.toml" is not a GPU's config.toml in ` + s.dir},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := r.Run(testContext(t), tc.inv)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	// A request's environment beyond the daemon's directories and GPU
	// is dropped: LD_PRELOAD never reaches the program.
	srv := s.server(false)
	env := srv.env(Request{Env: []string{"LD_PRELOAD=/tmp/evil.so", mpsdaemon.EnvPipeDir + "=/p", "CUDA_VISIBLE_DEVICES=" + testGPU}})
	assert.NotContains(t, env, "LD_PRELOAD=/tmp/evil.so")
	assert.Contains(t, env, mpsdaemon.EnvPipeDir+"=/p")
	assert.Contains(t, env, "CUDA_VISIBLE_DEVICES="+testGPU)

	// A client whose program fails gets its exit status and output.
	_, err := r.Run(testContext(t), mpsdaemon.Invocation{Path: s.control, Env: []string{mpsdaemon.EnvPipeDir + "=" + s.dir}, Stdin: "get_server_list\n"})
	var exitErr *ExitError
	require.ErrorAs(t, err, &exitErr)
	assert.Equal(t, 1, exitErr.Code)
}

// testClient is the plugin's container: it starts the daemon through the
// server, prints its pid and start time, and waits to be killed.
func testClient(v string) int {
	s := decode(v)
	p, err := mpsdaemon.Start(context.Background(), s.config(), mpsdaemon.Settings{ActiveThreadPercent: 30})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("%d %d\n", p.PID, p.StartTime)
	select {}
}

// testServer is the mps-host container's server, reaping.
func testServer(v string) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := decode(v).server(true).Serve(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// subprocess starts the test binary in mode env=value.
func subprocess(t *testing.T, env, value string) (*exec.Cmd, *bufio.Reader) {
	self, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), env+"="+value)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd, bufio.NewReader(out)
}

// A plugin container killed with SIGKILL does not end the daemons the
// server started for it: the next plugin adopts them.
func TestDaemonOutlivesAKilledClient(t *testing.T) {
	s := newSetup(t)
	serveInProcess(t, s)
	client, out := subprocess(t, clientEnv, s.encode())
	line, err := out.ReadString('\n')
	require.NoError(t, err, "the client started the daemon")
	var started mpsdaemon.Process
	_, err = fmt.Sscanf(line, "%d %d", &started.PID, &started.StartTime)
	require.NoError(t, err)
	quitAtEnd(t, s.config(), started)

	require.NoError(t, client.Process.Kill())
	_ = client.Wait()

	ctx := testContext(t)
	adopted, err := mpsdaemon.Adopt(ctx, s.config())
	require.NoError(t, err, "the daemon survives its plugin")
	assert.Equal(t, started, adopted)
	have, err := mpsdaemon.Read(ctx, s.config())
	require.NoError(t, err)
	assert.Equal(t, 30, have.ActiveThreadPercent)
}

// A server that is gone (its pod being replaced, or not started yet)
// makes Adopt say so instead of ErrNotRunning: the plugin keeps a daemon
// it cannot ask, and adopts it once a server answers again.
func TestAdoptWithoutServerKeepsTheDaemon(t *testing.T) {
	s := newSetup(t)
	ctx := testContext(t)
	serverCtx, stopServer := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.server(false).Serve(serverCtx) }()
	waitForSocket(t, s.socket)
	cfg := s.config()
	p, err := mpsdaemon.Start(ctx, cfg, mpsdaemon.Settings{ActiveThreadPercent: 30})
	require.NoError(t, err)
	quitAtEnd(t, cfg, p)
	stopServer()
	require.NoError(t, <-done)

	have, err := mpsdaemon.Adopt(ctx, cfg)
	require.ErrorIs(t, err, mpsdaemon.ErrRunnerUnavailable)
	assert.NotErrorIs(t, err, mpsdaemon.ErrNotRunning)
	assert.ErrorContains(t, err, s.socket, "the error names the socket")
	assert.Equal(t, p, have, "the daemon that runs")

	serveInProcess(t, s)
	have, err = mpsdaemon.Adopt(ctx, cfg)
	require.NoError(t, err)
	assert.Equal(t, p, have, "adopted once a server answers")
}

// The server is the daemons' subreaper: a daemon is its child once the
// control program that forked it has exited, and a daemon that dies is
// reaped, not left a zombie.
func TestServerReapsTheDaemons(t *testing.T) {
	s := newSetup(t)
	server, _ := subprocess(t, serverEnv, s.encode())
	waitForSocket(t, s.socket)
	ctx := testContext(t)
	cfg := s.config()
	p, err := mpsdaemon.Start(ctx, cfg, mpsdaemon.Settings{ActiveThreadPercent: 30})
	require.NoError(t, err)
	quitAtEnd(t, cfg, p)
	assert.Equal(t, server.Process.Pid, parentOf(t, p.PID), "the daemon is the server's child")

	require.NoError(t, unix.Kill(p.PID, unix.SIGKILL))
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		_, err := os.Stat(filepath.Join("/proc", strconv.Itoa(p.PID)))
		return os.IsNotExist(err), nil
	}), "the dead daemon is reaped")
}

// parentOf reads a process's parent pid from /proc/<pid>/stat.
func parentOf(t *testing.T, pid int) int {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(data), ") ")
	require.True(t, ok)
	fields := strings.Fields(rest)
	ppid, err := strconv.Atoi(fields[1])
	require.NoError(t, err)
	return ppid
}
