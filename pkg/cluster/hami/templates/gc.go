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
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/klog/v2"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/cluster/hami"
)

// Collector deletes generated templates that no pod needs any more.
type Collector struct {
	Client    kubernetes.Interface
	Templates resourcelisters.ResourceClaimTemplateLister
	Pods      corelisters.PodLister
	// Grace is how long a template must have gone unused before it is
	// deleted; it covers pods admitted but not yet seen by the informer.
	Grace time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// CollectOnce deletes every generated template that no pod which can still
// start containers references and that was last used longer ago than the
// grace period. It returns how many it deleted.
func (c *Collector) CollectOnce(ctx context.Context) (int, error) {
	logger := klog.FromContext(ctx)
	now := time.Now()
	if c.Now != nil {
		now = c.Now()
	}
	generated, err := c.Templates.List(labels.SelectorFromSet(labels.Set{hami.TemplateLabel: "true"}))
	if err != nil {
		return 0, fmt.Errorf("list generated ResourceClaimTemplates: %w", err)
	}
	if len(generated) == 0 {
		return 0, nil
	}
	pods, err := c.Pods.List(labels.Everything())
	if err != nil {
		return 0, fmt.Errorf("list pods: %w", err)
	}
	inUse := map[types.NamespacedName]bool{}
	for _, pod := range pods {
		// A finished pod never creates claims again.
		if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		for _, rc := range pod.Spec.ResourceClaims {
			if rc.ResourceClaimTemplateName != nil {
				inUse[types.NamespacedName{Namespace: pod.Namespace, Name: *rc.ResourceClaimTemplateName}] = true
			}
		}
	}
	deleted := 0
	var errs []error
	for _, t := range generated {
		if inUse[types.NamespacedName{Namespace: t.Namespace, Name: t.Name}] {
			continue
		}
		if last, ok := LastUsed(t); ok && now.Sub(last) < c.Grace {
			continue
		}
		// The preconditions lose against a webhook that stamped the
		// template after our cache saw it.
		err := c.Client.ResourceV1().ResourceClaimTemplates(t.Namespace).Delete(ctx, t.Name, metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{UID: &t.UID, ResourceVersion: &t.ResourceVersion},
		})
		switch {
		case err == nil:
			deleted++
			logger.V(2).Info("Deleted unused ResourceClaimTemplate", "template", klog.KObj(t))
		case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		default:
			errs = append(errs, fmt.Errorf("delete ResourceClaimTemplate %s/%s: %w", t.Namespace, t.Name, err))
		}
	}
	return deleted, errors.Join(errs...)
}
