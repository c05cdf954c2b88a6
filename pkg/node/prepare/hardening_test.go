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
	"slices"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/region"
)

// TestContainersCannotWriteNodeState checks what a container gets of the
// node's state: the region file alone read-write, with nosuid, nodev and
// noexec on it (and on every other writable mount), and host directories
// that only the plugin can write.
func TestContainersCannotWriteNodeState(t *testing.T) {
	env := newTestEnv(t)
	m := env.newManager(t)
	prepareOne(t, m, twoGPUClaim(claimA))

	spec := readSpec(t, env, claimA)
	var writable []string
	for _, mnt := range spec.ContainerEdits.Mounts {
		if slices.Contains(mnt.Options, "ro") {
			continue
		}
		writable = append(writable, mnt.ContainerPath)
		for _, opt := range []string{"nosuid", "nodev", "noexec"} {
			assert.Contains(t, mnt.Options, opt, "writable mount %s", mnt.ContainerPath)
		}
		info, err := os.Stat(mnt.HostPath)
		require.NoError(t, err)
		assert.True(t, info.Mode().IsRegular(), "writable mount %s must be a file, not a directory a container can fill", mnt.ContainerPath)
	}
	assert.Equal(t, []string{"/usr/local/vgpu/claims/" + claimA + "/shm/region"}, writable)

	err := filepath.Walk(env.stateRoot, func(path string, info os.FileInfo, err error) error {
		if err != nil || !info.IsDir() {
			return err
		}
		assert.Zero(t, info.Mode().Perm()&0o022, "%s is writable by others than its owner (%s)", path, info.Mode())
		st := info.Sys().(*syscall.Stat_t)
		assert.EqualValues(t, os.Geteuid(), st.Uid, "%s is owned by the plugin's user", path)
		return nil
	})
	require.NoError(t, err)
	info, err := os.Stat(filepath.Join(env.stateRoot, "claims", claimA))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), info.Mode().Perm(), "no other host user reaches the region a container can chmod")
}

// TestPrepareRepairsOldClaimDirectories: a claim prepared by an older
// plugin had its region on the state root's file system, in a
// world-writable shm directory that containers could plant files in;
// preparing it again (restore after a restart) locks it down and removes
// what was planted, keeping the region containers map (and so the older
// layout) until the claim is unprepared.
func TestPrepareRepairsOldClaimDirectories(t *testing.T) {
	env := newTestEnv(t)
	m := env.newManager(t)
	claim := twoGPUClaim(claimA)
	prepareOne(t, m, claim)

	l := layout{stateRoot: env.stateRoot}
	shm := l.shmDir(claimA)
	require.NoError(t, unmountRegionFS(shm))
	require.NoError(t, region.Create(l.regionPath(claimA)))
	regionBefore, err := os.Stat(l.regionPath(claimA))
	require.NoError(t, err)
	require.NoError(t, os.Chmod(shm, 0o777))
	planted := filepath.Join(shm, "planted")
	require.NoError(t, os.WriteFile(planted, []byte("#!/bin/sh\n"), 0o4755))

	// A new manager (the plugin restarted) restores the claim from its
	// checkpoint.
	m = env.newManager(t)

	info, err := os.Stat(shm)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o755), info.Mode().Perm())
	assert.NoFileExists(t, planted)
	regionAfter, err := os.Stat(l.regionPath(claimA))
	require.NoError(t, err)
	assert.True(t, os.SameFile(regionBefore, regionAfter), "the region containers map is kept")
	want := prepared
	want.regionFS = false
	assert.Equal(t, want, env.diskState(t, claimA), "the older layout is kept while the claim is prepared")

	for _, err := range unprepare(t, m, claimA) {
		require.NoError(t, err)
	}
	assert.Equal(t, absent, env.diskState(t, claimA))
	prepareOne(t, m, claim)
	assert.Equal(t, prepared, env.diskState(t, claimA), "prepared again, the claim gets a region file system")
}
