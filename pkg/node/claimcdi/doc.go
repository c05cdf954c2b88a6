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

// Package claimcdi writes the per-claim CDI specs of the vGPU driver and
// supplies the "GPU base edits" (device nodes, driver libraries, hooks)
// that make a physical GPU usable inside a container. Its name keeps it
// apart from the CDI library's package cdi, which it uses.
//
// Claim specs are transient specs of kind k8s.vgpu.dra.dev/claim, one per
// ResourceClaim, written and removed with the CDI library so that the file
// format always matches what container runtimes parse.
//
// GPU base edits come from one of two GPUEditsSource implementations:
//
//   - NVCDISource generates them with NVIDIA Container Toolkit's nvcdi
//     library from the driver installation and NVML, the way NVIDIA's own DRA
//     driver does.
//   - SpecDirSource takes them from a vendor CDI spec that already exists on
//     the node (for example one written by "nvidia-ctk cdi generate").
//
// Neither guesses driver library paths: either the toolkit discovers them or
// an existing spec lists them.
package claimcdi
