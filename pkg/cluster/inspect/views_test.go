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
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
)

func TestNodesGolden(t *testing.T) {
	rows := Nodes(cluster())
	for _, wide := range []bool{false, true} {
		var out bytes.Buffer
		require.NoError(t, PrintNodes(&out, rows, wide))
		name := "nodes.txt"
		if wide {
			name = "nodes-wide.txt"
		}
		golden(t, name, out.String())
	}
	// The numbers behind the table, checked once by hand.
	require.Len(t, rows, 4)
	assert.Equal(t, HealthUnhealthy, rows[3].Health, "node-c gpu-0 carries its plugin's XID taint")
	a0 := rows[0]
	assert.Equal(t, 12*gi, a0.MemoryAllocated, "8Gi + 4Gi granted on node-a gpu-0")
	assert.Equal(t, int64(70), a0.CoresAllocated)
	require.NotNil(t, a0.MemoryUsed)
	assert.Equal(t, 6656<<20+gi, *a0.MemoryUsed, "6.5Gi + 1Gi reported used")
	assert.Nil(t, rows[1].MemoryUsed, "no claim on node-a gpu-1 reports use")
}

func TestClaimsGolden(t *testing.T) {
	snap := cluster()
	var out bytes.Buffer
	require.NoError(t, PrintClaims(&out, Claims(snap, ""), true, false))
	golden(t, "claims-all.txt", out.String())
	out.Reset()
	rows := Claims(snap, "team-a")
	require.NoError(t, PrintClaims(&out, rows, false, true))
	golden(t, "claims-team-a-wide.txt", out.String())
	require.Len(t, rows, 2, "only team-a's claims")

	// Guarantee, limit and burst, checked once by hand.
	notebook, train := rows[0], rows[1]
	assert.Equal(t, 4*gi, notebook.MemoryGranted, "the guarantee is the consumed memory")
	assert.Equal(t, 12*gi, notebook.MemoryLimit, "the claim's memoryLimit")
	require.NotNil(t, notebook.MemoryBurst)
	assert.Equal(t, 2*gi, *notebook.MemoryBurst, "the burst its node reports")
	assert.Equal(t, 8*gi, train.MemoryLimit, "no memoryLimit: the limit is the guarantee")
	assert.Nil(t, train.MemoryBurst, "no burst reported")
	infer := Claims(snap, "team-b")[1]
	assert.Equal(t, 6*gi, infer.MemoryLimit, "a limit without usage data")
	assert.Nil(t, infer.MemoryBurst)
}

// A memoryLimit below the guarantee (the allocator rounded the request
// up), for another request, or in configs that do not resolve leaves the
// limit at the guarantee.
func TestClaimLimitFallsBackToGuarantee(t *testing.T) {
	for name, mutate := range map[string]func(c *resourceapi.ResourceClaim){
		"below": func(c *resourceapi.ResourceClaim) {
			*c = bursting(*c, "2Gi", "")
		},
		"other request": func(c *resourceapi.ResourceClaim) {
			*c = bursting(*c, "12Gi", "")
			c.Status.Allocation.Devices.Config[0].Requests = []string{"other"}
		},
		"class sets a claim-only field": func(c *resourceapi.ResourceClaim) {
			*c = bursting(*c, "12Gi", "")
			c.Status.Allocation.Devices.Config[0].Source = resourceapi.AllocationConfigSourceClass
		},
		"garbage": func(c *resourceapi.ResourceClaim) {
			*c = bursting(*c, "12Gi", "")
			c.Status.Allocation.Devices.Config[0].Opaque.Parameters.Raw = []byte("{")
		},
	} {
		snap := cluster()
		mutate(&snap.Claims[0]) // team-a train-0, 8Gi
		rows := Claims(snap, "team-a")
		assert.Equal(t, 8*gi, rows[1].MemoryLimit, name)
	}
	// A subrequest of firstAvailable matches a config naming its parent.
	snap := cluster()
	snap.Claims[0] = bursting(snap.Claims[0], "12Gi", "")
	snap.Claims[0].Status.Allocation.Devices.Results[0].Request = "gpu/small"
	assert.Equal(t, 12*gi, Claims(snap, "team-a")[1].MemoryLimit)
}

func TestFormatBytes(t *testing.T) {
	for v, want := range map[int64]string{0: "0", 512 << 20: "512Mi", 3 * gi / 2: "1.5Gi", 80 * gi: "80Gi", 2 << 40: "2Ti", 1000: "1000"} {
		assert.Equal(t, want, FormatBytes(v), "%d bytes", v)
	}
}

// Device names sort as people count, and the comparison allocates
// nothing: sorting the claims of a large cluster calls it a hundred
// thousand times per rebuild of kubectl vgpu ui's page.
func TestGPULessCountsAndDoesNotAllocate(t *testing.T) {
	names := []string{"gpu-10", "", "gpu-2", "gpu-0-mig-1g-18gb-0", "gpu-x", "gpu-1"}
	slices.SortFunc(names, gpuLess)
	assert.Equal(t, []string{"", "gpu-0-mig-1g-18gb-0", "gpu-1", "gpu-2", "gpu-10", "gpu-x"}, names)
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		gpuLess("", "gpu-3")
		gpuLess("gpu-0-mig-1g-18gb-0", "gpu-12")
	}))
}
