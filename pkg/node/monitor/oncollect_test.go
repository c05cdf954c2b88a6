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
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
	"k8s.io/klog/v2/ktesting"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/region"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/region/regiontest"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/discovery"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/discovery/discoverytest"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/prepare/preparetest"
)

func TestOnCollectReportsGPUMemoryProcessesAndReservations(t *testing.T) {
	s := discoverytest.NewDGXH200()
	dev := s.Device(0)
	dev.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
		return nvml.Memory{Total: 80 * gib, Used: 10 * gib}, nvml.SUCCESS
	}
	dev.GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) {
		return nvml.Memory_v2{Total: 80 * gib, Reserved: 512 * mib, Used: 10 * gib}, nvml.SUCCESS
	}
	dev.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{Gpu: 30}, nvml.SUCCESS }
	dev.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		return []nvml.ProcessInfo{{Pid: 100, UsedGpuMemory: gib}, {Pid: 200, UsedGpuMemory: 2 * gib}, {Pid: 100, UsedGpuMemory: gib}}, nvml.SUCCESS
	}
	// The mock GPU is the one the test region names.
	dev.UUID = uuid0
	uuid := uuid0

	dir := t.TempDir()
	a := preparetest.Prepared(dir, uidA, "team-a", "train")
	preparetest.WriteRegion(t, a.RegionPath, 1536*mib, 2*gib, 25)
	var got []Collection
	reg := prometheus.NewRegistry()
	_, ctx := ktesting.NewTestContext(t)
	m, err := New(ctx, Options{DriverName: "vgpu.dra.dev", NodeName: "node-a", Claims: preparetest.NewSource(a),
		GPUs: []discovery.Info{{UUID: uuid, Index: 0, MemoryBytes: 80 * gib}}, Registry: reg, Interval: time.Second,
		OnCollect: func(c Collection) { got = append(got, c) }})
	require.NoError(t, err)
	m.nvml = s
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m.now = func() time.Time { return at }
	m.snapshot(m.logger)

	require.Len(t, got, 1)
	c := got[0]
	assert.Equal(t, at, c.At)
	assert.Equal(t, map[string]GPUMemory{uuid: {TotalBytes: 80 * gib, ReservedBytes: 512 * mib,
		Processes: map[uint32]uint64{100: 2 * gib, 200: 2 * gib}}}, c.GPUs)
	require.Len(t, c.Claims, 1)
	assert.Equal(t, uidA, c.Claims[0].Claim.UID)
	assert.Equal(t, map[string]uint64{uuid: 1536 * mib}, c.Claims[0].Reserved)

	t.Run("a dead process's slot is not the claim's reservation", func(t *testing.T) {
		// The worker (slot 1) was SIGKILLed: its slot lock is free, its
		// charge still in the counter. The main process (slot 0) holds
		// its lock.
		charged := func(slot int, pid uint32, bytes uint64) regiontest.Process {
			return regiontest.Process{Slot: slot, PID: pid, StartTime: 1, PIDNamespace: 4026532001, Seq: 2,
				Devices: []regiontest.ProcessDevice{{UsedBytes: bytes, ChargedBytes: bytes}}}
		}
		preparetest.WriteRegion(t, a.RegionPath, 1536*mib+2*gib, 4*gib, 25, charged(0, 7, 1536*mib), charged(1, 8, 2*gib))
		holder, err := os.OpenFile(a.RegionPath, os.O_RDWR, 0)
		require.NoError(t, err)
		defer func() { _ = holder.Close() }()
		fl := unix.Flock_t{Type: unix.F_WRLCK, Start: int64(region.Size), Len: 1}
		require.NoError(t, unix.FcntlFlock(holder.Fd(), unix.F_OFD_SETLK, &fl))
		m.closeRegion(uidA)
		at = at.Add(time.Minute)
		m.snapshot(m.logger)
		last := got[len(got)-1]
		require.Len(t, last.Claims, 1)
		assert.Equal(t, map[string]uint64{uuid: 1536 * mib}, last.Claims[0].Reserved, "the dead worker's 2 GiB left out")
	})

	t.Run("without process data, nil processes", func(t *testing.T) {
		dev.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.ERROR_NOT_SUPPORTED }
		at = at.Add(time.Minute)
		m.snapshot(m.logger)
		assert.Nil(t, got[len(got)-1].GPUs[uuid].Processes)
	})

	t.Run("a GPU in MIG mode: no utilisation, its memory still counts", func(t *testing.T) {
		count := func(name string) int {
			n, err := testutil.GatherAndCount(reg, name)
			require.NoError(t, err)
			return n
		}
		require.Equal(t, 1, count("vgpu_dra_gpu_utilization_ratio"))
		dev.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{}, nvml.ERROR_NOT_SUPPORTED }
		at = at.Add(time.Minute)
		m.snapshot(m.logger)
		assert.Equal(t, 80*gib, got[len(got)-1].GPUs[uuid].TotalBytes)
		assert.Equal(t, 0, count("vgpu_dra_gpu_utilization_ratio"))
		assert.Equal(t, 1, count("vgpu_dra_gpu_memory_used_bytes"))
	})
}
