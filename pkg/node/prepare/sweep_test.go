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
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2/ktesting"
)

const (
	uidPrepared = types.UID("0f6b1a6e-4c1e-4a55-9d1a-2f3c4b5a6d7e")
	uidStale    = types.UID("3c0e5f1a-9b8d-4e7f-a6b5-c4d3e2f1a0b9")
	uidFresh    = types.UID("5e6f7a8b-9c0d-4e1f-a2b3-c4d5e6f7a8b9")
)

// writeClaimDir makes a claim directory with a config and a region file,
// as prepare would.
func writeClaimDir(t *testing.T, l layout, uid types.UID) {
	t.Helper()
	require.NoError(t, os.MkdirAll(l.shmDir(uid), 0o755))
	require.NoError(t, os.WriteFile(l.regionPath(uid), nil, 0o600))
	require.NoError(t, os.WriteFile(l.configPath(uid), []byte("version=1\n"), 0o644))
}

func preparedSet(uids ...types.UID) func() map[types.UID]bool {
	return func() map[types.UID]bool {
		set := map[types.UID]bool{}
		for _, u := range uids {
			set[u] = true
		}
		return set
	}
}

func TestRemoveStaleClaimDirs(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	l := layout{stateRoot: t.TempDir()}
	dir := l.claimsDir()
	for _, uid := range []types.UID{uidPrepared, uidStale, uidFresh} {
		writeClaimDir(t, l, uid)
	}
	require.NoError(t, os.Mkdir(filepath.Join(dir, "not-a-claim"), 0o755))
	require.NoError(t, os.Symlink(l.claimDir(uidStale), filepath.Join(dir, "6a7b8c9d-0e1f-4a2b-8c3d-4e5f6a7b8c9d")))

	// Age every directory except fresh's.
	old := time.Now().Add(-time.Hour)
	for _, uid := range []types.UID{uidPrepared, uidStale} {
		for _, p := range []string{l.claimDir(uid), l.configPath(uid), l.shmDir(uid), l.regionPath(uid)} {
			require.NoError(t, os.Chtimes(p, old, old))
		}
	}

	prepared := preparedSet(uidPrepared)
	removed, err := l.removeStaleClaimDirs(ctx, prepared, DefaultStaleDirAge)
	require.NoError(t, err)
	// ctime cannot be set back, so even the aged directories count as fresh
	// with the default age; a zero age shows what the age check guards.
	assert.Empty(t, removed, "recently changed directories are kept")

	removed, err = l.removeStaleClaimDirs(ctx, prepared, 0)
	require.NoError(t, err)
	assert.ElementsMatch(t, []types.UID{uidStale, uidFresh}, removed)
	assert.DirExists(t, l.claimDir(uidPrepared), "a prepared claim's directory is never removed")
	assert.DirExists(t, filepath.Join(dir, "not-a-claim"), "foreign entries are left alone")
	assert.NoDirExists(t, l.claimDir(uidStale))
	_, err = os.Lstat(filepath.Join(dir, "6a7b8c9d-0e1f-4a2b-8c3d-4e5f6a7b8c9d"))
	assert.NoError(t, err, "a symlink is not followed or removed")

	missing := layout{stateRoot: filepath.Join(t.TempDir(), "missing")}
	removed, err = missing.removeStaleClaimDirs(ctx, prepared, 0)
	require.NoError(t, err)
	assert.Empty(t, removed)
}

// A claim reported as prepared only from the second look on, as when a
// prepare completes while the directory is examined, keeps its directory.
func TestRemoveStaleClaimDirsRechecksPrepared(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	l := layout{stateRoot: t.TempDir()}
	writeClaimDir(t, l, uidPrepared)
	calls := 0
	racing := func() map[types.UID]bool {
		calls++
		if calls == 1 {
			return nil
		}
		return preparedSet(uidPrepared)()
	}
	removed, err := l.removeStaleClaimDirs(ctx, racing, 0)
	require.NoError(t, err)
	assert.Empty(t, removed)
	assert.FileExists(t, l.regionPath(uidPrepared), "a claim prepared meanwhile keeps its directory")
}

// Every unprepare call ends with a sweep: the directory a crashed earlier
// instance left behind goes, the prepared claims' stay.
func TestUnprepareSweepsStaleClaimDirs(t *testing.T) {
	e := newTestEnv(t)
	m := e.newManager(t)
	ctx := testContext(t)
	claim := newClaim(uuid.NewString(), "keep").result("gpu", "gpu-0", "1Gi", "10", "").obj()
	res, err := m.PrepareResourceClaims(ctx, []*resourceapi.ResourceClaim{claim})
	require.NoError(t, err)
	require.NoError(t, res[claim.UID].Err)

	writeClaimDir(t, m.layout, uidStale)
	m.staleDirAge = 0
	_, err = m.UnprepareResourceClaims(ctx, []kubeletplugin.NamespacedObject{{UID: uidFresh}})
	require.NoError(t, err)
	assert.NoDirExists(t, m.layout.claimDir(uidStale), "left over by a crash, removed by the sweep")
	assert.DirExists(t, m.layout.claimDir(claim.UID), "a prepared claim keeps its directory")
}
