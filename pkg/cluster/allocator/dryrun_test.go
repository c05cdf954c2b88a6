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
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
)

func TestDryRunLeavesNoTrace(t *testing.T) {
	a := newTestAllocator(nil)
	a.SetSlices([]*resourceapi.ResourceSlice{gpuSlice(t, "node-a", 1)})
	nodes := []*corev1.Node{testNode("node-a")}
	big := gpuClaim("big", 1, "60Gi", "60")
	req := Request{Pod: testPod("p", big), Claims: []*resourceapi.ResourceClaim{big}, Nodes: nodes}

	// Twice the same 60Gi question on an 80Gi GPU: each answer is yes,
	// because the first dry run did not keep its 60Gi.
	for range 2 {
		d, err := a.DryRun(t.Context(), req)
		require.NoError(t, err)
		assert.Equal(t, []string{"node-a/gpu-0"}, devicesOf(d))
	}
	// Allocate keeps it: now a second 60Gi claim no longer fits.
	_, err := a.Allocate(t.Context(), req)
	require.NoError(t, err)
	other := gpuClaim("other", 1, "60Gi", "10")
	_, err = a.DryRun(t.Context(), Request{Pod: testPod("q", other), Claims: []*resourceapi.ResourceClaim{other}, Nodes: nodes})
	var unfit *UnschedulableError
	require.ErrorAs(t, err, &unfit)
}
