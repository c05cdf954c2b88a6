// Package names holds the names of the vgpu.dra.dev contract that
// published devices carry: the driver name and the attribute and capacity
// names (docs/devices.md). It imports no GPU library, so that cluster-side
// code (the policy allocator, the kubectl plugin) can speak about devices
// without linking NVML; package devices builds the devices themselves.
package names
