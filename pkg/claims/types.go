package claims

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
	// RegionPath is the host path of the claim's shared region, set by
	// Manager.PreparedClaims.
	RegionPath string `json:"-"`
	// HostPIDsPath is the host path of the claim's host pid map
	// (host/pids, in the directory mounted read-only into its containers),
	// which package hostpids writes; set by Manager.PreparedClaims.
	HostPIDsPath string `json:"-"`
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
	// MemoryLimitBytes is never 0: a claim always consumes memory.
	MemoryLimitBytes uint64 `json:"memoryLimitBytes"`
	// SMLimitPercent is 1..100, or 0 for best effort (no throttle).
	SMLimitPercent int64 `json:"smLimitPercent"`
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
	out.Devices = append([]PreparedDevice(nil), c.Devices...)
	return out
}
