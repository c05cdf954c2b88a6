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
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/names"
)

type fixture struct {
	t        *testing.T
	ctx      context.Context
	client   *fake.Clientset
	ctrl     *Controller
	recorder *record.FakeRecorder
}

// newFixture starts a controller on a fake API server holding objs.
func newFixture(t *testing.T, defaults Policies, objs ...runtime.Object) *fixture {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	client := fake.NewClientset(objs...)
	recorder := record.NewFakeRecorder(100)
	ctrl, factory := newTestController(t, client, client, defaults, recorder, 0)
	factory.Start(ctx.Done())
	t.Cleanup(func() {
		cancel()
		factory.Shutdown()
	})
	// Synced handlers: the allocation tracker has seen every claim, not only the informer cache.
	require.True(t, cache.WaitForCacheSync(ctx.Done(), ctrl.synced...))
	return &fixture{t: t, ctx: ctx, client: client, ctrl: ctrl, recorder: recorder}
}

// newTestController wires a controller to informers of informerClient;
// it writes through client (the same fake, or a wrapper of it).
func newTestController(t *testing.T, client kubernetes.Interface, informerClient *fake.Clientset, defaults Policies,
	recorder record.EventRecorder, workers int) (*Controller, informers.SharedInformerFactory) {
	t.Helper()
	factory := informers.NewSharedInformerFactory(informerClient, 0)
	ctrl, err := NewController(ControllerOptions{
		Client: client, Pods: factory.Core().V1().Pods(), Nodes: factory.Core().V1().Nodes(),
		Claims: factory.Resource().V1().ResourceClaims(), Slices: factory.Resource().V1().ResourceSlices(),
		Allocator: Config{DriverName: names.DriverName, Classes: testClasses, IsOurs: isTestClass},
		Defaults:  defaults, FallbackAfter: time.Minute, Recorder: recorder, Workers: workers,
	})
	require.NoError(t, err)
	return ctrl, factory
}

// syncPod runs one pod sync once the informer shows the pod's latest state.
func (f *fixture) syncPod(name string) (time.Duration, error) {
	f.t.Helper()
	f.waitSynced()
	return f.ctrl.syncPod(f.ctx, "default", name, 0)
}

// waitSynced waits until the informer caches show what the API server has.
func (f *fixture) waitSynced() {
	f.t.Helper()
	require.Eventually(f.t, func() bool {
		pods, err := f.client.CoreV1().Pods("").List(f.ctx, metav1.ListOptions{})
		require.NoError(f.t, err)
		for i := range pods.Items {
			cached, err := f.ctrl.pods.Pods(pods.Items[i].Namespace).Get(pods.Items[i].Name)
			if err != nil || !equality.Semantic.DeepEqual(cached, &pods.Items[i]) {
				return false
			}
		}
		claims, err := f.client.ResourceV1().ResourceClaims("").List(f.ctx, metav1.ListOptions{})
		require.NoError(f.t, err)
		for i := range claims.Items {
			cached, err := f.ctrl.claims.ResourceClaims(claims.Items[i].Namespace).Get(claims.Items[i].Name)
			if err != nil || !equality.Semantic.DeepEqual(cached, &claims.Items[i]) {
				return false
			}
		}
		return true
	}, 5*time.Second, 5*time.Millisecond)
}

func (f *fixture) pod(name string) *corev1.Pod {
	f.t.Helper()
	pod, err := f.client.CoreV1().Pods("default").Get(f.ctx, name, metav1.GetOptions{})
	require.NoError(f.t, err)
	return pod
}

func (f *fixture) claim(name string) *resourceapi.ResourceClaim {
	f.t.Helper()
	claim, err := f.client.ResourceV1().ResourceClaims("default").Get(f.ctx, name, metav1.GetOptions{})
	require.NoError(f.t, err)
	return claim
}

// allocated lists "node/device" of a claim's allocation.
func (f *fixture) allocated(name string) []string {
	claim := f.claim(name)
	if claim.Status.Allocation == nil {
		return nil
	}
	return devicesOf(&Decision{Allocations: []*resourceapi.AllocationResult{claim.Status.Allocation}})
}

