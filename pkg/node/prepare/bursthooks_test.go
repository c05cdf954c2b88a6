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
	"errors"
	"os"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
)

// recordingHooks records the burst hooks' calls and what was on disk then.
type recordingHooks struct {
	mu        sync.Mutex
	e         *testEnv
	calls     []string
	admitErr  error
	ensureErr error
	// specAtEnsure: whether the CDI spec existed when EnsureClaim ran.
	specAtEnsure []bool
	seen         []PreparedClaim
}

func (h *recordingHooks) AdmitClaim(_ context.Context, c *PreparedClaim) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, "admit "+string(c.UID))
	h.seen = append(h.seen, *c)
	return h.admitErr
}

func (h *recordingHooks) EnsureClaim(_ context.Context, c *PreparedClaim) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, "ensure "+string(c.UID))
	_, err := os.Stat(c.HostPIDsPath[:len(c.HostPIDsPath)-len("/pids")])
	h.specAtEnsure = append(h.specAtEnsure, err == nil && h.e.diskState(nil, string(c.UID)).spec)
	h.seen = append(h.seen, *c)
	return h.ensureErr
}

func (h *recordingHooks) ReleaseClaim(_ context.Context, uid types.UID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, "release "+string(uid))
}

func newHookedManager(t *testing.T) (*testEnv, *Manager, *recordingHooks) {
	env := newTestEnv(t)
	hooks := &recordingHooks{e: env}
	opts := env.options()
	opts.Burst = hooks
	m, err := NewManager(testContext(t), opts)
	require.NoError(t, err)
	return env, m, hooks
}

func TestBurstHooksInPrepareAndUnprepare(t *testing.T) {
	env, m, hooks := newHookedManager(t)
	prepareOne(t, m, twoGPUClaim(claimA))
	assert.Equal(t, []string{"admit " + claimA, "ensure " + claimA}, hooks.calls)
	assert.Equal(t, []bool{false}, hooks.specAtEnsure, "EnsureClaim runs before the CDI spec is written, with the host directory there")
	for _, c := range hooks.seen {
		assert.Equal(t, layout{stateRoot: env.stateRoot}.burstPath(claimA), c.BurstPath, "hooks get the host paths")
		assert.Equal(t, layout{stateRoot: env.stateRoot}.burstSocketPath(claimA), c.BurstSocketPath)
	}

	prepareOne(t, m, twoGPUClaim(claimA))
	assert.Equal(t, "ensure "+claimA, hooks.calls[len(hooks.calls)-1], "a repeated prepare ensures, without admitting again")
	assert.Len(t, hooks.calls, 3)

	require.NoError(t, unprepare(t, m, claimA)[claimA])
	assert.Equal(t, "release "+claimA, hooks.calls[len(hooks.calls)-1])
}

func TestBurstAdmitFailureFailsPrepareLeavingNothing(t *testing.T) {
	env, m, hooks := newHookedManager(t)
	hooks.admitErr = errors.New("waiting for burst memory to be reclaimed")
	results, err := m.PrepareResourceClaims(testContext(t), []*resourceapi.ResourceClaim{twoGPUClaim(claimA)})
	require.NoError(t, err)
	require.Error(t, results[claimA].Err)
	assert.Contains(t, results[claimA].Err.Error(), "waiting for burst memory")
	assert.Equal(t, diskState{}, env.diskState(t, claimA), "nothing written")
	assert.Equal(t, []string{"admit " + claimA}, hooks.calls, "nothing to release: the pending admission must stay")

	hooks.admitErr = nil
	prepareOne(t, m, twoGPUClaim(claimA))
}

func TestBurstEnsureFailureRollsBackAndReleases(t *testing.T) {
	env, m, hooks := newHookedManager(t)
	hooks.ensureErr = errors.New("cannot listen")
	results, err := m.PrepareResourceClaims(testContext(t), []*resourceapi.ResourceClaim{twoGPUClaim(claimA)})
	require.NoError(t, err)
	require.Error(t, results[claimA].Err)
	assert.Equal(t, diskState{}, env.diskState(t, claimA))
	assert.Equal(t, []string{"admit " + claimA, "ensure " + claimA, "release " + claimA}, hooks.calls)
}
