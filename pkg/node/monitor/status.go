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
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"os"
	"slices"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	metav1apply "k8s.io/client-go/applyconfigurations/meta/v1"
	resourceapply "k8s.io/client-go/applyconfigurations/resource/v1"
	"k8s.io/klog/v2"

	api "github.com/vgpu-dra/vgpu-dra-driver/api/vgpu.dra.dev/v1alpha1"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/burstfile"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/prepare"
)

// Ready condition of status.devices entries.
const (
	ConditionReady         = "Ready"
	ReasonPrepared         = "Prepared"
	ReasonRegionUnreadable = "RegionUnreadable"
)

// Thresholds that make a usage change worth a write before StatusInterval:
// a process started or ended, memory use moved by a tenth of the limit, or
// SM utilisation by ten points. Such writes still wait minStatusFraction of
// StatusInterval after the previous one, so a busy claim cannot flood the
// API server.
const (
	memoryChangeDivisor = 10
	smChangePercent     = 10
	minStatusFraction   = 6
)

// DeviceData is the data of this driver's status.devices entries: the
// claim's limits on the entry's GPU and its current use there. Usage
// fields are absent while the claim's shared region cannot be read.
type DeviceData struct {
	UUID string `json:"uuid"`
	// MemoryLimit is the claim's memory limit on the GPU.
	MemoryLimit resource.Quantity `json:"memoryLimit"`
	// CoresLimit is the claim's share of SM time in percent, 0 = best effort.
	CoresLimit int64 `json:"coresLimit"`
	// MemoryUsed is the claim's memory use on the GPU.
	MemoryUsed *resource.Quantity `json:"memoryUsed,omitempty"`
	// MemoryPeak is the claim's highest memory use on the GPU since its
	// shared region was initialised.
	MemoryPeak *resource.Quantity `json:"memoryPeak,omitempty"`
	// SMUtilization is the claim's recent SM utilisation in percent.
	SMUtilization *int64 `json:"smUtilization,omitempty"`
	// Processes counts the claim's processes using the GPU.
	Processes *int64 `json:"processes,omitempty"`
	// MemoryRefusals counts the claim's allocations on the GPU refused for
	// its memory limit.
	MemoryRefusals *int64 `json:"memoryRefusals,omitempty"`
	// MemoryBurst is the memory the node lent the claim on the GPU above
	// its guarantee (MemoryLimit), from the claim's host/burst grants; only
	// for a claim whose memoryLimit is above its guarantee.
	MemoryBurst *resource.Quantity `json:"memoryBurst,omitempty"`
}

// deviceStatus is one entry's content, comparable between writes.
type deviceStatus struct {
	uuid        string
	memoryLimit uint64
	coresLimit  int64
	ready       bool
	memoryUsed  uint64
	memoryPeak  uint64
	smUtil      int64
	processes   int64
	refusals    int64
	burst       *uint64
}

// statusRecord is what was last written for a claim.
type statusRecord struct {
	at      time.Time
	devices []deviceStatus
}

// writeStatuses writes the status of every prepared claim that is due. It
// runs on Run's goroutine only, which owns m.status.
func (m *Monitor) writeStatuses(ctx context.Context) {
	logger := klog.FromContext(ctx)
	snap := m.snapshot(logger)
	now := m.now()
	seen := make(map[types.UID]bool, len(snap.claims))
	for _, cu := range snap.claims {
		seen[cu.claim.UID] = true
		if err := m.writeStatus(ctx, cu, now); err != nil {
			m.statusWrites.WithLabelValues("error").Inc()
			logger.Error(err, "Writing ResourceClaim status failed; will retry", "claim", klog.KRef(cu.claim.Namespace, cu.claim.Name))
		}
	}
	maps.DeleteFunc(m.status, func(uid types.UID, _ *statusRecord) bool { return !seen[uid] })
}

