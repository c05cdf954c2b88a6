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

// Attributes of the devices published for a GPU in MIG mode (docs/mig.md).
// A MIG device also carries the GPU-wide attributes above (productName,
// driverVersion, pcieRoot, ...), but not uuid, index or minor, which belong
// to the parent GPU and are published as parentUUID and parentIndex.
const (
	// AttrProfile is the GPU-instance profile as nvidia-smi names it, e.g.
	// "3g.71gb". Only MIG devices carry it: DeviceClasses tell MIG devices
	// from whole GPUs by its presence.
	AttrProfile resourceapi.QualifiedName = "profile"
	// AttrPlacementStart and AttrPlacementSize are the instance's memory
	// slices: placementSize slices from placementStart.
	AttrPlacementStart resourceapi.QualifiedName = "placementStart"
	AttrPlacementSize  resourceapi.QualifiedName = "placementSize"
	// AttrParentUUID and AttrParentIndex identify the physical GPU.
	AttrParentUUID  resourceapi.QualifiedName = "parentUUID"
	AttrParentIndex resourceapi.QualifiedName = "parentIndex"
	// AttrStatic is true on a device for a GPU instance an admin made: it
	// exists whether allocated or not, and the plugin never destroys it.
	AttrStatic resourceapi.QualifiedName = "static"
	// AttrMIGEnabled is true on the whole-GPU device of a GPU in MIG mode,
	// which prepare realises as a full-size instance.
	AttrMIGEnabled resourceapi.QualifiedName = "migEnabled"
)

// CounterComputeSlices is the counter of a MIG-mode GPU's counter set that
// counts its compute slices (GPCs); each MIG device consumes its profile's.
const CounterComputeSlices = "compute-slices"

// MIGDeviceClass is the class of MIG devices (docs/mig.md); the other
// classes select only devices without a profile.
const MIGDeviceClass = "mig." + DriverName
