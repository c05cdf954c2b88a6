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
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/region"
)

// TestRegionCannotGrowPastItsSize is a container that has its region file
// read-write and tries, for 5 s, to take the node's disk through it:
// fallocate and writes past the end, after extending the file too. Each
// attempt fails with ENOSPC or EFBIG at the region's size, the file never
// holds more than one region, and meanwhile 100 prepares of other claims
// on a small state root all succeed.
func TestRegionCannotGrowPastItsSize(t *testing.T) {
	env := newTestEnv(t)
	// A 16 MiB state root, which the writer would fill within milliseconds
	// on the state root's own file system.
	require.NoError(t, unix.Mount("state", env.stateRoot, "tmpfs", 0, "size=16m"))
	require.NoError(t, unix.Mount("", env.stateRoot, "", unix.MS_SHARED, ""))
	m := env.newManager(t)
	prepareOne(t, m, twoGPUClaim(claimA))
	l := layout{stateRoot: env.stateRoot}
	usedBefore := usedBytes(t, env.stateRoot)

	f, err := os.OpenFile(l.regionPath(claimA), os.O_RDWR, 0)
	require.NoError(t, err)
	defer func() { require.NoError(t, f.Close()) }()

	done := make(chan struct{})
	prepareErrs := make(chan error, 1)
	go func() {
		defer close(prepareErrs)
		for i := range 100 {
			uid := fmt.Sprintf("c0000000-0000-4000-8000-%012d", i)
			claim := newClaim(uid, "other").result("r", "gpu-1", "1Gi", "5", "").obj()
			results, err := m.PrepareResourceClaims(testContext(t), []*resourceapi.ResourceClaim{claim})
			if err == nil {
				err = results[types.UID(uid)].Err
			}
			if err == nil {
				_, err = m.UnprepareResourceClaims(testContext(t), nil)
				for _, uerr := range unprepare(t, m, uid) {
					err = errors.Join(err, uerr)
				}
			}
			if err != nil {
				prepareErrs <- fmt.Errorf("prepare %d of another claim: %w", i, err)
				return
			}
		}
		<-done
	}()

	attempts, maxBlocks := 0, int64(0)
	chunk := make([]byte, 1<<20)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		attempts++
		end := int64(region.Size) + int64(attempts%64)*int64(len(chunk))
		err := unix.Fallocate(int(f.Fd()), 0, end, int64(len(chunk)))
		assertNoSpace(t, err, "fallocate past the end")
		_, err = f.WriteAt(chunk, end)
		assertNoSpace(t, err, "write past the end")
		if attempts%2 == 0 {
			// Extending the file allocates nothing; writing into it still fails.
			require.NoError(t, f.Truncate(end+int64(len(chunk))))
			_, err = f.WriteAt(chunk[:4096], end)
			assertNoSpace(t, err, "write into the extended file")
		}
		var st unix.Stat_t
		require.NoError(t, unix.Fstat(int(f.Fd()), &st))
		maxBlocks = max(maxBlocks, st.Blocks*512)
		if t.Failed() {
			break
		}
	}
	close(done)
	require.NoError(t, <-prepareErrs)
	t.Logf("%d rounds of fallocate and writes past the end; the region held at most %d bytes", attempts, maxBlocks)
	assert.LessOrEqual(t, maxBlocks, int64(regionFSSize()), "the region never holds more than its file system")
	assert.Less(t, usedBytes(t, env.stateRoot)-usedBefore, int64(64<<10), "the state root did not grow")

	// The writer's own claim keeps working: prepared again (another pod of
	// it starts), its region is whole and the same file.
	before, err := f.Stat()
	require.NoError(t, err)
	prepareOne(t, m, twoGPUClaim(claimA))
	after, err := os.Stat(l.regionPath(claimA))
	require.NoError(t, err)
	assert.True(t, os.SameFile(before, after))
	assert.EqualValues(t, region.Size, after.Size())
}

func assertNoSpace(t *testing.T, err error, what string) {
	t.Helper()
	if !errors.Is(err, unix.ENOSPC) && !errors.Is(err, unix.EFBIG) {
		t.Errorf("%s: got %v, want ENOSPC or EFBIG", what, err)
	}
}

// usedBytes is what the file system holding dir has in use.
func usedBytes(t *testing.T, dir string) int64 {
	var st unix.Statfs_t
	require.NoError(t, unix.Statfs(dir, &st))
	return int64(st.Blocks-st.Bfree) * st.Bsize
}

