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
	"cmp"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/names"
)

// Features are those a 1.37 kube-scheduler runs with by default, so that
// a claim means the same to this allocator as to the scheduler.
var Features = structured.Features{
	AdminAccess:          true,
	ConsumableCapacity:   true,
	DeviceTaints:         true,
	PartitionableDevices: true,
	PrioritizedList:      true,
}

// topologyLookahead bounds how many further nodes are tried, after a
// multi-GPU claim first fits without sharing a PCIe root, in search of a
// node where it does. It keeps the policy order mostly intact and the cost
// bounded.
const topologyLookahead = 8

// Topology says how close the GPUs of a multi-GPU decision are.
type Topology int

const (
	// SamePCIeRoot: every multi-GPU claim's GPUs share a PCIe root complex.
	SamePCIeRoot Topology = iota
	// SameNUMANode: they share a NUMA node.
	SameNUMANode
	// AnyTopology: no locality could be kept (or only one GPU is needed).
	AnyTopology
)

func (t Topology) String() string {
	switch t {
	case SamePCIeRoot:
		return "same PCIe root"
	case SameNUMANode:
		return "same NUMA node"
	default:
		return "any"
	}
}

// matchAttribute is the constraint that keeps a claim within a topology
// level.
func (t Topology) matchAttribute() resourceapi.FullyQualifiedName {
	switch t {
	case SamePCIeRoot:
		return resourceapi.FullyQualifiedName(names.AttrPCIeRoot)
	case SameNUMANode:
		return resourceapi.FullyQualifiedName(names.DriverName + "/" + string(names.AttrNUMANode))
	default:
		return ""
	}
}

// NodeFitter decides whether a pod can run on a node apart from devices.
// It returns a *FitError when the node does not fit, another error when it
// cannot decide.
type NodeFitter interface {
	Fits(logger klog.Logger, pod *corev1.Pod, node *corev1.Node) error
}

// Config configures an Allocator.
type Config struct {
	DriverName string
	Classes    structured.DeviceClassLister
	// IsOurs tells this driver's DeviceClasses.
	IsOurs func(class string) bool
	// Fit may be nil: then only devices decide.
	Fit NodeFitter
}

// Allocator decides where claims go. One Allocator serves one decider at a
// time (the elected leader); its methods are safe for concurrent use.
type Allocator struct {
	cfg      Config
	celCache *cel.Cache

	mu      sync.Mutex
	inv     *inventory
	tracker *allocationTracker
}

// New returns an Allocator without slices or allocations.
func New(cfg Config) *Allocator {
	a := &Allocator{
		cfg:      cfg,
		celCache: cel.NewCache(100, cel.Features{EnableConsumableCapacity: Features.ConsumableCapacity}),
		inv:      newInventory(cfg.DriverName, nil),
	}
	a.tracker = newAllocationTracker(a.deviceChanged)
	return a
}

// SetSlices replaces the published devices.
func (a *Allocator) SetSlices(all []*resourceapi.ResourceSlice) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.inv = newInventory(a.cfg.DriverName, all)
	for _, n := range a.inv.nodes {
		for _, g := range n.gpus {
			g.refresh(a.tracker)
		}
		n.refresh()
	}
}

// Observe records a claim as the API server has it.
func (a *Allocator) Observe(claim *resourceapi.ResourceClaim) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.tracker.observe(claim)
}

// Forget drops a claim's allocation: the claim is gone, released, or its
// decided allocation could not be written.
func (a *Allocator) Forget(uid types.UID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.tracker.forget(uid)
}

// Assumed reports whether the claim has an allocation decided here that the
// API server's answer has not confirmed yet.
func (a *Allocator) Assumed(uid types.UID) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.tracker.assumed.Has(uid)
}

// deviceChanged refreshes the scores of a GPU and its node; called by the
// allocation tracker with a.mu held.
func (a *Allocator) deviceChanged(id structured.DeviceID) {
	g, ok := a.inv.gpus[id]
	if !ok {
		return
	}
	g.refresh(a.tracker)
	a.inv.nodes[g.node].refresh()
}

// Request is one pod's claims to allocate together.
type Request struct {
	Pod *corev1.Pod
	// Claims are the pod's unallocated claims.
	Claims []*resourceapi.ResourceClaim
	// Nodes are the candidates (already restricted to where the pod's
	// allocated claims are available).
	Nodes    []*corev1.Node
	Policies Policies
}

// Decision is where a Request's claims go.
type Decision struct {
	Node string
	// Allocations match Request.Claims by index.
	Allocations []*resourceapi.AllocationResult
	Topology    Topology
	// NodesTried counts the structured allocator's runs over nodes.
	NodesTried int
}

