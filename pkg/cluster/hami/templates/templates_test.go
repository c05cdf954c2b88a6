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

package templates

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/cluster/hami"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func tmpl(name string, created time.Time, lastUsed string) *resourceapi.ResourceClaimTemplate {
	t := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{
		Name: name, Namespace: "ns", UID: types.UID("uid-" + name), ResourceVersion: "1",
		CreationTimestamp: metav1.NewTime(created),
		Labels:            map[string]string{hami.TemplateLabel: "true"},
	}}
	if lastUsed != "" {
		t.Annotations = map[string]string{LastUsedAnnotation: lastUsed}
	}
	return t
}

func indexer(t *testing.T, objs ...any) cache.Indexer {
	i := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, o := range objs {
		require.NoError(t, i.Add(o))
	}
	return i
}

func TestEnsure(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	now := t0
	fresh := tmpl("fresh", t0.Add(-time.Hour), t0.Add(-10*time.Second).Format(time.RFC3339))
	stale := tmpl("stale", t0.Add(-time.Hour), t0.Add(-5*time.Minute).Format(time.RFC3339))
	client := fake.NewClientset(fresh, stale)
	e := &Ensurer{
		Client: client, Templates: resourcelisters.NewResourceClaimTemplateLister(indexer(t, fresh, stale)),
		TouchInterval: time.Minute, Now: func() time.Time { return now },
	}

	require.NoError(t, e.Ensure(ctx, tmpl("new", time.Time{}, "")))
	got, err := client.ResourceV1().ResourceClaimTemplates("ns").Get(ctx, "new", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, t0.Format(time.RFC3339), got.Annotations[LastUsedAnnotation])

	client.ClearActions()
	require.NoError(t, e.Ensure(ctx, tmpl("fresh", time.Time{}, "")))
	assert.Empty(t, client.Actions(), "a recently stamped template is not written")

	require.NoError(t, e.Ensure(ctx, tmpl("stale", time.Time{}, "")))
	got, err = client.ResourceV1().ResourceClaimTemplates("ns").Get(ctx, "stale", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, t0.Format(time.RFC3339), got.Annotations[LastUsedAnnotation])

	// The cache still lists a template that was deleted meanwhile: it is
	// created again.
	require.NoError(t, client.ResourceV1().ResourceClaimTemplates("ns").Delete(ctx, "stale", metav1.DeleteOptions{}))
	now = now.Add(time.Hour)
	require.NoError(t, e.Ensure(ctx, tmpl("stale", time.Time{}, "")))
	_, err = client.ResourceV1().ResourceClaimTemplates("ns").Get(ctx, "stale", metav1.GetOptions{})
	require.NoError(t, err)
}

func TestCollectOnce(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	old := t0.Add(-time.Hour).Format(time.RFC3339)
	templates := []*resourceapi.ResourceClaimTemplate{
		tmpl("unused-old", t0.Add(-2*time.Hour), old),
		tmpl("unused-recent", t0.Add(-2*time.Hour), t0.Add(-time.Minute).Format(time.RFC3339)),
		tmpl("unused-new", t0.Add(-time.Minute), ""),
		tmpl("used", t0.Add(-2*time.Hour), old),
		tmpl("used-by-finished-pod", t0.Add(-2*time.Hour), old),
	}
	user := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: "user-made", Namespace: "ns", CreationTimestamp: metav1.NewTime(t0.Add(-48 * time.Hour))}}
	pod := func(name, template string, phase corev1.PodPhase) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
			Spec:       corev1.PodSpec{ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To(template)}}},
			Status:     corev1.PodStatus{Phase: phase},
		}
	}
	var objs []any
	client := fake.NewClientset(user)
	for _, tm := range templates {
		objs = append(objs, tm)
		_, err := client.ResourceV1().ResourceClaimTemplates("ns").Create(ctx, tm, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	objs = append(objs, user)
	c := &Collector{
		Client:    client,
		Templates: resourcelisters.NewResourceClaimTemplateLister(indexer(t, objs...)),
		Pods:      corelisters.NewPodLister(indexer(t, pod("a", "used", corev1.PodRunning), pod("b", "used-by-finished-pod", corev1.PodSucceeded))),
		Grace:     10 * time.Minute,
		Now:       func() time.Time { return t0 },
	}
	deleted, err := c.CollectOnce(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, deleted)
	list, err := client.ResourceV1().ResourceClaimTemplates("ns").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	var names []string
	for _, item := range list.Items {
		names = append(names, item.Name)
	}
	assert.ElementsMatch(t, []string{"unused-recent", "unused-new", "used", "user-made"}, names)
}