func (m *Monitor) writeStatus(ctx context.Context, cu claimUsage, now time.Time) error {
	c := cu.claim
	obj, err := m.claimLister.ResourceClaims(c.Namespace).Get(c.Name)
	if err != nil || obj.UID != c.UID {
		// Not in the cache (yet), or deleted and recreated under the same name.
		return nil
	}
	want := deviceStatuses(cu, burstGrants(c))
	if !m.statusDue(m.status[c.UID], want, now) {
		return nil
	}
	ac, err := m.applyConfig(obj, cu, want, now)
	if err != nil {
		return err
	}
	_, err = m.opts.KubeClient.ResourceV1().ResourceClaims(c.Namespace).ApplyStatus(ctx, ac,
		metav1.ApplyOptions{FieldManager: m.opts.DriverName + "/monitor", Force: true})
	if err != nil {
		return fmt.Errorf("apply status of claim %s/%s: %w", c.Namespace, c.Name, err)
	}
	m.statusWrites.WithLabelValues("success").Inc()
	m.status[c.UID] = &statusRecord{at: now, devices: want}
	return nil
}

// burstGrants are the claim's burst grants by GPU UUID as its host/burst
// file shows them (none where the file is missing), or nil where the claim
// cannot burst or the file does not parse (then no burst is reported).
func burstGrants(c prepare.PreparedClaim) map[string]uint64 {
	if !c.HasBurstRoom() || c.BurstPath == "" {
		return nil
	}
	data, err := os.ReadFile(c.BurstPath)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]uint64{}
	}
	if err != nil {
		return nil
	}
	grants, err := burstfile.Parse(data)
	if err != nil {
		return nil
	}
	return grants
}

// deviceStatuses has one entry per allocation result of the claim; grants
// are its burst grants (burstGrants).
func deviceStatuses(cu claimUsage, grants map[string]uint64) []deviceStatus {
	out := make([]deviceStatus, 0, len(cu.claim.Devices))
	for _, d := range cu.claim.Devices {
		if d.GPU < 0 || d.GPU >= len(cu.claim.GPUs) {
			continue
		}
		g := cu.claim.GPUs[d.GPU]
		s := deviceStatus{uuid: g.UUID, memoryLimit: g.MemoryLimitBytes, coresLimit: g.SMLimitPercent, ready: cu.err == nil}
		if grants != nil && g.BurstLimitBytes > g.MemoryLimitBytes {
			b := grants[g.UUID]
			s.burst = &b
		}
		if s.ready {
			u := cu.devices[d.GPU]
			s.memoryUsed, s.memoryPeak, s.smUtil, s.processes = u.usedBytes, u.peakBytes, int64(u.smUtil), int64(u.processes)
			s.refusals = int64(min(u.refusals, math.MaxInt64))
		}
		out = append(out, s)
	}
	return out
}

// statusDue says whether want must be written now, given what was written
// last: at once when nothing was written or readiness changed, after
// StatusInterval for any other change, and sooner for a large one.
func (m *Monitor) statusDue(last *statusRecord, want []deviceStatus, now time.Time) bool {
	if last == nil || len(last.devices) != len(want) {
		return true
	}
	changed, large := false, false
	for i := range want {
		a, b := last.devices[i], want[i]
		if a.ready != b.ready || a.uuid != b.uuid || a.memoryLimit != b.memoryLimit || a.coresLimit != b.coresLimit {
			return true
		}
		// A new grant is as large a change as a new refusal; the pointers
		// themselves are not compared.
		burstChanged := (a.burst == nil) != (b.burst == nil) || a.burst != nil && *a.burst != *b.burst
		a.burst, b.burst = nil, nil
		if a != b || burstChanged {
			changed = true
		}
		if burstChanged {
			large = true
		}
		if a.processes != b.processes || a.refusals != b.refusals || absDiff(a.memoryUsed, b.memoryUsed)*memoryChangeDivisor >= b.memoryLimit && b.memoryLimit > 0 ||
			absDiff(uint64(a.smUtil), uint64(b.smUtil)) >= smChangePercent {
			large = true
		}
	}
	elapsed := now.Sub(last.at)
	switch {
	case !changed:
		return false
	case elapsed >= m.opts.StatusInterval:
		return true
	default:
		return large && elapsed >= m.opts.StatusInterval/minStatusFraction
	}
}

