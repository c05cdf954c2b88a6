package monitor

import (
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/claims/claimstest"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/gpu"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/region/regiontest"
)

const (
	gib   = claimstest.GiB
	mib   = uint64(1) << 20
	uuid0 = claimstest.GPU0
	uuid1 = "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
	uidA  = claimstest.ClaimA
	uidB  = claimstest.ClaimB
)

var testGPUs = []gpu.Info{
	{UUID: uuid0, Index: 0, MemoryBytes: 80 * gib},
	{UUID: uuid1, Index: 1, MemoryBytes: 80 * gib},
}

// proc is a process of the test region using GPU 0.
func proc(slot int, pid uint32, usedBytes, launches, throttledNS uint64) regiontest.Process {
	return regiontest.Process{
		Slot: slot, PID: pid, StartTime: uint64(1000 + slot), PIDNamespace: 4026532000, Seq: 2,
		Devices: []regiontest.ProcessDevice{{UsedBytes: usedBytes, PeakBytes: usedBytes, KernelLaunches: launches, ThrottledNS: throttledNS, SMUtilPercent: 10}},
	}
}
