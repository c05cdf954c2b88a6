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

package inspect

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func TestWhyGolden(t *testing.T) {
	exp, err := Why(t.Context(), cluster(), "team-b", "big")
	require.NoError(t, err)
	var out bytes.Buffer
	require.NoError(t, PrintWhy(&out, exp, false))
	golden(t, "why.txt", out.String())
	out.Reset()
	require.NoError(t, PrintWhy(&out, exp, true))
	golden(t, "why-wide.txt", out.String())

	// The numbers behind the text.
	byGPU := map[string]GPUVerdict{}
	for _, v := range exp.GPUs {
		byGPU[v.Node+"/"+v.GPU] = v
	}
	a1 := byGPU["node-a/gpu-1"]
	assert.False(t, a1.Fits)
	assert.Equal(t, []string{"memory: asks 14Gi, 12Gi left of 16Gi"}, a1.Reasons)
	assert.Equal(t, "the request is memory <= 12Gi", a1.FitsIf)
	assert.Equal(t, "the request is memory <= 4Gi", byGPU["node-a/gpu-0"].FitsIf)
	assert.True(t, byGPU["node-b/gpu-0"].Fits, "node-b's GPU is free; the node's taint is the node's verdict")
	assert.Equal(t, "the request tolerates vgpu.dra.dev/xid=79:NoSchedule", byGPU["node-c/gpu-0"].FitsIf)
	assert.Equal(t, "the pod tolerates dedicated=batch:NoSchedule", exp.Nodes[1].FitsIf)
	assert.Equal(t, "claim big request gpu fits on node node-a gpu-1 if the request is memory <= 12Gi", exp.Suggestion)
}

// The suggestion is what the allocator says: with the suggested 12Gi the
// pod fits on node-a gpu-1, with 1Mi more it does not.
func TestWhySuggestionIsExact(t *testing.T) {
	for memory, fits := range map[string]bool{"12Gi": true, "12289Mi": false} {
		snap := cluster()
		snap.Claims[3] = claim("team-b", "big", memory, "30")
		exp, err := Why(t.Context(), snap, "team-b", "big")
		require.NoError(t, err)
		assert.Equal(t, fits, exp.Nodes[0].Fits, "memory %s on node-a", memory)
	}
}

func TestWhyNotCreatedFromTemplateAndErrors(t *testing.T) {
	snap := cluster()
	_, err := Why(t.Context(), snap, "team-b", "nope")
	require.ErrorContains(t, err, "pod team-b/nope not found")

	p := pendingPod("team-b", "plain")
	snap.Pods = append(snap.Pods, &p)
	_, err = Why(t.Context(), snap, "team-b", "plain")
	require.ErrorIs(t, err, ErrNoVGPUClaims)

	tpl := pendingPod("team-b", "tpl")
	tpl.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("missing")}}
	snap.Pods = append(snap.Pods, &tpl)
	_, err = Why(t.Context(), snap, "team-b", "tpl")
	require.ErrorContains(t, err, "ResourceClaimTemplate missing (spec.resourceClaims gpu) not found")
}

func TestWhyScheduledPod(t *testing.T) {
	snap := cluster()
	snap.Pods[0].Spec.NodeName = "node-a"
	exp, err := Why(t.Context(), snap, "team-b", "big")
	require.NoError(t, err)
	assert.Contains(t, exp.Summary, "scheduled on node node-a")
	assert.Empty(t, exp.GPUs)
}

// A qualified capacity name is not the published one: the scheduler never
// allocates such a claim, and why says so on every GPU.
func TestWhyQualifiedCapacityNeverFits(t *testing.T) {
	snap := cluster()
	big := claim("team-b", "big", "1Gi", "")
	q := big.Spec.Devices.Requests[0].Exactly.Capacity.Requests
	q["vgpu.dra.dev/memory"] = q["memory"]
	delete(q, "memory")
	snap.Claims[3] = big
	exp, err := Why(t.Context(), snap, "team-b", "big")
	require.NoError(t, err)
	require.NotEmpty(t, exp.GPUs)
	for _, v := range exp.GPUs {
		assert.False(t, v.Fits, "%s/%s", v.Node, v.GPU)
		assert.Contains(t, v.Reasons, "GPU publishes no capacity vgpu.dra.dev/memory", "%s/%s", v.Node, v.GPU)
	}
}
