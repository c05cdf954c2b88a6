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
	"slices"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/utils/ptr"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/common/apifeatures"
)

// ReadBack compares the pool as published with the node's slices as the API
// server stored them. It returns complete=false until the stored slices are
// a whole pool of one generation holding every published device (the slices
// are written one by one, and the newest pool may still be a previous
// instance's), and then every gated field that came back dropped, one entry
// per gate.
func ReadBack(published resourceslice.Pool, stored []resourceapi.ResourceSlice) (dropped []apifeatures.Dropped, complete bool) {
	var gen int64
	for _, sl := range stored {
		gen = max(gen, sl.Spec.Pool.Generation)
	}
	var count, seen int64
	got := map[string]resourceapi.Device{}
	counters := false
	for _, sl := range stored {
		if sl.Spec.Pool.Generation != gen {
			continue
		}
		seen++
		count = sl.Spec.Pool.ResourceSliceCount
		counters = counters || len(sl.Spec.SharedCounters) > 0
		for _, d := range sl.Spec.Devices {
			got[d.Name] = d
		}
	}
	if seen == 0 || seen < count {
		return nil, false
	}
	var shared, consumes, tainted string
	for _, s := range published.Slices {
		for _, want := range s.Devices {
			have, ok := got[want.Name]
			if !ok {
				return nil, false
			}
			if shared == "" && ptr.Deref(want.AllowMultipleAllocations, false) && !ptr.Deref(have.AllowMultipleAllocations, false) {
				shared = want.Name
			}
			if consumes == "" && len(want.ConsumesCounters) > 0 && !counters {
				consumes = want.Name
			}
			if tainted == "" && len(want.Taints) > 0 && !slices.ContainsFunc(have.Taints, func(t resourceapi.DeviceTaint) bool {
				return t.Key == want.Taints[0].Key
			}) {
				tainted = want.Name
			}
		}
	}
	if shared != "" {
		dropped = append(dropped, apifeatures.Dropped{Gate: apifeatures.ConsumableCapacity, Field: fmt.Sprintf("allowMultipleAllocations of device %s", shared)})
	}
	if consumes != "" {
		dropped = append(dropped, apifeatures.Dropped{Gate: apifeatures.PartitionableDevices, Field: fmt.Sprintf("the shared counters that device %s consumes", consumes)})
	}
	if tainted != "" {
		dropped = append(dropped, apifeatures.Dropped{Gate: apifeatures.DeviceTaints, Field: fmt.Sprintf("the taints of device %s", tainted)})
	}
	return dropped, true
}
