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

package webview

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/cluster/inspect"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/names"
)

// fleet is the scale benchmark's shape: nodes with 8 GPUs each and
// claims of 4Gi spread over them, all allocated.
func fleet(nodes, claims int) *inspect.Snapshot {
	snap := &inspect.Snapshot{}
	for n := range nodes {
		name := fmt.Sprintf("kwok-node-%04d", n)
		snap.Nodes = append(snap.Nodes, *readyNode(name))
		s := resourceapi.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-vgpu"},
			Spec: resourceapi.ResourceSliceSpec{Driver: names.DriverName, NodeName: ptr.To(name),
				Pool: resourceapi.ResourcePool{Name: name, Generation: 1, ResourceSliceCount: 1}},
		}
		for g := range 8 {
			s.Spec.Devices = append(s.Spec.Devices, plainGPU(g))
		}
		snap.Slices = append(snap.Slices, s)
	}
	for i := range claims {
		node := fmt.Sprintf("kwok-node-%04d", i%nodes)
		c := allocate(vgpuClaim("team", fmt.Sprintf("claim-%05d", i), "vgpu.dra.dev", "4Gi"), fmt.Sprintf("pod-%05d", i),
			node, fmt.Sprintf("gpu-%d", (i/nodes)%8), "4Gi", "10", map[string]any{"memoryUsed": "1Gi"})
		snap.Claims = append(snap.Claims, *c)
		p := pod("team", fmt.Sprintf("pod-%05d", i), c.Name, node)
		snap.Pods = append(snap.Pods, p)
	}
	snap.Classes = []resourceapi.DeviceClass{*class("vgpu.dra.dev", `device.driver == "vgpu.dra.dev"`)}
	return snap
}

// BenchmarkModel1000Nodes is one rebuild of the model at the scale
// benchmark's size: 1,000 nodes of 8 GPUs, 10,000 claims.
func BenchmarkModel1000Nodes(b *testing.B) {
	snap := fleet(1000, 10000)
	b.ReportAllocs()
	for b.Loop() {
		Build(snap)
	}
}

// withPending adds n Pending pods, each with a claim larger than any GPU.
func withPending(snap *inspect.Snapshot, n int) *inspect.Snapshot {
	for i := range n {
		c := vgpuClaim("wait", fmt.Sprintf("big-%04d", i), "vgpu.dra.dev", "200Gi")
		snap.Claims = append(snap.Claims, *c)
		snap.Pods = append(snap.Pods, pod("wait", fmt.Sprintf("big-%04d", i), c.Name, ""))
	}
	return snap
}

// BenchmarkPage1000Nodes serves the page of that model with 1,000
// Pending pods: the nodes collapsed to their summary lines, the first
// Pending pods open, the others counted.
func BenchmarkPage1000Nodes(b *testing.B) {
	h := NewHandler(fixed{Build(withPending(fleet(1000, 10000), 1000))}, HandlerOptions{})
	b.ReportAllocs()
	size, gzipped := 0, 0
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://127.0.0.1/", nil))
		size = rec.Body.Len()
		req := httptest.NewRequest(http.MethodGet, "http://127.0.0.1/", nil)
		req.Header.Set("Accept-Encoding", "gzip")
		rec = httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		gzipped = rec.Body.Len()
	}
	b.ReportMetric(float64(size), "page-bytes")
	b.ReportMetric(float64(gzipped), "gzip-bytes")
}

// BenchmarkExplain1000Nodes is one Pending pod's explanation at that
// size, what kubectl vgpu ui works out in the background for each pod a
// page shows open.
func BenchmarkExplain1000Nodes(b *testing.B) {
	snap := withPending(fleet(1000, 10000), 1)
	for b.Loop() {
		if _, err := inspect.Why(b.Context(), snap, "wait", "big-0000"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSourcePeakHeap1000Nodes lists a fake clientset of the scale
// benchmark's size (1,000 nodes of 8 GPUs, 10,000 claims and pods) into
// a Source until its first model with everything listed, and reports
// the peak of the heap's objects above what the clientset itself holds
// (sampled every millisecond), and the live heap with the model after a
// GC: what kubectl vgpu ui's informers and model cost in memory.
func BenchmarkSourcePeakHeap1000Nodes(b *testing.B) {
	snap := fleet(1000, 10000)
	var objs []k8sruntime.Object
	for i := range snap.Nodes {
		objs = append(objs, &snap.Nodes[i], &snap.Slices[i])
	}
	for i := range snap.Claims {
		objs = append(objs, &snap.Claims[i], snap.Pods[i])
	}
	objs = append(objs, &snap.Classes[0])
	var peak, live uint64
	for b.Loop() {
		client := fake.NewClientset(objs...)
		runtime.GC()
		base := heapObjects()
		sampled := make(chan uint64)
		stop := make(chan struct{})
		go func() {
			top := uint64(0)
			tick := time.NewTicker(time.Millisecond)
			defer tick.Stop()
			for {
				top = max(top, heapObjects())
				select {
				case <-stop:
					sampled <- top
					return
				case <-tick.C:
				}
			}
		}()
		ctx, cancel := context.WithCancel(b.Context())
		s := NewSource(client, SourceOptions{Interval: time.Hour})
		done := make(chan error, 1)
		go func() { done <- s.Run(ctx) }()
		for {
			m, _, updated := s.Current()
			if m != nil && !m.Listing {
				break
			}
			<-updated
		}
		close(stop)
		peak = max(peak, <-sampled-base)
		runtime.GC()
		live = heapObjects() - base
		cancel()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
	b.ReportMetric(float64(live)/(1<<20), "live-heap-MiB")
}

// heapObjects is the memory of the heap's objects, live or not yet
// collected.
func heapObjects() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}
