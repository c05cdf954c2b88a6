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

package reclaim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// ClaimRef names a ResourceClaim; UID tells it from a later claim of the
// same name.
type ClaimRef struct {
	Namespace, Name string
	UID             types.UID
}

// String is namespace/name, as Events and errors spell a claim; empty for
// the zero ClaimRef.
func (c ClaimRef) String() string {
	if c.Name == "" {
		return ""
	}
	return c.Namespace + "/" + c.Name
}

// Reasons of the Events the Evictor raises.
const (
	// ReasonBurstReclaimed (Normal) is on a pod evicted to give its
	// claim's burst back.
	ReasonBurstReclaimed = "MemoryBurstReclaimed"
	// ReasonWaitingForBurst (Normal) is on the pods of the claim that
	// waits for the burst to be given back.
	ReasonWaitingForBurst = "WaitingForMemoryBurst"
	// ReasonReclaimFailed (Warning) is on a pod whose eviction was refused
	// or failed, and on the pods of the claim waiting for it.
	ReasonReclaimFailed = "MemoryBurstReclaimFailed"
	// ReasonReclaimForced (Warning) is on a pod deleted with the class's
	// reclaim grace period because its eviction was refused (a
	// PodDisruptionBudget: 429) or because it was already terminating
	// with a longer grace period, and (Normal) on the pods of the claim
	// waiting for it: burst is lent, so neither may keep it.
	ReasonReclaimForced = "MemoryBurstReclaimForced"
	// ReasonMemoryShort (Warning) is on the pods of a claim whose
	// guarantee does not fit even with every burst reclaimed
	// (burstgrant.Decision.Short).
	ReasonMemoryShort = "GPUMemoryShort"
)

// Results of vgpu_dra_burst_evictions_total.
const (
	ResultEvicted = "evicted"
	ResultRefused = "refused" // 429: a PodDisruptionBudget does not allow it now
	ResultFailed  = "failed"
	// ResultDeleted counts pods deleted with the reclaim grace period
	// after a refused eviction, or whose longer deletion grace period was
	// shortened to it.
	ResultDeleted = "deleted"
	// ResultKilled counts pods whose processes were killed on the node
	// because they outlived their deletion's deadline (Options.KillPod).
	ResultKilled = "killed"
)

// DefaultMaxRetryAge is how long a failed reclaim is retried: the burst
// grant book stops counting a waiting guarantee 10 minutes after its last
// admission (burstgrant.DefaultPendingTTL), and the kubelet's retries of
// prepare call Reclaim again while the pod still waits.
const DefaultMaxRetryAge = 10 * time.Minute

