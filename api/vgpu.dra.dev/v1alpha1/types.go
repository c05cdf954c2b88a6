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

package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// GroupName is the API group of the opaque configuration; it equals the
	// driver name (pkg/contract/names.DriverName, checked by a test) so
	// that DRA routes the config to this driver. The API imports nothing
	// of the house above it.
	GroupName = "vgpu.dra.dev"
	// Version is the only served version of the opaque configuration.
	Version = "v1alpha1"
	// Kind is the kind of the opaque configuration object.
	Kind = "VGPUConfig"
)

// ComputePolicy selects how the SM share of a claim is enforced.
type ComputePolicy string

const (
	// ComputePolicyStrict throttles a claim to its SM share even when the GPU
	// is otherwise idle (HAMi "force").
	ComputePolicyStrict ComputePolicy = "strict"
	// ComputePolicyWorkConserving lets a claim use idle SM time beyond its
	// share and throttles it only under contention (HAMi "default").
	ComputePolicyWorkConserving ComputePolicy = "workConserving"
	// ComputePolicyDisabled applies no compute limit; memory limits stay
	// (HAMi "disable").
	ComputePolicyDisabled ComputePolicy = "disabled"
)

// Priority orders claims sharing one GPU under the work-conserving policy.
type Priority string

const (
	// PriorityHigh is HAMi's nvidia.com/priority 0.
	PriorityHigh Priority = "high"
	// PriorityLow is HAMi's nvidia.com/priority 1.
	PriorityLow Priority = "low"
)

// LogLevel is the verbosity of libvgpu inside the containers of a claim.
type LogLevel string

// Log levels, from least to most verbose.
const (
	LogLevelError   LogLevel = "error"
	LogLevelWarning LogLevel = "warning"
	LogLevelInfo    LogLevel = "info"
	LogLevelDebug   LogLevel = "debug"
)

// Enforcement switches every limit of a claim on or off. It is honoured
// only from a DeviceClass.
type Enforcement string

const (
	// EnforcementEnabled applies every limit of the claim.
	EnforcementEnabled Enforcement = "enabled"
	// EnforcementDisabled applies none: libvgpu is not preloaded.
	EnforcementDisabled Enforcement = "disabled"
)

// BurstPolicy says whether claims of a class may set a memoryLimit above
// their guarantee. It is honoured only from a DeviceClass.
type BurstPolicy string

const (
	// BurstAllowed lets a claim set memoryLimit and use memory above its
	// guarantee that no other claim has booked; its pod may be evicted to
	// give that memory back.
	BurstAllowed BurstPolicy = "allowed"
	// BurstNever forbids memoryLimit: the claim's limit is its guarantee,
	// and it is never evicted to reclaim memory.
	BurstNever BurstPolicy = "never"
)

// Defaults applied to fields left empty.
const (
	DefaultComputePolicy = ComputePolicyStrict
	DefaultPriority      = PriorityLow
	DefaultLogLevel      = LogLevelWarning
	DefaultEnforcement   = EnforcementEnabled
	DefaultBurst         = BurstAllowed
	// DefaultReclaimGracePeriodSeconds is the grace period of a pod
	// evicted to give its burst back.
	DefaultReclaimGracePeriodSeconds int64 = 30
	// MaxReclaimGracePeriodSeconds bounds reclaimGracePeriodSeconds: a
	// claim waiting for its guarantee waits at least this long.
	MaxReclaimGracePeriodSeconds int64 = 3600
)

// VGPUConfig is the opaque configuration of a vGPU allocation. An empty
// field means "not set by this layer"; defaults fill the gaps after all
// layers are merged.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type VGPUConfig struct {
	metav1.TypeMeta `json:",inline"`

	// ComputePolicy is strict, workConserving or disabled. Default strict.
	ComputePolicy ComputePolicy `json:"computePolicy,omitempty"`
	// Priority is high or low. Default low.
	Priority Priority `json:"priority,omitempty"`
	// LogLevel is error, warning, info or debug. Default warning.
	LogLevel LogLevel `json:"logLevel,omitempty"`
	// Enforcement is enabled or disabled. Default enabled. Class-only.
	Enforcement Enforcement `json:"enforcement,omitempty"`
	// MemoryLimit is the most GPU memory each device of the requests this
	// config applies to may use: the guarantee (the memory capacity the
	// claim requested and the scheduler booked) plus burst, memory of the
	// GPU no claim has booked, granted while it is free. Unset means the
	// limit is the guarantee. A whole number of bytes. Claim-only.
	MemoryLimit *resource.Quantity `json:"memoryLimit,omitempty"`
	// Burst is allowed or never. Default allowed. Class-only.
	Burst BurstPolicy `json:"burst,omitempty"`
	// ReclaimGracePeriodSeconds is the grace period of a pod evicted to
	// give its burst back to a claim that needs its guarantee, 0 to
	// MaxReclaimGracePeriodSeconds. Default 30. Class-only.
	ReclaimGracePeriodSeconds *int64 `json:"reclaimGracePeriodSeconds,omitempty"`
}
