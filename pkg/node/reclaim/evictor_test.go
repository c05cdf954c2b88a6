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
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2/ktesting"
)

const gpuUUID = "GPU-11111111-2222-3333-4444-555555555555"

// event is one Event as the recorder got it.
type event struct{ pod, kind, reason, message string }

// recorder keeps the Events with the name of their pod.
type recorder struct {
	mu     sync.Mutex
	events []event
}

func (r *recorder) Event(obj runtime.Object, kind, reason, message string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, event{obj.(*corev1.Pod).Name, kind, reason, message})
}

func (r *recorder) Eventf(obj runtime.Object, kind, reason, format string, args ...any) {
	r.Event(obj, kind, reason, fmt.Sprintf(format, args...))
}

func (r *recorder) AnnotatedEventf(obj runtime.Object, _ map[string]string, kind, reason, format string, args ...any) {
	r.Eventf(obj, kind, reason, format, args...)
}

func (r *recorder) list() []event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]event(nil), r.events...)
}

func (r *recorder) withReason(reason string) []event {
	var out []event
	for _, e := range r.list() {
		if e.reason == reason {
			out = append(out, e)
		}
	}
	return out
}

// cluster is a fake API server with claims and their pods, and a reactor
// for evictions that answers what answer says.
type cluster struct {
	client *fake.Clientset
	mu     sync.Mutex
	// evictions lists the evictions asked for, in order.
	evictions []*policyv1.Eviction
	// answer decides the answer of each eviction; nil evicts.
	answer func(e *policyv1.Eviction) error
	// deletes lists the pod deletions asked for, in order.
	deletes []k8stesting.DeleteAction
	// deleteErr, when set, is the answer of every pod deletion.
	deleteErr error
}

func newCluster(objs ...runtime.Object) *cluster {
	c := &cluster{client: fake.NewClientset(objs...)}
	c.client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		ev := a.(k8stesting.CreateAction).GetObject().(*policyv1.Eviction)
		c.mu.Lock()
		c.evictions = append(c.evictions, ev.DeepCopy())
		answer := c.answer
		c.mu.Unlock()
		if answer != nil {
			if err := answer(ev); err != nil {
				return true, nil, err
			}
		}
		return true, nil, nil
	})
	c.client.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.deletes = append(c.deletes, a.(k8stesting.DeleteAction))
		if c.deleteErr != nil {
			return true, nil, c.deleteErr
		}
		return false, nil, nil
	})
	return c
}

// deleted lists the pods deleted, each with its grace period in seconds.
func (c *cluster) deleted() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, d := range c.deletes {
		o := d.GetDeleteOptions()
		grace := "none"
		if o.GracePeriodSeconds != nil {
			grace = fmt.Sprint(*o.GracePeriodSeconds)
		}
		out = append(out, d.GetNamespace()+"/"+d.GetName()+" grace "+grace)
	}
	return out
}

func (c *cluster) evicted() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, e := range c.evictions {
		out = append(out, e.Namespace+"/"+e.Name)
	}
	return out
}

func (c *cluster) setAnswer(f func(e *policyv1.Eviction) error) {
	c.mu.Lock()
	c.answer = f
	c.mu.Unlock()
}

func claimOf(ns, name string, pods ...*corev1.Pod) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name)}}
	for _, p := range pods {
		c.Status.ReservedFor = append(c.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: p.Name, UID: p.UID})
	}
	return c
}

func ref(c *resourceapi.ResourceClaim) ClaimRef {
	return ClaimRef{Namespace: c.Namespace, Name: c.Name, UID: c.UID}
}

func podOf(ns, name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name)},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
}

// fixture: claim "burst" (pods a1, a2) holds burst; claim "needs" (pod b)
// waits for its guarantee.
type fixture struct {
	t            *testing.T
	cluster      *cluster
	rec          *recorder
	ev           *Evictor
	burst, needs *resourceapi.ResourceClaim
	a1, a2, b    *corev1.Pod
	failures     []ClaimRef
	failMu       sync.Mutex
	registry     *prometheus.Registry
}