func absDiff(a, b uint64) uint64 {
	if a > b {
		return a - b
	}
	return b - a
}

// applyConfig renders this driver's status.devices entries of the claim
// for server-side apply; other drivers' entries are left to them. The UID
// makes the write fail on a claim recreated under the same name.
func (m *Monitor) applyConfig(obj *resourceapi.ResourceClaim, cu claimUsage, want []deviceStatus, now time.Time) (*resourceapply.ResourceClaimApplyConfiguration, error) {
	st := resourceapply.ResourceClaimStatus()
	i := 0
	for _, d := range cu.claim.Devices {
		if d.GPU < 0 || d.GPU >= len(cu.claim.GPUs) {
			continue
		}
		s := want[i]
		i++
		raw, err := json.Marshal(deviceData(s))
		if err != nil {
			return nil, fmt.Errorf("encode status data of device %s: %w", d.Device, err)
		}
		cond := metav1apply.Condition().WithType(ConditionReady).WithObservedGeneration(obj.Generation)
		status := metav1.ConditionTrue
		if s.ready {
			cond.WithReason(ReasonPrepared).WithMessage(readyMessage(cu.claim))
		} else {
			status = metav1.ConditionFalse
			cond.WithReason(ReasonRegionUnreadable).WithMessage("usage unknown: " + cu.err.Error())
		}
		cond.WithStatus(status).WithLastTransitionTime(metav1.NewTime(transitionTime(obj, m.opts.DriverName, d, status, now)))
		dev := resourceapply.AllocatedDeviceStatus().
			WithDriver(m.opts.DriverName).WithPool(d.Pool).WithDevice(d.Device).
			WithConditions(cond).WithData(runtime.RawExtension{Raw: raw})
		if d.ShareID != "" {
			dev.WithShareID(string(d.ShareID))
		}
		st.WithDevices(dev)
	}
	return resourceapply.ResourceClaim(obj.Name, obj.Namespace).WithUID(obj.UID).WithStatus(st), nil
}

func readyMessage(c prepare.PreparedClaim) string {
	if c.Settings.Enforcement == api.EnforcementDisabled {
		return "prepared; limits are not enforced (enforcement disabled)"
	}
	return "prepared; limits enforced by libvgpu"
}

// transitionTime keeps the Ready condition's lastTransitionTime while its
// status is unchanged.
func transitionTime(obj *resourceapi.ResourceClaim, driver string, d prepare.PreparedDevice, status metav1.ConditionStatus, now time.Time) time.Time {
	idx := slices.IndexFunc(obj.Status.Devices, func(s resourceapi.AllocatedDeviceStatus) bool {
		share := ""
		if s.ShareID != nil {
			share = *s.ShareID
		}
		return s.Driver == driver && s.Pool == d.Pool && s.Device == d.Device && share == string(d.ShareID)
	})
	if idx >= 0 {
		if c := meta.FindStatusCondition(obj.Status.Devices[idx].Conditions, ConditionReady); c != nil && c.Status == status {
			return c.LastTransitionTime.Time
		}
	}
	return now
}

func deviceData(s deviceStatus) DeviceData {
	d := DeviceData{UUID: s.uuid, MemoryLimit: bytesQuantity(s.memoryLimit), CoresLimit: s.coresLimit}
	if s.ready {
		used, peak := bytesQuantity(s.memoryUsed), bytesQuantity(s.memoryPeak)
		d.MemoryUsed, d.MemoryPeak, d.SMUtilization, d.Processes, d.MemoryRefusals = &used, &peak, &s.smUtil, &s.processes, &s.refusals
	}
	if s.burst != nil {
		b := bytesQuantity(*s.burst)
		d.MemoryBurst = &b
	}
	return d
}

// bytesQuantity renders bytes in binary SI units; values beyond int64 are
// capped (no GPU has 8 EiB).
func bytesQuantity(b uint64) resource.Quantity {
	return *resource.NewQuantity(int64(min(b, 1<<63-1)), resource.BinarySI)
}
