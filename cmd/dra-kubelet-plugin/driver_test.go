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

package main

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2/ktesting"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/discovery"
)

type fakeClaims struct {
	prepareErr map[types.UID]error
}

func (f fakeClaims) PrepareResourceClaims(_ context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	out := map[types.UID]kubeletplugin.PrepareResult{}
	for _, c := range claims {
		out[c.UID] = kubeletplugin.PrepareResult{Err: f.prepareErr[c.UID]}
	}
	return out, nil
}

func (f fakeClaims) UnprepareResourceClaims(_ context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	out := map[types.UID]error{}
	for _, c := range claims {
		out[c.UID] = nil
	}
	return out, nil
}

type fakeXIDs struct{ events []discovery.XIDEvent }

func (f fakeXIDs) Watch(ctx context.Context, report func(discovery.XIDEvent)) error {
	for _, ev := range f.events {
		report(ev)
	}
	<-ctx.Done()
	return nil
}

var testGPUs = map[string]discovery.Info{
	"gpu-0": {UUID: "GPU-00000000-0000-0000-0000-000000000000", Index: 0},
	"gpu-1": {UUID: "GPU-11111111-1111-1111-1111-111111111111", Index: 1},
}

func claim(uid string) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), Name: uid, Namespace: "ns"}}
}

