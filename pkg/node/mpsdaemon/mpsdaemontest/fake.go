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

// Package mpsdaemontest is a small fake of NVIDIA's nvidia-cuda-mps-control
// for tests of packages that run the MPS control daemon: a test runs
// Control's path as the control program, and TestMain calls RemoveBuilt
// after the tests.
package mpsdaemontest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The fake answers the commands the supervisor uses the way NVIDIA's
// nvidia-cuda-mps-control does (checked against the real one in
// mpsdaemon's real_test.go): "-d" starts the daemon in the background and
// returns once it serves; without arguments it is the client, sending its
// standard input's lines through the pipe directory's "control" socket.
//
// A CUDA client (the fake driver of vgpu-core/fake) sends ClientHello on
// the control socket and holds the connection for its life. As NVIDIA's
// daemon does (nvidia-cuda-mps-control(1)), the fake serves one user id at
// a time: the first client's uid gets a server process owned by that uid
// (listed by get_server_list, its clients by get_client_list); a client of
// another uid waits, unanswered, until the running server's clients are
// done, then the server is replaced by one of the waiting client's uid.
const (
	// FailEnv names a file; while it exists, the fake daemon logs its
	// content and exits at start.
	FailEnv   = "MPSDAEMON_FAKE_FAIL"
	fakeServe = "--fake-serve"
	// fakeControlPackage is the program that is only the fake (Run): the
	// e2e nodes' control program.
	fakeControlPackage = "github.com/vgpu-dra/vgpu-dra-driver/test/e2e/cmd/fake-mps-control"
	// fakeServer is the argument of the MPS server process: its uid.
	fakeServer = "--fake-mps-server"
	// ClientHello is the line a CUDA client sends first.
	ClientHello = "fake_cuda_client"
	// ClientReady is the daemon's answer once the client's server runs.
	ClientReady = "ready"
)

// The names NVIDIA's daemon uses (package mpsdaemon's, repeated here so
// that mpsdaemon's own tests can use this package).
const (
	envPipeDir     = "CUDA_MPS_PIPE_DIRECTORY"
	envLogDir      = "CUDA_MPS_LOG_DIRECTORY"
	pidFileName    = "nvidia-cuda-mps-control.pid"
	controlLogName = "control.log"
	// ControlName is the control program's name, which the supervisor
	// checks a daemon's process name against.
	ControlName = "nvidia-cuda-mps-control"
)

// built is the fake control program, compiled once per test binary: the
// tests start it for every daemon and every command, and a small program
// starts in milliseconds where a test binary built with -race (its race
// runtime and every package's init) takes a fifth of a CPU second. It is
// built without -race: it is the tests' scaffolding, and the daemon's
// race reports would go to its standard error, which is /dev/null.
var built struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// Control returns the path of the fake control program, named
// ControlName. TestMain removes it with RemoveBuilt once the tests are
// done.
func Control(t testing.TB) string {
	t.Helper()
	built.once.Do(build)
	if built.err != nil {
		t.Fatalf("build the fake MPS control program: %v", built.err)
	}
	return built.path
}

func build() {
	built.dir, built.err = os.MkdirTemp("", "fake-mps-control-")
	if built.err != nil {
		return
	}
	built.path = filepath.Join(built.dir, ControlName)
	// go test puts its own go first in PATH.
	out, err := exec.Command("go", "build", "-o", built.path, fakeControlPackage).CombinedOutput()
	if err != nil {
		built.err = fmt.Errorf("go build %s: %w: %s", fakeControlPackage, err, out)
	}
}

// RemoveBuilt deletes the program Control built, if any; TestMain calls
// it after the tests ran.
func RemoveBuilt() {
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
}

// Run is the fake control program with its command line (without the
// program's name), for a binary that is only the fake; it returns the exit
// status.
func Run(args []string) int { return fakeControl(args) }

