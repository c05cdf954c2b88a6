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
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
)

// newInformerFactory is every informer factory of the controller: its caches
// hold objects trimmed by trimForCache.
func newInformerFactory(client kubernetes.Interface, opts ...informers.SharedInformerOption) informers.SharedInformerFactory {
	return informers.NewSharedInformerFactoryWithOptions(client, 0, append(opts, informers.WithTransform(trimForCache))...)
}

// trimForCache drops what nothing in the controller reads from the objects
// its caches hold, which with 10,000 pods and claims is most of its memory
// (docs/scale.md): metadata.managedFields of every object, and of pods
// everything but what the policy allocator, its node fit and the garbage
// collectors read. Nothing writes a cached copy back whole (the pod's gate is
// removed by a JSON patch; claim updates leave managed fields nil, which
// means unchanged), so what is dropped here is never dropped on the server.
func trimForCache(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
	}
	if pod, ok := obj.(*corev1.Pod); ok {
		trimPod(pod)
	}
	return obj, nil
}

// trimPod keeps of a pod: its metadata, node name, claims, scheduling gates,
// what node fit checks (node selector, affinity, tolerations, priority, the
// containers' and init containers' resources and restart policies, and the
// pod's overhead and resources), and its phase, conditions and claim
// statuses. It drops volumes, the containers' images, commands,
// environment, mounts, probes and security contexts, ephemeral containers
// (they request nothing), and the container statuses.
func trimPod(pod *corev1.Pod) {
	pod.Spec.Volumes = nil
	pod.Spec.EphemeralContainers = nil
	pod.Spec.Containers = trimContainers(pod.Spec.Containers)
	pod.Spec.InitContainers = trimContainers(pod.Spec.InitContainers)
	pod.Status.ContainerStatuses = nil
	pod.Status.InitContainerStatuses = nil
	pod.Status.EphemeralContainerStatuses = nil
}

func trimContainers(in []corev1.Container) []corev1.Container {
	if in == nil {
		return nil
	}
	out := make([]corev1.Container, len(in))
	for i := range in {
		out[i] = corev1.Container{
			Name:          in[i].Name,
			Resources:     in[i].Resources,
			RestartPolicy: in[i].RestartPolicy,
		}
	}
	return out
}
