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
 * vgpu_nvml.h - the subset of NVML used by vgpu-core.
 *
 * Written from the public NVML API reference. Numeric values and structure
 * layouts match the real nvml.h (test/gpu/ checks this against the real
 * header on a GPU machine). As in vgpu_cuda.h, versioned functions are
 * declared under their exact exported names (no renaming macros).
 *
 * For each function F a pointer type PFN_F is declared with the same
 * signature, used when a function is resolved at run time.
 */
#ifndef VGPU_NVML_H
#define VGPU_NVML_H

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct nvmlEventSet_st *nvmlEventSet_t;

typedef enum nvmlReturn_enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NO_PERMISSION = 4,
    NVML_ERROR_ALREADY_INITIALIZED = 5,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_INSUFFICIENT_POWER = 8,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_TIMEOUT = 10,
    NVML_ERROR_IRQ_ISSUE = 11,
    NVML_ERROR_LIBRARY_NOT_FOUND = 12,
    NVML_ERROR_FUNCTION_NOT_FOUND = 13,
    NVML_ERROR_CORRUPTED_INFOROM = 14,
    NVML_ERROR_GPU_IS_LOST = 15,
    NVML_ERROR_RESET_REQUIRED = 16,
    NVML_ERROR_OPERATING_SYSTEM = 17,
    NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18,
    NVML_ERROR_IN_USE = 19,
    NVML_ERROR_MEMORY = 20,
    NVML_ERROR_NO_DATA = 21,
    NVML_ERROR_VGPU_ECC_NOT_SUPPORTED = 22,
    NVML_ERROR_INSUFFICIENT_RESOURCES = 23,
    NVML_ERROR_FREQ_NOT_SUPPORTED = 24,
    NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
    NVML_ERROR_DEPRECATED = 26,
    NVML_ERROR_NOT_READY = 27,
    NVML_ERROR_GPU_NOT_FOUND = 28,
    NVML_ERROR_INVALID_STATE = 29,
    NVML_ERROR_UNKNOWN = 999
} nvmlReturn_t;

/* Buffer sizes (bytes, including the terminating NUL). */
#define NVML_DEVICE_UUID_V2_BUFFER_SIZE 96
#define NVML_DEVICE_NAME_V2_BUFFER_SIZE 96
#define NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE 80
#define NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE 80
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE 32
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE 16

