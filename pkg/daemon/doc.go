// Package daemon holds what every vgpu-dra binary does the same way around
// its own logic: a cobra command whose flags are grouped for --help, mirrored
// by environment variables and joined by the Kubernetes logging flags; a
// context cancelled by SIGINT/SIGTERM with a named contextual logger; a
// Kubernetes client from --kubeconfig or the service account; and the HTTP
// server for /metrics and health endpoints with a graceful shutdown.
package daemon
