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
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/burstfile"
)

const (
	gib   = uint64(1) << 30
	mib   = uint64(1) << 20
	uuid0 = "GPU-11111111-2222-3333-4444-555555555555"
	uuid1 = "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"

	uidA = types.UID("0f6b1a6e-4c1e-4a55-9d1a-2f3c4b5a6d7e")
	uidB = types.UID("7d2e8c1a-1b2c-4d3e-8f9a-0b1c2d3e4f5a")
	uidC = types.UID("3c4d5e6f-7a8b-4c9d-8e0f-1a2b3c4d5e6f")
)

// fixture is a book over one 16 GiB GPU without reserve, writing real
// files into a temporary directory.
type fixture struct {
	t     *testing.T
	clock *clocktesting.FakeClock
	dir   string
	book  *Book
}

func newFixture(t *testing.T) *fixture {
	f := &fixture{t: t, clock: clocktesting.NewFakeClock(time.Unix(1_000_000, 0)), dir: t.TempDir()}
	f.book = NewBook(Options{Clock: f.clock})
	f.book.SetGPU(uuid0, 16*gib, 0)
	return f
}

// claim builds a claim with one share of uuid0.
func (f *fixture) claim(uid types.UID, guarantee, limit uint64) Claim {
	return Claim{UID: uid, Path: filepath.Join(f.dir, string(uid)), Created: f.clock.Now(),
		Shares: map[string]Share{uuid0: {Guarantee: guarantee, Limit: limit}}}
}

func (f *fixture) add(uid types.UID, guarantee, limit uint64) Claim {
	c := f.claim(uid, guarantee, limit)
	require.NoError(f.t, f.book.AddClaim(c))
	return c
}

// file returns the grants in a claim's file.
func (f *fixture) file(uid types.UID) map[string]uint64 {
	data, err := os.ReadFile(filepath.Join(f.dir, string(uid)))
	require.NoError(f.t, err)
	grants, err := burstfile.Parse(data)
	require.NoError(f.t, err)
	return grants
}

func TestGrantRules(t *testing.T) {
	f := newFixture(t)
	f.add(uidA, 4*gib, 12*gib)
	f.add(uidB, 4*gib, 4*gib)

	got, err := f.book.Grant(uidA, uuid0, 1)
	require.NoError(t, err)
	assert.Equal(t, ChunkBytes, got, "whole chunks")
	assert.Equal(t, map[string]uint64{uuid0: ChunkBytes}, f.file(uidA), "in the file when answered")

	got, err = f.book.Grant(uidA, uuid0, 100*mib)
	require.NoError(t, err)
	assert.Equal(t, ChunkBytes, got, "a need within the grant changes nothing")

	_, err = f.book.Grant(uidA, uuid0, 8*gib+1)
	assert.ErrorIs(t, err, ErrOverLimit)
	_, err = f.book.Grant(uidB, uuid0, 1)
	assert.ErrorIs(t, err, ErrOverLimit, "no limit above the guarantee: no burst")

	got, err = f.book.Grant(uidA, uuid0, 8*gib)
	require.NoError(t, err)
	assert.Equal(t, 8*gib, got, "up to the limit: 4 + 8 + 4 = 16 GiB")
	booked, usable := f.book.Booked(uuid0)
	assert.Equal(t, 16*gib, booked)
	assert.Equal(t, 16*gib, usable)

	_, err = f.book.Grant(uidC, uuid0, 1)
	assert.ErrorIs(t, err, ErrUnknownClaim)
	_, err = f.book.Grant(uidA, uuid1, 1)
	assert.ErrorIs(t, err, ErrNoShare)
}

