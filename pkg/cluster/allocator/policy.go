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
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// Names shared with the admission webhook and the documentation.
const (
	// SchedulingGate holds a pod back from the scheduler until its claims
	// are allocated by policy.
	SchedulingGate = "vgpu.dra.dev/policy-allocation"
	// Finalizer protects an allocation written by this allocator, as
	// resource.kubernetes.io/delete-protection does for the scheduler's.
	Finalizer = "vgpu.dra.dev/policy-allocation"
	// NodePolicyAnnotation and GPUPolicyAnnotation override the cluster
	// defaults for one pod.
	NodePolicyAnnotation = "vgpu.dra.dev/node-policy"
	GPUPolicyAnnotation  = "vgpu.dra.dev/gpu-policy"
)

// Policy says which of several feasible places wins.
type Policy string

const (
	// Binpack fills the most used node or GPU first, keeping others free
	// for large claims.
	Binpack Policy = "binpack"
	// Spread takes the least used node or GPU first, lowering contention.
	Spread Policy = "spread"
)

// ParsePolicy accepts exactly "binpack" or "spread".
func ParsePolicy(s string) (Policy, error) {
	switch p := Policy(s); p {
	case Binpack, Spread:
		return p, nil
	default:
		return "", fmt.Errorf("%q is not a placement policy, want %q or %q", s, Binpack, Spread)
	}
}

// Policies are the node- and GPU-level policies for one pod.
type Policies struct {
	Node Policy
	GPU  Policy
}

// PodPolicies applies the pod's annotations to the defaults. An invalid
// annotation is an error naming it; the defaults are returned with it so
// that a caller which must proceed still can.
func PodPolicies(pod *corev1.Pod, defaults Policies) (Policies, error) {
	out := defaults
	var err error
	for _, a := range []struct {
		key string
		dst *Policy
	}{{NodePolicyAnnotation, &out.Node}, {GPUPolicyAnnotation, &out.GPU}} {
		v, ok := pod.Annotations[a.key]
		if !ok {
			continue
		}
		p, perr := ParsePolicy(v)
		if perr != nil {
			if err == nil {
				err = fmt.Errorf("metadata.annotations[%s]: %w", a.key, perr)
			}
			continue
		}
		*a.dst = p
	}
	return out, err
}
