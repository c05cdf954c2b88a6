package region

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// MaxSlotRetries bounds how often Reader re-reads a slot whose owner is
// updating it; a slot still changing after that counts as Region.Unstable.
const MaxSlotRetries = 8

// prefetchSlots slots are read together with the header: a claim's
// processes take the lowest free slots, so this usually covers all of them.
const prefetchSlots = 8

// Reader reads regions from files. It keeps its buffers between reads, so
// a collection over many regions allocates little; it is not safe for
// concurrent use.
type Reader struct {
	buf []byte
	// again is a second copy of the slots, taken right after the first.
	again []byte
	slot  []byte
	seq   []byte
	// stable says, per slot, whether the last mapped read got a
	// consistent copy of it.
	stable []bool
	// fence is the target of the mapped reader's barrier.
	fence uint32
}

// NewReader returns a Reader with its buffers allocated.
func NewReader() *Reader {
	return &Reader{buf: make([]byte, Size), again: make([]byte, Size-SlotsOffset), slot: make([]byte, SlotSize), seq: make([]byte, 4)}
}

// Read takes a snapshot of the region at path and parses it.
//
// The file is opened read-only without following a symlink and without
// blocking on a FIFO, must be a regular file of exactly Size bytes, and is
// read with pread: the claim's containers can replace or rewrite it at any
// time. The slots that can be in use are read twice in a row; an active
// slot whose two copies are identical with an even sequence was not written
// in between and is taken as is. Any other active slot is re-read under its
// seqlock (sequence, slot, sequence again) until both sequence reads agree
// on an even value, at most MaxSlotRetries times. Two bulk reads keep the
// common case, slots that did not change, to a few system calls a region. A missing file yields an error wrapping
// fs.ErrNotExist; a file that is not a region wraps ErrCorrupt.
func (r *Reader) Read(path string) (*Region, error) {
	fd, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = unix.Close(fd) }()
	return r.ReadFD(fd, path)
}

// ErrRemoved marks a region file that was deleted while a caller kept it
// open: its content is no longer the claim's.
var ErrRemoved = errors.New("region file removed")

// Open opens the region at path for ReadFD, read-only, without following a
// symlink and without blocking on a FIFO. The caller closes the descriptor.
func Open(path string) (int, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return -1, fmt.Errorf("read region %s: %w: a symlink", path, ErrCorrupt)
		}
		return -1, fmt.Errorf("read region %s: %w", path, &os.PathError{Op: "open", Path: path, Err: err})
	}
	return fd, nil
}

// ReadFD is Read on a descriptor from Open, which a caller may keep open
// across reads to save the path lookup; path only names the file in
// errors. A file deleted since it was opened yields an error wrapping
// ErrRemoved.
func (r *Reader) ReadFD(fd int, path string) (*Region, error) {
	if err := checkFile(fd, path); err != nil {
		return nil, err
	}
	// Header, device records and the first few slots in one read; then the
	// rest of the slots that can be in use, if any. Slot bytes past the
	// limit are stale in r.buf and never looked at.
	if err := preadFull(fd, r.buf[:SlotsOffset+prefetchSlots*SlotSize], 0); err != nil {
		return nil, fmt.Errorf("read region %s: %w", path, err)
	}
	slotBytes := slotLimit(r.buf) * SlotSize
	if slotBytes > prefetchSlots*SlotSize {
		if err := preadFull(fd, r.buf[SlotsOffset+prefetchSlots*SlotSize:SlotsOffset+slotBytes], SlotsOffset+prefetchSlots*SlotSize); err != nil {
			return nil, fmt.Errorf("read region %s: %w", path, err)
		}
	}
	if err := preadFull(fd, r.again[:slotBytes], SlotsOffset); err != nil {
		return nil, fmt.Errorf("read region %s: %w", path, err)
	}
	reg, err := parse(r.buf, func(i int, raw []byte) ([]byte, bool, error) {
		if le32(raw, offSlotSeq)%2 == 0 && bytes.Equal(raw, r.again[i*SlotSize:][:SlotSize]) {
			return raw, true, nil
		}
		return r.readSlot(fd, i)
	})
	if err != nil {
		return nil, fmt.Errorf("read region %s: %w", path, err)
	}
	return reg, nil
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

// readSlot is the seqlock reader of slot i. The owner makes seq odd, updates
// its counters and makes seq even again; a copy taken between two equal even
// reads of seq is consistent.
func (r *Reader) readSlot(fd, i int) ([]byte, bool, error) {
	off := int64(SlotsOffset + i*SlotSize)
	before, err := r.readSeq(fd, off)
	if err != nil {
		return nil, false, err
	}
	for range MaxSlotRetries {
		if before%2 == 0 {
			if err := preadFull(fd, r.slot, off); err != nil {
				return nil, false, err
			}
			after, err := r.readSeq(fd, off)
			if err != nil {
				return nil, false, err
			}
			if after == before && le32(r.slot, offSlotSeq) == before {
				return r.slot, true, nil
			}
			before = after
			continue
		}
		if before, err = r.readSeq(fd, off); err != nil {
			return nil, false, err
		}
	}
	return nil, false, nil
}

func (r *Reader) readSeq(fd int, slotOff int64) (uint32, error) {
	if err := preadFull(fd, r.seq, slotOff+offSlotSeq); err != nil {
		return 0, err
	}
	return le32(r.seq, 0), nil
}

// preadFull fills b from offset off; a short read means the file was
// truncated under us, which makes the snapshot invalid.
func preadFull(fd int, b []byte, off int64) error {
	for done := 0; done < len(b); {
		n, err := unix.Pread(fd, b[done:], off+int64(done))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("pread at %d: %w", off+int64(done), err)
		}
		if n == 0 {
			return fmt.Errorf("%w: file shrank while being read (%w)", ErrCorrupt, io.ErrUnexpectedEOF)
		}
		done += n
	}
	return nil
}
