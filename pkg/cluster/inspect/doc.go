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

// Package inspect answers the two questions operators of shared GPUs ask
// all day, from what the API server already holds (ResourceSlices,
// ResourceClaims with their allocations and the status the kubelet plugin
// writes, DeviceClasses, nodes and pods):
//
//   - who uses what on which GPU: per GPU (Nodes) and per claim (Claims),
//     capacity, what was granted and what is used;
//   - why a pod is Pending (Why): the pod's vGPU claims are put through
//     the same structured allocator the scheduler and the dra-controller
//     run (pkg/cluster/allocator, in dry run), per node and per GPU, and every
//     refusal is explained with the numbers and, where one exists, the
//     single change that makes the claim fit, itself checked with the
//     allocator.
//
// Nothing here writes to the cluster. The kubectl plugin cmd/kubectl-vgpu
// prints these results; docs/kubectl-vgpu.md describes its output.
package inspect
