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

package preparetest

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/region/regiontest"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/prepare"
)

const (
	// GiB is the fixtures' unit of memory.
	GiB = uint64(1) << 30
	// GPU0 is the UUID of the GPU the fixture claims use.
	GPU0 = "GPU-11111111-2222-3333-4444-555555555555"
	// ClaimA and ClaimB are two claim UIDs.
	ClaimA = types.UID("0f6b1a6e-4c1e-4a55-9d1a-2f3c4b5a6d7e")
	ClaimB = types.UID("7d2e8c1a-1b2c-4d3e-8f9a-0b1c2d3e4f5a")
)

// RegionTime is the init time written into fixture regions.
var RegionTime = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// Source lists prepared claims that a test sets; it is safe for concurrent
// use, like prepare.Manager.
type Source struct {
	mu     sync.Mutex
	claims []prepare.PreparedClaim
}

// NewSource returns a Source listing cs.
func NewSource(cs ...prepare.PreparedClaim) *Source {
	return &Source{claims: cs}
}

// PreparedClaims returns a copy of the claims last set.
func (s *Source) PreparedClaims() []prepare.PreparedClaim {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]prepare.PreparedClaim(nil), s.claims...)
}

// Set replaces the claims listed.
func (s *Source) Set(cs ...prepare.PreparedClaim) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.claims = cs
}

// Prepared is a claim with one share of GPU0 at 4 GiB and 30 % SM, its
// region at dir/<uid>/shm/region.
func Prepared(dir string, uid types.UID, namespace, name string) prepare.PreparedClaim {
	return prepare.PreparedClaim{
		UID: uid, Namespace: namespace, Name: name,
		GPUs:       []prepare.GPULimit{{UUID: GPU0, MemoryLimitBytes: 4 * GiB, SMLimitPercent: 30}},
		Devices:    []prepare.PreparedDevice{{Request: "gpu", Pool: "node-a", Device: "gpu-0", ShareID: "share-1", GPU: 0, MemoryBytes: 4 * GiB, Cores: 30}},
		RegionPath: filepath.Join(dir, string(uid), "shm", "region"),
	}
}

// WriteRegion writes at path (creating its directory) the region of a
// Prepared claim using usedBytes on GPU0 in total, with procs.
func WriteRegion(t testing.TB, path string, usedBytes, peakBytes uint64, smUtil uint32, procs ...regiontest.Process) {
	t.Helper()
	b, err := regiontest.Ready(1, uint64(RegionTime.UnixNano()),
		[]regiontest.Device{{UUID: GPU0, MemoryLimitBytes: 4 * GiB, SMLimitPercent: 30, UsedBytes: usedBytes, PeakBytes: peakBytes, SMUtilPercent: smUtil}}, procs)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, regiontest.WriteFile(path, b))
}
