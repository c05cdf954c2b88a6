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

package inspect

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/names"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/devices"
	nvgpu "github.com/vgpu-dra/vgpu-dra-driver/pkg/node/discovery"
)

const migUUID = "GPU-5adc0000-aaaa-bbbb-cccc-dddddddddddd"

// migCluster is node-m with one H200 in MIG mode (go-nvml's mock geometry,
// with the admin's instances given as {profile id, start}), published by
// devices.MIGPool as the plugin does, and node-p with a plain GPU.
func migCluster(t *testing.T, static ...[2]int) *Snapshot {
	t.Helper()
	config := gpus.H200_SXM5_141GB
	dev := server.NewDeviceFromConfig(config, 0)
	_, ret := dev.SetMigMode(nvml.DEVICE_MIG_ENABLE)
	require.Equal(t, nvml.SUCCESS, ret)
	for _, inst := range static {
		info, ret := dev.GetGpuInstanceProfileInfo(inst[0])
		require.Equal(t, nvml.SUCCESS, ret)
		var pl nvml.GpuInstancePlacement
		for _, p := range config.MIGProfiles.GpuInstancePlacements[inst[0]] {
			if int(p.Start) == inst[1] {
				pl = p
			}
		}
		_, ret = dev.CreateGpuInstanceWithPlacement(&info, &pl)
		require.Equal(t, nvml.SUCCESS, ret)
	}
	mig, err := nvgpu.ReadMIG(dev, false)
	require.NoError(t, err)
	info := nvgpu.Info{UUID: migUUID, Index: 0, ProductName: config.Name, MemoryBytes: config.MemoryMB << 20, Multiprocessors: 132}
	pool, _ := devices.MIGPool([]devices.GPU{{Info: info, MIG: mig}}, devices.Options{}, devices.MIGOptions{PartitionableDevices: true})
	snap := &Snapshot{
		Nodes:   []corev1.Node{node("node-m"), node("node-p")},
		Slices:  []resourceapi.ResourceSlice{slice("node-p", gpuDevice(0, 16*gi))},
		Classes: migClasses(),
	}
	for i, s := range pool.Slices {
		snap.Slices = append(snap.Slices, resourceapi.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-m-%d", i)},
			Spec: resourceapi.ResourceSliceSpec{
				Driver: names.DriverName, NodeName: ptr.To("node-m"),
				Pool:    resourceapi.ResourcePool{Name: "node-m", Generation: 1, ResourceSliceCount: int64(len(pool.Slices))},
				Devices: s.Devices, SharedCounters: s.SharedCounters,
			},
		})
	}
	return snap
}

// migClasses are the shipped classes' selectors (deviceclasses/).
func migClasses() []resourceapi.DeviceClass {
	class := func(name, expr string) resourceapi.DeviceClass {
		return resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: resourceapi.DeviceClassSpec{
			Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: expr}}}}}
	}
	return []resourceapi.DeviceClass{
		class("vgpu.dra.dev", `device.driver == "vgpu.dra.dev" && !("profile" in device.attributes["vgpu.dra.dev"])`),
		class("mig.vgpu.dra.dev", `device.driver == "vgpu.dra.dev" && "profile" in device.attributes["vgpu.dra.dev"]`),
	}
}

// migClaim asks for one instance of profile (any when empty).
func migClaim(ns, name, profile string) resourceapi.ResourceClaim {
	c := claim(ns, name, "", "")
	c.Spec.Devices.Requests[0].Exactly.DeviceClassName = "mig.vgpu.dra.dev"
	if profile != "" {
		c.Spec.Devices.Requests[0].Exactly.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: fmt.Sprintf(`device.attributes["vgpu.dra.dev"].profile == %q`, profile)}}}
	}
	return c
}

// holding gives claim c device on node-m whole (no share).
func holding(c resourceapi.ResourceClaim, device string) resourceapi.ResourceClaim {
	c.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
		Request: "gpu", Driver: names.DriverName, Pool: "node-m", Device: device,
	}}}}
	c.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: c.Name, UID: types.UID("pod-" + c.Name)}}
	return c
}

