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
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
)

// ReasonGPUMemoryLimitReached is the reason of the Warning event a pod gets
// when an allocation of its claim is refused for the claim's memory limit.
const ReasonGPUMemoryLimitReached = "GPUMemoryLimitReached"

// DefaultEventInterval is the shortest time between two
// GPUMemoryLimitReached events of one claim: a training loop that retries
// a refused allocation thousands of times gets one event a minute, which
// names how many refusals it stands for.
const DefaultEventInterval = time.Minute

// limitEvents remembers, per claim, the refusal counts already reported
// and when the claim's last event went out. Only Run's goroutine uses it.
type limitEvents struct {
	reported map[counterKey]uint64
	lastSent map[types.UID]time.Time
}

// newEventRecorder sends events to the API server as this node's monitor.
func newEventRecorder(ctx context.Context, opts Options) (record.EventRecorder, func()) {
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: opts.KubeClient.CoreV1().Events("")})
	return b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: opts.DriverName + "/monitor", Host: opts.NodeName}), b.Shutdown
}

// emitLimitEvents sends a GPUMemoryLimitReached event to each pod of every
// claim whose refusal count grew since it was last reported, at most one
// per claim per EventInterval; refusals in between are summed into the
// next event. A count that went back (the region was recreated) starts
// over.
func (m *Monitor) emitLimitEvents(ctx context.Context, snap *snapshot, now time.Time) {
	logger := klog.FromContext(ctx)
	ev := &m.events
	seenKeys := make(map[counterKey]bool, len(ev.reported))
	seenClaims := make(map[types.UID]bool, len(snap.claims))
	for _, cu := range snap.claims {
		seenClaims[cu.claim.UID] = true
		if cu.err != nil {
			for _, g := range cu.claim.GPUs {
				seenKeys[counterKey{claim: cu.claim.UID, uuid: g.UUID}] = true
			}
			continue
		}
		due := now.Sub(ev.lastSent[cu.claim.UID]) >= m.opts.EventInterval
		for i, g := range cu.claim.GPUs {
			key := counterKey{claim: cu.claim.UID, uuid: g.UUID}
			seenKeys[key] = true
			u := cu.devices[i]
			prev := ev.reported[key]
			if u.refusals < prev {
				prev = 0
				ev.reported[key] = 0
			}
			if u.refusals == prev || !due {
				continue
			}
			pods := m.claimPods(cu.claim.Namespace, cu.claim.Name, cu.claim.UID)
			if len(pods) == 0 {
				// No consumer known yet: report once the cache has one.
				continue
			}
			// The claim's limit is its ceiling (memoryLimit); a claim that
			// may burst is refused below it when no burst is granted, so
			// its guarantee is shown beside it.
			limit := quantityString(g.Ceiling())
			if g.Ceiling() != g.MemoryLimitBytes {
				limit += " (guarantee " + quantityString(g.MemoryLimitBytes) + ")"
			}
			msg := fmt.Sprintf("GPU %s: %d allocation(s) refused by the memory limit of claim %s; last requested %s, limit %s, in use %s",
				g.UUID, u.refusals-prev, cu.claim.Name, quantityString(u.lastRefusedBytes), limit, quantityString(u.usedBytes))
			for _, pod := range pods {
				m.recorder.Event(pod, corev1.EventTypeWarning, ReasonGPUMemoryLimitReached, msg)
			}
			logger.V(2).Info("Reported GPU memory limit hits", "claim", klog.KRef(cu.claim.Namespace, cu.claim.Name), "uuid", g.UUID, "refusals", u.refusals-prev)
			ev.reported[key] = u.refusals
			ev.lastSent[cu.claim.UID] = now
		}
	}
	maps.DeleteFunc(ev.reported, func(k counterKey, _ uint64) bool { return !seenKeys[k] })
	maps.DeleteFunc(ev.lastSent, func(uid types.UID, _ time.Time) bool { return !seenClaims[uid] })
}

// claimPods are references to the pods in the claim's status.reservedFor.
func (m *Monitor) claimPods(namespace, name string, uid types.UID) []*corev1.ObjectReference {
	obj, err := m.claimLister.ResourceClaims(namespace).Get(name)
	if err != nil || obj.UID != uid {
		return nil
	}
	var out []*corev1.ObjectReference
	for _, r := range obj.Status.ReservedFor {
		if r.APIGroup == "" && r.Resource == "pods" {
			out = append(out, &corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: namespace, Name: r.Name, UID: r.UID})
		}
	}
	return out
}

func quantityString(b uint64) string {
	q := bytesQuantity(b)
	return q.String()
}