func TestGrantOnlyWhatFits(t *testing.T) {
	f := newFixture(t)
	f.book.SetGPU(uuid0, 16*gib, 512*mib) // the driver's reserve
	f.add(uidA, 4*gib, 16*gib)
	f.add(uidB, 2*gib, 16*gib)
	f.book.SetOutsideUse(uuid0, 1*gib, 0) // a process of no claim

	// 16 GiB - 512 MiB reserve - 1 GiB outside - 6 GiB guarantees = 8.5 GiB.
	_, err := f.book.Grant(uidA, uuid0, 8*gib+2*ChunkBytes+1)
	assert.ErrorIs(t, err, ErrNoRoom)
	assert.Equal(t, map[string]uint64{}, f.book.Grants(uidA), "a refusal grants nothing")
	_, err = os.Stat(filepath.Join(f.dir, string(uidA)))
	assert.ErrorIs(t, err, os.ErrNotExist, "and writes nothing")

	got, err := f.book.Grant(uidA, uuid0, 6*gib)
	require.NoError(t, err)
	assert.Equal(t, 6*gib, got)
	_, err = f.book.Grant(uidB, uuid0, 2*gib+2*ChunkBytes+1)
	assert.ErrorIs(t, err, ErrNoRoom, "A's burst is not B's: 2.5 GiB are left")
	got, err = f.book.Grant(uidB, uuid0, 2*gib+ChunkBytes+1)
	require.NoError(t, err)
	assert.Equal(t, 2*gib+2*ChunkBytes, got, "rounded up, and fits exactly")
	booked, usable := f.book.Booked(uuid0)
	assert.Equal(t, usable, booked)

	// Overhead that appears after the bookings leaves no room to grow.
	f.book.SetOutsideUse(uuid0, 2*gib, 0)
	_, err = f.book.Grant(uidA, uuid0, 6*gib+1)
	assert.ErrorIs(t, err, ErrNoRoom)

	_, err = NewBook(Options{}).Grant(uidA, uuid0, 1)
	assert.ErrorIs(t, err, ErrUnknownClaim)
	book := NewBook(Options{})
	require.NoError(t, book.AddClaim(f.claim(uidC, gib, 2*gib)))
	_, err = book.Grant(uidC, uuid0, 1)
	assert.ErrorIs(t, err, ErrUnknownGPU, "no grant before the GPU is measured")
}

// A room that is not a whole number of chunks is granted whole.
func TestGrantCappedAtTheLimit(t *testing.T) {
	f := newFixture(t)
	f.add(uidA, 4*gib, 4*gib+100*mib)
	got, err := f.book.Grant(uidA, uuid0, 1)
	require.NoError(t, err)
	assert.Equal(t, 100*mib, got)
}

func TestShrinkFromPhysicalUse(t *testing.T) {
	f := newFixture(t)
	f.add(uidA, 4*gib, 12*gib)
	assert.False(t, f.book.HoldsBurst(uidA), "no grant yet")
	_, err := f.book.Grant(uidA, uuid0, 8*gib)
	require.NoError(t, err)
	assert.True(t, f.book.HoldsBurst(uidA))
	grantTime := f.clock.Now()

	got, err := f.book.Shrink(uidA, uuid0, 0, grantTime, nil)
	require.NoError(t, err)
	assert.Equal(t, 8*gib, got, "a sample taken when the grant was made may predate the allocation")

	f.clock.Step(time.Second)
	got, err = f.book.Shrink(uidA, uuid0, 4*gib+300*mib, f.clock.Now(), nil)
	require.NoError(t, err)
	assert.Equal(t, 2*ChunkBytes, got, "use above the guarantee in whole chunks")
	assert.Equal(t, map[string]uint64{uuid0: 2 * ChunkBytes}, f.file(uidA))

	got, err = f.book.Shrink(uidA, uuid0, 10*gib, f.clock.Now(), nil)
	require.NoError(t, err)
	assert.Equal(t, 2*ChunkBytes, got, "never raised")

	got, err = f.book.Shrink(uidA, uuid0, 3*gib, f.clock.Now(), nil)
	require.NoError(t, err)
	assert.Zero(t, got, "use within the guarantee: no burst")
	assert.Equal(t, map[string]uint64{uuid0: 0}, f.file(uidA))
	assert.False(t, f.book.HoldsBurst(uidA), "a grant shrunk to zero is no burst")
	assert.False(t, f.book.HoldsBurst(uidB), "a claim not in the book holds none")
	booked, _ := f.book.Booked(uuid0)
	assert.Equal(t, 4*gib, booked)
}

