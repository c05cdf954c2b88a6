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

package quota

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/devices"
)

const gi = int64(1) << 30

func isOurs(class string) bool { return strings.HasSuffix(class, ".dra.dev") }

// testCharger charges against one 80Gi GPU published with the default
// policy (min 256Mi, step 1Mi), or none when maxGPU is 0.
func testCharger(t testing.TB, maxGPU int64) Charger {
	var gpus []resourceapi.Device
	if maxGPU > 0 {
		gpus = append(gpus, publishedGPU(0, "NVIDIA H100 80GB HBM3", maxGPU, devices.Options{}))
	}
	return Charger{IsOurs: isOurs, Grants: testSizer(t, gpus...)}
}

func exact(name, class string, count int64, requests map[resourceapi.QualifiedName]string) resourceapi.DeviceRequest {
	var capacity *resourceapi.CapacityRequirements
	if requests != nil {
		capacity = &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{}}
		for k, v := range requests {
			capacity.Requests[k] = resource.MustParse(v)
		}
	}
	return resourceapi.DeviceRequest{Name: name, Exactly: &resourceapi.ExactDeviceRequest{
		DeviceClassName: class, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count, Capacity: capacity,
	}}
}

func TestLimitsOf(t *testing.T) {
	tests := []struct {
		name        string
		annotations map[string]string
		want        Limits
		wantErr     []string
	}{
		{name: "none", want: Limits{}},
		{name: "both", annotations: map[string]string{AnnotationMemory: "40Gi", AnnotationCores: "250"}, want: Limits{MemoryBytes: ptr.To(40 * gi), Cores: ptr.To(int64(250))}},
		{name: "zero memory forbids GPUs", annotations: map[string]string{AnnotationMemory: "0"}, want: Limits{MemoryBytes: ptr.To(int64(0))}},
		{name: "bad memory", annotations: map[string]string{AnnotationMemory: "lots"}, wantErr: []string{AnnotationMemory, `"lots"`}},
		{name: "negative memory", annotations: map[string]string{AnnotationMemory: "-1Gi"}, wantErr: []string{AnnotationMemory, "negative"}},
		{name: "fractional cores", annotations: map[string]string{AnnotationCores: "1.5"}, wantErr: []string{AnnotationCores, "whole number"}},
		{name: "negative cores", annotations: map[string]string{AnnotationCores: "-3"}, wantErr: []string{AnnotationCores, "negative"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := LimitsOf(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", Annotations: tc.annotations}})
			if len(tc.wantErr) > 0 {
				require.Error(t, err)
				for _, s := range append(tc.wantErr, `namespace "ns"`) {
					assert.Contains(t, err.Error(), s)
				}
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestCharge(t *testing.T) {
	tests := []struct {
		name    string
		maxGPU  int64
		spec    resourceapi.ResourceClaimSpec
		want    Usage
		wantErr string
	}{
		{
			name:   "count times amounts, other drivers free",
			maxGPU: 80 * gi,
			spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{
				exact("a", "vgpu.dra.dev", 2, map[resourceapi.QualifiedName]string{"memory": "4Gi", "cores": "30"}),
				exact("b", "vgpu-work-conserving.dra.dev", 1, map[resourceapi.QualifiedName]string{"memory": "1Gi"}),
				exact("nic", "nic.example.com", 4, map[resourceapi.QualifiedName]string{"memory": "100Gi"}),
			}}},
			want: Usage{MemoryBytes: 9 * gi, Cores: 60},
		},
		{
			name:   "no memory is a whole GPU",
			maxGPU: 80 * gi,
			spec:   resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{exact("a", "vgpu.dra.dev", 0, nil)}}},
			want:   Usage{MemoryBytes: 80 * gi},
		},
		{
			name:   "tiny requests are charged the published minimum",
			maxGPU: 80 * gi,
			spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{
				exact("a", "vgpu.dra.dev", 1, map[resourceapi.QualifiedName]string{"memory": "1"}),
				exact("b", "vgpu.dra.dev", 1, map[resourceapi.QualifiedName]string{"memory": "1Ki", "cores": "0"}),
				exact("c", "vgpu.dra.dev", 2, map[resourceapi.QualifiedName]string{"memory": "1m"}),
				exact("d", "vgpu.dra.dev", 1, map[resourceapi.QualifiedName]string{"memory": "257Mi"}),
			}}},
			want: Usage{MemoryBytes: 4*256*mi + 257*mi},
		},
		{
			name:    "no GPU known",
			spec:    resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{exact("a", "vgpu.dra.dev", 1, nil)}}},
			wantErr: `request "a": no published GPU matches`,
		},
		{
			name:   "firstAvailable charges the largest alternative per amount",
			maxGPU: 80 * gi,
			spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
				Name: "gpu",
				FirstAvailable: []resourceapi.DeviceSubRequest{
					{Name: "big", DeviceClassName: "vgpu.dra.dev", Count: 1, Capacity: &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{"memory": resource.MustParse("40Gi"), "cores": resource.MustParse("10")}}},
					{Name: "small", DeviceClassName: "vgpu.dra.dev", Count: 2, Capacity: &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{"memory": resource.MustParse("8Gi"), "cores": resource.MustParse("20")}}},
				},
			}}}},
			want: Usage{MemoryBytes: 40 * gi, Cores: 40},
		},
		{
			name:   "allocation mode All cannot be bounded",
			maxGPU: 80 * gi,
			spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
				Name: "all", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "vgpu.dra.dev", AllocationMode: resourceapi.DeviceAllocationModeAll},
			}}}},
			wantErr: `request "all": allocationMode All`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := testCharger(t, tc.maxGPU).Charge(context.Background(), &tc.spec)
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// casClient is a fake clientset whose ConfigMap updates honour
// resourceVersion preconditions like the API server, which the plain fake
// does not.
func casClient(t *testing.T, objs ...runtime.Object) *fake.Clientset {
	client := fake.NewClientset(objs...)
	var rv int64
	gvr := corev1.SchemeGroupVersion.WithResource("configmaps")
	client.PrependReactor("create", "configmaps", func(action k8stesting.Action) (bool, runtime.Object, error) {
		obj := action.(k8stesting.CreateAction).GetObject()
		m, err := meta.Accessor(obj)
		require.NoError(t, err)
		rv++
		m.SetResourceVersion(strconv.FormatInt(rv, 10))
		m.SetUID(types.UID(fmt.Sprintf("uid-%d", rv)))
		return false, nil, nil // the default reactor stores it
	})
	client.PrependReactor("update", "configmaps", func(action k8stesting.Action) (bool, runtime.Object, error) {
		obj := action.(k8stesting.UpdateAction).GetObject()
		m, err := meta.Accessor(obj)
		require.NoError(t, err)
		current, err := client.Tracker().Get(gvr, m.GetNamespace(), m.GetName())
		if err != nil {
			return true, nil, err
		}
		cm, err := meta.Accessor(current)
		require.NoError(t, err)
		if cm.GetResourceVersion() != m.GetResourceVersion() {
			return true, nil, apierrors.NewConflict(gvr.GroupResource(), m.GetName(), errors.New("resourceVersion changed"))
		}
		rv++
		m.SetResourceVersion(strconv.FormatInt(rv, 10))
		return true, obj, client.Tracker().Update(gvr, obj, m.GetNamespace())
	})
	return client
}

