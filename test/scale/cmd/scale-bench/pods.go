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
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/names"
	"github.com/vgpu-dra/vgpu-dra-driver/test/scale"
)

type podsOptions struct {
	kubeconfig    string
	namespace     string
	arm           string
	description   string
	policy        string
	claims        bool
	pods          int
	steady        int
	rate          float64
	workers       int
	settle        time.Duration
	out           string
	schedulerPID  int
	controllerPID int
	nodes, gpus   int
	// Profiles taken during the burst, written to profileDir.
	profileDir            string
	schedulerPprof        string
	controllerPprof       string
	profileSeconds        int
	clientCert, clientKey string
}

func runPods(ctx context.Context, args []string) error {
	o := podsOptions{}
	fs := pflag.NewFlagSet("pods", pflag.ContinueOnError)
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the benchmark's API server")
	fs.StringVar(&o.namespace, "namespace", "scale", "namespace of the workload")
	fs.StringVar(&o.arm, "arm", "", "name of this arm ("+scale.ArmBaseline+", "+scale.ArmScheduler+", "+scale.ArmBinpack+", "+scale.ArmSpread+")")
	fs.StringVar(&o.description, "description", "", "what the arm measures")
	fs.StringVar(&o.policy, "policy", "", "the policy allocator's policies, for the report")
	fs.BoolVar(&o.claims, "claims", true, "give each pod a vGPU claim; false is the baseline")
	fs.IntVar(&o.pods, "pods", 10000, "pods in all")
	fs.IntVar(&o.steady, "steady", 1000, "pods of them created at --rate before the burst")
	fs.Float64Var(&o.rate, "rate", 50, "creation rate of the steady phase, pods/s")
	fs.IntVar(&o.workers, "burst-workers", 32, "parallel creators of the burst")
	fs.DurationVar(&o.settle, "settle", 60*time.Second, "a phase ends when every pod is bound or no pod was bound for this long")
	fs.StringVar(&o.out, "out", "", "file for the arm's result (JSON)")
	fs.IntVar(&o.schedulerPID, "scheduler-pid", 0, "pid of kube-scheduler")
	fs.IntVar(&o.controllerPID, "controller-pid", 0, "pid of dra-controller, 0 when it does not run")
	fs.IntVar(&o.nodes, "nodes", 0, "simulated nodes, for the report")
	fs.IntVar(&o.gpus, "gpus", 8, "GPUs per node, for the report")
	fs.StringVar(&o.profileDir, "profile-dir", "", "where to write CPU profiles taken during the burst")
	fs.StringVar(&o.schedulerPprof, "scheduler-pprof", "", "base URL of kube-scheduler's /debug/pprof")
	fs.StringVar(&o.controllerPprof, "controller-pprof", "", "base URL of dra-controller's /debug/pprof")
	fs.IntVar(&o.profileSeconds, "profile-seconds", 20, "length of each CPU profile")
	fs.StringVar(&o.clientCert, "client-cert", "", "client certificate for the scheduler's secure port")
	fs.StringVar(&o.clientKey, "client-key", "", "client key for the scheduler's secure port")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case o.arm == "":
		return fmt.Errorf("--arm is required")
	case o.out == "":
		return fmt.Errorf("--out is required")
	case o.pods <= 0 || o.steady < 0 || o.steady > o.pods:
		return fmt.Errorf("--pods must be positive and --steady between 0 and --pods, got %d and %d", o.pods, o.steady)
	case o.rate <= 0 || o.workers <= 0:
		return fmt.Errorf("--rate and --burst-workers must be positive")
	case o.schedulerPID <= 0:
		return fmt.Errorf("--scheduler-pid is required")
	}
	client, err := newClient(o.kubeconfig)
	if err != nil {
		return err
	}
	arm, err := measure(ctx, client, o)
	if err != nil {
		return err
	}
	if err := arm.Save(o.out); err != nil {
		return err
	}
	failures, err := scale.Report(os.Stdout, []*scale.Arm{arm})
	if err != nil {
		return err
	}
	if len(failures) > 0 {
		return fmt.Errorf("arm %s failed its checks:\n  %s", arm.Name, joinLines(failures))
	}
	return nil
}

// tracker records, per pod, when its create call started and when the
// watch first saw it bound.
type tracker struct {
	mu      sync.Mutex
	created map[string]time.Time
	bound   map[string]time.Time
	last    time.Time
}

func (t *tracker) startCreate(name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.created[name] = time.Now()
}

func (t *tracker) observe(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.Spec.NodeName == "" {
		return
	}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, seen := t.bound[pod.Name]; !seen {
		t.bound[pod.Name] = now
		t.last = now
	}
}

// phase computes the figures of the pods in names, created from start.
func (t *tracker) phase(names []string, start time.Time, rate float64, created time.Duration) scale.Phase {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := scale.Phase{Pods: len(names), Rate: rate, Created: created}
	var lat []time.Duration
	var last time.Time
	for _, n := range names {
		b, ok := t.bound[n]
		if !ok {
			continue
		}
		p.Bound++
		lat = append(lat, b.Sub(t.created[n]))
		if b.After(last) {
			last = b
		}
	}
	if p.Bound > 0 {
		p.Throughput = float64(p.Bound) / last.Sub(start).Seconds()
	}
	p.P50, p.P99 = scale.Percentile(lat, 50), scale.Percentile(lat, 99)
	return p
}

