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

// Package gpuhealth turns NVML's XID events into the health of the node's
// published devices: the taint each one carries (devices.TaintPolicy) and
// the reason it is unhealthy, which the kubelet plugin publishes in its
// ResourceSlice and streams to the kubelet. An XID NVML attributes to a MIG
// instance concerns only that instance's devices.
package gpuhealth
