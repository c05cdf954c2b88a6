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

package names

import resourceapi "k8s.io/api/resource/v1"

// AttrMPS is true on a GPU's MPS device (gpu-<index>-mps, docs/mps.md):
// mps.vgpu.dra.dev selects the devices that carry it, the other classes of
// whole GPUs and software slices those that do not.
const AttrMPS resourceapi.QualifiedName = "mps"

// CounterSharingMode is the one counter of a GPU's counter set when the
// GPU is not in MIG mode and the plugin publishes MPS devices: its
// whole-GPU device and its MPS device each consume all of it, so that the
// scheduler keeps time-sliced and MPS claims off one GPU at the same time.
const CounterSharingMode = "sharing-mode"

// MPSDeviceClass is the class of MPS devices (docs/mps.md).
const MPSDeviceClass = "mps." + DriverName
