package claims

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/atomicfile"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/cdi"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/gpu"
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
	Devices map[string]gpu.Info
	// GPUEdits produces the container edits of a whole GPU.
	GPUEdits cdi.GPUEditsSource
	// BootIDPath is read to detect reboots; empty means DefaultBootIDPath.
	BootIDPath string
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
	return errors.Join(errs...)
}

// restoreRetryInterval is the first delay before restoring claims again
// whose files could not be recreated at start; it doubles up to
// maxRestoreRetryInterval. A variable so that tests can shorten it.
var restoreRetryInterval = 5 * time.Second

const maxRestoreRetryInterval = 5 * time.Minute

// step names a point in prepare or unprepare after which a crash must leave
// a recoverable state; tests inject failures there.
type step string

const (
	stepCheckpointStarted   step = "checkpoint-started"
	stepConfig              step = "config"
	stepRegion              step = "region"
	stepCDISpec             step = "cdi-spec"
	stepCheckpointCompleted step = "checkpoint-completed"
	stepRemoveCDISpec       step = "remove-cdi-spec"
	stepRemoveClaimDir      step = "remove-claim-dir"
	stepCheckpointRemoved   step = "checkpoint-removed"
)

// Manager prepares and unprepares claims on one node. All methods are safe
// for concurrent use; calls are serialised.
type Manager struct {
	opts   Options
	layout layout
	specs  *cdi.ClaimSpecs

	mu        sync.Mutex
	stateLock *stateLock
	// cp is the checkpoint as of the current call; reloaded by begin.
	cp *checkpoint
	// afterStep, when set, runs after each step; an error fails the step.
	afterStep func(step, types.UID) error
}

// NewManager loads the checkpoint, writes StateRoot/ld.so.preload and
// recovers: claims whose prepare did not complete are rolled back, completed
// claims get missing files and CDI specs recreated (after a reboot the CDI
// root is empty; what cannot be recreated yet is retried in the background
// until ctx ends). A checkpoint that cannot be read or verified is an error:
// the manager refuses to start rather than forget prepared claims.
func NewManager(ctx context.Context, opts Options) (*Manager, error) {
	if opts.BootIDPath == "" {
		opts.BootIDPath = DefaultBootIDPath
	}
	if err := opts.validate(); err != nil {
		return nil, fmt.Errorf("claims manager options: %w", err)
	}
	// The caller's map must not change the manager's view later.
	opts.Devices = maps.Clone(opts.Devices)
	specs, err := cdi.NewClaimSpecs(opts.CDIRoot)
	if err != nil {
		return nil, err
	}
	m := &Manager{opts: opts, layout: layout{stateRoot: opts.StateRoot}, specs: specs}
	if err := m.start(ctx); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *Manager) start(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	if err := os.MkdirAll(m.opts.StateRoot, claimDirMode); err != nil {
		return fmt.Errorf("create state root: %w", err)
	}
	// The state root and the claims directory may predate this plugin (a
	// hostPath volume, an older version): make sure only it writes them.
	if err := ownedDir(m.opts.StateRoot, claimDirMode); err != nil {
		return fmt.Errorf("state root: %w", err)
	}
	if err := ownedDir(m.layout.claimsDir(), claimDirMode); err != nil {
		return fmt.Errorf("create claims directory: %w", err)
	}
	lock, err := openStateLock(filepath.Join(m.opts.StateRoot, lockFileName))
	if err != nil {
		return err
	}
	m.stateLock = lock
	if err := lock.lock(); err != nil {
		return err
	}
	defer lock.unlock()
	if err := atomicfile.RemoveTemps(m.opts.StateRoot, checkpointFileName); err != nil {
		return err
	}
	preload := []byte(ContainerLibVGPUPath + "\n")
	if have, err := os.ReadFile(m.layout.preloadPath()); err != nil || string(have) != string(preload) {
		if err := atomicfile.WriteFile(m.layout.preloadPath(), preload, preloadFileMode, atomicfile.Durable); err != nil {
			return fmt.Errorf("write ld.so.preload: %w", err)
		}
	}

	bootID, err := os.ReadFile(m.opts.BootIDPath)
	if err != nil {
		return fmt.Errorf("read boot ID: %w", err)
	}
	cp, err := loadCheckpoint(m.layout.checkpointPath())
	if err != nil {
		return fmt.Errorf("%w; refusing to start so that prepared claims are not forgotten: inspect the file and move it aside to start with no prepared claims (docs/prepare.md)", err)
	}
	m.cp = cp
	current := strings.TrimSpace(string(bootID))
	if cp.BootID != "" && cp.BootID != current {
		logger.Info("Node rebooted since the checkpoint was written; recreating CDI specs of prepared claims", "previousBootID", cp.BootID, "bootID", current, "claims", len(cp.Claims))
	}
	changed := cp.BootID != current
	cp.BootID = current

	var completed []types.UID
	for _, uid := range slices.Sorted(maps.Keys(cp.Claims)) {
		rec := cp.Claims[uid]
		if rec.State == statePrepareCompleted {
			completed = append(completed, uid)
			continue
		}
		claimLogger := klog.LoggerWithValues(logger, "claim", klog.KRef(rec.Namespace, rec.Name), "claimUID", uid)
		if err := m.rollback(uid); err != nil {
			// Kept as started: the next prepare of the claim or the next
			// start retries the rollback.
			claimLogger.Error(err, "Rolling back an incomplete prepare failed")
			continue
		}
		delete(cp.Claims, uid)
		changed = true
		claimLogger.Info("Rolled back an incomplete prepare")
	}
	if changed {
		if err := cp.save(m.layout.checkpointPath()); err != nil {
			return err
		}
	}
	// A claim that cannot be restored yet (NVML not ready after a reboot, a
	// full disk) does not stop the plugin: the kubelet may never prepare it
	// again, so restoring is retried in the background until it works.
	if pending := m.restoreLocked(ctx, completed); len(pending) > 0 {
		go m.retryRestore(ctx, pending, restoreRetryInterval)
	}
	logger.V(2).Info("Claims manager started", "preparedClaims", len(cp.Claims))
	return nil
}

