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
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/burstfile"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/prepare/preparetest"
)

func TestClaimStatus(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	dir := t.TempDir()
	a := preparetest.Prepared(dir, uidA, "team-a", "train")
	preparetest.WriteRegion(t, a.RegionPath, gib, gib, 20, proc(0, 7, gib, 10, 0))

	obj := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "team-a", UID: uidA, Generation: 2},
		Status: resourceapi.ResourceClaimStatus{ReservedFor: []resourceapi.ResourceClaimConsumerReference{
			{Resource: "pods", Name: "train-1", UID: "p1"}, {Resource: "pods", Name: "train-0", UID: "p0"},
		}},
	}
	client := fake.NewClientset(obj)
	reg := prometheus.NewRegistry()
	m, err := New(ctx, Options{DriverName: "vgpu.dra.dev", NodeName: "node-a", Claims: preparetest.NewSource(a),
		GPUs: testGPUs, Registry: reg, KubeClient: client, Interval: time.Second, StatusInterval: 30 * time.Second})
	require.NoError(t, err)
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	m.now = clk.Now
	ctx, cancel := context.WithCancel(ctx)
	m.informers.Start(ctx.Done())
	// Shutdown waits for the informers, which stop with ctx.
	defer m.informers.Shutdown()
	defer cancel()
	require.True(t, cache.WaitForCacheSync(ctx.Done(), m.informers.Resource().V1().ResourceClaims().Informer().HasSynced))

	writes := func() float64 { return testutil.ToFloat64(m.statusWrites.WithLabelValues("success")) }
	readStatus := func() (resourceapi.AllocatedDeviceStatus, DeviceData) {
		t.Helper()
		got, err := client.ResourceV1().ResourceClaims("team-a").Get(ctx, "train", metav1.GetOptions{})
		require.NoError(t, err)
		require.Len(t, got.Status.Devices, 1)
		var data DeviceData
		require.NotNil(t, got.Status.Devices[0].Data)
		require.NoError(t, json.Unmarshal(got.Status.Devices[0].Data.Raw, &data))
		return got.Status.Devices[0], data
	}

	m.writeStatuses(ctx)
	assert.InDelta(t, 1, writes(), 0)
	dev, data := readStatus()
	assert.Equal(t, "vgpu.dra.dev", dev.Driver)
	assert.Equal(t, "node-a", dev.Pool)
	assert.Equal(t, "gpu-0", dev.Device)
	require.NotNil(t, dev.ShareID)
	assert.Equal(t, "share-1", *dev.ShareID)
	ready := meta.FindStatusCondition(dev.Conditions, ConditionReady)
	require.NotNil(t, ready)
	assert.Equal(t, metav1.ConditionTrue, ready.Status)
	assert.Equal(t, ReasonPrepared, ready.Reason)
	assert.EqualValues(t, 2, ready.ObservedGeneration)
	assert.Equal(t, uuid0, data.UUID)
	assert.Equal(t, resource.MustParse("4Gi"), data.MemoryLimit)
	assert.EqualValues(t, 30, data.CoresLimit)
	require.NotNil(t, data.MemoryUsed)
	assert.Equal(t, resource.MustParse("1Gi"), *data.MemoryUsed)
	assert.EqualValues(t, 20, *data.SMUtilization)
	assert.EqualValues(t, 1, *data.Processes)
	assert.Equal(t, "train-0,train-1", m.podNames(a), "pod label lists the reserving pods")
	assert.Nil(t, data.MemoryBurst, "a claim that cannot burst reports no burst")

	// A small change waits for the status interval.
	preparetest.WriteRegion(t, a.RegionPath, gib+mib, 2*gib, 22, proc(0, 7, gib+mib, 20, 0))
	clk.Step(10 * time.Second)
	m.writeStatuses(ctx)
	assert.InDelta(t, 1, writes(), 0, "a small change is rate-limited")
	clk.Step(20 * time.Second)
	m.writeStatuses(ctx)
	assert.InDelta(t, 2, writes(), 0, "written once the status interval passed")
	_, data = readStatus()
	assert.EqualValues(t, gib+mib, data.MemoryUsed.Value())
	require.NotNil(t, data.MemoryPeak)
	assert.EqualValues(t, 2*gib, data.MemoryPeak.Value(), "the region's peak, not the current use")

	// A new process is a large change: written after a sixth of the interval.
	preparetest.WriteRegion(t, a.RegionPath, 2*gib, 2*gib, 22, proc(0, 7, gib, 20, 0), proc(1, 8, gib, 5, 0))
	clk.Step(2 * time.Second)
	m.writeStatuses(ctx)
	assert.InDelta(t, 2, writes(), 0, "even large changes keep a minimum spacing")
	clk.Step(4 * time.Second)
	m.writeStatuses(ctx)
	assert.InDelta(t, 3, writes(), 0)
	_, data = readStatus()
	assert.EqualValues(t, 2, *data.Processes)

	// Nothing changed: no write however long it waits.
	clk.Step(time.Hour)
	m.writeStatuses(ctx)
	assert.InDelta(t, 3, writes(), 0)

	// An unreadable region flips Ready at once and drops the usage.
	require.NoError(t, writeGarbage(a.RegionPath))
	clk.Step(time.Second)
	m.writeStatuses(ctx)
	assert.InDelta(t, 4, writes(), 0)
	dev, data = readStatus()
	ready = meta.FindStatusCondition(dev.Conditions, ConditionReady)
	require.NotNil(t, ready)
	assert.Equal(t, metav1.ConditionFalse, ready.Status)
	assert.Equal(t, ReasonRegionUnreadable, ready.Reason)
	assert.Contains(t, ready.Message, a.RegionPath)
	assert.Nil(t, data.MemoryUsed)
	assert.EqualValues(t, 30, data.CoresLimit, "limits stay visible")
}

