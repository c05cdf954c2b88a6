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
	"k8s.io/apimachinery/pkg/types"

	api "github.com/vgpu-dra/vgpu-dra-driver/api/vgpu.dra.dev/v1alpha1"
)

// PreparedClaim is what the node knows about one prepared claim: enough to
// rebuild its config file, region and CDI spec, and for the monitor to label
// usage.
type PreparedClaim struct {
	UID       types.UID `json:"uid"`
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	// Settings is the resolved opaque configuration of the claim.
	Settings Settings `json:"settings"`
	// GPUs holds one limit per distinct physical GPU, ordered by PCI bus ID;
	// the position is the GPU's index in the config file and in the
	// CUDA_DEVICE_*_<i> variables.
	GPUs []GPULimit `json:"gpus"`
	// Devices holds one entry per allocation result of this driver, in
	// allocation order.
	Devices []PreparedDevice `json:"devices"`
	// ReclaimGracePeriodSeconds is the grace period of the claim's pods
	// when they are evicted to reclaim its burst: the longest its classes'
	// configs resolve to. Set only for a claim with burst room
	// (HasBurstRoom), so that checkpoints without burst are unchanged.
	ReclaimGracePeriodSeconds int64 `json:"reclaimGracePeriodSeconds,omitempty"`
	// RegionPath is the host path of the claim's shared region, set by
	// Manager.PreparedClaims.
	RegionPath string `json:"-"`
	// HostPIDsPath is the host path of the claim's host pid map
	// (host/pids, in the directory mounted read-only into its containers),
	// which package hostpids writes; set by Manager.PreparedClaims.
	HostPIDsPath string `json:"-"`
	// BurstPath is the host path of the claim's burst grants (host/burst,
	// next to host/pids, read-only in its containers), which package
	// burstgrant writes; set by Manager.PreparedClaims.
	BurstPath string `json:"-"`
	// BurstSocketPath is the host path of the claim's burst socket
	// (host/burst.sock), on which the plugin answers the library's asks
	// for burst; set by Manager.PreparedClaims. It exists only while the
	// plugin serves a claim that may burst (HasBurstRoom).
	BurstSocketPath string `json:"-"`
	// MPSUserSocketPath is the host path of an MPS claim's user socket
	// (host/mps.sock, MPSOptions.Users); set by Manager.PreparedClaims for
	// a claim with MPS limits.
	MPSUserSocketPath string `json:"-"`
}

// HasBurstRoom reports whether the claim may use more than its guarantee
// on any of its GPUs (a memoryLimit above the memory it consumed).
func (c *PreparedClaim) HasBurstRoom() bool {
	for _, g := range c.GPUs {
		if g.Ceiling() > g.MemoryLimitBytes {
			return true
		}
	}
	return false
}

// Settings are the per-claim values of the config file.
type Settings struct {
	ComputePolicy api.ComputePolicy `json:"computePolicy"`
	Priority      api.Priority      `json:"priority"`
	LogLevel      api.LogLevel      `json:"logLevel"`
	Enforcement   api.Enforcement   `json:"enforcement"`
}

// GPULimit is the claim's limit on one physical GPU: the sum of the claim's
// shares of that GPU.
type GPULimit struct {
	UUID string `json:"uuid"`
	// MemoryLimitBytes is never 0: a claim always consumes memory. It is
	// the claim's guarantee on the GPU: what its results consumed, what
	// the scheduler booked and what the library enforces without a burst
	// grant.
	MemoryLimitBytes uint64 `json:"memoryLimitBytes"`
	// BurstLimitBytes is the claim's ceiling on the GPU (its memoryLimit,
	// summed over its results there, each at least what it consumed), set
	// only when above MemoryLimitBytes; 0 means no burst (checkpoints of
	// earlier versions have none). Use Ceiling.
	BurstLimitBytes uint64 `json:"burstLimitBytes,omitempty"`
	// SMLimitPercent is 1..100, or 0 for best effort (no throttle).
	SMLimitPercent int64 `json:"smLimitPercent"`
	// MIG is set when the limit applies inside a MIG instance of the GPU
	// (a MIG device, or the whole-GPU device of a GPU in MIG mode); UUID
	// then stays the physical GPU's.
	MIG *MIGRef `json:"mig,omitempty"`
	// MPS is set when the limit is a share of the GPU's MPS device: its
	// processes run under the GPU's MPS control daemon (docs/mps.md).
	MPS bool `json:"mps,omitempty"`
}

// mode names the sharing mode that realises the limit (mode.go), "" for a
// plain software slice: the mode whose reference the limit carries.
func (g GPULimit) mode() modeName {
	if g.MIG != nil {
		return modeMIG
	}
	if g.MPS {
		return modeMPS
	}
	return ""
}

// Ceiling is the most the claim may use on the GPU: BurstLimitBytes, or
// the guarantee MemoryLimitBytes where that is unset or lower.
func (g GPULimit) Ceiling() uint64 { return max(g.BurstLimitBytes, g.MemoryLimitBytes) }

// ConfigUUID is the UUID the claim's config and burst file name the GPU
// by: the MIG instance's "MIG-<uuid>" once it exists, else the GPU's.
func (g GPULimit) ConfigUUID() string { return g.configUUID() }

func (g GPULimit) configUUID() string {
	if g.MIG != nil && g.MIG.UUID != "" {
		return g.MIG.UUID
	}
	return g.UUID
}

// PreparedDevice is one allocation result of the claim.
type PreparedDevice struct {
	Request string `json:"request"`
	Pool    string `json:"pool"`
	Device  string `json:"device"`
	// ShareID is set when the device is shared (allowMultipleAllocations).
	ShareID types.UID `json:"shareID,omitempty"`
	// GPU is the index into PreparedClaim.GPUs.
	GPU int `json:"gpu"`
	// MemoryBytes and Cores are what this result consumed.
	MemoryBytes uint64 `json:"memoryBytes"`
	Cores       int64  `json:"cores"`
}

func (c *PreparedClaim) deepCopy() PreparedClaim {
	out := *c
	out.GPUs = append([]GPULimit(nil), c.GPUs...)
	for i := range out.GPUs {
		if g := out.GPUs[i].MIG; g != nil {
			ref := *g
			out.GPUs[i].MIG = &ref
		}
	}
	out.Devices = append([]PreparedDevice(nil), c.Devices...)
	return out
}
