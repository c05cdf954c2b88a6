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
	"context"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilversion "k8s.io/apimachinery/pkg/util/version"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/names"
)

const (
	migClass = "mig.vgpu.dra.dev"
	// migDevicesPerGPU is what an H200 in MIG mode publishes (docs/mig.md):
	// the whole GPU and one device per profile and placement.
	migDevicesPerGPU = 29
	// migRetryTimeout bounds a pod's start after a plugin crash: the
	// kubelet retries the failed prepare with a back-off.
	migRetryTimeout = 3 * time.Minute
)

// migNode is the node whose GPUs the MIG specs put in MIG mode: the last,
// so that the single-node specs' node keeps plain GPUs. Both specs switch
// it back when they end (driver.sh mig off), as the burst spec restores
// its GPU memory, so the other specs on it see plain GPUs too.
func migNode(t *testing.T) string {
	t.Helper()
	needsNodes(t, 2)
	needsChart(t) // one node only runs the plugin as a host process; the MIG node is the second
	return cluster.nodes[len(cluster.nodes)-1]
}

// enableMIG turns node's simulated GPUs into H200s in MIG mode for the
// spec and waits for their MIG devices. At the end the spec's pods go
// first (their instances with them), then MIG is switched off again.
func enableMIG(t *testing.T, f *framework, node string) {
	t.Helper()
	require.Empty(t, migInstances(t, node), "MIG instances on %s before the spec", node)
	f.driverOn(node, "mig", "on")
	t.Cleanup(func() {
		if t.Failed() {
			f.dumpDiagnostics()
		}
		f.deleteNamespace()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		deadline := time.Now().Add(deleteTimeout)
		for len(migInstances(t, node)) > 0 && time.Now().Before(deadline) {
			time.Sleep(500 * time.Millisecond)
		}
		assert.Empty(t, migInstances(t, node), "MIG instances left on %s after the spec's pods went", node)
		cmd := exec.CommandContext(ctx, cluster.driverSh, "mig", "off")
		cmd.Env = append(os.Environ(), "E2E_DRIVER_NODE="+node)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("E2E_DRIVER_NODE=%s driver.sh mig off: %v\n%s", node, err, out)
		}
	})
	if v, err := utilversion.ParseGeneric(cluster.k8sVersion); err == nil && !v.AtLeast(utilversion.MustParseGeneric("1.36.2")) {
		// The plugin publishes no MIG devices there, and says why.
		msg := f.waitNodeEvent(node, "SharedCountersUnsafe", time.Minute).Message
		require.Contains(t, msg, "publishing GPUs in MIG mode as their whole-GPU device only")
		t.Skipf("Kubernetes %s: the plugin publishes no MIG devices before 1.36.2, whose scheduler counts an allocated shareable device's counters (its Event: %s)", cluster.k8sVersion, msg)
	}
	f.poll("the MIG devices of "+node+" published", time.Minute, func() (bool, error) {
		devs, err := nodeDevices(f, node)
		if err != nil {
			return false, err
		}
		_, ok := devs["gpu-1-mig-3g-71gb-4"]
		return ok && len(devs) == 2*migDevicesPerGPU, nil
	})
}

// nodeDevices returns the devices node's plugin publishes, by name.
func nodeDevices(f *framework, node string) (map[string]resourceapi.Device, error) {
	slices, err := f.c.ResourceV1().ResourceSlices().List(f.ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string]resourceapi.Device{}
	for _, s := range slices.Items {
		if s.Spec.Driver == driverName && s.Spec.NodeName != nil && *s.Spec.NodeName == node {
			for _, d := range s.Spec.Devices {
				out[d.Name] = d
			}
		}
	}
	return out, nil
}

// migInstances lists the MIG GPU instances of node's simulated GPUs as
// "gpu<minor>/mig/gi<id>": the fake NVML keeps a capability file for
// each instance in its shared state, and only for those.
func migInstances(t *testing.T, node string) []string {
	t.Helper()
	root := filepath.Join(cluster.viewOf(node), "driver", "fake-proc", "driver", "nvidia", "capabilities")
	files, err := filepath.Glob(filepath.Join(root, "gpu*", "mig", "gi*", "access"))
	require.NoError(t, err)
	var out []string
	for _, f := range files {
		rel, err := filepath.Rel(root, filepath.Dir(f))
		require.NoError(t, err)
		out = append(out, rel)
	}
	sort.Strings(out)
	return out
}

// staticDevices lists node's published devices of instances its plugin
// did not create: an instance a crashed plugin leaked would be one.
func staticDevices(t *testing.T, f *framework, node string) []string {
	t.Helper()
	devs, err := nodeDevices(f, node)
	require.NoError(t, err)
	var out []string
	for name, d := range devs {
		if a, ok := d.Attributes[names.AttrStatic]; ok && a.BoolValue != nil && *a.BoolValue {
			out = append(out, name)
		}
	}
	return out
}

