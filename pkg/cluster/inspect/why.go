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
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/cluster/allocator"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/names"
)

// Explanation says why a pod's vGPU claims do not fit anywhere.
type Explanation struct {
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	Phase     string `json:"phase"`
	// NodeName is set when the pod is already scheduled: nothing to explain.
	NodeName        string       `json:"nodeName,omitempty"`
	SchedulingGates []string     `json:"schedulingGates,omitempty"`
	Claims          []ClaimState `json:"claims"`
	// Nodes holds one verdict per node, sorted by name.
	Nodes []NodeVerdict `json:"nodes,omitempty"`
	// GPUs holds one verdict per pending request and GPU, by node and GPU.
	GPUs []GPUVerdict `json:"gpus,omitempty"`
	// Summary is one sentence on the whole pod.
	Summary string `json:"summary"`
	// Suggestion is the smallest single change found that makes the pod's
	// claims fit, checked with the allocator; empty when none was found.
	Suggestion string `json:"suggestion,omitempty"`
}

// ClaimState is one vGPU claim of the pod.
type ClaimState struct {
	// Entry is the name in pod.spec.resourceClaims.
	Entry string `json:"entry"`
	// Claim is the ResourceClaim; empty while the claim from a template
	// is not created yet (the template's spec is explained instead).
	Claim    string `json:"claim,omitempty"`
	Template string `json:"template,omitempty"`
	State    string `json:"state"`
	// Node is where an allocated claim's devices are.
	Node     string   `json:"node,omitempty"`
	Requests []string `json:"requests"`
}

// NodeVerdict says whether the pod's pending claims fit on a node.
type NodeVerdict struct {
	Node string `json:"node"`
	Fits bool   `json:"fits"`
	// DevicesFit is the allocator's answer for the node's devices alone.
	DevicesFit bool   `json:"devicesFit"`
	Reason     string `json:"reason"`
	FitsIf     string `json:"fitsIf,omitempty"`
}

// GPUVerdict says whether one request of a pending claim fits on one GPU.
type GPUVerdict struct {
	Node    string   `json:"node"`
	GPU     string   `json:"gpu"`
	Claim   string   `json:"claim"`
	Request string   `json:"request"`
	Fits    bool     `json:"fits"`
	Reasons []string `json:"reasons,omitempty"`
	// FitsIf is the single change that makes the request fit on this GPU
	// (on a node that otherwise takes the pod), checked with the allocator.
	FitsIf string `json:"fitsIf,omitempty"`
	// cost ranks suggestions: how much of the request the change gives up.
	cost float64
}

// Claim states of ClaimState beyond StateAllocated and StatePending.
const StateNotCreated = "NotCreated"

// ErrNoVGPUClaims is returned for a pod that asks for no vGPU.
var ErrNoVGPUClaims = errors.New("the pod has no vGPU claims")

