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

// Package scale is the library of the scale benchmark (docs/scale.md): the
// simulated GPU nodes and the ResourceSlices their kubelet plugin would
// publish, the pods and claim templates of the workload, and the figures and
// checks computed from a run (latency percentiles, packing, capacity
// violations, process and API server counters, the report table).
//
// The control plane itself (etcd, kube-apiserver, kube-scheduler,
// kube-controller-manager, the KWOK controller, dra-controller) is started
// by test/scale/run.sh; cmd/scale-bench drives one arm of the run against it.
package scale
