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

package monitor

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/region/regiontest"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/prepare/preparetest"
)

// writeRefusals writes claim a's region with usedBytes in use and the
// given refusal counters on GPU 0.
func writeRefusals(t *testing.T, path string, usedBytes, refusals, lastBytes uint64) {
	t.Helper()
	b, err := regiontest.Ready(1, uint64(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).UnixNano()),
		[]regiontest.Device{{UUID: uuid0, MemoryLimitBytes: 4 * gib, SMLimitPercent: 30, UsedBytes: usedBytes, PeakBytes: usedBytes,
			Refusals: refusals, LastRefusedBytes: lastBytes, LastRefusedNS: uint64(time.Date(2026, 1, 2, 3, 5, 0, 0, time.UTC).UnixNano())}},
		[]regiontest.Process{proc(0, 7, usedBytes, 0, 0)})
	require.NoError(t, err)
	require.NoError(t, mkdirAll(strings.TrimSuffix(path, "/region")))
	require.NoError(t, regiontest.WriteFile(path, b))
}

func TestMemoryLimitHits(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	a := preparetest.Prepared(t.TempDir(), uidA, "team-a", "train")
	writeRefusals(t, a.RegionPath, 3*gib, 0, 0)
	obj := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "team-a", UID: uidA},
		Status: resourceapi.ResourceClaimStatus{ReservedFor: []resourceapi.ResourceClaimConsumerReference{
			{Resource: "pods", Name: "train-0", UID: "p0"},
		}},
	}
	client := fake.NewClientset(obj)
	recorder := record.NewFakeRecorder(10)
	reg := prometheus.NewRegistry()
	m, err := New(ctx, Options{DriverName: "vgpu.dra.dev", NodeName: "node-a", Claims: preparetest.NewSource(a),
		GPUs: testGPUs, Registry: reg, KubeClient: client, Interval: time.Nanosecond, StatusInterval: 30 * time.Second,
		EventRecorder: recorder})
	require.NoError(t, err)
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	m.now = clk.Now
	ctx, cancel := context.WithCancel(ctx)
	m.informers.Start(ctx.Done())
	defer m.informers.Shutdown()
	defer cancel()
	require.True(t, cache.WaitForCacheSync(ctx.Done(), m.informers.Resource().V1().ResourceClaims().Informer().HasSynced))

	refusals := func() float64 {
		t.Helper()
		n, err := testutil.GatherAndCount(reg, "vgpu_dra_claim_memory_refusals_total")
		require.NoError(t, err)
		require.Equal(t, 1, n)
		mfs, err := reg.Gather()
		require.NoError(t, err)
		for _, mf := range mfs {
			if mf.GetName() == "vgpu_dra_claim_memory_refusals_total" {
				return mf.GetMetric()[0].GetCounter().GetValue()
			}
		}
		return -1
	}
	statusRefusals := func() int64 {
		t.Helper()
		got, err := client.ResourceV1().ResourceClaims("team-a").Get(ctx, "train", metav1.GetOptions{})
		require.NoError(t, err)
		require.Len(t, got.Status.Devices, 1)
		var data DeviceData
		require.NoError(t, json.Unmarshal(got.Status.Devices[0].Data.Raw, &data))
		require.NotNil(t, data.MemoryRefusals)
		return *data.MemoryRefusals
	}
	step := func(d time.Duration) {
		clk.Step(d)
		m.writeStatuses(ctx)
		m.emitLimitEvents(ctx, m.snapshot(m.logger), m.now())
	}

	step(time.Second)
	assert.InDelta(t, 0, refusals(), 0)
	assert.EqualValues(t, 0, statusRefusals())
	assert.Empty(t, recorder.Events, "no refusal, no event")

	// Two refusals: metric, status (a large change) and one event naming requested / limit / in use.
	writeRefusals(t, a.RegionPath, 3*gib, 2, 2*gib)
	step(6 * time.Second)
	assert.InDelta(t, 2, refusals(), 0)
	assert.EqualValues(t, 2, statusRefusals())
	require.Len(t, recorder.Events, 1)
	assert.Equal(t, "Warning GPUMemoryLimitReached GPU "+uuid0+": 2 allocation(s) refused by the memory limit of claim train; last requested 2Gi, limit 4Gi, in use 3Gi", <-recorder.Events)

	// More within the event interval: counted, but no second event yet.
	writeRefusals(t, a.RegionPath, 3*gib, 5, gib)
	step(10 * time.Second)
	assert.InDelta(t, 5, refusals(), 0)
	assert.Empty(t, recorder.Events, "rate-limited to one event per claim per interval")
	// Once the interval has passed, the next event sums what happened meanwhile.
	step(DefaultEventInterval)
	require.Len(t, recorder.Events, 1)
	assert.Contains(t, <-recorder.Events, ": 3 allocation(s) refused")
	// Nothing new: no event, however long.
	step(time.Hour)
	assert.Empty(t, recorder.Events)
	assert.EqualValues(t, 5, statusRefusals())
}

// A claim that may burst is refused at its guarantee when no burst is
// granted: the Event shows its limit (memoryLimit) and the guarantee
// beside it.
func TestMemoryLimitHitsOfABurstClaim(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	a := preparetest.Prepared(t.TempDir(), uidA, "team-a", "train")
	a.GPUs[0].BurstLimitBytes = 12 * gib
	writeRefusals(t, a.RegionPath, 4*gib, 0, 0)
	client := fake.NewClientset(&resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "team-a", UID: uidA},
		Status: resourceapi.ResourceClaimStatus{ReservedFor: []resourceapi.ResourceClaimConsumerReference{
			{Resource: "pods", Name: "train-0", UID: "p0"},
		}},
	})
	recorder := record.NewFakeRecorder(10)
	m, err := New(ctx, Options{DriverName: "vgpu.dra.dev", NodeName: "node-a", Claims: preparetest.NewSource(a),
		GPUs: testGPUs, Registry: prometheus.NewRegistry(), KubeClient: client, Interval: time.Nanosecond, StatusInterval: -1,
		EventRecorder: recorder})
	require.NoError(t, err)
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	m.now = clk.Now
	ctx, cancel := context.WithCancel(ctx)
	m.informers.Start(ctx.Done())
	defer m.informers.Shutdown()
	defer cancel()
	require.True(t, cache.WaitForCacheSync(ctx.Done(), m.informers.Resource().V1().ResourceClaims().Informer().HasSynced))

	writeRefusals(t, a.RegionPath, 4*gib, 1, gib)
	clk.Step(time.Second)
	m.emitLimitEvents(ctx, m.snapshot(m.logger), m.now())
	require.Len(t, recorder.Events, 1)
	assert.Equal(t, "Warning GPUMemoryLimitReached GPU "+uuid0+": 1 allocation(s) refused by the memory limit of claim train; last requested 1Gi, limit 12Gi (guarantee 4Gi), in use 4Gi", <-recorder.Events)
}
