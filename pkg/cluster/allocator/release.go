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
	"context"
	"fmt"
	"slices"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/klog/v2"
)

// releasePartial releases the pod's claims that this controller allocated
// and nobody uses yet. It reports whether there were any.
func (c *Controller) releasePartial(ctx context.Context, claims []*resourceapi.ResourceClaim) (bool, error) {
	released := false
	for _, claim := range claims {
		if !ownedAllocation(claim) || len(claim.Status.ReservedFor) > 0 {
			continue
		}
		if err := c.release(ctx, claim); err != nil {
			return released, err
		}
		released = true
	}
	return released, nil
}

// syncClaim releases a claim of ours once no pod needs it any more.
func (c *Controller) syncClaim(ctx context.Context, namespace, name string) error {
	claim, err := c.claims.ResourceClaims(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read claim %s/%s from the cache: %w", namespace, name, err)
	}
	if !slices.Contains(claim.Finalizers, Finalizer) || len(claim.Status.ReservedFor) > 0 {
		return nil
	}
	if claim.DeletionTimestamp == nil {
		inUse, err := c.claimWanted(claim)
		if err != nil || inUse {
			return err
		}
	}
	return c.release(klog.NewContext(ctx, klog.LoggerWithValues(klog.FromContext(ctx), "claim", klog.KObj(claim))), claim)
}

// claimWanted reports whether a pod that has not finished references the
// claim.
func (c *Controller) claimWanted(claim *resourceapi.ResourceClaim) (bool, error) {
	pods, err := c.pods.Pods(claim.Namespace).List(labels.Everything())
	if err != nil {
		return false, fmt.Errorf("list pods in %s: %w", claim.Namespace, err)
	}
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil || PodFinished(pod) {
			continue
		}
		for name := range resourceclaim.PodClaims(pod) {
			if name == claim.Name {
				return true, nil
			}
		}
	}
	return false, nil
}

// release removes the allocation (when nobody has reserved the claim) and
// then the finalizer, so the devices return and deletion can proceed.
func (c *Controller) release(ctx context.Context, claim *resourceapi.ResourceClaim) error {
	claims := c.opts.Client.ResourceV1().ResourceClaims(claim.Namespace)
	claim = claim.DeepCopy()
	if claim.Status.Allocation != nil {
		claim.Status.Allocation = nil
		updated, err := claims.UpdateStatus(ctx, claim, metav1.UpdateOptions{})
		if apierrors.IsNotFound(err) {
			c.alloc.Forget(claim.UID)
			return nil
		}
		if err != nil {
			return fmt.Errorf("release allocation of claim %s: %w", klog.KObj(claim), err)
		}
		claim = updated
	}
	c.alloc.Forget(claim.UID)
	claim.Finalizers = slices.DeleteFunc(claim.Finalizers, func(f string) bool { return f == Finalizer })
	if _, err := claims.Update(ctx, claim, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove finalizer %s from claim %s: %w", Finalizer, klog.KObj(claim), err)
	}
	klog.FromContext(ctx).V(2).Info("Released allocation", "claim", klog.KObj(claim))
	return nil
}

// ownedAllocation reports whether the claim holds an allocation written by
// this controller.
func ownedAllocation(claim *resourceapi.ResourceClaim) bool {
	return claim.Status.Allocation != nil && slices.Contains(claim.Finalizers, Finalizer)
}