// Why explains why the pod's vGPU claims fit on no node. The snapshot must
// hold nodes, pods and templates.
func Why(ctx context.Context, snap *Snapshot, namespace, name string) (*Explanation, error) {
	var pod *corev1.Pod
	for _, p := range snap.Pods {
		if p.Namespace == namespace && p.Name == name {
			pod = p
		}
	}
	if pod == nil {
		return nil, fmt.Errorf("pod %s/%s not found", namespace, name)
	}
	exp := &Explanation{Namespace: namespace, Pod: name, Phase: string(pod.Status.Phase), NodeName: pod.Spec.NodeName}
	for _, g := range pod.Spec.SchedulingGates {
		exp.SchedulingGates = append(exp.SchedulingGates, g.Name)
	}
	w := &why{inv: newInventory(snap), pod: pod}
	if err := w.claims(exp); err != nil {
		return nil, err
	}
	if pod.Spec.NodeName != "" {
		exp.Summary = fmt.Sprintf("The pod is not Pending for lack of GPUs: it is scheduled on node %s (phase %s).", pod.Spec.NodeName, exp.Phase)
		return exp, nil
	}
	if len(w.pending) == 0 {
		exp.Summary = "All of the pod's vGPU claims are allocated; it waits for something else (kubectl describe pod " + name + ")."
		return exp, nil
	}
	w.alloc = allocator.New(allocator.Config{
		DriverName: names.DriverName,
		Classes:    allocator.ClassLister(w.inv.classes),
		IsOurs:     w.inv.isOurClass,
	})
	all := make([]*resourceapi.ResourceSlice, len(snap.Slices))
	for i := range snap.Slices {
		all[i] = &snap.Slices[i]
	}
	w.alloc.SetSlices(all)
	for i := range snap.Claims {
		w.alloc.Observe(&snap.Claims[i])
	}
	w.cel = cel.NewCache(10, cel.Features{EnableConsumableCapacity: allocator.Features.ConsumableCapacity})
	w.fit = &allocator.NodeFit{Requested: requestedOn(snap.Pods, pod)}

	nodes := slices.Clone(snap.Nodes)
	slices.SortFunc(nodes, func(a, b corev1.Node) int { return cmp.Compare(a.Name, b.Name) })
	for i := range nodes {
		// At a thousand nodes this takes seconds: a caller may bound it.
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("explain pod %s/%s: %w", namespace, name, err)
		}
		nv, gpus, err := w.node(ctx, &nodes[i])
		if err != nil {
			return nil, err
		}
		exp.Nodes = append(exp.Nodes, nv)
		exp.GPUs = append(exp.GPUs, gpus...)
	}
	w.summarize(exp)
	return exp, nil
}

// why holds one explanation's state.
type why struct {
	inv   *inventory
	pod   *corev1.Pod
	alloc *allocator.Allocator
	cel   *cel.Cache
	fit   *allocator.NodeFit
	// pending are the pod's vGPU claims without allocation (from their
	// template when not created yet); allocatedOn restricts the nodes to
	// where its allocated vGPU claims are.
	pending     []*resourceapi.ResourceClaim
	allocatedOn map[string]string // claim name -> node
	probes      int
}

// claims resolves the pod's claim entries.
func (w *why) claims(exp *Explanation) error {
	ns := w.pod.Namespace
	w.allocatedOn = map[string]string{}
	for _, pc := range w.pod.Spec.ResourceClaims {
		cs := ClaimState{Entry: pc.Name, Template: ptr.Deref(pc.ResourceClaimTemplateName, "")}
		name := ptr.Deref(pc.ResourceClaimName, "")
		for _, s := range w.pod.Status.ResourceClaimStatuses {
			if s.Name == pc.Name && s.ResourceClaimName != nil {
				name = *s.ResourceClaimName
			}
		}
		var claim *resourceapi.ResourceClaim
		if name != "" {
			for i := range w.inv.snap.Claims {
				if c := &w.inv.snap.Claims[i]; c.Namespace == ns && c.Name == name {
					claim = c
				}
			}
			if claim == nil && pc.ResourceClaimName != nil {
				return fmt.Errorf("pod %s/%s: claim %s (spec.resourceClaims %s) not found", ns, w.pod.Name, name, pc.Name)
			}
		}
		if claim == nil && cs.Template != "" {
			tpl := w.template(cs.Template)
			if tpl == nil {
				return fmt.Errorf("pod %s/%s: ResourceClaimTemplate %s (spec.resourceClaims %s) not found", ns, w.pod.Name, cs.Template, pc.Name)
			}
			claim = &resourceapi.ResourceClaim{Spec: tpl.Spec.Spec}
			claim.Namespace, claim.Name = ns, w.pod.Name+"-"+pc.Name
			claim.UID = types.UID("template-" + ns + "-" + w.pod.Name + "-" + pc.Name)
			cs.State = StateNotCreated
		}
		if claim == nil || !w.inv.isOurs(claim) {
			continue
		}
		if cs.State == "" {
			cs.Claim = claim.Name
			cs.State = StatePending
		}
		for _, r := range claim.Spec.Devices.Requests {
			cs.Requests = append(cs.Requests, describeRequest(r))
		}
		if claim.Status.Allocation != nil {
			cs.State = StateAllocated
			for _, r := range claim.Status.Allocation.Devices.Results {
				if g, ok := w.inv.gpus[gpuKey{r.Pool, r.Device}]; ok && r.Driver == names.DriverName {
					cs.Node = g.node
				}
			}
			w.allocatedOn[claim.Name] = cs.Node
		} else {
			w.pending = append(w.pending, claim)
		}
		exp.Claims = append(exp.Claims, cs)
	}
	if len(exp.Claims) == 0 {
		return fmt.Errorf("pod %s/%s: %w", ns, w.pod.Name, ErrNoVGPUClaims)
	}
	return nil
}

