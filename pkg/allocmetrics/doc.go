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
