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

package webview

import (
	"cmp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/cluster/inspect"
)

// Model is the whole fleet at one moment, before filtering.
type Model struct {
	Nodes   []Node
	Pending []PendingPod
	// Namespaces are those holding a claim or a Pending pod, sorted: the
	// choices of the namespace filter.
	Namespaces []string
	// Listing is set while the claims and pods are being listed: the
	// GPUs are all there, what is booked on them and waiting is not yet.
	Listing bool
}

// Node is one node's GPUs.
type Node struct {
	Name string
	GPUs []GPU
	// MemoryCapacity, MemoryAllocated and MemoryUsed sum the node's GPUs.
	MemoryCapacity, MemoryAllocated, MemoryUsed int64
	Claims                                      int
}

// GPU is one GPU with what is booked on it: the row of `kubectl vgpu
// nodes` and the rows of `kubectl vgpu claims` on it.
type GPU struct {
	inspect.GPURow
	// Mode is how the GPU is shared now: ModeFree, ModeTimeSliced,
	// ModeMPS or ModeMIG.
	Mode string
	// Claims are the claims on the whole-GPU device (software slices).
	Claims []inspect.ClaimRow
	// MPSClaims are the claims on the GPU's MPS device (gpu-<i>-mps,
	// published with the plugin's --mps); inspect.Nodes counts its
	// bookings in the GPU's figures.
	MPSClaims []inspect.ClaimRow
	// Instances are the MIG instances (admin's and allocated) with the
	// claims inside each.
	Instances []Instance
	// MemoryBurst sums the burst the node granted the claims above their
	// guarantee.
	MemoryBurst int64
	// MIGSlices is the number of memory slices the instance strip shows:
	// 8 (A100, H100, H200) or more where a placement reaches further.
	MIGSlices int64
}

// Instance is a MIG instance and the claims inside it.
type Instance struct {
	inspect.MIGInstanceRow
	ClaimRows []inspect.ClaimRow
}

// PendingPod is an unscheduled pod that asks for this driver's devices.
type PendingPod struct {
	Namespace, Name string
	// Claims are the pod's claims of this driver that are not allocated.
	Claims []string
	// Why is the explanation of `kubectl vgpu why`; nil until it has
	// been worked out (it runs the allocator over the whole cluster).
	Why *inspect.Explanation
	// WhyError says why no explanation could be made.
	WhyError string
}

// The modes of a GPU: no claim on it; claims sharing it by time slices
// (or holding it whole); claims on its MPS device (time-sliced ones are
// then kept off it by the counter both devices consume); MIG mode.
const (
	ModeFree       = "free"
	ModeTimeSliced = "time-sliced"
	ModeMPS        = "MPS"
	ModeMIG        = "MIG"
)

// deviceKey names a published device on a node.
type deviceKey struct{ node, device string }

// migSlicesMin is the memory slices of the MIG GPUs there are (A100, H100,
// H200: placements 0 to 7).
const migSlicesMin = 8

