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
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// waitClaimFilesGone waits until the host has no trace of a claim left.
func (f *framework) waitClaimFilesGone(uid string) {
	f.t.Helper()
	f.poll("claim "+uid+"'s directory and CDI spec removed", deleteTimeout, func() (bool, error) {
		return len(claimFiles(uid)) == 0, nil
	})
}

func TestDeletingPodsUnpreparesAndCapacityIsReused(t *testing.T) {
	f := newFramework(t)
	// Three quarters of a GPU each: two such claims can never share one GPU,
	// so the second round only fits if the first round's capacity came back.
	f.createClaimTemplate("big", claimRequest{memory: "60Gi"})
	var uids []string
	for round := range 2 {
		names := []string{fmt.Sprintf("big-%d-a", round), fmt.Sprintf("big-%d-b", round)}
		for _, n := range names {
			f.createPod(podSpec{name: n, claims: []podClaim{{name: "gpu", template: "big"}}})
		}
		devices := map[string]bool{}
		uids = uids[:0]
		for _, n := range names {
			pod := f.waitRunning(n)
			claim := f.claimOf(pod, "gpu")
			devices[allocatedDevice(t, claim).Device] = true
			uid := string(claim.UID)
			uids = append(uids, uid)
			assert.NotEmpty(t, claimFiles(uid), "claim %s is prepared on the host", claim.Name)
		}
		assert.Len(t, devices, 2, "round %d: the two 60Gi claims use both GPUs", round)
		for _, n := range names {
			f.deletePodAndWait(n)
		}
		for _, uid := range uids {
			f.waitClaimFilesGone(uid)
		}
	}
}

func TestPluginKill9WhilePodsRun(t *testing.T) {
	f := newFramework(t)
	f.createClaimTemplate("small", claimRequest{memory: "2Gi", cores: "10"})
	f.createPod(podSpec{name: "survivor", claims: []podClaim{{name: "gpu", template: "small"}}})
	pod := f.waitRunning("survivor")
	claim := f.claimOf(pod, "gpu")
	uid := string(claim.UID)

	f.driver("kill")
	t.Log("plugin killed")
	// Prepared containers do not depend on the plugin process.
	time.Sleep(3 * time.Second)
	p, err := f.c.CoreV1().Pods(f.ns).Get(f.ctx, pod.Name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, corev1.PodRunning, p.Status.Phase, "the pod keeps running without the plugin")
	assert.Equal(t, int32(0), p.Status.ContainerStatuses[0].RestartCount, "the container was not restarted")
	out, err := f.execIn(pod.Name, "c0", "cat", "/etc/ld.so.preload")
	require.NoError(t, err)
	assert.Equal(t, preload, strings.TrimSpace(out))

	f.driver("start")
	t.Log("new plugin instance serves")
	// The new instance finds the claim in its checkpoint: a new pod with
	// the same limits prepares, and unpreparing the old one cleans up.
	f.createPod(podSpec{name: "after-restart", claims: []podClaim{{name: "gpu", template: "small"}}})
	after := f.waitRunning("after-restart")
	afterUID := string(f.claimOf(after, "gpu").UID)
	t.Log("a new pod was prepared by the new instance")
	f.deletePodAndWait(pod.Name)
	f.waitClaimFilesGone(uid)
	t.Log("the old pod was unprepared by the new instance")
	f.deletePodAndWait(after.Name)
	f.waitClaimFilesGone(afterUID)
	assert.Empty(t, leakedClaimFiles(t), "no claim directory or CDI spec leaks")
}

// leakedClaimFiles lists claim directories and CDI specs on the host that
// belong to no claim in the API. Only the driver writes into the CDI
// directory, so every file there must name a live claim.
func leakedClaimFiles(t *testing.T) []string {
	t.Helper()
	claims, err := cluster.client.ResourceV1().ResourceClaims("").List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	var live []string
	for _, c := range claims.Items {
		live = append(live, string(c.UID))
	}
	isLive := func(name string) bool {
		for _, uid := range live {
			if strings.Contains(name, uid) {
				return true
			}
		}
		return false
	}
	var leaked []string
	for _, dir := range []string{filepath.Join(cluster.stateRoot, "claims"), cluster.cdiDir} {
		entries, err := os.ReadDir(dir)
		if os.IsNotExist(err) {
			continue
		}
		require.NoError(t, err)
		for _, e := range entries {
			if !isLive(e.Name()) {
				leaked = append(leaked, filepath.Join(dir, e.Name()))
			}
		}
	}
	return leaked
}