// UnschedulableError says that no candidate node can take the claims.
type UnschedulableError struct {
	Nodes int
	// Reasons counts nodes per reason.
	Reasons map[string]int
}

func (e *UnschedulableError) Error() string {
	reasons := slices.Sorted(maps.Keys(e.Reasons))
	parts := make([]string, 0, len(reasons))
	for _, r := range reasons {
		parts = append(parts, fmt.Sprintf("%d %s", e.Reasons[r], r))
	}
	return fmt.Sprintf("0/%d nodes can take the claims: %s", e.Nodes, strings.Join(parts, ", "))
}

// Allocate chooses a node and devices for the request's claims and assumes
// the result, so the next decision sees the devices as used. The caller
// must Forget the claims whose allocation it then fails to write. When no
// node fits it returns an *UnschedulableError.
func (a *Allocator) Allocate(ctx context.Context, req Request) (*Decision, error) {
	logger := klog.FromContext(ctx)
	a.mu.Lock()
	defer a.mu.Unlock()

	dem := demandOf(req.Claims, a.cfg.IsOurs)
	unfit := &UnschedulableError{Nodes: len(req.Nodes), Reasons: map[string]int{}}
	cands := make(candidates, 0, len(req.Nodes))
	for _, node := range req.Nodes {
		n, ok := a.inv.nodes[node.Name]
		switch {
		case !ok && len(a.inv.shared) == 0:
			unfit.Reasons["node(s) publish no devices"]++
			continue
		case !ok:
			n = &nodeInventory{name: node.Name, slices: a.inv.shared}
		case dem.bounded && !n.mayFit(dem):
			unfit.Reasons["node(s) lack free GPU memory or cores"]++
			continue
		}
		cands = append(cands, candidate{node: node, inv: n, spread: req.Policies.Node == Spread})
	}
	heap.Init(&cands)

	var best *Decision
	tried := 0
	// remaining counts the nodes still looked at once something fits; -1
	// until then.
	remaining := -1
	for cands.Len() > 0 && remaining != 0 {
		c := heap.Pop(&cands).(candidate)
		if remaining > 0 {
			remaining--
		}
		if a.cfg.Fit != nil {
			if err := a.cfg.Fit.Fits(logger, req.Pod, c.node); err != nil {
				if !IsFitError(err) {
					return nil, err
				}
				unfit.Reasons[plural(err.Error())]++
				continue
			}
		}
		results, topo, runs, err := a.tryNode(ctx, c, req, dem)
		tried += runs
		if err != nil {
			return nil, err
		}
		if results == nil {
			unfit.Reasons["node(s) cannot allocate the claims' devices"]++
			continue
		}
		if best == nil || topo < best.Topology {
			best = &Decision{Node: c.node.Name, Allocations: results, Topology: topo}
		}
		if best.Topology == SamePCIeRoot || dem.devices <= 1 {
			break
		}
		if remaining < 0 {
			remaining = topologyLookahead
		}
	}
	if best == nil {
		return nil, unfit
	}
	best.NodesTried = tried
	for i, claim := range req.Claims {
		a.tracker.assume(claim.UID, best.Allocations[i])
	}
	logger.V(4).Info("Allocated by policy", "pod", klog.KObj(req.Pod), "node", best.Node,
		"nodePolicy", req.Policies.Node, "gpuPolicy", req.Policies.GPU, "topology", best.Topology, "nodesTried", best.NodesTried)
	return best, nil
}

// tryNode runs the structured allocator on one node, with the node's GPUs
// in policy order and, for multi-GPU claims, first within one PCIe root,
// then within one NUMA node. It returns nil results when nothing fits.
func (a *Allocator) tryNode(ctx context.Context, c candidate, req Request, dem demand) ([]*resourceapi.AllocationResult, Topology, int, error) {
	ctx = klog.NewContext(ctx, klog.LoggerWithValues(klog.FromContext(ctx), "node", c.node.Name))
	alloc, err := structured.NewAllocator(ctx, Features, a.tracker.state, a.cfg.Classes, orderedSlices(c.inv, a.cfg.DriverName, req.Policies.GPU), a.celCache)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("structured allocator for node %s: %w", c.node.Name, err)
	}
	levels := []Topology{AnyTopology}
	if dem.devices > 1 {
		switch {
		case c.inv.sharedPCIeRoot && c.inv.sharedNUMA:
			levels = []Topology{SamePCIeRoot, SameNUMANode, AnyTopology}
		case c.inv.sharedPCIeRoot:
			levels = []Topology{SamePCIeRoot, AnyTopology}
		case c.inv.sharedNUMA:
			levels = []Topology{SameNUMANode, AnyTopology}
		}
	}
	for i, level := range levels {
		claims := req.Claims
		if level != AnyTopology {
			claims = a.withTopology(req.Claims, level)
		}
		results, err := alloc.Allocate(ctx, c.node, claims)
		if errors.Is(err, structured.ErrFailedAllocationOnNode) {
			klog.FromContext(ctx).V(5).Info("Claims do not fit", "topology", level, "reason", err)
			continue
		}
		if err != nil {
			return nil, 0, i + 1, fmt.Errorf("allocate on node %s: %w", c.node.Name, err)
		}
		if results != nil {
			out := make([]*resourceapi.AllocationResult, len(results))
			for j := range results {
				out[j] = &results[j]
			}
			if dem.devices <= 1 {
				level = AnyTopology
			}
			return out, level, i + 1, nil
		}
	}
	return nil, 0, len(levels), nil
}

