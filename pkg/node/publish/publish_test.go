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

package publish

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiversion "k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/common/apifeatures"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/names"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/devices"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/discovery"
)

// recordingHelper keeps what was published.
type recordingHelper struct {
	mu    sync.Mutex
	pools []resourceslice.Pool
}

func (h *recordingHelper) PublishResources(_ context.Context, r resourceslice.DriverResources) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.pools = append(h.pools, r.Pools["node-a"])
	return nil
}

func (h *recordingHelper) last(t *testing.T) resourceslice.Pool {
	h.mu.Lock()
	defer h.mu.Unlock()
	require.NotEmpty(t, h.pools)
	return h.pools[len(h.pools)-1]
}

// A GPU in MIG mode with two 3g placements and a full 7g one, as NVML
// would describe a small GPU.
func migInfo() discovery.MIGInfo {
	return discovery.MIGInfo{Enabled: true, Profiles: []discovery.MIGProfile{
		{ID: 2, Name: "3g.40gb", Slices: 3, InstanceCount: 2, Multiprocessors: 42, MemoryBytes: 40 << 30,
			Placements: []discovery.MIGPlacement{{Start: 0, Size: 4}, {Start: 4, Size: 4}}},
		{ID: 0, Name: "7g.80gb", Slices: 7, InstanceCount: 1, Multiprocessors: 98, MemoryBytes: 80 << 30,
			Placements: []discovery.MIGPlacement{{Start: 0, Size: 8}}},
	}}
}

func testPublisher(owned map[string][]discovery.MIGInstance, partitionable bool) (*Publisher, *recordingHelper) {
	return testPublisherWith(owned, devices.MIGOptions{PartitionableDevices: partitionable})
}

func testPublisherWith(owned map[string][]discovery.MIGInstance, migOpts devices.MIGOptions) (*Publisher, *recordingHelper) {
	infos := []discovery.Info{
		{UUID: "GPU-00000000-0000-0000-0000-000000000000", Index: 0, ProductName: "NVIDIA H100", MemoryBytes: 80 << 30},
		{UUID: "GPU-11111111-1111-1111-1111-111111111111", Index: 1, ProductName: "NVIDIA H100", MemoryBytes: 80 << 30},
	}
	mig := MIGState{ByUUID: map[string]discovery.MIGInfo{infos[0].UUID: migInfo()}, Enabled: map[string]discovery.MIGInfo{"gpu-0": migInfo()}}
	h := &recordingHelper{}
	reporter, err := apifeatures.NewReporter(prometheus.NewRegistry(), nil, nil)
	if err != nil {
		panic(err)
	}
	return New(h, reporter, "node-a", infos, mig, owned, devices.Options{}, migOpts), h
}

// withEvents gives p a reporter whose Events and metric the test reads.
func withEvents(t *testing.T, p *Publisher) (*record.FakeRecorder, *prometheus.Registry) {
	events := record.NewFakeRecorder(10)
	reg := prometheus.NewRegistry()
	reporter, err := apifeatures.NewReporter(reg, events, NodeRef("node-a"))
	require.NoError(t, err)
	p.reporter = reporter
	return events, reg
}

// storeAsAPIServer creates pool's slices in client as an API server does,
// each passed through keep first.
func storeAsAPIServer(ctx context.Context, t *testing.T, client *fake.Clientset, pool resourceslice.Pool, generation int64, keep func(*resourceapi.ResourceSliceSpec)) {
	for i, s := range pool.Slices {
		slice := &resourceapi.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-a-%d-%d", generation, i)},
			Spec: resourceapi.ResourceSliceSpec{Driver: names.DriverName, NodeName: ptr.To("node-a"),
				Devices: slices.Clone(s.Devices), SharedCounters: s.SharedCounters,
				Pool: resourceapi.ResourcePool{Name: "node-a", Generation: generation, ResourceSliceCount: int64(len(pool.Slices))}},
		}
		if keep != nil {
			keep(&slice.Spec)
		}
		_, err := client.ResourceV1().ResourceSlices().Create(ctx, slice, metav1.CreateOptions{})
		require.NoError(t, err)
	}
}

func deviceNames(p resourceslice.Pool) (names []string, counterSets int) {
	for _, s := range p.Slices {
		counterSets += len(s.SharedCounters)
		for _, d := range s.Devices {
			names = append(names, d.Name)
		}
	}
	return names, counterSets
}

