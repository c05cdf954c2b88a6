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
	"cmp"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"

	"github.com/google/uuid"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	api "github.com/vgpu-dra/vgpu-dra-driver/api/vgpu.dra.dev/v1alpha1"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/names"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/region"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/discovery"
)

// Capacity names published for every GPU (docs/architecture.md, contracts).
const (
	capacityMemory = names.CapacityMemory
	capacityCores  = names.CapacityCores
	maxCores       = 100
)

// configUUID is the GPU UUID form libvgpu.so's config parser accepts
// (vgpu_uuid_valid in vgpu-core/src/config.c).
var configUUID = regexp.MustCompile(`^GPU-[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// validateUID accepts only canonical UUIDs, the form Kubernetes gives every
// object. Anything else is rejected before it can reach a path or file name.
func validateUID(uid types.UID) error {
	u, err := uuid.Parse(string(uid))
	if err != nil || u.String() != string(uid) {
		return fmt.Errorf("UID %q is not a canonical UUID", uid)
	}
	return nil
}

// plan turns an allocated claim into the limits and settings to prepare,
// without touching the node. Every problem is reported with the field path
// of the claim that causes it.
func (m *Manager) plan(claim *resourceapi.ResourceClaim) (*PreparedClaim, error) {
	if err := validateUID(claim.UID); err != nil {
		return nil, field.Invalid(field.NewPath("metadata", "uid"), claim.UID, "must be a canonical UUID")
	}
	alloc := claim.Status.Allocation
	if alloc == nil {
		return nil, field.Required(field.NewPath("status", "allocation"), "claim is not allocated")
	}
	resultsPath := field.NewPath("status", "allocation", "devices", "results")

	out := &PreparedClaim{UID: claim.UID, Namespace: claim.Namespace, Name: claim.Name}
	gpuOf := map[string]int{} // UUID -> index in out.GPUs
	infos := map[string]discovery.Info{}
	var settings *Settings
	var errs field.ErrorList
	burstLimits := map[string]*limitSum{} // by GPU UUID
	for i, r := range alloc.Devices.Results {
		if r.Driver != m.opts.DriverName {
			continue
		}
		path := resultsPath.Index(i)
		dev, rerrs := m.planResult(path, r)
		if len(rerrs) > 0 {
			errs = append(errs, rerrs...)
			continue
		}
		s, limit, grace, err := m.resolveSettings(alloc.Devices.Config, r.Request)
		if err != nil {
			errs = append(errs, field.Invalid(field.NewPath("status", "allocation", "devices", "config"), r.Request,
				fmt.Sprintf("opaque config for request %q: %v", r.Request, err)))
			continue
		}
		out.ReclaimGracePeriodSeconds = max(out.ReclaimGracePeriodSeconds, grace)
		if settings == nil {
			settings = &s
		} else if *settings != s {
			// The config file holds one set of settings per claim.
			errs = append(errs, field.Invalid(path.Child("request"), r.Request,
				"opaque config resolves differently than for the claim's other requests; one claim must use one compute policy, priority, log level and enforcement"))
			continue
		}

		info, target, _ := m.resolve(r.Device)
		if target.MPS {
			if merrs := checkMPSResult(path, r.Request, dev, s); len(merrs) > 0 {
				errs = append(errs, merrs...)
				continue
			}
		}
		key := m.limitKey(target)
		idx, ok := gpuOf[key]
		if !ok && !configUUID.MatchString(info.UUID) {
			// libvgpu.so would refuse the whole config, failing the container closed.
			errs = append(errs, field.Invalid(path.Child("device"), r.Device,
				fmt.Sprintf("GPU UUID %q cannot be written to the claim config (want GPU- and 8-4-4-4-12 hex digits)", info.UUID)))
			continue
		}
		if !ok {
			idx = len(out.GPUs)
			gpuOf[key] = idx
			infos[info.UUID] = info
			target.SMLimitPercent = dev.Cores
			out.GPUs = append(out.GPUs, target)
		} else {
			out.GPUs[idx].SMLimitPercent = mergeCores(out.GPUs[idx].SMLimitPercent, dev.Cores)
		}
		out.GPUs[idx].MemoryLimitBytes += dev.MemoryBytes
		if m.burstable(target) {
			out.GPUs[idx].BurstLimitBytes = addSaturating(out.GPUs[idx].BurstLimitBytes, ceilingOf(limit, dev.MemoryBytes))
		}
		if lerr := m.checkMemoryLimit(alloc.Devices.Config, r, limit, info, dev.MemoryBytes, burstLimits); lerr != nil {
			errs = append(errs, lerr)
			continue
		}
		if out.GPUs[idx].MemoryLimitBytes > info.MemoryBytes {
			errs = append(errs, field.Invalid(path.Child("consumedCapacity").Key(string(capacityMemory)), dev.MemoryBytes,
				fmt.Sprintf("the claim's shares of %s add up to %d bytes, more than its %d bytes", r.Device, out.GPUs[idx].MemoryLimitBytes, info.MemoryBytes)))
			continue
		}
		dev.GPU = idx
		out.Devices = append(out.Devices, dev)
	}
	errs = append(errs, checkMPSAlone(resultsPath, out)...)
	if len(out.GPUs) > region.MaxDevices {
		// The config format (and the region) hold this many GPUs; more cannot be enforced.
		tooMany := field.TooMany(resultsPath, len(out.GPUs), region.MaxDevices)
		tooMany.Detail = fmt.Sprintf("the results name %d distinct GPUs; a claim's config holds at most %d", len(out.GPUs), region.MaxDevices)
		errs = append(errs, tooMany)
	}
	if len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	if len(out.Devices) == 0 {
		return out, nil
	}
	for i := range out.GPUs {
		if out.GPUs[i].BurstLimitBytes <= out.GPUs[i].MemoryLimitBytes {
			out.GPUs[i].BurstLimitBytes = 0
		}
	}
	if !out.HasBurstRoom() {
		out.ReclaimGracePeriodSeconds = 0
	}
	out.Settings = *settings
	m.orderGPUs(out, infos)
	return out, nil
}

// planResult checks one allocation result of this driver and reads what it
// consumed.
func (m *Manager) planResult(path *field.Path, r resourceapi.DeviceRequestAllocationResult) (PreparedDevice, field.ErrorList) {
	var errs field.ErrorList
	dev := PreparedDevice{Request: r.Request, Pool: r.Pool, Device: r.Device}
	if r.Pool != m.opts.NodeName {
		errs = append(errs, field.Invalid(path.Child("pool"), r.Pool, fmt.Sprintf("not the pool of node %s", m.opts.NodeName)))
	}
	info, _, ok := m.resolve(r.Device)
	if !ok {
		errs = append(errs, field.NotFound(path.Child("device"), r.Device))
	}
	if r.AdminAccess != nil && *r.AdminAccess {
		errs = append(errs, field.Forbidden(path.Child("adminAccess"), "admin access to vGPU devices is not supported"))
	}
	if r.ShareID != nil {
		if err := validateUID(*r.ShareID); err != nil {
			errs = append(errs, field.Invalid(path.Child("shareID"), *r.ShareID, "must be a canonical UUID"))
		}
		dev.ShareID = *r.ShareID
	}

	capPath := path.Child("consumedCapacity")
	if q, found := r.ConsumedCapacity[capacityMemory]; !found {
		errs = append(errs, field.Required(capPath.Key(string(capacityMemory)), "every allocation of a vGPU device consumes memory"))
	} else {
		v, exact := q.AsInt64()
		switch {
		case !exact || v <= 0:
			errs = append(errs, field.Invalid(capPath.Key(string(capacityMemory)), q.String(), "must be a positive whole number of bytes"))
		case ok && uint64(v) > info.MemoryBytes:
			errs = append(errs, field.Invalid(capPath.Key(string(capacityMemory)), q.String(),
				fmt.Sprintf("more than the %d bytes of %s", info.MemoryBytes, r.Device)))
		default:
			dev.MemoryBytes = uint64(v)
		}
	}
	if q, found := r.ConsumedCapacity[capacityCores]; !found {
		errs = append(errs, field.Required(capPath.Key(string(capacityCores)), "every allocation of a vGPU device consumes cores"))
	} else {
		v, exact := q.AsInt64()
		if !exact || v < 0 || v > maxCores {
			errs = append(errs, field.Invalid(capPath.Key(string(capacityCores)), q.String(), fmt.Sprintf("must be a whole number from 0 to %d", maxCores)))
		} else {
			dev.Cores = v
		}
	}
	return dev, errs
}

// mergeCores adds two shares of one GPU's SM time. 0 means best effort; a
// claim with any best-effort share on a GPU stays unthrottled there rather
// than being held to the other share alone.
func mergeCores(a, b int64) int64 {
	if a == 0 || b == 0 {
		return 0
	}
	return min(a+b, maxCores)
}

// resolveSettings layers the opaque configs of this driver that apply to the
// request, in allocation order (class configs first, as the API orders them),
// and returns the settings, the resolved memoryLimit (nil when unset) and
// reclaimGracePeriodSeconds.
func (m *Manager) resolveSettings(configs []resourceapi.DeviceAllocationConfiguration, request string) (Settings, *resource.Quantity, int64, error) {
	var layers []api.Layer
	for _, i := range m.configsFor(configs, request) {
		c := configs[i]
		layers = append(layers, api.Layer{FromClass: c.Source == resourceapi.AllocationConfigSourceClass, Raw: c.Opaque.Parameters.Raw})
	}
	cfg, err := api.Resolve(layers)
	if err != nil {
		return Settings{}, nil, 0, err
	}
	grace := api.DefaultReclaimGracePeriodSeconds
	if cfg.ReclaimGracePeriodSeconds != nil {
		grace = *cfg.ReclaimGracePeriodSeconds
	}
	return Settings{
		ComputePolicy: cfg.ComputePolicy,
		Priority:      cfg.Priority,
		LogLevel:      cfg.LogLevel,
		Enforcement:   cfg.Enforcement,
	}, cfg.MemoryLimit, grace, nil
}

// configsFor returns the indices in configs of the opaque configs of this
// driver that apply to request, in order.
func (m *Manager) configsFor(configs []resourceapi.DeviceAllocationConfiguration, request string) []int {
	parent, _, _ := strings.Cut(request, "/")
	var out []int
	for i, c := range configs {
		if c.Opaque == nil || c.Opaque.Driver != m.opts.DriverName {
			continue
		}
		if len(c.Requests) > 0 && !slices.Contains(c.Requests, request) && !slices.Contains(c.Requests, parent) {
			continue
		}
		out = append(out, i)
	}
	return out
}

// limitSum adds up a claim's memory limits on one GPU.
type limitSum struct {
	bytes uint64
	// path is the memoryLimit of the last result there that set one; nil
	// when none did (then the sum is the guarantees', checked elsewhere).
	path *field.Path
}

// checkMemoryLimit checks the resolved memoryLimit of one allocation result
// against the allocated GPU, as admission did against the largest GPU
// published: the claim's limits on one GPU (one per result there, the
// consumed memory where none is set) may not add up to more than the GPU's
// memory. A limit below what the result consumed (the allocator rounded the
// request up past it) is no error: the guarantee is the floor of the limit.
// The error names the config whose memoryLimit won.
func (m *Manager) checkMemoryLimit(configs []resourceapi.DeviceAllocationConfiguration, r resourceapi.DeviceRequestAllocationResult,
	limit *resource.Quantity, info discovery.Info, consumed uint64, sums map[string]*limitSum) *field.Error {
	sum := sums[info.UUID]
	if sum == nil {
		sum = &limitSum{}
		sums[info.UUID] = sum
	}
	if limit == nil {
		sum.bytes = addSaturating(sum.bytes, consumed)
	} else {
		sum.path = field.NewPath("status", "allocation", "devices", "config")
		applying := m.configsFor(configs, r.Request)
		for _, i := range slices.Backward(applying) {
			if cfg, err := api.Decode(configs[i].Opaque.Parameters.Raw); err == nil && cfg.MemoryLimit != nil {
				sum.path = sum.path.Index(i).Child("opaque", "parameters", "memoryLimit")
				break
			}
		}
		v, _ := api.WholeBytes(*limit) // Resolve validated it: positive, whole
		sum.bytes = addSaturating(sum.bytes, max(uint64(v), consumed))
	}
	if sum.path != nil && sum.bytes > info.MemoryBytes {
		shown := "unset"
		if limit != nil {
			shown = limit.String()
		}
		return field.Invalid(sum.path, shown, fmt.Sprintf("request %q: the claim's memory limits on %s (%s) add up to %d bytes, more than its %d bytes",
			r.Request, r.Device, info.UUID, sum.bytes, info.MemoryBytes))
	}
	return nil
}

// ceilingOf is one result's ceiling: its memoryLimit, at least what it
// consumed (the guarantee is the floor of the limit).
func ceilingOf(limit *resource.Quantity, consumed uint64) uint64 {
	if limit == nil {
		return consumed
	}
	v, _ := api.WholeBytes(*limit) // Resolve validated it: positive, whole
	return max(uint64(v), consumed)
}

// addSaturating adds without wrapping: limits may be as large as int64 allows.
func addSaturating(a, b uint64) uint64 {
	if b > math.MaxUint64-a {
		return math.MaxUint64
	}
	return a + b
}

// orderGPUs sorts the claim's GPUs by PCI bus ID, the order CUDA numbers
// devices in with CUDA_DEVICE_ORDER=PCI_BUS_ID, and renumbers the devices.
func (m *Manager) orderGPUs(c *PreparedClaim, infos map[string]discovery.Info) {
	order := make([]int, len(c.GPUs))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		ia, ib := infos[c.GPUs[a].UUID], infos[c.GPUs[b].UUID]
		return cmp.Or(cmp.Compare(ia.PCIBusID, ib.PCIBusID), cmp.Compare(ia.UUID, ib.UUID),
			cmp.Compare(m.limitOrder(c.GPUs[a]), m.limitOrder(c.GPUs[b])))
	})
	newIndex := make([]int, len(order))
	gpus := make([]GPULimit, len(order))
	for newPos, old := range order {
		newIndex[old] = newPos
		gpus[newPos] = c.GPUs[old]
	}
	c.GPUs = gpus
	for i := range c.Devices {
		c.Devices[i].GPU = newIndex[c.Devices[i].GPU]
	}
}
