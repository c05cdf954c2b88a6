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
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	api "github.com/vgpu-dra/vgpu-dra-driver/api/vgpu.dra.dev/v1alpha1"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/claimcdi"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/devices"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/discovery"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/mpsdaemon"
)

// The MPS sharing mode (docs/mps.md): a limit on a GPU's MPS device
// ("gpu-<index>-mps"), whose claims run their kernels at the same time
// through one NVIDIA MPS control daemon per GPU. The first claim's prepare
// starts the daemon, each prepare and unprepare sets its defaults to the
// ceiling of the claims using it, the last claim's unprepare stops it.

// modeMPS names the MPS mode; GPULimit.MPS set means a limit of it.
const modeMPS modeName = "mps"

// Steps of a GPU's control daemon, each recorded before it is taken.
const (
	stepMPSDaemonStart    step = "mps-daemon-start"
	stepMPSDaemonSettings step = "mps-daemon-settings"
	stepMPSDaemonQuit     step = "mps-daemon-quit"
)

// mpsQuitTimeout bounds the wait for a daemon told to quit; then it is
// killed.
const mpsQuitTimeout = 10 * time.Second

// mpsDirName is the directory of the daemons' directories in the state
// root: <state root>/mps/<GPU UUID>.
const mpsDirName = "mps"

// MPSDir is where the GPUs' daemon directories are in state root
// stateRoot: <state root>/mps/<GPU UUID>.
func MPSDir(stateRoot string) string { return filepath.Join(stateRoot, mpsDirName) }

// MPSOptions runs the GPUs' MPS control daemons.
type MPSOptions struct {
	// Control is the path of the node driver's nvidia-cuda-mps-control.
	Control string
	// Env is the environment every run of Control starts from.
	Env []string
	// Runner runs Control; nil runs it directly.
	Runner mpsdaemon.Runner
	// RestartBackoff is the delay before each try to start a daemon that
	// died while claims use it; zero means mpsdaemon.DefaultBackoff.
	RestartBackoff wait.Backoff
	// Users, when set, serves each MPS claim's host/mps.sock, on which its
	// processes ask whether their uid may use the GPU's MPS server now
	// (pkg/node/mpsusernode, docs/mps.md "Containers of different users").
	Users MPSUsers
}

// MPSUsers is the per-claim MPS user socket's server.
type MPSUsers interface {
	// ServeClaim serves the claim's socket for its MPS GPUs; it runs in
	// every prepare of an MPS claim after its files, before its CDI spec
	// is written (an error fails the prepare), and does nothing for a
	// claim already served.
	ServeClaim(ctx context.Context, uid types.UID, socket string, gpus []string) error
	// ReleaseClaim stops serving a claim whose files are gone.
	ReleaseClaim(uid types.UID)
}

// MPSGPUs returns the UUIDs of the GPUs of c's MPS limits.
func (c *PreparedClaim) MPSGPUs() []string { return mpsGPUs(c) }

// MPSServers lists the running MPS servers of GPU gpu's control daemon,
// each with its owner and clients; the daemon is asked without the
// manager's lock.
func (m *Manager) MPSServers(ctx context.Context, gpu string) ([]mpsdaemon.Server, error) {
	if m.opts.MPS == nil {
		return nil, nil
	}
	return mpsdaemon.Servers(ctx, m.mps.config(gpu))
}

// mpsUsers is the MPS user socket's server, nil without one.
func (m *Manager) mpsUsers() MPSUsers {
	if m.opts.MPS == nil {
		return nil
	}
	return m.opts.MPS.Users
}

func (o *Options) validateMPS() []error {
	if o.MPS != nil && !filepath.IsAbs(o.MPS.Control) {
		return []error{fmt.Errorf("MPS control program %q must be an absolute path", o.MPS.Control)}
	}
	return nil
}

// daemonState is the progress of a GPU's control daemon in the checkpoint.
type daemonState string

const (
	// daemonStarting: the daemon may run (started before a crash) or
	// not; prepare starts it, replacing what runs, recovery stops it.
	daemonStarting daemonState = "Starting"
	// daemonRunning: the daemon runs with the recorded pid and start
	// time, its defaults set.
	daemonRunning daemonState = "Running"
	// daemonStopping: no claim uses it any more; it is told to quit.
	daemonStopping daemonState = "Stopping"
)

