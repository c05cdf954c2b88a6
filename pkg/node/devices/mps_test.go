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

package devices

import (
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/names"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/discovery"
)

func TestParseMPSDeviceName(t *testing.T) {
	for _, i := range []int{0, 7, 12} {
		index, ok := ParseMPSDeviceName(MPSDeviceName(i))
		assert.True(t, ok)
		assert.Equal(t, i, index)
	}
	for _, name := range []string{"gpu-0", "gpu--mps", "gpu-01-mps", "gpu-+1-mps", "gpu--1-mps", "gpu-0-mig-1g-10gb-0", "gpu-0-mps-x", "mps"} {
		_, ok := ParseMPSDeviceName(name)
		assert.False(t, ok, name)
	}
}

// withMPS are the options of a plugin run with --mps in a cluster with
// DRAPartitionableDevices.
var withMPS = MIGOptions{PartitionableDevices: true, MPS: true}

func TestGPUDevicesMPS(t *testing.T) {
	plain := h100(0)
	// Not MIG-capable, MIG off and MIG pending: each is a plain GPU.
	for _, mig := range []*discovery.MIGInfo{nil, {}, {Pending: true}} {
		res := GPUDevices(GPU{Info: plain, MIG: mig}, Options{}, withMPS)
		require.NotNil(t, res.CounterSet)
		assert.Equal(t, "gpu-0-slices", res.CounterSet.Name)
		assert.Equal(t, map[string]int64{"sharing-mode": 1}, counterValues(res.CounterSet.Counters))
		require.Len(t, res.Devices, 2)
		whole, mps := res.Devices[0], res.Devices[1]
		consumes := []resourceapi.DeviceCounterConsumption{{CounterSet: "gpu-0-slices",
			Counters: map[string]resourceapi.Counter{"sharing-mode": counter(1)}}}

		today := Device(plain, Options{})
		assert.Equal(t, "gpu-0", whole.Name)
		assert.Equal(t, consumes, whole.ConsumesCounters)
		whole.ConsumesCounters = nil
		assert.Equal(t, today, whole, "the whole-GPU device is today's, consuming the counter")

		assert.Equal(t, "gpu-0-mps", mps.Name)
		assert.Equal(t, consumes, mps.ConsumesCounters)
		assert.True(t, ptr.Deref(mps.AllowMultipleAllocations, false), "MPS claims share the device")
		assert.Equal(t, ptr.To(true), mps.Attributes[names.AttrMPS].BoolValue)
		delete(mps.Attributes, names.AttrMPS)
		assert.Equal(t, today.Attributes, mps.Attributes, "the GPU's own attributes")
		assert.Equal(t, today.Capacity[names.CapacityMemory], mps.Capacity[names.CapacityMemory])
		cores := mps.Capacity[names.CapacityCores]
		assert.Equal(t, int64(100), cores.Value.Value())
		policy := cores.RequestPolicy
		assert.Equal(t, int64(1), policy.ValidRange.Min.Value(), "an MPS client always has a share")
		assert.Equal(t, int64(100), policy.ValidRange.Max.Value())
		assert.Equal(t, int64(1), policy.ValidRange.Step.Value())
		assert.Equal(t, int64(100), policy.Default.Value(), "no cores asked: all SMs")
		assert.Equal(t, mig != nil && mig.Pending, len(res.Notes) == 1, "a pending mode is noted")
	}
}

// Without --mps, or without DRAPartitionableDevices, a node publishes what
// it did before MPS; a GPU in MIG mode never gets an MPS device.
func TestMPSPublishingOff(t *testing.T) {
	plain := []discovery.Info{h100(0), h100(1)}
	gpusOf := []GPU{{Info: plain[0]}, {Info: plain[1], MIG: &discovery.MIGInfo{}}}
	for name, opts := range map[string]MIGOptions{
		"no --mps":                   partitionable,
		"no partitionable devices":   {MPS: true},
		"neither (the plugin's off)": {},
	} {
		t.Run(name, func(t *testing.T) {
			pool, notes := MIGPool(gpusOf, Options{}, opts)
			assert.Empty(t, notes)
			assert.Equal(t, Pool(plain, Options{}), pool)
		})
	}

	mig := migGPU(t, 0, gpus.H200_SXM5_141GB)
	assert.Equal(t, GPUDevices(mig, Options{}, partitionable), GPUDevices(mig, Options{}, withMPS))
	off := GPUDevices(mig, Options{}, MIGOptions{})
	assert.Equal(t, off, GPUDevices(mig, Options{}, MIGOptions{MPS: true}))
}

