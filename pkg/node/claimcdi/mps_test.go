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
	"testing"

	"github.com/stretchr/testify/assert"
	cdispec "tags.cncf.io/container-device-interface/specs-go"
)

func TestMPSEdits(t *testing.T) {
	const gpu = "GPU-00000000-1111-2222-3333-444444444444"
	edits := MPSEdits(gpu, "/var/lib/vgpu-dra/mps/"+gpu+"/pipe")
	assert.Equal(t, []string{"CUDA_MPS_PIPE_DIRECTORY=/usr/local/vgpu/mps/" + gpu}, edits.Env)
	assert.Equal(t, []*cdispec.Mount{
		// Clients make their sockets in the pipe directory; nothing there
		// may be executed or act as a device.
		{HostPath: "/var/lib/vgpu-dra/mps/" + gpu + "/pipe", ContainerPath: "/usr/local/vgpu/mps/" + gpu, Options: []string{"rw", "nosuid", "nodev", "noexec", "bind"}},
		{HostPath: "/dev/shm", ContainerPath: "/dev/shm", Options: []string{"rw", "nosuid", "nodev", "noexec", "bind"}},
	}, edits.Mounts)
	assert.Empty(t, edits.DeviceNodes, "the GPU's own nodes come from its device edits")
}
