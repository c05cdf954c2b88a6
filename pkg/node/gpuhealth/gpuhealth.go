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

package main

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

// unhealthyGPU is why a GPU is unhealthy and the taint that says so.
type unhealthyGPU struct {
	reason string
	taint  resourceapi.DeviceTaint
}

// gpuHealth is the node's GPU health as NVML's XID events tell it; the
// ResourceSlice taints and the kubelet health stream both derive from it.
// A GPU stays unhealthy until the plugin restarts: recovery needs a GPU
// reset, which restarts the plugin, and a restarted plugin that discovers
// the GPU again publishes it untainted.
type gpuHealth struct {
	mu        sync.Mutex
	unhealthy map[string]unhealthyGPU // by device name
	// changed is closed (and replaced) at every change.
	changed chan struct{}
}

func newGPUHealth() *gpuHealth {
	return &gpuHealth{unhealthy: map[string]unhealthyGPU{}, changed: make(chan struct{})}
}

// mark records an XID's taint on device name. It returns false when the
// GPU already carries a taint at least as severe (the first such taint and
// its time are kept).
func (h *gpuHealth) mark(name string, u unhealthyGPU) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if cur, ok := h.unhealthy[name]; ok && devices.Severity(cur.taint.Effect) >= devices.Severity(u.taint.Effect) {
		return false
	}
	h.unhealthy[name] = u
	close(h.changed)
	h.changed = make(chan struct{})
	return true
}

// state returns a copy of the unhealthy GPUs and a channel closed at the
// next change.
func (h *gpuHealth) state() (map[string]unhealthyGPU, <-chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return maps.Clone(h.unhealthy), h.changed
}

// taints are the ResourceSlice taints of the unhealthy GPUs.
func (h *gpuHealth) taints() map[string][]resourceapi.DeviceTaint {
	state, _ := h.state()
	out := make(map[string][]resourceapi.DeviceTaint, len(state))
	for name, u := range state {
		out[name] = []resourceapi.DeviceTaint{u.taint}
	}
	return out
}

// migLister lists a GPU's MIG instances (discovery.MIGController.Instances).
type migLister interface {
	Instances(ctx context.Context, gpuUUID string) ([]discovery.MIGInstanceState, error)
}

// migResolver finds the devices an XID inside a MIG instance concerns.
type migResolver struct {
	lister migLister
	// gpus are the GPUs in MIG mode, by UUID.
	gpus map[string]migGPU
}

type migGPU struct {
	index int
	mig   discovery.MIGInfo
}

// devices names the published devices realised by GPU instance giID of
// GPU uuid: the MIG device at its placement and, for the full-size
// instance, the whole-GPU device it realises for software slices too.
func (r *migResolver) devices(ctx context.Context, uuid string, giID int) ([]string, error) {
	g, ok := r.gpus[uuid]
	if !ok {
		return nil, fmt.Errorf("GPU %s is not in MIG mode", uuid)
	}
	list, err := r.lister.Instances(ctx, uuid)
	if err != nil {
		return nil, err
	}
	for _, inst := range list {
		if inst.ID != giID {
			continue
		}
		p, ok := g.mig.Profile(inst.ProfileID)
		if !ok {
			return nil, fmt.Errorf("GPU instance %d has unknown profile %d", giID, inst.ProfileID)
		}
		out := []string{devices.MIGDeviceName(g.index, p, inst.Placement.Start)}
		if full, ok := g.mig.FullProfile(); ok && full.ID == p.ID {
			out = append(out, devices.Name(g.index))
		}
		return out, nil
	}
	return nil, fmt.Errorf("no GPU instance %d", giID)
}

// targets are the devices an XID event taints: those of its MIG instance
// when NVML names one and it resolves, else the whole GPU (whose taint
// reaches all its MIG devices).
func (d *driver) targets(ctx context.Context, ev discovery.XIDEvent, name string) []string {
	if ev.GPUInstanceID == discovery.NoInstance || d.mig == nil {
		return []string{name}
	}
	if _, ok := d.mig.gpus[ev.UUID]; !ok {
		// Not in MIG mode: the ids name nothing.
		return []string{name}
	}
	list, err := d.mig.devices(ctx, ev.UUID, ev.GPUInstanceID)
	if err != nil {
		klog.FromContext(ctx).Info("XID in a MIG instance that cannot be resolved; tainting the whole GPU", "uuid", ev.UUID,
			"gpuInstance", ev.GPUInstanceID, "xid", ev.XID, "err", err)
		return []string{name}
	}
	return list
}

// watchHealth turns XID events into GPU health until ctx ends, calling
// publish with the new taints after every change. A failed publish is
// logged and retried at the next change; the slice controller itself
// retries API errors. An XID inside a MIG instance taints only that
// instance's devices.
func (d *driver) watchHealth(ctx context.Context, publish func(context.Context, map[string][]resourceapi.DeviceTaint) error) error {
	logger := klog.FromContext(ctx)
	err := d.health.Watch(ctx, func(ev discovery.XIDEvent) {
		gpuName, ok := d.deviceByUUID[ev.UUID]
		if !ok {
			logger.V(2).Info("XID on a GPU this plugin does not publish", "uuid", ev.UUID, "xid", ev.XID)
			return
		}
		taint := d.taintPolicy.XIDTaint(ev.XID, time.Now())
		reason := fmt.Sprintf("critical XID %d reported by NVML", ev.XID)
		if ev.GPUInstanceID != discovery.NoInstance {
			reason = fmt.Sprintf("critical XID %d reported by NVML in MIG GPU instance %d", ev.XID, ev.GPUInstanceID)
		}
		changed := false
		for _, name := range d.targets(ctx, ev, gpuName) {
			if !d.gpus.mark(name, unhealthyGPU{reason: reason, taint: taint}) {
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
		if err := publish(ctx, d.gpus.taints()); err != nil {
			logger.Error(err, "Publishing the GPU taint failed", "device", gpuName)
		}
	})
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("watch XID events: %w", err)
	}
	return nil
}
