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

package quota

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"sync"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/cluster/allocator"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/names"
)

// probeName names the synthetic node, pool and claim of a sizing run.
const probeName = "vgpu-dra-quota-probe"

// Sizer tells what one device of a request is granted: the capacity the
// scheduler's structured allocator would record as consumed on the
// published devices this driver's class and the request's selectors
// admit. The allocator itself does the rounding (each capacity's
// requestPolicy: validRange min and step, or validValues; the default for
// capacities not requested), so the charge is what prepare will turn into
// the limit, never a re-implementation of the rules.
type Sizer struct {
	DriverName string
	Classes    structured.DeviceClassLister
	Slices     resourcelisters.ResourceSliceLister

	celCache *cel.Cache

	// groups caches deviceGroups' result for the slices it was built from:
	// grouping marshals every published device, which on a thousand nodes
	// was the controller's hottest path, once per admitted claim
	// (docs/scale.md). Informers replace an object on every change, so a
	// slice seen at the same address with the same resourceVersion is
	// unchanged.
	groupsMu   sync.Mutex
	groupsFrom map[*resourceapi.ResourceSlice]string
	groups     [][]resourceapi.Device
	// generation counts rebuilds of groups; grants caches Grant's results
	// for the groups of grantsOf, keyed by grantKey: claims come in few
	// shapes, and each sizing converts every grouped device for the
	// structured allocator.
	generation int
	grantsOf   int
	grants     map[string]Usage
}

// maxCachedGrants bounds the grant cache; it starts over when full.
const maxCachedGrants = 1024

// NewSizer returns a Sizer over the published slices.
func NewSizer(driverName string, classes structured.DeviceClassLister, slices resourcelisters.ResourceSliceLister) *Sizer {
	return &Sizer{
		DriverName: driverName, Classes: classes, Slices: slices,
		celCache: cel.NewCache(100, cel.Features{EnableConsumableCapacity: allocator.Features.ConsumableCapacity}),
	}
}

// ErrNoDevice is wrapped by Grant's error when no published device of this
// driver admits the request, so its grant is unknown.
var ErrNoDevice = errors.New("no published GPU matches the request")

// Grant returns the most one device of the request can be granted across
// the published devices (memory and cores each at their largest). The
// request's count and allocation mode are ignored: the caller multiplies.
func (s *Sizer) Grant(ctx context.Context, class string, selectors []resourceapi.DeviceSelector, capacity *resourceapi.CapacityRequirements) (Usage, error) {
	groups, generation, err := s.deviceGroups()
	if err != nil {
		return Usage{}, err
	}
	key, cacheable := s.grantKey(class, selectors, capacity)
	if cacheable {
		s.groupsMu.Lock()
		u, ok := s.grants[key]
		ok = ok && s.grantsOf == generation
		s.groupsMu.Unlock()
		if ok {
			return u, nil
		}
	}
	u, err := s.grant(ctx, groups, class, selectors, capacity)
	if err == nil && cacheable {
		s.groupsMu.Lock()
		if s.grantsOf != generation || len(s.grants) >= maxCachedGrants {
			s.grants, s.grantsOf = map[string]Usage{}, generation
		}
		s.grants[key] = u
		s.groupsMu.Unlock()
	}
	return u, err
}

// grantKey identifies a sizing: the class object (informers replace it on
// every change, so its address and resourceVersion change with it), the
// selectors and the capacity requested.
func (s *Sizer) grantKey(class string, selectors []resourceapi.DeviceSelector, capacity *resourceapi.CapacityRequirements) (string, bool) {
	cls, err := s.Classes.Get(class)
	if err != nil {
		return "", false
	}
	request, err := json.Marshal(struct {
		Selectors []resourceapi.DeviceSelector
		Capacity  *resourceapi.CapacityRequirements
	}{selectors, capacity})
	if err != nil {
		return "", false
	}
	return fmt.Sprintf("%s\x00%p\x00%s\x00%s", class, cls, cls.ResourceVersion, request), true
}

