package monitor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/google/uuid"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// DefaultStaleDirAge is how long a claim directory must be left untouched
// before RemoveStaleClaimDirs may remove it.
const DefaultStaleDirAge = time.Minute

// RemoveStaleClaimDirs removes the directories under claimsDir (the state
// root's claims/) of claims that are not prepared: left behind by a crash,
// or recreated by a lingering process after unprepare. The lead calls it
// once at start, after the claim manager recovered, and after every
// unprepare.
//
// Only entries named like a claim UID are considered, and a directory is
// removed only if its claim is absent from PreparedClaims both before and
// after the directory was examined, and nothing in it (directory, config,
// shm directory, region) changed within minAge: a prepare in progress in
// another plugin instance writes those first, and completes long before
// minAge. It returns the UIDs it removed.
func RemoveStaleClaimDirs(ctx context.Context, claimsDir string, source ClaimSource, minAge time.Duration) ([]types.UID, error) {
	logger := klog.FromContext(ctx)
	entries, err := os.ReadDir(claimsDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list claim directories: %w", err)
	}
	preparedNow := func() map[types.UID]bool {
		set := map[types.UID]bool{}
		for _, c := range source.PreparedClaims() {
			set[c.UID] = true
		}
		return set
	}
	prepared := preparedNow()
	cutoff := time.Now().Add(-minAge)

	var candidates []types.UID
	for _, e := range entries {
		uid := types.UID(e.Name())
		if prepared[uid] || !isClaimUID(e.Name()) || !e.IsDir() {
			continue
		}
		dir := filepath.Join(claimsDir, e.Name())
		newest, err := newestChange(dir)
		if err != nil {
			logger.Error(err, "Cannot check a stale claim directory; leaving it", "path", dir)
			continue
		}
		if newest.After(cutoff) {
			logger.V(2).Info("Claim directory not prepared but recently changed; leaving it for now", "path", dir, "changed", newest)
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
		dir := filepath.Join(claimsDir, string(uid))
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, fmt.Errorf("remove stale claim directory: %w", err))
			continue
		}
		logger.Info("Removed the directory of a claim that is no longer prepared", "claimUID", uid, "path", dir)
		removed = append(removed, uid)
	}
	return removed, errors.Join(errs...)
}

// isClaimUID accepts the UUIDs the API server assigns; anything else in the
// directory was not made by the plugin and is left alone.
func isClaimUID(name string) bool {
	parsed, err := uuid.Parse(name)
	return err == nil && parsed.String() == name
}

// newestChange is the latest modification or status change of the claim
// directory and the plugin-made entries in it, not following symlinks.
func newestChange(dir string) (time.Time, error) {
	var newest time.Time
	for _, p := range []string{dir, filepath.Join(dir, "config"), filepath.Join(dir, "shm"), filepath.Join(dir, "shm", "region")} {
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