func newFixture(t *testing.T, opts ...func(*Options)) *fixture {
	f := &fixture{t: t, a1: podOf("ns", "a1"), a2: podOf("ns", "a2"), b: podOf("ns", "b"), rec: &recorder{},
		registry: prometheus.NewRegistry()}
	f.burst = claimOf("ns", "burst", f.a1, f.a2)
	f.needs = claimOf("ns", "needs", f.b)
	f.cluster = newCluster(f.burst, f.needs, f.a1, f.a2, f.b)
	o := Options{
		Client: f.cluster.client, Recorder: f.rec, Registerer: f.registry,
		RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[types.UID](time.Millisecond, 5*time.Millisecond),
		OnFailure: func(_ context.Context, c ClaimRef, _ error) {
			f.failMu.Lock()
			f.failures = append(f.failures, c)
			f.failMu.Unlock()
		},
	}
	for _, opt := range opts {
		opt(&o)
	}
	ev, err := New(o)
	require.NoError(t, err)
	f.ev = ev
	return f
}

// terminating marks pod name as being deleted at deadline with a grace
// period of graceSeconds, as the API server records a deletion.
func (f *fixture) terminating(name string, deadline time.Time, graceSeconds int64) {
	f.t.Helper()
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	obj, err := f.cluster.client.Tracker().Get(gvr, "ns", name)
	require.NoError(f.t, err)
	p := obj.(*corev1.Pod).DeepCopy()
	p.DeletionTimestamp = &metav1.Time{Time: deadline}
	p.DeletionGracePeriodSeconds = &graceSeconds
	require.NoError(f.t, f.cluster.client.Tracker().Update(gvr, p, "ns"))
}

// assertForced checks the two ReclaimForced Events: on the burster's pod
// a1 and on the waiting pod b.
func (f *fixture) assertForced(onA1, onB string) {
	f.t.Helper()
	forced := f.rec.withReason(ReasonReclaimForced)
	require.Len(f.t, forced, 2)
	assert.Equal(f.t, "a1", forced[0].pod)
	assert.Contains(f.t, forced[0].message, onA1)
	assert.Equal(f.t, "b", forced[1].pod)
	assert.Contains(f.t, forced[1].message, onB)
}

func (f *fixture) failed() []ClaimRef {
	f.failMu.Lock()
	defer f.failMu.Unlock()
	return append([]ClaimRef(nil), f.failures...)
}

func (f *fixture) count(result string) float64 {
	return testutil.ToFloat64(f.ev.evictions.WithLabelValues(result))
}

func TestReclaimEvictsWithGraceAndEvents(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	f := newFixture(t)
	require.NoError(t, f.ev.Reclaim(ctx, ref(f.needs), []ClaimRef{ref(f.burst)}, gpuUUID, 4<<30, 45*time.Second))

	assert.Equal(t, []string{"ns/a1", "ns/a2"}, f.cluster.evicted())
	for i, e := range f.cluster.evictions {
		require.NotNil(t, e.DeleteOptions)
		assert.Equal(t, int64(45), *e.DeleteOptions.GracePeriodSeconds, "grace of eviction %d", i)
		require.NotNil(t, e.DeleteOptions.Preconditions)
		assert.Equal(t, types.UID("uid-a"+fmt.Sprint(i+1)), *e.DeleteOptions.Preconditions.UID, "only that pod is evicted")
	}
	assert.Equal(t, []event{
		{"b", corev1.EventTypeNormal, ReasonWaitingForBurst, "waiting for 4Gi of GPU " + gpuUUID + " held as burst by claim ns/burst" +
			" (what the guarantee misses next to the guarantees, grants and settled use outside claims there)"},
		{"a1", corev1.EventTypeNormal, ReasonBurstReclaimed, "memory burst reclaimed for claim ns/needs on GPU " + gpuUUID},
		{"a2", corev1.EventTypeNormal, ReasonBurstReclaimed, "memory burst reclaimed for claim ns/needs on GPU " + gpuUUID},
	}, f.rec.list())
	assert.Equal(t, 2.0, f.count(ResultEvicted))
	assert.Equal(t, 0.0, f.count(ResultRefused))
	assert.Empty(t, f.failed())

	n, err := testutil.GatherAndCount(f.registry, "vgpu_dra_burst_evictions_total")
	require.NoError(t, err)
	assert.Equal(t, 4, n, "one series per result")
}

