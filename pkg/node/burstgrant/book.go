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
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/common/atomicfile"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/burstfile"
)

const (
	// ChunkBytes is the unit of grants: a grant is a whole number of
	// chunks, or the claim's whole room (limit - guarantee) when that is
	// less than a chunk more.
	ChunkBytes = uint64(256) << 20
	// DefaultPendingTTL is how long Admit holds the guarantee of a claim
	// that prepare has not added yet (the kubelet retries a prepare within
	// seconds; a claim it gave up on must not block bursts for ever).
	DefaultPendingTTL = 10 * time.Minute
	// fileMode lets the claim's containers read host/burst.
	fileMode = 0o644
)

// Errors of Grant, Shrink and Admit; they are wrapped with the numbers.
var (
	ErrUnknownClaim = errors.New("claim is not in the burst grant book")
	ErrNoShare      = errors.New("claim has no share of the GPU")
	ErrUnknownGPU   = errors.New("GPU memory not measured yet")
	ErrOverLimit    = errors.New("above the claim's memory limit")
	ErrNoRoom       = errors.New("not enough unbooked memory on the GPU")
	ErrReclaiming   = errors.New("the claim's burst is being reclaimed")
)

// Share is a claim's booking of one GPU.
type Share struct {
	// Guarantee is the memory the scheduler booked for the claim on the
	// GPU (the sum of its shares there), in bytes.
	Guarantee uint64
	// Limit is the most the claim may use there, at least Guarantee.
	Limit uint64
}

// room is how much the claim may be granted on the GPU.
func (s Share) room() uint64 { return s.Limit - s.Guarantee }

// Claim is a prepared claim as the book sees it.
type Claim struct {
	UID types.UID
	// Path is the claim's host/burst file; its directory exists.
	Path string
	// Priority ranks claims with equal grants for reclaim: the lowest
	// first (the priority of the claim's pods).
	Priority int32
	// Created ranks claims with equal grants and priority: the youngest
	// first.
	Created time.Time
	// Shares holds the claim's booking per GPU UUID.
	Shares map[string]Share
}

func (c *Claim) validate() error {
	if c.UID == "" || c.Path == "" {
		return fmt.Errorf("claim %q: UID and burst file path are required", c.UID)
	}
	if len(c.Shares) == 0 {
		return fmt.Errorf("claim %s: no GPU shares", c.UID)
	}
	for uuid, s := range c.Shares {
		if !burstfile.ValidUUID(uuid) {
			return fmt.Errorf("claim %s: %.64q is not a GPU UUID", c.UID, uuid)
		}
		if s.Limit < s.Guarantee || s.Limit > burstfile.MaxGrantBytes {
			return fmt.Errorf("claim %s, GPU %s: limit %d below the guarantee %d or beyond %d bytes", c.UID, uuid, s.Limit, s.Guarantee, burstfile.MaxGrantBytes)
		}
	}
	return nil
}

// Options configure a Book; zero values take the defaults.
type Options struct {
	// Clock stamps grants and pending admissions (default: the real clock).
	Clock clock.PassiveClock
	// PendingTTL defaults to DefaultPendingTTL.
	PendingTTL time.Duration
	// WriteFile replaces a host/burst file (default: atomically with
	// pkg/common/atomicfile, without fsync: a grant only matters to processes that
	// a power loss ends anyway, and a plugin crash loses no page cache).
	WriteFile func(path string, data []byte) error
	// ReadFile reads one (default os.ReadFile).
	ReadFile func(path string) ([]byte, error)
}

// Book is the book of burst grants of one node: the GPUs' measurements,
// the claims' guarantees and grants, and the guarantees waiting for room.
// It is safe for concurrent use.
type Book struct {
	mu      sync.Mutex
	opts    Options
	gpus    map[string]*gpuState
	claims  map[types.UID]*claimState
	pending map[types.UID]*pendingClaim
}

type gpuState struct {
	usable  uint64 // memory - driver reserve
	outside uint64 // use of processes no claim owns
	recent  uint64 // the part of outside that may be unattributed claims' use
}

type claimState struct {
	Claim
	grants    map[string]uint64
	grantedAt map[string]time.Time
	// reclaiming: Admit chose the claim to reclaim from; it may not grow
	// until its grants are back to zero (or CancelReclaim).
	reclaiming bool
}

type pendingClaim struct {
	guarantees map[string]uint64
	since      time.Time
}

