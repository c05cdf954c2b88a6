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

package discovery

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2/ktesting"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/discovery/discoverytest"
)

type recorder struct {
	mu     sync.Mutex
	events []XIDEvent
}

func (r *recorder) report(e XIDEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recorder) get() []XIDEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]XIDEvent(nil), r.events...)
}

func TestXIDWatcher(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s := newServer(t)
	// GPU 7 cannot report XIDs: it must not be registered nor blamed.
	device(s, 7).GetSupportedEventTypesFunc = func() (uint64, nvml.Return) { return nvml.EventTypePState, nvml.SUCCESS }

	var rec recorder
	done := make(chan error, 1)
	go func() { done <- NewXIDWatcher(DefaultIgnoredXIDs(), WithNVML(s)).Watch(ctx, rec.report) }()

	s.Events <- nvml.EventData{Device: device(s, 2), EventType: nvml.EventTypeXidCriticalError, EventData: 79, GpuInstanceId: whole, ComputeInstanceId: whole}
	s.Events <- nvml.EventData{Device: device(s, 3), EventType: nvml.EventTypeXidCriticalError, EventData: 13, GpuInstanceId: whole, ComputeInstanceId: whole}
	s.Events <- nvml.EventData{Device: device(s, 3), EventType: nvml.EventTypeSingleBitEccError, EventData: 1}
	s.Events <- nvml.EventData{Device: nil, EventType: nvml.EventTypeXidCriticalError, EventData: 48, GpuInstanceId: whole, ComputeInstanceId: whole}
	// A last event the watcher must still take proves the ones before were handled.
	s.Events <- nvml.EventData{Device: device(s, 0), EventType: nvml.EventTypeXidCriticalError, EventData: 94, GpuInstanceId: whole, ComputeInstanceId: whole}
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Watch did not return after cancel")
	}

	want := []XIDEvent{{UUID: device(s, 2).UUID, XID: 79, GPUInstanceID: NoInstance, ComputeInstanceID: NoInstance}}
	for i := 0; i < 7; i++ {
		want = append(want, XIDEvent{UUID: device(s, i).UUID, XID: 48, GPUInstanceID: NoInstance, ComputeInstanceID: NoInstance})
	}
	want = append(want, XIDEvent{UUID: device(s, 0).UUID, XID: 94, GPUInstanceID: NoInstance, ComputeInstanceID: NoInstance})
	assert.Equal(t, want, rec.get())
	assert.Empty(t, device(s, 7).RegisterEventsCalls())
	require.Len(t, device(s, 0).RegisterEventsCalls(), 1)
	assert.Equal(t, uint64(nvml.EventTypeXidCriticalError), device(s, 0).RegisterEventsCalls()[0].V)
	assert.Len(t, s.EventSet.FreeCalls(), 1)
	assert.Len(t, s.ShutdownCalls(), 1)
}

func TestXIDWatcherCustomIgnoreList(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s := newServer(t)
	var rec recorder
	done := make(chan error, 1)
	go func() { done <- NewXIDWatcher([]uint64{79}, WithNVML(s)).Watch(ctx, rec.report) }()
	s.Events <- nvml.EventData{Device: device(s, 1), EventType: nvml.EventTypeXidCriticalError, EventData: 79, GpuInstanceId: whole, ComputeInstanceId: whole}
	s.Events <- nvml.EventData{Device: device(s, 1), EventType: nvml.EventTypeXidCriticalError, EventData: 13, GpuInstanceId: whole, ComputeInstanceId: whole}
	cancel()
	require.NoError(t, <-done)
	assert.Equal(t, []XIDEvent{{UUID: device(s, 1).UUID, XID: 13, GPUInstanceID: NoInstance, ComputeInstanceID: NoInstance}}, rec.get())
}

func TestXIDWatcherErrors(t *testing.T) {
	tests := []struct {
		name    string
		breakIt func(s *discoverytest.Server)
		is      error
		want    string
	}{
		{
			name: "no library",
			breakIt: func(s *discoverytest.Server) {
				s.InitFunc = func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }
			},
			is:   nvml.ERROR_LIBRARY_NOT_FOUND,
			want: "load NVML",
		},
		{
			name: "event set",
			breakIt: func(s *discoverytest.Server) {
				s.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) { return nil, nvml.ERROR_NOT_SUPPORTED }
			},
			is:   nvml.ERROR_NOT_SUPPORTED,
			want: "create NVML event set",
		},
		{
			name: "register",
			breakIt: func(s *discoverytest.Server) {
				device(s, 5).RegisterEventsFunc = func(uint64, nvml.EventSet) nvml.Return { return nvml.ERROR_NO_PERMISSION }
			},
			is:   nvml.ERROR_NO_PERMISSION,
			want: "register XID events",
		},
		{
			name: "gpu lost while waiting",
			breakIt: func(s *discoverytest.Server) {
				s.EventSet.WaitFunc = func(uint32) (nvml.EventData, nvml.Return) { return nvml.EventData{}, nvml.ERROR_GPU_IS_LOST }
			},
			is:   nvml.ERROR_GPU_IS_LOST,
			want: "wait for NVML events",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			s := newServer(t)
			tc.breakIt(s)
			err := NewXIDWatcher(nil, WithNVML(s)).Watch(ctx, func(e XIDEvent) { t.Errorf("unexpected event %+v", e) })
			require.Error(t, err)
			assert.ErrorIs(t, err, tc.is)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// whole is NVML's instance id of an event not in a MIG instance.
const whole = ^uint32(0)

// On a GPU in MIG mode NVML names the instance an XID happened in; the
// watcher passes the ids on (0 is a valid id).
func TestXIDWatcherReportsMIGInstance(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s := newServer(t)
	var rec recorder
	done := make(chan error, 1)
	go func() { done <- NewXIDWatcher(DefaultIgnoredXIDs(), WithNVML(s)).Watch(ctx, rec.report) }()
	s.Events <- nvml.EventData{Device: device(s, 1), EventType: nvml.EventTypeXidCriticalError, EventData: 79, GpuInstanceId: 2, ComputeInstanceId: 0}
	s.Events <- nvml.EventData{Device: device(s, 1), EventType: nvml.EventTypeXidCriticalError, EventData: 94, GpuInstanceId: whole, ComputeInstanceId: whole}
	s.Events <- nvml.EventData{Device: device(s, 0), EventType: nvml.EventTypeXidCriticalError, EventData: 48, GpuInstanceId: whole, ComputeInstanceId: whole}
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Watch did not return after cancel")
	}
	assert.Equal(t, []XIDEvent{
		{UUID: device(s, 1).UUID, XID: 79, GPUInstanceID: 2, ComputeInstanceID: 0},
		{UUID: device(s, 1).UUID, XID: 94, GPUInstanceID: NoInstance, ComputeInstanceID: NoInstance},
		{UUID: device(s, 0).UUID, XID: 48, GPUInstanceID: NoInstance, ComputeInstanceID: NoInstance},
	}, rec.get())
}
