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
	"slices"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

var (
	claimLabels = []string{"node", "namespace", "pod", "claim", "device_uuid", "device_index"}
	gpuLabels   = []string{"node", "device_uuid", "device_index"}
)

// descs are the usage metrics; docs/metrics.md documents each.
type descs struct {
	memoryLimit, memoryUsed, memoryPeak, smLimit, smUtil, smAchieved, launches, throttled, processes *prometheus.Desc
	failClosed, refused, memoryRefusals                                                              *prometheus.Desc

	gpuMemoryTotal, gpuMemoryAllocated, gpuCoresAllocated, gpuMemoryUsed, gpuUtil, gpuClaims *prometheus.Desc
}

func newDescs() *descs {
	c := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, claimLabels, nil)
	}
	g := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, gpuLabels, nil)
	}
	return &descs{
		memoryLimit: c("vgpu_dra_claim_memory_limit_bytes", "GPU memory limit of the claim on the GPU, in bytes."),
		memoryUsed:  c("vgpu_dra_claim_memory_used_bytes", "GPU memory the claim's processes use on the GPU (allocations and context overhead), in bytes."),
		memoryPeak:  c("vgpu_dra_claim_memory_peak_bytes", "Highest GPU memory use of the claim on the GPU since its shared region was initialised, in bytes."),
		smLimit:     c("vgpu_dra_claim_sm_limit_ratio", "Share of the GPU's SM time the claim is limited to, 0..1; 0 means best effort (no limit)."),
		smUtil:      c("vgpu_dra_claim_sm_utilization_ratio", "Share of the GPU's SM time the claim used recently, 0..1."),
		smAchieved:  c("vgpu_dra_claim_sm_achieved_ratio", "Share of the GPU's SM time the claim achieved over about the last 10 seconds, as its compute limiter measured it, 0..1; compare with vgpu_dra_claim_sm_limit_ratio. Exported while a process of the claim runs on the GPU."),
		launches:    c("vgpu_dra_claim_kernel_launches_total", "Kernel launches of the claim's processes on the GPU."),
		throttled:   c("vgpu_dra_claim_throttled_seconds_total", "Time the claim's kernel launches waited for their SM share, in seconds."),
		processes:   c("vgpu_dra_claim_processes", "Processes of the claim using the GPU."),
		failClosed:  c("vgpu_dra_claim_fail_closed_processes", "Live processes of the claim that refuse every allocation on the GPU because they found the claim's shared region replaced or rewritten (fail closed)."),
		refused:     c("vgpu_dra_claim_unaccounted_processes_total", "Processes of the claim that found no free slot in its shared region and so refused every allocation on the GPU (fail closed)."),

		memoryRefusals: c("vgpu_dra_claim_memory_refusals_total", "Allocations on the GPU refused because they would exceed the claim's memory limit."),

		gpuMemoryTotal:     g("vgpu_dra_gpu_memory_total_bytes", "Total memory of the GPU, in bytes."),
		gpuMemoryAllocated: g("vgpu_dra_gpu_prepared_memory_bytes", "Sum of the memory limits of the claims prepared on the GPU, in bytes."),
		gpuCoresAllocated:  g("vgpu_dra_gpu_prepared_cores_ratio", "Sum of the SM shares of the claims prepared on the GPU, 0..1 (best-effort claims add nothing)."),
		gpuMemoryUsed:      g("vgpu_dra_gpu_memory_used_bytes", "Memory in use on the GPU as NVML reports it (all processes, also outside claims), in bytes."),
		gpuUtil:            g("vgpu_dra_gpu_utilization_ratio", "Share of recent time the GPU ran a kernel, as NVML reports it, 0..1."),
		gpuClaims:          g("vgpu_dra_gpu_prepared_claims", "Claims prepared on the GPU."),
	}
}

