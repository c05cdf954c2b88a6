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

package webview

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/cluster/inspect"
)

// SourceOptions tune a Source.
type SourceOptions struct {
	// Interval is the least time between two models: changes within it
	// are folded into one rebuild (default 1s).
	Interval time.Duration
	// Explain bounds the Pending pods explained per rebuild, the first
	// ones by namespace and name (default 10): each explanation runs the
	// allocator over every node.
	Explain int
	// SyncTimeout bounds the wait for the first list of every kind
	// (default 1m): without list and watch rights it never comes.
	SyncTimeout time.Duration
}

// Source keeps the model of the cluster up to date from informers.
type Source struct {
	opts    SourceOptions
	factory informers.SharedInformerFactory
	changed chan struct{}

	mu      sync.Mutex
	model   *Model
	version uint64
	// updated is closed when a new model is published.
	updated chan struct{}
	// explained caches explanations by namespace/pod until the next
	// rebuild replaces them, so that a rebuild shows the last one while it
	// works out the new.
	explained map[string]PendingPod
}

// NewSource makes a Source reading the cluster through client.
func NewSource(client kubernetes.Interface, opts SourceOptions) *Source {
	if opts.Interval <= 0 {
		opts.Interval = time.Second
	}
	if opts.Explain <= 0 {
		opts.Explain = 10
	}
	if opts.SyncTimeout <= 0 {
		opts.SyncTimeout = time.Minute
	}
	s := &Source{
		opts:      opts,
		factory:   informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(trim)),
		changed:   make(chan struct{}, 1),
		updated:   make(chan struct{}),
		explained: map[string]PendingPod{},
	}
	notify := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { s.poke() },
		UpdateFunc: func(any, any) { s.poke() },
		DeleteFunc: func(any) { s.poke() },
	}
	for _, inf := range []cache.SharedIndexInformer{
		s.factory.Resource().V1().ResourceSlices().Informer(),
		s.factory.Resource().V1().ResourceClaims().Informer(),
		s.factory.Resource().V1().DeviceClasses().Informer(),
		s.factory.Resource().V1().ResourceClaimTemplates().Informer(),
		s.factory.Core().V1().Pods().Informer(),
		s.factory.Core().V1().Nodes().Informer(),
	} {
		// Adding a handler to an informer that has not started cannot fail.
		_, _ = inf.AddEventHandler(notify)
	}
	return s
}

// trim drops what no view reads before an object enters the cache: the
// memory of the command at a thousand nodes is mostly pods and nodes.
func trim(obj any) (any, error) {
	if o, ok := obj.(metav1.Object); ok {
		o.SetManagedFields(nil)
	}
	switch o := obj.(type) {
	case *corev1.Pod:
		o.Annotations = nil
		o.Spec.Volumes = nil
		trimContainers(o.Spec.Containers)
		trimContainers(o.Spec.InitContainers)
		o.Spec.EphemeralContainers = nil
		o.Status = corev1.PodStatus{Phase: o.Status.Phase, Conditions: o.Status.Conditions,
			ResourceClaimStatuses: o.Status.ResourceClaimStatuses}
	case *corev1.Node:
		o.Annotations = nil
		o.Status.Images = nil
	}
	return obj, nil
}

// trimContainers keeps what the scheduler's fit checks read: the
// resources (and a restart policy, which makes an init container a
// sidecar).
func trimContainers(cs []corev1.Container) {
	for i, c := range cs {
		cs[i] = corev1.Container{Name: c.Name, Resources: c.Resources, RestartPolicy: c.RestartPolicy}
	}
}

