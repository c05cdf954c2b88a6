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

package admission

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/cluster/hami"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/cluster/hami/templates"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/names"
)

var podKind = metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}

type podFixture struct {
	client  *fake.Clientset
	mutator *PodMutator
}

func newPodFixture(t testing.TB, objs ...any) *podFixture {
	nsIndexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, ns := range []*corev1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: "hami", Labels: map[string]string{HAMiCompatLabel: HAMiCompatEnabled}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "plain"}},
	} {
		require.NoError(t, nsIndexer.Add(ns))
	}
	sliceIndexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	require.NoError(t, sliceIndexer.Add(&resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "node-a-slice"},
		Spec: resourceapi.ResourceSliceSpec{Driver: names.DriverName, Devices: []resourceapi.Device{{
			Name:       "gpu-0",
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{names.AttrProductName: {StringValue: ptr.To("NVIDIA H100 80GB HBM3")}},
			Capacity:   map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{names.CapacityMemory: {Value: resource.MustParse("80Gi")}},
		}}},
	}))
	tmplIndexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, o := range objs {
		require.NoError(t, tmplIndexer.Add(o))
	}
	client := fake.NewClientset()
	return &podFixture{client: client, mutator: &PodMutator{
		Compat: hami.Config{Resources: hami.ResourceNames{
			Count: hami.DefaultCountResource, Memory: hami.DefaultMemoryResource, MemoryPercentage: hami.DefaultMemoryPercentageResource,
			Cores: hami.DefaultCoresResource, Priority: hami.DefaultPriorityResource,
		}, DeviceClassName: "vgpu.dra.dev", DriverName: names.DriverName},
		Client:     client,
		Namespaces: corelisters.NewNamespaceLister(nsIndexer),
		Slices:     resourcelisters.NewResourceSliceLister(sliceIndexer),
		Templates: &templates.Ensurer{
			Client: client, Templates: resourcelisters.NewResourceClaimTemplateLister(tmplIndexer), TouchInterval: time.Minute,
		},
	}}
}

func hamiPod(limits corev1.ResourceList) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "obj", Annotations: map[string]string{hami.AnnotationUseGPUType: "H100"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "cuda", Resources: corev1.ResourceRequirements{Limits: limits}}}},
	}
}

func applyPatch(t *testing.T, pod *corev1.Pod, resp *admissionv1.AdmissionResponse) *corev1.Pod {
	t.Helper()
	require.NotNil(t, resp.PatchType)
	require.Equal(t, admissionv1.PatchTypeJSONPatch, *resp.PatchType)
	raw, err := json.Marshal(pod)
	require.NoError(t, err)
	p, err := jsonpatch.DecodePatch(resp.Patch)
	require.NoError(t, err)
	patched, err := p.Apply(raw)
	require.NoError(t, err)
	var out corev1.Pod
	require.NoError(t, json.Unmarshal(patched, &out))
	return &out
}

