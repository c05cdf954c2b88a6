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

// Package monitor turns the shared regions of the claims prepared on a node
// into Prometheus metrics and ResourceClaim status.
//
// A Monitor reads every prepared claim's region (pkg/contract/region) and asks NVML
// for each GPU's memory use and utilisation, at most once per interval,
// whatever the scrape rate. Metrics are named vgpu_dra_* (docs/metrics.md);
// a region that is corrupt or gone counts in vgpu_dra_monitor_region_errors_total
// and is logged, and its claim's usage series are dropped rather than kept
// stale. The same snapshot feeds a rate-limited writer of
// ResourceClaim.status.devices, so `kubectl describe resourceclaim` shows
// limits and live use. It only reads: the claims and the paths of their
// files come from package prepare (ClaimSource), which alone writes and
// removes the claim directories; package hostpids writes the host pid maps.
package monitor
