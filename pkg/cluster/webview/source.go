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
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/klog/v2"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/cluster/inspect"
)

// SourceOptions tune a Source.
type SourceOptions struct {
	// Interval is the least time between two models: changes within it
	// are folded into one rebuild (default 1s).
	Interval time.Duration
	// ExplainTimeout bounds the work on one pod's explanation (default
	// 20s): each runs the allocator over every node, about a second per
	// pod at 1,000 nodes of 8 GPUs.
	ExplainTimeout time.Duration
	// Reexplain is the least age of an explanation before a change of the
	// cluster has it worked out again (default 30s), so that a cluster
	// that changes every second does not keep a core explaining.
	Reexplain time.Duration
	// SyncTimeout bounds the wait for the first list of every kind
	// (default 1m): without list and watch rights it never comes.
	SyncTimeout time.Duration
}

// Source keeps the model of the cluster up to date from informers.
type Source struct {
	opts SourceOptions
	// fleet lists the GPUs (ResourceSlices, Nodes, DeviceClasses) and is
	// started first, so that the first page shows them while work lists
	// what is booked and waiting (ResourceClaims, their templates, Pods):
	// ten thousand of each at the scale benchmark's size.
	fleet, work informers.SharedInformerFactory
	changed     chan struct{}

	// wake tells the explainer that pods were queued.
	wake chan struct{}

	mu      sync.Mutex
	model   *Model
	version uint64
	// updated is closed when a new model is published.
	updated chan struct{}
	// generation counts the rebuilds.
	generation uint64
	// pending are the model's Pending pods (namespace/name).
	pending map[string]bool
	// explained holds the explanations by namespace/name while the pod is
	// Pending; a rebuild shows the last one until a newer is worked out.
	explained map[string]explanation
	// queue are the pods to explain, in the order pages asked for them.
	queue  []string
	queued map[string]bool
}

// explanation is the `why` of a Pending pod and when it was worked out.
type explanation struct {
	why        *inspect.Explanation
	err        string
	at         time.Time
	generation uint64
}

// NewSource makes a Source reading the cluster through client.
func NewSource(client kubernetes.Interface, opts SourceOptions) *Source {
	if opts.Interval <= 0 {
		opts.Interval = time.Second
	}
	if opts.ExplainTimeout <= 0 {
		opts.ExplainTimeout = 20 * time.Second
	}
	if opts.Reexplain <= 0 {
		opts.Reexplain = 30 * time.Second
	}
	if opts.SyncTimeout <= 0 {
		opts.SyncTimeout = time.Minute
	}
	trim := newTrimmer().trim
	s := &Source{
		opts:      opts,
		fleet:     informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(trim)),
		work:      informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(trim)),
		changed:   make(chan struct{}, 1),
		wake:      make(chan struct{}, 1),
		updated:   make(chan struct{}),
		pending:   map[string]bool{},
		explained: map[string]explanation{},
		queued:    map[string]bool{},
	}
	notify := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { s.poke() },
		UpdateFunc: func(any, any) { s.poke() },
		DeleteFunc: func(any) { s.poke() },
	}
	for _, inf := range []cache.SharedIndexInformer{
		s.fleet.Resource().V1().ResourceSlices().Informer(),
		s.fleet.Resource().V1().DeviceClasses().Informer(),
		s.fleet.Core().V1().Nodes().Informer(),
		s.work.Resource().V1().ResourceClaims().Informer(),
		s.work.Resource().V1().ResourceClaimTemplates().Informer(),
		s.work.Core().V1().Pods().Informer(),
	} {
		// Adding a handler to an informer that has not started cannot fail.
		_, _ = inf.AddEventHandler(notify)
	}
	return s
}

// trimmer makes the objects entering the informers' cache small: see
// trim. Parts that thousands of objects have equal it keeps once, by
// their protobuf encoding, and the objects share them (the cache's
// objects are never written).
type trimmer struct {
	mu sync.Mutex
	// capacities are the devices' capacity maps: a handful (one per GPU
	// product and MIG profile) for the thousands of devices of a fleet.
	capacities map[string]map[resourceapi.QualifiedName]resourceapi.DeviceCapacity
	// requests are pods' containers reduced to one holding the pod's
	// requests, and placements pods' tolerations, node selector and
	// required node affinity: pods of one workload have them equal.
	requests   map[string][]corev1.Container
	placements map[string]corev1.PodSpec
	// claimSpecs are claims' specs: equal for the claims of a template.
	claimSpecs map[string]resourceapi.ResourceClaimSpec
}