type fixture struct {
	client   *fake.Clientset
	enforcer *Enforcer
	claims   cache.Indexer
	now      time.Time
}

func newFixture(t *testing.T, nsAnnotations map[string]string) *fixture {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team", Annotations: nsAnnotations}}
	nsIndexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	require.NoError(t, nsIndexer.Add(ns))
	claims := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	f := &fixture{client: casClient(t, ns), claims: claims, now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	f.enforcer = &Enforcer{
		Client:               f.client,
		UsageRecordNamespace: "vgpu-system",
		Namespaces:           corelisters.NewNamespaceLister(nsIndexer),
		Claims:               resourcelisters.NewResourceClaimLister(claims),
		Charger:              testCharger(t, 80*gi),
		Grace:                time.Minute,
		Now:                  func() time.Time { return f.now },
	}
	return f
}

func claim(name, memory string) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team", UID: types.UID("uid-" + name)},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{
			exact("gpu", "vgpu.dra.dev", 1, map[resourceapi.QualifiedName]string{"memory": memory, "cores": "10"}),
		}}},
	}
}

func (f *fixture) usageRecord(t *testing.T) *corev1.ConfigMap {
	cm, err := f.client.CoreV1().ConfigMaps("vgpu-system").Get(context.Background(), "vgpu-quota-team", metav1.GetOptions{})
	require.NoError(t, err)
	return cm
}

