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

package burstgrant

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/burstfile"
)

// sim drives a book the way a node would, with a model of the library
// (it holds each claim to guarantee + the grant in its file, and asks for
// more when it crosses) and of physical memory, and checks the invariant
// after every step.
type sim struct {
	t       *testing.T
	rng     *rand.Rand
	clock   *clocktesting.FakeClock
	dir     string
	book    *Book
	memory  map[string]uint64 // total memory per GPU
	reserve map[string]uint64
	outside map[string]uint64
	claims  map[types.UID]*simClaim // prepared
	pending map[types.UID]Claim     // admitted, waiting for room
	// dying are the claims whose pods the reclaim evicted and whose
	// processes still run: the steps until they end (an eviction a
	// PodDisruptionBudget refused and the deletion that follows it, or a
	// grace period the reclaim shortened to the class's).
	dying map[types.UID]int
	// waitedSlow are pending claims that wait for a slow eviction.
	waitedSlow map[types.UID]bool
	next       int
	stats      map[string]int
}

type simClaim struct {
	Claim
	use map[string]uint64 // physical use per GPU (the region's reservation is the same)
	// samples are monitor samples taken but not yet applied: an
	// allocation within the grant can happen in between.
	samples []sample
}

type sample struct {
	gpu string
	use uint64
	at  time.Time
}

var simGPUs = []string{uuid0, uuid1}

func newSim(t *testing.T, seed uint64) *sim {
	s := &sim{
		t: t, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		clock: clocktesting.NewFakeClock(time.Unix(1_000_000, 0)), dir: t.TempDir(),
		memory:  map[string]uint64{uuid0: 16 * gib, uuid1: 24 * gib},
		reserve: map[string]uint64{uuid0: 512 * mib, uuid1: 0},
		outside: map[string]uint64{},
		claims:  map[types.UID]*simClaim{}, pending: map[types.UID]Claim{}, stats: map[string]int{},
		dying: map[types.UID]int{}, waitedSlow: map[types.UID]bool{},
	}
	for _, g := range simGPUs {
		s.outside[g] = s.rng.Uint64N(gib)
	}
	s.restart()
	return s
}

func (s *sim) usable(g string) uint64 { return s.memory[g] - s.reserve[g] }

// guarantees sums the guarantees the scheduler has booked on a GPU.
func (s *sim) guarantees(g string) uint64 {
	var sum uint64
	for _, c := range s.claims {
		sum += c.Shares[g].Guarantee
	}
	for _, c := range s.pending {
		sum += c.Shares[g].Guarantee
	}
	return sum
}

// fileGrant is what the library reads from the claim's host/burst.
func (s *sim) fileGrant(c *simClaim, g string) uint64 {
	data, err := os.ReadFile(c.Path)
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	require.NoError(s.t, err)
	grants, err := burstfile.Parse(data)
	require.NoError(s.t, err, "the book writes only files the parser accepts")
	return grants[g]
}

func (s *sim) pick() *simClaim {
	if len(s.claims) == 0 {
		return nil
	}
	uids := make([]types.UID, 0, len(s.claims))
	for uid := range s.claims {
		uids = append(uids, uid)
	}
	slices.Sort(uids)
	return s.claims[uids[s.rng.IntN(len(uids))]]
}

func (s *sim) gpuOf(c *simClaim) string {
	var gs []string
	for _, g := range simGPUs {
		if _, ok := c.Shares[g]; ok {
			gs = append(gs, g)
		}
	}
	return gs[s.rng.IntN(len(gs))]
}

// prepare: the scheduler books a new claim where its guarantees fit the
// GPUs' memory; prepare admits it or reclaims for it.
func (s *sim) prepare() {
	s.next++
	c := Claim{UID: types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", s.next)), Priority: int32(s.rng.IntN(3)),
		Created: s.clock.Now(), Shares: map[string]Share{}}
	c.Path = filepath.Join(s.dir, string(c.UID))
	for _, g := range simGPUs {
		if len(c.Shares) > 0 && s.rng.IntN(3) > 0 {
			continue
		}
		guarantee := 1 + s.rng.Uint64N(4*gib)
		limit := guarantee
		if s.rng.IntN(3) > 0 {
			limit += s.rng.Uint64N(10 * gib)
		}
		if s.outside[g]+s.guarantees(g)+guarantee > s.usable(g) {
			return // the scheduler does not place it
		}
		c.Shares[g] = Share{Guarantee: guarantee, Limit: limit}
	}
	s.pending[c.UID] = c
	s.admit(c)
}

