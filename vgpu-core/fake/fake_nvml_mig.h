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

/*
 * fake_nvml_mig.h - NVML's MIG ABI (types, constants, entry points) as the
 * fake libnvidia-ml.so.1 exports it, with the layouts of NVIDIA's nvml.h
 * (R470 and later). The rest of NVML's ABI is in include/vgpu_nvml.h, which
 * already declares nvmlDeviceGetMigMode, nvmlDeviceGetMaxMigDeviceCount and
 * nvmlDeviceIsMigDeviceHandle.
 */
#ifndef VGPU_FAKE_NVML_MIG_H
#define VGPU_FAKE_NVML_MIG_H

#include "vgpu_nvml.h"

typedef struct nvmlGpuInstance_st *nvmlGpuInstance_t;
typedef struct nvmlComputeInstance_st *nvmlComputeInstance_t;

/* GPU-instance profile ids (nvmlDeviceGetGpuInstanceProfileInfo's profile). */
#define NVML_GPU_INSTANCE_PROFILE_1_SLICE 0x0
#define NVML_GPU_INSTANCE_PROFILE_2_SLICE 0x1
#define NVML_GPU_INSTANCE_PROFILE_3_SLICE 0x2
#define NVML_GPU_INSTANCE_PROFILE_4_SLICE 0x3
#define NVML_GPU_INSTANCE_PROFILE_7_SLICE 0x4
#define NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1 0x7
#define NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2 0x9
#define NVML_GPU_INSTANCE_PROFILE_COUNT 0x12

/* Compute-instance profile ids. */
#define NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE 0x0
#define NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE 0x1
#define NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE 0x2
#define NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE 0x3
#define NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE 0x4
#define NVML_COMPUTE_INSTANCE_PROFILE_COUNT 0x9

#define NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED 0x0
#define NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_COUNT 0x1

typedef struct nvmlGpuInstancePlacement_st {
    unsigned int start; /* first memory slice */
    unsigned int size;  /* memory slices */
} nvmlGpuInstancePlacement_t;

typedef struct nvmlGpuInstanceProfileInfo_st {
    unsigned int id;
    unsigned int isP2pSupported;
    unsigned int sliceCount;
    unsigned int instanceCount;
    unsigned int multiprocessorCount;
    unsigned int copyEngineCount;
    unsigned int decoderCount;
    unsigned int encoderCount;
    unsigned int jpegCount;
    unsigned int ofaCount;
    unsigned long long memorySizeMB;
} nvmlGpuInstanceProfileInfo_t;

typedef struct nvmlGpuInstanceProfileInfo_v2_st {
    unsigned int version;
    unsigned int id;
    unsigned int isP2pSupported;
    unsigned int sliceCount;
    unsigned int instanceCount;
    unsigned int multiprocessorCount;
    unsigned int copyEngineCount;
    unsigned int decoderCount;
    unsigned int encoderCount;
    unsigned int jpegCount;
    unsigned int ofaCount;
    unsigned long long memorySizeMB;
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
} nvmlGpuInstanceProfileInfo_v2_t;

#define nvmlGpuInstanceProfileInfo_v2 NVML_STRUCT_VERSION(GpuInstanceProfileInfo, 2)

/* v3: no isP2pSupported; capabilities at the end. */
typedef struct nvmlGpuInstanceProfileInfo_v3_st {
    unsigned int version;
    unsigned int id;
    unsigned int sliceCount;
    unsigned int instanceCount;
    unsigned int multiprocessorCount;
    unsigned int copyEngineCount;
    unsigned int decoderCount;
    unsigned int encoderCount;
    unsigned int jpegCount;
    unsigned int ofaCount;
    unsigned long long memorySizeMB;
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
    unsigned int capabilities;
} nvmlGpuInstanceProfileInfo_v3_t;

#define nvmlGpuInstanceProfileInfo_v3 NVML_STRUCT_VERSION(GpuInstanceProfileInfo, 3)

