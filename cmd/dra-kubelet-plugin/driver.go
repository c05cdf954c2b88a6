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
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/discovery"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/gpuhealth"
)

// claimPreparer is what the driver needs from the claim manager.
type claimPreparer interface {
	PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error)
	UnprepareResourceClaims(ctx context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error)
}

// healthResendInterval stays well inside the kubelet's default 30 s health
// timeout, after which it would report our devices as unknown.
const healthResendInterval = 10 * time.Second

// driver implements kubeletplugin.DRAPlugin on top of the claim manager.
type driver struct {
	claims claimPreparer
	cancel context.CancelCauseFunc
	pool   string
	// deviceByUUID maps GPU UUIDs to DRA device names for health reports.
	deviceByUUID map[string]string
	// health turns XIDs into the health gpus holds; nil when device
	// health is off.
	health *gpuhealth.Watcher
	gpus   *gpuhealth.Tracker

	operations *prometheus.CounterVec
	duration   *prometheus.HistogramVec
}

var _ kubeletplugin.DRAPlugin = &driver{}

func newDriver(claims claimPreparer, cancel context.CancelCauseFunc, pool string, byName map[string]discovery.Info, registry prometheus.Registerer) *driver {
	d := &driver{
		claims:       claims,
		cancel:       cancel,
		pool:         pool,
		deviceByUUID: make(map[string]string, len(byName)),
		gpus:         gpuhealth.NewTracker(),
		operations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vgpu_dra_claim_operations_total",
			Help: "Claims prepared or unprepared by this node's plugin, by operation and result (success or error).",
		}, []string{"operation", "result"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "vgpu_dra_claim_operation_duration_seconds",
			Help:    "Time for one NodePrepareResources or NodeUnprepareResources call, in seconds.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10),
		}, []string{"operation"}),
	}
	for name, info := range byName {
		d.deviceByUUID[info.UUID] = name
	}
	registry.MustRegister(d.operations, d.duration)
	return d
}

func (d *driver) PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	start := time.Now()
	defer func() { d.duration.WithLabelValues("prepare").Observe(time.Since(start).Seconds()) }()
	results, err := d.claims.PrepareResourceClaims(ctx, claims)
	if err != nil {
		d.operations.WithLabelValues("prepare", "error").Add(float64(len(claims)))
		return nil, err
	}
	for _, r := range results {
		d.operations.WithLabelValues("prepare", resultLabel(r.Err)).Inc()
	}
	return results, nil
}

func (d *driver) UnprepareResourceClaims(ctx context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	start := time.Now()
	defer func() { d.duration.WithLabelValues("unprepare").Observe(time.Since(start).Seconds()) }()
	results, err := d.claims.UnprepareResourceClaims(ctx, claims)
	if err != nil {
		d.operations.WithLabelValues("unprepare", "error").Add(float64(len(claims)))
		return nil, err
	}
	for _, e := range results {
		d.operations.WithLabelValues("unprepare", resultLabel(e)).Inc()
	}
	return results, nil
}

func resultLabel(err error) string {
	if err != nil {
		return "error"
	}
	return "success"
}

// HandleError logs background errors (ResourceSlice publishing); an error
// the helper cannot recover from stops the plugin so that the DaemonSet
// restarts it instead of running with a stale or missing slice.
func (d *driver) HandleError(ctx context.Context, err error, msg string) {
	utilruntime.HandleErrorWithContext(ctx, err, msg)
	if !errors.Is(err, kubeletplugin.ErrRecoverable) {
		d.cancel(fmt.Errorf("fatal background error: %s: %w", msg, err))
	}
}

// WatchHealthStatus streams the GPUs' health to the kubelet: every GPU
// healthy until an XID taints it (gpuhealth.Watcher), then unhealthy until the
// plugin restarts. Reports are re-sent periodically so the kubelet never
// times them out, and at once after a change.
func (d *driver) WatchHealthStatus(ctx context.Context, reports chan<- kubeletplugin.DeviceHealthReport) error {
	if d.health == nil {
		return kubeletplugin.ErrHealthNotSupported
	}
	ticker := time.NewTicker(healthResendInterval)
	defer ticker.Stop()
	for {
		unhealthy, changed := d.gpus.State()
		select {
		case <-ctx.Done():
			return nil
		case reports <- d.healthReport(unhealthy):
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		case <-changed:
		}
	}
}

func (d *driver) healthReport(unhealthy map[string]gpuhealth.Unhealthy) kubeletplugin.DeviceHealthReport {
	names := make([]string, 0, len(d.deviceByUUID))
	for _, name := range d.deviceByUUID {
		names = append(names, name)
	}
	for name := range unhealthy {
		// A MIG device tainted on its own (an XID inside its instance).
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	now := time.Now()
	report := kubeletplugin.DeviceHealthReport{}
	for _, name := range names {
		h := kubeletplugin.DeviceHealth{PoolName: d.pool, DeviceName: name, Health: kubeletplugin.HealthStatusHealthy, LastUpdated: now}
		if u, bad := unhealthy[name]; bad {
			h.Health = kubeletplugin.HealthStatusUnhealthy
			h.Message = u.Reason
		}
		report.Devices = append(report.Devices, h)
	}
	return report
}