// withTopology returns shallow copies of the claims whose requests for this
// driver need several devices, each with a constraint that those devices
// share the topology attribute. Only the copies' constraint lists differ.
func (a *Allocator) withTopology(claims []*resourceapi.ResourceClaim, level Topology) []*resourceapi.ResourceClaim {
	out := make([]*resourceapi.ResourceClaim, len(claims))
	for i, claim := range claims {
		out[i] = claim
		var names []string
		count := 0
		for _, r := range claim.Spec.Devices.Requests {
			ours := true
			n := 0
			for _, alt := range alternatives(&r) {
				ours = ours && a.cfg.IsOurs(alt.class)
				n = max(n, alt.count)
				if alt.all {
					n = 2
				}
			}
			if ours {
				names = append(names, r.Name)
				count += n
			}
		}
		if count < 2 {
			continue
		}
		cp := *claim
		cp.Spec.Devices.Constraints = append(slices.Clip(claim.Spec.Devices.Constraints), resourceapi.DeviceConstraint{
			Requests:       names,
			MatchAttribute: ptr.To(level.matchAttribute()),
		})
		out[i] = &cp
	}
	return out
}

// orderedSlices returns the node's slices with this driver's devices
// reordered by the GPU policy: the structured allocator takes the first
// device that fits, so the order is the GPU-level score. Slices are copied,
// never modified: they belong to the informer cache.
func orderedSlices(n *nodeInventory, driverName string, policy Policy) []*resourceapi.ResourceSlice {
	if len(n.gpus) == 0 {
		return n.slices
	}
	out := make([]*resourceapi.ResourceSlice, len(n.slices))
	copy(out, n.slices)
	bySlice := map[*resourceapi.ResourceSlice][]*gpuState{}
	for _, g := range n.gpus {
		bySlice[g.slice] = append(bySlice[g.slice], g)
	}
	for i, s := range out {
		gpus, ok := bySlice[s]
		if !ok || s.Spec.Driver != driverName {
			continue
		}
		slices.SortStableFunc(gpus, func(x, y *gpuState) int {
			if policy == Spread {
				return cmp.Compare(x.fill, y.fill)
			}
			return cmp.Compare(y.fill, x.fill)
		})
		cp := *s
		cp.Spec.Devices = make([]resourceapi.Device, 0, len(s.Spec.Devices))
		for _, g := range gpus {
			cp.Spec.Devices = append(cp.Spec.Devices, s.Spec.Devices[g.index])
		}
		// Devices of an older generation are not in the inventory; keep
		// them, after the scored ones, so the slice stays whole.
		if len(gpus) != len(s.Spec.Devices) {
			seen := make([]bool, len(s.Spec.Devices))
			for _, g := range gpus {
				seen[g.index] = true
			}
			for j, d := range s.Spec.Devices {
				if !seen[j] {
					cp.Spec.Devices = append(cp.Spec.Devices, d)
				}
			}
		}
		out[i] = &cp
	}
	return out
}

// candidate is a node in the policy's order: binpack pops the fullest node
// first, spread the emptiest; ties go by name so decisions are repeatable.
type candidate struct {
	node   *corev1.Node
	inv    *nodeInventory
	spread bool
}

type candidates []candidate

func (h candidates) Len() int { return len(h) }
func (h candidates) Less(i, j int) bool {
	if h[i].inv.fill != h[j].inv.fill {
		if h[i].spread {
			return h[i].inv.fill < h[j].inv.fill
		}
		return h[i].inv.fill > h[j].inv.fill
	}
	return h[i].node.Name < h[j].node.Name
}
func (h candidates) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *candidates) Push(x any)   { *h = append(*h, x.(candidate)) }
func (h *candidates) Pop() any {
	old := *h
	c := old[len(old)-1]
	*h = old[:len(old)-1]
	return c
}

// plural turns a node's fit reason into the form counted over nodes.
func plural(reason string) string {
	return strings.Replace(reason, "node ", "node(s) ", 1)
}
