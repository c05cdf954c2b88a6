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
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	resourcev1 "k8s.io/client-go/kubernetes/typed/resource/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/names"
)

// slowClaims is an API client whose ResourceClaim updates take a while, as
// on a loaded API server, and which counts how many are in flight at once.
// (The fake clientset runs its reactors under one lock, so the delay must
// be outside it.)
type slowClaims struct {
	*fake.Clientset
	delay             time.Duration
	inFlight, maxSeen atomic.Int32
}

func (c *slowClaims) ResourceV1() resourcev1.ResourceV1Interface {
	return slowResourceV1{ResourceV1Interface: c.Clientset.ResourceV1(), c: c}
}

type slowResourceV1 struct {
	resourcev1.ResourceV1Interface
	c *slowClaims
}

func (r slowResourceV1) ResourceClaims(namespace string) resourcev1.ResourceClaimInterface {
	return slowClaimClient{ResourceClaimInterface: r.ResourceV1Interface.ResourceClaims(namespace), c: r.c}
}

type slowClaimClient struct {
	resourcev1.ResourceClaimInterface
	c *slowClaims
}

func (s slowClaimClient) Update(ctx context.Context, claim *resourceapi.ResourceClaim, opts metav1.UpdateOptions) (*resourceapi.ResourceClaim, error) {
	n := s.c.inFlight.Add(1)
	defer s.c.inFlight.Add(-1)
	for {
		seen := s.c.maxSeen.Load()
		if n <= seen || s.c.maxSeen.CompareAndSwap(seen, n) {
			break
		}
	}
	time.Sleep(s.c.delay)
	return s.ResourceClaimInterface.Update(ctx, claim, opts)
}

var _ kubernetes.Interface = &slowClaims{}

// runController runs a controller with the given workers on client until
// the test ends.
func runController(t *testing.T, client kubernetes.Interface, fakeClient *fake.Clientset, workers int) *Controller {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	ctrl, factory := newTestController(t, client, fakeClient, Policies{Node: Binpack, GPU: Binpack}, record.NewFakeRecorder(1000), workers)
	factory.Start(ctx.Done())
	require.True(t, cache.WaitForCacheSync(ctx.Done(), ctrl.synced...))
	done := make(chan struct{})
	go func() {
		defer close(done)
		ctrl.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		factory.Shutdown()
	})
	return ctrl
}

// TestWorkersOverlapWritesAndNeverDoubleBook: with several workers the API
// writes of different pods overlap (what bounded the allocator's rate), yet
// the pods, which fill the cluster's GPUs exactly, are all allocated with no
// GPU over its memory or cores.
func TestWorkersOverlapWritesAndNeverDoubleBook(t *testing.T) {
	objs := []runtime.Object{testNode("node-a"), testNode("node-b"), gpuSlice(t, "node-a", 2), gpuSlice(t, "node-b", 2)}
	// 4 GPUs x 4 claims of 20Gi and 25 cores: exactly full.
	const pods = 16
	for i := range pods {
		claim := gpuClaim(fmt.Sprintf("c%02d", i), 1, "20Gi", "25")
		objs = append(objs, claim, testPod(fmt.Sprintf("p%02d", i), claim))
	}
	fakeClient := fake.NewClientset(objs...)
	client := &slowClaims{Clientset: fakeClient, delay: 30 * time.Millisecond}
	runController(t, client, fakeClient, 4)

	require.Eventually(t, func() bool {
		list, err := fakeClient.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{})
		require.NoError(t, err)
		for i := range list.Items {
			if hasGate(&list.Items[i]) {
				return false
			}
		}
		return true
	}, 30*time.Second, 20*time.Millisecond, "every pod allocated and ungated")

	claims, err := fakeClient.ResourceV1().ResourceClaims("default").List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	memory := map[string]*resource.Quantity{}
	cores := map[string]*resource.Quantity{}
	for _, c := range claims.Items {
		require.NotNil(t, c.Status.Allocation, "claim %s allocated", c.Name)
		for _, r := range c.Status.Allocation.Devices.Results {
			key := r.Pool + "/" + r.Device
			if memory[key] == nil {
				memory[key], cores[key] = &resource.Quantity{}, &resource.Quantity{}
			}
			memory[key].Add(r.ConsumedCapacity[names.CapacityMemory])
			cores[key].Add(r.ConsumedCapacity[names.CapacityCores])
		}
	}
	assert.Len(t, memory, 4, "all four GPUs used")
	for gpu := range memory {
		assert.LessOrEqual(t, memory[gpu].Cmp(resource.MustParse("80Gi")), 0, "%s memory %s", gpu, memory[gpu])
		assert.LessOrEqual(t, cores[gpu].Cmp(resource.MustParse("100")), 0, "%s cores %s", gpu, cores[gpu])
	}
	assert.GreaterOrEqual(t, client.maxSeen.Load(), int32(2), "claim writes of different pods overlapped")
}

// TestClaimInFlightIsNotDecidedAgain: a claim whose decided allocation is
// not written yet (another pod's worker, sharing the claim, is writing it)
// is not decided a second time; the pod is retried shortly instead.
func TestClaimInFlightIsNotDecidedAgain(t *testing.T) {
	shared := gpuClaim("shared", 1, "4Gi", "10")
	f := newFixture(t, Policies{Node: Binpack, GPU: Binpack}, append(cluster(t), shared, testPod("second", shared))...)
	// Another worker's decision for the claim, still being written.
	all, err := f.ctrl.slices.List(labels.Everything())
	require.NoError(t, err)
	f.ctrl.alloc.SetSlices(all)
	place(t, f.ctrl.alloc, []*corev1.Node{testNode("node-a"), testNode("node-b")}, Policies{Node: Spread, GPU: Spread}, shared)
	require.True(t, f.ctrl.alloc.Assumed(shared.UID))

	wait, err := f.syncPod("second")
	require.NoError(t, err)
	assert.Equal(t, inFlightRetry, wait)
	assert.Nil(t, f.claim("shared").Status.Allocation, "nothing written for the second pod")
	assert.True(t, hasGate(f.pod("second")))

	// The other write failed and was forgotten: now the pod is decided.
	f.ctrl.alloc.Forget(shared.UID)
	_, err = f.syncPod("second")
	require.NoError(t, err)
	assert.NotNil(t, f.claim("shared").Status.Allocation)
	assert.False(t, hasGate(f.pod("second")))
}
