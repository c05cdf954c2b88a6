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
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/region/regiontest"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/prepare/preparetest"
)

var usageMetrics = []string{
	"vgpu_dra_claim_memory_limit_bytes", "vgpu_dra_claim_memory_used_bytes", "vgpu_dra_claim_memory_peak_bytes",
	"vgpu_dra_claim_sm_limit_ratio", "vgpu_dra_claim_sm_utilization_ratio", "vgpu_dra_claim_kernel_launches_total",
	"vgpu_dra_claim_throttled_seconds_total", "vgpu_dra_claim_processes",
	"vgpu_dra_gpu_memory_total_bytes", "vgpu_dra_gpu_prepared_memory_bytes", "vgpu_dra_gpu_prepared_cores_ratio",
	"vgpu_dra_gpu_prepared_claims", "vgpu_dra_monitor_region_errors_total",
}

func newTestMonitor(t *testing.T, src ClaimSource) (*Monitor, *prometheus.Registry, *clocktesting.FakeClock) {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	reg := prometheus.NewRegistry()
	m, err := New(ctx, Options{DriverName: "vgpu.dra.dev", NodeName: "node-a", Claims: src, GPUs: testGPUs, Registry: reg, Interval: 10 * time.Second})
	require.NoError(t, err)
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	m.now = clk.Now
	return m, reg, clk
}

// TestMetricsGolden exports one claim with a readable region and one whose
// region vanished: the second keeps its limits but no usage, and counts as
// an error.
func TestMetricsGolden(t *testing.T) {
	dir := t.TempDir()
	a := preparetest.Prepared(dir, uidA, "team-a", "train")
	b := preparetest.Prepared(dir, uidB, "team-b", "serve")
	preparetest.WriteRegion(t, a.RegionPath, 1536*mib, 2*gib, 25,
		proc(0, 7, gib, 1000, 2_500_000_000), proc(3, 9, 256*mib, 50, 0),
		proc(4, 11, 0, 0, 0)) // attached, has not used the GPU yet
	_, reg, _ := newTestMonitor(t, preparetest.NewSource(a, b))

	expected := `
# HELP vgpu_dra_claim_kernel_launches_total Kernel launches of the claim's processes on the GPU.
# TYPE vgpu_dra_claim_kernel_launches_total counter
vgpu_dra_claim_kernel_launches_total{claim="train",device_index="0",device_uuid="GPU-11111111-2222-3333-4444-555555555555",namespace="team-a",node="node-a",pod=""} 1050
# HELP vgpu_dra_claim_memory_limit_bytes GPU memory limit of the claim on the GPU, in bytes.
# TYPE vgpu_dra_claim_memory_limit_bytes gauge
vgpu_dra_claim_memory_limit_bytes{claim="serve",device_index="0",device_uuid="GPU-11111111-2222-3333-4444-555555555555",namespace="team-b",node="node-a",pod=""} 4.294967296e+09
vgpu_dra_claim_memory_limit_bytes{claim="train",device_index="0",device_uuid="GPU-11111111-2222-3333-4444-555555555555",namespace="team-a",node="node-a",pod=""} 4.294967296e+09
# HELP vgpu_dra_claim_memory_peak_bytes Highest GPU memory use of the claim on the GPU since its shared region was initialised, in bytes.
# TYPE vgpu_dra_claim_memory_peak_bytes gauge
vgpu_dra_claim_memory_peak_bytes{claim="train",device_index="0",device_uuid="GPU-11111111-2222-3333-4444-555555555555",namespace="team-a",node="node-a",pod=""} 2.147483648e+09
# HELP vgpu_dra_claim_memory_used_bytes GPU memory the claim's processes use on the GPU (allocations and context overhead), in bytes.
# TYPE vgpu_dra_claim_memory_used_bytes gauge
vgpu_dra_claim_memory_used_bytes{claim="train",device_index="0",device_uuid="GPU-11111111-2222-3333-4444-555555555555",namespace="team-a",node="node-a",pod=""} 1.610612736e+09
# HELP vgpu_dra_claim_processes Processes of the claim using the GPU.
# TYPE vgpu_dra_claim_processes gauge
vgpu_dra_claim_processes{claim="train",device_index="0",device_uuid="GPU-11111111-2222-3333-4444-555555555555",namespace="team-a",node="node-a",pod=""} 2
# HELP vgpu_dra_claim_sm_limit_ratio Share of the GPU's SM time the claim is limited to, 0..1; 0 means best effort (no limit).
# TYPE vgpu_dra_claim_sm_limit_ratio gauge
vgpu_dra_claim_sm_limit_ratio{claim="serve",device_index="0",device_uuid="GPU-11111111-2222-3333-4444-555555555555",namespace="team-b",node="node-a",pod=""} 0.3
vgpu_dra_claim_sm_limit_ratio{claim="train",device_index="0",device_uuid="GPU-11111111-2222-3333-4444-555555555555",namespace="team-a",node="node-a",pod=""} 0.3
# HELP vgpu_dra_claim_sm_utilization_ratio Share of the GPU's SM time the claim used recently, 0..1.
# TYPE vgpu_dra_claim_sm_utilization_ratio gauge
vgpu_dra_claim_sm_utilization_ratio{claim="train",device_index="0",device_uuid="GPU-11111111-2222-3333-4444-555555555555",namespace="team-a",node="node-a",pod=""} 0.25
# HELP vgpu_dra_claim_throttled_seconds_total Time the claim's kernel launches waited for their SM share, in seconds.
# TYPE vgpu_dra_claim_throttled_seconds_total counter
vgpu_dra_claim_throttled_seconds_total{claim="train",device_index="0",device_uuid="GPU-11111111-2222-3333-4444-555555555555",namespace="team-a",node="node-a",pod=""} 2.5
# HELP vgpu_dra_gpu_prepared_claims Claims prepared on the GPU.
# TYPE vgpu_dra_gpu_prepared_claims gauge
vgpu_dra_gpu_prepared_claims{device_index="0",device_uuid="GPU-11111111-2222-3333-4444-555555555555",node="node-a"} 2
vgpu_dra_gpu_prepared_claims{device_index="1",device_uuid="GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee",node="node-a"} 0
# HELP vgpu_dra_gpu_prepared_cores_ratio Sum of the SM shares of the claims prepared on the GPU, 0..1 (best-effort claims add nothing).
# TYPE vgpu_dra_gpu_prepared_cores_ratio gauge
vgpu_dra_gpu_prepared_cores_ratio{device_index="0",device_uuid="GPU-11111111-2222-3333-4444-555555555555",node="node-a"} 0.6
vgpu_dra_gpu_prepared_cores_ratio{device_index="1",device_uuid="GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee",node="node-a"} 0
# HELP vgpu_dra_gpu_prepared_memory_bytes Sum of the memory limits of the claims prepared on the GPU, in bytes.
# TYPE vgpu_dra_gpu_prepared_memory_bytes gauge
vgpu_dra_gpu_prepared_memory_bytes{device_index="0",device_uuid="GPU-11111111-2222-3333-4444-555555555555",node="node-a"} 8.589934592e+09
vgpu_dra_gpu_prepared_memory_bytes{device_index="1",device_uuid="GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee",node="node-a"} 0
# HELP vgpu_dra_gpu_memory_total_bytes Total memory of the GPU, in bytes.
# TYPE vgpu_dra_gpu_memory_total_bytes gauge
vgpu_dra_gpu_memory_total_bytes{device_index="0",device_uuid="GPU-11111111-2222-3333-4444-555555555555",node="node-a"} 8.589934592e+10
vgpu_dra_gpu_memory_total_bytes{device_index="1",device_uuid="GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee",node="node-a"} 8.589934592e+10
# HELP vgpu_dra_monitor_region_errors_total Shared regions or NVML queries the monitor could not read, by reason (vanished, corrupt, unreadable, nvml).
# TYPE vgpu_dra_monitor_region_errors_total counter
vgpu_dra_monitor_region_errors_total{reason="vanished"} 1
`
	// The error counter is gathered alongside the collection that raises
	// it; the second scrape, within the interval, reuses the collection.
	_, err := reg.Gather()
	require.NoError(t, err)
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(expected), usageMetrics...))
}

