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

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/devices"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/gpu"
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

// watchHealth turns XID events into GPU health until ctx ends, calling
// publish with the new taints after every change. A failed publish is
// logged and retried at the next change; the slice controller itself
// retries API errors.
func (d *driver) watchHealth(ctx context.Context, publish func(context.Context, map[string][]resourceapi.DeviceTaint) error) error {
	logger := klog.FromContext(ctx)
	err := d.health.Watch(ctx, func(ev gpu.XIDEvent) {
		name, ok := d.deviceByUUID[ev.UUID]
		if !ok {
			logger.V(2).Info("XID on a GPU this plugin does not publish", "uuid", ev.UUID, "xid", ev.XID)
			return
		}
		taint := d.taintPolicy.XIDTaint(ev.XID, time.Now())
		u := unhealthyGPU{reason: fmt.Sprintf("critical XID %d reported by NVML", ev.XID), taint: taint}
		if !d.gpus.mark(name, u) {
			logger.V(2).Info("GPU already tainted at least as severely", "device", name, "xid", ev.XID)
			return
		}
		logger.Info("Marking GPU unhealthy and tainting it", "device", name, "uuid", ev.UUID, "xid", ev.XID, "effect", taint.Effect)
		if publish == nil {
			return
		}
		if err := publish(ctx, d.gpus.taints()); err != nil {
			logger.Error(err, "Publishing the GPU taint failed", "device", name)
		}
	})
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("watch XID events: %w", err)
	}
	return nil
}
