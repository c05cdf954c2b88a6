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

package region

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Size is VGPU_REGION_SIZE from vgpu_region.h: the exact length of every
// region file. A test compiles the header to keep the two equal.
const Size = 598016

// FileMode lets every user of the claim's containers map the region
// read-write; the containers may run as any non-root user.
const FileMode fs.FileMode = 0o666

// Create makes path a zero-filled region file of Size bytes with FileMode.
// An existing region of Size bytes is kept untouched because processes may
// be attached to it; an existing regular file of another size (a container
// that has it read-write truncated or extended it) is resized in place, so
// that the processes sharing it keep sharing one file and its first bytes
// are kept; anything else at path is an error. The new file is complete
// before it appears under its name, so a crash never leaves a short region
// behind, and neither path needs room for more than one region: it fits a
// file system sized for exactly one.
//
// Nothing is fsynced: a new region holds no data, and after a power loss the
// plugin recreates a missing or damaged region from its checkpoint.
func Create(path string) error {
	switch info, err := os.Lstat(path); {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("check region %s: %w", path, err)
	case !info.Mode().IsRegular():
		return fmt.Errorf("region %s is not a regular file (mode %s)", path, info.Mode())
	case info.Size() == Size:
		return nil
	default:
		return resize(path)
	}

	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, ".region-*")
	if err != nil {
		return fmt.Errorf("create region %s: %w", path, err)
	}
	tmpPath := tmp.Name()
	defer func() { _ = os.Remove(tmpPath) }()

	err = fill(tmp)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("create region %s: %w", path, err)
	}
	// Link fails instead of replacing a region made meanwhile, unlike rename.
	err = os.Link(tmpPath, path)
	if errors.Is(err, fs.ErrExist) {
		return Create(path)
	}
	if err != nil {
		return fmt.Errorf("create region %s: %w", path, err)
	}
	return nil
}

// resize cuts or extends the region file at path to Size bytes in place.
func resize(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|unix.O_NOFOLLOW, 0)
	if err != nil {
		return fmt.Errorf("resize region %s: %w", path, err)
	}
	// Truncating first frees whatever lies past Size.
	err = f.Truncate(Size)
	if err == nil {
		err = fill(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("resize region %s: %w", path, err)
	}
	return nil
}

// fill sizes f and sets its mode. The blocks are allocated up front where
// the file system allows it, so a full disk fails here and not with SIGBUS
// in a container writing through its mapping.
func fill(f *os.File) error {
	err := unix.Fallocate(int(f.Fd()), 0, 0, Size)
	if errors.Is(err, unix.EOPNOTSUPP) {
		err = f.Truncate(Size)
	}
	if err != nil {
		return fmt.Errorf("allocate %d bytes: %w", Size, err)
	}
	// Chmod, not the create mode, because the umask would clear bits.
	if err := f.Chmod(FileMode); err != nil {
		return fmt.Errorf("set mode: %w", err)
	}
	return nil
}
