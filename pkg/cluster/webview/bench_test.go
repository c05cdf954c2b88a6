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
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
		snap.Pods = append(snap.Pods, *p)
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

// BenchmarkPage1000Nodes serves the page of that model: the nodes
// collapsed to their summary lines.
func BenchmarkPage1000Nodes(b *testing.B) {
	h := NewHandler(fixed{Build(fleet(1000, 10000))}, HandlerOptions{})
	b.ReportAllocs()
	size := 0
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://127.0.0.1/", nil))
		size = rec.Body.Len()
	}
	b.ReportMetric(float64(size), "page-bytes")
}
