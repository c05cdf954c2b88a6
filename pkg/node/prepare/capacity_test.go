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
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
)

const (
	claimC = "c0000000-0000-4000-8000-000000000003"
	shareB = "5b000000-0000-4000-8000-00000000000b"
	shareC = "5c000000-0000-4000-8000-00000000000c"
)

func shareClaim(uid, shareID, memory, cores string) *resourceapi.ResourceClaim {
	return newClaim(uid, "c-"+uid[:1]).result("gpu", "gpu-0", memory, cores, shareID).obj()
}

func TestPrepareRefusesOverbooking(t *testing.T) {
	tests := []struct {
		name    string
		second  *resourceapi.ResourceClaim
		wantErr string
	}{
		{"memory", shareClaim(claimB, shareB, "41Gi", "10"), "exceed its 85899345920 bytes"},
		{"cores", shareClaim(claimB, shareB, "1Gi", "51"), "the claim's 51 cores and the 50 cores prepared for other claims exceed 100"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := newTestEnv(t).newManager(t)
			prepareOne(t, m, shareClaim(claimA, shareA, "40Gi", "50"))

			results, err := m.PrepareResourceClaims(testContext(t), []*resourceapi.ResourceClaim{tc.second})
			require.NoError(t, err)
			require.Error(t, results[tc.second.UID].Err)
			assert.Contains(t, results[tc.second.UID].Err.Error(), tc.wantErr)
			assert.Contains(t, results[tc.second.UID].Err.Error(), "gpu-0 ("+uuid0+")")
			assert.NotContains(t, m.cp.Claims, tc.second.UID, "nothing is left of the refused claim")

			// Once the first claim is unprepared, the same claim fits.
			assert.NoError(t, unprepare(t, m, claimA)[types.UID(claimA)])
			prepareOne(t, m, tc.second)
		})
	}
}

func TestPrepareCapacityWithinOneBatch(t *testing.T) {
	m := newTestEnv(t).newManager(t)
	a, b, c := shareClaim(claimA, shareA, "30Gi", "40"), shareClaim(claimB, shareB, "30Gi", "40"), shareClaim(claimC, shareC, "30Gi", "40")
	results, err := m.PrepareResourceClaims(testContext(t), []*resourceapi.ResourceClaim{a, b, c})
	require.NoError(t, err)
	assert.NoError(t, results[a.UID].Err)
	assert.NoError(t, results[b.UID].Err)
	require.Error(t, results[c.UID].Err, "80 of 80Gi and 80 of 100 cores are taken")
	assert.Contains(t, results[c.UID].Err.Error(), "overbooks the GPU")

	// Preparing an already prepared claim again is not counted twice.
	prepareOne(t, m, a)
}
