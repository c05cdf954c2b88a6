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

// Package hami translates pods written for HAMi into DRA: container limits
// such as nvidia.com/gpu, nvidia.com/gpumem and nvidia.com/gpucores plus the
// nvidia.com/use-gputype family of annotations become ResourceClaimTemplates
// of the vgpu.dra.dev driver and a JSON patch that makes the pod reference
// them.
//
// Everything here is a pure function of the pod, the configuration and the
// GPU products published in ResourceSlices; creating the templates and
// admitting the patch is left to the webhook. Templates get a name derived
// from their content, so pods with the same request shape share one
// template and translating the same pod twice gives the same result.
package hami
