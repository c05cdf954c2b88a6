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

package main

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/burstnode"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/reclaim"
)

// TestAsyncEvictor checks the plugin's adapter between burstnode and
// pkg/node/reclaim: a decision returns at once (burstnode decides under the
// monitor's lock), the eviction happens on the adapter's goroutine with
// the claim's grace period, and a full queue is reported to the caller.
func TestAsyncEvictor(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "burster", UID: "pod-1"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "burst", UID: "claim-1"},
		Status: resourceapi.ResourceClaimStatus{ReservedFor: []resourceapi.ResourceClaimConsumerReference{
			{Resource: "pods", Name: pod.Name, UID: pod.UID}}}}
	client := fake.NewClientset(pod, claim)
	var mu sync.Mutex
	var graces []int64
	client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		ev := a.(k8stesting.CreateAction).GetObject().(*policyv1.Eviction)
		mu.Lock()
		graces = append(graces, *ev.DeleteOptions.GracePeriodSeconds)
		mu.Unlock()
		return true, nil, nil
	})
	evictor, err := reclaim.New(reclaim.Options{Client: client, Recorder: record.NewFakeRecorder(100)})
	require.NoError(t, err)
	a := newAsyncEvictor(evictor)
	needing := burstnode.ClaimRef{Namespace: "ns", Name: "needs", UID: "claim-2"}
	from := []burstnode.ClaimRef{{Namespace: "ns", Name: "burst", UID: types.UID("claim-1")}}

	// Nothing serves the queue yet: the decision is queued, not done.
	require.NoError(t, a.Reclaim(ctx, needing, from, "GPU-0", 1<<30, 45*time.Second))
	mu.Lock()
	assert.Empty(t, graces, "no API call on the deciding goroutine")
	mu.Unlock()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go a.run(ctx)
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(graces) == 1
	}, 10*time.Second, 10*time.Millisecond, "the queued decision evicts the claim's pod")
	mu.Lock()
	assert.Equal(t, []int64{45}, graces, "with the claim's grace period")
	mu.Unlock()

	// A queue the evictor cannot keep up with refuses, so that burstnode
	// decides again later instead of the decision getting lost silently.
	full := newAsyncEvictor(evictor)
	for range reclaimQueueLength {
		require.NoError(t, full.Reclaim(ctx, needing, from, "GPU-0", 1, time.Second))
	}
	assert.ErrorIs(t, full.Reclaim(ctx, needing, from, "GPU-0", 1, time.Second), errReclaimQueueFull)
}