func (w *why) template(name string) *resourceapi.ResourceClaimTemplate {
	for i := range w.inv.snap.Templates {
		if t := &w.inv.snap.Templates[i]; t.Namespace == w.pod.Namespace && t.Name == name {
			return t
		}
	}
	return nil
}

// node judges one node: the node itself, the pending claims together on
// its GPUs (the allocator's dry run), and each request on each GPU.
func (w *why) node(ctx context.Context, node *corev1.Node) (NodeVerdict, []GPUVerdict, error) {
	logger := klog.FromContext(ctx)
	nv := NodeVerdict{Node: node.Name}
	for claim, on := range w.allocatedOn {
		if on != "" && on != node.Name {
			nv.Reason = fmt.Sprintf("the pod's claim %s is allocated on node %s", claim, on)
			return nv, nil, nil
		}
	}
	var gpus []*gpu
	for _, g := range w.inv.ordered {
		if g.node == node.Name {
			gpus = append(gpus, g)
		}
	}
	if len(gpus) == 0 {
		nv.Reason = "node publishes no vGPU devices"
		return nv, nil, nil
	}
	nodeErr := w.fit.Fits(logger, w.pod, node)
	if nodeErr != nil && !allocator.IsFitError(nodeErr) {
		return nv, nil, fmt.Errorf("node %s: %w", node.Name, nodeErr)
	}
	d, err := w.dryRun(ctx, node, w.pending)
	if err != nil {
		return nv, nil, err
	}
	nv.DevicesFit = d != nil
	nv.Fits = nv.DevicesFit && nodeErr == nil
	switch {
	case nodeErr != nil:
		nv.Reason = nodeErr.Error()
		if nv.DevicesFit {
			nv.FitsIf = nodeFix(nodeErr.Error(), w.pod, node)
		}
	case nv.DevicesFit:
		nv.Reason = "the claims fit on " + strings.Join(placed(d), ", ")
	default:
		nv.Reason = "the vGPU claims do not fit on its GPUs"
	}
	var verdicts []GPUVerdict
	for _, claim := range w.pending {
		for _, r := range claim.Spec.Devices.Requests {
			for _, alt := range w.alternatives(r) {
				for _, g := range gpus {
					if (g.mig != nil || g.migEnabled || len(g.device.ConsumesCounters) > 0) && !w.selects(ctx, alt, g) {
						// One device per MIG placement, two per GPU with
						// MPS: only those the request could get are worth
						// a line.
						continue
					}
					v, err := w.gpu(ctx, node, claim, alt, g)
					if err != nil {
						return nv, nil, err
					}
					if nodeErr != nil {
						// Two changes would be needed: the node's and this one.
						v.FitsIf = ""
					}
					verdicts = append(verdicts, v)
				}
			}
		}
	}
	return nv, verdicts, nil
}

// dryRun asks the allocator whether the claims fit on the node's devices;
// nil when they do not.
func (w *why) dryRun(ctx context.Context, node *corev1.Node, claims []*resourceapi.ResourceClaim) (*allocator.Decision, error) {
	d, err := w.alloc.DryRun(ctx, allocator.Request{Pod: w.pod, Claims: claims, Nodes: []*corev1.Node{node}})
	var unfit *allocator.UnschedulableError
	if errors.As(err, &unfit) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("dry-run allocation on node %s: %w", node.Name, err)
	}
	return d, nil
}

func placed(d *allocator.Decision) []string {
	var out []string
	for _, a := range d.Allocations {
		for _, r := range a.Devices.Results {
			if r.Driver == names.DriverName {
				out = append(out, r.Device)
			}
		}
	}
	slices.SortFunc(out, gpuLess)
	return slices.Compact(out)
}

