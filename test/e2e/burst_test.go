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
	policyv1 "k8s.io/api/policy/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/cluster/inspect"
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
	return f.waitEventIn(f.ns, fields.Set{"involvedObject.name": name, "reason": reason}, "a "+reason+" Event on "+name, timeout)
}

// waitNodeEvent waits for an Event with reason on the node.
func (f *framework) waitNodeEvent(node, reason string, timeout time.Duration) corev1.Event {
	f.t.Helper()
	return f.waitEventIn(metav1.NamespaceAll, fields.Set{"involvedObject.kind": "Node", "involvedObject.name": node, "reason": reason},
		"a "+reason+" Event on node "+node, timeout)
}

// waitEventIn waits for an Event in namespace matching the field selector
// and returns the first.
func (f *framework) waitEventIn(namespace string, selector fields.Set, what string, timeout time.Duration) corev1.Event {
	f.t.Helper()
	var event corev1.Event
	f.poll(what, timeout, func() (bool, error) {
		list, err := f.c.CoreV1().Events(namespace).List(f.ctx, metav1.ListOptions{FieldSelector: selector.String()})
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

// burstEnv is a burst spec's setup: node's GPUs at 16 GiB for the spec
// (restored after it), a DeviceClass that allows burst with a short
// reclaim grace, and claim templates on gpu-0 of node.
type burstEnv struct {
	f         *framework
	node      string
	uuid      string
	class     string
	metricsAt string
}

// newBurstEnv sets the spec's node up for burst; the last node's, so that
// the other specs' first node is left alone.
func newBurstEnv(t *testing.T) *burstEnv {
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

	// The class allows burst and gives evicted bursts a short grace.
	_, err := f.c.ResourceV1().DeviceClasses().Create(f.ctx, &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: class},
		Spec: resourceapi.DeviceClassSpec{
			Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
				Expression: `device.driver == "vgpu.dra.dev" && !("profile" in device.attributes["vgpu.dra.dev"]) && !("mps" in device.attributes["vgpu.dra.dev"])`}}},
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
	return &burstEnv{f: f, node: node, uuid: uuid, class: class, metricsAt: pluginHTTPOf(t, f, node)}
}

// template creates a claim template on the env's GPU: memory of
// guarantee, memoryLimit limit ("" for none).
func (e *burstEnv) template(name, guarantee, limit string) {
	e.f.t.Helper()
	req := claimRequest{memory: guarantee, class: e.class,
		cel: fmt.Sprintf(`device.attributes["vgpu.dra.dev"].uuid == %q`, e.uuid)}
	if limit != "" {
		req.config = rawJSON(e.f.t, map[string]any{"apiVersion": "vgpu.dra.dev/v1alpha1", "kind": "VGPUConfig", "memoryLimit": limit})
	}
	e.f.createClaimTemplate(name, req)
}

// deployment creates a Deployment of one pod named name on the env's node
// with a claim "gpu" from template, and returns its running pod.
func (e *burstEnv) deployment(name, template string) *corev1.Pod {
	e.f.t.Helper()
	pod := podSpec{name: name, node: e.node, claims: []podClaim{{name: "gpu", template: template}}}.pod()
	one := int32(1)
	_, err := e.f.c.AppsV1().Deployments(e.f.ns).Create(e.f.ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}}, Spec: pod.Spec},
		},
	}, metav1.CreateOptions{})
	require.NoError(e.f.t, err, "create Deployment %s", name)
	p := e.f.deploymentPod(name, podStartTimeout)
	require.Equal(e.f.t, e.node, p.Spec.NodeName)
	return p
}

// burstMetric is the claim's vgpu_dra_claim_memory_burst_bytes on the GPU.
func (e *burstEnv) burstMetric(claim string) (float64, bool) {
	page, err := scrapeAt(e.metricsAt)
	if err != nil {
		return 0, false
	}
	return sampleValue(page, "vgpu_dra_claim_memory_burst_bytes",
		`namespace="`+e.f.ns+`"`, `claim="`+claim+`"`, `device_uuid="`+e.uuid+`"`)
}

// waitBurst waits for the claim's burst metric at want bytes.
func (e *burstEnv) waitBurst(claim string, want int64, timeout time.Duration) {
	e.f.t.Helper()
	e.f.poll(fmt.Sprintf("%s's vgpu_dra_claim_memory_burst_bytes at %d", claim, want), timeout, func() (bool, error) {
		v, ok := e.burstMetric(claim)
		return ok && v == float64(want), nil
	})
}

