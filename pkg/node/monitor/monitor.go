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
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/prometheus/client_golang/prometheus"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/region"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/discovery"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/prepare"
)

// Monitor collects usage and publishes it. Create it with New, then call
// Run.
type Monitor struct {
	opts    Options
	logger  klog.Logger
	gpus    map[string]discovery.Info
	metrics *descs
	now     func() time.Time

	informers   informers.SharedInformerFactory
	claimLister resourcelisters.ResourceClaimLister

	regionErrors    *prometheus.CounterVec
	collectDuration prometheus.Histogram
	statusWrites    *prometheus.CounterVec

	// mu serialises collections and guards everything below.
	mu         sync.Mutex
	last       *snapshot
	counters   map[counterKey]*counterState
	regionErrs map[types.UID]string
	// unaccounted is the last fail-closed state logged per claim.
	unaccounted map[types.UID]unaccounted
	regionMaps  map[types.UID]*region.Mapping
	// readers are the per-goroutine Readers of parallel collections.
	readers []*region.Reader
	nvml    nvml.Interface // set while Run holds NVML initialised
	handles map[string]nvml.Device
	status  map[types.UID]*statusRecord

	// recorder and events belong to Run's goroutine.
	recorder record.EventRecorder
	events   limitEvents
}

// New validates opts and registers the monitor's metrics. Nothing is read
// until the first scrape or Run. Collections a scrape triggers log through
// ctx's logger.
func New(ctx context.Context, opts Options) (*Monitor, error) {
	if err := opts.validate(); err != nil {
		return nil, fmt.Errorf("monitor options: %w", err)
	}
	if opts.Interval == 0 {
		opts.Interval = DefaultInterval
	}
	if opts.StatusInterval == 0 {
		opts.StatusInterval = DefaultStatusInterval
	}
	if opts.EventInterval == 0 {
		opts.EventInterval = DefaultEventInterval
	}
	m := &Monitor{
		opts:        opts,
		logger:      klog.FromContext(ctx),
		gpus:        make(map[string]discovery.Info, len(opts.GPUs)),
		metrics:     newDescs(),
		now:         time.Now,
		counters:    map[counterKey]*counterState{},
		regionErrs:  map[types.UID]string{},
		regionMaps:  map[types.UID]*region.Mapping{},
		handles:     map[string]nvml.Device{},
		status:      map[types.UID]*statusRecord{},
		recorder:    opts.EventRecorder,
		events:      limitEvents{reported: map[counterKey]uint64{}, lastSent: map[types.UID]time.Time{}},
		unaccounted: map[types.UID]unaccounted{},
		regionErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vgpu_dra_monitor_region_errors_total",
			Help: "Shared regions or NVML queries the monitor could not read, by reason (vanished, corrupt, unreadable, nvml).",
		}, []string{"reason"}),
		collectDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "vgpu_dra_monitor_collection_duration_seconds",
			Help:    "Time to read all prepared claims' shared regions and NVML once, in seconds.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
		}),
		statusWrites: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vgpu_dra_monitor_claim_status_writes_total",
			Help: "ResourceClaim status.devices writes, by result (success or error).",
		}, []string{"result"}),
	}
	for _, g := range opts.GPUs {
		m.gpus[g.UUID] = g
	}
	if opts.KubeClient != nil {
		m.informers = informers.NewSharedInformerFactoryWithOptions(opts.KubeClient, 0,
			informers.WithTransform(stripClaim))
		m.claimLister = m.informers.Resource().V1().ResourceClaims().Lister()
	}
	for _, c := range []prometheus.Collector{m.regionErrors, m.collectDuration, m.statusWrites, (*collector)(m)} {
		if err := opts.Registry.Register(c); err != nil {
			return nil, fmt.Errorf("register monitor metrics: %w", err)
		}
	}
	return m, nil
}

// stripClaim keeps the informer's copy of each claim small: the monitor
// only needs reservedFor and its own status entries.
func stripClaim(obj any) (any, error) {
	if c, ok := obj.(*resourceapi.ResourceClaim); ok {
		c.ManagedFields = nil
		c.Annotations = nil
		c.Spec = resourceapi.ResourceClaimSpec{}
	}
	return obj, nil
}

