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

package monitor

import (
	"errors"
	"runtime"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/region"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/prepare"
)

// Prepared claims' region files stay mapped between collections: the path
// lookup, open, map and close would be most of the cost of a collection,
// and reading a kept mapping takes one fstat. One descriptor and one mapping (598016 bytes of address
// space, of which only the touched pages are resident, shared with the
// page cache) per prepared claim; the Go runtime raises the soft
// open-file limit to the hard one at start.

// regionRead is the outcome of reading one claim's region.
type regionRead struct {
	reg *region.Region
	err error
}

// parallelReadMin is the number of claims from which a collection reads
// regions on several goroutines; below it the goroutines cost more than
// they save.
const parallelReadMin = 64

// readRegions reads the regions of prepared, in order. Files are mapped
// (and the cache changed) on the calling goroutine only; the reads
// themselves, an fstat and copies each, are spread over up to GOMAXPROCS
// goroutines, each with its own Reader. Callers hold m.mu.
func (m *Monitor) readRegions(prepared []prepare.PreparedClaim) []regionRead {
	out := make([]regionRead, len(prepared))
	maps := make([]*region.Mapping, len(prepared))
	for i, c := range prepared {
		maps[i], out[i].err = m.regionMapping(c)
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
					out[i].reg, out[i].err = r.ReadMapping(maps[i])
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
		// A mapping whose read failed is not kept: the file is looked up afresh next time.
		m.closeRegion(c.UID)
		if removed {
			// Removed and recreated since it was mapped (unprepare and prepare in between).
			mapping, err := m.regionMapping(c)
			if err == nil {
				out[i].reg, err = m.readers[0].ReadMapping(mapping)
				if err != nil {
					m.closeRegion(c.UID)
				}
			}
			out[i].err = err
		}
	}
	return out
}

// regionMapping returns the claim's cached mapping, mapping the file if
// there is none (or the claim's path changed).
func (m *Monitor) regionMapping(c prepare.PreparedClaim) (*region.Mapping, error) {
	if mapping, ok := m.regionMaps[c.UID]; ok {
		if mapping.Path() == c.RegionPath {
			return mapping, nil
		}
		m.closeRegion(c.UID)
	}
	mapping, err := region.Map(c.RegionPath)
	if err != nil {
		return nil, err
	}
	m.regionMaps[c.UID] = mapping
	return mapping, nil
}

// closeRegion unmaps and closes the cached region of claim uid, if any.
func (m *Monitor) closeRegion(uid types.UID) {
	if mapping, ok := m.regionMaps[uid]; ok {
		_ = mapping.Close()
		delete(m.regionMaps, uid)
	}
}
