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
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilversion "k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apimachinery/pkg/util/wait"
	k8sdiscovery "k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/klog/v2"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/common/apifeatures"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/names"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/devices"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/discovery"
)

// readBackTimeout bounds how long the plugin waits for its published
// slices to read back whether the API server kept every field.
const readBackTimeout = time.Minute

// MIGState is the MIG state of the node's GPUs, read at start.
type MIGState struct {
	// ByUUID holds every MIG-capable GPU, by GPU UUID.
	ByUUID map[string]discovery.MIGInfo
	// Enabled holds the GPUs in MIG mode, by device name (gpu-<index>):
	// the claims manager realises their devices as MIG instances.
	Enabled map[string]discovery.MIGInfo
}

// DiscoverMIG reads the MIG state of infos and logs each GPU's mode.
func DiscoverMIG(ctx context.Context, d *discovery.Discoverer, infos []discovery.Info) (MIGState, error) {
	logger := klog.FromContext(ctx)
	list, err := d.MIG(ctx)
	if err != nil {
		return MIGState{}, fmt.Errorf("discover MIG: %w", err)
	}
	st := MIGState{ByUUID: map[string]discovery.MIGInfo{}, Enabled: map[string]discovery.MIGInfo{}}
	for _, m := range list {
		st.ByUUID[m.UUID] = m.MIG
	}
	for _, info := range infos {
		m, ok := st.ByUUID[info.UUID]
		switch {
		case !ok:
		case m.Enabled:
			st.Enabled[devices.Name(info.Index)] = m
			logger.Info("GPU in MIG mode", "device", devices.Name(info.Index), "uuid", info.UUID, "profiles", len(m.Profiles), "instances", len(m.Instances))
		case m.Pending:
			logger.Info("GPU has MIG mode pending: it is published as a plain GPU until a reset turns MIG on (docs/mig.md)", "device", devices.Name(info.Index), "uuid", info.UUID)
		}
	}
	return st, nil
}

// WithInstancesNow returns st with every GPU's instances as NVML lists them
// now. The claims manager's recovery destroys the instances a crashed
// prepare left (state Creating), which st, read before it, still lists:
// published with a checkpoint that no longer owns them, they would be an
// admin's fixed devices, blocking their placements and the whole GPU.
func (st MIGState) WithInstancesNow(ctx context.Context, d *discovery.Discoverer) (MIGState, error) {
	list, err := d.MIG(ctx)
	if err != nil {
		return MIGState{}, fmt.Errorf("discover MIG after recovery: %w", err)
	}
	now := make(map[string]discovery.MIGInfo, len(list))
	for _, m := range list {
		now[m.UUID] = m.MIG
	}
	out := MIGState{ByUUID: make(map[string]discovery.MIGInfo, len(st.ByUUID)), Enabled: st.Enabled}
	for uuid, m := range st.ByUUID {
		if n, ok := now[uuid]; ok {
			m.Instances = n.Instances
		}
		out.ByUUID[uuid] = m
	}
	return out, nil
}

// Helper is the part of the kubeletplugin helper that publishes.
type Helper interface {
	PublishResources(ctx context.Context, resources resourceslice.DriverResources) error
}

// Publisher publishes the node's pool and republishes it with taints, or
// without counters once the cluster turns out not to keep them.
type Publisher struct {
	helper   Helper
	reporter *apifeatures.Reporter
	node     string
	gpus     []devices.GPU
	devOpts  devices.Options

	mu      sync.Mutex
	migOpts devices.MIGOptions
	taints  map[string][]resourceapi.DeviceTaint
	logged  map[string]bool
}

// New describes infos (with their MIG state and the instances the
// plugin owns, by GPU UUID) for publishing.
func New(helper Helper, reporter *apifeatures.Reporter, node string, infos []discovery.Info, mig MIGState, owned map[string][]discovery.MIGInstance,
	devOpts devices.Options, migOpts devices.MIGOptions) *Publisher {
	p := &Publisher{helper: helper, reporter: reporter, node: node, devOpts: devOpts, migOpts: migOpts, logged: map[string]bool{}}
	for _, info := range infos {
		g := devices.GPU{Info: info, Owned: owned[info.UUID]}
		if m, ok := mig.ByUUID[info.UUID]; ok {
			g.MIG = &m
		}
		p.gpus = append(p.gpus, g)
	}
	return p
}

