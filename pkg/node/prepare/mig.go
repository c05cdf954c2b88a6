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

package prepare

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/devices"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/discovery"
)

// MIGLifecycle creates and destroys the MIG instances that realise MIG
// devices and the whole-GPU device of a GPU in MIG mode. discovery.MIGController
// implements it over NVML. Every call names the physical GPU by its UUID;
// an instance that no longer exists is reported with discovery.ErrMIGNotFound,
// one that still has processes with discovery.ErrMIGInUse.
type MIGLifecycle interface {
	// CreateGPUInstance creates a GPU instance of profileID at placement
	// and returns its id.
	CreateGPUInstance(ctx context.Context, gpuUUID string, profileID int, placement discovery.MIGPlacement) (int, error)
	// CreateComputeInstance creates the full compute instance of GPU
	// instance giID and returns its id and MIG UUID.
	CreateComputeInstance(ctx context.Context, gpuUUID string, giID int) (int, string, error)
	// DestroyComputeInstance destroys compute instance ciID of giID.
	DestroyComputeInstance(ctx context.Context, gpuUUID string, giID, ciID int) error
	// DestroyGPUInstance destroys GPU instance giID, which has no compute
	// instance left.
	DestroyGPUInstance(ctx context.Context, gpuUUID string, giID int) error
	// Instances lists the GPU instances of the GPU with their compute
	// instances.
	Instances(ctx context.Context, gpuUUID string) ([]discovery.MIGInstanceState, error)
}

var _ MIGLifecycle = (*discovery.MIGController)(nil)

// instanceState is the progress of an owned MIG instance in the checkpoint.
type instanceState string

const (
	// instanceCreating: the instance may exist partly (GPU instance without
	// compute instance) or not at all; recovery destroys whatever exists.
	instanceCreating instanceState = "Creating"
	// instanceReady: GPU and compute instance exist and have the recorded
	// ids and MIG UUID.
	instanceReady instanceState = "Ready"
	// instanceDestroying: no claim uses it any more; recovery destroys it.
	instanceDestroying instanceState = "Destroying"
)

// instanceRecord is one MIG instance the plugin created (or is creating or
// destroying), stored in the checkpoint under its GPU's UUID. Instances not
// in the checkpoint are an admin's and never touched.
type instanceRecord struct {
	ProfileID int          `json:"profileID"`
	Placement migPlacement `json:"placement"`
	// GPUInstanceID and ComputeInstanceID are NVML's ids, set once each is
	// created.
	GPUInstanceID     *int   `json:"gpuInstanceID,omitempty"`
	ComputeInstanceID *int   `json:"computeInstanceID,omitempty"`
	UUID              string `json:"uuid,omitempty"`
	// Claims are the claims whose limits apply inside the instance; the
	// last one to go destroys it.
	Claims []types.UID   `json:"claims"`
	State  instanceState `json:"state"`
}

func (r *instanceRecord) matches(ref *MIGRef) bool {
	return r.ProfileID == ref.ProfileID && r.Placement == ref.Placement
}

func (r *instanceRecord) placement() discovery.MIGPlacement {
	return discovery.MIGPlacement{Start: r.Placement.Start, Size: r.Placement.Size}
}

