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
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
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
	// admitted, when set, receives one value per WaitForMemory call: the
	// wait ends with it (nil: a wait that never ends before its context).
	admitted chan bool
	// waitCtxDeadline is the deadline of the last WaitForMemory context.
	waitCtxDeadline time.Time
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

func (h *recordingHooks) WaitForMemory(ctx context.Context, uid types.UID) bool {
	h.mu.Lock()
	h.calls = append(h.calls, "wait "+string(uid))
	h.waitCtxDeadline, _ = ctx.Deadline()
	admitted := h.admitted
	h.mu.Unlock()
	select {
	case ok := <-admitted:
		return ok
	case <-ctx.Done():
		return false
	}
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
	hooks.admitErr = errors.New("the GPU's grant book is broken")
	results, err := m.PrepareResourceClaims(testContext(t), []*resourceapi.ResourceClaim{twoGPUClaim(claimA)})
	require.NoError(t, err)
	require.Error(t, results[claimA].Err)
	assert.Contains(t, results[claimA].Err.Error(), "grant book is broken")
	assert.Equal(t, diskState{}, env.diskState(t, claimA), "nothing written")
	assert.Equal(t, []string{"admit " + claimA}, hooks.calls, "not a wait for memory: no wait; nothing to release")

	hooks.admitErr = nil
	prepareOne(t, m, twoGPUClaim(claimA))
}

// A claim waiting for burst memory is waited for outside the manager's
// lock (an unprepare, which frees the memory, runs meanwhile) and prepared
// in the same call once it fits.
func TestBurstWaitPreparesInTheSameCall(t *testing.T) {
	env, m, hooks := newHookedManager(t)
	prepareOne(t, m, twoGPUClaim(claimB))
	hooks.admitErr = fmt.Errorf("%w: 6 GiB from ns/b", ErrWaitingForMemory)
	hooks.admitted = make(chan bool)

	done := make(chan kubeletplugin.PrepareResult)
	go func() {
		results, err := m.PrepareResourceClaims(testContext(t), []*resourceapi.ResourceClaim{twoGPUClaim(claimA)})
		assert.NoError(t, err)
		done <- results[claimA]
	}()
	require.Eventually(t, func() bool {
		hooks.mu.Lock()
		defer hooks.mu.Unlock()
		return slices.Contains(hooks.calls, "wait "+claimA)
	}, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, unprepare(t, m, claimB)[claimB], "the waiting prepare holds no lock")
	hooks.mu.Lock()
	hooks.admitErr = nil
	hooks.mu.Unlock()
	hooks.admitted <- true

	r := <-done
	require.NoError(t, r.Err)
	assert.NotEmpty(t, r.Devices)
	assert.True(t, env.diskState(t, claimA).spec, "prepared by the first call")
	assert.Equal(t, []string{"admit " + claimA, "wait " + claimA, "release " + claimB, "admit " + claimA, "ensure " + claimA},
		hooks.calls[len(hooks.calls)-5:], "b's unprepare ran during a's wait")
}

// A wait that does not end in time leaves the claim failed with the wait's
// error, for the kubelet to retry; the wait ends short of the call's deadline.
func TestBurstWaitIsBounded(t *testing.T) {
	env := newTestEnv(t)
	hooks := &recordingHooks{e: env, admitErr: fmt.Errorf("%w: 6 GiB from ns/b", ErrWaitingForMemory)}
	opts := env.options()
	opts.Burst = hooks
	opts.BurstAdmissionWait = time.Hour
	m, err := NewManager(testContext(t), opts)
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(testContext(t), burstAdmissionMargin+200*time.Millisecond)
	defer cancel()
	callDeadline, _ := ctx.Deadline()
	results, err := m.PrepareResourceClaims(ctx, []*resourceapi.ResourceClaim{twoGPUClaim(claimA)})
	require.NoError(t, err)
	require.ErrorIs(t, results[claimA].Err, ErrWaitingForMemory)
	assert.Equal(t, diskState{}, env.diskState(t, claimA), "nothing written")
	assert.Equal(t, []string{"admit " + claimA, "wait " + claimA}, hooks.calls)
	assert.Equal(t, callDeadline.Add(-burstAdmissionMargin), hooks.waitCtxDeadline, "the wait leaves the margin of the kubelet's deadline")

	// Without a deadline, Options.BurstAdmissionWait bounds it; negative: no wait.
	opts.BurstAdmissionWait = -1
	m2, err := NewManager(testContext(t), opts)
	require.NoError(t, err)
	hooks.calls = nil
	results, err = m2.PrepareResourceClaims(testContext(t), []*resourceapi.ResourceClaim{twoGPUClaim(claimA)})
	require.NoError(t, err)
	require.ErrorIs(t, results[claimA].Err, ErrWaitingForMemory)
	assert.Equal(t, []string{"admit " + claimA}, hooks.calls)
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
