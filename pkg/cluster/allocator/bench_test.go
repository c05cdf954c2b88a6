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

package allocator

import (
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/klog/v2"
)

const (
	benchNodes  = 1000
	benchGPUs   = 8
	benchClaims = 10000
)

// benchClaimSet is the workload: mostly one slice of one GPU, every tenth
// claim two GPUs.
func benchClaimSet() []*resourceapi.ResourceClaim {
	out := make([]*resourceapi.ResourceClaim, benchClaims)
	for i := range out {
		if i%10 == 9 {
			out[i] = gpuClaim(fmt.Sprintf("c%d", i), 2, "8Gi", "20")
		} else {
			out[i] = gpuClaim(fmt.Sprintf("c%d", i), 1, "4Gi", "10")
		}
	}
	return out
}

// benchCluster publishes benchNodes nodes with benchGPUs GPUs each.
func benchCluster(b *testing.B) ([]*resourceapi.ResourceSlice, []*corev1.Node) {
	var sliceList []*resourceapi.ResourceSlice
	var nodes []*corev1.Node
	for i := range benchNodes {
		name := fmt.Sprintf("node-%04d", i)
		sliceList = append(sliceList, gpuSlice(b, name, benchGPUs))
		nodes = append(nodes, testNode(name))
	}
	return sliceList, nodes
}

// BenchmarkAllocate allocates 10,000 claims on 1000 nodes with 8 GPUs each,
// once with the plain structured allocator the way kube-scheduler uses it
// (a new allocator per pod over the current state, nodes tried from where
// the previous pod's search stopped, first node that fits wins) and once
// with the policy allocator, and reports claims per second, the p50/p99
// latency per claim and the ratio of time per claim. Run with
// -benchtime=1x: one iteration is the whole workload.
func BenchmarkAllocate(b *testing.B) {
	ctx := klog.NewContext(b.Context(), logr.Discard())
	sliceList, nodes := benchCluster(b)
	for b.Loop() {
		claims := benchClaimSet()
		plain := make([]time.Duration, 0, benchClaims)
		state := structured.AllocatedState{
			AllocatedDevices:         sets.New[structured.DeviceID](),
			AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
			AggregatedCapacity:       structured.NewConsumedCapacityCollection(),
		}
		celCache := cel.NewCache(100, cel.Features{EnableConsumableCapacity: true})
		next := 0
		for _, claim := range claims {
			start := time.Now()
			alloc, err := structured.NewAllocator(ctx, Features, state, testClasses, sliceList, celCache)
			require.NoError(b, err)
			var result *resourceapi.AllocationResult
			for tried := 0; tried < len(nodes) && result == nil; tried++ {
				node := nodes[(next+tried)%len(nodes)]
				res, err := alloc.Allocate(ctx, node, []*resourceapi.ResourceClaim{claim})
				require.NoError(b, err)
				if res != nil {
					result = &res[0]
					next = (next + tried) % len(nodes)
				}
			}
			require.NotNil(b, result, "claim %s", claim.Name)
			for _, r := range result.Devices.Results {
				id := structured.MakeDeviceID(r.Driver, r.Pool, r.Device)
				state.AllocatedSharedDeviceIDs.Insert(structured.MakeSharedDeviceID(id, r.ShareID))
				state.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(id, r.ConsumedCapacity))
			}
			plain = append(plain, time.Since(start))
		}

		claims = benchClaimSet()
		policy := make([]time.Duration, 0, benchClaims)
		a := newTestAllocator(&NodeFit{})
		a.SetSlices(sliceList)
		for i, claim := range claims {
			pol := Policies{Node: Binpack, GPU: Spread}
			if i%2 == 1 {
				pol = Policies{Node: Spread, GPU: Binpack}
			}
			start := time.Now()
			_, err := a.Allocate(ctx, Request{Pod: testPod(claim.Name, claim), Claims: []*resourceapi.ResourceClaim{claim}, Nodes: nodes, Policies: pol})
			require.NoError(b, err)
			policy = append(policy, time.Since(start))
		}

		plainRate, policyRate := rate(plain), rate(policy)
		b.ReportMetric(plainRate, "plain-claims/s")
		b.ReportMetric(policyRate, "policy-claims/s")
		b.ReportMetric(plainRate/policyRate, "time-ratio")
		b.ReportMetric(percentile(plain, 0.50), "plain-p50-µs")
		b.ReportMetric(percentile(plain, 0.99), "plain-p99-µs")
		b.ReportMetric(percentile(policy, 0.50), "policy-p50-µs")
		b.ReportMetric(percentile(policy, 0.99), "policy-p99-µs")
	}
}

func rate(d []time.Duration) float64 {
	var total time.Duration
	for _, x := range d {
		total += x
	}
	return float64(len(d)) / total.Seconds()
}

func percentile(d []time.Duration, p float64) float64 {
	s := slices.Clone(d)
	slices.Sort(s)
	return float64(s[int(p*float64(len(s)-1))].Microseconds())
}

// BenchmarkScaleMix makes 3,000 decisions for single-claim pods with the
// mix of `make scale-bench` (1Gi/5, 4Gi/10, 10Gi/30, 40Gi/60 and whole
// GPUs) on 1000 nodes with 8 GPUs each, with binpack and with spread, and
// reports per decision the structured allocator's runs (nodes tried) and
// the memory allocated, and binpack's time per decision over spread's. Run
// with -benchtime=1x.
func BenchmarkScaleMix(b *testing.B) {
	ctx := klog.NewContext(b.Context(), logr.Discard())
	sliceList, nodes := benchCluster(b)
	shapes := [][2]string{{"1Gi", "5"}, {"4Gi", "10"}, {"10Gi", "30"}, {"1Gi", "5"}, {"", ""},
		{"4Gi", "10"}, {"40Gi", "60"}, {"1Gi", "5"}, {"10Gi", "30"}, {"4Gi", "10"}}
	const decisions = 3000
	for b.Loop() {
		perDecision := map[Policy]time.Duration{}
		for _, pol := range []Policy{Binpack, Spread} {
			a := newTestAllocator(&NodeFit{})
			a.SetSlices(sliceList)
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			allocated := ms.TotalAlloc
			tried := 0
			start := time.Now()
			for i := range decisions {
				s := shapes[i%len(shapes)]
				claim := gpuClaim(fmt.Sprintf("c%d", i), 1, s[0], s[1])
				d, err := a.Allocate(ctx, Request{Pod: testPod(claim.Name, claim), Claims: []*resourceapi.ResourceClaim{claim},
					Nodes: nodes, Policies: Policies{Node: pol, GPU: pol}})
				require.NoError(b, err)
				tried += d.NodesTried
			}
			perDecision[pol] = time.Since(start) / decisions
			runtime.ReadMemStats(&ms)
			b.ReportMetric(float64(tried)/decisions, string(pol)+"-nodes-tried/decision")
			b.ReportMetric(float64(ms.TotalAlloc-allocated)/decisions/1024, string(pol)+"-KiB/decision")
			b.ReportMetric(float64(perDecision[pol].Microseconds()), string(pol)+"-µs/decision")
		}
		b.ReportMetric(float64(perDecision[Binpack])/float64(perDecision[Spread]), "binpack/spread-time")
	}
}