// NewBook returns an empty book.
func NewBook(opts Options) *Book {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.PendingTTL == 0 {
		opts.PendingTTL = DefaultPendingTTL
	}
	if opts.WriteFile == nil {
		opts.WriteFile = func(path string, data []byte) error {
			return atomicfile.WriteFile(path, data, fileMode, atomicfile.Volatile)
		}
	}
	if opts.ReadFile == nil {
		opts.ReadFile = os.ReadFile
	}
	return &Book{opts: opts, gpus: map[string]*gpuState{}, claims: map[types.UID]*claimState{}, pending: map[types.UID]*pendingClaim{}}
}

// SetGPU records a GPU's memory and what the driver reserves of it
// (NVML's total and reserved memory), measured at each collection.
func (b *Book) SetGPU(uuid string, memory, reserved uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	g := b.gpu(uuid)
	g.usable = 0
	if reserved < memory {
		g.usable = memory - reserved
	}
}

// SetOutsideUse records the memory that processes no claim owns use on a
// GPU (NVML per-process use of the pids of no claim's host/pids), and how
// much of it is recent: used by processes first seen outside claims only
// lately, which may be claims' new processes that the host pid mapper has
// not attributed yet, their memory then already booked as their claims'.
// All of it counts against grants at once; only the part that is not
// recent makes Admit reclaim burst for a new guarantee (the monitor's side
// waits as long before reclaiming for overhead).
func (b *Book) SetOutsideUse(uuid string, bytes, recent uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	g := b.gpu(uuid)
	g.outside = bytes
	g.recent = min(recent, bytes)
}

func (b *Book) gpu(uuid string) *gpuState {
	g := b.gpus[uuid]
	if g == nil {
		g = &gpuState{}
		b.gpus[uuid] = g
	}
	return g
}

// AddClaim records a claim that prepare admitted, with no grants, and
// drops its pending admission.
func (b *Book) AddClaim(c Claim) error {
	if err := c.validate(); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.claims[c.UID]; ok {
		return fmt.Errorf("claim %s is already in the burst grant book", c.UID)
	}
	b.claims[c.UID] = newClaimState(c)
	delete(b.pending, c.UID)
	return nil
}

func newClaimState(c Claim) *claimState {
	c.Shares = maps.Clone(c.Shares)
	return &claimState{Claim: c, grants: map[string]uint64{}, grantedAt: map[string]time.Time{}}
}

// RemoveClaim forgets an unprepared claim: its guarantees and grants are
// free again. Its file goes with the claim directory.
func (b *Book) RemoveClaim(uid types.UID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.claims, uid)
	delete(b.pending, uid)
}

// CancelReclaim lets a claim chosen by Admit grow again (its eviction was
// refused, e.g. by a PodDisruptionBudget).
func (b *Book) CancelReclaim(uid types.UID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if c := b.claims[uid]; c != nil {
		c.reclaiming = false
	}
}

// Grants returns a copy of a claim's grants by GPU UUID (nil when the
// claim is not in the book).
func (b *Book) Grants(uid types.UID) map[string]uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.claims[uid]
	if c == nil {
		return nil
	}
	return maps.Clone(c.grants)
}

// HoldsBurst reports whether a claim holds a grant on any GPU (false when
// the claim is not in the book).
func (b *Book) HoldsBurst(uid types.UID) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.claims[uid]
	return c != nil && !allZero(c.grants)
}

// Booked returns what the book counts against a GPU (guarantees and
// grants of the claims, pending guarantees, use outside claims) and the
// GPU's usable memory.
func (b *Book) Booked(uuid string) (booked, usable uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if g := b.gpus[uuid]; g != nil {
		usable = g.usable
	}
	return b.booked(uuid, ""), usable
}

// booked sums what counts against a GPU, without the pending admission of
// except.
func (b *Book) booked(uuid string, except types.UID) uint64 {
	var sum uint64
	if g := b.gpus[uuid]; g != nil {
		sum = g.outside
	}
	for _, c := range b.claims {
		if s, ok := c.Shares[uuid]; ok {
			sum += s.Guarantee + c.grants[uuid]
		}
	}
	now := b.opts.Clock.Now()
	for uid, p := range b.pending {
		if now.Sub(p.since) > b.opts.PendingTTL {
			delete(b.pending, uid)
			continue
		}
		if uid != except {
			sum += p.guarantees[uuid]
		}
	}
	return sum
}

