package cdi

import (
	"context"

	cdispec "tags.cncf.io/container-device-interface/specs-go"
)

// GPUEditsSource produces the container edits that expose one whole physical
// GPU, identified by its NVML UUID.
type GPUEditsSource interface {
	ContainerEdits(ctx context.Context, uuid string) (*GPUEdits, error)
}

// GPUEdits are the edits of one GPU, split the way CDI applies them: Device
// once per injected device, Common once per spec however many of its devices
// a container gets (hooks, unlike mounts and device nodes, are not
// deduplicated by the runtime, so they must not be repeated per device).
// The edits may share elements with other results and must not be modified.
type GPUEdits struct {
	// Device holds the GPU's own device nodes and hooks.
	Device cdispec.ContainerEdits
	// Common holds what every GPU container needs: control devices, driver
	// libraries, IPC sockets, hooks.
	Common cdispec.ContainerEdits
}