// migRequest asks for a MIG device of profile on node (parent: the GPU
// index, -1 for any).
func migRequest(profile string, parent int, memory, cores string) claimRequest {
	cel := fmt.Sprintf(`device.attributes["vgpu.dra.dev"].profile == %q`, profile)
	if parent >= 0 {
		cel += fmt.Sprintf(` && device.attributes["vgpu.dra.dev"].parentIndex == %d`, parent)
	}
	return claimRequest{class: migClass, cel: cel, memory: memory, cores: cores}
}

// migAllocation is a claim's MIG device as the scheduler chose it.
type migAllocation struct {
	pod, device string
	parent      int64
	start, size int64
	memory      int64 // the device's published memory
	uuid        string
	probeUUID   string // the UUID as cuda-probe prints it
	configLimit int64
}

// checkMIGPod checks what a container of a claim on a MIG device (or on
// the whole-GPU device of a GPU in MIG mode) sees: exactly one CUDA
// device, the claim's instance (its MIG- UUID in CUDA_VISIBLE_DEVICES and
// NVIDIA_VISIBLE_DEVICES, its capability nodes), with the claim's memory
// limit as its total, and an allocation past it refused.
func checkMIGPod(t *testing.T, f *framework, node, pod string, limit int64) migAllocation {
	t.Helper()
	p := f.waitRunning(pod)
	claim := f.claimOf(p, "gpu")
	res := allocatedDevice(t, claim)
	devs, err := nodeDevices(f, node)
	require.NoError(t, err)
	d, ok := devs[res.Device]
	require.True(t, ok, "pod %s: device %s is published by %s", pod, res.Device, node)
	capacity := d.Capacity["memory"].Value
	a := migAllocation{pod: pod, device: res.Device, memory: capacity.Value()}
	if prof, ok := d.Attributes[names.AttrProfile]; ok && prof.StringValue != nil {
		t.Logf("pod %s: %s (%s)", pod, res.Device, *prof.StringValue)
		a.parent = intAttr(t, d, names.AttrParentIndex)
		a.start = intAttr(t, d, names.AttrPlacementStart)
		a.size = intAttr(t, d, names.AttrPlacementSize)
	} else {
		a.parent = intAttr(t, d, names.AttrIndex)
		m := d.Attributes[names.AttrMIGEnabled]
		assert.True(t, m.BoolValue != nil && *m.BoolValue, "pod %s: %s is in MIG mode", pod, res.Device)
	}
	if limit == 0 {
		limit = a.memory // a claim without requests has the whole instance
	}

	cfgOut, err := f.execIn(pod, "c0", "cat", path.Join(containerClaims, string(claim.UID), "config"))
	require.NoError(t, err, "%s: read the claim's config", pod)
	cfg := parseConfig(cfgOut)
	a.uuid = cfg["device.0.uuid"]
	require.True(t, strings.HasPrefix(a.uuid, "MIG-"), "%s: the config is keyed by the instance's MIG UUID, not %q", pod, a.uuid)
	a.configLimit, err = strconv.ParseInt(cfg["device.0.memory_limit_bytes"], 10, 64)
	require.NoError(t, err, "%s: config memory limit", pod)
	assert.Equal(t, limit, a.configLimit, "%s: config memory limit", pod)

	envOut, err := f.execIn(pod, "c0", "env")
	require.NoError(t, err)
	envs := parseEnv(envOut)
	assert.Equal(t, a.uuid, envs["CUDA_VISIBLE_DEVICES"], "%s: CUDA_VISIBLE_DEVICES", pod)
	assert.Equal(t, a.uuid, envs["NVIDIA_VISIBLE_DEVICES"], "%s: NVIDIA_VISIBLE_DEVICES", pod)
	// The instance's GPU- and compute-instance capability nodes, nothing else.
	caps, err := f.execIn(pod, "c0", "ls", "/dev/nvidia-caps")
	require.NoError(t, err, "%s: /dev/nvidia-caps", pod)
	assert.Len(t, strings.Fields(caps), 2, "%s: capability nodes %q", pod, caps)

	// cuda-probe prints every CUDA UUID with a GPU- prefix.
	a.probeUUID = "GPU-" + strings.TrimPrefix(a.uuid, "MIG-")
	assert.Equal(t, []string{a.probeUUID}, f.visibleGPUs(pod, "c0"), "%s: CUDA sees the instance alone", pod)
	info := f.probeMemInfo(pod, "c0", 0, a.probeUUID)
	assert.Equal(t, limit, info.Total, "%s: cuMemGetInfo total in the instance", pod)
	assert.Equal(t, "CUDA_ERROR_OUT_OF_MEMORY", f.probeAlloc(pod, "c0", 0, a.probeUUID, limit+mib), "%s: allocating past the limit", pod)
	return a
}