// Options configure an Evictor. Client and Recorder are required.
type Options struct {
	// Client reads claims and pods (where no lister is given) and evicts.
	Client kubernetes.Interface
	// Recorder receives the Events, with pods as their objects.
	Recorder record.EventRecorder
	// Claims and Pods, when set, are read instead of the API server (an
	// informer's listers); an object the lister does not have yet is
	// read from the API server.
	Claims resourcelisters.ResourceClaimLister
	Pods   corelisters.PodLister
	// OnFailure, when set, is called for each failed attempt to reclaim a
	// claim's burst (refused or failed), before it is retried.
	OnFailure func(ctx context.Context, claim ClaimRef, err error)
	// RateLimiter spaces the retries of a claim; default the
	// controller rate limiter of client-go (exponential from 5 ms to
	// 1000 s, and an overall bucket).
	RateLimiter workqueue.TypedRateLimiter[types.UID]
	// MaxRetryAge drops a retry this long after the Reclaim that asked
	// for it; default DefaultMaxRetryAge.
	MaxRetryAge time.Duration
	// Registerer, when set, gets vgpu_dra_burst_evictions_total.
	Registerer prometheus.Registerer
	// KillPod, when set, ends the processes of a pod on this node (the
	// host side of a deletion): called for a pod of a claim to reclaim
	// from that outlives its deletion's deadline. A kubelet that began
	// stopping a pod with a long grace period does not stop it sooner when
	// the deletion is shortened, so the shortened deadline is kept here.
	// It returns how many processes it signalled.
	KillPod func(ctx context.Context, pod *corev1.Pod) (int, error)
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// killSlack is how long past its deletion's deadline a pod of a claim to
// reclaim from may still run before KillPod ends it: the kubelet's own
// kill at the deadline goes first.
const killSlack = 5 * time.Second

// request is what is to be reclaimed from one claim.
type request struct {
	from    ClaimRef
	needing ClaimRef
	gpu     string
	bytes   uint64
	grace   time.Duration
	since   time.Time
}

// Evictor evicts the pods of claims whose burst is reclaimed. Its methods
// are safe for concurrent use.
type Evictor struct {
	opts      Options
	queue     workqueue.TypedRateLimitingInterface[types.UID]
	evictions *prometheus.CounterVec

	mu sync.Mutex
	// retries holds, per claim to reclaim from, the request being
	// attempted or that a failed attempt left to retry (the queue then
	// holds its UID).
	retries map[types.UID]request
}

// New returns an Evictor; Run must be running for failed reclaims to be
// retried.
func New(opts Options) (*Evictor, error) {
	if opts.Client == nil || opts.Recorder == nil {
		return nil, errors.New("reclaim: Client and Recorder are required")
	}
	if opts.RateLimiter == nil {
		opts.RateLimiter = workqueue.DefaultTypedControllerRateLimiter[types.UID]()
	}
	if opts.MaxRetryAge <= 0 {
		opts.MaxRetryAge = DefaultMaxRetryAge
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	e := &Evictor{
		opts: opts,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(opts.RateLimiter,
			workqueue.TypedRateLimitingQueueConfig[types.UID]{Name: "burst-reclaim"}),
		evictions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vgpu_dra_burst_evictions_total",
			Help: "Pods evicted to reclaim memory burst for a claim that needs its guarantee, by result (evicted, refused by a PodDisruptionBudget, deleted with the reclaim grace period after a refusal or to shorten a longer deletion, failed).",
		}, []string{"result"}),
		retries: map[types.UID]request{},
	}
	for _, r := range []string{ResultEvicted, ResultRefused, ResultDeleted, ResultFailed} {
		e.evictions.WithLabelValues(r)
	}
	if opts.Registerer != nil {
		if err := opts.Registerer.Register(e.evictions); err != nil {
			return nil, fmt.Errorf("registering vgpu_dra_burst_evictions_total: %w", err)
		}
	}
	return e, nil
}

