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
	"net/http"
	"net/http/pprof"
	"os"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	resourceinformers "k8s.io/client-go/informers/resource/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/cluster/admission"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/cluster/allocator"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/cluster/allocmetrics"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/cluster/apiprobe"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/cluster/hami"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/cluster/hami/templates"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/cluster/quota"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/common/apifeatures"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/common/daemon"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/common/version"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/names"
)

// run serves until ctx ends or leadership is lost. Webhooks start only
// after the informer caches have synced, so that no admission is decided
// on an empty cache (e.g. a quota that sees no claims).
func run(ctx context.Context, o *options) error {
	logger := klog.FromContext(ctx)
	logger.Info("Starting", "version", version.Version, "namespace", o.podNamespace, "webhookAddress", o.webhookAddress)

	client, err := daemon.NewKubeClient(o.kube)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	factory := newInformerFactory(client)
	// Only generated templates matter here; filtering keeps the cache small.
	templateFactory := newInformerFactory(client, informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
		lo.LabelSelector = labels.SelectorFromSet(labels.Set{hami.TemplateLabel: "true"}).String()
	}))
	namespaces := factory.Core().V1().Namespaces().Lister()
	slices := factory.Resource().V1().ResourceSlices().Lister()
	claims := factory.Resource().V1().ResourceClaims().Lister()
	classes := factory.Resource().V1().DeviceClasses().Lister()
	templateLister := templateFactory.Resource().V1().ResourceClaimTemplates().Lister()

	matcher := &admission.ClassMatcher{DriverName: names.DriverName, Names: sets.New(o.deviceClasses...), Classes: classes}
	gate := newPolicyGate(o, client, factory, matcher)
	largestGPU, err := newLargestGPU(factory.Resource().V1().ResourceSlices())
	if err != nil {
		return err
	}
	// Requests are sized by the scheduler's own allocator over the
	// published devices, so a charge is what the claim will be granted.
	sizer := quota.NewSizer(names.DriverName, allocator.ClassLister(classes), slices)
	charger := quota.Charger{IsOurs: matcher.IsOurs, Grants: sizer}
	enforcer := &quota.Enforcer{
		Client: client, UsageRecordNamespace: o.podNamespace, Namespaces: namespaces, Claims: claims,
		Charger: charger, Grace: o.quotaGrace,
	}

	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	registry.MustRegister(&allocmetrics.Collector{DriverName: names.DriverName, Slices: slices, Claims: claims})
	registry.MustRegister(&quota.Collector{Namespaces: namespaces, Claims: claims, Charger: charger})
	leaderGauge := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "vgpu_dra_controller_leader",
		Help: "1 on the replica that is the elected leader, else 0. Every replica exports the same allocation metrics; select one with this.",
	})
	registry.MustRegister(leaderGauge)
	webhookMetrics, err := admission.NewMetrics(registry)
	if err != nil {
		return err
	}

	factory.Start(ctx.Done())
	templateFactory.Start(ctx.Done())
	defer factory.Shutdown()
	defer templateFactory.Shutdown()
	var ready atomic.Bool
	if o.httpAddress != "" {
		stop, err := daemon.ServeHTTP(ctx, o.httpAddress, httpHandler(registry, &ready, o.profiling))
		if err != nil {
			return err
		}
		defer stop(o.shutdownGrace)
	}
	if err := waitSynced(ctx, factory, templateFactory); err != nil {
		return err
	}
	ready.Store(true)
	logger.Info("Informer caches synced")

	mux := http.NewServeMux()
	mux.Handle(admission.ValidateClaimsPath, admission.Handler("validate-claims", (&admission.ClaimValidator{
		DriverName:       names.DriverName,
		Classes:          matcher,
		AdminOnlyClasses: sets.New(o.adminOnlyClasses...),
		AdminNamespaces:  sets.New(o.adminNamespaces...),
		MaxMemoryBytes:   o.maxMemory.Value(),
		LargestGPUMemory: largestGPU.get,
		Quota:            enforcer,
		Grants:           sizer,
	}).Admit, webhookMetrics))
	mux.Handle(admission.MutatePodsPath, admission.Handler("mutate-pods", (&admission.PodMutator{
		Compat:        hami.Config{Resources: o.resourceNames(), DeviceClassName: o.hamiDeviceClass, MIGDeviceClassName: o.hamiMIGDeviceClass, MPSDeviceClassName: o.hamiMPSDeviceClass, DriverName: names.DriverName},
		AllNamespaces: o.hamiAllNamespaces,
		Client:        client,
		Namespaces:    namespaces,
		Slices:        slices,
		Templates:     &templates.Ensurer{Client: client, Templates: templateLister, TouchInterval: o.templateTouch},
	}).Admit, webhookMetrics))
	mux.Handle(admission.GatePodsPath, admission.Handler("gate-pods", gate.Admit, webhookMetrics))
	served, err := admission.Serve(ctx, admission.ServerOptions{
		Address: o.webhookAddress, CertFile: o.tlsCertFile, KeyFile: o.tlsKeyFile,
		ReloadInterval: o.tlsReloadInterval, ShutdownGrace: o.shutdownGrace,
	}, mux)
	if err != nil {
		return err
	}
	go func() {
		if err := <-served; err != nil {
			cancel(fmt.Errorf("webhook server: %w", err))
		}
	}()

	features, stopEvents, err := newFeatureReporter(ctx, o, client, registry)
	if err != nil {
		return err
	}
	defer stopEvents()
	go probeAPI(ctx, client, o.podNamespace, features)

	lead := func(ctx context.Context) {
		leaderGauge.Set(1)
		runLeader(ctx, o, client, factory, matcher, templateLister, enforcer)
	}
	if o.leaderElect {
		if err := runLeaderElection(ctx, cancel, o, client, lead); err != nil {
			return err
		}
	} else {
		go lead(ctx)
	}

	<-ctx.Done()
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return nil
}

