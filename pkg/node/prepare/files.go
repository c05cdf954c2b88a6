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
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/moby/sys/mountinfo"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/common/atomicfile"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/claimconfig"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/mpsuser"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/region"
)

// Paths inside containers (docs/architecture.md, contracts).
const (
	ContainerRoot        = "/usr/local/vgpu"
	ContainerLibVGPUPath = ContainerRoot + "/libvgpu.so"
	ContainerPreloadPath = "/etc/ld.so.preload"
	ContainerClaimsRoot  = ContainerRoot + "/claims"
)

// Host file names and modes under the state root.
const (
	claimsDirName      = "claims"
	shmDirName         = "shm"
	regionFileName     = "region"
	hostDirName        = "host"
	hostPIDsFileName   = "pids"
	burstFileName      = "burst"
	burstSocketName    = "burst.sock"
	preloadFileName    = "ld.so.preload"
	checkpointFileName = "checkpoint.json"

	// Every host directory is owned by the plugin (root) and writable by
	// it alone: containers get single files or read-only directories, so
	// they can neither plant files (e.g. setuid binaries) nor fill the
	// node's disk through the state root.
	claimDirMode = 0o755
	// A claim's own directory is the plugin's alone: a container can
	// change the mode and owner of its region file (it has it read-write),
	// so no other host user may reach that file, e.g. to run a setuid
	// binary a container wrote into it. Containers reach their files
	// through bind mounts, which the runtime sets up as root.
	perClaimDirMode    = 0o700
	configFileMode     = 0o644
	shmDirMode         = 0o755 // holds the region file; containers get the file alone
	hostDirMode        = 0o755 // written by the plugin only, read by any container user
	preloadFileMode    = 0o644
	checkpointFileMode = 0o600
)

// layout names the host files of the manager. Every claim UID passed in has
// been validated as a UUID, so joining it cannot escape the state root.
type layout struct {
	stateRoot string
}

func (l layout) claimsDir() string             { return filepath.Join(l.stateRoot, claimsDirName) }
func (l layout) claimDir(uid types.UID) string { return filepath.Join(l.claimsDir(), string(uid)) }
func (l layout) configPath(uid types.UID) string {
	return filepath.Join(l.claimDir(uid), claimconfig.FileName)
}
func (l layout) shmDir(uid types.UID) string     { return filepath.Join(l.claimDir(uid), shmDirName) }
func (l layout) regionPath(uid types.UID) string { return filepath.Join(l.shmDir(uid), regionFileName) }
func (l layout) hostDir(uid types.UID) string    { return filepath.Join(l.claimDir(uid), hostDirName) }
func (l layout) hostPIDsPath(uid types.UID) string {
	return filepath.Join(l.hostDir(uid), hostPIDsFileName)
}
func (l layout) burstPath(uid types.UID) string {
	return filepath.Join(l.hostDir(uid), burstFileName)
}
func (l layout) burstSocketPath(uid types.UID) string {
	return filepath.Join(l.hostDir(uid), burstSocketName)
}
func (l layout) mpsUserSocketPath(uid types.UID) string {
	return filepath.Join(l.hostDir(uid), mpsuser.SocketName)
}
func (l layout) preloadPath() string         { return filepath.Join(l.stateRoot, preloadFileName) }
func (l layout) checkpointPath() string      { return filepath.Join(l.stateRoot, checkpointFileName) }
func containerClaimDir(uid types.UID) string { return ContainerClaimsRoot + "/" + string(uid) }
func containerRegionPath(uid types.UID) string {
	return containerClaimDir(uid) + "/" + shmDirName + "/" + regionFileName
}

// renderConfig produces the claim's config file (pkg/contract/claimconfig):
// devices in the claim's GPU order. memAcct (nil: none) reports the GPUs
// whose MPS daemon runs with memory accounting (r615+ drivers, docs/mps.md).
func renderConfig(c *PreparedClaim, memAcct func(gpuUUID string) bool) []byte {
	cfg := claimconfig.Config{
		Claim:         string(c.UID),
		ComputePolicy: string(c.Settings.ComputePolicy),
		Priority:      string(c.Settings.Priority),
		LogLevel:      string(c.Settings.LogLevel),
		Enforcement:   string(c.Settings.Enforcement),
	}
	for _, g := range c.GPUs {
		d := claimconfig.Device{UUID: g.configUUID(), MemoryLimitBytes: g.MemoryLimitBytes, SMLimitPercent: timeShare(g)}
		if g.MPS {
			// The MPS client settings libvgpu.so sets before CUDA reads them (docs/mps.md).
			d.MPS = &claimconfig.MPS{ActiveThreadPercent: g.SMLimitPercent, PinnedMemoryLimit: g.MemoryLimitBytes}
			// The limit the driver itself holds the client to, as
			// NVIDIA_GPU_MEMORY_LIMITS; only where the driver reads it and
			// in whole MiB, which a limit under 1 MiB does not have.
			if memAcct != nil && memAcct(g.UUID) && g.MemoryLimitBytes >= claimconfig.MinDriverMemoryLimit {
				d.MPS.DriverMemoryLimit = g.MemoryLimitBytes
			}
		}
		cfg.Devices = append(cfg.Devices, d)
	}
	return claimconfig.Render(cfg)
}

