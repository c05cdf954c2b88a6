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

package burstnode

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	api "github.com/vgpu-dra/vgpu-dra-driver/api/vgpu.dra.dev/v1alpha1"
	pidmap "github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/hostpids"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/region"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/burstgrant"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/hostpids"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/monitor"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/prepare"
)

// DefaultReclaimGracePeriod is the grace period passed to the Reclaimer
// (reclaimGracePeriodSeconds' default).
const DefaultReclaimGracePeriod = 30 * time.Second

// DefaultOverheadSettle is how long a GPU must stay over its memory from
// overhead (driver reserve, use outside claims) before Observe reclaims
// burst for it: longer than the host pid mapper takes to attribute a new
// process of a claim (pkg/hostpids: every second, a process not found
// looked for again after 10 s), during which NVML's use of that process
// counts as outside claims on top of its claim's booking.
const DefaultOverheadSettle = 15 * time.Second

// ClaimRef names a claim for the Reclaimer.
type ClaimRef struct {
	Namespace, Name string
	UID             types.UID
}

func (r ClaimRef) String() string { return r.Namespace + "/" + r.Name + " (" + string(r.UID) + ")" }

// Reclaimer gives burst back: it evicts the pods of the claims in from so
// that needing (empty when driver overhead or use outside claims grew)
// gets bytes on the GPU, with the grace period.
type Reclaimer interface {
	Reclaim(ctx context.Context, needing ClaimRef, from []ClaimRef, gpuUUID string, bytes uint64, grace time.Duration) error
}

// Shorter is what a Reclaimer may also offer: telling the claim that waits
// that memory is missing for its guarantee which reclaiming burst cannot
// free (booked twice, or used outside claims: burstgrant.Decision.Short).
type Shorter interface {
	Short(ctx context.Context, needing ClaimRef, gpuUUID string, bytes uint64)
}

// Canceler is what a Reclaimer may also offer: forgetting a claim that
// is gone (unprepared), so that nothing retries evicting its pods.
type Canceler interface {
	Cancel(uid types.UID)
}

// LogReclaimer only logs what it would reclaim: the default until an
// evicting Reclaimer is wired in.
type LogReclaimer struct{}

// Reclaim logs the decision.
func (LogReclaimer) Reclaim(ctx context.Context, needing ClaimRef, from []ClaimRef, gpuUUID string, bytes uint64, grace time.Duration) error {
	klog.FromContext(ctx).Info("Burst memory must be reclaimed; no evicting reclaimer is configured, waiting for the claims to give it back",
		"needing", needing.String(), "from", from, "gpu", gpuUUID, "bytes", bytes, "grace", grace)
	return nil
}

// Options configure a Node; zero values take the defaults.
type Options struct {
	// Book defaults to a new one with its defaults.
	Book *burstgrant.Book
	// Reclaimer defaults to LogReclaimer.
	Reclaimer Reclaimer
	// Registry, when set, receives the metrics.
	Registry prometheus.Registerer
	// Grace is passed to the Reclaimer (default DefaultReclaimGracePeriod).
	Grace time.Duration
	// ReadTimeout bounds the wait for a request (default DefaultReadTimeout).
	ReadTimeout time.Duration
	// MaxConnections per claim (default DefaultMaxConnections).
	MaxConnections int
	// AskRate and AskBurst are each claim's token bucket of asks (default
	// DefaultAskRate and DefaultAskBurst); asks beyond it are refused.
	AskRate  rate.Limit
	AskBurst int
	// Clock stamps admissions (default the real clock).
	Clock clock.PassiveClock
	// OverheadSettle is how long overhead must keep a GPU over its memory
	// before burst is reclaimed for it (default DefaultOverheadSettle).
	OverheadSettle time.Duration
	// ProcRoot is the host's /proc: processes' cgroups and liveness
	// (default /proc).
	ProcRoot string
}

