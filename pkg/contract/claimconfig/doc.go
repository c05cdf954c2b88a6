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

// Package claimconfig is the Go side of a claim's config file,
// <claimdir>/config (contract: vgpu-core/include/vgpu_config.h;
// libvgpu.so's parser is vgpu-core/src/config.c): the claim's limits on each
// of its GPUs and its settings, which the library reads once at startup.
//
// The kubelet plugin (pkg/node/prepare) writes the file (Render) into the
// claim's directory, which containers see read-only. Parse accepts exactly
// what the library accepts and refuses what it refuses, with the values it
// reads; a test runs both parsers over the same golden, hostile, random and
// mutated files.
package claimconfig
