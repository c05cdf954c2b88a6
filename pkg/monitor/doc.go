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
// limits and live use. RemoveStaleClaimDirs keeps the claims directory free
// of directories whose claims are no longer prepared. PIDMapper writes each
// claim's host pid map (host/pids), with which libvgpu.so inside a pid
// namespace matches NVML's per-process data, which names host pids.
package monitor