// newFeatureReporter reports missing feature gates with Events on the
// controller's own pod (none when --pod-name is unset).
func newFeatureReporter(ctx context.Context, o *options, client kubernetes.Interface, reg prometheus.Registerer) (*apifeatures.Reporter, func(), error) {
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	var pod runtime.Object
	if o.podName != "" {
		pod = &corev1.ObjectReference{Kind: "Pod", Namespace: o.podNamespace, Name: o.podName}
	}
	r, err := apifeatures.NewReporter(reg, b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "vgpu-dra-controller"}), pod)
	if err != nil {
		b.Shutdown()
		return nil, nil, err
	}
	return r, b.Shutdown, nil
}

// apiProbeInterval is how often the feature-gate probe is retried while
// the API server does not answer it.
const apiProbeInterval = 10 * time.Second

// probeAPI asks the API server, in a dry run, whether it keeps the fields
// of the gates the driver relies on, retrying until it answers, and
// reports each gate found off.
func probeAPI(ctx context.Context, client kubernetes.Interface, namespace string, features *apifeatures.Reporter) {
	logger := klog.FromContext(ctx)
	var dropped []apifeatures.Dropped
	err := wait.PollUntilContextCancel(ctx, apiProbeInterval, true, func(ctx context.Context) (bool, error) {
		var err error
		if dropped, err = apiprobe.Probe(ctx, client, namespace); err != nil {
			logger.Error(err, "Probing the API server's feature gates failed; trying again", "in", apiProbeInterval)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return
	}
	for _, d := range dropped {
		features.Missing(ctx, d.Gate, d.Field, "claims that ask for part of a GPU are stored asking for a whole one: every GPU is exclusive, one claim per GPU")
	}
	if len(dropped) == 0 {
		logger.Info("The API server keeps the fields of the feature gates the driver relies on")
	}
}

// newPolicyGate builds the scheduling-gate webhook. It reads every
// ResourceClaimTemplate from the factory's cache: the gate judges users'
// templates, which the cache of generated templates does not hold, and
// reading each from the API server would cost one request per pod created,
// taken from the same client rate limit as the policy allocator's writes.
func newPolicyGate(o *options, client kubernetes.Interface, factory informers.SharedInformerFactory, matcher *admission.ClassMatcher) *admission.PolicyGate {
	return &admission.PolicyGate{
		Mode:       admission.PolicyAllocationMode(o.policyAllocation),
		Classes:    matcher,
		Client:     client,
		Namespaces: factory.Core().V1().Namespaces().Lister(),
		Templates:  factory.Resource().V1().ResourceClaimTemplates().Lister(),
		Claims:     factory.Resource().V1().ResourceClaims().Lister(),
	}
}

// runLeader runs what only the leader may do: the policy allocator (the
// single decider, so that it never books a GPU twice) and the garbage
// collectors. The pod and node informers they need are started only here,
// so followers do not cache every pod of the cluster.
func runLeader(ctx context.Context, o *options, client kubernetes.Interface, factory informers.SharedInformerFactory,
	matcher *admission.ClassMatcher, templateLister resourcelisters.ResourceClaimTemplateLister, enforcer *quota.Enforcer) {
	logger := klog.FromContext(ctx)
	leaderFactory := newInformerFactory(client)
	defer leaderFactory.Shutdown()
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	defer broadcaster.Shutdown()
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	allocation, err := allocator.NewController(allocator.ControllerOptions{
		Client: client,
		Pods:   leaderFactory.Core().V1().Pods(),
		Nodes:  leaderFactory.Core().V1().Nodes(),
		Claims: factory.Resource().V1().ResourceClaims(),
		Slices: factory.Resource().V1().ResourceSlices(),
		Allocator: allocator.Config{
			DriverName: names.DriverName,
			Classes:    allocator.ClassLister(factory.Resource().V1().DeviceClasses().Lister()),
			IsOurs:     matcher.IsOurs,
		},
		Defaults:      o.policies(),
		FallbackAfter: o.fallbackAfter,
		Workers:       o.policyWorkers,
		Recorder:      broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "vgpu-dra-controller"}),
	})
	if err != nil {
		logger.Error(err, "Policy allocator and garbage collectors not started")
		return
	}
	pods := leaderFactory.Core().V1().Pods().Lister()
	leaderFactory.Start(ctx.Done())
	if err := waitSynced(ctx, leaderFactory); err != nil {
		logger.Error(err, "Policy allocator and garbage collectors not started")
		return
	}
	if err := allocation.Enqueue(); err != nil {
		logger.Error(err, "Queueing gated pods and allocated claims")
	}
	go allocation.Run(ctx)

	logger = logger.WithName("gc")
	ctx = klog.NewContext(ctx, logger)
	collector := &templates.Collector{Client: client, Templates: templateLister, Pods: pods, Grace: o.templateGrace}
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if n, err := collector.CollectOnce(ctx); err != nil {
			logger.Error(err, "Collecting unused ResourceClaimTemplates")
		} else if n > 0 {
			logger.Info("Deleted unused ResourceClaimTemplates", "count", n)
		}
		if err := enforcer.CollectGarbage(ctx); err != nil {
			logger.Error(err, "Collecting GPU quota usage records")
		}
	}, o.garbageCollectEvery)
}