func TestPodMutation(t *testing.T) {
	limits := corev1.ResourceList{
		hami.DefaultCountResource:  resource.MustParse("1"),
		hami.DefaultMemoryResource: resource.MustParse("3000"),
		hami.DefaultCoresResource:  resource.MustParse("30"),
	}
	ctx := context.Background()

	t.Run("opted-in namespace gets claims and a template", func(t *testing.T) {
		f := newPodFixture(t)
		srv := serve(t, f.mutator.Admit)
		pod := hamiPod(limits)
		resp := post(t, srv, reviewBody(t, podKind, admissionv1.Create, "hami", pod, false))
		require.True(t, resp.Allowed, "%v", resp.Result)
		out := applyPatch(t, pod, resp)
		require.Len(t, out.Spec.ResourceClaims, 1)
		assert.Empty(t, out.Spec.Containers[0].Resources.Limits)
		assert.Equal(t, []corev1.ResourceClaim{{Name: out.Spec.ResourceClaims[0].Name}}, out.Spec.Containers[0].Resources.Claims)

		tmpl, err := f.client.ResourceV1().ResourceClaimTemplates("hami").Get(ctx, *out.Spec.ResourceClaims[0].ResourceClaimTemplateName, metav1.GetOptions{})
		require.NoError(t, err, "the template the pod references exists")
		req := tmpl.Spec.Spec.Devices.Requests[0].Exactly
		require.NotNil(t, req)
		assert.Equal(t, "3000Mi", ptr.To(req.Capacity.Requests[names.CapacityMemory]).String())
		assert.Equal(t, "30", ptr.To(req.Capacity.Requests[names.CapacityCores]).String())
		assert.Contains(t, req.Selectors[0].CEL.Expression, `contains("h100")`)
	})

	t.Run("dry run creates nothing", func(t *testing.T) {
		f := newPodFixture(t)
		srv := serve(t, f.mutator.Admit)
		resp := post(t, srv, reviewBody(t, podKind, admissionv1.Create, "hami", hamiPod(limits), true))
		require.True(t, resp.Allowed)
		assert.NotEmpty(t, resp.Patch, "a dry run still shows the mutation")
		for _, a := range f.client.Actions() {
			assert.NotEqual(t, "create", a.GetVerb(), "dry run must not create %s", a.GetResource())
		}
	})

	t.Run("namespace not opted in passes through", func(t *testing.T) {
		f := newPodFixture(t)
		srv := serve(t, f.mutator.Admit)
		resp := post(t, srv, reviewBody(t, podKind, admissionv1.Create, "plain", hamiPod(limits), false))
		assert.True(t, resp.Allowed)
		assert.Empty(t, resp.Patch)
		assert.Empty(t, f.client.Actions())
	})

	t.Run("cluster-wide flag", func(t *testing.T) {
		f := newPodFixture(t)
		f.mutator.AllNamespaces = true
		srv := serve(t, f.mutator.Admit)
		resp := post(t, srv, reviewBody(t, podKind, admissionv1.Create, "plain", hamiPod(limits), false))
		assert.True(t, resp.Allowed)
		assert.NotEmpty(t, resp.Patch)
	})

	t.Run("namespace missing from the cache is read from the API server", func(t *testing.T) {
		f := newPodFixture(t)
		_, err := f.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name: "fresh", Labels: map[string]string{HAMiCompatLabel: HAMiCompatEnabled}}}, metav1.CreateOptions{})
		require.NoError(t, err)
		srv := serve(t, f.mutator.Admit)
		resp := post(t, srv, reviewBody(t, podKind, admissionv1.Create, "fresh", hamiPod(limits), false))
		assert.True(t, resp.Allowed)
		assert.NotEmpty(t, resp.Patch)

		resp = post(t, srv, reviewBody(t, podKind, admissionv1.Create, "gone", hamiPod(limits), false))
		assert.False(t, resp.Allowed)
		assert.Contains(t, resp.Result.Message, `read namespace "gone"`)
	})

	t.Run("untranslatable pod is refused with the reason", func(t *testing.T) {
		f := newPodFixture(t)
		srv := serve(t, f.mutator.Admit)
		bad := hamiPod(corev1.ResourceList{hami.DefaultCoresResource: resource.MustParse("250")})
		resp := post(t, srv, reviewBody(t, podKind, admissionv1.Create, "hami", bad, false))
		require.False(t, resp.Allowed)
		assert.EqualValues(t, 422, resp.Result.Code)
		assert.Contains(t, resp.Result.Message, "cannot be translated")
		assert.Contains(t, resp.Result.Message, "spec.containers[0].resources.limits[nvidia.com/gpucores]")
		assert.Empty(t, f.client.Actions(), "nothing is created for a refused pod")
	})

	t.Run("percentage uses the published products", func(t *testing.T) {
		f := newPodFixture(t)
		srv := serve(t, f.mutator.Admit)
		pod := hamiPod(corev1.ResourceList{hami.DefaultMemoryPercentageResource: resource.MustParse("25")})
		resp := post(t, srv, reviewBody(t, podKind, admissionv1.Create, "hami", pod, false))
		require.True(t, resp.Allowed, "%v", resp.Result)
		out := applyPatch(t, pod, resp)
		tmpl, err := f.client.ResourceV1().ResourceClaimTemplates("hami").Get(ctx, *out.Spec.ResourceClaims[0].ResourceClaimTemplateName, metav1.GetOptions{})
		require.NoError(t, err)
		subs := tmpl.Spec.Spec.Devices.Requests[0].FirstAvailable
		require.Len(t, subs, 1)
		assert.Equal(t, "20Gi", ptr.To(subs[0].Capacity.Requests[names.CapacityMemory]).String())
	})

	t.Run("pod without HAMi resources and other operations", func(t *testing.T) {
		f := newPodFixture(t)
		srv := serve(t, f.mutator.Admit)
		plain := hamiPod(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")})
		resp := post(t, srv, reviewBody(t, podKind, admissionv1.Create, "hami", plain, false))
		assert.True(t, resp.Allowed)
		assert.Empty(t, resp.Patch)
		resp = post(t, srv, reviewBody(t, podKind, admissionv1.Update, "hami", hamiPod(limits), false))
		assert.True(t, resp.Allowed)
		assert.Empty(t, resp.Patch)
	})

	t.Run("malformed pod and wrong kind", func(t *testing.T) {
		f := newPodFixture(t)
		srv := serve(t, f.mutator.Admit)
		resp := post(t, srv, reviewBody(t, podKind, admissionv1.Create, "hami", map[string]any{"spec": []int{1}}, false))
		assert.False(t, resp.Allowed)
		assert.Contains(t, resp.Result.Message, "decode Pod")
		resp = post(t, srv, reviewBody(t, claimKind, admissionv1.Create, "hami", map[string]any{}, false))
		assert.False(t, resp.Allowed)
		assert.Contains(t, resp.Result.Message, "check the webhook configuration")
	})
}