// Reclaim evicts the pods of each claim in from, so that bytes of GPU
// gpuUUID held as their burst come back for the guarantee of needing (the
// zero ClaimRef when no claim waits: driver overhead or use outside
// claims grew), each eviction with grace as its grace period. A pod whose
// eviction is refused (a PodDisruptionBudget) is deleted with grace, and
// so is a terminating pod whose own grace period is longer. Pods that are
// gone, finished or terminating within grace are left alone, so calling it
// again for the same claims evicts nothing twice. The pods of needing get an Event
// naming each claim they wait for. A claim whose eviction is refused or
// fails is reported to OnFailure, gets Warning Events, and is retried with
// backoff by Run; a claim already waiting for such a retry is left to it.
// The returned error joins this call's failures.
func (e *Evictor) Reclaim(ctx context.Context, needing ClaimRef, from []ClaimRef, gpuUUID string, bytes uint64, grace time.Duration) error {
	if grace < 0 {
		return fmt.Errorf("reclaim: negative grace period %s", grace)
	}
	needingPods, err := e.podsOf(ctx, needing)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Pods of the claim waiting for burst", "claim", needing.String())
	}
	var errs []error
	for _, c := range from {
		req := request{from: c, needing: needing, gpu: gpuUUID, bytes: bytes, grace: grace, since: e.opts.Now()}
		for _, p := range needingPods {
			e.opts.Recorder.Eventf(p, corev1.EventTypeNormal, ReasonWaitingForBurst,
				"waiting for %s of GPU %s held as burst by claim %s (what the guarantee misses next to the guarantees, grants and settled use outside claims there)",
				formatBytes(bytes), gpuUUID, c)
		}
		e.mu.Lock()
		prev, busy := e.retries[c.UID]
		if busy {
			// Being attempted or waiting for its retry, which has its
			// backoff; the newest request names the claim now waiting.
			req.since = prev.since
		}
		// Entered before the attempt, so that a concurrent call for the
		// same claim leaves it to this one.
		e.retries[c.UID] = req
		e.mu.Unlock()
		if busy {
			continue
		}
		recheck, err := e.attempt(ctx, req, needingPods)
		if err != nil {
			errs = append(errs, err)
			e.queue.AddRateLimited(c.UID)
			continue
		}
		if recheck > 0 {
			e.queue.AddAfter(c.UID, recheck)
			continue
		}
		e.mu.Lock()
		if cur, ok := e.retries[c.UID]; ok && cur.since.Equal(req.since) {
			delete(e.retries, c.UID)
		}
		e.mu.Unlock()
	}
	return errors.Join(errs...)
}

// Short tells the pods of needing that bytes of GPU gpuUUID are missing
// for its guarantee that reclaiming burst cannot free (memory booked
// twice or used outside claims, burstgrant.Decision.Short), with a Warning
// Event.
func (e *Evictor) Short(ctx context.Context, needing ClaimRef, gpuUUID string, bytes uint64) {
	pods, err := e.podsOf(ctx, needing)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Pods of the claim short of memory", "claim", needing.String())
	}
	for _, p := range pods {
		e.opts.Recorder.Eventf(p, corev1.EventTypeWarning, ReasonMemoryShort,
			"GPU %s is short of %s for the guarantee of claim %s that reclaiming burst cannot free (memory booked twice or used outside claims)",
			gpuUUID, formatBytes(bytes), needing)
	}
}

// Cancel drops a pending retry of reclaiming from a claim (it was
// unprepared, its burst is back, or nothing waits for it any more).
func (e *Evictor) Cancel(uid types.UID) {
	e.mu.Lock()
	delete(e.retries, uid)
	e.mu.Unlock()
	e.queue.Forget(uid)
}

// Run retries failed reclaims until ctx is done.
func (e *Evictor) Run(ctx context.Context) {
	go func() {
		<-ctx.Done()
		e.queue.ShutDown()
	}()
	for e.processNext(ctx) {
	}
}

// processNext retries one queued claim; false once the queue is shut down.
func (e *Evictor) processNext(ctx context.Context) bool {
	uid, shutdown := e.queue.Get()
	if shutdown {
		return false
	}
	defer e.queue.Done(uid)
	e.mu.Lock()
	req, ok := e.retries[uid]
	e.mu.Unlock()
	if !ok {
		e.queue.Forget(uid)
		return true
	}
	if e.opts.Now().Sub(req.since) > e.opts.MaxRetryAge {
		klog.FromContext(ctx).Info("Giving up reclaiming burst", "claim", req.from.String(), "for", req.needing.String(), "since", req.since)
		e.Cancel(uid)
		return true
	}
	needingPods, err := e.podsOf(ctx, req.needing)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Pods of the claim waiting for burst", "claim", req.needing.String())
	}
	recheck, err := e.attempt(ctx, req, needingPods)
	if err != nil {
		e.queue.AddRateLimited(uid)
		return true
	}
	if recheck > 0 {
		// A pod is still terminating: looked at again at its deadline.
		e.queue.Forget(uid)
		e.queue.AddAfter(uid, recheck)
		return true
	}
	e.mu.Lock()
	if cur, ok := e.retries[uid]; ok && cur.since.Equal(req.since) {
		delete(e.retries, uid)
	}
	e.mu.Unlock()
	e.queue.Forget(uid)
	return true
}

