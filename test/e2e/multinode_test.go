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
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// The chart's names (deployments/helm/vgpu-dra-driver) the specs below use.
const (
	driverNamespace    = "vgpu-dra"
	pluginSelector     = "app.kubernetes.io/component=kubelet-plugin"
	controllerSelector = "app.kubernetes.io/component=controller"
	nodePolicy         = "vgpu.dra.dev/node-policy"
)

// secondNode is the node the two-node specs use besides cluster.node.
func secondNode(t *testing.T) string {
	t.Helper()
	needsNodes(t, 2)
	return cluster.nodes[1]
}

// TestEachNodePublishesOnlyItsOwnSlices: each node's plugin publishes its
// own pool with its own GPUs, and the plugin of the second node, with the
// service-account token the kubelet gave its pod, is refused when it writes
// the first node's slices (the chart's ValidatingAdmissionPolicy).
func TestEachNodePublishesOnlyItsOwnSlices(t *testing.T) {
	needsChart(t)
	nodeB := secondNode(t)
	f := newFramework(t)

	seen := map[string]string{}
	for _, node := range cluster.nodes {
		devices := publishedGPUsOn(t, f, node)
		require.Len(t, devices, 2, "node %s publishes its two simulated GPUs", node)
		for _, d := range devices {
			uuid := d.Attributes["uuid"].StringValue
			require.NotNil(t, uuid, "device %s of node %s: uuid", d.Name, node)
			prev, dup := seen[*uuid]
			require.False(t, dup, "GPU %s published by node %s and by node %s", *uuid, prev, node)
			seen[*uuid] = node
		}
	}

	plugin := f.tokenClient(f.driverPodOn(pluginSelector, nodeB), "plugin")
	slices, err := f.c.ResourceV1().ResourceSlices().List(f.ctx, metav1.ListOptions{
		FieldSelector: "spec.driver=" + driverName + ",spec.nodeName=" + cluster.node})
	require.NoError(t, err)
	require.NotEmpty(t, slices.Items, "slices of node %s", cluster.node)
	dryRun := []string{metav1.DryRunAll}
	wantRefusal := "may only write ResourceSlices with spec.nodeName " + nodeB

	foreign := slices.Items[0].DeepCopy()
	foreign.Labels = map[string]string{"written-by": nodeB}
	_, err = plugin.ResourceV1().ResourceSlices().Update(f.ctx, foreign, metav1.UpdateOptions{DryRun: dryRun})
	require.Error(t, err, "node %s's plugin updates node %s's slice", nodeB, cluster.node)
	assert.True(t, apierrors.IsForbidden(err) || apierrors.IsInvalid(err), "refusal: %v", err)
	assert.Contains(t, err.Error(), wantRefusal)

	err = plugin.ResourceV1().ResourceSlices().Delete(f.ctx, slices.Items[0].Name, metav1.DeleteOptions{DryRun: dryRun})
	require.Error(t, err, "node %s's plugin deletes node %s's slice", nodeB, cluster.node)
	assert.Contains(t, err.Error(), wantRefusal)

	created := newSlice("e2e-foreign", cluster.node)
	_, err = plugin.ResourceV1().ResourceSlices().Create(f.ctx, created, metav1.CreateOptions{DryRun: dryRun})
	require.Error(t, err, "node %s's plugin creates a slice for node %s", nodeB, cluster.node)
	assert.Contains(t, err.Error(), wantRefusal)

	// The same token may write its own node's slices: the refusal is about
	// the node, not the identity.
	_, err = plugin.ResourceV1().ResourceSlices().Create(f.ctx, newSlice("e2e-own", nodeB), metav1.CreateOptions{DryRun: dryRun})
	require.NoError(t, err, "node %s's plugin creates a slice of its own node", nodeB)
}

func newSlice(name, node string) *resourceapi.ResourceSlice {
	return &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourceapi.ResourceSliceSpec{
			Driver:   driverName,
			NodeName: &node,
			Pool:     resourceapi.ResourcePool{Name: node + "-e2e", ResourceSliceCount: 1},
			Devices:  []resourceapi.Device{{Name: "gpu-99"}},
		},
	}
}

