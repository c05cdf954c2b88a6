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

package discovery

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/klog/v2"
)

// Errors of the MIG lifecycle calls, wrapped with the GPU, profile,
// placement or instance they concern (and NVML's own return code). Callers
// tell them apart with errors.Is.
var (
	// ErrMIGInsufficientResources: the placement is taken (by an instance
	// that overlaps it) or the profile's instance count is reached.
	ErrMIGInsufficientResources = errors.New("MIG: insufficient resources")
	// ErrMIGInUse: the instance still has processes (or, for a GPU
	// instance, compute instances) and cannot be destroyed now.
	ErrMIGInUse = errors.New("MIG: instance in use")
	// ErrMIGNotSupported: the GPU is not in MIG mode or lacks the profile.
	ErrMIGNotSupported = errors.New("MIG: not supported")
	// ErrMIGNotFound: no instance with that id exists (already destroyed).
	ErrMIGNotFound = errors.New("MIG: no such instance")
)

// migError maps an NVML return code of a MIG call to the matching error
// above, keeping the code itself in the chain.
func migError(what string, ret nvml.Return) error {
	switch {
	case errors.Is(ret, nvml.ERROR_INSUFFICIENT_RESOURCES):
		return fmt.Errorf("%s: %w: %w", what, ErrMIGInsufficientResources, ret)
	case errors.Is(ret, nvml.ERROR_IN_USE):
		return fmt.Errorf("%s: %w: %w", what, ErrMIGInUse, ret)
	case errors.Is(ret, nvml.ERROR_NOT_SUPPORTED):
		return fmt.Errorf("%s: %w: %w", what, ErrMIGNotSupported, ret)
	case errors.Is(ret, nvml.ERROR_NOT_FOUND):
		return fmt.Errorf("%s: %w: %w", what, ErrMIGNotFound, ret)
	default:
		return fmt.Errorf("%s: %w", what, ret)
	}
}

