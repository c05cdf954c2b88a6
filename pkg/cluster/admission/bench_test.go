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

package admission

import (
	"bytes"
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/cluster/hami"
)

// BenchmarkAdmission measures one admission round trip over HTTP (encode,
// POST, decide, decode) and reports its p50 and p99 latency.
func BenchmarkAdmission(b *testing.B) {
	claim := resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "c", UID: "u"},
		Spec: claimSpec(b, `{devices: {requests: [{name: gpu, exactly: {deviceClassName: vgpu.dra.dev, count: 2, capacity: {requests: {memory: 4Gi, cores: "30"}}}}],
		  constraints: [{requests: [gpu], distinctAttribute: vgpu.dra.dev/uuid}],
		  config: [{opaque: {driver: vgpu.dra.dev, parameters: {`+opaqueHeader+`, priority: high}}}]}}`),
	}
	pod := hamiPod(corev1.ResourceList{
		hami.DefaultCountResource: resource.MustParse("2"), hami.DefaultMemoryResource: resource.MustParse("3000"), hami.DefaultCoresResource: resource.MustParse("30"),
	})
	b.Run("validate-claim", func(b *testing.B) {
		benchmarkAdmission(b, testValidator(&fakeQuota{maxMemory: 1 << 40}).Admit, reviewBody(b, claimKind, admissionv1.Create, "team", claim, false))
	})
	b.Run("mutate-hami-pod", func(b *testing.B) {
		body := reviewBody(b, podKind, admissionv1.Create, "hami", pod, false)
		// Steady state: the template exists and the informer has seen it,
		// as for every pod of a shape after the first.
		first := newPodFixture(b)
		post(b, serve(b, first.mutator.Admit), body)
		created, err := first.client.ResourceV1().ResourceClaimTemplates("hami").List(context.Background(), metav1.ListOptions{})
		require.NoError(b, err)
		require.Len(b, created.Items, 1)
		benchmarkAdmission(b, newPodFixture(b, &created.Items[0]).mutator.Admit, body)
	})
}

func benchmarkAdmission(b *testing.B, admit AdmitFunc, body []byte) {
	srv := serve(b, admit)
	client := srv.Client()
	latencies := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		resp, err := client.Post(srv.URL, "application/json", bytes.NewReader(body))
		require.NoError(b, err)
		var buf bytes.Buffer
		_, err = buf.ReadFrom(resp.Body)
		require.NoError(b, err)
		require.NoError(b, resp.Body.Close())
		require.Equal(b, http.StatusOK, resp.StatusCode)
		latencies = append(latencies, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(latencies)
	pct := func(p float64) float64 {
		return float64(latencies[int(p*float64(len(latencies)-1))].Microseconds())
	}
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
}