// TestMetricsIntervalAndCounters checks that scrapes within the interval do
// not read again, that a corrupt region drops the claim's usage instead of
// keeping it stale, and that counters never go back when a process exits.
func TestMetricsIntervalAndCounters(t *testing.T) {
	dir := t.TempDir()
	a := preparetest.Prepared(dir, uidA, "team-a", "train")
	preparetest.WriteRegion(t, a.RegionPath, gib, gib, 10, proc(0, 7, gib, 100, 1e9), proc(1, 8, 0, 40, 0))
	m, reg, clk := newTestMonitor(t, preparetest.NewSource(a))
	launches := func() float64 {
		return testutil.ToFloat64(onlyMetric(t, reg, "vgpu_dra_claim_kernel_launches_total"))
	}
	assert.InDelta(t, 140, launches(), 0)

	// Process 8 exits, process 7 launches more: within the interval nothing changes.
	preparetest.WriteRegion(t, a.RegionPath, gib, gib, 10, proc(0, 7, gib, 130, 1e9))
	clk.Step(5 * time.Second)
	assert.InDelta(t, 140, launches(), 0, "a scrape within the interval must not read again")
	clk.Step(5 * time.Second)
	assert.InDelta(t, 170, launches(), 0, "an exited process's launches stay counted")

	// Pid reuse in the same slot with a new start time is a new process.
	p := proc(0, 7, gib, 5, 0)
	p.StartTime = 99999
	preparetest.WriteRegion(t, a.RegionPath, gib, gib, 10, p)
	clk.Step(10 * time.Second)
	assert.InDelta(t, 175, launches(), 0)

	require.NoError(t, os.WriteFile(a.RegionPath, []byte("garbage"), 0o666))
	clk.Step(10 * time.Second)
	n, err := testutil.GatherAndCount(reg, "vgpu_dra_claim_memory_used_bytes", "vgpu_dra_claim_kernel_launches_total")
	require.NoError(t, err)
	assert.Zero(t, n, "usage of a corrupt region is not exported")
	assert.InDelta(t, 1, testutil.ToFloat64(m.regionErrors.WithLabelValues(reasonCorrupt)), 0)
}

