package hostpids

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/claims"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/region/regiontest"
)

const (
	gib   = uint64(1) << 30
	mib   = uint64(1) << 20
	uuid0 = "GPU-11111111-2222-3333-4444-555555555555"
	uidA  = types.UID("0f6b1a6e-4c1e-4a55-9d1a-2f3c4b5a6d7e")
	uidB  = types.UID("7d2e8c1a-1b2c-4d3e-8f9a-0b1c2d3e4f5a")
)

// fakeClaims is a ClaimSource whose claims a test can change.
type fakeClaims struct {
	mu     sync.Mutex
	claims []claims.PreparedClaim
}

func (f *fakeClaims) PreparedClaims() []claims.PreparedClaim {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]claims.PreparedClaim(nil), f.claims...)
}

func (f *fakeClaims) set(c ...claims.PreparedClaim) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.claims = c
}

// preparedClaim is a claim with one share of GPU 0 at 4 GiB and 30 % SM.
func preparedClaim(dir string, uid types.UID, ns, name string) claims.PreparedClaim {
	return claims.PreparedClaim{
		UID: uid, Namespace: ns, Name: name,
		GPUs:       []claims.GPULimit{{UUID: uuid0, MemoryLimitBytes: 4 * gib, SMLimitPercent: 30}},
		RegionPath: filepath.Join(dir, string(uid), "shm", "region"),
	}
}

func mkdirAll(dir string) error { return os.MkdirAll(dir, 0o755) }

// writeClaimRegion writes the region of a claim on GPU 0 using usedBytes
// in total, with procs.
func writeClaimRegion(t testing.TB, path string, usedBytes, peakBytes uint64, smUtil uint32, procs ...regiontest.Process) {
	t.Helper()
	b, err := regiontest.Ready(1, uint64(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).UnixNano()),
		[]regiontest.Device{{UUID: uuid0, MemoryLimitBytes: 4 * gib, SMLimitPercent: 30, UsedBytes: usedBytes, PeakBytes: peakBytes, SMUtilPercent: smUtil}}, procs)
	require.NoError(t, err)
	require.NoError(t, mkdirAll(filepath.Dir(path)))
	require.NoError(t, regiontest.WriteFile(path, b))
}

// clock is a settable time source for the interval logic.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}
