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
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLayoutMatchesHeader compares every constant and field offset the
// reader uses with what the C compiler makes of vgpu_region.h.
func TestLayoutMatchesHeader(t *testing.T) {
	out, err := exec.Command(buildCTool(t), "--layout").Output()
	require.NoError(t, err)

	fromC := map[string]uint64{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		name, value, ok := strings.Cut(line, " ")
		require.True(t, ok, "line %q", line)
		v, err := strconv.ParseUint(value, 10, 64)
		require.NoError(t, err, "line %q", line)
		fromC[name] = v
	}

	goSide := map[string]uint64{
		"VGPU_REGION_SIZE":                        Size,
		"VGPU_REGION_MAGIC":                       Magic,
		"VGPU_REGION_MAJOR":                       Major,
		"VGPU_REGION_MAX_DEVICES":                 MaxDevices,
		"VGPU_REGION_MAX_SLOTS":                   MaxSlots,
		"VGPU_REGION_UUID_LEN":                    UUIDLen,
		"VGPU_REGION_HEADER_SIZE":                 HeaderSize,
		"VGPU_REGION_DEVICE_SIZE":                 DeviceSize,
		"VGPU_REGION_SLOT_SIZE":                   SlotSize,
		"VGPU_REGION_SLOT_DEVICE_SIZE":            SlotDeviceSize,
		"VGPU_REGION_DEVICES_OFFSET":              DevicesOffset,
		"VGPU_REGION_SLOTS_OFFSET":                SlotsOffset,
		"VGPU_REGION_UNINIT":                      initUninitialised,
		"VGPU_REGION_INITIALISING":                initInitialising,
		"VGPU_REGION_READY":                       initReady,
		"VGPU_DEVICE_ACTIVE":                      deviceActive,
		"VGPU_SLOT_FREE":                          slotFree,
		"VGPU_SLOT_ACTIVE":                        slotActive,
		"VGPU_INIT_PIDNS_INO":                     initPIDNamespace,
		"VGPU_SLOT_FLAG_FAIL_CLOSED":              slotFlagFailClosed,
		"vgpu_region_device.charge_lock":          offDevChargeLock,
		"vgpu_region_device.undo_slot":            offDevUndoSlot,
		"vgpu_region_device.undo_used_bytes":      offDevUndoUsedBytes,
		"vgpu_region_device.undo_charged_bytes":   offDevUndoChargedBytes,
		"vgpu_region_device.refused_processes":    offDevRefused,
		"vgpu_region_slot.flags":                  offSlotFlags,
		"vgpu_region_slot_device.charged_bytes":   offSDChargedBytes,
		"vgpu_region_header.magic":                offMagic,
		"vgpu_region_header.major":                offMajor,
		"vgpu_region_header.minor":                offMinor,
		"vgpu_region_header.init_state":           offInitState,
		"vgpu_region_header.region_size":          offRegionSize,
		"vgpu_region_header.header_size":          offHeaderSize,
		"vgpu_region_header.device_size":          offDeviceSize,
		"vgpu_region_header.slot_size":            offSlotSize,
		"vgpu_region_header.max_devices":          offMaxDevices,
		"vgpu_region_header.max_slots":            offMaxSlots,
		"vgpu_region_header.device_count":         offDeviceCount,
		"vgpu_region_header.devices_offset":       offDevicesOffset,
		"vgpu_region_header.slots_offset":         offSlotsOffset,
		"vgpu_region_header.generation":           offGeneration,
		"vgpu_region_header.init_time_ns":         offInitTimeNS,
		"vgpu_region_header.slots_in_use":         offSlotsInUse,
		"vgpu_region_device.uuid":                 offDevUUID,
		"vgpu_region_device.memory_limit":         offDevMemoryLimit,
		"vgpu_region_device.sm_limit_percent":     offDevSMLimit,
		"vgpu_region_device.state":                offDevState,
		"vgpu_region_device.used_bytes":           offDevUsedBytes,
		"vgpu_region_device.peak_bytes":           offDevPeakBytes,
		"vgpu_region_device.compute_policy":       offDevComputePolicy,
		"vgpu_region_device.sm_util_percent":      offDevSMUtil,
		"vgpu_region_device.sm_share_permyriad":   offDevSMShare,
		"vgpu_region_device.sm_share_time_ns":     offDevSMShareTime,
		"vgpu_region_device.refusals":             offDevRefusals,
		"vgpu_region_device.last_refused_bytes":   offDevLastRefusedBytes,
		"vgpu_region_device.last_refused_ns":      offDevLastRefusedNS,
		"vgpu_region_slot.state":                  offSlotState,
		"vgpu_region_slot.pid":                    offSlotPID,
		"vgpu_region_slot.host_pid":               offSlotHostPID,
		"vgpu_region_slot.seq":                    offSlotSeq,
		"vgpu_region_slot.start_time":             offSlotStartTime,
		"vgpu_region_slot.pidns":                  offSlotPIDNS,
		"vgpu_region_slot.heartbeat_ns":           offSlotHeartbeat,
		"vgpu_region_slot.devices":                offSlotDevices,
		"vgpu_region_slot_device.used_bytes":      offSDUsedBytes,
		"vgpu_region_slot_device.peak_bytes":      offSDPeakBytes,
		"vgpu_region_slot_device.overhead_bytes":  offSDOverheadBytes,
		"vgpu_region_slot_device.kernel_launches": offSDKernelLaunches,
		"vgpu_region_slot_device.throttled_ns":    offSDThrottledNS,
		"vgpu_region_slot_device.sm_util_percent": offSDSMUtil,
		"VGPU_REGION_SHARED_OFFSET":               SharedOffset,
		"VGPU_REGION_SHARED_SIZE":                 SharedSize,
		"VGPU_REGION_MAX_SHARED":                  MaxShared,
		"VGPU_REGION_SHARED_KEY_LEN":              SharedKeyLen,
		"VGPU_SHARED_FREE":                        sharedFree,
		"VGPU_SHARED_LIVE":                        sharedLive,
		"VGPU_SHARED_KIND_IPC":                    sharedKindIPC,
		"VGPU_SHARED_KIND_VMM_FD":                 sharedKindVMMFD,
		"VGPU_SHARED_KIND_VMM_FABRIC":             sharedKindVMMFabric,
		"VGPU_UNDO_SLOT_MASK":                     undoSlotMask,
		"VGPU_UNDO_SHARED_SHIFT":                  undoSharedShift,
		"VGPU_UNDO_SHARED_MASK":                   undoSharedMask,
		"VGPU_UNDO_SHARED_WAS_LIVE":               undoSharedWasLive,
		"vgpu_region_shared.key":                  0,
		"vgpu_region_shared.bytes":                offShBytes,
		"vgpu_region_shared.device":               offShDevice,
		"vgpu_region_shared.state":                offShState,
		"vgpu_region_shared.holders":              offShHolders,
		"vgpu_region_shared.kind":                 offShKind,
	}
	for name, want := range fromC {
		got, ok := goSide[name]
		if assert.True(t, ok, "%s is printed by the C tool but not mirrored in Go", name) {
			assert.Equal(t, want, got, "%s: Go value differs from vgpu_region.h", name)
		}
	}
	for name := range goSide {
		assert.Contains(t, fromC, name, "%s is mirrored in Go but not checked by the C tool", name)
	}
}