func (f *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func eventWith(events []string, reason string) string {
	for _, e := range events {
		if strings.Contains(e, " "+reason+" ") {
			return e
		}
	}
	return ""
}

// cluster returns node-a (one GPU already half used by a scheduler-made
// claim) and node-b (idle), two GPUs each, plus the busy claim.
func cluster(t *testing.T) []runtime.Object {
	busy := gpuClaim("busy", 1, "40Gi", "50")
	share := busy.UID
	busy.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
		Request: "gpu", Driver: names.DriverName, Pool: "node-a", Device: "gpu-0", ShareID: &share,
		ConsumedCapacity: map[resourceapi.QualifiedName]resource.Quantity{names.CapacityMemory: resource.MustParse("40Gi"), names.CapacityCores: resource.MustParse("50")},
	}}}}
	return []runtime.Object{testNode("node-a"), testNode("node-b"), gpuSlice(t, "node-a", 2), gpuSlice(t, "node-b", 2), busy}
}

func TestControllerAllocatesByPolicy(t *testing.T) {
	for _, tc := range []struct {
		name     string
		defaults Policies
		annot    map[string]string
		want     []string
	}{
		{"binpack joins the busy GPU", Policies{Node: Binpack, GPU: Binpack}, nil, []string{"node-a/gpu-0"}},
		{"binpack node, spread GPU", Policies{Node: Binpack, GPU: Spread}, nil, []string{"node-a/gpu-1"}},
		{"spread node", Policies{Node: Spread, GPU: Binpack}, nil, []string{"node-b/gpu-0"}},
		{"annotation overrides the default", Policies{Node: Binpack, GPU: Binpack}, map[string]string{NodePolicyAnnotation: "spread"}, []string{"node-b/gpu-0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			claim := gpuClaim("small", 1, "4Gi", "10")
			pod := testPod("app", claim)
			pod.Annotations = tc.annot
			f := newFixture(t, tc.defaults, append(cluster(t), claim, pod)...)
			_, err := f.syncPod("app")
			require.NoError(t, err)

			assert.Equal(t, tc.want, f.allocated("small"))
			assert.Contains(t, f.claim("small").Finalizers, Finalizer)
			stamp := f.claim("small").Status.Allocation.AllocationTimestamp
			if assert.NotNil(t, stamp, "allocationTimestamp, which kube-scheduler could not add later") {
				assert.WithinDuration(t, time.Now(), stamp.Time, time.Minute)
			}
			assert.False(t, hasGate(f.pod("app")), "gate removed")
			assert.Contains(t, eventWith(f.events(), ReasonAllocated), tc.want[0])
		})
	}
}

func TestControllerSpreadsTwoPodsOverGPUs(t *testing.T) {
	c1, c2 := gpuClaim("one", 1, "4Gi", "10"), gpuClaim("two", 1, "4Gi", "10")
	f := newFixture(t, Policies{Node: Binpack, GPU: Spread},
		testNode("node-a"), gpuSlice(t, "node-a", 2), c1, c2, testPod("p1", c1), testPod("p2", c2))
	for _, p := range []string{"p1", "p2"} {
		_, err := f.syncPod(p)
		require.NoError(t, err)
	}
	assert.Equal(t, []string{"node-a/gpu-0"}, f.allocated("one"))
	assert.Equal(t, []string{"node-a/gpu-1"}, f.allocated("two"), "the second pod sees the first allocation at once")
}