// migUUIDPattern is the MIG device UUID of R470 and later drivers; the
// older "MIG-GPU-<uuid>/<gi>/<ci>" form is not supported.
var migUUIDPattern = regexp.MustCompile(`^MIG-[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// MIGComputeInstance is one compute instance of a GPU instance.
type MIGComputeInstance struct {
	// ID is NVML's compute-instance id, unique within its GPU instance.
	ID int
	// UUID is the MIG device's "MIG-<uuid>", what CUDA_VISIBLE_DEVICES
	// names; empty when NVML has no MIG device for it.
	UUID string
}

// MIGInstanceState is a GPU instance with its compute instances, as the
// lifecycle lists them.
type MIGInstanceState struct {
	MIGInstance
	// Compute are the compute instances, ordered by id.
	Compute []MIGComputeInstance
}

// MIGController creates and destroys MIG instances through NVML. Each call
// initialises NVML and shuts it down again, as Discoverer does. It is safe
// for concurrent use as far as NVML is; the claims manager serialises its
// calls.
type MIGController struct {
	lib nvml.Interface
}

// NewMIGController returns a controller on the NVML library selected by
// opts.
func NewMIGController(opts ...Option) *MIGController {
	return &MIGController{lib: NewNVML(opts...)}
}

// withGPU runs fn on the NVML handle of the GPU with UUID gpuUUID.
func (c *MIGController) withGPU(ctx context.Context, gpuUUID string, fn func(nvml.Device) error) error {
	if err := initNVML(c.lib); err != nil {
		return err
	}
	defer shutdownNVML(klog.FromContext(ctx), c.lib)
	dev, ret := c.lib.DeviceGetHandleByUUID(gpuUUID)
	if ret != nvml.SUCCESS {
		return fmt.Errorf("GPU %s: get handle: %w", gpuUUID, ret)
	}
	if err := fn(dev); err != nil {
		return fmt.Errorf("GPU %s: %w", gpuUUID, err)
	}
	return nil
}

// CreateGPUInstance creates a GPU instance of profile profileID at
// placement on the GPU and returns its id. It creates no compute instance.
func (c *MIGController) CreateGPUInstance(ctx context.Context, gpuUUID string, profileID int, placement MIGPlacement) (int, error) {
	var id int
	err := c.withGPU(ctx, gpuUUID, func(dev nvml.Device) error {
		info, ret := dev.GetGpuInstanceProfileInfo(profileID)
		if ret != nvml.SUCCESS {
			return migError(fmt.Sprintf("get GPU-instance profile %d", profileID), ret)
		}
		pl := nvml.GpuInstancePlacement{Start: uint32(placement.Start), Size: uint32(placement.Size)}
		gi, ret := dev.CreateGpuInstanceWithPlacement(&info, &pl)
		if ret != nvml.SUCCESS {
			return migError(fmt.Sprintf("create GPU instance of profile %d at slices %d+%d", profileID, placement.Start, placement.Size), ret)
		}
		giInfo, ret := gi.GetInfo()
		if ret != nvml.SUCCESS {
			return fmt.Errorf("get info of the new GPU instance of profile %d: %w", profileID, ret)
		}
		id = int(giInfo.Id)
		klog.FromContext(ctx).V(2).Info("Created GPU instance", "gpu", gpuUUID, "profile", profileID,
			"placementStart", placement.Start, "placementSize", placement.Size, "gpuInstance", id)
		return nil
	})
	return id, err
}

// CreateComputeInstance creates the full compute instance of GPU instance
// giID (the compute-instance profile with all of its slices) and returns
// the compute instance's id and its MIG device's "MIG-<uuid>".
func (c *MIGController) CreateComputeInstance(ctx context.Context, gpuUUID string, giID int) (int, string, error) {
	var ciID int
	var migUUID string
	err := c.withGPU(ctx, gpuUUID, func(dev nvml.Device) error {
		gi, err := gpuInstance(dev, giID)
		if err != nil {
			return err
		}
		giInfo, ret := gi.GetInfo()
		if ret != nvml.SUCCESS {
			return fmt.Errorf("get info of GPU instance %d: %w", giID, ret)
		}
		giProfile, ret := dev.GetGpuInstanceProfileInfo(int(giInfo.ProfileId))
		if ret != nvml.SUCCESS {
			return migError(fmt.Sprintf("get GPU-instance profile %d", giInfo.ProfileId), ret)
		}
		ciProfile, err := fullComputeProfile(gi, giProfile.SliceCount)
		if err != nil {
			return fmt.Errorf("GPU instance %d: %w", giID, err)
		}
		ci, ret := gi.CreateComputeInstance(&ciProfile)
		if ret != nvml.SUCCESS {
			return migError(fmt.Sprintf("create compute instance of profile %d in GPU instance %d", ciProfile.Id, giID), ret)
		}
		ciInfo, ret := ci.GetInfo()
		if ret != nvml.SUCCESS {
			return fmt.Errorf("get info of the new compute instance in GPU instance %d: %w", giID, ret)
		}
		ciID = int(ciInfo.Id)
		uuids, err := migUUIDs(dev)
		if err == nil {
			migUUID = uuids[[2]int{giID, ciID}]
			if !migUUIDPattern.MatchString(migUUID) {
				err = fmt.Errorf("compute instance %d of GPU instance %d has no MIG device with a MIG-<uuid> UUID (got %q)", ciID, giID, migUUID)
			}
		}
		if err != nil {
			// Without its UUID the instance cannot be handed out: undo it
			// so that the caller has nothing to clean up.
			if ret := ci.Destroy(); ret != nvml.SUCCESS {
				return fmt.Errorf("%w (destroying the new compute instance %d also failed: %w)", err, ciID, ret)
			}
			return err
		}
		klog.FromContext(ctx).V(2).Info("Created compute instance", "gpu", gpuUUID, "gpuInstance", giID,
			"computeInstance", ciID, "migUUID", migUUID)
		return nil
	})
	return ciID, migUUID, err
}

// DestroyComputeInstance destroys compute instance ciID of GPU instance
// giID. Either being gone already is ErrMIGNotFound.
func (c *MIGController) DestroyComputeInstance(ctx context.Context, gpuUUID string, giID, ciID int) error {
	return c.withGPU(ctx, gpuUUID, func(dev nvml.Device) error {
		gi, err := gpuInstance(dev, giID)
		if err != nil {
			return err
		}
		cis, err := computeInstances(gi)
		if err != nil {
			return fmt.Errorf("GPU instance %d: %w", giID, err)
		}
		ci, ok := cis[ciID]
		if !ok {
			return fmt.Errorf("compute instance %d of GPU instance %d: %w", ciID, giID, ErrMIGNotFound)
		}
		if ret := ci.Destroy(); ret != nvml.SUCCESS {
			return migError(fmt.Sprintf("destroy compute instance %d of GPU instance %d", ciID, giID), ret)
		}
		klog.FromContext(ctx).V(2).Info("Destroyed compute instance", "gpu", gpuUUID, "gpuInstance", giID, "computeInstance", ciID)
		return nil
	})
}

// DestroyGPUInstance destroys GPU instance giID, which must have no compute
// instance left (NVML answers IN_USE otherwise). One that is gone already
// is ErrMIGNotFound.
func (c *MIGController) DestroyGPUInstance(ctx context.Context, gpuUUID string, giID int) error {
	return c.withGPU(ctx, gpuUUID, func(dev nvml.Device) error {
		gi, err := gpuInstance(dev, giID)
		if err != nil {
			return err
		}
		if ret := gi.Destroy(); ret != nvml.SUCCESS {
			return migError(fmt.Sprintf("destroy GPU instance %d", giID), ret)
		}
		klog.FromContext(ctx).V(2).Info("Destroyed GPU instance", "gpu", gpuUUID, "gpuInstance", giID)
		return nil
	})
}

// Instances lists the GPU instances of the GPU with their compute
// instances and MIG UUIDs, ordered by placement. A GPU not in MIG mode has
// none.
func (c *MIGController) Instances(ctx context.Context, gpuUUID string) ([]MIGInstanceState, error) {
	var out []MIGInstanceState
	err := c.withGPU(ctx, gpuUUID, func(dev nvml.Device) error {
		mig, err := ReadMIG(dev, false)
		if err != nil || mig == nil || !mig.Enabled {
			return err
		}
		uuids, err := migUUIDs(dev)
		if err != nil {
			return err
		}
		for _, inst := range mig.Instances {
			gi, err := gpuInstance(dev, inst.ID)
			if err != nil {
				return err
			}
			cis, err := computeInstances(gi)
			if err != nil {
				return fmt.Errorf("GPU instance %d: %w", inst.ID, err)
			}
			st := MIGInstanceState{MIGInstance: inst}
			for id := range cis {
				st.Compute = append(st.Compute, MIGComputeInstance{ID: id, UUID: uuids[[2]int{inst.ID, id}]})
			}
			sort.Slice(st.Compute, func(i, j int) bool { return st.Compute[i].ID < st.Compute[j].ID })
			out = append(out, st)
		}
		return nil
	})
	return out, err
}

// gpuInstance finds GPU instance id on dev.
func gpuInstance(dev nvml.Device, id int) (nvml.GpuInstance, error) {
	gi, ret := dev.GetGpuInstanceById(id)
	if ret != nvml.SUCCESS {
		return nil, migError(fmt.Sprintf("get GPU instance %d", id), ret)
	}
	return gi, nil
}

// fullComputeProfile is the compute-instance profile of gi that spans all
// of its slices.
func fullComputeProfile(gi nvml.GpuInstance, slices uint32) (nvml.ComputeInstanceProfileInfo, error) {
	for id := nvml.COMPUTE_INSTANCE_PROFILE_COUNT - 1; id >= 0; id-- {
		info, ret := gi.GetComputeInstanceProfileInfo(id, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
		switch {
		case errors.Is(ret, nvml.ERROR_NOT_SUPPORTED), errors.Is(ret, nvml.ERROR_INVALID_ARGUMENT):
			continue
		case ret != nvml.SUCCESS:
			return info, fmt.Errorf("get compute-instance profile %d: %w", id, ret)
		}
		if info.SliceCount == slices {
			return info, nil
		}
	}
	return nvml.ComputeInstanceProfileInfo{}, fmt.Errorf("no compute-instance profile with %d slices: %w", slices, ErrMIGNotSupported)
}

// computeInstances returns the compute instances of gi by id.
func computeInstances(gi nvml.GpuInstance) (map[int]nvml.ComputeInstance, error) {
	out := map[int]nvml.ComputeInstance{}
	for id := 0; id < nvml.COMPUTE_INSTANCE_PROFILE_COUNT; id++ {
		info, ret := gi.GetComputeInstanceProfileInfo(id, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
		switch {
		case errors.Is(ret, nvml.ERROR_NOT_SUPPORTED), errors.Is(ret, nvml.ERROR_INVALID_ARGUMENT):
			continue
		case ret != nvml.SUCCESS:
			return nil, fmt.Errorf("get compute-instance profile %d: %w", id, ret)
		}
		cis, ret := gi.GetComputeInstances(&info)
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("list compute instances of profile %d: %w", id, ret)
		}
		for _, ci := range cis {
			ciInfo, ret := ci.GetInfo()
			if ret != nvml.SUCCESS {
				return nil, fmt.Errorf("get compute instance info: %w", ret)
			}
			out[int(ciInfo.Id)] = ci
		}
	}
	return out, nil
}

// migUUIDs maps (GPU instance id, compute instance id) to the UUID of the
// MIG device NVML has for it.
func migUUIDs(dev nvml.Device) (map[[2]int]string, error) {
	n, ret := dev.GetMaxMigDeviceCount()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("get MIG device count: %w", ret)
	}
	out := map[[2]int]string{}
	for i := 0; i < n; i++ {
		mig, ret := dev.GetMigDeviceHandleByIndex(i)
		if errors.Is(ret, nvml.ERROR_NOT_FOUND) || errors.Is(ret, nvml.ERROR_INVALID_ARGUMENT) {
			continue // no MIG device at this index
		}
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("get MIG device %d: %w", i, ret)
		}
		gi, ret := mig.GetGpuInstanceId()
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("MIG device %d: get GPU instance id: %w", i, ret)
		}
		ci, ret := mig.GetComputeInstanceId()
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("MIG device %d: get compute instance id: %w", i, ret)
		}
		uuid, ret := mig.GetUUID()
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("MIG device %d: get UUID: %w", i, ret)
		}
		out[[2]int{gi, ci}] = uuid
	}
	return out, nil
}