func (s *sim) admit(c Claim) {
	d, err := s.book.Admit(c)
	require.NoError(s.t, err)
	require.Empty(s.t, d.Short, "the scheduler booked only what fits: reclaiming burst always makes room")
	if d.Fits {
		require.NoError(s.t, s.book.AddClaim(c))
		delete(s.pending, c.UID)
		s.claims[c.UID] = &simClaim{Claim: c, use: map[string]uint64{}}
		s.stats["admitted"]++
		if s.waitedSlow[c.UID] {
			s.stats["admitted after a slow eviction"]++
			delete(s.waitedSlow, c.UID)
		}
		return
	}
	require.NotEmpty(s.t, d.Reclaim)
	s.evict(d.Reclaim)
	for _, uid := range d.Reclaim {
		if s.dying[uid] > 0 {
			s.waitedSlow[c.UID] = true
		}
	}
	s.stats["reclaimed"]++
}

// evict evicts the pods of the claims. Half the time their processes die
// at once; otherwise they keep running, and allocating within their grant,
// for up to 30 more steps before they end.
func (s *sim) evict(uids []types.UID) {
	for _, uid := range uids {
		require.NotNil(s.t, s.claims[uid], "only prepared claims are chosen")
		if _, ok := s.dying[uid]; ok {
			continue // evicted before; its deadline stands
		}
		s.dying[uid] = 0
		if s.rng.IntN(2) == 0 {
			s.dying[uid] = 1 + s.rng.IntN(30)
			s.stats["slow evictions"]++
		}
	}
	_ = s.endDying()
}

// endDying counts the dying claims' steps down and ends the processes of
// those whose time is up: the monitor's next sample shrinks their grants.
// It reports whether any ended.
func (s *sim) endDying() bool {
	ended := false
	s.clock.Step(time.Millisecond)
	for _, uid := range slices.Sorted(maps.Keys(s.dying)) {
		if s.dying[uid] > 0 {
			s.dying[uid]--
			continue
		}
		delete(s.dying, uid)
		c := s.claims[uid]
		if c == nil {
			continue // unprepared meanwhile
		}
		ended = true
		clear(c.use)
		for g := range c.Shares {
			got, err := s.book.Shrink(uid, g, 0, s.clock.Now(), nil)
			require.NoError(s.t, err)
			require.Zero(s.t, got)
		}
	}
	return ended
}

func (s *sim) retry() {
	for _, uid := range slices.Sorted(func(yield func(types.UID) bool) {
		for uid := range s.pending {
			if !yield(uid) {
				return
			}
		}
	}) {
		s.admit(s.pending[uid])
	}
}

// allocate: the library allocates within guarantee + grant, asking for
// more when it crosses.
func (s *sim) allocate() {
	c := s.pick()
	if c == nil {
		return
	}
	g := s.gpuOf(c)
	size := 1 + s.rng.Uint64N(3*gib)
	share := c.Shares[g]
	if c.use[g]+size > share.Guarantee+s.fileGrant(c, g) {
		need := c.use[g] + size - share.Guarantee
		got, err := s.book.Grant(c.UID, g, need)
		switch {
		case err == nil:
			require.GreaterOrEqual(s.t, got, need)
			require.Equal(s.t, got, s.fileGrant(c, g), "the grant is in the file when answered")
			s.stats["granted"]++
		case errors.Is(err, ErrNoRoom), errors.Is(err, ErrOverLimit), errors.Is(err, ErrReclaiming):
			s.stats["refused"]++
			return // CUDA_ERROR_OUT_OF_MEMORY
		default:
			require.NoError(s.t, err)
		}
	}
	require.LessOrEqual(s.t, c.use[g]+size, share.Guarantee+s.fileGrant(c, g))
	c.use[g] += size
}