func TestAdmitConcurrentCreatesNeverExceed(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	f := newFixture(t, map[string]string{AnnotationMemory: "40Gi"})
	const n = 40
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			errs[i] = f.enforcer.Admit(ctx, claim(fmt.Sprintf("c%d", i), "4Gi"), false)
		})
	}
	wg.Wait()
	admitted := 0
	for _, err := range errs {
		if err == nil {
			admitted++
			continue
		}
		require.ErrorIs(t, err, ErrExceeded)
		assert.Contains(t, err.Error(), "memory: requested 4Gi, used 40Gi of 40Gi")
	}
	assert.Equal(t, 10, admitted, "exactly the claims that fit are admitted")
	assert.Len(t, f.usageRecord(t).Data, 10)
}

func TestAdmitRules(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)

	t.Run("same claim is charged once", func(t *testing.T) {
		f := newFixture(t, map[string]string{AnnotationMemory: "8Gi"})
		c := claim("a", "6Gi")
		require.NoError(t, f.enforcer.Admit(ctx, c, false))
		require.NoError(t, f.enforcer.Admit(ctx, c, false))
		assert.Len(t, f.usageRecord(t).Data, 1)
		assert.ErrorIs(t, f.enforcer.Admit(ctx, claim("b", "4Gi"), false), ErrExceeded)
	})

	t.Run("dry run checks but charges nothing", func(t *testing.T) {
		f := newFixture(t, map[string]string{AnnotationMemory: "8Gi"})
		require.NoError(t, f.enforcer.Admit(ctx, claim("a", "6Gi"), true))
		assert.ErrorIs(t, f.enforcer.Admit(ctx, claim("b", "9Gi"), true), ErrExceeded)
		_, err := f.client.CoreV1().ConfigMaps("vgpu-system").Get(ctx, "vgpu-quota-team", metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err), "no usage record written: %v", err)
	})

	t.Run("entries of vanished claims expire after the grace period", func(t *testing.T) {
		f := newFixture(t, map[string]string{AnnotationMemory: "8Gi"})
		live := claim("live", "4Gi")
		require.NoError(t, f.enforcer.Admit(ctx, live, false))
		require.NoError(t, f.claims.Add(live))
		require.NoError(t, f.enforcer.Admit(ctx, claim("gone", "4Gi"), false))
		assert.ErrorIs(t, f.enforcer.Admit(ctx, claim("new", "4Gi"), false), ErrExceeded, "the in-flight claim still counts")
		f.now = f.now.Add(2 * time.Minute)
		require.NoError(t, f.enforcer.Admit(ctx, claim("new", "4Gi"), false))
		data := f.usageRecord(t).Data
		assert.Contains(t, data, "uid-live", "an existing claim's entry is kept")
		assert.Contains(t, data, "uid-new")
		assert.NotContains(t, data, "uid-gone")
	})

	t.Run("claims unknown to the usage record count", func(t *testing.T) {
		f := newFixture(t, map[string]string{AnnotationCores: "25"})
		require.NoError(t, f.claims.Add(claim("old", "1Gi")))
		require.NoError(t, f.claims.Add(claim("older", "1Gi")))
		err := f.enforcer.Admit(ctx, claim("new", "1Gi"), false)
		require.ErrorIs(t, err, ErrExceeded)
		assert.Contains(t, err.Error(), "cores: requested 10, used 20 of 25")
	})

	t.Run("unlimited namespace writes no usage record", func(t *testing.T) {
		f := newFixture(t, nil)
		require.NoError(t, f.enforcer.Admit(ctx, claim("a", "1Ti"), false))
		assert.Empty(t, f.client.Actions(), "no API call")
	})

	t.Run("malformed limit fails closed", func(t *testing.T) {
		f := newFixture(t, map[string]string{AnnotationMemory: "forty"})
		err := f.enforcer.Admit(ctx, claim("a", "1Gi"), false)
		require.Error(t, err)
		assert.Contains(t, err.Error(), AnnotationMemory)
	})

	t.Run("unbounded claim in a limited namespace", func(t *testing.T) {
		f := newFixture(t, map[string]string{AnnotationMemory: "8Gi"})
		c := claim("all", "1Gi")
		c.Spec.Devices.Requests[0].Exactly.AllocationMode = resourceapi.DeviceAllocationModeAll
		err := f.enforcer.Admit(ctx, c, false)
		require.Error(t, err)
		assert.Contains(t, err.Error(), `namespace "team" has a GPU quota: request "gpu": allocationMode All`)
	})
}

