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
	"errors"
	"fmt"
)

const (
	// DefaultMemoryStep is the granularity of memory requests. One MiB
	// matches HAMi's CUDA_DEVICE_MEMORY_LIMIT, which is given in MiB, so every
	// granted amount is exactly expressible in the container environment,
	// while wasting at most 1 MiB per claim to rounding.
	DefaultMemoryStep int64 = 1 << 20
	// DefaultMemoryMin is the smallest memory a claim receives. Below this a
	// CUDA context plus libraries do not fit, so smaller grants only turn
	// into confusing out-of-memory errors.
	DefaultMemoryMin int64 = 256 << 20
)

// Options tunes the published memory request policy.
type Options struct {
	// MemoryStep is the granularity of memory requests in bytes; requests
	// round up to MemoryMin + n*MemoryStep. 0 selects DefaultMemoryStep.
	MemoryStep int64
	// MemoryMin is the smallest memory grant in bytes; smaller requests
	// round up to it. 0 selects DefaultMemoryMin.
	MemoryMin int64
	// SysfsRoot is where sysfs is mounted, used to find each GPU's PCIe root
	// complex. Empty selects /sys.
	SysfsRoot string
}

// Validate reports options that cannot describe a memory policy; callers
// check flags with it before publishing.
func (o Options) Validate() error {
	var errs []error
	if o.MemoryStep < 0 {
		errs = append(errs, fmt.Errorf("memory step %d: must not be negative", o.MemoryStep))
	}
	if o.MemoryMin < 0 {
		errs = append(errs, fmt.Errorf("memory minimum %d: must not be negative", o.MemoryMin))
	}
	return errors.Join(errs...)
}

// withDefaults fills zero values; negative values (rejected by Validate)
// also fall back to the defaults so that Device never publishes an invalid
// policy.
func (o Options) withDefaults() Options {
	if o.MemoryStep <= 0 {
		o.MemoryStep = DefaultMemoryStep
	}
	if o.MemoryMin <= 0 {
		o.MemoryMin = DefaultMemoryMin
	}
	if o.SysfsRoot == "" {
		o.SysfsRoot = "/sys"
	}
	return o
}
