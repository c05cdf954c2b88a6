// Package devices turns discovered GPUs into the DRA devices that the
// vgpu.dra.dev driver publishes in its ResourceSlice: one shareable device
// per GPU (allowMultipleAllocations) with the attributes and the consumable
// `memory` and `cores` capacities of the contract in docs/architecture.md. docs/devices.md
// explains the published shape and the rounding rules.
package devices