func writeGarbage(path string) error {
	return mkdirAllAndWrite(path, []byte("not a region"))
}

func TestClaimStatusReportsBurst(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	dir := t.TempDir()
	a := preparetest.Prepared(dir, uidA, "team-a", "train")
	a.GPUs[0].BurstLimitBytes = 12 * gib
	a.BurstPath = filepath.Join(dir, "burst")
	preparetest.WriteRegion(t, a.RegionPath, gib, gib, 20, proc(0, 7, gib, 10, 0))
	obj := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "team-a", UID: uidA}}
	client := fake.NewClientset(obj)
	m, err := New(ctx, Options{DriverName: "vgpu.dra.dev", NodeName: "node-a", Claims: preparetest.NewSource(a),
		GPUs: testGPUs, Registry: prometheus.NewRegistry(), KubeClient: client, Interval: time.Second, StatusInterval: 30 * time.Second})
	require.NoError(t, err)
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	m.now = clk.Now
	ctx, cancel := context.WithCancel(ctx)
	m.informers.Start(ctx.Done())
	defer m.informers.Shutdown()
	defer cancel()
	require.True(t, cache.WaitForCacheSync(ctx.Done(), m.informers.Resource().V1().ResourceClaims().Informer().HasSynced))
	burstOf := func() *resource.Quantity {
		t.Helper()
		got, err := client.ResourceV1().ResourceClaims("team-a").Get(ctx, "train", metav1.GetOptions{})
		require.NoError(t, err)
		require.Len(t, got.Status.Devices, 1)
		var data DeviceData
		require.NoError(t, json.Unmarshal(got.Status.Devices[0].Data.Raw, &data))
		return data.MemoryBurst
	}

	m.writeStatuses(ctx)
	require.NotNil(t, burstOf(), "no host/burst yet: no grant")
	assert.True(t, burstOf().IsZero())

	// A grant is a large change: written after a sixth of the interval.
	require.NoError(t, os.WriteFile(a.BurstPath, burstfile.Render(map[string]uint64{uuid0: 2 * gib}), 0o644))
	clk.Step(6 * time.Second)
	m.writeStatuses(ctx)
	require.NotNil(t, burstOf())
	assert.Equal(t, resource.MustParse("2Gi"), *burstOf())

	// A file that does not parse reports no burst rather than a wrong one.
	require.NoError(t, os.WriteFile(a.BurstPath, []byte("version=2\n"), 0o644))
	clk.Step(6 * time.Second)
	m.writeStatuses(ctx)
	assert.Nil(t, burstOf())
}
