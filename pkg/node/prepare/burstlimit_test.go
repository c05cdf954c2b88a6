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
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
)

func TestPreparedClaimCarriesBurstLimits(t *testing.T) {
	env := newTestEnv(t)
	m := env.newManager(t)
	claim := newClaim(claimA, "burst").
		result("a", "gpu-0", "4Gi", "0", "").
		result("b", "gpu-0", "2Gi", "0", shareA).
		result("c", "gpu-1", "1Gi", "0", "").
		config(resourceapi.AllocationConfigSourceClass, []string{"a"}, `"reclaimGracePeriodSeconds":90`).
		config(resourceapi.AllocationConfigSourceClass, []string{"c"}, `"reclaimGracePeriodSeconds":45`).
		config(resourceapi.AllocationConfigSourceClaim, []string{"a"}, `"memoryLimit":"12Gi"`).obj()
	prepareOne(t, m, claim)

	check := func(t *testing.T, m *Manager) {
		t.Helper()
		prepared := m.PreparedClaims()
		require.Len(t, prepared, 1)
		c := prepared[0]
		require.Len(t, c.GPUs, 2)
		// gpu-1 comes first in PCI bus order.
		assert.Equal(t, uuid1, c.GPUs[0].UUID)
		assert.Equal(t, uint64(0), c.GPUs[0].BurstLimitBytes, "no memoryLimit on gpu-1")
		assert.Equal(t, uint64(gib), c.GPUs[0].Ceiling())
		assert.Equal(t, uuid0, c.GPUs[1].UUID)
		assert.Equal(t, uint64(6*gib), c.GPUs[1].MemoryLimitBytes, "the guarantee")
		assert.Equal(t, uint64(14*gib), c.GPUs[1].BurstLimitBytes, "12Gi for a, its 2Gi for b")
		assert.Equal(t, uint64(14*gib), c.GPUs[1].Ceiling())
		assert.True(t, c.HasBurstRoom())
		assert.Equal(t, int64(90), c.ReclaimGracePeriodSeconds, "the longest of its classes' grace periods")
		hostDir := filepath.Join(env.stateRoot, "claims", claimA, "host")
		assert.Equal(t, filepath.Join(hostDir, "burst"), c.BurstPath)
		assert.Equal(t, filepath.Join(hostDir, "burst.sock"), c.BurstSocketPath)
		assert.Equal(t, filepath.Join(hostDir, "pids"), c.HostPIDsPath)
	}
	check(t, m)
	t.Run("after a restart, from the checkpoint", func(t *testing.T) {
		check(t, env.newManager(t))
	})
}

func TestNoBurstLimitWithoutMemoryLimit(t *testing.T) {
	env := newTestEnv(t)
	m := env.newManager(t)
	prepareOne(t, m, twoGPUClaim(claimA))
	c := m.PreparedClaims()[0]
	assert.False(t, c.HasBurstRoom())
	for _, g := range c.GPUs {
		assert.Equal(t, uint64(0), g.BurstLimitBytes)
		assert.Equal(t, g.MemoryLimitBytes, g.Ceiling())
	}
	data, err := os.ReadFile(m.layout.checkpointPath())
	require.NoError(t, err)
	assert.NotContains(t, string(data), "burstLimitBytes", "a claim without burst is checkpointed as before")
	assert.NotContains(t, string(data), "reclaimGracePeriodSeconds")

	t.Run("a limit at the guarantee is no burst", func(t *testing.T) {
		pc, err := m.plan(newClaim(claimB, "same").result("r", "gpu-0", "4Gi", "0", "").
			config(resourceapi.AllocationConfigSourceClaim, nil, `"memoryLimit":"4Gi"`).obj())
		require.NoError(t, err)
		assert.False(t, pc.HasBurstRoom())
		assert.Equal(t, uint64(0), pc.GPUs[0].BurstLimitBytes)
	})
}

// An entry as plugins before burstable memory wrote it, field by field.
const oldCheckpointClaim = `{"state":"PrepareCompleted","uid":"%[1]s","namespace":"default","name":"old",` +
	`"settings":{"computePolicy":"strict","priority":"low","logLevel":"warning","enforcement":"enabled"},` +
	`"gpus":[{"uuid":"%[2]s","memoryLimitBytes":4294967296,"smLimitPercent":0}],` +
	`"devices":[{"request":"r","pool":"node-a","device":"gpu-0","gpu":0,"memoryBytes":4294967296,"cores":0}]}`

func TestOldCheckpointWithoutBurstLimitsIsRead(t *testing.T) {
	claimsJSON := []byte(fmt.Sprintf(`{"%s":`+oldCheckpointClaim+`}`, claimA, claimA, uuid0))
	var compact bytes.Buffer
	require.NoError(t, json.Compact(&compact, claimsJSON))
	file, err := json.Marshal(map[string]any{"version": 1, "checksum": checksum(compact.Bytes()), "bootID": "b", "claims": json.RawMessage(compact.Bytes())})
	require.NoError(t, err)
	cp, err := decodeCheckpoint(file)
	require.NoError(t, err)
	rec := cp.Claims[claimA]
	require.NotNil(t, rec)
	require.Len(t, rec.GPUs, 1)
	assert.Equal(t, uint64(0), rec.GPUs[0].BurstLimitBytes)
	assert.Equal(t, uint64(4*gib), rec.GPUs[0].Ceiling(), "an old claim's ceiling is its guarantee")
	assert.False(t, rec.HasBurstRoom())
}

func TestCheckpointRefusesBadBurstLimit(t *testing.T) {
	for name, burst := range map[string]uint64{"at the guarantee": 4 * uint64(gib), "below it": uint64(gib)} {
		t.Run(name, func(t *testing.T) {
			c := newCheckpoint("b")
			c.Claims[claimA] = &claimRecord{State: statePrepareCompleted, PreparedClaim: PreparedClaim{
				UID:      claimA,
				Settings: Settings{ComputePolicy: "strict", Priority: "low", LogLevel: "warning", Enforcement: "enabled"},
				GPUs:     []GPULimit{{UUID: uuid0, MemoryLimitBytes: 4 * uint64(gib), BurstLimitBytes: burst}},
				Devices:  []PreparedDevice{{GPU: 0, MemoryBytes: 4 * uint64(gib)}},
			}}
			data, err := c.encode()
			require.NoError(t, err)
			_, err = decodeCheckpoint(data)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "gpus[0].burstLimitBytes")
		})
	}
}
