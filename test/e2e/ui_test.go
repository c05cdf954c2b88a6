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
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/cluster/inspect"
)

// startUI runs `kubectl vgpu ui` on a free port with the cluster's
// kubeconfig until the spec ends and returns the page's URL.
func (f *framework) startUI() string {
	f.t.Helper()
	bin, err := filepath.Abs(filepath.Join("..", "..", "bin", "kubectl-vgpu"))
	require.NoError(f.t, err)
	cmd := exec.CommandContext(f.ctx, bin, "--kubeconfig="+cluster.kubeconfig, "ui", "--port", "0")
	stdout, err := cmd.StdoutPipe()
	require.NoError(f.t, err)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(f.t, cmd.Start(), "start kubectl vgpu ui: run 'make build' first")
	f.t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		assert.NoError(f.t, cmd.Wait(), "kubectl vgpu ui stops cleanly on SIGTERM: %s", stderr.String())
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(f.t, err, "kubectl vgpu ui: %s", stderr.String())
	url := regexp.MustCompile(`http://127\.0\.0\.1:\d+/`).FindString(line)
	require.NotEmpty(f.t, url, "the address in %q", line)
	return url
}

// TestKubectlVGPUUIInBrowser loads `kubectl vgpu ui` in headless Chromium:
// the GPU two pods share, their claims and a Pending pod's reason are on
// the page, and a deleted pod leaves it within 5 s without a reload.
func TestKubectlVGPUUIInBrowser(t *testing.T) {
	f := newFramework(t)
	gpus := f.nodeGPUs()
	var gpu string
	var capacity int64
	for name, d := range gpus {
		if *d.Attributes["index"].IntValue == 0 {
			q := d.Capacity["memory"].Value
			gpu, capacity = name, q.Value()
		}
	}
	require.NotEmpty(t, gpu, "GPU 0 of node %s", cluster.node)
	for _, name := range []string{"ui-keep", "ui-gone"} {
		f.createClaimTemplate(name, claimRequest{memory: "1Gi", cores: "10", cel: `device.attributes["vgpu.dra.dev"].index == 0`})
		f.createPod(podSpec{name: name, claims: []podClaim{{name: "gpu", template: name}}})
	}
	keep := f.claimOf(f.waitRunning("ui-keep"), "gpu")
	gone := f.claimOf(f.waitRunning("ui-gone"), "gpu")
	// Asks the whole GPU, which the two pods hold part of.
	f.createClaimTemplate("ui-waits", claimRequest{memory: fmt.Sprint(capacity), cores: "10", cel: `device.attributes["vgpu.dra.dev"].index == 0`})
	f.createPod(podSpec{name: "ui-waits", claims: []podClaim{{name: "gpu", template: "ui-waits"}}})
	f.waitUnschedulable("ui-waits")

	url := f.startUI() + "?ns=" + f.ns
	b := startBrowser(t, f.ctx, 1400, 1000)
	require.NoError(t, b.navigate(f.ctx, url))

	// The Pending pod with the explanation of `kubectl vgpu why`.
	podText := fmt.Sprintf(`(() => { const e = document.querySelector('[data-pod=%q]'); return e ? e.textContent : ''; })()`, f.ns+"/ui-waits")
	var pending string
	f.poll("the page to explain why ui-waits is Pending", time.Minute, func() (bool, error) {
		if err := b.eval(f.ctx, podText, &pending); err != nil {
			return false, err
		}
		return strings.Contains(pending, "fit on none of"), nil
	})
	if !assert.Contains(t, pending, fmt.Sprintf("memory: asks %s, ", inspect.FormatBytes(capacity))) {
		var html string
		_ = b.eval(f.ctx, `document.getElementById('view').innerHTML`, &html)
		t.Logf("the page's view: %s", html)
		out, err := exec.CommandContext(f.ctx, filepath.Join("..", "..", "bin", "kubectl-vgpu"), "--kubeconfig="+cluster.kubeconfig, "why", "-n", f.ns, "ui-waits", "-o", "json").CombinedOutput()
		t.Logf("kubectl vgpu why (err=%v): %s", err, out)
	}
	assert.Contains(t, pending, "Smallest change: ")

	// The GPU and both claims on it.
	var shown []string
	require.NoError(t, b.eval(f.ctx, `Array.from(document.querySelectorAll('[data-gpu],[data-claim]')).map(e => e.dataset.gpu || e.dataset.claim)`, &shown))
	assert.Contains(t, shown, cluster.node+"/"+gpu)
	assert.Contains(t, shown, f.ns+"/"+keep.Name)
	assert.Contains(t, shown, f.ns+"/"+gone.Name)
	var bar string
	require.NoError(t, b.eval(f.ctx, fmt.Sprintf(`document.querySelector('[data-gpu=%q] svg.bar').getAttribute('aria-label')`, cluster.node+"/"+gpu), &bar))
	assert.Regexp(t, `^memory: .* used, \d+(\.\d)?Gi booked, .* of `, bar)

	out := filepath.Join("..", "..", "_output", "e2e")
	require.NoError(t, os.MkdirAll(out, 0o755))
	require.NoError(t, b.screenshot(f.ctx, filepath.Join(out, "kubectl-vgpu-ui.png")))

	// A deleted pod leaves the page through the watch: no reload (the
	// page's own variable survives).
	var marked string
	require.NoError(t, b.eval(f.ctx, `window.specMarker = 'same page'`, &marked))
	zero := int64(0)
	deleted := time.Now()
	require.NoError(t, f.c.CoreV1().Pods(f.ns).Delete(f.ctx, "ui-gone", metav1.DeleteOptions{GracePeriodSeconds: &zero}))
	goneCheck := fmt.Sprintf(`!document.querySelector('[data-claim=%q]') && !document.getElementById('view').textContent.includes('ui-gone')`, f.ns+"/"+gone.Name)
	f.poll("the page to drop pod ui-gone", 5*time.Second, func() (bool, error) {
		var ok bool
		return ok, b.eval(f.ctx, goneCheck, &ok)
	})
	took := time.Since(deleted)
	require.NoError(t, b.eval(f.ctx, `window.specMarker || 'reloaded'`, &marked))
	assert.Equal(t, "same page", marked, "the page was updated in place")
	var keepShown bool
	require.NoError(t, b.eval(f.ctx, fmt.Sprintf(`!!document.querySelector('[data-claim=%q]')`, f.ns+"/"+keep.Name), &keepShown))
	assert.True(t, keepShown, "the other claim stays")
	msg := fmt.Sprintf("kubectl vgpu ui: a deleted pod left the page after %v", took.Round(10*time.Millisecond))
	t.Log(msg)
	fmt.Println("E2E-MEASURE " + msg)
}