func (s *sim) free() {
	if c := s.pick(); c != nil {
		g := s.gpuOf(c)
		c.use[g] -= s.rng.Uint64N(c.use[g] + 1)
	}
}

// kill: a process is SIGKILLed; its memory goes back.
func (s *sim) kill() {
	if c := s.pick(); c != nil {
		g := s.gpuOf(c)
		c.use[g] = 0
		s.monitor(c, g)
	}
}

// monitor: a sample of NVML's per-process use shrinks the grant.
func (s *sim) monitor(c *simClaim, g string) {
	s.clock.Step(time.Millisecond)
	got, err := s.book.Shrink(c.UID, g, c.use[g], s.clock.Now(), nil)
	require.NoError(s.t, err)
	require.LessOrEqual(s.t, c.use[g], c.Shares[g].Guarantee+got, "a shrink never goes below physical use")
}

// sampleLate: the monitor samples NVML now and applies the sample a few
// steps later; allocations within the grant in between are only in the
// region, which Shrink's recheck reads.
func (s *sim) sampleLate() {
	c := s.pick()
	if c == nil {
		return
	}
	if len(c.samples) > 0 && s.rng.IntN(2) == 0 {
		smp := c.samples[0]
		c.samples = c.samples[1:]
		got, err := s.book.Shrink(c.UID, smp.gpu, smp.use, smp.at, func() uint64 { return c.use[smp.gpu] })
		require.NoError(s.t, err)
		require.LessOrEqual(s.t, c.use[smp.gpu], c.Shares[smp.gpu].Guarantee+got, "a stale sample never shrinks below the reservation")
		s.stats["late samples"]++
		return
	}
	g := s.gpuOf(c)
	c.samples = append(c.samples, sample{gpu: g, use: c.use[g], at: s.clock.Now()})
}

func (s *sim) unprepare() {
	if c := s.pick(); c != nil {
		s.book.RemoveClaim(c.UID)
		delete(s.dying, c.UID)
		require.NoError(s.t, os.RemoveAll(c.Path))
		delete(s.claims, c.UID)
	}
}

// restart: a new plugin rebuilds the book from the files; the kubelet
// retries the pending prepares.
func (s *sim) restart() {
	var before map[types.UID]map[string]uint64
	if s.book != nil {
		before = map[types.UID]map[string]uint64{}
		for uid := range s.claims {
			before[uid] = s.book.Grants(uid)
		}
	}
	s.book = NewBook(Options{Clock: s.clock})
	for _, g := range simGPUs {
		s.book.SetGPU(g, s.memory[g], s.reserve[g])
		s.book.SetOutsideUse(g, s.outside[g], 0)
	}
	var prepared []Claim
	for _, uid := range slices.Sorted(func(yield func(types.UID) bool) {
		for uid := range s.claims {
			if !yield(uid) {
				return
			}
		}
	}) {
		prepared = append(prepared, s.claims[uid].Claim)
	}
	require.NoError(s.t, s.book.Rebuild(prepared))
	for uid, grants := range before {
		got := s.book.Grants(uid)
		for g, v := range grants {
			require.Equal(s.t, v, got[g], "claim %s GPU %s: rebuilt as granted, not twice, not less", uid, g)
		}
	}
}

// overhead: driver or outside use grows after the bookings (within what
// the guarantees leave); Reclaim names the bursts to give back.
func (s *sim) overhead() {
	g := simGPUs[s.rng.IntN(len(simGPUs))]
	if slack := s.usable(g) - s.outside[g] - s.guarantees(g); slack > 0 {
		s.outside[g] += s.rng.Uint64N(slack + 1)
	}
	s.book.SetOutsideUse(g, s.outside[g], 0)
	d, err := s.book.Reclaim(g)
	require.NoError(s.t, err)
	require.Empty(s.t, d.Short)
	if !d.Fits {
		s.evict(d.Reclaim)
		s.stats["overhead reclaimed"]++
	}
	if s.rng.IntN(2) == 0 {
		s.outside[g] -= s.rng.Uint64N(s.outside[g] + 1)
		s.book.SetOutsideUse(g, s.outside[g], 0)
	}
}