// Run initialises NVML, starts watching ResourceClaims and writes claim
// status until ctx ends. Metrics are served whether or not Run runs.
func (m *Monitor) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	if m.opts.NVML != nil {
		if ret := m.opts.NVML.Init(); ret != nvml.SUCCESS {
			return fmt.Errorf("initialise NVML for usage metrics: %w", ret)
		}
		m.mu.Lock()
		m.nvml = m.opts.NVML
		m.mu.Unlock()
		defer func() {
			m.mu.Lock()
			m.nvml = nil
			m.handles = map[string]nvml.Device{}
			m.mu.Unlock()
			if ret := m.opts.NVML.Shutdown(); ret != nvml.SUCCESS {
				logger.Error(ret, "NVML shutdown failed")
			}
		}()
	}
	if m.informers == nil {
		<-ctx.Done()
		return nil
	}
	m.informers.Start(ctx.Done())
	defer m.informers.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), m.informers.Resource().V1().ResourceClaims().Informer().HasSynced) {
		return nil
	}
	if m.recorder == nil {
		recorder, stop := newEventRecorder(ctx, m.opts)
		defer stop()
		m.recorder = recorder
	}
	logger.V(2).Info("Writing ResourceClaim status and limit events", "interval", m.opts.Interval, "statusInterval", m.opts.StatusInterval, "eventInterval", m.opts.EventInterval)
	ticker := time.NewTicker(m.opts.Interval)
	defer ticker.Stop()
	for {
		if m.opts.StatusInterval >= 0 {
			m.writeStatuses(ctx)
		}
		m.emitLimitEvents(ctx, m.snapshot(logger), m.now())
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
}

// snapshot returns the last collection if it is younger than the interval,
// else collects anew.
func (m *Monitor) snapshot(logger klog.Logger) *snapshot {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.last != nil && m.now().Sub(m.last.at) < m.opts.Interval {
		return m.last
	}
	m.last = m.collect(logger)
	return m.last
}

// podNames is the claim's consumers from status.reservedFor: the sorted pod
// names joined with ",", empty while unknown.
func (m *Monitor) podNames(c prepare.PreparedClaim) string {
	if m.claimLister == nil {
		return ""
	}
	obj, err := m.claimLister.ResourceClaims(c.Namespace).Get(c.Name)
	if err != nil || obj.UID != c.UID {
		return ""
	}
	var pods []string
	for _, r := range obj.Status.ReservedFor {
		if r.APIGroup == "" && r.Resource == "pods" {
			pods = append(pods, r.Name)
		}
	}
	slices.Sort(pods)
	return strings.Join(pods, ",")
}

// podUIDs is the claim's consumers from status.reservedFor: the UIDs of its
// pods, nil while unknown.
func (m *Monitor) podUIDs(c prepare.PreparedClaim) []types.UID {
	if m.claimLister == nil {
		return nil
	}
	obj, err := m.claimLister.ResourceClaims(c.Namespace).Get(c.Name)
	if err != nil || obj.UID != c.UID {
		return nil
	}
	var pods []types.UID
	for _, r := range obj.Status.ReservedFor {
		if r.APIGroup == "" && r.Resource == "pods" {
			pods = append(pods, r.UID)
		}
	}
	return pods
}

// procRoot is the host's /proc.
func (m *Monitor) procRoot() string {
	if m.opts.ProcRoot == "" {
		return "/proc"
	}
	return m.opts.ProcRoot
}

// sampleGPUs asks NVML for each GPU's memory use and utilisation; a GPU
// NVML cannot answer for is left out and counted as an error.
func (m *Monitor) sampleGPUs(logger klog.Logger) map[string]gpuSample {
	if m.nvml == nil {
		return nil
	}
	out := make(map[string]gpuSample, len(m.gpus))
	for uuid := range m.gpus {
		s, err := m.sampleGPU(uuid)
		if err != nil {
			m.regionErrors.WithLabelValues(reasonNVML).Inc()
			logger.V(2).Info("NVML did not report GPU usage", "uuid", uuid, "err", err)
			continue
		}
		out[uuid] = s
	}
	return out
}

func (m *Monitor) sampleGPU(uuid string) (gpuSample, error) {
	dev, ok := m.handles[uuid]
	if !ok {
		var ret nvml.Return
		dev, ret = m.nvml.DeviceGetHandleByUUID(uuid)
		if ret != nvml.SUCCESS {
			return gpuSample{}, fmt.Errorf("get handle: %w", ret)
		}
		m.handles[uuid] = dev
	}
	mem, ret := dev.GetMemoryInfo()
	if ret != nvml.SUCCESS {
		return gpuSample{}, fmt.Errorf("memory info: %w", ret)
	}
	s := gpuSample{usedBytes: min(mem.Used, mem.Total), totalBytes: mem.Total}
	// NVIDIA's driver reports no utilisation for a GPU in MIG mode: its memory still counts.
	util, ret := dev.GetUtilizationRates()
	switch ret {
	case nvml.SUCCESS:
		s.utilization, s.utilizationKnown = min(util.Gpu, 100), true
	case nvml.ERROR_NOT_SUPPORTED:
	default:
		return gpuSample{}, fmt.Errorf("utilisation: %w", ret)
	}
	if m.opts.OnCollect != nil {
		if v2, ret := dev.GetMemoryInfo_v2(); ret == nvml.SUCCESS {
			s.reservedBytes = min(v2.Reserved, v2.Total)
		}
		if procs, ret := dev.GetComputeRunningProcesses(); ret == nvml.SUCCESS {
			s.processes = make(map[uint32]uint64, len(procs))
			for _, p := range procs {
				s.processes[p.Pid] = saturatingAdd(s.processes[p.Pid], min(p.UsedGpuMemory, mem.Total))
			}
		}
	}
	return s, nil
}
