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

package quota

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/klog/v2"
)

// Usage record ConfigMaps live in the controller's namespace, one per
// limited namespace, so that users cannot edit their own charges.
const (
	usageRecordPrefix = "vgpu-quota-"
	// UsageRecordLabel marks usage records; its value is the namespace
	// charged. Its key keeps the name it was released with: existing
	// records carry it.
	UsageRecordLabel = "vgpu.dra.dev/quota-ledger-for"
)

// maxAttempts bounds retries on write conflicts; each conflict means
// another admission in the same namespace made progress.
const maxAttempts = 10

// ErrExceeded is wrapped by the error Admit returns when a claim does not
// fit the namespace's quota.
var ErrExceeded = errors.New("GPU quota exceeded")

// entry is one charged claim in a usage record.
type entry struct {
	Claim string    `json:"claim"`
	Usage           // amounts charged
	Time  time.Time `json:"time"`
}

// Enforcer admits claims against namespace limits.
type Enforcer struct {
	// Client writes usage records.
	Client kubernetes.Interface
	// UsageRecordNamespace holds the usage records (the controller's
	// namespace).
	UsageRecordNamespace string
	Namespaces           corelisters.NamespaceLister
	Claims               resourcelisters.ResourceClaimLister
	Charger              Charger
	// Grace is how long a usage record's entry counts while its claim is
	// not (yet) in the informer cache: it covers the time between admission and the
	// claim's creation being observed, and claims a later admission step
	// rejected expire after it.
	Grace time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

func (e *Enforcer) now() time.Time {
	if e.Now != nil {
		return e.Now()
	}
	return time.Now()
}

// Admit charges claim to its namespace's quota, or returns an error
// wrapping ErrExceeded that says what does not fit. In dry-run it only
// checks. Admitting the same claim (UID) again is not charged twice.
func (e *Enforcer) Admit(ctx context.Context, claim *resourceapi.ResourceClaim, dryRun bool) error {
	logger := klog.FromContext(ctx)
	ns, err := e.Namespaces.Get(claim.Namespace)
	if err != nil {
		if apierrors.IsNotFound(err) {
			// A namespace created moments ago may not be in the
			// informer cache yet, with its limits: ask the API server.
			ns, err = e.Client.CoreV1().Namespaces().Get(ctx, claim.Namespace, metav1.GetOptions{})
		}
		if err != nil {
			return fmt.Errorf("read namespace %q for its GPU quota: %w", claim.Namespace, err)
		}
	}
	limits, err := LimitsOf(ns)
	if err != nil {
		return err
	}
	if limits.Unlimited() {
		return nil
	}
	charge, err := e.Charger.Charge(ctx, &claim.Spec)
	if err != nil {
		return fmt.Errorf("namespace %q has a GPU quota: %w", claim.Namespace, err)
	}
	if charge.IsZero() {
		return nil
	}
	if claim.UID == "" && !dryRun {
		// The API server assigns the UID before validating admission; a
		// review without one cannot be charged idempotently.
		return fmt.Errorf("claim %s/%s has no UID to charge the GPU quota with", claim.Namespace, claim.Name)
	}

	for attempt := 1; attempt <= maxAttempts; attempt++ {
		record, exists, err := e.getUsageRecord(ctx, claim.Namespace)
		if err != nil {
			return err
		}
		entries, err := decodeEntries(record)
		if err != nil {
			return err
		}
		if _, charged := entries[string(claim.UID)]; charged {
			return nil
		}
		used, kept, err := e.used(ctx, claim.Namespace, entries)
		if err != nil {
			return err
		}
		if err := fits(claim.Namespace, limits, used, charge); err != nil {
			return err
		}
		if dryRun {
			return nil
		}
		kept[string(claim.UID)] = entry{Claim: claim.Name, Usage: charge, Time: e.now().UTC()}
		if err := encodeEntries(record, kept); err != nil {
			return err
		}
		if exists {
			_, err = e.Client.CoreV1().ConfigMaps(e.UsageRecordNamespace).Update(ctx, record, metav1.UpdateOptions{})
		} else {
			_, err = e.Client.CoreV1().ConfigMaps(e.UsageRecordNamespace).Create(ctx, record, metav1.CreateOptions{})
		}
		switch {
		case err == nil:
			logger.V(4).Info("Charged claim to GPU quota", "claim", klog.KObj(claim), "memory", charge.MemoryBytes, "cores", charge.Cores)
			return nil
		case apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err):
			logger.V(5).Info("GPU quota usage record changed concurrently, retrying", "namespace", claim.Namespace, "attempt", attempt)
		default:
			return fmt.Errorf("write GPU quota usage record %s/%s: %w", e.UsageRecordNamespace, record.Name, err)
		}
	}
	return fmt.Errorf("GPU quota usage record of namespace %q is too busy (%d conflicting writes); retry", claim.Namespace, maxAttempts)
}

