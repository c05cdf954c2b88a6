// Package grafana holds the Grafana dashboard of the driver
// (vgpu-dra-dashboard.json) and the test that keeps its queries, and the
// PromQL cookbook of docs/metrics.md, on metric names the code exports.
package grafana
