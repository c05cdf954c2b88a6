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

// Package allocmetrics exports what the vgpu.dra.dev driver's GPUs have
// granted: per GPU its memory and cores capacity, how much is allocated and
// to how many claims; per claim what it was granted; per node the largest
// free memory on one GPU, which shows fragmentation (plenty of free memory
// in total, but no GPU with enough for the next claim).
//
// The metrics are computed from ResourceSlice and ResourceClaim informer
// caches at scrape time, so they never drift from the API's state and cost
// nothing between scrapes. Usage metrics (what containers really use) come
// from the kubelet plugin's monitor instead.
package allocmetrics
