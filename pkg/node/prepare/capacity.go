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

package prepare

import (
	"fmt"
)

// deviceUse is what the claims prepared on one GPU consume together.
type deviceUse struct {
	memoryBytes uint64
	cores       int64
}

// preparedUse sums, per device name, what the claims in the checkpoint
// consume, plus extra (claims accepted earlier in the same batch).
func (m *Manager) preparedUse(extra []*PreparedClaim) map[string]deviceUse {
	use := map[string]deviceUse{}
	add := func(c *PreparedClaim) {
		for _, d := range c.Devices {
			u := use[d.Device]
			u.memoryBytes += d.MemoryBytes
			u.cores += d.Cores
			use[d.Device] = u
		}
	}
	for _, rec := range m.cp.Claims {
		add(&rec.PreparedClaim)
	}
	for _, c := range extra {
		add(c)
	}
	return use
}

// checkCapacity is the last line of defence against double booking: a claim
// is refused when, with the claims already prepared on this node, a GPU's
// memory or cores would be granted more than once over. The scheduler and
// the policy allocator both prevent this; two deciders that do not see each
// other (a misconfigured second allocator, a hand-written allocation) must
// not let limits exceed the hardware.
func (m *Manager) checkCapacity(c *PreparedClaim, use map[string]deviceUse) error {
	mine := map[string]deviceUse{}
	for _, d := range c.Devices {
		u := mine[d.Device]
		u.memoryBytes += d.MemoryBytes
		u.cores += d.Cores
		mine[d.Device] = u
	}
	for name, u := range mine {
		info, _, _ := m.resolve(name)
		prepared := use[name]
		if prepared.memoryBytes+u.memoryBytes > info.MemoryBytes {
			return fmt.Errorf("device %s (%s): the claim's %d bytes of memory and the %d bytes prepared for other claims exceed its %d bytes; the allocation overbooks the GPU",
				name, info.UUID, u.memoryBytes, prepared.memoryBytes, info.MemoryBytes)
		}
		if prepared.cores+u.cores > maxCores {
			return fmt.Errorf("device %s (%s): the claim's %d cores and the %d cores prepared for other claims exceed %d; the allocation overbooks the GPU",
				name, info.UUID, u.cores, prepared.cores, maxCores)
		}
	}
	return nil
}
