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
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCheckpointFormat(t *testing.T) {
	env := newTestEnv(t)
	m := env.newManager(t)
	prepareOne(t, m, twoGPUClaim(claimA))

	data, err := os.ReadFile(m.layout.checkpointPath())
	require.NoError(t, err)
	var file struct {
		Version  int                        `json:"version"`
		Checksum string                     `json:"checksum"`
		BootID   string                     `json:"bootID"`
		Claims   map[string]json.RawMessage `json:"claims"`
	}
	require.NoError(t, json.Unmarshal(data, &file))
	assert.Equal(t, 1, file.Version)
	assert.Equal(t, "boot-1", file.BootID)
	assert.Len(t, file.Checksum, 64)
	require.Contains(t, file.Claims, claimA)
	var entry map[string]any
	require.NoError(t, json.Unmarshal(file.Claims[claimA], &entry))
	assert.Equal(t, "PrepareCompleted", entry["state"])
	assert.Equal(t, "default", entry["namespace"])
	assert.Equal(t, "train", entry["name"])
	assert.Len(t, entry["devices"], 2)

	info, err := os.Stat(m.layout.checkpointPath())
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())
}

func TestCorruptCheckpointRefusesToStart(t *testing.T) {
	valid := func(t *testing.T) (*testEnv, []byte) {
		env := newTestEnv(t)
		m := env.newManager(t)
		prepareOne(t, m, twoGPUClaim(claimA))
		data, err := os.ReadFile(m.layout.checkpointPath())
		require.NoError(t, err)
		return env, data
	}
	tests := []struct {
		name    string
		mutate  func([]byte) []byte
		wantErr string
	}{
		{"garbage", func([]byte) []byte { return []byte("\x00\x01not json") }, "parse"},
		{"truncated", func(b []byte) []byte { return b[:len(b)/2] }, "parse"},
		{"unknown version", func(b []byte) []byte {
			return []byte(strings.Replace(string(b), `"version": 1`, `"version": 4`, 1))
		}, "version: unsupported value 4"},
		{"changed limit", func(b []byte) []byte {
			return []byte(strings.Replace(string(b), `"memoryLimitBytes": 4294967296`, `"memoryLimitBytes": 8294967296`, 1))
		}, "checksum"},
		{"empty", func([]byte) []byte { return nil }, "parse"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env, data := valid(t)
			path := layout{stateRoot: env.stateRoot}.checkpointPath()
			corrupt := tc.mutate(data)
			require.NotEqual(t, data, corrupt, "the mutation must change the file")
			require.NoError(t, os.WriteFile(path, corrupt, 0o600))

			_, err := NewManager(testContext(t), env.options())
			require.Error(t, err)
			assert.Contains(t, err.Error(), path)
			assert.Contains(t, err.Error(), tc.wantErr)
			assert.Contains(t, err.Error(), "refusing to start")

			kept, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, string(corrupt), string(kept), "the evidence is left in place")
			assert.DirExists(t, layout{stateRoot: env.stateRoot}.claimDir(claimA), "nothing of the prepared claim is deleted")
		})
	}
}

func TestCheckpointValidation(t *testing.T) {
	c := newCheckpoint("b")
	rec := &claimRecord{State: "Finished", PreparedClaim: PreparedClaim{
		UID:      "a0000000-0000-4000-8000-000000000001",
		Settings: Settings{ComputePolicy: "strict", Priority: "low", LogLevel: "warning", Enforcement: "enabled"},
		Devices:  []PreparedDevice{{GPU: 3}},
	}}
	c.Claims["../etc"] = rec
	data, err := c.encode()
	require.NoError(t, err)
	_, err = decodeCheckpoint(data)
	require.Error(t, err)
	for _, s := range []string{`claims[../etc]`, "state", `"Finished"`, "devices[0].gpu", "uid"} {
		assert.Contains(t, err.Error(), s)
	}
}

func TestNewManagerOptions(t *testing.T) {
	env := newTestEnv(t)
	opts := env.options()
	opts.StateRoot = "var/lib/vgpu-dra"
	opts.GPUEdits = nil
	opts.NodeName = ""
	_, err := NewManager(testContext(t), opts)
	require.Error(t, err)
	for _, s := range []string{"state root", `"var/lib/vgpu-dra"`, "GPU edits source", "node name"} {
		assert.Contains(t, err.Error(), s)
	}
}
