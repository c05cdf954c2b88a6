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

package allocator

import (
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"
)

// allocationTracker is the allocated state of the cluster as the structured
// allocator wants it, kept up to date claim by claim instead of being
// rebuilt from every claim for every decision.
//
// An allocation this allocator has just decided is "assumed" until the
// informer shows the claim allocated: a stale informer event without the
// allocation must not free the devices again, or the next decision could
// hand them out twice.
type allocationTracker struct {
	state   structured.AllocatedState
	claims  map[types.UID][]resourceapi.DeviceRequestAllocationResult
	assumed sets.Set[types.UID]
	// changed is called with every device whose consumption changed.
	changed func(structured.DeviceID)
}

func newAllocationTracker(changed func(structured.DeviceID)) *allocationTracker {
	return &allocationTracker{
		state: structured.AllocatedState{
			AllocatedDevices:         sets.New[structured.DeviceID](),
			AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
			AggregatedCapacity:       structured.NewConsumedCapacityCollection(),
		},
		claims:  map[types.UID][]resourceapi.DeviceRequestAllocationResult{},
		assumed: sets.New[types.UID](),
		changed: changed,
	}
}

// observe records a claim as the informer shows it.
func (tr *allocationTracker) observe(claim *resourceapi.ResourceClaim) {
	if claim.Status.Allocation == nil {
		if !tr.assumed.Has(claim.UID) {
			tr.remove(claim.UID)
		}
		return
	}
	tr.assumed.Delete(claim.UID)
	tr.set(claim.UID, claim.Status.Allocation.Devices.Results)
}

// assume records an allocation that was decided but may not be visible in
// the informer yet.
func (tr *allocationTracker) assume(uid types.UID, alloc *resourceapi.AllocationResult) {
	tr.assumed.Insert(uid)
	tr.set(uid, alloc.Devices.Results)
}

// forget drops a claim: deleted, released, or an assumption whose write
// failed.
func (tr *allocationTracker) forget(uid types.UID) {
	tr.assumed.Delete(uid)
	tr.remove(uid)
}

func (tr *allocationTracker) set(uid types.UID, results []resourceapi.DeviceRequestAllocationResult) {
	tr.remove(uid)
	if len(results) == 0 {
		return
	}
	tr.claims[uid] = results
	for _, r := range results {
		if ptr.Deref(r.AdminAccess, false) {
			// Admin access observes a device without consuming it.
			continue
		}
		id := structured.MakeDeviceID(r.Driver, r.Pool, r.Device)
		switch {
		case r.ShareID != nil:
			tr.state.AllocatedSharedDeviceIDs.Insert(structured.MakeSharedDeviceID(id, r.ShareID))
			if r.ConsumedCapacity != nil {
				tr.state.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(id, r.ConsumedCapacity))
			}
		default:
			tr.state.AllocatedDevices.Insert(id)
		}
		tr.changed(id)
	}
}

func (tr *allocationTracker) remove(uid types.UID) {
	results, ok := tr.claims[uid]
	if !ok {
		return
	}
	delete(tr.claims, uid)
	for _, r := range results {
		if ptr.Deref(r.AdminAccess, false) {
			continue
		}
		id := structured.MakeDeviceID(r.Driver, r.Pool, r.Device)
		switch {
		case r.ShareID != nil:
			tr.state.AllocatedSharedDeviceIDs.Delete(structured.MakeSharedDeviceID(id, r.ShareID))
			if r.ConsumedCapacity != nil {
				tr.state.AggregatedCapacity.Remove(structured.NewDeviceConsumedCapacity(id, r.ConsumedCapacity))
			}
		default:
			tr.state.AllocatedDevices.Delete(id)
		}
		tr.changed(id)
	}
}

// used returns what is consumed of a device: memory bytes, cores, and
// whether it is held exclusively.
func (tr *allocationTracker) used(id structured.DeviceID, memoryName, coresName resourceapi.QualifiedName) (memory, cores int64, exclusive bool) {
	if tr.state.AllocatedDevices.Has(id) {
		return 0, 0, true
	}
	c := tr.state.AggregatedCapacity[id]
	if q := c[memoryName]; q != nil {
		memory = q.Value()
	}
	if q := c[coresName]; q != nil {
		cores = q.Value()
	}
	return memory, cores, false
}