// attempt evicts the pods of req.from that are still running. A pod whose
// eviction is refused (a PodDisruptionBudget: 429), or that is already
// terminating with a grace period longer than req.grace, is deleted with
// req.grace: burst is lent, and neither a budget nor the tenant's own
// grace period may keep it past the class's bound. A pod still running
// killSlack past its deletion's deadline has its processes ended on the
// host (KillPod). recheck, when positive, is when a pod still terminating
// is to be looked at again. A failure is counted, reported to OnFailure
// and raised as Warning Events.
func (e *Evictor) attempt(ctx context.Context, req request, needingPods []*corev1.Pod) (recheck time.Duration, err error) {
	logger := klog.FromContext(ctx)
	pods, err := e.podsOf(ctx, req.from)
	if err != nil {
		err = fmt.Errorf("reclaiming burst of claim %s: %w", req.from, err)
		e.fail(ctx, req, nil, needingPods, err)
		return 0, err
	}
	// Only a pod that KillPod could end is worth looking at again.
	later := func(d time.Duration) {
		if e.opts.KillPod != nil && (recheck == 0 || d < recheck) {
			recheck = d
		}
	}
	var errs []error
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			own := p.DeletionGracePeriodSeconds
			if own == nil || time.Duration(*own)*time.Second <= req.grace {
				// Its deletion ends within the bound, unless the pod
				// outlives the deadline.
				if left := p.DeletionTimestamp.Add(killSlack).Sub(e.opts.Now()); left > 0 {
					later(left)
				} else if err := e.kill(ctx, req, p, needingPods); err != nil {
					errs = append(errs, err)
				}
				continue
			}
			why := fmt.Sprintf("the pod was terminating with grace period %s, longer than the class's reclaim grace period %s",
				time.Duration(*own)*time.Second, req.grace)
			if err := e.force(ctx, req, p, needingPods, why); err != nil {
				errs = append(errs, err)
			}
			later(req.grace + killSlack)
			continue
		}
		err := e.evict(ctx, p, req.grace)
		switch {
		case err == nil:
			e.evictions.WithLabelValues(ResultEvicted).Inc()
			logger.Info("Evicted pod to reclaim memory burst", "pod", klog.KObj(p), "claim", req.from.String(),
				"gpu", req.gpu, "for", req.needing.String(), "grace", req.grace)
			if req.needing.Name == "" {
				e.opts.Recorder.Eventf(p, corev1.EventTypeNormal, ReasonBurstReclaimed,
					"memory burst reclaimed on GPU %s for memory the driver or processes outside claims took", req.gpu)
			} else {
				e.opts.Recorder.Eventf(p, corev1.EventTypeNormal, ReasonBurstReclaimed,
					"memory burst reclaimed for claim %s on GPU %s", req.needing, req.gpu)
			}
		case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
			// Gone, or replaced by a pod of the same name (the UID
			// precondition): not this claim's pod any more.
		case apierrors.IsTooManyRequests(err):
			e.evictions.WithLabelValues(ResultRefused).Inc()
			why := fmt.Sprintf("its eviction was refused (%v)", err)
			if err := e.force(ctx, req, p, needingPods, why); err != nil {
				errs = append(errs, err)
			}
			later(req.grace + killSlack)
		default:
			e.evictions.WithLabelValues(ResultFailed).Inc()
			err = fmt.Errorf("evicting pod %s/%s of claim %s: %w", p.Namespace, p.Name, req.from, err)
			e.fail(ctx, req, p, needingPods, err)
			errs = append(errs, err)
		}
	}
	return recheck, errors.Join(errs...)
}

