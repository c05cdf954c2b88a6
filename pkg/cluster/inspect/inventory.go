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
	"cmp"
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/names"
)

// DefaultClasses are the DeviceClasses the chart installs; classes an
// administrator adds count as vGPU classes when they select this driver.
var DefaultClasses = names.DeviceClasses()

// gpuKey names a published device: pool and device name.
type gpuKey struct{ pool, device string }

// gpu is one published GPU of the driver with what is granted on it.
type gpu struct {
	key      gpuKey
	node     string
	device   *resourceapi.Device
	uuid     string
	product  string
	index    int64
	memory   int64
	cores    int64
	granted  grant
	usedSum  int64
	usedSeen bool
	// mig is set on a MIG device; migEnabled on the whole-GPU device of a
	// GPU in MIG mode (migslices.go).
	mig        *migDev
	migEnabled bool
	// mps is set on the MPS device of a GPU (mps.go).
	mps bool
	// claims are the claims allocated this device, as namespace/name.
	claims []string
}

// grant sums the allocation results on one GPU.
type grant struct {
	memory, cores int64
	shares        int
	// holders are the claims holding the GPU whole (a result without a
	// share ID), as namespace/name.
	holders []string
}

// inventory is the snapshot indexed for the views.
type inventory struct {
	snap    *Snapshot
	classes resourcelisters.DeviceClassLister
	// ours holds the vGPU classes by name.
	ours sets.Set[string]
	gpus map[gpuKey]*gpu
	// ordered lists the GPUs by node, then by NVML index.
	ordered []*gpu
	// newest is the newest generation of each pool.
	newest map[string]int64
	// totals caches counterTotals by pool.
	totals map[string]map[string]map[string]int64
}

func newInventory(snap *Snapshot) *inventory {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for i := range snap.Classes {
		// Adding to a fresh indexer keyed by name cannot fail.
		_ = indexer.Add(&snap.Classes[i])
	}
	inv := &inventory{snap: snap, gpus: map[gpuKey]*gpu{}}
	inv.classes = resourcelisters.NewDeviceClassLister(indexer)
	inv.ours = sets.New(DefaultClasses...)
	for i := range snap.Classes {
		if selectsDriver(&snap.Classes[i]) {
			inv.ours.Insert(snap.Classes[i].Name)
		}
	}

	newest := map[string]int64{}
	for i := range snap.Slices {
		s := &snap.Slices[i]
		if s.Spec.Driver == names.DriverName {
			newest[s.Spec.Pool.Name] = max(newest[s.Spec.Pool.Name], s.Spec.Pool.Generation)
		}
	}
	inv.newest = newest
	for i := range snap.Slices {
		s := &snap.Slices[i]
		if s.Spec.Driver != names.DriverName || s.Spec.Pool.Generation != newest[s.Spec.Pool.Name] {
			continue
		}
		for j := range s.Spec.Devices {
			d := &s.Spec.Devices[j]
			g := &gpu{key: gpuKey{s.Spec.Pool.Name, d.Name}, node: ptr.Deref(s.Spec.NodeName, s.Spec.Pool.Name), device: d, index: -1}
			g.uuid = stringAttr(d, names.AttrUUID)
			g.product = stringAttr(d, names.AttrProductName)
			if a, ok := d.Attributes[names.AttrIndex]; ok && a.IntValue != nil {
				g.index = *a.IntValue
			}
			if c, ok := d.Capacity[names.CapacityMemory]; ok {
				g.memory = c.Value.Value()
			}
			if c, ok := d.Capacity[names.CapacityCores]; ok {
				g.cores = c.Value.Value()
			}
			readMIG(g)
			readMPS(g)
			inv.gpus[g.key] = g
			inv.ordered = append(inv.ordered, g)
		}
	}
	slices.SortFunc(inv.ordered, func(a, b *gpu) int {
		return cmp.Or(cmp.Compare(a.node, b.node), cmp.Compare(a.index, b.index), cmp.Compare(a.key.device, b.key.device))
	})

	for i := range snap.Claims {
		c := &snap.Claims[i]
		if c.Status.Allocation != nil {
			for _, r := range c.Status.Allocation.Devices.Results {
				g, ok := inv.gpus[gpuKey{r.Pool, r.Device}]
				if r.Driver != names.DriverName || !ok || ptr.Deref(r.AdminAccess, false) {
					continue
				}
				g.granted.shares++
				if name := c.Namespace + "/" + c.Name; !slices.Contains(g.claims, name) {
					g.claims = append(g.claims, name)
				}
				mem, cores := consumed(r, g)
				g.granted.memory += mem
				g.granted.cores += cores
				if r.ShareID == nil {
					g.granted.holders = append(g.granted.holders, c.Namespace+"/"+c.Name)
				}
			}
		}
		for _, d := range c.Status.Devices {
			g, ok := inv.gpus[gpuKey{d.Pool, d.Device}]
			if d.Driver != names.DriverName || !ok {
				continue
			}
			if data := decodeData(d.Data); data.MemoryUsed != nil {
				g.usedSum += data.MemoryUsed.Value()
				g.usedSeen = true
			}
		}
	}
	return inv
}

