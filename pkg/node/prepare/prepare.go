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
	"reflect"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"
)

// PrepareResourceClaims prepares every claim and reports the outcome per
// claim: a bad claim gets an error in its result and leaves nothing behind,
// the others are prepared. Preparing an already prepared claim returns the
// same result and recreates anything that went missing. A claim whose
// guarantee waits for burst memory to be reclaimed is waited for, outside
// the manager's lock so that the unprepares freeing the memory can run,
// for up to Options.BurstAdmissionWait, and prepared in the same call once
// it fits: otherwise the kubelet would try again only at its next sync of
// the pod, up to a minute later.
func (m *Manager) PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	results, err := m.prepareClaims(ctx, claims)
	if err != nil || m.opts.Burst == nil || m.opts.BurstAdmissionWait < 0 {
		return results, err
	}
	waitCtx, cancel := m.burstWaitContext(ctx)
	defer cancel()
	for {
		var waiting []*resourceapi.ResourceClaim
		for _, claim := range claims {
			if errors.Is(results[claim.UID].Err, ErrWaitingForMemory) {
				waiting = append(waiting, claim)
			}
		}
		if len(waiting) == 0 || waitCtx.Err() != nil {
			return results, nil
		}
		for _, claim := range waiting {
			if !m.opts.Burst.WaitForMemory(waitCtx, claim.UID) {
				klog.FromContext(ctx).V(2).Info("Claim still waits for burst memory; the kubelet retries", "claim", klog.KObj(claim), "claimUID", claim.UID)
				return results, nil
			}
		}
		retried, err := m.prepareClaims(ctx, waiting)
		if err != nil {
			// The first results stand; the kubelet retries.
			return results, nil
		}
		maps.Copy(results, retried)
	}
}

// burstWaitContext bounds the wait for burst memory by
// Options.BurstAdmissionWait and by the call's deadline, less the time the
// prepare after the wait needs.
func (m *Manager) burstWaitContext(ctx context.Context) (context.Context, context.CancelFunc) {
	deadline := time.Now().Add(m.opts.BurstAdmissionWait)
	if d, ok := ctx.Deadline(); ok && d.Add(-burstAdmissionMargin).Before(deadline) {
		deadline = d.Add(-burstAdmissionMargin)
	}
	return context.WithDeadline(ctx, deadline)
}

// prepareClaims is one pass of PrepareResourceClaims under the manager's
// lock.
func (m *Manager) prepareClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	logger := klog.FromContext(ctx)
	end, err := m.begin()
	if err != nil {
		return nil, fmt.Errorf("prepare claims: %w", err)
	}
	defer end()

	results := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
	var fresh []*PreparedClaim
	for _, claim := range claims {
		claimLogger := klog.LoggerWithValues(logger, "claim", klog.KObj(claim), "claimUID", claim.UID)
		c, err := m.plan(claim)
		if err != nil {
			results[claim.UID] = failed(claim.UID, err)
			claimLogger.V(2).Info("Rejected claim", "err", err)
			continue
		}
		if len(c.Devices) == 0 {
			results[c.UID] = kubeletplugin.PrepareResult{}
			continue
		}
		rec, known := m.cp.Claims[c.UID]
		switch {
		case !known:
			if err := m.checkCapacity(c, m.preparedUse(fresh)); err != nil {
				results[c.UID] = failed(c.UID, err)
				claimLogger.Error(err, "Refused claim that overbooks a GPU")
				continue
			}
			if err := m.admitBurst(klog.NewContext(ctx, claimLogger), c); err != nil {
				results[c.UID] = failed(c.UID, err)
				claimLogger.V(2).Info("Claim waits for burst memory", "err", err)
				continue
			}
			fresh = append(fresh, c)
		case rec.State == statePrepareStarted:
			// Left by a failed rollback: finish it, then prepare anew.
			if err := m.undo(ctx, c.UID, nil); err != nil {
				results[c.UID] = failed(c.UID, fmt.Errorf("roll back earlier attempt: %w", err))
				continue
			}
			if err := m.admitBurst(klog.NewContext(ctx, claimLogger), c); err != nil {
				results[c.UID] = failed(c.UID, err)
				continue
			}
			fresh = append(fresh, c)
		case !reflect.DeepEqual(m.planned(&rec.PreparedClaim), *c):
			results[c.UID] = failed(c.UID, errors.New("claim is already prepared with a different allocation; unprepare it first"))
		default:
			if err := m.ensure(klog.NewContext(ctx, claimLogger), &rec.PreparedClaim, false); err != nil {
				results[c.UID] = failed(c.UID, err)
				continue
			}
			results[c.UID] = prepareResult(c)
		}
	}
	if len(fresh) > 0 {
		m.prepareFresh(ctx, fresh, results)
	}
	return results, nil
}

