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

// Package burstgrant keeps the node's book of burst grants (Book): per GPU,
// how much memory above its guarantee each prepared claim may use
// (docs/architecture.md, "Burstable memory"). It decides only; it does not
// talk to the library, NVML or the API server. The kubelet plugin's
// pkg/node/burstnode holds the node's one Book and connects it: the
// claims' burst.sock server, admission in prepare, the monitor's feed.
//
// A claim's guarantee on a GPU is what the scheduler booked for it there;
// its limit is its memoryLimit (the guarantee when unset). The Book grants
// memory above the guarantee in chunks of ChunkBytes, never beyond the limit,
// and only while, on that GPU,
//
//	sum over claims of (guarantee + grant) + use outside claims + pending guarantees <= memory - driver reserve
//
// so that, as long as the library holds every claim to guarantee + grant,
// sum over claims of max(use, guarantee) stays within the GPU's usable
// memory: no allocation within a guarantee fails because another claim
// bursts. Grants shrink from physical use (Shrink); a claim to be prepared
// is admitted only when its guarantee fits, and otherwise Admit names the
// claims whose grants to reclaim (the eviction choice, not the eviction).
//
// Each claim's grants are persisted in its host/burst file (format:
// pkg/contract/burstfile) before a grant is answered, so that a
// restarted plugin rebuilds them (Rebuild) and grants nothing twice. The
// book always accounts at least what any version of a file it wrote
// could show the library.
package burstgrant
