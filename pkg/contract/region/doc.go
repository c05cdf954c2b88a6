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

// Package region is the Go side of the per-claim shared-region contract
// defined by vgpu-core/include/vgpu_region.h.
//
// The kubelet plugin creates the file (Create): a zero-filled regular file of
// exactly Size bytes that libvgpu.so initialises on first attach. Readers
// (Reader) take snapshots of it through one path, a read-only shared
// mapping: kept per claim by the monitor (Map, ReadMapping) or made for one
// read (Read); a read that faults because a container truncated the file
// returns an error instead of crashing the reader. The file is writable by the claim's
// containers, so every field is validated or clamped before use and a region
// that breaks the layout is reported as corrupt instead of being
// interpreted.
package region