// sharedKept bounds the distinct values the trimmer keeps of each kind:
// past it the table starts again, which costs sharing, not correctness.
const sharedKept = 1024

func newTrimmer() *trimmer {
	return &trimmer{
		capacities: map[string]map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{},
		requests:   map[string][]corev1.Container{},
		placements: map[string]corev1.PodSpec{},
		claimSpecs: map[string]resourceapi.ResourceClaimSpec{},
	}
}

// shared returns the value table holds under key, adding v when it is
// the first.
func shared[T any](table map[string]T, key string, v T) T {
	if kept, ok := table[key]; ok {
		return kept
	}
	if len(table) >= sharedKept {
		clear(table)
	}
	table[key] = v
	return v
}

// marshaler is an API type's protobuf encoding.
type marshaler interface{ Marshal() ([]byte, error) }

// protoKey is v's protobuf encoding (the generated code writes map
// entries sorted, so equal values have equal keys), false when it does
// not encode (a decoded value always does): v is then kept to itself.
func protoKey(v marshaler) (string, bool) {
	b, err := v.Marshal()
	return string(b), err == nil
}

// trim drops what no view reads before an object enters the cache: the
// memory of the command at a thousand nodes is mostly slices, pods and
// claims. What stays is what the page and inspect.Why read: a pod's
// claims, gates, phase and node, and what the scheduler's fit checks
// read (its requests, tolerations, node selector and required
// affinity); a node's labels, taints, allocatable resources and Ready
// condition.
func (t *trimmer) trim(obj any) (any, error) {
	if o, ok := obj.(metav1.Object); ok {
		o.SetManagedFields(nil)
	}
	switch o := obj.(type) {
	case *corev1.Pod:
		o.Annotations, o.Labels, o.OwnerReferences = nil, nil, nil
		spec := t.placement(o.Spec)
		spec.NodeName, spec.ResourceClaims, spec.SchedulingGates = o.Spec.NodeName, o.Spec.ResourceClaims, o.Spec.SchedulingGates
		spec.Containers = t.requestsOf(o)
		o.Spec = spec
		o.Status = corev1.PodStatus{Phase: o.Status.Phase, ResourceClaimStatuses: o.Status.ResourceClaimStatuses}
	case *corev1.Node:
		o.Annotations, o.OwnerReferences = nil, nil
		status := corev1.NodeStatus{Allocatable: o.Status.Allocatable}
		for _, c := range o.Status.Conditions {
			if c.Type == corev1.NodeReady {
				status.Conditions = []corev1.NodeCondition{{Type: c.Type, Status: c.Status}}
			}
		}
		o.Status = status
	case *resourceapi.ResourceClaim:
		// Ten thousand of them at the scale benchmark's size: of the
		// devices' status only the plugin's data is read.
		o.Annotations = nil
		for i := range o.Status.Devices {
			d := &o.Status.Devices[i]
			d.Conditions, d.NetworkData = nil, nil
		}
		if key, ok := protoKey(&o.Spec); ok {
			t.mu.Lock()
			o.Spec = shared(t.claimSpecs, key, o.Spec)
			t.mu.Unlock()
		}
	case *resourceapi.ResourceSlice:
		t.share(o)
	}
	return obj, nil
}

// placement is a spec holding only what the scheduler's fit checks read
// of where a pod may run: its tolerations, node selector and required
// node affinity.
func (t *trimmer) placement(in corev1.PodSpec) corev1.PodSpec {
	spec := corev1.PodSpec{Tolerations: in.Tolerations, NodeSelector: in.NodeSelector}
	if a := in.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution}}
	}
	key, ok := protoKey(&spec)
	if !ok {
		return spec
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return shared(t.placements, key, spec)
}