// The GPU in MIG mode gets its counter set and its MIG devices, the plain
// GPU stays as it was; taints of the GPU reach its MIG devices.
func TestPublisherPublishesMIGDevices(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	p, h := testPublisher(nil, true)
	require.NoError(t, p.Publish(ctx, nil))
	got, sets := deviceNames(h.last(t))
	assert.Equal(t, 1, sets)
	assert.ElementsMatch(t, []string{"gpu-0", "gpu-0-mig-3g-40gb-0", "gpu-0-mig-3g-40gb-4", "gpu-0-mig-7g-80gb-0", "gpu-1"}, got)

	taint := devices.TaintPolicy{}.XIDTaint(79, metav1.Now().Time)
	require.NoError(t, p.Publish(ctx, map[string][]resourceapi.DeviceTaint{"gpu-0": {taint}}))
	for _, s := range h.last(t).Slices {
		for _, d := range s.Devices {
			assert.Equal(t, d.Name != "gpu-1", len(d.Taints) == 1, d.Name)
		}
	}
}

// An instance the plugin owns keeps its placement a dynamic device; one it
// does not own is an admin's, published as a fixed device that blocks what
// overlaps it.
func TestPublisherTellsOwnedFromStaticInstances(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	instance := discovery.MIGInstance{ID: 1, ProfileID: 2, Placement: discovery.MIGPlacement{Start: 0, Size: 4}, ComputeInstances: 1}
	withInstance := func(owned map[string][]discovery.MIGInstance) map[string]bool {
		p, h := testPublisher(owned, true)
		info := migInfo()
		info.Instances = []discovery.MIGInstance{instance}
		p.gpus[0].MIG = &info
		require.NoError(t, p.Publish(ctx, nil))
		static := map[string]bool{} // device name: static attribute
		for _, s := range h.last(t).Slices {
			for _, d := range s.Devices {
				a, ok := d.Attributes[names.AttrStatic]
				static[d.Name] = ok && a.BoolValue != nil && *a.BoolValue
			}
		}
		return static
	}
	owned := withInstance(map[string][]discovery.MIGInstance{"GPU-00000000-0000-0000-0000-000000000000": {instance}})
	assert.Equal(t, map[string]bool{"gpu-0": false, "gpu-0-mig-3g-40gb-0": false, "gpu-0-mig-3g-40gb-4": false, "gpu-0-mig-7g-80gb-0": false, "gpu-1": false}, owned)
	admins := withInstance(nil)
	assert.Equal(t, map[string]bool{"gpu-0-mig-3g-40gb-0": true, "gpu-0-mig-3g-40gb-4": false, "gpu-1": false}, admins,
		"an admin's instance is a fixed device; the whole GPU and the 7g cannot be made next to it")
}

