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

package gpuhealth

import (
	"context"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/devices"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/discovery"
)

const uuid0 = "GPU-00000000-0000-0000-0000-000000000000"

// fakeXIDs reports its events, then waits for the end.
type fakeXIDs struct{ events []discovery.XIDEvent }

func (f fakeXIDs) Watch(ctx context.Context, report func(discovery.XIDEvent)) error {
	for _, ev := range f.events {
		report(ev)
	}
	<-ctx.Done()
	return nil
}

// fakeInstances is a GPU's MIG instances as NVML lists them.
type fakeInstances []discovery.MIGInstanceState

func (f fakeInstances) Instances(context.Context, string) ([]discovery.MIGInstanceState, error) {
	return f, nil
}

// A GPU in MIG mode with two 3g placements and a full 7g one, as NVML
// would describe a small GPU.
func migInfo() discovery.MIGInfo {
	return discovery.MIGInfo{Enabled: true, Profiles: []discovery.MIGProfile{
		{ID: 2, Name: "3g.40gb", Slices: 3, InstanceCount: 2, Multiprocessors: 42, MemoryBytes: 40 << 30,
			Placements: []discovery.MIGPlacement{{Start: 0, Size: 4}, {Start: 4, Size: 4}}},
		{ID: 0, Name: "7g.80gb", Slices: 7, InstanceCount: 1, Multiprocessors: 98, MemoryBytes: 80 << 30,
			Placements: []discovery.MIGPlacement{{Start: 0, Size: 8}}},
	}}
}

// run watches events on gpu-0 in MIG mode until a publish, and returns
// what was published and the tracker.
func run(t *testing.T, events ...discovery.XIDEvent) (map[string][]resourceapi.DeviceTaint, *Tracker) {
	t.Helper()
	w := &Watcher{
		XIDs:         fakeXIDs{events: events},
		DeviceByUUID: map[string]string{uuid0: "gpu-0"},
		MIG: &MIGResolver{
			Lister: fakeInstances{
				{MIGInstance: discovery.MIGInstance{ID: 3, ProfileID: 2, Placement: discovery.MIGPlacement{Start: 4, Size: 4}}},
				{MIGInstance: discovery.MIGInstance{ID: 5, ProfileID: 0, Placement: discovery.MIGPlacement{Start: 0, Size: 8}}},
			},
			GPUs: map[string]MIGGPU{uuid0: {Index: 0, MIG: migInfo()}},
		},
		Policy:  devices.TaintPolicy{NoExecute: devices.DefaultNoExecuteXIDs()},
		Tracker: NewTracker(),
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var mu sync.Mutex
	var last map[string][]resourceapi.DeviceTaint
	go func() {
		done <- w.Run(ctx, func(_ context.Context, taints map[string][]resourceapi.DeviceTaint) error {
			mu.Lock()
			defer mu.Unlock()
			last = taints
			return nil
		})
	}()
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return last != nil }, 5*time.Second, time.Millisecond)
	cancel()
	require.NoError(t, <-done)
	return last, w.Tracker
}

// An XID NVML attributes to a MIG instance taints only the devices of
// that instance; one NVML attributes to the whole GPU, or an instance that
// cannot be found, taints the whole GPU (and so all its MIG devices).
func TestXIDInMIGInstanceTaintsOnlyThatInstance(t *testing.T) {
	keys := func(m map[string][]resourceapi.DeviceTaint) []string { return slices.Sorted(maps.Keys(m)) }

	inInstance, tracker := run(t, discovery.XIDEvent{UUID: uuid0, XID: 79, GPUInstanceID: 3, ComputeInstanceID: 0})
	assert.Equal(t, []string{"gpu-0-mig-3g-40gb-4"}, keys(inInstance))
	state, _ := tracker.State()
	assert.Equal(t, "critical XID 79 reported by NVML in MIG GPU instance 3", state["gpu-0-mig-3g-40gb-4"].Reason)
	assert.Equal(t, resourceapi.DeviceTaintEffectNoExecute, inInstance["gpu-0-mig-3g-40gb-4"][0].Effect)

	full, _ := run(t, discovery.XIDEvent{UUID: uuid0, XID: 79, GPUInstanceID: 5, ComputeInstanceID: 0})
	assert.Equal(t, []string{"gpu-0", "gpu-0-mig-7g-80gb-0"}, keys(full), "the full-size instance realises the whole GPU too")

	whole, _ := run(t, discovery.XIDEvent{UUID: uuid0, XID: 79, GPUInstanceID: discovery.NoInstance, ComputeInstanceID: discovery.NoInstance})
	assert.Equal(t, []string{"gpu-0"}, keys(whole))
	unknown, _ := run(t, discovery.XIDEvent{UUID: uuid0, XID: 79, GPUInstanceID: 9, ComputeInstanceID: 0})
	assert.Equal(t, []string{"gpu-0"}, keys(unknown), "an instance that cannot be found: the whole GPU")
}

// A milder taint never replaces a more severe one; a more severe one
// replaces a milder one and wakes the state's readers.
func TestTrackerKeepsTheMostSevereTaint(t *testing.T) {
	h := NewTracker()
	_, changed := h.State()
	noSchedule := Unhealthy{Reason: "94", Taint: resourceapi.DeviceTaint{Key: "k", Value: "94", Effect: resourceapi.DeviceTaintEffectNoSchedule}}
	noExecute := Unhealthy{Reason: "79", Taint: resourceapi.DeviceTaint{Key: "k", Value: "79", Effect: resourceapi.DeviceTaintEffectNoExecute}}
	require.True(t, h.mark("gpu-0", noSchedule))
	select {
	case <-changed:
	default:
		t.Fatal("a change does not wake the readers")
	}
	assert.True(t, h.mark("gpu-0", noExecute))
	assert.False(t, h.mark("gpu-0", noSchedule), "milder")
	assert.False(t, h.mark("gpu-0", noExecute), "as severe: the first is kept")
	assert.Equal(t, map[string][]resourceapi.DeviceTaint{"gpu-0": {noExecute.Taint}}, h.Taints())
}