// pool is what is published now; p.mu held.
func (p *Publisher) pool(ctx context.Context) resourceslice.Pool {
	pool, notes := devices.MIGPool(p.gpus, p.devOpts, p.migOpts)
	for _, n := range notes {
		if !p.logged[n] {
			p.logged[n] = true
			klog.FromContext(ctx).Info(n)
		}
	}
	return devices.WithTaints(pool, p.taints)
}

// Publish publishes the pool with taints (nil: none).
func (p *Publisher) Publish(ctx context.Context, taints map[string][]resourceapi.DeviceTaint) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.taints = taints
	return p.publishLocked(ctx)
}

// publishLocked publishes the current pool; p.mu held.
func (p *Publisher) publishLocked(ctx context.Context) error {
	pool := p.pool(ctx)
	if err := p.helper.PublishResources(ctx, resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{p.node: pool}}); err != nil {
		return fmt.Errorf("publish ResourceSlice: %w", err)
	}
	return nil
}

// CheckReadBack reads the node's slices back once they are published and
// reports every field the API server dropped for want of a feature gate
// (docs/install.md): never silently. Without DRAPartitionableDevices the
// scheduler could allocate nothing of a GPU in MIG mode, nor tell a GPU's
// MPS device from its whole-GPU device, so the plugin republishes without
// counters: each GPU in MIG mode as its whole-GPU device and no MPS device,
// as with --partitionable-devices=false. Without DRAConsumableCapacity the
// stored devices are exclusive, one claim per GPU, and stay published so
// (whole GPUs still work); without DRADeviceTaints a GPU with a fatal XID
// is reported unhealthy but not tainted.
func (p *Publisher) CheckReadBack(ctx context.Context, client kubernetes.Interface) {
	logger := klog.FromContext(ctx)
	p.mu.Lock()
	published := p.pool(ctx)
	p.mu.Unlock()
	var dropped []apifeatures.Dropped
	err := wait.PollUntilContextTimeout(ctx, time.Second, readBackTimeout, true, func(ctx context.Context) (bool, error) {
		slices, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{
			FieldSelector: resourceapi.ResourceSliceSelectorNodeName + "=" + p.node + "," + resourceapi.ResourceSliceSelectorDriver + "=" + names.DriverName,
		})
		if err != nil {
			logger.V(2).Info("Listing the node's ResourceSlices failed; trying again", "err", err)
			return false, nil
		}
		var complete bool
		dropped, complete = devices.ReadBack(published, slices.Items)
		return complete, nil
	})
	if err != nil {
		logger.V(2).Info("The node's published ResourceSlices were not read back", "err", err)
		return
	}
	for _, d := range dropped {
		switch d.Gate.Name {
		case apifeatures.PartitionableDevices.Name:
			p.reporter.Missing(ctx, d.Gate, d.Field, "republishing GPUs in MIG mode as their whole-GPU device only, and no MPS devices")
			p.mu.Lock()
			p.migOpts.PartitionableDevices = false
			taints := p.taints
			p.mu.Unlock()
			if err := p.Publish(ctx, taints); err != nil {
				logger.Error(err, "Republishing without counters failed")
			}
		case apifeatures.ConsumableCapacity.Name:
			p.reporter.Missing(ctx, d.Gate, d.Field, "every GPU of this node is stored exclusive: one claim per GPU, no sharing")
		case apifeatures.DeviceTaints.Name:
			p.reporter.Missing(ctx, d.Gate, d.Field, "GPUs with fatal XID errors are reported unhealthy but not tainted: the scheduler still places claims on them")
		}
	}
}

// countersFixedIn is the first Kubernetes release whose scheduler keeps
// counting the shared counters of a multi-allocatable device once it is
// allocated: before it the structured allocator rebuilt a pool's counters
// from exclusive allocations only (kubernetes/kubernetes#139034).
var countersFixedIn = utilversion.MustParseGeneric("1.36.2")

// ReasonCountersUnsafe is the reason of the Warning Event on the node when
// the cluster's version cannot be trusted with the node's counters.
const ReasonCountersUnsafe = "SharedCountersUnsafe"

