package monitor

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2/ktesting"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/claims"
)

func TestRemoveStaleClaimDirs(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	dir := t.TempDir()
	prepared := preparedClaim(dir, uidA, "team-a", "train")
	stale := types.UID("3c0e5f1a-9b8d-4e7f-a6b5-c4d3e2f1a0b9")
	fresh := types.UID("5e6f7a8b-9c0d-4e1f-a2b3-c4d5e6f7a8b9")
	for _, uid := range []types.UID{uidA, stale, fresh} {
		writeClaimRegion(t, filepath.Join(dir, string(uid), "shm", "region"), 0, 0, 0)
		require.NoError(t, os.WriteFile(filepath.Join(dir, string(uid), "config"), []byte("version=1\n"), 0o644))
	}
	require.NoError(t, os.Mkdir(filepath.Join(dir, "not-a-claim"), 0o755))
	require.NoError(t, os.Symlink(filepath.Join(dir, string(stale)), filepath.Join(dir, "6a7b8c9d-0e1f-4a2b-8c3d-4e5f6a7b8c9d")))

	// Age every directory except fresh's.
	old := time.Now().Add(-time.Hour)
	for _, uid := range []types.UID{uidA, stale} {
		for _, p := range []string{"", "config", "shm", "shm/region"} {
			require.NoError(t, os.Chtimes(filepath.Join(dir, string(uid), p), old, old))
		}
	}

	src := &fakeClaims{claims: []claims.PreparedClaim{prepared}}
	removed, err := RemoveStaleClaimDirs(ctx, dir, src, DefaultStaleDirAge)
	require.NoError(t, err)
	// ctime cannot be set back, so even the aged directories count as fresh
	// with the default age; a zero age shows what the age check guards.
	assert.Empty(t, removed, "recently changed directories are kept")

	removed, err = RemoveStaleClaimDirs(ctx, dir, src, 0)
	require.NoError(t, err)
	assert.ElementsMatch(t, []types.UID{stale, fresh}, removed)
	assert.DirExists(t, filepath.Join(dir, string(uidA)), "a prepared claim's directory is never removed")
	assert.DirExists(t, filepath.Join(dir, "not-a-claim"), "foreign entries are left alone")
	assert.NoDirExists(t, filepath.Join(dir, string(stale)))
	_, err = os.Lstat(filepath.Join(dir, "6a7b8c9d-0e1f-4a2b-8c3d-4e5f6a7b8c9d"))
	assert.NoError(t, err, "a symlink is not followed or removed")

	removed, err = RemoveStaleClaimDirs(ctx, filepath.Join(dir, "missing"), src, 0)
	require.NoError(t, err)
	assert.Empty(t, removed)
}

// racingClaims reports a claim as prepared only from the second call on,
// as when a prepare completes while the directory is examined.
type racingClaims struct {
	calls int
	claim claims.PreparedClaim
}

func (r *racingClaims) PreparedClaims() []claims.PreparedClaim {
	r.calls++
	if r.calls == 1 {
		return nil
	}
	return []claims.PreparedClaim{r.claim}
}

func TestRemoveStaleClaimDirsRechecksPrepared(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	dir := t.TempDir()
	c := preparedClaim(dir, uidA, "team-a", "train")
	writeClaimRegion(t, c.RegionPath, 0, 0, 0)
	removed, err := RemoveStaleClaimDirs(ctx, dir, &racingClaims{claim: c}, 0)
	require.NoError(t, err)
	assert.Empty(t, removed)
	assert.FileExists(t, c.RegionPath, "a claim prepared meanwhile keeps its directory")
}
