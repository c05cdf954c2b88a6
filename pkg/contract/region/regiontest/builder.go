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

package regiontest

import (
	"encoding/binary"
	"fmt"
	"os"
)

// The layout is written out here rather than shared with the reader, so a
// wrong offset on one side cannot hide the same mistake on the other: both
// are compared with the C header independently (and this package cannot
// import the one it tests).
const (
	regionSize     = 598016
	magic          = 0x3147455255504756 // "VGPUREG1"
	fileMode       = 0o666
	devicesOffset  = 256
	deviceSize     = 256
	slotsOffset    = 8192
	slotSize       = 1152
	slotDeviceSize = 64
	maxDevices     = 16
	uuidLen        = 48
)

// Device is one GPU record to write.
type Device struct {
	UUID             string
	MemoryLimitBytes uint64
	SMLimitPercent   uint32
	UsedBytes        uint64
	PeakBytes        uint64
	ComputePolicy    uint32
	SMUtilPercent    uint32
	// RefusedProcesses is device.refused_processes (minor 3).
	RefusedProcesses uint64
	// SMShareBasisPoints and SMShareTimeNS are the achieved share and its
	// update time (CLOCK_REALTIME ns) of layout minor 4.
	SMShareBasisPoints uint32
	SMShareTimeNS      uint64
	Refusals           uint64
	LastRefusedBytes   uint64
	LastRefusedNS      uint64
}

// Process is one active slot to write.
type Process struct {
	Slot         int
	PID          uint32
	HostPID      uint32
	Seq          uint32
	StartTime    uint64
	PIDNamespace uint64
	HeartbeatNS  uint64
	// FailClosed sets VGPU_SLOT_FLAG_FAIL_CLOSED in slot.flags (minor 3).
	FailClosed bool
	Devices    []ProcessDevice
}

// ProcessDevice is a process's usage of one device record.
type ProcessDevice struct {
	UsedBytes      uint64
	PeakBytes      uint64
	OverheadBytes  uint64
	KernelLaunches uint64
	ThrottledNS    uint64
	SMUtilPercent  uint32
	// ChargedBytes is slot_device.charged_bytes (minor 3).
	ChargedBytes uint64
}

// Ready returns an initialised region (init_state ready, every header
// field as libvgpu.so writes it) with the given devices and processes.
// It fails on input the layout cannot hold.
func Ready(generation, initTimeNS uint64, devices []Device, procs []Process) ([]byte, error) {
	if len(devices) > maxDevices {
		return nil, fmt.Errorf("%d devices, at most %d fit", len(devices), maxDevices)
	}
	b := make([]byte, regionSize)
	le := binary.LittleEndian
	le.PutUint64(b[0:], magic)
	le.PutUint16(b[8:], 1)
	le.PutUint16(b[10:], 5)
	le.PutUint32(b[12:], 2)
	le.PutUint64(b[16:], regionSize)
	le.PutUint32(b[24:], 256)
	le.PutUint32(b[28:], deviceSize)
	le.PutUint32(b[32:], slotSize)
	le.PutUint32(b[36:], maxDevices)
	le.PutUint32(b[40:], 512)
	le.PutUint32(b[44:], uint32(len(devices)))
	le.PutUint64(b[48:], devicesOffset)
	le.PutUint64(b[56:], slotsOffset)
	le.PutUint64(b[64:], generation)
	le.PutUint64(b[72:], initTimeNS)
	for i, d := range devices {
		if len(d.UUID) >= uuidLen {
			return nil, fmt.Errorf("device %d: UUID %q longer than %d bytes", i, d.UUID, uuidLen-1)
		}
		r := b[devicesOffset+i*deviceSize:][:deviceSize]
		copy(r, d.UUID)
		le.PutUint64(r[48:], d.MemoryLimitBytes)
		le.PutUint32(r[56:], d.SMLimitPercent)
		le.PutUint32(r[60:], 1)
		le.PutUint64(r[64:], d.UsedBytes)
		le.PutUint64(r[72:], d.PeakBytes)
		le.PutUint32(r[160:], d.ComputePolicy)
		le.PutUint32(r[164:], d.SMUtilPercent)
		le.PutUint64(r[104:], d.RefusedProcesses)
		le.PutUint32(r[168:], d.SMShareBasisPoints)
		le.PutUint64(r[176:], d.SMShareTimeNS)
		le.PutUint64(r[232:], d.Refusals)
		le.PutUint64(r[240:], d.LastRefusedBytes)
		le.PutUint64(r[248:], d.LastRefusedNS)
	}
	for _, p := range procs {
		if p.Slot < 0 || p.Slot >= 512 {
			return nil, fmt.Errorf("slot %d out of range", p.Slot)
		}
		if inUse := uint32(p.Slot + 1); inUse > le.Uint32(b[80:]) {
			le.PutUint32(b[80:], inUse) // header.slots_in_use (minor 2)
		}
		if len(p.Devices) > maxDevices {
			return nil, fmt.Errorf("slot %d: %d devices, at most %d fit", p.Slot, len(p.Devices), maxDevices)
		}
		s := b[slotsOffset+p.Slot*slotSize:][:slotSize]
		le.PutUint32(s[0:], 1)
		le.PutUint32(s[4:], p.PID)
		le.PutUint32(s[8:], p.HostPID)
		le.PutUint32(s[12:], p.Seq)
		le.PutUint64(s[16:], p.StartTime)
		le.PutUint64(s[24:], p.PIDNamespace)
		le.PutUint64(s[32:], p.HeartbeatNS)
		if p.FailClosed {
			le.PutUint32(s[40:], 1)
		}
		for d, u := range p.Devices {
			sd := s[128+d*slotDeviceSize:][:slotDeviceSize]
			le.PutUint64(sd[0:], u.UsedBytes)
			le.PutUint64(sd[8:], u.PeakBytes)
			le.PutUint64(sd[16:], u.OverheadBytes)
			le.PutUint64(sd[24:], u.KernelLaunches)
			le.PutUint64(sd[32:], u.ThrottledNS)
			le.PutUint32(sd[40:], u.SMUtilPercent)
			le.PutUint64(sd[56:], u.ChargedBytes)
		}
	}
	return b, nil
}

// WriteFile writes b to path in place with the region's mode, as a process
// attached to the region would change it, so an open reader sees the
// update.
func WriteFile(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, fileMode)
	if err != nil {
		return fmt.Errorf("open region %s: %w", path, err)
	}
	_, err = f.WriteAt(b, 0)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write region %s: %w", path, err)
	}
	return nil
}
