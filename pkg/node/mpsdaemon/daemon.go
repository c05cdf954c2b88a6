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
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
)

// Names NVIDIA's control daemon uses.
const (
	// EnvPipeDir and EnvLogDir name the daemon's directories for the
	// daemon and for every client.
	EnvPipeDir = "CUDA_MPS_PIPE_DIRECTORY"
	EnvLogDir  = "CUDA_MPS_LOG_DIRECTORY"
	// pidFileName is the daemon's pid file in the pipe directory, there
	// from its start until it quits.
	pidFileName = "nvidia-cuda-mps-control.pid"
	// controlLogName is the daemon's log in the log directory: every
	// command and its answer.
	controlLogName = "control.log"
	// configFileName is the daemon's TOML configuration (-a/--apply).
	configFileName = "config.toml"
	// daemonName is the daemon's process name (/proc/<pid>/comm, which the
	// kernel cuts to 15 characters).
	daemonName = "nvidia-cuda-mps-control"
)

// Directory modes: clients of any uid connect through the pipe directory;
// the logs are the plugin's.
const (
	pipeDirMode = 0o755
	logDirMode  = 0o700
)

// ErrNotRunning is returned by Adopt when no daemon of the directory runs
// and answers.
var ErrNotRunning = errors.New("no MPS control daemon runs for the directory")

// ErrRunnerUnavailable is wrapped by a Runner's error when it could not
// run the control program at all (the mps-host server does not answer):
// a daemon that runs cannot be told from one that does not then, so Adopt
// returns it instead of ErrNotRunning and callers keep the daemon.
var ErrRunnerUnavailable = errors.New("the MPS control program cannot be run")

// Config is one GPU's control daemon.
type Config struct {
	// Control is the path of the node driver's nvidia-cuda-mps-control.
	Control string
	// Dir is the GPU's directory (<state root>/mps/<GPU UUID>); the
	// daemon's pipe and log directories are made in it.
	Dir string
	// GPU is the GPU's UUID: the daemon sees only it, and errors name it.
	GPU string
	// Env is the environment every run of Control starts from (PATH, the
	// driver's library path); the directories and the GPU are added.
	Env []string
	// Runner runs Control; nil runs it directly (ExecRunner).
	Runner Runner
	// MemAcct starts the daemon with the driver's memory accounting
	// (r615 and later, docs/mps.md): -a ConfigFile, which turns on
	// features.memacct, so that the driver holds each client to the
	// limit it names in NVIDIA_GPU_MEMORY_LIMITS.
	MemAcct bool
}

// ConfigFile is the daemon's configuration file with MemAcct, in the
// GPU's directory, written at each start.
func (c Config) ConfigFile() string { return filepath.Join(c.Dir, configFileName) }

// PipeDir is where the daemon makes its sockets, and what clients set
// CUDA_MPS_PIPE_DIRECTORY to.
func (c Config) PipeDir() string { return filepath.Join(c.Dir, "pipe") }

// LogDir holds the daemon's control.log and server.log.
func (c Config) LogDir() string { return filepath.Join(c.Dir, "log") }

func (c Config) runner() Runner {
	if c.Runner == nil {
		return ExecRunner{}
	}
	return c.Runner
}

func (c Config) invocation(stdin string, args ...string) Invocation {
	env := append([]string(nil), c.Env...)
	env = append(env, EnvPipeDir+"="+c.PipeDir(), EnvLogDir+"="+c.LogDir(), "CUDA_VISIBLE_DEVICES="+c.GPU)
	return Invocation{Path: c.Control, Args: args, Env: env, Stdin: stdin}
}

// memAcctConfig turns on the daemon's memory accounting: the MPS v3
// configuration file NVIDIA documents for -a (r615 and later).
const memAcctConfig = `schema_version = "1.0"

[features.memacct]
enabled = true
`

