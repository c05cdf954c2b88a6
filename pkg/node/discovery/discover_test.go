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

package discovery

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2/ktesting"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/discovery/discoverytest"
)

func newServer(t *testing.T) *discoverytest.Server {
	t.Helper()
	return discoverytest.NewDGXH200()
}

func device(s *discoverytest.Server, i int) *server.Device {
	return s.Device(i)
}

func TestDevicesDGXH200(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	s := newServer(t)
	infos, err := NewDiscoverer(WithNVML(s)).Devices(ctx)
	require.NoError(t, err)
	require.Len(t, infos, len(s.Devices))
	for i, info := range infos {
		dev := device(s, i)
		assert.Equal(t, Info{
			UUID:                  dev.UUID,
			Index:                 i,
			Minor:                 dev.Minor,
			ProductName:           "NVIDIA H200 141GB HBM3e",
			Brand:                 "NVIDIA",
			Architecture:          "Hopper",
			CUDAComputeCapability: "9.0",
			DriverVersion:         s.DriverVersion,
			CUDADriverVersion:     "12.4",
			MemoryBytes:           dev.Config.MemoryMB << 20,
			PCIBusID:              fmt.Sprintf("0000:%02x:00.0", i),
			NUMANode:              i / 4,
			Multiprocessors:       discoverytest.H200Multiprocessors,
		}, info)
	}
	assert.Len(t, s.InitCalls(), 1)
	assert.Len(t, s.ShutdownCalls(), 1, "NVML is shut down after discovery")
}

func TestDevicesOptionalFields(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)

	t.Run("not supported", func(t *testing.T) {
		s := newServer(t)
		for _, d := range s.Devices {
			dev := d.(*server.Device)
			dev.GetNumaNodeIdFunc = func() (int, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
			dev.GetAttributesFunc = func() (nvml.DeviceAttributes, nvml.Return) {
				return nvml.DeviceAttributes{}, nvml.ERROR_NOT_SUPPORTED
			}
		}
		infos, err := NewDiscoverer(WithNVML(s)).Devices(ctx)
		require.NoError(t, err)
		for _, info := range infos {
			assert.Equal(t, -1, info.NUMANode)
			assert.Zero(t, info.Multiprocessors)
		}
	})

	t.Run("symbols missing from the library are not called", func(t *testing.T) {
		s := newServer(t)
		s.LookupSymbolFunc = func(name string) error {
			if name == "nvmlDeviceGetNumaNodeId" || strings.HasPrefix(name, "nvmlDeviceGetAttributes") {
				return errors.New("undefined symbol")
			}
			return nil
		}
		infos, err := NewDiscoverer(WithNVML(s)).Devices(ctx)
		require.NoError(t, err)
		require.NotEmpty(t, infos)
		assert.Equal(t, -1, infos[0].NUMANode)
		assert.Zero(t, infos[0].Multiprocessors)
		assert.Empty(t, device(s, 0).GetNumaNodeIdCalls())
		assert.Empty(t, device(s, 0).GetAttributesCalls())
	})
}

func TestDevicesErrors(t *testing.T) {
	tests := []struct {
		name    string
		breakIt func(s *discoverytest.Server)
		is      error
		want    []string
	}{
		{
			name:    "library missing",
			breakIt: func(s *discoverytest.Server) { s.InitFunc = func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND } },
			is:      nvml.ERROR_LIBRARY_NOT_FOUND,
			want:    []string{"load NVML", "libnvidia-ml.so.1"},
		},
		{
			name:    "driver not loaded",
			breakIt: func(s *discoverytest.Server) { s.InitFunc = func() nvml.Return { return nvml.ERROR_DRIVER_NOT_LOADED } },
			is:      nvml.ERROR_DRIVER_NOT_LOADED,
			want:    []string{"initialise NVML"},
		},
		{
			name: "count fails",
			breakIt: func(s *discoverytest.Server) {
				s.DeviceGetCountFunc = func() (int, nvml.Return) { return 0, nvml.ERROR_UNKNOWN }
			},
			is:   nvml.ERROR_UNKNOWN,
			want: []string{"device count"},
		},
		{
			name: "uuid of one GPU fails",
			breakIt: func(s *discoverytest.Server) {
				device(s, 3).GetUUIDFunc = func() (string, nvml.Return) { return "", nvml.ERROR_GPU_IS_LOST }
			},
			is:   nvml.ERROR_GPU_IS_LOST,
			want: []string{"NVML index 3", "get UUID"},
		},
		{
			name: "memory info fails",
			breakIt: func(s *discoverytest.Server) {
				device(s, 1).GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) { return nvml.Memory{}, nvml.ERROR_UNKNOWN }
			},
			is:   nvml.ERROR_UNKNOWN,
			want: []string{"NVML index 1", "memory info"},
		},
		{
			name: "malformed bus id",
			breakIt: func(s *discoverytest.Server) {
				device(s, 2).GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) { return nvml.PciInfo{}, nvml.SUCCESS }
			},
			want: []string{"NVML index 2", "malformed PCI bus id"},
		},
		{
			name: "numa node query fails",
			breakIt: func(s *discoverytest.Server) {
				device(s, 0).GetNumaNodeIdFunc = func() (int, nvml.Return) { return 0, nvml.ERROR_UNKNOWN }
			},
			is:   nvml.ERROR_UNKNOWN,
			want: []string{"NVML index 0", "NUMA node"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			s := newServer(t)
			tc.breakIt(s)
			infos, err := NewDiscoverer(WithNVML(s)).Devices(ctx)
			require.Error(t, err)
			assert.Nil(t, infos)
			if tc.is != nil {
				assert.ErrorIs(t, err, tc.is)
			}
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
			if len(s.InitCalls()) > 0 && s.InitFunc() == nvml.SUCCESS {
				assert.Len(t, s.ShutdownCalls(), 1, "NVML is shut down on error too")
			}
		})
	}
}

func TestDevicesCancelled(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err := NewDiscoverer(WithNVML(newServer(t))).Devices(ctx)
	assert.ErrorIs(t, err, context.Canceled)
}

func TestNormalizePCIBusID(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"00000000:3B:00.0", "0000:3b:00.0"},
		{"0000:3b:00.0", "0000:3b:00.0"},
		{"00010000:C1:1F.7", "10000:c1:1f.7"},
		{"0:01:02.3", "0000:01:02.3"},
	}
	for _, tc := range tests {
		got, err := normalizePCIBusID(tc.in)
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.want, got, tc.in)
	}
	for _, bad := range []string{"", "3b:00.0", "0000:3b:00.8", "0000:3b:20.0", "0000:3b:00.0 ", "000000000:3b:00.0", "0x00:3b:00.0"} {
		_, err := normalizePCIBusID(bad)
		assert.Error(t, err, "%q", bad)
	}
}

func TestVersionAndNames(t *testing.T) {
	assert.Equal(t, "12.9", cudaVersion(12090))
	assert.Equal(t, "12.4", cudaVersion(12040))
	assert.Equal(t, "11.0", cudaVersion(11000))
	assert.Equal(t, "13.0", cudaVersion(13000))
	assert.Equal(t, "Ampere", architectureName(nvml.DEVICE_ARCH_AMPERE))
	assert.Equal(t, "Unknown", architectureName(nvml.DEVICE_ARCH_UNKNOWN))
	assert.Equal(t, "Tesla", brandName(nvml.BRAND_TESLA))
	assert.Equal(t, "Unknown", brandName(nvml.BrandType(999)))
	assert.Equal(t, "GPU-1", cString([]int8{'G', 'P', 'U', '-', '1', 0, 'x'}))
}