func TestReclaimGraceZero(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	f := newFixture(t)
	require.NoError(t, f.ev.Reclaim(ctx, ref(f.needs), []ClaimRef{ref(f.burst)}, gpuUUID, 1<<30, 0))
	require.Len(t, f.cluster.evictions, 2)
	assert.Equal(t, int64(0), *f.cluster.evictions[0].DeleteOptions.GracePeriodSeconds)
	assert.Error(t, f.ev.Reclaim(ctx, ref(f.needs), []ClaimRef{ref(f.burst)}, gpuUUID, 1<<30, -time.Second))
}

// The kubelet retries prepare, and the plugin calls Reclaim again: pods
// already terminating are not evicted again.
func TestReclaimIdempotent(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	f := newFixture(t)
	// The eviction marks the pod terminating, as the API server does
	// with a grace period.
	f.cluster.setAnswer(func(e *policyv1.Eviction) error {
		pods := f.cluster.client.Tracker()
		obj, err := pods.Get(schema.GroupVersionResource{Version: "v1", Resource: "pods"}, e.Namespace, e.Name)
		if err != nil {
			return err
		}
		p := obj.(*corev1.Pod).DeepCopy()
		p.DeletionTimestamp = &metav1.Time{Time: time.Unix(2000, 0)}
		return pods.Update(schema.GroupVersionResource{Version: "v1", Resource: "pods"}, p, e.Namespace)
	})
	for range 3 {
		require.NoError(t, f.ev.Reclaim(ctx, ref(f.needs), []ClaimRef{ref(f.burst)}, gpuUUID, 1<<30, time.Second))
	}
	assert.Equal(t, []string{"ns/a1", "ns/a2"}, f.cluster.evicted())
	assert.Len(t, f.rec.withReason(ReasonBurstReclaimed), 2)
	assert.Len(t, f.rec.withReason(ReasonWaitingForBurst), 3, "the waiting pod hears of each wait")
	assert.Equal(t, 2.0, f.count(ResultEvicted))
}

// Concurrent prepares asking for the same claim: one attempt at a time,
// each pod evicted once.
func TestReclaimConcurrentCallsEvictOnce(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	f := newFixture(t)
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	f.cluster.setAnswer(func(e *policyv1.Eviction) error {
		time.Sleep(5 * time.Millisecond) // the API server takes its time
		obj, err := f.cluster.client.Tracker().Get(gvr, e.Namespace, e.Name)
		if err != nil {
			return err
		}
		p := obj.(*corev1.Pod).DeepCopy()
		p.DeletionTimestamp = &metav1.Time{Time: time.Unix(2000, 0)}
		return f.cluster.client.Tracker().Update(gvr, p, e.Namespace)
	})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			assert.NoError(t, f.ev.Reclaim(ctx, ref(f.needs), []ClaimRef{ref(f.burst)}, gpuUUID, 1<<30, time.Second))
		})
	}
	wg.Wait()
	assert.Equal(t, []string{"ns/a1", "ns/a2"}, f.cluster.evicted())
	f.ev.mu.Lock()
	assert.Empty(t, f.ev.retries)
	f.ev.mu.Unlock()
}