func TestPrepareCountsResultsPerClaim(t *testing.T) {
	reg := prometheus.NewRegistry()
	d := newDriver(fakeClaims{prepareErr: map[types.UID]error{"bad": errors.New("boom")}}, func(error) {}, "node-a", testGPUs, reg)

	_, err := d.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{claim("ok1"), claim("ok2"), claim("bad")})
	require.NoError(t, err)
	_, err = d.UnprepareResourceClaims(context.Background(), []kubeletplugin.NamespacedObject{{UID: "ok1"}})
	require.NoError(t, err)

	expected := `
# HELP vgpu_dra_claim_operations_total Claims prepared or unprepared by this node's plugin, by operation and result (success or error).
# TYPE vgpu_dra_claim_operations_total counter
vgpu_dra_claim_operations_total{operation="prepare",result="error"} 1
vgpu_dra_claim_operations_total{operation="prepare",result="success"} 2
vgpu_dra_claim_operations_total{operation="unprepare",result="success"} 1
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(expected), "vgpu_dra_claim_operations_total"))
	assert.Equal(t, 2, testutil.CollectAndCount(d.duration), "one duration series per operation")
}

func TestHandleErrorStopsOnlyOnFatalErrors(t *testing.T) {
	var cause error
	d := newDriver(fakeClaims{}, func(err error) { cause = err }, "node-a", testGPUs, prometheus.NewRegistry())

	d.HandleError(context.Background(), errors.Join(kubeletplugin.ErrRecoverable, errors.New("update conflict")), "publish")
	assert.NoError(t, cause, "a recoverable error must not stop the plugin")

	d.HandleError(context.Background(), errors.New("slice invalid"), "publish")
	require.Error(t, cause)
	assert.Contains(t, cause.Error(), "slice invalid")
}

func TestWatchHealthStatusWithoutWatcherIsNotSupported(t *testing.T) {
	d := newDriver(fakeClaims{}, func(error) {}, "node-a", testGPUs, prometheus.NewRegistry())
	err := d.WatchHealthStatus(context.Background(), make(chan kubeletplugin.DeviceHealthReport))
	assert.ErrorIs(t, err, kubeletplugin.ErrHealthNotSupported)
}

func TestXIDTaintsGPUAndReportsItUnhealthy(t *testing.T) {
	d := newDriver(fakeClaims{}, func(error) {}, "node-a", testGPUs, prometheus.NewRegistry())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reports := make(chan kubeletplugin.DeviceHealthReport)
	done := make(chan error, 1)
	// The kubelet's stream starts first: all healthy.
	d.health = fakeXIDs{}
	go func() { done <- d.WatchHealthStatus(ctx, reports) }()
	health := func(r kubeletplugin.DeviceHealthReport) map[string]kubeletplugin.HealthStatus {
		out := map[string]kubeletplugin.HealthStatus{}
		for _, dev := range r.Devices {
			assert.Equal(t, "node-a", dev.PoolName)
			out[dev.DeviceName] = dev.Health
		}
		return out
	}
	first := <-reports
	assert.Equal(t, map[string]kubeletplugin.HealthStatus{"gpu-0": "Healthy", "gpu-1": "Healthy"}, health(first))

	// A NoSchedule XID, then a fatal one, then a milder one again on gpu-1.
	d.health = fakeXIDs{events: []discovery.XIDEvent{
		{UUID: "GPU-unknown", XID: 79},
		{UUID: testGPUs["gpu-1"].UUID, XID: 94},
		{UUID: testGPUs["gpu-1"].UUID, XID: 79},
		{UUID: testGPUs["gpu-1"].UUID, XID: 63},
	}}
	var published []map[string][]resourceapi.DeviceTaint
	watchCtx, stopWatch := context.WithCancel(ctx)
	watchDone := make(chan error, 1)
	go func() {
		watchDone <- d.watchHealth(watchCtx, func(_ context.Context, taints map[string][]resourceapi.DeviceTaint) error {
			published = append(published, taints)
			return nil
		})
	}()

	deadline := time.After(5 * time.Second)
	for {
		select {
		case r := <-reports:
			if health(r)["gpu-1"] != kubeletplugin.HealthStatusUnhealthy {
				continue
			}
			assert.Equal(t, kubeletplugin.HealthStatusHealthy, health(r)["gpu-0"], "an XID on gpu-1 leaves gpu-0 healthy")
			for _, dev := range r.Devices {
				if dev.DeviceName == "gpu-1" {
					assert.Contains(t, dev.Message, "XID")
				}
			}
			cancel()
			require.NoError(t, <-done)
			stopWatch()
			require.NoError(t, <-watchDone)
			// Published twice: NoSchedule for 94, then NoExecute for 79; 63 is milder and changes nothing.
			require.Len(t, published, 2)
			assert.Equal(t, []resourceapi.DeviceTaint{{Key: "vgpu.dra.dev/xid", Value: "94", Effect: resourceapi.DeviceTaintEffectNoSchedule,
				TimeAdded: published[0]["gpu-1"][0].TimeAdded}}, published[0]["gpu-1"])
			require.Len(t, published[1]["gpu-1"], 1)
			assert.Equal(t, "79", published[1]["gpu-1"][0].Value)
			assert.Equal(t, resourceapi.DeviceTaintEffectNoExecute, published[1]["gpu-1"][0].Effect)
			assert.NotContains(t, published[1], "gpu-0")
			return
		case <-deadline:
			t.Fatal("gpu-1 was never reported unhealthy")
		}
	}
}

// fakeInstances is a GPU's MIG instances as NVML lists them.
type fakeInstances []discovery.MIGInstanceState

func (f fakeInstances) Instances(context.Context, string) ([]discovery.MIGInstanceState, error) {
	return f, nil
}

// An XID NVML attributes to a MIG instance taints only the devices of
// that instance; one NVML attributes to the whole GPU, or an instance that
// cannot be found, taints the whole GPU (and so all its MIG devices).
func TestXIDInMIGInstanceTaintsOnlyThatInstance(t *testing.T) {
	uuid := testGPUs["gpu-0"].UUID
	run := func(t *testing.T, events ...discovery.XIDEvent) map[string][]resourceapi.DeviceTaint {
		d := newDriver(fakeClaims{}, func(error) {}, "node-a", testGPUs, prometheus.NewRegistry())
		d.mig = &migResolver{
			lister: fakeInstances{
				{MIGInstance: discovery.MIGInstance{ID: 3, ProfileID: 2, Placement: discovery.MIGPlacement{Start: 4, Size: 4}}},
				{MIGInstance: discovery.MIGInstance{ID: 5, ProfileID: 0, Placement: discovery.MIGPlacement{Start: 0, Size: 8}}},
			},
			gpus: map[string]migGPU{uuid: {index: 0, mig: migInfo()}},
		}
		d.health = fakeXIDs{events: events}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		var mu sync.Mutex
		var last map[string][]resourceapi.DeviceTaint
		go func() {
			done <- d.watchHealth(ctx, func(_ context.Context, taints map[string][]resourceapi.DeviceTaint) error {
				mu.Lock()
				defer mu.Unlock()
				last = taints
				return nil
			})
		}()
		require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return last != nil }, 5*time.Second, time.Millisecond)
		cancel()
		require.NoError(t, <-done)
		// Reported to the kubelet too.
		report := d.healthReport(func() map[string]unhealthyGPU { s, _ := d.gpus.state(); return s }())
		for _, dev := range report.Devices {
			_, tainted := last[dev.DeviceName]
			assert.Equal(t, tainted, dev.Health == kubeletplugin.HealthStatusUnhealthy, dev.DeviceName)
		}
		return last
	}
	keys := func(m map[string][]resourceapi.DeviceTaint) []string { return slices.Sorted(maps.Keys(m)) }

	inInstance := run(t, discovery.XIDEvent{UUID: uuid, XID: 79, GPUInstanceID: 3, ComputeInstanceID: 0})
	assert.Equal(t, []string{"gpu-0-mig-3g-40gb-4"}, keys(inInstance))
	p, h := testPublisher(nil, true)
	_, ctx := ktesting.NewTestContext(t)
	require.NoError(t, p.publish(ctx, inInstance))
	for _, s := range h.last(t).Slices {
		for _, d := range s.Devices {
			assert.Equal(t, d.Name == "gpu-0-mig-3g-40gb-4", len(d.Taints) == 1, "%s: only the instance's device is tainted", d.Name)
		}
	}

	full := run(t, discovery.XIDEvent{UUID: uuid, XID: 79, GPUInstanceID: 5, ComputeInstanceID: 0})
	assert.Equal(t, []string{"gpu-0", "gpu-0-mig-7g-80gb-0"}, keys(full), "the full-size instance realises the whole GPU too")

	whole := run(t, discovery.XIDEvent{UUID: uuid, XID: 79, GPUInstanceID: discovery.NoInstance, ComputeInstanceID: discovery.NoInstance})
	assert.Equal(t, []string{"gpu-0"}, keys(whole))
	unknown := run(t, discovery.XIDEvent{UUID: uuid, XID: 79, GPUInstanceID: 9, ComputeInstanceID: 0})
	assert.Equal(t, []string{"gpu-0"}, keys(unknown), "an instance that cannot be found: the whole GPU")
}