// prepareFresh prepares claims that are not in the checkpoint. The
// checkpoint is written twice for the whole batch, not twice per claim:
// PrepareStarted before any file is written, PrepareCompleted after.
func (m *Manager) prepareFresh(ctx context.Context, claims []*PreparedClaim, results map[types.UID]kubeletplugin.PrepareResult) {
	logger := klog.FromContext(ctx)
	for _, c := range claims {
		m.cp.Claims[c.UID] = &claimRecord{State: statePrepareStarted, PreparedClaim: c.deepCopy()}
		// What a sharing mode realises is checkpointed before it exists.
		m.reserve(c)
	}
	if err := m.cp.save(m.layout.checkpointPath()); err != nil {
		for _, c := range claims {
			m.forget(c.UID)
			results[c.UID] = failed(c.UID, err)
		}
		return
	}

	var done []*PreparedClaim
	for i, c := range claims {
		claimLogger := klog.LoggerWithValues(logger, "claim", klog.KRef(c.Namespace, c.Name), "claimUID", c.UID)
		claimCtx := klog.NewContext(ctx, claimLogger)
		// The checkpoint's copy gains the references the modes fill in.
		c = &m.cp.Claims[c.UID].PreparedClaim
		claims[i] = c
		err := m.step(stepCheckpointStarted, c.UID)
		if err == nil {
			_, err = m.realise(claimCtx, c)
		}
		if err == nil {
			err = m.ensure(claimCtx, c, true)
		}
		if err != nil {
			results[c.UID] = failed(c.UID, m.undo(claimCtx, c.UID, err))
			continue
		}
		m.cp.Claims[c.UID].State = statePrepareCompleted
		done = append(done, c)
	}

	saveErr := m.cp.save(m.layout.checkpointPath())
	failures := len(claims) - len(done)
	for _, c := range done {
		err := saveErr
		if err == nil {
			err = m.step(stepCheckpointCompleted, c.UID)
		}
		if err != nil {
			results[c.UID] = failed(c.UID, m.undo(ctx, c.UID, err))
			failures++
			continue
		}
		results[c.UID] = prepareResult(c)
		logger.V(2).Info("Prepared claim", "claim", klog.KRef(c.Namespace, c.Name), "claimUID", c.UID, "gpus", c.GPUs)
	}
	if failures > 0 {
		// Drop the entries of failed claims (their files are gone); if this
		// write fails too, recovery rolls them back from PrepareStarted.
		if err := m.cp.save(m.layout.checkpointPath()); err != nil {
			logger.Error(err, "Removing failed claims from the checkpoint failed; the next start rolls them back")
		}
	}
}

