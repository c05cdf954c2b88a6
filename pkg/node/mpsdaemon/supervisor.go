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
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
)

// DefaultBackoff is the restart backoff of a daemon that keeps failing:
// 1 s, doubling up to 5 min; it starts again from 1 s once a daemon ran
// for longer than the cap.
var DefaultBackoff = wait.Backoff{Duration: time.Second, Factor: 2, Steps: 32, Cap: 5 * time.Minute}

// SupervisorOptions are how a Supervisor restarts its daemon.
type SupervisorOptions struct {
	// Backoff is the delay before each try to start the daemon again
	// (DefaultBackoff in the plugin).
	Backoff wait.Backoff
	// Guard, when set, runs around each restart of dead, the daemon that
	// exited: it takes the caller's locks, so that the restart does not
	// race with the caller's own changes to the daemon, and reports
	// whether the daemon is still the caller's to restart (false ends the
	// supervision: the caller stopped or replaced it meanwhile, and the
	// locks are dropped already). release drops the locks after the
	// restart and OnRestart. An error skips
	// this try; the next comes after the backoff.
	Guard func(dead Process) (release func(), restart bool, err error)
	// Settings, when set, returns the settings of each restart, inside
	// Guard (the caller's current ones, which SetSettings then need not
	// follow); unset, a restart sets the last ones given.
	Settings func() Settings
	// OnRestart, when set, runs after each restart, inside Guard.
	OnRestart func(Process)
}

// Supervisor keeps one GPU's control daemon running while claims use it:
// a daemon that exits without being told to quit is started again with
// its settings, after a backoff.
type Supervisor struct {
	cfg    Config
	opts   SupervisorOptions
	done   chan struct{}
	cancel context.CancelFunc

	mu       sync.Mutex
	settings Settings
	proc     Process
	restarts int
	quitting bool
}

// Supervise watches process p, the daemon of cfg with settings s (just
// started, or adopted), until ctx ends, Stop or Quit.
func Supervise(ctx context.Context, cfg Config, s Settings, p Process, opts SupervisorOptions) *Supervisor {
	ctx, cancel := context.WithCancel(ctx)
	sv := &Supervisor{cfg: cfg, opts: opts, done: make(chan struct{}), cancel: cancel, settings: s, proc: p}
	go sv.run(ctx)
	return sv
}

// Process returns the daemon now supervised.
func (sv *Supervisor) Process() Process {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	return sv.proc
}

// Restarts returns how often the daemon was started again.
func (sv *Supervisor) Restarts() int {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	return sv.restarts
}

// SetSettings changes the daemon's defaults, now and for its restarts.
func (sv *Supervisor) SetSettings(ctx context.Context, s Settings) error {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	if err := Apply(ctx, sv.cfg, s); err != nil {
		return fmt.Errorf("MPS settings of GPU %s: %w", sv.cfg.GPU, err)
	}
	sv.settings = s
	return nil
}

// Stop ends the supervision without waiting for it and leaves the daemon
// as it is; a restart under way when Stop is called (which Guard lets
// wait for the caller's locks) starts nothing.
func (sv *Supervisor) Stop() {
	sv.mu.Lock()
	sv.quitting = true
	sv.mu.Unlock()
	sv.cancel()
}

// Done is closed once the supervision has ended.
func (sv *Supervisor) Done() <-chan struct{} { return sv.done }

// Quit stops supervising, tells the daemon to quit and waits for it (see
// Quit).
func (sv *Supervisor) Quit(ctx context.Context) error {
	sv.mu.Lock()
	sv.quitting = true
	p := sv.proc
	sv.mu.Unlock()
	err := Quit(ctx, sv.cfg, p)
	select {
	case <-sv.done:
	case <-ctx.Done():
	}
	return err
}

func (sv *Supervisor) run(ctx context.Context) {
	defer close(sv.done)
	logger := klog.FromContext(ctx).WithValues("gpu", sv.cfg.GPU)
	backoff := sv.opts.Backoff
	started := time.Now()
	for {
		p := sv.Process()
		if exited, err := waitExit(ctx, p); !exited {
			if err != nil && ctx.Err() == nil {
				logger.Error(err, "Watching the MPS control daemon failed", "pid", p.PID)
			}
			return
		}
		if time.Since(started) > backoff.Cap {
			backoff = sv.opts.Backoff
		}
		for {
			if sv.stopping() {
				return
			}
			delay := backoff.Step()
			logger.Info("MPS control daemon exited; starting it again", "pid", p.PID, "after", delay, "lastLogLine", lastLogLine(sv.cfg))
			select {
			case <-ctx.Done():
				return
			case <-time.After(delay):
			}
			if sv.restart(ctx, p) {
				started = time.Now()
				break
			}
		}
	}
}

func (sv *Supervisor) stopping() bool {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	return sv.quitting
}

// restart starts the daemon dead again unless Stop or Quit was called or
// the Guard refuses; it reports whether this try is over (restarted, or
// nothing to restart).
func (sv *Supervisor) restart(ctx context.Context, dead Process) bool {
	if sv.opts.Guard != nil {
		release, restart, err := sv.opts.Guard(dead)
		if err != nil {
			klog.FromContext(ctx).Error(err, "Cannot restart the MPS control daemon now; will retry", "gpu", sv.cfg.GPU)
			return false
		}
		if !restart {
			sv.mu.Lock()
			sv.quitting = true
			sv.mu.Unlock()
			return true
		}
		defer release()
	}
	sv.mu.Lock()
	defer sv.mu.Unlock()
	if sv.quitting || ctx.Err() != nil {
		return true
	}
	if sv.opts.Settings != nil {
		sv.settings = sv.opts.Settings()
	}
	p, err := Start(ctx, sv.cfg, sv.settings)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Starting the MPS control daemon again failed; will retry", "gpu", sv.cfg.GPU)
		return false
	}
	sv.proc = p
	sv.restarts++
	if sv.opts.OnRestart != nil {
		sv.opts.OnRestart(p)
	}
	return true
}
