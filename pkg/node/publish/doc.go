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

// Package publish publishes the node's pool of the kubelet plugin: its GPUs
// as pkg/node/devices describes them, with their MIG state read at start,
// the instances the plugin owns and those being destroyed, and the taints
// of unhealthy GPUs. It reads the published slices back and republishes
// without counters when the API server dropped them (docs/install.md), and
// it withholds counters from a cluster whose scheduler cannot be trusted
// with them.
package publish
