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
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/region/regiontest"
)

func writeRegion(t *testing.T, b []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "region")
	require.NoError(t, regiontest.WriteFile(path, b))
	return path
}

// read reads the region snapshot b the way the plugin does: from a file,
// through a Reader.
func read(t *testing.T, b []byte) (*Region, error) {
	t.Helper()
	return NewReader().Read(writeRegion(t, b))
}

func TestReadFreshRegion(t *testing.T) {
	path := filepath.Join(t.TempDir(), "region")
	require.NoError(t, Create(path))
	got, err := NewReader().Read(path)
	require.NoError(t, err)
	assert.Equal(t, &Region{State: StateUninitialised}, got, "a created region has no process yet")

	b := make([]byte, Size)
	binary.LittleEndian.PutUint32(b[offInitState:], initInitialising)
	got, err = NewReader().Read(writeRegion(t, b))
	require.NoError(t, err)
	assert.Equal(t, StateInitialising, got.State)
	assert.Empty(t, got.Devices, "a half-written header is not interpreted")
}

func TestReadRejectsFilesThatAreNoRegion(t *testing.T) {
	dir := t.TempDir()
	target := writeRegion(t, fixtureBytes(t))
	link := filepath.Join(dir, "link")
	require.NoError(t, os.Symlink(target, link))
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, unix.Mkfifo(fifo, 0o666))
	short := filepath.Join(dir, "short")
	require.NoError(t, os.WriteFile(short, fixtureBytes(t)[:Size-1], 0o666))

	for name, path := range map[string]string{"symlink": link, "fifo": fifo, "directory": dir, "short file": short} {
		t.Run(name, func(t *testing.T) {
			_, err := NewReader().Read(path)
			require.ErrorIs(t, err, ErrCorrupt)
			assert.Contains(t, err.Error(), path)
		})
	}
	_, err := NewReader().Read(filepath.Join(dir, "missing"))
	require.ErrorIs(t, err, fs.ErrNotExist, "a vanished region is told apart from a corrupt one")
	assert.NotErrorIs(t, err, ErrCorrupt)
}

func TestReadRejectsCorruptFields(t *testing.T) {
	slot3 := SlotsOffset + 3*SlotSize
	for _, tc := range []struct {
		name  string
		off   int
		value []byte
		field string
	}{
		{"magic", offMagic, []byte{'X'}, "header.magic"},
		{"major", offMajor, []byte{2}, "header.major"},
		{"init state", offInitState, []byte{7}, "header.init_state"},
		{"region size", offRegionSize, []byte{1}, "header.region_size"},
		{"slot size", offSlotSize, []byte{0}, "header.slot_size"},
		{"slots offset", offSlotsOffset, []byte{9}, "header.slots_offset"},
		{"device count", offDeviceCount, []byte{17}, "header.device_count"},
		{"uuid not terminated", DevicesOffset, []byte(strings.Repeat("A", UUIDLen)), "devices[0].uuid"},
		{"uuid bad byte", DevicesOffset + 4, []byte{'\n'}, "devices[0].uuid"},
		{"uuid empty", DevicesOffset + DeviceSize, []byte{0}, "devices[1].uuid"},
		{"uuid repeated", DevicesOffset + DeviceSize, []byte("GPU-11111111-2222-3333-4444-555555555555"), "devices[1].uuid"},
		{"device state", DevicesOffset + offDevState, []byte{0}, "devices[0].state"},
		{"slot state", slot3 + offSlotState, []byte{5}, "slots[3].state"},
		{"slot pid", slot3 + offSlotPID, []byte{0}, "slots[3].pid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := fixtureBytes(t)
			copy(b[tc.off:], tc.value)
			_, err := read(t, b)
			require.ErrorIs(t, err, ErrCorrupt)
			assert.Contains(t, err.Error(), tc.field)
		})
	}
}

// TestReadAchievedShare checks the minor-4 fields: the achieved SM
// share and the time it was published.
func TestReadAchievedShare(t *testing.T) {
	b := fixtureBytes(t)
	dev := DevicesOffset
	binary.LittleEndian.PutUint32(b[dev+offDevSMShare:], 2975)
	binary.LittleEndian.PutUint64(b[dev+offDevSMShareTime:], 1700000000123456789)

	r, err := read(t, b)
	require.NoError(t, err)
	assert.EqualValues(t, 2975, r.Devices[0].SMShareBasisPoints)
	assert.Equal(t, time.Unix(0, 1700000000123456789), r.Devices[0].SMShareTime)
	assert.Zero(t, r.Devices[1].SMShareBasisPoints)
	assert.True(t, r.Devices[1].SMShareTime.IsZero(), "never published")
}