// Node is the burst side of one node's plugin: the Book, one socket
// server per prepared claim with burst room, and the hooks the claims
// manager and the monitor call. It implements prepare.BurstHooks.
type Node struct {
	opts    Options
	book    *burstgrant.Book
	metrics *metrics

	mu      sync.Mutex
	started bool
	closed  bool
	ctx     context.Context
	refs    map[types.UID]ClaimRef
	graces  map[types.UID]time.Duration
	rooms   map[types.UID]map[string]uint64
	servers map[types.UID]*server
	// reclaiming holds the claims already handed to the Reclaimer.
	reclaiming map[types.UID]bool
	// overSince is, per GPU, the first collection of the run of
	// collections in which the GPU did not fit (Observe's reclaim).
	overSince map[string]time.Time
	// outsideSince is, per GPU, when each process using it outside
	// claims was first seen so (recent outside use, Book.SetOutsideUse).
	outsideSince map[string]map[uint32]time.Time
}

var _ prepare.BurstHooks = &Node{}

// New returns a Node; call Start after the claims manager's recovery.
func New(opts Options) (*Node, error) {
	if opts.Book == nil {
		opts.Book = burstgrant.NewBook(burstgrant.Options{})
	}
	if opts.Reclaimer == nil {
		opts.Reclaimer = LogReclaimer{}
	}
	if opts.Grace == 0 {
		opts.Grace = DefaultReclaimGracePeriod
	}
	if opts.ReadTimeout == 0 {
		opts.ReadTimeout = DefaultReadTimeout
	}
	if opts.MaxConnections == 0 {
		opts.MaxConnections = DefaultMaxConnections
	}
	if opts.AskRate == 0 {
		opts.AskRate = DefaultAskRate
	}
	if opts.AskBurst == 0 {
		opts.AskBurst = DefaultAskBurst
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.OverheadSettle == 0 {
		opts.OverheadSettle = DefaultOverheadSettle
	}
	if opts.ProcRoot == "" {
		opts.ProcRoot = "/proc"
	}
	n := &Node{overSince: map[string]time.Time{}, outsideSince: map[string]map[uint32]time.Time{}, opts: opts, book: opts.Book, ctx: context.Background(),
		refs: map[types.UID]ClaimRef{}, graces: map[types.UID]time.Duration{}, rooms: map[types.UID]map[string]uint64{},
		servers: map[types.UID]*server{}, reclaiming: map[types.UID]bool{}}
	n.metrics = newMetrics(n)
	if opts.Registry != nil {
		if err := n.metrics.register(opts.Registry); err != nil {
			return nil, err
		}
	}
	return n, nil
}

// Book is the node's book of burst grants.
func (n *Node) Book() *burstgrant.Book { return n.book }

// bookClaim is the claim as the book sees it: its GPUs outside MIG
// instances (an instance's memory is its own), by UUID.
func (n *Node) bookClaim(c *prepare.PreparedClaim) (burstgrant.Claim, map[string]uint64) {
	out := burstgrant.Claim{UID: c.UID, Path: c.BurstPath, Created: n.opts.Clock.Now(), Shares: map[string]burstgrant.Share{}}
	if c.Settings.Priority == api.PriorityHigh {
		out.Priority = 1
	}
	rooms := map[string]uint64{}
	for _, g := range c.GPUs {
		if g.MIG != nil {
			continue
		}
		out.Shares[g.UUID] = burstgrant.Share{Guarantee: g.MemoryLimitBytes, Limit: g.Ceiling()}
		rooms[g.UUID] = g.Ceiling() - g.MemoryLimitBytes
	}
	return out, rooms
}

// Start rebuilds the book from the prepared claims (the checkpoint's,
// after the claims manager's recovery) and the grants their files hold,
// and serves the socket of each claim with burst room. Problems with
// single claims are logged; the node keeps serving the others.
func (n *Node) Start(ctx context.Context, prepared []prepare.PreparedClaim) error {
	logger := klog.FromContext(ctx)
	var list []burstgrant.Claim
	n.mu.Lock()
	defer n.mu.Unlock()
	n.ctx = ctx
	for i := range prepared {
		c := &prepared[i]
		lc, rooms := n.bookClaim(c)
		if len(lc.Shares) == 0 {
			continue
		}
		list = append(list, lc)
		n.rememberLocked(c, rooms)
	}
	if err := n.book.Rebuild(list); err != nil {
		logger.Error(err, "Rebuilding the burst grants found problems; the grants in question count as the files show them or as the claims' whole room until the monitor brings them down")
	}
	n.started = true
	for i := range prepared {
		if err := n.serveLocked(ctx, &prepared[i]); err != nil {
			logger.Error(err, "Cannot serve the burst socket of a recovered claim; it is held to its grant", "claimUID", prepared[i].UID)
		}
	}
	return nil
}

// rememberLocked records what the node needs of a claim in the book:
// its name for Events and its pods' grace period when its burst is
// reclaimed (the claim's own classes' reclaimGracePeriodSeconds; the
// default where the checkpoint predates it).
func (n *Node) rememberLocked(c *prepare.PreparedClaim, rooms map[string]uint64) {
	n.refs[c.UID] = ClaimRef{Namespace: c.Namespace, Name: c.Name, UID: c.UID}
	n.rooms[c.UID] = rooms
	n.graces[c.UID] = n.opts.Grace
	if c.ReclaimGracePeriodSeconds > 0 {
		n.graces[c.UID] = time.Duration(c.ReclaimGracePeriodSeconds) * time.Second
	}
}

// graceOf is the grace period of a claim's pods (the default for a claim
// the node does not know).
func (n *Node) graceOf(uid types.UID) time.Duration {
	n.mu.Lock()
	defer n.mu.Unlock()
	if g, ok := n.graces[uid]; ok {
		return g
	}
	return n.opts.Grace
}

// serveLocked starts the claim's socket server if it has burst room and
// none runs.
func (n *Node) serveLocked(ctx context.Context, c *prepare.PreparedClaim) error {
	if n.closed || !c.HasBurstRoom() || n.servers[c.UID] != nil || c.BurstSocketPath == "" {
		return nil
	}
	if _, ok := n.refs[c.UID]; !ok {
		return nil
	}
	s, err := newServer(c.UID, c.BurstSocketPath, n, klog.FromContext(ctx), n.opts.ReadTimeout, n.opts.MaxConnections,
		rate.NewLimiter(n.opts.AskRate, n.opts.AskBurst))
	if err != nil {
		return fmt.Errorf("claim %s: %w", c.UID, err)
	}
	n.servers[c.UID] = s
	return nil
}

// AdmitClaim decides, before any file of a claim not prepared yet, whether
// its guarantees fit next to the node's bookings and grants. Where they do
// not, it hands the claims chosen to reclaim from to the Reclaimer and
// fails with prepare.ErrWaitingForMemory, naming the wait and the claims. A GPU
// not measured yet, and memory that reclaiming burst cannot free, do not
// fail it (the scheduler's booking holds; the latter is logged).
func (n *Node) AdmitClaim(ctx context.Context, c *prepare.PreparedClaim) error {
	logger := klog.FromContext(ctx)
	lc, _ := n.bookClaim(c)
	if len(lc.Shares) == 0 {
		return nil
	}
	d, err := n.book.Admit(lc)
	if errors.Is(err, burstgrant.ErrUnknownGPU) {
		logger.V(2).Info("GPU memory not measured yet; admitting the claim on the scheduler's booking", "err", err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("burst admission: %w", err)
	}
	if d.Fits {
		return nil
	}
	needing := ClaimRef{Namespace: c.Namespace, Name: c.Name, UID: c.UID}
	for uuid, short := range d.Short {
		logger.Info("Memory that reclaiming burst cannot free is missing for the claim's guarantee (booked twice or used outside claims)", "gpu", uuid, "bytes", short)
		if s, ok := n.opts.Reclaimer.(Shorter); ok {
			s.Short(ctx, needing, uuid, short)
		}
	}
	if len(d.Reclaim) == 0 {
		return nil
	}
	var waits []string
	var grace time.Duration
	for _, uuid := range slices.Sorted(func(yield func(string) bool) {
		for u := range lc.Shares {
			if !yield(u) {
				return
			}
		}
	}) {
		// What the decision uses: the claim's guarantee (pending since
		// Admit) next to everything booked, recent outside use left out.
		short := n.book.Shortfall(c.UID, uuid)
		if short == 0 {
			continue
		}
		from := n.victims(d.Reclaim, uuid)
		if len(from) == 0 {
			continue
		}
		n.reclaim(ctx, needing, from, uuid, short)
		names := make([]string, len(from))
		for i, r := range from {
			names[i] = r.String()
			grace = max(grace, n.graceOf(r.UID))
		}
		waits = append(waits, fmt.Sprintf("%d bytes on GPU %s from %s", short, uuid, strings.Join(names, ", ")))
	}
	return fmt.Errorf("%w (grace period %s): %s", prepare.ErrWaitingForMemory, grace, strings.Join(waits, "; "))
}

// admissionPoll is how often WaitForMemory looks at the book: the
// monitor's collections and unprepares change it, each at most a few
// times a second.
const admissionPoll = 200 * time.Millisecond

// WaitForMemory waits until a claim that AdmitClaim made wait would now be
// admitted (burstgrant.Book.Admitted), or ctx ends; it reports which.
func (n *Node) WaitForMemory(ctx context.Context, uid types.UID) bool {
	err := wait.PollUntilContextCancel(ctx, admissionPoll, true, func(context.Context) (bool, error) {
		return n.book.Admitted(uid), nil
	})
	return err == nil
}

// victims are the claims of chosen with a grant on the GPU.
func (n *Node) victims(chosen []types.UID, uuid string) []ClaimRef {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []ClaimRef
	for _, uid := range chosen {
		if n.book.Grants(uid)[uuid] == 0 {
			continue
		}
		ref, ok := n.refs[uid]
		if !ok {
			ref = ClaimRef{UID: uid}
		}
		out = append(out, ref)
	}
	return out
}

// reclaim hands the claims not handed over yet to the Reclaimer.
func (n *Node) reclaim(ctx context.Context, needing ClaimRef, from []ClaimRef, uuid string, bytes uint64) {
	n.mu.Lock()
	var fresh []ClaimRef
	for _, r := range from {
		if !n.reclaiming[r.UID] {
			n.reclaiming[r.UID] = true
			fresh = append(fresh, r)
		}
	}
	n.mu.Unlock()
	if len(fresh) == 0 {
		return
	}
	n.metrics.reclaims.WithLabelValues(uuid).Add(float64(len(fresh)))
	// One call per claim: each goes with its own pods' grace period.
	for _, r := range fresh {
		if err := n.opts.Reclaimer.Reclaim(ctx, needing, []ClaimRef{r}, uuid, bytes, n.graceOf(r.UID)); err != nil {
			klog.FromContext(ctx).Error(err, "Reclaiming burst failed", "needing", needing.String(), "from", r.String(), "gpu", uuid)
			n.mu.Lock()
			delete(n.reclaiming, r.UID)
			n.mu.Unlock()
		}
	}
}

// EnsureClaim records a claim being prepared (or restored) in the book
// and serves its burst socket when it has burst room; it runs after the
// claim's files and before its CDI spec. Before Start (recovery) it does
// nothing: Start rebuilds every prepared claim.
func (n *Node) EnsureClaim(ctx context.Context, c *prepare.PreparedClaim) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.started {
		return nil
	}
	if _, ok := n.refs[c.UID]; !ok {
		lc, rooms := n.bookClaim(c)
		if len(lc.Shares) == 0 {
			return nil
		}
		if err := n.book.AddClaim(lc); err != nil {
			return fmt.Errorf("burst book: %w", err)
		}
		n.rememberLocked(c, rooms)
	}
	return n.serveLocked(ctx, c)
}

// ReclaimFailed is told by the Reclaimer that evicting a claim's pods was
// refused (a PodDisruptionBudget) or failed: the claim may grow again
// (Book.CancelReclaim), and the next decision that chooses it hands it to
// the Reclaimer again.
func (n *Node) ReclaimFailed(uid types.UID) {
	n.mu.Lock()
	delete(n.reclaiming, uid)
	n.mu.Unlock()
	n.book.CancelReclaim(uid)
}

// ReleaseClaim forgets an unprepared (or rolled back) claim: its socket is
// closed and removed, its guarantees and grants are free.
func (n *Node) ReleaseClaim(_ context.Context, uid types.UID) {
	n.mu.Lock()
	s := n.servers[uid]
	delete(n.servers, uid)
	delete(n.refs, uid)
	delete(n.graces, uid)
	delete(n.rooms, uid)
	delete(n.reclaiming, uid)
	n.mu.Unlock()
	if s != nil {
		s.close()
	}
	if c, ok := n.opts.Reclaimer.(Canceler); ok {
		c.Cancel(uid)
	}
	n.book.RemoveClaim(uid)
}

// Close stops every socket server (the files are removed; a restarted
// plugin serves them again).
func (n *Node) Close() {
	n.mu.Lock()
	n.closed = true
	servers := n.servers
	n.servers = map[types.UID]*server{}
	n.mu.Unlock()
	for _, s := range servers {
		s.close()
	}
}

func (n *Node) grant(uid types.UID, uuid string, need uint64) (uint64, error) {
	return n.book.Grant(uid, uuid, need)
}

func (n *Node) room(uid types.UID, uuid string) (uint64, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	r, ok := n.rooms[uid][uuid]
	return r, ok
}

func (n *Node) refused(reason string) { n.metrics.refusals.WithLabelValues(reason).Inc() }

// Observe applies one monitor collection: each GPU's memory and driver
// reserve, the use of processes no claim owns (owners), Shrink of every
// grant towards the claim's use (the larger of NVML's use by its processes
// and its region's reservation less dead processes' slots; the recheck
// re-reads the region), then Reclaim on each GPU.
func (n *Node) Observe(ctx context.Context, col monitor.Collection) {
	logger := klog.FromContext(ctx)
	at := col.At
	if at.IsZero() {
		at = n.opts.Clock.Now()
	}
	owners := n.owners(col)
	for uuid, g := range col.GPUs {
		n.book.SetGPU(uuid, g.TotalBytes, g.ReservedBytes)
		if g.Processes == nil {
			continue
		}
		outside, recent := n.outsideUse(uuid, g.Processes, owners[uuid], at)
		n.book.SetOutsideUse(uuid, outside, recent)
	}
	for _, cr := range col.Claims {
		c := cr.Claim
		grants := n.book.Grants(c.UID)
		for uuid, have := range grants {
			if have == 0 {
				continue
			}
			g, measured := col.GPUs[uuid]
			if !measured || g.Processes == nil {
				continue // no physical truth this time
			}
			var use uint64
			for pid, b := range g.Processes {
				if slices.Contains(owners[uuid][pid], c.UID) {
					use += b
				}
			}
			use = max(use, cr.Reserved[uuid])
			claim, gpuUUID := c, uuid
			if _, err := n.book.Shrink(c.UID, uuid, use, col.At, func() uint64 { return n.regionReservation(claim, gpuUUID) }); err != nil {
				logger.Error(err, "Shrinking a burst grant failed", "claimUID", c.UID, "gpu", uuid)
			}
		}
		if len(grants) > 0 && !n.book.HoldsBurst(c.UID) {
			n.mu.Lock()
			delete(n.reclaiming, c.UID)
			n.mu.Unlock()
		}
	}
	for _, uuid := range slices.Sorted(func(yield func(string) bool) {
		for u := range col.GPUs {
			if !yield(u) {
				return
			}
		}
	}) {
		// Only overhead that lasts evicts: a claim's new process counts
		// as outside claims until the host pid mapper attributes it.
		// Booked is what Reclaim compares, without its side effect
		// (the claims it chooses may not grow).
		if booked, usable := n.book.Booked(uuid); booked <= usable {
			n.setOverSince(uuid, time.Time{})
			continue
		} else {
			if since := n.setOverSince(uuid, at); at.Sub(since) < n.opts.OverheadSettle {
				logger.V(2).Info("GPU over its memory; reclaiming burst if it lasts", "gpu", uuid, "bytes", booked-usable, "since", since, "settle", n.opts.OverheadSettle)
				continue
			}
		}
		d, err := n.book.Reclaim(uuid)
		if err != nil || d.Fits {
			n.setOverSince(uuid, time.Time{})
			continue
		}
		booked, usable := n.book.Booked(uuid)
		if from := n.victims(d.Reclaim, uuid); len(from) > 0 && booked > usable {
			n.reclaim(ctx, ClaimRef{}, from, uuid, booked-usable)
		}
		if short := d.Short[uuid]; short > 0 {
			logger.V(2).Info("More memory is booked or used outside claims than the GPU has; reclaiming burst cannot free it", "gpu", uuid, "bytes", short)
		}
	}
}

// owners attributes each GPU's NVML processes to claims, per GPU UUID and
// host pid. The pod's cgroup (/proc/<pid>/cgroup on the host), which no
// container can rewrite, comes first: a process of a pod that holds claims
// with a share of the GPU is theirs (the one of them whose host/pids lists
// it, else all of them: the pod's own use, never outside claims). Only a
// process in no such pod is attributed by the claims' host/pids, which the
// host pid mapper resolves from region slots. A process of neither has no
// owner: use outside claims.
func (n *Node) owners(col monitor.Collection) map[string]map[uint32][]types.UID {
	byPIDs := map[uint32]types.UID{}
	byPod := map[types.UID][]types.UID{}
	shares := map[types.UID]map[string]bool{}
	for _, cr := range col.Claims {
		// A map that is missing or malformed attributes nothing, as in the library.
		entries, _ := pidmap.ReadFile(cr.Claim.HostPIDsPath)
		for _, e := range entries {
			byPIDs[e.HostPID] = cr.Claim.UID
		}
		for _, pod := range cr.Pods {
			byPod[pod] = append(byPod[pod], cr.Claim.UID)
		}
		shares[cr.Claim.UID] = map[string]bool{}
		for _, g := range cr.Claim.GPUs {
			if g.MIG == nil {
				shares[cr.Claim.UID][g.UUID] = true
			}
		}
	}
	pods := map[uint32]types.UID{}
	out := make(map[string]map[uint32][]types.UID, len(col.GPUs))
	for uuid, g := range col.GPUs {
		out[uuid] = make(map[uint32][]types.UID, len(g.Processes))
		for pid := range g.Processes {
			pod, known := pods[pid]
			if !known && len(byPod) > 0 {
				pod, _ = hostpids.PodUID(n.opts.ProcRoot, pid)
				pods[pid] = pod
			}
			var theirs []types.UID
			for _, c := range byPod[pod] {
				if shares[c][uuid] {
					theirs = append(theirs, c)
				}
			}
			listed, ok := byPIDs[pid]
			switch {
			case len(theirs) == 0 && ok:
				out[uuid][pid] = []types.UID{listed}
			case ok && slices.Contains(theirs, listed):
				out[uuid][pid] = []types.UID{listed}
			case len(theirs) > 0:
				out[uuid][pid] = theirs
			}
		}
	}
	return out
}

// outsideUse sums the GPU's use by processes of no claim, and the part of
// it by processes first seen outside claims less than OverheadSettle ago
// (a claim's new process until the host pid mapper attributes it).
func (n *Node) outsideUse(uuid string, processes map[uint32]uint64, owners map[uint32][]types.UID, at time.Time) (outside, recent uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	since := n.outsideSince[uuid]
	if since == nil {
		since = map[uint32]time.Time{}
		n.outsideSince[uuid] = since
	}
	for pid, b := range processes {
		if len(owners[pid]) > 0 {
			continue
		}
		first, seen := since[pid]
		if !seen {
			first = at
			since[pid] = at
		}
		outside += b
		if at.Sub(first) < n.opts.OverheadSettle {
			recent += b
		}
	}
	maps.DeleteFunc(since, func(pid uint32, _ time.Time) bool {
		_, running := processes[pid]
		return !running || len(owners[pid]) > 0
	})
	return outside, recent
}

// setOverSince records that the GPU does not fit at at (the zero time:
// it fits) and returns since when it has not fitted.
func (n *Node) setOverSince(uuid string, at time.Time) time.Time {
	n.mu.Lock()
	defer n.mu.Unlock()
	if at.IsZero() {
		delete(n.overSince, uuid)
		return at
	}
	since, ok := n.overSince[uuid]
	if !ok || at.Before(since) {
		n.overSince[uuid] = at
		since = at
	}
	return since
}

// regionReservation reads the claim's region again: its reservation on
// the GPU less what slots of dead processes still hold
// (hostpids.DeadCharges), 0 when unreadable (then NVML's use alone counts).
func (n *Node) regionReservation(c prepare.PreparedClaim, uuid string) uint64 {
	reg, err := region.NewReader().Read(c.RegionPath)
	if err != nil {
		return 0
	}
	dead := hostpids.DeadCharges(c.RegionPath, reg, c.HostPIDsPath, n.opts.ProcRoot)
	for i, d := range reg.Devices {
		if d.UUID == uuid {
			return d.UsedBytes - min(dead[i], d.UsedBytes)
		}
	}
	return 0
}
