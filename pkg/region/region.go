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
// be attached to it; an existing regular file of another size is a damaged
// region no process can use and is replaced; anything else at path is an
// error. The new file is complete before it appears under its name, so a
// crash never leaves a short region behind.
//
// Nothing is fsynced: a new region holds no data, and after a power loss the
// plugin recreates a missing or damaged region from its checkpoint.
func Create(path string) error {
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
	// Link fails instead of replacing an existing region, unlike rename.
	err = os.Link(tmpPath, path)
	if errors.Is(err, fs.ErrExist) {
		info, statErr := os.Lstat(path)
		if statErr != nil {
			return fmt.Errorf("check region %s: %w", path, statErr)
		}
		if !info.Mode().IsRegular() {
			return fmt.Errorf("region %s is not a regular file (mode %s)", path, info.Mode())
		}
		if info.Size() == Size {
			return nil
		}
		err = os.Rename(tmpPath, path)
	}
	if err != nil {
		return fmt.Errorf("create region %s: %w", path, err)
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