// lookup returns the claim, its share of the GPU and the GPU.
func (b *Book) lookup(uid types.UID, uuid string) (*claimState, Share, *gpuState, error) {
	c := b.claims[uid]
	if c == nil {
		return nil, Share{}, nil, fmt.Errorf("claim %s: %w", uid, ErrUnknownClaim)
	}
	s, ok := c.Shares[uuid]
	if !ok {
		return nil, Share{}, nil, fmt.Errorf("claim %s, GPU %s: %w", uid, uuid, ErrNoShare)
	}
	g := b.gpus[uuid]
	if g == nil {
		return nil, Share{}, nil, fmt.Errorf("GPU %s: %w", uuid, ErrUnknownGPU)
	}
	return c, s, g, nil
}

// Grant raises a claim's grant on a GPU to at least need bytes above its
// guarantee (rounded up to whole chunks, but never beyond its limit) and
// returns the grant. It refuses a need beyond the limit, a claim being
// reclaimed, and a grant that does not fit the GPU's usable memory next to
// everything else booked there. The new grant is in the claim's file
// before Grant returns. A need within the current grant changes nothing.
//
// If the file cannot be written, Grant fails but keeps the new grant
// counted (the file may show it) until Shrink lowers it.
func (b *Book) Grant(uid types.UID, uuid string, need uint64) (uint64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	c, s, g, err := b.lookup(uid, uuid)
	if err != nil {
		return 0, err
	}
	have := c.grants[uuid]
	if need <= have {
		return have, nil
	}
	if need > s.room() {
		return have, fmt.Errorf("claim %s, GPU %s: %d bytes above the guarantee of %d, limit %d: %w", uid, uuid, need, s.Guarantee, s.Limit, ErrOverLimit)
	}
	if c.reclaiming {
		return have, fmt.Errorf("claim %s, GPU %s: %w", uid, uuid, ErrReclaiming)
	}
	want := min(chunks(need), s.room())
	if booked := b.booked(uuid, ""); booked+(want-have) > g.usable {
		return have, fmt.Errorf("claim %s, GPU %s: %d more bytes with %d booked of %d usable: %w", uid, uuid, want-have, booked, g.usable, ErrNoRoom)
	}
	c.grants[uuid] = want
	c.grantedAt[uuid] = b.opts.Clock.Now()
	if err := b.write(c); err != nil {
		return have, fmt.Errorf("claim %s: grant %d bytes on GPU %s: %w", uid, want, uuid, err)
	}
	return want, nil
}

// Shrink lowers a claim's grant on a GPU towards what it physically uses
// above its guarantee, in whole chunks: use is the memory its processes
// use on the GPU, measured at sampledAt (NVML's per-process use of the
// claim's host pids; the caller may pass the larger of that and what the
// claim's region reserves, which a container can raise only to keep its
// own grant). A grant made at or after sampledAt is kept: the sample may
// predate the allocation it was made for. Shrink never raises a grant.
//
// The lower grant is in the file before the memory counts as free; if the
// file cannot be written the grant stays. Then, still under the book's
// lock, recheck (may be nil) is asked again for the claim's use (the
// region's reservation, which the library raises before it re-reads the
// file): if that is above the lowered limit, the grant is raised back
// towards it, at most to where it was, so that an allocation racing the
// shrink keeps its memory. A claim being reclaimed may grow again once its
// grants are all zero.
func (b *Book) Shrink(uid types.UID, uuid string, use uint64, sampledAt time.Time, recheck func() uint64) (uint64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	c, s, _, err := b.lookup(uid, uuid)
	if err != nil {
		return 0, err
	}
	have := c.grants[uuid]
	if have == 0 || !sampledAt.After(c.grantedAt[uuid]) {
		return have, nil
	}
	target := s.burstOf(use)
	if target >= have {
		return have, nil
	}
	c.grants[uuid] = target
	if err := b.write(c); err != nil {
		c.grants[uuid] = have
		return have, fmt.Errorf("claim %s: shrink the grant on GPU %s to %d bytes: %w", uid, uuid, target, err)
	}
	if recheck != nil {
		if again := min(s.burstOf(recheck()), have); again > target {
			// The memory was never free for anyone else: the lock is held.
			c.grants[uuid] = again
			if err := b.write(c); err != nil {
				return again, fmt.Errorf("claim %s: restore the grant on GPU %s to %d bytes: %w", uid, uuid, again, err)
			}
			return again, nil
		}
	}
	if c.reclaiming && allZero(c.grants) {
		c.reclaiming = false
	}
	return target, nil
}