// intAttr is an integer attribute the device must have.
func intAttr(t *testing.T, d resourceapi.Device, name resourceapi.QualifiedName) int64 {
	t.Helper()
	a, ok := d.Attributes[name]
	require.True(t, ok && a.IntValue != nil, "device %s: integer attribute %s", d.Name, name)
	return *a.IntValue
}

// assertNoOverlap fails when two MIG devices of one GPU share a memory slice.
func assertNoOverlap(t *testing.T, allocs ...migAllocation) {
	t.Helper()
	for i, a := range allocs {
		for _, b := range allocs[i+1:] {
			if a.device == b.device || a.parent != b.parent {
				continue
			}
			assert.True(t, a.start+a.size <= b.start || b.start+b.size <= a.start,
				"%s (%s, slices %d+%d) and %s (%s, slices %d+%d) overlap", a.pod, a.device, a.start, a.size, b.pod, b.device, b.start, b.size)
		}
	}
}

// TestMIGInstancesIsolatedSharedAndExclusive is docs/mig.md end to end on
// a node whose two simulated H200s are in MIG mode: a 3g and a 1g pod get
// disjoint instances of GPU 0, each seeing exactly its own; a software
// slice goes to the GPU without instances and runs inside its full-size
// instance; a whole GPU is then nowhere (kubectl vgpu why says MIG use);
// two pods share a 3g instance under hard limits; deleting the pods
// destroys every instance.
func TestMIGInstancesIsolatedSharedAndExclusive(t *testing.T) {
	node := migNode(t)
	f := newFramework(t)
	enableMIG(t, f, node)

	// 3g.71gb and 1g.18gb on GPU 0: the scheduler picks placements that do
	// not overlap, prepare creates the instances.
	f.createClaimTemplate("mig-3g", migRequest("3g.71gb", 0, "", ""))
	f.createClaimTemplate("mig-1g", migRequest("1g.18gb", 0, "", ""))
	f.createPod(podSpec{name: "mig-3g", node: node, claims: []podClaim{{name: "gpu", template: "mig-3g"}}})
	f.createPod(podSpec{name: "mig-1g", node: node, claims: []podClaim{{name: "gpu", template: "mig-1g"}}})
	big := checkMIGPod(t, f, node, "mig-3g", 0)
	small := checkMIGPod(t, f, node, "mig-1g", 0)
	assert.EqualValues(t, 0, big.parent)
	assert.EqualValues(t, 0, small.parent)
	assert.NotEqual(t, big.uuid, small.uuid, "two instances")
	assert.Greater(t, big.memory, small.memory, "a 3g instance has more memory than a 1g")
	assertNoOverlap(t, big, small)
	assert.Len(t, migInstances(t, node), 2, "the fake NVML's instances: %v", migInstances(t, node))

	// A software slice does not land on GPU 0, whose counters the
	// instances hold: it takes GPU 1's whole-GPU device, which prepare
	// realises as GPU 1's full-size instance.
	f.createClaimTemplate("slice", claimRequest{memory: "4Gi", cores: "10"})
	f.createPod(podSpec{name: "slice", node: node, claims: []podClaim{{name: "gpu", template: "slice"}}})
	slice := checkMIGPod(t, f, node, "slice", 4*gib)
	assert.Equal(t, "gpu-1", slice.device, "the software slice avoids the GPU with MIG instances")
	assert.Len(t, migInstances(t, node), 3, "GPU 1's full-size instance: %v", migInstances(t, node))

	// A whole GPU fits nowhere now; why names GPU 0's MIG use.
	f.createClaimTemplate("whole", claimRequest{})
	f.createPod(podSpec{name: "whole", node: node, claims: []podClaim{{name: "gpu", template: "whole"}}})
	f.waitUnschedulable("whole")
	why := f.kubectlVGPU("why", "-n", f.ns, "whole")
	assert.Contains(t, why, "fit on none of")
	assert.Regexp(t, `GPU 0 is in MIG use: .*3g\.71gb.*allocated`, why)
	assert.Regexp(t, `gpu-1\s.*memory: asks`, why, "GPU 1 is shared by the software slice")
	f.deletePodAndWait("whole")

	// The last claim on GPU 1 goes: its full-size instance goes with it.
	f.deletePodAndWait("slice")
	f.poll("GPU 1's full-size instance destroyed", deleteTimeout, func() (bool, error) {
		return len(migInstances(t, node)) == 2, nil
	})

	// Two pods share one 3g instance, each held to its 10Gi inside it.
	f.createClaimTemplate("share", migRequest("3g.71gb", -1, "10Gi", "30"))
	f.createPod(podSpec{name: "share-a", node: node, claims: []podClaim{{name: "gpu", template: "share"}}})
	f.createPod(podSpec{name: "share-b", node: node, claims: []podClaim{{name: "gpu", template: "share"}}})
	a := checkMIGPod(t, f, node, "share-a", 10*gib)
	b := checkMIGPod(t, f, node, "share-b", 10*gib)
	assert.Equal(t, a.device, b.device, "both shares on one MIG device")
	assert.Equal(t, a.uuid, b.uuid, "both shares in one instance")
	assert.NotEqual(t, big.uuid, a.uuid, "not the exclusive 3g's instance")
	assertNoOverlap(t, big, small, a)
	h := f.probeHold("share-a", "c0", 0, a.probeUUID, 8*gib)
	assert.Equal(t, "CUDA_ERROR_OUT_OF_MEMORY", f.probeAlloc("share-a", "c0", 0, a.probeUUID, 4*gib),
		"share-a: 8Gi held + 4Gi is past its 10Gi")
	assert.Equal(t, "CUDA_SUCCESS", f.probeAlloc("share-b", "c0", 0, b.probeUUID, 8*gib),
		"share-b: its own 10Gi, whatever share-a holds")
	h.stop()
	assert.Len(t, migInstances(t, node), 3, "the shared instance is one: %v", migInstances(t, node))

	// Deleting the pods destroys every instance.
	for _, p := range []string{"mig-3g", "mig-1g", "share-a", "share-b"} {
		f.deletePodAndWait(p)
	}
	f.poll("every MIG instance of "+node+" destroyed", deleteTimeout, func() (bool, error) {
		return len(migInstances(t, node)) == 0, nil
	})
	assert.Empty(t, staticDevices(t, f, node), "no instance the plugin does not own")
}

