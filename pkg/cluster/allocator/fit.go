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
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
)

// NodeFit checks what kube-scheduler checks about a node apart from
// devices, with the helpers it uses, so that a node chosen for the claims
// can really take the pod: unschedulable nodes, the pod's node selector
// and required node affinity, taints with effect NoSchedule or NoExecute,
// and CPU, memory and pod count against the node's allocatable.
type NodeFit struct {
	// Requested returns what pods already bound or assigned to the node
	// take of it. Nil means nothing.
	Requested func(node string) NodeUsage
}

// NodeUsage is what pods take of a node for node fit: CPU (millicores),
// memory (bytes) and their count.
type NodeUsage struct {
	CPUMilli, Memory, Pods int64
}

// UsageOf is what one pod takes of a node: its requests as kube-scheduler
// counts them (init containers, sidecars, overhead) and one pod.
func UsageOf(pod *corev1.Pod) NodeUsage {
	req := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	return NodeUsage{CPUMilli: req.Cpu().MilliValue(), Memory: req.Memory().Value(), Pods: 1}
}

// Add adds o to u.
func (u *NodeUsage) Add(o NodeUsage) {
	u.CPUMilli += o.CPUMilli
	u.Memory += o.Memory
	u.Pods += o.Pods
}

// Sub takes o off u.
func (u *NodeUsage) Sub(o NodeUsage) {
	u.Add(NodeUsage{CPUMilli: -o.CPUMilli, Memory: -o.Memory, Pods: -o.Pods})
}

// PodFinished reports whether the pod has ended and so takes nothing of
// its node any more.
func PodFinished(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

// Fits returns nil when the pod can run on the node, else a FitError whose
// reason is short and the same for every node failing the same way.
func (f *NodeFit) Fits(logger klog.Logger, pod *corev1.Pod, node *corev1.Node) error {
	if node.Spec.Unschedulable && !corev1helpers.TolerationsTolerateTaint(logger, pod.Spec.Tolerations,
		&corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}, false) {
		return &FitError{Reason: "node is unschedulable"}
	}
	match, err := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node)
	if err != nil {
		return fmt.Errorf("pod %s: node affinity: %w", klog.KObj(pod), err)
	}
	if !match {
		return &FitError{Reason: "node did not match the pod's node selector or affinity"}
	}
	if taint, untolerated := corev1helpers.FindMatchingUntoleratedTaint(logger, node.Spec.Taints, pod.Spec.Tolerations,
		func(t *corev1.Taint) bool {
			return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
		}, false); untolerated {
		return &FitError{Reason: fmt.Sprintf("node had untolerated taint {%s: %s}", taint.Key, taint.Value)}
	}
	var used NodeUsage
	if f.Requested != nil {
		used = f.Requested(node.Name)
	}
	want := UsageOf(pod)
	for _, r := range []struct {
		name       corev1.ResourceName
		want, used int64
		capacity   func(*resource.Quantity) int64
	}{
		{corev1.ResourceCPU, want.CPUMilli, used.CPUMilli, (*resource.Quantity).MilliValue},
		{corev1.ResourceMemory, want.Memory, used.Memory, (*resource.Quantity).Value},
		{corev1.ResourcePods, want.Pods, used.Pods, (*resource.Quantity).Value},
	} {
		if q, ok := node.Status.Allocatable[r.name]; ok && r.want > 0 && r.used+r.want > r.capacity(&q) {
			return &FitError{Reason: "node has insufficient " + string(r.name)}
		}
	}
	return nil
}

// FitError says why a node cannot take a pod.
type FitError struct{ Reason string }

func (e *FitError) Error() string { return e.Reason }

// IsFitError reports whether err only says that a node does not fit.
func IsFitError(err error) bool {
	var fe *FitError
	return errors.As(err, &fe)
}