// TestBurstReclaimEvictsAndGrantsOnlyWhatIsLeft is issue 35's end-to-end
// check of burstable memory on a 16 GiB GPU: A (guarantee 4Gi, limit
// 12Gi) holds 12 GiB; B (guarantee 10Gi) comes to the same GPU, A is
// evicted with the Events, B gets its 10 GiB; A's Deployment recreates it
// and it bursts only into the 2 GiB left, a burst beyond is refused and
// counted; the plugin is SIGKILLed while A bursts and grants nothing twice
// after its restart.
func TestBurstReclaimEvictsAndGrantsOnlyWhatIsLeft(t *testing.T) {
	e := newBurstEnv(t)
	f, node, uuid, metricsAt := e.f, e.node, e.uuid, e.metricsAt
	e.template("bursty", "4Gi", "12Gi")
	// B may burst too (to 12Gi): after the plugin's restart its ask is
	// what a grant book that forgot A's grant would answer wrongly.
	e.template("steady", "10Gi", "12Gi")

	// A: a Deployment of one pod (the pod the Deployment recreates after
	// the eviction is the one that bursts into what is left).
	podA := e.deployment("a", "bursty")
	claimA := f.claimOf(podA, "gpu")

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
	err := wait.PollUntilContextTimeout(f.ctx, 250*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
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
	f.killProbes(podA2.Name, "c0", "")
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

// shIn runs script with sh in a container, $1... being args, after
// checking that each command in needs exists there: a missing command
// fails the call instead of making a loop over its output run zero times.
func (f *framework) shIn(pod, container, script string, needs []string, args ...string) (string, error) {
	check := ""
	for _, c := range needs {
		check += fmt.Sprintf(`command -v %s >/dev/null || { echo "%s: not found in the container" >&2; exit 127; }; `, c, c)
	}
	return f.execIn(pod, container, append([]string{"sh", "-c", check + script, "sh"}, args...)...)
}

// probePIDs lists the pids of the cuda-probe processes in a container whose
// arguments contain match ("" for every one), from the container's /proc.
func (f *framework) probePIDs(pod, container, match string) []string {
	f.t.Helper()
	out, err := f.shIn(pod, container, `for d in /proc/[0-9]*; do
  a=$(tr '\0' ' ' <"$d/cmdline" 2>/dev/null) || continue
  case "$a" in "cuda-probe "*"$1"*) echo "${d#/proc/}" ;; esac
done`, []string{"tr"}, match)
	require.NoError(f.t, err, "%s/%s: list cuda-probe processes: %s", pod, container, out)
	return strings.Fields(out)
}

// killProbes SIGKILLs the cuda-probe processes in a container whose
// arguments contain match ("" for every one), of which there must be one,
// and waits until none is left: ending `kubectl exec` does not end the
// process it runs. A probe that survives fails the spec.
func (f *framework) killProbes(pod, container, match string) {
	f.t.Helper()
	pids := f.probePIDs(pod, container, match)
	require.NotEmpty(f.t, pids, "%s/%s: a cuda-probe matching %q to kill", pod, container, match)
	out, err := f.shIn(pod, container, `kill -9 "$@"`, []string{"kill"}, pids...)
	require.NoError(f.t, err, "%s/%s: kill -9 %v: %s", pod, container, pids, out)
	f.poll(fmt.Sprintf("no cuda-probe matching %q left in %s/%s", match, pod, container), time.Minute, func() (bool, error) {
		return len(f.probePIDs(pod, container, match)) == 0, nil
	})
}

func mustScrape(t *testing.T, addr string) string {
	t.Helper()
	page, err := scrapeAt(addr)
	require.NoError(t, err, "scrape %s", addr)
	return page
}

// reclaimBound is how long a pod whose guarantee needs another claim's
// burst may wait for it, whatever the burster's pod does: the class's
// reclaim grace period, the kubelet's stop of the containers and one monitor
// interval (docs/api.md, "Burst is revocable"), and the new pod's start.
// Below the kubelet's 1 min resync, so B is prepared in the call that
// waited.
const reclaimBound = 50 * time.Second

// waitReclaimed creates pod b with a claim from template on the env's GPU
// and waits until it runs, within reclaimBound; the burster's pod gets a
// Warning MemoryBurstReclaimForced Event saying why (want), and b a Normal
// one naming the burster's pod.
func (e *burstEnv) waitReclaimed(burster, template, want string) {
	f := e.f
	f.t.Helper()
	created := time.Now()
	f.createPod(podSpec{name: "b", node: e.node, claims: []podClaim{{name: "gpu", template: template}}})
	forced := f.waitEvent(burster, "MemoryBurstReclaimForced", time.Minute)
	assert.Equal(f.t, corev1.EventTypeWarning, forced.Type)
	assert.Contains(f.t, forced.Message, want)
	claimB := f.claimOf(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "b"}}, "gpu")
	assert.Contains(f.t, forced.Message, "for claim "+f.ns+"/"+claimB.Name)
	told := f.waitEvent("b", "MemoryBurstReclaimForced", time.Minute)
	assert.Equal(f.t, corev1.EventTypeNormal, told.Type)
	assert.Contains(f.t, told.Message, "pod "+f.ns+"/"+burster+" of claim")
	f.t.Logf("events: %s: %q; b: %q", burster, forced.Message, told.Message)
	f.waitRunning("b")
	waited := time.Since(created)
	msg := fmt.Sprintf("burst reclaim (%s): pod b Running %v after its creation (class grace %ds)", want, waited.Round(time.Second), burstGrace)
	f.t.Log(msg)
	fmt.Println("E2E-MEASURE " + msg)
	assert.Less(f.t, waited, reclaimBound, "the burst is reclaimed within the stated bound")
	holdB := f.probeHold("b", "c0", 0, e.uuid, 10*gib)
	holdB.stop()
}