// daemonRecord is the control daemon of one GPU, stored in the checkpoint
// under the GPU's UUID.
type daemonRecord struct {
	State daemonState `json:"state"`
	// PID and StartTime identify the daemon once it was started.
	PID       int    `json:"pid,omitempty"`
	StartTime uint64 `json:"startTime,omitempty"`
	// Claims are the claims with an MPS limit on the GPU; the last one to
	// go stops the daemon.
	Claims []types.UID `json:"claims"`
}

func (r *daemonRecord) process() mpsdaemon.Process {
	return mpsdaemon.Process{PID: r.PID, StartTime: r.StartTime}
}

// mpsMode is the MPS sharing mode of one Manager.
type mpsMode struct {
	m *Manager
	// supervising is set once the manager has started: recovery runs
	// before any supervisor may take the manager's lock.
	supervising bool
	// supervisors watch the Running daemons, by GPU UUID: a daemon that
	// dies is started again with backoff (docs/mps.md, supervised).
	supervisors map[string]*mpsdaemon.Supervisor
	// restarts counts each GPU's daemon restarts since the manager
	// started, by the supervisors and by a prepare that found the daemon
	// dead.
	restarts map[string]int
}

func newMPSMode(m *Manager) *mpsMode {
	return &mpsMode{m: m, supervisors: map[string]*mpsdaemon.Supervisor{}, restarts: map[string]int{}}
}

var _ sharingMode = (*mpsMode)(nil)

// config is the daemon of GPU gpuUUID.
func (mm *mpsMode) config(gpuUUID string) mpsdaemon.Config {
	cfg := mpsdaemon.Config{Dir: filepath.Join(MPSDir(mm.m.opts.StateRoot), gpuUUID), GPU: gpuUUID}
	if o := mm.m.opts.MPS; o != nil {
		cfg.Control, cfg.Env, cfg.Runner = o.Control, o.Env, o.Runner
	}
	cfg.MemAcct = mm.memAcct(gpuUUID)
	return cfg
}

// memAcct reports whether GPU gpuUUID's daemon runs with memory accounting:
// its driver is r615 or later. Its MPS claims' configs then carry the
// limit the driver holds each client to (mps.driverMemoryLimit).
func (mm *mpsMode) memAcct(gpuUUID string) bool {
	info, ok := mm.m.infoByUUID(gpuUUID)
	return ok && memAcctDriver(info.DriverVersion)
}

// memAcctFirstDriver is the first driver branch whose MPS control daemon
// accounts for its clients' memory (memacct, docs/mps.md).
const memAcctFirstDriver = 615

// memAcctDriver reports whether driver version v ("615.20.01", as NVML
// gives it) has memacct; an unreadable version has not.
func memAcctDriver(v string) bool {
	major, _, _ := strings.Cut(v, ".")
	n, err := strconv.Atoi(major)
	return err == nil && n >= memAcctFirstDriver
}

// resolve returns, for "gpu-<index>-mps" of a GPU that is not in MIG
// mode, the GPU's Info and an MPS limit on it.
func (mm *mpsMode) resolve(name string) (discovery.Info, GPULimit, bool) {
	index, ok := devices.ParseMPSDeviceName(name)
	if !ok {
		return discovery.Info{}, GPULimit{}, false
	}
	gpu := devices.Name(index)
	info, found := mm.m.opts.Devices[gpu]
	if !found || mm.m.opts.MIGGPUs[gpu].Enabled {
		return discovery.Info{}, GPULimit{}, false
	}
	return info, GPULimit{UUID: info.UUID, MPS: true}, true
}

// limitKey is empty: a GPU has one MPS limit per claim.
func (mm *mpsMode) limitKey(GPULimit) string { return "" }

func (mm *mpsMode) order(GPULimit) int { return 0 }

// burstable is false: the daemon's pinned-memory ceiling is the largest
// claim's guarantee.
func (mm *mpsMode) burstable() bool { return false }

// planned: prepare fills in nothing of an MPS limit.
func (mm *mpsMode) planned(*GPULimit) {}

// mpsGPUs returns the UUIDs of c's MPS limits.
func mpsGPUs(c *PreparedClaim) []string {
	var out []string
	for _, g := range c.GPUs {
		if g.MPS && !slices.Contains(out, g.UUID) {
			out = append(out, g.UUID)
		}
	}
	return out
}