// kill ends the processes of a pod of req.from that outlived its
// deletion's deadline, on the host (Options.KillPod), and says so on the
// pod and on the pods waiting.
func (e *Evictor) kill(ctx context.Context, req request, p *corev1.Pod, needingPods []*corev1.Pod) error {
	if e.opts.KillPod == nil {
		return nil
	}
	n, err := e.opts.KillPod(ctx, p)
	if err != nil {
		e.evictions.WithLabelValues(ResultFailed).Inc()
		err = fmt.Errorf("killing the processes of pod %s/%s of claim %s past its deletion's deadline: %w", p.Namespace, p.Name, req.from, err)
		e.fail(ctx, req, p, needingPods, err)
		return err
	}
	if n == 0 {
		return nil
	}
	e.evictions.WithLabelValues(ResultKilled).Inc()
	klog.FromContext(ctx).Info("Killed the processes of a pod past its deletion's deadline to reclaim memory burst", "pod", klog.KObj(p),
		"processes", n, "claim", req.from.String(), "gpu", req.gpu, "for", req.needing.String())
	e.opts.Recorder.Eventf(p, corev1.EventTypeWarning, ReasonReclaimForced,
		"%d processes killed on the node to reclaim memory burst on GPU %s: the pod was still running %s after its deletion's deadline",
		n, req.gpu, killSlack)
	for _, w := range needingPods {
		e.opts.Recorder.Eventf(w, corev1.EventTypeNormal, ReasonReclaimForced,
			"the processes of pod %s/%s of claim %s killed on the node to give back memory burst on GPU %s: it outlived its deletion's deadline",
			p.Namespace, p.Name, req.from, req.gpu)
	}
	return nil
}

// force deletes a pod of req.from with req.grace, as the kubelet's
// node-pressure eviction does regardless of PodDisruptionBudgets, and says
// why on the pod and on the pods waiting; a failed deletion is a failed
// attempt.
func (e *Evictor) force(ctx context.Context, req request, p *corev1.Pod, needingPods []*corev1.Pod, why string) error {
	err := e.deleteWithin(ctx, p, req.grace)
	switch {
	case err == nil:
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		return nil
	default:
		e.evictions.WithLabelValues(ResultFailed).Inc()
		err = fmt.Errorf("deleting pod %s/%s of claim %s after %s: %w", p.Namespace, p.Name, req.from, why, err)
		e.fail(ctx, req, p, needingPods, err)
		return err
	}
	e.evictions.WithLabelValues(ResultDeleted).Inc()
	klog.FromContext(ctx).Info("Deleted pod to reclaim memory burst", "pod", klog.KObj(p), "claim", req.from.String(),
		"gpu", req.gpu, "for", req.needing.String(), "grace", req.grace, "why", why)
	forWhat := "for memory the driver or processes outside claims took"
	if req.needing.Name != "" {
		forWhat = "for claim " + req.needing.String()
	}
	e.opts.Recorder.Eventf(p, corev1.EventTypeWarning, ReasonReclaimForced,
		"deleted with grace period %s to reclaim memory burst on GPU %s %s, because %s: memory above a claim's guarantee is lent and taken back within the class's reclaim grace period",
		req.grace, req.gpu, forWhat, why)
	for _, w := range needingPods {
		e.opts.Recorder.Eventf(w, corev1.EventTypeNormal, ReasonReclaimForced,
			"pod %s/%s of claim %s deleted with grace period %s to give back memory burst on GPU %s, because %s",
			p.Namespace, p.Name, req.from, req.grace, req.gpu, why)
	}
	return nil
}

