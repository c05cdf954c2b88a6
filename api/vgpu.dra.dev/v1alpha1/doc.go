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
