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

// Supervisor keeps one GPU's control daemon running while claims use it:
// a daemon that exits without being told to quit is started again with
// its settings, after a backoff.
type Supervisor struct {
	cfg       Config
	backoff   wait.Backoff
	onRestart func(Process)
	done      chan struct{}

	mu       sync.Mutex
	settings Settings
	proc     Process
	restarts int
	quitting bool
}

// Supervise watches process p, the daemon of cfg with settings s (just
// started, or adopted), until ctx ends or Quit. onRestart, when set, runs
// after each restart.
func Supervise(ctx context.Context, cfg Config, s Settings, p Process, backoff wait.Backoff, onRestart func(Process)) *Supervisor {
	sv := &Supervisor{cfg: cfg, backoff: backoff, onRestart: onRestart, done: make(chan struct{}), settings: s, proc: p}
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
	backoff := sv.backoff
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
			backoff = sv.backoff
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
			if sv.restart(ctx) {
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

// restart starts the daemon again unless Quit was called; it reports
// whether supervision goes on.
func (sv *Supervisor) restart(ctx context.Context) bool {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	if sv.quitting {
		return true
	}
	p, err := Start(ctx, sv.cfg, sv.settings)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Starting the MPS control daemon again failed; will retry", "gpu", sv.cfg.GPU)
		return false
	}
	sv.proc = p
	sv.restarts++
	if sv.onRestart != nil {
		sv.onRestart(p)
	}
	return true
}
