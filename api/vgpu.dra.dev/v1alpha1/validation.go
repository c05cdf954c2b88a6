package v1alpha1

import (
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var (
	computePolicies = []string{string(ComputePolicyStrict), string(ComputePolicyWorkConserving), string(ComputePolicyDisabled)}
	priorities      = []string{string(PriorityHigh), string(PriorityLow)}
	logLevels       = []string{string(LogLevelError), string(LogLevelWarning), string(LogLevelInfo), string(LogLevelDebug)}
	enforcements    = []string{string(EnforcementEnabled), string(EnforcementDisabled)}
)

// Validate checks every set field of c against its allowed values. Empty
// fields are valid: they mean "not set" in a layer and are defaulted later.
// fld is the path of the config object, e.g. spec.devices.config[0].opaque.parameters.
func (c *VGPUConfig) Validate(fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateEnum(fld.Child("computePolicy"), string(c.ComputePolicy), computePolicies)...)
	errs = append(errs, validateEnum(fld.Child("priority"), string(c.Priority), priorities)...)
	errs = append(errs, validateEnum(fld.Child("logLevel"), string(c.LogLevel), logLevels)...)
	errs = append(errs, validateEnum(fld.Child("enforcement"), string(c.Enforcement), enforcements)...)
	return errs
}

// ValidateClaimConfig checks c as a config given in a ResourceClaim: on top
// of Validate, class-only fields must be empty.
func (c *VGPUConfig) ValidateClaimConfig(fld *field.Path) field.ErrorList {
	errs := c.Validate(fld)
	if c.Enforcement != "" {
		errs = append(errs, field.Forbidden(fld.Child("enforcement"), "may only be set in a DeviceClass config"))
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
