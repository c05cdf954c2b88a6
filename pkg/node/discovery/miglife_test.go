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
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2/ktesting"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/discovery/discoverytest"
)

func TestMIGControllerLifecycle(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	s := migServer(t, gpus.H200_SXM5_141GB)
	dev := s.Devices[0].(*server.Device)
	fake := discoverytest.EnableMIG(dev)
	c := NewMIGController(WithNVML(s))

	gi3, err := c.CreateGPUInstance(ctx, dev.UUID, nvml.GPU_INSTANCE_PROFILE_3_SLICE, MIGPlacement{4, 3})
	require.NoError(t, err)
	ci3, uuid3, err := c.CreateComputeInstance(ctx, dev.UUID, gi3)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(uuid3, "MIG-"), uuid3)

	gi1, err := c.CreateGPUInstance(ctx, dev.UUID, nvml.GPU_INSTANCE_PROFILE_1_SLICE, MIGPlacement{0, 1})
	require.NoError(t, err)
	assert.NotEqual(t, gi3, gi1)

	// The compute instance spans the GPU instance: the 3g one's profile has 3 slices.
	gi, ret := dev.GetGpuInstanceById(gi3)
	require.Equal(t, nvml.SUCCESS, ret)
	ciProfile, ret := gi.GetComputeInstanceProfileInfo(nvml.COMPUTE_INSTANCE_PROFILE_3_SLICE, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
	require.Equal(t, nvml.SUCCESS, ret)
	cis, ret := gi.GetComputeInstances(&ciProfile)
	require.Equal(t, nvml.SUCCESS, ret)
	assert.Len(t, cis, 1)

	list, err := c.Instances(ctx, dev.UUID)
	require.NoError(t, err)
	require.Len(t, list, 2)
	assert.Equal(t, MIGInstanceState{
		MIGInstance: MIGInstance{ID: gi1, ProfileID: nvml.GPU_INSTANCE_PROFILE_1_SLICE, Placement: MIGPlacement{0, 1}},
	}, list[0])
	assert.Equal(t, MIGInstanceState{
		MIGInstance: MIGInstance{ID: gi3, ProfileID: nvml.GPU_INSTANCE_PROFILE_3_SLICE, Placement: MIGPlacement{4, 3}, ComputeInstances: 1},
		Compute:     []MIGComputeInstance{{ID: ci3, UUID: uuid3}},
	}, list[1])

	// A GPU instance with a compute instance is in use.
	err = c.DestroyGPUInstance(ctx, dev.UUID, gi3)
	require.ErrorIs(t, err, ErrMIGInUse)
	require.ErrorIs(t, err, nvml.ERROR_IN_USE)
	assert.Contains(t, err.Error(), dev.UUID)

	require.NoError(t, c.DestroyComputeInstance(ctx, dev.UUID, gi3, ci3))
	require.ErrorIs(t, c.DestroyComputeInstance(ctx, dev.UUID, gi3, ci3), ErrMIGNotFound)
	require.NoError(t, c.DestroyGPUInstance(ctx, dev.UUID, gi3))
	require.ErrorIs(t, c.DestroyGPUInstance(ctx, dev.UUID, gi3), ErrMIGNotFound)
	require.NoError(t, c.DestroyGPUInstance(ctx, dev.UUID, gi1))
	assert.Empty(t, fake.GPUInstances())
	assert.Zero(t, fake.ComputeInstances())

	// A recreated instance gets a new MIG UUID.
	gi3, err = c.CreateGPUInstance(ctx, dev.UUID, nvml.GPU_INSTANCE_PROFILE_3_SLICE, MIGPlacement{4, 3})
	require.NoError(t, err)
	_, again, err := c.CreateComputeInstance(ctx, dev.UUID, gi3)
	require.NoError(t, err)
	assert.NotEqual(t, uuid3, again)
	assert.Len(t, s.ShutdownCalls(), len(s.InitCalls()), "every call shuts NVML down again")
}

