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
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	utilversion "k8s.io/apimachinery/pkg/util/version"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/cluster/inspect"
)

const mpsClass = "mps.vgpu.dra.dev"

// enableMPS turns MPS on in the chart (driver.sh mps on) for the spec and
// waits for node's MPS devices. The spec's namespaces must be made after
// it: cleanups run last first, so their pods are gone, and with them the
// control daemons, before MPS is turned off again.
func enableMPS(t *testing.T, node string) {
	t.Helper()
	needsChart(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	mps := func(ctx context.Context, want string) error {
		cmd := exec.CommandContext(ctx, cluster.driverSh, "mps", want)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Logf("driver.sh mps %s:\n%s", want, out)
		}
		return err
	}
	require.NoError(t, mps(ctx, "on"))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		deadline := time.Now().Add(deleteTimeout)
		for len(mpsDaemons(t, node)) > 0 && time.Now().Before(deadline) {
			time.Sleep(500 * time.Millisecond)
		}
		assert.Empty(t, mpsDaemons(t, node), "MPS control daemons left on %s after the spec's pods went", node)
		assert.NoError(t, mps(ctx, "off"))
	})
	if v, err := utilversion.ParseGeneric(cluster.k8sVersion); err == nil && !v.AtLeast(utilversion.MustParseGeneric("1.36.2")) {
		t.Skipf("Kubernetes %s: the plugin publishes no MPS devices before 1.36.2, whose scheduler counts an allocated shareable device's counters", cluster.k8sVersion)
	}
	f := newFramework(t)
	f.poll("the MPS devices of "+node+" published", time.Minute, func() (bool, error) {
		devs, err := nodeDevices(f, node)
		if err != nil {
			return false, err
		}
		_, ok0 := devs["gpu-0-mps"]
		_, ok1 := devs["gpu-1-mps"]
		return ok0 && ok1, nil
	})
}

// mpsDaemon is a control daemon of node as its pipe directory shows it.
type mpsDaemon struct {
	uuid, pipe string
	pid        int
}

// mpsDaemons lists node's MPS control daemons by GPU UUID: the pipe
// directories under the plugin's state root, with the pid files the
// daemons wrote.
func mpsDaemons(t *testing.T, node string) map[string]mpsDaemon {
	t.Helper()
	root := filepath.Join(cluster.viewOf(node), "driver", "state", "mps")
	dirs, err := filepath.Glob(filepath.Join(root, "*", "pipe"))
	require.NoError(t, err)
	out := map[string]mpsDaemon{}
	for _, dir := range dirs {
		d := mpsDaemon{uuid: filepath.Base(filepath.Dir(dir)), pipe: dir}
		if data, err := os.ReadFile(filepath.Join(dir, "nvidia-cuda-mps-control.pid")); err == nil {
			d.pid, _ = strconv.Atoi(strings.TrimSpace(string(data)))
		}
		out[d.uuid] = d
	}
	return out
}

// mpsControl sends one command to a daemon the way the plugin does (the
// control program without flags, the command on its standard input) and
// returns the answer.
func mpsControl(t *testing.T, d mpsDaemon, command string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(cluster.runDir, "tools", "fake-mps-control"))
	cmd.Env = append(os.Environ(), "CUDA_MPS_PIPE_DIRECTORY="+d.pipe)
	cmd.Stdin = strings.NewReader(command + "\n")
	out, err := cmd.Output()
	require.NoError(t, err, "%s to the daemon of %s", command, d.uuid)
	return strings.TrimSpace(string(out))
}

