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
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/common/atomicfile"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/discovery"
)

// maxRestoreRetryInterval caps the backoff of restoring claims whose files
// or CDI spec cannot be recreated yet (e.g. the CDI root not mounted).
const maxRestoreRetryInterval = 5 * time.Minute

// start is the recovery run at startup: it takes the state root, removes
// what interrupted writes left, writes the preload file, and brings every
// claim of the checkpoint to a consistent state (rolled back, or restored).
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
	if err := checkMountPropagation(m.opts.StateRoot); err != nil {
		return err
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
		// Its MIG instances are destroyed below unless other claims use
		// them; records without ids are kept to match live instances.
		cp.releaseClaim(uid)
		changed = true
		claimLogger.Info("Rolled back an incomplete prepare")
	}
	if changed {
		if err := cp.save(m.layout.checkpointPath()); err != nil {
			return err
		}
	}
	if destroying := m.recoverInstances(ctx); destroying {
		m.startRetryDestroy()
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
		// A MIG instance that vanished (reboot, GPU reset) is recreated;
		// its new MIG UUID means a new config and CDI spec.
		before := migUUIDs(&rec.PreparedClaim)
		if err := m.realiseInstances(klog.NewContext(ctx, claimLogger), &rec.PreparedClaim); err != nil {
			claimLogger.Error(err, "Recreating the claim's MIG instance failed; will retry")
			pending = append(pending, uid)
			continue
		}
		rewrite := !slices.Equal(before, migUUIDs(&rec.PreparedClaim))
		if rewrite {
			if err := m.saveCheckpoint(); err != nil {
				claimLogger.Error(err, "Recording the claim's new MIG UUID failed; will retry")
				pending = append(pending, uid)
				continue
			}
		}
		if err := m.ensure(klog.NewContext(ctx, claimLogger), &rec.PreparedClaim, rewrite); err != nil {
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

// migUUIDs lists the MIG UUIDs the claim's limits are keyed by.
func migUUIDs(c *PreparedClaim) []string {
	var out []string
	for _, g := range c.GPUs {
		if g.MIG != nil {
			out = append(out, g.MIG.UUID)
		}
	}
	return out
}

// recoverInstances compares the owned MIG instances of the checkpoint with
// those NVML lists (docs/mig.md): a Ready instance of prepared claims that
// still exists is kept; one that is gone is marked Creating, to be
// recreated when its claims are restored; every other record (Creating or
// Destroying after a crash, or used by no prepared claim) is destroyed,
// matched by id or, without one, by profile and placement. Instances the
// checkpoint does not know are never touched. It reports whether some are
// left Destroying (NVML said in use, or could not be asked).
func (m *Manager) recoverInstances(ctx context.Context) bool {
	logger := klog.FromContext(ctx)
	if len(m.cp.Instances) == 0 {
		return false
	}
	if m.opts.MIG == nil {
		logger.Error(nil, "The checkpoint holds MIG instances but no GPU is in MIG mode; they are kept until the plugin runs with MIG again", "gpus", len(m.cp.Instances))
		return false
	}
	for _, gpuUUID := range sortedKeys(m.cp.Instances) {
		list, err := m.opts.MIG.Instances(ctx, gpuUUID)
		if err != nil {
			// Ready instances are then taken as they are: a missing one
			// fails its claims' restore, which is retried.
			logger.Error(err, "Listing MIG instances failed", "gpu", gpuUUID)
		}
		for _, r := range slices.Clone(m.cp.Instances[gpuUUID]) {
			r.Claims = slices.DeleteFunc(r.Claims, func(uid types.UID) bool {
				rec, ok := m.cp.Claims[uid]
				return !ok || rec.State != statePrepareCompleted
			})
			switch {
			case len(r.Claims) == 0 || r.State == instanceDestroying:
				r.State = instanceDestroying
			case r.State == instanceCreating:
				// Recreating it for prepared claims was cut short: what
				// exists of it is destroyed, and a fresh record takes
				// the claims, to be created when they are restored.
				m.cp.Instances[gpuUUID] = append(m.cp.Instances[gpuUUID], &instanceRecord{
					ProfileID: r.ProfileID, Placement: r.Placement, Claims: r.Claims, State: instanceCreating,
				})
				r.Claims, r.State = nil, instanceDestroying
			case err == nil && !liveMatch(list, r):
				logger.Info("A MIG instance of prepared claims is gone; recreating it", "gpu", gpuUUID,
					"profile", r.ProfileID, "placementStart", r.Placement.Start, "migUUID", r.UUID)
				r.GPUInstanceID, r.ComputeInstanceID, r.UUID, r.State = nil, nil, "", instanceCreating
			}
		}
	}
	if err := m.saveCheckpoint(); err != nil {
		logger.Error(err, "Recording the MIG instances' recovery failed")
	}
	return m.destroyLeftovers(ctx)
}

// destroyLeftovers destroys the instances left Destroying, matched against
// what NVML lists. It reports whether some are still left.
func (m *Manager) destroyLeftovers(ctx context.Context) bool {
	logger := klog.FromContext(ctx)
	left := false
	for _, gpuUUID := range sortedKeys(m.cp.Instances) {
		var destroying []*instanceRecord
		for _, r := range m.cp.Instances[gpuUUID] {
			if r.State == instanceDestroying {
				destroying = append(destroying, r)
			}
		}
		if len(destroying) == 0 {
			continue
		}
		list, err := m.opts.MIG.Instances(ctx, gpuUUID)
		if err != nil {
			logger.Error(err, "Listing MIG instances failed; will retry", "gpu", gpuUUID)
			left = true
			continue
		}
		for _, r := range destroying {
			if err := m.destroyInstance(ctx, gpuUUID, r, "", list); err != nil {
				logger.Error(err, "Destroying a MIG instance the plugin no longer needs failed; will retry", "gpu", gpuUUID)
				left = true
			}
		}
	}
	return left
}

// liveMatch reports whether Ready record r exists as NVML lists it.
func liveMatch(list []discovery.MIGInstanceState, r *instanceRecord) bool {
	for _, inst := range list {
		if inst.ID != *r.GPUInstanceID || inst.ProfileID != r.ProfileID || inst.Placement != r.placement() {
			continue
		}
		for _, ci := range inst.Compute {
			if ci.ID == *r.ComputeInstanceID && ci.UUID == r.UUID {
				return true
			}
		}
	}
	return false
}

// startRetryDestroy starts retryDestroy unless it runs already; m.mu held.
func (m *Manager) startRetryDestroy() {
	if m.retryingDestroy || m.bgCtx == nil {
		return
	}
	m.retryingDestroy = true
	go m.retryDestroy(m.bgCtx, restoreRetryInterval)
}

// retryDestroy runs recovery of the MIG instances again with exponential
// backoff until none is left Destroying or ctx ends. Until then such an
// instance still blocks its placement on the GPU (BlockedMIGInstances).
func (m *Manager) retryDestroy(ctx context.Context, delay time.Duration) {
	for {
		select {
		case <-ctx.Done():
			m.mu.Lock()
			m.retryingDestroy = false
			m.mu.Unlock()
			return
		case <-time.After(delay):
		}
		end, err := m.begin()
		if err != nil {
			klog.FromContext(ctx).Error(err, "Retrying MIG instance recovery failed; will retry")
		} else {
			left := m.destroyLeftovers(ctx)
			if !left {
				// Cleared under the lock: an unprepare that finds an
				// instance in use after this starts a new retry.
				m.retryingDestroy = false
				end()
				klog.FromContext(ctx).Info("Destroyed the MIG instances left from earlier")
				return
			}
			end()
		}
		delay = min(2*delay, maxRestoreRetryInterval)
	}
}