// fail reports a failed attempt: OnFailure, a Warning Event on the pod
// that was not evicted (when known) and on the pods waiting.
func (e *Evictor) fail(ctx context.Context, req request, pod *corev1.Pod, needingPods []*corev1.Pod, err error) {
	klog.FromContext(ctx).Error(err, "Reclaiming memory burst", "claim", req.from.String(), "gpu", req.gpu, "for", req.needing.String())
	if e.opts.OnFailure != nil {
		e.opts.OnFailure(ctx, req.from, err)
	}
	if pod != nil {
		e.opts.Recorder.Eventf(pod, corev1.EventTypeWarning, ReasonReclaimFailed,
			"memory burst on GPU %s needed by claim %s not reclaimed, will retry: %v", req.gpu, req.needing, err)
	}
	for _, p := range needingPods {
		e.opts.Recorder.Eventf(p, corev1.EventTypeWarning, ReasonReclaimFailed,
			"memory burst of claim %s on GPU %s not reclaimed yet, will retry: %v", req.from, req.gpu, err)
	}
}

// evict asks the Eviction API to evict the pod, only that pod (a UID
// precondition), with the grace period.
func (e *Evictor) evict(ctx context.Context, p *corev1.Pod, grace time.Duration) error {
	seconds := int64(grace / time.Second)
	uid := p.UID
	return e.opts.Client.PolicyV1().Evictions(p.Namespace).Evict(ctx, &policyv1.Eviction{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name},
		DeleteOptions: &metav1.DeleteOptions{
			GracePeriodSeconds: &seconds,
			Preconditions:      &metav1.Preconditions{UID: &uid},
		},
	})
}

// deleteWithin deletes the pod, only that pod (a UID precondition), with
// the grace period; on a pod already terminating with a longer one the API
// server shortens it (a kubelet already stopping the pod may not honour
// the shorter one: attempt kills what outlives it).
func (e *Evictor) deleteWithin(ctx context.Context, p *corev1.Pod, grace time.Duration) error {
	seconds := int64(grace / time.Second)
	uid := p.UID
	return e.opts.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &seconds,
		Preconditions:      &metav1.Preconditions{UID: &uid},
	})
}

// podsOf returns the pods a claim is reserved for that still exist and
// have not finished. A claim that is gone, or replaced by one of the same
// name, has none, and so has the empty ClaimRef (no claim: driver
// overhead or use outside claims grew).
func (e *Evictor) podsOf(ctx context.Context, ref ClaimRef) ([]*corev1.Pod, error) {
	if ref.Name == "" {
		return nil, nil
	}
	claim, err := e.claim(ctx, ref)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading claim %s: %w", ref, err)
	}
	if ref.UID != "" && claim.UID != ref.UID {
		return nil, nil
	}
	var pods []*corev1.Pod
	var errs []error
	for _, r := range claim.Status.ReservedFor {
		if r.APIGroup != "" || r.Resource != "pods" {
			continue
		}
		p, err := e.pod(ctx, ref.Namespace, r.Name)
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			errs = append(errs, fmt.Errorf("reading pod %s/%s: %w", ref.Namespace, r.Name, err))
			continue
		}
		if p.UID != r.UID || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		pods = append(pods, p)
	}
	slices.SortFunc(pods, func(a, b *corev1.Pod) int { return cmp.Compare(a.Name, b.Name) })
	return pods, errors.Join(errs...)
}

func (e *Evictor) claim(ctx context.Context, ref ClaimRef) (*resourceapi.ResourceClaim, error) {
	if e.opts.Claims != nil {
		if c, err := e.opts.Claims.ResourceClaims(ref.Namespace).Get(ref.Name); err == nil && (ref.UID == "" || c.UID == ref.UID) {
			return c, nil
		}
	}
	return e.opts.Client.ResourceV1().ResourceClaims(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
}

func (e *Evictor) pod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	if e.opts.Pods != nil {
		if p, err := e.opts.Pods.Pods(namespace).Get(name); err == nil {
			return p, nil
		}
	}
	return e.opts.Client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
}

// formatBytes spells bytes as a Kubernetes quantity: 4Gi, 1536Mi.
func formatBytes(b uint64) string {
	if b > 1<<62 {
		return fmt.Sprintf("%d", b)
	}
	return resource.NewQuantity(int64(b), resource.BinarySI).String()
}