// Settings are the daemon's defaults, the ceiling of every client
// (docs/mps.md): a client can lower them, never raise them.
type Settings struct {
	// ActiveThreadPercent is the default active-thread percentage, 1..100.
	ActiveThreadPercent int
	// PinnedMemoryLimitGiB is the default pinned device-memory limit of
	// the daemon's device 0 in GiB; 0 sets none. Whole GiB because the
	// daemon shows its limits so (1500M reads back as 1G): a ceiling is
	// rounded up to it, the claim's own limit stays exact in libvgpu.so.
	PinnedMemoryLimitGiB uint64
}

func (s Settings) validate() error {
	if s.ActiveThreadPercent < 1 || s.ActiveThreadPercent > 100 {
		return fmt.Errorf("activeThreadPercent: %d is not 1..100", s.ActiveThreadPercent)
	}
	return nil
}

// Process identifies a running daemon: its pid and its start time (in
// clock ticks after boot, /proc/<pid>/stat), so that a pid the kernel
// reused for another process is not taken for the daemon.
type Process struct {
	PID       int    `json:"pid"`
	StartTime uint64 `json:"startTime"`
}

// Start starts the GPU's control daemon and sets its defaults. A daemon
// that fails to start, or to take its settings, fails Start with an error
// naming the GPU and quoting the daemon's last log line, and leaves
// nothing behind: no process, no directory.
func Start(ctx context.Context, cfg Config, s Settings) (Process, error) {
	if err := s.validate(); err != nil {
		return Process{}, fmt.Errorf("MPS settings for GPU %s: %w", cfg.GPU, err)
	}
	p, err := start(ctx, cfg, s)
	if err != nil {
		reason := lastLogLine(cfg)
		cleanupErr := kill(p, cfg)
		err = fmt.Errorf("start the MPS control daemon of GPU %s: %w; its last log line: %q", cfg.GPU, err, reason)
		if cleanupErr != nil {
			err = fmt.Errorf("%w (cleaning up also failed: %w)", err, cleanupErr)
		}
		return Process{}, err
	}
	klog.FromContext(ctx).V(2).Info("Started MPS control daemon", "gpu", cfg.GPU, "pid", p.PID)
	return p, nil
}

