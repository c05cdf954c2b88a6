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

// Package burstfile is the Go side of a claim's burst grants, host/burst
// (contract: vgpu-core/include/vgpu_burstfile.h; libvgpu.so's reader is
// vgpu-core/src/burstfile.c): per GPU, how much memory above its guarantee
// the claim may use.
//
// The kubelet plugin's book of burst grants (pkg/node/burstgrant) writes the file
// (Render) into the claim's host directory, which containers see
// read-only, and reads it back after a restart; the monitor reads it for
// the claim's status. Parse refuses the whole file on any deviation from
// the format, exactly as the library does; a test runs both parsers over
// the same golden and hostile files.
package burstfile
