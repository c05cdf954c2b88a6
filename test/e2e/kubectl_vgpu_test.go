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
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/cluster/inspect"
)

// kubectlVGPU runs the plugin binary `make build` wrote, with the
// cluster's kubeconfig, and returns its stdout.
func (f *framework) kubectlVGPU(args ...string) string {
	f.t.Helper()
	bin, err := filepath.Abs(filepath.Join("..", "..", "bin", "kubectl-vgpu"))
	require.NoError(f.t, err)
	_, err = os.Stat(bin)
	require.NoError(f.t, err, "the kubectl plugin: run 'make build' first")
	cmd := exec.CommandContext(f.ctx, bin, append([]string{"--kubeconfig=" + cluster.kubeconfig}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(f.t, err, "kubectl vgpu %s: %s", strings.Join(args, " "), stderr.String())
	f.t.Logf("$ kubectl vgpu %s\n%s", strings.Join(args, " "), out)
	return string(out)
}

// nodeGPUs returns the node's published GPUs of the driver by name.
func (f *framework) nodeGPUs() map[string]resourceapi.Device {
	f.t.Helper()
	slices, err := f.c.ResourceV1().ResourceSlices().List(f.ctx, metav1.ListOptions{})
	require.NoError(f.t, err)
	out := map[string]resourceapi.Device{}
	for _, s := range slices.Items {
		if s.Spec.Driver == driverName && s.Spec.NodeName != nil && *s.Spec.NodeName == cluster.node {
			for _, d := range s.Spec.Devices {
				out[d.Name] = d
			}
		}
	}
	require.NotEmpty(f.t, out, "GPUs of node %s", cluster.node)
	return out
}

// granted sums the memory the API server's claims hold on each GPU of the node.
func (f *framework) granted() map[string]int64 {
	f.t.Helper()
	claims, err := f.c.ResourceV1().ResourceClaims(metav1.NamespaceAll).List(f.ctx, metav1.ListOptions{})
	require.NoError(f.t, err)
	out := map[string]int64{}
	for _, c := range claims.Items {
		if c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			if r.Driver == driverName && r.Pool == cluster.node {
				q := r.ConsumedCapacity["memory"]
				out[r.Device] += q.Value()
			}
		}
	}
	return out
}

func TestKubectlVGPUNodesClaimsAndWhy(t *testing.T) {
	f := newFramework(t)
	gpus := f.nodeGPUs()
	// A 1Gi/10-core pod on every GPU, so that no GPU has its whole memory left.
	for name, d := range gpus {
		index := *d.Attributes["index"].IntValue
		pod := "small-" + name
		f.createClaimTemplate(pod, claimRequest{memory: "1Gi", cores: "10",
			cel: fmt.Sprintf(`device.attributes["vgpu.dra.dev"].index == %d`, index)})
		f.createPod(podSpec{name: pod, claims: []podClaim{{name: "gpu", template: pod}}})
	}
	for name := range gpus {
		f.waitRunning("small-" + name)
	}

	// claims: one row per pod, on the GPU the scheduler chose, with the grant.
	var claimList struct {
		Items []inspect.ClaimRow `json:"items"`
	}
	require.NoError(t, json.Unmarshal([]byte(f.kubectlVGPU("claims", "-n", f.ns, "-o", "json")), &claimList))
	require.Len(t, claimList.Items, len(gpus))
	for _, row := range claimList.Items {
		require.Len(t, row.Pods, 1, "claim %s", row.Claim)
		pod, err := f.c.CoreV1().Pods(f.ns).Get(f.ctx, row.Pods[0], metav1.GetOptions{})
		require.NoError(t, err, "the pod of claim %s", row.Claim)
		claim := f.claimOf(pod, "gpu")
		res := allocatedDevice(t, claim)
		assert.Equal(t, claim.Name, row.Claim)
		assert.Equal(t, []string{pod.Name}, row.Pods)
		assert.Equal(t, inspect.StateAllocated, row.State)
		assert.Equal(t, cluster.node, row.Node)
		assert.Equal(t, res.Device, row.GPU)
		assert.Equal(t, gib, row.MemoryGranted)
		assert.Equal(t, gib, row.MemoryLimit, "no memoryLimit: the limit is the guarantee")
		assert.Equal(t, int64(10), row.CoresGranted)
	}
	table := f.kubectlVGPU("claims", "-n", f.ns)
	assert.Regexp(t, `(?m)^CLAIM\s+PODS\s+STATE\s+NODE\s+GPU\s+GUARANTEE\s+LIMIT\s+BURST\s+CORES\s+USED`, table)

	// nodes: the allocated memory per GPU is what the cluster's claims hold.
	var nodeList struct {
		Items []inspect.GPURow `json:"items"`
	}
	require.NoError(t, json.Unmarshal([]byte(f.kubectlVGPU("nodes", "-o", "json")), &nodeList))
	want := f.granted()
	seen := 0
	for _, row := range nodeList.Items {
		if row.Node != cluster.node {
			continue
		}
		seen++
		d := gpus[row.GPU]
		capacity := d.Capacity["memory"].Value
		assert.Equal(t, capacity.Value(), row.MemoryCapacity, "%s capacity", row.GPU)
		assert.Equal(t, want[row.GPU], row.MemoryAllocated, "%s allocated = the claims' consumed memory", row.GPU)
		assert.GreaterOrEqual(t, row.Claims, 1, "%s holds a small pod", row.GPU)
	}
	assert.Equal(t, len(gpus), seen, "one row per GPU of node %s", cluster.node)

	// why: a pod asking a whole GPU's memory fits nowhere now; why names
	// each GPU with its numbers and the request that would fit.
	var name string
	var capacity int64
	for n, d := range gpus {
		name = n
		q := d.Capacity["memory"].Value
		capacity = q.Value()
		break
	}
	f.createClaimTemplate("too-big", claimRequest{memory: fmt.Sprintf("%d", capacity), cores: "10"})
	f.createPod(podSpec{name: "too-big", claims: []podClaim{{name: "gpu", template: "too-big"}}})
	f.waitUnschedulable("too-big")
	out := f.kubectlVGPU("why", "-n", f.ns, "too-big")
	free := capacity - f.granted()[name]
	assert.Contains(t, out, "fit on none of")
	assert.Regexp(t, fmt.Sprintf(`(?m)^%s\s+%s\s+\S+\s+gpu\s+no\s+memory: asks %s, %s left of %s\s+the request is memory <= `,
		cluster.node, name, inspect.FormatBytes(capacity), inspect.FormatBytes(free), inspect.FormatBytes(capacity)), out)
	assert.Contains(t, out, "Smallest change: ")

	// The suggestion holds for the real scheduler: a pod asking what why
	// says fits on that GPU runs there.
	var exp inspect.Explanation
	require.NoError(t, json.Unmarshal([]byte(f.kubectlVGPU("why", "-n", f.ns, "too-big", "-o", "json")), &exp))
	var fix string
	for _, v := range exp.GPUs {
		// Other nodes' GPUs may hold the request; the pod's node selector
		// keeps it off those nodes, and their node verdict says so.
		if v.Node != cluster.node {
			continue
		}
		assert.False(t, v.Fits, "%s/%s", v.Node, v.GPU)
		if v.GPU == name {
			fix = v.FitsIf
		}
	}
	for _, n := range exp.Nodes {
		assert.False(t, n.Fits, "node %s: %s", n.Node, n.Reason)
		if n.Node != cluster.node {
			assert.Contains(t, n.Reason, "node selector or affinity", "node %s", n.Node)
		}
	}
	memory, ok := strings.CutPrefix(fix, "the request is memory <= ")
	require.True(t, ok, "why suggests a smaller memory request on %s: %q", name, fix)
	index := *gpus[name].Attributes["index"].IntValue
	f.createClaimTemplate("fits-now", claimRequest{memory: memory, cores: "10",
		cel: fmt.Sprintf(`device.attributes["vgpu.dra.dev"].index == %d`, index)})
	f.createPod(podSpec{name: "fits-now", claims: []podClaim{{name: "gpu", template: "fits-now"}}})
	pod := f.waitRunning("fits-now")
	assert.Equal(t, name, allocatedDevice(t, f.claimOf(pod, "gpu")).Device)
}
