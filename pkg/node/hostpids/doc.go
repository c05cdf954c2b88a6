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

// Package hostpids writes each prepared claim's host pid map (format:
// pkg/contract/hostpids; libvgpu.so's reader is vgpu-core/src/hostpids.c).
//
// libvgpu.so runs in the container's pid namespace, but NVML names
// processes by host pid; to find its own process (context memory, SM share)
// in NVML's data it needs its host pid. The Mapper runs in the plugin, in the
// host pid namespace: every interval it reads the slots of each claim's
// shared region (package region) and resolves them through /proc, checking
// the start time and that the process maps the claim's region, then replaces
// the claim's map file (prepare.PreparedClaim.HostPIDsPath, mounted read-only
// into the claim's containers) when its content changed.
package hostpids
