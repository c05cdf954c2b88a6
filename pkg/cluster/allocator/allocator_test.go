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
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
)

// twoNodes has node-a with one 40Gi claim on gpu-0 already (allocated by
// the scheduler, seen through Observe) and node-b idle.
func twoNodes(t *testing.T) (*Allocator, []*corev1.Node) {
	a := newTestAllocator(nil)
	a.SetSlices([]*resourceapi.ResourceSlice{gpuSlice(t, "node-a", 2), gpuSlice(t, "node-b", 2)})
	nodes := []*corev1.Node{testNode("node-a"), testNode("node-b")}
	existing := gpuClaim("existing", 1, "40Gi", "50")
	d := place(t, a, nodes[:1], Policies{Node: Binpack, GPU: Binpack}, existing)
	require.Equal(t, []string{"node-a/gpu-0"}, devicesOf(d))
	existing.Status.Allocation = d.Allocations[0]
	a.Observe(existing)
	return a, nodes
}

func TestNodePolicy(t *testing.T) {
	t.Run("binpack takes the busier node", func(t *testing.T) {
		a, nodes := twoNodes(t)
		d := place(t, a, nodes, Policies{Node: Binpack, GPU: Binpack}, gpuClaim("c", 1, "4Gi", "10"))
		assert.Equal(t, "node-a", d.Node)
		assert.Equal(t, []string{"node-a/gpu-0"}, devicesOf(d), "binpack GPU: the used GPU first")
	})
	t.Run("spread takes the idle node", func(t *testing.T) {
		a, nodes := twoNodes(t)
		d := place(t, a, nodes, Policies{Node: Spread, GPU: Binpack}, gpuClaim("c", 1, "4Gi", "10"))
		assert.Equal(t, "node-b", d.Node)
	})
	t.Run("binpack skips a node that is too full", func(t *testing.T) {
		a, nodes := twoNodes(t)
		d := place(t, a, nodes, Policies{Node: Binpack, GPU: Binpack}, gpuClaim("c", 1, "50Gi", "60"))
		assert.Equal(t, "node-a", d.Node, "gpu-1 of node-a is still free")
		assert.Equal(t, []string{"node-a/gpu-1"}, devicesOf(d))
		d = place(t, a, nodes, Policies{Node: Binpack, GPU: Binpack}, gpuClaim("c2", 1, "50Gi", "60"))
		assert.Equal(t, []string{"node-b/gpu-0"}, devicesOf(d), "node-a has no GPU with 50Gi left")
	})
}

