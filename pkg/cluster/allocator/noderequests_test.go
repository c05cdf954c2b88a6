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
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func cpuPod(uid, cpu, memory string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: uid, UID: types.UID(uid), Generation: 1},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)},
		}}}},
	}
}

func TestNodeRequestsSumPerNode(t *testing.T) {
	r := newNodeRequests()
	a, b := cpuPod("a", "1500m", "1Gi"), cpuPod("b", "2", "3Gi")
	r.put(a, "node-1")
	r.put(b, "node-1")
	r.put(a, "node-1") // the same pod again is counted once
	assert.Equal(t, NodeUsage{CPUMilli: 3500, Memory: 4 << 30, Pods: 2}, r.on("node-1"))
	assert.Equal(t, NodeUsage{}, r.on("node-2"))

	// A resize bumps the generation: the new requests replace the old.
	a.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("4")
	a.Generation = 2
	r.put(a, "node-1")
	assert.Equal(t, NodeUsage{CPUMilli: 6000, Memory: 4 << 30, Pods: 2}, r.on("node-1"))

	// A pod counted elsewhere leaves its old node.
	r.put(b, "node-2")
	assert.Equal(t, NodeUsage{CPUMilli: 4000, Memory: 1 << 30, Pods: 1}, r.on("node-1"))
	assert.Equal(t, NodeUsage{CPUMilli: 2000, Memory: 3 << 30, Pods: 1}, r.on("node-2"))

	r.remove(a.UID)
	r.remove(a.UID)
	r.remove(b.UID)
	assert.Empty(t, r.pods)
	assert.Empty(t, r.nodes, "empty nodes are dropped, not kept at zero")
}

func TestObserveBindingCountsOnlyBoundPodsThatRun(t *testing.T) {
	c := &Controller{bound: newNodeRequests()}
	p := cpuPod("p", "1", "1Gi")
	c.observeBinding(p)
	assert.Equal(t, NodeUsage{}, c.bound.on("node-1"), "not bound yet")
	p.Spec.NodeName = "node-1"
	c.observeBinding(p)
	assert.Equal(t, NodeUsage{CPUMilli: 1000, Memory: 1 << 30, Pods: 1}, c.bound.on("node-1"))
	p.Status.Phase = corev1.PodRunning
	c.observeBinding(p)
	assert.Equal(t, int64(1), c.bound.on("node-1").Pods)
	p.Status.Phase = corev1.PodSucceeded
	c.observeBinding(p)
	assert.Equal(t, NodeUsage{}, c.bound.on("node-1"), "a finished pod frees its node")
}