// reserve adds claim pc to the daemon records of its GPUs, a Starting one
// where none runs. A record left Stopping (its quit failed) starts again:
// starting replaces whatever daemon of the GPU still runs.
func (mm *mpsMode) reserve(pc *PreparedClaim) {
	c := mm.m.cp
	for _, gpu := range mpsGPUs(pc) {
		r := c.Daemons[gpu]
		if r == nil {
			r = &daemonRecord{State: daemonStarting}
			if c.Daemons == nil {
				c.Daemons = map[string]*daemonRecord{}
			}
			c.Daemons[gpu] = r
		}
		if r.State == daemonStopping {
			r.State = daemonStarting
		}
		if !slices.Contains(r.Claims, pc.UID) {
			r.Claims = append(r.Claims, pc.UID)
		}
	}
}

// ceiling is what the daemon of GPU gpu is set to: the largest share and
// memory limit of the MPS claims r holds. A client may lower its own
// values, never raise them, so the ceiling bounds every claim.
func (mm *mpsMode) ceiling(gpu string, r *daemonRecord) mpsdaemon.Settings {
	var pct int64
	var mem uint64
	for _, uid := range r.Claims {
		rec, ok := mm.m.cp.Claims[uid]
		if !ok {
			continue
		}
		for _, g := range rec.GPUs {
			if g.MPS && g.UUID == gpu {
				pct, mem = max(pct, g.SMLimitPercent), max(mem, g.MemoryLimitBytes)
			}
		}
	}
	return mpsdaemon.Settings{ActiveThreadPercent: int(pct), PinnedMemoryLimitGiB: (mem + bytesPerGiB - 1) / bytesPerGiB}
}

const bytesPerGiB = 1 << 30

// realise starts the daemons of c's GPUs that do not run (a dead one
// included) and raises their defaults to the ceiling. It never changes a
// reference of c.
func (mm *mpsMode) realise(ctx context.Context, c *PreparedClaim) (bool, error) {
	for _, gpu := range mpsGPUs(c) {
		r := mm.m.cp.Daemons[gpu]
		if r == nil {
			// A claim restored without a record: it gets one.
			mm.reserve(c)
			r = mm.m.cp.Daemons[gpu]
		}
		if err := mm.ensureDaemon(ctx, gpu, r, c.UID); err != nil {
			return false, err
		}
	}
	return false, nil
}

// ensureDaemon brings record r of GPU gpu to a Running daemon with the
// ceiling of its claims, saving the checkpoint after each step.
func (mm *mpsMode) ensureDaemon(ctx context.Context, gpu string, r *daemonRecord, uid types.UID) error {
	m := mm.m
	if m.opts.MPS == nil {
		return errors.New("MPS is not enabled in this plugin")
	}
	cfg, want := mm.config(gpu), mm.ceiling(gpu, r)
	if r.State == daemonRunning {
		p, err := mpsdaemon.Adopt(ctx, cfg)
		if errors.Is(err, mpsdaemon.ErrRunnerUnavailable) && p == r.process() {
			// The recorded daemon runs but cannot be asked: it is kept for
			// its clients, and the claim is retried by the kubelet.
			return fmt.Errorf("GPU %s: %w", gpu, err)
		}
		if err != nil || p != r.process() {
			klog.FromContext(ctx).Info("The MPS control daemon is gone; starting it again", "gpu", gpu, "pid", r.PID, "err", err)
			r.State = daemonStarting
			mm.restarts[gpu]++
		}
	}
	if r.State != daemonRunning {
		// Start replaces a daemon of the directory that still runs.
		p, err := mpsdaemon.Start(ctx, cfg, want)
		if err != nil {
			return err
		}
		r.PID, r.StartTime = p.PID, p.StartTime
		if err := m.saveCheckpoint(); err != nil {
			return err
		}
		if err := m.step(stepMPSDaemonStart, uid); err != nil {
			return err
		}
		r.State = daemonRunning
		if err := m.saveCheckpoint(); err != nil {
			return err
		}
		mm.supervise(gpu, r)
		return m.step(stepMPSDaemonSettings, uid)
	}
	mm.supervise(gpu, r)
	return mm.applyCeiling(ctx, gpu, r, uid)
}