// migTarget resolves a device name to the MIG instance that realises it:
// "gpu-<i>-mig-<label>-<start>" of a GPU in MIG mode, or "gpu-<i>" itself
// when that GPU is in MIG mode (its full-size instance at placement 0).
// ok is false for a plain GPU or an unknown name; parent is the GPU's
// device name.
func (m *Manager) migTarget(name string) (parent string, p discovery.MIGProfile, ref *MIGRef, ok bool) {
	if mig, found := m.opts.MIGGPUs[name]; found && mig.Enabled {
		full, ok := mig.FullProfile()
		if !ok {
			return "", discovery.MIGProfile{}, nil, false
		}
		pl := full.Placements[0]
		return name, full, &MIGRef{ProfileID: full.ID, Placement: migPlacement{Start: pl.Start, Size: pl.Size}}, true
	}
	index, label, start, ok := devices.ParseMIGDeviceName(name)
	if !ok {
		return "", discovery.MIGProfile{}, nil, false
	}
	parent = devices.Name(index)
	mig, found := m.opts.MIGGPUs[parent]
	if !found || !mig.Enabled {
		return "", discovery.MIGProfile{}, nil, false
	}
	p, found = devices.MIGProfileByLabel(mig, label)
	if !found {
		return "", discovery.MIGProfile{}, nil, false
	}
	for _, pl := range p.Placements {
		if pl.Start == start {
			return parent, p, &MIGRef{ProfileID: p.ID, Placement: migPlacement{Start: pl.Start, Size: pl.Size}}, true
		}
	}
	return "", discovery.MIGProfile{}, nil, false
}

// deviceInfo returns what a published device offers a claim: a GPU's
// Info, or for a MIG device (or a GPU in MIG mode) its parent's Info with
// the instance's memory and SM count, and the instance it needs.
func (m *Manager) deviceInfo(name string) (discovery.Info, *MIGRef, bool) {
	if parent, p, ref, ok := m.migTarget(name); ok {
		info, found := m.opts.Devices[parent]
		if !found {
			return discovery.Info{}, nil, false
		}
		info.MemoryBytes = p.MemoryBytes
		info.Multiprocessors = p.Multiprocessors
		return info, ref, true
	}
	info, ok := m.opts.Devices[name]
	return info, nil, ok
}

// infoByUUID finds the GPU with the given UUID.
func (m *Manager) infoByUUID(uuid string) (discovery.Info, bool) {
	for _, info := range m.opts.Devices {
		if info.UUID == uuid {
			return info, true
		}
	}
	return discovery.Info{}, false
}

// limitKey tells the GPU limits of one claim apart: one per GPU, or one per
// MIG instance of a GPU.
func limitKey(uuid string, ref *MIGRef) string {
	if ref == nil {
		return uuid
	}
	return uuid + "/mig/" + strconv.Itoa(ref.ProfileID) + "/" + strconv.Itoa(ref.Placement.Start)
}

// withoutMIGUUIDs returns a copy of c as plan produces it: without the MIG
// UUIDs prepare fills in.
func withoutMIGUUIDs(c *PreparedClaim) PreparedClaim {
	out := c.deepCopy()
	for i := range out.GPUs {
		if out.GPUs[i].MIG != nil {
			out.GPUs[i].MIG.UUID = ""
		}
	}
	return out
}

// instance returns the owned instance record of GPU gpuUUID for ref,
// leaving out one being destroyed (still in use): a new claim on its
// placement gets a record of its own, which NVML refuses to realise until
// the old instance is gone.
func (c *checkpoint) instance(gpuUUID string, ref *MIGRef) *instanceRecord {
	for _, r := range c.Instances[gpuUUID] {
		if r.matches(ref) && r.State != instanceDestroying {
			return r
		}
	}
	return nil
}

// reserveInstances records that claim c uses its MIG instances, adding a
// Creating record for each instance that does not exist yet. The caller
// saves the checkpoint.
func (c *checkpoint) reserveInstances(pc *PreparedClaim) {
	for _, g := range pc.GPUs {
		if g.MIG == nil {
			continue
		}
		r := c.instance(g.UUID, g.MIG)
		if r == nil {
			r = &instanceRecord{ProfileID: g.MIG.ProfileID, Placement: g.MIG.Placement, State: instanceCreating}
			if c.Instances == nil {
				c.Instances = map[string][]*instanceRecord{}
			}
			c.Instances[g.UUID] = append(c.Instances[g.UUID], r)
		}
		if !slices.Contains(r.Claims, pc.UID) {
			r.Claims = append(r.Claims, pc.UID)
		}
	}
}

