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
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/utils/ptr"
)

// fullPod has every part a real workload's pod has.
func fullPod() *corev1.Pod {
	always := corev1.ContainerRestartPolicyAlways
	res := func(cpu, mem string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "p", Namespace: "ns", UID: "uid-p",
			Annotations:   map[string]string{"vgpu.dra.dev/node-policy": "spread"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}},
		},
		Spec: corev1.PodSpec{
			NodeName:     "node-a",
			NodeSelector: map[string]string{"zone": "a"},
			Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
					{Key: "gpu", Operator: corev1.NodeSelectorOpExists}}}}}}},
			Tolerations:     []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			SchedulingGates: []corev1.PodSchedulingGate{{Name: "vgpu.dra.dev/allocation"}},
			ResourceClaims:  []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("tmpl")}},
			Overhead:        corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")},
			Volumes:         []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			InitContainers: []corev1.Container{
				{Name: "setup", Image: "busybox", Command: []string{"sh"}, Resources: res("4", "1Gi")},
				{Name: "sidecar", Image: "proxy", RestartPolicy: &always, Resources: res("3", "64Mi")},
			},
			Containers: []corev1.Container{{
				Name: "app", Image: "cuda:12", Args: []string{"--train"},
				Env:          []corev1.EnvVar{{Name: "A", Value: "b"}},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
				Resources:    res("2", "4Gi"),
			}},
			EphemeralContainers: []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug", Image: "busybox"}}},
		},
		Status: corev1.PodStatus{
			Phase:                 corev1.PodPending,
			Conditions:            []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}},
			ResourceClaimStatuses: []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To("p-gpu-x7k2")}},
			ContainerStatuses:     []corev1.ContainerStatus{{Name: "app", Image: "cuda:12"}},
		},
	}
}

// TestTrimPodKeepsWhatTheControllerReads: a trimmed pod answers every
// question the controller asks of a pod as the whole pod does, and has lost
// what nothing reads.
func TestTrimPodKeepsWhatTheControllerReads(t *testing.T) {
	whole := fullPod()
	trimmed := whole.DeepCopy()
	_, err := trimForCache(trimmed)
	require.NoError(t, err)

	want := resourcehelper.PodRequests(whole, resourcehelper.PodResourcesOptions{})
	got := resourcehelper.PodRequests(trimmed, resourcehelper.PodResourcesOptions{})
	assert.Zero(t, want.Cpu().Cmp(*got.Cpu()), "CPU requests: %s, want %s", got.Cpu(), want.Cpu())
	assert.Zero(t, want.Memory().Cmp(*got.Memory()), "memory requests: %s, want %s", got.Memory(), want.Memory())
	assert.Equal(t, "5250m", got.Cpu().String(), "app and the sidecar beside it (5) outweigh the init container (4); overhead adds 0.25")

	for _, labels := range []map[string]string{{"zone": "a", "gpu": "h100"}, {"zone": "b", "gpu": "h100"}, {"zone": "a"}} {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: labels}}
		wantMatch, err := nodeaffinity.GetRequiredNodeAffinity(whole).Match(node)
		require.NoError(t, err)
		gotMatch, err := nodeaffinity.GetRequiredNodeAffinity(trimmed).Match(node)
		require.NoError(t, err)
		assert.Equal(t, wantMatch, gotMatch, "node affinity for %v", labels)
	}
	assert.Equal(t, whole.Spec.Tolerations, trimmed.Spec.Tolerations)
	assert.Equal(t, whole.Spec.SchedulingGates, trimmed.Spec.SchedulingGates)
	assert.Equal(t, whole.Annotations, trimmed.Annotations)
	assert.Equal(t, whole.Status.Phase, trimmed.Status.Phase)
	assert.Equal(t, whole.Status.Conditions, trimmed.Status.Conditions)
	wantName, _, err := resourceclaim.Name(whole, &whole.Spec.ResourceClaims[0])
	require.NoError(t, err)
	gotName, _, err := resourceclaim.Name(trimmed, &trimmed.Spec.ResourceClaims[0])
	require.NoError(t, err)
	assert.Equal(t, *wantName, *gotName)
	assert.Equal(t, whole.Spec.ResourceClaims, trimmed.Spec.ResourceClaims)

	assert.Nil(t, trimmed.ManagedFields)
	assert.Nil(t, trimmed.Spec.Volumes)
	assert.Nil(t, trimmed.Spec.EphemeralContainers)
	assert.Nil(t, trimmed.Status.ContainerStatuses)
	assert.Equal(t, corev1.Container{Name: "app", Resources: whole.Spec.Containers[0].Resources}, trimmed.Spec.Containers[0])
	assert.Equal(t, "app", whole.Spec.Containers[0].Name, "the original is not the trimmed copy")
	assert.NotEmpty(t, whole.Spec.Containers[0].Env)
}

// TestInformerCachesHoldTrimmedObjects: the controller's caches go through
// the trim (managed fields of every object, the pods' unread parts) and keep
// everything else.
func TestInformerCachesHoldTrimmedObjects(t *testing.T) {
	managed := []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}}
	pod := fullPod()
	claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", Labels: map[string]string{"app": "x"}, ManagedFields: managed}}
	client := fake.NewClientset(pod, claim)
	factory := newInformerFactory(client)
	pods := factory.Core().V1().Pods().Lister()
	claims := factory.Resource().V1().ResourceClaims().Lister()
	ctx, cancel := context.WithCancel(t.Context())
	factory.Start(ctx.Done())
	defer func() { cancel(); factory.Shutdown() }()
	factory.WaitForCacheSync(ctx.Done())

	gotPod, err := pods.Pods("ns").Get("p")
	require.NoError(t, err)
	assert.Nil(t, gotPod.ManagedFields)
	assert.Nil(t, gotPod.Spec.Volumes)
	assert.Equal(t, pod.Spec.ResourceClaims, gotPod.Spec.ResourceClaims, "what is read is kept")
	gotClaim, err := claims.ResourceClaims("ns").Get("c")
	require.NoError(t, err)
	assert.Nil(t, gotClaim.ManagedFields)
	assert.Equal(t, "x", gotClaim.Labels["app"], "the rest of the object is kept")
}
