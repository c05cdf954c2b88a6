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
	"fmt"
	"strconv"
	"strings"

	"k8s.io/utils/ptr"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/cluster/inspect"
)

// This file turns a filtered Model into what the templates print: bars as
// segments in percent of their width, and which nodes are drawn open.

// expandAll is the most nodes drawn open with their GPUs; past it every
// node is a one-line summary until the user opens it, which keeps the
// page of a thousand nodes small.
const expandAll = 24

// verdictsShown bounds the per-GPU reasons listed under a Pending pod.
const verdictsShown = 12

type page struct {
	Filter Filter
	// Open names the nodes the user opened, Why the Pending pods
	// (namespace/name), comma-separated; AllPending asks for the Pending
	// pods after the first ones.
	Open, Why  string
	AllPending bool
	Version    uint64
	Loading    bool
	// Listing: the GPUs are shown, their claims and the Pending pods are
	// still being listed.
	Listing    bool
	Namespaces []string
	Nodes      []nodeView
	// Pending are the first Pending pods, drawn open with their
	// explanation; MorePending counts the others, listed (one line each
	// until opened) in Rest when AllPending.
	Pending      []pendingView
	MorePending  int
	Rest         []pendingView
	PendingTotal int
	GPUs         int
	FullGPUs     int
	Claims       int
	Collapsed    bool
}

type nodeView struct {
	Node
	Open bool
	Bar  bar
	Full int
	GPUs []gpuView
}

type gpuView struct {
	inspect.GPURow
	Mode          string
	MemoryBurst   int64
	Memory, Cores bar
	Full          bool
	Claims        []claimView
	Instances     []instanceView
	Slices        []int64
}

type instanceView struct {
	Instance
	Claims []claimView
}

type claimView struct {
	inspect.ClaimRow
	On  string
	Bar bar
}

type pendingView struct {
	PendingPod
	// Open pods show their explanation ("Explaining…" until it comes);
	// the others are one line until the user opens them.
	Open     bool
	Verdicts []inspect.GPUVerdict
	More     int
}

// bar is a horizontal bar of coloured segments over a free background.
type bar struct {
	Label string
	Segs  []seg
}

// seg is one segment: X and W in percent of the bar's width; Class picks
// its colour and pattern (used, idle, burst, cores, limit).
type seg struct {
	Class string
	X, W  string
}

// segments lays out consecutive [class, amount] pairs against a total.
func segments(total int64, parts ...any) []seg {
	if total <= 0 {
		return nil
	}
	var out []seg
	var at int64
	for i := 0; i+1 < len(parts); i += 2 {
		class, amount := parts[i].(string), parts[i+1].(int64)
		amount = min(amount, total-at)
		if amount <= 0 {
			continue
		}
		out = append(out, seg{Class: class, X: percent(at, total), W: percent(amount, total)})
		at += amount
	}
	return out
}

func percent(v, total int64) string {
	return strconv.FormatFloat(float64(v)*100/float64(total), 'f', 2, 64) + "%"
}

// memoryBar shows used memory solid, the booked rest hatched, the burst
// cross-hatched, against the capacity.
func memoryBar(capacity, booked, used, burst int64) bar {
	idle := max(booked-used, 0)
	label := fmt.Sprintf("memory: %s used, %s booked, %s burst of %s", inspect.FormatBytes(used),
		inspect.FormatBytes(booked), inspect.FormatBytes(burst), inspect.FormatBytes(capacity))
	return bar{Label: label, Segs: segments(capacity, "used", used, "idle", idle, "burst", burst)}
}

