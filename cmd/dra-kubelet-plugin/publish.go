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

package main

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/klog/v2"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/contract/names"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/devices"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/discovery"
)

// counterCheckTimeout bounds how long the plugin waits for its published
// slices to read back whether the API server kept their counters.
const counterCheckTimeout = time.Minute

// migState is the MIG state of the node's GPUs, read at start.
type migState struct {
	// byUUID holds every MIG-capable GPU, by GPU UUID.
	byUUID map[string]discovery.MIGInfo
	// enabled holds the GPUs in MIG mode, by device name (gpu-<index>):
	// the claims manager realises their devices as MIG instances.
	enabled map[string]discovery.MIGInfo
}

// discoverMIG reads the MIG state of infos and logs each GPU's mode.
func discoverMIG(ctx context.Context, d *discovery.Discoverer, infos []discovery.Info) (migState, error) {
	logger := klog.FromContext(ctx)
	list, err := d.MIG(ctx)
	if err != nil {
		return migState{}, fmt.Errorf("discover MIG: %w", err)
	}
	st := migState{byUUID: map[string]discovery.MIGInfo{}, enabled: map[string]discovery.MIGInfo{}}
	for _, m := range list {
		st.byUUID[m.UUID] = m.MIG
	}
	for _, info := range infos {
		m, ok := st.byUUID[info.UUID]
		switch {
		case !ok:
		case m.Enabled:
			st.enabled[devices.Name(info.Index)] = m
			logger.Info("GPU in MIG mode", "device", devices.Name(info.Index), "uuid", info.UUID, "profiles", len(m.Profiles), "instances", len(m.Instances))
		case m.Pending:
			logger.Info("GPU has MIG mode pending: it is published as a plain GPU until a reset turns MIG on (docs/mig.md)", "device", devices.Name(info.Index), "uuid", info.UUID)
		}
	}
	return st, nil
}

// withInstancesNow returns st with every GPU's instances as NVML lists them
// now. The claims manager's recovery destroys the instances a crashed
// prepare left (state Creating), which st, read before it, still lists:
// published with a checkpoint that no longer owns them, they would be an
// admin's fixed devices, blocking their placements and the whole GPU.
func (st migState) withInstancesNow(ctx context.Context, d *discovery.Discoverer) (migState, error) {
	list, err := d.MIG(ctx)
	if err != nil {
		return migState{}, fmt.Errorf("discover MIG after recovery: %w", err)
	}
	now := make(map[string]discovery.MIGInfo, len(list))
	for _, m := range list {
		now[m.UUID] = m.MIG
	}
	out := migState{byUUID: make(map[string]discovery.MIGInfo, len(st.byUUID)), enabled: st.enabled}
	for uuid, m := range st.byUUID {
		if n, ok := now[uuid]; ok {
			m.Instances = n.Instances
		}
		out.byUUID[uuid] = m
	}
	return out, nil
}

// publishHelper is the part of the kubeletplugin helper that publishes.
type publishHelper interface {
	PublishResources(ctx context.Context, resources resourceslice.DriverResources) error
}

// publisher publishes the node's pool and republishes it with taints, or
// without counters once the cluster turns out not to keep them.
type publisher struct {
	helper  publishHelper
	node    string
	gpus    []devices.GPU
	devOpts devices.Options

	mu      sync.Mutex
	migOpts devices.MIGOptions
	taints  map[string][]resourceapi.DeviceTaint
	logged  map[string]bool
}

// newPublisher describes infos (with their MIG state and the instances the
// plugin owns, by GPU UUID) for publishing.
func newPublisher(helper publishHelper, node string, infos []discovery.Info, mig migState, owned map[string][]discovery.MIGInstance,
	devOpts devices.Options, migOpts devices.MIGOptions) *publisher {
	p := &publisher{helper: helper, node: node, devOpts: devOpts, migOpts: migOpts, logged: map[string]bool{}}
	for _, info := range infos {
		g := devices.GPU{Info: info, Owned: owned[info.UUID]}
		if m, ok := mig.byUUID[info.UUID]; ok {
			g.MIG = &m
		}
		p.gpus = append(p.gpus, g)
	}
	return p
}

