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
	"errors"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2/ktesting"
)

// migServer is go-nvml's mock with two GPUs of config, the first in MIG
// mode. The mock answers every symbol lookup, but cannot answer the
// versioned profile call (its handler calls the C library), so that symbol
// is reported missing as on an older driver.
func migServer(t *testing.T, config gpus.Config) *server.Server {
	t.Helper()
	s, err := server.New(server.WithGPUs(config, config), server.WithDriverVersion("580.95.05"))
	require.NoError(t, err)
	s.LookupSymbolFunc = func(symbol string) error {
		if symbol == "nvmlDeviceGetGpuInstanceProfileInfoV" {
			return errors.New("not found")
		}
		return nil
	}
	dev := s.Devices[0].(*server.Device)
	_, ret := dev.SetMigMode(nvml.DEVICE_MIG_ENABLE)
	require.Equal(t, nvml.SUCCESS, ret)
	return s
}

func profileNames(m MIGInfo) []string {
	var out []string
	for _, p := range m.Profiles {
		out = append(out, p.Name)
	}
	return out
}

func TestReadMIGGeometries(t *testing.T) {
	tests := []struct {
		name          string
		config        gpus.Config
		profiles      []string
		memorySlices  int
		full          string
		fullSMs       int
		threeG        []MIGPlacement
		oneGMemoryMiB uint64
	}{
		{
			name:   "A100-SXM4-40GB",
			config: gpus.A100_SXM4_40GB,
			// The mock's 1g.10gb (REV2) has two memory slices, like the hardware.
			profiles:     []string{"1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"},
			memorySlices: 8, full: "7g.40gb", fullSMs: 98,
			threeG:        []MIGPlacement{{0, 4}, {4, 4}},
			oneGMemoryMiB: 4864,
		},
		{
			name:   "A100-SXM4-80GB",
			config: gpus.A100_SXM4_80GB,
			// The mock's full profile has 80384 MiB: derived without NVML's
			// own name it reads 79gb (NVML itself names it 7g.80gb).
			profiles:     []string{"1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.79gb"},
			memorySlices: 8, full: "7g.79gb", fullSMs: 98,
			threeG:        []MIGPlacement{{0, 4}, {4, 4}},
			oneGMemoryMiB: 9856,
		},
		{
			name:         "H100-SXM5-80GB",
			config:       gpus.H100_SXM5_80GB,
			profiles:     []string{"1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"},
			memorySlices: 7, full: "7g.80gb", fullSMs: 112,
			threeG:        []MIGPlacement{{0, 3}, {4, 3}},
			oneGMemoryMiB: 10240,
		},
		{
			name:         "H200-SXM5-141GB",
			config:       gpus.H200_SXM5_141GB,
			profiles:     []string{"1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"},
			memorySlices: 7, full: "7g.141gb", fullSMs: 112,
			threeG:        []MIGPlacement{{0, 3}, {4, 3}},
			oneGMemoryMiB: 18432,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := migServer(t, tc.config)
			mig, err := ReadMIG(s.Devices[0], false)
			require.NoError(t, err)
			require.NotNil(t, mig)
			assert.True(t, mig.Enabled)
			assert.True(t, mig.Pending)
			assert.Equal(t, tc.profiles, profileNames(*mig))
			assert.Equal(t, tc.memorySlices, mig.MemorySlices())
			assert.Equal(t, 7, mig.ComputeSlices())
			full, ok := mig.FullProfile()
			require.True(t, ok)
			assert.Equal(t, tc.full, full.Name)
			assert.Equal(t, tc.fullSMs, full.Multiprocessors)
			assert.Equal(t, []MIGPlacement{{0, tc.memorySlices}}, full.Placements)

			threeG, ok := mig.Profile(nvml.GPU_INSTANCE_PROFILE_3_SLICE)
			require.True(t, ok)
			assert.Equal(t, tc.threeG, threeG.Placements)
			assert.Equal(t, 3, threeG.Slices)
			assert.Equal(t, 2, threeG.InstanceCount)

			oneG, ok := mig.Profile(nvml.GPU_INSTANCE_PROFILE_1_SLICE)
			require.True(t, ok)
			assert.Equal(t, tc.oneGMemoryMiB<<20, oneG.MemoryBytes)
			assert.Len(t, oneG.Placements, 7)
			assert.Empty(t, mig.Instances)

			// The second GPU is MIG-capable with MIG off: no profiles.
			off, err := ReadMIG(s.Devices[1], false)
			require.NoError(t, err)
			require.NotNil(t, off)
			assert.Equal(t, MIGInfo{}, *off)
		})
	}
}

