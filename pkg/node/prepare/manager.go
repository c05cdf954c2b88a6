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
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/claimcdi"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/discovery"
)

// DefaultBootIDPath is where Linux publishes the current boot's ID.
const DefaultBootIDPath = "/proc/sys/kernel/random/boot_id"

// Options configures a Manager.
type Options struct {
	// DriverName is the DRA driver name ("vgpu.dra.dev").
	DriverName string
	// NodeName is this node, which is also the name of its pool.
	NodeName string
	// StateRoot holds the claim directories, the checkpoint and
	// ld.so.preload (/var/lib/vgpu-dra).
	StateRoot string
	// CDIRoot is the directory for the claim specs (/var/run/cdi).
	CDIRoot string
	// LibVGPUPath is the host path of libvgpu.so, mounted read-only at
	// /usr/local/vgpu/libvgpu.so.
	LibVGPUPath string
	// Devices are the node's GPUs by DRA device name ("gpu-<index>").
	Devices map[string]discovery.Info
	// GPUEdits produces the container edits of a whole GPU.
	GPUEdits claimcdi.GPUEditsSource
	// BootIDPath is read to detect reboots; empty means DefaultBootIDPath.
	BootIDPath string
	// MIGGPUs is the MIG state, read at start, of the GPUs in MIG mode by
	// their device name ("gpu-<index>"). Their MIG devices
	// ("gpu-<index>-mig-<label>-<start>") and the whole-GPU device itself
	// are realised as MIG instances (docs/mig.md). Empty: no MIG.
	MIGGPUs map[string]discovery.MIGInfo
	// MIG creates and destroys the instances; required with MIGGPUs.
	MIG MIGLifecycle
	// MPS, when set, realises the MPS devices ("gpu-<index>-mps") of the
	// GPUs not in MIG mode with one MPS control daemon per GPU
	// (docs/mps.md). Nil: no MPS device resolves.
	MPS *MPSOptions
	// ProcRoot is where the NVIDIA driver's capability files are read for
	// the CDI specs of MIG instances; empty means /proc.
	ProcRoot string
	// Burst, when set, is told of claims as they are prepared and
	// unprepared (burstable memory, docs/architecture.md).
	Burst BurstHooks
	// BurstAdmissionWait bounds how long one prepare call waits, outside
	// the manager's lock, for burst memory to be reclaimed for a claim
	// (default DefaultBurstAdmissionWait; negative: no wait, the kubelet
	// retries at its next sync of the pod).
	BurstAdmissionWait time.Duration
}

// DefaultBurstAdmissionWait is Options.BurstAdmissionWait's default: long
// enough for a default 30 s reclaim grace period to run out within one
// call, short of the kubelet's timeout for a NodePrepareResources call
// (45 s in Kubernetes 1.37). A call never waits past its context's
// deadline less burstAdmissionMargin.
const DefaultBurstAdmissionWait = 35 * time.Second

// burstAdmissionMargin is left of a call's deadline for the prepare that
// follows the wait.
const burstAdmissionMargin = 5 * time.Second

// ErrWaitingForMemory marks a claim whose prepare waits for burst memory
// to be reclaimed; BurstHooks.AdmitClaim wraps it, and PrepareResourceClaims
// then waits (BurstHooks.WaitForMemory) and tries again within the same call.
var ErrWaitingForMemory = errors.New("waiting for burst memory to be reclaimed")

// BurstHooks is what the burst side of the plugin (pkg/node/burstnode) needs
// from prepare and unprepare. The claim passed has its host paths set.
type BurstHooks interface {
	// AdmitClaim runs before any file of a claim that is not prepared yet;
	// an error fails the claim's prepare, leaving nothing behind. An error
	// wrapping ErrWaitingForMemory makes the prepare wait and try again.
	AdmitClaim(ctx context.Context, c *PreparedClaim) error
	// WaitForMemory runs outside the manager's lock, after AdmitClaim made
	// the claim wait: it returns true once the claim would be admitted,
	// false when ctx ends first.
	WaitForMemory(ctx context.Context, uid types.UID) bool
	// EnsureClaim runs in every prepare (and restore) of a claim after its
	// files, before its CDI spec is written; an error fails the prepare.
	EnsureClaim(ctx context.Context, c *PreparedClaim) error
	// ReleaseClaim runs when the claim's files are gone: after unprepare
	// removed them or a failed prepare rolled them back.
	ReleaseClaim(ctx context.Context, uid types.UID)
}

func (o *Options) validate() error {
	var errs []error
	for name, v := range map[string]string{"driver name": o.DriverName, "node name": o.NodeName} {
		if v == "" {
			errs = append(errs, fmt.Errorf("%s is required", name))
		}
	}
	for name, v := range map[string]string{"state root": o.StateRoot, "CDI root": o.CDIRoot, "libvgpu.so path": o.LibVGPUPath} {
		if !filepath.IsAbs(v) {
			errs = append(errs, fmt.Errorf("%s %q must be an absolute path", name, v))
		}
	}
	if o.GPUEdits == nil {
		errs = append(errs, errors.New("GPU edits source is required"))
	}
	for name, info := range o.Devices {
		if info.UUID == "" {
			errs = append(errs, fmt.Errorf("device %s has no UUID", name))
		}
	}
	errs = append(errs, o.validateMIG()...)
	errs = append(errs, o.validateMPS()...)
	return errors.Join(errs...)
}

// restoreRetryInterval is the first delay before restoring claims again
// whose files could not be recreated at start; it doubles up to
// maxRestoreRetryInterval. A variable so that tests can shorten it.
var restoreRetryInterval = 5 * time.Second

