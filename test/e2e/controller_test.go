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
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestHAMiPodRunsUnderTranslatedLimits: a pod written for HAMi runs on the
// DRA driver in an opted-in namespace, with the limits it asked for.
func TestHAMiPodRunsUnderTranslatedLimits(t *testing.T) {
	needsChart(t)
	f := newFramework(t)
	f.setNamespaceMeta(map[string]string{"vgpu.dra.dev/hami-compat": "enabled"}, nil)
	gpus := publishedGPUs(t, f)
	require.NotEmpty(t, gpus, "published GPUs")
	product := gpus[0].Attributes["productName"].StringValue
	require.NotNil(t, product, "device %s: productName", gpus[0].Name)

	hami := podSpec{
		name:        "hami",
		annotations: map[string]string{"nvidia.com/use-gputype": *product},
		limits: corev1.ResourceList{
			"nvidia.com/gpu":      resource.MustParse("1"),
			"nvidia.com/gpumem":   resource.MustParse("3000"),
			"nvidia.com/gpucores": resource.MustParse("30"),
		},
	}
	f.admitted(hami, "translated by the HAMi webhook", func(p *corev1.Pod) bool { return len(p.Spec.ResourceClaims) > 0 })
	created := f.createPod(hami)
	require.Len(t, created.Spec.ResourceClaims, 1, "one claim for the one HAMi container")
	entry := created.Spec.ResourceClaims[0].Name
	for name := range created.Spec.Containers[0].Resources.Limits {
		assert.NotContains(t, []corev1.ResourceName{"nvidia.com/gpu", "nvidia.com/gpumem", "nvidia.com/gpucores"},
			name, "HAMi resources are removed from the limits")
	}

	pod := f.waitRunning(hami.name)
	claim := f.claimOf(pod, entry)
	checkContainer(t, f, hami.name, "c0", claim, 3000*mib, 30)

	f.deletePodAndWait(hami.name)
	f.poll("the HAMi pod's claims deleted with it", deleteTimeout, func() (bool, error) {
		claims, err := f.c.ResourceV1().ResourceClaims(f.ns).List(f.ctx, metav1.ListOptions{})
		return err == nil && len(claims.Items) == 0, err
	})
	f.waitClaimFilesGone(string(claim.UID))
}

// TestNamespaceQuotaRefusesTheClaimOverIt: the namespace's GPU memory quota
// admits claims up to it and refuses the one that would exceed it.
func TestNamespaceQuotaRefusesTheClaimOverIt(t *testing.T) {
	needsChart(t)
	f := newFramework(t)
	const annotation = "quota.vgpu.dra.dev/memory"
	f.setNamespaceMeta(nil, map[string]string{annotation: "5Gi"})
	// The controller sees the annotation through its informer, a moment later.
	f.poll("the quota in force (a dry-run 6Gi claim refused)", time.Minute, func() (bool, error) {
		return f.dryRunClaim("probe", claimRequest{memory: "6Gi"}) != nil, nil
	})

	require.NoError(t, f.createClaim("first", claimRequest{memory: "4Gi", cores: "10"}), "4Gi of a 5Gi quota")
	err := f.createClaim("second", claimRequest{memory: "2Gi", cores: "10"})
	require.Error(t, err, "2Gi more exceeds the 5Gi quota")
	t.Logf("refusal: %v", err)
	assert.Contains(t, err.Error(), annotation, "the refusal names the quota")
	assert.NoError(t, f.createClaim("third", claimRequest{memory: "1Gi", cores: "10"}), "what is left of the quota is still admitted")
}