func TestReclaimSkipsGonePods(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	gone := podOf("ns", "gone")
	done := podOf("ns", "done")
	done.Status.Phase = corev1.PodSucceeded
	replaced := podOf("ns", "replaced")
	burst := claimOf("ns", "burst", gone, done, replaced)
	replaced.UID = "uid-other" // a new pod of the same name is not the claim's
	other := claimOf("ns", "other")
	stale := ClaimRef{Namespace: "ns", Name: "other", UID: "uid-old"} // the claim was recreated
	missing := ClaimRef{Namespace: "ns", Name: "missing", UID: "uid-missing"}
	c := newCluster(burst, other, done, replaced)
	rec := &recorder{}
	ev, err := New(Options{Client: c.client, Recorder: rec})
	require.NoError(t, err)
	require.NoError(t, ev.Reclaim(ctx, missing, []ClaimRef{ref(burst), stale, missing}, gpuUUID, 1<<30, time.Second))
	assert.Empty(t, c.evicted())
	assert.Empty(t, rec.list())
}

// Evicted between our read and our eviction: NotFound, or a pod of the
// same name replaced it (the UID precondition fails: Conflict).
func TestReclaimRaceWithDeletion(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	f := newFixture(t)
	f.cluster.setAnswer(func(e *policyv1.Eviction) error {
		if e.Name == "a1" {
			return apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, e.Name)
		}
		return apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, e.Name, fmt.Errorf("UID precondition"))
	})
	require.NoError(t, f.ev.Reclaim(ctx, ref(f.needs), []ClaimRef{ref(f.burst)}, gpuUUID, 1<<30, time.Second))
	assert.Empty(t, f.failed())
	assert.Empty(t, f.rec.withReason(ReasonBurstReclaimed))
	assert.Equal(t, 0.0, f.count(ResultEvicted)+f.count(ResultFailed)+f.count(ResultRefused))
}

func tooManyRequests(e *policyv1.Eviction) error {
	return apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 10)
}

// A PodDisruptionBudget refuses: the pod is deleted at once with the
// class's reclaim grace period (burst is lent; a budget does not protect
// it), with Events on both sides saying so, and nothing is left to retry.
func TestReclaimRefusedThenDeleted(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	f := newFixture(t)
	f.cluster.setAnswer(func(e *policyv1.Eviction) error {
		if e.Name == "a2" {
			return tooManyRequests(e)
		}
		return nil
	})
	require.NoError(t, f.ev.Reclaim(ctx, ref(f.needs), []ClaimRef{ref(f.burst)}, gpuUUID, 1<<30, 5*time.Second))
	assert.Equal(t, []string{"ns/a1", "ns/a2"}, f.cluster.evicted(), "the Eviction API is asked first")
	assert.Equal(t, []string{"ns/a2 grace 5"}, f.cluster.deleted())
	f.cluster.mu.Lock()
	assert.Equal(t, types.UID("uid-a2"), *f.cluster.deletes[0].GetDeleteOptions().Preconditions.UID, "only that pod")
	f.cluster.mu.Unlock()
	_, err := f.cluster.client.CoreV1().Pods("ns").Get(ctx, "a2", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "deleted: %v", err)
	assert.Empty(t, f.failed(), "the claim may not grow again")
	assert.Equal(t, 1.0, f.count(ResultEvicted))
	assert.Equal(t, 1.0, f.count(ResultRefused))
	assert.Equal(t, 1.0, f.count(ResultDeleted))
	assert.Empty(t, f.rec.withReason(ReasonReclaimFailed))
	forced := f.rec.withReason(ReasonReclaimForced)
	require.Len(t, forced, 2)
	assert.Equal(t, event{"a2", corev1.EventTypeWarning, ReasonReclaimForced,
		"deleted with grace period 5s to reclaim memory burst on GPU " + gpuUUID + " for claim ns/needs, because its eviction was refused " +
			"(Cannot evict pod as it would violate the pod's disruption budget.): memory above a claim's guarantee is lent and taken back within the class's reclaim grace period"}, forced[0])
	assert.Equal(t, event{"b", corev1.EventTypeNormal, ReasonReclaimForced,
		"pod ns/a2 of claim ns/burst deleted with grace period 5s to give back memory burst on GPU " + gpuUUID +
			", because its eviction was refused (Cannot evict pod as it would violate the pod's disruption budget.)"}, forced[1])
	f.ev.mu.Lock()
	assert.Empty(t, f.ev.retries, "nothing left to retry")
	f.ev.mu.Unlock()
}