// Build makes the model from a snapshot holding nodes and pods; the Why of
// the Pending pods is left to explain.
func Build(snap *inspect.Snapshot) *Model {
	gpuRows := inspect.Nodes(snap)
	claimRows := inspect.Claims(snap, "")
	type key = deviceKey
	byDevice := map[key][]inspect.ClaimRow{}
	namespaces := map[string]bool{}
	pendingClaims := map[string]bool{} // namespace/claim
	for _, c := range claimRows {
		namespaces[c.Namespace] = true
		if c.State == inspect.StatePending {
			pendingClaims[c.Namespace+"/"+c.Claim] = true
			continue
		}
		byDevice[key{c.Node, c.GPU}] = append(byDevice[key{c.Node, c.GPU}], c)
	}

	m := &Model{}
	for _, r := range gpuRows {
		g := GPU{GPURow: r, Claims: byDevice[key{r.Node, r.GPU}], MIGSlices: migSlicesMin}
		if r.MPSDevice != "" {
			// inspect.Nodes folds the MPS device's bookings into the row.
			g.MPSClaims = byDevice[key{r.Node, r.MPSDevice}]
		}
		for _, in := range r.Instances {
			g.Instances = append(g.Instances, Instance{MIGInstanceRow: in, ClaimRows: byDevice[key{r.Node, in.Device}]})
			g.MIGSlices = max(g.MIGSlices, in.PlacementStart+in.PlacementSize)
		}
		for _, c := range slices.Concat(g.Claims, g.MPSClaims) {
			g.MemoryBurst += ptr.Deref(c.MemoryBurst, 0)
		}
		g.Mode = modeOf(&g)
		r = g.GPURow
		if len(m.Nodes) == 0 || m.Nodes[len(m.Nodes)-1].Name != r.Node {
			m.Nodes = append(m.Nodes, Node{Name: r.Node})
		}
		n := &m.Nodes[len(m.Nodes)-1]
		n.GPUs = append(n.GPUs, g)
		n.MemoryCapacity += r.MemoryCapacity
		n.MemoryAllocated += r.MemoryAllocated
		n.MemoryUsed += ptr.Deref(r.MemoryUsed, 0)
		n.Claims += r.Claims
	}

	for _, p := range snap.Pods {
		if !waiting(p) {
			continue
		}
		claims := waitingClaims(p, pendingClaims, snap)
		if len(claims) == 0 {
			continue
		}
		namespaces[p.Namespace] = true
		m.Pending = append(m.Pending, PendingPod{Namespace: p.Namespace, Name: p.Name, Claims: claims})
	}
	slices.SortFunc(m.Pending, func(a, b PendingPod) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	for ns := range namespaces {
		m.Namespaces = append(m.Namespaces, ns)
	}
	slices.Sort(m.Namespaces)
	return m
}

// modeOf says how a GPU is shared now.
func modeOf(g *GPU) string {
	switch {
	case g.MIG != "":
		return ModeMIG
	case len(g.MPSClaims) > 0:
		return ModeMPS
	case len(g.Claims) > 0:
		return ModeTimeSliced
	default:
		return ModeFree
	}
}

// waiting reports whether a pod waits for the scheduler: Pending, not
// bound, not being deleted, and with resource claims.
func waiting(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodPending && p.Spec.NodeName == "" && p.DeletionTimestamp == nil &&
		len(p.Spec.ResourceClaims) > 0
}

// waitingClaims names the pod's claims of this driver that are not
// allocated: its claims that are Pending, and those the resource-claim
// controller has not made yet from a template asking for this driver's
// classes ("from template NAME").
func waitingClaims(p *corev1.Pod, pending map[string]bool, snap *inspect.Snapshot) []string {
	var out []string
	for _, rc := range p.Spec.ResourceClaims {
		name := ptr.Deref(rc.ResourceClaimName, "")
		for _, st := range p.Status.ResourceClaimStatuses {
			if name == "" && st.Name == rc.Name {
				name = ptr.Deref(st.ResourceClaimName, "")
			}
		}
		if name != "" {
			if pending[p.Namespace+"/"+name] {
				out = append(out, name)
			}
			continue
		}
		if rc.ResourceClaimTemplateName != nil && ourTemplate(snap, p.Namespace, *rc.ResourceClaimTemplateName) {
			out = append(out, "from template "+*rc.ResourceClaimTemplateName)
		}
	}
	return out
}

// ourTemplate reports whether a ResourceClaimTemplate asks for this
// driver's DeviceClasses.
func ourTemplate(snap *inspect.Snapshot, namespace, name string) bool {
	for i := range snap.Templates {
		t := &snap.Templates[i]
		if t.Namespace != namespace || t.Name != name {
			continue
		}
		for _, r := range t.Spec.Spec.Devices.Requests {
			if r.Exactly != nil && slices.Contains(inspect.DefaultClasses, r.Exactly.DeviceClassName) {
				return true
			}
			for _, s := range r.FirstAvailable {
				if slices.Contains(inspect.DefaultClasses, s.DeviceClassName) {
					return true
				}
			}
		}
	}
	return false
}

// Filter narrows the page: to one namespace's claims and Pending pods
// and the GPUs that hold them, and to nodes whose name contains a text.
type Filter struct {
	Namespace string
	Node      string
}

// Apply returns the part of m the filter keeps; m is not changed.
func (f Filter) Apply(m *Model) *Model {
	out := &Model{Namespaces: m.Namespaces, Listing: m.Listing}
	for _, n := range m.Nodes {
		if f.Node != "" && !strings.Contains(n.Name, f.Node) {
			continue
		}
		if f.Namespace != "" {
			n = f.nodeOfNamespace(n)
			if len(n.GPUs) == 0 {
				continue
			}
		}
		out.Nodes = append(out.Nodes, n)
	}
	for _, p := range m.Pending {
		if f.Namespace == "" || p.Namespace == f.Namespace {
			out.Pending = append(out.Pending, p)
		}
	}
	return out
}

// nodeOfNamespace keeps the GPUs of n on which the namespace holds a
// claim, and on them only the namespace's claims.
func (f Filter) nodeOfNamespace(n Node) Node {
	ours := func(rows []inspect.ClaimRow) []inspect.ClaimRow {
		var kept []inspect.ClaimRow
		for _, c := range rows {
			if c.Namespace == f.Namespace {
				kept = append(kept, c)
			}
		}
		return kept
	}
	gpus := n.GPUs
	n.GPUs = nil
	for _, g := range gpus {
		g.Claims = ours(g.Claims)
		g.MPSClaims = ours(g.MPSClaims)
		held := len(g.Claims) > 0 || len(g.MPSClaims) > 0
		instances := g.Instances
		g.Instances = nil
		for _, in := range instances {
			in.ClaimRows = ours(in.ClaimRows)
			held = held || len(in.ClaimRows) > 0
			g.Instances = append(g.Instances, in)
		}
		if held {
			n.GPUs = append(n.GPUs, g)
		}
	}
	return n
}
