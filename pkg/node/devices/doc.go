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

// Package devices turns discovered GPUs into the DRA devices that the
// vgpu.dra.dev driver publishes in its ResourceSlice: one shareable device
// per GPU (allowMultipleAllocations) with the attributes and the consumable
// `memory` and `cores` capacities of the contract in docs/architecture.md. docs/devices.md
// explains the published shape and the rounding rules.
package devices