// burstOf is the grant that use needs on the share: whole chunks above the
// guarantee, at most the room.
func (s Share) burstOf(use uint64) uint64 {
	if use <= s.Guarantee {
		return 0
	}
	return min(chunks(min(use-s.Guarantee, burstfile.MaxGrantBytes)), s.room())
}

func allZero(m map[string]uint64) bool {
	for _, v := range m {
		if v != 0 {
			return false
		}
	}
	return true
}

// Decision is Admit's answer.
type Decision struct {
	// Fits is true when the claim's guarantee fits on each of its GPUs now.
	Fits bool
	// Reclaim lists the claims to reclaim burst from (evict), in order,
	// enough to make the guarantees fit where grants can.
	Reclaim []types.UID
	// Short holds, per GPU, what would still be missing after reclaiming
	// every grant there: memory booked twice or used outside claims, which
	// reclaiming burst cannot free.
	Short map[string]uint64
}

// Admit decides whether a claim about to be prepared fits: on each of its
// GPUs, whether everything booked there plus its guarantee is within the
// GPU's usable memory (recent outside use left out, SetOutsideUse). Until AddClaim (or PendingTTL after the last
// Admit), its guarantees count as booked, so that no burst grows into the
// memory being made room for. Where it does not fit, Admit chooses the
// claims to reclaim from: the largest grant on that GPU first; ties: lower
// Priority first, then the youngest. Those claims may not grow until their
// grants are back to zero. Admit evicts nothing.
func (b *Book) Admit(c Claim) (Decision, error) {
	if err := c.validate(); err != nil {
		return Decision{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.claims[c.UID]; ok {
		return Decision{Fits: true}, nil
	}
	d := Decision{Fits: true}
	chosen := map[types.UID]bool{}
	for _, uuid := range slices.Sorted(maps.Keys(c.Shares)) {
		g := b.gpus[uuid]
		if g == nil {
			return Decision{}, fmt.Errorf("GPU %s: %w", uuid, ErrUnknownGPU)
		}
		if short := b.shortfall(g, uuid, c.UID, c.Shares[uuid].Guarantee); short > 0 {
			b.choose(uuid, short, chosen, &d)
		}
	}
	guarantees := map[string]uint64{}
	for uuid, s := range c.Shares {
		guarantees[uuid] = s.Guarantee
	}
	b.pending[c.UID] = &pendingClaim{guarantees: guarantees, since: b.opts.Clock.Now()}
	return d, nil
}

// Admitted reports, without changing anything, whether Admit would now let
// a claim that it left pending go ahead: on each of its GPUs its guarantee
// fits next to everything else booked there, or no grant is left there to
// reclaim (what remains missing is memory reclaiming cannot free, which
// Admit reports as Short and prepare does not wait for). A claim that is
// not pending (added, removed, or its admission expired) reports true:
// Admit decides it afresh.
func (b *Book) Admitted(uid types.UID) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.pending[uid]
	if p == nil || b.opts.Clock.Now().Sub(p.since) > b.opts.PendingTTL {
		return true
	}
	for uuid, guarantee := range p.guarantees {
		if g := b.gpus[uuid]; g != nil && b.shortfall(g, uuid, uid, guarantee) > 0 && len(b.victims(uuid)) > 0 {
			return false
		}
	}
	return true
}

// Shortfall is what the guarantee of a claim that Admit left pending
// misses on a GPU now, as Admit and Admitted decide it: next to everything
// else booked there, recent outside use left out. 0 when it fits, or the
// claim is not pending there.
func (b *Book) Shortfall(uid types.UID, uuid string) uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	p, g := b.pending[uid], b.gpus[uuid]
	if p == nil || g == nil {
		return 0
	}
	guarantee, ok := p.guarantees[uuid]
	if !ok {
		return 0
	}
	return b.shortfall(g, uuid, uid, guarantee)
}

// shortfall is what a guarantee of claim uid misses on a GPU next to
// everything else booked there, recent outside use left out
// (SetOutsideUse).
func (b *Book) shortfall(g *gpuState, uuid string, uid types.UID, guarantee uint64) uint64 {
	total := b.booked(uuid, uid) + guarantee - g.recent
	if total <= g.usable {
		return 0
	}
	return total - g.usable
}