func TestGPUPolicy(t *testing.T) {
	for _, tc := range []struct {
		policy Policy
		want   []string
	}{
		{Binpack, []string{"node-a/gpu-0", "node-a/gpu-0", "node-a/gpu-0"}},
		{Spread, []string{"node-a/gpu-0", "node-a/gpu-1", "node-a/gpu-2"}},
	} {
		t.Run(string(tc.policy), func(t *testing.T) {
			a := newTestAllocator(nil)
			a.SetSlices([]*resourceapi.ResourceSlice{gpuSlice(t, "node-a", 4)})
			var got []string
			for _, name := range []string{"c1", "c2", "c3"} {
				d := place(t, a, []*corev1.Node{testNode("node-a")}, Policies{Node: Binpack, GPU: tc.policy}, gpuClaim(name, 1, "4Gi", "10"))
				got = append(got, devicesOf(d)...)
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestTopology(t *testing.T) {
	a := newTestAllocator(nil)
	a.SetSlices([]*resourceapi.ResourceSlice{gpuSlice(t, "node-a", 8)})
	nodes := []*corev1.Node{testNode("node-a")}
	// Make gpu-0 (root 0) and gpu-4 (root 1) the busiest, so that binpack
	// alone would pair them across roots.
	observeOn(a, "node-a", "gpu-0", "20Gi", "20")
	observeOn(a, "node-a", "gpu-4", "20Gi", "20")
	d := place(t, a, nodes, Policies{Node: Binpack, GPU: Binpack}, gpuClaim("pair", 2, "4Gi", "10"))
	assert.Equal(t, SamePCIeRoot, d.Topology)
	got := devicesOf(d)
	require.Len(t, got, 2)
	assert.Equal(t, []string{"node-a/gpu-0", "node-a/gpu-1"}, got, "the busiest GPU and a neighbour under the same root")

	// Four GPUs under each root: a six-GPU claim cannot share a root or a
	// NUMA node and is still allocated.
	d = place(t, a, nodes, Policies{Node: Binpack, GPU: Binpack}, gpuClaim("six", 6, "1Gi", "1"))
	assert.Equal(t, AnyTopology, d.Topology)
	assert.Len(t, devicesOf(d), 6)
}

func TestUnschedulable(t *testing.T) {
	a := newTestAllocator(nil)
	a.SetSlices([]*resourceapi.ResourceSlice{gpuSlice(t, "node-a", 1)})
	nodes := []*corev1.Node{testNode("node-a"), testNode("no-gpus")}
	_, err := a.Allocate(t.Context(), Request{Pod: testPod("p"), Claims: []*resourceapi.ResourceClaim{gpuClaim("big", 1, "81Gi", "")}, Nodes: nodes, Policies: Policies{Node: Binpack, GPU: Binpack}})
	var unfit *UnschedulableError
	require.True(t, errors.As(err, &unfit), "%v", err)
	assert.Equal(t, 2, unfit.Nodes)
	assert.Equal(t, map[string]int{"node(s) publish no devices": 1, "node(s) lack free GPU memory or cores": 1}, unfit.Reasons)
	assert.Contains(t, err.Error(), "0/2 nodes can take the claims")
}

func TestForgetReturnsCapacity(t *testing.T) {
	a := newTestAllocator(nil)
	a.SetSlices([]*resourceapi.ResourceSlice{gpuSlice(t, "node-a", 1)})
	nodes := []*corev1.Node{testNode("node-a")}
	whole := gpuClaim("whole", 1, "", "")
	place(t, a, nodes, Policies{Node: Binpack, GPU: Binpack}, whole)
	_, err := a.Allocate(t.Context(), Request{Pod: testPod("p"), Claims: []*resourceapi.ResourceClaim{gpuClaim("next", 1, "1Gi", "")}, Nodes: nodes, Policies: Policies{Node: Binpack, GPU: Binpack}})
	require.Error(t, err, "the assumed whole-GPU claim holds the GPU")
	a.Forget(whole.UID)
	place(t, a, nodes, Policies{Node: Binpack, GPU: Binpack}, gpuClaim("next", 1, "1Gi", ""))
}

// TestWholeGPURequestTriesOnlyNodesWithAFreeGPU: a request without a memory
// request takes all of a GPU, so binpack must not run the structured
// allocator over every partly used node first (at 1,000 nodes each such pod
// tried hundreds of them).
func TestWholeGPURequestTriesOnlyNodesWithAFreeGPU(t *testing.T) {
	a := newTestAllocator(nil)
	names := []string{"node-a", "node-b", "node-c", "node-d"}
	var nodes []*corev1.Node
	var slices []*resourceapi.ResourceSlice
	for _, n := range names {
		slices = append(slices, gpuSlice(t, n, 2))
		nodes = append(nodes, testNode(n))
	}
	a.SetSlices(slices)
	for _, n := range names[:3] {
		observeOn(a, n, "gpu-0", "1Gi", "5")
		observeOn(a, n, "gpu-1", "1Gi", "5")
	}

	d := place(t, a, nodes, Policies{Node: Binpack, GPU: Binpack}, gpuClaim("whole", 1, "", ""))
	assert.Equal(t, "node-d", d.Node)
	assert.Equal(t, 1, d.NodesTried, "the three nodes without a free GPU are not tried")

	_, err := a.Allocate(t.Context(), Request{Pod: testPod("p"), Claims: []*resourceapi.ResourceClaim{gpuClaim("two", 2, "", "")},
		Nodes: nodes, Policies: Policies{Node: Binpack, GPU: Binpack}})
	var unfit *UnschedulableError
	require.True(t, errors.As(err, &unfit), "%v", err)
	assert.Equal(t, map[string]int{"node(s) lack free GPU memory or cores": 4}, unfit.Reasons, "node-d has one free GPU left, the claim needs two")

	// Once no GPU is free anywhere, a request with memory still fits on
	// the partly used ones: the count prunes only requests without memory.
	d = place(t, a, nodes, Policies{Node: Binpack, GPU: Binpack}, gpuClaim("whole-2", 1, "", ""))
	assert.Equal(t, "node-d", d.Node)
	d = place(t, a, nodes, Policies{Node: Binpack, GPU: Binpack}, gpuClaim("small", 1, "1Gi", ""))
	assert.Contains(t, []string{"node-a", "node-b", "node-c"}, d.Node)
}

// TestNodeWithoutAGPUHavingBothIsNotTried: free memory on one GPU and free
// cores on another do not make a GPU with both.
func TestNodeWithoutAGPUHavingBothIsNotTried(t *testing.T) {
	a := newTestAllocator(nil)
	a.SetSlices([]*resourceapi.ResourceSlice{gpuSlice(t, "node-a", 2), gpuSlice(t, "node-b", 2)})
	nodes := []*corev1.Node{testNode("node-a"), testNode("node-b")}
	observeOn(a, "node-a", "gpu-0", "1Gi", "100") // memory left, no cores
	observeOn(a, "node-a", "gpu-1", "79Gi", "5")  // cores left, 1Gi of memory

	d := place(t, a, nodes, Policies{Node: Binpack, GPU: Binpack}, gpuClaim("c", 1, "4Gi", "10"))
	assert.Equal(t, "node-b", d.Node)
	assert.Equal(t, 1, d.NodesTried, "binpack's fuller node-a is pruned, not tried")
	d = place(t, a, nodes, Policies{Node: Binpack, GPU: Binpack}, gpuClaim("fits", 1, "1Gi", "10"))
	assert.Equal(t, "node-a", d.Node, "gpu-1 has both")
}
