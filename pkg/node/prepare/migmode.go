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
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/klog/v2"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/claimcdi"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/devices"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/discovery"
)

// The MIG sharing mode (docs/mig.md): a limit inside a MIG instance that
// prepare creates at the placement the scheduler allocated, for a MIG
// device or the whole-GPU device of a GPU in MIG mode, and destroys when
// its last claim is gone.

// modeMIG names the MIG mode; GPULimit.MIG set means a limit of it.
const modeMIG modeName = "mig"

// Steps of a MIG instance, each id checkpointed before the step.
const (
	stepGPUInstanceCreate      step = "gpu-instance-create"
	stepComputeInstanceCreate  step = "compute-instance-create"
	stepComputeInstanceDestroy step = "compute-instance-destroy"
	stepGPUInstanceDestroy     step = "gpu-instance-destroy"
)

// validateMIG checks the options of the GPUs in MIG mode.
func (o *Options) validateMIG() []error {
	var errs []error
	for name := range o.MIGGPUs {
		if _, ok := o.Devices[name]; !ok {
			errs = append(errs, fmt.Errorf("GPU %s in MIG mode is not among the devices", name))
		}
	}
	if len(o.MIGGPUs) > 0 && o.MIG == nil {
		errs = append(errs, errors.New("GPUs in MIG mode need a MIG lifecycle"))
	}
	return errs
}

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

// MIGRef names the MIG instance a limit applies to: the GPU-instance
// profile and placement the scheduler allocated, and, once prepare has
// created it, the instance's MIG UUID (which keys the claim's config).
type MIGRef struct {
	ProfileID int          `json:"profileID"`
	Placement migPlacement `json:"placement"`
	// UUID is the instance's "MIG-<uuid>"; empty until the instance exists.
	UUID string `json:"uuid,omitempty"`
}

// migPlacement is a placement as the checkpoint stores it.
type migPlacement struct {
	Start int `json:"start"`
	Size  int `json:"size"`
}

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

// migMode is the MIG sharing mode of one Manager.
type migMode struct {
	m *Manager
	// changed receives (without blocking) after instances being destroyed
	// may have changed; see Manager.MIGChanges.
	changed chan struct{}
	// retrying says a background retry of instances left Destroying runs;
	// m.mu held.
	retrying bool
}

var _ sharingMode = (*migMode)(nil)

func newMIGMode(m *Manager) *migMode {
	return &migMode{m: m, changed: make(chan struct{}, 1)}
}