// driverPodOn returns the running pod of the driver's component (label
// selector) on node.
func (f *framework) driverPodOn(selector, node string) *corev1.Pod {
	f.t.Helper()
	var found *corev1.Pod
	f.poll("a running "+selector+" pod on "+node, time.Minute, func() (bool, error) {
		pods, err := f.c.CoreV1().Pods(driverNamespace).List(f.ctx, metav1.ListOptions{
			LabelSelector: selector, FieldSelector: "spec.nodeName=" + node})
		if err != nil {
			return false, err
		}
		for i, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				found = &pods.Items[i]
				return true, nil
			}
		}
		return false, nil
	})
	return found
}

// tokenClient is a client with the service-account token the kubelet
// mounted into the pod's container: read on the pod's node, where the
// token volume is mounted.
func (f *framework) tokenClient(pod *corev1.Pod, container string) kubernetes.Interface {
	f.t.Helper()
	var mountName string
	for _, c := range pod.Spec.Containers {
		if c.Name != container {
			continue
		}
		for _, m := range c.VolumeMounts {
			if m.MountPath == "/var/run/secrets/kubernetes.io/serviceaccount" {
				mountName = m.Name
			}
		}
	}
	require.NotEmpty(f.t, mountName, "pod %s container %s mounts no service-account token", pod.Name, container)
	path := filepath.Join(cluster.runDir, "kubelet", "pods", string(pod.UID), "volumes", "kubernetes.io~projected", mountName, "token")
	token, err := onNode(f.ctx, pod.Spec.NodeName, "cat", path)
	require.NoError(f.t, err, "read the token of pod %s", pod.Name)

	admin, err := clientcmd.BuildConfigFromFlags("", cluster.kubeconfig)
	require.NoError(f.t, err)
	cfg := &rest.Config{Host: admin.Host, BearerToken: strings.TrimSpace(token),
		TLSClientConfig: rest.TLSClientConfig{CAFile: admin.CAFile, CAData: admin.CAData}}
	client, err := kubernetes.NewForConfig(cfg)
	require.NoError(f.t, err)
	return client
}

// TestPolicyAllocatorPlacesByNodePolicy: under policy allocation two small
// pods that may run anywhere land on one node with the node policy binpack
// and on two nodes with spread.
func TestPolicyAllocatorPlacesByNodePolicy(t *testing.T) {
	needsChart(t)
	secondNode(t)
	for policy, sameNode := range map[string]bool{"binpack": true, "spread": false} {
		t.Run(policy, func(t *testing.T) {
			f := newFramework(t)
			f.setNamespaceMeta(map[string]string{policyNamespace: "enabled"}, nil)
			f.createClaimTemplate("small", claimRequest{memory: "2Gi", cores: "10"})
			nodes := map[string]bool{}
			for _, name := range []string{policy + "-a", policy + "-b"} {
				p := podSpec{name: name, anyNode: true, claims: []podClaim{{name: "gpu", template: "small"}},
					annotations: map[string]string{nodePolicy: policy}}
				f.admitted(p, "gated for policy allocation", hasGate)
				f.createPod(p)
				// One after the other: the second placement sees the first.
				pod := f.waitRunning(name)
				t.Logf("%s on %s: %s", name, pod.Spec.NodeName, f.waitPolicyAllocated(name))
				nodes[pod.Spec.NodeName] = true
				claim := f.claimOf(pod, "gpu")
				assert.Equal(t, pod.Spec.NodeName, allocatedDevice(t, claim).Pool, "claim %s allocated on the pod's node", claim.Name)
			}
			if sameNode {
				assert.Len(t, nodes, 1, "binpack puts both pods on one node: %v", nodes)
			} else {
				assert.Len(t, nodes, 2, "spread puts the pods on different nodes: %v", nodes)
			}
		})
	}
}

