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

package inspect

import (
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/names"
)

// capacityRequest reads a request for a capacity by its short or
// driver-qualified name; nil when the request does not name it.
func capacityRequest(c *resourceapi.CapacityRequirements, name resourceapi.QualifiedName) *resource.Quantity {
	if c == nil {
		return nil
	}
	if q, ok := c.Requests[name]; ok {
		return &q
	}
	if q, ok := c.Requests[resourceapi.QualifiedName(names.DriverName+"/")+name]; ok {
		return &q
	}
	return nil
}

// consumption is what a request takes of a device capacity under the
// capacity's request policy (KEP-5075): the policy's default (else the
// whole capacity) when nothing is asked, else the request rounded up to a
// valid value. ok is false when no valid value is large enough.
func consumption(req *resource.Quantity, c resourceapi.DeviceCapacity) (v int64, ok bool) {
	p := c.RequestPolicy
	if req == nil {
		if p != nil && p.Default != nil {
			return p.Default.Value(), true
		}
		return c.Value.Value(), true
	}
	v = req.Value()
	if p == nil {
		return v, true
	}
	if len(p.ValidValues) > 0 {
		for _, valid := range p.ValidValues {
			if valid.Value() >= v {
				return valid.Value(), true
			}
		}
		return 0, false
	}
	if r := p.ValidRange; r != nil {
		lo := r.Min.Value()
		if v < lo {
			v = lo
		}
		if r.Step != nil && r.Step.Value() > 0 {
			step := r.Step.Value()
			v = lo + (v-lo+step-1)/step*step
		}
		if r.Max != nil && v > r.Max.Value() {
			return 0, false
		}
	}
	return v, true
}

// largestRequest is the largest request the capacity's policy accepts that
// consumes at most free; ok is false when even the smallest is too much.
func largestRequest(free int64, c resourceapi.DeviceCapacity) (int64, bool) {
	p := c.RequestPolicy
	if p == nil {
		return free, free > 0
	}
	if len(p.ValidValues) > 0 {
		best, ok := int64(0), false
		for _, valid := range p.ValidValues {
			if valid.Value() <= free && valid.Value() >= best {
				best, ok = valid.Value(), true
			}
		}
		return best, ok
	}
	r := p.ValidRange
	if r == nil {
		return free, free > 0
	}
	if r.Max != nil {
		free = min(free, r.Max.Value())
	}
	lo := r.Min.Value()
	if free < lo {
		return 0, false
	}
	if r.Step != nil && r.Step.Value() > 0 {
		step := r.Step.Value()
		return lo + (free-lo)/step*step, true
	}
	return free, true
}