// A pod deleted with a grace period longer than the class's (a tenant's
// year) is not skipped as terminating: its deletion is shortened to the
// class's grace period, once; one within it is left alone.
func TestReclaimShortensALongerDeletion(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	f := newFixture(t)
	f.terminating("a1", time.Unix(2000, 0), 365*24*3600)
	f.terminating("a2", time.Unix(2000, 0), 3)
	require.NoError(t, f.ev.Reclaim(ctx, ref(f.needs), []ClaimRef{ref(f.burst)}, gpuUUID, 1<<30, 5*time.Second))
	assert.Empty(t, f.cluster.evicted(), "terminating pods are not evicted")
	assert.Equal(t, []string{"ns/a1 grace 5"}, f.cluster.deleted())
	assert.Equal(t, 1.0, f.count(ResultDeleted))
	f.assertForced("because the pod was terminating with grace period 8760h0m0s, longer than the class's reclaim grace period 5s",
		"pod ns/a1 of claim ns/burst deleted with grace period 5s")
	assert.Empty(t, f.failed())
}

// A kubelet that began stopping a pod with a long grace period does not
// stop it sooner when the deletion is shortened: a pod still running
// killSlack past its (shortened) deadline has its processes killed on the
// node, and one whose deadline is ahead is looked at again then, not
// killed.
func TestReclaimKillsAPodOutlivingItsDeadline(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	now := time.Unix(10000, 0)
	var mu sync.Mutex
	var killed []string
	f := newFixture(t, func(o *Options) {
		o.Now = func() time.Time { return now }
		o.KillPod = func(_ context.Context, p *corev1.Pod) (int, error) {
			mu.Lock()
			defer mu.Unlock()
			killed = append(killed, p.Name)
			return 2, nil
		}
	})
	f.terminating("a1", now.Add(-killSlack-time.Second), 5) // past its deadline and the slack
	f.terminating("a2", now.Add(time.Second), 5)            // its deadline ahead
	require.NoError(t, f.ev.Reclaim(ctx, ref(f.needs), []ClaimRef{ref(f.burst)}, gpuUUID, 1<<30, 5*time.Second))
	mu.Lock()
	assert.Equal(t, []string{"a1"}, killed, "only the pod past its deadline")
	mu.Unlock()
	assert.Empty(t, f.cluster.deleted(), "both deletions already end within the class's grace")
	assert.Equal(t, 1.0, f.count(ResultKilled))
	f.assertForced("2 processes killed on the node",
		"pod ns/a1 of claim ns/burst killed on the node")
	assert.Empty(t, f.failed())
}