func TestControllerNodeFit(t *testing.T) {
	t.Run("node selector", func(t *testing.T) {
		claim := gpuClaim("c", 1, "4Gi", "10")
		pod := testPod("app", claim)
		pod.Spec.NodeSelector = map[string]string{corev1.LabelHostname: "node-b"}
		f := newFixture(t, Policies{Node: Binpack, GPU: Binpack}, append(cluster(t), claim, pod)...)
		_, err := f.syncPod("app")
		require.NoError(t, err)
		assert.Equal(t, []string{"node-b/gpu-0"}, f.allocated("c"), "binpack would pick node-a, the selector forbids it")
	})
	t.Run("taint", func(t *testing.T) {
		objs := cluster(t)
		objs[0].(*corev1.Node).Spec.Taints = []corev1.Taint{{Key: "gpu", Value: "reserved", Effect: corev1.TaintEffectNoSchedule}}
		claim := gpuClaim("c", 1, "4Gi", "10")
		f := newFixture(t, Policies{Node: Binpack, GPU: Binpack}, append(objs, claim, testPod("app", claim))...)
		_, err := f.syncPod("app")
		require.NoError(t, err)
		assert.Equal(t, []string{"node-b/gpu-0"}, f.allocated("c"))
	})
	t.Run("CPU requests of bound and placed pods", func(t *testing.T) {
		objs := cluster(t)
		bound := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "bound", Namespace: "default"},
			Spec: corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "c",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("20")}}}}},
		}
		c1, c2 := gpuClaim("c1", 1, "4Gi", "10"), gpuClaim("c2", 1, "4Gi", "10")
		p1, p2 := testPod("p1", c1), testPod("p2", c2)
		for _, p := range []*corev1.Pod{p1, p2} {
			p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10")}
		}
		f := newFixture(t, Policies{Node: Binpack, GPU: Binpack}, append(objs, bound, c1, c2, p1, p2)...)
		_, err := f.syncPod("p1")
		require.NoError(t, err)
		assert.Equal(t, []string{"node-a/gpu-0"}, f.allocated("c1"), "20+10 of 32 CPUs")
		_, err = f.syncPod("p2")
		require.NoError(t, err)
		assert.Equal(t, []string{"node-b/gpu-0"}, f.allocated("c2"), "p1 is placed on node-a but not bound yet; its CPUs count")
	})
	t.Run("finished and deleted pods give their CPUs back", func(t *testing.T) {
		objs := cluster(t)
		var bound []*corev1.Pod
		for _, name := range []string{"done", "gone"} {
			p := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name)},
				Spec: corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "c",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("16")}}}}},
			}
			bound = append(bound, p)
			objs = append(objs, p)
		}
		c1 := gpuClaim("c1", 1, "4Gi", "10")
		p1 := testPod("p1", c1)
		p1.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10")}
		f := newFixture(t, Policies{Node: Binpack, GPU: Binpack}, append(objs, c1, p1)...)
		require.Equal(t, int64(32000), f.ctrl.bound.on("node-a").CPUMilli)

		done := bound[0].DeepCopy()
		done.Status.Phase = corev1.PodSucceeded
		_, err := f.client.CoreV1().Pods("default").UpdateStatus(f.ctx, done, metav1.UpdateOptions{})
		require.NoError(t, err)
		require.NoError(t, f.client.CoreV1().Pods("default").Delete(f.ctx, "gone", metav1.DeleteOptions{}))
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			assert.Equal(c, NodeUsage{}, f.ctrl.bound.on("node-a"))
		}, 10*time.Second, 10*time.Millisecond)
		_, err = f.syncPod("p1")
		require.NoError(t, err)
		assert.Equal(t, []string{"node-a/gpu-0"}, f.allocated("c1"), "node-a's 32 CPUs are free again")
	})
}

func TestControllerFallsBackWhenNothingFits(t *testing.T) {
	claim := gpuClaim("huge", 1, "81Gi", "")
	f := newFixture(t, Policies{Node: Binpack, GPU: Binpack}, append(cluster(t), claim, testPod("app", claim))...)
	_, err := f.syncPod("app")
	require.NoError(t, err)
	assert.Nil(t, f.claim("huge").Status.Allocation)
	assert.False(t, hasGate(f.pod("app")), "the scheduler gets the pod")
	e := eventWith(f.events(), ReasonFallback)
	assert.Contains(t, e, "0/2 nodes can take the claims: 2 node(s) lack free GPU memory or cores")
}

func TestControllerReleasesWhenSchedulerCannotPlace(t *testing.T) {
	claim := gpuClaim("c", 1, "4Gi", "10")
	f := newFixture(t, Policies{Node: Binpack, GPU: Binpack}, append(cluster(t), claim, testPod("app", claim))...)
	_, err := f.syncPod("app")
	require.NoError(t, err)
	require.NotNil(t, f.claim("c").Status.Allocation)

	// The scheduler reports the pod unschedulable on that node.
	pod := f.pod("app")
	since := time.Now().Truncate(time.Second)
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: "0/2 nodes are available: 1 Insufficient example.com/nic", LastTransitionTime: metav1.NewTime(since)}}
	_, err = f.client.CoreV1().Pods("default").UpdateStatus(f.ctx, pod, metav1.UpdateOptions{})
	require.NoError(t, err)

	f.ctrl.now = func() time.Time { return since.Add(10 * time.Second) }
	wait, err := f.syncPod("app")
	require.NoError(t, err)
	assert.Equal(t, 50*time.Second, wait, "the scheduler gets FallbackAfter to retry")
	assert.NotNil(t, f.claim("c").Status.Allocation)

	f.ctrl.now = func() time.Time { return since.Add(time.Minute) }
	_, err = f.syncPod("app")
	require.NoError(t, err)
	released := f.claim("c")
	assert.Nil(t, released.Status.Allocation)
	assert.NotContains(t, released.Finalizers, Finalizer)
	assert.Contains(t, eventWith(f.events(), ReasonReleased), "Insufficient example.com/nic")
}

