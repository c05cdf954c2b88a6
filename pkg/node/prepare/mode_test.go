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
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/discovery"
)

// recordingMode passes every call to the mode it wraps and records the
// method's name.
type recordingMode struct {
	sharingMode
	mu    sync.Mutex
	calls []string
}

func (r *recordingMode) record(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, name)
}

func (r *recordingMode) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.calls
	r.calls = nil
	return out
}

func (r *recordingMode) resolve(name string) (discovery.Info, GPULimit, bool) {
	r.record("resolve")
	return r.sharingMode.resolve(name)
}

func (r *recordingMode) limitKey(g GPULimit) string {
	r.record("limitKey")
	return r.sharingMode.limitKey(g)
}

func (r *recordingMode) order(g GPULimit) int {
	r.record("order")
	return r.sharingMode.order(g)
}

func (r *recordingMode) burstable() bool {
	r.record("burstable")
	return r.sharingMode.burstable()
}

func (r *recordingMode) planned(g *GPULimit) {
	r.record("planned")
	r.sharingMode.planned(g)
}

func (r *recordingMode) reserve(c *PreparedClaim) {
	r.record("reserve")
	r.sharingMode.reserve(c)
}

func (r *recordingMode) realise(ctx context.Context, c *PreparedClaim) (bool, error) {
	r.record("realise")
	return r.sharingMode.realise(ctx, c)
}

func (r *recordingMode) deviceEdits(g GPULimit, gpu cdispec.ContainerEdits) (cdispec.ContainerEdits, error) {
	r.record("deviceEdits")
	return r.sharingMode.deviceEdits(g, gpu)
}

func (r *recordingMode) release(uid types.UID, complete bool) bool {
	r.record("release")
	return r.sharingMode.release(uid, complete)
}

func (r *recordingMode) teardown(ctx context.Context, uid types.UID) error {
	r.record("teardown")
	return r.sharingMode.teardown(ctx, uid)
}

func (r *recordingMode) recover(ctx context.Context) {
	r.record("recover")
	r.sharingMode.recover(ctx)
}

// recordMIG replaces m's MIG mode by a recordingMode around it.
func recordMIG(m *Manager) *recordingMode {
	rec := &recordingMode{sharingMode: m.modes[modeMIG]}
	m.modes[modeMIG] = rec
	for i, mode := range m.deviceModes {
		if mode == rec.sharingMode {
			m.deviceModes[i] = rec
		}
	}
	return rec
}

func TestPlainSliceEntersNoSharingMode(t *testing.T) {
	t.Run("node without MIG", func(t *testing.T) {
		env := newTestEnv(t)
		m := env.newManager(t)
		rec := recordMIG(m)
		prepareOne(t, m, twoGPUClaim(claimA))
		// Prepared again: compared with its plan, files ensured.
		prepareOne(t, m, twoGPUClaim(claimA))
		assert.Empty(t, rec.take())
	})
	t.Run("node with a GPU in MIG mode", func(t *testing.T) {
		env := newMIGEnv(t)
		m := env.newManager(t)
		rec := recordMIG(m)
		prepareOne(t, m, twoGPUClaim(claimA))
		// Only asked whether gpu-0 and gpu-1 are its devices.
		calls := rec.take()
		assert.NotEmpty(t, calls)
		assert.Subset(t, []string{"resolve"}, calls)

		// The same recorder sees a MIG claim's whole prepare.
		prepareOne(t, m, migClaim(claimB, migDevice3g, shareA))
		calls = rec.take()
		for _, want := range []string{"resolve", "reserve", "realise", "deviceEdits"} {
			assert.Contains(t, calls, want)
		}
	})
}

// TestCheckpointOfEarlierLayoutRecovered writes a checkpoint with a MIG
// instance exactly as the plugin wrote it before the sharing modes had
// sections of their own (keys in the order version, checksum, bootID,
// claims, instances; the checksum over the claims, a newline and the
// instances), and checks that a new manager keeps the claim and its
// instance.
func TestCheckpointOfEarlierLayoutRecovered(t *testing.T) {
	env := newMIGEnv(t)
	m := env.newManager(t)
	prepareOne(t, m, migClaim(claimA, migDevice3g, shareA))
	before := env.record(t)
	require.NotNil(t, before)

	cp, err := loadCheckpoint(m.layout.checkpointPath())
	require.NoError(t, err)
	claims, err := json.Marshal(cp.Claims)
	require.NoError(t, err)
	instances, err := json.Marshal(cp.Instances)
	require.NoError(t, err)
	sum := sha256.Sum256(append(append(append([]byte(nil), claims...), '\n'), instances...))
	earlier, err := json.MarshalIndent(struct {
		Version   int             `json:"version"`
		Checksum  string          `json:"checksum"`
		BootID    string          `json:"bootID"`
		Claims    json.RawMessage `json:"claims"`
		Instances json.RawMessage `json:"instances,omitempty"`
	}{2, hex.EncodeToString(sum[:]), cp.BootID, claims, instances}, "", "  ")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(m.layout.checkpointPath(), append(earlier, '\n'), 0o600))

	env.newManager(t)
	assert.Equal(t, prepared, env.diskState(t, claimA))
	assert.Equal(t, before, env.record(t))
	assert.Equal(t, []string{threeGAt4}, env.instances(t))
}
