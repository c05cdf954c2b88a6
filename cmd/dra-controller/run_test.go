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
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/cluster/admission"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/names"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/devices"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/discovery"
)

func TestHTTPHandlerServesProfilesOnlyWhenAsked(t *testing.T) {
	get := func(h http.Handler, path string) int {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code
	}
	var ready atomic.Bool
	off := httpHandler(prometheus.NewRegistry(), &ready, false)
	on := httpHandler(prometheus.NewRegistry(), &ready, true)

	assert.Equal(t, http.StatusNotFound, get(off, "/debug/pprof/"), "profiles are off by default")
	assert.Equal(t, http.StatusNotFound, get(off, "/debug/pprof/heap"))
	assert.Equal(t, http.StatusOK, get(on, "/debug/pprof/"))
	assert.Equal(t, http.StatusOK, get(on, "/debug/pprof/heap"), "named profiles are served by the index handler")
	assert.Equal(t, http.StatusOK, get(on, "/healthz"), "profiling does not hide the other endpoints")
	assert.Equal(t, http.StatusServiceUnavailable, get(on, "/readyz"))
}

func TestPolicyGateReadsUserTemplatesFromTheCache(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	// A user's template: not labelled as generated, so only an unfiltered
	// cache holds it.
	tmpl := &resourceapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-4g", Namespace: "team"},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: names.DriverName}}},
		}}},
	}
	client := fake.NewClientset(tmpl)
	factory := informers.NewSharedInformerFactory(client, 0)
	o := newOptions()
	o.policyAllocation = string(admission.PolicyAllocationCluster)
	gate := newPolicyGate(o, client, factory, &admission.ClassMatcher{DriverName: names.DriverName, Names: sets.New(names.DriverName)})
	defer factory.Shutdown() // after cancel: the informers stop with ctx
	defer cancel()
	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		require.True(t, ok, "cache of %v", typ)
	}
	client.ClearActions()

	pod := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "team"},
		Spec:       corev1.PodSpec{ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("gpu-4g")}}},
	}
	raw, err := json.Marshal(pod)
	require.NoError(t, err)
	for range 3 {
		resp := gate.Admit(ctx, &admissionv1.AdmissionRequest{
			Operation: admissionv1.Create, Namespace: "team",
			Kind:   metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Object: runtime.RawExtension{Raw: raw},
		})
		require.True(t, resp.Allowed)
		assert.Contains(t, string(resp.Patch), "vgpu.dra.dev/policy-allocation", "the pod is gated")
	}
	// The informers' own watches may start after the sync; they are not
	// requests of the admissions.
	var requests []string
	for _, a := range client.Actions() {
		if a.GetVerb() != "watch" && a.GetVerb() != "list" {
			requests = append(requests, a.GetVerb()+" "+a.GetResource().Resource)
		}
	}
	assert.Empty(t, requests, "no request to the API server per admitted pod")
}

// countingSlices counts List calls of a ResourceSlice lister.
type countingSlices struct {
	resourcelisters.ResourceSliceLister
	lists atomic.Int32
}

func (c *countingSlices) List(selector labels.Selector) ([]*resourceapi.ResourceSlice, error) {
	c.lists.Add(1)
	return c.ResourceSliceLister.List(selector)
}

func TestLargestGPUIsRecomputedOnlyWhenSlicesChange(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	slice := func(node string, memory int64) *resourceapi.ResourceSlice {
		return &resourceapi.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: node},
			Spec: resourceapi.ResourceSliceSpec{
				Driver: names.DriverName, NodeName: ptr.To(node), Pool: resourceapi.ResourcePool{Name: node, ResourceSliceCount: 1},
				Devices: []resourceapi.Device{devices.Device(discovery.Info{UUID: "GPU-" + node, ProductName: "GPU " + node, MemoryBytes: uint64(memory), NUMANode: -1}, devices.Options{})},
			},
		}
	}
	client := fake.NewClientset(slice("node-a", 80<<30))
	factory := informers.NewSharedInformerFactory(client, 0)
	largest, err := newLargestGPU(factory.Resource().V1().ResourceSlices())
	require.NoError(t, err)
	counting := &countingSlices{ResourceSliceLister: largest.slices}
	largest.slices = counting
	defer factory.Shutdown() // after cancel: the informers stop with ctx
	defer cancel()
	factory.Start(ctx.Done())
	// Once the handler has seen the initial slice: a notification arriving
	// after the first computation would (rightly) cause a second one.
	require.True(t, cache.WaitForCacheSync(ctx.Done(), largest.handled))

	for range 100 {
		assert.Equal(t, int64(80<<30), largest.get())
	}
	assert.Equal(t, int32(1), counting.lists.Load(), "one computation for many admissions")

	_, err = client.ResourceV1().ResourceSlices().Create(ctx, slice("node-b", 141<<30), metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Eventually(t, func() bool { return largest.get() == 141<<30 }, 5*time.Second, 10*time.Millisecond, "a new slice is seen")

	require.NoError(t, client.ResourceV1().ResourceSlices().Delete(ctx, "node-b", metav1.DeleteOptions{}))
	assert.Eventually(t, func() bool { return largest.get() == 80<<30 }, 5*time.Second, 10*time.Millisecond, "a deleted slice is gone")
}
