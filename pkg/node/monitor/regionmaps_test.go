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
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2/ktesting"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/prepare"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/prepare/preparetest"
)

func newMappingTestMonitor(t *testing.T, src *preparetest.Source) *Monitor {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	m, err := New(ctx, Options{DriverName: "vgpu.dra.dev", NodeName: "node-a", Claims: src, GPUs: testGPUs,
		Registry: prometheus.NewRegistry(), Interval: time.Nanosecond})
	require.NoError(t, err)
	return m
}

func TestRegionMappingsAreKeptAndRenewed(t *testing.T) {
	a := preparetest.Prepared(t.TempDir(), uidA, "team-a", "train")
	preparetest.WriteRegion(t, a.RegionPath, gib, gib, 0, proc(0, 7, gib, 0, 0))
	src := preparetest.NewSource(a)
	m := newMappingTestMonitor(t, src)
	logger, _ := ktesting.NewTestContext(t)

	snap := m.collect(logger)
	require.NoError(t, snap.claims[0].err)
	mapping := m.regionMaps[uidA]
	preparetest.WriteRegion(t, a.RegionPath+".new", 2*gib, 2*gib, 0, proc(0, 7, 2*gib, 0, 0))
	snap = m.collect(logger)
	assert.Same(t, mapping, m.regionMaps[uidA], "the mapping is kept between collections")
	assert.EqualValues(t, gib, snap.claims[0].devices[0].usedBytes)

	// Unprepare and prepare between two collections: the file was replaced.
	require.NoError(t, os.Rename(a.RegionPath+".new", a.RegionPath))
	snap = m.collect(logger)
	require.NoError(t, snap.claims[0].err)
	assert.EqualValues(t, 2*gib, snap.claims[0].devices[0].usedBytes, "a replaced file is opened again")

	// A file that turns bad is not kept open.
	require.NoError(t, writeGarbage(a.RegionPath))
	snap = m.collect(logger)
	require.Error(t, snap.claims[0].err)
	assert.NotContains(t, m.regionMaps, uidA)

	// A claim that is gone has its mapping closed.
	preparetest.WriteRegion(t, a.RegionPath, gib, gib, 0)
	m.collect(logger)
	require.Contains(t, m.regionMaps, uidA)
	src.Set()
	m.collect(logger)
	assert.Empty(t, m.regionMaps)
}

func TestParallelCollectionReadsEveryClaim(t *testing.T) {
	dir := t.TempDir()
	var list []prepare.PreparedClaim
	for i := range 3*parallelReadMin + 5 {
		c := preparetest.Prepared(dir, types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", i)), "ns", fmt.Sprintf("c-%d", i))
		used := uint64(i+1) * mib
		preparetest.WriteRegion(t, c.RegionPath, used, used, 0, proc(0, 7, used, 0, 0))
		list = append(list, c)
	}
	m := newMappingTestMonitor(t, preparetest.NewSource(list...))
	logger, _ := ktesting.NewTestContext(t)
	snap := m.collect(logger)
	require.Len(t, snap.claims, len(list))
	for i, cu := range snap.claims {
		require.NoError(t, cu.err)
		assert.Equal(t, list[i].UID, cu.claim.UID)
		assert.EqualValues(t, uint64(i+1)*mib, cu.devices[0].usedBytes, "claim %d", i)
	}
}
