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

// Package hostpids is the Go side of a claim's host pid map, host/pids
// (contract: vgpu-core/include/vgpu_hostpids.h; libvgpu.so's reader is
// vgpu-core/src/hostpids.c).
//
// The kubelet plugin writes the map (Render, by pkg/node/hostpids' Mapper)
// into the claim's host directory, which containers see read-only: for each
// process in the claim's shared region, its host pid, which NVML names it
// by. Readers (Parse, ReadFile) refuse the whole file on any deviation from
// the format, exactly as the library does; a test runs both parsers over
// the same golden and hostile files.
package hostpids