// undo rolls back a claim whose prepare failed with cause (nil: an earlier
// attempt's) and forgets it, tearing down what its sharing modes realised
// for it alone.
func (m *Manager) undo(ctx context.Context, uid types.UID, cause error) error {
	if err := m.rollback(uid); err != nil {
		// The entry stays PrepareStarted so that the rollback is retried.
		if cause == nil {
			return err
		}
		return fmt.Errorf("%w (rolling back also failed: %w)", cause, err)
	}
	if m.opts.Burst != nil {
		m.opts.Burst.ReleaseClaim(ctx, uid)
	}
	if users := m.mpsUsers(); users != nil {
		users.ReleaseClaim(uid)
	}
	if changed := m.forget(uid); len(changed) > 0 {
		// What is left is retried by the next unprepare or start; the
		// claim itself is rolled back.
		err := m.saveCheckpoint()
		if err == nil {
			err = teardown(ctx, changed, uid)
		}
		if err != nil {
			klog.FromContext(ctx).Error(err, "Tearing down what the sharing modes realised for a failed prepare failed; will retry", "claimUID", uid)
		}
	}
	return cause
}

// forget drops the claim from the checkpoint (in memory) and from the
// records of its sharing modes, all of them this process's, and returns the
// modes whose records changed.
func (m *Manager) forget(uid types.UID) []sharingMode {
	rec, ok := m.cp.Claims[uid]
	if !ok {
		return nil
	}
	delete(m.cp.Claims, uid)
	return m.release(&rec.PreparedClaim, true)
}

func failed(uid types.UID, err error) kubeletplugin.PrepareResult {
	return kubeletplugin.PrepareResult{Err: fmt.Errorf("prepare claim %s: %w", uid, err)}
}

func prepareResult(c *PreparedClaim) kubeletplugin.PrepareResult {
	devices := make([]kubeletplugin.Device, len(c.Devices))
	ids := cdiDeviceIDs(c)
	for i, d := range c.Devices {
		devices[i] = kubeletplugin.Device{
			Requests:     []string{d.Request},
			PoolName:     d.Pool,
			DeviceName:   d.Device,
			CDIDeviceIDs: []string{ids[i]},
		}
		if d.ShareID != "" {
			shareID := d.ShareID
			devices[i].ShareID = &shareID
		}
	}
	return kubeletplugin.PrepareResult{Devices: devices}
}

// ensure creates whatever is missing of a claim's files and CDI spec,
// leaving existing, correct ones in place. writeSpec rewrites the CDI spec
// even if one exists, for claims the checkpoint did not know.
func (m *Manager) ensure(ctx context.Context, c *PreparedClaim, writeSpec bool) error {
	if err := m.layout.writeClaimConfig(c, m.mps.memAcct); err != nil {
		return err
	}
	if err := m.step(stepConfig, c.UID); err != nil {
		return err
	}
	legacy, err := m.layout.mountRegionFS(c.UID)
	if err != nil {
		return err
	}
	if legacy {
		klog.FromContext(ctx).Info("Keeping the claim's region made by an earlier plugin version on the state root's file system until the claim is unprepared; only the monitor's cut-back bounds its size", "path", m.layout.regionPath(c.UID))
	}
	if err := m.step(stepRegionMount, c.UID); err != nil {
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
	if m.opts.Burst != nil {
		withPaths := m.withPaths(c)
		if err := m.opts.Burst.EnsureClaim(ctx, &withPaths); err != nil {
			return err
		}
	}
	if users := m.mpsUsers(); users != nil {
		if gpus := mpsGPUs(c); len(gpus) > 0 {
			if err := users.ServeClaim(ctx, c.UID, m.layout.mpsUserSocketPath(c.UID), gpus); err != nil {
				return err
			}
		}
	}
	if !exists {
		if err := m.writeCDISpec(ctx, c); err != nil {
			return err
		}
	}
	return m.step(stepCDISpec, c.UID)
}

// admitBurst asks the burst side whether a claim about to be prepared fits.
func (m *Manager) admitBurst(ctx context.Context, c *PreparedClaim) error {
	if m.opts.Burst == nil {
		return nil
	}
	withPaths := m.withPaths(c)
	return m.opts.Burst.AdmitClaim(ctx, &withPaths)
}

// rollback removes everything prepare may have written for the claim except
// its checkpoint entry.
func (m *Manager) rollback(uid types.UID) error {
	return errors.Join(m.specs.Remove(string(uid)), m.layout.removeClaimDir(uid))
}