// collector exposes the Monitor's snapshot; a separate type so that the
// Monitor's own method set does not grow Describe and Collect.
type collector Monitor

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	d := c.metrics
	for _, desc := range []*prometheus.Desc{
		d.memoryLimit, d.memoryUsed, d.memoryPeak, d.smLimit, d.smUtil, d.smAchieved, d.launches, d.throttled, d.processes,
		d.failClosed, d.refused, d.memoryRefusals,
		d.gpuMemoryTotal, d.gpuMemoryAllocated, d.gpuCoresAllocated, d.gpuMemoryUsed, d.gpuUtil, d.gpuClaims,
	} {
		ch <- desc
	}
}

type gpuTotals struct {
	memory uint64
	cores  int64
	claims int
}

// Collect reads at most once per interval; scrapes in between get the same
// values.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	m := (*Monitor)(c)
	snap := m.snapshot(m.logger)
	d := m.metrics
	node := m.opts.NodeName
	totals := make(map[string]*gpuTotals, len(m.gpus))
	for uuid := range m.gpus {
		totals[uuid] = &gpuTotals{}
	}

	for _, cu := range snap.claims {
		for i, g := range cu.claim.GPUs {
			t := totals[g.UUID]
			if t == nil {
				t = &gpuTotals{}
				totals[g.UUID] = t
			}
			t.memory = saturatingAdd(t.memory, g.MemoryLimitBytes)
			t.cores += g.SMLimitPercent
			t.claims++

			labels := []string{node, cu.claim.Namespace, cu.pod, cu.claim.Name, g.UUID, m.deviceIndex(g.UUID)}
			gauge := func(desc *prometheus.Desc, v float64) {
				ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, labels...)
			}
			gauge(d.memoryLimit, float64(g.MemoryLimitBytes))
			gauge(d.smLimit, float64(g.SMLimitPercent)/100)
			if cu.err != nil {
				continue
			}
			u := cu.devices[i]
			gauge(d.memoryUsed, float64(u.usedBytes))
			gauge(d.memoryPeak, float64(u.peakBytes))
			gauge(d.smUtil, float64(u.smUtil)/100)
			if u.smShareKnown {
				gauge(d.smAchieved, u.smShare)
			}
			gauge(d.processes, float64(u.processes))
			gauge(d.failClosed, float64(u.failClosed))
			ch <- prometheus.MustNewConstMetric(d.refused, prometheus.CounterValue, float64(u.refused), labels...)
			ch <- prometheus.MustNewConstMetric(d.launches, prometheus.CounterValue, float64(u.launches), labels...)
			ch <- prometheus.MustNewConstMetric(d.throttled, prometheus.CounterValue, float64(u.throttleNS)/1e9, labels...)
			ch <- prometheus.MustNewConstMetric(d.memoryRefusals, prometheus.CounterValue, float64(u.refusals), labels...)
		}
	}

	uuids := make([]string, 0, len(totals))
	for uuid := range totals {
		uuids = append(uuids, uuid)
	}
	slices.Sort(uuids)
	for _, uuid := range uuids {
		t := totals[uuid]
		labels := []string{node, uuid, m.deviceIndex(uuid)}
		gauge := func(desc *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, labels...)
		}
		if g, ok := m.gpus[uuid]; ok {
			gauge(d.gpuMemoryTotal, float64(g.MemoryBytes))
		}
		gauge(d.gpuMemoryAllocated, float64(t.memory))
		gauge(d.gpuCoresAllocated, float64(t.cores)/100)
		gauge(d.gpuClaims, float64(t.claims))
		if s, ok := snap.gpus[uuid]; ok {
			gauge(d.gpuMemoryUsed, float64(s.usedBytes))
			if s.utilizationKnown {
				gauge(d.gpuUtil, float64(s.utilization)/100)
			}
		}
	}
}

// deviceIndex is the GPU's NVML index as a label, empty for a GPU this
// node did not discover (a claim prepared before a GPU disappeared).
func (m *Monitor) deviceIndex(uuid string) string {
	if g, ok := m.gpus[uuid]; ok {
		return strconv.Itoa(g.Index)
	}
	return ""
}
