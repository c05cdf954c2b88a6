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
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
)

// pluginImages lists the images of the plugin containers of the chart's
// kubelet plugin pods.
func pluginImages(t *testing.T) []string {
	t.Helper()
	out, err := kubectl(t.Context(), "get", "pods", "-n", "vgpu-dra",
		"-l", "app.kubernetes.io/component=kubelet-plugin",
		"-o", `jsonpath={range .items[*]}{.spec.containers[?(@.name=="plugin")].image}{"\n"}{end}`)
	require.NoError(t, err, "list the plugin pods")
	return strings.Fields(out)
}

func TestHelmUpgradeKeepsRunningPods(t *testing.T) {
	needsChart(t)
	f := newFramework(t)
	f.createClaimTemplate("small", claimRequest{memory: "2Gi", cores: "10"})
	f.createPod(podSpec{name: "through-upgrade", claims: []podClaim{{name: "gpu", template: "small"}}})
	pod := f.waitRunning("through-upgrade")
	uid := string(f.claimOf(pod, "gpu").UID)
	require.NotEmpty(t, claimFiles(uid), "claim %s is prepared", uid)

	// A tag no earlier run used, so that the upgrade always rolls the pods.
	tag := "e2e-up-" + rand.String(5)
	f.driver("upgrade", tag)
	t.Logf("upgraded the release to image tag %s", tag)
	images := pluginImages(t)
	require.Len(t, images, len(cluster.nodes), "one plugin pod per node")
	for _, image := range images {
		assert.True(t, strings.HasSuffix(image, ":"+tag), "every plugin runs the new image, got %s", image)
	}

	p, err := f.c.CoreV1().Pods(f.ns).Get(f.ctx, pod.Name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, corev1.PodRunning, p.Status.Phase, "the vGPU pod keeps running through the upgrade")
	assert.Equal(t, int32(0), p.Status.ContainerStatuses[0].RestartCount, "its container was not restarted")
	out, err := f.execIn(pod.Name, "c0", "cat", "/usr/local/vgpu/claims/"+uid+"/config")
	require.NoError(t, err, "the running container still has its claim's config")
	assert.Equal(t, uid, parseConfig(out)["claim"])

	// The new plugin instance unprepares what the old one prepared.
	f.deletePodAndWait(pod.Name)
	f.waitClaimFilesGone(uid)
	assert.Empty(t, leakedClaimFiles(t), "no claim directory or CDI spec leaks")
}