func fakeControl(args []string) int {
	pipe, logDir := os.Getenv(envPipeDir), os.Getenv(envLogDir)
	switch {
	case len(args) == 1 && args[0] == "-d":
		return fakeDaemonize(pipe, "")
	case len(args) == 3 && args[0] == "-d" && args[1] == "-a":
		return fakeDaemonize(pipe, args[2])
	case len(args) == 2 && args[0] == fakeServe:
		return fakeServeDaemon(pipe, logDir, args[1])
	case len(args) == 2 && args[0] == fakeServer:
		return fakeMPSServer(args[1])
	case len(args) == 0:
		return fakeClient(pipe)
	}
	fmt.Fprintln(os.Stderr, "usage: nvidia-cuda-mps-control [-d [-a config.toml]]")
	return 1
}

func fakeDaemonize(pipe, config string) int {
	if st, err := os.Stat(pipe); err != nil || !st.IsDir() {
		fmt.Fprintf(os.Stderr, "Cannot access %s=%s\n", envPipeDir, pipe)
		return 1
	}
	if data, err := os.ReadFile(filepath.Join(pipe, pidFileName)); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil && fakeAlive(pid) {
			fmt.Fprintln(os.Stderr, "An instance of this daemon is already running")
			return 1
		}
	}
	ready, w, err := os.Pipe()
	if err != nil {
		return 1
	}
	cmd := exec.Command(os.Args[0], fakeServe, config)
	cmd.ExtraFiles = []*os.File{w}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	_ = w.Close()
	// The daemon closes its end once it serves (or exits).
	_, _ = io.Copy(io.Discard, ready)
	_ = cmd.Process.Release()
	return 0
}

// MemAcctLogLine is what the fake daemon logs in control.log when its
// configuration file (-a) turns on memory accounting.
const MemAcctLogLine = "Memory accounting (memacct) enabled"

// fakeAlive reports whether pid runs; a killed daemon that nobody reaped
// yet (a zombie) is gone.
func fakeAlive(pid int) bool {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	_, rest, ok := strings.Cut(string(data), ") ")
	return ok && !strings.HasPrefix(rest, "Z") && !strings.HasPrefix(rest, "X")
}

func fakeServeDaemon(pipe, logDir, config string) int {
	ready := os.NewFile(3, "ready")
	logFile, err := os.OpenFile(filepath.Join(logDir, controlLogName), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 1
	}
	logf := func(format string, args ...any) {
		_, _ = fmt.Fprintf(logFile, "[%s Control %d] %s\n", time.Now().Format("2006-01-02 15:04:05.000"), os.Getpid(), fmt.Sprintf(format, args...))
	}
	if reason, err := os.ReadFile(os.Getenv(FailEnv)); err == nil {
		logf("%s", strings.TrimSpace(string(reason)))
		return 1
	}
	if config != "" {
		memAcct, err := fakeReadConfig(config)
		if err != nil {
			logf("Failed to apply configuration file %s: %v", config, err)
			return 1
		}
		if memAcct {
			logf("%s", MemAcctLogLine)
		}
	}
	sock := filepath.Join(pipe, "control")
	_ = os.Remove(sock)
	ln, err := net.Listen("unixpacket", sock)
	if err != nil {
		logf("Failed to listen on %s: %v", sock, err)
		return 1
	}
	// Clients of any uid connect, as to NVIDIA's (its control socket is 0666).
	if err := os.Chmod(sock, 0o666); err != nil {
		logf("Failed to chmod %s: %v", sock, err)
		return 1
	}
	pidFile := filepath.Join(pipe, pidFileName)
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(os.Getpid())), 0o666); err != nil {
		return 1
	}
	logf("Starting control daemon using socket %s", sock)
	_ = ready.Close()
	// Connections are served at the same time, as NVIDIA's daemon serves
	// them: a CUDA client holds its connection for as long as it runs.
	st := &fakeState{percentage: 100, clients: map[net.Conn]int32{}}
	st.changed = sync.NewCond(&st.mu)
	quit := make(chan struct{})
	var quitOnce sync.Once
	accepted := make(chan error, 1)
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				accepted <- err
				return
			}
			logf("NEW UI")
			go func() {
				defer func() { _ = conn.Close() }()
				if st.serve(conn, logf) {
					quitOnce.Do(func() { close(quit) })
				}
			}()
		}
	}()
	select {
	case <-quit:
		st.mu.Lock()
		st.stopServer(logf)
		st.mu.Unlock()
		logf("Exit with status 0")
		_ = os.Remove(pidFile)
		return 0
	case err := <-accepted:
		logf("Failed to accept on %s: %v", sock, err)
		return 1
	}
}

