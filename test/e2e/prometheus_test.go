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
	"math"
	"net"
	"net/http"
	"net/url"
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
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// promAddress is where the spec's Prometheus listens: loopback only.
const promAddress = "127.0.0.1:19090"

// promSample is one series of an instant query.
type promSample struct {
	Labels map[string]string
	Value  float64
}

// controllerHTTP is the address of the dra-controller's /metrics: its pod
// runs on the host network of whichever node it was placed on.
func (f *framework) controllerHTTP() string {
	f.t.Helper()
	if addr := os.Getenv("E2E_CONTROLLER_HTTP"); addr != "" {
		return addr
	}
	var hostIP string
	f.poll("a running dra-controller pod", time.Minute, func() (bool, error) {
		pods, err := f.c.CoreV1().Pods("vgpu-dra").List(f.ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=controller"})
		if err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil && p.Status.HostIP != "" {
				hostIP = p.Status.HostIP
				return true, nil
			}
		}
		return false, nil
	})
	return net.JoinHostPort(hostIP, "18081")
}

// startPrometheus runs the Prometheus server test/e2e/lib/build.sh built,
// scraping the kubelet plugin and the dra-controller every second, until
// the spec ends.
func (f *framework) startPrometheus() {
	f.t.Helper()
	// cluster.sh env names the directory of the version the harness built.
	bin := filepath.Join(os.Getenv("E2E_PROMETHEUS_BIN"), "prometheus")
	_, err := os.Stat(bin)
	require.NoError(f.t, err, "prometheus: run E2E_PROMETHEUS=1 test/e2e/cluster.sh build (lib/build.sh build_prometheus)")
	dir := f.t.TempDir()
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: dra-kubelet-plugin
    static_configs: [{targets: [%q]}]
  - job_name: dra-controller
    static_configs: [{targets: [%q]}]
`, cluster.pluginHTTP, f.controllerHTTP())
	require.NoError(f.t, os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644))
	logFile, err := os.Create(filepath.Join(dir, "prometheus.log"))
	require.NoError(f.t, err)
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+promAddress)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	require.NoError(f.t, cmd.Start(), "start prometheus")
	f.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if f.t.Failed() {
			f.t.Logf("===== prometheus.log (tail) =====\n%s", tailFile(logFile.Name(), 40))
		}
		_ = logFile.Close()
	})
	f.poll("Prometheus ready and both targets up", time.Minute, func() (bool, error) {
		up, err := f.promQuery(`up`)
		if err != nil {
			return false, nil
		}
		healthy := 0
		for _, s := range up {
			if s.Value == 1 {
				healthy++
			}
		}
		return healthy == 2, nil
	})
}

// promQuery evaluates an instant PromQL query.
func (f *framework) promQuery(q string) ([]promSample, error) {
	resp, err := http.Get("http://" + promAddress + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("decode the answer to %q: %w", q, err)
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("query %q: %s", q, body.Error)
	}
	out := make([]promSample, 0, len(body.Data.Result))
	for _, r := range body.Data.Result {
		s, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("query %q: value %v: %w", q, r.Value[1], err)
		}
		out = append(out, promSample{Labels: r.Metric, Value: v})
	}
	return out, nil
}

// findSample returns the series whose labels include want.
func findSample(samples []promSample, want map[string]string) (promSample, bool) {
	for _, s := range samples {
		match := true
		for k, v := range want {
			match = match && s.Labels[k] == v
		}
		if match {
			return s, true
		}
	}
	return promSample{}, false
}

// cookbook returns the PromQL queries of docs/metrics.md's cookbook, keyed
// by the comment line above each.
func cookbook(t *testing.T) map[string]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "metrics.md"))
	require.NoError(t, err)
	block := regexp.MustCompile("(?s)```promql\n(.*?)```").FindStringSubmatch(string(data))
	require.NotNil(t, block, "docs/metrics.md has a promql block")
	out := map[string]string{}
	var title string
	var expr []string
	flush := func() {
		if title != "" && len(expr) > 0 {
			out[title] = strings.Join(expr, " ")
		}
		title, expr = "", nil
	}
	for _, line := range strings.Split(block[1], "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "# "):
			flush()
			title = strings.TrimPrefix(line, "# ")
		case line != "":
			expr = append(expr, line)
		}
	}
	flush()
	return out
}

// TestMetricsOnPrometheus runs a real Prometheus against the driver and
// checks that every cookbook query of docs/metrics.md and every panel of
// the Grafana dashboard returns what the running pods hold.
func TestMetricsOnPrometheus(t *testing.T) {
	needsChart(t) // the controller's allocation metrics
	f := newFramework(t)
	f.startPrometheus()

	// held: holds 1Gi of a 2Gi/20-core claim and idles (over-provisioned).
	// full: holds 950Mi of a 1Gi claim (over 90 %). busy: launches kernels
	// non-stop under a 10-core strict limit (throttled).
	for _, p := range []struct {
		name          string
		memory, cores string
	}{{"held", "2Gi", "20"}, {"full", "1Gi", "10"}, {"busy", "1Gi", "10"}} {
		f.createClaimTemplate(p.name, claimRequest{memory: p.memory, cores: p.cores})
		f.createPod(podSpec{name: p.name, claims: []podClaim{{name: "gpu", template: p.name}}})
	}
	uuids := map[string]string{}
	claims := map[string]string{}
	for _, name := range []string{"held", "full", "busy"} {
		pod := f.waitRunning(name)
		claim := f.claimOf(pod, "gpu")
		claims[name] = claim.Name
		out, err := f.execIn(name, "c0", "cat", containerClaims+"/"+string(claim.UID)+"/config")
		require.NoError(t, err)
		uuids[name] = parseConfig(out)["device.0.uuid"]
	}
	const heldBytes, fullBytes = 1 << 30, 950 << 20
	defer f.probeHold("held", "c0", 0, uuids["held"], heldBytes).stop()
	defer f.probeHold("full", "c0", 0, uuids["full"], fullBytes).stop()
	defer f.probeRun("busy", "c0", "--device", f.device("busy", "c0", 0, uuids["busy"]), "launch", "600", "5").stop()

	claimOf := func(name string) map[string]string {
		return map[string]string{"namespace": f.ns, "claim": claims[name], "device_uuid": uuids[name]}
	}
	// waitValueFor polls a query for up to timeout until the series with
	// the labels satisfies ok.
	waitValueFor := func(q string, labels map[string]string, what string, timeout time.Duration, ok func(float64) bool) float64 {
		t.Helper()
		var got float64
		f.poll(fmt.Sprintf("%s: %s", what, q), timeout, func() (bool, error) {
			samples, err := f.promQuery(q)
			if err != nil {
				return false, err
			}
			s, found := findSample(samples, labels)
			got = s.Value
			return found && ok(got), nil
		})
		t.Logf("%s = %g (%v)", q, got, labels)
		return got
	}
	waitValue := func(q string, labels map[string]string, what string, ok func(float64) bool) float64 {
		t.Helper()
		return waitValueFor(q, labels, what, time.Minute, ok)
	}
	// Memory used of a pod that holds 1Gi is 1Gi (plus the context the
	// fake driver charges, under 64Mi).
	used := waitValue(`vgpu_dra_claim_memory_used_bytes`, claimOf("held"), "held's memory use", func(v float64) bool { return v >= heldBytes })
	assert.Less(t, used, float64(heldBytes+64<<20), "held uses its 1Gi and a context")
	waitValue(`vgpu_dra_claim_memory_limit_bytes`, claimOf("held"), "held's limit", func(v float64) bool { return v == float64(2*gib) })

	book := cookbook(t)
	require.Len(t, book, 10, "the spec covers every cookbook query; a new one needs its check here")
	check := func(title string, labels map[string]string, ok func(float64) bool) float64 {
		t.Helper()
		q, found := book[title]
		require.True(t, found, "cookbook query %q", title)
		return waitValue(q, labels, title, ok)
	}
	fullUsed := waitValue(`vgpu_dra_claim_memory_used_bytes`, claimOf("full"), "full's memory use", func(v float64) bool { return v >= fullBytes })
	check("Claims close to their memory limit (over 90 %)", claimOf("full"), func(v float64) bool {
		return math.Abs(v-fullUsed/float64(gib)) < 1e-9
	})
	nsUsed := 0.0
	for _, name := range []string{"held", "full", "busy"} {
		samples, err := f.promQuery(`vgpu_dra_claim_memory_used_bytes`)
		require.NoError(t, err)
		s, _ := findSample(samples, claimOf(name))
		nsUsed += s.Value
	}
	check("Memory a namespace uses on GPUs, in GiB", map[string]string{"namespace": f.ns}, func(v float64) bool {
		return math.Abs(v-nsUsed/float64(gib)) < 1e-6
	})
	// rate() over the query's 5m window divides by the whole window, so the
	// share reaches 0.2 only once busy has been throttled for over a minute
	// (about 90 % of wall time at a 10-core limit): wait up to 3 minutes.
	throttled, found := book["Claims held back by their SM limit: share of wall time spent throttled"]
	require.True(t, found, "cookbook query for throttled claims")
	waitValueFor(throttled, claimOf("busy"), "busy held back by its SM limit", 3*time.Minute, func(v float64) bool { return v > 0.2 && v <= 1.05 })
	check("Claims using less than a tenth of the SM share they reserved (over-provisioned)", claimOf("held"), func(v float64) bool { return v == 0 })
	check("Kernel launch rate per pod", map[string]string{"namespace": f.ns, "pod": "busy"}, func(v float64) bool { return v > 0 })
	// The limiter's error is the achieved share minus the limit, in points,
	// for the claim that launched kernels under its 10-core limit.
	check("The limiter's error per claim and GPU, in points", claimOf("busy"), func(v float64) bool {
		samples, err := f.promQuery(`vgpu_dra_claim_sm_achieved_ratio`)
		if err != nil {
			return false
		}
		s, found := findSample(samples, claimOf("busy"))
		return found && math.Abs(v-100*(s.Value-0.1)) < 2
	})
	// An idle claim publishes no achieved share, so it is never "off".
	off, err := f.promQuery(book["Claims more than 3 points off their SM limit (above it, or below it while throttled)"])
	require.NoError(t, err)
	_, heldOff := findSample(off, claimOf("held"))
	assert.False(t, heldOff, "an idle claim is not off its SM limit")

	// Per-GPU queries: the same arithmetic on the raw series.
	gpu := map[string]string{"node": cluster.node, "device_uuid": uuids["held"]}
	raw := func(q string) float64 {
		t.Helper()
		samples, err := f.promQuery(q)
		require.NoError(t, err)
		s, ok := findSample(samples, gpu)
		require.True(t, ok, "%s for %v", q, gpu)
		return s.Value
	}
	prepared, nvmlUsed := raw(`vgpu_dra_gpu_prepared_memory_bytes`), raw(`vgpu_dra_gpu_memory_used_bytes`)
	assert.GreaterOrEqual(t, prepared, float64(2*gib), "held's 2Gi is prepared on its GPU")
	check("Memory promised vs used per GPU (overcommit headroom)", gpu, func(v float64) bool { return v == prepared-nvmlUsed })
	claimsUsed := raw(`sum by (node, device_uuid) (vgpu_dra_claim_memory_used_bytes)`)
	check("Memory used on a GPU outside any claim (processes not under libvgpu)", gpu, func(v float64) bool { return v == nvmlUsed-claimsUsed })
	// No region broke: the query returns nothing (or only zeros filtered out by > 0).
	errs, err := f.promQuery(book["Broken or vanished regions in the last 10 minutes"])
	require.NoError(t, err)
	assert.Empty(t, errs, "no region errors while the spec ran")

	// The controller's allocation metrics agree with the grants.
	waitValue(`vgpu_dra_claim_memory_granted_bytes`, map[string]string{"namespace": f.ns, "claim": claims["held"]}, "held's grant", func(v float64) bool { return v == float64(2*gib) })

	f.checkDashboard(uuids, claims)
}

// checkDashboard evaluates every panel query of the Grafana dashboard with
// its variables set to this spec's node and namespace.
func (f *framework) checkDashboard(uuids, claims map[string]string) {
	t := f.t
	data, err := os.ReadFile(filepath.Join("..", "..", "deployments", "grafana", "vgpu-dra-dashboard.json"))
	require.NoError(t, err)
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	require.NoError(t, json.Unmarshal(data, &dash))
	vars := strings.NewReplacer("$node", regexp.QuoteMeta(cluster.node), "$namespace", f.ns, "$__rate_interval", "1m")
	held := map[string]string{"namespace": f.ns, "claim": claims["held"], "device_uuid": uuids["held"]}
	gpu := map[string]string{"node": cluster.node, "device_uuid": uuids["held"]}
	// What some panels must show for the spec's pods, by query.
	expect := map[string]struct {
		labels map[string]string
		ok     func(float64) bool
	}{
		`vgpu_dra_claim_memory_used_bytes{node=~"$node", namespace=~"$namespace"}`:    {held, func(v float64) bool { return v >= float64(gib) }},
		`vgpu_dra_claim_sm_limit_ratio{node=~"$node", namespace=~"$namespace"}`:       {held, func(v float64) bool { return v == 0.2 }},
		`vgpu_dra_claim_processes{node=~"$node", namespace=~"$namespace"}`:            {held, func(v float64) bool { return v == 1 }},
		`vgpu_dra_claim_sm_utilization_ratio{node=~"$node", namespace=~"$namespace"}`: {held, func(v float64) bool { return v == 0 }},
		`vgpu_dra_gpu_prepared_claims{node=~"$node"}`:                                 {gpu, func(v float64) bool { return v >= 1 }},
	}
	for _, p := range dash.Panels {
		for _, target := range p.Targets {
			q := vars.Replace(target.Expr)
			var samples []promSample
			f.poll(fmt.Sprintf("panel %q: %s returns a series", p.Title, q), time.Minute, func() (bool, error) {
				var err error
				samples, err = f.promQuery(q)
				if err != nil {
					return false, err
				}
				// Series that exist only once something happened: a counter
				// without region errors (nothing broke), the burst of claims
				// that may burst and reclaims (none in this spec's namespace;
				// the burst spec checks those). The query must still run.
				for _, m := range []string{"vgpu_dra_monitor_region_errors_total", "vgpu_dra_claim_memory_burst_bytes", "vgpu_dra_gpu_memory_reclaims_total"} {
					if strings.Contains(q, m) {
						return true, nil
					}
				}
				return len(samples) > 0, nil
			})
			if e, ok := expect[target.Expr]; ok {
				s, found := findSample(samples, e.labels)
				assert.True(t, found && e.ok(s.Value), "panel %q: %s for %v = %v", p.Title, q, e.labels, s.Value)
			}
			for _, s := range samples {
				assert.False(t, math.IsNaN(s.Value), "panel %q: %s: NaN for %v", p.Title, q, s.Labels)
			}
		}
	}
}

// probeRun starts cuda-probe with args in a container until stopped.
func (f *framework) probeRun(pod, container string, args ...string) holder {
	f.t.Helper()
	ctx, cancel := context.WithCancel(f.ctx)
	cmd := exec.CommandContext(ctx, cluster.kubectl, append([]string{"--kubeconfig=" + cluster.kubeconfig,
		"exec", "-n", f.ns, pod, "-c", container, "--", "cuda-probe"}, args...)...)
	require.NoError(f.t, cmd.Start(), "start cuda-probe %s in %s/%s", strings.Join(args, " "), pod, container)
	return holder{cmd: cmd, cancel: cancel}
}
