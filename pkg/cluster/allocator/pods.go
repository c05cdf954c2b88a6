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
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/klog/v2"
)

// syncPod allocates a gated pod's claims, or checks whether an ungated
// pod that this controller placed is stuck.
func (c *Controller) syncPod(ctx context.Context, namespace, name string, retries int) (time.Duration, error) {
	pod, err := c.pods.Pods(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read pod %s/%s from the cache: %w", namespace, name, err)
	}
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "pod", klog.KObj(pod))
	ctx = klog.NewContext(ctx, logger)
	if pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil {
		return 0, nil
	}
	if !hasGate(pod) {
		return c.checkFallback(ctx, pod)
	}

	claims, missing, err := c.podClaims(ctx, pod)
	if err != nil {
		return 0, err
	}
	if missing {
		logger.V(4).Info("Waiting for the pod's claims to be created")
		return missingClaimRetry, nil
	}
	var unallocated []*resourceapi.ResourceClaim
	ours := false
	for _, claim := range claims {
		if claim.DeletionTimestamp != nil {
			logger.V(4).Info("Waiting for a claim being deleted to go away", "claim", klog.KObj(claim))
			return missingClaimRetry, nil
		}
		ours = ours || c.usesOurClasses(claim)
		if claim.Status.Allocation == nil {
			unallocated = append(unallocated, claim)
		}
	}
	if len(unallocated) == 0 || !ours {
		// Nothing to decide: every claim is allocated (perhaps by an
		// earlier run that stopped before removing the gate), or no claim
		// asks for this driver's GPUs.
		return 0, c.ungate(ctx, pod)
	}

	policies, err := PodPolicies(pod, c.opts.Defaults)
	if err != nil {
		c.opts.Recorder.Eventf(pod, corev1.EventTypeWarning, ReasonInvalidPolicy, "%v; using %s/%s", err, policies.Node, policies.GPU)
	}
	decision, err := c.decide(ctx, pod, claims, unallocated, policies)
	if errors.Is(err, errInFlight) {
		logger.V(4).Info("Waiting for another decision's write to a claim of the pod")
		return inFlightRetry, nil
	}
	var unfit *UnschedulableError
	switch {
	case errors.As(err, &unfit):
		released, err := c.releasePartial(ctx, claims)
		if err != nil {
			return 0, err
		}
		if released {
			// Claims allocated by an earlier run tied the pod to a node
			// where the rest does not fit: start over without them once
			// the cache shows them released.
			return retryAfterRelease, nil
		}
		c.opts.Recorder.Eventf(pod, corev1.EventTypeWarning, ReasonFallback,
			"No node can take the pod's claims by policy (%v); leaving allocation to kube-scheduler", unfit)
		return 0, c.ungate(ctx, pod)
	case err != nil:
		if retries >= maxRetries {
			c.opts.Recorder.Eventf(pod, corev1.EventTypeWarning, ReasonAllocationError,
				"Policy allocation failed %d times (%v); leaving allocation to kube-scheduler", retries+1, err)
			return 0, c.ungate(ctx, pod)
		}
		return 0, err
	}

	for i, claim := range unallocated {
		if err := c.writeAllocation(ctx, claim, decision.Allocations[i]); err != nil {
			// Later claims were not written: free what was assumed for them.
			// Written ones stay; the retry builds on them.
			for _, rest := range unallocated[i:] {
				c.alloc.Forget(rest.UID)
			}
			c.placed.remove(pod.UID)
			return 0, fmt.Errorf("write allocation of claim %s: %w", klog.KObj(claim), err)
		}
	}
	c.opts.Recorder.Eventf(pod, corev1.EventTypeNormal, ReasonAllocated, "Allocated %s on node %s (node policy %s, GPU policy %s, topology %s)",
		strings.Join(devicesOf(decision), ", "), decision.Node, policies.Node, policies.GPU, decision.Topology)
	return 0, c.ungate(ctx, pod)
}

// errInFlight: a claim of the pod has a decided allocation that is still
// being written (by another worker, or by this pod's failed attempt) and
// not yet seen in the cache; deciding it again could book its devices twice.
var errInFlight = errors.New("a claim's decided allocation is not written yet")