// fill draws the filtered model with the nodes and Pending pods the user
// opened; it returns the Pending pods drawn open (namespace/name), whose
// explanation the page shows.
func (p *page) fill(m *Model, open, openPods map[string]bool, explain int) []string {
	m = p.Filter.Apply(m)
	p.Listing = m.Listing
	p.Namespaces = m.Namespaces
	p.Collapsed = len(m.Nodes) > expandAll
	for _, n := range m.Nodes {
		nv := nodeView{Node: n, Open: !p.Collapsed || open[n.Name]}
		nv.Bar = memoryBar(n.MemoryCapacity, n.MemoryAllocated, n.MemoryUsed, 0)
		for _, g := range n.GPUs {
			gv := gpuView{GPURow: g.GPURow, Mode: g.Mode, MemoryBurst: g.MemoryBurst}
			gv.Full = (g.MemoryCapacity > 0 && g.MemoryAllocated >= g.MemoryCapacity) ||
				(g.CoresCapacity > 0 && g.CoresAllocated >= g.CoresCapacity)
			if gv.Full {
				nv.Full++
				p.FullGPUs++
			}
			p.GPUs++
			p.Claims += len(g.Claims) + len(g.MPSClaims)
			for _, in := range g.Instances {
				p.Claims += len(in.ClaimRows)
			}
			if !nv.Open {
				continue
			}
			gv.Memory = memoryBar(g.MemoryCapacity, g.MemoryAllocated, ptr.Deref(g.MemoryUsed, 0), g.MemoryBurst)
			gv.Cores = bar{Label: fmt.Sprintf("cores: %d booked of %d", g.CoresAllocated, g.CoresCapacity),
				Segs: segments(g.CoresCapacity, "cores", g.CoresAllocated)}
			for _, c := range g.Claims {
				gv.Claims = append(gv.Claims, claimOf(c, "whole GPU"))
			}
			for _, c := range g.MPSClaims {
				gv.Claims = append(gv.Claims, claimOf(c, "MPS"))
			}
			for _, in := range g.Instances {
				iv := instanceView{Instance: in}
				for _, c := range in.ClaimRows {
					cv := claimOf(c, in.Profile+" at slice "+strconv.FormatInt(in.PlacementStart, 10))
					iv.Claims = append(iv.Claims, cv)
					gv.Claims = append(gv.Claims, cv)
				}
				gv.Instances = append(gv.Instances, iv)
			}
			if len(g.Instances) > 0 || g.MIG != "" {
				for i := range g.MIGSlices {
					gv.Slices = append(gv.Slices, i)
				}
			}
			nv.GPUs = append(nv.GPUs, gv)
		}
		p.Nodes = append(p.Nodes, nv)
	}
	p.PendingTotal = len(m.Pending)
	p.MorePending = max(p.PendingTotal-explain, 0)
	var shown []string
	for i, pp := range m.Pending {
		if i >= explain && !p.AllPending {
			break
		}
		pv := pendingView{PendingPod: pp, Open: i < explain || openPods[pp.Namespace+"/"+pp.Name]}
		if pv.Open {
			shown = append(shown, pp.Namespace+"/"+pp.Name)
		}
		if pv.Open && pp.Why != nil {
			for _, v := range pp.Why.GPUs {
				if v.Fits {
					continue
				}
				if len(pv.Verdicts) == verdictsShown {
					pv.More++
					continue
				}
				pv.Verdicts = append(pv.Verdicts, v)
			}
		}
		if i < explain {
			p.Pending = append(p.Pending, pv)
		} else {
			p.Rest = append(p.Rest, pv)
		}
	}
	return shown
}

// claimOf draws a claim's booking against the most it may hold: used
// solid, the idle rest of the guarantee hatched, the burst cross-hatched,
// the rest of its limit outlined.
func claimOf(c inspect.ClaimRow, on string) claimView {
	used := ptr.Deref(c.MemoryUsed, 0)
	burst := ptr.Deref(c.MemoryBurst, 0)
	top := max(c.MemoryLimit, c.MemoryGranted+burst, used)
	held := max(c.MemoryGranted, used)
	label := fmt.Sprintf("%s/%s: %s used of a %s guarantee, %s burst, limit %s", c.Namespace, c.Claim,
		inspect.FormatBytes(used), inspect.FormatBytes(c.MemoryGranted), inspect.FormatBytes(burst), inspect.FormatBytes(c.MemoryLimit))
	return claimView{ClaimRow: c, On: on, Bar: bar{Label: label, Segs: segments(top,
		"used", used, "idle", held-used, "burst", burst, "limit", top)}}
}

// openSet reads a comma-separated parameter: the open nodes or pods.
func openSet(v string) map[string]bool {
	out := map[string]bool{}
	for _, n := range strings.Split(v, ",") {
		if n != "" {
			out[n] = true
		}
	}
	return out
}
