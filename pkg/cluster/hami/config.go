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

package hami

import (
	corev1 "k8s.io/api/core/v1"
)

// Default names of HAMi's container resources.
const (
	DefaultCountResource            corev1.ResourceName = "nvidia.com/gpu"
	DefaultMemoryResource           corev1.ResourceName = "nvidia.com/gpumem"
	DefaultMemoryPercentageResource corev1.ResourceName = "nvidia.com/gpumem-percentage"
	DefaultCoresResource            corev1.ResourceName = "nvidia.com/gpucores"
	DefaultPriorityResource         corev1.ResourceName = "nvidia.com/priority"
)

// HAMi's pod annotations that restrict which GPUs a pod may get. Values are
// comma-separated lists.
const (
	AnnotationUseGPUType   = "nvidia.com/use-gputype"
	AnnotationNoUseGPUType = "nvidia.com/nouse-gputype"
	AnnotationUseGPUUUID   = "nvidia.com/use-gpuuuid"
	AnnotationNoUseGPUUUID = "nvidia.com/nouse-gpuuuid"
)

// AnnotationVGPUMode is HAMi's pod annotation that picks how a GPU is
// shared: VGPUModeHAMiCore (the default: a software slice), VGPUModeMIG
// (a MIG instance, the smallest profile whose memory fits nvidia.com/gpumem)
// or VGPUModeMPS (an MPS slice: a share of the SMs at the same time as the
// GPU's other MPS clients).
const (
	AnnotationVGPUMode = "nvidia.com/vgpu-mode"
	VGPUModeHAMiCore   = "hami-core"
	VGPUModeMIG        = "mig"
	VGPUModeMPS        = "mps"
)

// Labels on every template this package generates; the controller's
// garbage collector selects on TemplateLabel.
const (
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedByValue = "vgpu-dra-controller"
	TemplateLabel  = "vgpu.dra.dev/hami-template"
)

// ClaimNamePrefix starts the name of every pod resource claim and template
// that a translation adds.
const ClaimNamePrefix = "hami-"

// requestName is the one request of a generated claim.
const requestName = "gpu"

// ResourceNames are the container resource names read as HAMi requests.
type ResourceNames struct {
	// Count is the number of GPUs (HAMi nvidia.com/gpu).
	Count corev1.ResourceName
	// Memory is the GPU memory per GPU in MiB (nvidia.com/gpumem).
	Memory corev1.ResourceName
	// MemoryPercentage is the GPU memory per GPU in percent of the GPU
	// (nvidia.com/gpumem-percentage).
	MemoryPercentage corev1.ResourceName
	// Cores is the percentage of SM time per GPU (nvidia.com/gpucores).
	Cores corev1.ResourceName
	// Priority is 0 (high) or 1 (low) (nvidia.com/priority).
	Priority corev1.ResourceName
}

func (n ResourceNames) all() []corev1.ResourceName {
	return []corev1.ResourceName{n.Count, n.Memory, n.MemoryPercentage, n.Cores, n.Priority}
}

// Config says how to translate.
type Config struct {
	// Resources are the container resource names to translate.
	Resources ResourceNames
	// DeviceClassName is the DeviceClass the generated requests use.
	DeviceClassName string
	// MIGDeviceClassName is the DeviceClass of requests in MIG mode.
	MIGDeviceClassName string
	// MPSDeviceClassName is the DeviceClass of requests in MPS mode.
	MPSDeviceClassName string
	// DriverName is the DRA driver: the domain of the attributes used in
	// selectors and the driver of the opaque priority config.
	DriverName string
}
