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
	// request (CPU, memory, and "pods" for their count). Nil means nothing.
	Requested func(node string) corev1.ResourceList
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
	want := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	want[corev1.ResourcePods] = *resource.NewQuantity(1, resource.DecimalSI)
	var used corev1.ResourceList
	if f.Requested != nil {
		used = f.Requested(node.Name)
	}
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods} {
		q, ok := want[name]
		if !ok || q.IsZero() {
			continue
		}
		total := used[name].DeepCopy()
		total.Add(q)
		if allocatable, ok := node.Status.Allocatable[name]; ok && total.Cmp(allocatable) > 0 {
			return &FitError{Reason: "node has insufficient " + string(name)}
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
