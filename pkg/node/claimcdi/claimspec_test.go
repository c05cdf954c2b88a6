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

package claimcdi

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"tags.cncf.io/container-device-interface/pkg/cdi"
	cdispec "tags.cncf.io/container-device-interface/specs-go"
)

const claimUID = "0b7f6c51-5d4a-4c11-9c2b-6a0f3c1f2e9d"

func TestClaimSpecsLifecycle(t *testing.T) {
	dir := t.TempDir()
	specs, err := NewClaimSpecs(dir)
	require.NoError(t, err)

	exists, err := specs.Exists(claimUID)
	require.NoError(t, err)
	assert.False(t, exists)

	name := claimUID + "-gpu-0"
	devices := []cdispec.Device{{
		Name:           name,
		ContainerEdits: cdispec.ContainerEdits{Env: []string{"CUDA_DEVICE_SM_LIMIT_0=30"}},
	}}
	common := cdispec.ContainerEdits{Env: []string{"CUDA_DEVICE_ORDER=PCI_BUS_ID"}}
	require.NoError(t, specs.Write(claimUID, common, devices))

	exists, err = specs.Exists(claimUID)
	require.NoError(t, err)
	assert.True(t, exists)

	// Read it back the way a runtime does: through a CDI cache.
	cache, err := cdi.NewCache(cdi.WithSpecDirs(dir), cdi.WithAutoRefresh(false))
	require.NoError(t, err)
	assert.Empty(t, cache.GetErrors())
	dev := cache.GetDevice(QualifiedName(name))
	require.NotNil(t, dev, "device %s in %v", QualifiedName(name), cache.ListDevices())
	assert.Equal(t, "k8s.vgpu.dra.dev/claim="+name, dev.GetQualifiedName())
	assert.Equal(t, specs.Path(claimUID), dev.GetSpec().GetPath())
	assert.Equal(t, []string{"CUDA_DEVICE_SM_LIMIT_0=30"}, dev.ContainerEdits.Env)
	assert.Equal(t, common, dev.GetSpec().ContainerEdits)
	want, err := cdispec.MinimumRequiredVersion(&cdispec.Spec{Kind: Kind, Devices: devices, ContainerEdits: common})
	require.NoError(t, err)
	assert.Equal(t, want, dev.GetSpec().Version)

	require.NoError(t, specs.Remove(claimUID))
	_, err = os.Stat(specs.Path(claimUID))
	assert.True(t, os.IsNotExist(err))
	require.NoError(t, specs.Remove(claimUID), "removing a missing spec succeeds")
}

func TestClaimSpecsRejectsInvalidDevice(t *testing.T) {
	dir := t.TempDir()
	specs, err := NewClaimSpecs(dir)
	require.NoError(t, err)
	err = specs.Write(claimUID, cdispec.ContainerEdits{}, []cdispec.Device{{Name: "bad/name", ContainerEdits: cdispec.ContainerEdits{Env: []string{"A=1"}}}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), claimUID)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries, "an invalid spec leaves no file behind")

	_, err = NewClaimSpecs("relative/cdi")
	assert.ErrorContains(t, err, `"relative/cdi"`)
}
