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

// Package quota limits the GPU memory and cores that the ResourceClaims of
// one namespace may request from the vgpu.dra.dev driver. Kubernetes'
// ResourceQuota counts devices only, not consumed capacity, so a shared GPU
// slice of 1Gi and a whole 80Gi GPU would count the same.
//
// An administrator sets the limits as annotations on the Namespace
// (AnnotationMemory, AnnotationCores). The admission webhook charges every
// new claim against them through a per-namespace usage record ConfigMap that is
// updated with optimistic concurrency (resourceVersion preconditions), so
// concurrent creates on any number of webhook replicas can never together
// exceed a limit. docs/controller.md explains the rules.
package quota
