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

// Command fake-gpu-cdi writes the vendor CDI spec (kind nvidia.com/gpu, one
// device per GPU, named by UUID) for the simulated GPUs of vgpu-core's fake
// NVML, as "nvidia-ctk cdi generate --device-name-strategy=uuid" does for real
// GPUs. The kubelet plugin's --gpu-edits=cdi-spec mode composes its per-claim
// specs from it, so the e2e cluster and the demo exercise the same CDI path
// as production.
//
// The GPUs are discovered through the fake libnvidia-ml.so.1 (loaded the way
// the plugin loads it), so the UUIDs are the ones the plugin publishes. Every
// container that gets a simulated GPU also gets the fake driver libraries at
// the standard library path, the fake configuration file (read-only) and the
// simulated GPU state directory, so the processes in containers and the
// plugin on the host see the same GPUs.
package main
