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
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/common/apifeatures"
)

// apiServer answers a create of a ResourceClaimTemplate as an API server
// does, passing the stored object through keep; it stores nothing (dry
// run) and records whether the create was one.
func apiServer(keep func(*resourceapi.ResourceClaimTemplate), dryRun *bool) *fake.Clientset {
	client := fake.NewClientset()
	client.PrependReactor("create", "resourceclaimtemplates", func(action k8stesting.Action) (bool, runtime.Object, error) {
		create := action.(k8stesting.CreateActionImpl)
		*dryRun = len(create.CreateOptions.DryRun) == 1
		obj := create.GetObject().(*resourceapi.ResourceClaimTemplate).DeepCopy()
		if keep != nil {
			keep(obj)
		}
		return true, obj, nil
	})
	return client
}

func TestProbeNamesConsumableCapacityWhenTheAPIServerDropsIt(t *testing.T) {
	ctx := context.Background()
	var dryRun bool
	dropped, err := Probe(ctx, apiServer(nil, &dryRun), "vgpu-system")
	require.NoError(t, err)
	assert.Empty(t, dropped, "an API server with the gate keeps capacity.requests")
	assert.True(t, dryRun, "the probe stores nothing")

	dropped, err = Probe(ctx, apiServer(func(tpl *resourceapi.ResourceClaimTemplate) {
		tpl.Spec.Spec.Devices.Requests[0].Exactly.Capacity = nil
	}, &dryRun), "vgpu-system")
	require.NoError(t, err)
	require.Len(t, dropped, 1)
	assert.Equal(t, apifeatures.ConsumableCapacity, dropped[0].Gate)
	assert.Contains(t, dropped[0].Gate.Message(dropped[0].Field, "x"), "capacity.requests of a claim's device request: feature gate DRAConsumableCapacity is off on kube-apiserver")
}

func TestProbeFailsWithTheNamespaceNamed(t *testing.T) {
	client := fake.NewClientset()
	client.PrependReactor("create", "resourceclaimtemplates", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("forbidden")
	})
	_, err := Probe(context.Background(), client, "vgpu-system")
	assert.ErrorContains(t, err, "namespace vgpu-system: forbidden")
}