// requestsOf is one container holding what the pod requests of its node
// (its containers, sidecars, init containers, pod-level resources and
// overhead, summed as the scheduler does): the fit checks read nothing
// else of the containers, and read the same sum from it.
func (t *trimmer) requestsOf(pod *corev1.Pod) []corev1.Container {
	requests := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	containers := []corev1.Container{{Name: "requests", Resources: corev1.ResourceRequirements{Requests: requests}}}
	key, ok := protoKey(&containers[0].Resources)
	if !ok {
		return containers
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return shared(t.requests, key, containers)
}

// share makes the equal parts of a slice's devices one value, read by
// all (the cache's objects are never written): the capacity maps of
// equal devices, and within the slice the attribute values the devices
// have in common. At a thousand nodes of eight GPUs the devices'
// attributes and capacities are the largest part of the command's heap.
// The attribute maps are updated in place: making new ones cost a fifth
// of the command's CPU before its first page.
func (t *trimmer) share(slice *resourceapi.ResourceSlice) {
	values := map[string]*string{}
	ints := map[int64]*int64{}
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := range slice.Spec.Devices {
		d := &slice.Spec.Devices[i]
		for name, a := range d.Attributes {
			a.StringValue = sharedString(values, a.StringValue)
			a.VersionValue = sharedString(values, a.VersionValue)
			if a.IntValue != nil {
				if v, ok := ints[*a.IntValue]; ok {
					a.IntValue = v
				} else {
					ints[*a.IntValue] = a.IntValue
				}
			}
			d.Attributes[name] = a
		}
		if key, ok := capacityKey(d.Capacity); ok {
			d.Capacity = shared(t.capacities, key, d.Capacity)
		}
	}
}

// sharedString returns the pointer to v's value that values holds,
// adding v when it is the first.
func sharedString(values map[string]*string, v *string) *string {
	if v == nil {
		return nil
	}
	if s, ok := values[*v]; ok {
		return s
	}
	values[*v] = v
	return v
}

// capacityKey is the protobuf encoding of a capacity map, its names
// sorted: equal maps have equal keys. It is false for an empty map, and
// for one that does not encode (a decoded one always does), which the
// device then keeps to itself.
func capacityKey(c map[resourceapi.QualifiedName]resourceapi.DeviceCapacity) (string, bool) {
	if len(c) == 0 {
		return "", false
	}
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(c)) {
		v := c[name]
		encoded, err := v.Marshal()
		if err != nil {
			return "", false
		}
		b.WriteString(string(name))
		b.WriteByte(0)
		b.WriteString(strconv.Itoa(len(encoded)))
		b.WriteByte(0)
		b.Write(encoded)
	}
	return b.String(), true
}

