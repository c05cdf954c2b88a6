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
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
)

const (
	// burstGPUMemory is the size of the simulated GPUs of the burst spec's
	// node while it runs (driver.sh gpu-memory).
	burstGPUMemory = 16 * gib
	// burstGrace is the class's reclaimGracePeriodSeconds: short, for speed.
	burstGrace = 5
)

// pluginHTTPOf is node's plugin metrics address: the first node's is
// E2E_PLUGIN_HTTP, another node's plugin listens on the same port of its
// own InternalIP (host network).
func pluginHTTPOf(t *testing.T, f *framework, node string) string {
	t.Helper()
	if node == cluster.node {
		return cluster.pluginHTTP
	}
	_, port, err := net.SplitHostPort(cluster.pluginHTTP)
	require.NoError(t, err, "E2E_PLUGIN_HTTP=%s", cluster.pluginHTTP)
	n, err := f.c.CoreV1().Nodes().Get(f.ctx, node, metav1.GetOptions{})
	require.NoError(t, err, "get node %s", node)
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return net.JoinHostPort(a.Address, port)
		}
	}
	require.FailNow(t, "node has no InternalIP", "node %s", node)
	return ""
}

// scrapeAt returns the /metrics page of the plugin at addr ("" and an
// error while it does not answer, e.g. during a restart).
func scrapeAt(addr string) (string, error) {
	client := http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get("http://" + addr + "/metrics")
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET /metrics: %s: %s", resp.Status, body)
	}
	return string(body), nil
}

// metricSum adds up every sample of metric whose labels include all of
// want (0 when there is none).
func metricSum(page, metric string, want ...string) float64 {
	var sum float64
	for _, line := range strings.Split(page, "\n") {
		if !strings.HasPrefix(line, metric+"{") && !strings.HasPrefix(line, metric+" ") {
			continue
		}
		end := strings.LastIndex(line, "}")
		labels, value := "", strings.TrimPrefix(line, metric)
		if end >= 0 {
			labels, value = line[len(metric)+1:end], line[end+1:]
		}
		match := true
		for _, w := range want {
			if !strings.Contains(labels, w) {
				match = false
			}
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(value), 64); match && err == nil {
			sum += v
		}
	}
	return sum
}

// setGPUMemory sets the simulated GPUs of node to size (driver.sh
// gpu-memory: the plugin restarts and publishes it).
func setGPUMemory(ctx context.Context, node, size string) error {
	cmd := exec.CommandContext(ctx, cluster.driverSh, "gpu-memory", size)
	cmd.Env = append(os.Environ(), "E2E_DRIVER_NODE="+node)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("E2E_DRIVER_NODE=%s driver.sh gpu-memory %s: %w\n%s", node, size, err, out)
	}
	return nil
}

// fakeGPUMemory reads gpu_memory from node's fake configuration.
func fakeGPUMemory(t *testing.T, node string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(cluster.viewOf(node), "driver", "fake-config"))
	require.NoError(t, err, "read the fake configuration of %s", node)
	m := regexp.MustCompile(`(?m)^gpu_memory=(\S+)$`).FindSubmatch(data)
	require.NotNil(t, m, "gpu_memory in the fake configuration of %s", node)
	return string(m[1])
}

// burstGrantFiles reads every prepared claim's host/burst file on node and
// returns the grants on the GPU uuid by claim UID (a claim without a
// file, or without a line for the GPU, is absent).
func burstGrantFiles(t *testing.T, node, uuid string) map[string]int64 {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(cluster.viewOf(node), "driver", "state", "claims", "*", "host", "burst"))
	require.NoError(t, err)
	out := map[string]int64{}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			continue // unprepared meanwhile
		}
		for _, line := range strings.Split(string(data), "\n") {
			f := strings.Fields(line)
			if len(f) == 3 && f[0] == "gpu" && strings.EqualFold(f[1], uuid) {
				v, err := strconv.ParseInt(f[2], 10, 64)
				require.NoError(t, err, "%s: %q", p, line)
				out[filepath.Base(filepath.Dir(filepath.Dir(p)))] = v
			}
		}
	}
	return out
}

