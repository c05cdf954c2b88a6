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
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Layer is one opaque config of this driver that applies to an allocation
// result, in the order the allocation result lists them (class configs
// first, then claim configs). It is not an API object.
//
// +k8s:deepcopy-gen=false
type Layer struct {
	// FromClass is true when the config comes from the DeviceClass, which
	// only an administrator can write.
	FromClass bool
	// Raw is the opaque parameters as stored in the API (JSON).
	Raw []byte
}

// Resolve merges layers: each set field of a later layer overrides the
// earlier value. A claim layer that sets a class-only field is an error,
// so a user cannot switch enforcement off, and so is a class layer that
// sets a claim-only field. A memoryLimit under burst: never is an error
// too. The result is defaulted and valid.
func Resolve(layers []Layer) (VGPUConfig, error) {
	var merged VGPUConfig
	limitFrom := -1 // the layer whose memoryLimit wins
	for i, layer := range layers {
		source := "claim"
		if layer.FromClass {
			source = "class"
		}
		cfg, err := Decode(layer.Raw)
		if err != nil {
			return VGPUConfig{}, fmt.Errorf("config %d (from %s): %w", i, source, err)
		}
		validate := cfg.ValidateClaimConfig
		if layer.FromClass {
			validate = cfg.ValidateClassConfig
		}
		if errs := validate(nil); len(errs) > 0 {
			return VGPUConfig{}, fmt.Errorf("config %d (from %s): %w", i, source, errs.ToAggregate())
		}
		if cfg.MemoryLimit != nil {
			limitFrom = i
		}
		overlay(&merged, cfg)
	}
	SetDefaults(&merged)
	if merged.Burst == BurstNever && merged.MemoryLimit != nil {
		return VGPUConfig{}, fmt.Errorf("config %d (from claim): %w", limitFrom,
			field.Forbidden(field.NewPath("memoryLimit"), "the DeviceClass sets burst: never"))
	}
	return merged, nil
}

func overlay(dst, src *VGPUConfig) {
	if src.ComputePolicy != "" {
		dst.ComputePolicy = src.ComputePolicy
	}
	if src.Priority != "" {
		dst.Priority = src.Priority
	}
	if src.LogLevel != "" {
		dst.LogLevel = src.LogLevel
	}
	if src.Enforcement != "" {
		dst.Enforcement = src.Enforcement
	}
	if src.MemoryLimit != nil {
		dst.MemoryLimit = src.MemoryLimit
	}
	if src.Burst != "" {
		dst.Burst = src.Burst
	}
	if src.ReclaimGracePeriodSeconds != nil {
		dst.ReclaimGracePeriodSeconds = src.ReclaimGracePeriodSeconds
	}
}
