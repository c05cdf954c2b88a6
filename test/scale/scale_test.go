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

package scale

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/names"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/devices"
)

func TestPercentile(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- { // unsorted on purpose
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	assert.Equal(t, 50*time.Millisecond, Percentile(ds, 50))
	assert.Equal(t, 99*time.Millisecond, Percentile(ds, 99))
	assert.Equal(t, 100*time.Millisecond, Percentile(ds, 100))
	assert.Equal(t, time.Duration(0), Percentile(nil, 99))
	assert.Equal(t, 7*time.Second, Percentile([]time.Duration{7 * time.Second}, 50))
	assert.Equal(t, 100*time.Millisecond, ds[0], "the input is not reordered")
}

func TestParseProc(t *testing.T) {
	status := "Name:\tkube-scheduler\nVmPeak:\t 900000 kB\nVmHWM:\t  204800 kB\nVmRSS:\t  102400 kB\n"
	// Command names may contain spaces and parentheses.
	stat := "4242 (kube sched (x)) S 1 4242 4242 0 -1 4194560 1 0 0 0 1234 566 0 0 20 0 12 0"
	ps, err := ParseProc(status, stat)
	require.NoError(t, err)
	assert.Equal(t, int64(200<<20), ps.PeakRSS)
	assert.Equal(t, 18*time.Second, ps.CPU, "(1234+566) ticks of 1/100 s")

	_, err = ParseProc("Name:\tx\n", stat)
	assert.ErrorContains(t, err, "no VmHWM")
	_, err = ParseProc("VmHWM:\t12 MB\n", stat)
	assert.ErrorContains(t, err, "VmHWM")
	_, err = ParseProc(status, "4242 (x) S 1 2")
	assert.ErrorContains(t, err, "fields after the command name")
}

func TestRequestCount(t *testing.T) {
	metrics := `# HELP apiserver_request_total Counter of apiserver requests
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",component="apiserver",resource="pods",verb="GET"} 10
apiserver_request_total{code="201",component="apiserver",resource="pods",verb="POST"} 2.5e+03
apiserver_request_duration_seconds_count{verb="GET"} 99999
`
	n, err := RequestCount(strings.NewReader(metrics))
	require.NoError(t, err)
	assert.Equal(t, int64(2510), n, "only apiserver_request_total counts")

	_, err = RequestCount(strings.NewReader("process_cpu_seconds_total 3\n"))
	assert.ErrorContains(t, err, "no apiserver_request_total")
	_, err = RequestCount(strings.NewReader(`apiserver_request_total{code="200"} x` + "\n"))
	assert.Error(t, err)
}

func TestShapesAreRepeatableAndFollowTheMix(t *testing.T) {
	a, b := Shapes(10000), Shapes(10000)
	require.Equal(t, a, b, "every arm gets the same sequence")
	count := map[string]int{}
	for _, s := range a {
		count[s.Name]++
	}
	for _, s := range Mix {
		share := float64(count[s.Name]) / 100 // percent of 10,000
		assert.InDelta(t, float64(s.Weight), share, 1.5, "share of %s", s.Name)
	}
}

// slicesFor publishes nodes the way cmd/scale-bench does.
func slicesFor(t *testing.T, nodes int) []resourceapi.ResourceSlice {
	t.Helper()
	var out []resourceapi.ResourceSlice
	for i := range nodes {
		pool := devices.Pool(GPUs(i, 8), SliceOptions(t.TempDir()))
		for _, s := range pool.Slices {
			out = append(out, resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{
				Driver: names.DriverName, Pool: resourceapi.ResourcePool{Name: NodeName(i)}, Devices: s.Devices,
			}})
		}
	}
	return out
}

func TestSimulatedGPUsArePublishedLikeThePlugin(t *testing.T) {
	rs := slicesFor(t, 2)
	require.Len(t, rs, 2)
	require.Len(t, rs[0].Spec.Devices, 8)
	h100, h200 := rs[0].Spec.Devices[0], rs[1].Spec.Devices[7]
	assert.Equal(t, "gpu-0", h100.Name)
	assert.Equal(t, "gpu-7", h200.Name)
	h100Mem, h200Mem := h100.Capacity[names.CapacityMemory].Value, h200.Capacity[names.CapacityMemory].Value
	assert.Equal(t, int64(81559<<20), h100Mem.Value())
	assert.Equal(t, int64(143771<<20), h200Mem.Value())
	assert.Equal(t, "NVIDIA H200", *h200.Attributes[names.AttrProductName].StringValue)
	assert.NotContains(t, h100.Attributes, names.AttrPCIeRoot, "no sysfs: no PCIe root, as on a simulated node")
	assert.NotEqual(t, *h100.Attributes[names.AttrUUID].StringValue, *rs[1].Spec.Devices[0].Attributes[names.AttrUUID].StringValue)
}

func allocated(name, pool, device string, memory, cores string) resourceapi.ResourceClaim {
	r := resourceapi.DeviceRequestAllocationResult{Request: "gpu", Driver: names.DriverName, Pool: pool, Device: device}
	if memory != "" {
		r.ConsumedCapacity = map[resourceapi.QualifiedName]resource.Quantity{
			names.CapacityMemory: resource.MustParse(memory),
			names.CapacityCores:  resource.MustParse(cores),
		}
	}
	return resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "scale", Name: name},
		Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{
			Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{r}},
		}},
	}
}

