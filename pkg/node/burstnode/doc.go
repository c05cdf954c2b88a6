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

// Package burstnode is the kubelet plugin's side of burstable memory
// (docs/architecture.md, "Burstable memory"): one burstgrant.Book per node
// (the Book decides; this package holds and connects it), fed by the monitor's collections (GPU memory and driver reserve, use
// outside claims, Shrink towards physical use, Reclaim after overhead
// grows), told of prepares and unprepares through prepare.BurstHooks
// (Admit before a claim's files, with a retryable wait when burst must be
// reclaimed first; the claim and its socket before its CDI spec; both gone
// at unprepare), and the per-claim socket (host/burst.sock) on which the
// library asks for burst with one SOCK_SEQPACKET message (format:
// pkg/contract/burstsock):
//
//	grow <GPU UUID> <bytes>\n   ->   granted <grant>\n | refused <reason> <grant>\n
//
// Reclaim itself (eviction) goes through the Reclaimer interface; the
// default only logs.
package burstnode
