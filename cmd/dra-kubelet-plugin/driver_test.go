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
	"strings"
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

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/devices"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/discovery"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/gpuhealth"
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
	d.health = &gpuhealth.Watcher{XIDs: fakeXIDs{}, DeviceByUUID: d.deviceByUUID, Tracker: d.gpus,
		Policy: devices.TaintPolicy{NoExecute: devices.DefaultNoExecuteXIDs()}}
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
	d.health.XIDs = fakeXIDs{events: []discovery.XIDEvent{
		{UUID: "GPU-unknown", XID: 79},
		{UUID: testGPUs["gpu-1"].UUID, XID: 94},
		{UUID: testGPUs["gpu-1"].UUID, XID: 79},
		{UUID: testGPUs["gpu-1"].UUID, XID: 63},
	}}
	var published []map[string][]resourceapi.DeviceTaint
	watchCtx, stopWatch := context.WithCancel(ctx)
	watchDone := make(chan error, 1)
	go func() {
		watchDone <- d.health.Run(watchCtx, func(_ context.Context, taints map[string][]resourceapi.DeviceTaint) error {
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

// A MIG device tainted on its own (an XID inside its instance) is
// reported to the kubelet too, next to the whole-GPU devices.
func TestHealthReportNamesTaintedMIGDevices(t *testing.T) {
	d := newDriver(fakeClaims{}, func(error) {}, "node-a", testGPUs, prometheus.NewRegistry())
	report := d.healthReport(map[string]gpuhealth.Unhealthy{"gpu-0-mig-3g-40gb-4": {Reason: "critical XID 79 reported by NVML in MIG GPU instance 3"}})
	got := map[string]kubeletplugin.HealthStatus{}
	for _, dev := range report.Devices {
		got[dev.DeviceName] = dev.Health
	}
	assert.Equal(t, map[string]kubeletplugin.HealthStatus{"gpu-0": "Healthy", "gpu-1": "Healthy", "gpu-0-mig-3g-40gb-4": "Unhealthy"}, got)
}