// releaseClaim drops uid from every instance record and marks the records
// left without claims Destroying. It reports whether any record changed.
func (c *checkpoint) releaseClaim(uid types.UID) bool {
	changed := false
	for _, list := range c.Instances {
		for _, r := range list {
			if i := slices.Index(r.Claims, uid); i >= 0 {
				r.Claims = slices.Delete(r.Claims, i, i+1)
				changed = true
			}
			if len(r.Claims) == 0 && r.State != instanceDestroying {
				r.State = instanceDestroying
				changed = true
			}
		}
	}
	return changed
}

// dropInstance removes record r of GPU gpuUUID.
func (c *checkpoint) dropInstance(gpuUUID string, r *instanceRecord) {
	c.Instances[gpuUUID] = slices.DeleteFunc(c.Instances[gpuUUID], func(x *instanceRecord) bool { return x == r })
	if len(c.Instances[gpuUUID]) == 0 {
		delete(c.Instances, gpuUUID)
	}
}

func (m *Manager) saveCheckpoint() error {
	return m.cp.save(m.layout.checkpointPath())
}

// realiseInstances creates the MIG instances claim c needs that are not
// Ready yet, checkpointing each id before the next step, and fills in the
// claim's MIG UUIDs.
func (m *Manager) realiseInstances(ctx context.Context, c *PreparedClaim) error {
	for i := range c.GPUs {
		g := &c.GPUs[i]
		if g.MIG == nil {
			continue
		}
		r := m.cp.instance(g.UUID, g.MIG)
		if r == nil {
			return fmt.Errorf("MIG instance of profile %d at slice %d of GPU %s is not in the checkpoint", g.MIG.ProfileID, g.MIG.Placement.Start, g.UUID)
		}
		if r.State != instanceReady {
			if err := m.createInstance(ctx, g.UUID, r, c.UID); err != nil {
				return err
			}
		}
		g.MIG.UUID = r.UUID
	}
	return nil
}

// createInstance takes Creating record r through GPU-instance and
// compute-instance creation to Ready, saving the checkpoint after each.
func (m *Manager) createInstance(ctx context.Context, gpuUUID string, r *instanceRecord, uid types.UID) error {
	if m.opts.MIG == nil {
		return errors.New("no MIG lifecycle configured")
	}
	if r.GPUInstanceID == nil {
		id, err := m.opts.MIG.CreateGPUInstance(ctx, gpuUUID, r.ProfileID, r.placement())
		if err != nil {
			return fmt.Errorf("create MIG instance: %w", err)
		}
		r.GPUInstanceID = &id
		if err := m.saveCheckpoint(); err != nil {
			return err
		}
		if err := m.step(stepGPUInstanceCreate, uid); err != nil {
			return err
		}
	}
	if r.ComputeInstanceID == nil {
		ci, uuid, err := m.opts.MIG.CreateComputeInstance(ctx, gpuUUID, *r.GPUInstanceID)
		if err != nil {
			return fmt.Errorf("create MIG compute instance: %w", err)
		}
		r.ComputeInstanceID, r.UUID, r.State = &ci, uuid, instanceReady
		if err := m.saveCheckpoint(); err != nil {
			return err
		}
		if err := m.step(stepComputeInstanceCreate, uid); err != nil {
			return err
		}
	}
	r.State = instanceReady
	return nil
}

// destroyUnused destroys every instance record without claims (or left
// Creating or Destroying by a crash when recovering), compute instance
// first, saving the checkpoint after each step. Instances NVML reports in
// use stay Destroying and are retried later. live, when not nil, is what
// NVML listed per GPU (recovery): a record without ids then matches an
// existing instance by profile and placement.
func (m *Manager) destroyUnused(ctx context.Context, uid types.UID, live map[string][]discovery.MIGInstanceState) error {
	var errs []error
	for _, gpuUUID := range sortedKeys(m.cp.Instances) {
		for _, r := range slices.Clone(m.cp.Instances[gpuUUID]) {
			if r.State != instanceDestroying {
				continue
			}
			if err := m.destroyInstance(ctx, gpuUUID, r, uid, live[gpuUUID]); err != nil {
				errs = append(errs, err)
			}
		}
	}
	err := errors.Join(errs...)
	if errors.Is(err, discovery.ErrMIGInUse) {
		// Besides the kubelet's retry of the call: an instance the kubelet
		// no longer asks about must go too, so that its placement is
		// offered again.
		m.startRetryDestroy()
	}
	return err
}