// The deletion after a refusal fails: the caller hears of it
// (CancelReclaim), both sides get a Warning, and Run retries with backoff
// until it passes.
func TestReclaimForcedDeletionFailsIsRetried(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	f := newFixture(t)
	f.cluster.setAnswer(func(e *policyv1.Eviction) error {
		if e.Name == "a2" {
			return tooManyRequests(e)
		}
		return nil
	})
	f.cluster.mu.Lock()
	f.cluster.deleteErr = apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "a2", fmt.Errorf("no delete"))
	f.cluster.mu.Unlock()
	err := f.ev.Reclaim(ctx, ref(f.needs), []ClaimRef{ref(f.burst)}, gpuUUID, 1<<30, time.Second)
	require.Error(t, err)
	assert.True(t, apierrors.IsForbidden(err), "the error wraps the API's: %v", err)
	assert.Equal(t, []ClaimRef{ref(f.burst)}, f.failed())
	assert.Equal(t, 1.0, f.count(ResultRefused))
	assert.Equal(t, 1.0, f.count(ResultFailed))
	warnings := f.rec.withReason(ReasonReclaimFailed)
	require.Len(t, warnings, 2)
	assert.Equal(t, "a2", warnings[0].pod)
	assert.Equal(t, "b", warnings[1].pod)
	for _, w := range warnings {
		assert.Equal(t, corev1.EventTypeWarning, w.kind)
		assert.Contains(t, w.message, "disruption budget")
	}

	// Asked again while the retry is queued: deduplicated, no new attempt.
	require.NoError(t, f.ev.Reclaim(ctx, ref(f.needs), []ClaimRef{ref(f.burst)}, gpuUUID, 1<<30, time.Second))
	assert.Len(t, f.cluster.evicted(), 2)

	// Deleting works now; a1 was evicted and is gone meanwhile.
	require.NoError(t, f.cluster.client.Tracker().Delete(schema.GroupVersionResource{Version: "v1", Resource: "pods"}, "ns", "a1"))
	f.cluster.mu.Lock()
	f.cluster.deleteErr = nil
	f.cluster.mu.Unlock()
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { f.ev.Run(runCtx); close(done) }()
	require.Eventually(t, func() bool { return f.count(ResultDeleted) == 1 }, 10*time.Second, time.Millisecond)
	cancel()
	<-done
	assert.Equal(t, []string{"ns/a1", "ns/a2", "ns/a2"}, f.cluster.evicted())
	f.ev.mu.Lock()
	assert.Empty(t, f.ev.retries, "nothing left to retry")
	f.ev.mu.Unlock()
}

func TestReclaimRetriesWithBackoffUntilCancelled(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	f := newFixture(t)
	f.cluster.setAnswer(func(e *policyv1.Eviction) error { return apierrors.NewInternalError(fmt.Errorf("etcd down")) })
	require.Error(t, f.ev.Reclaim(ctx, ref(f.needs), []ClaimRef{ref(f.burst)}, gpuUUID, 1<<30, time.Second))
	assert.Equal(t, 2.0, f.count(ResultFailed))
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { f.ev.Run(runCtx); close(done) }()
	require.Eventually(t, func() bool { return len(f.failed()) >= 6 }, 10*time.Second, time.Millisecond)
	f.ev.Cancel(ref(f.burst).UID)
	time.Sleep(50 * time.Millisecond) // one in flight may still finish
	n := len(f.cluster.evicted())
	time.Sleep(100 * time.Millisecond)
	assert.Equal(t, n, len(f.cluster.evicted()), "no retry after Cancel")
	cancel()
	<-done
	for _, c := range f.failed() {
		assert.Equal(t, ref(f.burst), c)
	}
}

func TestReclaimGivesUpAfterMaxRetryAge(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	var mu sync.Mutex
	now := time.Unix(1000, 0)
	f := newFixture(t, func(o *Options) {
		o.MaxRetryAge = time.Minute
		o.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	})
	f.cluster.setAnswer(func(*policyv1.Eviction) error { return apierrors.NewInternalError(fmt.Errorf("etcd down")) })
	require.Error(t, f.ev.Reclaim(ctx, ref(f.needs), []ClaimRef{ref(f.burst)}, gpuUUID, 1<<30, time.Second))
	mu.Lock()
	now = now.Add(2 * time.Minute)
	mu.Unlock()
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { f.ev.Run(runCtx); close(done) }()
	require.Eventually(t, func() bool {
		f.ev.mu.Lock()
		defer f.ev.mu.Unlock()
		return len(f.ev.retries) == 0
	}, 10*time.Second, time.Millisecond)
	cancel()
	<-done
	assert.Len(t, f.cluster.evicted(), 2, "no attempt after the retry aged out")
}

