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

package prepare

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestPrepareBadInput(t *testing.T) {
	const bad = "c0000000-0000-4000-8000-000000000003"
	tests := []struct {
		name    string
		claim   *resourceapi.ResourceClaim
		setup   func(*testEnv)
		wantErr []string
	}{
		{
			name: "malformed opaque config",
			claim: newClaim(bad, "x").result("r", "gpu-0", "1Gi", "10", "").
				config(resourceapi.AllocationConfigSourceClaim, nil, `"memry":"4Gi"`).obj(),
			wantErr: []string{"status.allocation.devices.config", `unknown field "memry"`},
		},
		{
			name: "invalid opaque value",
			claim: newClaim(bad, "x").result("r", "gpu-0", "1Gi", "10", "").
				config(resourceapi.AllocationConfigSourceClaim, nil, `"computePolicy":"fast"`).obj(),
			wantErr: []string{"computePolicy", `"fast"`},
		},
		{
			name: "claim sets class-only enforcement",
			claim: newClaim(bad, "x").result("r", "gpu-0", "1Gi", "10", "").
				config(resourceapi.AllocationConfigSourceClaim, nil, `"enforcement":"disabled"`).obj(),
			wantErr: []string{"enforcement"},
		},
		{
			name:    "unknown device",
			claim:   newClaim(bad, "x").result("r", "gpu-7", "1Gi", "10", "").obj(),
			wantErr: []string{"results[0].device", `"gpu-7"`},
		},
		{
			name:    "memory beyond the device",
			claim:   newClaim(bad, "x").result("r", "gpu-0", "81Gi", "10", "").obj(),
			wantErr: []string{"results[0].consumedCapacity[memory]", "81Gi", "gpu-0"},
		},
		{
			name: "shares of one GPU beyond the device",
			claim: newClaim(bad, "x").result("a", "gpu-0", "60Gi", "10", "").
				result("b", "gpu-0", "30Gi", "10", "").obj(),
			wantErr: []string{"results[1].consumedCapacity[memory]", "add up"},
		},
		{
			name:    "missing memory",
			claim:   newClaim(bad, "x").result("r", "gpu-0", "", "10", "").obj(),
			wantErr: []string{"results[0].consumedCapacity[memory]", "Required value"},
		},
		{
			name:    "missing cores",
			claim:   newClaim(bad, "x").result("r", "gpu-0", "1Gi", "", "").obj(),
			wantErr: []string{"results[0].consumedCapacity[cores]", "Required value"},
		},
		{
			name:    "cores beyond 100",
			claim:   newClaim(bad, "x").result("r", "gpu-0", "1Gi", "150", "").obj(),
			wantErr: []string{"results[0].consumedCapacity[cores]", "150"},
		},
		{
			name:    "fractional cores",
			claim:   newClaim(bad, "x").result("r", "gpu-0", "1Gi", "500m", "").obj(),
			wantErr: []string{"consumedCapacity[cores]", "500m"},
		},
		{
			name:    "zero memory would mean unlimited",
			claim:   newClaim(bad, "x").result("r", "gpu-0", "0", "10", "").obj(),
			wantErr: []string{"consumedCapacity[memory]", "positive"},
		},
		{
			name:    "pool of another node",
			claim:   newClaim(bad, "x").result("r", "gpu-0", "1Gi", "10", "").modify(func(c *resourceapi.ResourceClaim) { c.Status.Allocation.Devices.Results[0].Pool = "node-b" }).obj(),
			wantErr: []string{"results[0].pool", "node-b"},
		},
		{
			name:    "share ID that is not a UUID",
			claim:   newClaim(bad, "x").result("r", "gpu-0", "1Gi", "10", "../../etc").obj(),
			wantErr: []string{"results[0].shareID"},
		},
		{
			name:    "not allocated",
			claim:   newClaim(bad, "x").modify(func(c *resourceapi.ResourceClaim) { c.Status.Allocation = nil }).obj(),
			wantErr: []string{"status.allocation", "not allocated"},
		},
		{
			name: "requests resolve to different settings",
			claim: newClaim(bad, "x").result("a", "gpu-0", "1Gi", "10", "").result("b", "gpu-1", "1Gi", "10", "").
				config(resourceapi.AllocationConfigSourceClaim, []string{"b"}, `"priority":"high"`).obj(),
			wantErr: []string{"results[1].request", "one claim must use one"},
		},
		{
			name:    "GPU edits unavailable",
			claim:   newClaim(bad, "x").result("r", "gpu-1", "1Gi", "10", "").obj(),
			setup:   func(e *testEnv) { e.edits.failFor(uuid1) },
			wantErr: []string{uuid1, "GPU is gone"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t)
			m := env.newManager(t)
			if tc.setup != nil {
				tc.setup(env)
			}
			good := newClaim(claimA, "good").result("r", "gpu-0", "1Gi", "10", "").obj()
			results, err := m.PrepareResourceClaims(testContext(t), []*resourceapi.ResourceClaim{tc.claim, good})
			require.NoError(t, err)
			require.Len(t, results, 2)
			require.Error(t, results[tc.claim.UID].Err)
			for _, s := range tc.wantErr {
				assert.Contains(t, results[tc.claim.UID].Err.Error(), s)
			}
			assert.NoError(t, results[claimA].Err)
			assert.Equal(t, prepared, env.diskState(t, claimA))
			assert.Equal(t, absent, env.diskState(t, bad))
			assert.Len(t, m.PreparedClaims(), 1)
		})
	}
}

func TestPrepareRejectsPathUID(t *testing.T) {
	env := newTestEnv(t)
	m := env.newManager(t)
	for _, uid := range []string{"../x", "/etc", "A0000000-0000-4000-8000-000000000001", "urn:uuid:a0000000-0000-4000-8000-000000000001", ""} {
		claim := newClaim(uid, "evil").result("r", "gpu-0", "1Gi", "10", "").obj()
		results, err := m.PrepareResourceClaims(testContext(t), []*resourceapi.ResourceClaim{claim})
		require.NoError(t, err)
		require.Error(t, results[types.UID(uid)].Err, uid)
		assert.Contains(t, results[types.UID(uid)].Err.Error(), "metadata.uid")
	}
	entries, err := os.ReadDir(filepath.Join(env.stateRoot, "claims"))
	require.NoError(t, err)
	assert.Empty(t, entries)
	_, err = os.Stat(filepath.Join(env.stateRoot, "x"))
	assert.True(t, os.IsNotExist(err), "nothing is written outside the claims directory")
	assert.Empty(t, m.PreparedClaims())
}