// destroyInstance destroys record r (destroySteps) and then tells the
// publisher, whether the instance went or is left blocking its placement.
func (m *Manager) destroyInstance(ctx context.Context, gpuUUID string, r *instanceRecord, uid types.UID, live []discovery.MIGInstanceState) error {
	err := m.destroySteps(ctx, gpuUUID, r, uid, live)
	m.notifyMIG()
	return err
}

func (m *Manager) destroySteps(ctx context.Context, gpuUUID string, r *instanceRecord, uid types.UID, live []discovery.MIGInstanceState) error {
	logger := klog.FromContext(ctx)
	if m.opts.MIG == nil {
		return errors.New("no MIG lifecycle configured")
	}
	if r.GPUInstanceID == nil && live != nil {
		// Crashed between NVML creating the GPU instance and the checkpoint
		// recording it: the scheduler gave this placement to the plugin, so
		// an instance of the profile there is the plugin's.
		for _, inst := range live {
			if inst.ProfileID == r.ProfileID && inst.Placement == r.placement() {
				id := inst.ID
				r.GPUInstanceID = &id
				if len(inst.Compute) == 1 {
					ci := inst.Compute[0].ID
					r.ComputeInstanceID = &ci
				}
			}
		}
	}
	if r.GPUInstanceID != nil && live != nil && !slices.ContainsFunc(live, func(inst discovery.MIGInstanceState) bool {
		return inst.ID == *r.GPUInstanceID && inst.ProfileID == r.ProfileID && inst.Placement == r.placement()
	}) {
		// Gone already (destroyed before a crash, or by a GPU reset); the
		// id may since name another instance, which is not the plugin's.
		r.GPUInstanceID, r.ComputeInstanceID = nil, nil
	}
	if r.GPUInstanceID != nil {
		cis := []int{}
		if r.ComputeInstanceID != nil {
			cis = append(cis, *r.ComputeInstanceID)
		}
		// A compute instance created after the record's last save.
		for _, inst := range live {
			if inst.ID == *r.GPUInstanceID && inst.ProfileID == r.ProfileID {
				for _, ci := range inst.Compute {
					if !slices.Contains(cis, ci.ID) {
						cis = append(cis, ci.ID)
					}
				}
			}
		}
		for _, ci := range cis {
			err := m.opts.MIG.DestroyComputeInstance(ctx, gpuUUID, *r.GPUInstanceID, ci)
			if err != nil && !errors.Is(err, discovery.ErrMIGNotFound) {
				return fmt.Errorf("destroy MIG compute instance: %w", err)
			}
		}
		if r.ComputeInstanceID != nil {
			r.ComputeInstanceID = nil
			if err := m.saveCheckpoint(); err != nil {
				return err
			}
		}
		if err := m.step(stepComputeInstanceDestroy, uid); err != nil {
			return err
		}
		err := m.opts.MIG.DestroyGPUInstance(ctx, gpuUUID, *r.GPUInstanceID)
		if err != nil && !errors.Is(err, discovery.ErrMIGNotFound) {
			return fmt.Errorf("destroy MIG instance: %w", err)
		}
		if err := m.step(stepGPUInstanceDestroy, uid); err != nil {
			return err
		}
	}
	m.cp.dropInstance(gpuUUID, r)
	if err := m.saveCheckpoint(); err != nil {
		return err
	}
	logger.V(2).Info("Destroyed MIG instance", "gpu", gpuUUID, "profile", r.ProfileID, "placementStart", r.Placement.Start, "migUUID", r.UUID)
	return nil
}

