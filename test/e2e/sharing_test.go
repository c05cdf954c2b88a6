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
	"fmt"
	"path"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	gib     = int64(1) << 30
	mib     = int64(1) << 20
	preload = "/usr/local/vgpu/libvgpu.so"
)

// checkContainer verifies what the driver put into one container for a
// single-GPU claim with the given limits, and that cuda-probe is held to
// them. It returns the claim's config.
func checkContainer(t *testing.T, f *framework, pod, container string, claim *resourceapi.ResourceClaim, memory int64, cores int) map[string]string {
	t.Helper()
	uid := string(claim.UID)
	dev := allocatedDevice(t, claim)

	out, err := f.execIn(pod, container, "cat", "/etc/ld.so.preload")
	require.NoError(t, err, "%s/%s: /etc/ld.so.preload", pod, container)
	assert.Equal(t, preload, strings.TrimSpace(out), "%s/%s: /etc/ld.so.preload", pod, container)

	cfgPath := path.Join(containerClaims, uid, "config")
	out, err = f.execIn(pod, container, "cat", cfgPath)
	require.NoError(t, err, "%s/%s: read %s", pod, container, cfgPath)
	cfg := parseConfig(out)
	assert.Equal(t, "1", cfg["version"], "config version")
	assert.Equal(t, uid, cfg["claim"], "config claim")
	assert.Equal(t, "1", cfg["device.count"], "config device.count")
	assert.Equal(t, strconv.FormatInt(memory, 10), cfg["device.0.memory_limit_bytes"], "config memory limit")
	assert.Equal(t, strconv.Itoa(cores), cfg["device.0.sm_limit_percent"], "config SM limit")

	_, err = f.execIn(pod, container, "sh", "-c", "echo device.0.memory_limit_bytes=0 >> "+cfgPath)
	assert.Error(t, err, "%s/%s: writing the read-only config must fail", pod, container)
	_, err = f.execIn(pod, container, "sh", "-c", "test -f "+path.Join(containerClaims, uid, "shm", "region"))
	assert.NoError(t, err, "%s/%s: the shared region exists", pod, container)

	out, err = f.execIn(pod, container, "env")
	require.NoError(t, err, "%s/%s: env", pod, container)
	envs := parseEnv(out)
	assert.Equal(t, fmt.Sprintf("%dm", memory/mib), envs["CUDA_DEVICE_MEMORY_LIMIT_0"], "CUDA_DEVICE_MEMORY_LIMIT_0")
	assert.Equal(t, strconv.Itoa(cores), envs["CUDA_DEVICE_SM_LIMIT_0"], "CUDA_DEVICE_SM_LIMIT_0")
	assert.Equal(t, path.Join(containerClaims, uid, "shm", "region"), envs["CUDA_DEVICE_MEMORY_SHARED_CACHE"])

	uuid := cfg["device.0.uuid"]
	require.NotEmpty(t, uuid, "config device.0.uuid")
	for _, d := range publishedGPUs(t, f) {
		if d.Name == dev.Device {
			assert.Equal(t, *d.Attributes["uuid"].StringValue, uuid, "the config names the allocated GPU %s", dev.Device)
		}
	}
	info := f.probeMemInfo(pod, container, 0, uuid)
	assert.Equal(t, memory, info.Total, "%s/%s: cuMemGetInfo total on %s (%s)", pod, container, uuid, dev.Device)
	assert.Equal(t, "CUDA_SUCCESS", f.probeAlloc(pod, container, 0, uuid, memory/2), "allocating half the limit")
	assert.Equal(t, "CUDA_ERROR_OUT_OF_MEMORY", f.probeAlloc(pod, container, 0, uuid, memory+mib), "allocating past the limit")
	return cfg
}

func TestTwoPodsShareGPUsUnderLimits(t *testing.T) {
	f := newFramework(t)
	f.createClaimTemplate("vgpu-4g-30", claimRequest{memory: "4Gi", cores: "30"})
	for _, name := range []string{"share-a", "share-b"} {
		f.createPod(podSpec{name: name, claims: []podClaim{{name: "gpu", template: "vgpu-4g-30"}}})
	}
	devices := map[string]bool{}
	for _, name := range []string{"share-a", "share-b"} {
		pod := f.waitRunning(name)
		claim := f.claimOf(pod, "gpu")
		dev := allocatedDevice(t, claim)
		assert.Equal(t, driverName, dev.Driver)
		assert.NotNil(t, dev.ShareID, "claim %s: a shared allocation has a share ID", claim.Name)
		assert.Equal(t, 4*gib, consumed(dev.ConsumedCapacity, "memory"), "claim %s consumed memory", claim.Name)
		assert.Equal(t, int64(30), consumed(dev.ConsumedCapacity, "cores"), "claim %s consumed cores", claim.Name)
		devices[dev.Device] = true
		checkContainer(t, f, name, "c0", claim, 4*gib, 30)
	}
	// The scheduler is first-fit: both small claims land on one GPU, which is the sharing under test.
	assert.Len(t, devices, 1, "both 4Gi claims share one GPU")
}

// consumed returns one consumed capacity in its base unit, -1 when absent.
func consumed(m map[resourceapi.QualifiedName]resource.Quantity, key resourceapi.QualifiedName) int64 {
	q, ok := m[key]
	if !ok {
		return -1
	}
	return q.Value()
}

