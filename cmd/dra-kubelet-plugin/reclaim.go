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
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/names"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/burstnode"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/hostpids"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/reclaim"
)

// reclaimQueueLength bounds the reclaim decisions waiting for the evictor;
// a decision that finds the queue full is dropped and made again at the
// next collection or prepare retry.
const reclaimQueueLength = 64

// errReclaimQueueFull is returned when the evictor is that far behind.
var errReclaimQueueFull = errors.New("burst reclaim queue full")

// asyncEvictor hands burstnode's reclaim decisions to pkg/node/reclaim's Evictor
// on a goroutine of its own: burstnode decides under the monitor's lock and
// in prepare, and evictions are API calls. The Evictor reports failures
// through its OnFailure (Node.ReclaimFailed), not to the caller.
type asyncEvictor struct {
	evictor *reclaim.Evictor
	work    chan func(context.Context)
}

var (
	_ burstnode.Reclaimer = &asyncEvictor{}
	_ burstnode.Shorter   = &asyncEvictor{}
	_ burstnode.Canceler  = &asyncEvictor{}
)

// hostProc is where the plugin reads processes: its own procfs, the host's
// since the plugin runs in the host's pid namespace (hostPID). --proc-root
// is another tree: the driver's capability files, which a node with
// simulated GPUs keeps apart from its processes.
const hostProc = "/proc"

// podKiller ends the processes of a pod on this node, found by their
// cgroup under the host's procfs: the host side of a deletion whose
// shortened deadline the kubelet does not honour.
type podKiller struct {
	node     string
	procRoot string
}

// kill sends SIGKILL to every process of p, a pod bound to this node.
func (k podKiller) kill(ctx context.Context, p *corev1.Pod) (int, error) {
	if p.Spec.NodeName != k.node {
		return 0, fmt.Errorf("pod %s/%s is bound to node %q, not %q", p.Namespace, p.Name, p.Spec.NodeName, k.node)
	}
	n := 0
	var errs []error
	for _, pid := range hostpids.PodPIDs(k.procRoot, p.UID) {
		switch err := syscall.Kill(int(pid), syscall.SIGKILL); {
		case err == nil:
			n++
		case errors.Is(err, syscall.ESRCH):
		default:
			errs = append(errs, fmt.Errorf("kill pid %d: %w", pid, err))
		}
	}
	klog.FromContext(ctx).V(2).Info("Killed a pod's processes", "pod", klog.KObj(p), "processes", n)
	return n, errors.Join(errs...)
}

// newReclaimEventRecorder sends the reclaim's Events (on the evicted pods
// and on those waiting for the memory) as this node's plugin.
func newReclaimEventRecorder(ctx context.Context, client kubernetes.Interface, nodeName string) (record.EventRecorder, func()) {
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	return b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: names.DriverName + "/burst-reclaim", Host: nodeName}), b.Shutdown
}

func newAsyncEvictor(e *reclaim.Evictor) *asyncEvictor {
	return &asyncEvictor{evictor: e, work: make(chan func(context.Context), reclaimQueueLength)}
}

func (a *asyncEvictor) enqueue(f func(context.Context)) error {
	select {
	case a.work <- f:
		return nil
	default:
		return errReclaimQueueFull
	}
}

// Reclaim queues the eviction of the pods of from.
func (a *asyncEvictor) Reclaim(_ context.Context, needing burstnode.ClaimRef, from []burstnode.ClaimRef, gpuUUID string, bytes uint64, grace time.Duration) error {
	refs := make([]reclaim.ClaimRef, len(from))
	for i, r := range from {
		refs[i] = reclaim.ClaimRef(r)
	}
	return a.enqueue(func(ctx context.Context) {
		if err := a.evictor.Reclaim(ctx, reclaim.ClaimRef(needing), refs, gpuUUID, bytes, grace); err != nil {
			klog.FromContext(ctx).V(2).Info("Burst reclaim not done yet; retried", "needing", needing.String(), "err", err)
		}
	})
}

// Short queues the warning Event for memory that reclaiming cannot free.
func (a *asyncEvictor) Short(ctx context.Context, needing burstnode.ClaimRef, gpuUUID string, bytes uint64) {
	if err := a.enqueue(func(ctx context.Context) { a.evictor.Short(ctx, reclaim.ClaimRef(needing), gpuUUID, bytes) }); err != nil {
		klog.FromContext(ctx).Error(err, "Dropped the warning for memory that reclaiming burst cannot free", "needing", needing.String())
	}
}

// Cancel stops the retries for an unprepared claim's pods.
func (a *asyncEvictor) Cancel(uid types.UID) { a.evictor.Cancel(uid) }

// run serves the queue, and the Evictor's retries, until ctx ends.
func (a *asyncEvictor) run(ctx context.Context) {
	go a.evictor.Run(ctx)
	for {
		select {
		case f := <-a.work:
			f(ctx)
		case <-ctx.Done():
			return
		}
	}
}
