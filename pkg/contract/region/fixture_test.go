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
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/region/regiontest"
)

const (
	gib = uint64(1) << 30
	mib = uint64(1) << 20
)

// fixtureBytes builds with regiontest the state that region-writer --fixture writes.
func fixtureBytes(t testing.TB) []byte {
	t.Helper()
	b, err := regiontest.Ready(3, 1700000000123456789, []regiontest.Device{
		{UUID: "GPU-11111111-2222-3333-4444-555555555555", MemoryLimitBytes: 4 * gib, SMLimitPercent: 30, UsedBytes: 1610612736, PeakBytes: 2 * gib, ComputePolicy: 0, SMUtilPercent: 25, Refusals: 7, LastRefusedBytes: 3 * gib, LastRefusedNS: 1700000003000000000},
		{UUID: "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee", MemoryLimitBytes: 8 * gib, UsedBytes: 512 * mib, PeakBytes: 512 * mib, ComputePolicy: 1},
	}, []regiontest.Process{
		{Slot: 0, PID: 7, HostPID: 4242, Seq: 6, StartTime: 123456, PIDNamespace: 4026532000, HeartbeatNS: 1700000001000000000, Devices: []regiontest.ProcessDevice{
			{UsedBytes: gib, PeakBytes: 3 * gib / 2, OverheadBytes: 256 * mib, KernelLaunches: 1000, ThrottledNS: 2500000000, SMUtilPercent: 20},
			{UsedBytes: 512 * mib, PeakBytes: 512 * mib, KernelLaunches: 10},
		}},
		{Slot: 3, PID: 9, Seq: 2, StartTime: 654321, PIDNamespace: 0xEFFFFFFC, HeartbeatNS: 1700000002000000000, Devices: []regiontest.ProcessDevice{
			{UsedBytes: 256 * mib, PeakBytes: 256 * mib, KernelLaunches: 50, SMUtilPercent: 5},
		}},
	})
	require.NoError(t, err)
	return b
}

// fixtureRegion is what the reader must make of the fixture.
func fixtureRegion() *Region {
	return &Region{
		State:      StateReady,
		Minor:      5,
		Generation: 3,
		InitTime:   time.Unix(0, 1700000000123456789),
		Devices: []Device{
			{UUID: "GPU-11111111-2222-3333-4444-555555555555", MemoryLimitBytes: 4 * gib, SMLimitPercent: 30, UsedBytes: 1610612736, PeakBytes: 2 * gib, SMUtilPercent: 25, Refusals: 7, LastRefusedBytes: 3 * gib, LastRefused: time.Unix(0, 1700000003000000000)},
			{UUID: "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee", MemoryLimitBytes: 8 * gib, UsedBytes: 512 * mib, PeakBytes: 512 * mib},
		},
		Processes: []Process{
			{Slot: 0, PID: 7, HostPID: 4242, StartTime: 123456, PIDNamespace: 4026532000, Heartbeat: time.Unix(0, 1700000001000000000), Devices: []ProcessDevice{
				{UsedBytes: gib, PeakBytes: 3 * gib / 2, OverheadBytes: 256 * mib, KernelLaunches: 1000, ThrottledNS: 2500000000, SMUtilPercent: 20},
				{UsedBytes: 512 * mib, PeakBytes: 512 * mib, KernelLaunches: 10},
			}},
			// pidns is the initial namespace: the pid is the host pid.
			{Slot: 3, PID: 9, HostPID: 9, StartTime: 654321, PIDNamespace: 0xEFFFFFFC, Heartbeat: time.Unix(0, 1700000002000000000), Devices: []ProcessDevice{
				{UsedBytes: 256 * mib, PeakBytes: 256 * mib, KernelLaunches: 50, SMUtilPercent: 5},
				{},
			}},
		},
	}
}

