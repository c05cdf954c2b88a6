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

// Package burstsock is the Go side of the burst request protocol over a
// claim's host/burst.sock (contract: vgpu-core/include/vgpu_burstsock.h;
// libvgpu.so's client is vgpu-core/src/burst.c; docs/architecture.md,
// "Burstable memory").
//
// libvgpu.so asks the kubelet plugin's per-claim server
// (pkg/node/burstnode) for a grant with one request message and reads one
// reply. ParseRequest is the server's strict reading of a request; Granted
// and Refused spell its replies; ParseReply reads a reply exactly as the
// library does, and a test runs it and the library's reader over the same
// golden and hostile replies.
package burstsock
