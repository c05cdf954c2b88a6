package allocator

import (
	"testing"

	"github.com/stretchr/testify/assert"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/devices/names"
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
