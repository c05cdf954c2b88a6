package quota

import (
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/devices"
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

// Charger computes what a claim is charged: the most it can be granted.
type Charger struct {
	// DriverName qualifies capacity names ("vgpu.dra.dev/memory").
	DriverName string
	// IsOurs tells whether a DeviceClass allocates this driver's GPUs.
	IsOurs func(className string) bool
	// MaxGPUMemory returns the largest memory capacity any published GPU
	// has, or 0 when none is known. A request without a memory amount
	// gets a whole GPU, so it is charged that much.
	MaxGPUMemory func() int64
}

// Charge returns the upper bound of what spec can be granted: per request,
// count times the requested amounts, the whole largest GPU's memory where
// no memory is requested, and the largest alternative of a firstAvailable
// list. A claim whose bound is unknown is an error, so that it cannot
// slip past a limit.
func (c Charger) Charge(spec *resourceapi.ResourceClaimSpec) (Usage, error) {
	var total Usage
	for _, req := range spec.Devices.Requests {
		var alternatives []Usage
		if req.Exactly != nil {
			u, err := c.request(req.Exactly.DeviceClassName, req.Exactly.AllocationMode, req.Exactly.Count, req.Exactly.Capacity)
			if err != nil {
				return Usage{}, fmt.Errorf("request %q: %w", req.Name, err)
			}
			alternatives = append(alternatives, u)
		}
		for _, sub := range req.FirstAvailable {
			u, err := c.request(sub.DeviceClassName, sub.AllocationMode, sub.Count, sub.Capacity)
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

func (c Charger) request(class string, mode resourceapi.DeviceAllocationMode, count int64, capacity *resourceapi.CapacityRequirements) (Usage, error) {
	if !c.IsOurs(class) {
		return Usage{}, nil
	}
	if mode == resourceapi.DeviceAllocationModeAll {
		return Usage{}, fmt.Errorf("allocationMode All takes an unknown number of GPUs, which a GPU quota cannot bound; ask for a count")
	}
	if count < 1 {
		count = 1
	}
	var u Usage
	memory, ok := c.capacity(capacity, devices.CapacityMemory)
	if ok {
		u.MemoryBytes = memory.Value()
	} else {
		u.MemoryBytes = c.MaxGPUMemory()
		if u.MemoryBytes <= 0 {
			return Usage{}, fmt.Errorf("asks for no memory amount, i.e. a whole GPU, but no GPU is published to size it; request memory explicitly")
		}
	}
	if cores, ok := c.capacity(capacity, devices.CapacityCores); ok {
		u.Cores = cores.Value()
	}
	return Usage{MemoryBytes: u.MemoryBytes * count, Cores: u.Cores * count}, nil
}

func (c Charger) capacity(capacity *resourceapi.CapacityRequirements, name resourceapi.QualifiedName) (resource.Quantity, bool) {
	if capacity == nil {
		return resource.Quantity{}, false
	}
	if q, ok := capacity.Requests[name]; ok {
		return q, true
	}
	q, ok := capacity.Requests[resourceapi.QualifiedName(c.DriverName+"/"+string(name))]
	return q, ok
}