func verdicts(t *testing.T, snap *Snapshot, pod string) map[string]GPUVerdict {
	t.Helper()
	exp, err := Why(t.Context(), snap, "team-b", pod)
	require.NoError(t, err)
	out := map[string]GPUVerdict{}
	for _, v := range exp.GPUs {
		out[v.Node+"/"+v.GPU] = v
	}
	var buf bytes.Buffer
	require.NoError(t, PrintWhy(&buf, exp, false))
	t.Log(buf.String())
	return out
}

// Both 3g placements are taken, one by a 3g, one by a 1g at slice 4: a
// third 3g has no free placement and why names what blocks each.
func TestWhyMIGNoFreePlacement(t *testing.T) {
	snap := migCluster(t)
	snap.Claims = []resourceapi.ResourceClaim{
		holding(migClaim("team-a", "big", "3g.71gb"), "gpu-0-mig-3g-71gb-0"),
		holding(migClaim("team-a", "small", "1g.18gb"), "gpu-0-mig-1g-18gb-4"),
		migClaim("team-b", "want", "3g.71gb"),
	}
	snap.Pods = []*corev1.Pod{ptr.To(pendingPod("team-b", "want", "want"))}
	v := verdicts(t, snap, "want")
	at4 := v["node-m/gpu-0-mig-3g-71gb-4"]
	assert.False(t, at4.Fits)
	assert.Contains(t, at4.Reasons, "no free placement for 3g.71gb at slice 4: a 1g.18gb at slice 4 blocks it")
	assert.Empty(t, at4.FitsIf, "no capacity change makes it fit")
	at0 := v["node-m/gpu-0-mig-3g-71gb-0"]
	assert.False(t, at0.Fits)
	assert.Contains(t, at0.Reasons, "held whole by claim team-a/big")

	// Once the 1g goes, the 3g at 4 fits (the allocator agrees).
	snap.Claims = append(snap.Claims[:1], snap.Claims[2:]...)
	v = verdicts(t, snap, "want")
	assert.True(t, v["node-m/gpu-0-mig-3g-71gb-4"].Fits)
}

// A software slice does not land on a GPU in MIG use, and MIG devices not
// on a GPU with software slices; a profile's instance count is a limit.
func TestWhyMIGAndSoftwareSlicesExcludeEachOther(t *testing.T) {
	snap := migCluster(t)
	snap.Claims = []resourceapi.ResourceClaim{
		holding(migClaim("team-a", "small", "1g.18gb"), "gpu-0-mig-1g-18gb-4"),
		claim("team-b", "slice", "10Gi", "30"),
	}
	snap.Slices = snap.Slices[1:] // node-m only
	snap.Pods = []*corev1.Pod{ptr.To(pendingPod("team-b", "slice", "slice"))}
	v := verdicts(t, snap, "slice")
	whole := v["node-m/gpu-0"]
	assert.False(t, whole.Fits)
	assert.Contains(t, whole.Reasons, "GPU 0 is in MIG use: 1g.18gb at slice 4 (team-a/small) allocated")

	snap = migCluster(t)
	snap.Slices = snap.Slices[1:]
	snap.Claims = []resourceapi.ResourceClaim{
		allocated(claim("team-a", "soft", "10Gi", "30"), "soft", "node-m", "gpu-0", "10Gi", "30", "", 0),
		migClaim("team-b", "want", "3g.71gb"),
	}
	snap.Pods = []*corev1.Pod{ptr.To(pendingPod("team-b", "want", "want"))}
	v = verdicts(t, snap, "want")
	assert.Contains(t, v["node-m/gpu-0-mig-3g-71gb-4"].Reasons, "the whole GPU 0 is taken by software slices (1 claims)")

	snap = migCluster(t)
	snap.Claims = []resourceapi.ResourceClaim{
		holding(migClaim("team-a", "media", "1g.18gb+me"), "gpu-0-mig-1g-18gb-me-0"),
		migClaim("team-b", "want", "1g.18gb+me"),
	}
	snap.Pods = []*corev1.Pod{ptr.To(pendingPod("team-b", "want", "want"))}
	v = verdicts(t, snap, "want")
	at3 := v["node-m/gpu-0-mig-1g-18gb-me-3"]
	assert.False(t, at3.Fits)
	assert.Contains(t, at3.Reasons, "1g.18gb+me: all 1 instances the GPU allows are allocated")
}