func TestControllerRestartMidAllocation(t *testing.T) {
	t.Run("allocated but still gated", func(t *testing.T) {
		claim := gpuClaim("c", 1, "4Gi", "10")
		f := newFixture(t, Policies{Node: Binpack, GPU: Binpack}, append(cluster(t), claim, testPod("app", claim))...)
		_, err := f.syncPod("app")
		require.NoError(t, err)
		before := f.allocated("c")

		// A previous leader wrote the allocation and died before the
		// gate went: put the gate back and start a new controller.
		pod := f.pod("app")
		pod.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: SchedulingGate}}
		claimNow := f.claim("c")
		g := newFixture(t, Policies{Node: Spread, GPU: Spread}, append(cluster(t), claimNow, pod)...)
		_, err = g.syncPod("app")
		require.NoError(t, err)
		assert.Equal(t, before, g.allocated("c"), "the allocation is kept, not redone")
		assert.False(t, hasGate(g.pod("app")))
	})
	t.Run("one of two claims allocated", func(t *testing.T) {
		first, second := gpuClaim("first", 1, "4Gi", "10"), gpuClaim("second", 1, "4Gi", "10")
		share := first.UID
		first.Finalizers = []string{Finalizer}
		first.Status.Allocation = &resourceapi.AllocationResult{
			Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
				Request: "gpu", Driver: names.DriverName, Pool: "node-b", Device: "gpu-1", ShareID: &share,
				ConsumedCapacity: map[resourceapi.QualifiedName]resource.Quantity{names.CapacityMemory: resource.MustParse("4Gi"), names.CapacityCores: resource.MustParse("10")},
			}}},
			NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{
				Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"node-b"}}}}}},
		}
		f := newFixture(t, Policies{Node: Binpack, GPU: Binpack}, append(cluster(t), first, second, testPod("app", first, second))...)
		_, err := f.syncPod("app")
		require.NoError(t, err)
		assert.Equal(t, []string{"node-b/gpu-1"}, f.allocated("second"), "the pod is tied to node-b; binpack joins gpu-1 there")
	})
	t.Run("the rest no longer fits next to the allocated claim", func(t *testing.T) {
		first, second := gpuClaim("first", 1, "4Gi", "10"), gpuClaim("second", 1, "79Gi", "")
		share := first.UID
		first.Finalizers = []string{Finalizer}
		first.Status.Allocation = &resourceapi.AllocationResult{
			Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
				Request: "gpu", Driver: names.DriverName, Pool: "node-b", Device: "gpu-1", ShareID: &share,
				ConsumedCapacity: map[resourceapi.QualifiedName]resource.Quantity{names.CapacityMemory: resource.MustParse("4Gi"), names.CapacityCores: resource.MustParse("10")},
			}}},
			NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{
				Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"node-b"}}}}}},
		}
		// node-b's other GPU is taken by a pod of someone else.
		objs := append(cluster(t), first, second, testPod("app", first, second))
		f := newFixture(t, Policies{Node: Binpack, GPU: Binpack}, objs...)
		observeOn(f.ctrl.alloc, "node-b", "gpu-0", "79Gi", "0")
		wait, err := f.syncPod("app")
		require.NoError(t, err)
		assert.Equal(t, retryAfterRelease, wait)
		assert.Nil(t, f.claim("first").Status.Allocation, "released, to be allocated afresh with the rest")
		assert.NotContains(t, f.claim("first").Finalizers, Finalizer)
		assert.True(t, hasGate(f.pod("app")))
	})
	t.Run("finalizer added, allocation not written", func(t *testing.T) {
		claim := gpuClaim("c", 1, "4Gi", "10")
		claim.Finalizers = []string{Finalizer}
		f := newFixture(t, Policies{Node: Binpack, GPU: Binpack}, append(cluster(t), claim, testPod("app", claim))...)
		_, err := f.syncPod("app")
		require.NoError(t, err)
		assert.Equal(t, []string{"node-a/gpu-0"}, f.allocated("c"))
	})
}

