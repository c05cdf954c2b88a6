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
 * driver.h - the real CUDA driver and NVML entry points, resolved lazily.
 *
 * libvgpu.so has no link-time dependency on either library: the first
 * wrapper called for a library finds the copy the process loaded (it is
 * loaded when an application reaches our wrapper) and resolves every name
 * below from its handle, which never sees our own exports.
 */
#ifndef VGPU_DRIVER_H
#define VGPU_DRIVER_H

#include <stdbool.h>

#include "vgpu_cuda.h"
#include "vgpu_nvml.h"

/* CUDA functions that libvgpu.so wraps (exported with these exact names). */
#define VGPU_CUDA_WRAPPED(X)                                                                       \
    X(cuInit)                                                                                      \
    X(cuGetProcAddress)                                                                            \
    X(cuGetProcAddress_v2)                                                                         \
    X(cuMemAlloc_v2)                                                                               \
    X(cuMemAllocPitch_v2)                                                                          \
    X(cuMemAllocManaged)                                                                           \
    X(cuMemFree_v2)                                                                                \
    X(cuMemAllocAsync)                                                                             \
    X(cuMemAllocAsync_ptsz)                                                                        \
    X(cuMemAllocFromPoolAsync)                                                                     \
    X(cuMemAllocFromPoolAsync_ptsz)                                                                \
    X(cuMemFreeAsync)                                                                              \
    X(cuMemFreeAsync_ptsz)                                                                         \
    X(cuMemPoolTrimTo)                                                                             \
    X(cuMemPoolDestroy)                                                                            \
    X(cuMemPoolCreate)                                                                             \
    X(cuStreamSynchronize)                                                                         \
    X(cuStreamSynchronize_ptsz)                                                                    \
    X(cuCtxSynchronize)                                                                            \
    X(cuMemCreate)                                                                                 \
    X(cuMemRelease)                                                                                \
    X(cuMemRetainAllocationHandle)                                                                 \
    X(cuMemMap)                                                                                    \
    X(cuMemUnmap)                                                                                  \
    X(cuMemExportToShareableHandle)                                                                \
    X(cuMemImportFromShareableHandle)                                                              \
    X(cuImportExternalMemory)                                                                      \
    X(cuDestroyExternalMemory)                                                                     \
    X(cuIpcGetMemHandle)                                                                           \
    X(cuIpcOpenMemHandle_v2)                                                                       \
    X(cuIpcCloseMemHandle)                                                                         \
    X(cuArrayCreate_v2)                                                                            \
    X(cuArray3DCreate_v2)                                                                          \
    X(cuArrayDestroy)                                                                              \
    X(cuMipmappedArrayCreate)                                                                      \
    X(cuMipmappedArrayDestroy)                                                                     \
    X(cuMemGetInfo_v2)                                                                             \
    X(cuDeviceTotalMem_v2)                                                                         \
    X(cuLaunchKernel)                                                                              \
    X(cuLaunchKernel_ptsz)                                                                         \
    X(cuLaunchKernelEx)                                                                            \
    X(cuLaunchKernelEx_ptsz)                                                                       \
    X(cuLaunchCooperativeKernel)                                                                   \
    X(cuLaunchCooperativeKernel_ptsz)                                                              \
    X(cuGraphLaunch)                                                                               \
    X(cuGraphLaunch_ptsz)                                                                          \
    X(cuGraphInstantiate_v2)                                                                       \
    X(cuGraphInstantiateWithFlags)                                                                 \
    X(cuGraphInstantiateWithParams)                                                                \
    X(cuGraphInstantiateWithParams_ptsz)                                                           \
    X(cuGraphUpload)                                                                               \
    X(cuGraphUpload_ptsz)                                                                          \
    X(cuGraphExecDestroy)                                                                          \
    X(cuDeviceGraphMemTrim)                                                                        \
    X(cuDevicePrimaryCtxRetain)                                                                    \
    X(cuDevicePrimaryCtxRelease)                                                                   \
    X(cuDevicePrimaryCtxRelease_v2)                                                                \
    X(cuDevicePrimaryCtxReset)                                                                     \
    X(cuDevicePrimaryCtxReset_v2)                                                                  \
    X(cuCtxDestroy)                                                                                \
    X(cuCtxDestroy_v2)                                                                             \
    X(cuCtxCreate_v2)                                                                              \
    X(cuCtxCreate_v3)                                                                              \
    X(cuCtxCreate_v4)                                                                              \
    X(cuGreenCtxCreate)                                                                            \
    X(cuGreenCtxDestroy)                                                                           \
    X(cuCtxSetLimit)                                                                               \
    X(cuMemAlloc)                                                                                  \
    X(cuMemFree)                                                                                   \
    X(cuMemGetInfo)                                                                                \
    X(cuDeviceTotalMem)

