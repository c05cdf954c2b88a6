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

package monitor

import (
	"errors"
	"fmt"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"

	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/discovery"
	"github.com/vgpu-dra/vgpu-dra-driver/pkg/node/prepare"
)

// Defaults for Options.
const (
	DefaultInterval       = 10 * time.Second
	DefaultStatusInterval = 30 * time.Second
)

// ClaimSource lists the claims prepared on this node; *prepare.Manager is one.
type ClaimSource interface {
	PreparedClaims() []prepare.PreparedClaim
}

// Options configures a Monitor.
type Options struct {
	// DriverName is the DRA driver name; status.devices entries of this
	// driver are written.
	DriverName string
	// NodeName is the value of the node label.
	NodeName string
	// Claims lists the prepared claims.
	Claims ClaimSource
	// GPUs are the node's GPUs (total memory, index).
	GPUs []discovery.Info
	// NVML, when set, provides each GPU's memory use and utilisation. The
	// monitor initialises it in Run and shuts it down when Run returns.
	NVML nvml.Interface
	// Registry receives the monitor's metrics.
	Registry prometheus.Registerer
	// KubeClient, when set, is used to watch ResourceClaims (pod label) and
	// to write their status. Without it both are off.
	KubeClient kubernetes.Interface
	// Interval is the shortest time between two collections; scrapes in
	// between are served from the last one. Zero means DefaultInterval.
	Interval time.Duration
	// StatusInterval is the longest a changed usage waits before it is
	// written to a claim's status; bigger changes are written sooner. Zero
	// means DefaultStatusInterval; negative turns status writing off.
	StatusInterval time.Duration
	// EventInterval is the shortest time between two GPUMemoryLimitReached
	// events of one claim. Zero means DefaultEventInterval.
	EventInterval time.Duration
	// OnCollect, when set, is called with what each collection measured
	// (the burst grant book's input, pkg/node/burstnode), under the monitor's lock:
	// it must not call back into the Monitor.
	OnCollect func(Collection)
	// ProcRoot is the host's /proc, where OnCollect's reservations check
	// that a slot's process still lives; empty means /proc.
	ProcRoot string
	// EventRecorder, when set, receives the events; otherwise they are
	// sent through KubeClient. Tests set a fake one.
	EventRecorder record.EventRecorder
}

// Collection is what one collection measured for the burst grant book.
type Collection struct {
	// At is when the collection started: every sample in it is at least
	// this recent.
	At time.Time
	// GPUs holds NVML's memory figures by GPU UUID; a GPU NVML did not
	// answer for is missing.
	GPUs map[string]GPUMemory
	// Claims holds the prepared claims whose regions were read.
	Claims []ClaimReservation
}

// GPUMemory is one GPU's memory as NVML reports it.
type GPUMemory struct {
	TotalBytes uint64
	// ReservedBytes is what the driver reserves (nvmlDeviceGetMemoryInfo_v2);
	// 0 where the driver cannot tell.
	ReservedBytes uint64
	// Processes is the memory of each compute process by host pid; nil
	// when NVML could not list them.
	Processes map[uint32]uint64
}

// ClaimReservation is a claim's region reservation per GPU UUID, and the
// pods it is reserved for.
type ClaimReservation struct {
	Claim prepare.PreparedClaim
	// Reserved is the region's used_bytes less what slots of dead
	// processes still hold (hostpids.DeadCharges): the library gives
	// those back only at its next reclaim.
	Reserved map[string]uint64
	// Pods are the UIDs of the pods in the claim's status.reservedFor,
	// nil while unknown (no claim informer, or not synced yet).
	Pods []types.UID
}

func (o *Options) validate() error {
	var errs []error
	if o.DriverName == "" {
		errs = append(errs, errors.New("driver name is required"))
	}
	if o.NodeName == "" {
		errs = append(errs, errors.New("node name is required"))
	}
	if o.Claims == nil {
		errs = append(errs, errors.New("claim source is required"))
	}
	if o.Registry == nil {
		errs = append(errs, errors.New("metrics registry is required"))
	}
	if o.EventInterval < 0 {
		errs = append(errs, fmt.Errorf("event interval must not be negative, got %s", o.EventInterval))
	}
	if o.Interval < 0 {
		errs = append(errs, fmt.Errorf("interval must not be negative, got %s", o.Interval))
	}
	seen := map[string]bool{}
	for _, g := range o.GPUs {
		if g.UUID == "" {
			errs = append(errs, fmt.Errorf("GPU %d has no UUID", g.Index))
		}
		if seen[g.UUID] {
			errs = append(errs, fmt.Errorf("GPU UUID %s is listed twice", g.UUID))
		}
		seen[g.UUID] = true
	}
	return errors.Join(errs...)
}
