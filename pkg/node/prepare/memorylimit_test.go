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
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// planError plans claim and returns its single field error.
func planError(t *testing.T, m *Manager, claim *resourceapi.ResourceClaim) *field.Error {
	t.Helper()
	_, err := m.plan(claim)
	require.Error(t, err)
	var agg interface{ Errors() []error }
	require.ErrorAs(t, err, &agg)
	require.Len(t, agg.Errors(), 1, "%v", err)
	var fe *field.Error
	require.ErrorAs(t, agg.Errors()[0], &fe)
	return fe
}

// Prepare checks a claim's memoryLimit again, against the GPU it was
// allocated (80 GiB here), and names the config that set it.
func TestPlanChecksMemoryLimit(t *testing.T) {
	m := newTestEnv(t).newManager(t)
	claim := func() *claimBuilder { return newClaim(claimA, "burst") }
	claimCfg := resourceapi.AllocationConfigSourceClaim
	classCfg := resourceapi.AllocationConfigSourceClass

	t.Run("within the GPU", func(t *testing.T) {
		_, err := m.plan(claim().result("r", "gpu-0", "4Gi", "0", "").config(claimCfg, nil, `"memoryLimit":"80Gi"`).obj())
		require.NoError(t, err)
	})
	t.Run("above the GPU", func(t *testing.T) {
		fe := planError(t, m, claim().result("r", "gpu-0", "4Gi", "0", "").
			config(claimCfg, []string{"other"}, `"memoryLimit":"1Gi"`).
			config(claimCfg, []string{"r"}, `"memoryLimit":"81Gi"`).obj())
		assert.Equal(t, field.ErrorTypeInvalid, fe.Type)
		assert.Equal(t, "status.allocation.devices.config[1].opaque.parameters.memoryLimit", fe.Field)
		assert.Equal(t, "81Gi", fe.BadValue)
		assert.Contains(t, fe.Detail, "more than its 85899345920 bytes")
	})
	t.Run("the later config wins", func(t *testing.T) {
		_, err := m.plan(claim().result("r", "gpu-0", "4Gi", "0", "").
			config(claimCfg, nil, `"memoryLimit":"81Gi"`).
			config(claimCfg, nil, `"memoryLimit":"8Gi"`).
			config(claimCfg, nil, `"priority":"high"`).obj())
		require.NoError(t, err)
		fe := planError(t, m, claim().result("r", "gpu-0", "4Gi", "0", "").
			config(claimCfg, nil, `"memoryLimit":"8Gi"`).
			config(claimCfg, nil, `"memoryLimit":"81Gi"`).
			config(claimCfg, nil, `"priority":"high"`).obj())
		assert.Equal(t, "status.allocation.devices.config[1].opaque.parameters.memoryLimit", fe.Field)
	})
	t.Run("limits of two shares of one GPU add up", func(t *testing.T) {
		fe := planError(t, m, claim().
			result("a", "gpu-0", "4Gi", "0", "").
			result("b", "gpu-0", "8Gi", "0", "").
			config(claimCfg, []string{"a"}, `"memoryLimit":"76Gi"`).obj())
		assert.Equal(t, "status.allocation.devices.config[0].opaque.parameters.memoryLimit", fe.Field)
		assert.Contains(t, fe.Detail, `request "b"`)
		assert.Contains(t, fe.Detail, "add up to 90194313216 bytes")
	})
	t.Run("limits as large as int64 allows do not wrap around", func(t *testing.T) {
		_, err := m.plan(claim().
			result("a", "gpu-0", "1Gi", "0", "").
			result("b", "gpu-0", "1Gi", "0", "").
			result("c", "gpu-0", "1Gi", "0", "").
			config(claimCfg, nil, `"memoryLimit":"100Ei"`).obj())
		require.Error(t, err)
		assert.Contains(t, err.Error(), `request "c": the claim's memory limits on gpu-0 (`+uuid0+`) add up to 18446744073709551615 bytes`, "saturated")
	})
	t.Run("limits on different GPUs do not add up", func(t *testing.T) {
		_, err := m.plan(claim().
			result("a", "gpu-0", "4Gi", "0", "").
			result("b", "gpu-1", "8Gi", "0", "").
			config(claimCfg, nil, `"memoryLimit":"60Gi"`).obj())
		require.NoError(t, err)
	})
	t.Run("a limit below what was consumed is the guarantee", func(t *testing.T) {
		_, err := m.plan(claim().result("r", "gpu-0", "80Gi", "0", "").config(claimCfg, nil, `"memoryLimit":"1Gi"`).obj())
		require.NoError(t, err)
	})
	t.Run("burst never in the class", func(t *testing.T) {
		fe := planError(t, m, claim().result("r", "gpu-0", "4Gi", "0", "").
			config(classCfg, nil, `"burst":"never"`).
			config(claimCfg, nil, `"memoryLimit":"8Gi"`).obj())
		assert.Equal(t, "status.allocation.devices.config", fe.Field)
		assert.Contains(t, fe.Detail, "memoryLimit: Forbidden: the DeviceClass sets burst: never")
	})
	t.Run("memoryLimit from a class", func(t *testing.T) {
		fe := planError(t, m, claim().result("r", "gpu-0", "4Gi", "0", "").config(classCfg, nil, `"memoryLimit":"8Gi"`).obj())
		assert.Contains(t, fe.Detail, "memoryLimit: Forbidden")
	})
}
