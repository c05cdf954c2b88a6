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

// Package names holds the names of the vgpu.dra.dev contract, each spelled
// once on the Go side: the driver name, the attribute and capacity names of
// published devices (docs/devices.md), the device classes, the health taint
// key, the CDI vendor and the environment variables libvgpu.so reads
// (vgpu-core/include/vgpu_env.h on the C side). It imports no GPU library,
// so that cluster-side code (the policy allocator, the kubectl plugin) can
// speak about devices without linking NVML; package devices builds the
// devices themselves.
package names