// Overhead grew after the bookings: no claim waits, only the evicted pods
// hear of it.
func TestReclaimForOverhead(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	f := newFixture(t)
	require.NoError(t, f.ev.Reclaim(ctx, ClaimRef{}, []ClaimRef{ref(f.burst)}, gpuUUID, 1<<30, time.Second))
	assert.Equal(t, []string{"ns/a1", "ns/a2"}, f.cluster.evicted())
	assert.Equal(t, []event{
		{"a1", corev1.EventTypeNormal, ReasonBurstReclaimed, "memory burst reclaimed on GPU " + gpuUUID + " for memory the driver or processes outside claims took"},
		{"a2", corev1.EventTypeNormal, ReasonBurstReclaimed, "memory burst reclaimed on GPU " + gpuUUID + " for memory the driver or processes outside claims took"},
	}, f.rec.list())
	for _, a := range f.cluster.client.Actions() {
		if g, ok := a.(k8stesting.GetAction); ok {
			assert.NotEmpty(t, g.GetName(), "no read of a nameless claim")
		}
	}
}

// With an informer's listers, objects come from the cache; one the cache
// does not have yet is read from the API server.
func TestReclaimReadsListers(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	a1, a2, b := podOf("ns", "a1"), podOf("ns", "a2"), podOf("ns", "b")
	burst, needs := claimOf("ns", "burst", a1, a2), claimOf("ns", "needs", b)
	c := newCluster(burst, needs, a1, a2, b)
	claims := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	pods := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	require.NoError(t, claims.Add(burst))
	require.NoError(t, claims.Add(needs))
	require.NoError(t, pods.Add(a1))
	require.NoError(t, pods.Add(b)) // a2 not in the cache yet
	rec := &recorder{}
	ev, err := New(Options{Client: c.client, Recorder: rec,
		Claims: resourcelisters.NewResourceClaimLister(claims), Pods: corelisters.NewPodLister(pods)})
	require.NoError(t, err)
	require.NoError(t, ev.Reclaim(ctx, ref(needs), []ClaimRef{ref(burst)}, gpuUUID, 1<<30, time.Second))
	assert.Equal(t, []string{"ns/a1", "ns/a2"}, c.evicted())
	var gets []string
	for _, a := range c.client.Actions() {
		if g, ok := a.(k8stesting.GetAction); ok {
			gets = append(gets, g.GetResource().Resource+"/"+g.GetName())
		}
	}
	assert.Equal(t, []string{"pods/a2"}, gets, "only what the cache lacks is read")
}

func TestShortWarnsTheWaitingPods(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	f := newFixture(t)
	f.ev.Short(ctx, ref(f.needs), gpuUUID, 1536<<20)
	assert.Equal(t, []event{{"b", corev1.EventTypeWarning, ReasonMemoryShort,
		"GPU " + gpuUUID + " is short of 1536Mi for the guarantee of claim ns/needs that reclaiming burst cannot free (memory booked twice or used outside claims)"}},
		f.rec.list())
	assert.Empty(t, f.cluster.evicted())
}

func TestNewRefusesMissingOptions(t *testing.T) {
	_, err := New(Options{Recorder: &recorder{}})
	assert.Error(t, err)
	_, err = New(Options{Client: fake.NewClientset()})
	assert.Error(t, err)
	reg := prometheus.NewRegistry()
	_, err = New(Options{Client: fake.NewClientset(), Recorder: &recorder{}, Registerer: reg})
	require.NoError(t, err)
	_, err = New(Options{Client: fake.NewClientset(), Recorder: &recorder{}, Registerer: reg})
	assert.Error(t, err, "registered twice")
}

func TestFormatBytes(t *testing.T) {
	assert.Equal(t, "4Gi", formatBytes(4<<30))
	assert.Equal(t, "1536Mi", formatBytes(1536<<20))
	assert.True(t, strings.HasPrefix(formatBytes(1<<63), "9"))
}
