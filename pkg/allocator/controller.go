package allocator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	coreinformers "k8s.io/client-go/informers/core/v1"
	resourceinformers "k8s.io/client-go/informers/resource/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/klog/v2"
)

// Event reasons, on the pod.
const (
	ReasonAllocated       = "PolicyAllocated"
	ReasonFallback        = "PolicyAllocationFallback"
	ReasonReleased        = "PolicyAllocationReleased"
	ReasonInvalidPolicy   = "InvalidPlacementPolicy"
	ReasonAllocationError = "PolicyAllocationError"
)

const (
	// nodeNameIndex indexes pods by spec.nodeName for node fit.
	nodeNameIndex = "vgpu.dra.dev/nodeName"
	// maxRetries bounds retries of a pod whose allocation keeps failing
	// with an error (not "does not fit"); then the scheduler takes over.
	maxRetries = 5
	// missingClaimRetry is how soon a pod whose claims do not exist yet is
	// looked at again, besides the claim events that also trigger it.
	missingClaimRetry = 5 * time.Second
	// retryAfterRelease is how soon a pod is allocated afresh after its
	// partial allocation was released.
	retryAfterRelease = time.Second
)

// ControllerOptions configure a Controller. The informers must not have
// been started yet (the controller adds an index to the pod informer).
type ControllerOptions struct {
	Client    kubernetes.Interface
	Pods      coreinformers.PodInformer
	Nodes     coreinformers.NodeInformer
	Claims    resourceinformers.ResourceClaimInformer
	Slices    resourceinformers.ResourceSliceInformer
	Allocator Config
	// Defaults are the cluster's policies; pods override them by
	// annotation.
	Defaults Policies
	// FallbackAfter is how long an allocated pod may stay unschedulable
	// before its allocation is released to the scheduler.
	FallbackAfter time.Duration
	Recorder      record.EventRecorder
}

// Controller allocates the claims of pods that carry SchedulingGate,
// removes the gate, falls back to the scheduler when its choice does not
// work out, and releases allocations whose pods are gone. Run it on the
// elected leader only: it is the single decider that keeps GPUs from being
// booked twice.
type Controller struct {
	opts     ControllerOptions
	alloc    *Allocator
	pods     corelisters.PodLister
	podIndex cache.Indexer
	nodes    corelisters.NodeLister
	claims   resourcelisters.ResourceClaimLister
	slices   resourcelisters.ResourceSliceLister
	queue    workqueue.TypedRateLimitingInterface[key]
	synced   []cache.InformerSynced

	slicesChanged atomic.Bool
	now           func() time.Time

	// assumed holds pods placed by this controller and not yet bound, so
	// that node fit counts their CPU and memory.
	assumedMu sync.Mutex
	assumed   map[types.UID]assumedPod
}

type assumedPod struct {
	node     string
	requests corev1.ResourceList
}

// key names a pod or a claim in the work queue.
type key struct {
	claim           bool
	namespace, name string
}

// NewController wires the controller to the informers.
func NewController(opts ControllerOptions) (*Controller, error) {
	c := &Controller{
		opts:    opts,
		pods:    opts.Pods.Lister(),
		nodes:   opts.Nodes.Lister(),
		claims:  opts.Claims.Lister(),
		slices:  opts.Slices.Lister(),
		queue:   workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[key](), workqueue.TypedRateLimitingQueueConfig[key]{Name: "vgpu-policy-allocator"}),
		now:     time.Now,
		assumed: map[types.UID]assumedPod{},
	}
	cfg := opts.Allocator
	cfg.Fit = &NodeFit{Requested: c.requested}
	c.alloc = New(cfg)
	c.slicesChanged.Store(true)

	if err := opts.Pods.Informer().AddIndexers(cache.Indexers{nodeNameIndex: func(obj any) ([]string, error) {
		if pod, ok := obj.(*corev1.Pod); ok && pod.Spec.NodeName != "" {
			return []string{pod.Spec.NodeName}, nil
		}
		return nil, nil
	}}); err != nil {
		return nil, fmt.Errorf("index pods by node: %w", err)
	}
	c.podIndex = opts.Pods.Informer().GetIndexer()

	handlers := []struct {
		informer cache.SharedIndexInformer
		handler  cache.ResourceEventHandler
	}{
		{opts.Pods.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { c.podChanged(obj) },
			UpdateFunc: func(_, obj any) { c.podChanged(obj) },
			DeleteFunc: c.podDeleted,
		}},
		{opts.Claims.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { c.claimChanged(obj) },
			UpdateFunc: func(_, obj any) { c.claimChanged(obj) },
			DeleteFunc: c.claimDeleted,
		}},
		{opts.Slices.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { c.slicesChanged.Store(true) },
			UpdateFunc: func(any, any) { c.slicesChanged.Store(true) },
			DeleteFunc: func(any) { c.slicesChanged.Store(true) },
		}},
	}
	for _, h := range handlers {
		reg, err := h.informer.AddEventHandler(h.handler)
		if err != nil {
			return nil, fmt.Errorf("register event handler: %w", err)
		}
		c.synced = append(c.synced, reg.HasSynced)
	}
	c.synced = append(c.synced, opts.Nodes.Informer().HasSynced)
	return c, nil
}

