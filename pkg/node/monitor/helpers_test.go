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
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/region/regiontest"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/discovery"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/prepare/preparetest"
)

const (
	gib   = preparetest.GiB
	mib   = uint64(1) << 20
	uuid0 = preparetest.GPU0
	uuid1 = "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
	uidA  = preparetest.ClaimA
	uidB  = preparetest.ClaimB
)

var testGPUs = []discovery.Info{
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