// supervise makes sure a supervisor watches the daemon of Running record
// r, replacing one that watches another process of the GPU. Before the
// manager has started it does nothing: the manager then supervises every
// Running daemon (superviseAll).
func (mm *mpsMode) supervise(gpu string, r *daemonRecord) {
	if !mm.supervising {
		return
	}
	p := r.process()
	if sv := mm.supervisors[gpu]; sv != nil {
		select {
		case <-sv.Done():
		default:
			if sv.Process() == p {
				return
			}
		}
		sv.Stop()
	}
	backoff := mm.m.opts.MPS.RestartBackoff
	if backoff == (wait.Backoff{}) {
		backoff = mpsdaemon.DefaultBackoff
	}
	logger := klog.FromContext(mm.m.bgCtx)
	mm.supervisors[gpu] = mpsdaemon.Supervise(mm.m.bgCtx, mm.config(gpu), mm.ceiling(gpu, r), p, mpsdaemon.SupervisorOptions{
		Backoff: backoff,
		Guard:   func(dead mpsdaemon.Process) (func(), bool, error) { return mm.guardRestart(gpu, dead) },
		// The ceiling of the claims as the checkpoint has them now: a
		// setting that failed with the daemon that died is made good.
		Settings:  func() mpsdaemon.Settings { return mm.ceiling(gpu, mm.m.cp.Daemons[gpu]) },
		OnRestart: func(np mpsdaemon.Process) { mm.restarted(logger, gpu, np) },
	})
}

// superviseAll starts supervising the Running daemons of prepared claims,
// once the manager has started.
func (mm *mpsMode) superviseAll() error {
	end, err := mm.m.begin()
	if err != nil {
		return err
	}
	defer end()
	mm.supervising = true
	for _, gpu := range sortedKeys(mm.m.cp.Daemons) {
		if r := mm.m.cp.Daemons[gpu]; r.State == daemonRunning && len(r.Claims) > 0 {
			mm.supervise(gpu, r)
		}
	}
	return nil
}

// guardRestart takes the manager's lock for a supervisor's restart of the
// daemon dead of GPU gpu, as long as the checkpoint still holds dead as
// the GPU's Running daemon of some claims: a prepare, an unprepare or
// another plugin instance may have stopped or replaced it meanwhile.
func (mm *mpsMode) guardRestart(gpu string, dead mpsdaemon.Process) (func(), bool, error) {
	end, err := mm.m.begin()
	if err != nil {
		return nil, false, err
	}
	r := mm.m.cp.Daemons[gpu]
	if r == nil || r.State != daemonRunning || len(r.Claims) == 0 || r.process() != dead {
		end()
		return nil, false, nil
	}
	return end, true, nil
}

// restarted records a supervisor's restart of GPU gpu's daemon as np, with
// the manager's lock held (guardRestart).
func (mm *mpsMode) restarted(logger klog.Logger, gpu string, np mpsdaemon.Process) {
	mm.restarts[gpu]++
	r := mm.m.cp.Daemons[gpu]
	r.PID, r.StartTime = np.PID, np.StartTime
	if err := mm.m.saveCheckpoint(); err != nil {
		// The next prepare or start finds the recorded pid gone and
		// replaces the daemon.
		logger.Error(err, "Recording the restarted MPS control daemon failed", "gpu", gpu, "pid", np.PID)
		return
	}
	logger.Info("Restarted the MPS control daemon", "gpu", gpu, "pid", np.PID, "restarts", mm.restarts[gpu])
}

// applyCeiling sets the defaults of Running daemon r to its claims'
// ceiling where they differ.
func (mm *mpsMode) applyCeiling(ctx context.Context, gpu string, r *daemonRecord, uid types.UID) error {
	cfg, want := mm.config(gpu), mm.ceiling(gpu, r)
	have, err := mpsdaemon.Read(ctx, cfg)
	if err != nil {
		return fmt.Errorf("read the MPS defaults of GPU %s: %w", gpu, err)
	}
	if have == want {
		return nil
	}
	if err := mpsdaemon.Apply(ctx, cfg, want); err != nil {
		return fmt.Errorf("set the MPS defaults of GPU %s: %w", gpu, err)
	}
	klog.FromContext(ctx).V(2).Info("Set MPS defaults", "gpu", gpu, "activeThreadPercent", want.ActiveThreadPercent, "pinnedMemoryLimitGiB", want.PinnedMemoryLimitGiB)
	return mm.m.step(stepMPSDaemonSettings, uid)
}

