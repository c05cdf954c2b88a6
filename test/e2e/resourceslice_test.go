//go:build e2e

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

package e2e

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// publishedGPUs returns the driver's devices on the node under test.
func publishedGPUs(t *testing.T, f *framework) []resourceapi.Device {
	t.Helper()
	return publishedGPUsOn(t, f, cluster.node)
}

// publishedGPUsOn lists the devices node's plugin published, checking that
// they are in the node's own pool.
func publishedGPUsOn(t *testing.T, f *framework, node string) []resourceapi.Device {
	t.Helper()
	slices, err := f.c.ResourceV1().ResourceSlices().List(f.ctx, metav1.ListOptions{
		FieldSelector: "spec.driver=" + driverName + ",spec.nodeName=" + node,
	})
	require.NoError(t, err, "list ResourceSlices")
	var devices []resourceapi.Device
	for _, s := range slices.Items {
		assert.Equal(t, node, s.Spec.Pool.Name, "pool name of slice %s", s.Name)
		devices = append(devices, s.Spec.Devices...)
	}
	return devices
}

func TestResourceSlicesListTheSimulatedGPUs(t *testing.T) {
	f := newFramework(t)
	devices := publishedGPUs(t, f)
	require.Len(t, devices, 2, "the harness simulates two GPUs")

	uuids := map[string]bool{}
	for _, d := range devices {
		assert.True(t, strings.HasPrefix(d.Name, "gpu-"), "device name %q", d.Name)
		require.NotNil(t, d.AllowMultipleAllocations, "device %s: allowMultipleAllocations", d.Name)
		assert.True(t, *d.AllowMultipleAllocations, "device %s: allowMultipleAllocations", d.Name)

		uuid := d.Attributes["uuid"].StringValue
		require.NotNil(t, uuid, "device %s: uuid attribute", d.Name)
		assert.True(t, strings.HasPrefix(*uuid, "GPU-"), "device %s: uuid %q", d.Name, *uuid)
		uuids[*uuid] = true
		for _, a := range []resourceapi.QualifiedName{"productName", "architecture", "pcieBusID"} {
			v := d.Attributes[a].StringValue
			if assert.NotNil(t, v, "device %s: attribute %s", d.Name, a) {
				assert.NotEmpty(t, *v, "device %s: attribute %s", d.Name, a)
			}
		}
		for _, a := range []resourceapi.QualifiedName{"cudaComputeCapability", "driverVersion"} {
			assert.NotNil(t, d.Attributes[a].VersionValue, "device %s: version attribute %s", d.Name, a)
		}

		mem, ok := d.Capacity["memory"]
		require.True(t, ok, "device %s: memory capacity", d.Name)
		// The harness configures 80Gi per simulated GPU; the driver rounds down to its step.
		assert.True(t, mem.Value.Cmp(resource.MustParse("79Gi")) > 0 && mem.Value.Cmp(resource.MustParse("80Gi")) <= 0,
			"device %s: memory capacity %s", d.Name, mem.Value.String())
		cores, ok := d.Capacity["cores"]
		require.True(t, ok, "device %s: cores capacity", d.Name)
		assert.Equal(t, int64(100), cores.Value.Value(), "device %s: cores capacity", d.Name)
	}
	assert.Len(t, uuids, 2, "every GPU has its own UUID")
}