// alternative is one way a request can be served: the request itself or
// one of its firstAvailable subrequests.
type alternative struct {
	name        string
	class       string
	selectors   []resourceapi.DeviceSelector
	capacity    *resourceapi.CapacityRequirements
	tolerations []resourceapi.DeviceToleration
}

func (w *why) alternatives(r resourceapi.DeviceRequest) []alternative {
	if e := r.Exactly; e != nil {
		if !w.inv.isOurClass(e.DeviceClassName) {
			return nil
		}
		return []alternative{{r.Name, e.DeviceClassName, e.Selectors, e.Capacity, e.Tolerations}}
	}
	var out []alternative
	for _, s := range r.FirstAvailable {
		if w.inv.isOurClass(s.DeviceClassName) {
			out = append(out, alternative{r.Name + "/" + s.Name, s.DeviceClassName, s.Selectors, s.Capacity, s.Tolerations})
		}
	}
	return out
}

// gpu judges one request alternative on one GPU: the allocator's answer
// for a probe claim asking one device of this GPU, and when it says no,
// each reason with the numbers and the single change that fixes it.
func (w *why) gpu(ctx context.Context, node *corev1.Node, claim *resourceapi.ResourceClaim, alt alternative, g *gpu) (GPUVerdict, error) {
	v := GPUVerdict{Node: node.Name, GPU: g.key.device, Claim: claim.Name, Request: alt.name}
	fits, err := w.probe(ctx, node, claim, alt, g)
	if err != nil || fits {
		v.Fits = fits
		return v, err
	}
	reasons, blocked := w.fixedReasons(ctx, alt, g)
	v.Reasons = reasons
	untolerated, taintReasons := untoleratedTaints(alt, g.device)
	v.Reasons = append(v.Reasons, taintReasons...)
	fit := capacityFit(alt, g)
	v.Reasons = append(v.Reasons, fit.reasons...)
	blocked = blocked || fit.blocked
	if len(v.Reasons) == 0 {
		v.Reasons = []string{"the structured allocator does not place the request here"}
		return v, nil
	}
	if blocked || (len(fit.changes) > 0 && len(untolerated) > 0) {
		return v, nil
	}
	fixed, fix, cost := fit.fixed, "", fit.cost
	switch {
	case len(fit.changes) > 0:
		fix = "the request is " + strings.Join(fit.changes, " and ")
	case len(untolerated) > 0:
		var names []string
		for _, t := range untolerated {
			fixed.tolerations = append(slices.Clip(fixed.tolerations), resourceapi.DeviceToleration{
				Key: t.Key, Operator: resourceapi.DeviceTolerationOpEqual, Value: t.Value, Effect: t.Effect})
			names = append(names, taintString(t))
		}
		fix, cost = "the request tolerates "+strings.Join(names, ", "), 0.5
	}
	ok, err := w.probe(ctx, node, claim, fixed, g)
	if err != nil {
		return v, err
	}
	if ok {
		v.FitsIf, v.cost = fix, cost
	}
	return v, nil
}

// fixedReasons are the reasons no change of the request's capacity fixes:
// selectors that do not match, a GPU held whole or not shareable, a
// capacity the GPU does not publish.
func (w *why) fixedReasons(ctx context.Context, alt alternative, g *gpu) ([]string, bool) {
	var reasons []string
	d := g.device
	if class, err := w.inv.classes.Get(alt.class); err != nil {
		reasons = append(reasons, fmt.Sprintf("DeviceClass %s does not exist", alt.class))
	} else {
		for _, s := range class.Spec.Selectors {
			if reason := w.mismatch(ctx, s, d); reason != "" {
				reasons = append(reasons, "DeviceClass "+alt.class+" "+reason)
			}
		}
	}
	for _, s := range alt.selectors {
		if reason := w.mismatch(ctx, s, d); reason != "" {
			reasons = append(reasons, "request "+reason)
		}
	}
	if len(g.granted.holders) > 0 {
		reasons = append(reasons, "held whole by claim "+strings.Join(g.granted.holders, ", "))
	} else if !ptr.Deref(d.AllowMultipleAllocations, false) && g.granted.shares > 0 {
		reasons = append(reasons, fmt.Sprintf("not shareable and in use by %d claim(s)", g.granted.shares))
	}
	reasons = append(reasons, w.inv.counterReasons(g)...)
	if alt.capacity != nil {
		// The scheduler matches capacity names exactly: a qualified
		// vgpu.dra.dev/memory is not the published memory.
		for name := range alt.capacity.Requests {
			if _, ok := d.Capacity[name]; !ok {
				reasons = append(reasons, fmt.Sprintf("GPU publishes no capacity %s", name))
			}
		}
	}
	return reasons, len(reasons) > 0
}