typedef struct nvmlGpuInstanceInfo_st {
    nvmlDevice_t device;
    unsigned int id;
    unsigned int profileId;
    nvmlGpuInstancePlacement_t placement;
} nvmlGpuInstanceInfo_t;

typedef struct nvmlComputeInstancePlacement_st {
    unsigned int start; /* first compute slice within the GPU instance */
    unsigned int size;
} nvmlComputeInstancePlacement_t;

typedef struct nvmlComputeInstanceProfileInfo_st {
    unsigned int id;
    unsigned int sliceCount;
    unsigned int instanceCount;
    unsigned int multiprocessorCount;
    unsigned int sharedCopyEngineCount;
    unsigned int sharedDecoderCount;
    unsigned int sharedEncoderCount;
    unsigned int sharedJpegCount;
    unsigned int sharedOfaCount;
} nvmlComputeInstanceProfileInfo_t;

typedef struct nvmlComputeInstanceProfileInfo_v2_st {
    unsigned int version;
    unsigned int id;
    unsigned int sliceCount;
    unsigned int instanceCount;
    unsigned int multiprocessorCount;
    unsigned int sharedCopyEngineCount;
    unsigned int sharedDecoderCount;
    unsigned int sharedEncoderCount;
    unsigned int sharedJpegCount;
    unsigned int sharedOfaCount;
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
} nvmlComputeInstanceProfileInfo_v2_t;

#define nvmlComputeInstanceProfileInfo_v2 NVML_STRUCT_VERSION(ComputeInstanceProfileInfo, 2)

typedef struct nvmlComputeInstanceProfileInfo_v3_st {
    unsigned int version;
    unsigned int id;
    unsigned int sliceCount;
    unsigned int instanceCount;
    unsigned int multiprocessorCount;
    unsigned int sharedCopyEngineCount;
    unsigned int sharedDecoderCount;
    unsigned int sharedEncoderCount;
    unsigned int sharedJpegCount;
    unsigned int sharedOfaCount;
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
    unsigned int capabilities;
} nvmlComputeInstanceProfileInfo_v3_t;

#define nvmlComputeInstanceProfileInfo_v3 NVML_STRUCT_VERSION(ComputeInstanceProfileInfo, 3)

typedef struct nvmlComputeInstanceInfo_st {
    nvmlDevice_t device;
    nvmlGpuInstance_t gpuInstance;
    unsigned int id;
    unsigned int profileId;
    nvmlComputeInstancePlacement_t placement;
} nvmlComputeInstanceInfo_t;

/* GPU instances. */
VGPU_NVML_API(nvmlDeviceGetGpuInstanceProfileInfo, (nvmlDevice_t device, unsigned int profile,
                                                    nvmlGpuInstanceProfileInfo_t *info));
VGPU_NVML_API(nvmlDeviceGetGpuInstanceProfileInfoV, (nvmlDevice_t device, unsigned int profile,
                                                     nvmlGpuInstanceProfileInfo_v2_t *info));
VGPU_NVML_API(nvmlDeviceGetGpuInstancePossiblePlacements, (nvmlDevice_t device,
                                                           unsigned int profileId,
                                                           nvmlGpuInstancePlacement_t *placements,
                                                           unsigned int *count));
VGPU_NVML_API(nvmlDeviceGetGpuInstancePossiblePlacements_v2,
              (nvmlDevice_t device, unsigned int profileId, nvmlGpuInstancePlacement_t *placements,
               unsigned int *count));
VGPU_NVML_API(nvmlDeviceGetGpuInstanceRemainingCapacity, (nvmlDevice_t device,
                                                          unsigned int profileId,
                                                          unsigned int *count));
VGPU_NVML_API(nvmlDeviceCreateGpuInstance, (nvmlDevice_t device, unsigned int profileId,
                                            nvmlGpuInstance_t *gpuInstance));
VGPU_NVML_API(nvmlDeviceCreateGpuInstanceWithPlacement,
              (nvmlDevice_t device, unsigned int profileId,
               const nvmlGpuInstancePlacement_t *placement, nvmlGpuInstance_t *gpuInstance));