// The book counts at least what a file it wrote may show.
func TestWriteFailures(t *testing.T) {
	f := newFixture(t)
	fail := false
	var written []string
	f.book = NewBook(Options{Clock: f.clock, WriteFile: func(path string, data []byte) error {
		if fail {
			return errors.New("disk full")
		}
		written = append(written, string(data))
		return os.WriteFile(path, data, 0o644)
	}})
	f.book.SetGPU(uuid0, 16*gib, 0)
	f.add(uidA, 4*gib, 12*gib)

	fail = true
	_, err := f.book.Grant(uidA, uuid0, gib)
	assert.ErrorContains(t, err, "disk full")
	booked, _ := f.book.Booked(uuid0)
	assert.Equal(t, 5*gib, booked, "a failed write may have happened: the grant stays counted")

	fail = false
	got, err := f.book.Grant(uidA, uuid0, 2*gib)
	require.NoError(t, err)
	assert.Equal(t, 2*gib, got)
	assert.Equal(t, []string{string(burstfile.Render(map[string]uint64{uuid0: 2 * gib}))}, written)

	fail = true
	f.clock.Step(time.Second)
	got, err = f.book.Shrink(uidA, uuid0, 0, f.clock.Now(), nil)
	assert.ErrorContains(t, err, "disk full")
	assert.Equal(t, 2*gib, got, "the library still reads the old grant")
	booked, _ = f.book.Booked(uuid0)
	assert.Equal(t, 6*gib, booked)
}

func TestAdmitChoosesWhomToReclaim(t *testing.T) {
	f := newFixture(t)
	f.book.SetGPU(uuid0, 32*gib, 0)
	f.add(uidA, 4*gib, 16*gib)
	_, err := f.book.Grant(uidA, uuid0, 8*gib)
	require.NoError(t, err)
	f.clock.Step(time.Minute)
	f.add(uidB, 4*gib, 16*gib)
	_, err = f.book.Grant(uidB, uuid0, 4*gib)
	require.NoError(t, err)
	// 4+8 + 4+4 = 20 of 32 GiB booked.

	d, err := f.book.Admit(f.claim(uidC, 12*gib, 12*gib))
	require.NoError(t, err)
	assert.Equal(t, Decision{Fits: true}, d)
	f.book.RemoveClaim(uidC) // not prepared after all

	d, err = f.book.Admit(f.claim(uidC, 14*gib, 14*gib))
	require.NoError(t, err)
	assert.Equal(t, Decision{Reclaim: []types.UID{uidA}}, d, "the largest grant first, and it is enough")

	_, err = f.book.Grant(uidA, uuid0, 9*gib)
	assert.ErrorIs(t, err, ErrReclaiming, "a claim being reclaimed cannot grow")
	_, err = f.book.Grant(uidB, uuid0, 5*gib)
	assert.ErrorIs(t, err, ErrNoRoom, "C's pending guarantee is booked: B cannot take what A gives back")

	// A's pod is evicted: its processes die and the grant comes back.
	f.clock.Step(time.Second)
	_, err = f.book.Shrink(uidA, uuid0, 0, f.clock.Now(), nil)
	require.NoError(t, err)
	d, err = f.book.Admit(f.claim(uidC, 14*gib, 14*gib))
	require.NoError(t, err)
	assert.True(t, d.Fits, "the kubelet's retry finds the guarantee free")
	require.NoError(t, f.book.AddClaim(f.claim(uidC, 14*gib, 14*gib)))

	got, err := f.book.Grant(uidA, uuid0, 2*gib)
	require.NoError(t, err, "A's grant is back to zero: it may burst into what is left")
	assert.Equal(t, 2*gib, got)
	booked, _ := f.book.Booked(uuid0)
	assert.Equal(t, (4+2)*gib+(4+4)*gib+14*gib, booked)
}