// A node with counters keeps within the API's per-slice limits: 8 counter
// sets and 64 devices a slice.
func TestMPSPoolLimits(t *testing.T) {
	var list []GPU
	for i := range 40 {
		list = append(list, GPU{Info: h100(i)})
	}
	pool, _ := MIGPool(list, Options{}, withMPS)
	checkSliceLimits(t, pool)
	var sets, devs []int
	for _, s := range pool.Slices {
		sets = append(sets, len(s.SharedCounters))
		devs = append(devs, len(s.Devices))
	}
	assert.Equal(t, []int{8, 8, 8, 8, 8, 0, 0}, sets)
	assert.Equal(t, []int{0, 0, 0, 0, 0, 64, 16}, devs)

	eight, _ := MIGPool(list[:8], Options{}, withMPS)
	require.Len(t, eight.Slices, 2, "8 GPUs: one slice of counter sets, one of 16 devices")
	assert.Len(t, eight.Slices[1].Devices, 16)
}

func mpsRequest(capacity map[string]string) resourceapi.ResourceClaimSpec {
	return gpuRequest(names.MPSDeviceClass, capacity)
}

var timeSliced = map[string]string{"memory": "10Gi", "cores": "30"}

// A time-sliced claim on a GPU keeps MPS claims off it, and more
// time-sliced claims still share it.
func TestAllocateTimeSlicedKeepsMPSOff(t *testing.T) {
	t.Run("one GPU", func(t *testing.T) {
		c := newPoolCluster(t, []GPU{{Info: h100(0)}}, withMPS)
		assert.Equal(t, "gpu-0", allocated(c.allocate(gpuRequest(names.DeviceClass, timeSliced))))
		assert.Nil(t, c.allocate(mpsRequest(map[string]string{"memory": "10Gi", "cores": "30"})), "no MPS claim next to a time-sliced one")
		assert.Equal(t, "gpu-0", allocated(c.allocate(gpuRequest(names.DeviceClassWorkConserving, timeSliced))))
	})
	t.Run("two GPUs", func(t *testing.T) {
		c := newPoolCluster(t, []GPU{{Info: h100(0)}, {Info: h100(1)}}, withMPS)
		assert.Equal(t, "gpu-0", allocated(c.allocate(gpuRequest(names.DeviceClass, timeSliced))))
		assert.Equal(t, "gpu-1-mps", allocated(c.allocate(mpsRequest(map[string]string{"memory": "10Gi", "cores": "30"}))))
	})
}

// An MPS claim on a GPU keeps time-sliced claims off it, in every class of
// time-sliced slices.
func TestAllocateMPSKeepsTimeSlicedOff(t *testing.T) {
	c := newPoolCluster(t, []GPU{{Info: h100(0)}}, withMPS)
	assert.Equal(t, "gpu-0-mps", allocated(c.allocate(mpsRequest(map[string]string{"memory": "10Gi", "cores": "30"}))))
	for _, class := range []string{names.DeviceClass, names.DeviceClassWorkConserving, names.DeviceClassUnenforced} {
		assert.Nil(t, c.allocate(gpuRequest(class, timeSliced)), class)
	}

	two := newPoolCluster(t, []GPU{{Info: h100(0)}, {Info: h100(1)}}, withMPS)
	assert.Equal(t, "gpu-0-mps", allocated(two.allocate(mpsRequest(map[string]string{"memory": "10Gi", "cores": "30"}))))
	assert.Equal(t, "gpu-1", allocated(two.allocate(gpuRequest(names.DeviceClass, timeSliced))), "the time-sliced claim goes to the other GPU")
}

