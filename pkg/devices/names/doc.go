// Package names holds the names of the vgpu.dra.dev contract, each spelled
// once on the Go side: the driver name, the attribute and capacity names of
// published devices (docs/devices.md), the device classes, the health taint
// key, the CDI vendor and the environment variables libvgpu.so reads
// (vgpu-core/include/vgpu_env.h on the C side). It imports no GPU library,
// so that cluster-side code (the policy allocator, the kubectl plugin) can
// speak about devices without linking NVML; package devices builds the
// devices themselves.
package names