// settle waits until every pod in names is bound, or none was bound for
// the settle time.
func (t *tracker) settle(ctx context.Context, names []string, quiet time.Duration) {
	logger := klog.FromContext(ctx)
	for {
		t.mu.Lock()
		n := 0
		for _, name := range names {
			if _, ok := t.bound[name]; ok {
				n++
			}
		}
		last := t.last
		t.mu.Unlock()
		if n == len(names) {
			return
		}
		if !last.IsZero() && time.Since(last) > quiet {
			logger.Info("No pod bound for a while; phase ends", "bound", n, "pods", len(names), "quiet", quiet)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func measure(ctx context.Context, client kubernetes.Interface, o podsOptions) (*scale.Arm, error) {
	logger := klog.FromContext(ctx)
	arm := &scale.Arm{Name: o.arm, Description: o.description, Claims: o.claims, Policy: o.policy, Nodes: o.nodes, GPUs: o.nodes * o.gpus}
	if err := setupNamespace(ctx, client, o); err != nil {
		return nil, err
	}

	t := &tracker{created: map[string]time.Time{}, bound: map[string]time.Time{}}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(o.namespace))
	// Shutdown waits for the informers, which stop with informerCtx.
	defer factory.Shutdown()
	informerCtx, stopInformers := context.WithCancel(ctx)
	defer stopInformers()
	podInformer := factory.Core().V1().Pods().Informer()
	if _, err := podInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    t.observe,
		UpdateFunc: func(_, obj any) { t.observe(obj) },
	}); err != nil {
		return nil, fmt.Errorf("pod informer: %w", err)
	}
	factory.Start(informerCtx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), podInformer.HasSynced) {
		return nil, fmt.Errorf("pod informer did not sync: %w", ctx.Err())
	}

	requests0, err := apiRequests(ctx, client)
	if err != nil {
		return nil, err
	}
	sched0, err := scale.ReadProc(o.schedulerPID)
	if err != nil {
		return nil, fmt.Errorf("kube-scheduler: %w", err)
	}
	var ctrl0 scale.ProcStats
	if o.controllerPID > 0 {
		if ctrl0, err = scale.ReadProc(o.controllerPID); err != nil {
			return nil, fmt.Errorf("dra-controller: %w", err)
		}
	}

	shapes := scale.Shapes(o.pods)
	names := make([]string, o.pods)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%05d", o.arm, i)
	}
	create := func(ctx context.Context, i int) error {
		pod := scale.Pod(o.namespace, names[i], o.arm, shapes[i], o.claims)
		t.startCreate(pod.Name)
		if _, err := client.CoreV1().Pods(o.namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create pod %s: %w", pod.Name, err)
		}
		return nil
	}

	// Steady: one create every 1/rate seconds, each in its own goroutine so
	// that a slow call does not delay the next.
	steadyStart := time.Now()
	logger.Info("Steady phase", "arm", o.arm, "pods", o.steady, "rate", o.rate)
	g, gctx := errgroup.WithContext(ctx)
	interval := time.Duration(float64(time.Second) / o.rate)
	for i := range o.steady {
		next := steadyStart.Add(time.Duration(i) * interval)
		select {
		case <-gctx.Done():
		case <-time.After(time.Until(next)):
		}
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error { return create(gctx, i) })
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	steadyCreated := time.Since(steadyStart)
	t.settle(ctx, names[:o.steady], o.settle)
	arm.Steady = t.phase(names[:o.steady], steadyStart, o.rate, steadyCreated)
	logger.Info("Steady phase done", "created", steadyCreated.Round(time.Millisecond), "bound", arm.Steady.Bound, "p50", arm.Steady.P50, "p99", arm.Steady.P99)

	// Burst: every remaining pod as fast as the workers can create them.
	burstStart := time.Now()
	logger.Info("Burst phase", "arm", o.arm, "pods", o.pods-o.steady, "workers", o.workers)
	profiles := startProfiles(ctx, o)
	g, gctx = errgroup.WithContext(ctx)
	g.SetLimit(o.workers)
	for i := o.steady; i < o.pods; i++ {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error { return create(gctx, i) })
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	burstCreated := time.Since(burstStart)
	t.settle(ctx, names[o.steady:], o.settle)
	arm.Burst = t.phase(names[o.steady:], burstStart, 0, burstCreated)
	logger.Info("Burst phase done", "created", burstCreated.Round(time.Millisecond), "bound", arm.Burst.Bound, "throughput", arm.Burst.Throughput, "p50", arm.Burst.P50, "p99", arm.Burst.P99)
	if err := profiles.Wait(); err != nil {
		logger.Error(err, "CPU profile")
	}

	requests1, err := apiRequests(ctx, client)
	if err != nil {
		return nil, err
	}
	arm.APIRequests = requests1 - requests0
	sched1, err := scale.ReadProc(o.schedulerPID)
	if err != nil {
		return nil, fmt.Errorf("kube-scheduler: %w", err)
	}
	arm.Scheduler = scale.Usage{PeakRSS: sched1.PeakRSS, CPU: sched1.CPU - sched0.CPU}
	if o.controllerPID > 0 {
		ctrl1, err := scale.ReadProc(o.controllerPID)
		if err != nil {
			return nil, fmt.Errorf("dra-controller: %w", err)
		}
		arm.Controller = &scale.Usage{PeakRSS: ctrl1.PeakRSS, CPU: ctrl1.CPU - ctrl0.CPU}
	}
	if err := check(ctx, client, o, arm); err != nil {
		return nil, err
	}
	return arm, nil
}