// timeShare is the SM time share libvgpu.so's limiter holds the GPU's
// kernels to. Under MPS the claim's cores are a share of the SMs that the
// MPS server holds (mps.activeThreadPercent), not of time: time-slicing it
// as well would give a claim of 30 cores 30 % of the SMs for 30 % of the
// time.
func timeShare(g GPULimit) int64 {
	if g.MPS {
		return 0
	}
	return g.SMLimitPercent
}

// writeClaimConfig makes the claim directory and its config file. An
// existing file with the right content is left alone so that a re-prepare
// does not replace a file containers have mounted.
func (l layout) writeClaimConfig(c *PreparedClaim, memAcct func(gpuUUID string) bool) error {
	if err := ownedDir(l.claimsDir(), claimDirMode); err != nil {
		return fmt.Errorf("create claims directory: %w", err)
	}
	if err := ownedDir(l.claimDir(c.UID), perClaimDirMode); err != nil {
		return fmt.Errorf("create claim directory: %w", err)
	}
	want := renderConfig(c, memAcct)
	path := l.configPath(c.UID)
	if have, err := os.ReadFile(path); err == nil && bytes.Equal(have, want) {
		return nil
	}
	if err := atomicfile.WriteFile(path, want, configFileMode, atomicfile.Durable); err != nil {
		return fmt.Errorf("write claim config: %w", err)
	}
	return nil
}

// mountRegionFS makes the shm directory and mounts the claim's region file
// system on it; one mounted already is checked and kept. It reports legacy
// when the directory is no mount point yet holds a region: a file on the
// state root's own file system made by an earlier version of the plugin
// (this one empties a directory before mounting on it). Containers may have
// that file mounted, so it is used until the claim is unprepared.
func (l layout) mountRegionFS(uid types.UID) (legacy bool, err error) {
	dir := l.shmDir(uid)
	if err := ownedDir(dir, shmDirMode); err != nil {
		return false, fmt.Errorf("create shm directory: %w", err)
	}
	mounted, err := mountinfo.Mounted(dir)
	if err != nil {
		return false, fmt.Errorf("check mount of %s: %w", dir, err)
	}
	if mounted {
		return false, checkRegionFS(dir)
	}
	if info, err := os.Lstat(l.regionPath(uid)); err == nil && info.Mode().IsRegular() {
		return true, nil
	}
	return false, mountRegionFS(dir)
}

// createRegion makes the region file in the claim's shm directory, sized
// by the plugin; an existing region is kept. Anything else in the directory
// (left by a crash inside region.Create, or by an older plugin that mounted
// the directory writable into containers) is removed.
func (l layout) createRegion(uid types.UID) error {
	dir := l.shmDir(uid)
	if err := removeAllBut(dir, regionFileName); err != nil {
		return fmt.Errorf("clean shm directory: %w", err)
	}
	if err := region.Create(l.regionPath(uid)); err != nil {
		return fmt.Errorf("create shared region: %w", err)
	}
	return nil
}

// createHostDir makes the directory of host-written state (the host pid
// map, pkg/node/monitor) that containers see read-only; existing content is kept.
func (l layout) createHostDir(uid types.UID) error {
	if err := ownedDir(l.hostDir(uid), hostDirMode); err != nil {
		return fmt.Errorf("create host state directory: %w", err)
	}
	return nil
}

// ownedDir makes path a directory owned by the plugin's user with mode,
// also when it exists already with another owner or mode (e.g. the
// world-writable shm directory of an older plugin). A symbolic link is
// refused rather than followed.
func ownedDir(path string, mode fs.FileMode) error {
	if err := os.Mkdir(path, mode); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	info, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if !info.IsDir() {
		return fmt.Errorf("%s is not a directory (mode %s)", path, info.Mode())
	}
	if st, ok := info.Sys().(*syscall.Stat_t); ok && (int(st.Uid) != os.Geteuid() || int(st.Gid) != os.Getegid()) {
		if err := os.Lchown(path, os.Geteuid(), os.Getegid()); err != nil {
			return fmt.Errorf("set owner of %s: %w", path, err)
		}
	}
	// Chmod, because Mkdir's mode is reduced by the umask and an existing
	// directory keeps its mode.
	if err := os.Chmod(path, mode); err != nil {
		return fmt.Errorf("set mode of %s: %w", path, err)
	}
	return nil
}

// removeAllBut deletes every entry of dir except keep.
func removeAllBut(dir, keep string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if e.Name() == keep {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// removeClaimDir deletes everything of the claim under the state root,
// unmounting its region file system first.
func (l layout) removeClaimDir(uid types.UID) error {
	if err := unmountRegionFS(l.shmDir(uid)); err != nil {
		return err
	}
	if err := os.RemoveAll(l.claimDir(uid)); err != nil {
		return fmt.Errorf("remove claim directory: %w", err)
	}
	return atomicfile.SyncDir(l.claimsDir())
}