// claimBurst is the memoryBurst the monitor wrote into the claim's status
// for the GPU (-1 while there is none).
func (f *framework) claimBurst(name, uuid string) (int64, error) {
	c, err := f.c.ResourceV1().ResourceClaims(f.ns).Get(f.ctx, name, metav1.GetOptions{})
	if err != nil {
		return -1, err
	}
	for _, d := range c.Status.Devices {
		if d.Driver != driverName || d.Data == nil {
			continue
		}
		var data struct {
			UUID        string             `json:"uuid"`
			MemoryBurst *resource.Quantity `json:"memoryBurst"`
		}
		if err := json.Unmarshal(d.Data.Raw, &data); err != nil {
			return -1, fmt.Errorf("decode status.devices data of claim %s: %w", name, err)
		}
		if data.UUID == uuid && data.MemoryBurst != nil {
			return data.MemoryBurst.Value(), nil
		}
	}
	return -1, nil
}

// waitEvent waits for an Event with reason on the object named name and
// returns it.
func (f *framework) waitEvent(name, reason string, timeout time.Duration) corev1.Event {
	f.t.Helper()
	var event corev1.Event
	f.poll("a "+reason+" Event on "+name, timeout, func() (bool, error) {
		list, err := f.c.CoreV1().Events(f.ns).List(f.ctx, metav1.ListOptions{FieldSelector: fields.Set{
			"involvedObject.name": name, "reason": reason}.String()})
		if err != nil || len(list.Items) == 0 {
			return false, err
		}
		event = list.Items[0]
		return true, nil
	})
	return event
}