// target resolves a device name to the MIG instance that realises it:
// "gpu-<i>-mig-<label>-<start>" of a GPU in MIG mode, or "gpu-<i>" itself
// when that GPU is in MIG mode (its full-size instance at placement 0).
// ok is false for a plain GPU or an unknown name; parent is the GPU's
// device name.
func (mm *migMode) target(name string) (parent string, p discovery.MIGProfile, ref *MIGRef, ok bool) {
	migGPUs := mm.m.opts.MIGGPUs
	if mig, found := migGPUs[name]; found && mig.Enabled {
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
	mig, found := migGPUs[parent]
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

// resolve returns, for a MIG device (or a GPU in MIG mode), its parent's
// Info with the instance's memory and SM count, and the instance it needs.
func (mm *migMode) resolve(name string) (discovery.Info, GPULimit, bool) {
	parent, p, ref, ok := mm.target(name)
	if !ok {
		return discovery.Info{}, GPULimit{}, false
	}
	info, found := mm.m.opts.Devices[parent]
	if !found {
		return discovery.Info{}, GPULimit{}, false
	}
	info.MemoryBytes = p.MemoryBytes
	info.Multiprocessors = p.Multiprocessors
	return info, GPULimit{UUID: info.UUID, MIG: ref}, true
}

// limitKey tells the instances of one GPU apart.
func (mm *migMode) limitKey(g GPULimit) string {
	return strconv.Itoa(g.MIG.ProfileID) + "/" + strconv.Itoa(g.MIG.Placement.Start)
}

// order sorts the instances of one GPU by placement.
func (mm *migMode) order(g GPULimit) int { return g.MIG.Placement.Start }

// burstable is false: a MIG instance's memory is its own, it has no
// unbooked memory of the GPU to burst into.
func (mm *migMode) burstable() bool { return false }

// planned clears the MIG UUID prepare fills in.
func (mm *migMode) planned(g *GPULimit) { g.MIG.UUID = "" }

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

// reserve records that claim pc uses its MIG instances, adding a Creating
// record for each instance that does not exist yet (or gaining the claim,
// if another claim made it).
func (mm *migMode) reserve(pc *PreparedClaim) {
	c := mm.m.cp
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

// release drops uid from every instance record and marks the records left
// without claims Destroying. With complete, a record without ids was never
// created (this process records each id NVML returns) and is dropped.
func (mm *migMode) release(uid types.UID, complete bool) bool {
	c := mm.m.cp
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
	if !changed || !complete {
		return changed
	}
	for gpuUUID, list := range c.Instances {
		for _, r := range slices.Clone(list) {
			if r.State == instanceDestroying && r.GPUInstanceID == nil && len(r.Claims) == 0 {
				c.dropInstance(gpuUUID, r)
			}
		}
	}
	return true
}

// dropInstance removes record r of GPU gpuUUID.
func (c *checkpoint) dropInstance(gpuUUID string, r *instanceRecord) {
	c.Instances[gpuUUID] = slices.DeleteFunc(c.Instances[gpuUUID], func(x *instanceRecord) bool { return x == r })
	if len(c.Instances[gpuUUID]) == 0 {
		delete(c.Instances, gpuUUID)
	}
}

// realise creates the MIG instances claim c needs that are not Ready yet,
// checkpointing each id before the next step, and fills in the claim's MIG
// UUIDs. A changed UUID (an instance recreated) changes the config and the
// CDI spec.
func (mm *migMode) realise(ctx context.Context, c *PreparedClaim) (bool, error) {
	changed := false
	for i := range c.GPUs {
		g := &c.GPUs[i]
		if g.MIG == nil {
			continue
		}
		r := mm.m.cp.instance(g.UUID, g.MIG)
		if r == nil {
			return changed, fmt.Errorf("MIG instance of profile %d at slice %d of GPU %s is not in the checkpoint", g.MIG.ProfileID, g.MIG.Placement.Start, g.UUID)
		}
		if r.State != instanceReady {
			if err := mm.createInstance(ctx, g.UUID, r, c.UID); err != nil {
				return changed, err
			}
		}
		changed = changed || g.MIG.UUID != r.UUID
		g.MIG.UUID = r.UUID
	}
	return changed, nil
}

// createInstance takes Creating record r through GPU-instance and
// compute-instance creation to Ready, saving the checkpoint after each.
func (mm *migMode) createInstance(ctx context.Context, gpuUUID string, r *instanceRecord, uid types.UID) error {
	m := mm.m
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

// deviceEdits returns the edits of the MIG instance limit g applies in:
// its own nodes and UUID instead of the whole GPU's device edits (which
// would hand out the parent GPU itself). Its device nodes are where the
// runtime finds the parent GPU's (gpu, the GPU's own edits), e.g. under a
// driver root of their own.
func (mm *migMode) deviceEdits(g GPULimit, gpu cdispec.ContainerEdits) (cdispec.ContainerEdits, error) {
	m := mm.m
	info, ok := m.infoByUUID(g.UUID)
	if !ok {
		return cdispec.ContainerEdits{}, fmt.Errorf("GPU %s is not among the node's devices", g.UUID)
	}
	r := m.cp.instance(g.UUID, g.MIG)
	if r == nil || r.State != instanceReady {
		return cdispec.ContainerEdits{}, fmt.Errorf("MIG instance of profile %d at slice %d of GPU %s is not ready", g.MIG.ProfileID, g.MIG.Placement.Start, g.UUID)
	}
	edits, err := claimcdi.MIGEdits{ProcRoot: m.opts.ProcRoot, HostDevRoot: claimcdi.HostDevRoot(gpu, info.Minor)}.Edits(claimcdi.MIGInstance{
		ParentMinor: info.Minor, GPUInstanceID: *r.GPUInstanceID, ComputeInstanceID: *r.ComputeInstanceID, UUID: r.UUID,
	})
	if err != nil {
		return cdispec.ContainerEdits{}, fmt.Errorf("CDI edits of MIG instance %s: %w", r.UUID, err)
	}
	return edits, nil
}

// teardown destroys every instance record without claims, compute
// instance first, saving the checkpoint after each step. Instances NVML
// reports in use stay Destroying and are retried later.
func (mm *migMode) teardown(ctx context.Context, uid types.UID) error {
	return mm.destroyUnused(ctx, uid, nil)
}

// destroyUnused destroys every record left Destroying. live, when not nil,
// is what NVML listed per GPU (recovery): a record without ids then
// matches an existing instance by profile and placement.
func (mm *migMode) destroyUnused(ctx context.Context, uid types.UID, live map[string][]discovery.MIGInstanceState) error {
	var errs []error
	for _, gpuUUID := range sortedKeys(mm.m.cp.Instances) {
		for _, r := range slices.Clone(mm.m.cp.Instances[gpuUUID]) {
			if r.State != instanceDestroying {
				continue
			}
			if err := mm.destroyInstance(ctx, gpuUUID, r, uid, live[gpuUUID]); err != nil {
				errs = append(errs, err)
			}
		}
	}
	err := errors.Join(errs...)
	if errors.Is(err, discovery.ErrMIGInUse) {
		// Besides the kubelet's retry of the call: an instance the kubelet
		// no longer asks about must go too, so that its placement is
		// offered again.
		mm.startRetryDestroy()
	}
	return err
}

// destroyInstance destroys record r (destroySteps) and then tells the
// publisher, whether the instance went or is left blocking its placement.
func (mm *migMode) destroyInstance(ctx context.Context, gpuUUID string, r *instanceRecord, uid types.UID, live []discovery.MIGInstanceState) error {
	err := mm.destroySteps(ctx, gpuUUID, r, uid, live)
	mm.notify()
	return err
}

func (mm *migMode) destroySteps(ctx context.Context, gpuUUID string, r *instanceRecord, uid types.UID, live []discovery.MIGInstanceState) error {
	m := mm.m
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

// recover compares the owned MIG instances of the checkpoint with those
// NVML lists (docs/mig.md): a Ready instance of prepared claims that still
// exists is kept; one that is gone is marked Creating, to be recreated
// when its claims are restored; every other record (Creating or Destroying
// after a crash, or used by no prepared claim) is destroyed, matched by id
// or, without one, by profile and placement. Instances the checkpoint does
// not know are never touched. Those left Destroying (NVML said in use, or
// could not be asked) are retried in the background.
func (mm *migMode) recover(ctx context.Context) {
	m := mm.m
	logger := klog.FromContext(ctx)
	if len(m.cp.Instances) == 0 {
		return
	}
	if m.opts.MIG == nil {
		logger.Error(nil, "The checkpoint holds MIG instances but no GPU is in MIG mode; they are kept until the plugin runs with MIG again", "gpus", len(m.cp.Instances))
		return
	}
	for _, gpuUUID := range sortedKeys(m.cp.Instances) {
		list, err := m.opts.MIG.Instances(ctx, gpuUUID)
		if err != nil {
			// Ready instances are then taken as they are: a missing one
			// fails its claims' restore, which is retried.
			logger.Error(err, "Listing MIG instances failed", "gpu", gpuUUID)
		}
		for _, r := range slices.Clone(m.cp.Instances[gpuUUID]) {
			r.Claims = slices.DeleteFunc(r.Claims, func(uid types.UID) bool {
				rec, ok := m.cp.Claims[uid]
				return !ok || rec.State != statePrepareCompleted
			})
			switch {
			case len(r.Claims) == 0 || r.State == instanceDestroying:
				r.State = instanceDestroying
			case r.State == instanceCreating:
				// Recreating it for prepared claims was cut short: what
				// exists of it is destroyed, and a fresh record takes
				// the claims, to be created when they are restored.
				m.cp.Instances[gpuUUID] = append(m.cp.Instances[gpuUUID], &instanceRecord{
					ProfileID: r.ProfileID, Placement: r.Placement, Claims: r.Claims, State: instanceCreating,
				})
				r.Claims, r.State = nil, instanceDestroying
			case err == nil && !liveMatch(list, r):
				logger.Info("A MIG instance of prepared claims is gone; recreating it", "gpu", gpuUUID,
					"profile", r.ProfileID, "placementStart", r.Placement.Start, "migUUID", r.UUID)
				r.GPUInstanceID, r.ComputeInstanceID, r.UUID, r.State = nil, nil, "", instanceCreating
			}
		}
	}
	if err := m.saveCheckpoint(); err != nil {
		logger.Error(err, "Recording the MIG instances' recovery failed")
	}
	if mm.destroyLeftovers(ctx) {
		mm.startRetryDestroy()
	}
}

// destroyLeftovers destroys the instances left Destroying, matched against
// what NVML lists. It reports whether some are still left.
func (mm *migMode) destroyLeftovers(ctx context.Context) bool {
	m := mm.m
	logger := klog.FromContext(ctx)
	left := false
	for _, gpuUUID := range sortedKeys(m.cp.Instances) {
		var destroying []*instanceRecord
		for _, r := range m.cp.Instances[gpuUUID] {
			if r.State == instanceDestroying {
				destroying = append(destroying, r)
			}
		}
		if len(destroying) == 0 {
			continue
		}
		list, err := m.opts.MIG.Instances(ctx, gpuUUID)
		if err != nil {
			logger.Error(err, "Listing MIG instances failed; will retry", "gpu", gpuUUID)
			left = true
			continue
		}
		for _, r := range destroying {
			if err := mm.destroyInstance(ctx, gpuUUID, r, "", list); err != nil {
				logger.Error(err, "Destroying a MIG instance the plugin no longer needs failed; will retry", "gpu", gpuUUID)
				left = true
			}
		}
	}
	return left
}

// liveMatch reports whether Ready record r exists as NVML lists it.
func liveMatch(list []discovery.MIGInstanceState, r *instanceRecord) bool {
	for _, inst := range list {
		if inst.ID != *r.GPUInstanceID || inst.ProfileID != r.ProfileID || inst.Placement != r.placement() {
			continue
		}
		for _, ci := range inst.Compute {
			if ci.ID == *r.ComputeInstanceID && ci.UUID == r.UUID {
				return true
			}
		}
	}
	return false
}

// startRetryDestroy starts retryDestroy unless it runs already; m.mu held.
func (mm *migMode) startRetryDestroy() {
	if mm.retrying || mm.m.bgCtx == nil {
		return
	}
	mm.retrying = true
	go mm.retryDestroy(mm.m.bgCtx, restoreRetryInterval)
}

// retryDestroy runs recovery of the MIG instances again with exponential
// backoff until none is left Destroying or ctx ends. Until then such an
// instance still blocks its placement on the GPU (BlockedMIGInstances).
func (mm *migMode) retryDestroy(ctx context.Context, delay time.Duration) {
	m := mm.m
	for {
		select {
		case <-ctx.Done():
			m.mu.Lock()
			mm.retrying = false
			m.mu.Unlock()
			return
		case <-time.After(delay):
		}
		end, err := m.begin()
		if err != nil {
			klog.FromContext(ctx).Error(err, "Retrying MIG instance recovery failed; will retry")
		} else {
			left := mm.destroyLeftovers(ctx)
			if !left {
				// Cleared under the lock: an unprepare that finds an
				// instance in use after this starts a new retry.
				mm.retrying = false
				end()
				klog.FromContext(ctx).Info("Destroyed the MIG instances left from earlier")
				return
			}
			end()
		}
		delay = min(2*delay, maxRestoreRetryInterval)
	}
}

// notify tells MIGChanges' reader that the instances being destroyed may
// have changed, without waiting for it.
func (mm *migMode) notify() {
	select {
	case mm.changed <- struct{}{}:
	default:
	}
}

// migSection is the MIG mode's part of the checkpoint: the instances the
// plugin owns, by the UUID of their GPU (version 2).
var migSection = checkpointSection{
	mode:    modeMIG,
	key:     "instances",
	version: checkpointVersion2,
	encode: func(c *checkpoint) ([]byte, error) {
		if len(c.Instances) == 0 {
			return nil, nil
		}
		return json.Marshal(c.Instances)
	},
	decode: func(c *checkpoint, data []byte) error {
		instances, err := decodeStrict[map[string][]*instanceRecord](data)
		c.Instances = instances
		return err
	},
	validateLimit: func(path *field.Path, g GPULimit) field.ErrorList {
		var errs field.ErrorList
		if g.MIG.UUID != "" && (!strings.HasPrefix(g.MIG.UUID, "MIG-") || strings.ContainsAny(g.MIG.UUID, "\n=")) {
			errs = append(errs, field.Invalid(path.Child("mig", "uuid"), g.MIG.UUID, "must be a MIG UUID"))
		}
		if g.BurstLimitBytes > g.MemoryLimitBytes {
			errs = append(errs, field.Invalid(path.Child("burstLimitBytes"), g.BurstLimitBytes, "must be 0 in a MIG instance: its memory is its own"))
		}
		return errs
	},
	validate: validateInstances,
}

// validateInstances checks the instance records against the claims: each
// has a known state, a placement, and only claims the checkpoint holds.
func validateInstances(c *checkpoint) error {
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

// MIGChanges receives after the instances BlockedMIGInstances returns may
// have changed: an instance NVML refused to destroy (in use), or one that
// is gone at last. One value stands for any number of changes.
func (m *Manager) MIGChanges() <-chan struct{} {
	return m.mig.changed
}

// BlockedMIGInstances returns, by GPU UUID, the owned MIG instances being
// destroyed (NVML said in use, or the destroy is still under way): they
// still take their memory and compute slices, so the publisher offers
// neither their placement, nor one overlapping it, nor the whole GPU
// until they are gone, as for an admin's instance.
func (m *Manager) BlockedMIGInstances() map[string][]discovery.MIGInstance {
	return m.migInstances(func(r *instanceRecord) bool { return r.State == instanceDestroying })
}