// TestMIGPluginKilledMidCreateLeaksNoInstance SIGKILLs the plugin while it
// prepares a claim on a MIG device, right after the fake NVML created the
// GPU instance (driver.sh kill-on-mig-create): the restarted plugin
// destroys or adopts what the crash left, the kubelet's retry prepares the
// claim, and the node holds exactly its instance, none unknown. A plain
// SIGKILL while the pod runs keeps the instance; deleting the pod destroys
// it.
func TestMIGPluginKilledMidCreateLeaksNoInstance(t *testing.T) {
	node := migNode(t)
	f := newFramework(t)
	enableMIG(t, f, node)

	killer := exec.CommandContext(f.ctx, cluster.driverSh, "kill-on-mig-create", "90")
	killer.Env = append(os.Environ(), "E2E_DRIVER_NODE="+node)
	var killed syncBuffer
	killer.Stdout, killer.Stderr = &killed, &killed
	require.NoError(t, killer.Start())
	// The killer has the plugin's pid and the instances before it when it
	// says it waits.
	f.poll("driver.sh kill-on-mig-create ready", 30*time.Second, func() (bool, error) {
		return strings.Contains(killed.String(), "waiting for a new MIG GPU instance"), nil
	})
	f.createClaimTemplate("victim", migRequest("3g.71gb", -1, "", ""))
	f.createPod(podSpec{name: "victim", node: node, claims: []podClaim{{name: "gpu", template: "victim"}}})
	err := killer.Wait()
	require.NoError(t, err, "driver.sh kill-on-mig-create:\n%s", killed.String())
	t.Logf("driver.sh kill-on-mig-create:\n%s", killed.String())
	f.driverOn(node, "start")

	var pod *corev1.Pod
	f.poll("pod victim Running after the plugin's crash", migRetryTimeout, func() (bool, error) {
		p, err := f.c.CoreV1().Pods(f.ns).Get(f.ctx, "victim", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		pod = p
		return p.Status.Phase == corev1.PodRunning && allReady(p), nil
	})
	v := checkMIGPod(t, f, node, pod.Name, 0)
	assert.Len(t, migInstances(t, node), 1, "the victim's instance and no other: %v", migInstances(t, node))
	assert.Empty(t, staticDevices(t, f, node), "the restarted plugin found no instance it does not own")

	// SIGKILLed while the pod runs, the plugin keeps the instance.
	f.driverOn(node, "kill")
	f.driverOn(node, "start")
	assert.Equal(t, v.uuid, checkMIGPod(t, f, node, "victim", 0).uuid, "the same instance after the restart")
	assert.Len(t, migInstances(t, node), 1, "%v", migInstances(t, node))
	assert.Empty(t, staticDevices(t, f, node))

	f.deletePodAndWait("victim")
	f.poll("the victim's instance destroyed", deleteTimeout, func() (bool, error) {
		return len(migInstances(t, node)) == 0, nil
	})
}
