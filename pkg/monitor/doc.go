// Package monitor turns the shared regions of the claims prepared on a node
// into Prometheus metrics and ResourceClaim status.
//
// A Monitor reads every prepared claim's region (pkg/region) and asks NVML
// for each GPU's memory use and utilisation, at most once per interval,
// whatever the scrape rate. Metrics are named vgpu_dra_* (docs/metrics.md);
// a region that is corrupt or gone counts in vgpu_dra_monitor_region_errors_total
// and is logged, and its claim's usage series are dropped rather than kept
// stale. The same snapshot feeds a rate-limited writer of
// ResourceClaim.status.devices, so `kubectl describe resourceclaim` shows
// limits and live use. It only reads: the claims and the paths of their
// files come from package claims (ClaimSource), which alone writes and
// removes the claim directories; package hostpids writes the host pid maps.
package monitor
