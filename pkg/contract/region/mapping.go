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
	"encoding/binary"
	"fmt"
	"runtime/debug"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Mapping is a region file mapped read-only: the one way regions are read.
// A read of a mapping costs one fstat and copies of the parts in use (each
// active slot under its seqlock). The file stays the claim's containers'
// to rewrite or truncate: a read that faults on a page the file no longer
// has returns an error wrapping ErrCorrupt instead of crashing the reader.
type Mapping struct {
	path string
	fd   int
	data []byte
}

// Map opens the region at path (read-only, no symlink, no FIFO), checks it
// as every read does and maps it. The caller closes the Mapping.
func Map(path string) (*Mapping, error) {
	fd, err := open(path)
	if err != nil {
		return nil, err
	}
	if err := checkFile(fd, path); err != nil {
		_ = unix.Close(fd)
		return nil, err
	}
	data, err := unix.Mmap(fd, 0, Size, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("read region %s: mmap: %w", path, err)
	}
	return &Mapping{path: path, fd: fd, data: data}, nil
}

// Path is the file the Mapping was made from.
func (m *Mapping) Path() string { return m.path }

// Close unmaps the region and closes its descriptor.
func (m *Mapping) Close() error {
	errMap := unix.Munmap(m.data)
	errFD := unix.Close(m.fd)
	if errMap != nil {
		return fmt.Errorf("unmap region %s: %w", m.path, errMap)
	}
	if errFD != nil {
		return fmt.Errorf("close region %s: %w", m.path, errFD)
	}
	return nil
}

// ReadMapping takes a consistent snapshot of a mapped region and parses it.
// The file is checked first, as at Map (a file deleted since it was mapped
// yields ErrRemoved; one resized to other than Size, ErrCorrupt).
func (r *Reader) ReadMapping(m *Mapping) (*Region, error) {
	if err := checkFile(m.fd, m.path); err != nil {
		return nil, err
	}
	reg, err := r.readMapped(m)
	if err != nil {
		return nil, fmt.Errorf("read region %s: %w", m.path, err)
	}
	return reg, nil
}

// readMapped copies the header, the device records in use, the shared
// allocation records and the slots that can be in use into r.buf, each
// active slot under its seqlock, and parses the copy. Faults become errors:
// the file may shrink between the size check and the copies.
func (r *Reader) readMapped(m *Mapping) (reg *Region, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			fault, ok := p.(interface{ Addr() uintptr })
			if !ok {
				panic(p)
			}
			reg, err = nil, fmt.Errorf("%w: file shrank while being read (fault at %#x)", ErrCorrupt, fault.Addr())
		}
	}()
	data := m.data
	copy(r.buf[:HeaderSize], data)
	devices := min(int(le32(r.buf, offDeviceCount)), MaxDevices)
	copy(r.buf[DevicesOffset:DevicesOffset+devices*DeviceSize], data[DevicesOffset:])
	copy(r.buf[SharedOffset:SharedOffset+MaxShared*SharedSize], data[SharedOffset:])
	limit := slotLimit(r.buf)
	// A slot's per-device records past the device count are never parsed.
	used := offSlotDevices + devices*SlotDeviceSize
	r.stable = r.stable[:0]
	for i := range limit {
		r.stable = append(r.stable, r.copySlot(data, i, used))
	}
	return parse(r.buf, func(i int, raw []byte) ([]byte, bool, error) {
		return raw, r.stable[i], nil
	})
}

// copySlot is the seqlock reader of the first n bytes of slot i on a
// mapping: the owner makes seq odd, updates its counters and makes seq even
// again, so a copy taken between two equal even loads of seq is
// consistent. It reports whether it got one within MaxSlotRetries; a free
// slot is copied as free.
func (r *Reader) copySlot(data []byte, i, n int) bool {
	off := SlotsOffset + i*SlotSize
	dst, src := r.buf[off:off+n], data[off:off+n]
	state, seq := wordAt(src, offSlotState), wordAt(src, offSlotSeq)
	if atomic.LoadUint32(state) == slotFree {
		binary.LittleEndian.PutUint32(dst[offSlotState:], slotFree)
		return true
	}
	for range MaxSlotRetries {
		before := atomic.LoadUint32(seq)
		if before%2 != 0 {
			continue
		}
		copy(dst, src)
		// The copy's loads complete before the second load of seq: a
		// read-modify-write is a full barrier on every architecture Go
		// supports, where a plain atomic load only orders what follows it.
		atomic.AddUint32(&r.fence, 1)
		if atomic.LoadUint32(seq) == before && le32(dst, offSlotSeq) == before {
			return true
		}
	}
	// Never consistent: marked active, so that it counts as Unstable rather
	// than passing for free on whatever the buffer held before.
	binary.LittleEndian.PutUint32(dst[offSlotState:], slotActive)
	return false
}

// wordAt is the 4-byte word at off of a mapping, for atomic loads; every
// field loaded this way is 4-byte aligned in the layout.
func wordAt(b []byte, off int) *uint32 {
	return (*uint32)(unsafe.Pointer(&b[off]))
}
