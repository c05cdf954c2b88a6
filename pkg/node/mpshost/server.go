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
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/mpsdaemon"
)

// RequestTimeout bounds one invocation: the control program is killed
// after it (a daemon it forked keeps running).
const RequestTimeout = time.Minute

// passedEnv are the variables a request may set: the daemon's directories
// and its GPU. Everything else of the program's environment is the
// server's own, so that a request cannot make the server run anything but
// the control program (LD_PRELOAD, PATH).
var passedEnv = []string{mpsdaemon.EnvPipeDir, mpsdaemon.EnvLogDir, "CUDA_VISIBLE_DEVICES"}

// Server runs the control program for the plugin (the mps-host pod).
type Server struct {
	// Socket is the unix socket it listens on (mode 0600).
	Socket string
	// Control is the only program it runs: the driver's
	// nvidia-cuda-mps-control.
	Control string
	// Dir is <state root>/mps: a configuration file (-a) must be a GPU's
	// config.toml in it.
	Dir string
	// Env is the environment the program starts from; a request adds
	// passedEnv.
	Env []string
	// Reap makes the server the child subreaper of the daemons the
	// program forks into the background, which it reaps when they exit
	// (the mps-host pod; a test process leaves it off).
	Reap bool

	reaper *reaper
}

// Serve listens on Socket and answers requests until ctx ends.
func (s *Server) Serve(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	if s.Reap {
		r, err := startReaper(ctx)
		if err != nil {
			return err
		}
		s.reaper = r
	}
	if err := os.MkdirAll(filepath.Dir(s.Socket), 0o755); err != nil {
		return fmt.Errorf("socket directory: %w", err)
	}
	// What a previous instance left.
	if err := os.Remove(s.Socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove the old socket: %w", err)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "unix", s.Socket)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", s.Socket, err)
	}
	if err := os.Chmod(s.Socket, 0o600); err != nil {
		_ = ln.Close()
		return fmt.Errorf("socket mode: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { _ = ln.Close() })
	defer stop()
	logger.Info("Serving MPS control requests", "socket", s.Socket, "control", s.Control, "reap", s.Reap)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("accept: %w", err)
		}
		wg.Go(func() { s.handle(ctx, conn) })
	}
}

func (s *Server) handle(ctx context.Context, conn net.Conn) {
	defer func() { _ = conn.Close() }()
	logger := klog.FromContext(ctx)
	var req Request
	resp := Response{ExitCode: -1}
	if err := json.NewDecoder(io.LimitReader(conn, maxMessage)).Decode(&req); err != nil {
		resp.Error = fmt.Sprintf("read the request: %v", err)
	} else if err := s.check(req); err != nil {
		resp.Error = err.Error()
	} else {
		resp = s.run(ctx, req)
	}
	if resp.Error != "" {
		logger.Info("MPS control request failed", "args", req.Args, "err", resp.Error)
	} else {
		logger.V(4).Info("Ran the MPS control program", "args", req.Args, "exitCode", resp.ExitCode)
	}
	if err := json.NewEncoder(conn).Encode(resp); err != nil {
		// The plugin went away (killed, or its call timed out).
		logger.V(2).Info("Could not answer an MPS control request", "err", err)
	}
}

// check refuses what the plugin never asks: another program, arguments
// other than none (a client), -d, or -d -a with a GPU's config.toml.
func (s *Server) check(req Request) error {
	if req.Path != s.Control {
		return fmt.Errorf("path: %q is not the control program %q", req.Path, s.Control)
	}
	switch {
	case len(req.Args) == 0, slices.Equal(req.Args, []string{"-d"}):
	case len(req.Args) == 3 && req.Args[0] == "-d" && req.Args[1] == "-a":
		if f := req.Args[2]; filepath.Base(f) != "config.toml" || filepath.Dir(filepath.Dir(f)) != filepath.Clean(s.Dir) {
			return fmt.Errorf("args: %q is not a GPU's config.toml in %s", f, s.Dir)
		}
	default:
		return fmt.Errorf("args: %q are not none, -d, or -d -a <config.toml>", req.Args)
	}
	return nil
}

// env is the server's environment with the request's passedEnv.
func (s *Server) env(req Request) []string {
	env := slices.Clone(s.Env)
	for _, kv := range req.Env {
		if k, _, ok := strings.Cut(kv, "="); ok && slices.Contains(passedEnv, k) {
			env = append(env, kv)
		}
	}
	return env
}