// TestMPSClaimsShareAGPUBesideATimeSlicedOne follows one GPU through MPS
// use and back (docs/mps.md): MPS claims of two namespaces share the GPU
// a time-sliced claim does not hold, under one control daemon whose
// ceiling is their largest share, each held to its own memory limit; a
// whole-GPU claim waits while the GPUs serve their modes (kubectl vgpu
// shows each GPU's mode and why names MPS), and once the last MPS claim is
// gone the daemon stops and the GPU takes it.
func TestMPSClaimsShareAGPUBesideATimeSlicedOne(t *testing.T) {
	node := cluster.node
	enableMPS(t, node)
	f := newFramework(t)
	g := newFramework(t)

	f.createClaimTemplate("sliced", claimRequest{memory: "4Gi", cores: "30"})
	f.createPod(podSpec{name: "sliced", claims: []podClaim{{name: "gpu", template: "sliced"}}})
	sliced := allocatedDevice(t, f.claimOf(f.waitRunning("sliced"), "gpu")).Device
	require.Contains(t, []string{"gpu-0", "gpu-1"}, sliced, "the time-sliced claim takes a GPU's time-sliced device")
	other := "gpu-0"
	if sliced == "gpu-0" {
		other = "gpu-1"
	}

	shares := map[*framework]string{f: "30", g: "50"}
	uuids := map[string]bool{}
	for fw, cores := range shares {
		fw.createClaimTemplate("mps", claimRequest{class: mpsClass, memory: "2Gi", cores: cores})
		fw.createPod(podSpec{name: "mps", claims: []podClaim{{name: "gpu", template: "mps"}}})
	}
	for fw, cores := range shares {
		claim := fw.claimOf(fw.waitRunning("mps"), "gpu")
		dev := allocatedDevice(t, claim)
		assert.Equal(t, other+"-mps", dev.Device, "namespace %s: the MPS claim takes the GPU the time-sliced one leaves", fw.ns)
		assert.NotNil(t, dev.ShareID, "namespace %s: MPS claims share the device", fw.ns)

		cfgPath := path.Join(containerClaims, string(claim.UID), "config")
		out, err := fw.execIn("mps", "c0", "cat", cfgPath)
		require.NoError(t, err)
		cfg := parseConfig(out)
		assert.Equal(t, cores, cfg["mps.activeThreadPercent.0"], "namespace %s: the claim's share in its config", fw.ns)
		assert.Equal(t, strconv.FormatInt(2*gib, 10), cfg["mps.pinnedMemoryLimit.0"], "namespace %s: the claim's pinned limit", fw.ns)
		assert.Equal(t, "0", cfg["device.0.sm_limit_percent"], "namespace %s: no time share on top of MPS's SM share", fw.ns)
		uuid := cfg["device.0.uuid"]
		uuids[uuid] = true

		out, err = fw.execIn("mps", "c0", "env")
		require.NoError(t, err)
		pipe := parseEnv(out)["CUDA_MPS_PIPE_DIRECTORY"]
		assert.Equal(t, "/usr/local/vgpu/mps/"+uuid, pipe, "namespace %s: the GPU's pipe directory", fw.ns)
		_, err = fw.execIn("mps", "c0", "test", "-S", pipe+"/control")
		assert.NoError(t, err, "namespace %s: the daemon's control socket in the container", fw.ns)

		assert.Equal(t, 2*gib, fw.probeMemInfo("mps", "c0", 0, uuid).Total, "namespace %s: its memory limit is its total", fw.ns)
		assert.Equal(t, "CUDA_SUCCESS", fw.probeAlloc("mps", "c0", 0, uuid, gib), "namespace %s: within its limit", fw.ns)
		assert.Equal(t, "CUDA_ERROR_OUT_OF_MEMORY", fw.probeAlloc("mps", "c0", 0, uuid, 2*gib+mib), "namespace %s: past its limit", fw.ns)
	}
	require.Len(t, uuids, 1, "both MPS claims on one GPU")

	daemons := mpsDaemons(t, node)
	require.Len(t, daemons, 1, "one control daemon, for the MPS GPU: %v", daemons)
	var daemon mpsDaemon
	for uuid, d := range daemons {
		assert.True(t, uuids[uuid], "the daemon serves the claims' GPU %s", uuid)
		daemon = d
	}
	require.NotZero(t, daemon.pid, "the daemon's pid file")
	require.NoError(t, syscall.Kill(daemon.pid, 0), "the daemon's process %d runs", daemon.pid)
	assert.Equal(t, "50.0", mpsControl(t, daemon, "get_default_active_thread_percentage"),
		"the daemon's ceiling is the largest share of its claims")

	// Both GPUs serve a mode: a whole GPU fits on neither.
	f.createClaimTemplate("whole", claimRequest{})
	f.createPod(podSpec{name: "whole", claims: []podClaim{{name: "gpu", template: "whole"}}})
	f.waitUnschedulable("whole")
	why := f.kubectlVGPU("why", "-n", f.ns, "whole")
	assert.Contains(t, why, other+" serves MPS claims (", "why names the GPU MPS holds")
	var nodes struct {
		Items []inspect.GPURow `json:"items"`
	}
	require.NoError(t, json.Unmarshal([]byte(f.kubectlVGPU("nodes", "-o", "json")), &nodes))
	modes := map[string]string{}
	for _, row := range nodes.Items {
		if row.Node == node {
			modes[row.GPU] = row.Mode
		}
	}
	assert.Equal(t, map[string]string{sliced: "time-sliced", other: "mps"}, modes, "kubectl vgpu nodes: each GPU's mode")

	// The larger share goes: the ceiling follows the remaining claim.
	g.deletePodAndWait("mps")
	f.poll("the ceiling lowered to the remaining claim's share", deleteTimeout, func() (bool, error) {
		return mpsControl(t, daemon, "get_default_active_thread_percentage") == "30.0", nil
	})
	require.NoError(t, syscall.Kill(daemon.pid, 0), "the daemon runs while a claim uses it")

	// The last MPS claim goes: its daemon stops, and the GPU takes the
	// whole-GPU claim.
	f.deletePodAndWait("mps")
	f.poll("the control daemon stopped", deleteTimeout, func() (bool, error) {
		return len(mpsDaemons(t, node)) == 0 && syscall.Kill(daemon.pid, 0) != nil, nil
	})
	whole := allocatedDevice(t, f.claimOf(f.waitRunning("whole"), "gpu"))
	assert.Equal(t, other, whole.Device, "the GPU left by MPS serves a whole-GPU claim")
}