// deviceEdits adds to the GPU's own edits the daemon's pipe directory,
// the variable naming it and the host's /dev/shm.
func (mm *mpsMode) deviceEdits(g GPULimit, gpu cdispec.ContainerEdits) (cdispec.ContainerEdits, error) {
	if r := mm.m.cp.Daemons[g.UUID]; r == nil || r.State != daemonRunning {
		return cdispec.ContainerEdits{}, fmt.Errorf("the MPS control daemon of GPU %s is not running", g.UUID)
	}
	out := gpu
	add := claimcdi.MPSEdits(g.UUID, mm.config(g.UUID).PipeDir())
	out.Env = append(slices.Clone(gpu.Env), add.Env...)
	out.Mounts = append(slices.Clone(gpu.Mounts), add.Mounts...)
	return out, nil
}

// release drops uid from the daemon records and marks those left without
// claims Stopping. With complete, a record without a pid was never started
// and is dropped.
func (mm *mpsMode) release(uid types.UID, complete bool) bool {
	c := mm.m.cp
	changed := false
	for gpu, r := range c.Daemons {
		if i := slices.Index(r.Claims, uid); i >= 0 {
			r.Claims = slices.Delete(r.Claims, i, i+1)
			changed = true
		}
		if len(r.Claims) == 0 && r.State != daemonStopping {
			r.State = daemonStopping
			changed = true
		}
		if complete && r.State == daemonStopping && r.PID == 0 {
			delete(c.Daemons, gpu)
		}
	}
	return changed
}

// teardown stops the daemons no claim uses, lowers the defaults of the
// others to their claims' ceiling and starts those of claims that are not
// running.
func (mm *mpsMode) teardown(ctx context.Context, uid types.UID) error {
	var errs []error
	for _, gpu := range sortedKeys(mm.m.cp.Daemons) {
		r := mm.m.cp.Daemons[gpu]
		switch {
		case r.State == daemonStopping:
			errs = append(errs, mm.stop(ctx, gpu, r, uid))
		case r.State == daemonRunning && len(r.Claims) > 0:
			errs = append(errs, mm.applyCeiling(ctx, gpu, r, uid))
		case r.State == daemonStarting && len(r.Claims) > 0:
			// A failed prepare that found the daemon of other claims dead
			// could not start it: they need it back now, not at the next
			// prepare on the GPU.
			errs = append(errs, mm.ensureDaemon(ctx, gpu, r, uid))
		}
	}
	return errors.Join(errs...)
}

// stop ends the daemon of record r with its directories (quitDaemon) and
// drops the record.
func (mm *mpsMode) stop(ctx context.Context, gpu string, r *daemonRecord, uid types.UID) error {
	m := mm.m
	if err := mm.quitDaemon(ctx, gpu, r); err != nil {
		return err
	}
	if err := m.step(stepMPSDaemonQuit, uid); err != nil {
		return err
	}
	delete(m.cp.Daemons, gpu)
	if err := m.saveCheckpoint(); err != nil {
		return err
	}
	klog.FromContext(ctx).V(2).Info("Stopped MPS control daemon", "gpu", gpu, "pid", r.PID)
	return nil
}

// quitDaemon tells the daemon of GPU gpu to quit, kills it after
// mpsQuitTimeout (only the recorded process, or the one the directory's
// pid file names) and removes its directories.
func (mm *mpsMode) quitDaemon(ctx context.Context, gpu string, r *daemonRecord) error {
	if sv := mm.supervisors[gpu]; sv != nil {
		sv.Stop()
		delete(mm.supervisors, gpu)
	}
	cfg := mm.config(gpu)
	p := r.process()
	if mm.m.opts.MPS != nil {
		// Also a daemon started before a crash let its pid be recorded.
		if running, err := mpsdaemon.Adopt(ctx, cfg); err == nil {
			p = running
		}
	}
	quitCtx, cancel := context.WithTimeout(ctx, mpsQuitTimeout)
	defer cancel()
	if err := mpsdaemon.Quit(quitCtx, cfg, p); err != nil {
		return fmt.Errorf("stop the MPS control daemon of GPU %s: %w", gpu, err)
	}
	return nil
}