// consumed is what an allocation result takes of a GPU: its consumed
// capacity, or the whole GPU for a result without one.
func consumed(r resourceapi.DeviceRequestAllocationResult, g *gpu) (memory, cores int64) {
	if r.ConsumedCapacity == nil {
		return g.memory, g.cores
	}
	if q, ok := r.ConsumedCapacity[names.CapacityMemory]; ok {
		memory = q.Value()
	}
	if q, ok := r.ConsumedCapacity[names.CapacityCores]; ok {
		cores = q.Value()
	}
	return memory, cores
}

// deviceData is what the kubelet plugin's monitor writes into a claim's
// status.devices[].data (docs/metrics.md). Fields are pointers: a usage
// the plugin could not read is absent, and older plugins write fewer.
type deviceData struct {
	UUID          string             `json:"uuid"`
	MemoryUsed    *resource.Quantity `json:"memoryUsed,omitempty"`
	MemoryPeak    *resource.Quantity `json:"memoryPeak,omitempty"`
	MemoryBurst   *resource.Quantity `json:"memoryBurst,omitempty"`
	Refusals      *int64             `json:"memoryRefusals,omitempty"`
	SMUtilization *int64             `json:"smUtilization,omitempty"`
}

// decodeData reads status.devices data; data this version does not
// understand reads as no usage rather than failing the whole view.
func decodeData(raw *runtime.RawExtension) deviceData {
	var out deviceData
	if raw == nil || len(raw.Raw) == 0 {
		return out
	}
	if json.Unmarshal(raw.Raw, &out) != nil {
		return deviceData{}
	}
	return out
}

func stringAttr(d *resourceapi.Device, name resourceapi.QualifiedName) string {
	if a, ok := d.Attributes[name]; ok && a.StringValue != nil {
		return *a.StringValue
	}
	return ""
}

// isOurs reports whether a claim asks for this driver's GPUs in some
// request (or got them).
func (inv *inventory) isOurs(c *resourceapi.ResourceClaim) bool {
	if c.Status.Allocation != nil {
		for _, r := range c.Status.Allocation.Devices.Results {
			if r.Driver == names.DriverName {
				return true
			}
		}
	}
	for _, r := range c.Spec.Devices.Requests {
		if r.Exactly != nil && inv.isOurClass(r.Exactly.DeviceClassName) {
			return true
		}
		for _, s := range r.FirstAvailable {
			if inv.isOurClass(s.DeviceClassName) {
				return true
			}
		}
	}
	return false
}

// gpuLess orders device names the way people count: gpu-2 before gpu-10.
// It allocates nothing: sorting ten thousand claims calls it a hundred
// thousand times, most with a name that is not gpu-<n> (a pending claim
// has none), for which strconv.Atoi would allocate its error.
func gpuLess(a, b string) int {
	ai, aok := gpuNumber(a)
	bi, bok := gpuNumber(b)
	if aok && bok {
		return cmp.Compare(ai, bi)
	}
	return cmp.Compare(a, b)
}

// gpuNumber is n of a device name gpu-<n> (decimal digits only).
func gpuNumber(name string) (int, bool) {
	digits, ok := strings.CutPrefix(name, "gpu-")
	if !ok || digits == "" || len(digits) > 9 {
		return 0, false
	}
	n := 0
	for _, c := range []byte(digits) {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// isOurClass reports whether a DeviceClass allocates this driver's GPUs.
func (inv *inventory) isOurClass(name string) bool { return inv.ours.Has(name) }

// selectsDriver is the dra-controller's rule for classes an administrator
// created (docs/controller.md): the class requires this driver in a
// selector or carries configuration for it.
func selectsDriver(c *resourceapi.DeviceClass) bool {
	driverSelector := "device.driver == " + strconv.Quote(names.DriverName)
	for _, s := range c.Spec.Selectors {
		if s.CEL != nil && strings.Contains(s.CEL.Expression, driverSelector) {
			return true
		}
	}
	for _, cfg := range c.Spec.Config {
		if cfg.Opaque != nil && cfg.Opaque.Driver == names.DriverName {
			return true
		}
	}
	return false
}
