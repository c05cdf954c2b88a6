package region

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// MaxSlotRetries bounds how often Reader re-reads a slot whose owner is
// updating it; a slot still changing after that counts as Region.Unstable.
const MaxSlotRetries = 8

// Reader reads regions from files. It keeps its buffers between reads, so
// a collection over many regions allocates little; it is not safe for
// concurrent use.
type Reader struct {
	buf  []byte
	slot []byte
	seq  []byte
}

// NewReader returns a Reader with its buffers allocated.
func NewReader() *Reader {
	return &Reader{buf: make([]byte, Size), slot: make([]byte, SlotSize), seq: make([]byte, 4)}
}

// Read takes a snapshot of the region at path and parses it.
//
// The file is opened read-only without following a symlink and without
// blocking on a FIFO, must be a regular file of exactly Size bytes, and is
// read with pread: the claim's containers can replace or rewrite it at any
// time. Each active slot is re-read under its seqlock (sequence, slot,
// sequence again) until both sequence reads agree on an even value, at most
// MaxSlotRetries times. A missing file yields an error wrapping
// fs.ErrNotExist; a file that is not a region wraps ErrCorrupt.
func (r *Reader) Read(path string) (*Region, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return nil, fmt.Errorf("read region %s: %w: a symlink", path, ErrCorrupt)
		}
		return nil, fmt.Errorf("read region %s: %w", path, &os.PathError{Op: "open", Path: path, Err: err})
	}
	defer func() { _ = unix.Close(fd) }()

	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("read region %s: stat: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, fmt.Errorf("read region %s: %w: not a regular file (mode %#o)", path, ErrCorrupt, st.Mode)
	}
	if st.Size != Size {
		return nil, fmt.Errorf("read region %s: %w: %d bytes, want %d", path, ErrCorrupt, st.Size, Size)
	}
	if err := preadFull(fd, r.buf, 0); err != nil {
		return nil, fmt.Errorf("read region %s: %w", path, err)
	}
	reg, err := parse(r.buf, func(i int, _ []byte) ([]byte, bool, error) { return r.readSlot(fd, i) })
	if err != nil {
		return nil, fmt.Errorf("read region %s: %w", path, err)
	}
	return reg, nil
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
