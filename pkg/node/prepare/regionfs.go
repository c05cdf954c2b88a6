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
	"strconv"
	"strings"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/region"
)

// Each claim's shm directory is its own tmpfs, sized for exactly one region
// (docs/security.md, "Node disk"). A container has its region file
// read-write and so can write past the file's end or allocate blocks beyond
// it; on this file system that fails with ENOSPC at the region's size
// instead of filling the state root's disk.
const (
	// regionFSInodes covers the root directory, the region and the
	// temporary file region.Create links into place.
	regionFSInodes = 4
	// maxUnmounts bounds the unmount loop: a directory holds one mount
	// unless a crashed plugin raced another one.
	maxUnmounts = 8
)

// regionFSSize is region.Size rounded up to whole pages, the unit tmpfs
// allocates in.
func regionFSSize() int {
	page := os.Getpagesize()
	return (region.Size + page - 1) / page * page
}

// regionFSData is the tmpfs mount data of a claim's shm directory.
func regionFSData() string {
	return "size=" + strconv.Itoa(regionFSSize()) + ",nr_inodes=" + strconv.Itoa(regionFSInodes) + ",mode=" + strconv.FormatUint(shmDirMode, 8)
}

// mountRegionFS mounts a fresh region file system on dir, which is no mount
// point. What the directory held is removed first: once covered it would be
// out of reach of the cleanup.
func mountRegionFS(dir string) error {
	if err := removeAllBut(dir, ""); err != nil {
		return fmt.Errorf("empty %s before mounting: %w", dir, err)
	}
	// nosuid, nodev, noexec: a container has the region read-write, so
	// nothing in it may ever act as a program or device on the node.
	flags := uintptr(unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC)
	if err := unix.Mount("vgpu-dra-region", dir, "tmpfs", flags, regionFSData()); err != nil {
		return fmt.Errorf("mount the region file system (tmpfs %s) on %s: %w", regionFSData(), dir, err)
	}
	return nil
}

// checkRegionFS verifies that the file system mounted on dir is a region
// file system: tmpfs, no larger than one region.
func checkRegionFS(dir string) error {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return fmt.Errorf("check the file system on %s: %w", dir, err)
	}
	size := st.Blocks * uint64(st.Bsize)
	if st.Type != unix.TMPFS_MAGIC || size != uint64(regionFSSize()) {
		return fmt.Errorf("%s has a file system of type %#x and %d bytes mounted on it, not the %d-byte tmpfs of a region; unmount it", dir, st.Type, size, regionFSSize())
	}
	return nil
}

// unmountRegionFS unmounts whatever is mounted on dir; a directory that is
// no mount point, or is gone, is left as it is. The unmount is lazy: the
// monitor may still have the region mapped, and the memory is freed when
// the last mapping goes.
func unmountRegionFS(dir string) error {
	for range maxUnmounts {
		mounted, err := mountinfo.Mounted(dir)
		if errors.Is(err, fs.ErrNotExist) || err == nil && !mounted {
			return nil
		}
		if err != nil {
			return fmt.Errorf("check mount of %s: %w", dir, err)
		}
		if err := unix.Unmount(dir, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("unmount the region file system on %s: %w", dir, err)
		}
	}
	return fmt.Errorf("unmount %s: still a mount point after %d unmounts", dir, maxUnmounts)
}

// checkMountPropagation verifies that mounts made under stateRoot reach the
// container runtime: the mount holding stateRoot must be shared (in a
// container, the chart's mountPropagation: Bidirectional). Otherwise a
// region file system stays in the plugin's own mount namespace and every
// container of a claim fails to start, its region missing.
func checkMountPropagation(stateRoot string) error {
	if resolved, err := filepath.EvalSymlinks(stateRoot); err == nil {
		stateRoot = resolved
	}
	mounts, err := mountinfo.GetMounts(mountinfo.ParentsFilter(stateRoot))
	if err != nil {
		return fmt.Errorf("read mount table: %w", err)
	}
	var holder *mountinfo.Info
	for _, m := range mounts {
		if holder == nil || len(m.Mountpoint) >= len(holder.Mountpoint) {
			holder = m
		}
	}
	if holder == nil {
		return fmt.Errorf("no mount holds the state root %s", stateRoot)
	}
	for _, field := range strings.Fields(holder.Optional) {
		if strings.HasPrefix(field, "shared:") {
			return nil
		}
	}
	return fmt.Errorf("the state root %s is on mount %s, which is not shared (propagation %q): the region file systems the plugin mounts there would not reach the container runtime; in a container mount the state root with mountPropagation: Bidirectional, on a host run `mount --make-shared %s` (docs/install.md)",
		stateRoot, holder.Mountpoint, propagation(holder.Optional), holder.Mountpoint)
}

// propagation names a mount's propagation from its optional fields.
func propagation(optional string) string {
	if strings.Contains(optional, "master:") {
		return "slave"
	}
	return "private"
}

// RegionSlack is how many bytes a region may occupy on disk beyond its size
// (block rounding) before TrimRegion counts it as grown.
const RegionSlack = 1 << 20

// TrimRegion cuts a claim's region file back to region.Size when it is
// larger or occupies more than that (a container has the file read-write),
// and says whether it did. Nothing valid lives past region.Size, so this
// loses nothing. On a claim's region file system the file cannot take more
// than its size anyway and this only undoes an ftruncate; for a region an
// earlier plugin version left on the state root's file system it bounds
// what a container can take of that disk to what it writes between two
// calls (the host pid mapper calls it every interval).
func TrimRegion(path string) (bool, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return false, fmt.Errorf("stat region %s: %w", path, err)
	}
	if st.Size <= region.Size && st.Blocks*512 <= region.Size+RegionSlack {
		return false, nil
	}
	// Truncating, also to the same size, frees the blocks past the end.
	if err := unix.Truncate(path, region.Size); err != nil {
		return false, fmt.Errorf("truncate grown region %s: %w", path, err)
	}
	return true, nil
}