// onlyMetric gathers reg and returns a collector yielding the one series
// of name.
func onlyMetric(t *testing.T, reg *prometheus.Registry, name string) prometheus.Collector {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() == name {
			require.Len(t, f.GetMetric(), 1)
			var v float64
			if c := f.GetMetric()[0].GetCounter(); c != nil {
				v = c.GetValue()
			} else {
				v = f.GetMetric()[0].GetGauge().GetValue()
			}
			g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "x"})
			g.Set(v)
			return g
		}
	}
	t.Fatalf("metric %s not exported", name)
	return nil
}

// TestMetricsFailClosedProcesses exports the processes the library could
// not account claim-wide: those that found the region replaced (flagged in
// their slot) and those that found no free slot (counted on the device).
func TestMetricsFailClosedProcesses(t *testing.T) {
	dir := t.TempDir()
	a := preparetest.Prepared(dir, uidA, "team-a", "train")
	preparetest.WriteRegion(t, a.RegionPath, gib, gib, 10, proc(0, 7, gib, 0, 0))
	_, reg, clk := newTestMonitor(t, preparetest.NewSource(a))
	value := func(name string) float64 { return testutil.ToFloat64(onlyMetric(t, reg, name)) }
	assert.Zero(t, value("vgpu_dra_claim_fail_closed_processes"))
	assert.Zero(t, value("vgpu_dra_claim_unaccounted_processes_total"))

	closed := proc(1, 8, 0, 0, 0)
	closed.FailClosed = true
	b, err := regiontest.Ready(1, uint64(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).UnixNano()),
		[]regiontest.Device{{UUID: uuid0, MemoryLimitBytes: 4 * gib, SMLimitPercent: 30, UsedBytes: gib, PeakBytes: gib, RefusedProcesses: 2}},
		[]regiontest.Process{proc(0, 7, gib, 0, 0), closed})
	require.NoError(t, err)
	require.NoError(t, regiontest.WriteFile(a.RegionPath, b))
	clk.Step(10 * time.Second)
	assert.InDelta(t, 1, value("vgpu_dra_claim_fail_closed_processes"), 0)
	assert.InDelta(t, 2, value("vgpu_dra_claim_unaccounted_processes_total"), 0)
}

// TestMetricsAchievedShare checks that the achieved SM share the claim's
// limiter publishes is exported next to the limit while it is fresh, and
// dropped once nobody updates it (no process of the claim runs) or when its
// time cannot be trusted.
func TestMetricsAchievedShare(t *testing.T) {
	dir := t.TempDir()
	a := preparetest.Prepared(dir, uidA, "team-a", "train")
	m, reg, clk := newTestMonitor(t, preparetest.NewSource(a))
	write := func(bp uint32, at time.Time) {
		b, err := regiontest.Ready(1, 1, []regiontest.Device{{
			UUID: uuid0, MemoryLimitBytes: 4 * gib, SMLimitPercent: 30,
			SMShareBasisPoints: bp, SMShareTimeNS: uint64(at.UnixNano()),
		}}, []regiontest.Process{proc(0, 7, 0, 100, 0)})
		require.NoError(t, err)
		require.NoError(t, mkdirAll(filepath.Dir(a.RegionPath)))
		require.NoError(t, regiontest.WriteFile(a.RegionPath, b))
	}
	count := func() int {
		n, err := testutil.GatherAndCount(reg, "vgpu_dra_claim_sm_achieved_ratio")
		require.NoError(t, err)
		return n
	}

	write(3425, clk.Now().Add(-time.Second))
	assert.InDelta(t, 0.3425, testutil.ToFloat64(onlyMetric(t, reg, "vgpu_dra_claim_sm_achieved_ratio")), 1e-9)
	assert.InDelta(t, 0.3, testutil.ToFloat64(onlyMetric(t, reg, "vgpu_dra_claim_sm_limit_ratio")), 1e-9)

	clk.Step(time.Minute) // the region is not updated any more: no process measures the share
	assert.Zero(t, count(), "a stale achieved share is not exported")

	write(2000, clk.Now().Add(time.Hour))
	clk.Step(m.opts.Interval)
	assert.Zero(t, count(), "a share stamped in the future is not trusted")

	write(12000, clk.Now())
	clk.Step(m.opts.Interval)
	assert.InDelta(t, 1, testutil.ToFloat64(onlyMetric(t, reg, "vgpu_dra_claim_sm_achieved_ratio")), 1e-9, "clamped to 1")
}
