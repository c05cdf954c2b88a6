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

package gpuhealth

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/klog/v2"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/devices"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/discovery"
)

// Unhealthy is why a device is unhealthy and the taint that says so.
type Unhealthy struct {
	Reason string
	Taint  resourceapi.DeviceTaint
}

// Tracker is the node's device health as NVML's XID events tell it; the
// ResourceSlice taints and the kubelet health stream both derive from it.
// A device stays unhealthy until the plugin restarts: recovery needs a GPU
// reset, which restarts the plugin, and a restarted plugin that discovers
// the GPU again publishes it untainted.
type Tracker struct {
	mu        sync.Mutex
	unhealthy map[string]Unhealthy // by device name
	// changed is closed (and replaced) at every change.
	changed chan struct{}
}

// NewTracker returns a Tracker with every device healthy.
func NewTracker() *Tracker {
	return &Tracker{unhealthy: map[string]Unhealthy{}, changed: make(chan struct{})}
}

// mark records an XID's taint on device name. It returns false when the
// device already carries a taint at least as severe (the first such taint
// and its time are kept).
func (h *Tracker) mark(name string, u Unhealthy) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if cur, ok := h.unhealthy[name]; ok && devices.Severity(cur.Taint.Effect) >= devices.Severity(u.Taint.Effect) {
		return false
	}
	h.unhealthy[name] = u
	close(h.changed)
	h.changed = make(chan struct{})
	return true
}

// State returns a copy of the unhealthy devices and a channel closed at
// the next change.
func (h *Tracker) State() (map[string]Unhealthy, <-chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return maps.Clone(h.unhealthy), h.changed
}

// Taints are the ResourceSlice taints of the unhealthy devices.
func (h *Tracker) Taints() map[string][]resourceapi.DeviceTaint {
	state, _ := h.State()
	out := make(map[string][]resourceapi.DeviceTaint, len(state))
	for name, u := range state {
		out[name] = []resourceapi.DeviceTaint{u.Taint}
	}
	return out
}

// MIGLister lists a GPU's MIG instances (discovery.MIGController.Instances).
type MIGLister interface {
	Instances(ctx context.Context, gpuUUID string) ([]discovery.MIGInstanceState, error)
}

// MIGResolver finds the devices an XID inside a MIG instance concerns.
type MIGResolver struct {
	Lister MIGLister
	// GPUs are the GPUs in MIG mode, by UUID.
	GPUs map[string]MIGGPU
}

// MIGGPU is a GPU in MIG mode: its index and its MIG geometry.
type MIGGPU struct {
	Index int
	MIG   discovery.MIGInfo
}

// devices names the published devices realised by GPU instance giID of
// GPU uuid: the MIG device at its placement and, for the full-size
// instance, the whole-GPU device it realises for software slices too.
func (r *MIGResolver) devices(ctx context.Context, uuid string, giID int) ([]string, error) {
	g, ok := r.GPUs[uuid]
	if !ok {
		return nil, fmt.Errorf("GPU %s is not in MIG mode", uuid)
	}
	list, err := r.Lister.Instances(ctx, uuid)
	if err != nil {
		return nil, err
	}
	for _, inst := range list {
		if inst.ID != giID {
			continue
		}
		p, ok := g.MIG.Profile(inst.ProfileID)
		if !ok {
			return nil, fmt.Errorf("GPU instance %d has unknown profile %d", giID, inst.ProfileID)
		}
		out := []string{devices.MIGDeviceName(g.Index, p, inst.Placement.Start)}
		if full, ok := g.MIG.FullProfile(); ok && full.ID == p.ID {
			out = append(out, devices.Name(g.Index))
		}
		return out, nil
	}
	return nil, fmt.Errorf("no GPU instance %d", giID)
}

// XIDSource reports GPU XID errors until ctx ends
// (discovery.XIDWatcher).
type XIDSource interface {
	Watch(ctx context.Context, report func(discovery.XIDEvent)) error
}

// Watcher turns the XID events of a source into device health.
type Watcher struct {
	XIDs XIDSource
	// DeviceByUUID maps GPU UUIDs to the names of their whole-GPU devices.
	DeviceByUUID map[string]string
	// MIG resolves XIDs inside MIG instances; nil without a GPU in MIG
	// mode.
	MIG *MIGResolver
	// Policy chooses each XID's taint effect; Tracker holds the result.
	Policy  devices.TaintPolicy
	Tracker *Tracker
}

// targets are the devices an XID event taints: those of its MIG instance
// when NVML names one and it resolves, else the whole GPU (whose taint
// reaches all its MIG devices).
func (w *Watcher) targets(ctx context.Context, ev discovery.XIDEvent, name string) []string {
	if ev.GPUInstanceID == discovery.NoInstance || w.MIG == nil {
		return []string{name}
	}
	if _, ok := w.MIG.GPUs[ev.UUID]; !ok {
		// Not in MIG mode: the ids name nothing.
		return []string{name}
	}
	list, err := w.MIG.devices(ctx, ev.UUID, ev.GPUInstanceID)
	if err != nil {
		klog.FromContext(ctx).Info("XID in a MIG instance that cannot be resolved; tainting the whole GPU", "uuid", ev.UUID,
			"gpuInstance", ev.GPUInstanceID, "xid", ev.XID, "err", err)
		return []string{name}
	}
	return list
}

// Run turns XID events into device health until ctx ends, calling
// publish (nil: none) with the new taints after every change. A failed
// publish is logged and retried at the next change; the slice controller
// itself retries API errors. An XID inside a MIG instance taints only that
// instance's devices.
func (w *Watcher) Run(ctx context.Context, publish func(context.Context, map[string][]resourceapi.DeviceTaint) error) error {
	logger := klog.FromContext(ctx)
	err := w.XIDs.Watch(ctx, func(ev discovery.XIDEvent) {
		gpuName, ok := w.DeviceByUUID[ev.UUID]
		if !ok {
			logger.V(2).Info("XID on a GPU this plugin does not publish", "uuid", ev.UUID, "xid", ev.XID)
			return
		}
		taint := w.Policy.XIDTaint(ev.XID, time.Now())
		reason := fmt.Sprintf("critical XID %d reported by NVML", ev.XID)
		if ev.GPUInstanceID != discovery.NoInstance {
			reason = fmt.Sprintf("critical XID %d reported by NVML in MIG GPU instance %d", ev.XID, ev.GPUInstanceID)
		}
		changed := false
		for _, name := range w.targets(ctx, ev, gpuName) {
			if !w.Tracker.mark(name, Unhealthy{Reason: reason, Taint: taint}) {
				logger.V(2).Info("Device already tainted at least as severely", "device", name, "xid", ev.XID)
				continue
			}
			changed = true
			logger.Info("Marking device unhealthy and tainting it", "device", name, "uuid", ev.UUID, "xid", ev.XID,
				"gpuInstance", ev.GPUInstanceID, "effect", taint.Effect)
		}
		if !changed || publish == nil {
			return
		}
		if err := publish(ctx, w.Tracker.Taints()); err != nil {
			logger.Error(err, "Publishing the GPU taint failed", "device", gpuName)
		}
	})
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("watch XID events: %w", err)
	}
	return nil
}
