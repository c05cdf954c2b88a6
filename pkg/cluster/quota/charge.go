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
	"errors"
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
)

// Usage is an amount of GPU capacity.
type Usage struct {
	MemoryBytes int64 `json:"memory"`
	Cores       int64 `json:"cores"`
}

// Add returns u + o.
func (u Usage) Add(o Usage) Usage {
	return Usage{MemoryBytes: u.MemoryBytes + o.MemoryBytes, Cores: u.Cores + o.Cores}
}

// IsZero is true for no usage.
func (u Usage) IsZero() bool { return u == Usage{} }

// Granter tells what one device of a request is granted (Sizer).
type Granter interface {
	Grant(ctx context.Context, class string, selectors []resourceapi.DeviceSelector, capacity *resourceapi.CapacityRequirements) (Usage, error)
}

// Charger computes what a claim is charged: the most it can be granted.
type Charger struct {
	// IsOurs tells whether a DeviceClass allocates this driver's GPUs.
	IsOurs func(className string) bool
	// Grants sizes each request the way the allocator rounds it.
	Grants Granter
}

// Charge returns the upper bound of what spec can be granted: per request,
// count times what one device of it is granted (the requested amounts
// rounded up by the published requestPolicy of the devices it may get,
// the policy's default where nothing is requested: a whole GPU's memory,
// no cores), and the largest alternative of a firstAvailable list. A
// claim whose bound is unknown is an error, so that it cannot slip past a
// limit.
func (c Charger) Charge(ctx context.Context, spec *resourceapi.ResourceClaimSpec) (Usage, error) {
	var total Usage
	for _, req := range spec.Devices.Requests {
		var alternatives []Usage
		if e := req.Exactly; e != nil {
			u, err := c.request(ctx, e.DeviceClassName, e.Selectors, e.AllocationMode, e.Count, e.Capacity)
			if err != nil {
				return Usage{}, fmt.Errorf("request %q: %w", req.Name, err)
			}
			alternatives = append(alternatives, u)
		}
		for _, sub := range req.FirstAvailable {
			u, err := c.request(ctx, sub.DeviceClassName, sub.Selectors, sub.AllocationMode, sub.Count, sub.Capacity)
			if err != nil {
				return Usage{}, fmt.Errorf("request %q/%q: %w", req.Name, sub.Name, err)
			}
			alternatives = append(alternatives, u)
		}
		var most Usage
		for _, u := range alternatives {
			most.MemoryBytes = max(most.MemoryBytes, u.MemoryBytes)
			most.Cores = max(most.Cores, u.Cores)
		}
		total = total.Add(most)
	}
	return total, nil
}

func (c Charger) request(ctx context.Context, class string, selectors []resourceapi.DeviceSelector, mode resourceapi.DeviceAllocationMode, count int64, capacity *resourceapi.CapacityRequirements) (Usage, error) {
	if !c.IsOurs(class) {
		return Usage{}, nil
	}
	if mode == resourceapi.DeviceAllocationModeAll {
		return Usage{}, fmt.Errorf("allocationMode All takes an unknown number of GPUs, which a GPU quota cannot bound; ask for a count")
	}
	if count < 1 {
		count = 1
	}
	u, err := c.Grants.Grant(ctx, class, selectors, capacity)
	if errors.Is(err, ErrNoDevice) {
		return Usage{}, fmt.Errorf("%w, so what it would be granted (rounded by the GPUs' requestPolicy) is unknown; retry when a matching GPU is published", err)
	}
	if err != nil {
		return Usage{}, err
	}
	return Usage{MemoryBytes: u.MemoryBytes * count, Cores: u.Cores * count}, nil
}
