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
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
)

// Specs of issue 14: unhealthy GPUs are tainted, each container sees only
// its GPUs, limit hits become events.

// taintTimeout bounds how long an injected XID takes to reach the slice:
// the fake NVML polls its event file every 10 ms, the slice controller
// publishes within seconds.
const taintTimeout = time.Minute

// injectXID appends an XID for the GPU to the fake NVML's event file, which
// the plugin's XID watcher reads (vgpu-core/fake/README.md).
func injectXID(t *testing.T, uuid string, xid int) {
	t.Helper()
	path := filepath.Join(cluster.nodeView, "driver", "fake-state", "xid-events")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o666)
	require.NoError(t, err, "open the fake NVML's XID event file")
	_, err = fmt.Fprintf(f, "%s %d\n", uuid, xid)
	require.NoError(t, err, "inject XID %d on %s", xid, uuid)
	require.NoError(t, f.Close(), "close the fake NVML's XID event file")
}

// publishedGPU returns the published device named name.
func publishedGPU(t *testing.T, f *framework, name string) resourceapi.Device {
	t.Helper()
	for _, d := range publishedGPUs(t, f) {
		if d.Name == name {
			return d
		}
	}
	require.FailNow(t, "device not published", "%s", name)
	return resourceapi.Device{}
}

// waitTaint waits until device name carries exactly want (nil: no taint).
func (f *framework) waitTaint(name string, want *resourceapi.DeviceTaint) {
	f.t.Helper()
	what := "device " + name + " untainted"
	if want != nil {
		what = fmt.Sprintf("device %s tainted %s=%s:%s", name, want.Key, want.Value, want.Effect)
	}
	f.poll(what, taintTimeout, func() (bool, error) {
		taints := publishedGPU(f.t, f, name).Taints
		if want == nil {
			return len(taints) == 0, nil
		}
		return len(taints) == 1 && taints[0].Key == want.Key && taints[0].Value == want.Value && taints[0].Effect == want.Effect, nil
	})
}

func byIndex(i int) string {
	return fmt.Sprintf(`device.attributes["%s"].index == %d`, driverName, i)
}

