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
		// What its sharing modes realised goes in their recovery below
		// unless other claims use it; a crash may have cut a step short
		// before its record, so the records are not complete.
		m.release(&rec.PreparedClaim, false)
		changed = true
		claimLogger.Info("Rolled back an incomplete prepare")
	}
	if changed {
		if err := cp.save(m.layout.checkpointPath()); err != nil {
			return err
		}
	}
	for _, mode := range m.allModes() {
		mode.recover(ctx)
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
		// What a sharing mode realised and lost (a MIG instance gone with
		// a reboot or GPU reset) is realised again; a new reference means
		// a new config and CDI spec.
		rewrite, err := m.realise(klog.NewContext(ctx, claimLogger), &rec.PreparedClaim)
		if err != nil {
			claimLogger.Error(err, "Realising the claim's sharing mode again failed; will retry")
			pending = append(pending, uid)
			continue
		}
		if rewrite {
			if err := m.saveCheckpoint(); err != nil {
				claimLogger.Error(err, "Recording the claim's new sharing-mode references failed; will retry")
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
