// Package region is the Go side of the per-claim shared-region contract
// defined by vgpu-core/include/vgpu_region.h.
//
// The kubelet plugin only creates the file: a zero-filled regular file of
// exactly Size bytes that libvgpu.so initialises on first attach. The layout
// itself is read by the monitor, which mirrors the header's offsets.
package region