func TestAdmitOrder(t *testing.T) {
	f := newFixture(t)
	f.book.SetGPU(uuid0, 64*gib, 0)
	add := func(uid types.UID, priority int32, grant uint64) {
		c := f.claim(uid, gib, 20*gib)
		c.Priority = priority
		require.NoError(t, f.book.AddClaim(c))
		_, err := f.book.Grant(uid, uuid0, grant)
		require.NoError(t, err)
		f.clock.Step(time.Minute)
	}
	uidD := types.UID("4d5e6f70-8192-4a3b-8c4d-5e6f708192a3")
	uidE := types.UID("5e6f7081-92a3-4b4c-9d5e-6f708192a3b4")
	add(uidA, 0, 2*gib)  // old, low priority
	add(uidB, 10, 2*gib) // high priority
	add(uidC, 0, 2*gib)  // young, low priority
	add(uidD, 0, 4*gib)  // the largest
	add(uidE, 0, 0)      // never bursts
	// Booked: 5 GiB guarantees + 10 GiB grants = 15 of 64.

	d, err := f.book.Admit(f.claim("6f708192-a3b4-4c5d-8e6f-708192a3b4c5", 56*gib, 56*gib))
	require.NoError(t, err)
	assert.False(t, d.Fits)
	assert.Equal(t, []types.UID{uidD, uidC, uidA}, d.Reclaim, "largest grant; then the youngest of equal priority; only as many as needed")
	assert.Empty(t, d.Short, "7 GiB short, 10 GiB of grants")

	d, err = f.book.Admit(f.claim("6f708192-a3b4-4c5d-8e6f-708192a3b4c5", 60*gib, 60*gib))
	require.NoError(t, err)
	assert.Equal(t, []types.UID{uidD, uidC, uidA, uidB}, d.Reclaim, "higher priority last; never one without burst")
	assert.Equal(t, map[string]uint64{uuid0: gib}, d.Short, "what reclaiming every grant cannot free")

	f.book.CancelReclaim(uidD)
	_, err = f.book.Grant(uidD, uuid0, 4*gib+1)
	assert.ErrorIs(t, err, ErrNoRoom, "may grow again, but the pending guarantee holds the memory")
	_, err = f.book.Grant(uidC, uuid0, 2*gib+1)
	assert.ErrorIs(t, err, ErrReclaiming)
}

func TestAdmittedWithoutChangingAnything(t *testing.T) {
	f := newFixture(t)
	f.add(uidA, 4*gib, 12*gib)
	_, err := f.book.Grant(uidA, uuid0, 8*gib)
	require.NoError(t, err)
	assert.True(t, f.book.Admitted(uidB), "not pending: Admit decides afresh")

	d, err := f.book.Admit(f.claim(uidB, 10*gib, 10*gib))
	require.NoError(t, err)
	require.Equal(t, []types.UID{uidA}, d.Reclaim)
	assert.False(t, f.book.Admitted(uidB), "A's burst still holds the memory")
	assert.False(t, f.book.Admitted(uidB), "asking again changes nothing")

	f.clock.Step(time.Second)
	_, err = f.book.Shrink(uidA, uuid0, 7*gib, f.clock.Now(), nil)
	require.NoError(t, err)
	assert.False(t, f.book.Admitted(uidB), "A gave back only part of its burst: 4+3+10 > 16")
	_, err = f.book.Shrink(uidA, uuid0, 0, f.clock.Now(), nil)
	require.NoError(t, err)
	assert.True(t, f.book.Admitted(uidB), "A's processes are gone: B's guarantee fits")
	booked, _ := f.book.Booked(uuid0)
	assert.Equal(t, 14*gib, booked, "B stays pending: the question booked nothing more and dropped nothing")

	// Memory that reclaiming cannot free (use outside claims) is not waited for.
	f.book.SetOutsideUse(uuid0, 4*gib, 0)
	assert.True(t, f.book.Admitted(uidB), "no grant left to reclaim: prepare goes ahead on the scheduler's booking")
	f.book.SetOutsideUse(uuid0, 0, 0)

	// A pending admission that expired is decided afresh.
	_, err = f.book.Grant(uidA, uuid0, 3*gib)
	require.ErrorIs(t, err, ErrNoRoom, "B's pending guarantee holds the memory")
	f.clock.Step(DefaultPendingTTL + time.Second)
	assert.True(t, f.book.Admitted(uidB))
}

func TestAdmitLeavesOutRecentOutsideUse(t *testing.T) {
	f := newFixture(t)
	f.add(uidA, 4*gib, 14*gib)
	_, err := f.book.Grant(uidA, uuid0, 8*gib)
	require.NoError(t, err)
	f.book.SetOutsideUse(uuid0, 3*gib, 3*gib) // maybe a claim's process not attributed yet
	_, err = f.book.Grant(uidA, uuid0, 10*gib)
	assert.ErrorIs(t, err, ErrNoRoom, "recent outside use counts against grants at once: 4+10+3 > 16")

	d, err := f.book.Admit(f.claim(uidB, 4*gib, 4*gib))
	require.NoError(t, err)
	assert.Equal(t, Decision{Fits: true}, d, "15 booked + 4 fits 16 without the recent 3")
	f.book.RemoveClaim(uidB)

	f.book.SetOutsideUse(uuid0, 3*gib, 0) // it lasted: real overhead
	d, err = f.book.Admit(f.claim(uidB, 4*gib, 4*gib))
	require.NoError(t, err)
	assert.Equal(t, []types.UID{uidA}, d.Reclaim)
	assert.False(t, f.book.Admitted(uidB))
}

