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
	"fmt"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/region/regiontest"
)

// BenchmarkReadRegions reads 1000 regions of one GPU and 8 active
// processes each, one-shot (Read: map, read, unmap, as the host pid mapper
// does) and through kept mappings (as the monitor's collection does),
// alternately in the same run, and reports both per-region CPU times and
// their ratio.
func BenchmarkReadRegions(b *testing.B) {
	const regions, procs = 1000, 8
	dir := b.TempDir()
	paths := make([]string, regions)
	maps := make([]*Mapping, regions)
	for i := range regions {
		ps := make([]regiontest.Process, procs)
		for p := range ps {
			ps[p] = regiontest.Process{Slot: p, PID: uint32(100 + p), StartTime: uint64(1000 + p), PIDNamespace: 4026532000, Seq: 2,
				Devices: []regiontest.ProcessDevice{{UsedBytes: 1 << 20, KernelLaunches: uint64(p)}}}
		}
		raw, err := regiontest.Ready(1, uint64(time.Now().UnixNano()),
			[]regiontest.Device{{UUID: fmt.Sprintf("GPU-%08d-0000-0000-0000-000000000000", i), MemoryLimitBytes: 1 << 30}}, ps)
		require.NoError(b, err)
		path := filepath.Join(dir, fmt.Sprintf("region-%d", i))
		require.NoError(b, regiontest.WriteFile(path, raw))
		paths[i] = path
		maps[i], err = Map(path)
		require.NoError(b, err)
	}
	b.Cleanup(func() {
		for i := range regions {
			_ = maps[i].Close()
		}
	})
	r := NewReader()
	// CPU time of this thread: unlike wall time it does not grow when other
	// processes compete for the CPUs.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var oneShotTime, keptTime time.Duration
	b.ReportAllocs()
	for b.Loop() {
		start := threadCPU(b)
		for i := range regions {
			if reg, err := r.Read(paths[i]); err != nil || len(reg.Processes) != procs {
				b.Fatalf("read: %v, %d processes", err, len(reg.Processes))
			}
		}
		mid := threadCPU(b)
		for i := range regions {
			if reg, err := r.ReadMapping(maps[i]); err != nil || len(reg.Processes) != procs {
				b.Fatalf("mapping: %v, %d processes", err, len(reg.Processes))
			}
		}
		oneShotTime += mid - start
		keptTime += threadCPU(b) - mid
	}
	n := float64(b.N * regions)
	b.ReportMetric(float64(oneShotTime.Nanoseconds())/n, "read-cpu-ns/region")
	b.ReportMetric(float64(keptTime.Nanoseconds())/n, "kept-mapping-cpu-ns/region")
	b.ReportMetric(float64(keptTime)/float64(oneShotTime), "kept/read")
}

func threadCPU(b *testing.B) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