func TestMIGControllerErrors(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	s := migServer(t, gpus.H100_SXM5_80GB)
	dev := s.Devices[0].(*server.Device)
	discoverytest.EnableMIG(dev)
	c := NewMIGController(WithNVML(s))

	_, err := c.CreateGPUInstance(ctx, dev.UUID, nvml.GPU_INSTANCE_PROFILE_4_SLICE, MIGPlacement{0, 4})
	require.NoError(t, err)
	// The 3g at slice 0 overlaps the 4g.
	_, err = c.CreateGPUInstance(ctx, dev.UUID, nvml.GPU_INSTANCE_PROFILE_3_SLICE, MIGPlacement{0, 3})
	require.ErrorIs(t, err, ErrMIGInsufficientResources)
	require.ErrorIs(t, err, nvml.ERROR_INSUFFICIENT_RESOURCES)
	assert.Contains(t, err.Error(), "slices 0+3")
	_, err = c.CreateGPUInstance(ctx, dev.UUID, nvml.GPU_INSTANCE_PROFILE_3_SLICE, MIGPlacement{4, 3})
	require.NoError(t, err)

	// The second GPU is not in MIG mode.
	other := s.Devices[1].(*server.Device)
	discoverytest.EnableMIG(other)
	_, err = c.CreateGPUInstance(ctx, other.UUID, nvml.GPU_INSTANCE_PROFILE_3_SLICE, MIGPlacement{4, 3})
	require.ErrorIs(t, err, ErrMIGNotSupported)
	list, err := c.Instances(ctx, other.UUID)
	require.NoError(t, err)
	assert.Empty(t, list)

	_, _, err = c.CreateComputeInstance(ctx, dev.UUID, 42)
	require.ErrorIs(t, err, ErrMIGNotFound)

	_, err = c.CreateGPUInstance(ctx, "GPU-00000000-0000-0000-0000-000000000000", nvml.GPU_INSTANCE_PROFILE_3_SLICE, MIGPlacement{4, 3})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "get handle")

	s.InitFunc = func() nvml.Return { return nvml.ERROR_DRIVER_NOT_LOADED }
	_, err = c.Instances(ctx, dev.UUID)
	require.ErrorIs(t, err, nvml.ERROR_DRIVER_NOT_LOADED)
}

func TestMIGControllerUndoesComputeInstanceWithoutUUID(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	s := migServer(t, gpus.H200_SXM5_141GB)
	dev := s.Devices[0].(*server.Device)
	fake := discoverytest.EnableMIG(dev)
	c := NewMIGController(WithNVML(s))
	gi, err := c.CreateGPUInstance(ctx, dev.UUID, nvml.GPU_INSTANCE_PROFILE_1_SLICE, MIGPlacement{0, 1})
	require.NoError(t, err)

	// A pre-R470 driver's UUID form.
	handle := dev.GetMigDeviceHandleByIndexFunc
	dev.GetMigDeviceHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		d, ret := handle(i)
		if ret != nvml.SUCCESS {
			return d, ret
		}
		return &mock.Device{
			GetGpuInstanceIdFunc:     d.GetGpuInstanceId,
			GetComputeInstanceIdFunc: d.GetComputeInstanceId,
			GetUUIDFunc:              func() (string, nvml.Return) { return "MIG-" + dev.UUID + "/1/0", nvml.SUCCESS },
		}, nvml.SUCCESS
	}
	_, _, err = c.CreateComputeInstance(ctx, dev.UUID, gi)
	require.ErrorContains(t, err, "MIG-<uuid>")
	assert.Zero(t, fake.ComputeInstances(), "the compute instance is destroyed again")
	require.NoError(t, c.DestroyGPUInstance(ctx, dev.UUID, gi))

	dev.GetMaxMigDeviceCountFunc = func() (int, nvml.Return) { return 0, nvml.ERROR_UNKNOWN }
	gi, err = c.CreateGPUInstance(ctx, dev.UUID, nvml.GPU_INSTANCE_PROFILE_1_SLICE, MIGPlacement{0, 1})
	require.NoError(t, err)
	_, _, err = c.CreateComputeInstance(ctx, dev.UUID, gi)
	require.ErrorIs(t, err, nvml.ERROR_UNKNOWN)
	assert.Zero(t, fake.ComputeInstances())
}

func TestMIGErrorMapping(t *testing.T) {
	for ret, want := range map[nvml.Return]error{
		nvml.ERROR_INSUFFICIENT_RESOURCES: ErrMIGInsufficientResources,
		nvml.ERROR_IN_USE:                 ErrMIGInUse,
		nvml.ERROR_NOT_SUPPORTED:          ErrMIGNotSupported,
		nvml.ERROR_NOT_FOUND:              ErrMIGNotFound,
	} {
		err := migError("op", ret)
		assert.ErrorIs(t, err, want)
		assert.ErrorIs(t, err, ret)
	}
	err := migError("op", nvml.ERROR_UNKNOWN)
	assert.ErrorIs(t, err, nvml.ERROR_UNKNOWN)
	for _, e := range []error{ErrMIGInsufficientResources, ErrMIGInUse, ErrMIGNotSupported, ErrMIGNotFound} {
		assert.NotErrorIs(t, err, e)
	}
}
