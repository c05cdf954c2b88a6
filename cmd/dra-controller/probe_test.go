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
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/common/apifeatures"
)

// An API server without DRAConsumableCapacity drops a claim's capacity
// requests; the controller's probe finds it at start and says so on its
// own pod.
func TestProbeAPIWarnsOnItsPodWhenConsumableCapacityIsOff(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	for name, gateOn := range map[string]bool{"gate on": true, "gate off": false} {
		t.Run(name, func(t *testing.T) {
			client := fake.NewClientset()
			client.PrependReactor("create", "resourceclaimtemplates", func(action k8stesting.Action) (bool, runtime.Object, error) {
				tpl := action.(k8stesting.CreateAction).GetObject().(*resourceapi.ResourceClaimTemplate).DeepCopy()
				if !gateOn {
					tpl.Spec.Spec.Devices.Requests[0].Exactly.Capacity = nil
				}
				return true, tpl, nil
			})
			events := record.NewFakeRecorder(4)
			features, err := apifeatures.NewReporter(prometheus.NewRegistry(), events,
				&corev1.ObjectReference{Kind: "Pod", Namespace: "vgpu-system", Name: "controller-0"})
			require.NoError(t, err)
			probeAPI(context.WithoutCancel(ctx), client, "vgpu-system", features)
			if gateOn {
				assert.Empty(t, events.Events)
				return
			}
			require.Len(t, events.Events, 1)
			ev := <-events.Events
			assert.Contains(t, ev, "Warning FeatureGateMissing The API server dropped capacity.requests")
			assert.Contains(t, ev, "DRAConsumableCapacity is off on kube-apiserver")
			assert.Contains(t, ev, "one claim per GPU")
		})
	}
}