func TestCollectGarbage(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	f := newFixture(t, map[string]string{AnnotationMemory: "8Gi"})
	require.NoError(t, f.enforcer.Admit(ctx, claim("a", "1Gi"), false))
	orphan := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "vgpu-quota-deleted", Namespace: "vgpu-system", Labels: map[string]string{UsageRecordLabel: "deleted"}}}
	_, err := f.client.CoreV1().ConfigMaps("vgpu-system").Create(ctx, orphan, metav1.CreateOptions{})
	require.NoError(t, err)

	require.NoError(t, f.enforcer.CollectGarbage(ctx))
	list, err := f.client.CoreV1().ConfigMaps("vgpu-system").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, list.Items, 1)
	assert.Equal(t, "vgpu-quota-team", list.Items[0].Name)
}

func TestCollector(t *testing.T) {
	nsIndexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, ns := range []*corev1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: "team", Annotations: map[string]string{AnnotationMemory: "10Gi", AnnotationCores: "100"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "free"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "broken", Annotations: map[string]string{AnnotationCores: "x"}}},
	} {
		require.NoError(t, nsIndexer.Add(ns))
	}
	claims := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	require.NoError(t, claims.Add(claim("a", "3Gi")))
	require.NoError(t, claims.Add(claim("b", "1Gi")))
	c := &Collector{Namespaces: corelisters.NewNamespaceLister(nsIndexer), Claims: resourcelisters.NewResourceClaimLister(claims), Charger: testCharger(t, 80*gi)}
	want := `
# HELP vgpu_dra_quota_cores_limit GPU cores quota of the namespace in percent of one GPU (annotation quota.vgpu.dra.dev/cores).
# TYPE vgpu_dra_quota_cores_limit gauge
vgpu_dra_quota_cores_limit{namespace="team"} 100
# HELP vgpu_dra_quota_cores_used GPU cores charged to the namespace's quota by its existing claims, in percent of one GPU.
# TYPE vgpu_dra_quota_cores_used gauge
vgpu_dra_quota_cores_used{namespace="team"} 20
# HELP vgpu_dra_quota_invalid 1 when the namespace's quota annotations cannot be parsed; its claims are then refused.
# TYPE vgpu_dra_quota_invalid gauge
vgpu_dra_quota_invalid{namespace="broken"} 1
vgpu_dra_quota_invalid{namespace="team"} 0
# HELP vgpu_dra_quota_memory_limit_bytes GPU memory quota of the namespace (annotation quota.vgpu.dra.dev/memory).
# TYPE vgpu_dra_quota_memory_limit_bytes gauge
vgpu_dra_quota_memory_limit_bytes{namespace="team"} 1.073741824e+10
# HELP vgpu_dra_quota_memory_used_bytes GPU memory charged to the namespace's quota by its existing claims.
# TYPE vgpu_dra_quota_memory_used_bytes gauge
vgpu_dra_quota_memory_used_bytes{namespace="team"} 4.294967296e+09
`
	require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(want)))
}