// Run processes pods and claims until ctx ends. One worker: decisions are
// made one at a time, each on the state left by the previous one.
func (c *Controller) Run(ctx context.Context) {
	logger := klog.FromContext(ctx).WithName("policy-allocator")
	ctx = klog.NewContext(ctx, logger)
	defer c.queue.ShutDown()
	if !cache.WaitForNamedCacheSyncWithContext(ctx, c.synced...) {
		return
	}
	logger.Info("Policy allocator started", "nodePolicy", c.opts.Defaults.Node, "gpuPolicy", c.opts.Defaults.GPU)
	go func() {
		<-ctx.Done()
		c.queue.ShutDown()
	}()
	for c.processNext(ctx) {
	}
}

func (c *Controller) processNext(ctx context.Context) bool {
	k, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(k)
	var err error
	var retryAfter time.Duration
	if k.claim {
		err = c.syncClaim(ctx, k.namespace, k.name)
	} else {
		retryAfter, err = c.syncPod(ctx, k.namespace, k.name, c.queue.NumRequeues(k))
	}
	switch {
	case err != nil:
		klog.FromContext(ctx).Error(err, "Policy allocation failed; retrying", "claim", k.claim, "object", klog.KRef(k.namespace, k.name))
		c.queue.AddRateLimited(k)
	case retryAfter > 0:
		c.queue.Forget(k)
		c.queue.AddAfter(k, retryAfter)
	default:
		c.queue.Forget(k)
	}
	return true
}

func (c *Controller) podChanged(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	if pod.Spec.NodeName != "" {
		c.forgetPod(pod.UID)
		return
	}
	if hasGate(pod) || (len(pod.Spec.ResourceClaims) > 0 && unschedulable(pod) != nil) {
		c.queue.Add(key{namespace: pod.Namespace, name: pod.Name})
	}
}

func (c *Controller) podDeleted(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	c.forgetPod(pod.UID)
	for name := range resourceclaim.PodClaims(pod) {
		c.queue.Add(key{claim: true, namespace: pod.Namespace, name: name})
	}
}

func (c *Controller) claimChanged(obj any) {
	claim, ok := obj.(*resourceapi.ResourceClaim)
	if !ok {
		return
	}
	c.alloc.Observe(claim)
	if slices.Contains(claim.Finalizers, Finalizer) {
		c.queue.Add(key{claim: true, namespace: claim.Namespace, name: claim.Name})
	}
	if owner := metav1.GetControllerOf(claim); owner != nil && owner.Kind == "Pod" && claim.Status.Allocation == nil {
		// A claim generated for a gated pod: the pod can go on.
		c.queue.Add(key{namespace: claim.Namespace, name: owner.Name})
	}
}

func (c *Controller) claimDeleted(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if claim, ok := obj.(*resourceapi.ResourceClaim); ok {
		c.alloc.Forget(claim.UID)
	}
}

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
	nodes, err := c.candidateNodes(claims)
	if err != nil {
		return 0, err
	}
	if c.slicesChanged.Swap(false) {
		all, err := c.slices.List(labels.Everything())
		if err != nil {
			c.slicesChanged.Store(true)
			return 0, fmt.Errorf("list ResourceSlices: %w", err)
		}
		c.alloc.SetSlices(all)
	}

	decision, err := c.alloc.Allocate(ctx, Request{Pod: pod, Claims: unallocated, Nodes: nodes, Policies: policies})
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
			return 0, fmt.Errorf("write allocation of claim %s: %w", klog.KObj(claim), err)
		}
	}
	c.assumePod(pod, decision.Node)
	c.opts.Recorder.Eventf(pod, corev1.EventTypeNormal, ReasonAllocated, "Allocated %s on node %s (node policy %s, GPU policy %s, topology %s)",
		strings.Join(devicesOf(decision), ", "), decision.Node, policies.Node, policies.GPU, decision.Topology)
	return 0, c.ungate(ctx, pod)
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
	c.forgetPod(pod.UID)
	c.opts.Recorder.Eventf(pod, corev1.EventTypeWarning, ReasonReleased,
		"kube-scheduler could not place the pod where its claims were allocated by policy (%s); released claims %s so that kube-scheduler allocates them",
		cond.Message, strings.Join(names, ", "))
	return 0, nil
}

// releasePartial releases the pod's claims that this controller allocated
// and nobody uses yet. It reports whether there were any.
func (c *Controller) releasePartial(ctx context.Context, claims []*resourceapi.ResourceClaim) (bool, error) {
	released := false
	for _, claim := range claims {
		if !ownedAllocation(claim) || len(claim.Status.ReservedFor) > 0 {
			continue
		}
		if err := c.release(ctx, claim); err != nil {
			return released, err
		}
		released = true
	}
	return released, nil
}