// nodes shows the GPU in MIG mode with its admin's and allocated
// instances and their claims; free placements are not listed.
func TestNodesMIGLayout(t *testing.T) {
	snap := migCluster(t, [2]int{nvml.GPU_INSTANCE_PROFILE_3_SLICE, 0})
	snap.Claims = []resourceapi.ResourceClaim{
		allocated(migClaim("team-a", "a", "1g.18gb"), "a", "node-m", "gpu-0-mig-1g-18gb-4", "10Gi", "30", "", 0),
		allocated(migClaim("team-a", "b", "1g.18gb"), "b", "node-m", "gpu-0-mig-1g-18gb-4", "5Gi", "30", "", 0),
	}
	rows := Nodes(snap)
	require.Len(t, rows, 2, "one row per GPU, MIG devices folded in")
	m := rows[0]
	assert.Equal(t, "node-m", m.Node)
	assert.Equal(t, "gpu-0", m.GPU, "the whole-GPU device is not published next to an admin's instance; the row stays")
	assert.Equal(t, migUUID, m.UUID)
	assert.Equal(t, MIGModeOn, m.MIG)
	assert.Equal(t, 2, m.Claims)
	assert.Equal(t, []MIGInstanceRow{
		{Device: "gpu-0-mig-3g-71gb-0", Profile: "3g.71gb", PlacementStart: 0, PlacementSize: 3, Static: true},
		{Device: "gpu-0-mig-1g-18gb-4", Profile: "1g.18gb", PlacementStart: 4, PlacementSize: 1, Claims: []string{"team-a/a", "team-a/b"}},
	}, m.Instances)
	assert.Zero(t, m.MemoryCapacity, "no whole-GPU device publishes the GPU's memory")
	assert.Equal(t, migDeviceMemory(t, snap, "gpu-0-mig-1g-18gb-4"), m.MemoryAllocated,
		"the instance holding claims is allocated whole; the admin's idle one is not")
	assert.Equal(t, int64(100*1/7), m.CoresAllocated, "1 of the H200's 7 compute slices")
	assert.Empty(t, rows[1].MIG)

	var out bytes.Buffer
	require.NoError(t, PrintNodes(&out, rows, false))
	golden(t, "nodes-mig.txt", out.String())
}

// A GPU in MIG mode with its whole-GPU device published: its memory is
// the GPU's, the instances that hold claims count in what is allocated,
// whatever the claims inside them booked, and what those claims use in
// what is used.
func TestNodesMIGAllocatedInstances(t *testing.T) {
	snap := migCluster(t)
	snap.Slices = snap.Slices[1:] // node-m only
	snap.Claims = []resourceapi.ResourceClaim{
		holding(migClaim("team-a", "big", "3g.71gb"), "gpu-0-mig-3g-71gb-4"),
		allocated(migClaim("team-a", "s1", "1g.18gb"), "s1", "node-m", "gpu-0-mig-1g-18gb-0", "2Gi", "30", "1Gi", 0),
		allocated(migClaim("team-a", "s2", "1g.18gb"), "s2", "node-m", "gpu-0-mig-1g-18gb-0", "3Gi", "30", "512Mi", 0),
	}
	rows := Nodes(snap)
	require.Len(t, rows, 1)
	m := rows[0]
	assert.Equal(t, MIGModeOn, m.MIG)
	assert.Positive(t, m.MemoryCapacity, "the whole-GPU device publishes the GPU's memory")
	assert.Equal(t, migDeviceMemory(t, snap, "gpu-0-mig-3g-71gb-4")+migDeviceMemory(t, snap, "gpu-0-mig-1g-18gb-0"),
		m.MemoryAllocated)
	assert.Equal(t, int64(100*3/7+100*1/7), m.CoresAllocated, "3 and 1 of the H200's 7 compute slices")
	assert.Equal(t, 3, m.Claims)
	require.NotNil(t, m.MemoryUsed, "the claims inside the instance report their use")
	assert.Equal(t, int64(1536)<<20, *m.MemoryUsed)
}

// migDeviceMemory is the memory device name publishes on node-m.
func migDeviceMemory(t *testing.T, snap *Snapshot, name string) int64 {
	t.Helper()
	for _, s := range snap.Slices {
		for _, d := range s.Spec.Devices {
			if s.Spec.Pool.Name == "node-m" && d.Name == name {
				v := d.Capacity[names.CapacityMemory].Value
				return v.Value()
			}
		}
	}
	require.Failf(t, "no such device", "%s", name)
	return 0
}