func TestControllerClaimDeletedMidAllocation(t *testing.T) {
	claim := gpuClaim("whole", 1, "", "")
	f := newFixture(t, Policies{Node: Binpack, GPU: Binpack},
		testNode("node-a"), gpuSlice(t, "node-a", 1), claim, testPod("app", claim))
	// The claim disappears between the decision and the write.
	f.client.PrependReactor("update", "resourceclaims", func(action k8stesting.Action) (bool, runtime.Object, error) {
		require.NoError(t, f.client.Tracker().Delete(action.GetResource(), "default", "whole"))
		return true, nil, apierrors.NewNotFound(action.GetResource().GroupResource(), "whole")
	})
	_, err := f.syncPod("app")
	require.Error(t, err)
	assert.True(t, apierrors.IsNotFound(err), "%v", err)
	assert.True(t, hasGate(f.pod("app")), "the pod stays gated until its claims exist")

	// The whole GPU was not booked by the failed attempt.
	other := gpuClaim("other", 1, "", "")
	d, err := f.ctrl.alloc.Allocate(f.ctx, Request{Pod: testPod("x", other), Claims: []*resourceapi.ResourceClaim{other}, Nodes: []*corev1.Node{testNode("node-a")}, Policies: Policies{Node: Binpack, GPU: Binpack}})
	require.NoError(t, err)
	assert.Equal(t, "node-a", d.Node)
}

func TestControllerReleasesWhenPodsAreGone(t *testing.T) {
	claim := gpuClaim("c", 1, "4Gi", "10")
	f := newFixture(t, Policies{Node: Binpack, GPU: Binpack}, append(cluster(t), claim, testPod("app", claim))...)
	_, err := f.syncPod("app")
	require.NoError(t, err)
	f.waitSynced()
	require.NoError(t, f.ctrl.syncClaim(f.ctx, "default", "c"))
	assert.NotNil(t, f.claim("c").Status.Allocation, "kept while its pod exists")

	require.NoError(t, f.client.CoreV1().Pods("default").Delete(f.ctx, "app", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool { _, err := f.ctrl.pods.Pods("default").Get("app"); return apierrors.IsNotFound(err) }, 5*time.Second, 5*time.Millisecond)
	f.waitSynced()
	require.NoError(t, f.ctrl.syncClaim(f.ctx, "default", "c"))
	released := f.claim("c")
	assert.Nil(t, released.Status.Allocation)
	assert.False(t, slices.Contains(released.Finalizers, Finalizer))
}

func TestControllerEnqueueAfterRestart(t *testing.T) {
	leftover := gpuClaim("leftover", 1, "4Gi", "10")
	leftover.Finalizers = []string{Finalizer}
	claim := gpuClaim("c", 1, "4Gi", "10")
	f := newFixture(t, Policies{Node: Binpack, GPU: Binpack}, append(cluster(t), leftover, claim, testPod("app", claim))...)
	require.NoError(t, f.ctrl.Enqueue())
	assert.Equal(t, 2, f.ctrl.queue.Len(), "the gated pod and the claim with the finalizer")
	for f.ctrl.queue.Len() > 0 {
		require.True(t, f.ctrl.processNext(f.ctx))
	}
	assert.NotContains(t, f.claim("leftover").Finalizers, Finalizer, "no pod uses it: released")
	assert.NotNil(t, f.claim("c").Status.Allocation)
}

// TestUngateWithStaleCopyIsNotAnError: a second pass that works from a
// cached pod whose gate an earlier pass removed must not report an error.
func TestUngateWithStaleCopyIsNotAnError(t *testing.T) {
	claim := gpuClaim("small", 1, "4Gi", "10")
	pod := testPod("app", claim)
	f := newFixture(t, Policies{Node: Binpack, GPU: Binpack}, append(cluster(t), claim, pod)...)
	stale := f.pod("app")
	require.True(t, hasGate(stale))

	require.NoError(t, f.ctrl.ungate(f.ctx, stale))
	assert.False(t, hasGate(f.pod("app")))
	assert.NoError(t, f.ctrl.ungate(f.ctx, stale), "the gate is gone already")

	// A different gate at the same index is not ours to remove: the test
	// op fails and the pod still carries a gate of ours elsewhere.
	other := f.pod("app")
	other.Spec.SchedulingGates = append([]corev1.PodSchedulingGate{{Name: "example.com/other"}}, corev1.PodSchedulingGate{Name: SchedulingGate})
	_, err := f.client.CoreV1().Pods("default").Update(f.ctx, other, metav1.UpdateOptions{})
	require.NoError(t, err)
	assert.Error(t, f.ctrl.ungate(f.ctx, stale), "a failed removal of a gate that is still there is an error")
}
