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
	"errors"
	"io/fs"
	"maps"
	"math"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/region"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/hostpids"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/prepare"
)

// Reasons of vgpu_dra_monitor_region_errors_total.
const (
	reasonVanished   = "vanished"
	reasonCorrupt    = "corrupt"
	reasonUnreadable = "unreadable"
	reasonNVML       = "nvml"
)

// snapshot is one collection: the state all metrics and status writes of an
// interval are derived from.
type snapshot struct {
	at     time.Time
	claims []claimUsage
	// gpus holds NVML's view by GPU UUID; missing when NVML failed.
	gpus map[string]gpuSample
}

type claimUsage struct {
	claim prepare.PreparedClaim
	pod   string
	// podUIDs are the pods the claim is reserved for (OnCollect only).
	podUIDs []types.UID
	// err is set when the region could not be read; devices are then
	// empty so that no stale value is exported.
	err     error
	devices []deviceUsage
}

// deviceUsage is the claim's use of claim.GPUs[i], clamped to the GPU.
type deviceUsage struct {
	usedBytes uint64
	// liveBytes is usedBytes less the charges of dead processes' slots
	// (OnCollect only).
	liveBytes uint64
	peakBytes uint64
	smUtil    uint32 // percent
	// smShare is the achieved SM share (0..1) the claim's limiter published,
	// valid when smShareKnown: published recently enough to be live.
	smShare      float64
	smShareKnown bool
	processes    int
	launches     uint64 // monotonic total
	throttleNS   uint64 // monotonic total
	// failClosed counts live processes that refuse every allocation
	// because they found the region replaced or rewritten under them.
	failClosed int
	// refused counts processes that found no free slot and failed closed
	// (monotonic, as published in the region).
	refused uint64
	// refusals counts allocations refused for the limit (monotonic while
	// the region lives); lastRefused* describe the last one.
	refusals         uint64
	lastRefusedBytes uint64
	lastRefused      time.Time
}

type gpuSample struct {
	usedBytes        uint64
	utilization      uint32 // percent
	utilizationKnown bool   // false on a GPU in MIG mode
	// Read only with Options.OnCollect.
	totalBytes, reservedBytes uint64
	processes                 map[uint32]uint64
}

// procKey identifies a process across collections, also across pid reuse.
type procKey struct {
	slot      int
	pid       uint32
	pidns     uint64
	startTime uint64
}

type procCounters struct{ launches, throttleNS uint64 }

// counterState turns the per-process counters in a region, which vanish
// when a process exits, into totals that only grow: a process's last seen
// values are retired into the total when its slot goes away.
type counterState struct {
	retired procCounters
	live    map[procKey]procCounters
}

type counterKey struct {
	claim types.UID
	uuid  string
}

// collect reads every prepared claim. It holds no lock; the caller
// serialises collections.
func (m *Monitor) collect(logger klog.Logger) *snapshot {
	start := m.now()
	prepared := m.opts.Claims.PreparedClaims()
	snap := &snapshot{at: start, claims: make([]claimUsage, 0, len(prepared))}
	seenCounters := make(map[counterKey]bool, len(m.counters))
	seenClaims := make(map[types.UID]bool, len(prepared))

	reads := m.readRegions(prepared)
	for i, c := range prepared {
		seenClaims[c.UID] = true
		cu := claimUsage{claim: c, pod: m.podNames(c)}
		reg, err := reads[i].reg, reads[i].err
		if err != nil {
			cu.err = err
			m.regionFailed(logger, c, err)
		} else {
			m.regionOK(logger, c, reg)
			var dead []uint64
			if m.opts.OnCollect != nil {
				dead = hostpids.DeadCharges(c.RegionPath, reg, c.HostPIDsPath, m.procRoot())
				cu.podUIDs = m.podUIDs(c)
			}
			cu.devices = m.usage(c, reg, dead, seenCounters)
			m.reportUnaccounted(logger, c, cu.devices)
		}
		snap.claims = append(snap.claims, cu)
	}
	// Forget claims that are gone, so memory stays bounded by what is prepared.
	maps.DeleteFunc(m.counters, func(k counterKey, _ *counterState) bool { return !seenCounters[k] })
	maps.DeleteFunc(m.regionErrs, func(uid types.UID, _ string) bool { return !seenClaims[uid] })
	maps.DeleteFunc(m.unaccounted, func(uid types.UID, _ unaccounted) bool { return !seenClaims[uid] })
	for uid := range m.regionMaps {
		if !seenClaims[uid] {
			m.closeRegion(uid)
		}
	}
	snap.gpus = m.sampleGPUs(logger)
	m.collectDuration.Observe(m.now().Sub(start).Seconds())
	if m.opts.OnCollect != nil {
		m.opts.OnCollect(burstCollection(snap))
	}
	return snap
}