// runLeaderElection campaigns in the background. Losing leadership ends the
// process (through cancel): a former leader must not keep collecting.
func runLeaderElection(ctx context.Context, cancel context.CancelCauseFunc, o *options, client kubernetes.Interface, lead func(context.Context)) error {
	logger := klog.FromContext(ctx)
	identity := o.podName
	if identity == "" {
		host, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("leader election identity: --pod-name is empty and the host name is unknown: %w", err)
		}
		identity = host
	}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, o.podNamespace, o.leaseName,
		client.CoreV1(), client.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: identity})
	if err != nil {
		return fmt.Errorf("leader election lock %s/%s: %w", o.podNamespace, o.leaseName, err)
	}
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   o.leaseDuration,
		RenewDeadline:   o.renewDeadline,
		RetryPeriod:     o.retryPeriod,
		ReleaseOnCancel: true,
		Name:            o.leaseName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				logger.Info("Became leader", "identity", identity)
				lead(ctx)
			},
			OnStoppedLeading: func() {
				cancel(fmt.Errorf("lost leadership of lease %s/%s", o.podNamespace, o.leaseName))
			},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	go elector.Run(ctx)
	return nil
}

// largestGPU is the largest memory published by a GPU of this driver. The
// claim webhook asks on every admission; going through every device each
// time was half of dra-controller's CPU at 1,000 nodes (docs/scale.md), so
// the value is recomputed only after a ResourceSlice changed.
type largestGPU struct {
	slices resourcelisters.ResourceSliceLister
	stale  atomic.Bool
	value  atomic.Int64
	// handled reports whether the handler has seen the informer's initial
	// slices (their notifications may come after the cache synced).
	handled cache.InformerSynced
}

func newLargestGPU(informer resourceinformers.ResourceSliceInformer) (*largestGPU, error) {
	l := &largestGPU{slices: informer.Lister()}
	l.stale.Store(true)
	changed := func(any) { l.stale.Store(true) }
	reg, err := informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: changed, UpdateFunc: func(_, obj any) { changed(obj) }, DeleteFunc: changed,
	})
	if err != nil {
		return nil, fmt.Errorf("watch ResourceSlices for the largest GPU: %w", err)
	}
	l.handled = reg.HasSynced
	return l, nil
}

// get returns the largest memory in bytes, 0 when nothing is published.
// A change during the computation marks the value stale again, so it is
// never kept behind the slices.
func (l *largestGPU) get() int64 {
	if !l.stale.Swap(false) {
		return l.value.Load()
	}
	all, err := l.slices.List(labels.Everything())
	if err != nil {
		l.stale.Store(true)
		return l.value.Load()
	}
	var most int64
	for _, p := range hami.Products(all, names.DriverName) {
		if p.Profile == "" {
			most = max(most, p.MemoryBytes)
		}
	}
	l.value.Store(most)
	return most
}

// waitSynced waits until every informer of the factories has synced.
func waitSynced(ctx context.Context, factories ...informers.SharedInformerFactory) error {
	for _, f := range factories {
		for typ, synced := range f.WaitForCacheSync(ctx.Done()) {
			if !synced {
				return fmt.Errorf("informer cache for %v did not sync: %w", typ, context.Cause(ctx))
			}
		}
	}
	return nil
}

// httpHandler serves /metrics, /healthz and /readyz (ready once the
// informer caches have synced), and with profiling Go's pprof handlers.
func httpHandler(registry *prometheus.Registry, ready *atomic.Bool, profiling bool) http.Handler {
	mux := http.NewServeMux()
	if profiling {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	mux.Handle("/metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{Registry: registry}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !ready.Load() {
			http.Error(w, "informer caches not synced", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	return mux
}