VGPU_NVML_API(nvmlGpuInstanceDestroy, (nvmlGpuInstance_t gpuInstance));
VGPU_NVML_API(nvmlDeviceGetGpuInstances, (nvmlDevice_t device, unsigned int profileId,
                                          nvmlGpuInstance_t *gpuInstances, unsigned int *count));
VGPU_NVML_API(nvmlDeviceGetGpuInstanceById, (nvmlDevice_t device, unsigned int id,
                                             nvmlGpuInstance_t *gpuInstance));
VGPU_NVML_API(nvmlGpuInstanceGetInfo, (nvmlGpuInstance_t gpuInstance,
                                       nvmlGpuInstanceInfo_t *info));

/* Compute instances. */
VGPU_NVML_API(nvmlGpuInstanceGetComputeInstanceProfileInfo,
              (nvmlGpuInstance_t gpuInstance, unsigned int profile, unsigned int engProfile,
               nvmlComputeInstanceProfileInfo_t *info));
VGPU_NVML_API(nvmlGpuInstanceGetComputeInstanceProfileInfoV,
              (nvmlGpuInstance_t gpuInstance, unsigned int profile, unsigned int engProfile,
               nvmlComputeInstanceProfileInfo_v2_t *info));
VGPU_NVML_API(nvmlGpuInstanceGetComputeInstanceRemainingCapacity,
              (nvmlGpuInstance_t gpuInstance, unsigned int profileId, unsigned int *count));
VGPU_NVML_API(nvmlGpuInstanceGetComputeInstancePossiblePlacements,
              (nvmlGpuInstance_t gpuInstance, unsigned int profileId,
               nvmlComputeInstancePlacement_t *placements, unsigned int *count));
VGPU_NVML_API(nvmlGpuInstanceCreateComputeInstance, (nvmlGpuInstance_t gpuInstance,
                                                     unsigned int profileId,
                                                     nvmlComputeInstance_t *computeInstance));
VGPU_NVML_API(nvmlGpuInstanceCreateComputeInstanceWithPlacement,
              (nvmlGpuInstance_t gpuInstance, unsigned int profileId,
               const nvmlComputeInstancePlacement_t *placement,
               nvmlComputeInstance_t *computeInstance));
VGPU_NVML_API(nvmlComputeInstanceDestroy, (nvmlComputeInstance_t computeInstance));
VGPU_NVML_API(nvmlGpuInstanceGetComputeInstances, (nvmlGpuInstance_t gpuInstance,
                                                   unsigned int profileId,
                                                   nvmlComputeInstance_t *computeInstances,
                                                   unsigned int *count));
VGPU_NVML_API(nvmlGpuInstanceGetComputeInstanceById, (nvmlGpuInstance_t gpuInstance,
                                                      unsigned int id,
                                                      nvmlComputeInstance_t *computeInstance));
VGPU_NVML_API(nvmlComputeInstanceGetInfo, (nvmlComputeInstance_t computeInstance,
                                           nvmlComputeInstanceInfo_t *info));
VGPU_NVML_API(nvmlComputeInstanceGetInfo_v2, (nvmlComputeInstance_t computeInstance,
                                              nvmlComputeInstanceInfo_t *info));

/* MIG device handles. */
VGPU_NVML_API(nvmlDeviceGetMigDeviceHandleByIndex, (nvmlDevice_t device, unsigned int index,
                                                    nvmlDevice_t *migDevice));
VGPU_NVML_API(nvmlDeviceGetDeviceHandleFromMigDeviceHandle, (nvmlDevice_t migDevice,
                                                             nvmlDevice_t *device));
VGPU_NVML_API(nvmlDeviceGetGpuInstanceId, (nvmlDevice_t device, unsigned int *id));
VGPU_NVML_API(nvmlDeviceGetComputeInstanceId, (nvmlDevice_t device, unsigned int *id));

#endif /* VGPU_FAKE_NVML_MIG_H */