// TestStartRefusesPrivateStateRoot: with a state root whose mounts do not
// propagate, region file systems would stay in the plugin's own mount
// namespace and every container of a claim would fail to start; the
// manager refuses to start and says what to change.
func TestStartRefusesPrivateStateRoot(t *testing.T) {
	env := newTestEnv(t)
	for _, propagation := range []uintptr{unix.MS_PRIVATE, unix.MS_SLAVE} {
		require.NoError(t, unix.Mount("", env.stateRoot, "", propagation, ""))
		_, err := NewManager(testContext(t), env.options())
		require.Error(t, err)
		assert.ErrorContains(t, err, "not shared")
		assert.ErrorContains(t, err, "mountPropagation: Bidirectional")
		require.NoError(t, unix.Mount("", env.stateRoot, "", unix.MS_SHARED, ""))
	}
	env.newManager(t)
}

// TestRegionFSRecovery: the steps around the region file system leave
// nothing mounted that recovery does not account for. A region file
// system without a prepared claim (a crash between mount and checkpoint)
// is unmounted by the sweep; a foreign file system on a claim's shm
// directory is refused, not used.
func TestRegionFSRecovery(t *testing.T) {
	env := newTestEnv(t)
	m := env.newManager(t)
	l := layout{stateRoot: env.stateRoot}
	require.NoError(t, ownedDir(l.claimDir(claimB), perClaimDirMode))
	_, err := l.mountRegionFS(claimB)
	require.NoError(t, err)
	require.NoError(t, l.createRegion(claimB))
	removed, err := l.removeStaleClaimDirs(testContext(t), m.preparedUIDs, 0)
	require.NoError(t, err)
	assert.Equal(t, []types.UID{claimB}, removed)
	assert.Equal(t, absent, env.diskState(t, claimB), "the sweep unmounted and removed the stray claim")

	// Someone else's file system on the shm directory.
	require.NoError(t, ownedDir(l.claimDir(claimA), perClaimDirMode))
	require.NoError(t, ownedDir(l.shmDir(claimA), shmDirMode))
	require.NoError(t, unix.Mount("other", l.shmDir(claimA), "tmpfs", 0, "size=64m"))
	results, err := m.PrepareResourceClaims(testContext(t), []*resourceapi.ResourceClaim{twoGPUClaim(claimA)})
	require.NoError(t, err)
	require.Error(t, results[claimA].Err)
	assert.ErrorContains(t, results[claimA].Err, "not the")
	assert.Equal(t, absent, env.diskState(t, claimA), "the rollback unmounted it too")
	prepareOne(t, m, twoGPUClaim(claimA))
	assert.Equal(t, prepared, env.diskState(t, claimA))
}

// A region a container grew, by writing past its end or by allocating
// blocks beyond it, is cut back to its size; its content is kept.
func TestTrimRegion(t *testing.T) {
	path := filepath.Join(t.TempDir(), "region")
	require.NoError(t, region.Create(path))
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	require.NoError(t, err)
	defer func() { _ = f.Close() }()
	_, err = f.WriteAt([]byte("claim data"), 4096)
	require.NoError(t, err)
	before, err := os.ReadFile(path)
	require.NoError(t, err)

	trimmed, err := TrimRegion(path)
	require.NoError(t, err)
	assert.False(t, trimmed, "a region of its own size is left alone")

	_, err = f.WriteAt(make([]byte, 8<<20), int64(len(before)))
	require.NoError(t, err)
	trimmed, err = TrimRegion(path)
	require.NoError(t, err)
	assert.True(t, trimmed)
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, before, after)

	// Blocks past the end without a size change (fallocate KEEP_SIZE).
	if err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_KEEP_SIZE, int64(len(before)), 8<<20); err != nil {
		t.Skipf("the file system cannot allocate past the end (%v)", err)
	}
	var st unix.Stat_t
	require.NoError(t, unix.Stat(path, &st))
	require.Greater(t, st.Blocks*512, int64(len(before))+RegionSlack)
	trimmed, err = TrimRegion(path)
	require.NoError(t, err)
	assert.True(t, trimmed)
	require.NoError(t, unix.Stat(path, &st))
	assert.LessOrEqual(t, st.Blocks*512, int64(len(before))+RegionSlack)
	assert.EqualValues(t, len(before), st.Size)

	_, err = TrimRegion(filepath.Join(t.TempDir(), "missing"))
	assert.ErrorIs(t, err, fs.ErrNotExist)
}