// decide chooses where the pod's unallocated claims go and assumes the
// result (devices in the allocator, the pod's requests on its node), so that
// the next decision sees it. Decisions are made one at a time, each on the
// state the previous one left; the writes that follow run concurrently.
func (c *Controller) decide(ctx context.Context, pod *corev1.Pod, claims, unallocated []*resourceapi.ResourceClaim, policies Policies) (*Decision, error) {
	c.decideMu.Lock()
	defer c.decideMu.Unlock()
	for _, claim := range unallocated {
		if c.alloc.Assumed(claim.UID) {
			return nil, errInFlight
		}
	}
	nodes, err := c.candidateNodes(claims)
	if err != nil {
		return nil, err
	}
	if c.slicesChanged.Swap(false) {
		all, err := c.slices.List(labels.Everything())
		if err != nil {
			c.slicesChanged.Store(true)
			return nil, fmt.Errorf("list ResourceSlices: %w", err)
		}
		c.alloc.SetSlices(all)
	}
	decision, err := c.alloc.Allocate(ctx, Request{Pod: pod, Claims: unallocated, Nodes: nodes, Policies: policies})
	if err != nil {
		return nil, err
	}
	c.placed.put(pod, decision.Node)
	return decision, nil
}

// podClaims returns the pod's claims; missing is true while one has not
// been created yet.
func (c *Controller) podClaims(ctx context.Context, pod *corev1.Pod) (claims []*resourceapi.ResourceClaim, missing bool, err error) {
	for i := range pod.Spec.ResourceClaims {
		name, mustCheckOwner, err := resourceclaim.Name(pod, &pod.Spec.ResourceClaims[i])
		if errors.Is(err, resourceclaim.ErrClaimNotFound) {
			return nil, true, nil
		}
		if err != nil {
			return nil, false, err
		}
		if name == nil {
			continue
		}
		claim, err := c.claims.ResourceClaims(pod.Namespace).Get(*name)
		if apierrors.IsNotFound(err) {
			// Not in the cache yet, or really missing: ask the API server.
			claim, err = c.opts.Client.ResourceV1().ResourceClaims(pod.Namespace).Get(ctx, *name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil, true, nil
			}
		}
		if err != nil {
			return nil, false, fmt.Errorf("read claim %s/%s: %w", pod.Namespace, *name, err)
		}
		if mustCheckOwner {
			if err := resourceclaim.IsForPod(pod, claim, false); err != nil {
				return nil, false, err
			}
		}
		claims = append(claims, claim)
	}
	return claims, false, nil
}

func (c *Controller) usesOurClasses(claim *resourceapi.ResourceClaim) bool {
	for i := range claim.Spec.Devices.Requests {
		for _, alt := range alternatives(&claim.Spec.Devices.Requests[i]) {
			if c.opts.Allocator.IsOurs(alt.class) {
				return true
			}
		}
	}
	return false
}

// candidateNodes lists the nodes where the pod's allocated claims are
// available (all nodes when none is allocated).
func (c *Controller) candidateNodes(claims []*resourceapi.ResourceClaim) ([]*corev1.Node, error) {
	all, err := c.nodes.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	var selectors []*nodeaffinity.NodeSelector
	for _, claim := range claims {
		if claim.Status.Allocation == nil || claim.Status.Allocation.NodeSelector == nil {
			continue
		}
		s, err := nodeaffinity.NewNodeSelector(claim.Status.Allocation.NodeSelector)
		if err != nil {
			return nil, fmt.Errorf("claim %s: status.allocation.nodeSelector: %w", klog.KObj(claim), err)
		}
		selectors = append(selectors, s)
	}
	if len(selectors) == 0 {
		return all, nil
	}
	return slices.DeleteFunc(all, func(n *corev1.Node) bool {
		return slices.ContainsFunc(selectors, func(s *nodeaffinity.NodeSelector) bool { return !s.Match(n) })
	}), nil
}

// writeAllocation adds the finalizer, then the allocation, as the scheduler
// does: a claim never carries an allocation of ours without our finalizer.
func (c *Controller) writeAllocation(ctx context.Context, claim *resourceapi.ResourceClaim, alloc *resourceapi.AllocationResult) error {
	claims := c.opts.Client.ResourceV1().ResourceClaims(claim.Namespace)
	claim = claim.DeepCopy()
	if !slices.Contains(claim.Finalizers, Finalizer) {
		claim.Finalizers = append(claim.Finalizers, Finalizer)
		updated, err := claims.Update(ctx, claim, metav1.UpdateOptions{})
		if err != nil {
			return fmt.Errorf("add finalizer %s: %w", Finalizer, err)
		}
		claim = updated
	}
	claim.Status.Allocation = alloc.DeepCopy()
	// With device binding conditions enabled, kube-scheduler stamps an
	// allocation without a timestamp when it reserves the claim; the
	// allocation is immutable, so that update would fail forever.
	if claim.Status.Allocation.AllocationTimestamp == nil {
		claim.Status.Allocation.AllocationTimestamp = &metav1.Time{Time: c.now()}
	}
	if _, err := claims.UpdateStatus(ctx, claim, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update status.allocation: %w", err)
	}
	return nil
}