func TestReadClampsValues(t *testing.T) {
	b := fixtureBytes(t)
	dev := DevicesOffset
	binary.LittleEndian.PutUint32(b[dev+offDevSMLimit:], 250)
	binary.LittleEndian.PutUint32(b[dev+offDevSMUtil:], 1<<31)
	binary.LittleEndian.PutUint32(b[dev+offDevSMShare:], 10001)
	binary.LittleEndian.PutUint64(b[dev+offDevSMShareTime:], 1<<63)
	binary.LittleEndian.PutUint64(b[dev+offDevPeakBytes:], 1) // below used
	sd := SlotsOffset + offSlotDevices
	binary.LittleEndian.PutUint32(b[sd+offSDSMUtil:], 101)
	binary.LittleEndian.PutUint64(b[sd+offSDPeakBytes:], 0)
	binary.LittleEndian.PutUint64(b[offInitTimeNS:], 1<<63)

	r, err := read(t, b)
	require.NoError(t, err)
	d := r.Devices[0]
	assert.EqualValues(t, 100, d.SMLimitPercent)
	assert.EqualValues(t, 100, d.SMUtilPercent)
	assert.EqualValues(t, 10000, d.SMShareBasisPoints)
	assert.True(t, d.SMShareTime.IsZero(), "an out-of-range share time is dropped")
	assert.Equal(t, d.UsedBytes, d.PeakBytes, "a peak below the current use is raised to it")
	u := r.Processes[0].Devices[0]
	assert.EqualValues(t, 100, u.SMUtilPercent)
	assert.Equal(t, u.UsedBytes, u.PeakBytes)
	assert.True(t, r.InitTime.IsZero(), "an out-of-range timestamp is dropped")
}

func TestReadFailClosedAndCharges(t *testing.T) {
	b := fixtureBytes(t)
	binary.LittleEndian.PutUint64(b[DevicesOffset+offDevRefused:], 3)
	binary.LittleEndian.PutUint32(b[SlotsOffset+offSlotFlags:], slotFlagFailClosed)
	binary.LittleEndian.PutUint64(b[SlotsOffset+offSlotDevices+offSDChargedBytes:], 12345)

	r, err := read(t, b)
	require.NoError(t, err)
	assert.EqualValues(t, 3, r.Devices[0].RefusedProcesses)
	require.Len(t, r.Processes, 2)
	assert.True(t, r.Processes[0].FailClosed)
	assert.False(t, r.Processes[1].FailClosed)
	assert.EqualValues(t, 12345, r.Processes[0].Devices[0].ChargedBytes)
}

func TestReadSkipsSlotCaughtMidUpdate(t *testing.T) {
	b := fixtureBytes(t)
	binary.LittleEndian.PutUint32(b[SlotsOffset+offSlotSeq:], 7)
	r, err := read(t, b)
	require.NoError(t, err)
	assert.Equal(t, 1, r.Unstable)
	require.Len(t, r.Processes, 1)
	assert.Equal(t, 3, r.Processes[0].Slot)
}