// CountersSafe reports whether the cluster's scheduler can be given the
// node's counter sets: GPUs in MIG mode, whose instances take software
// slices (multi-allocatable devices that consume counters), and MPS
// devices. On an older cluster it logs and records why not, and the
// plugin publishes as with --partitionable-devices=false: never two
// overlapping instances, nor one GPU in two sharing modes, silently. A
// version it cannot read counts as safe (the read-back still checks the
// gate).
func CountersSafe(ctx context.Context, disc k8sdiscovery.ServerVersionInterface, recorder record.EventRecorder, node string) bool {
	logger := klog.FromContext(ctx)
	info, err := disc.ServerVersion()
	if err != nil {
		logger.V(2).Info("Reading the API server's version failed; publishing counters", "err", err)
		return true
	}
	v, err := utilversion.ParseGeneric(info.GitVersion)
	if err != nil || v.AtLeast(countersFixedIn) {
		return true
	}
	msg := fmt.Sprintf("Kubernetes %s's scheduler stops counting the shared counters of a shareable device once it is allocated "+
		"(kubernetes/kubernetes#139034, fixed in 1.36.2): it could give two claims overlapping MIG instances, or one GPU to MPS and time-sliced claims at once; "+
		"publishing GPUs in MIG mode as their whole-GPU device only, and no MPS devices, as with --partitionable-devices=false. See docs/install.md, section Kubernetes versions",
		info.GitVersion)
	logger.Error(nil, msg, "serverVersion", info.GitVersion)
	recorder.Event(NodeRef(node), corev1.EventTypeWarning, ReasonCountersUnsafe, msg)
	return false
}

// NewNodeEventRecorder records Events about the node itself, as the
// kubelet does (the node's name is its reference's UID).
func NewNodeEventRecorder(ctx context.Context, client kubernetes.Interface, nodeName string) (record.EventRecorder, func()) {
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	return b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: names.DriverName + "/kubelet-plugin", Host: nodeName}), b.Shutdown
}

// NodeRef is the reference of Events about the node.
func NodeRef(nodeName string) *corev1.ObjectReference {
	return &corev1.ObjectReference{Kind: "Node", Name: nodeName, UID: types.UID(nodeName)}
}

// BlockedSource is what the Publisher needs of the claims manager to keep
// instances being destroyed from being offered.
type BlockedSource interface {
	MIGChanges() <-chan struct{}
	BlockedMIGInstances() map[string][]discovery.MIGInstance
}

// setBlocked records the owned MIG instances being destroyed, by GPU UUID,
// and republishes when they changed: while one exists its placement, what
// overlaps it and its GPU's whole-GPU device are not offered, so that the
// scheduler allocates nothing prepare would refuse.
func (p *Publisher) setBlocked(ctx context.Context, blocked map[string][]discovery.MIGInstance) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	changed := false
	for i := range p.gpus {
		g := &p.gpus[i]
		list := slices.Clone(blocked[g.Info.UUID])
		slices.SortFunc(list, func(a, b discovery.MIGInstance) int {
			return cmp.Or(cmp.Compare(a.Placement.Start, b.Placement.Start), cmp.Compare(a.ProfileID, b.ProfileID))
		})
		for j := range list {
			// The id is not known for every record; placement and profile
			// are what block.
			list[j].ID, list[j].ComputeInstances = 0, 0
		}
		if !slices.Equal(g.Blocked, list) {
			g.Blocked = list
			changed = true
		}
	}
	if !changed {
		return nil
	}
	klog.FromContext(ctx).Info("MIG instances being destroyed changed; republishing", "blocked", blocked)
	return p.publishLocked(ctx)
}

// WatchBlocked keeps the published pool in step with src's instances being
// destroyed until ctx ends.
func (p *Publisher) WatchBlocked(ctx context.Context, src BlockedSource) {
	for {
		if err := p.setBlocked(ctx, src.BlockedMIGInstances()); err != nil {
			klog.FromContext(ctx).Error(err, "Republishing after a change of MIG instances failed; will retry at the next change")
		}
		select {
		case <-ctx.Done():
			return
		case <-src.MIGChanges():
		}
	}
}