func TestPackCountsUsedGPUsAndFreeMemoryOnPartialOnes(t *testing.T) {
	rs := slicesFor(t, 2)
	n0, n1 := NodeName(0), NodeName(1)
	claims := []resourceapi.ResourceClaim{
		allocated("a", n0, "gpu-0", "40Gi", "60"),
		allocated("b", n0, "gpu-0", "10Gi", "30"),
		allocated("c", n1, "gpu-3", "", ""), // no consumed capacity: the whole GPU
		{ObjectMeta: metav1.ObjectMeta{Name: "pending"}},
	}
	p, problems := Pack(names.DriverName, rs, claims)
	assert.Empty(t, problems)
	assert.Equal(t, Packing{GPUs: 16, Used: 2, Nodes: 2, Allocations: 3, FreeOnPartial: (81559 - 50*1024) << 20}, p)
}

func TestPackReportsGPUsOverCapacity(t *testing.T) {
	rs := slicesFor(t, 1)
	n0 := NodeName(0)
	_, problems := Pack(names.DriverName, rs, []resourceapi.ResourceClaim{
		allocated("a", n0, "gpu-1", "40Gi", "60"),
		allocated("b", n0, "gpu-1", "40Gi", "30"),
		allocated("c", n0, "gpu-1", "1Gi", "5"), // memory: 81Gi > 81559Mi
		allocated("d", n0, "gpu-2", "1Gi", "60"),
		allocated("e", n0, "gpu-2", "1Gi", "41"), // cores: 101
		allocated("f", n0, "gpu-9", "1Gi", "1"),  // not published
	})
	require.Len(t, problems, 3)
	assert.Contains(t, problems[0], "gpu-9, which is not published")
	assert.Contains(t, problems[1], "gpu-node-0000/gpu-1 is over capacity: 3 allocations consume memory 86973087744 of 85520809984 bytes")
	assert.Contains(t, problems[2], "gpu-node-0000/gpu-2 is over capacity: 2 allocations consume memory 2147483648 of 85520809984 bytes, cores 101 of 100")
}

func TestReportPrintsRatiosAndGoalsAndFailsOnProblems(t *testing.T) {
	arm := func(name string, pods float64, used int) *Arm {
		return &Arm{
			Name: name, Claims: name != ArmBaseline,
			Steady:     Phase{Pods: 100, Bound: 100, Rate: 50, Throughput: 50, P50: 30 * time.Millisecond, P99: 3 * time.Second},
			Burst:      Phase{Pods: 900, Bound: 900, Throughput: pods, P99: time.Second},
			Scheduler:  Usage{PeakRSS: 300 << 20, CPU: 12 * time.Second},
			Controller: &Usage{PeakRSS: 100 << 20},
			Packing:    &Packing{GPUs: 80, Used: used},
		}
	}
	var out bytes.Buffer
	failures, err := Report(&out, []*Arm{arm(ArmBaseline, 100, 0), arm(ArmScheduler, 40, 30), arm(ArmBinpack, 36, 20), arm(ArmSpread, 20, 25)})
	require.NoError(t, err)
	assert.Empty(t, failures)
	text := out.String()
	assert.Contains(t, text, "burst pods/s (b)/(a):              0.40   goal >= 0.5: MISSED")
	assert.Contains(t, text, "burst pods/s (c binpack)/(b):      0.90   goal >= 0.8: met")
	assert.Contains(t, text, "burst pods/s (c spread)/(b):       0.50   goal >= 0.8: MISSED")
	assert.Contains(t, text, "3000 ms   goal <= 2s: MISSED")
	assert.Contains(t, text, "binpack uses 20 GPUs, spread 25")
	assert.Contains(t, text, "20/80")

	bad := []*Arm{arm(ArmBinpack, 36, 30), arm(ArmSpread, 20, 25)}
	bad[1].Problems = []string{"GPU x is over capacity"}
	bad[1].Pending = map[string]int{"Unschedulable": 3}
	out.Reset()
	failures, err = Report(&out, bad)
	require.NoError(t, err)
	assert.Equal(t, []string{"c-spread: GPU x is over capacity", "binpack uses 30 GPUs, more than spread's 25"}, failures)
	assert.Contains(t, out.String(), "c-spread: pods left Pending: 3 Unschedulable")
}

func TestPodsAndTemplates(t *testing.T) {
	s := Mix[1]
	tmpl := Template("scale", s)
	req := tmpl.Spec.Spec.Devices.Requests[0].Exactly
	assert.Equal(t, DeviceClass, req.DeviceClassName)
	mem, cores := req.Capacity.Requests[names.CapacityMemory], req.Capacity.Requests[names.CapacityCores]
	assert.Equal(t, int64(4<<30), mem.Value())
	assert.Equal(t, int64(10), cores.Value())
	assert.Nil(t, Template("scale", Mix[4]).Spec.Spec.Devices.Requests[0].Exactly.Capacity, "a whole GPU asks for no capacity")

	withClaim, plain := Pod("scale", "p", ArmScheduler, s, true), Pod("scale", "p", ArmBaseline, s, false)
	assert.Equal(t, s.Name, *withClaim.Spec.ResourceClaims[0].ResourceClaimTemplateName)
	assert.Empty(t, plain.Spec.ResourceClaims)
	assert.Equal(t, plain.Spec.Tolerations, withClaim.Spec.Tolerations)
	assert.Equal(t, KWOKValue, Node(3).Annotations[KWOKAnnotation])
	assert.Equal(t, Node(3).Spec.Taints[0].Key, plain.Spec.Tolerations[0].Key, "the pods tolerate the nodes' taint")
}
