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

package apifeatures

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
)

// Gate is a Kubernetes feature gate the driver relies on.
type Gate struct {
	// Name is the gate's name, as the components' --feature-gates take it.
	Name string
	// Components are the components that must have it on.
	Components []string
	// Capability is what of the driver depends on it, for the message.
	Capability string
}

// The gates the driver relies on. docs/install.md has the table of which
// Kubernetes version has which of them on by default.
var (
	// ConsumableCapacity lets many claims share one device, each consuming
	// part of its capacity (allowMultipleAllocations, requestPolicy,
	// capacity.requests).
	ConsumableCapacity = Gate{
		Name:       "DRAConsumableCapacity",
		Components: []string{"kube-apiserver", "kube-scheduler", "kube-controller-manager", "kubelet"},
		Capability: "GPUs shared by many claims (software slices)",
	}
	// PartitionableDevices lets devices consume shared counters: MIG
	// instances beside their whole GPU.
	PartitionableDevices = Gate{
		Name:       "DRAPartitionableDevices",
		Components: []string{"kube-apiserver", "kube-scheduler"},
		Capability: "MIG instances (partitionable devices)",
	}
	// DeviceTaints lets the plugin taint a GPU that reported a fatal XID.
	DeviceTaints = Gate{
		Name:       "DRADeviceTaints",
		Components: []string{"kube-apiserver", "kube-scheduler", "kube-controller-manager"},
		Capability: "tainting GPUs with fatal XID errors",
	}
)

// Message says which field came back dropped, which gate that means is off
// on which components, and what the driver does about it.
func (g Gate) Message(dropped, effect string) string {
	return fmt.Sprintf("The API server dropped %s: feature gate %s is off on kube-apiserver (%s needs it on %s); %s. See docs/install.md",
		dropped, g.Name, g.Capability, strings.Join(g.Components, ", "), effect)
}

// Dropped is a field an API server did not keep, and the gate whose
// absence that shows.
type Dropped struct {
	Gate Gate
	// Field names what came back without it, for the message.
	Field string
}

// EventReason is the reason of the Warning Event a missing gate raises.
const EventReason = "FeatureGateMissing"

// MetricName is the gauge a Reporter registers.
const MetricName = "vgpu_dra_api_feature_missing"

// Reporter reports missing gates, each once per process: a log line, a
// Warning Event on Object, and the gauge at 1.
type Reporter struct {
	recorder record.EventRecorder
	object   runtime.Object
	missing  *prometheus.GaugeVec

	mu       sync.Mutex
	reported map[string]bool
}

// NewReporter registers the gauge in reg. Events go to object through
// recorder; a nil recorder or object raises none.
func NewReporter(reg prometheus.Registerer, recorder record.EventRecorder, object runtime.Object) (*Reporter, error) {
	r := &Reporter{
		recorder: recorder,
		object:   object,
		missing: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: MetricName,
			Help: "1 for each Kubernetes feature gate the driver relies on that the API server turned out to have off (the fields it gates came back dropped).",
		}, []string{"feature_gate"}),
		reported: map[string]bool{},
	}
	if err := reg.Register(r.missing); err != nil {
		return nil, fmt.Errorf("register %s: %w", MetricName, err)
	}
	return r, nil
}

// Missing reports that g is off, as Message(dropped, effect) says.
func (r *Reporter) Missing(ctx context.Context, g Gate, dropped, effect string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.reported[g.Name] {
		return
	}
	r.reported[g.Name] = true
	msg := g.Message(dropped, effect)
	klog.FromContext(ctx).Error(nil, msg, "featureGate", g.Name)
	r.missing.WithLabelValues(g.Name).Set(1)
	if r.recorder != nil && r.object != nil {
		r.recorder.Event(r.object, corev1.EventTypeWarning, EventReason, msg)
	}
}