// selects reports whether alt's class and selectors match g's device.
func (w *why) selects(ctx context.Context, alt alternative, g *gpu) bool {
	class, err := w.inv.classes.Get(alt.class)
	if err != nil {
		return true
	}
	for _, s := range append(slices.Clip(class.Spec.Selectors), alt.selectors...) {
		if w.mismatch(ctx, s, g.device) != "" {
			return false
		}
	}
	return true
}

// untoleratedTaints returns the taints of d that alt does not tolerate
// (effect None aside), with a reason for each.
func untoleratedTaints(alt alternative, d *resourceapi.Device) ([]resourceapi.DeviceTaint, []string) {
	var untolerated []resourceapi.DeviceTaint
	var reasons []string
	for _, t := range d.Taints {
		if t.Effect == resourceapi.DeviceTaintEffectNone || tolerated(alt.tolerations, t) {
			continue
		}
		untolerated = append(untolerated, t)
		reasons = append(reasons, "GPU tainted "+taintString(t)+", not tolerated")
	}
	return untolerated, reasons
}

// capacityVerdict is what the GPU's free memory and cores say of a request.
type capacityVerdict struct {
	reasons []string
	// blocked: a capacity no smaller request fits.
	blocked bool
	// fixed is the request cut to what is free, changes says how, cost
	// how much of the request that gives up (0..1 per capacity).
	fixed   alternative
	changes []string
	cost    float64
}

// capacityFit compares alt's memory and cores with what is left on g, and
// says how far the request would have to shrink to fit.
func capacityFit(alt alternative, g *gpu) capacityVerdict {
	out := capacityVerdict{fixed: alt}
	d := g.device
	for _, c := range []struct {
		name      resourceapi.QualifiedName
		free, cap int64
		unit      func(int64) string
	}{
		{names.CapacityMemory, g.memory - g.granted.memory, g.memory, FormatBytes},
		{names.CapacityCores, g.cores - g.granted.cores, g.cores, formatCores},
	} {
		dc, ok := d.Capacity[c.name]
		if !ok {
			continue
		}
		asked := capacityRequest(alt.capacity, c.name)
		need, valid := consumption(asked, dc)
		what := "asks " + c.unit(need)
		if asked == nil {
			what = "asks the whole GPU's " + string(c.name) + " (no request: the default is " + c.unit(need) + ")"
		}
		if !valid {
			out.reasons = append(out.reasons, fmt.Sprintf("%s: asks %s, more than the GPU grants one claim", c.name, asked.String()))
		} else if need > c.free {
			out.reasons = append(out.reasons, fmt.Sprintf("%s: %s, %s left of %s", c.name, what, c.unit(max(c.free, 0)), c.unit(c.cap)))
		} else {
			continue
		}
		largest, ok := largestRequest(max(c.free, 0), dc)
		if !ok || (c.name == names.CapacityCores && largest == 0 && asked == nil) {
			out.blocked = true
			continue
		}
		out.fixed = withCapacity(out.fixed, c.name, largest)
		q := resource.NewQuantity(largest, resource.BinarySI)
		if c.name == names.CapacityCores {
			q = resource.NewQuantity(largest, resource.DecimalSI)
		}
		out.changes = append(out.changes, fmt.Sprintf("%s <= %s", c.name, q.String()))
		if need > 0 {
			out.cost += float64(need-largest) / float64(need)
		}
	}
	return out
}

