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
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Metric names (docs/metrics.md).
const (
	MetricBurstBytes    = "vgpu_dra_claim_memory_burst_bytes"
	MetricReclaims      = "vgpu_dra_gpu_memory_reclaims_total"
	MetricBurstRefusals = "vgpu_dra_claim_memory_burst_refusals_total"
)

type metrics struct {
	n        *Node
	refusals *prometheus.CounterVec
	reclaims *prometheus.CounterVec
	burst    *prometheus.Desc
}

func newMetrics(n *Node) *metrics {
	return &metrics{
		n: n,
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricBurstRefusals,
			Help: "Burst asks on claims' sockets this node's plugin refused, by reason (limit, full, reclaiming, never, gpu, request, rate: the claim asked faster than its token bucket allows).",
		}, []string{"reason"}),
		reclaims: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricReclaims,
			Help: "Claims chosen to give their burst back on a GPU (for a new claim's guarantee or for overhead that grew), handed to the reclaimer.",
		}, []string{"device_uuid"}),
		burst: prometheus.NewDesc(MetricBurstBytes,
			"Memory granted to a claim on a GPU above its guarantee (its burst grant, as in host/burst).",
			[]string{"namespace", "claim", "device_uuid"}, nil),
	}
}

func (m *metrics) register(r prometheus.Registerer) error {
	var errs []error
	for _, c := range []prometheus.Collector{m.refusals, m.reclaims, m} {
		if err := r.Register(c); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("register burst metrics: %w", err)
	}
	return nil
}

// Describe implements prometheus.Collector for the burst gauge.
func (m *metrics) Describe(ch chan<- *prometheus.Desc) { ch <- m.burst }

// Collect reports every claim with burst room's grant on each of its GPUs.
func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	m.n.mu.Lock()
	type row struct {
		ref   ClaimRef
		uuids []string
	}
	var rows []row
	for uid, rooms := range m.n.rooms {
		r := row{ref: m.n.refs[uid]}
		for uuid, room := range rooms {
			if room > 0 {
				r.uuids = append(r.uuids, uuid)
			}
		}
		if len(r.uuids) > 0 {
			rows = append(rows, r)
		}
	}
	m.n.mu.Unlock()
	for _, r := range rows {
		grants := m.n.book.Grants(r.ref.UID)
		for _, uuid := range r.uuids {
			ch <- prometheus.MustNewConstMetric(m.burst, prometheus.GaugeValue, float64(grants[uuid]), r.ref.Namespace, r.ref.Name, uuid)
		}
	}
}
