// Package v1alpha1 defines VGPUConfig, the opaque device configuration of
// the vgpu.dra.dev driver (API group vgpu.dra.dev, version v1alpha1). The
// import path follows the group and version, as Kubernetes API packages do,
// so that a later version lives beside this one.
//
// A VGPUConfig travels inside DeviceClass.spec.config and
// ResourceClaim.spec.devices.config as an opaque parameter. The package
// decodes it strictly (unknown or duplicate fields, wrong types and a wrong
// apiVersion or kind are errors that name the field), validates it with
// field paths, applies defaults, and merges the layers that apply to one
// allocation result (class first, then claim; later wins) with Resolve.
//
// Enforcement is class-only: only a cluster administrator, who controls
// DeviceClasses, may switch limits off. A claim that sets it is rejected.
//
// The DeepCopy functions are generated (`make generate`, zz_generated.deepcopy.go).
//
// +k8s:deepcopy-gen=package
// +groupName=vgpu.dra.dev
package v1alpha1