func (s *Source) poke() {
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// Run lists and watches the cluster and rebuilds the model after each
// change until ctx ends: first the GPUs, published as a model marked
// Listing, then the claims and pods. It returns an error when the first
// lists do not complete within the sync timeout.
func (s *Source) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	syncCtx, cancel := context.WithTimeout(ctx, s.opts.SyncTimeout)
	defer cancel()
	start := time.Now()
	s.fleet.Start(ctx.Done())
	defer s.fleet.Shutdown()
	if err := s.waitForSync(ctx, syncCtx, s.fleet); err != nil || ctx.Err() != nil {
		return err
	}
	logger.V(2).Info("Listed the GPUs", "duration", time.Since(start))
	s.rebuildListing(ctx)
	s.work.Start(ctx.Done())
	defer s.work.Shutdown()
	if err := s.waitForSync(ctx, syncCtx, s.work); err != nil || ctx.Err() != nil {
		return err
	}
	logger.V(2).Info("Listed claims and pods", "duration", time.Since(start))
	var explainer sync.WaitGroup
	explainer.Go(func() { s.explainLoop(ctx) })
	defer explainer.Wait()
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

// waitForSync waits for the first lists of a factory's informers.
func (s *Source) waitForSync(ctx, syncCtx context.Context, f informers.SharedInformerFactory) error {
	var missing []error
	for kind, ok := range f.WaitForCacheSync(syncCtx.Done()) {
		if !ok {
			missing = append(missing, fmt.Errorf("list and watch %v: not done within %v (does your user have the rights?)", kind, s.opts.SyncTimeout))
		}
	}
	if err := errors.Join(missing...); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

// rebuildListing publishes the model of the GPUs alone, marked Listing,
// while the claims and pods are listed.
func (s *Source) rebuildListing(ctx context.Context) {
	snap, err := s.snapshot()
	if err != nil {
		klog.FromContext(ctx).Error(err, "Read the informers' cache")
		return
	}
	m := Build(snap)
	m.Listing = true
	s.mu.Lock()
	defer s.mu.Unlock()
	s.publishLocked(m)
}

// rebuild publishes the model of the informers' current content with
// the explanations worked out so far; it never waits for one.
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
	defer s.mu.Unlock()
	pending := make(map[string]bool, len(m.Pending))
	for i := range m.Pending {
		p := &m.Pending[i]
		key := p.Namespace + "/" + p.Name
		pending[key] = true
		if e, ok := s.explained[key]; ok {
			p.Why, p.WhyError = e.why, e.err
		}
	}
	for key := range s.explained {
		if !pending[key] {
			delete(s.explained, key)
		}
	}
	s.pending = pending
	s.generation++
	s.publishLocked(m)
}

// Explain asks for the explanation of Pending pods (namespace/name) that
// a page shows: those without one, or with one older than Reexplain that
// a later change of the cluster may have made wrong, are queued for the
// explainer. Pods that are not Pending are ignored.
func (s *Source) Explain(keys ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	added := false
	for _, key := range keys {
		if !s.pending[key] || s.queued[key] {
			continue
		}
		if e, ok := s.explained[key]; ok && (e.generation == s.generation || time.Since(e.at) < s.opts.Reexplain) {
			continue
		}
		s.queue = append(s.queue, key)
		s.queued[key] = true
		added = true
	}
	if added {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// explainLoop works out the queued explanations one at a time, each
// within ExplainTimeout, and publishes the model with each as it comes,
// until ctx ends.
func (s *Source) explainLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		}
		for ctx.Err() == nil {
			key, generation, ok := s.next()
			if !ok {
				break
			}
			// Its own copy of the informers' content, a little newer than
			// the model's at most, and dropped after: the command keeps
			// no second copy of ten thousand pods.
			snap, err := s.snapshot()
			if err != nil {
				klog.FromContext(ctx).Error(err, "Read the informers' cache")
				continue
			}
			namespace, name, _ := strings.Cut(key, "/")
			start := time.Now()
			podCtx, cancel := context.WithTimeout(ctx, s.opts.ExplainTimeout)
			why, err := inspect.Why(podCtx, snap, namespace, name)
			cancel()
			e := explanation{why: why, at: time.Now(), generation: generation}
			switch {
			case ctx.Err() != nil:
				return
			case errors.Is(err, context.DeadlineExceeded):
				e.err = fmt.Sprintf("Working this out took longer than %v at this cluster's size: kubectl vgpu why -n %s %s", s.opts.ExplainTimeout, namespace, name)
			case err != nil:
				e.err = err.Error()
			}
			klog.FromContext(ctx).V(4).Info("Explained a Pending pod", "pod", key, "duration", time.Since(start), "err", err)
			s.record(key, e)
		}
	}
}

// next takes the first queued pod that is still Pending, with the
// generation of the model.
func (s *Source) next() (string, uint64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.queue) > 0 {
		key := s.queue[0]
		s.queue = s.queue[1:]
		delete(s.queued, key)
		if s.pending[key] {
			return key, s.generation, true
		}
	}
	s.queue = nil
	return "", 0, false
}

// record keeps an explanation and publishes the current model with it.
func (s *Source) record(key string, e explanation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.pending[key] {
		return
	}
	s.explained[key] = e
	m := *s.model
	m.Pending = slices.Clone(m.Pending)
	for i := range m.Pending {
		p := &m.Pending[i]
		if p.Namespace+"/"+p.Name == key {
			p.Why, p.WhyError = e.why, e.err
		}
	}
	s.publishLocked(&m)
}

// publishLocked makes m the current model and wakes the update streams.
func (s *Source) publishLocked(m *Model) {
	s.model = m
	s.version++
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
	fleet, work := s.fleet.Resource().V1(), s.work.Resource().V1()
	resourceSlices, err := fleet.ResourceSlices().Lister().List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list ResourceSlices: %w", err)
	}
	snap.Slices = deref(resourceSlices)
	claims, err := work.ResourceClaims().Lister().List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list ResourceClaims: %w", err)
	}
	snap.Claims = deref(claims)
	classes, err := fleet.DeviceClasses().Lister().List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list DeviceClasses: %w", err)
	}
	snap.Classes = deref(classes)
	templates, err := work.ResourceClaimTemplates().Lister().List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list ResourceClaimTemplates: %w", err)
	}
	snap.Templates = deref(templates)
	nodes, err := s.fleet.Core().V1().Nodes().Lister().List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	snap.Nodes = deref(nodes)
	pods, err := s.work.Core().V1().Pods().Lister().List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	snap.Pods = pods
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