// check is the invariant: on every GPU, use outside claims plus, over the
// prepared claims, max(use, guarantee) stays within the usable memory;
// every claim uses at most guarantee + the grant in its file; the book
// counts at least that grant and books no more than the GPU has. While
// evicted processes still run, what they use above their guarantees may
// be over (the GPU's overhead grew under them); the invariant holds again
// once they end, which the end of each sequence checks.
func (s *sim) check(step int, what string) {
	for _, g := range simGPUs {
		sum := s.outside[g]
		for _, c := range s.claims {
			share, ok := c.Shares[g]
			if !ok {
				continue
			}
			sum += max(c.use[g], share.Guarantee)
			if _, evicted := s.dying[c.UID]; evicted && c.use[g] > share.Guarantee {
				sum -= c.use[g] - share.Guarantee
			}
			fileGrant := s.fileGrant(c, g)
			require.LessOrEqual(s.t, c.use[g], share.Guarantee+fileGrant, "step %d (%s): claim %s over its limit", step, what, c.UID)
			require.LessOrEqual(s.t, fileGrant, s.book.Grants(c.UID)[g], "step %d (%s): the file shows more than the book counts", step, what)
		}
		require.LessOrEqual(s.t, sum, s.usable(g), "step %d (%s): GPU %s: sum of max(use, guarantee) above usable memory", step, what, g)
		booked, usable := s.book.Booked(g)
		require.Equal(s.t, s.usable(g), usable)
		// The grants of evicted claims whose processes still run are
		// booked beside the guarantees that wait for them, until they end.
		var lent uint64
		for uid := range s.dying {
			lent += s.book.Grants(uid)[g]
		}
		require.LessOrEqual(s.t, booked, usable+lent, "step %d (%s): GPU %s overbooked beyond the evicted claims' grants", step, what, g)
	}
}

// The invariant holds after every step of seeded random sequences of
// prepare, allocate, free, kill, monitor samples, unprepare, plugin
// restarts and overhead appearing after the bookings.
func TestInvariantUnderRandomSequences(t *testing.T) {
	seeds, steps := 20, 2000
	if testing.Short() {
		seeds = 3
	}
	total := map[string]int{}
	for seed := range seeds {
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) {
			s := newSim(t, uint64(seed))
			actions := []struct {
				name   string
				weight int
				do     func()
			}{
				{"prepare", 6, s.prepare},
				{"retry", 3, s.retry},
				{"allocate", 30, s.allocate},
				{"free", 15, s.free},
				{"kill", 4, s.kill},
				{"monitor", 10, func() {
					if c := s.pick(); c != nil {
						s.monitor(c, s.gpuOf(c))
					}
				}},
				{"late sample", 6, s.sampleLate},
				{"unprepare", 4, s.unprepare},
				{"restart", 1, s.restart},
				{"overhead", 2, s.overhead},
			}
			sum := 0
			for _, a := range actions {
				sum += a.weight
			}
			for step := range steps {
				s.clock.Step(time.Millisecond)
				if s.endDying() {
					s.check(step, "evicted processes end")
				}
				n := s.rng.IntN(sum)
				for _, a := range actions {
					if n < a.weight {
						a.do()
						s.check(step, a.name)
						break
					}
					n -= a.weight
				}
			}
			// Within the bound: once the evicted processes have ended (and
			// the monitor has seen them go), the kubelet's retry prepares
			// the claims the scheduler booked, or evicts more for them;
			// each round ends at least one burst, so they all get in.
			for round := 0; len(s.pending) > 0; round++ {
				require.LessOrEqual(t, round, len(s.claims), "claims still waiting: %v", slices.Collect(maps.Keys(s.pending)))
				for range 32 {
					_ = s.endDying()
				}
				require.Empty(t, s.dying)
				s.retry()
			}
			for range 32 {
				_ = s.endDying()
			}
			s.check(steps, "every eviction ended")
			for k, v := range s.stats {
				total[k] += v
			}
		})
	}
	t.Logf("over %d steps: %v", seeds*steps, total)
	// The sequences exercise the interesting paths, not just refusals.
	for _, k := range []string{"admitted", "reclaimed", "granted", "refused", "overhead reclaimed", "late samples", "slow evictions", "admitted after a slow eviction"} {
		require.Positive(t, total[k], k)
	}
}