func TestPendingAdmissionExpires(t *testing.T) {
	f := newFixture(t)
	f.add(uidA, 4*gib, 16*gib)
	d, err := f.book.Admit(f.claim(uidB, 8*gib, 8*gib))
	require.NoError(t, err)
	require.True(t, d.Fits)
	_, err = f.book.Grant(uidA, uuid0, 8*gib)
	assert.ErrorIs(t, err, ErrNoRoom, "admitted, not yet added: its guarantee is booked")
	f.clock.Step(DefaultPendingTTL + time.Second)
	_, err = f.book.Grant(uidA, uuid0, 8*gib)
	assert.NoError(t, err, "a prepare that never came back does not block bursts for ever")
}

// Overhead that appears after the bookings: grants are refused, and
// Reclaim names the bursts to give back.
func TestReclaimAfterOverheadGrows(t *testing.T) {
	f := newFixture(t)
	f.add(uidA, 4*gib, 12*gib)
	f.add(uidB, 4*gib, 4*gib)
	_, err := f.book.Grant(uidA, uuid0, 6*gib)
	require.NoError(t, err)
	d, err := f.book.Reclaim(uuid0)
	require.NoError(t, err)
	assert.Equal(t, Decision{Fits: true}, d)

	f.book.SetGPU(uuid0, 16*gib, gib)     // the driver reserves more
	f.book.SetOutsideUse(uuid0, 2*gib, 0) // a process outside every claim
	d, err = f.book.Reclaim(uuid0)
	require.NoError(t, err)
	assert.Equal(t, Decision{Reclaim: []types.UID{uidA}}, d, "14 booked + 3 overhead > 16: A's 6 GiB burst goes")

	f.book.SetOutsideUse(uuid0, 12*gib, 0)
	d, err = f.book.Reclaim(uuid0)
	require.NoError(t, err)
	assert.Equal(t, []types.UID{uidA}, d.Reclaim)
	assert.Equal(t, map[string]uint64{uuid0: 5 * gib}, d.Short, "26 booked of 15 usable: guarantees and use outside claims cannot be reclaimed")

	_, err = f.book.Reclaim(uuid1)
	assert.ErrorIs(t, err, ErrUnknownGPU)
}

func TestRebuild(t *testing.T) {
	f := newFixture(t)
	a := f.add(uidA, 4*gib, 12*gib)
	b := f.add(uidB, 2*gib, 6*gib)
	_, err := f.book.Grant(uidA, uuid0, 6*gib)
	require.NoError(t, err)
	_, err = f.book.Grant(uidB, uuid0, 1)
	require.NoError(t, err)
	before, _ := f.book.Booked(uuid0)

	restarted := NewBook(Options{Clock: f.clock})
	restarted.SetGPU(uuid0, 16*gib, 0)
	c := f.claim(uidC, gib, gib) // prepared, never burst: no file
	require.NoError(t, restarted.Rebuild([]Claim{a, b, c}))
	assert.Equal(t, map[string]uint64{uuid0: 6 * gib}, restarted.Grants(uidA))
	assert.Equal(t, map[string]uint64{uuid0: ChunkBytes}, restarted.Grants(uidB))
	assert.Empty(t, restarted.Grants(uidC))
	after, _ := restarted.Booked(uuid0)
	assert.Equal(t, before+gib, after)

	// Nothing is granted twice: what A holds is not free for C.
	_, err = restarted.Grant(uidB, uuid0, 4*gib)
	assert.ErrorIs(t, err, ErrNoRoom)

	// A sample from before the restart does not shrink a rebuilt grant.
	got, err := restarted.Shrink(uidA, uuid0, 0, f.clock.Now().Add(-time.Second), nil)
	require.NoError(t, err)
	assert.Equal(t, 6*gib, got)
}