func TestReadMIGInstances(t *testing.T) {
	s := migServer(t, gpus.H200_SXM5_141GB)
	dev := s.Devices[0]
	create := func(profile int, start uint32, cis int) {
		t.Helper()
		info, ret := dev.GetGpuInstanceProfileInfo(profile)
		require.Equal(t, nvml.SUCCESS, ret)
		pl, ret := dev.GetGpuInstancePossiblePlacements(&info)
		require.Equal(t, nvml.SUCCESS, ret)
		for _, p := range pl {
			if p.Start == start {
				gi, ret := dev.CreateGpuInstanceWithPlacement(&info, &p)
				require.Equal(t, nvml.SUCCESS, ret)
				for i := 0; i < cis; i++ {
					ciInfo, ret := gi.GetComputeInstanceProfileInfo(nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
					require.Equal(t, nvml.SUCCESS, ret)
					_, ret = gi.CreateComputeInstance(&ciInfo)
					require.Equal(t, nvml.SUCCESS, ret)
				}
				return
			}
		}
		t.Fatalf("profile %d has no placement at %d", profile, start)
	}
	create(nvml.GPU_INSTANCE_PROFILE_3_SLICE, 4, 1)
	create(nvml.GPU_INSTANCE_PROFILE_1_SLICE, 0, 0)

	mig, err := ReadMIG(dev, false)
	require.NoError(t, err)
	require.NotNil(t, mig)
	assert.Equal(t, []MIGInstance{
		{ID: 1, ProfileID: nvml.GPU_INSTANCE_PROFILE_1_SLICE, Placement: MIGPlacement{0, 1}, ComputeInstances: 0},
		{ID: 0, ProfileID: nvml.GPU_INSTANCE_PROFILE_3_SLICE, Placement: MIGPlacement{4, 3}, ComputeInstances: 1},
	}, mig.Instances)
}

func TestReadMIGNotSupportedAndErrors(t *testing.T) {
	s := migServer(t, gpus.H100_SXM5_80GB)
	dev := s.Devices[0].(*server.Device)

	dev.GetMigModeFunc = func() (int, int, nvml.Return) { return 0, 0, nvml.ERROR_NOT_SUPPORTED }
	mig, err := ReadMIG(dev, false)
	require.NoError(t, err)
	assert.Nil(t, mig, "a GPU without MIG support has no MIG state")

	dev.GetMigModeFunc = func() (int, int, nvml.Return) { return 0, 0, nvml.ERROR_GPU_IS_LOST }
	_, err = ReadMIG(dev, false)
	require.ErrorIs(t, err, nvml.ERROR_GPU_IS_LOST)

	// MIG requested but not yet active (the GPU was busy): off, pending on.
	dev.GetMigModeFunc = func() (int, int, nvml.Return) { return nvml.DEVICE_MIG_DISABLE, nvml.DEVICE_MIG_ENABLE, nvml.SUCCESS }
	mig, err = ReadMIG(dev, false)
	require.NoError(t, err)
	assert.Equal(t, &MIGInfo{Pending: true}, mig)

	dev.GetMigModeFunc = func() (int, int, nvml.Return) { return 1, 1, nvml.SUCCESS }
	dev.GetGpuInstancePossiblePlacementsFunc = func(*nvml.GpuInstanceProfileInfo) ([]nvml.GpuInstancePlacement, nvml.Return) {
		return nil, nvml.ERROR_UNKNOWN
	}
	_, err = ReadMIG(dev, false)
	require.ErrorIs(t, err, nvml.ERROR_UNKNOWN)
	assert.Contains(t, err.Error(), "1g.10gb")
}

func TestDiscovererMIG(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	s := migServer(t, gpus.H200_SXM5_141GB)
	out, err := NewDiscoverer(WithNVML(s)).MIG(ctx)
	require.NoError(t, err)
	require.Len(t, out, 2)
	assert.Equal(t, s.Devices[0].(*server.Device).UUID, out[0].UUID)
	assert.True(t, out[0].MIG.Enabled)
	assert.Len(t, out[0].MIG.Profiles, 7)
	assert.False(t, out[1].MIG.Enabled)
	assert.Len(t, s.ShutdownCalls(), 1)

	// A library without MIG entry points (the fake NVML today) is not an
	// error: no GPU is MIG-capable, and no missing symbol is called.
	s.LookupSymbolFunc = func(symbol string) error {
		if symbol == "nvmlDeviceGetMigMode" {
			return errors.New("not found")
		}
		return nil
	}
	dev := s.Devices[0].(*server.Device)
	dev.GetMigModeFunc = func() (int, int, nvml.Return) { panic("called a missing symbol") }
	out, err = NewDiscoverer(WithNVML(s)).MIG(ctx)
	require.NoError(t, err)
	assert.Empty(t, out)
}

func TestMIGPlacementOverlaps(t *testing.T) {
	assert.True(t, MIGPlacement{0, 4}.Overlaps(MIGPlacement{3, 1}))
	assert.False(t, MIGPlacement{0, 4}.Overlaps(MIGPlacement{4, 1}))
	assert.True(t, MIGPlacement{4, 3}.Overlaps(MIGPlacement{4, 1}))
	assert.False(t, MIGPlacement{2, 2}.Overlaps(MIGPlacement{0, 2}))
}