// burstCollection is the snapshot as the burst grant book needs it.
func burstCollection(snap *snapshot) Collection {
	col := Collection{At: snap.at, GPUs: make(map[string]GPUMemory, len(snap.gpus))}
	for uuid, g := range snap.gpus {
		col.GPUs[uuid] = GPUMemory{TotalBytes: g.totalBytes, ReservedBytes: g.reservedBytes, Processes: g.processes}
	}
	for _, cu := range snap.claims {
		if cu.err != nil {
			continue
		}
		cr := ClaimReservation{Claim: cu.claim, Reserved: make(map[string]uint64, len(cu.devices)), Pods: cu.podUIDs}
		for i, d := range cu.devices {
			cr.Reserved[cu.claim.GPUs[i].UUID] = d.liveBytes
		}
		col.Claims = append(col.Claims, cr)
	}
	return col
}

// usage matches the claim's GPUs with the region's device records by UUID:
// records for GPUs the claim does not have are ignored, since the region is
// written by the claim's containers. dead holds, per record, the charges of
// slots whose process is dead (nil: none known).
func (m *Monitor) usage(c prepare.PreparedClaim, reg *region.Region, dead []uint64, seen map[counterKey]bool) []deviceUsage {
	out := make([]deviceUsage, len(c.GPUs))
	for i, g := range c.GPUs {
		rec := -1
		for j := range reg.Devices {
			if reg.Devices[j].UUID == g.UUID {
				rec = j
				break
			}
		}
		key := counterKey{claim: c.UID, uuid: g.UUID}
		seen[key] = true
		st := m.counters[key]
		if st == nil {
			st = &counterState{live: map[procKey]procCounters{}}
			m.counters[key] = st
		}
		live := make(map[procKey]procCounters, len(st.live))
		u := &out[i]
		if rec >= 0 {
			total := m.gpuMemory(g.UUID)
			d := reg.Devices[rec]
			u.usedBytes = min(d.UsedBytes, total)
			u.liveBytes = u.usedBytes
			if rec < len(dead) {
				u.liveBytes -= min(dead[rec], u.liveBytes)
			}
			u.peakBytes = min(d.PeakBytes, total)
			u.smUtil = d.SMUtilPercent
			u.refused = d.RefusedProcesses
			u.smShare, u.smShareKnown = m.achievedShare(d)
			u.refusals, u.lastRefusedBytes, u.lastRefused = d.Refusals, d.LastRefusedBytes, d.LastRefused
			for _, p := range reg.Processes {
				if p.FailClosed {
					u.failClosed++
				}
				pd := p.Devices[rec]
				k := procKey{slot: p.Slot, pid: p.PID, pidns: p.PIDNamespace, startTime: p.StartTime}
				cur := procCounters{launches: pd.KernelLaunches, throttleNS: pd.ThrottledNS}
				if prev, ok := st.live[k]; ok && (cur.launches < prev.launches || cur.throttleNS < prev.throttleNS) {
					// Counters went back: the slot was rewritten; keep what was counted.
					st.retire(prev)
				}
				live[k] = cur
				// A process of the claim counts for the GPUs it has touched.
				if pd.UsedBytes > 0 || pd.OverheadBytes > 0 || pd.KernelLaunches > 0 {
					u.processes++
				}
			}
		}
		for k, prev := range st.live {
			if _, ok := live[k]; !ok {
				st.retire(prev)
			}
		}
		st.live = live
		u.launches, u.throttleNS = st.retired.launches, st.retired.throttleNS
		for _, v := range live {
			u.launches = saturatingAdd(u.launches, v.launches)
			u.throttleNS = saturatingAdd(u.throttleNS, v.throttleNS)
		}
	}
	return out
}