/* Versioned structures carry sizeof(struct) | (version << 24). */
#define NVML_STRUCT_VERSION(data, ver) \
    (unsigned int)(sizeof(nvml##data##_v##ver##_t) | (unsigned int)((ver) << 24U))

typedef enum nvmlBrandType_enum {
    NVML_BRAND_UNKNOWN = 0,
    NVML_BRAND_QUADRO = 1,
    NVML_BRAND_TESLA = 2,
    NVML_BRAND_NVS = 3,
    NVML_BRAND_GRID = 4,
    NVML_BRAND_GEFORCE = 5,
    NVML_BRAND_TITAN = 6,
    NVML_BRAND_NVIDIA_VAPPS = 7,
    NVML_BRAND_NVIDIA_VPC = 8,
    NVML_BRAND_NVIDIA_VCS = 9,
    NVML_BRAND_NVIDIA_VWS = 10,
    NVML_BRAND_NVIDIA_CLOUD_GAMING = 11,
    NVML_BRAND_QUADRO_RTX = 12,
    NVML_BRAND_NVIDIA_RTX = 13,
    NVML_BRAND_NVIDIA = 14,
    NVML_BRAND_GEFORCE_RTX = 15,
    NVML_BRAND_TITAN_RTX = 16
} nvmlBrandType_t;

typedef unsigned int nvmlDeviceArchitecture_t;
#define NVML_DEVICE_ARCH_KEPLER 2
#define NVML_DEVICE_ARCH_MAXWELL 3
#define NVML_DEVICE_ARCH_PASCAL 4
#define NVML_DEVICE_ARCH_VOLTA 5
#define NVML_DEVICE_ARCH_TURING 6
#define NVML_DEVICE_ARCH_AMPERE 7
#define NVML_DEVICE_ARCH_ADA 8
#define NVML_DEVICE_ARCH_HOPPER 9
#define NVML_DEVICE_ARCH_BLACKWELL 10
#define NVML_DEVICE_ARCH_UNKNOWN 0xffffffff

/* MIG modes reported by nvmlDeviceGetMigMode. */
#define NVML_DEVICE_MIG_DISABLE 0x0
#define NVML_DEVICE_MIG_ENABLE 0x1

/* Event type bits. */
#define nvmlEventTypeNone 0x0ULL
#define nvmlEventTypeSingleBitEccError 0x1ULL
#define nvmlEventTypeDoubleBitEccError 0x2ULL
#define nvmlEventTypePState 0x4ULL
#define nvmlEventTypeXidCriticalError 0x8ULL
#define nvmlEventTypeClock 0x10ULL
#define nvmlEventTypePowerSourceChange 0x80ULL

typedef struct nvmlPciInfo_st {
    char busIdLegacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE];
    unsigned int domain;
    unsigned int bus;
    unsigned int device;
    unsigned int pciDeviceId;
    unsigned int pciSubSystemId;
    char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
} nvmlPciInfo_t;

typedef struct nvmlMemory_st {
    unsigned long long total;
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_t;

typedef struct nvmlMemory_v2_st {
    unsigned int version;
    unsigned long long total;
    unsigned long long reserved;
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_v2_t;

/* Expected value of nvmlMemory_v2_t.version. */
#define nvmlMemory_v2 NVML_STRUCT_VERSION(Memory, 2)

typedef struct nvmlUtilization_st {
    unsigned int gpu;
    unsigned int memory;
} nvmlUtilization_t;

/* Layout used by the unversioned (v1) process queries. */
typedef struct nvmlProcessInfo_v1_st {
    unsigned int pid;
    unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1_t;

/* Layout used by the _v2 and _v3 process queries. */
typedef struct nvmlProcessInfo_st {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
} nvmlProcessInfo_t;

typedef struct nvmlProcessUtilizationSample_st {
    unsigned int pid;
    unsigned long long timeStamp;
    unsigned int smUtil;
    unsigned int memUtil;
    unsigned int encUtil;
    unsigned int decUtil;
} nvmlProcessUtilizationSample_t;

typedef struct nvmlDeviceAttributes_st {
    unsigned int multiprocessorCount;
    unsigned int sharedCopyEngineCount;
    unsigned int sharedDecoderCount;
    unsigned int sharedEncoderCount;
    unsigned int sharedJpegCount;
    unsigned int sharedOfaCount;
    unsigned int gpuInstanceSliceCount;
    unsigned int computeInstanceSliceCount;
    unsigned long long memorySizeMB;
} nvmlDeviceAttributes_t;

typedef struct nvmlEventData_st {
    nvmlDevice_t device;
    unsigned long long eventType;
    unsigned long long eventData;
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
} nvmlEventData_t;

/*
 * VGPU_NVML_API(name, params) declares the exported function `name` and the
 * matching pointer type PFN_name.
 */
#define VGPU_NVML_API(name, params) \
    nvmlReturn_t name params;       \
    typedef nvmlReturn_t(*PFN_##name) params

/* Library lifetime. */
VGPU_NVML_API(nvmlInit, (void));
VGPU_NVML_API(nvmlInit_v2, (void));
VGPU_NVML_API(nvmlInitWithFlags, (unsigned int flags));
VGPU_NVML_API(nvmlShutdown, (void));

/* Returns a static description of result; never NULL. */
const char *nvmlErrorString(nvmlReturn_t result);
typedef const char *(*PFN_nvmlErrorString)(nvmlReturn_t result);

/* System. */
VGPU_NVML_API(nvmlSystemGetDriverVersion, (char *version, unsigned int length));
VGPU_NVML_API(nvmlSystemGetNVMLVersion, (char *version, unsigned int length));
VGPU_NVML_API(nvmlSystemGetCudaDriverVersion, (int *cudaDriverVersion));
VGPU_NVML_API(nvmlSystemGetCudaDriverVersion_v2, (int *cudaDriverVersion));

/* Device enumeration. */
VGPU_NVML_API(nvmlDeviceGetCount, (unsigned int *deviceCount));
VGPU_NVML_API(nvmlDeviceGetCount_v2, (unsigned int *deviceCount));
VGPU_NVML_API(nvmlDeviceGetHandleByIndex, (unsigned int index, nvmlDevice_t *device));
VGPU_NVML_API(nvmlDeviceGetHandleByIndex_v2, (unsigned int index, nvmlDevice_t *device));
VGPU_NVML_API(nvmlDeviceGetHandleByUUID, (const char *uuid, nvmlDevice_t *device));
VGPU_NVML_API(nvmlDeviceGetHandleByPciBusId_v2, (const char *pciBusId, nvmlDevice_t *device));

/* Device identity. */
VGPU_NVML_API(nvmlDeviceGetUUID, (nvmlDevice_t device, char *uuid, unsigned int length));
VGPU_NVML_API(nvmlDeviceGetIndex, (nvmlDevice_t device, unsigned int *index));
VGPU_NVML_API(nvmlDeviceGetMinorNumber, (nvmlDevice_t device, unsigned int *minorNumber));
VGPU_NVML_API(nvmlDeviceGetName, (nvmlDevice_t device, char *name, unsigned int length));
VGPU_NVML_API(nvmlDeviceGetBrand, (nvmlDevice_t device, nvmlBrandType_t *type));
VGPU_NVML_API(nvmlDeviceGetArchitecture, (nvmlDevice_t device, nvmlDeviceArchitecture_t *arch));
VGPU_NVML_API(nvmlDeviceGetCudaComputeCapability, (nvmlDevice_t device, int *major, int *minor));
VGPU_NVML_API(nvmlDeviceGetPciInfo_v3, (nvmlDevice_t device, nvmlPciInfo_t *pci));
VGPU_NVML_API(nvmlDeviceGetNumaNodeId, (nvmlDevice_t device, unsigned int *node));
VGPU_NVML_API(nvmlDeviceGetAttributes_v2, (nvmlDevice_t device,
                                           nvmlDeviceAttributes_t *attributes));
VGPU_NVML_API(nvmlDeviceGetNumGpuCores, (nvmlDevice_t device, unsigned int *numCores));

/* MIG. */
VGPU_NVML_API(nvmlDeviceGetMigMode, (nvmlDevice_t device, unsigned int *currentMode,
                                     unsigned int *pendingMode));
VGPU_NVML_API(nvmlDeviceGetMaxMigDeviceCount, (nvmlDevice_t device, unsigned int *count));
VGPU_NVML_API(nvmlDeviceIsMigDeviceHandle, (nvmlDevice_t device, unsigned int *isMigDevice));

/* Memory, processes and utilisation. */
VGPU_NVML_API(nvmlDeviceGetMemoryInfo, (nvmlDevice_t device, nvmlMemory_t *memory));
VGPU_NVML_API(nvmlDeviceGetMemoryInfo_v2, (nvmlDevice_t device, nvmlMemory_v2_t *memory));
VGPU_NVML_API(nvmlDeviceGetComputeRunningProcesses, (nvmlDevice_t device,
                                                     unsigned int *infoCount,
                                                     nvmlProcessInfo_v1_t *infos));
VGPU_NVML_API(nvmlDeviceGetComputeRunningProcesses_v2, (nvmlDevice_t device,
                                                        unsigned int *infoCount,
                                                        nvmlProcessInfo_t *infos));
VGPU_NVML_API(nvmlDeviceGetComputeRunningProcesses_v3, (nvmlDevice_t device,
                                                        unsigned int *infoCount,
                                                        nvmlProcessInfo_t *infos));
VGPU_NVML_API(nvmlDeviceGetGraphicsRunningProcesses, (nvmlDevice_t device,
                                                      unsigned int *infoCount,
                                                      nvmlProcessInfo_v1_t *infos));
VGPU_NVML_API(nvmlDeviceGetGraphicsRunningProcesses_v2, (nvmlDevice_t device,
                                                         unsigned int *infoCount,
                                                         nvmlProcessInfo_t *infos));
VGPU_NVML_API(nvmlDeviceGetGraphicsRunningProcesses_v3, (nvmlDevice_t device,
                                                         unsigned int *infoCount,
                                                         nvmlProcessInfo_t *infos));
VGPU_NVML_API(nvmlDeviceGetProcessUtilization, (nvmlDevice_t device,
                                                nvmlProcessUtilizationSample_t *utilization,
                                                unsigned int *processSamplesCount,
                                                unsigned long long lastSeenTimeStamp));
VGPU_NVML_API(nvmlDeviceGetUtilizationRates, (nvmlDevice_t device,
                                              nvmlUtilization_t *utilization));

/* Events (XID health). */
VGPU_NVML_API(nvmlEventSetCreate, (nvmlEventSet_t *set));
VGPU_NVML_API(nvmlDeviceGetSupportedEventTypes, (nvmlDevice_t device,
                                                 unsigned long long *eventTypes));
VGPU_NVML_API(nvmlDeviceRegisterEvents, (nvmlDevice_t device, unsigned long long eventTypes,
                                         nvmlEventSet_t set));
VGPU_NVML_API(nvmlEventSetWait_v2, (nvmlEventSet_t set, nvmlEventData_t *data,
                                    unsigned int timeoutms));
VGPU_NVML_API(nvmlEventSetFree, (nvmlEventSet_t set));

#ifdef __cplusplus
}
#endif

#endif /* VGPU_NVML_H */
