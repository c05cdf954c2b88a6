//go:build e2e

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

package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The policy allocator's contract (docs/allocation.md).
const (
	policyGate       = "vgpu.dra.dev/policy-allocation"
	policyNamespace  = "vgpu.dra.dev/policy-allocation"
	gpuPolicy        = "vgpu.dra.dev/gpu-policy"
	policyAllocEvent = "PolicyAllocated"
)

func hasGate(p *corev1.Pod) bool {
	for _, g := range p.Spec.SchedulingGates {
		if g.Name == policyGate {
			return true
		}
	}
	return false
}

// waitPolicyAllocated waits for the allocator's event on a pod.
func (f *framework) waitPolicyAllocated(pod string) string {
	f.t.Helper()
	var message string
	f.poll("event "+policyAllocEvent+" on pod "+pod, time.Minute, func() (bool, error) {
		evs, err := f.c.CoreV1().Events(f.ns).List(f.ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.kind=Pod,involvedObject.name=" + pod + ",reason=" + policyAllocEvent})
		if err != nil || len(evs.Items) == 0 {
			return false, err
		}
		message = evs.Items[0].Message
		return true, nil
	})
	return message
}

// TestPolicyAllocatorPlacesByGPUPolicy: in a namespace under policy
// allocation, two small pods land on one GPU with binpack and on two GPUs
// with spread, each chosen by the pods' own annotation.
func TestPolicyAllocatorPlacesByGPUPolicy(t *testing.T) {
	needsChart(t)
	for policy, sameGPU := range map[string]bool{"binpack": true, "spread": false} {
		t.Run(policy, func(t *testing.T) {
			f := newFramework(t)
			f.setNamespaceMeta(map[string]string{policyNamespace: "enabled"}, nil)
			f.createClaimTemplate("small", claimRequest{memory: "2Gi", cores: "10"})
			pods := []podSpec{{name: policy + "-a"}, {name: policy + "-b"}}
			devices := map[string]bool{}
			for _, p := range pods {
				p.claims = []podClaim{{name: "gpu", template: "small"}}
				p.annotations = map[string]string{gpuPolicy: policy}
				f.admitted(p, "gated for policy allocation", hasGate)
				f.createPod(p)
				// One after the other: the second placement sees the first.
				pod := f.waitRunning(p.name)
				t.Logf("%s: %s", p.name, f.waitPolicyAllocated(p.name))
				devices[allocatedDevice(t, f.claimOf(pod, "gpu")).Device] = true
			}
			if sameGPU {
				assert.Len(t, devices, 1, "binpack puts both pods on one GPU: %v", devices)
			} else {
				assert.Len(t, devices, 2, "spread puts the pods on different GPUs: %v", devices)
			}
		})
	}
}

// TestGatedPodWaitsForTheController: a gated pod stays SchedulingGated while
// no controller replica runs, and is allocated and runs once one is back.
func TestGatedPodWaitsForTheController(t *testing.T) {
	needsChart(t)
	f := newFramework(t)
	// Created while the controller admits claims (its webhook fails closed).
	require.NoError(t, f.createClaim("gpu", claimRequest{memory: "2Gi", cores: "10"}))
	f.driver("controller", "0")
	restored := false
	t.Cleanup(func() {
		if !restored {
			f.driver("controller", "1")
		}
	})
	// Without a replica the gating webhook is skipped (failurePolicy
	// Ignore), so the pod carries the gate the webhook would have added.
	f.createPod(podSpec{name: "gated", claims: []podClaim{{name: "gpu", claim: "gpu"}}, gates: []string{policyGate}})
	time.Sleep(10 * time.Second)
	p, err := f.c.CoreV1().Pods(f.ns).Get(f.ctx, "gated", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, corev1.PodPending, p.Status.Phase)
	assert.Empty(t, p.Spec.NodeName, "the gated pod is not bound")
	var reason string
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			reason = c.Reason
		}
	}
	assert.Equal(t, corev1.PodReasonSchedulingGated, reason, "PodScheduled reason while no controller runs")
	claim, err := f.c.ResourceV1().ResourceClaims(f.ns).Get(f.ctx, "gpu", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Nil(t, claim.Status.Allocation, "the claim is not allocated while the pod is gated")

	f.driver("controller", "1")
	restored = true
	pod := f.waitRunning("gated")
	msg := f.waitPolicyAllocated("gated")
	t.Logf("after the controller returned: %s", msg)
	assert.False(t, hasGate(pod), "the gate is removed")
	assert.True(t, strings.HasPrefix(allocatedDevice(t, f.claimOf(pod, "gpu")).Device, "gpu-"), "the claim is allocated a GPU")
}
