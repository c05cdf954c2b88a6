// Package cdi writes the per-claim CDI specs of the vGPU driver and supplies
// the "GPU base edits" (device nodes, driver libraries, hooks) that make a
// physical GPU usable inside a container.
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
package cdi