func TestRebuildFromBadFiles(t *testing.T) {
	f := newFixture(t)
	a := f.claim(uidA, 4*gib, 12*gib)
	b := f.claim(uidB, 2*gib, 6*gib)
	c := f.claim(uidC, 2*gib, 3*gib)
	require.NoError(t, os.WriteFile(a.Path, []byte("version=1\ngpu "+uuid0+" -1\n"), 0o644))
	require.NoError(t, os.WriteFile(b.Path, burstfile.Render(map[string]uint64{uuid0: ChunkBytes, uuid1: 8 * gib}), 0o644))
	require.NoError(t, os.WriteFile(c.Path, burstfile.Render(map[string]uint64{uuid0: 4 * gib}), 0o644))

	err := f.book.Rebuild([]Claim{a, b, c, a, {UID: "x"}})
	require.Error(t, err)
	for _, s := range []string{
		string(uidA) + ": burst file: line 2", "whole room",
		"GPU " + uuid1 + ", which the claim has no share of, ignored",
		"beyond the room",
		string(uidA) + " listed twice",
		"burst file path are required",
	} {
		assert.Contains(t, err.Error(), s)
	}
	assert.Equal(t, map[string]uint64{uuid0: 8 * gib}, f.book.Grants(uidA), "an unreadable file counts the whole room")
	assert.Equal(t, map[string]uint64{uuid0: ChunkBytes}, f.book.Grants(uidB))
	assert.Equal(t, map[string]uint64{uuid0: 4 * gib}, f.book.Grants(uidC), "kept as the library may read it")

	// Physical use brings them down.
	f.clock.Step(time.Second)
	got, err := f.book.Shrink(uidC, uuid0, 5*gib, f.clock.Now(), nil)
	require.NoError(t, err)
	assert.Equal(t, gib, got, "at most the room")
	got, err = f.book.Shrink(uidC, uuid0, 2*gib+1, f.clock.Now(), nil)
	require.NoError(t, err)
	assert.Equal(t, ChunkBytes, got, "in whole chunks")
}

func TestClaimValidation(t *testing.T) {
	f := newFixture(t)
	for name, c := range map[string]Claim{
		"no UID":       {Path: "p", Shares: map[string]Share{uuid0: {}}},
		"no path":      {UID: uidA, Shares: map[string]Share{uuid0: {}}},
		"no shares":    {UID: uidA, Path: "p"},
		"bad UUID":     {UID: uidA, Path: "p", Shares: map[string]Share{"gpu0": {}}},
		"limit below":  {UID: uidA, Path: "p", Shares: map[string]Share{uuid0: {Guarantee: 2, Limit: 1}}},
		"limit beyond": {UID: uidA, Path: "p", Shares: map[string]Share{uuid0: {Limit: burstfile.MaxGrantBytes + 1}}},
	} {
		assert.Error(t, f.book.AddClaim(c), name)
		_, err := f.book.Admit(c)
		assert.Error(t, err, name)
	}
	f.add(uidA, gib, gib)
	assert.ErrorContains(t, f.book.AddClaim(f.claim(uidA, gib, gib)), "already")
}

// An allocation that read the old grant and reserved in its region before
// the shrink was written keeps its memory: the plugin re-reads the
// region's reservation after writing the lower grant.
func TestShrinkRecheckKeepsARacingAllocation(t *testing.T) {
	f := newFixture(t)
	f.add(uidA, 4*gib, 12*gib)
	_, err := f.book.Grant(uidA, uuid0, 8*gib)
	require.NoError(t, err)
	f.clock.Step(time.Second)

	var fileDuringRecheck map[string]uint64
	got, err := f.book.Shrink(uidA, uuid0, 4*gib, f.clock.Now(), func() uint64 {
		fileDuringRecheck = f.file(uidA)
		return 4*gib + 3*gib + 1 // the library reserved 3 GiB and a byte of burst meanwhile
	})
	require.NoError(t, err)
	assert.Equal(t, map[string]uint64{uuid0: 0}, fileDuringRecheck, "the lower grant is written before the region is re-read")
	assert.Equal(t, 3*gib+ChunkBytes, got, "raised back to what the reservation needs")
	assert.Equal(t, map[string]uint64{uuid0: 3*gib + ChunkBytes}, f.file(uidA))

	f.clock.Step(time.Second)
	got, err = f.book.Shrink(uidA, uuid0, 0, f.clock.Now(), func() uint64 { return 100 * gib })
	require.NoError(t, err)
	assert.Equal(t, 3*gib+ChunkBytes, got, "a forged reservation keeps the claim's own grant, never raises it")

	got, err = f.book.Shrink(uidA, uuid0, 0, f.clock.Now(), func() uint64 { return 4 * gib })
	require.NoError(t, err)
	assert.Zero(t, got)
	booked, _ := f.book.Booked(uuid0)
	assert.Equal(t, 4*gib, booked)
}