// TestReadRegionWrittenByC reads back a region the C tool wrote through the
// header's structs, and checks that regiontest writes the same bytes, so
// tests built on regiontest exercise the real layout.
func TestReadRegionWrittenByC(t *testing.T) {
	path := filepath.Join(t.TempDir(), "region")
	out, err := exec.Command(buildCTool(t), "--fixture", path).CombinedOutput()
	require.NoError(t, err, "region-writer --fixture: %s", out)

	got, err := NewReader().Read(path)
	require.NoError(t, err)
	assertRegion(t, fixtureRegion(), got)

	written, err := os.ReadFile(path)
	require.NoError(t, err)
	want := fixtureBytes(t)
	for i := range written {
		if written[i] != want[i] {
			t.Fatalf("regiontest differs from the C structs at byte %d: C %#x, Go %#x", i, written[i], want[i])
		}
	}
}

// TestReadRegionWriterTool reads regions written by vgpu-core's
// region-writer from its command line.
func TestReadRegionWriterTool(t *testing.T) {
	tool := buildCTool(t)
	dir := t.TempDir()
	write := func(name string, args ...string) string {
		path := filepath.Join(dir, name)
		out, err := exec.Command(tool, append(args, path)...).CombinedOutput()
		require.NoError(t, err, "region-writer %v: %s", args, out)
		return path
	}
	r := NewReader()

	got, err := r.Read(write("ready", "--generation", "5",
		"--device", "GPU-11111111-2222-3333-4444-555555555555,4294967296,1073741824,30",
		"--device", "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee,8589934592,0",
		"--slot", "4242,777,0,1073741824,268435456"))
	require.NoError(t, err)
	assert.Equal(t, StateReady, got.State)
	assert.EqualValues(t, 5, got.Generation)
	require.Len(t, got.Devices, 2)
	assert.Equal(t, Device{UUID: "GPU-11111111-2222-3333-4444-555555555555", MemoryLimitBytes: 4 * gib, SMLimitPercent: 30, UsedBytes: gib, PeakBytes: gib}, got.Devices[0])
	assert.Equal(t, "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee", got.Devices[1].UUID)
	require.Len(t, got.Processes, 1)
	p := got.Processes[0]
	assert.EqualValues(t, 4242, p.PID)
	assert.EqualValues(t, 4242, p.HostPID)
	assert.EqualValues(t, 777, p.StartTime)
	assert.Equal(t, ProcessDevice{UsedBytes: gib, PeakBytes: gib, OverheadBytes: 256 * mib, ChargedBytes: gib + 256*mib}, p.Devices[0])

	got, err = r.Read(write("midwrite", "--device", "GPU-11111111-2222-3333-4444-555555555555,0,0", "--slot", "1,1,0,1", "--seq", "7"))
	require.NoError(t, err)
	assert.Equal(t, 1, got.Unstable, "a slot stuck mid-write is skipped after the retries")
	assert.Empty(t, got.Processes)

	got, err = r.Read(write("uninit", "--state", "uninit"))
	require.NoError(t, err)
	assert.Equal(t, StateUninitialised, got.State)

	for name, args := range map[string][]string{
		"major": {"--major", "2"},
		"magic": {"--magic", "0x1234"},
		"size":  {"--size", "4096"},
	} {
		_, err := r.Read(write(name, args...))
		assert.ErrorIs(t, err, ErrCorrupt, name)
	}
}

func assertRegion(t *testing.T, want, got *Region) {
	t.Helper()
	require.NotNil(t, got)
	assert.True(t, want.InitTime.Equal(got.InitTime), "InitTime %v, want %v", got.InitTime, want.InitTime)
	require.Len(t, got.Processes, len(want.Processes))
	for i := range want.Processes {
		assert.True(t, want.Processes[i].Heartbeat.Equal(got.Processes[i].Heartbeat), "process %d heartbeat", i)
		want.Processes[i].Heartbeat, got.Processes[i].Heartbeat = time.Time{}, time.Time{}
	}
	want.InitTime, got.InitTime = time.Time{}, time.Time{}
	assert.Equal(t, want, got)
}