// TestBurstReclaimDespitePodDisruptionBudget: a burster Deployment whose
// PodDisruptionBudget (minAvailable 1, one replica) refuses every eviction
// holds 12 GiB of the 16 GiB GPU; a pod whose 10 GiB guarantee needs it
// runs within the bound: the refused eviction is followed by a deletion
// with the class's grace period, with Events on both pods.
func TestBurstReclaimDespitePodDisruptionBudget(t *testing.T) {
	e := newBurstEnv(t)
	f := e.f
	e.template("bursty", "4Gi", "12Gi")
	e.template("steady", "10Gi", "")
	podA := e.deployment("a", "bursty")
	one := intstr.FromInt32(1)
	_, err := f.c.PolicyV1().PodDisruptionBudgets(f.ns).Create(f.ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "a"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &one,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err, "create PodDisruptionBudget a")
	f.poll("PodDisruptionBudget a to allow no disruption", time.Minute, func() (bool, error) {
		pdb, err := f.c.PolicyV1().PodDisruptionBudgets(f.ns).Get(f.ctx, "a", metav1.GetOptions{})
		return err == nil && pdb.Status.ObservedGeneration == pdb.Generation && pdb.Status.CurrentHealthy == 1 &&
			pdb.Status.DisruptionsAllowed == 0, err
	})
	claimA := f.claimOf(podA, "gpu")
	holdA := f.probeHold(podA.Name, "c0", 0, e.uuid, 12*gib)
	defer holdA.stop()
	e.waitBurst(claimA.Name, 8*gib, time.Minute)
	refused := metricSum(mustScrape(t, e.metricsAt), "vgpu_dra_burst_evictions_total", `result="refused"`)
	deleted := metricSum(mustScrape(t, e.metricsAt), "vgpu_dra_burst_evictions_total", `result="deleted"`)

	e.waitReclaimed(podA.Name, "steady", "because its eviction was refused")
	page := mustScrape(t, e.metricsAt)
	assert.Greater(t, metricSum(page, "vgpu_dra_burst_evictions_total", `result="refused"`), refused, "the budget refused the eviction")
	assert.Greater(t, metricSum(page, "vgpu_dra_burst_evictions_total", `result="deleted"`), deleted, "the pod was deleted instead")
}

