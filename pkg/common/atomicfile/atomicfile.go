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

package atomicfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// TempInfix separates a target's name from the random part of its temporary
// files' names.
const TempInfix = ".tmp-"

// Durability says whether a write must survive a power loss.
type Durability bool

const (
	// Durable syncs the file and its directory: after Write returns, a
	// crash or power loss leaves the new content.
	Durable Durability = true
	// Volatile skips the syncs, for content that is rebuilt shortly after
	// a restart anyway; readers still never see a partial file.
	Volatile Durability = false
)

// WriteFile replaces path with data, with mode.
func WriteFile(path string, data []byte, mode fs.FileMode, d Durability) error {
	return Write(path, bytes.NewReader(data), mode, d)
}

// Write replaces path with everything read from r, with mode. On error the
// target is untouched and no temporary file is left. An error from a missing
// directory wraps fs.ErrNotExist.
func Write(path string, r io.Reader, mode fs.FileMode, d Durability) error {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, base+TempInfix+"*")
	if err != nil {
		return fmt.Errorf("create temporary file for %s: %w", path, err)
	}
	tmpPath := tmp.Name()
	committed := false
	defer func() {
		if !committed {
			_ = os.Remove(tmpPath)
		}
	}()
	_, err = io.Copy(tmp, r)
	if err == nil {
		err = tmp.Chmod(mode)
	}
	if err == nil && d == Durable {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", tmpPath, err)
	}
	if err := os.Rename(tmpPath, path); err != nil {
		return fmt.Errorf("rename %s to %s: %w", tmpPath, path, err)
	}
	committed = true
	if d == Durable {
		return SyncDir(dir)
	}
	return nil
}

// SyncDir makes renames and removals in dir durable across a power loss.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	defer func() { _ = d.Close() }()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}

// IsTemp reports whether name (a base name) is a temporary file of a write
// to target (also a base name).
func IsTemp(name, target string) bool {
	prefix := target + TempInfix
	return len(name) > len(prefix) && name[:len(prefix)] == prefix
}

// RemoveTemps deletes the temporary files that interrupted writes to
// dir/target left behind. A missing dir has none.
func RemoveTemps(dir, target string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list temporary files in %s: %w", dir, err)
	}
	var errs []error
	for _, e := range entries {
		if !IsTemp(e.Name(), target) {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
