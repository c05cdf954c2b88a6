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
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"tags.cncf.io/container-device-interface/pkg/cdi"
)

func testInput() specInput {
	return specInput{
		Kind:        defaultVendorClass,
		UUIDs:       []string{"GPU-11111111-2222-3333-4444-555555555555", "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"},
		CUDALibrary: "/drv/libcuda.so.1",
		NVMLLibrary: "/drv/libnvidia-ml.so.1",
		FakeConfig:  "/run/fake/config",
		StateDir:    "/run/fake/state",
	}
}

func TestBuildSpecIsUsableThroughTheCDICache(t *testing.T) {
	in := testInput()
	spec, err := buildSpec(in)
	require.NoError(t, err)

	dir := t.TempDir()
	cache, err := cdi.NewCache(cdi.WithSpecDirs(dir), cdi.WithAutoRefresh(false))
	require.NoError(t, err)
	require.NoError(t, cache.WriteSpec(spec, specName))
	_, err = os.Stat(filepath.Join(dir, specName))
	require.NoError(t, err)
	require.NoError(t, cache.Refresh())

	for _, u := range in.UUIDs {
		dev := cache.GetDevice(defaultVendorClass + "=" + u)
		require.NotNil(t, dev, "device %s must be resolvable by UUID", u)
		common := dev.GetSpec().ContainerEdits
		assert.Contains(t, common.Env, envFakeConfig+"="+containerConfig)
		assert.Contains(t, common.Env, envFakeStateDir+"="+containerStateDir)
		got := map[string]string{}
		for _, m := range common.Mounts {
			got[m.ContainerPath] = m.HostPath
		}
		assert.Equal(t, in.CUDALibrary, got[containerLibDir+"/libcuda.so.1"])
		assert.Equal(t, in.NVMLLibrary, got[containerLibDir+"/libnvidia-ml.so.1"])
		assert.Equal(t, in.FakeConfig, got[containerConfig])
		assert.Equal(t, in.StateDir, got[containerStateDir])
	}
	assert.Len(t, cache.ListDevices(), len(in.UUIDs))
}

func TestBuildSpecMountsTheConfigReadOnlyAndTheStateReadWrite(t *testing.T) {
	spec, err := buildSpec(testInput())
	require.NoError(t, err)
	for _, m := range spec.ContainerEdits.Mounts {
		if m.ContainerPath == containerStateDir {
			assert.Contains(t, m.Options, "rw")
		} else {
			assert.Contains(t, m.Options, "ro", "mount %s", m.ContainerPath)
		}
	}
}

func TestBuildSpecRejectsBadInputNamingTheField(t *testing.T) {
	tests := map[string]struct {
		mutate func(*specInput)
		want   string
	}{
		"no GPUs":        {func(in *specInput) { in.UUIDs = nil }, "no GPUs"},
		"bad UUID":       {func(in *specInput) { in.UUIDs = []string{"0"} }, `GPU 0: UUID "0"`},
		"duplicate UUID": {func(in *specInput) { in.UUIDs = append(in.UUIDs, in.UUIDs[0]) }, "reported twice"},
		"relative lib":   {func(in *specInput) { in.CUDALibrary = "libcuda.so.1" }, "--cuda-library"},
		"empty state":    {func(in *specInput) { in.StateDir = "" }, "--fake-state-dir"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			in := testInput()
			tc.mutate(&in)
			_, err := buildSpec(in)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestBuildSpecGivesEachGPUItsDeviceNode(t *testing.T) {
	in := testInput()
	in.DevRoot, in.Minors = "/drv/dev", []int{0, 3}
	spec, err := buildSpec(in)
	require.NoError(t, err)
	var common []string
	for _, n := range spec.ContainerEdits.DeviceNodes {
		common = append(common, n.Path+"<-"+n.HostPath)
	}
	assert.Equal(t, []string{"/dev/nvidiactl<-/drv/dev/nvidiactl", "/dev/nvidia-uvm<-/drv/dev/nvidia-uvm", "/dev/nvidia-uvm-tools<-/drv/dev/nvidia-uvm-tools"}, common)
	require.Len(t, spec.Devices, 2)
	require.Len(t, spec.Devices[1].ContainerEdits.DeviceNodes, 1)
	assert.Equal(t, "/dev/nvidia3", spec.Devices[1].ContainerEdits.DeviceNodes[0].Path)
	assert.Equal(t, "/drv/dev/nvidia3", spec.Devices[1].ContainerEdits.DeviceNodes[0].HostPath)

	in.Minors = in.Minors[:1]
	_, err = buildSpec(in)
	assert.ErrorContains(t, err, "1 minor numbers for 2 GPUs")
	in.DevRoot = "dev"
	_, err = buildSpec(in)
	assert.ErrorContains(t, err, "--dev-root")
}