// Claims of one mode share their device up to its capacity.
func TestAllocateMPSClaimsShare(t *testing.T) {
	c := newPoolCluster(t, []GPU{{Info: h100(0)}}, withMPS)
	results := c.fill(mpsRequest(map[string]string{"memory": "10Gi", "cores": "30"}))
	require.Len(t, results, 3, "three 30 % SM shares fit, a fourth does not")
	for _, r := range results {
		assert.Equal(t, "gpu-0-mps", allocated(r))
		_, cores := consumed(t, r)
		assert.Equal(t, int64(30), cores)
	}
	r := c.allocate(mpsRequest(map[string]string{"memory": "1Gi", "cores": "10"}))
	assert.Equal(t, "gpu-0-mps", allocated(r), "the last 10 % still fit")

	ts := newPoolCluster(t, []GPU{{Info: h100(0)}}, withMPS)
	results = ts.fill(gpuRequest(names.DeviceClass, timeSliced))
	require.Len(t, results, 3)
	for _, r := range results {
		assert.Equal(t, "gpu-0", allocated(r))
	}

	// An MPS request without cores takes all of the GPU's SMs.
	all := newPoolCluster(t, []GPU{{Info: h100(0)}}, withMPS)
	r = all.allocate(mpsRequest(map[string]string{"memory": "10Gi"}))
	require.Equal(t, "gpu-0-mps", allocated(r))
	_, cores := consumed(t, r)
	assert.Equal(t, int64(100), cores)
	assert.Nil(t, all.allocate(mpsRequest(map[string]string{"memory": "10Gi", "cores": "1"})))
}

// A whole-GPU claim needs the counter as well.
func TestAllocateWholeGPUAndMPSExclude(t *testing.T) {
	t.Run("whole GPU first", func(t *testing.T) {
		c := newPoolCluster(t, []GPU{{Info: h100(0)}}, withMPS)
		r := c.allocate(gpuRequest(names.DeviceClass, nil))
		require.Equal(t, "gpu-0", allocated(r))
		memory, _ := consumed(t, r)
		assert.Equal(t, int64(h100Memory), memory, "all of the GPU's memory")
		assert.Nil(t, c.allocate(mpsRequest(map[string]string{"memory": "1Gi", "cores": "1"})))
	})
	t.Run("MPS first", func(t *testing.T) {
		c := newPoolCluster(t, []GPU{{Info: h100(0)}}, withMPS)
		require.Equal(t, "gpu-0-mps", allocated(c.allocate(mpsRequest(map[string]string{"memory": "1Gi", "cores": "1"}))))
		assert.Nil(t, c.allocate(gpuRequest(names.DeviceClass, nil)), "no whole GPU while the GPU serves MPS")
	})
}

// Once the last claim of one mode is deallocated the GPU takes the other
// mode's claims: nothing on the node decides the switch.
func TestAllocateModeSwitchesWhenTheLastClaimGoes(t *testing.T) {
	c := newPoolCluster(t, []GPU{{Info: h100(0)}}, withMPS)
	a := c.allocate(mpsRequest(map[string]string{"memory": "10Gi", "cores": "30"}))
	b := c.allocate(mpsRequest(map[string]string{"memory": "10Gi", "cores": "30"}))
	require.Equal(t, []string{"gpu-0-mps", "gpu-0-mps"}, []string{allocated(a), allocated(b)})
	c.release(a)
	assert.Nil(t, c.allocate(gpuRequest(names.DeviceClass, timeSliced)), "one MPS claim still holds the GPU")
	c.release(b)
	ts := c.allocate(gpuRequest(names.DeviceClass, timeSliced))
	assert.Equal(t, "gpu-0", allocated(ts))
	assert.Nil(t, c.allocate(mpsRequest(map[string]string{"memory": "10Gi", "cores": "30"})))
	c.release(ts)
	assert.Equal(t, "gpu-0-mps", allocated(c.allocate(mpsRequest(map[string]string{"memory": "10Gi", "cores": "30"}))))
}