// fakeReadConfig reads the part of an MPS v3 configuration file the fake
// knows: whether [features.memacct] has enabled = true. A key outside a
// table it knows is an error, as any unknown key is to NVIDIA's daemon.
func fakeReadConfig(path string) (bool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return false, err
	}
	table, memAcct := "", false
	for line := range strings.Lines(string(data)) {
		line = strings.TrimSpace(line)
		switch {
		case line == "":
		case strings.HasPrefix(line, "["):
			table = line
		case table == "" && strings.HasPrefix(line, "schema_version"):
		case table == "[features.memacct]" && strings.ReplaceAll(line, " ", "") == "enabled=true":
			memAcct = true
		default:
			return false, fmt.Errorf("unknown key %q in %s", line, table)
		}
	}
	return memAcct, nil
}

type fakeState struct {
	mu         sync.Mutex
	percentage float64
	pinned     string
	// server is the running MPS server, nil before the first client.
	server *fakeServerProcess
	// clients are the server's connected clients and their pids.
	clients map[net.Conn]int32
	// changed is signalled when a client leaves.
	changed *sync.Cond
}

// fakeServerProcess is an MPS server: a process owned by the uid it serves.
type fakeServerProcess struct {
	uid   uint32
	cmd   *exec.Cmd
	stdin io.Closer
}

// serve answers one client's commands; it reports whether one was quit.
func (st *fakeState) serve(conn net.Conn, logf func(string, ...any)) bool {
	sc := bufio.NewScanner(conn)
	for first := true; sc.Scan(); first = false {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		if first && line == ClientHello {
			st.client(conn, sc, logf)
			return false
		}
		if quit, answer := st.command(line, logf); quit {
			return true
		} else if answer != "" {
			logf("%s", answer)
			if _, err := fmt.Fprintln(conn, answer); err != nil {
				return false
			}
		}
	}
	return false
}

// command runs one command line; it reports whether it was quit, and
// the answer to send.
func (st *fakeState) command(line string, logf func(string, ...any)) (bool, string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	logf("Cmd:%s", line)
	f := strings.Fields(line)
	answer := ""
	switch {
	case line == "quit":
		return true, ""
	case line == "get_default_active_thread_percentage":
		answer = fmt.Sprintf("%.1f", st.percentage)
	case f[0] == "set_default_active_thread_percentage" && len(f) == 2:
		// Like NVIDIA's: a value out of range is ignored silently.
		if v, err := strconv.ParseFloat(f[1], 64); err == nil && v >= 1 && v <= 100 {
			st.percentage = v
			answer = fmt.Sprintf("%.1f", v)
		}
	case f[0] == "set_default_device_pinned_mem_limit" && len(f) == 3:
		st.pinned = f[2]
	case f[0] == "get_default_device_pinned_mem_limit" && len(f) == 2:
		answer = st.pinned
	case line == "get_server_list":
		if st.server != nil {
			answer = strconv.Itoa(st.server.cmd.Process.Pid)
		}
	case f[0] == "get_client_list" && len(f) == 2:
		if st.server != nil && f[1] == strconv.Itoa(st.server.cmd.Process.Pid) {
			var pids []string
			for _, pid := range st.clients {
				pids = append(pids, strconv.Itoa(int(pid)))
			}
			answer = strings.Join(pids, "\n")
		}
	default:
		answer = fmt.Sprintf("Unknown command %q", line)
	}
	return false, answer
}

