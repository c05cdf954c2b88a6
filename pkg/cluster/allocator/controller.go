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
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	coreinformers "k8s.io/client-go/informers/core/v1"
	resourceinformers "k8s.io/client-go/informers/resource/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
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
	// maxRetries bounds retries of a pod whose allocation keeps failing
	// with an error (not "does not fit"); then the scheduler takes over.
	maxRetries = 5
	// missingClaimRetry is how soon a pod whose claims do not exist yet is
	// looked at again, besides the claim events that also trigger it.
	missingClaimRetry = 5 * time.Second
	// retryAfterRelease is how soon a pod is allocated afresh after its
	// partial allocation was released.
	retryAfterRelease = time.Second
	// inFlightRetry is how soon a pod whose claim another decision is
	// still writing is looked at again.
	inFlightRetry = 200 * time.Millisecond
	// DefaultWorkers is the default of ControllerOptions.Workers.
	DefaultWorkers = 4
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
	// Workers is how many pods and claims are worked on at once (0:
	// DefaultWorkers). Decisions are still made one at a time; the API
	// writes that follow each one overlap.
	Workers int
}

// Controller allocates the claims of pods that carry SchedulingGate,
// removes the gate, falls back to the scheduler when its choice does not
// work out, and releases allocations whose pods are gone. Run it on the
// elected leader only: it is the single decider that keeps GPUs from being
// booked twice.
type Controller struct {
	opts   ControllerOptions
	alloc  *Allocator
	pods   corelisters.PodLister
	nodes  corelisters.NodeLister
	claims resourcelisters.ResourceClaimLister
	slices resourcelisters.ResourceSliceLister
	queue  workqueue.TypedRateLimitingInterface[key]
	synced []cache.InformerSynced

	slicesChanged atomic.Bool
	now           func() time.Time

	// decideMu makes decisions one at a time (see decide).
	decideMu sync.Mutex

	// bound counts the requests of bound pods per node, and placed those
	// of pods this controller placed and that are not bound yet, so that
	// node fit counts their CPU and memory.
	bound, placed *nodeRequests
}

// key names a pod or a claim in the work queue.
type key struct {
	claim           bool
	namespace, name string
}

// NewController wires the controller to the informers.
func NewController(opts ControllerOptions) (*Controller, error) {
	c := &Controller{
		opts:   opts,
		pods:   opts.Pods.Lister(),
		nodes:  opts.Nodes.Lister(),
		claims: opts.Claims.Lister(),
		slices: opts.Slices.Lister(),
		queue:  workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[key](), workqueue.TypedRateLimitingQueueConfig[key]{Name: "vgpu-policy-allocator"}),
		now:    time.Now,
		bound:  newNodeRequests(),
		placed: newNodeRequests(),
	}
	cfg := opts.Allocator
	cfg.Fit = &NodeFit{Requested: c.requested}
	c.alloc = New(cfg)
	c.slicesChanged.Store(true)

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

// Run processes pods and claims until ctx ends, with Workers workers. The
// work queue never hands one pod or claim to two workers at once, and
// decisions are made one at a time, each on the state left by the previous
// one; only the API writes overlap.
func (c *Controller) Run(ctx context.Context) {
	logger := klog.FromContext(ctx).WithName("policy-allocator")
	ctx = klog.NewContext(ctx, logger)
	defer c.queue.ShutDown()
	if !cache.WaitForNamedCacheSyncWithContext(ctx, c.synced...) {
		return
	}
	workers := c.opts.Workers
	if workers <= 0 {
		workers = DefaultWorkers
	}
	logger.Info("Policy allocator started", "nodePolicy", c.opts.Defaults.Node, "gpuPolicy", c.opts.Defaults.GPU, "workers", workers)
	go func() {
		<-ctx.Done()
		c.queue.ShutDown()
	}()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for c.processNext(ctx) {
			}
		})
	}
	wg.Wait()
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
	c.observeBinding(pod)
	if pod.Spec.NodeName != "" {
		c.placed.remove(pod.UID)
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
	c.bound.remove(pod.UID)
	c.placed.remove(pod.UID)
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
