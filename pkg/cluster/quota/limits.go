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
	"errors"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Namespace annotations that set the limits. A namespace without them has
// no limit.
const (
	// AnnotationMemory is the total GPU memory (a quantity such as "40Gi")
	// that the namespace's claims may request.
	AnnotationMemory = "quota.vgpu.dra.dev/memory"
	// AnnotationCores is the total of the claims' cores requests, in
	// percent of one GPU's SM time: "200" is two GPUs' worth.
	AnnotationCores = "quota.vgpu.dra.dev/cores"
)

// Limits of one namespace; nil means unlimited.
type Limits struct {
	MemoryBytes *int64
	Cores       *int64
}

// Unlimited is true when no limit is set.
func (l Limits) Unlimited() bool {
	return l.MemoryBytes == nil && l.Cores == nil
}

// LimitsOf reads the namespace's limits. A malformed annotation is an
// error naming it: admission then fails closed rather than ignoring a limit
// the administrator meant to set.
func LimitsOf(ns *corev1.Namespace) (Limits, error) {
	var l Limits
	var errs []error
	if raw, ok := ns.Annotations[AnnotationMemory]; ok {
		q, err := resource.ParseQuantity(raw)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("namespace %q annotation %s=%q: %w", ns.Name, AnnotationMemory, raw, err))
		case q.Sign() < 0:
			errs = append(errs, fmt.Errorf("namespace %q annotation %s=%q: must not be negative", ns.Name, AnnotationMemory, raw))
		default:
			v := q.Value()
			l.MemoryBytes = &v
		}
	}
	if raw, ok := ns.Annotations[AnnotationCores]; ok {
		v, err := strconv.ParseInt(raw, 10, 64)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("namespace %q annotation %s=%q: must be a whole number: %w", ns.Name, AnnotationCores, raw, err))
		case v < 0:
			errs = append(errs, fmt.Errorf("namespace %q annotation %s=%q: must not be negative", ns.Name, AnnotationCores, raw))
		default:
			l.Cores = &v
		}
	}
	return l, errors.Join(errs...)
}