// client serves a CUDA client's connection: once a server of its uid runs
// (after the other uid's server's clients are done), it answers
// ClientReady and holds the client until its connection closes.
func (st *fakeState) client(conn net.Conn, sc *bufio.Scanner, logf func(string, ...any)) {
	cred, err := peerCred(conn)
	if err != nil {
		logf("User did not send valid credentials: %v", err)
		return
	}
	st.mu.Lock()
	for st.server != nil && st.server.uid != cred.Uid && len(st.clients) > 0 {
		logf("NEW CLIENT %d from user %d: waits for the server of user %d to end", cred.Pid, cred.Uid, st.server.uid)
		st.changed.Wait()
	}
	if st.server != nil && st.server.uid != cred.Uid {
		st.stopServer(logf)
	}
	if st.server == nil {
		if st.server, err = startServer(cred.Uid); err != nil {
			logf("Failed to start a server for user %d: %v", cred.Uid, err)
			st.mu.Unlock()
			return
		}
		logf("Starting new server %d for user %d", st.server.cmd.Process.Pid, cred.Uid)
	}
	st.clients[conn] = cred.Pid
	st.mu.Unlock()
	logf("NEW CLIENT %d from user %d", cred.Pid, cred.Uid)
	if _, err := fmt.Fprintln(conn, ClientReady); err == nil {
		for sc.Scan() {
		}
	}
	st.mu.Lock()
	delete(st.clients, conn)
	st.changed.Broadcast()
	st.mu.Unlock()
	logf("Client %d disconnected", cred.Pid)
}

// stopServer ends the running server (st.mu held).
func (st *fakeState) stopServer(logf func(string, ...any)) {
	if st.server == nil {
		return
	}
	_ = st.server.stdin.Close()
	_ = st.server.cmd.Wait()
	logf("Server %d exited", st.server.cmd.Process.Pid)
	st.server = nil
}

// startServer starts a server process owned by uid; it returns once the
// process runs as uid, so that its owner in /proc is uid when listed.
func startServer(uid uint32) (*fakeServerProcess, error) {
	cmd := exec.Command(os.Args[0], fakeServer, strconv.FormatUint(uint64(uid), 10))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	if _, err := io.ReadFull(stdout, make([]byte, 1)); err != nil {
		_ = stdin.Close()
		_ = cmd.Wait()
		return nil, fmt.Errorf("the server for user %d did not start", uid)
	}
	return &fakeServerProcess{uid: uid, cmd: cmd, stdin: stdin}, nil
}

// fakeMPSServer is the server process: it takes the uid it serves (its
// parent, the daemon, runs as root, or as that uid), says so on standard
// output and runs until the daemon closes its standard input.
func fakeMPSServer(uidArg string) int {
	uid, err := strconv.ParseUint(uidArg, 10, 32)
	if err != nil {
		return 1
	}
	if uint64(os.Getuid()) != uid {
		if err := syscall.Setgid(int(uid)); err != nil {
			fmt.Fprintln(os.Stderr, "setgid:", err)
			return 1
		}
		if err := syscall.Setuid(int(uid)); err != nil {
			fmt.Fprintln(os.Stderr, "setuid:", err)
			return 1
		}
	}
	if _, err := os.Stdout.Write([]byte{'\n'}); err != nil {
		return 1
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// peerCred is the connecting process's credentials as the kernel recorded them.
func peerCred(conn net.Conn) (*unix.Ucred, error) {
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		return nil, errors.New("not a unix socket")
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, err
	}
	return cred, credErr
}

func fakeClient(pipe string) int {
	conn, err := net.Dial("unixpacket", filepath.Join(pipe, "control"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "Cannot find MPS control daemon process")
		return 1
	}
	defer func() { _ = conn.Close() }()
	if _, err := io.Copy(conn, os.Stdin); err != nil {
		return 1
	}
	if err := conn.(*net.UnixConn).CloseWrite(); err != nil {
		return 1
	}
	if _, err := io.Copy(os.Stdout, conn); err != nil && !errors.Is(err, net.ErrClosed) {
		return 1
	}
	return 0
}