// TestReadSeqlock has a writer update a slot under its seqlock as fast as it
// can, keeping two counters equal; every accepted read must see them equal.
func TestReadSeqlock(t *testing.T) {
	path := writeRegion(t, fixtureBytes(t))
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close() })
	m, err := unix.Mmap(int(f.Fd()), 0, Size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	require.NoError(t, err)
	t.Cleanup(func() { _ = unix.Munmap(m) })

	slot := SlotsOffset
	seq := (*uint32)(unsafePointer(m, slot+offSlotSeq))
	launches := (*uint64)(unsafePointer(m, slot+offSlotDevices+offSDKernelLaunches))
	used := (*uint64)(unsafePointer(m, slot+offSlotDevices+offSDUsedBytes))

	// The fixture's counters differ; make them agree before the first read
	// so that any disagreement seen later can only be a torn snapshot.
	atomic.StoreUint64(launches, 0)
	atomic.StoreUint64(used, 0)

	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	// Cleanups run last-in first-out: the writer stops before the mapping
	// goes away, whichever way the test ends.
	t.Cleanup(func() { stop.Store(true); wg.Wait() })
	go func() {
		defer wg.Done()
		for n := uint64(1); !stop.Load(); n++ {
			atomic.AddUint32(seq, 1)
			atomic.StoreUint64(launches, n)
			atomic.StoreUint64(used, n)
			atomic.AddUint32(seq, 1)
			// The library's owner leaves its slot alone between calls: a
			// writer that never pauses would keep every copy torn, so
			// that no read could be consistent.
			time.Sleep(10 * time.Microsecond)
		}
	}()
	mapped, err := Map(path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = mapped.Close() })
	for name, read := range map[string]func(*Reader) (*Region, error){
		"read":    func(r *Reader) (*Region, error) { return r.Read(path) },
		"mapping": func(r *Reader) (*Region, error) { return r.ReadMapping(mapped) },
	} {
		t.Run(name, func(t *testing.T) {
			r := NewReader()
			consistent := 0
			for range 2000 {
				reg, err := read(r)
				if !assert.NoError(t, err) {
					return
				}
				for _, p := range reg.Processes {
					if p.Slot == 0 {
						if !assert.Equal(t, p.Devices[0].KernelLaunches, p.Devices[0].UsedBytes, "torn read accepted") {
							return
						}
						consistent++
					}
				}
			}
			assert.Positive(t, consistent, "some reads must succeed despite the writer")
		})
	}
}

func TestReadMissingIsNotExist(t *testing.T) {
	_, err := NewReader().Read(filepath.Join(t.TempDir(), "gone"))
	assert.True(t, errors.Is(err, fs.ErrNotExist))
}

// TestSlotsInUseBoundsTheSlotsRead checks the minor-2 contract: readers look
// only at slots below header.slots_in_use (clamped to the layout), while
// older regions are scanned in full.
func TestSlotsInUseBoundsTheSlotsRead(t *testing.T) {
	slotsOf := func(r *Region) []int {
		var out []int
		for _, p := range r.Processes {
			out = append(out, p.Slot)
		}
		return out
	}
	for _, tc := range []struct {
		name       string
		minor      uint16
		slotsInUse uint32
		want       []int
	}{
		{"minor 0 scans every slot", 0, 1, []int{0, 3}},
		{"minor 2 covering both", MinorSlotsInUse, 4, []int{0, 3}},
		{"minor 2 below the second", MinorSlotsInUse, 1, []int{0}},
		{"minor 2 out of range is clamped", MinorSlotsInUse, 1 << 30, []int{0, 3}},
		{"minor 2 with none", MinorSlotsInUse, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := fixtureBytes(t)
			binary.LittleEndian.PutUint16(b[offMinor:], tc.minor)
			binary.LittleEndian.PutUint32(b[offSlotsInUse:], tc.slotsInUse)

			got, err := read(t, b)
			require.NoError(t, err)
			assert.Equal(t, tc.want, slotsOf(got))
		})
	}
}

// TestReadSumsSharedRecords checks the minor-7 shared allocation records:
// live ones are summed per device (saturating), free ones and ones naming a
// device out of range are ignored.
func TestReadSumsSharedRecords(t *testing.T) {
	b := fixtureBytes(t)
	put := func(k int, dev, state uint32, bytes uint64) {
		rec := SharedOffset + k*SharedSize
		binary.LittleEndian.PutUint32(b[rec+offShDevice:], dev)
		binary.LittleEndian.PutUint32(b[rec+offShState:], state)
		binary.LittleEndian.PutUint64(b[rec+offShBytes:], bytes)
	}
	put(0, 0, sharedLive, 100)
	put(3, 0, sharedLive, 23)
	put(4, 0, sharedFree, 1000)
	put(5, 9, sharedLive, 1000) // no such device
	put(6, 1, sharedLive, math.MaxUint64)
	put(7, 1, sharedLive, 5)

	r, err := read(t, b)
	require.NoError(t, err)
	assert.EqualValues(t, 123, r.Devices[0].SharedBytes)
	assert.Equal(t, 2, r.Devices[0].SharedRecords)
	assert.EqualValues(t, uint64(math.MaxUint64), r.Devices[1].SharedBytes, "saturates, never wraps")
	assert.Equal(t, 2, r.Devices[1].SharedRecords)
}
