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

package devices

import (
	"fmt"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
	"github.com/stretchr/testify/assert"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/resourceslice"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/common/apifeatures"
)

// stored is pool as an API server stores it, each slice passed through
// keep first.
func stored(pool resourceslice.Pool, generation int64, keep func(*resourceapi.ResourceSliceSpec)) []resourceapi.ResourceSlice {
	var out []resourceapi.ResourceSlice
	for _, s := range pool.Slices {
		spec := resourceapi.ResourceSliceSpec{
			Pool:           resourceapi.ResourcePool{Name: nodeName, Generation: generation, ResourceSliceCount: int64(len(pool.Slices))},
			Devices:        append([]resourceapi.Device(nil), s.Devices...),
			SharedCounters: s.SharedCounters,
		}
		for i := range spec.Devices {
			spec.Devices[i].Taints = append([]resourceapi.DeviceTaint(nil), spec.Devices[i].Taints...)
		}
		if keep != nil {
			keep(&spec)
		}
		out = append(out, resourceapi.ResourceSlice{Spec: spec})
	}
	return out
}

// Each gate an API server can have off drops its own fields; ReadBack names
// exactly the gates whose fields are gone.
func TestReadBackNamesTheDroppedGates(t *testing.T) {
	taint := (TaintPolicy{}).XIDTaint(79, time.Unix(0, 0))
	migPool, _ := MIGPool([]GPU{migGPU(t, 0, gpus.H100_SXM5_80GB), {Info: h100(1)}}, Options{}, partitionable)
	pool := WithTaints(migPool, map[string][]resourceapi.DeviceTaint{Name(1): {taint}})

	noSharing := func(s *resourceapi.ResourceSliceSpec) {
		for i := range s.Devices {
			s.Devices[i].AllowMultipleAllocations = nil
		}
	}
	noCounters := func(s *resourceapi.ResourceSliceSpec) {
		s.SharedCounters = nil
		for i := range s.Devices {
			s.Devices[i].ConsumesCounters = nil
		}
	}
	noTaints := func(s *resourceapi.ResourceSliceSpec) {
		for i := range s.Devices {
			s.Devices[i].Taints = nil
		}
	}
	for name, tc := range map[string]struct {
		keep func(*resourceapi.ResourceSliceSpec)
		want []apifeatures.Gate
	}{
		"all kept":         {},
		"sharing dropped":  {keep: noSharing, want: []apifeatures.Gate{apifeatures.ConsumableCapacity}},
		"counters dropped": {keep: noCounters, want: []apifeatures.Gate{apifeatures.PartitionableDevices}},
		"taints dropped":   {keep: noTaints, want: []apifeatures.Gate{apifeatures.DeviceTaints}},
		"all dropped": {keep: func(s *resourceapi.ResourceSliceSpec) { noSharing(s); noCounters(s); noTaints(s) },
			want: []apifeatures.Gate{apifeatures.ConsumableCapacity, apifeatures.PartitionableDevices, apifeatures.DeviceTaints}},
	} {
		t.Run(name, func(t *testing.T) {
			dropped, complete := ReadBack(pool, stored(pool, 3, tc.keep))
			assert.True(t, complete)
			var gates []apifeatures.Gate
			for _, d := range dropped {
				gates = append(gates, d.Gate)
				assert.NotEmpty(t, d.Field)
			}
			assert.Equal(t, tc.want, gates)
		})
	}
}

// A pool still being written, or the previous instance's pool, is judged
// by nobody: its devices are not those published.
func TestReadBackWaitsForTheWholePool(t *testing.T) {
	migPool, _ := MIGPool([]GPU{migGPU(t, 0, gpus.H100_SXM5_80GB)}, Options{}, partitionable)
	all := stored(migPool, 2, nil)
	assert.Greater(t, len(all), 1, "the MIG pool has a counter slice and a device slice")

	_, complete := ReadBack(migPool, nil)
	assert.False(t, complete, "nothing stored yet")
	_, complete = ReadBack(migPool, all[:1])
	assert.False(t, complete, "one slice of two")

	// Before MIG was switched on: the plain GPU's one-slice pool, newer
	// than nothing but without the MIG devices.
	plain := stored(Pool(nil, Options{}), 1, nil)
	plain[0].Spec.Devices = []resourceapi.Device{Device(h100(0), Options{})}
	_, complete = ReadBack(migPool, plain)
	assert.False(t, complete, "the previous instance's pool")

	// The old generation beside the new one is ignored.
	dropped, complete := ReadBack(migPool, append(stored(migPool, 1, func(s *resourceapi.ResourceSliceSpec) { s.SharedCounters = nil }), all...))
	assert.True(t, complete)
	assert.Empty(t, dropped, fmt.Sprint(dropped))
}
