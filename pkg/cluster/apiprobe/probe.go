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

package apiprobe

import (
	"context"
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/common/apifeatures"
)

// ProbeClassName is the device class the probe's template names: none of
// the driver's, so that no admission of ours judges it.
const ProbeClassName = "api-probe.vgpu.dra.dev"

// probeTemplate asks for part of a device's memory: the request a
// software slice makes.
func probeTemplate(namespace string) *resourceapi.ResourceClaimTemplate {
	return &resourceapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "vgpu-dra-api-probe-", Namespace: namespace},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{
				DeviceClassName: ProbeClassName,
				Capacity: &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{
					"memory": resource.MustParse("1Gi"),
				}},
			}}},
		}}},
	}
}

// Probe creates, in a dry run in namespace (nothing is stored), a
// ResourceClaimTemplate whose request asks for part of a device's
// capacity, and returns the gates whose fields came back dropped.
func Probe(ctx context.Context, client kubernetes.Interface, namespace string) ([]apifeatures.Dropped, error) {
	got, err := client.ResourceV1().ResourceClaimTemplates(namespace).Create(ctx, probeTemplate(namespace),
		metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		return nil, fmt.Errorf("dry-run create of a ResourceClaimTemplate in namespace %s: %w", namespace, err)
	}
	var dropped []apifeatures.Dropped
	reqs := got.Spec.Spec.Devices.Requests
	if len(reqs) != 1 || reqs[0].Exactly == nil || reqs[0].Exactly.Capacity == nil || len(reqs[0].Exactly.Capacity.Requests) == 0 {
		dropped = append(dropped, apifeatures.Dropped{Gate: apifeatures.ConsumableCapacity, Field: "capacity.requests of a claim's device request"})
	}
	return dropped, nil
}
