package monitor

import (
	"errors"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/claims"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/region"
)

// openRegion is a prepared claim's region file, kept open between
// collections: the path lookup and open/close were a third of the cost of
// a collection. One descriptor per prepared claim; the Go runtime raises
// the soft open-file limit to the hard one at start.
type openRegion struct {
	path string
	fd   int
}

// regionRead is the outcome of reading one claim's region.
type regionRead struct {
	reg *region.Region
	err error
}

// parallelReadMin is the number of claims from which a collection reads
// regions on several goroutines; below it the goroutines cost more than
// they save.
const parallelReadMin = 64

// readRegions reads the regions of prepared, in order. Descriptors are
// opened (and their cache changed) on the calling goroutine only; the
// reads themselves, which are system calls and copies, are spread over up
// to GOMAXPROCS goroutines, each with its own Reader. Callers hold m.mu.
func (m *Monitor) readRegions(prepared []claims.PreparedClaim) []regionRead {
	out := make([]regionRead, len(prepared))
	fds := make([]int, len(prepared))
	for i, c := range prepared {
		fds[i], out[i].err = m.regionFD(c)
	}
	workers := min(runtime.GOMAXPROCS(0), len(prepared)/parallelReadMin+1)
	for len(m.readers) < workers {
		m.readers = append(m.readers, region.NewReader())
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := m.readers[w]
			for i := w; i < len(prepared); i += workers {
				if out[i].err == nil {
					out[i].reg, out[i].err = r.ReadFD(fds[i], prepared[i].RegionPath)
				}
			}
		}()
	}
	wg.Wait()
	for i, c := range prepared {
		if out[i].err == nil {
			continue
		}
		removed := errors.Is(out[i].err, region.ErrRemoved)
		// A descriptor whose read failed is not kept: the file is looked up afresh next time.
		m.closeRegion(c.UID)
		if removed {
			// Removed and recreated since it was opened (unprepare and prepare in between).
			fd, err := m.regionFD(c)
			if err == nil {
				out[i].reg, err = m.readers[0].ReadFD(fd, c.RegionPath)
				if err != nil {
					m.closeRegion(c.UID)
				}
			}
			out[i].err = err
		}
	}
	return out
}

// regionFD returns the claim's cached descriptor, opening the file if
// there is none (or the claim's path changed).
func (m *Monitor) regionFD(c claims.PreparedClaim) (int, error) {
	if o, ok := m.regionFDs[c.UID]; ok {
		if o.path == c.RegionPath {
			return o.fd, nil
		}
		m.closeRegion(c.UID)
	}
	fd, err := region.Open(c.RegionPath)
	if err != nil {
		return -1, err
	}
	m.regionFDs[c.UID] = openRegion{path: c.RegionPath, fd: fd}
	return fd, nil
}

// closeRegion closes the cached descriptor of claim uid, if any.
func (m *Monitor) closeRegion(uid types.UID) {
	if o, ok := m.regionFDs[uid]; ok {
		_ = unix.Close(o.fd)
		delete(m.regionFDs, uid)
	}
}