func TestXIDTaintsTheGPUUntilThePluginFindsItHealthy(t *testing.T) {
	f := newFramework(t)
	gpu0 := publishedGPU(t, f, "gpu-0")
	uuid0 := *gpu0.Attributes["uuid"].StringValue
	require.Empty(t, gpu0.Taints, "gpu-0 starts healthy")
	// Restarting the plugin is the recovery this spec checks; it also
	// leaves the next spec an untainted node if this one fails midway.
	defer func() {
		f.driver("restart")
		f.waitTaint("gpu-0", nil)
	}()

	f.createClaimTemplate("small", claimRequest{memory: "1Gi"})
	f.createClaimTemplate("on-gpu0", claimRequest{memory: "1Gi", cel: byIndex(0)})
	f.createPod(podSpec{name: "victim", claims: []podClaim{{name: "gpu", template: "on-gpu0"}}})
	f.waitRunning("victim")

	// An XID that leaves work alive: NoSchedule.
	injectXID(t, uuid0, 94)
	f.waitTaint("gpu-0", &resourceapi.DeviceTaint{Key: "vgpu.dra.dev/xid", Value: "94", Effect: resourceapi.DeviceTaintEffectNoSchedule})

	// New claims avoid gpu-0; one that needs gpu-0 stays Pending with the scheduler's reason.
	f.createPod(podSpec{name: "newcomer", claims: []podClaim{{name: "gpu", template: "small"}}})
	newcomer := f.waitRunning("newcomer")
	assert.Equal(t, "gpu-1", allocatedDevice(t, f.claimOf(newcomer, "gpu")).Device, "a new claim lands on the untainted GPU")
	f.createPod(podSpec{name: "needs-gpu0", claims: []podClaim{{name: "gpu", template: "on-gpu0"}}})
	reason := f.waitUnschedulable("needs-gpu0")
	t.Logf("needs-gpu0 is Pending: %s", reason)
	victim, err := f.c.CoreV1().Pods(f.ns).Get(f.ctx, "victim", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Nil(t, victim.DeletionTimestamp, "NoSchedule leaves the running pod on gpu-0 alone")

	// A fatal XID: NoExecute evicts the pod using gpu-0.
	injectXID(t, uuid0, 79)
	f.waitTaint("gpu-0", &resourceapi.DeviceTaint{Key: "vgpu.dra.dev/xid", Value: "79", Effect: resourceapi.DeviceTaintEffectNoExecute})
	f.poll("pod victim evicted from the NoExecute GPU", 2*time.Minute, func() (bool, error) {
		p, err := f.c.CoreV1().Pods(f.ns).Get(f.ctx, "victim", metav1.GetOptions{})
		if err != nil {
			return ignoreNotFound(err) == nil, ignoreNotFound(err)
		}
		return p.DeletionTimestamp != nil, nil
	})
	assert.Equal(t, "gpu-1", allocatedDevice(t, f.claimOf(newcomer, "gpu")).Device)

	// Recovery: a restarted plugin that finds the GPU healthy lifts the taint (deferred above).
}

func TestContainerSeesExactlyItsClaimsGPUs(t *testing.T) {
	f := newFramework(t)
	f.createClaimTemplate("on-gpu1", claimRequest{memory: "2Gi", cel: byIndex(1)})
	f.createPod(podSpec{name: "gpu1-only", claims: []podClaim{{name: "gpu", template: "on-gpu1"}}})
	pod := f.waitRunning("gpu1-only")
	claim := f.claimOf(pod, "gpu")
	require.Equal(t, "gpu-1", allocatedDevice(t, claim).Device)
	uuid1 := *publishedGPU(t, f, "gpu-1").Attributes["uuid"].StringValue

	assert.Equal(t, []string{uuid1}, f.visibleGPUs(pod.Name, "c0"), "one GPU, gpu-1, as CUDA device 0")
	assert.Equal(t, 2*gib, f.probeMemInfo(pod.Name, "c0", 0, uuid1).Total, "CUDA device 0 carries the claim's limit")
	nv := f.probe(pod.Name, "c0", "nvml")
	assert.Equal(t, []string{uuid1}, nv[len(nv)-1].UUIDs, "NVML shows gpu-1 alone, as index 0")
	out, err := f.execIn(pod.Name, "c0", "sh", "-c", "ls /dev | grep '^nvidia[0-9]'")
	require.NoError(t, err)
	assert.Equal(t, "nvidia1\n", out, "the CDI spec injected only gpu-1's device node")
	// Two claims on two GPUs: TestPodWithTwoClaimsOnTwoGPUs checks that the container sees both.
}

func TestLimitHitsBecomeEventsMetricsAndClaimStatus(t *testing.T) {
	f := newFramework(t)
	f.createClaimTemplate("tight", claimRequest{memory: "1Gi"})
	f.createPod(podSpec{name: "greedy", claims: []podClaim{{name: "gpu", template: "tight"}}})
	pod := f.waitRunning("greedy")
	claim := f.claimOf(pod, "gpu")
	out, err := f.execIn(pod.Name, "c0", "cat", containerClaims+"/"+string(claim.UID)+"/config")
	require.NoError(t, err)
	uuid := parseConfig(out)["device.0.uuid"]

	assert.Equal(t, "CUDA_ERROR_OUT_OF_MEMORY", f.probeAlloc(pod.Name, "c0", 0, uuid, 2*gib), "an allocation past the limit is refused")

	var event corev1.Event
	f.poll("a GPUMemoryLimitReached event on pod greedy", 2*time.Minute, func() (bool, error) {
		list, err := f.c.CoreV1().Events(f.ns).List(f.ctx, metav1.ListOptions{FieldSelector: fields.Set{
			"involvedObject.name": pod.Name, "reason": "GPUMemoryLimitReached"}.String()})
		if err != nil || len(list.Items) == 0 {
			return false, err
		}
		event = list.Items[0]
		return true, nil
	})
	assert.Equal(t, corev1.EventTypeWarning, event.Type)
	assert.Contains(t, event.Message, "last requested 2Gi, limit 1Gi", "the event names requested and limit")
	assert.Contains(t, event.Message, "in use", "the event names the use")

	labels := []string{`namespace="` + f.ns + `"`, `claim="` + claim.Name + `"`, `device_uuid="` + uuid + `"`}
	f.poll("vgpu_dra_claim_memory_refusals_total to count the refusal", time.Minute, func() (bool, error) {
		v, ok := sampleValue(scrape(t), "vgpu_dra_claim_memory_refusals_total", labels...)
		return ok && v >= 1, nil
	})
	f.poll("kubectl describe resourceclaim to show the refusal count", 2*time.Minute, func() (bool, error) {
		described, err := kubectl(f.ctx, "describe", "resourceclaim", "-n", f.ns, claim.Name)
		if err != nil {
			return false, err
		}
		return regexp.MustCompile(`Memory Refusals:\s+1\b`).MatchString(described), nil
	})
}