// pool is what is published now; p.mu held.
func (p *publisher) pool(ctx context.Context) resourceslice.Pool {
	pool, notes := devices.MIGPool(p.gpus, p.devOpts, p.migOpts)
	for _, n := range notes {
		if !p.logged[n] {
			p.logged[n] = true
			klog.FromContext(ctx).Info(n)
		}
	}
	return devices.WithTaints(pool, p.taints)
}

// publish publishes the pool with taints (nil: none).
func (p *publisher) publish(ctx context.Context, taints map[string][]resourceapi.DeviceTaint) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.taints = taints
	return p.publishLocked(ctx)
}

// publishLocked publishes the current pool; p.mu held.
func (p *publisher) publishLocked(ctx context.Context) error {
	pool := p.pool(ctx)
	if err := p.helper.PublishResources(ctx, resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{p.node: pool}}); err != nil {
		return fmt.Errorf("publish ResourceSlice: %w", err)
	}
	return nil
}

// counterDevices returns the names of the current pool's devices that
// consume counters (none: the pool has no counters to check).
func (p *publisher) counterDevices(ctx context.Context) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, s := range p.pool(ctx).Slices {
		for _, d := range s.Devices {
			if len(d.ConsumesCounters) > 0 {
				out = append(out, d.Name)
			}
		}
	}
	return out
}

// checkCounters reads the node's slices back once they are published: an
// API server without DRAPartitionableDevices drops sharedCounters (and
// consumesCounters), and then the scheduler could allocate nothing of a GPU
// in MIG mode. The plugin then says so once and republishes without
// counters: each such GPU as its whole-GPU device, as with
// --partitionable-devices=false.
func (p *publisher) checkCounters(ctx context.Context, client kubernetes.Interface) {
	logger := klog.FromContext(ctx)
	want := p.counterDevices(ctx)
	if len(want) == 0 {
		return
	}
	var kept bool
	err := wait.PollUntilContextTimeout(ctx, time.Second, counterCheckTimeout, true, func(ctx context.Context) (bool, error) {
		kept = false
		slices, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{
			FieldSelector: resourceapi.ResourceSliceSelectorNodeName + "=" + p.node + "," + resourceapi.ResourceSliceSelectorDriver + "=" + names.DriverName,
		})
		if err != nil {
			logger.V(2).Info("Listing the node's ResourceSlices failed; trying again", "err", err)
			return false, nil
		}
		// Judge only a complete pool of the newest generation: the slices
		// are created one by one.
		var gen, count, seen int64
		for _, sl := range slices.Items {
			gen = max(gen, sl.Spec.Pool.Generation)
		}
		got := map[string]bool{}
		for _, sl := range slices.Items {
			if sl.Spec.Pool.Generation != gen {
				continue
			}
			seen++
			count = sl.Spec.Pool.ResourceSliceCount
			if len(sl.Spec.SharedCounters) > 0 {
				kept = true
			}
			for _, d := range sl.Spec.Devices {
				got[d.Name] = true
			}
		}
		if seen == 0 || seen < count {
			return false, nil
		}
		// Until this instance's slices are written, the newest pool may
		// still be the previous instance's, e.g. from before an admin
		// switched MIG on: it has none of the devices that consume counters.
		for _, name := range want {
			if !got[name] {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil || kept {
		return
	}
	logger.Info("The API server dropped the published counters (DRAPartitionableDevices is off): republishing GPUs in MIG mode as their whole-GPU device only")
	p.mu.Lock()
	p.migOpts.PartitionableDevices = false
	taints := p.taints
	p.mu.Unlock()
	if err := p.publish(ctx, taints); err != nil {
		logger.Error(err, "Republishing without counters failed")
	}
}

// blockedSource is what the publisher needs of the claims manager to keep
// instances being destroyed from being offered.
type blockedSource interface {
	MIGChanges() <-chan struct{}
	BlockedMIGInstances() map[string][]discovery.MIGInstance
}

// setBlocked records the owned MIG instances being destroyed, by GPU UUID,
// and republishes when they changed: while one exists its placement, what
// overlaps it and its GPU's whole-GPU device are not offered, so that the
// scheduler allocates nothing prepare would refuse.
func (p *publisher) setBlocked(ctx context.Context, blocked map[string][]discovery.MIGInstance) error {
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

// watchBlocked keeps the published pool in step with src's instances being
// destroyed until ctx ends.
func (p *publisher) watchBlocked(ctx context.Context, src blockedSource) {
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
