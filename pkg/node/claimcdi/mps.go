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
	cdispec "tags.cncf.io/container-device-interface/specs-go"
)

// MPSContainerRoot is where a claim's containers find the pipe directory
// of each GPU they use under MPS: MPSContainerRoot/<GPU UUID>.
const MPSContainerRoot = "/usr/local/vgpu/mps"

// MPSHostShm is the host's shared memory, where the MPS server keeps the
// segments its clients map.
const MPSHostShm = "/dev/shm"

// envMPSPipeDir is the variable through which a CUDA client finds the
// control daemon.
const envMPSPipeDir = "CUDA_MPS_PIPE_DIRECTORY"

// MPSEdits returns the edits that connect a container to the MPS control
// daemon of GPU gpuUUID, whose pipe directory is hostPipeDir on the host
// (docs/mps.md, what the claim's containers get): the pipe directory,
// read-write because clients make their sockets there, the variable naming
// it, and the host's /dev/shm. A container that uses several MPS GPUs gets
// one pipe directory each; the variable of the last one wins, as CUDA uses
// one daemon per process.
func MPSEdits(gpuUUID, hostPipeDir string) cdispec.ContainerEdits {
	dir := MPSContainerRoot + "/" + gpuUUID
	return cdispec.ContainerEdits{
		Env: []string{envMPSPipeDir + "=" + dir},
		Mounts: []*cdispec.Mount{
			{HostPath: hostPipeDir, ContainerPath: dir, Options: []string{"rw", "nosuid", "nodev", "noexec", "bind"}},
			{HostPath: MPSHostShm, ContainerPath: MPSHostShm, Options: []string{"rw", "nosuid", "nodev", "noexec", "bind"}},
		},
	}
}