func setupNamespace(ctx context.Context, client kubernetes.Interface, o podsOptions) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: o.namespace}}
	if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("namespace %s: %w", o.namespace, err)
	}
	// Pods are refused until the service account controller made the
	// namespace's default account.
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := client.CoreV1().ServiceAccounts(o.namespace).Get(ctx, "default", metav1.GetOptions{})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("service account %s/default: %w", o.namespace, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !o.claims {
		return nil
	}
	for _, s := range scale.Mix {
		_, err := client.ResourceV1().ResourceClaimTemplates(o.namespace).Create(ctx, scale.Template(o.namespace, s), metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("ResourceClaimTemplate %s: %w", s.Name, err)
		}
	}
	return nil
}

// check asserts the run's correctness: every pod bound or Pending with a
// reason, no GPU over its memory or cores.
func check(ctx context.Context, client kubernetes.Interface, o podsOptions, arm *scale.Arm) error {
	pods, err := client.CoreV1().Pods(o.namespace).List(ctx, metav1.ListOptions{LabelSelector: labels.Set{scale.PodLabel: o.arm}.String()})
	if err != nil {
		return fmt.Errorf("list pods: %w", err)
	}
	if len(pods.Items) != o.pods {
		arm.Problems = append(arm.Problems, fmt.Sprintf("%d pods exist, %d were created", len(pods.Items), o.pods))
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" {
			continue
		}
		reason := ""
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason != "" && c.Message != "" {
				reason = c.Reason
			}
		}
		if reason == "" {
			arm.Problems = append(arm.Problems, fmt.Sprintf("pod %s is neither bound nor Pending with a reason", p.Name))
			continue
		}
		if arm.Pending == nil {
			arm.Pending = map[string]int{}
		}
		arm.Pending[reason]++
	}
	if !o.claims {
		return nil
	}
	slices, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list ResourceSlices: %w", err)
	}
	claims, err := client.ResourceV1().ResourceClaims(o.namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list ResourceClaims: %w", err)
	}
	packing, problems := scale.Pack(names.DriverName, slices.Items, claims.Items)
	arm.Packing = &packing
	arm.Problems = append(arm.Problems, problems...)
	// A bound pod's claims must be allocated: the count of allocations
	// must cover every bound pod (one claim, one GPU each).
	bound := 0
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" {
			bound++
		}
	}
	if packing.Allocations < bound {
		arm.Problems = append(arm.Problems, fmt.Sprintf("%d pods are bound but only %d GPU allocations exist", bound, packing.Allocations))
	}
	return nil
}

func apiRequests(ctx context.Context, client kubernetes.Interface) (int64, error) {
	body, err := client.CoreV1().RESTClient().Get().AbsPath("/metrics").Stream(ctx)
	if err != nil {
		return 0, fmt.Errorf("API server metrics: %w", err)
	}
	defer func() { _ = body.Close() }()
	n, err := scale.RequestCount(body)
	if err != nil {
		return 0, fmt.Errorf("API server metrics: %w", err)
	}
	return n, nil
}

// startProfiles fetches a CPU profile of the scheduler and of the
// controller, in parallel, while the burst runs.
func startProfiles(ctx context.Context, o podsOptions) *errgroup.Group {
	g := &errgroup.Group{}
	if o.profileDir == "" {
		return g
	}
	for name, base := range map[string]string{"kube-scheduler": o.schedulerPprof, "dra-controller": o.controllerPprof} {
		if base == "" {
			continue
		}
		g.Go(func() error {
			return fetchProfile(ctx, o, base, filepath.Join(o.profileDir, fmt.Sprintf("%s-%s.pprof", o.arm, name)))
		})
	}
	return g
}

func fetchProfile(ctx context.Context, o podsOptions, base, path string) error {
	tlsConfig := &tls.Config{InsecureSkipVerify: true} //nolint:gosec // loopback to a process this benchmark started
	if o.clientCert != "" {
		cert, err := tls.LoadX509KeyPair(o.clientCert, o.clientKey)
		if err != nil {
			return fmt.Errorf("client certificate: %w", err)
		}
		tlsConfig.Certificates = []tls.Certificate{cert}
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsConfig}, Timeout: time.Duration(o.profileSeconds+30) * time.Second}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/profile?seconds=%d", base, o.profileSeconds), nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("profile %s: %w", base, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("profile %s: %s: %s", base, resp.Status, b)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return fmt.Errorf("profile %s: %w", base, err)
	}
	return f.Close()
}