// validateInstances checks the instance records against the claims: each
// has a known state, a placement, and only claims the checkpoint holds.
func (c *checkpoint) validateInstances() error {
	var errs []error
	for gpuUUID, list := range c.Instances {
		if !configUUID.MatchString(gpuUUID) {
			errs = append(errs, fmt.Errorf("instances[%s]: must be a GPU UUID", gpuUUID))
		}
		for i, r := range list {
			path := fmt.Sprintf("instances[%s][%d]", gpuUUID, i)
			if r == nil {
				errs = append(errs, fmt.Errorf("%s: entry is null", path))
				continue
			}
			switch r.State {
			case instanceCreating, instanceReady, instanceDestroying:
			default:
				errs = append(errs, fmt.Errorf("%s.state: unsupported value %q", path, r.State))
			}
			if r.Placement.Size <= 0 || r.Placement.Start < 0 {
				errs = append(errs, fmt.Errorf("%s.placement: must have a size", path))
			}
			if r.State == instanceReady && (r.GPUInstanceID == nil || r.ComputeInstanceID == nil || !strings.HasPrefix(r.UUID, "MIG-")) {
				errs = append(errs, fmt.Errorf("%s: a Ready instance has both ids and a MIG UUID", path))
			}
			for _, uid := range r.Claims {
				if _, ok := c.Claims[uid]; !ok {
					errs = append(errs, fmt.Errorf("%s.claims: %s is not a claim of the checkpoint", path, uid))
				}
			}
		}
	}
	return errors.Join(errs...)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// OwnedMIGInstances returns, by GPU UUID, the MIG instances the plugin owns
// (created, being created or being destroyed, from its checkpoint) with
// their profile and placement, so that the publisher offers their placements
// as dynamic devices and every other existing instance as an admin's fixed
// one. ID is the GPU-instance id, 0 while it is not known yet.
func (m *Manager) OwnedMIGInstances() map[string][]discovery.MIGInstance {
	return m.migInstances(func(*instanceRecord) bool { return true })
}

// migInstances returns, by GPU UUID, the owned instances whose record keep
// accepts. Like PreparedClaims it reads the checkpoint as another instance
// (a rolling update) left it, else the last one this instance saw.
func (m *Manager) migInstances(keep func(*instanceRecord) bool) map[string][]discovery.MIGInstance {
	if end, err := m.begin(); err == nil {
		defer end()
	} else {
		m.mu.Lock()
		defer m.mu.Unlock()
	}
	out := map[string][]discovery.MIGInstance{}
	for gpuUUID, records := range m.cp.Instances {
		for _, r := range records {
			if !keep(r) {
				continue
			}
			inst := discovery.MIGInstance{ProfileID: r.ProfileID, Placement: r.placement()}
			if r.GPUInstanceID != nil {
				inst.ID = *r.GPUInstanceID
			}
			out[gpuUUID] = append(out[gpuUUID], inst)
		}
	}
	return out
}

// notifyMIG tells MIGChanges' reader that the instances being destroyed
// may have changed, without waiting for it.
func (m *Manager) notifyMIG() {
	select {
	case m.migChanged <- struct{}{}:
	default:
	}
}

// MIGChanges receives after the instances BlockedMIGInstances returns may
// have changed: an instance NVML refused to destroy (in use), or one that
// is gone at last. One value stands for any number of changes.
func (m *Manager) MIGChanges() <-chan struct{} {
	return m.migChanged
}

// BlockedMIGInstances returns, by GPU UUID, the owned MIG instances being
// destroyed (NVML said in use, or the destroy is still under way): they
// still take their memory and compute slices, so the publisher offers
// neither their placement, nor one overlapping it, nor the whole GPU
// until they are gone, as for an admin's instance.
func (m *Manager) BlockedMIGInstances() map[string][]discovery.MIGInstance {
	return m.migInstances(func(r *instanceRecord) bool { return r.State == instanceDestroying })
}