// ungate removes SchedulingGate; the patch tests the gate's position so
// that a concurrent change to the gates fails instead of removing another.
func (c *Controller) ungate(ctx context.Context, pod *corev1.Pod) error {
	i := slices.IndexFunc(pod.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == SchedulingGate })
	if i < 0 {
		return nil
	}
	patch := fmt.Sprintf(`[{"op":"test","path":"/spec/schedulingGates/%d/name","value":%q},{"op":"remove","path":"/spec/schedulingGates/%d"}]`, i, SchedulingGate, i)
	_, err := c.opts.Client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.JSONPatchType, []byte(patch), metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		// The patch's test fails when pod is a stale copy whose gate an
		// earlier pass removed already: that is success, not an error.
		if current, getErr := c.opts.Client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{}); apierrors.IsNotFound(getErr) ||
			(getErr == nil && !slices.ContainsFunc(current.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == SchedulingGate })) {
			return nil
		}
		return fmt.Errorf("remove scheduling gate %s from pod %s: %w", SchedulingGate, klog.KObj(pod), err)
	}
	klog.FromContext(ctx).V(2).Info("Removed scheduling gate")
	return nil
}

// checkFallback releases the allocations of an ungated pod that the
// scheduler has not been able to place for FallbackAfter, so that the
// scheduler allocates its claims itself.
func (c *Controller) checkFallback(ctx context.Context, pod *corev1.Pod) (time.Duration, error) {
	cond := unschedulable(pod)
	if cond == nil {
		return 0, nil
	}
	claims, _, err := c.podClaims(ctx, pod)
	if err != nil {
		return 0, err
	}
	var ours []*resourceapi.ResourceClaim
	for _, claim := range claims {
		if ownedAllocation(claim) && len(claim.Status.ReservedFor) == 0 {
			ours = append(ours, claim)
		}
	}
	if len(ours) == 0 {
		return 0, nil
	}
	if wait := c.opts.FallbackAfter - c.now().Sub(cond.LastTransitionTime.Time); wait > 0 {
		return wait, nil
	}
	names := make([]string, 0, len(ours))
	for _, claim := range ours {
		if err := c.release(ctx, claim); err != nil {
			return 0, err
		}
		names = append(names, claim.Name)
	}
	c.placed.remove(pod.UID)
	c.opts.Recorder.Eventf(pod, corev1.EventTypeWarning, ReasonReleased,
		"kube-scheduler could not place the pod where its claims were allocated by policy (%s); released claims %s so that kube-scheduler allocates them",
		cond.Message, strings.Join(names, ", "))
	return 0, nil
}

// requested sums the requests of the pods bound to the node and of those
// this controller placed there that are not bound yet.
func (c *Controller) requested(node string) NodeUsage {
	total := c.bound.on(node)
	total.Add(c.placed.on(node))
	return total
}

// observeBinding counts a bound pod on its node until it finishes or goes.
func (c *Controller) observeBinding(pod *corev1.Pod) {
	if pod.Spec.NodeName == "" || PodFinished(pod) {
		c.bound.remove(pod.UID)
		return
	}
	c.bound.put(pod, pod.Spec.NodeName)
}

func hasGate(pod *corev1.Pod) bool {
	return slices.ContainsFunc(pod.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == SchedulingGate })
}

// unschedulable returns the pod's PodScheduled condition when the scheduler
// reported it unschedulable.
func unschedulable(pod *corev1.Pod) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		cond := &pod.Status.Conditions[i]
		if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable {
			return cond
		}
	}
	return nil
}

// devicesOf lists "node/device" of a decision's results.
func devicesOf(d *Decision) []string {
	var out []string
	for _, a := range d.Allocations {
		for _, r := range a.Devices.Results {
			out = append(out, r.Pool+"/"+r.Device)
		}
	}
	return out
}