func (s *Sizer) grant(ctx context.Context, groups [][]resourceapi.Device, class string, selectors []resourceapi.DeviceSelector, capacity *resourceapi.CapacityRequirements) (Usage, error) {
	claim := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: probeName, Namespace: probeName, UID: probeName},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
			Name: "request",
			Exactly: &resourceapi.ExactDeviceRequest{
				DeviceClassName: class,
				Selectors:       selectors,
				AllocationMode:  resourceapi.DeviceAllocationModeExactCount,
				Count:           1,
				Capacity:        capacity,
			},
		}}}},
	}
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: probeName}}
	var most Usage
	found := false
	for i, group := range groups {
		slice := &resourceapi.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: probeName + "-" + strconv.Itoa(i)},
			Spec: resourceapi.ResourceSliceSpec{
				Driver:   s.DriverName,
				Pool:     resourceapi.ResourcePool{Name: probeName + "-" + strconv.Itoa(i), Generation: 1, ResourceSliceCount: 1},
				AllNodes: ptr.To(true),
				Devices:  group,
			},
		}
		state := structured.AllocatedState{
			AllocatedDevices:         sets.New[structured.DeviceID](),
			AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
			AggregatedCapacity:       structured.NewConsumedCapacityCollection(),
		}
		alloc, err := structured.NewAllocator(ctx, allocator.Features, state, s.Classes, []*resourceapi.ResourceSlice{slice}, s.celCache)
		if err != nil {
			return Usage{}, fmt.Errorf("size request with the structured allocator: %w", err)
		}
		results, err := alloc.Allocate(ctx, node, []*resourceapi.ResourceClaim{claim})
		if errors.Is(err, structured.ErrFailedAllocationOnNode) || (err == nil && len(results) == 0) {
			continue // no device of this shape admits the request
		}
		if err != nil {
			return Usage{}, fmt.Errorf("size request with the structured allocator: %w", err)
		}
		for _, r := range results[0].Devices.Results {
			u := s.consumed(r, group)
			most.MemoryBytes = max(most.MemoryBytes, u.MemoryBytes)
			most.Cores = max(most.Cores, u.Cores)
			found = true
		}
	}
	if !found {
		return Usage{}, fmt.Errorf("%w (class %q)", ErrNoDevice, class)
	}
	return most, nil
}

// consumed reads what the allocator recorded; a device that is not
// shareable is consumed whole.
func (s *Sizer) consumed(r resourceapi.DeviceRequestAllocationResult, group []resourceapi.Device) Usage {
	amounts := r.ConsumedCapacity
	if amounts == nil {
		for _, d := range group {
			if d.Name == r.Device {
				amounts = map[resourceapi.QualifiedName]resource.Quantity{}
				for k, c := range d.Capacity {
					amounts[k] = c.Value
				}
			}
		}
	}
	var u Usage
	if q, ok := amounts[names.CapacityMemory]; ok {
		u.MemoryBytes = q.Value()
	}
	if q, ok := amounts[names.CapacityCores]; ok {
		u.Cores = q.Value()
	}
	return u
}

// deviceGroups returns this driver's published devices grouped by what
// decides their rounding (capacities, requestPolicies, shareability), as
// synthetic devices that any node may use: without taints (a GPU tainted
// now may recover), counters or binding conditions, renamed to be unique.
// The result is shared between callers and must not be modified; the
// generation changes whenever it is rebuilt.
func (s *Sizer) deviceGroups() ([][]resourceapi.Device, int, error) {
	all, err := s.Slices.List(labels.Everything())
	if err != nil {
		return nil, 0, fmt.Errorf("list ResourceSlices: %w", err)
	}
	ours := make(map[*resourceapi.ResourceSlice]string, len(all))
	for _, slice := range all {
		if slice.Spec.Driver == s.DriverName {
			ours[slice] = slice.ResourceVersion
		}
	}
	s.groupsMu.Lock()
	defer s.groupsMu.Unlock()
	if s.groupsFrom != nil && maps.Equal(ours, s.groupsFrom) {
		return s.groups, s.generation, nil
	}
	index := map[string]int{}
	var groups [][]resourceapi.Device
	for _, slice := range all {
		if slice.Spec.Driver != s.DriverName {
			continue
		}
		for _, d := range slice.Spec.Devices {
			key, err := json.Marshal(struct {
				Capacity map[resourceapi.QualifiedName]resourceapi.DeviceCapacity
				Shared   *bool
			}{d.Capacity, d.AllowMultipleAllocations})
			if err != nil {
				return nil, 0, fmt.Errorf("device %s of slice %s: %w", d.Name, slice.Name, err)
			}
			i, ok := index[string(key)]
			if !ok {
				i = len(groups)
				index[string(key)] = i
				groups = append(groups, nil)
			}
			groups[i] = append(groups[i], resourceapi.Device{
				Name:                     "d" + strconv.Itoa(len(groups[i])),
				Attributes:               d.Attributes,
				Capacity:                 d.Capacity,
				AllowMultipleAllocations: d.AllowMultipleAllocations,
			})
		}
	}
	s.groupsFrom, s.groups = ours, groups
	s.generation++
	return groups, s.generation, nil
}
