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
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/cluster/allocator"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/names"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/devices"
	nvgpu "github.com/vgpu-dra/vgpu-dra-driver/pkg/node/discovery"
)

// mpsCluster is node-s with gpus 16Gi GPUs published as the plugin does
// with --mps (devices.MIGPool: gpu-<i> and gpu-<i>-mps consuming the
// GPU's sharing-mode counter), and the shipped DeviceClasses.
func mpsCluster(t *testing.T, gpus int) *Snapshot {
	t.Helper()
	var in []devices.GPU
	for i := range gpus {
		in = append(in, devices.GPU{Info: nvgpu.Info{UUID: mpsUUID(i), Index: i, Minor: i, ProductName: "NVIDIA A10", MemoryBytes: 16 << 30, Multiprocessors: 72}})
	}
	pool, _ := devices.MIGPool(in, devices.Options{}, devices.MIGOptions{PartitionableDevices: true, MPS: true})
	snap := &Snapshot{Nodes: []corev1.Node{node("node-s")}}
	for i, s := range pool.Slices {
		snap.Slices = append(snap.Slices, resourceapi.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-s-%d", i)},
			Spec: resourceapi.ResourceSliceSpec{
				Driver: names.DriverName, NodeName: ptr.To("node-s"),
				Pool:    resourceapi.ResourcePool{Name: "node-s", Generation: 1, ResourceSliceCount: int64(len(pool.Slices))},
				Devices: s.Devices, SharedCounters: s.SharedCounters,
			},
		})
	}
	for _, name := range []string{names.DeviceClass, names.MPSDeviceClass} {
		raw, err := os.ReadFile(filepath.Join("..", "..", "..", "deviceclasses", name+".yaml"))
		require.NoError(t, err)
		var class resourceapi.DeviceClass
		require.NoError(t, yaml.Unmarshal(raw, &class))
		snap.Classes = append(snap.Classes, class)
	}
	return snap
}

func mpsUUID(i int) string { return fmt.Sprintf("GPU-5d500000-aaaa-bbbb-cccc-00000000000%d", i) }

// mpsClaim asks for an MPS slice with memory and cores ("" = not asked).
func mpsClaim(ns, name, memory, cores string) resourceapi.ResourceClaim {
	c := claim(ns, name, memory, cores)
	c.Spec.Devices.Requests[0].Exactly.DeviceClassName = names.MPSDeviceClass
	return c
}

// onGPU pins c's request to the GPU with NVML index i.
func onGPU(c resourceapi.ResourceClaim, i int) resourceapi.ResourceClaim {
	c.Spec.Devices.Requests[0].Exactly.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
		Expression: fmt.Sprintf(`device.attributes["vgpu.dra.dev"].uuid == %q`, mpsUUID(i))}}}
	return c
}

// allocate has the structured allocator place c on node-s given the
// claims of snap, and adds c to snap allocated and reserved for a pod of
// its name; it fails the test when c does not fit.
func allocate(t *testing.T, snap *Snapshot, c resourceapi.ResourceClaim) {
	t.Helper()
	inv := newInventory(snap)
	a := allocator.New(allocator.Config{DriverName: names.DriverName, Classes: allocator.ClassLister(inv.classes), IsOurs: inv.isOurClass})
	all := make([]*resourceapi.ResourceSlice, len(snap.Slices))
	for i := range snap.Slices {
		all[i] = &snap.Slices[i]
	}
	a.SetSlices(all)
	for i := range snap.Claims {
		a.Observe(&snap.Claims[i])
	}
	pod := pendingPod(c.Namespace, c.Name, c.Name)
	n := node("node-s")
	d, err := a.DryRun(t.Context(), allocator.Request{Pod: &pod, Claims: []*resourceapi.ResourceClaim{&c}, Nodes: []*corev1.Node{&n}})
	require.NoError(t, err, "claim %s/%s", c.Namespace, c.Name)
	c.Status.Allocation = d.Allocations[0]
	c.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: c.Name, UID: types.UID("pod-" + c.Name)}}
	snap.Claims = append(snap.Claims, c)
}

