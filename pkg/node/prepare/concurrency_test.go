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
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
)

func TestConcurrentCalls(t *testing.T) {
	env := newTestEnv(t)
	m := env.newManager(t)
	ctx := testContext(t)
	const workers, rounds = 6, 4

	// Every worker prepares its own claim and, concurrently with the others,
	// a claim all workers share; idempotency must hold under concurrency.
	shared := newClaim(uuid.NewString(), "shared").result("r", "gpu-1", "2Gi", "10", "").obj()
	var wg sync.WaitGroup
	errs := make(chan error, workers*rounds*4)
	for w := range workers {
		wg.Go(func() {
			for r := range rounds {
				own := newClaim(uuid.NewString(), fmt.Sprintf("w%d-r%d", w, r)).result("r", "gpu-0", "1Gi", "5", "").obj()
				results, err := m.PrepareResourceClaims(ctx, []*resourceapi.ResourceClaim{own, shared})
				if err != nil {
					errs <- err
					return
				}
				for uid, res := range results {
					if res.Err != nil {
						errs <- fmt.Errorf("prepare %s: %w", uid, res.Err)
					}
				}
				_ = m.PreparedClaims()
				unprepared, err := m.UnprepareResourceClaims(ctx, []kubeletplugin.NamespacedObject{{UID: own.UID}})
				if err != nil {
					errs <- err
					return
				}
				if err := unprepared[own.UID]; err != nil {
					errs <- fmt.Errorf("unprepare %s: %w", own.UID, err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		assert.NoError(t, err)
	}

	claims := m.PreparedClaims()
	require.Len(t, claims, 1, "only the shared claim is still prepared")
	assert.Equal(t, shared.UID, claims[0].UID)
	assert.Equal(t, prepared, env.diskState(t, string(shared.UID)))
	results := unprepare(t, m, string(shared.UID))
	assert.NoError(t, results[shared.UID])
	assert.Empty(t, env.newManager(t).PreparedClaims(), "the checkpoint agrees")
}

// TestTwoInstancesShareState runs two managers on one state root, as a
// rolling update does: neither may lose the other's claims.
func TestTwoInstancesShareState(t *testing.T) {
	env := newTestEnv(t)
	old := env.newManager(t)
	prepareOne(t, old, newClaim(claimA, "a").result("r", "gpu-0", "1Gi", "5", "").obj())

	updated := env.newManager(t)
	prepareOne(t, updated, newClaim(claimB, "b").result("r", "gpu-1", "1Gi", "5", "").obj())
	// The old instance still serves a call after the new one wrote the checkpoint.
	for _, err := range unprepare(t, old, claimA) {
		require.NoError(t, err)
	}

	claims := updated.PreparedClaims()
	require.Len(t, claims, 1)
	assert.Equal(t, types.UID(claimB), claims[0].UID)
	assert.Equal(t, absent, env.diskState(t, claimA))
	assert.Equal(t, prepared, env.diskState(t, claimB))
	assert.Equal(t, claims, old.PreparedClaims(), "both instances see the same state")
}

// TestRecoveryWaitsForOtherInstance starts a new instance while the old one
// is half-way through a prepare: the new one's recovery must not roll the
// claim back under the old one's feet.
func TestRecoveryWaitsForOtherInstance(t *testing.T) {
	env := newTestEnv(t)
	old := env.newManager(t)
	reached, release := make(chan struct{}), make(chan struct{})
	old.afterStep = func(s step, _ types.UID) error {
		if s == stepConfig {
			close(reached)
			<-release
		}
		return nil
	}
	done := make(chan kubeletplugin.PrepareResult)
	go func() {
		results, _ := old.PrepareResourceClaims(testContext(t), []*resourceapi.ResourceClaim{twoGPUClaim(claimA)})
		done <- results[claimA]
	}()
	<-reached

	started := make(chan error)
	go func() {
		_, err := NewManager(testContext(t), env.options())
		started <- err
	}()
	select {
	case err := <-started:
		t.Fatalf("the new instance recovered while the old one held the state (err %v)", err)
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	res := <-done
	require.NoError(t, res.Err)
	require.NoError(t, <-started)
	assert.Equal(t, statePrepareCompleted, env.diskState(t, claimA).state)
	assert.True(t, env.diskState(t, claimA).spec)
}
