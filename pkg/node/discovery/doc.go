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

// Package discovery discovers the NVIDIA GPUs of a node through NVML (go-nvml)
// and watches them for XID critical errors.
//
// NVML is loaded at run time with dlopen, so the same code runs against the
// real libnvidia-ml.so.1 and against vgpu-core's fake library that tests and
// demos use to simulate GPU nodes.
package discovery
