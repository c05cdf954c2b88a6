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
	"testing"

	"github.com/stretchr/testify/assert"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/names"
)

func TestDemandCountsRequestsWithoutMemory(t *testing.T) {
	withMemory := gpuClaim("a", 1, "4Gi", "10")
	whole := gpuClaim("b", 2, "", "")
	coresOnly := gpuClaim("c", 1, "", "30")
	d := demandOf([]*resourceapi.ResourceClaim{withMemory, whole, coresOnly}, isTestClass)
	assert.Equal(t, demand{perRequest: []gpuNeed{{memory: 4 << 30, cores: 10}, {}, {cores: 30}}, devices: 4, wholeMemory: 3, bounded: true}, d)

	// With alternatives, the least demanding one counts: one asks for memory.
	either := gpuClaim("d", 1, "", "")
	either.Spec.Devices.Requests[0] = resourceapi.DeviceRequest{Name: "gpu", FirstAvailable: []resourceapi.DeviceSubRequest{
		{Name: "whole", DeviceClassName: testClass, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1},
		{Name: "slice", DeviceClassName: testClass, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1,
			Capacity: &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{
				names.DriverName + "/" + names.CapacityMemory: resource.MustParse("1Gi")}}},
	}}
	assert.Equal(t, demand{perRequest: []gpuNeed{{}}, devices: 1, wholeMemory: 0, bounded: true}, demandOf([]*resourceapi.ResourceClaim{either}, isTestClass))
}