func start(ctx context.Context, cfg Config, s Settings) (Process, error) {
	// A daemon of the directory that still runs (a crash of the plugin
	// between its start and its record) would make -d refuse.
	if stale, err := running(cfg); err == nil {
		if err := kill(stale, cfg); err != nil {
			return Process{}, err
		}
	}
	if err := makeDir(cfg.PipeDir(), pipeDirMode); err != nil {
		return Process{}, err
	}
	if err := makeDir(cfg.LogDir(), logDirMode); err != nil {
		return Process{}, err
	}
	args := []string{"-d"}
	if cfg.MemAcct {
		if err := os.WriteFile(cfg.ConfigFile(), []byte(memAcctConfig), 0o644); err != nil {
			return Process{}, fmt.Errorf("write the daemon's configuration: %w", err)
		}
		args = append(args, "-a", cfg.ConfigFile())
	}
	if out, err := cfg.runner().Run(ctx, cfg.invocation("", args...)); err != nil {
		return Process{}, fmt.Errorf("%s %s: %w: %s", cfg.Control, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	p, err := running(cfg)
	if err != nil {
		return Process{}, err
	}
	if err := Apply(ctx, cfg, s); err != nil {
		return p, err
	}
	return p, nil
}

// Adopt returns the daemon that runs for cfg's directory and answers,
// without restarting it (a plugin restarted while clients run), or
// ErrNotRunning; an error wrapping ErrRunnerUnavailable when the process
// runs but the control program could not be run to ask it.
func Adopt(ctx context.Context, cfg Config) (Process, error) {
	p, err := running(cfg)
	if err != nil {
		return Process{}, fmt.Errorf("%w: %w", ErrNotRunning, err)
	}
	if _, err := Command(ctx, cfg, "get_default_active_thread_percentage"); err != nil {
		if errors.Is(err, ErrRunnerUnavailable) {
			return p, fmt.Errorf("ask MPS control daemon %d of GPU %s: %w", p.PID, cfg.GPU, err)
		}
		return Process{}, fmt.Errorf("%w: pid %d does not answer: %w", ErrNotRunning, p.PID, err)
	}
	return p, nil
}

// Command sends commands to the daemon, one per line on the control
// program's standard input, and returns the lines it answered.
func Command(ctx context.Context, cfg Config, commands ...string) ([]string, error) {
	out, err := cfg.runner().Run(ctx, cfg.invocation(strings.Join(commands, "\n")+"\n"))
	if err != nil {
		return nil, fmt.Errorf("MPS control %q: %w: %s", commands, err, strings.TrimSpace(string(out)))
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" {
			lines = append(lines, line)
		}
	}
	return lines, nil
}

// Apply sets the daemon's defaults and reads them back.
func Apply(ctx context.Context, cfg Config, s Settings) error {
	if err := s.validate(); err != nil {
		return err
	}
	set := []string{"set_default_active_thread_percentage " + strconv.Itoa(s.ActiveThreadPercent)}
	if s.PinnedMemoryLimitGiB > 0 {
		set = append(set, "set_default_device_pinned_mem_limit 0 "+strconv.FormatUint(s.PinnedMemoryLimitGiB, 10)+"G")
	}
	if _, err := Command(ctx, cfg, set...); err != nil {
		return err
	}
	have, err := Read(ctx, cfg)
	if err != nil {
		return err
	}
	if have != s {
		// The daemon ignores a value it does not accept, silently.
		return fmt.Errorf("the daemon holds %+v after being set to %+v", have, s)
	}
	return nil
}

// Read returns the daemon's defaults.
func Read(ctx context.Context, cfg Config) (Settings, error) {
	// Without a pinned-memory limit the second command answers nothing.
	lines, err := Command(ctx, cfg, "get_default_active_thread_percentage", "get_default_device_pinned_mem_limit 0")
	if err != nil {
		return Settings{}, err
	}
	if len(lines) == 0 {
		return Settings{}, errors.New("the daemon answered nothing")
	}
	pct, err := strconv.ParseFloat(lines[0], 64)
	if err != nil {
		return Settings{}, fmt.Errorf("active-thread percentage %q: %w", lines[0], err)
	}
	s := Settings{ActiveThreadPercent: int(pct)}
	if len(lines) > 1 {
		if s.PinnedMemoryLimitGiB, err = parseGiB(lines[1]); err != nil {
			return Settings{}, fmt.Errorf("pinned memory limit %q: %w", lines[1], err)
		}
	}
	return s, nil
}

// parseGiB reads a limit as the daemon prints it ("2G", "1T").
func parseGiB(v string) (uint64, error) {
	if len(v) < 2 {
		return 0, errors.New("not a limit")
	}
	n, err := strconv.ParseUint(v[:len(v)-1], 10, 64)
	if err != nil {
		return 0, err
	}
	switch v[len(v)-1] {
	case 'G':
		return n, nil
	case 'T':
		return n << 10, nil
	}
	return 0, fmt.Errorf("unit %q is not G or T", v[len(v)-1:])
}

// Quit tells the daemon to quit, waits until process p has exited (killing
// it when ctx ends first) and removes the GPU's directory.
func Quit(ctx context.Context, cfg Config, p Process) error {
	if _, err := Command(ctx, cfg, "quit"); err != nil {
		klog.FromContext(ctx).Info("The MPS control daemon did not take quit; killing it", "gpu", cfg.GPU, "pid", p.PID, "err", err)
		return kill(p, cfg)
	}
	exited, err := waitExit(ctx, p)
	if err != nil || !exited {
		return kill(p, cfg)
	}
	return os.RemoveAll(cfg.Dir)
}

// kill ends process p if it is still the daemon (SIGKILL) and removes the
// GPU's directory.
func kill(p Process, cfg Config) error {
	if p.PID > 0 && alive(p) {
		if err := unix.Kill(p.PID, unix.SIGKILL); err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("kill MPS control daemon %d: %w", p.PID, err)
		}
		if _, err := waitExit(context.Background(), p); err != nil {
			return err
		}
	}
	return os.RemoveAll(cfg.Dir)
}