// The MODE column says which of a GPU's devices hold claims; the MPS
// device is folded into its GPU's row with its claims, memory and cores.
func TestNodesMode(t *testing.T) {
	snap := mpsCluster(t, 3)
	allocate(t, snap, onGPU(mpsClaim("team-a", "a", "4Gi", "30"), 0))
	allocate(t, snap, onGPU(mpsClaim("team-a", "b", "2Gi", ""), 1))
	allocate(t, snap, onGPU(mpsClaim("team-b", "c", "6Gi", "20"), 0))
	allocate(t, snap, onGPU(claim("team-b", "sliced", "8Gi", "50"), 2))
	snap.Slices = append(snap.Slices, slice("node-p", gpuDevice(0, 16*gi)))
	snap.Nodes = append(snap.Nodes, node("node-p"))

	rows := Nodes(snap)
	require.Len(t, rows, 4, "one row per GPU: the MPS devices are folded in")
	for i, want := range []struct {
		gpu, mode     string
		claims        int
		memory, cores int64
	}{
		{"gpu-0", ModeMPS, 2, 10 * gi, 50},
		{"gpu-1", ModeMPS, 1, 2 * gi, 100},
		{"gpu-2", ModeTimeSliced, 1, 8 * gi, 50},
	} {
		r := rows[i+1] // after node-p
		assert.Equal(t, "node-s", r.Node)
		assert.Equal(t, want.gpu, r.GPU)
		assert.Equal(t, mpsUUID(i), r.UUID)
		assert.Equal(t, want.mode, r.Mode, want.gpu)
		assert.Equal(t, want.claims, r.Claims, want.gpu)
		assert.Equal(t, want.memory, r.MemoryAllocated, want.gpu)
		assert.Equal(t, want.cores, r.CoresAllocated, want.gpu)
		assert.Equal(t, 16*gi, r.MemoryCapacity)
		assert.Equal(t, want.gpu+"-mps", r.MPSDevice)
	}
	assert.Equal(t, "node-p", rows[0].Node)
	assert.Equal(t, ModeFree, rows[0].Mode, "a GPU without claims")
	assert.Empty(t, rows[0].MPSDevice, "a GPU published without MPS")

	var out bytes.Buffer
	require.NoError(t, PrintNodes(&out, rows, false))
	golden(t, "nodes-mps.txt", out.String())

	claims := Claims(snap, "")
	require.Len(t, claims, 4, "MPS claims are listed like the others")
	assert.Equal(t, ClaimRow{Namespace: "team-a", Claim: "a", Pods: []string{"a"}, State: StateAllocated, Node: "node-s", GPU: "gpu-0-mps",
		UUID: mpsUUID(0), MemoryGranted: 4 * gi, MemoryLimit: 4 * gi, CoresGranted: 30}, claims[0])
	assert.Equal(t, int64(100), claims[1].CoresGranted, "an MPS request without cores gets all SMs")
	out.Reset()
	require.NoError(t, PrintClaims(&out, claims, true, false))
	golden(t, "claims-mps.txt", out.String())
}

// A time-sliced or whole-GPU claim does not fit on a GPU serving MPS
// claims, and why names them; the reverse as well. Once they are gone,
// the claim fits (the allocator agrees).
func TestWhyGPUServesOtherMode(t *testing.T) {
	for name, tc := range map[string]struct {
		holders []resourceapi.ResourceClaim
		want    resourceapi.ResourceClaim
		reason  string
	}{
		"time-sliced on MPS": {
			holders: []resourceapi.ResourceClaim{mpsClaim("team-a", "a", "2Gi", "30"), mpsClaim("team-a", "b", "2Gi", "30")},
			want:    claim("team-b", "want", "4Gi", "20"),
			reason:  "gpu-0 serves MPS claims (team-a/a, team-a/b); a time-sliced or whole-GPU claim fits once they are gone",
		},
		"whole GPU on MPS": {
			holders: []resourceapi.ResourceClaim{mpsClaim("team-a", "a", "2Gi", "30")},
			want:    claim("team-b", "want", "", ""),
			reason:  "gpu-0 serves MPS claims (team-a/a); a time-sliced or whole-GPU claim fits once they are gone",
		},
		"MPS on time-sliced": {
			holders: []resourceapi.ResourceClaim{claim("team-a", "sliced", "2Gi", "10")},
			want:    mpsClaim("team-b", "want", "4Gi", "20"),
			reason:  "gpu-0 serves time-sliced or whole-GPU claims (team-a/sliced); an MPS claim fits once they are gone",
		},
	} {
		t.Run(name, func(t *testing.T) {
			snap := mpsCluster(t, 1)
			for _, h := range tc.holders {
				allocate(t, snap, h)
			}
			snap.Claims = append(snap.Claims, tc.want)
			snap.Pods = []*corev1.Pod{ptr.To(pendingPod("team-b", "want", "want"))}
			exp, err := Why(t.Context(), snap, "team-b", "want")
			require.NoError(t, err)
			require.Len(t, exp.GPUs, 1, "one line for the device the request's class selects")
			v := exp.GPUs[0]
			assert.False(t, v.Fits)
			assert.Equal(t, []string{tc.reason}, v.Reasons)
			assert.Empty(t, v.FitsIf, "no change of the request makes it fit")
			assert.False(t, exp.Nodes[0].Fits)

			snap.Claims = snap.Claims[len(tc.holders):]
			exp, err = Why(t.Context(), snap, "team-b", "want")
			require.NoError(t, err)
			assert.True(t, exp.Nodes[0].Fits, "the GPU takes the claim once the other mode's claims are gone")
		})
	}
}
