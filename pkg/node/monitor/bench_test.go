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
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/region/regiontest"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/prepare"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/prepare/preparetest"
)

// BenchmarkCollect measures one collection over 100 and 1000 claims with 8
// active processes each, as a scrape after the interval pays it. The
// processes hold slots 0..7, as libvgpu.so claims the lowest free slots.
func BenchmarkCollect(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("claims=%d", n), func(b *testing.B) { benchmarkCollect(b, n, 8) })
	}
}

func benchmarkCollect(b *testing.B, nClaims, nProcs int) {
	dir := b.TempDir()
	src := preparetest.NewSource()
	var list []prepare.PreparedClaim
	for i := range nClaims {
		uid := types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", i))
		c := preparetest.Prepared(dir, uid, "ns", fmt.Sprintf("claim-%d", i))
		procs := make([]regiontest.Process, nProcs)
		for p := range procs {
			procs[p] = proc(p, uint32(100+p), 100*mib, uint64(1000*p), 0)
		}
		preparetest.WriteRegion(b, c.RegionPath, uint64(nProcs)*100*mib, uint64(nProcs)*100*mib, 50, procs...)
		list = append(list, c)
	}
	src.Set(list...)
	m, err := New(klog.NewContext(b.Context(), klog.Background()), Options{DriverName: "vgpu.dra.dev", NodeName: "node-a", Claims: src, GPUs: testGPUs, Registry: prometheus.NewRegistry(), Interval: time.Nanosecond})
	require.NoError(b, err)
	logger := klog.Background()
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU(b)
	for b.Loop() {
		snap := m.collect(logger)
		if len(snap.claims) != nClaims || snap.claims[0].devices[0].processes != nProcs {
			b.Fatalf("collection read %d claims, %d processes", len(snap.claims), snap.claims[0].devices[0].processes)
		}
	}
	// CPU time (user + system, all threads) per collection: unlike ns/op it
	// does not grow when other processes compete for the CPUs.
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
}

// processCPU is the process's user plus system CPU time.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
