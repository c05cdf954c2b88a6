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
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"

	api "github.com/vgpu-dra/vgpu-dra-driver/api/vgpu.dra.dev/v1alpha1"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/names"
)

// Health values of a GPU row.
const (
	HealthHealthy      = "Healthy"
	HealthUnhealthy    = "Unhealthy" // a taint of this driver (vgpu.dra.dev/...) says the GPU is broken
	HealthTainted      = "Tainted"   // someone else's taint
	HealthNodeNotReady = "NodeNotReady"
)

// GPURow is one GPU of `kubectl vgpu nodes`. Memory is in bytes, cores in
// percent of the GPU's SM time. MemoryUsed is nil when no claim on the GPU
// reports its use.
type GPURow struct {
	Node            string   `json:"node"`
	GPU             string   `json:"gpu"`
	UUID            string   `json:"uuid"`
	Product         string   `json:"product"`
	MemoryCapacity  int64    `json:"memoryCapacity"`
	MemoryAllocated int64    `json:"memoryAllocated"`
	MemoryUsed      *int64   `json:"memoryUsed,omitempty"`
	CoresCapacity   int64    `json:"coresCapacity"`
	CoresAllocated  int64    `json:"coresAllocated"`
	Claims          int      `json:"claims"`
	Taints          []string `json:"taints,omitempty"`
	Health          string   `json:"health"`
	// MIG is MIGModeOn for a GPU in MIG mode, empty otherwise; Instances
	// are its admin's instances and those allocated to claims.
	MIG       string           `json:"mig,omitempty"`
	Instances []MIGInstanceRow `json:"instances,omitempty"`
	// Mode is the GPU's sharing mode, from which of its devices hold
	// allocations: ModeTimeSliced (its whole-GPU device: time-sliced
	// slices or the whole GPU), ModeMPS (its MPS device), ModeMIG (MIG
	// instances) or ModeFree (none).
	Mode string `json:"mode"`
	// MPSDevice is the GPU's MPS device (gpu-<i>-mps), folded into this
	// row; empty when the GPU publishes none.
	MPSDevice string `json:"mpsDevice,omitempty"`
}

// Nodes returns one row per published GPU, sorted by node and GPU index.
func Nodes(snap *Snapshot) []GPURow {
	inv := newInventory(snap)
	ready := map[string]bool{}
	for _, n := range snap.Nodes {
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				ready[n.Name] = c.Status == corev1.ConditionTrue
			}
		}
	}
	rows := make([]GPURow, 0, len(inv.ordered))
	for _, g := range inv.ordered {
		if g.mig != nil || g.mps {
			// Folded into its GPU's row below.
			continue
		}
		r := GPURow{
			Node: g.node, GPU: g.key.device, UUID: g.uuid, Product: g.product,
			MemoryCapacity: g.memory, MemoryAllocated: g.granted.memory,
			CoresCapacity: g.cores, CoresAllocated: g.granted.cores,
			Claims: g.granted.shares, Health: HealthHealthy,
		}
		if g.usedSeen {
			r.MemoryUsed = &g.usedSum
		}
		for _, t := range g.device.Taints {
			r.Taints = append(r.Taints, taintString(t))
			if strings.HasPrefix(t.Key, names.DriverName+"/") {
				r.Health = HealthUnhealthy
			} else if r.Health == HealthHealthy && t.Effect != resourceapi.DeviceTaintEffectNone {
				r.Health = HealthTainted
			}
		}
		if ok, known := ready[g.node]; known && !ok {
			r.Health = HealthNodeNotReady
		}
		if g.migEnabled {
			r.MIG = MIGModeOn
		}
		if g.granted.shares > 0 {
			r.Mode = ModeTimeSliced
		}
		rows = append(rows, r)
	}
	rows = migRows(inv, mpsRows(inv, rows))
	for i := range rows {
		if rows[i].Mode == "" {
			rows[i].Mode = ModeFree
		}
	}
	return rows
}

func taintString(t resourceapi.DeviceTaint) string {
	s := t.Key
	if t.Value != "" {
		s += "=" + t.Value
	}
	return s + ":" + string(t.Effect)
}

// ClaimRow is one claim on one GPU of `kubectl vgpu claims`: a claim with
// two GPUs has two rows, a claim not allocated yet one row without node
// and GPU. Usage fields are nil when the plugin has not reported them.
type ClaimRow struct {
	Namespace string   `json:"namespace"`
	Claim     string   `json:"claim"`
	Pods      []string `json:"pods,omitempty"`
	State     string   `json:"state"`
	Node      string   `json:"node,omitempty"`
	GPU       string   `json:"gpu,omitempty"`
	UUID      string   `json:"uuid,omitempty"`
	// MemoryGranted is the claim's guarantee on the GPU: the memory the
	// scheduler booked for it (its consumed capacity).
	MemoryGranted int64 `json:"memoryGranted"`
	// MemoryLimit is the most the claim may use on the GPU: its
	// memoryLimit (VGPUConfig) where that is above the guarantee, else the
	// guarantee.
	MemoryLimit  int64 `json:"memoryLimit"`
	CoresGranted int64 `json:"coresGranted"`
	// MemoryBurst is the burst the node granted the claim on the GPU above
	// its guarantee (its host/burst grant, status.devices data
	// memoryBurst); nil when the node does not report it.
	MemoryBurst *int64 `json:"memoryBurst,omitempty"`
	MemoryUsed  *int64 `json:"memoryUsed,omitempty"`
	MemoryPeak  *int64 `json:"memoryPeak,omitempty"`
	Refusals    *int64 `json:"refusals,omitempty"`
	// SMUtilization is in percent of the GPU's SM time.
	SMUtilization *int64 `json:"smUtilization,omitempty"`
}

