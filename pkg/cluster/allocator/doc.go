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

// Package allocator is the dra-controller's policy allocator. Stock
// Kubernetes allocates DRA devices first-fit; this package allocates the
// ResourceClaims of gated pods with the public structured allocator
// (k8s.io/dynamic-resource-allocation/structured, so CEL selectors,
// constraints and consumable capacity mean exactly what they mean to the
// scheduler) while choosing the node and the GPUs by policy:
//
//   - binpack or spread at node level and at GPU level (cluster default,
//     overridable per pod by annotation);
//   - same PCIe root, then same NUMA node, for claims with several GPUs;
//   - node fit beyond devices (node selector and affinity, taints, CPU and
//     memory requests against allocatable) with k8s.io/component-helpers.
//
// The Controller writes status.allocation with its own finalizer, removes
// the pod's scheduling gate, falls back to the scheduler with an event when
// the scheduler cannot place the pod, and releases allocations whose pods
// are gone. docs/allocation.md describes the design.
package allocator