func (s *Source) poke() {
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// Run lists and watches the cluster and rebuilds the model after each
// change until ctx ends. It returns an error when the first lists do not
// complete within the sync timeout.
func (s *Source) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	s.factory.Start(ctx.Done())
	defer s.factory.Shutdown()
	syncCtx, cancel := context.WithTimeout(ctx, s.opts.SyncTimeout)
	synced := s.factory.WaitForCacheSync(syncCtx.Done())
	cancel()
	var missing []error
	for kind, ok := range synced {
		if !ok {
			missing = append(missing, fmt.Errorf("list and watch %v: not done within %v (does your user have the rights?)", kind, s.opts.SyncTimeout))
		}
	}
	if err := errors.Join(missing...); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	for {
		start := time.Now()
		s.rebuild(ctx)
		logger.V(4).Info("Model rebuilt", "duration", time.Since(start))
		select {
		case <-ctx.Done():
			return nil
		case <-s.changed:
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Until(start.Add(s.opts.Interval))):
		}
	}
}

// rebuild publishes the model of the informers' current content, then
// explains the first Pending pods and publishes again with their reasons.
func (s *Source) rebuild(ctx context.Context) {
	logger := klog.FromContext(ctx)
	snap, err := s.snapshot()
	if err != nil {
		// Listers over a synced cache do not fail; say so if they do.
		logger.Error(err, "Read the informers' cache")
		return
	}
	m := Build(snap)
	s.mu.Lock()
	known := s.explained
	s.mu.Unlock()
	for i := range m.Pending {
		if old, ok := known[m.Pending[i].Namespace+"/"+m.Pending[i].Name]; ok {
			m.Pending[i].Why, m.Pending[i].WhyError = old.Why, old.WhyError
		}
	}
	if len(m.Pending) == 0 {
		s.publish(m, map[string]PendingPod{})
		return
	}
	s.publish(m, nil)
	explained := *m
	explained.Pending = append([]PendingPod(nil), m.Pending...)
	cache := map[string]PendingPod{}
	for i := range explained.Pending {
		p := &explained.Pending[i]
		if i >= s.opts.Explain {
			p.Why, p.WhyError = nil, ""
			continue
		}
		exp, err := inspect.Why(ctx, snap, p.Namespace, p.Name)
		p.Why, p.WhyError = exp, ""
		if err != nil {
			p.WhyError = err.Error()
		}
		cache[p.Namespace+"/"+p.Name] = *p
	}
	s.publish(&explained, cache)
}

// publish makes m the current model and wakes the update streams;
// explained replaces the cache of explanations unless nil.
func (s *Source) publish(m *Model, explained map[string]PendingPod) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.model = m
	s.version++
	if explained != nil {
		s.explained = explained
	}
	close(s.updated)
	s.updated = make(chan struct{})
}

// Current returns the current model (nil before the first), its version
// and a channel closed when a newer one is published.
func (s *Source) Current() (*Model, uint64, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.model, s.version, s.updated
}

// snapshot copies the informers' content into an inspect.Snapshot.
func (s *Source) snapshot() (*inspect.Snapshot, error) {
	snap := &inspect.Snapshot{}
	res := s.factory.Resource().V1()
	core := s.factory.Core().V1()
	slices, err := res.ResourceSlices().Lister().List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list ResourceSlices: %w", err)
	}
	snap.Slices = deref(slices)
	claims, err := res.ResourceClaims().Lister().List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list ResourceClaims: %w", err)
	}
	snap.Claims = deref(claims)
	classes, err := res.DeviceClasses().Lister().List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list DeviceClasses: %w", err)
	}
	snap.Classes = deref(classes)
	templates, err := res.ResourceClaimTemplates().Lister().List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list ResourceClaimTemplates: %w", err)
	}
	snap.Templates = deref(templates)
	nodes, err := core.Nodes().Lister().List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	snap.Nodes = deref(nodes)
	pods, err := core.Pods().Lister().List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	snap.Pods = deref(pods)
	return snap, nil
}

// deref copies the cache's objects into values, as Snapshot holds them;
// the copies are shallow and only read.
func deref[T any](in []*T) []T {
	out := make([]T, len(in))
	for i, p := range in {
		out[i] = *p
	}
	return out
}