// deploymentPod waits for the one running, ready pod of the Deployment's
// label app=name that is not being deleted and is not one of old.
func (f *framework) deploymentPod(name string, timeout time.Duration, old ...string) *corev1.Pod {
	f.t.Helper()
	var pod *corev1.Pod
	f.poll("a new running pod of Deployment "+name, timeout, func() (bool, error) {
		list, err := f.c.CoreV1().Pods(f.ns).List(f.ctx, metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil {
			return false, err
		}
	next:
		for i := range list.Items {
			p := &list.Items[i]
			for _, o := range old {
				if p.Name == o {
					continue next
				}
			}
			if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && allReady(p) {
				pod = p
				return true, nil
			}
		}
		return false, nil
	})
	return pod
}

// TestBurstReclaimEvictsAndGrantsOnlyWhatIsLeft is issue 35's end-to-end
// check of burstable memory on a 16 GiB GPU: A (guarantee 4Gi, limit
// 12Gi) holds 12 GiB; B (guarantee 10Gi) comes to the same GPU, A is
// evicted with the Events, B gets its 10 GiB; A's Deployment recreates it
// and it bursts only into the 2 GiB left, a burst beyond is refused and
// counted; the plugin is SIGKILLed while A bursts and grants nothing twice
// after its restart.
func TestBurstReclaimEvictsAndGrantsOnlyWhatIsLeft(t *testing.T) {
	needsChart(t) // the reclaim evicts through the API with the chart's RBAC
	node := cluster.nodes[len(cluster.nodes)-1]

	// The node's GPUs are 16 GiB for this spec only; the others'
	// sizes come back after the namespace (and its claims) are gone:
	// cleanups run last registered first.
	size := fakeGPUMemory(t, node)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if err := setGPUMemory(ctx, node, size); err != nil {
			t.Errorf("restore the GPU size of %s: %v", node, err)
		}
	})
	class := "vgpu-burst-e2e.dra.dev"
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = cluster.client.ResourceV1().DeviceClasses().Delete(ctx, class, metav1.DeleteOptions{})
	})
	f := newFramework(t)
	require.NoError(t, setGPUMemory(f.ctx, node, "16Gi"))
	var uuid string
	f.poll("node "+node+"'s gpu-0 published with 16Gi", time.Minute, func() (bool, error) {
		for _, d := range publishedGPUsOn(t, f, node) {
			memory := d.Capacity["memory"].Value
			if d.Name == "gpu-0" && memory.Value() == burstGPUMemory {
				uuid = *d.Attributes["uuid"].StringValue
				return true, nil
			}
		}
		return false, nil
	})
	metricsAt := pluginHTTPOf(t, f, node)

	// The class allows burst and gives evicted bursts a short grace.
	_, err := f.c.ResourceV1().DeviceClasses().Create(f.ctx, &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: class},
		Spec: resourceapi.DeviceClassSpec{
			Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
				Expression: `device.driver == "vgpu.dra.dev" && !("profile" in device.attributes["vgpu.dra.dev"])`}}},
			Config: []resourceapi.DeviceClassConfiguration{{DeviceConfiguration: resourceapi.DeviceConfiguration{
				Opaque: &resourceapi.OpaqueDeviceConfiguration{Driver: driverName, Parameters: *rawJSON(t, map[string]any{
					"apiVersion": "vgpu.dra.dev/v1alpha1", "kind": "VGPUConfig", "reclaimGracePeriodSeconds": burstGrace})},
			}}},
		},
	}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		err = nil // left by an interrupted run: the same object
	}
	require.NoError(t, err, "create DeviceClass %s", class)

	onGPU := fmt.Sprintf(`device.attributes["vgpu.dra.dev"].uuid == %q`, uuid)
	f.createClaimTemplate("bursty", claimRequest{memory: "4Gi", cel: onGPU, class: class,
		config: rawJSON(t, map[string]any{"apiVersion": "vgpu.dra.dev/v1alpha1", "kind": "VGPUConfig", "memoryLimit": "12Gi"})})
	// B may burst too (to 12Gi): after the plugin's restart its ask is
	// what a ledger that forgot A's grant would answer wrongly.
	f.createClaimTemplate("steady", claimRequest{memory: "10Gi", cel: onGPU, class: class,
		config: rawJSON(t, map[string]any{"apiVersion": "vgpu.dra.dev/v1alpha1", "kind": "VGPUConfig", "memoryLimit": "12Gi"})})

	// A: a Deployment of one pod (the pod the Deployment recreates after
	// the eviction is the one that bursts into what is left).
	template := podSpec{name: "a", node: node, claims: []podClaim{{name: "gpu", template: "bursty"}}}.pod()
	one := int32(1)
	_, err = f.c.AppsV1().Deployments(f.ns).Create(f.ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "a"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "a"}}, Spec: template.Spec},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err, "create Deployment a")
	podA := f.deploymentPod("a", podStartTimeout)
	claimA := f.claimOf(podA, "gpu")
	require.Equal(t, node, podA.Spec.NodeName)

	// A holds 12 GiB: 4 GiB of guarantee and 8 GiB of burst granted.
	holdA := f.probeHold(podA.Name, "c0", 0, uuid, 12*gib)
	defer holdA.stop()
	burstLabels := []string{`namespace="` + f.ns + `"`, `claim="` + claimA.Name + `"`, `device_uuid="` + uuid + `"`}
	f.poll(claimA.Name+"'s vgpu_dra_claim_memory_burst_bytes at 8Gi", time.Minute, func() (bool, error) {
		page, err := scrapeAt(metricsAt)
		v, ok := sampleValue(page, "vgpu_dra_claim_memory_burst_bytes", burstLabels...)
		return err == nil && ok && v == float64(8*gib), nil
	})
	f.poll(claimA.Name+"'s status memoryBurst at 8Gi", 2*time.Minute, func() (bool, error) {
		b, err := f.claimBurst(claimA.Name, uuid)
		return b == 8*gib, err
	})
	reclaimsBefore := metricSum(mustScrape(t, metricsAt), "vgpu_dra_gpu_memory_reclaims_total", `device_uuid="`+uuid+`"`)

	// B needs 10 GiB of guarantee on the same GPU: only A's burst can
	// free it, so A is evicted and B waits until it is gone.
	createdB := time.Now()
	f.createPod(podSpec{name: "b", node: node, claims: []podClaim{{name: "gpu", template: "steady"}}})
	reclaimed := f.waitEvent(podA.Name, "MemoryBurstReclaimed", 2*time.Minute)
	assert.Equal(t, corev1.EventTypeNormal, reclaimed.Type)
	// The eviction gives A the class's grace period (A's own pod spec
	// says 0); A's sleep ignores SIGTERM, so it is still terminating.
	if p, err := f.c.CoreV1().Pods(f.ns).Get(f.ctx, podA.Name, metav1.GetOptions{}); err == nil {
		if assert.NotNil(t, p.DeletionGracePeriodSeconds, "A is being deleted") {
			assert.Equal(t, int64(burstGrace), *p.DeletionGracePeriodSeconds, "the eviction's grace period is the class's reclaimGracePeriodSeconds")
		}
	} else {
		t.Logf("pod %s already gone when its eviction Event was read: %v", podA.Name, err)
	}
	waiting := f.waitEvent("b", "WaitingForMemoryBurst", time.Minute)
	t.Logf("events: %s: %q; b: %q", podA.Name, reclaimed.Message, waiting.Message)
	claimB := f.claimOf(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "b"}}, "gpu")
	assert.Contains(t, reclaimed.Message, f.ns+"/"+claimB.Name, "the evicted pod's Event names the claim that needed the memory")
	assert.Contains(t, waiting.Message, f.ns+"/"+claimA.Name, "the waiting pod's Event names the claim it waits for")
	assert.Greater(t, metricSum(mustScrape(t, metricsAt), "vgpu_dra_gpu_memory_reclaims_total", `device_uuid="`+uuid+`"`),
		reclaimsBefore, "vgpu_dra_gpu_memory_reclaims_total counts the reclaim")

	f.waitRunning("b")
	waitedB := time.Since(createdB)
	msg := fmt.Sprintf("burst reclaim: pod b Running %v after its creation (A evicted with %ds of grace; B's prepare waits for the memory within its call)",
		waitedB.Round(time.Second), burstGrace)
	t.Log(msg)
	fmt.Println("E2E-MEASURE " + msg)
	// Were B's prepare failed and left to the kubelet's retry, B would
	// start only at the kubelet's next sync of the pod (--sync-frequency,
	// 1 min after the failed one).
	assert.Less(t, waitedB, 50*time.Second, "B is prepared in the call that waited for A's burst, not at the kubelet's next sync of the pod")
	holdB := f.probeHold("b", "c0", 0, uuid, 10*gib)
	defer holdB.stop()
	holdA.stop()

	// A's Deployment recreates A on the GPU; it bursts only into what is
	// left: 16 - 10 - 4 = 2 GiB (the fake GPU reserves nothing).
	podA2 := f.deploymentPod("a", 3*time.Minute, podA.Name)
	claimA2 := f.claimOf(podA2, "gpu")
	require.NotEqual(t, claimA.UID, claimA2.UID)
	left := burstGPUMemory - 10*gib - 4*gib
	holdA2 := f.probeHold(podA2.Name, "c0", 0, uuid, 4*gib+left)
	defer holdA2.stop()
	burstLabels2 := []string{`namespace="` + f.ns + `"`, `claim="` + claimA2.Name + `"`, `device_uuid="` + uuid + `"`}
	f.poll(claimA2.Name+"'s vgpu_dra_claim_memory_burst_bytes at 2Gi", time.Minute, func() (bool, error) {
		page, err := scrapeAt(metricsAt)
		v, ok := sampleValue(page, "vgpu_dra_claim_memory_burst_bytes", burstLabels2...)
		return err == nil && ok && v == float64(left), nil
	})
	refusedBefore := metricSum(mustScrape(t, metricsAt), "vgpu_dra_claim_memory_burst_refusals_total", `reason="full"`)
	assert.Equal(t, "CUDA_ERROR_OUT_OF_MEMORY", f.probeAlloc(podA2.Name, "c0", 0, uuid, 256*mib),
		"a burst beyond what is left on the GPU is refused")
	f.poll("vgpu_dra_claim_memory_burst_refusals_total{reason=\"full\"} to count the refusal", time.Minute, func() (bool, error) {
		page, err := scrapeAt(metricsAt)
		return err == nil && metricSum(page, "vgpu_dra_claim_memory_burst_refusals_total", `reason="full"`) > refusedBefore, nil
	})
	// Nothing is granted twice: the guarantees and every grant on the
	// GPU (the host/burst files) fit in it.
	checkBooked := func(when string, wantA2 bool) {
		t.Helper()
		grants := burstGrantFiles(t, node, uuid)
		if wantA2 {
			assert.Equal(t, left, grants[string(claimA2.UID)], "%s: host/burst of %s", when, claimA2.Name)
		}
		booked := 4*gib + 10*gib
		for _, g := range grants {
			booked += g
		}
		assert.LessOrEqual(t, booked, burstGPUMemory, "%s: guarantees and grants on the GPU (%v)", when, grants)
	}
	checkBooked("before the plugin's SIGKILL", true)

	// The plugin is SIGKILLed while A bursts: the restarted one rebuilds
	// A's grant from host/burst and grants nothing twice.
	f.driverOn(node, "kill")
	f.driverOn(node, "start")
	// Not fatal: what follows shows what a wrong rebuild leads to.
	var rebuilt float64
	err = wait.PollUntilContextTimeout(f.ctx, 250*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		page, err := scrapeAt(metricsAt)
		v, ok := sampleValue(page, "vgpu_dra_claim_memory_burst_bytes", burstLabels2...)
		rebuilt = v
		return err == nil && ok && v == float64(left), nil
	})
	assert.NoError(t, err, "waiting at most 1m for the restarted plugin's vgpu_dra_claim_memory_burst_bytes of %s at 2Gi (last %.0f)", claimA2.Name, rebuilt)
	checkBooked("after the plugin's restart", true)
	assert.Equal(t, "CUDA_ERROR_OUT_OF_MEMORY", f.probeAlloc(podA2.Name, "c0", 0, uuid, 256*mib),
		"after the restart a burst beyond what is left is still refused")
	assert.Equal(t, "CUDA_ERROR_OUT_OF_MEMORY", f.probeAlloc("b", "c0", 0, uuid, 256*mib),
		"after the restart B's burst is refused: A holds what is left")
	checkBooked("after B's ask", true)
	assert.Zero(t, burstGrantFiles(t, node, uuid)[string(claimB.UID)], "B is granted nothing")
	// A can still use its whole grant: what it frees it may allocate
	// again, whether the grant is still there or asked for anew.
	f.killProbes(podA2.Name, "c0")
	holdA2.stop()
	assert.Equal(t, "CUDA_SUCCESS", f.probeAlloc(podA2.Name, "c0", 0, uuid, 4*gib+left),
		"after the restart A allocates its guarantee and what is left")
	checkBooked("at the end", false)

	// What the plugin said about the burst, for whoever reads the run.
	cmd := exec.CommandContext(f.ctx, cluster.driverSh, "logs", "400")
	cmd.Env = append(os.Environ(), "E2E_DRIVER_NODE="+node)
	out, _ := cmd.CombinedOutput()
	var lines []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "urst") || strings.HasPrefix(l, "E") {
			lines = append(lines, l)
		}
	}
	t.Logf("plugin log of %s since its restart, burst lines and errors:\n%s", node, strings.Join(lines, "\n"))
}

// killProbes SIGKILLs every cuda-probe in a container and waits until
// none is left: ending `kubectl exec` does not end the process it runs.
func (f *framework) killProbes(pod, container string) {
	f.t.Helper()
	_, err := f.execIn(pod, container, "sh", "-c", "for p in $(pidof cuda-probe); do kill -9 $p; done")
	require.NoError(f.t, err, "%s/%s: kill cuda-probe", pod, container)
	f.poll("no cuda-probe left in "+pod+"/"+container, time.Minute, func() (bool, error) {
		out, _ := f.execIn(pod, container, "sh", "-c", "pidof cuda-probe || true")
		return strings.TrimSpace(out) == "", nil
	})
}

func mustScrape(t *testing.T, addr string) string {
	t.Helper()
	page, err := scrapeAt(addr)
	require.NoError(t, err, "scrape %s", addr)
	return page
}
