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

// Package daemon holds what every vgpu-dra binary does the same way around
// its own logic: a cobra command whose flags are grouped for --help, mirrored
// by environment variables and joined by the Kubernetes logging flags; a
// context cancelled by SIGINT/SIGTERM with a named contextual logger; a
// Kubernetes client from --kubeconfig or the service account; and the HTTP
// server for /metrics and health endpoints with a graceful shutdown.
package daemon