// recover compares the daemon records with the daemons that run
// (docs/mps.md, recovery): a Running daemon of prepared claims that
// answers with the recorded pid and start time is adopted; a dead one is
// marked Starting, to be started again when its claims are restored; every
// other daemon (Starting or Stopping after a crash, or used by no prepared
// claim) is stopped, and its record dropped unless prepared claims need a
// new one.
func (mm *mpsMode) recover(ctx context.Context) {
	m := mm.m
	logger := klog.FromContext(ctx)
	if len(m.cp.Daemons) == 0 {
		return
	}
	if m.opts.MPS == nil {
		logger.Error(nil, "The checkpoint holds MPS control daemons but MPS is not enabled; they are kept until the plugin runs with MPS again", "gpus", len(m.cp.Daemons))
		return
	}
	for _, gpu := range sortedKeys(m.cp.Daemons) {
		r := m.cp.Daemons[gpu]
		r.Claims = slices.DeleteFunc(r.Claims, func(uid types.UID) bool {
			rec, ok := m.cp.Claims[uid]
			return !ok || rec.State != statePrepareCompleted
		})
		if r.State == daemonRunning && len(r.Claims) > 0 {
			p, err := mpsdaemon.Adopt(ctx, mm.config(gpu))
			if err == nil && p == r.process() {
				logger.Info("Adopted the MPS control daemon", "gpu", gpu, "pid", p.PID)
				continue
			}
			if errors.Is(err, mpsdaemon.ErrRunnerUnavailable) && p == r.process() {
				// The plugin started before the mps-host pod serves: the
				// daemon runs, so it is kept, and the first prepare on the
				// GPU once mps-host answers adopts it.
				logger.Info("The MPS control daemon runs but mps-host does not answer yet; keeping it for its claims", "gpu", gpu, "pid", p.PID, "err", err)
				continue
			}
			logger.Info("The MPS control daemon of prepared claims is gone; starting it again", "gpu", gpu, "pid", r.PID, "err", err)
		}
		if len(r.Claims) == 0 {
			r.State = daemonStopping
			if err := mm.stop(ctx, gpu, r, ""); err != nil {
				logger.Error(err, "Stopping an MPS control daemon no claim uses failed; the next unprepare or start retries", "gpu", gpu)
			}
			continue
		}
		// Prepared claims need a daemon: what runs of this one goes, and
		// restoring the claims starts a new one (Start also replaces a
		// daemon this could not stop).
		if err := mm.quitDaemon(ctx, gpu, r); err != nil {
			logger.Error(err, "Stopping an MPS control daemon to start it again failed", "gpu", gpu)
		}
		r.State, r.PID, r.StartTime = daemonStarting, 0, 0
	}
	if err := m.saveCheckpoint(); err != nil {
		logger.Error(err, "Recording the MPS control daemons' recovery failed")
	}
}

// checkMPSResult checks an allocation result of an MPS device (path) with
// the settings its request resolved to: an MPS client always has a share
// of the SMs, and the share is the hardware's, so no compute policy but
// strict applies.
func checkMPSResult(path *field.Path, request string, dev PreparedDevice, s Settings) field.ErrorList {
	var errs field.ErrorList
	if dev.Cores < 1 {
		errs = append(errs, field.Invalid(path.Child("consumedCapacity").Key(string(capacityCores)), dev.Cores,
			"an MPS device's share of the SMs must be 1..100"))
	}
	if s.ComputePolicy != api.ComputePolicyStrict {
		errs = append(errs, field.Invalid(field.NewPath("status", "allocation", "devices", "config"), request,
			fmt.Sprintf("request %q: computePolicy %s does not apply to an MPS device (its SM share is the hardware's); use strict", request, s.ComputePolicy)))
	}
	return errs
}

// checkMPSAlone refuses a claim with an MPS limit and another limit on
// the same GPU (a GPU serves one sharing mode at a time), and one with MPS
// limits of two GPUs: each GPU's daemon has its own pipe directory, and a
// process reaches one (CUDA_MPS_PIPE_DIRECTORY).
func checkMPSAlone(resultsPath *field.Path, c *PreparedClaim) field.ErrorList {
	var errs field.ErrorList
	if gpus := mpsGPUs(c); len(gpus) > 1 {
		errs = append(errs, field.Invalid(resultsPath, gpus,
			"the claim has MPS devices of two GPUs; a claim holds one MPS device, since each GPU in MPS use has a control daemon of its own and a process reaches one"))
	}
	for _, gpu := range mpsGPUs(c) {
		n := 0
		for _, g := range c.GPUs {
			if g.UUID == gpu {
				n++
			}
		}
		if n > 1 {
			errs = append(errs, field.Invalid(resultsPath, gpu,
				"the claim has an MPS device and another device of the same GPU; a GPU serves MPS claims or others, not both"))
		}
	}
	return errs
}

