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

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var (
	computePolicies = []string{string(ComputePolicyStrict), string(ComputePolicyWorkConserving), string(ComputePolicyDisabled)}
	priorities      = []string{string(PriorityHigh), string(PriorityLow)}
	logLevels       = []string{string(LogLevelError), string(LogLevelWarning), string(LogLevelInfo), string(LogLevelDebug)}
	enforcements    = []string{string(EnforcementEnabled), string(EnforcementDisabled)}
	bursts          = []string{string(BurstAllowed), string(BurstNever)}
)

// classOnly is the message of a class-only field set in a claim.
const classOnly = "may only be set in a DeviceClass config"

// Validate checks every set field of c against its allowed values. Empty
// fields are valid: they mean "not set" in a layer and are defaulted later.
// fld is the path of the config object, e.g. spec.devices.config[0].opaque.parameters.
func (c *VGPUConfig) Validate(fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateEnum(fld.Child("computePolicy"), string(c.ComputePolicy), computePolicies)...)
	errs = append(errs, validateEnum(fld.Child("priority"), string(c.Priority), priorities)...)
	errs = append(errs, validateEnum(fld.Child("logLevel"), string(c.LogLevel), logLevels)...)
	errs = append(errs, validateEnum(fld.Child("enforcement"), string(c.Enforcement), enforcements)...)
	errs = append(errs, validateEnum(fld.Child("burst"), string(c.Burst), bursts)...)
	if q := c.MemoryLimit; q != nil {
		if v, ok := WholeBytes(*q); !ok || v <= 0 {
			errs = append(errs, field.Invalid(fld.Child("memoryLimit"), q.String(), "must be a positive whole number of bytes"))
		}
	}
	if g := c.ReclaimGracePeriodSeconds; g != nil && (*g < 0 || *g > MaxReclaimGracePeriodSeconds) {
		errs = append(errs, field.Invalid(fld.Child("reclaimGracePeriodSeconds"), *g,
			fmt.Sprintf("must be between 0 and %d seconds", MaxReclaimGracePeriodSeconds)))
	}
	return errs
}

// WholeBytes returns q as a number of bytes when it is a whole number that
// fits an int64.
func WholeBytes(q resource.Quantity) (int64, bool) {
	v, ok := q.AsInt64()
	if !ok {
		// AsInt64 refuses some exact values (e.g. 1.5Gi); compare the
		// rounded value with the original instead.
		v = q.Value()
		ok = resource.NewQuantity(v, resource.BinarySI).Cmp(q) == 0
	}
	return v, ok
}

// ValidateClaimConfig checks c as a config given in a ResourceClaim: on top
// of Validate, class-only fields must be empty.
func (c *VGPUConfig) ValidateClaimConfig(fld *field.Path) field.ErrorList {
	errs := c.Validate(fld)
	if c.Enforcement != "" {
		errs = append(errs, field.Forbidden(fld.Child("enforcement"), classOnly))
	}
	if c.Burst != "" {
		errs = append(errs, field.Forbidden(fld.Child("burst"), classOnly))
	}
	if c.ReclaimGracePeriodSeconds != nil {
		errs = append(errs, field.Forbidden(fld.Child("reclaimGracePeriodSeconds"), classOnly))
	}
	return errs
}

// ValidateClassConfig checks c as a config given in a DeviceClass: on top
// of Validate, claim-only fields must be empty. memoryLimit is claim-only
// because it is relative to each claim's own guarantee.
func (c *VGPUConfig) ValidateClassConfig(fld *field.Path) field.ErrorList {
	errs := c.Validate(fld)
	if c.MemoryLimit != nil {
		errs = append(errs, field.Forbidden(fld.Child("memoryLimit"), "may only be set in a ResourceClaim config"))
	}
	return errs
}

func validateEnum(fld *field.Path, value string, allowed []string) field.ErrorList {
	if value == "" {
		return nil
	}
	for _, a := range allowed {
		if value == a {
			return nil
		}
	}
	return field.ErrorList{field.NotSupported(fld, value, allowed)}
}