/* CUDA functions libvgpu.so only calls. */
#define VGPU_CUDA_USED(X)                                                                          \
    X(cuCtxGetDevice)                                                                              \
    X(cuDeviceGetUuid)                                                                             \
    X(cuDeviceGetUuid_v2)                                                                          \
    X(cuArrayGetMemoryRequirements)                                                                \
    X(cuMipmappedArrayGetMemoryRequirements)                                                       \
    X(cuStreamIsCapturing)                                                                         \
    X(cuStreamIsCapturing_ptsz)                                                                    \
    X(cuDeviceGetMemPool)                                                                          \
    X(cuDeviceGetDefaultMemPool)                                                                   \
    X(cuDeviceGetCount)                                                                            \
    X(cuStreamGetDevice)                                                                           \
    X(cuMemPoolGetAttribute)                                                                       \
    X(cuGraphGetNodes)                                                                             \
    X(cuGraphNodeGetType)                                                                          \
    X(cuGraphMemAllocNodeGetParams)                                                                \
    X(cuGraphChildGraphNodeGetGraph)                                                               \
    X(cuDeviceGetGraphMemAttribute)                                                                \
    X(cuCtxGetCurrent)                                                                             \
    X(cuCtxSetCurrent)                                                                             \
    X(cuEventCreate)                                                                               \
    X(cuEventDestroy_v2)                                                                           \
    X(cuEventRecord)                                                                               \
    X(cuEventQuery)                                                                                \
    X(cuEventElapsedTime)                                                                          \
    X(cuThreadExchangeStreamCaptureMode)                                                           \
    X(cuDevicePrimaryCtxGetState)                                                                  \
    X(cuCtxGetLimit)                                                                               \
    X(cuMemGetAddressRange_v2)                                                                     \
    X(cuMemGetAllocationPropertiesFromHandle)                                                      \
    X(cuMemGetAllocationGranularity)                                                               \
    X(cuMemAddressReserve)                                                                         \
    X(cuMemAddressFree)

/* NVML functions that libvgpu.so wraps. */
#define VGPU_NVML_WRAPPED(X)                                                                       \
    X(nvmlDeviceGetMemoryInfo)                                                                     \
    X(nvmlDeviceGetMemoryInfo_v2)                                                                  \
    X(nvmlDeviceGetComputeRunningProcesses)                                                        \
    X(nvmlDeviceGetComputeRunningProcesses_v2)                                                     \
    X(nvmlDeviceGetComputeRunningProcesses_v3)                                                     \
    X(nvmlDeviceGetGraphicsRunningProcesses)                                                       \
    X(nvmlDeviceGetGraphicsRunningProcesses_v2)                                                    \
    X(nvmlDeviceGetGraphicsRunningProcesses_v3)                                                    \
    X(nvmlDeviceGetProcessUtilization)                                                             \
    X(nvmlDeviceGetUtilizationRates)

/* NVML functions libvgpu.so only calls. */
#define VGPU_NVML_USED(X)                                                                          \
    X(nvmlInit_v2)                                                                                 \
    X(nvmlDeviceGetUUID)                                                                           \
    X(nvmlDeviceGetIndex)                                                                          \
    X(nvmlDeviceGetHandleByUUID)

#define VGPU_DECLARE_PFN(name) PFN_##name name;

struct vgpu_cuda_real {
    VGPU_CUDA_WRAPPED(VGPU_DECLARE_PFN)
    VGPU_CUDA_USED(VGPU_DECLARE_PFN)
};

struct vgpu_nvml_real {
    VGPU_NVML_WRAPPED(VGPU_DECLARE_PFN)
    VGPU_NVML_USED(VGPU_DECLARE_PFN)
};

/* Real entry points; NULL members are names the loaded driver lacks. */
extern struct vgpu_cuda_real vgpu_cu;
extern struct vgpu_nvml_real vgpu_nvml;

/*
 * For code on the path of every dlsym call: sanitizer runtimes resolve their
 * interceptors through dlsym before their shadow memory exists, so this path
 * must not be instrumented (it only compares a few characters).
 */
#define VGPU_NO_SANITIZE __attribute__((no_sanitize("address", "undefined")))

/* The real dlsym of libc, valid once vgpu_driver_dlsym_bootstrap() has run. */
extern void *(*vgpu_real_dlsym)(void *handle, const char *name);

/* Resolves vgpu_real_dlsym once (dlvsym, no private glibc symbols). */
void vgpu_driver_dlsym_bootstrap(void);

/*
 * Resolves vgpu_cu from the libcuda the process has loaded (by soname or
 * any path), else by opening libcuda.so.1 from the library path (tried
 * once). Returns 0, or -1 while no copy can be found; a failure is never
 * cached, so a driver the application loads later is found then.
 */
int vgpu_driver_cuda_load(void);

/* Like vgpu_driver_cuda_load for libnvidia-ml.so.1 and vgpu_nvml. */
int vgpu_driver_nvml_load(void);

/*
 * Like vgpu_driver_cuda_load / vgpu_driver_nvml_load, but only finds a copy the process
 * has loaded itself: a dlsym(RTLD_DEFAULT, "cu...") probe must not load
 * the driver on the application's behalf.
 */
bool vgpu_driver_cuda_present(void);
bool vgpu_driver_nvml_present(void);

/*
 * Forgets a table whose library the application has unloaded (its last
 * dlclose: the library keeps no reference of its own to a copy the
 * application loaded), so that a copy loaded later is resolved afresh.
 * Called on the lookup paths (dlsym), where an application gets new entry
 * points; not on every call.
 */
void vgpu_driver_revalidate(void);

/*
 * Like vgpu_driver_nvml_load, and keeps a reference of the library's own to the
 * copy: for NVML calls the library makes on its own behalf (the compute
 * limiter's thread, the context-overhead rule), which must not find it
 * unloaded by the application's dlclose. Returns 0 or -1.
 */
int vgpu_driver_nvml_hold(void);

/*
 * The same for the CUDA driver: the limiter's thread reads the events of
 * timed launches on its own behalf, which must not find the driver unloaded.
 */
int vgpu_driver_cuda_hold(void);

/* Whether stream (a _ptsz call's when ptsz) is capturing: work sent to it only builds a graph. */
bool vgpu_stream_capturing(CUstream stream, bool ptsz);

#endif /* VGPU_DRIVER_H */