// running returns the daemon the pid file names, if that process runs
// and is a control daemon.
func running(cfg Config) (Process, error) {
	data, err := os.ReadFile(filepath.Join(cfg.PipeDir(), pidFileName))
	if err != nil {
		return Process{}, fmt.Errorf("read the daemon's pid file: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 {
		return Process{}, fmt.Errorf("pid file holds %q", data)
	}
	comm, start, err := procStat(pid)
	if err != nil {
		return Process{}, err
	}
	if !strings.HasPrefix(daemonName, comm) {
		return Process{}, fmt.Errorf("pid %d is %q, not the control daemon", pid, comm)
	}
	return Process{PID: pid, StartTime: start}, nil
}

// alive reports whether p still runs (the same pid and start time, not a
// zombie).
func alive(p Process) bool {
	_, start, err := procStat(p.PID)
	return err == nil && start == p.StartTime
}

// procStat returns a process's name and start time from /proc/<pid>/stat;
// a zombie counts as gone.
func procStat(pid int) (string, uint64, error) {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return "", 0, err
	}
	// "pid (comm) state ... starttime": comm may hold spaces and ')'.
	open, end := bytes.IndexByte(data, '('), bytes.LastIndexByte(data, ')')
	if open < 0 || end < open {
		return "", 0, fmt.Errorf("/proc/%d/stat: cannot parse", pid)
	}
	fields := strings.Fields(string(data[end+1:]))
	// fields[0] is field 3 (state), so field 22 (starttime) is fields[19].
	if len(fields) < 20 {
		return "", 0, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	if fields[0] == "Z" || fields[0] == "X" {
		return "", 0, fmt.Errorf("pid %d: %w", pid, fs.ErrNotExist)
	}
	start, err := strconv.ParseUint(fields[19], 10, 64)
	if err != nil {
		return "", 0, fmt.Errorf("/proc/%d/stat starttime: %w", pid, err)
	}
	return string(data[open+1 : end]), start, nil
}

// waitExit waits until p has exited or ctx ends; it reports whether p
// exited. The daemon is not the caller's child, so it waits on a pidfd.
func waitExit(ctx context.Context, p Process) (bool, error) {
	fd, err := unix.PidfdOpen(p.PID, 0)
	if errors.Is(err, unix.ESRCH) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("pidfd of %d: %w", p.PID, err)
	}
	defer func() { _ = unix.Close(fd) }()
	if !alive(p) {
		// The pid names another process now: ours is gone.
		return true, nil
	}
	return waitReadable(ctx, fd)
}

// waitReadable waits until fd (a pidfd) is readable, i.e. its process
// exited, or ctx ends.
func waitReadable(ctx context.Context, fd int) (bool, error) {
	// An eventfd wakes the poll when ctx ends.
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		return false, fmt.Errorf("eventfd: %w", err)
	}
	defer func() { _ = unix.Close(wake) }()
	stop := context.AfterFunc(ctx, func() {
		_, _ = unix.Write(wake, []byte{1, 0, 0, 0, 0, 0, 0, 0})
	})
	defer stop()
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}, {Fd: int32(wake), Events: unix.POLLIN}}
	for {
		_, err := unix.Poll(fds, -1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return false, fmt.Errorf("poll: %w", err)
		}
		if fds[0].Revents != 0 {
			return true, nil
		}
		return false, ctx.Err()
	}
}

// lastLogLine is the last line of the daemon's control.log, where it says
// why it stopped; empty when there is none.
func lastLogLine(cfg Config) string {
	data, err := os.ReadFile(filepath.Join(cfg.LogDir(), controlLogName))
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	return lines[len(lines)-1]
}

// makeDir creates dir with mode, whatever the umask.
func makeDir(dir string, mode os.FileMode) error {
	if err := os.MkdirAll(dir, mode); err != nil {
		return err
	}
	return os.Chmod(dir, mode)
}
