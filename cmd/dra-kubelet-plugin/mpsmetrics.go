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
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/prepare"
)

// MPS control daemon metrics (docs/metrics.md).
const (
	metricMPSDaemonUp       = "vgpu_dra_mps_daemon_up"
	metricMPSDaemonRestarts = "vgpu_dra_mps_daemon_restarts_total"
)

// mpsProbeTimeout bounds the control commands one scrape sends to the
// daemons.
const mpsProbeTimeout = 5 * time.Second

// mpsDaemons is what the metrics read of the prepare manager.
type mpsDaemons interface {
	MPSDaemons(ctx context.Context) []prepare.MPSDaemonStatus
}

// mpsMetrics reports the GPUs' MPS control daemons at scrape time: whether
// each answers, and how often it was restarted.
type mpsMetrics struct {
	node     string
	daemons  mpsDaemons
	up       *prometheus.Desc
	restarts *prometheus.Desc
}

func newMPSMetrics(node string, daemons mpsDaemons) *mpsMetrics {
	labels := []string{"node", "device_uuid"}
	return &mpsMetrics{
		node:    node,
		daemons: daemons,
		up: prometheus.NewDesc(metricMPSDaemonUp,
			"1 while the GPU's MPS control daemon, as the plugin recorded it, runs and answers a control command; 0 while it is down (being restarted, or failing to start).",
			labels, nil),
		restarts: prometheus.NewDesc(metricMPSDaemonRestarts,
			"Restarts of the GPU's MPS control daemon after it died while claims used it, since the plugin started.",
			labels, nil),
	}
}

// Describe implements prometheus.Collector.
func (m *mpsMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.up
	ch <- m.restarts
}

// Collect implements prometheus.Collector.
func (m *mpsMetrics) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), mpsProbeTimeout)
	defer cancel()
	for _, d := range m.daemons.MPSDaemons(ctx) {
		up := 0.0
		if d.Up {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(m.up, prometheus.GaugeValue, up, m.node, d.GPU)
		ch <- prometheus.MustNewConstMetric(m.restarts, prometheus.CounterValue, float64(d.Restarts), m.node, d.GPU)
	}
}
