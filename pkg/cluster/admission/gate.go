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
	"fmt"
	"net/http"
	"slices"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/cluster/allocator"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/cluster/hami"
)

// GatePodsPath is where the scheduling-gate webhook is served.
const GatePodsPath = "/gate-pods"

// Namespaces opt in to policy allocation with this label when the mode is
// PolicyAllocationNamespace.
const (
	PolicyAllocationLabel   = "vgpu.dra.dev/policy-allocation"
	PolicyAllocationEnabled = "enabled"
)

// PolicyAllocationMode says where pods are held for the policy allocator.
type PolicyAllocationMode string

const (
	PolicyAllocationOff       PolicyAllocationMode = "off"
	PolicyAllocationNamespace PolicyAllocationMode = "namespace"
	PolicyAllocationCluster   PolicyAllocationMode = "cluster"
)

// ParsePolicyAllocationMode accepts "off", "namespace" or "cluster".
func ParsePolicyAllocationMode(s string) (PolicyAllocationMode, error) {
	switch m := PolicyAllocationMode(s); m {
	case PolicyAllocationOff, PolicyAllocationNamespace, PolicyAllocationCluster:
		return m, nil
	default:
		return "", fmt.Errorf("%q is not a policy allocation mode, want %q, %q or %q", s, PolicyAllocationOff, PolicyAllocationNamespace, PolicyAllocationCluster)
	}
}

// PolicyGate is the mutating webhook that adds allocator.SchedulingGate to
// new pods whose claims use this driver's DeviceClasses, so that the policy
// allocator, not the scheduler's first fit, allocates them. It also refuses
// placement-policy annotations with values the allocator does not know.
//
// Register it after the HAMi webhook with reinvocationPolicy IfNeeded: a
// HAMi pod gets its claims there, and must be gated here.
type PolicyGate struct {
	Mode    PolicyAllocationMode
	Classes *ClassMatcher
	Client  kubernetes.Interface
	// Namespaces, Templates and Claims are caches; what they lack is read
	// from the API server (a template made moments ago by the HAMi webhook,
	// a claim created just before its pod).
	Namespaces corelisters.NamespaceLister
	Templates  resourcelisters.ResourceClaimTemplateLister
	Claims     resourcelisters.ResourceClaimLister
}

// Admit implements AdmitFunc.
func (g *PolicyGate) Admit(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	if req.Operation != admissionv1.Create || req.SubResource != "" || g.Mode == PolicyAllocationOff {
		return allowed()
	}
	if req.Kind != podKindV1 {
		return denied(http.StatusBadRequest, metav1.StatusReasonBadRequest,
			fmt.Sprintf("this webhook gates v1 Pods, not %s; check the webhook configuration", req.Kind.String()))
	}
	if g.Mode == PolicyAllocationNamespace {
		ns, err := g.namespace(ctx, req.Namespace)
		if err != nil {
			return denied(http.StatusInternalServerError, metav1.StatusReasonInternalError, err.Error())
		}
		if ns.Labels[PolicyAllocationLabel] != PolicyAllocationEnabled {
			return allowed()
		}
	}
	var pod corev1.Pod
	if err := json.Unmarshal(req.Object.Raw, &pod); err != nil {
		return denied(http.StatusBadRequest, metav1.StatusReasonBadRequest, fmt.Sprintf("decode Pod: %v", err))
	}
	if _, err := allocator.PodPolicies(&pod, allocator.Policies{Node: allocator.Binpack, GPU: allocator.Binpack}); err != nil {
		return denied(http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, fmt.Sprintf("pod has an invalid placement policy: %v", err))
	}
	if slices.ContainsFunc(pod.Spec.SchedulingGates, func(s corev1.PodSchedulingGate) bool { return s.Name == allocator.SchedulingGate }) {
		return allowed()
	}
	ours, err := g.usesOurClasses(ctx, req.Namespace, &pod)
	if err != nil {
		return denied(http.StatusInternalServerError, metav1.StatusReasonInternalError, err.Error())
	}
	if !ours {
		return allowed()
	}
	op := hami.PatchOp{Op: "add", Path: "/spec/schedulingGates/-", Value: corev1.PodSchedulingGate{Name: allocator.SchedulingGate}}
	if len(pod.Spec.SchedulingGates) == 0 {
		op = hami.PatchOp{Op: "add", Path: "/spec/schedulingGates", Value: []corev1.PodSchedulingGate{{Name: allocator.SchedulingGate}}}
	}
	patch, err := json.Marshal([]hami.PatchOp{op})
	if err != nil {
		return denied(http.StatusInternalServerError, metav1.StatusReasonInternalError, fmt.Sprintf("encode patch: %v", err))
	}
	klog.FromContext(ctx).V(2).Info("Gated pod for policy allocation")
	resp := allowed()
	resp.Patch = patch
	resp.PatchType = ptr.To(admissionv1.PatchTypeJSONPatch)
	return resp
}

var podKindV1 = metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}

func (g *PolicyGate) namespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	ns, err := g.Namespaces.Get(name)
	if apierrors.IsNotFound(err) {
		ns, err = g.Client.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	}
	if err != nil {
		return nil, fmt.Errorf("read namespace %q for label %s: %w", name, PolicyAllocationLabel, err)
	}
	return ns, nil
}

// usesOurClasses reports whether one of the pod's claims (from a template
// or named) asks for a DeviceClass of this driver. Claims that do not exist
// yet cannot be judged and are skipped; extended-resource requests are
// allocated by the scheduler, which creates their claims itself.
func (g *PolicyGate) usesOurClasses(ctx context.Context, namespace string, pod *corev1.Pod) (bool, error) {
	for i, pc := range pod.Spec.ResourceClaims {
		var spec *resourceapi.ResourceClaimSpec
		switch {
		case pc.ResourceClaimTemplateName != nil:
			tmpl, err := g.Templates.ResourceClaimTemplates(namespace).Get(*pc.ResourceClaimTemplateName)
			if apierrors.IsNotFound(err) {
				tmpl, err = g.Client.ResourceV1().ResourceClaimTemplates(namespace).Get(ctx, *pc.ResourceClaimTemplateName, metav1.GetOptions{})
			}
			if apierrors.IsNotFound(err) {
				continue
			}
			if err != nil {
				return false, fmt.Errorf("spec.resourceClaims[%d]: read ResourceClaimTemplate %s/%s: %w", i, namespace, *pc.ResourceClaimTemplateName, err)
			}
			spec = &tmpl.Spec.Spec
		case pc.ResourceClaimName != nil:
			claim, err := g.Claims.ResourceClaims(namespace).Get(*pc.ResourceClaimName)
			if apierrors.IsNotFound(err) {
				claim, err = g.Client.ResourceV1().ResourceClaims(namespace).Get(ctx, *pc.ResourceClaimName, metav1.GetOptions{})
			}
			if apierrors.IsNotFound(err) {
				continue
			}
			if err != nil {
				return false, fmt.Errorf("spec.resourceClaims[%d]: read ResourceClaim %s/%s: %w", i, namespace, *pc.ResourceClaimName, err)
			}
			if claim.Status.Allocation != nil {
				// Already allocated (a shared claim): nothing to decide.
				continue
			}
			spec = &claim.Spec
		default:
			continue
		}
		for _, r := range spec.Devices.Requests {
			if r.Exactly != nil && g.Classes.IsOurs(r.Exactly.DeviceClassName) {
				return true, nil
			}
			for _, s := range r.FirstAvailable {
				if g.Classes.IsOurs(s.DeviceClassName) {
					return true, nil
				}
			}
		}
	}
	return false, nil
}
