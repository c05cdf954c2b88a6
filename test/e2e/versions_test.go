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
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
)

// gateOff reports whether the cluster was started with the feature gate
// set to false (cluster.sh env exports the gates every component got).
func gateOff(gate string) bool {
	for _, g := range strings.Split(cluster.featureGates, ",") {
		if strings.TrimSpace(g) == gate+"=false" {
			return true
		}
	}
	return false
}

// TestMissingConsumableCapacityGateIsReported: on a cluster whose
// components run without DRAConsumableCapacity (the version matrix's 1.35
// row without the gate), the API server drops the GPUs' sharing fields.
// Both daemons say so: the kubelet plugin with a Warning Event on its node,
// its log and vgpu_dra_api_feature_missing, the controller with a Warning
// Event on its pod; the GPUs are published all the same and stored
// exclusive.
func TestMissingConsumableCapacityGateIsReported(t *testing.T) {
	const gate = "DRAConsumableCapacity"
	if !gateOff(gate) {
		t.Skipf("needs a cluster started with %s=false (Kubernetes %s runs with %s); the version matrix starts one (make e2e-matrix)",
			gate, cluster.k8sVersion, cluster.featureGates)
	}
	f := newFramework(t)
	want := "feature gate " + gate + " is off on kube-apiserver"

	ev := f.waitNodeEvent(cluster.node, "FeatureGateMissing", 2*time.Minute)
	t.Logf("the plugin's Event on node %s: %s", cluster.node, ev.Message)
	assert.Equal(t, corev1.EventTypeWarning, ev.Type)
	assert.Contains(t, ev.Message, want)
	assert.Contains(t, ev.Message, "allowMultipleAllocations")

	cmd := exec.CommandContext(f.ctx, cluster.driverSh, "logs", "400")
	cmd.Env = append(os.Environ(), "E2E_DRIVER_NODE="+cluster.node)
	logs, err := cmd.CombinedOutput()
	require.NoError(t, err, "plugin log: %s", logs)
	assert.Contains(t, string(logs), want, "the plugin's log says which gate is off")

	page, err := scrapeAt(cluster.pluginHTTP)
	require.NoError(t, err)
	assert.Equal(t, 1.0, metricSum(page, "vgpu_dra_api_feature_missing", `feature_gate="`+gate+`"`))

	leader, _ := f.controllerLeader("")
	ev = f.waitEventIn(driverNamespace, fields.Set{"involvedObject.kind": "Pod", "involvedObject.name": leader.Name, "reason": "FeatureGateMissing"},
		"a FeatureGateMissing Event on pod "+leader.Name, 2*time.Minute)
	t.Logf("the controller's Event on pod %s: %s", leader.Name, ev.Message)
	assert.Equal(t, corev1.EventTypeWarning, ev.Type)
	assert.Contains(t, ev.Message, want)

	// What the driver does instead: its GPUs are there, each stored exclusive.
	gpus := f.nodeGPUs()
	require.NotEmpty(t, gpus, "the plugin still publishes its GPUs")
	for name, d := range gpus {
		assert.Nil(t, d.AllowMultipleAllocations, "GPU %s is stored exclusive", name)
	}
}