// probe asks the allocator whether the alternative fits as one device on
// exactly this GPU: a probe claim with the alternative's class, selectors,
// capacity and tolerations, pinned to the GPU's UUID.
func (w *why) probe(ctx context.Context, node *corev1.Node, claim *resourceapi.ResourceClaim, alt alternative, g *gpu) (bool, error) {
	w.probes++
	// Guarded: MIG devices publish no uuid, GPUs no parentUUID.
	a := fmt.Sprintf("device.attributes[%q]", names.DriverName)
	expr := fmt.Sprintf("%q in %s && %s.%s == %q", names.AttrUUID, a, a, names.AttrUUID, g.uuid)
	if g.mig != nil {
		// A MIG device has no uuid of its own: its parent and placement.
		expr = fmt.Sprintf("%q in %s && %s.%s == %q && %s.%s == %q && %s.%s == %d", names.AttrParentUUID, a, a, names.AttrParentUUID, g.mig.parentUUID,
			a, names.AttrProfile, g.mig.profile, a, names.AttrPlacementStart, g.mig.start)
	}
	pin := resourceapi.DeviceSelector{CEL: &resourceapi.CELDeviceSelector{Expression: expr}}
	probe := &resourceapi.ResourceClaim{}
	probe.Namespace, probe.Name = claim.Namespace, claim.Name
	probe.UID = types.UID(fmt.Sprintf("probe-%d", w.probes))
	probe.Spec.Devices.Requests = []resourceapi.DeviceRequest{{Name: "probe", Exactly: &resourceapi.ExactDeviceRequest{
		DeviceClassName: alt.class,
		Selectors:       append(slices.Clip(alt.selectors), pin),
		AllocationMode:  resourceapi.DeviceAllocationModeExactCount,
		Count:           1,
		Capacity:        alt.capacity,
		Tolerations:     alt.tolerations,
	}}}
	d, err := w.dryRun(ctx, node, []*resourceapi.ResourceClaim{probe})
	return d != nil, err
}

// mismatch evaluates a selector on a device; empty when it matches.
func (w *why) mismatch(ctx context.Context, s resourceapi.DeviceSelector, d *resourceapi.Device) string {
	if s.CEL == nil {
		return ""
	}
	res := w.cel.GetOrCompile(s.CEL.Expression)
	if res.Error != nil {
		return fmt.Sprintf("selector %q does not compile: %v", s.CEL.Expression, res.Error)
	}
	match, _, err := res.DeviceMatches(ctx, cel.Device{
		Driver: names.DriverName, AllowMultipleAllocations: d.AllowMultipleAllocations,
		Attributes: d.Attributes, Capacity: d.Capacity,
	})
	switch {
	case err != nil:
		return fmt.Sprintf("selector %q fails: %v", s.CEL.Expression, err)
	case !match:
		return fmt.Sprintf("selector %q does not match", s.CEL.Expression)
	}
	return ""
}

func withCapacity(alt alternative, name resourceapi.QualifiedName, v int64) alternative {
	reqs := map[resourceapi.QualifiedName]resource.Quantity{}
	if alt.capacity != nil {
		for k, q := range alt.capacity.Requests {
			if k != name {
				reqs[k] = q
			}
		}
	}
	reqs[name] = *resource.NewQuantity(v, resource.BinarySI)
	alt.capacity = &resourceapi.CapacityRequirements{Requests: reqs}
	return alt
}

func tolerated(tolerations []resourceapi.DeviceToleration, t resourceapi.DeviceTaint) bool {
	for _, tol := range tolerations {
		if tol.Key != "" && tol.Key != t.Key {
			continue
		}
		if tol.Effect != "" && tol.Effect != t.Effect {
			continue
		}
		if tol.Operator == resourceapi.DeviceTolerationOpExists || (tol.Key != "" && tol.Value == t.Value) {
			return true
		}
	}
	return false
}

// nodeFix is the change that lets the pod onto a node NodeFit refused.
func nodeFix(reason string, pod *corev1.Pod, node *corev1.Node) string {
	switch {
	case strings.Contains(reason, "unschedulable"):
		return "the node is uncordoned (kubectl uncordon " + node.Name + ")"
	case strings.Contains(reason, "selector or affinity"):
		return "the pod's node selector and affinity admit node " + node.Name
	case strings.Contains(reason, "taint"):
		for _, t := range node.Spec.Taints {
			if (t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute) &&
				!corev1helpers.TolerationsTolerateTaint(klog.Background(), pod.Spec.Tolerations, &t, false) {
				return "the pod tolerates " + t.ToString()
			}
		}
	case strings.Contains(reason, "insufficient"):
		return "the node has room for the pod's " + strings.TrimPrefix(reason, "node has insufficient ") + " request"
	}
	return ""
}