// restore recreates the missing pieces of completed claims and returns those
// that still lack some.
func (m *Manager) restore(ctx context.Context, uids []types.UID) []types.UID {
	end, err := m.begin()
	if err != nil {
		klog.FromContext(ctx).Error(err, "Restoring prepared claims failed; will retry")
		return uids
	}
	defer end()
	return m.restoreLocked(ctx, uids)
}

func (m *Manager) restoreLocked(ctx context.Context, uids []types.UID) []types.UID {
	logger := klog.FromContext(ctx)
	var pending []types.UID
	for _, uid := range uids {
		rec, ok := m.cp.Claims[uid]
		if !ok || rec.State != statePrepareCompleted {
			// Unprepared meanwhile.
			continue
		}
		claimLogger := klog.LoggerWithValues(logger, "claim", klog.KRef(rec.Namespace, rec.Name), "claimUID", uid)
		if err := m.ensure(klog.NewContext(ctx, claimLogger), &rec.PreparedClaim, false); err != nil {
			claimLogger.Error(err, "Restoring a prepared claim failed; will retry")
			pending = append(pending, uid)
		}
	}
	return pending
}

// retryRestore calls restore with exponential backoff until every claim is
// restored or ctx ends.
func (m *Manager) retryRestore(ctx context.Context, pending []types.UID, delay time.Duration) {
	for len(pending) > 0 {
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		pending = m.restore(ctx, pending)
		delay = min(2*delay, maxRestoreRetryInterval)
	}
	klog.FromContext(ctx).Info("Restored all prepared claims")
}

// ensure creates whatever is missing of a claim's files and CDI spec,
// leaving existing, correct ones in place. writeSpec rewrites the CDI spec
// even if one exists, for claims the checkpoint did not know.
func (m *Manager) ensure(ctx context.Context, c *PreparedClaim, writeSpec bool) error {
	if err := m.layout.writeClaimConfig(c); err != nil {
		return err
	}
	if err := m.step(stepConfig, c.UID); err != nil {
		return err
	}
	if err := m.layout.createRegion(c.UID); err != nil {
		return err
	}
	if err := m.layout.createHostDir(c.UID); err != nil {
		return err
	}
	if err := m.step(stepRegion, c.UID); err != nil {
		return err
	}
	exists := false
	if !writeSpec {
		var err error
		if exists, err = m.specs.Exists(string(c.UID)); err != nil {
			return err
		}
	}
	if !exists {
		if err := m.writeCDISpec(ctx, c); err != nil {
			return err
		}
	}
	return m.step(stepCDISpec, c.UID)
}

// rollback removes everything prepare may have written for the claim except
// its checkpoint entry.
func (m *Manager) rollback(uid types.UID) error {
	return errors.Join(m.specs.Remove(string(uid)), m.layout.removeClaimDir(uid))
}

func (m *Manager) step(s step, uid types.UID) error {
	if m.afterStep == nil {
		return nil
	}
	return m.afterStep(s, uid)
}

// ClaimsDir is the host directory that holds one directory per prepared
// claim (StateRoot/claims).
func (m *Manager) ClaimsDir() string { return m.layout.claimsDir() }

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
			c := rec.deepCopy()
			c.RegionPath = m.layout.regionPath(c.UID)
			c.HostDir = m.layout.hostDir(c.UID)
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b PreparedClaim) int {
		return strings.Compare(a.Namespace+"/"+a.Name+"/"+string(a.UID), b.Namespace+"/"+b.Name+"/"+string(b.UID))
	})
	return out
}
