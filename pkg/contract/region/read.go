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
	"os"

	"golang.org/x/sys/unix"
)

// MaxSlotRetries bounds how often a Reader copies a slot whose owner is
// updating it again; a slot still changing after that counts as
// Region.Unstable.
const MaxSlotRetries = 8

// Reader reads regions. It keeps its buffer between reads, so a collection
// over many regions allocates little; it is not safe for concurrent use.
type Reader struct {
	buf []byte
	// stable says, per slot, whether the last read got a consistent copy
	// of it.
	stable []bool
	// fence is the target of the reader's barrier.
	fence uint32
}

// NewReader returns a Reader with its buffer allocated.
func NewReader() *Reader {
	return &Reader{buf: make([]byte, Size)}
}

// Read takes a snapshot of the region at path and parses it: Map, then
// ReadMapping, then Close. A caller that reads the same region again and
// again keeps the Mapping instead (the monitor). A missing file yields an
// error wrapping fs.ErrNotExist; a file that is not a region wraps
// ErrCorrupt.
func (r *Reader) Read(path string) (*Region, error) {
	m, err := Map(path)
	if err != nil {
		return nil, err
	}
	reg, err := r.ReadMapping(m)
	if errClose := m.Close(); err == nil && errClose != nil {
		return nil, errClose
	}
	return reg, err
}

// ErrRemoved marks a region file that was deleted while a caller kept it
// mapped: its content is no longer the claim's.
var ErrRemoved = errors.New("region file removed")

// open opens the region at path read-only, without following a symlink
// and without blocking on a FIFO: the claim's containers can replace or
// rewrite it at any time. The caller closes the descriptor.
func open(path string) (int, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return -1, fmt.Errorf("read region %s: %w: a symlink", path, ErrCorrupt)
		}
		return -1, fmt.Errorf("read region %s: %w", path, &os.PathError{Op: "open", Path: path, Err: err})
	}
	return fd, nil
}

// checkFile is what every read checks first: the descriptor is a regular
// file of exactly Size bytes still linked in its directory.
func checkFile(fd int, path string) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("read region %s: stat: %w", path, err)
	}
	if st.Nlink == 0 {
		return fmt.Errorf("read region %s: %w", path, ErrRemoved)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fmt.Errorf("read region %s: %w: not a regular file (mode %#o)", path, ErrCorrupt, st.Mode)
	}
	if st.Size != Size {
		return fmt.Errorf("read region %s: %w: %d bytes, want %d", path, ErrCorrupt, st.Size, Size)
	}
	return nil
}
