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

package hami

import (
	"cmp"
	"slices"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/names"
)

// Product is one kind of GPU present in the cluster: a product name with
// the memory capacity its devices publish. Two GPUs of one product that
// publish different capacities are two Products. A MIG profile of a
// product is a Product too, with its profile name and the instance's memory.
type Product struct {
	Name        string
	MemoryBytes int64
	// Profile is the MIG profile ("3g.71gb"), empty for a whole GPU.
	Profile string
}

// Products lists the distinct GPU products and MIG profiles of driver in
// slices, sorted by name, then memory, then profile. Devices without a
// product name or a memory capacity are skipped: no request could select
// them by product anyway.
func Products(resourceSlices []*resourceapi.ResourceSlice, driver string) []Product {
	seen := map[Product]bool{}
	var out []Product
	for _, slice := range resourceSlices {
		if slice.Spec.Driver != driver {
			continue
		}
		for _, dev := range slice.Spec.Devices {
			attr, ok := dev.Attributes[names.AttrProductName]
			if !ok || attr.StringValue == nil || *attr.StringValue == "" {
				continue
			}
			capacity, ok := dev.Capacity[names.CapacityMemory]
			if !ok || capacity.Value.Sign() <= 0 {
				continue
			}
			p := Product{Name: *attr.StringValue, MemoryBytes: capacity.Value.Value()}
			if profile, ok := dev.Attributes[names.AttrProfile]; ok && profile.StringValue != nil {
				p.Profile = *profile.StringValue
			}
			if !seen[p] {
				seen[p] = true
				out = append(out, p)
			}
		}
	}
	slices.SortFunc(out, func(a, b Product) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.MemoryBytes, b.MemoryBytes), cmp.Compare(a.Profile, b.Profile))
	})
	return out
}
