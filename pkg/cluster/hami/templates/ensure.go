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
	"context"
	"fmt"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/klog/v2"
)

// LastUsedAnnotation holds the RFC 3339 time a webhook last admitted a pod
// that uses the template.
const LastUsedAnnotation = "vgpu.dra.dev/last-used"

// Ensurer makes sure generated templates exist and are marked as in use.
type Ensurer struct {
	Client    kubernetes.Interface
	Templates resourcelisters.ResourceClaimTemplateLister
	// TouchInterval limits writes: a template stamped more recently than
	// this is not stamped again. It must be well below the collector's
	// grace period.
	TouchInterval time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

func (e *Ensurer) now() time.Time {
	if e.Now != nil {
		return e.Now()
	}
	return time.Now()
}

// Ensure creates want if it does not exist, or refreshes its last-used
// stamp. Every write that races with the collector's delete is ordered by
// the resourceVersion: either the delete fails on the fresh stamp, or the
// template is gone and is created again here.
func (e *Ensurer) Ensure(ctx context.Context, want *resourceapi.ResourceClaimTemplate) error {
	logger := klog.FromContext(ctx)
	client := e.Client.ResourceV1().ResourceClaimTemplates(want.Namespace)
	existing, err := e.Templates.ResourceClaimTemplates(want.Namespace).Get(want.Name)
	for attempt := 0; attempt < 3; attempt++ {
		switch {
		case err == nil:
			err = e.touch(ctx, existing)
			if err == nil {
				return nil
			}
		case apierrors.IsNotFound(err):
			create := want.DeepCopy()
			stamp(create, e.now())
			if _, err = client.Create(ctx, create, metav1.CreateOptions{}); err == nil {
				logger.V(2).Info("Created ResourceClaimTemplate for HAMi pods", "template", klog.KObj(create))
				return nil
			}
		}
		if !apierrors.IsNotFound(err) && !apierrors.IsAlreadyExists(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("ResourceClaimTemplate %s/%s: %w", want.Namespace, want.Name, err)
		}
		// Someone else created, stamped or deleted it meanwhile: look again.
		existing, err = client.Get(ctx, want.Name, metav1.GetOptions{})
	}
	return fmt.Errorf("ResourceClaimTemplate %s/%s keeps changing concurrently: %w", want.Namespace, want.Name, err)
}

func (e *Ensurer) touch(ctx context.Context, t *resourceapi.ResourceClaimTemplate) error {
	now := e.now()
	if last, ok := LastUsed(t); ok && now.Sub(last) < e.TouchInterval {
		return nil
	}
	update := t.DeepCopy()
	stamp(update, now)
	_, err := e.Client.ResourceV1().ResourceClaimTemplates(t.Namespace).Update(ctx, update, metav1.UpdateOptions{})
	return err
}

func stamp(t *resourceapi.ResourceClaimTemplate, now time.Time) {
	if t.Annotations == nil {
		t.Annotations = map[string]string{}
	}
	t.Annotations[LastUsedAnnotation] = now.UTC().Format(time.RFC3339)
}

// LastUsed is the later of the template's creation and its last-used stamp.
func LastUsed(t *resourceapi.ResourceClaimTemplate) (time.Time, bool) {
	last := t.CreationTimestamp.Time
	if raw, ok := t.Annotations[LastUsedAnnotation]; ok {
		if stamped, err := time.Parse(time.RFC3339, raw); err == nil && stamped.After(last) {
			last = stamped
		}
	}
	return last, !last.IsZero()
}