// requestedOn sums what the pods bound to each node take of it, except the
// pod being explained.
func requestedOn(pods []*corev1.Pod, self *corev1.Pod) func(string) allocator.NodeUsage {
	sums := map[string]allocator.NodeUsage{}
	for _, p := range pods {
		if p.Spec.NodeName == "" || p.UID == self.UID || allocator.PodFinished(p) {
			continue
		}
		sum := sums[p.Spec.NodeName]
		sum.Add(allocator.UsageOf(p))
		sums[p.Spec.NodeName] = sum
	}
	return func(node string) allocator.NodeUsage { return sums[node] }
}

// summarize writes the pod-level sentence and picks the suggestion.
func (w *why) summarize(exp *Explanation) {
	fitting := 0
	for _, n := range exp.Nodes {
		if n.Fits {
			fitting++
		}
	}
	gated := ""
	if len(exp.SchedulingGates) > 0 {
		gated = fmt.Sprintf(" It has scheduling gates (%s): the scheduler ignores it until they are removed.", strings.Join(exp.SchedulingGates, ", "))
	}
	if fitting > 0 {
		exp.Summary = fmt.Sprintf("The pod's vGPU claims fit on %d of %s; the GPUs do not keep it Pending.%s", fitting, nodesWord(len(exp.Nodes)), gated)
		return
	}
	exp.Summary = fmt.Sprintf("The pod's vGPU claims fit on none of %s.%s", nodesWord(len(exp.Nodes)), gated)
	best := -1
	for i, v := range exp.GPUs {
		if v.FitsIf != "" && (best < 0 || v.cost < exp.GPUs[best].cost) {
			best = i
		}
	}
	if best >= 0 {
		v := exp.GPUs[best]
		exp.Suggestion = fmt.Sprintf("claim %s request %s fits on node %s %s if %s", v.Claim, v.Request, v.Node, v.GPU, v.FitsIf)
		return
	}
	for _, n := range exp.Nodes {
		if n.FitsIf != "" {
			exp.Suggestion = fmt.Sprintf("the claims fit on node %s if %s", n.Node, n.FitsIf)
			return
		}
	}
}

// nodesWord is "1 node" or "n nodes".
func nodesWord(n int) string {
	if n == 1 {
		return "1 node"
	}
	return strconv.Itoa(n) + " nodes"
}

// describeRequest is a request in one line: "gpu: memory 4Gi, cores 30".
func describeRequest(r resourceapi.DeviceRequest) string {
	parts := func(class string, count int64, mode resourceapi.DeviceAllocationMode, c *resourceapi.CapacityRequirements, sel []resourceapi.DeviceSelector) string {
		var p []string
		if mode == resourceapi.DeviceAllocationModeAll {
			p = append(p, "all devices")
		} else if count > 1 {
			p = append(p, fmt.Sprintf("%d GPUs", count))
		}
		for _, name := range []resourceapi.QualifiedName{names.CapacityMemory, names.CapacityCores} {
			if q := capacityRequest(c, name); q != nil {
				p = append(p, string(name)+" "+q.String())
			}
		}
		if len(p) == 0 || (capacityRequest(c, names.CapacityMemory) == nil) {
			p = append(p, "whole-GPU memory")
		}
		if len(sel) > 0 {
			p = append(p, fmt.Sprintf("%d selector(s)", len(sel)))
		}
		return class + " (" + strings.Join(p, ", ") + ")"
	}
	if e := r.Exactly; e != nil {
		return r.Name + ": " + parts(e.DeviceClassName, e.Count, e.AllocationMode, e.Capacity, e.Selectors)
	}
	var alts []string
	for _, s := range r.FirstAvailable {
		alts = append(alts, s.Name+": "+parts(s.DeviceClassName, s.Count, s.AllocationMode, s.Capacity, s.Selectors))
	}
	return r.Name + ": first of [" + strings.Join(alts, "; ") + "]"
}
