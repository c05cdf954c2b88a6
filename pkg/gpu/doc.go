// Package gpu discovers the NVIDIA GPUs of a node through NVML (go-nvml)
// and watches them for XID critical errors.
//
// NVML is loaded at run time with dlopen, so the same code runs against the
// real libnvidia-ml.so.1 and against vgpu-core's fake library that tests and
// demos use to simulate GPU nodes.
package gpu