// An API server without DRAPartitionableDevices drops the counters; the
// plugin reads its slices back, says so (log, Event on the node, metric)
// and republishes without them.
func TestCheckReadBackRepublishesWithoutCounters(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	for name, keep := range map[string]bool{"kept": true, "dropped": false} {
		t.Run(name, func(t *testing.T) {
			p, h := testPublisher(nil, true)
			events, reg := withEvents(t, p)
			require.NoError(t, p.Publish(ctx, nil))
			client := fake.NewClientset()
			storeAsAPIServer(ctx, t, client, h.last(t), 1, func(s *resourceapi.ResourceSliceSpec) {
				if !keep {
					s.SharedCounters = nil
				}
			})
			p.CheckReadBack(ctx, client)
			got, sets := deviceNames(h.last(t))
			if keep {
				assert.Equal(t, 1, sets)
				assert.Len(t, h.pools, 1, "nothing republished")
				assert.Empty(t, events.Events)
				assert.Zero(t, testutil.CollectAndCount(reg, apifeatures.MetricName))
				return
			}
			assert.Zero(t, sets)
			assert.ElementsMatch(t, []string{"gpu-0", "gpu-1"}, got, "the whole GPU only")
			require.Len(t, events.Events, 1)
			ev := <-events.Events
			assert.Contains(t, ev, "Warning FeatureGateMissing")
			assert.Contains(t, ev, "DRAPartitionableDevices is off on kube-apiserver")
			assert.Contains(t, ev, "whole-GPU device only")
			assert.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP vgpu_dra_api_feature_missing 1 for each Kubernetes feature gate the driver relies on that the API server turned out to have off (the fields it gates came back dropped).
# TYPE vgpu_dra_api_feature_missing gauge
vgpu_dra_api_feature_missing{feature_gate="DRAPartitionableDevices"} 1
`), apifeatures.MetricName))
		})
	}
}

// With --mps the plain GPU gets its MPS device and a counter set of its
// own; the GPU in MIG mode gets none. An API server that drops the counters
// gets the pool republished without them and without the MPS device.
func TestPublisherPublishesMPSDevices(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	p, h := testPublisherWith(nil, devices.MIGOptions{PartitionableDevices: true, MPS: true})
	events, _ := withEvents(t, p)
	require.NoError(t, p.Publish(ctx, nil))
	got, sets := deviceNames(h.last(t))
	assert.Equal(t, 2, sets, "gpu-0's MIG counters and gpu-1's sharing mode")
	assert.ElementsMatch(t, []string{"gpu-0", "gpu-0-mig-3g-40gb-0", "gpu-0-mig-3g-40gb-4", "gpu-0-mig-7g-80gb-0", "gpu-1", "gpu-1-mps"}, got)

	client := fake.NewClientset()
	storeAsAPIServer(ctx, t, client, h.last(t), 1, func(s *resourceapi.ResourceSliceSpec) { s.SharedCounters = nil })
	p.CheckReadBack(ctx, client)
	got, sets = deviceNames(h.last(t))
	assert.Zero(t, sets)
	assert.ElementsMatch(t, []string{"gpu-0", "gpu-1"}, got, "no MPS device without counters")
	require.Len(t, events.Events, 1)
	assert.Contains(t, <-events.Events, "and no MPS devices")
}

// An API server without DRAConsumableCapacity stores every GPU exclusive:
// never silent, but nothing to republish (whole GPUs still work). One
// without DRADeviceTaints drops a sick GPU's taint: said too.
func TestCheckReadBackReportsExclusiveGPUsAndDroppedTaints(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	p, h := testPublisher(nil, false)
	events, reg := withEvents(t, p)
	taint := devices.TaintPolicy{}.XIDTaint(79, metav1.Now().Time)
	require.NoError(t, p.Publish(ctx, map[string][]resourceapi.DeviceTaint{"gpu-1": {taint}}))
	client := fake.NewClientset()
	storeAsAPIServer(ctx, t, client, h.last(t), 1, func(s *resourceapi.ResourceSliceSpec) {
		for i := range s.Devices {
			s.Devices[i].AllowMultipleAllocations = nil
			s.Devices[i].Taints = nil
		}
	})
	p.CheckReadBack(ctx, client)
	assert.Len(t, h.pools, 1, "nothing republished")
	require.Len(t, events.Events, 2)
	first, second := <-events.Events, <-events.Events
	assert.Contains(t, first, "allowMultipleAllocations of device gpu-0: feature gate DRAConsumableCapacity is off on kube-apiserver")
	assert.Contains(t, first, "one claim per GPU")
	assert.Contains(t, second, "the taints of device gpu-1: feature gate DRADeviceTaints is off")
	assert.Equal(t, 2, testutil.CollectAndCount(reg, apifeatures.MetricName))

	// Reported once per process, however often the pool is read back.
	p.CheckReadBack(ctx, client)
	assert.Empty(t, events.Events)
}

// The previous plugin instance's pool, of plain GPUs (MIG was off then),
// may still be the newest when this instance checks: it is no evidence
// that the API server dropped the counters, and nothing is republished
// once this instance's pool, counters kept, is there.
func TestCheckReadBackWaitsForItsOwnPool(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	p, h := testPublisher(nil, true)
	events, _ := withEvents(t, p)
	require.NoError(t, p.Publish(ctx, nil))
	client := fake.NewClientset()
	old := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "node-a-old"},
		Spec: resourceapi.ResourceSliceSpec{Driver: names.DriverName, NodeName: ptr.To("node-a"),
			Devices: []resourceapi.Device{{Name: "gpu-0"}, {Name: "gpu-1"}},
			Pool:    resourceapi.ResourcePool{Name: "node-a", Generation: 1, ResourceSliceCount: 1}},
	}
	_, err := client.ResourceV1().ResourceSlices().Create(ctx, old, metav1.CreateOptions{})
	require.NoError(t, err)
	go func() {
		time.Sleep(1500 * time.Millisecond)
		_ = client.ResourceV1().ResourceSlices().Delete(ctx, old.Name, metav1.DeleteOptions{})
		storeAsAPIServer(ctx, t, client, h.last(t), 2, nil)
	}()
	p.CheckReadBack(ctx, client)
	_, sets := deviceNames(h.last(t))
	assert.Equal(t, 1, sets, "the counters are still published")
	assert.Len(t, h.pools, 1, "nothing republished")
	assert.Empty(t, events.Events)
}

// fakeBlocked is the claims manager's view of instances being destroyed.
type fakeBlocked struct {
	mu      sync.Mutex
	blocked map[string][]discovery.MIGInstance
	changes chan struct{}
}

func (f *fakeBlocked) MIGChanges() <-chan struct{} { return f.changes }

func (f *fakeBlocked) BlockedMIGInstances() map[string][]discovery.MIGInstance {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.blocked
}

func (f *fakeBlocked) set(b map[string][]discovery.MIGInstance) {
	f.mu.Lock()
	f.blocked = b
	f.mu.Unlock()
	f.changes <- struct{}{}
}

// An owned instance NVML would not destroy (in use) is published like an
// admin's, without being offered itself: its placement, what overlaps it
// and the whole GPU go until it is gone, then come back.
func TestPublisherBlocksInstanceBeingDestroyed(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	uuid := "GPU-00000000-0000-0000-0000-000000000000"
	instance := discovery.MIGInstance{ID: 1, ProfileID: 2, Placement: discovery.MIGPlacement{Start: 4, Size: 4}, ComputeInstances: 1}
	p, h := testPublisher(map[string][]discovery.MIGInstance{uuid: {instance}}, true)
	require.NoError(t, p.Publish(ctx, nil))
	all := []string{"gpu-0", "gpu-0-mig-3g-40gb-0", "gpu-0-mig-3g-40gb-4", "gpu-0-mig-7g-80gb-0", "gpu-1"}
	got, _ := deviceNames(h.last(t))
	assert.ElementsMatch(t, all, got)

	src := &fakeBlocked{changes: make(chan struct{})}
	go p.WatchBlocked(ctx, src)
	src.set(map[string][]discovery.MIGInstance{uuid: {instance}})
	assert.Eventually(t, func() bool {
		got, _ := deviceNames(h.last(t))
		return assert.ObjectsAreEqual([]string{"gpu-0-mig-3g-40gb-0", "gpu-1"}, got)
	}, 5*time.Second, 10*time.Millisecond, "only the placement clear of it is offered")
	n := func() int { h.mu.Lock(); defer h.mu.Unlock(); return len(h.pools) }
	before := n()
	src.set(map[string][]discovery.MIGInstance{uuid: {instance}})
	src.set(map[string][]discovery.MIGInstance{uuid: {instance}})
	assert.Equal(t, before, n(), "the same state is not republished")

	src.set(nil)
	assert.Eventually(t, func() bool {
		got, _ := deviceNames(h.last(t))
		return assert.ObjectsAreEqual(all, got)
	}, 5*time.Second, 10*time.Millisecond, "offered again once it is gone")
}

// Before 1.36.2 the scheduler forgets the counters of an allocated
// shareable device: the plugin publishes no counters there, says why in a
// Warning Event naming the version, and trusts 1.36.2 and later (and a
// version it cannot read).
func TestCountersSafeOnlyFrom1362(t *testing.T) {
	for version, safe := range map[string]bool{
		"v1.35.4": false, "v1.35.0-rc.1": false, "v1.36.1": false, "v1.36.2": true, "v1.37.2": true, "v1.38.0-beta.0": true, "not a version": true,
	} {
		t.Run(version, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			client := fake.NewClientset()
			client.Discovery().(*fakediscovery.FakeDiscovery).FakedServerVersion = &apiversion.Info{GitVersion: version}
			events := record.NewFakeRecorder(1)
			assert.Equal(t, safe, CountersSafe(ctx, client.Discovery(), events, "node-a"))
			if safe {
				assert.Empty(t, events.Events)
				return
			}
			require.Len(t, events.Events, 1)
			ev := <-events.Events
			assert.Contains(t, ev, "Warning "+ReasonCountersUnsafe+" Kubernetes "+version+"'s scheduler")
			assert.Contains(t, ev, "publishing GPUs in MIG mode as their whole-GPU device only, and no MPS devices")
		})
	}
}

// A taint of a MIG device (an XID inside its instance) is published on
// that device alone.
func TestPublisherTaintsOnlyTheTaintedMIGDevice(t *testing.T) {
	p, h := testPublisher(nil, true)
	_, ctx := ktesting.NewTestContext(t)
	taint := resourceapi.DeviceTaint{Key: "vgpu.dra.dev/xid", Value: "79", Effect: resourceapi.DeviceTaintEffectNoExecute}
	require.NoError(t, p.Publish(ctx, map[string][]resourceapi.DeviceTaint{"gpu-0-mig-3g-40gb-4": {taint}}))
	found := false
	for _, s := range h.last(t).Slices {
		for _, d := range s.Devices {
			found = found || d.Name == "gpu-0-mig-3g-40gb-4"
			assert.Equal(t, d.Name == "gpu-0-mig-3g-40gb-4", len(d.Taints) == 1, "%s: only the instance's device is tainted", d.Name)
		}
	}
	assert.True(t, found, "the MIG device is published")
}