// mpsSection is the MPS mode's part of the checkpoint: the control
// daemons by the UUID of their GPU (version 3).
var mpsSection = checkpointSection{
	mode:    modeMPS,
	key:     "mpsDaemons",
	version: checkpointVersion3,
	encode: func(c *checkpoint) ([]byte, error) {
		if len(c.Daemons) == 0 {
			return nil, nil
		}
		return json.Marshal(c.Daemons)
	},
	decode: func(c *checkpoint, data []byte) error {
		daemons, err := decodeStrict[map[string]*daemonRecord](data)
		c.Daemons = daemons
		return err
	},
	validateLimit: func(path *field.Path, g GPULimit) field.ErrorList {
		var errs field.ErrorList
		if g.SMLimitPercent < 1 || g.SMLimitPercent > maxCores {
			errs = append(errs, field.Invalid(path.Child("smLimitPercent"), g.SMLimitPercent, "must be 1..100 under MPS"))
		}
		if g.BurstLimitBytes != 0 {
			errs = append(errs, field.Invalid(path.Child("burstLimitBytes"), g.BurstLimitBytes, "must be 0 under MPS"))
		}
		if g.MIG != nil {
			errs = append(errs, field.Invalid(path.Child("mig"), g.MIG, "must be unset under MPS"))
		}
		return errs
	},
	validate: validateDaemons,
}

// validateDaemons checks the daemon records against the claims.
func validateDaemons(c *checkpoint) error {
	var errs []error
	for gpu, r := range c.Daemons {
		path := fmt.Sprintf("mpsDaemons[%s]", gpu)
		if !configUUID.MatchString(gpu) {
			errs = append(errs, fmt.Errorf("%s: must be a GPU UUID", path))
		}
		if r == nil {
			errs = append(errs, fmt.Errorf("%s: entry is null", path))
			continue
		}
		switch r.State {
		case daemonStarting, daemonRunning, daemonStopping:
		default:
			errs = append(errs, fmt.Errorf("%s.state: unsupported value %q", path, r.State))
		}
		if r.PID < 0 {
			errs = append(errs, fmt.Errorf("%s.pid: must not be negative", path))
		}
		if r.State == daemonRunning && r.PID == 0 {
			errs = append(errs, fmt.Errorf("%s: a Running daemon has a pid", path))
		}
		for _, uid := range r.Claims {
			if _, ok := c.Claims[uid]; !ok {
				errs = append(errs, fmt.Errorf("%s.claims: %s is not a claim of the checkpoint", path, uid))
			}
		}
	}
	return errors.Join(errs...)
}

// MPSDaemonStatus is one GPU's MPS control daemon as the metrics show it.
type MPSDaemonStatus struct {
	// GPU is the GPU's UUID.
	GPU string
	// Up: the daemon the checkpoint records runs and answers a control
	// command.
	Up bool
	// Restarts counts the daemon's restarts since the manager started.
	Restarts int
}

// MPSDaemons returns the GPUs with an MPS control daemon record or a
// restart since the manager started, sorted by UUID. The daemons are
// asked outside the manager's lock, so that a slow daemon holds no
// prepare.
func (m *Manager) MPSDaemons(ctx context.Context) []MPSDaemonStatus {
	if m.opts.MPS == nil {
		return nil
	}
	end, err := m.begin()
	if err != nil {
		klog.FromContext(ctx).Error(err, "Reading the MPS control daemons failed")
		return nil
	}
	running := map[string]mpsdaemon.Process{}
	gpus := map[string]int{}
	for gpu, n := range m.mps.restarts {
		gpus[gpu] = n
	}
	for gpu, r := range m.cp.Daemons {
		gpus[gpu] = m.mps.restarts[gpu]
		if r.State == daemonRunning {
			running[gpu] = r.process()
		}
	}
	end()
	out := make([]MPSDaemonStatus, 0, len(gpus))
	for _, gpu := range sortedKeys(gpus) {
		st := MPSDaemonStatus{GPU: gpu, Restarts: gpus[gpu]}
		if p, ok := running[gpu]; ok {
			have, err := mpsdaemon.Adopt(ctx, m.mps.config(gpu))
			st.Up = err == nil && have == p
		}
		out = append(out, st)
	}
	return out
}