// Reclaim decides what to reclaim on a GPU where what is booked exceeds
// the usable memory although no claim was added: driver overhead or use
// outside claims that appeared after the bookings (SetGPU,
// SetOutsideUse). It chooses as Admit does; Fits is true when nothing
// needs reclaiming.
func (b *Book) Reclaim(uuid string) (Decision, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	g := b.gpus[uuid]
	if g == nil {
		return Decision{}, fmt.Errorf("GPU %s: %w", uuid, ErrUnknownGPU)
	}
	d := Decision{Fits: true}
	if booked := b.booked(uuid, ""); booked > g.usable {
		b.choose(uuid, booked-g.usable, map[types.UID]bool{}, &d)
	}
	return d, nil
}

// choose adds to d the claims whose grants on the GPU free deficit bytes,
// in reclaim order, and marks them reclaiming; what they cannot free goes
// to d.Short.
func (b *Book) choose(uuid string, deficit uint64, chosen map[types.UID]bool, d *Decision) {
	d.Fits = false
	for _, v := range b.victims(uuid) {
		if deficit == 0 {
			break
		}
		deficit -= min(deficit, v.grants[uuid])
		v.reclaiming = true
		if !chosen[v.UID] {
			chosen[v.UID] = true
			d.Reclaim = append(d.Reclaim, v.UID)
		}
	}
	if deficit > 0 {
		if d.Short == nil {
			d.Short = map[string]uint64{}
		}
		d.Short[uuid] = deficit
	}
}

// victims returns the claims with a grant on the GPU in reclaim order.
func (b *Book) victims(uuid string) []*claimState {
	var out []*claimState
	for _, c := range b.claims {
		if c.grants[uuid] > 0 {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b *claimState) int {
		return cmp.Or(
			cmp.Compare(b.grants[uuid], a.grants[uuid]),
			cmp.Compare(a.Priority, b.Priority),
			b.Created.Compare(a.Created),
			cmp.Compare(a.UID, b.UID),
		)
	})
	return out
}

// Rebuild replaces the claims of the book (not the GPUs' measurements)
// with the prepared claims and the grants their files hold, after a
// restart. A missing file is no grant. A file that does not parse counts
// as the claim's whole room on each GPU (an earlier version may have
// granted it; Shrink brings it down to physical use). Grants for GPUs the
// claim has no share of are ignored; grants beyond the room are kept as
// the file shows them (the library may use them) until Shrink. Every such
// problem is returned, joined, after the book is rebuilt; a claim that
// is invalid or listed twice is left out.
func (b *Book) Rebuild(claims []Claim) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.claims = map[types.UID]*claimState{}
	b.pending = map[types.UID]*pendingClaim{}
	now := b.opts.Clock.Now()
	var errs []error
	for _, c := range claims {
		if err := c.validate(); err != nil {
			errs = append(errs, err)
			continue
		}
		if _, dup := b.claims[c.UID]; dup {
			errs = append(errs, fmt.Errorf("claim %s listed twice", c.UID))
			continue
		}
		st := newClaimState(c)
		b.claims[c.UID] = st
		data, err := b.opts.ReadFile(c.Path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		var grants map[string]uint64
		if err == nil {
			grants, err = burstfile.Parse(data)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("claim %s: %w; counting its whole room as granted", c.UID, err))
			grants = map[string]uint64{}
			for uuid, s := range c.Shares {
				grants[uuid] = s.room()
			}
		}
		for uuid, v := range grants {
			s, ok := c.Shares[uuid]
			switch {
			case !ok:
				errs = append(errs, fmt.Errorf("claim %s: grant for GPU %s, which the claim has no share of, ignored", c.UID, uuid))
				continue
			case v > s.room():
				errs = append(errs, fmt.Errorf("claim %s, GPU %s: grant %d beyond the room %d", c.UID, uuid, v, s.room()))
			}
			if v > 0 {
				st.grants[uuid] = v
				st.grantedAt[uuid] = now
			}
		}
	}
	return errors.Join(errs...)
}

// write replaces the claim's file with its grants on every GPU it has a
// share of.
func (b *Book) write(c *claimState) error {
	grants := map[string]uint64{}
	for uuid := range c.Shares {
		grants[uuid] = c.grants[uuid]
	}
	return b.opts.WriteFile(c.Path, burstfile.Render(grants))
}

// chunks rounds n up to whole chunks; n is at most burstfile.MaxGrantBytes.
func chunks(n uint64) uint64 {
	return (n + ChunkBytes - 1) / ChunkBytes * ChunkBytes
}