// syncClaim releases a claim of ours once no pod needs it any more.
func (c *Controller) syncClaim(ctx context.Context, namespace, name string) error {
	claim, err := c.claims.ResourceClaims(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read claim %s/%s from the cache: %w", namespace, name, err)
	}
	if !slices.Contains(claim.Finalizers, Finalizer) || len(claim.Status.ReservedFor) > 0 {
		return nil
	}
	if claim.DeletionTimestamp == nil {
		inUse, err := c.claimWanted(claim)
		if err != nil || inUse {
			return err
		}
	}
	return c.release(klog.NewContext(ctx, klog.LoggerWithValues(klog.FromContext(ctx), "claim", klog.KObj(claim))), claim)
}

// claimWanted reports whether a pod that has not finished references the
// claim.
func (c *Controller) claimWanted(claim *resourceapi.ResourceClaim) (bool, error) {
	pods, err := c.pods.Pods(claim.Namespace).List(labels.Everything())
	if err != nil {
		return false, fmt.Errorf("list pods in %s: %w", claim.Namespace, err)
	}
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		for name := range resourceclaim.PodClaims(pod) {
			if name == claim.Name {
				return true, nil
			}
		}
	}
	return false, nil
}

// release removes the allocation (when nobody has reserved the claim) and
// then the finalizer, so the devices return and deletion can proceed.
func (c *Controller) release(ctx context.Context, claim *resourceapi.ResourceClaim) error {
	claims := c.opts.Client.ResourceV1().ResourceClaims(claim.Namespace)
	claim = claim.DeepCopy()
	if claim.Status.Allocation != nil {
		claim.Status.Allocation = nil
		updated, err := claims.UpdateStatus(ctx, claim, metav1.UpdateOptions{})
		if apierrors.IsNotFound(err) {
			c.alloc.Forget(claim.UID)
			return nil
		}
		if err != nil {
			return fmt.Errorf("release allocation of claim %s: %w", klog.KObj(claim), err)
		}
		claim = updated
	}
	c.alloc.Forget(claim.UID)
	claim.Finalizers = slices.DeleteFunc(claim.Finalizers, func(f string) bool { return f == Finalizer })
	if _, err := claims.Update(ctx, claim, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove finalizer %s from claim %s: %w", Finalizer, klog.KObj(claim), err)
	}
	klog.FromContext(ctx).V(2).Info("Released allocation", "claim", klog.KObj(claim))
	return nil
}

// requested sums the requests of the pods bound to the node and of those
// this controller placed there that are not bound yet.
func (c *Controller) requested(node string) corev1.ResourceList {
	total := corev1.ResourceList{}
	add := func(list corev1.ResourceList) {
		for name, q := range list {
			sum := total[name]
			sum.Add(q)
			total[name] = sum
		}
		pods := total[corev1.ResourcePods]
		pods.Add(*resource.NewQuantity(1, resource.DecimalSI))
		total[corev1.ResourcePods] = pods
	}
	objs, err := c.podIndex.ByIndex(nodeNameIndex, node)
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("pods on node %s: %w", node, err))
	}
	for _, obj := range objs {
		pod, ok := obj.(*corev1.Pod)
		if !ok || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		add(resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}))
	}
	c.assumedMu.Lock()
	defer c.assumedMu.Unlock()
	for _, p := range c.assumed {
		if p.node == node {
			add(p.requests)
		}
	}
	return total
}

func (c *Controller) assumePod(pod *corev1.Pod, node string) {
	c.assumedMu.Lock()
	defer c.assumedMu.Unlock()
	c.assumed[pod.UID] = assumedPod{node: node, requests: resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})}
}

func (c *Controller) forgetPod(uid types.UID) {
	c.assumedMu.Lock()
	defer c.assumedMu.Unlock()
	delete(c.assumed, uid)
}

// Enqueue queues every gated pod and every claim carrying the finalizer;
// after a restart this finishes what a previous leader left half done.
func (c *Controller) Enqueue() error {
	pods, err := c.pods.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("list pods: %w", err)
	}
	for _, pod := range pods {
		c.podChanged(pod)
	}
	claims, err := c.claims.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("list claims: %w", err)
	}
	for _, claim := range claims {
		if slices.Contains(claim.Finalizers, Finalizer) {
			c.queue.Add(key{claim: true, namespace: claim.Namespace, name: claim.Name})
		}
	}
	return nil
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

// ownedAllocation reports whether the claim holds an allocation written by
// this controller.
func ownedAllocation(claim *resourceapi.ResourceClaim) bool {
	return claim.Status.Allocation != nil && slices.Contains(claim.Finalizers, Finalizer)
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