// step names a point in prepare or unprepare after which a crash must leave
// a recoverable state; tests inject failures there.
type step string

const (
	stepCheckpointStarted step = "checkpoint-started"
	// A sharing mode's steps (a MIG instance's: migmode.go; an MPS daemon's:
	// mps.go) come here in
	// prepare, after stepCheckpointRemoved in unprepare.
	stepConfig              step = "config"
	stepRegionMount         step = "region-mount"
	stepRegion              step = "region"
	stepCDISpec             step = "cdi-spec"
	stepCheckpointCompleted step = "checkpoint-completed"
	stepRemoveCDISpec       step = "remove-cdi-spec"
	stepRegionUnmount       step = "region-unmount"
	stepRemoveClaimDir      step = "remove-claim-dir"
	stepCheckpointRemoved   step = "checkpoint-removed"
)

// Manager prepares and unprepares claims on one node. All methods are safe
// for concurrent use; calls are serialised.
type Manager struct {
	opts   Options
	layout layout
	specs  *claimcdi.ClaimSpecs

	mu        sync.Mutex
	stateLock *stateLock
	// cp is the checkpoint as of the current call; reloaded by begin.
	cp *checkpoint
	// afterStep, when set, runs after each step; an error fails the step.
	afterStep func(step, types.UID) error
	// staleDirAge is how long the directory of a claim that is not prepared
	// must be untouched before the sweep removes it.
	staleDirAge time.Duration

	// bgCtx is NewManager's context: background retries end with it.
	bgCtx context.Context
	// modes are the sharing modes by name (mode.go); deviceModes those
	// with devices on this node, which plan asks to resolve device names.
	modes       map[modeName]sharingMode
	deviceModes []sharingMode
	mig         *migMode
	mps         *mpsMode
}

// NewManager loads the checkpoint, writes StateRoot/ld.so.preload and
// recovers: claims whose prepare did not complete are rolled back, completed
// claims get missing files and CDI specs recreated (after a reboot the CDI
// root is empty; what cannot be recreated yet is retried in the background
// until ctx ends), and directories of claims that are not prepared are
// removed. A checkpoint that cannot be read or verified is an error:
// the manager refuses to start rather than forget prepared claims.
func NewManager(ctx context.Context, opts Options) (*Manager, error) {
	if opts.BurstAdmissionWait == 0 {
		opts.BurstAdmissionWait = DefaultBurstAdmissionWait
	}
	if opts.BootIDPath == "" {
		opts.BootIDPath = DefaultBootIDPath
	}
	if err := opts.validate(); err != nil {
		return nil, fmt.Errorf("claims manager options: %w", err)
	}
	// The caller's map must not change the manager's view later.
	opts.Devices = maps.Clone(opts.Devices)
	opts.MIGGPUs = maps.Clone(opts.MIGGPUs)
	specs, err := claimcdi.NewClaimSpecs(opts.CDIRoot)
	if err != nil {
		return nil, err
	}
	m := &Manager{opts: opts, layout: layout{stateRoot: opts.StateRoot}, specs: specs, staleDirAge: DefaultStaleDirAge,
		bgCtx: ctx}
	m.mig = newMIGMode(m)
	mps := newMPSMode(m)
	m.mps = mps
	m.modes = map[modeName]sharingMode{modeMIG: m.mig, modeMPS: mps}
	if len(opts.MIGGPUs) > 0 {
		m.deviceModes = append(m.deviceModes, m.mig)
	}
	if opts.MPS != nil {
		m.deviceModes = append(m.deviceModes, mps)
	}
	if err := m.start(ctx); err != nil {
		return nil, err
	}
	m.sweep(ctx)
	if opts.MPS != nil {
		if err := mps.superviseAll(); err != nil {
			return nil, fmt.Errorf("supervise the MPS control daemons: %w", err)
		}
	}
	return m, nil
}

func (m *Manager) step(s step, uid types.UID) error {
	if m.afterStep == nil {
		return nil
	}
	return m.afterStep(s, uid)
}

// withPaths is a copy of c with its host paths set.
func (m *Manager) withPaths(c *PreparedClaim) PreparedClaim {
	out := c.deepCopy()
	out.RegionPath = m.layout.regionPath(c.UID)
	out.HostPIDsPath = m.layout.hostPIDsPath(c.UID)
	out.BurstPath = m.layout.burstPath(c.UID)
	out.BurstSocketPath = m.layout.burstSocketPath(c.UID)
	if len(mpsGPUs(c)) > 0 {
		out.MPSUserSocketPath = m.layout.mpsUserSocketPath(c.UID)
	}
	return out
}

// PreparedClaims returns the completed claims, sorted by namespace and name.
// If the checkpoint cannot be read, the state of the last call is returned.
func (m *Manager) PreparedClaims() []PreparedClaim {
	if end, err := m.begin(); err == nil {
		defer end()
	} else {
		m.mu.Lock()
		defer m.mu.Unlock()
	}
	out := make([]PreparedClaim, 0, len(m.cp.Claims))
	for _, rec := range m.cp.Claims {
		if rec.State == statePrepareCompleted {
			out = append(out, m.withPaths(&rec.PreparedClaim))
		}
	}
	slices.SortFunc(out, func(a, b PreparedClaim) int {
		return strings.Compare(a.Namespace+"/"+a.Name+"/"+string(a.UID), b.Namespace+"/"+b.Name+"/"+string(b.UID))
	})
	return out
}
