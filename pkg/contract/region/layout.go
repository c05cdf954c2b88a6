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

// Layout constants and byte offsets mirrored from vgpu_region.h. A test
// compiles the header and compares every offset below with offsetof(), so
// the two cannot drift apart unnoticed.
const (
	// Magic is VGPU_REGION_MAGIC, "VGPUREG1" as a little-endian uint64.
	Magic uint64 = 0x3147455255504756
	// Major is the layout major version this reader understands; a newer
	// minor only adds fields in reserved space and is accepted.
	Major = 1

	MaxDevices = 16
	MaxSlots   = 512
	UUIDLen    = 48

	HeaderSize     = 256
	DeviceSize     = 256
	SlotSize       = 1152
	SlotDeviceSize = 64
	DevicesOffset  = 256
	SlotsOffset    = 8192

	// initPIDNamespace is the inode of the initial pid namespace
	// (VGPU_INIT_PIDNS_INO): a slot with this pidns holds a host pid.
	initPIDNamespace uint64 = 0xEFFFFFFC
)

// Header field offsets (struct vgpu_region_header).
const (
	offMagic         = 0
	offMajor         = 8
	offMinor         = 10
	offInitState     = 12
	offRegionSize    = 16
	offHeaderSize    = 24
	offDeviceSize    = 28
	offSlotSize      = 32
	offMaxDevices    = 36
	offMaxSlots      = 40
	offDeviceCount   = 44
	offDevicesOffset = 48
	offSlotsOffset   = 56
	offGeneration    = 64
	offInitTimeNS    = 72
	offSlotsInUse    = 80
)

// MinorSlotsInUse is the first layout minor whose writers maintain
// header.slots_in_use; readers of older regions scan every slot.
const MinorSlotsInUse = 2

// Device record field offsets (struct vgpu_region_device).
const (
	offDevUUID        = 0
	offDevMemoryLimit = 48
	offDevSMLimit     = 56
	offDevState       = 60
	offDevUsedBytes   = 64
	offDevPeakBytes   = 72
	// Charge lock and undo record (minor 3): written by the library only.
	offDevChargeLock       = 80
	offDevUndoSlot         = 84
	offDevUndoUsedBytes    = 88
	offDevUndoChargedBytes = 96
	offDevRefused          = 104
	offDevComputePolicy    = 160
	offDevSMUtil           = 164
	offDevSMShare          = 168 // minor 4
	offDevSMShareTime      = 176 // minor 4
	// Limit hits (minor 5); zero in older regions, whose bytes were reserved.
	offDevRefusals         = 232
	offDevLastRefusedBytes = 240
	offDevLastRefusedNS    = 248
)

// Slot field offsets (struct vgpu_region_slot).
const (
	offSlotState     = 0
	offSlotPID       = 4
	offSlotHostPID   = 8
	offSlotSeq       = 12
	offSlotStartTime = 16
	offSlotPIDNS     = 24
	offSlotHeartbeat = 32
	offSlotFlags     = 40
	offSlotDevices   = 128
)

// Per-process device usage offsets (struct vgpu_region_slot_device).
const (
	offSDUsedBytes      = 0
	offSDPeakBytes      = 8
	offSDOverheadBytes  = 16
	offSDKernelLaunches = 24
	offSDThrottledNS    = 32
	offSDSMUtil         = 40
	offSDChargedBytes   = 56
)

// Shared allocation records (minor 7, struct vgpu_region_shared): memory
// exported to other processes of the claim, charged to the claim while any
// holder lives. device.used_bytes == sum of live slots' charged_bytes + sum
// of live records' bytes.
const (
	SharedOffset = 4352
	SharedSize   = 160
	MaxShared    = 24
	SharedKeyLen = 64

	offShBytes   = 64
	offShDevice  = 72
	offShState   = 76
	offShHolders = 80
	offShKind    = 144

	sharedFree    = 0
	sharedLive    = 1
	sharedKindIPC = 1
	// VMM shareable handles: a POSIX fd's (st_dev, st_ino) where it is a regular file, else the
	// nonce of the OFD lock on its open file description; a fabric handle's bytes.
	sharedKindVMMFD     = 2
	sharedKindVMMFabric = 3

	// device.undo_slot (minor 7): slot + 1 in bits 0-15, the shared record
	// the change made or freed (index + 1) in bits 16-23, bit 24 when it was
	// live before the change.
	undoSlotMask      = 0xffff
	undoSharedShift   = 16
	undoSharedMask    = 0xff
	undoSharedWasLive = 1 << 24
)

// slot.flags bits (minor 3).
const slotFlagFailClosed = 1

// header.init_state values.
const (
	initUninitialised = 0
	initInitialising  = 1
	initReady         = 2
)

// device.state, slot.state values.
const (
	deviceActive = 1
	slotFree     = 0
	slotActive   = 1
)
