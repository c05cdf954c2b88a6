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
	"fmt"
	"slices"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/klog/v2"
)

// XIDEvent reports one XID critical error on one GPU.
type XIDEvent struct {
	// UUID of the GPU the error is about.
	UUID string
	// XID is the NVIDIA XID error code.
	XID uint64
	// GPUInstanceID and ComputeInstanceID name the MIG instance the error
	// happened in, on a GPU in MIG mode; NoInstance when NVML attributes it
	// to the whole GPU (or the GPU is not in MIG mode).
	GPUInstanceID, ComputeInstanceID int
}

// NoInstance is XIDEvent's instance id of an error of the whole GPU.
const NoInstance = -1

// nvmlNoInstance is NVML's instance id in event data that no MIG instance
// is named (0xFFFFFFFF).
const nvmlNoInstance = ^uint32(0)

func instanceID(id uint32) int {
	if id == nvmlNoInstance {
		return NoInstance
	}
	return int(id)
}

// DefaultIgnoredXIDs returns the XIDs that an application causes (illegal
// memory access, page faults, a reset channel after a killed process, ...).
// They say nothing about the health of the GPU, so by default they do not
// mark it unhealthy:
// 13 graphics engine exception, 31 GPU memory page fault, 43 GPU stopped
// processing (a user app fault), 45 preemptive cleanup after a killed
// process, 68 video processor exception, 109 context switch timeout.
func DefaultIgnoredXIDs() []uint64 {
	return []uint64{13, 31, 43, 45, 68, 109}
}

// waitTimeoutMs bounds each blocking NVML wait so that cancellation of the
// watch context is noticed within this time.
const waitTimeoutMs = 1000

// XIDWatcher reports XID critical errors of every GPU until its context ends.
type XIDWatcher struct {
	lib     nvml.Interface
	ignored []uint64
}

// NewXIDWatcher watches the GPUs of the NVML library selected by opts.
// ignoredXIDs are never reported; pass DefaultIgnoredXIDs() for the usual set.
func NewXIDWatcher(ignoredXIDs []uint64, opts ...Option) *XIDWatcher {
	return &XIDWatcher{lib: NewNVML(opts...), ignored: slices.Clone(ignoredXIDs)}
}

// Watch registers XID critical-error events on all GPUs and calls report
// for each error that is not ignored, until ctx is done (then it returns
// nil). An event that NVML cannot attribute to one GPU is reported for
// every watched GPU. A failure of NVML itself is returned.
func (w *XIDWatcher) Watch(ctx context.Context, report func(XIDEvent)) error {
	logger := klog.FromContext(ctx)
	if err := initNVML(w.lib); err != nil {
		return err
	}
	defer shutdownNVML(logger, w.lib)

	set, ret := w.lib.EventSetCreate()
	if ret != nvml.SUCCESS {
		return fmt.Errorf("create NVML event set: %w", ret)
	}
	defer func() {
		if ret := set.Free(); ret != nvml.SUCCESS {
			logger.Error(ret, "Freeing NVML event set failed")
		}
	}()

	uuids, err := w.register(logger, set)
	if err != nil {
		return err
	}
	logger.V(2).Info("Watching GPUs for XID errors", "gpus", uuids, "ignoredXIDs", w.ignored)

	for {
		if ctx.Err() != nil {
			return nil
		}
		event, ret := set.Wait(waitTimeoutMs)
		switch ret {
		case nvml.SUCCESS:
		case nvml.ERROR_TIMEOUT:
			continue
		default:
			return fmt.Errorf("wait for NVML events: %w", ret)
		}
		if event.EventType != nvml.EventTypeXidCriticalError {
			continue
		}
		if slices.Contains(w.ignored, event.EventData) {
			logger.V(4).Info("Ignoring application XID", "xid", event.EventData)
			continue
		}
		affected := uuids
		if uuid, ok := eventUUID(event); ok {
			affected = []string{uuid}
		}
		gi, ci := instanceID(event.GpuInstanceId), instanceID(event.ComputeInstanceId)
		if len(affected) != 1 {
			// Instance ids mean nothing without the GPU they belong to.
			gi, ci = NoInstance, NoInstance
		}
		for _, uuid := range affected {
			logger.Info("GPU reported XID critical error", "uuid", uuid, "xid", event.EventData, "gpuInstance", gi, "computeInstance", ci)
			report(XIDEvent{UUID: uuid, XID: event.EventData, GPUInstanceID: gi, ComputeInstanceID: ci})
		}
	}
}

// register adds every GPU that supports XID events to set and returns their
// UUIDs.
func (w *XIDWatcher) register(logger klog.Logger, set nvml.EventSet) ([]string, error) {
	count, ret := w.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("get device count: %w", ret)
	}
	uuids := make([]string, 0, count)
	for i := 0; i < count; i++ {
		dev, ret := w.lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("GPU at NVML index %d: get handle: %w", i, ret)
		}
		uuid, ret := dev.GetUUID()
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("GPU at NVML index %d: get UUID: %w", i, ret)
		}
		supported, ret := dev.GetSupportedEventTypes()
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("GPU %s: get supported event types: %w", uuid, ret)
		}
		if supported&nvml.EventTypeXidCriticalError == 0 {
			// Such a GPU (e.g. some virtualised ones) cannot report faults;
			// it stays healthy rather than failing the whole watch.
			logger.Info("GPU does not support XID events, not watched", "uuid", uuid)
			continue
		}
		if ret := dev.RegisterEvents(nvml.EventTypeXidCriticalError, set); ret != nvml.SUCCESS {
			return nil, fmt.Errorf("GPU %s: register XID events: %w", uuid, ret)
		}
		uuids = append(uuids, uuid)
	}
	return uuids, nil
}

// eventUUID returns the UUID of the GPU an event is about, if NVML named one.
func eventUUID(event nvml.EventData) (string, bool) {
	if event.Device == nil {
		return "", false
	}
	uuid, ret := event.Device.GetUUID()
	if ret != nvml.SUCCESS || uuid == "" {
		return "", false
	}
	return uuid, true
}