// getUsageRecord reads the latest usage record from the API server (not a cache: the
// resourceVersion must be current for the compare-and-swap to succeed).
func (e *Enforcer) getUsageRecord(ctx context.Context, namespace string) (*corev1.ConfigMap, bool, error) {
	name := usageRecordPrefix + namespace
	cm, err := e.Client.CoreV1().ConfigMaps(e.UsageRecordNamespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case err == nil:
		return cm, true, nil
	case apierrors.IsNotFound(err):
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: e.UsageRecordNamespace,
			Labels:    map[string]string{UsageRecordLabel: namespace},
		}}, false, nil
	default:
		return nil, false, fmt.Errorf("read GPU quota usage record %s/%s: %w", e.UsageRecordNamespace, name, err)
	}
}

// used sums the usage record's live entries and the namespace's existing claims
// that the usage record does not know (created while the webhook was bypassed or
// before the limit was set). It returns the entries worth keeping: those
// whose claim exists or that are younger than the grace period.
func (e *Enforcer) used(ctx context.Context, namespace string, entries map[string]entry) (Usage, map[string]entry, error) {
	claims, err := e.Claims.ResourceClaims(namespace).List(labels.Everything())
	if err != nil {
		return Usage{}, nil, fmt.Errorf("list claims of namespace %q: %w", namespace, err)
	}
	existing := make(map[types.UID]*resourceapi.ResourceClaim, len(claims))
	for _, c := range claims {
		existing[c.UID] = c
	}
	var used Usage
	kept := make(map[string]entry, len(entries))
	now := e.now()
	for uid, en := range entries {
		if _, ok := existing[types.UID(uid)]; ok || now.Sub(en.Time) < e.Grace {
			kept[uid] = en
			used = used.Add(en.Usage)
		}
	}
	for uid, c := range existing {
		if _, ok := kept[string(uid)]; ok {
			continue
		}
		// A claim that cannot be charged (e.g. allocationMode All, created
		// while the webhook was bypassed) counts as nothing here; its
		// admission, had it happened, would have refused it.
		if u, err := e.Charger.Charge(ctx, &c.Spec); err == nil {
			used = used.Add(u)
		}
	}
	return used, kept, nil
}

func fits(namespace string, limits Limits, used, charge Usage) error {
	var errs []error
	if limits.MemoryBytes != nil && used.MemoryBytes+charge.MemoryBytes > *limits.MemoryBytes {
		errs = append(errs, fmt.Errorf("memory: requested %s, used %s of %s (%s)", bytes(charge.MemoryBytes), bytes(used.MemoryBytes), bytes(*limits.MemoryBytes), AnnotationMemory))
	}
	if limits.Cores != nil && used.Cores+charge.Cores > *limits.Cores {
		errs = append(errs, fmt.Errorf("cores: requested %d, used %d of %d (%s)", charge.Cores, used.Cores, *limits.Cores, AnnotationCores))
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w in namespace %q: %w", ErrExceeded, namespace, errors.Join(errs...))
}

func bytes(b int64) string {
	return resource.NewQuantity(b, resource.BinarySI).String()
}

func decodeEntries(cm *corev1.ConfigMap) (map[string]entry, error) {
	entries := make(map[string]entry, len(cm.Data))
	for uid, raw := range cm.Data {
		var en entry
		if err := json.Unmarshal([]byte(raw), &en); err != nil {
			return nil, fmt.Errorf("GPU quota usage record %s/%s key %q: %w", cm.Namespace, cm.Name, uid, err)
		}
		entries[uid] = en
	}
	return entries, nil
}

func encodeEntries(cm *corev1.ConfigMap, entries map[string]entry) error {
	cm.Data = make(map[string]string, len(entries))
	for uid, en := range entries {
		raw, err := json.Marshal(en)
		if err != nil {
			return fmt.Errorf("encode GPU quota usage record entry %q: %w", uid, err)
		}
		cm.Data[uid] = string(raw)
	}
	return nil
}

// CollectGarbage deletes the usage records of namespaces that no longer exist.
// It runs on the leader only.
func (e *Enforcer) CollectGarbage(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	list, err := e.Client.CoreV1().ConfigMaps(e.UsageRecordNamespace).List(ctx, metav1.ListOptions{LabelSelector: UsageRecordLabel})
	if err != nil {
		return fmt.Errorf("list GPU quota usage records in %q: %w", e.UsageRecordNamespace, err)
	}
	var errs []error
	for i := range list.Items {
		cm := &list.Items[i]
		ns := cm.Labels[UsageRecordLabel]
		if _, err := e.Namespaces.Get(ns); !apierrors.IsNotFound(err) {
			continue
		}
		// The lister may lag behind a namespace created just now: confirm.
		if _, err := e.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			continue
		}
		err := e.Client.CoreV1().ConfigMaps(e.UsageRecordNamespace).Delete(ctx, cm.Name, metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{UID: &cm.UID, ResourceVersion: &cm.ResourceVersion},
		})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			errs = append(errs, fmt.Errorf("delete GPU quota usage record %s/%s: %w", cm.Namespace, cm.Name, err))
			continue
		}
		logger.V(2).Info("Deleted GPU quota usage record of deleted namespace", "namespace", ns)
	}
	return errors.Join(errs...)
}