func TestSimulatedRebootRecreatesCDISpecs(t *testing.T) {
	f := newFramework(t)
	f.createClaimTemplate("small", claimRequest{memory: "2Gi", cores: "10"})
	f.createPod(podSpec{name: "rebooted", claims: []podClaim{{name: "gpu", template: "small"}}})
	pod := f.waitRunning("rebooted")
	claim := f.claimOf(pod, "gpu")
	uid := string(claim.UID)
	specs, _ := filepath.Glob(filepath.Join(cluster.cdiDir, "*"+uid+"*"))
	require.NotEmpty(t, specs, "claim %s has a CDI spec", uid)

	f.driver("reboot")
	f.poll("claim "+uid+"'s CDI spec recreated from the checkpoint", time.Minute, func() (bool, error) {
		again, _ := filepath.Glob(filepath.Join(cluster.cdiDir, "*"+uid+"*"))
		return len(again) > 0, nil
	})

	// A new container of the running claim must start: kill the current one
	// behind the kubelet's back, as a crash would.
	restarts := pod.Status.ContainerStatuses[0].RestartCount
	killContainer(t, pod.Spec.NodeName, pod.Status.ContainerStatuses[0].ContainerID)
	f.poll("container c0 of "+pod.Name+" restarted and Running", podStartTimeout, func() (bool, error) {
		p, err := f.c.CoreV1().Pods(f.ns).Get(f.ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		s := p.Status.ContainerStatuses[0]
		return s.RestartCount > restarts && s.State.Running != nil, nil
	})
	out, err := f.execIn(pod.Name, "c0", "cat", filepath.Join(containerClaims, uid, "config"))
	require.NoError(t, err, "the restarted container has the claim's config")
	assert.Equal(t, uid, parseConfig(out)["claim"])
}

// killContainer SIGKILLs a container's task through its node's containerd.
func killContainer(t *testing.T, node, containerID string) {
	t.Helper()
	_, id, ok := strings.Cut(containerID, "://")
	require.True(t, ok, "container ID %q", containerID)
	out, err := ctrOn(context.Background(), node, "tasks", "kill", "--signal", "SIGKILL", id)
	require.NoError(t, err, "ctr tasks kill %s: %s", id, out)
}

// TestTimeToRunning measures pod creation to Running for a vGPU pod and for
// a pod without claims in the same cluster; the ratio is the driver's cost.
func TestTimeToRunning(t *testing.T) {
	f := newFramework(t)
	f.createClaimTemplate("timed", claimRequest{memory: "1Gi", cores: "10"})
	measure := func(p podSpec) time.Duration {
		start := time.Now()
		f.createPod(p)
		f.waitRunning(p.name)
		return time.Since(start)
	}
	// Plain first, vGPU second, then the other way round: the average
	// cancels caches warmed by whichever runs first.
	plain1 := measure(podSpec{name: "plain-1", image: cluster.plain})
	vgpu1 := measure(podSpec{name: "vgpu-1", claims: []podClaim{{name: "gpu", template: "timed"}}})
	vgpu2 := measure(podSpec{name: "vgpu-2", claims: []podClaim{{name: "gpu", template: "timed"}}})
	plain2 := measure(podSpec{name: "plain-2", image: cluster.plain})
	plain, vgpu := (plain1+plain2)/2, (vgpu1+vgpu2)/2
	ratio := float64(vgpu) / float64(plain)
	msg := fmt.Sprintf("time to Running: vGPU pod %v, plain pod %v, ratio %.2f", vgpu.Round(time.Millisecond), plain.Round(time.Millisecond), ratio)
	t.Log(msg)
	fmt.Println("E2E-MEASURE " + msg)
	assert.Less(t, ratio, 10.0, "a vGPU pod should not take an order of magnitude longer to start")
}
