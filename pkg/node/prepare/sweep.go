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
	"io/fs"
	"os"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// DefaultStaleDirAge is how long a claim directory must be left untouched
// before the sweep may remove it.
const DefaultStaleDirAge = time.Minute

// sweep removes the directories of claims that are not prepared, logging
// what fails: the manager runs it once it has recovered and after every
// unprepare call.
func (m *Manager) sweep(ctx context.Context) {
	if _, err := m.layout.removeStaleClaimDirs(ctx, m.preparedUIDs, m.staleDirAge); err != nil {
		klog.FromContext(ctx).Error(err, "Removing directories of claims that are no longer prepared failed")
	}
}

// preparedUIDs is the set of completed claims.
func (m *Manager) preparedUIDs() map[types.UID]bool {
	set := map[types.UID]bool{}
	for _, c := range m.PreparedClaims() {
		set[c.UID] = true
	}
	return set
}

// removeStaleClaimDirs removes the directories under the claims directory
// of claims that are not prepared: left behind by a crash, or recreated by a
// lingering process after unprepare.
//
// Only entries named like a claim UID are considered, and a directory is
// removed only if its claim is absent from prepared() both before and after
// the directory was examined, and nothing in it (directory, config, shm
// directory, region) changed within minAge: a prepare in progress in another
// plugin instance writes those first, and completes long before minAge. It
// returns the UIDs it removed.
func (l layout) removeStaleClaimDirs(ctx context.Context, preparedNow func() map[types.UID]bool, minAge time.Duration) ([]types.UID, error) {
	logger := klog.FromContext(ctx)
	entries, err := os.ReadDir(l.claimsDir())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list claim directories: %w", err)
	}
	prepared := preparedNow()
	cutoff := time.Now().Add(-minAge)

	var candidates []types.UID
	for _, e := range entries {
		uid := types.UID(e.Name())
		if prepared[uid] || validateUID(uid) != nil || !e.IsDir() {
			continue
		}
		newest, err := l.newestChange(uid)
		if err != nil {
			logger.Error(err, "Cannot check a stale claim directory; leaving it", "path", l.claimDir(uid))
			continue
		}
		if newest.After(cutoff) {
			logger.V(2).Info("Claim directory not prepared but recently changed; leaving it for now", "path", l.claimDir(uid), "changed", newest)
			continue
		}
		candidates = append(candidates, uid)
	}
	if len(candidates) == 0 {
		return nil, nil
	}

	prepared = preparedNow()
	var removed []types.UID
	var errs []error
	for _, uid := range candidates {
		if prepared[uid] {
			continue
		}
		if err := l.removeClaimDir(uid); err != nil {
			errs = append(errs, fmt.Errorf("remove stale claim directory: %w", err))
			continue
		}
		logger.Info("Removed the directory of a claim that is no longer prepared", "claimUID", uid, "path", l.claimDir(uid))
		removed = append(removed, uid)
	}
	return removed, errors.Join(errs...)
}

// newestChange is the latest modification or status change of the claim
// directory and the plugin-made entries in it, not following symlinks.
func (l layout) newestChange(uid types.UID) (time.Time, error) {
	dir := l.claimDir(uid)
	var newest time.Time
	for _, p := range []string{dir, l.configPath(uid), l.shmDir(uid), l.regionPath(uid)} {
		info, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) && p != dir {
			continue
		}
		if err != nil {
			return time.Time{}, err
		}
		if t := changeTime(info); t.After(newest) {
			newest = t
		}
	}
	return newest, nil
}

// changeTime is the later of mtime and ctime: writes through a mapping move
// mtime, chmod and renames move ctime.
func changeTime(info fs.FileInfo) time.Time {
	t := info.ModTime()
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		if c := time.Unix(st.Ctim.Unix()); c.After(t) {
			t = c
		}
	}
	return t
}