// shareFreshness is how old a published achieved share may be: its
// refiller updates it ten times a second while any process of the claim
// runs on the GPU, so an older one belongs to a claim that stopped.
const shareFreshness = 30 * time.Second

// achievedShare is the claim's achieved SM share on the device as a ratio,
// if one was published within shareFreshness of now (a time in the future
// beyond that is not trusted either: the region is the container's).
func (m *Monitor) achievedShare(d region.Device) (float64, bool) {
	if d.SMShareTime.IsZero() {
		return 0, false
	}
	age := m.now().Sub(d.SMShareTime)
	if age > shareFreshness || age < -shareFreshness {
		return 0, false
	}
	return float64(d.SMShareBasisPoints) / 10000, true
}

func (s *counterState) retire(c procCounters) {
	s.retired.launches = saturatingAdd(s.retired.launches, c.launches)
	s.retired.throttleNS = saturatingAdd(s.retired.throttleNS, c.throttleNS)
}

func saturatingAdd(a, b uint64) uint64 {
	if a > math.MaxUint64-b {
		return math.MaxUint64
	}
	return a + b
}

// gpuMemory bounds byte counts read from a region; unknown GPUs are not
// bounded.
func (m *Monitor) gpuMemory(uuid string) uint64 {
	if g, ok := m.gpus[uuid]; ok && g.MemoryBytes > 0 {
		return g.MemoryBytes
	}
	return math.MaxUint64
}

// regionFailed counts the error and logs it when the claim's region turns
// bad or fails differently than before; repeats are logged at V(4).
func (m *Monitor) regionFailed(logger klog.Logger, c prepare.PreparedClaim, err error) {
	reason := reasonUnreadable
	switch {
	case errors.Is(err, fs.ErrNotExist):
		reason = reasonVanished
	case errors.Is(err, region.ErrCorrupt):
		reason = reasonCorrupt
	}
	m.regionErrors.WithLabelValues(reason).Inc()
	if prev, ok := m.regionErrs[c.UID]; ok && prev == err.Error() {
		logger.V(4).Info("Shared region still unreadable", "claim", klog.KRef(c.Namespace, c.Name), "claimUID", c.UID, "reason", reason, "err", err)
		return
	}
	m.regionErrs[c.UID] = err.Error()
	logger.Error(err, "Cannot read the shared region of a prepared claim; its usage is not reported", "claim", klog.KRef(c.Namespace, c.Name), "claimUID", c.UID, "reason", reason)
}

// reportUnaccounted logs, once per change, processes of the claim that the
// library could not account claim-wide: they refuse every allocation (fail
// closed), so the claim's limit holds, but its users see out-of-memory
// errors with memory to spare.
func (m *Monitor) reportUnaccounted(logger klog.Logger, c prepare.PreparedClaim, devices []deviceUsage) {
	var failClosed int
	var refused uint64
	for _, u := range devices {
		failClosed = max(failClosed, u.failClosed)
		refused = max(refused, u.refused)
	}
	key := unaccounted{failClosed: failClosed, refused: refused}
	if prev := m.unaccounted[c.UID]; prev == key {
		return
	}
	m.unaccounted[c.UID] = key
	if failClosed == 0 && refused == 0 {
		return
	}
	logger.Info("Processes of the claim refuse every GPU allocation because the library cannot account them claim-wide", "claim", klog.KRef(c.Namespace, c.Name), "claimUID", c.UID, "failClosedProcesses", failClosed, "refusedForWantOfSlot", refused)
}

// unaccounted is what reportUnaccounted last logged for a claim.
type unaccounted struct {
	failClosed int
	refused    uint64
}

func (m *Monitor) regionOK(logger klog.Logger, c prepare.PreparedClaim, reg *region.Region) {
	if _, bad := m.regionErrs[c.UID]; bad {
		delete(m.regionErrs, c.UID)
		logger.Info("Shared region readable again", "claim", klog.KRef(c.Namespace, c.Name), "claimUID", c.UID)
	}
	if reg.Unstable > 0 {
		logger.V(2).Info("Process slots changed during every read; their usage is left out of this collection", "claim", klog.KRef(c.Namespace, c.Name), "slots", reg.Unstable)
	}
}
