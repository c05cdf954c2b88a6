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
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// nodeRequests sums, per node, what a set of pods requests: the pods bound
// there and not finished (kept up to date from pod events), or the pods this
// controller placed there and that are not bound yet. Node fit reads a
// node's sum at O(1): summing the node's pods for every candidate node of
// every decision took a quarter of the controller's CPU at 10,000 pods
// (docs/scale.md).
type nodeRequests struct {
	mu    sync.Mutex
	pods  map[types.UID]countedPod
	nodes map[string]NodeUsage
}

type countedPod struct {
	node       string
	generation int64
	usage      NodeUsage
}

func newNodeRequests() *nodeRequests {
	return &nodeRequests{pods: map[types.UID]countedPod{}, nodes: map[string]NodeUsage{}}
}

// put counts the pod on node, in place of where it was counted before.
func (r *nodeRequests) put(pod *corev1.Pod, node string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	old, known := r.pods[pod.UID]
	// Requests change only with the spec, and so with the generation: the
	// status updates of a running pod cost no recomputation.
	if known && old.node == node && old.generation == pod.Generation {
		return
	}
	if known {
		r.subtract(old)
	}
	now := countedPod{node: node, generation: pod.Generation, usage: UsageOf(pod)}
	r.pods[pod.UID] = now
	sum := r.nodes[node]
	sum.Add(now.usage)
	r.nodes[node] = sum
}

// remove stops counting the pod.
func (r *nodeRequests) remove(uid types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if old, known := r.pods[uid]; known {
		r.subtract(old)
		delete(r.pods, uid)
	}
}

func (r *nodeRequests) subtract(p countedPod) {
	sum := r.nodes[p.node]
	sum.Sub(p.usage)
	if sum == (NodeUsage{}) {
		delete(r.nodes, p.node)
		return
	}
	r.nodes[p.node] = sum
}

// on returns the sum of the pods counted on the node.
func (r *nodeRequests) on(node string) NodeUsage {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.nodes[node]
}