func TestOneClaimSharedByTwoContainers(t *testing.T) {
	f := newFramework(t)
	require.NoError(t, f.createClaim("shared", claimRequest{memory: "4Gi", cores: "50"}))
	f.createPod(podSpec{name: "two-containers", containers: 2, claims: []podClaim{{name: "gpu", claim: "shared"}}})
	pod := f.waitRunning("two-containers")
	claim := f.claimOf(pod, "gpu")
	cfgA := checkContainer(t, f, pod.Name, "c0", claim, 4*gib, 50)
	cfgB := checkContainer(t, f, pod.Name, "c1", claim, 4*gib, 50)
	assert.Equal(t, cfgA, cfgB, "both containers read one claim config")

	// One limit for both: while c0 holds 3Gi, c1 cannot get 2Gi more.
	uuid := cfgA["device.0.uuid"]
	holder := f.probeHold(pod.Name, "c0", 0, uuid, 3*gib)
	defer holder.stop()
	assert.Equal(t, "CUDA_ERROR_OUT_OF_MEMORY", f.probeAlloc(pod.Name, "c1", 0, uuid, 2*gib),
		"the second container must see the first one's usage under the shared limit")
	assert.Equal(t, "CUDA_SUCCESS", f.probeAlloc(pod.Name, "c1", 0, uuid, 512*mib),
		"the rest of the shared limit stays usable")
}

func TestPodWithTwoClaimsOnTwoGPUs(t *testing.T) {
	f := newFramework(t)
	byIndex := func(i int) string {
		return fmt.Sprintf(`device.attributes["%s"].index == %d`, driverName, i)
	}
	f.createClaimTemplate("on-gpu0", claimRequest{memory: "4Gi", cores: "20", cel: byIndex(0)})
	f.createClaimTemplate("on-gpu1", claimRequest{memory: "6Gi", cores: "40", cel: byIndex(1)})
	f.createPod(podSpec{name: "two-gpus", claims: []podClaim{
		{name: "first", template: "on-gpu0"}, {name: "second", template: "on-gpu1"}}})
	pod := f.waitRunning("two-gpus")

	first, second := f.claimOf(pod, "first"), f.claimOf(pod, "second")
	assert.NotEqual(t, allocatedDevice(t, first).Device, allocatedDevice(t, second).Device, "the claims are on two GPUs")

	// The container sees exactly the two GPUs, in PCI bus order: gpu-0 is CUDA device 0.
	var uuids []string
	for dev, c := range []struct {
		claim  *resourceapi.ResourceClaim
		memory int64
	}{{first, 4 * gib}, {second, 6 * gib}} {
		claim, memory := c.claim, c.memory
		out, err := f.execIn(pod.Name, "c0", "cat", path.Join(containerClaims, string(claim.UID), "config"))
		require.NoError(t, err, "config of claim %s", claim.Name)
		cfg := parseConfig(out)
		uuid := cfg["device.0.uuid"]
		assert.Equal(t, strconv.FormatInt(memory, 10), cfg["device.0.memory_limit_bytes"], "claim %s memory", claim.Name)
		uuids = append(uuids, uuid)
		assert.Equal(t, memory, f.probeMemInfo(pod.Name, "c0", dev, uuid).Total, "cuMemGetInfo total on %s", uuid)
		assert.Equal(t, "CUDA_ERROR_OUT_OF_MEMORY", f.probeAlloc(pod.Name, "c0", dev, uuid, memory+mib), "past the limit on %s", uuid)
	}
	assert.Equal(t, uuids, f.visibleGPUs(pod.Name, "c0"), "a pod with two claims sees two GPUs")
}

func TestTooLargeClaimStaysPending(t *testing.T) {
	f := newFramework(t)
	f.createClaimTemplate("too-large", claimRequest{memory: "81Gi"})
	f.createPod(podSpec{name: "too-large", claims: []podClaim{{name: "gpu", template: "too-large"}}})
	reason := f.waitUnschedulable("too-large")
	t.Logf("scheduler's reason: %s", reason)
	assert.Contains(t, reason, "claim", "the reason names the claim problem")
	p, err := f.c.CoreV1().Pods(f.ns).Get(f.ctx, "too-large", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, corev1.PodPending, p.Status.Phase)
	assert.Empty(t, p.Spec.NodeName, "the pod is not bound")
}

func TestMalformedOpaqueConfigIsRefusedNamingTheField(t *testing.T) {
	f := newFramework(t)
	bad := claimRequest{memory: "1Gi", config: rawJSON(t, map[string]any{
		"apiVersion": "vgpu.dra.dev/v1alpha1", "kind": "VGPUConfig", "computePolicy": "bogus"})}
	// With the chart the controller's webhook refuses the claim at once;
	// with only the plugin installed the plugin refuses to prepare it. Both
	// must name the field.
	err := f.createClaim("bad-config", bad)
	if cluster.driverMode == "chart" {
		require.Error(t, err, "the controller's admission webhook refuses the claim")
		t.Logf("refusal: %v", err)
		assert.Contains(t, err.Error(), "computePolicy", "admission error names the field")
		return
	}
	require.NoError(t, err, "without the controller the claim is admitted")
	f.createPod(podSpec{name: "bad-config", claims: []podClaim{{name: "gpu", claim: "bad-config"}}})
	var message string
	f.poll("an event about preparing claim bad-config", podStartTimeout, func() (bool, error) {
		evs, err := f.c.CoreV1().Events(f.ns).List(f.ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=bad-config"})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, "computePolicy") {
				message = e.Message
				return true, nil
			}
		}
		return false, nil
	})
	t.Logf("refusal: %s", message)
	p, err := f.c.CoreV1().Pods(f.ns).Get(f.ctx, "bad-config", metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotEqual(t, corev1.PodRunning, p.Status.Phase, "a pod with a malformed config must not run")
}
