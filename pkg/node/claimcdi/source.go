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

package claimcdi

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