// Claim states.
const (
	StateAllocated = "Allocated"
	StatePending   = "Pending"
)

// Claims returns the vGPU claims of a namespace (all namespaces when
// namespace is empty), sorted by namespace, claim and GPU.
func Claims(snap *Snapshot, namespace string) []ClaimRow {
	inv := newInventory(snap)
	var rows []ClaimRow
	for i := range snap.Claims {
		c := &snap.Claims[i]
		if (namespace != "" && c.Namespace != namespace) || !inv.isOurs(c) {
			continue
		}
		base := ClaimRow{Namespace: c.Namespace, Claim: c.Name, Pods: podsOf(c), State: StatePending}
		if c.Status.Allocation == nil {
			rows = append(rows, base)
			continue
		}
		usage := map[gpuKey]deviceData{}
		for _, d := range c.Status.Devices {
			if d.Driver == names.DriverName {
				usage[gpuKey{d.Pool, d.Device}] = decodeData(d.Data)
			}
		}
		for _, res := range c.Status.Allocation.Devices.Results {
			if res.Driver != names.DriverName {
				continue
			}
			r := base
			r.State = StateAllocated
			key := gpuKey{res.Pool, res.Device}
			r.Node, r.GPU = res.Pool, res.Device
			if g, ok := inv.gpus[key]; ok {
				r.Node, r.UUID = g.node, g.uuid
				r.MemoryGranted, r.CoresGranted = consumed(res, g)
			} else if res.ConsumedCapacity != nil {
				r.MemoryGranted, r.CoresGranted = consumed(res, &gpu{})
			}
			r.MemoryLimit = r.MemoryGranted
			if limit := memoryLimit(c.Status.Allocation.Devices.Config, res.Request); limit > r.MemoryLimit {
				r.MemoryLimit = limit
			}
			if u, ok := usage[key]; ok {
				if u.MemoryUsed != nil {
					r.MemoryUsed = ptrTo(u.MemoryUsed.Value())
				}
				if u.MemoryPeak != nil {
					r.MemoryPeak = ptrTo(u.MemoryPeak.Value())
				}
				if u.MemoryBurst != nil {
					r.MemoryBurst = ptrTo(u.MemoryBurst.Value())
				}
				r.Refusals, r.SMUtilization = u.Refusals, u.SMUtilization
			}
			rows = append(rows, r)
		}
	}
	slices.SortFunc(rows, func(a, b ClaimRow) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Claim, b.Claim),
			cmp.Compare(a.Node, b.Node), gpuLess(a.GPU, b.GPU))
	})
	return rows
}

// podsOf names the pods a claim is reserved for, else the pod that owns it
// (a claim from a template before its pod is scheduled).
func podsOf(c *resourceapi.ResourceClaim) []string {
	var pods []string
	for _, r := range c.Status.ReservedFor {
		if r.Resource == "pods" && r.APIGroup == "" {
			pods = append(pods, r.Name)
		}
	}
	if len(pods) == 0 {
		for _, o := range c.OwnerReferences {
			if o.Kind == "Pod" && o.APIVersion == "v1" {
				pods = append(pods, o.Name)
			}
		}
	}
	slices.Sort(pods)
	return pods
}

func ptrTo[T any](v T) *T { return &v }

// String is a short description for logs and errors.
func (r GPURow) String() string { return fmt.Sprintf("%s/%s", r.Node, r.GPU) }

// memoryLimit is the memoryLimit of the opaque configs of this driver that
// apply to an allocation result's request, resolved as prepare resolves
// them (later configs win); 0 when none sets one or they do not resolve
// (prepare then fails the claim, and the guarantee is all it has).
func memoryLimit(configs []resourceapi.DeviceAllocationConfiguration, request string) int64 {
	parent, _, _ := strings.Cut(request, "/")
	var layers []api.Layer
	for _, c := range configs {
		if c.Opaque == nil || c.Opaque.Driver != names.DriverName {
			continue
		}
		if len(c.Requests) > 0 && !slices.Contains(c.Requests, request) && !slices.Contains(c.Requests, parent) {
			continue
		}
		layers = append(layers, api.Layer{FromClass: c.Source == resourceapi.AllocationConfigSourceClass, Raw: c.Opaque.Parameters.Raw})
	}
	if len(layers) == 0 {
		return 0
	}
	cfg, err := api.Resolve(layers)
	if err != nil || cfg.MemoryLimit == nil {
		return 0
	}
	return cfg.MemoryLimit.Value()
}