// TestControllerFailover: with two dra-controller replicas, the leader is
// SIGKILLed while 20 gated pods wait; the other replica takes the lease, every
// pod runs, no claim's allocation changes once written or exceeds a GPU,
// and no claim keeps a finalizer once its pod is gone.
func TestControllerFailover(t *testing.T) {
	needsChart(t)
	secondNode(t)
	f := newFramework(t)
	f.driver("controller", "2")
	t.Cleanup(func() { f.driver("controller", "1") })
	leaderPod, lease := f.controllerLeader("")
	t.Logf("leader before the kill: %s (lease %s)", leaderPod.Name, lease)

	f.setNamespaceMeta(map[string]string{policyNamespace: "enabled"}, nil)
	f.createClaimTemplate("small", claimRequest{memory: "1Gi", cores: "5"})
	const pods = 20
	for i := range pods {
		f.createPod(podSpec{name: fmt.Sprintf("w%02d", i), image: cluster.plain, anyNode: true,
			claims: []podClaim{{name: "gpu", template: "small"}}})
	}
	// Kept down until the other replica holds the lease: a restarted
	// instance of the old leader would otherwise resume its own lease.
	stop := f.holdDown(leaderPod, "controller")
	newLeader, _ := f.controllerLeader(leaderPod.Name)
	stop()
	t.Logf("leader after the kill: %s", newLeader.Name)
	assert.NotEqual(t, leaderPod.Spec.NodeName, newLeader.Spec.NodeName, "the other replica (other node) took over")

	first := map[string]string{}
	f.poll("every gated pod Running", 3*time.Minute, func() (bool, error) {
		list, err := f.c.CoreV1().Pods(f.ns).List(f.ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		claims, err := f.c.ResourceV1().ResourceClaims(f.ns).List(f.ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range claims.Items {
			if c.Status.Allocation == nil {
				continue
			}
			got := allocationKey(c.Status.Allocation)
			if prev, ok := first[c.Name]; ok && prev != got {
				return false, fmt.Errorf("claim %s re-allocated: %s, then %s", c.Name, prev, got)
			}
			first[c.Name] = got
		}
		running := 0
		for _, p := range list.Items {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return running == pods, nil
	})
	f.checkNoGPUOverbooked()
	claims, err := f.c.ResourceV1().ResourceClaims(f.ns).List(f.ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, claims.Items, pods, "one claim per pod")
	for _, c := range claims.Items {
		require.NotNil(t, c.Status.Allocation, "claim %s allocated", c.Name)
		assert.Len(t, c.Status.ReservedFor, 1, "claim %s reserved for its one pod", c.Name)
	}

	zero := int64(0)
	require.NoError(t, f.c.CoreV1().Pods(f.ns).DeleteCollection(f.ctx,
		metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{}))
	f.poll("every claim gone with its pod (no finalizer left behind)", 2*time.Minute, func() (bool, error) {
		claims, err := f.c.ResourceV1().ResourceClaims(f.ns).List(f.ctx, metav1.ListOptions{})
		if err != nil || len(claims.Items) == 0 {
			return err == nil, err
		}
		return false, nil
	})
}

// allocationKey names where an allocation put a claim.
func allocationKey(a *resourceapi.AllocationResult) string {
	var parts []string
	for _, r := range a.Devices.Results {
		parts = append(parts, r.Pool+"/"+r.Device)
	}
	return strings.Join(parts, ",")
}

// controllerLeader waits until the controller's lease is held by a running
// replica other than notName and returns its pod and the lease name.
func (f *framework) controllerLeader(notName string) (*corev1.Pod, string) {
	f.t.Helper()
	var leader *corev1.Pod
	var leaseName string
	f.poll("a dra-controller replica other than "+notName+" holding the lease", 2*time.Minute, func() (bool, error) {
		pods, err := f.c.CoreV1().Pods(driverNamespace).List(f.ctx, metav1.ListOptions{LabelSelector: controllerSelector})
		if err != nil {
			return false, err
		}
		leases, err := f.c.CoordinationV1().Leases(driverNamespace).List(f.ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, l := range leases.Items {
			if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == notName {
				continue
			}
			for i, p := range pods.Items {
				if p.Name == *l.Spec.HolderIdentity && p.Status.Phase == corev1.PodRunning && allReady(&p) {
					leader, leaseName = &pods.Items[i], l.Name
					return true, nil
				}
			}
		}
		return false, nil
	})
	return leader, leaseName
}

// holdDown SIGKILLs the container's process in pod, and every restart of it,
// until the returned stop is called.
func (f *framework) holdDown(pod *corev1.Pod, container string) (stop func()) {
	f.t.Helper()
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan struct{})
	ctr := func(args ...string) (string, error) { return ctrOn(ctx, pod.Spec.NodeName, args...) }
	filter := fmt.Sprintf(`labels."io.kubernetes.pod.uid"==%s,labels."io.kubernetes.container.name"==%s`, pod.UID, container)
	var killed atomic.Int32
	var listErr atomic.Pointer[error]
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			ids, err := ctr("containers", "ls", "-q", filter)
			if err != nil && ctx.Err() == nil {
				listErr.Store(&err)
				return
			}
			for _, id := range strings.Fields(ids) {
				if _, err := ctr("tasks", "kill", "--signal", "SIGKILL", id); err == nil {
					killed.Add(1)
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	f.poll("the first SIGKILL of "+pod.Name+"/"+container, 30*time.Second, func() (bool, error) {
		select {
		case <-done:
			if err := listErr.Load(); err != nil {
				return false, fmt.Errorf("the kill loop ended: %w", *err)
			}
			return false, fmt.Errorf("the kill loop ended")
		default:
		}
		return killed.Load() > 0, nil
	})
	return func() { cancel(); <-done }
}

// checkNoGPUOverbooked sums the memory and cores every allocated claim in the
// cluster consumes per GPU and compares it with what the GPU publishes.
func (f *framework) checkNoGPUOverbooked() {
	f.t.Helper()
	slices, err := f.c.ResourceV1().ResourceSlices().List(f.ctx, metav1.ListOptions{FieldSelector: "spec.driver=" + driverName})
	require.NoError(f.t, err)
	capacity := map[string]map[resourceapi.QualifiedName]resource.Quantity{}
	for _, s := range slices.Items {
		for _, d := range s.Spec.Devices {
			c := map[resourceapi.QualifiedName]resource.Quantity{}
			for name, v := range d.Capacity {
				c[name] = v.Value
			}
			capacity[s.Spec.Pool.Name+"/"+d.Name] = c
		}
	}
	claims, err := f.c.ResourceV1().ResourceClaims("").List(f.ctx, metav1.ListOptions{})
	require.NoError(f.t, err)
	used := map[string]map[resourceapi.QualifiedName]*resource.Quantity{}
	for _, c := range claims.Items {
		if c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			if r.Driver != driverName {
				continue
			}
			key := r.Pool + "/" + r.Device
			if used[key] == nil {
				used[key] = map[resourceapi.QualifiedName]*resource.Quantity{}
			}
			for name, v := range r.ConsumedCapacity {
				if used[key][name] == nil {
					q := resource.Quantity{}
					used[key][name] = &q
				}
				used[key][name].Add(v)
			}
		}
	}
	for gpu, u := range used {
		for name, q := range u {
			limit, ok := capacity[gpu][name]
			require.True(f.t, ok, "GPU %s publishes no capacity %s", gpu, name)
			assert.LessOrEqual(f.t, q.Cmp(limit), 0, "GPU %s: %s consumed %s > capacity %s", gpu, name, q.String(), limit.String())
		}
	}
}

// TestPluginOutageOnOneNode: the second node's plugin is SIGKILLed and stays
// down for 60 s (driver.sh outage: its image is withheld from the node, so the
// kubelet cannot restart it). Pods keep starting on the first node, the pod
// already on the second keeps running, a pod for the second waits, and it
// starts once the plugin is back.
func TestPluginOutageOnOneNode(t *testing.T) {
	needsChart(t)
	nodeB := secondNode(t)
	f := newFramework(t)
	f.createClaimTemplate("small", claimRequest{memory: "1Gi", cores: "5"})
	f.createPod(podSpec{name: "on-b", node: nodeB, claims: []podClaim{{name: "gpu", template: "small"}}})
	before := f.waitRunning("on-b")

	outage := exec.CommandContext(f.ctx, cluster.driverSh, "outage", "60")
	outage.Env = append(os.Environ(), "E2E_DRIVER_NODE="+nodeB)
	var outageLog syncBuffer
	outage.Stdout, outage.Stderr = &outageLog, &outageLog
	require.NoError(t, outage.Start(), "driver.sh outage")
	started := time.Now()
	f.poll("the plugin on "+nodeB+" down", 30*time.Second, func() (bool, error) {
		return strings.Contains(outageLog.String(), "down for"), nil
	})

	f.createPod(podSpec{name: "waits-for-b", node: nodeB, claims: []podClaim{{name: "gpu", template: "small"}}})
	f.createPod(podSpec{name: "new-on-a", claims: []podClaim{{name: "gpu", template: "small"}}})
	f.waitRunning("new-on-a")
	require.Less(t, time.Since(started), 60*time.Second, "the pod on %s started during the outage", cluster.node)
	// Until the outage ends the pod for the second node must not start.
	for time.Since(started) < 55*time.Second {
		p, err := f.c.CoreV1().Pods(f.ns).Get(f.ctx, "waits-for-b", metav1.GetOptions{})
		require.NoError(t, err)
		require.NotEqual(t, corev1.PodRunning, p.Status.Phase, "waits-for-b started while the plugin on %s was down", nodeB)
		time.Sleep(2 * time.Second)
	}
	require.NoError(t, outage.Wait(), "driver.sh outage:\n%s", outageLog.String())
	t.Logf("plugin on %s back after %s", nodeB, time.Since(started).Round(time.Second))

	f.waitRunning("waits-for-b")
	after := f.waitRunning("on-b")
	assert.Equal(t, before.UID, after.UID, "on-b is the same pod")
	assert.Equal(t, restarts(before), restarts(after), "on-b's containers kept running through the outage")
}

// syncBuffer collects a command's output while the spec reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func restarts(p *corev1.Pod) int32 {
	var n int32
	for _, s := range p.Status.ContainerStatuses {
		n += s.RestartCount
	}
	return n
}

// TestDrainMovesClaimsToTheOtherNode: `kubectl drain` of the first node
// recreates a Deployment's pods on the second; their old claims are
// unprepared on the first node (claim directories and CDI specs gone) and
// nothing of the driver's stays allocated there.
func TestDrainMovesClaimsToTheOtherNode(t *testing.T) {
	needsChart(t)
	nodeB := secondNode(t)
	f := newFramework(t)
	f.createClaimTemplate("small", claimRequest{memory: "2Gi", cores: "10"})

	// Placed on the first node: the second is cordoned until they run.
	f.cordon(nodeB, true)
	t.Cleanup(func() { f.cordon(nodeB, false); f.cordon(cluster.node, false) })
	replicas := int32(2)
	tmpl := podSpec{name: "worker", anyNode: true, claims: []podClaim{{name: "gpu", template: "small"}}}.pod()
	tmpl.Labels = map[string]string{"app": "worker"}
	_, err := f.c.AppsV1().Deployments(f.ns).Create(f.ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "worker"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: tmpl.Labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: tmpl.Labels}, Spec: tmpl.Spec},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err, "create Deployment worker")
	old := f.runningPods("app=worker", int(replicas))
	oldClaims := map[string]bool{}
	for _, p := range old {
		require.Equal(t, cluster.node, p.Spec.NodeName, "pod %s placed while %s was cordoned", p.Name, nodeB)
		uid := string(f.claimOf(&p, "gpu").UID)
		require.NotEmpty(t, claimFilesOnNode(cluster.node, uid), "claim %s prepared on %s", uid, cluster.node)
		oldClaims[uid] = true
	}
	f.cordon(nodeB, false)

	start := time.Now()
	out, err := kubectl(f.ctx, "drain", cluster.node, "--ignore-daemonsets", "--delete-emptydir-data",
		"--grace-period=0", "--timeout=3m")
	require.NoError(t, err, "kubectl drain %s:\n%s", cluster.node, out)
	t.Logf("$ kubectl drain %s (%s)\n%s", cluster.node, time.Since(start).Round(time.Second), out)

	for _, p := range f.runningPods("app=worker", int(replicas)) {
		assert.Equal(t, nodeB, p.Spec.NodeName, "pod %s recreated on %s", p.Name, nodeB)
		assert.Equal(t, nodeB, allocatedDevice(t, f.claimOf(&p, "gpu")).Pool, "claim of %s allocated on %s", p.Name, nodeB)
	}
	t.Logf("recreated pods Running on %s %s after the drain started", nodeB, time.Since(start).Round(time.Second))
	for uid := range oldClaims {
		f.poll("claim "+uid+" unprepared on "+cluster.node, time.Minute, func() (bool, error) {
			return len(claimFilesOnNode(cluster.node, uid)) == 0, nil
		})
	}
	claims, err := f.c.ResourceV1().ResourceClaims("").List(f.ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, c := range claims.Items {
		if c.Status.Allocation != nil && allocatedDevice(t, &c).Pool == cluster.node {
			t.Errorf("claim %s/%s still allocated on the drained node %s", c.Namespace, c.Name, cluster.node)
		}
	}
}

// cordon marks node unschedulable (or schedulable again).
func (f *framework) cordon(node string, on bool) {
	f.t.Helper()
	patch := fmt.Sprintf(`{"spec":{"unschedulable":%t}}`, on)
	_, err := f.c.CoreV1().Nodes().Patch(context.Background(), node, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(f.t, err, "cordon %s: %t", node, on)
}

// runningPods waits for n Running, Ready pods matching selector, none
// being deleted, and returns them.
func (f *framework) runningPods(selector string, n int) []corev1.Pod {
	f.t.Helper()
	var pods []corev1.Pod
	f.poll(fmt.Sprintf("%d running pods %s", n, selector), 3*time.Minute, func() (bool, error) {
		list, err := f.c.CoreV1().Pods(f.ns).List(f.ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err
		}
		pods = pods[:0]
		for _, p := range list.Items {
			if p.DeletionTimestamp != nil {
				return false, nil
			}
			if p.Status.Phase == corev1.PodRunning && allReady(&p) {
				pods = append(pods, p)
			}
		}
		return len(pods) == n && len(list.Items) == n, nil
	})
	return pods
}

// TestClaimCannotSpanNodes: an allocation is per node, so a pod on the
// second node that references a claim allocated on the first stays Pending,
// and the scheduler says why.
func TestClaimCannotSpanNodes(t *testing.T) {
	nodeB := secondNode(t)
	f := newFramework(t)
	require.NoError(t, f.createClaim("shared", claimRequest{memory: "1Gi", cores: "5"}))
	f.createPod(podSpec{name: "first", claims: []podClaim{{name: "gpu", claim: "shared"}}})
	f.waitRunning("first")
	f.createPod(podSpec{name: "elsewhere", node: nodeB, claims: []podClaim{{name: "gpu", claim: "shared"}}})

	reason := f.waitUnschedulable("elsewhere")
	t.Logf("elsewhere: %s", reason)
	assert.Contains(t, reason, "0/2 nodes are available")
	assert.Contains(t, reason, "resourceclaim not available on the node", "the message names the claim's node binding")
	// It stays so: nothing moves the claim.
	time.Sleep(5 * time.Second)
	p, err := f.c.CoreV1().Pods(f.ns).Get(f.ctx, "elsewhere", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, corev1.PodPending, p.Status.Phase)
	assert.Empty(t, p.Spec.NodeName, "elsewhere is not bound")
}

// TestExtendedResourceGetsAWholeGPU: a plain pod asking for the DeviceClass's
// extended resource, with no claim, gets a GPU to itself; a HAMi-style pod next
// to it lands on the other GPU, and a claim pinned to the taken GPU waits.
func TestExtendedResourceGetsAWholeGPU(t *testing.T) {
	needsChart(t)
	f := newFramework(t)
	f.createPod(podSpec{name: "whole", image: cluster.plain,
		limits: corev1.ResourceList{"vgpu.dra.dev/gpu": resource.MustParse("1")}})
	whole := f.waitRunning("whole")
	require.NotNil(t, whole.Status.ExtendedResourceClaimStatus, "the scheduler made a claim for the extended resource")
	special, err := f.c.ResourceV1().ResourceClaims(f.ns).Get(f.ctx, whole.Status.ExtendedResourceClaimStatus.ResourceClaimName, metav1.GetOptions{})
	require.NoError(t, err)
	taken := allocatedDevice(t, special)
	require.Equal(t, cluster.node, taken.Pool)
	t.Logf("whole: %s/%s, consumed %v", taken.Pool, taken.Device, taken.ConsumedCapacity)

	f.setNamespaceMeta(map[string]string{"vgpu.dra.dev/hami-compat": "enabled"}, nil)
	hami := podSpec{name: "hami", limits: corev1.ResourceList{
		"nvidia.com/gpu":    resource.MustParse("1"),
		"nvidia.com/gpumem": resource.MustParse("1000"),
	}}
	f.admitted(hami, "translated by the HAMi webhook", func(p *corev1.Pod) bool { return len(p.Spec.ResourceClaims) > 0 })
	created := f.createPod(hami)
	pod := f.waitRunning("hami")
	other := allocatedDevice(t, f.claimOf(pod, created.Spec.ResourceClaims[0].Name))
	assert.Equal(t, cluster.node, other.Pool)
	assert.NotEqual(t, taken.Device, other.Device, "the HAMi pod is not placed on the whole pod's GPU")

	index, err := strconv.Atoi(strings.TrimPrefix(taken.Device, "gpu-"))
	require.NoError(t, err, "device name %s", taken.Device)
	f.createClaimTemplate("on-taken", claimRequest{memory: "1Gi", cel: byIndex(index)})
	f.createPod(podSpec{name: "on-taken", claims: []podClaim{{name: "gpu", template: "on-taken"}}})
	f.waitUnschedulable("on-taken")
}
