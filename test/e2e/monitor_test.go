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
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// scrape returns the plugin's /metrics page.
func scrape(t *testing.T) string {
	t.Helper()
	resp, err := http.Get("http://" + cluster.pluginHTTP + "/metrics")
	require.NoError(t, err, "scrape the plugin's metrics")
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err, "read the plugin's metrics")
	require.Equal(t, http.StatusOK, resp.StatusCode, "GET /metrics: %s", body)
	return string(body)
}

// sampleValue finds the sample of metric whose labels include all of want
// (name="value" pairs) and returns its value.
func sampleValue(page, metric string, want ...string) (float64, bool) {
	for _, line := range strings.Split(page, "\n") {
		if !strings.HasPrefix(line, metric+"{") {
			continue
		}
		end := strings.LastIndex(line, "}")
		if end < 0 {
			continue
		}
		labels := line[len(metric)+1 : end]
		match := true
		for _, w := range want {
			if !strings.Contains(labels, w) {
				match = false
				break
			}
		}
		if !match {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(line[end+1:]), 64)
		if err == nil {
			return v, true
		}
	}
	return 0, false
}

func TestMonitorReportsUsageInMetricsAndClaimStatus(t *testing.T) {
	require.Contains(t, scrape(t), "vgpu_dra_gpu_memory_total_bytes", "the plugin serves the monitor's metrics")
	f := newFramework(t)
	f.createClaimTemplate("watched", claimRequest{memory: "4Gi", cores: "20"})
	f.createPod(podSpec{name: "watched", claims: []podClaim{{name: "gpu", template: "watched"}}})
	pod := f.waitRunning("watched")
	claim := f.claimOf(pod, "gpu")
	out, err := f.execIn(pod.Name, "c0", "cat", containerClaims+"/"+string(claim.UID)+"/config")
	require.NoError(t, err)
	uuid := parseConfig(out)["device.0.uuid"]

	const held = 3 * gib / 2
	h := f.probeHold(pod.Name, "c0", 0, uuid, held)
	defer h.stop()

	labels := []string{`namespace="` + f.ns + `"`, `claim="` + claim.Name + `"`, `device_uuid="` + uuid + `"`}
	var used float64
	f.poll("vgpu_dra_claim_memory_used_bytes to show cuda-probe's allocation", time.Minute, func() (bool, error) {
		v, ok := sampleValue(scrape(t), "vgpu_dra_claim_memory_used_bytes", labels...)
		used = v
		return ok && v >= float64(held), nil
	})
	limit, ok := sampleValue(scrape(t), "vgpu_dra_claim_memory_limit_bytes", labels...)
	assert.True(t, ok, "vgpu_dra_claim_memory_limit_bytes for the claim")
	assert.Equal(t, float64(4*gib), limit, "memory limit metric")
	t.Logf("vgpu_dra_claim_memory_used_bytes = %.0f", used)

	// The monitor also writes the use into the claim's status.devices.
	f.poll("claim "+claim.Name+" status.devices to show the memory use", 2*time.Minute, func() (bool, error) {
		c, err := f.c.ResourceV1().ResourceClaims(f.ns).Get(f.ctx, claim.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, d := range c.Status.Devices {
			if d.Driver != driverName || d.Data == nil {
				continue
			}
			var data struct {
				MemoryUsed *resource.Quantity `json:"memoryUsed"`
			}
			if err := json.Unmarshal(d.Data.Raw, &data); err != nil {
				return false, fmt.Errorf("decode status.devices data of claim %s: %w", claim.Name, err)
			}
			if data.MemoryUsed != nil && data.MemoryUsed.Value() >= held {
				return true, nil
			}
		}
		return false, nil
	})
	described, err := kubectl(f.ctx, "describe", "resourceclaim", "-n", f.ns, claim.Name)
	require.NoError(t, err)
	t.Logf("$ kubectl describe resourceclaim -n %s %s\n%s", f.ns, claim.Name, described)
	// kubectl describe spells the data's JSON keys out as words.
	want := resource.NewQuantity(held, resource.BinarySI).String()
	assert.Regexp(t, `Memory Used:\s+`+regexp.QuoteMeta(want), described, "kubectl describe resourceclaim shows the use")
}