// run runs req to its end. Standard input and output are files, not
// pipes: a daemon that forks into the background inherits them, and a
// pipe would stay open for as long as it runs.
func (s *Server) run(ctx context.Context, req Request) Response {
	fail := func(err error) Response { return Response{ExitCode: -1, Error: err.Error()} }
	in, err := mpsdaemon.MemFile("mps-host-stdin", req.Stdin)
	if err != nil {
		return fail(err)
	}
	defer func() { _ = in.Close() }()
	out, err := mpsdaemon.MemFile("mps-host-output", "")
	if err != nil {
		return fail(err)
	}
	defer func() { _ = out.Close() }()
	cmd := exec.Command(req.Path, req.Args...)
	cmd.Env = s.env(req)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = in, out, out

	ctx, cancel := context.WithTimeout(ctx, RequestTimeout)
	defer cancel()
	code, err := s.start(ctx, cmd)
	resp := Response{ExitCode: code}
	if err != nil {
		resp.Error = err.Error()
	}
	if _, err := out.Seek(0, io.SeekStart); err == nil {
		resp.Output, _ = io.ReadAll(io.LimitReader(out, maxMessage/2))
	}
	return resp
}

// start runs cmd and waits for it (through the reaper when the server is
// the subreaper, which reaps every child), killing it when ctx ends; it
// returns its exit code.
func (s *Server) start(ctx context.Context, cmd *exec.Cmd) (int, error) {
	if s.reaper == nil {
		if err := cmd.Start(); err != nil {
			return -1, err
		}
		stop := context.AfterFunc(ctx, func() { _ = cmd.Process.Kill() })
		defer stop()
		err := cmd.Wait()
		var exitErr *exec.ExitError
		if err == nil || errors.As(err, &exitErr) {
			if code := cmd.ProcessState.ExitCode(); code >= 0 {
				return code, nil
			}
		}
		return -1, fmt.Errorf("%s: %w", cmd.Path, errors.Join(err, ctx.Err()))
	}
	exited, err := s.reaper.start(cmd)
	if err != nil {
		return -1, err
	}
	select {
	case ws := <-exited:
		return waitCode(cmd, ws, nil)
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		return waitCode(cmd, <-exited, ctx.Err())
	}
}

func waitCode(cmd *exec.Cmd, ws unix.WaitStatus, cause error) (int, error) {
	if ws.Exited() && cause == nil {
		return ws.ExitStatus(), nil
	}
	return -1, fmt.Errorf("%s: %v (%w)", cmd.Path, ws.Signal(), errors.Join(cause, errors.New("killed")))
}

// reaper is the server as child subreaper: the daemons the control
// program forks into the background become its children once the program
// exits, and it reaps them, and the program itself, on SIGCHLD.
type reaper struct {
	mu      sync.Mutex
	waiters map[int]chan unix.WaitStatus
}

func startReaper(ctx context.Context) (*reaper, error) {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return nil, fmt.Errorf("become the child subreaper: %w", err)
	}
	r := &reaper{waiters: map[int]chan unix.WaitStatus{}}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, unix.SIGCHLD)
	go func() {
		defer signal.Stop(sigs)
		for {
			r.reapAll(klog.FromContext(ctx))
			select {
			case <-ctx.Done():
				return
			case <-sigs:
			}
		}
	}()
	return r, nil
}

// start starts cmd and returns where its exit status arrives. The lock is
// held until the pid is registered, so that a child that exits at once
// is not reaped as a stranger.
func (r *reaper) start(cmd *exec.Cmd) (<-chan unix.WaitStatus, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	ch := make(chan unix.WaitStatus, 1)
	r.waiters[cmd.Process.Pid] = ch
	return ch, nil
}

func (r *reaper) reapAll(logger klog.Logger) {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || pid <= 0 {
			return
		}
		r.mu.Lock()
		ch, ok := r.waiters[pid]
		delete(r.waiters, pid)
		r.mu.Unlock()
		if ok {
			ch <- ws
			continue
		}
		logger.V(2).Info("Reaped a process the control program left", "pid", pid, "exitStatus", ws.ExitStatus(), "signal", ws.Signal())
	}
}