// TestMPSDaemonOutlivesAKilledPluginAndAReplacedPod SIGKILLs the plugin's
// container while an MPS client runs, then replaces the plugin's pod (as a
// chart upgrade or a rollout does) while another runs: the daemon, started
// by the node's mps-host pod, keeps serving; each next plugin instance
// adopts it (same pid, same ceiling) instead of starting another, the
// client keeps its memory, and the claim's limit still holds for a new
// process. The daemon stops with the claim's pod.
func TestMPSDaemonOutlivesAKilledPluginAndAReplacedPod(t *testing.T) {
	node := cluster.node
	enableMPS(t, node)
	f := newFramework(t)
	f.createClaimTemplate("mps", claimRequest{class: mpsClass, memory: "2Gi", cores: "40"})
	f.createPod(podSpec{name: "client", claims: []podClaim{{name: "gpu", template: "mps"}}})
	claim := f.claimOf(f.waitRunning("client"), "gpu")
	out, err := f.execIn("client", "c0", "cat", path.Join(containerClaims, string(claim.UID), "config"))
	require.NoError(t, err)
	uuid := parseConfig(out)["device.0.uuid"]
	before, ok := mpsDaemons(t, node)[uuid]
	require.True(t, ok, "a control daemon for %s", uuid)
	require.NoError(t, syscall.Kill(before.pid, 0), "the daemon's process %d runs", before.pid)

	for _, step := range []struct {
		name string
		do   func()
	}{
		{"the plugin's container SIGKILLed", func() { f.driverOn(node, "kill"); f.driverOn(node, "start") }},
		// driver.sh restart deletes the plugin's pod and waits for its
		// DaemonSet's next one.
		{"the plugin's pod replaced", func() { f.driverOn(node, "restart") }},
	} {
		h := f.probeHold("client", "c0", 0, uuid, gib)
		step.do()
		after := mpsDaemons(t, node)[uuid]
		assert.Equal(t, before.pid, after.pid, "%s: the new plugin adopted the daemon instead of starting another", step.name)
		assert.NoError(t, syscall.Kill(before.pid, 0), "%s: the daemon outlived the plugin", step.name)
		assert.Equal(t, "40.0", mpsControl(t, after, "get_default_active_thread_percentage"), "%s: its ceiling kept", step.name)
		assert.Len(t, f.probePIDs("client", "c0", "hold"), 1, "%s: the client kept running", step.name)
		assert.Equal(t, "CUDA_ERROR_OUT_OF_MEMORY", f.probeAlloc("client", "c0", 0, uuid, gib+512*mib),
			"%s: 1Gi held and 1.5Gi more is past the claim's 2Gi", step.name)
		assert.Equal(t, "CUDA_SUCCESS", f.probeAlloc("client", "c0", 0, uuid, 512*mib), "%s: within it", step.name)
		h.stop()
		f.killProbes("client", "c0", "hold")
	}

	f.deletePodAndWait("client")
	f.poll("the adopted daemon stopped with its last claim", deleteTimeout, func() (bool, error) {
		return len(mpsDaemons(t, node)) == 0 && syscall.Kill(before.pid, 0) != nil, nil
	})
}

// TestMPSSecondUserRefusedAtOnce runs the two containers of one MPS claim
// as different users: while uid 1000's process is a client of the GPU's MPS
// server, uid 2000's CUDA initialisation fails at once with
// CUDA_ERROR_MPS_CONNECTION_FAILED and the reason on its stderr, where the
// driver would have kept it waiting; once uid 1000's process is gone, uid
// 2000's runs.
func TestMPSSecondUserRefusedAtOnce(t *testing.T) {
	node := cluster.node
	enableMPS(t, node)
	f := newFramework(t)
	f.createClaimTemplate("mps", claimRequest{class: mpsClass, memory: "2Gi", cores: "40"})
	f.createPod(podSpec{name: "users", containers: 2, runAsUsers: []int64{1000, 2000},
		claims: []podClaim{{name: "gpu", template: "mps"}}})
	claim := f.claimOf(f.waitRunning("users"), "gpu")
	out, err := f.execIn("users", "c0", "cat", path.Join(containerClaims, string(claim.UID), "config"))
	require.NoError(t, err)
	uuid := parseConfig(out)["device.0.uuid"]

	h := f.probeHold("users", "c0", 0, uuid, gib)
	out, err = f.execIn("users", "c1", "cuda-probe", "--device", "0", "alloc", strconv.FormatInt(mib, 10))
	reports, perr := parseReports(out)
	require.NoError(t, perr, "uid 2000's cuda-probe (exit: %v)", err)
	assert.Equal(t, "CUDA_ERROR_MPS_CONNECTION_FAILED", reports[len(reports)-1].result(), "uid 2000's CUDA initialisation")
	assert.Contains(t, out, "MPS on "+uuid+" serves uid 1000 until its clients end; this process runs as uid 2000",
		"the reason on uid 2000's stderr")

	h.stop()
	f.killProbes("users", "c0", "hold")
	f.poll("uid 2000's process to run once uid 1000's is gone", time.Minute, func() (bool, error) {
		return f.probeAlloc("users", "c1", 0, uuid, mib) == "CUDA_SUCCESS", nil
	})
	f.deletePodAndWait("users")
}
