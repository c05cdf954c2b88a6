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
	"errors"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
)

var (
	prepareSteps   = []step{stepCheckpointStarted, stepConfig, stepRegionMount, stepRegion, stepCDISpec, stepCheckpointCompleted}
	unprepareSteps = []step{stepRemoveCDISpec, stepRegionUnmount, stepRemoveClaimDir, stepCheckpointRemoved}
)

// crashAfter runs call in a goroutine that dies (runtime.Goexit: only
// deferred calls run, as the process's memory would be lost) right after
// step at of claim uid.
func crashAfter(m *Manager, at step, uid string, call func()) {
	m.afterStep = func(s step, u types.UID) error {
		if s == at && u == types.UID(uid) {
			runtime.Goexit()
		}
		return nil
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		call()
	}()
	<-done
}

func TestCrashDuringPrepare(t *testing.T) {
	for _, at := range prepareSteps {
		t.Run(string(at), func(t *testing.T) {
			env := newTestEnv(t)
			m := env.newManager(t)
			crashAfter(m, at, claimA, func() {
				_, _ = m.PrepareResourceClaims(testContext(t), []*resourceapi.ResourceClaim{twoGPUClaim(claimA)})
			})

			env.newManager(t)
			want := absent
			if at == stepCheckpointCompleted {
				want = prepared
			}
			assert.Equal(t, want, env.diskState(t, claimA), "after recovery the claim is either fully prepared or gone")

			// The kubelet retries; the claim then prepares normally.
			restarted := env.newManager(t)
			res := prepareOne(t, restarted, twoGPUClaim(claimA))
			assert.Len(t, res.Devices, 2)
			assert.Equal(t, prepared, env.diskState(t, claimA))
		})
	}
}

func TestFailureDuringPrepare(t *testing.T) {
	for _, at := range prepareSteps {
		t.Run(string(at), func(t *testing.T) {
			env := newTestEnv(t)
			m := env.newManager(t)
			m.afterStep = func(s step, u types.UID) error {
				if s == at && u == claimA {
					return errors.New("injected failure")
				}
				return nil
			}
			results, err := m.PrepareResourceClaims(testContext(t), []*resourceapi.ResourceClaim{
				twoGPUClaim(claimA),
				newClaim(claimB, "other").result("r", "gpu-0", "1Gi", "5", "").obj(),
			})
			require.NoError(t, err)
			require.Error(t, results[claimA].Err)
			assert.Contains(t, results[claimA].Err.Error(), "injected failure")
			assert.NoError(t, results[claimB].Err, "another claim in the same call succeeds")
			assert.Equal(t, absent, env.diskState(t, claimA), "nothing of the failed claim remains")
			assert.Equal(t, prepared, env.diskState(t, claimB))
			assert.Len(t, m.PreparedClaims(), 1)
		})
	}
}

func TestCrashDuringUnprepare(t *testing.T) {
	for _, at := range unprepareSteps {
		t.Run(string(at), func(t *testing.T) {
			env := newTestEnv(t)
			m := env.newManager(t)
			prepareOne(t, m, twoGPUClaim(claimA))
			crashAfter(m, at, claimA, func() {
				_, _ = m.UnprepareResourceClaims(testContext(t), []kubeletplugin.NamespacedObject{{UID: claimA}})
			})

			restarted := env.newManager(t)
			want := prepared
			if at == stepCheckpointRemoved {
				want = absent
			}
			// Until the checkpoint entry is gone the claim counts as prepared
			// and recovery makes it whole again.
			assert.Equal(t, want, env.diskState(t, claimA))

			for _, err := range unprepare(t, restarted, claimA) {
				require.NoError(t, err)
			}
			assert.Equal(t, absent, env.diskState(t, claimA))
		})
	}
}

func TestFailureDuringUnprepare(t *testing.T) {
	for _, at := range unprepareSteps {
		t.Run(string(at), func(t *testing.T) {
			env := newTestEnv(t)
			m := env.newManager(t)
			prepareOne(t, m, twoGPUClaim(claimA))
			prepareOne(t, m, newClaim(claimB, "other").result("r", "gpu-0", "1Gi", "5", "").obj())
			m.afterStep = func(s step, u types.UID) error {
				if s == at && u == claimA {
					return errors.New("injected failure")
				}
				return nil
			}
			results := unprepare(t, m, claimA, claimB)
			assert.ErrorContains(t, results[claimA], "injected failure")
			assert.NoError(t, results[claimB])
			assert.Equal(t, absent, env.diskState(t, claimB))

			// The kubelet retries.
			m.afterStep = nil
			for _, err := range unprepare(t, m, claimA) {
				require.NoError(t, err)
			}
			assert.Equal(t, absent, env.diskState(t, claimA))
			assert.Empty(t, m.PreparedClaims())
		})
	}
}
