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

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/cluster/hami"
)

// Namespaces opt in to HAMi translation with this label.
const (
	HAMiCompatLabel   = "vgpu.dra.dev/hami-compat"
	HAMiCompatEnabled = "enabled"
)

// TemplateEnsurer makes a generated ResourceClaimTemplate exist.
type TemplateEnsurer interface {
	Ensure(ctx context.Context, t *resourceapi.ResourceClaimTemplate) error
}

// PodMutator is the mutating webhook that translates HAMi pods.
type PodMutator struct {
	Compat hami.Config
	// AllNamespaces translates in every namespace; otherwise only in
	// namespaces labelled HAMiCompatLabel=HAMiCompatEnabled.
	AllNamespaces bool
	Client        kubernetes.Interface
	Namespaces    corelisters.NamespaceLister
	Slices        resourcelisters.ResourceSliceLister
	Templates     TemplateEnsurer
}

// Admit implements AdmitFunc.
func (m *PodMutator) Admit(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	if req.Operation != admissionv1.Create || req.SubResource != "" {
		return allowed()
	}
	if req.Kind != (metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}) {
		return denied(http.StatusBadRequest, metav1.StatusReasonBadRequest,
			fmt.Sprintf("this webhook mutates v1 Pods, not %s; check the webhook configuration", req.Kind.String()))
	}
	enabled, err := m.enabled(ctx, req.Namespace)
	if err != nil {
		return denied(http.StatusInternalServerError, metav1.StatusReasonInternalError, err.Error())
	}
	if !enabled {
		return allowed()
	}
	var pod corev1.Pod
	if err := json.Unmarshal(req.Object.Raw, &pod); err != nil {
		return denied(http.StatusBadRequest, metav1.StatusReasonBadRequest, fmt.Sprintf("decode Pod: %v", err))
	}
	slices, err := m.Slices.List(labels.Everything())
	if err != nil {
		return denied(http.StatusInternalServerError, metav1.StatusReasonInternalError, fmt.Sprintf("list ResourceSlices: %v", err))
	}
	tr, err := hami.Translate(req.Namespace, &pod, m.Compat, hami.Products(slices, m.Compat.DriverName))
	if err != nil {
		return denied(http.StatusUnprocessableEntity, metav1.StatusReasonInvalid,
			fmt.Sprintf("pod uses HAMi GPU resources that cannot be translated to DRA claims: %v", err))
	}
	if tr == nil {
		return allowed()
	}
	if !ptr.Deref(req.DryRun, false) {
		for _, t := range tr.Templates {
			if err := m.Templates.Ensure(ctx, t); err != nil {
				return denied(http.StatusInternalServerError, metav1.StatusReasonInternalError,
					fmt.Sprintf("create the ResourceClaimTemplate for the pod's HAMi GPU resources: %v", err))
			}
		}
	}
	patch, err := json.Marshal(tr.Patch)
	if err != nil {
		return denied(http.StatusInternalServerError, metav1.StatusReasonInternalError, fmt.Sprintf("encode patch: %v", err))
	}
	klog.FromContext(ctx).V(2).Info("Translated HAMi pod", "templates", len(tr.Templates), "dryRun", ptr.Deref(req.DryRun, false))
	resp := allowed()
	resp.Patch = patch
	resp.PatchType = ptr.To(admissionv1.PatchTypeJSONPatch)
	return resp
}

// enabled reads the namespace's opt-in label, from the cache or, for a
// namespace too new for it, from the API server.
func (m *PodMutator) enabled(ctx context.Context, namespace string) (bool, error) {
	if m.AllNamespaces {
		return true, nil
	}
	ns, err := m.Namespaces.Get(namespace)
	if apierrors.IsNotFound(err) {
		ns, err = m.Client.CoreV1().Namespaces().Get(ctx, namespace, metav1.GetOptions{})
	}
	if err != nil {
		return false, fmt.Errorf("read namespace %q for label %s: %w", namespace, HAMiCompatLabel, err)
	}
	return ns.Labels[HAMiCompatLabel] == HAMiCompatEnabled, nil
}
