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
	"fmt"
	"math"
	"time"
)

// ErrCorrupt marks a region whose content breaks the layout contract. The
// wrapping error names the offending field.
var ErrCorrupt = errors.New("corrupt region")

// State is the initialisation state of a region (header.init_state).
type State int

const (
	// StateUninitialised is a zero-filled region no process has attached to.
	StateUninitialised State = iota
	// StateInitialising is a region whose first process is writing the
	// header, or died doing so; its content is not meaningful yet.
	StateInitialising
	// StateReady is an initialised region.
	StateReady
)

func (s State) String() string {
	switch s {
	case StateUninitialised:
		return "uninitialised"
	case StateInitialising:
		return "initialising"
	case StateReady:
		return "ready"
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// Region is a validated snapshot of one shared region. Devices and
// Processes are empty unless State is StateReady.
type Region struct {
	State State
	// Minor is the layout minor version of the writer.
	Minor uint16
	// Generation counts (re)initialisations of the region.
	Generation uint64
	// InitTime is when the region was last initialised; zero if the
	// recorded value is out of range.
	InitTime time.Time
	// Devices are the claim's GPUs in record order.
	Devices []Device
	// Processes are the active process slots in slot order.
	Processes []Process
	// Unstable counts active slots that changed during every read attempt;
	// their usage is missing from Processes.
	Unstable int
}

// Device is one GPU record. Byte counts are as published and bounded by
// nothing but their type: callers clamp them to the GPU's memory.
type Device struct {
	UUID string
	// MemoryLimitBytes and SMLimitPercent are informational copies written
	// by the library; limits are never taken from the region.
	MemoryLimitBytes uint64
	// SMLimitPercent is clamped to 0..100 (0 = unlimited).
	SMLimitPercent uint32
	// UsedBytes is the claim-wide reservation counter on this GPU.
	UsedBytes uint64
	// PeakBytes is the high-water mark, never below UsedBytes.
	PeakBytes uint64
	// SMUtilPercent is the claim-wide SM utilisation, clamped to 0..100.
	SMUtilPercent uint32
	// RefusedProcesses counts processes that found no free slot and so
	// refuse every allocation on this GPU (fail closed); it only grows.
	RefusedProcesses uint64
	// SMShareBasisPoints is the claim's achieved SM share averaged over
	// about ten seconds by its refiller, in 0.01 % units, clamped to
	// 0..10000 (layout minor 4; zero before).
	SMShareBasisPoints uint32
	// SMShareTime is when SMShareBasisPoints was last updated; zero if
	// never or out of range. A stale time means no process of the claim
	// measures its share any more.
	SMShareTime time.Time
	// Refusals counts allocations refused for the limit (minor 5, 0 before).
	Refusals uint64
	// LastRefusedBytes is the requested size of the last refused allocation.
	LastRefusedBytes uint64
	// LastRefused is when the last refusal happened; zero when none was recorded.
	LastRefused time.Time
	// SharedBytes is the part of UsedBytes held in shared allocation
	// records (memory exported to other processes of the claim, layout
	// minor 7; zero before): charged to no process's slot, kept while any
	// holder lives. Saturates instead of wrapping.
	SharedBytes uint64
	// SharedRecords is how many live shared records are on this GPU.
	SharedRecords int
}

// Process is one active process slot.
type Process struct {
	// Slot is the slot index, stable for the life of the process.
	Slot int
	// PID is the pid in the process's own pid namespace.
	PID uint32
	// HostPID is the pid in the initial pid namespace, 0 if unknown.
	HostPID uint32
	// StartTime is field 22 of /proc/<pid>/stat (clock ticks since boot);
	// with the pid it identifies the process across pid reuse.
	StartTime uint64
	// PIDNamespace is the inode of the process's pid namespace.
	PIDNamespace uint64
	// Heartbeat is the process's last update; zero if out of range.
	Heartbeat time.Time
	// FailClosed is set when the process found the region replaced or
	// rewritten under it and refuses every allocation.
	FailClosed bool
	// Devices holds the process's usage of each Region.Devices entry, by
	// the same index.
	Devices []ProcessDevice
}

// ProcessDevice is one process's usage of one GPU of the claim.
type ProcessDevice struct {
	UsedBytes uint64
	// PeakBytes is never below UsedBytes.
	PeakBytes uint64
	// OverheadBytes is context and module memory beyond tracked bytes.
	OverheadBytes  uint64
	KernelLaunches uint64
	// ThrottledNS is the time launches waited for compute tokens.
	ThrottledNS uint64
	// SMUtilPercent is clamped to 0..100.
	SMUtilPercent uint32
	// ChargedBytes is what the process has added to the claim's counter:
	// used + overhead + reservations in flight. Reclaim returns it.
	ChargedBytes uint64
}

// slotSource returns a consistent copy of slot i, or false when the slot
// kept changing; raw is slot i as found in the snapshot.
type slotSource func(i int, raw []byte) (slot []byte, ok bool, err error)

func parse(b []byte, slots slotSource) (*Region, error) {
	if len(b) != Size {
		return nil, fmt.Errorf("%w: %d bytes, want %d", ErrCorrupt, len(b), Size)
	}
	r := &Region{}
	switch st := le32(b, offInitState); st {
	case initUninitialised:
		return r, nil
	case initInitialising:
		r.State = StateInitialising
		return r, nil
	case initReady:
		r.State = StateReady
	default:
		return nil, fmt.Errorf("%w: header.init_state = %d, want 0, 1 or 2", ErrCorrupt, st)
	}
	count, err := parseHeader(b, r)
	if err != nil {
		return nil, err
	}
	r.Devices = make([]Device, count)
	seen := make(map[string]int, count)
	for i := range r.Devices {
		if err := parseDevice(b[DevicesOffset+i*DeviceSize:][:DeviceSize], i, &r.Devices[i]); err != nil {
			return nil, err
		}
		if j, dup := seen[r.Devices[i].UUID]; dup {
			return nil, fmt.Errorf("%w: devices[%d].uuid %q repeats devices[%d]", ErrCorrupt, i, r.Devices[i].UUID, j)
		}
		seen[r.Devices[i].UUID] = i
	}
	parseShared(b, r.Devices)

	limit := slotLimit(b)
	active := 0
	for i := range limit {
		if le32(b, SlotsOffset+i*SlotSize+offSlotState) != slotFree {
			active++
		}
	}
	// Sized once: growing the slice copied every process a few times.
	r.Processes = make([]Process, 0, active)
	usage := make([]ProcessDevice, active*count)
	for i := range limit {
		raw := b[SlotsOffset+i*SlotSize:][:SlotSize]
		if le32(raw, offSlotState) == slotFree {
			continue
		}
		slot, ok, err := slots(i, raw)
		if err != nil {
			return nil, err
		}
		if !ok {
			r.Unstable++
			continue
		}
		switch st := le32(slot, offSlotState); st {
		case slotFree:
			// Released while we read it.
			continue
		case slotActive:
		default:
			return nil, fmt.Errorf("%w: slots[%d].state = %d, want 0 or 1", ErrCorrupt, i, st)
		}
		p, err := parseSlot(slot, i, usage[:count:count])
		if err != nil {
			return nil, err
		}
		usage = usage[count:]
		r.Processes = append(r.Processes, p)
	}
	return r, nil
}

// slotLimit is how many slots, from the first, can be in use: all of them
// in regions older than MinorSlotsInUse, else header.slots_in_use clamped
// to the layout. Writers claim the lowest free slot, so the active slots of
// a claim with a few processes are all near the start.
func slotLimit(b []byte) int {
	if le16(b, offMinor) < MinorSlotsInUse {
		return MaxSlots
	}
	return int(min(le32(b, offSlotsInUse), MaxSlots))
}

// parseHeader checks every size and offset field against this layout and
// returns the device count.
func parseHeader(b []byte, r *Region) (int, error) {
	if m := le64(b, offMagic); m != Magic {
		return 0, fmt.Errorf("%w: header.magic = %#x, want %#x", ErrCorrupt, m, Magic)
	}
	if v := le16(b, offMajor); v != Major {
		return 0, fmt.Errorf("%w: header.major = %d, this reader supports %d", ErrCorrupt, v, Major)
	}
	r.Minor = le16(b, offMinor)
	for _, f := range []struct {
		name string
		got  uint64
		want uint64
	}{
		{"region_size", le64(b, offRegionSize), Size},
		{"header_size", uint64(le32(b, offHeaderSize)), HeaderSize},
		{"device_size", uint64(le32(b, offDeviceSize)), DeviceSize},
		{"slot_size", uint64(le32(b, offSlotSize)), SlotSize},
		{"max_devices", uint64(le32(b, offMaxDevices)), MaxDevices},
		{"max_slots", uint64(le32(b, offMaxSlots)), MaxSlots},
		{"devices_offset", le64(b, offDevicesOffset), DevicesOffset},
		{"slots_offset", le64(b, offSlotsOffset), SlotsOffset},
	} {
		if f.got != f.want {
			return 0, fmt.Errorf("%w: header.%s = %d, want %d", ErrCorrupt, f.name, f.got, f.want)
		}
	}
	count := le32(b, offDeviceCount)
	if count > MaxDevices {
		return 0, fmt.Errorf("%w: header.device_count = %d, want at most %d", ErrCorrupt, count, MaxDevices)
	}
	r.Generation = le64(b, offGeneration)
	r.InitTime = unixNano(le64(b, offInitTimeNS))
	return int(count), nil
}

func parseDevice(b []byte, i int, d *Device) error {
	uuid, err := cString(b[offDevUUID:][:UUIDLen])
	if err != nil {
		return fmt.Errorf("%w: devices[%d].uuid: %w", ErrCorrupt, i, err)
	}
	if st := le32(b, offDevState); st != deviceActive {
		return fmt.Errorf("%w: devices[%d].state = %d, want %d (active) for a published record", ErrCorrupt, i, st, deviceActive)
	}
	d.UUID = uuid
	d.MemoryLimitBytes = le64(b, offDevMemoryLimit)
	d.SMLimitPercent = min(le32(b, offDevSMLimit), 100)
	d.UsedBytes = le64(b, offDevUsedBytes)
	d.PeakBytes = max(le64(b, offDevPeakBytes), d.UsedBytes)
	d.SMUtilPercent = min(le32(b, offDevSMUtil), 100)
	d.RefusedProcesses = le64(b, offDevRefused)
	d.SMShareBasisPoints = min(le32(b, offDevSMShare), 10000)
	d.SMShareTime = unixNano(le64(b, offDevSMShareTime))
	d.Refusals = le64(b, offDevRefusals)
	d.LastRefusedBytes = le64(b, offDevLastRefusedBytes)
	if ns := le64(b, offDevLastRefusedNS); ns != 0 && ns <= math.MaxInt64 {
		d.LastRefused = time.Unix(0, int64(ns))
	}
	return nil
}

// parseShared sums the live shared allocation records per device. Records
// naming a device out of range are ignored (they are never charged).
func parseShared(b []byte, devs []Device) {
	for k := range MaxShared {
		rec := b[SharedOffset+k*SharedSize:][:SharedSize]
		dev := le32(rec, offShDevice)
		if le32(rec, offShState) != sharedLive || dev >= uint32(len(devs)) {
			continue
		}
		d := &devs[dev]
		bytes := le64(rec, offShBytes)
		if bytes > math.MaxUint64-d.SharedBytes {
			d.SharedBytes = math.MaxUint64
		} else {
			d.SharedBytes += bytes
		}
		d.SharedRecords++
	}
}

func parseSlot(b []byte, i int, usage []ProcessDevice) (Process, error) {
	p := Process{
		Slot:         i,
		PID:          le32(b, offSlotPID),
		HostPID:      le32(b, offSlotHostPID),
		StartTime:    le64(b, offSlotStartTime),
		PIDNamespace: le64(b, offSlotPIDNS),
		Heartbeat:    unixNano(le64(b, offSlotHeartbeat)),
		FailClosed:   le32(b, offSlotFlags)&slotFlagFailClosed != 0,
		Devices:      usage,
	}
	if p.PID == 0 {
		return Process{}, fmt.Errorf("%w: slots[%d].pid = 0 in an active slot", ErrCorrupt, i)
	}
	if p.HostPID == 0 && p.PIDNamespace == initPIDNamespace {
		p.HostPID = p.PID
	}
	for d := range usage {
		sd := b[offSlotDevices+d*SlotDeviceSize:][:SlotDeviceSize]
		used := le64(sd, offSDUsedBytes)
		usage[d] = ProcessDevice{
			UsedBytes:      used,
			PeakBytes:      max(le64(sd, offSDPeakBytes), used),
			OverheadBytes:  le64(sd, offSDOverheadBytes),
			KernelLaunches: le64(sd, offSDKernelLaunches),
			ThrottledNS:    le64(sd, offSDThrottledNS),
			SMUtilPercent:  min(le32(sd, offSDSMUtil), 100),
			ChargedBytes:   le64(sd, offSDChargedBytes),
		}
	}
	return p, nil
}

// cString decodes a NUL-terminated GPU UUID: non-empty, letters, digits
// and dashes only, so it is safe as a metric label and in logs.
func cString(b []byte) (string, error) {
	n := 0
	for n < len(b) && b[n] != 0 {
		c := b[n]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return "", fmt.Errorf("byte %d is %#x, want a letter, digit or '-'", n, c)
		}
		n++
	}
	switch {
	case n == len(b):
		return "", fmt.Errorf("not NUL-terminated within %d bytes", len(b))
	case n == 0:
		return "", errors.New("empty")
	}
	return string(b[:n]), nil
}

func unixNano(ns uint64) time.Time {
	if ns == 0 || ns > math.MaxInt64 {
		return time.Time{}
	}
	return time.Unix(0, int64(ns))
}

func le16(b []byte, off int) uint16 { return binary.LittleEndian.Uint16(b[off:]) }
func le32(b []byte, off int) uint32 { return binary.LittleEndian.Uint32(b[off:]) }
func le64(b []byte, off int) uint64 { return binary.LittleEndian.Uint64(b[off:]) }
