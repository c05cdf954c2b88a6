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
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/cluster/allocator"
)

func newGate(t *testing.T, mode PolicyAllocationMode) *PolicyGate {
	nsIndexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, ns := range []*corev1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: "policy", Labels: map[string]string{PolicyAllocationLabel: PolicyAllocationEnabled}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "plain"}},
	} {
		require.NoError(t, nsIndexer.Add(ns))
	}
	spec := func(class string) resourceapi.ResourceClaimSpec {
		return resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
			Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: class},
		}}}}
	}
	var objs []any
	for _, ns := range []string{"policy", "plain"} {
		objs = append(objs,
			&resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: "vgpu", Namespace: ns}, Spec: resourceapi.ResourceClaimTemplateSpec{Spec: spec("vgpu.dra.dev")}},
			&resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: "nic", Namespace: ns}, Spec: resourceapi.ResourceClaimTemplateSpec{Spec: spec("nic.example.com")}},
		)
	}
	tmplIndexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, o := range objs {
		require.NoError(t, tmplIndexer.Add(o))
	}
	claimIndexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	// A claim created moments before the pod: only the API server has it.
	client := fake.NewClientset(&resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "fresh", Namespace: "policy"}, Spec: spec("vgpu.dra.dev")})
	return &PolicyGate{
		Mode:       mode,
		Classes:    &ClassMatcher{DriverName: "vgpu.dra.dev", Names: sets.New("vgpu.dra.dev")},
		Client:     client,
		Namespaces: corelisters.NewNamespaceLister(nsIndexer),
		Templates:  resourcelisters.NewResourceClaimTemplateLister(tmplIndexer),
		Claims:     resourcelisters.NewResourceClaimLister(claimIndexer),
	}
}

func gatePod(claims ...corev1.PodResourceClaim) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "obj"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "cuda"}}, ResourceClaims: claims},
	}
}

func fromTemplate(name string) corev1.PodResourceClaim {
	return corev1.PodResourceClaim{Name: name, ResourceClaimTemplateName: ptr.To(name)}
}

func TestPolicyGate(t *testing.T) {
	gated := []corev1.PodSchedulingGate{{Name: allocator.SchedulingGate}}
	tests := []struct {
		name      string
		mode      PolicyAllocationMode
		namespace string
		pod       *corev1.Pod
		wantGates []corev1.PodSchedulingGate // nil: no patch
		wantDeny  string
	}{
		{name: "labelled namespace, our class", mode: PolicyAllocationNamespace, namespace: "policy", pod: gatePod(fromTemplate("vgpu")), wantGates: gated},
		{name: "namespace not labelled", mode: PolicyAllocationNamespace, namespace: "plain", pod: gatePod(fromTemplate("vgpu"))},
		{name: "cluster mode", mode: PolicyAllocationCluster, namespace: "plain", pod: gatePod(fromTemplate("vgpu")), wantGates: gated},
		{name: "off", mode: PolicyAllocationOff, namespace: "policy", pod: gatePod(fromTemplate("vgpu"))},
		{name: "other driver's class", mode: PolicyAllocationCluster, namespace: "policy", pod: gatePod(fromTemplate("nic"))},
		{name: "no claims", mode: PolicyAllocationCluster, namespace: "policy", pod: gatePod()},
		{name: "named claim read from the API server", mode: PolicyAllocationCluster, namespace: "policy",
			pod: gatePod(corev1.PodResourceClaim{Name: "gpu", ResourceClaimName: ptr.To("fresh")}), wantGates: gated},
		{name: "missing template is not judged", mode: PolicyAllocationCluster, namespace: "policy", pod: gatePod(fromTemplate("absent"))},
		{name: "existing gates are kept", mode: PolicyAllocationCluster, namespace: "policy",
			pod: func() *corev1.Pod {
				p := gatePod(fromTemplate("nic"), fromTemplate("vgpu"))
				p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/quota"}}
				return p
			}(),
			wantGates: []corev1.PodSchedulingGate{{Name: "example.com/quota"}, {Name: allocator.SchedulingGate}}},
		{name: "invalid policy annotation", mode: PolicyAllocationCluster, namespace: "policy",
			pod: func() *corev1.Pod {
				p := gatePod(fromTemplate("vgpu"))
				p.Annotations = map[string]string{allocator.GPUPolicyAnnotation: "pack"}
				return p
			}(),
			wantDeny: `metadata.annotations[vgpu.dra.dev/gpu-policy]: "pack" is not a placement policy`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := serve(t, newGate(t, tc.mode).Admit)
			resp := post(t, srv, reviewBody(t, podKind, admissionv1.Create, tc.namespace, tc.pod, false))
			if tc.wantDeny != "" {
				require.False(t, resp.Allowed)
				assert.Contains(t, resp.Result.Message, tc.wantDeny)
				return
			}
			require.True(t, resp.Allowed, "%v", resp.Result)
			if tc.wantGates == nil {
				assert.Empty(t, resp.Patch)
				return
			}
			assert.Equal(t, tc.wantGates, applyPatch(t, tc.pod, resp).Spec.SchedulingGates)
		})
	}
}

func TestPolicyGateIsIdempotent(t *testing.T) {
	srv := serve(t, newGate(t, PolicyAllocationCluster).Admit)
	pod := gatePod(fromTemplate("vgpu"))
	first := applyPatch(t, pod, post(t, srv, reviewBody(t, podKind, admissionv1.Create, "policy", pod, false)))
	// A reinvocation after a later webhook changed the pod adds nothing.
	again := post(t, srv, reviewBody(t, podKind, admissionv1.Create, "policy", first, false))
	assert.True(t, again.Allowed)
	assert.Empty(t, again.Patch)
}

func TestParsePolicyAllocationMode(t *testing.T) {
	for _, s := range []string{"off", "namespace", "cluster"} {
		m, err := ParsePolicyAllocationMode(s)
		require.NoError(t, err)
		assert.Equal(t, PolicyAllocationMode(s), m)
	}
	_, err := ParsePolicyAllocationMode("on")
	assert.ErrorContains(t, err, `"on" is not a policy allocation mode`)
}
