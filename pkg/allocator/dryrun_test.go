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