// TestBurstReclaimShortensALongGrace: the burster's pod, deleted with a
// grace period of an hour (its own terminationGracePeriodSeconds), holds
// 12 GiB while it terminates; a pod whose 10 GiB guarantee needs it runs
// within the bound: the deletion is shortened to the class's grace period.
func TestBurstReclaimShortensALongGrace(t *testing.T) {
	e := newBurstEnv(t)
	f := e.f
	e.template("bursty", "4Gi", "12Gi")
	e.template("steady", "10Gi", "")
	pod := podSpec{name: "a", node: e.node, claims: []podClaim{{name: "gpu", template: "bursty"}}}.pod()
	hour := int64(3600)
	pod.Spec.TerminationGracePeriodSeconds = &hour
	_, err := f.c.CoreV1().Pods(f.ns).Create(f.ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err, "create pod a")
	podA := f.waitRunning("a")
	claimA := f.claimOf(podA, "gpu")
	holdA := f.probeHold("a", "c0", 0, e.uuid, 12*gib)
	defer holdA.stop()
	e.waitBurst(claimA.Name, 8*gib, time.Minute)
	require.NoError(t, f.c.CoreV1().Pods(f.ns).Delete(f.ctx, "a", metav1.DeleteOptions{GracePeriodSeconds: &hour}))
	f.poll("pod a terminating with its hour of grace", time.Minute, func() (bool, error) {
		p, err := f.c.CoreV1().Pods(f.ns).Get(f.ctx, "a", metav1.GetOptions{})
		return err == nil && p.DeletionGracePeriodSeconds != nil && *p.DeletionGracePeriodSeconds == hour, err
	})

	e.waitReclaimed("a", "steady", "because the pod was terminating with grace period 1h0m0s, longer than the class's reclaim grace period 5s")
	_, err = f.c.CoreV1().Pods(f.ns).Get(f.ctx, "a", metav1.GetOptions{})
	if err == nil {
		f.poll("pod a gone after its shortened grace", time.Minute, func() (bool, error) {
			_, err := f.c.CoreV1().Pods(f.ns).Get(f.ctx, "a", metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
	}
}

// TestBurstDeadWorkerGivesItsBurstBack: a worker process holding burst is
// SIGKILLed while the claim's main process stays up (an OOM kill); the
// burst in the metric and in `kubectl vgpu claims` returns to the live
// use (here none above the guarantee) within one monitor interval, though
// no other process of the claim calls the library.
func TestBurstDeadWorkerGivesItsBurstBack(t *testing.T) {
	e := newBurstEnv(t)
	f := e.f
	e.template("bursty", "4Gi", "12Gi")
	f.createPod(podSpec{name: "a", node: e.node, claims: []podClaim{{name: "gpu", template: "bursty"}}})
	podA := f.waitRunning("a")
	claimA := f.claimOf(podA, "gpu")
	main := f.probeHold("a", "c0", 0, e.uuid, 2*gib)
	defer main.stop()
	worker := f.probeHold("a", "c0", 0, e.uuid, 8*gib)
	defer worker.stop()
	e.waitBurst(claimA.Name, 6*gib, time.Minute)
	claimsBurst := func() int64 {
		var list struct {
			Items []inspect.ClaimRow `json:"items"`
		}
		require.NoError(t, json.Unmarshal([]byte(f.kubectlVGPU("claims", "-n", f.ns, "-o", "json")), &list))
		for _, r := range list.Items {
			if r.Claim == claimA.Name && r.MemoryBurst != nil {
				return *r.MemoryBurst
			}
		}
		return -1
	}
	f.poll("kubectl vgpu claims to show 6Gi of burst", 2*time.Minute, func() (bool, error) { return claimsBurst() == 6*gib, nil })

	f.killProbes("a", "c0", "alloc "+strconv.FormatInt(8*gib, 10))
	killed := time.Now()
	const monitorInterval = 10 * time.Second // the plugin's --monitor-interval default
	e.waitBurst(claimA.Name, 0, monitorInterval+5*time.Second)
	metricBack := time.Since(killed)
	f.poll("kubectl vgpu claims to show no burst", monitorInterval+5*time.Second, func() (bool, error) { return claimsBurst() == 0, nil })
	claimsBack := time.Since(killed)
	msg := fmt.Sprintf("dead worker: burst back to the live use %v (metric) and %v (kubectl vgpu claims) after the SIGKILL",
		metricBack.Round(time.Second), claimsBack.Round(time.Second))
	t.Log(msg)
	fmt.Println("E2E-MEASURE " + msg)
	assert.NotEmpty(t, f.probePIDs("a", "c0", "alloc "+strconv.FormatInt(2*gib, 10)), "the main process is still up")
}
