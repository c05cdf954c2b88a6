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

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"
)

// UnprepareResourceClaims removes each claim's CDI spec, then its region
// file system and directory, then its checkpoint entry. The files are removed by UID even when the
// checkpoint does not know the claim, so unpreparing is complete after any
// crash; a claim that was never prepared succeeds. It ends with a sweep of
// the directories of claims that are no longer prepared (left by a crash
// between the steps of an earlier instance).
func (m *Manager) UnprepareResourceClaims(ctx context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	results, err := m.unprepare(ctx, claims)
	if err == nil {
		m.sweep(ctx)
	}
	return results, err
}

func (m *Manager) unprepare(ctx context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	logger := klog.FromContext(ctx)
	end, err := m.begin()
	if err != nil {
		return nil, fmt.Errorf("unprepare claims: %w", err)
	}
	defer end()

	results := make(map[types.UID]error, len(claims))
	removed := map[types.UID]*claimRecord{}
	for _, claim := range claims {
		if err := validateUID(claim.UID); err != nil {
			// Never prepared: prepare rejects such UIDs before writing anything.
			results[claim.UID] = nil
			logger.V(2).Info("Nothing to unprepare for a claim with an invalid UID", "claim", claim)
			continue
		}
		if err := m.unprepareFiles(claim.UID); err != nil {
			results[claim.UID] = fmt.Errorf("unprepare claim %s: %w", claim.UID, err)
			continue
		}
		results[claim.UID] = nil
		if m.opts.Burst != nil {
			m.opts.Burst.ReleaseClaim(ctx, claim.UID)
		}
		if users := m.mpsUsers(); users != nil {
			users.ReleaseClaim(claim.UID)
		}
		if rec, ok := m.cp.Claims[claim.UID]; ok {
			removed[claim.UID] = rec
			delete(m.cp.Claims, claim.UID)
			// What its sharing modes realised for it alone is
			// checkpointed as going with the claim's removal, and torn
			// down below.
			m.release(&rec.PreparedClaim, false)
		}
	}
	if len(removed) == 0 {
		// What a crash or an earlier failure left to tear down.
		if err := teardown(ctx, m.allModes(), ""); err != nil {
			for _, claim := range claims {
				if results[claim.UID] == nil {
					results[claim.UID] = fmt.Errorf("unprepare claim %s: %w", claim.UID, err)
				}
			}
		}
		return results, nil
	}

	// If this write fails the entries stay on disk, the next call reloads
	// them, and the kubelet's retry finds the claims (files already gone).
	err = m.cp.save(m.layout.checkpointPath())
	for uid, rec := range removed {
		stepErr := err
		if stepErr == nil {
			stepErr = m.step(stepCheckpointRemoved, uid)
		}
		if stepErr == nil {
			// What cannot be torn down yet (a MIG instance in use) fails
			// the call, so that the kubelet's retry tears it down; like
			// the call without claims, this also retries what earlier
			// calls left.
			stepErr = teardown(ctx, m.allModes(), uid)
		}
		if stepErr != nil {
			results[uid] = fmt.Errorf("unprepare claim %s: %w", uid, stepErr)
			continue
		}
		logger.V(2).Info("Unprepared claim", "claim", klog.KRef(rec.Namespace, rec.Name), "claimUID", uid)
	}
	return results, nil
}

func (m *Manager) unprepareFiles(uid types.UID) error {
	if err := m.specs.Remove(string(uid)); err != nil {
		return err
	}
	if err := m.step(stepRemoveCDISpec, uid); err != nil {
		return err
	}
	if err := unmountRegionFS(m.layout.shmDir(uid)); err != nil {
		return err
	}
	if err := m.step(stepRegionUnmount, uid); err != nil {
		return err
	}
	if err := m.layout.removeClaimDir(uid); err != nil {
		return err
	}
	return m.step(stepRemoveClaimDir, uid)
}
