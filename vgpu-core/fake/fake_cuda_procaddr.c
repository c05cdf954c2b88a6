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
 * fake_cuda_procaddr.c - cuGetProcAddress and cuGetProcAddress_v2.
 *
 * Like the real driver, lookups are by base name (e.g. "cuMemAlloc"), and
 * the result is the newest exported variant introduced at or before the
 * requested CUDA version; CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
 * selects the _ptsz/_ptds variant where one exists.
 *
 * A name the driver does not know, or a known one asked for with a CUDA
 * version older than its first variant, is not an error, as in NVIDIA's
 * drivers: CUDA_SUCCESS with *pfn = NULL and the reason in symbolStatus
 * (CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND or _VERSION_NOT_SUFFICIENT).
 */
#include <string.h>

#include "fake_cuda.h"

typedef struct proc_entry {
    const char *base;
    int version; /* CUDA version that introduced this variant */
    int ptsz;    /* per-thread default stream variant */
    void *fn;
} proc_entry;

#define E(base, version, fn) {base, version, 0, (void *)(fn)}
#define P(base, version, fn) {base, version, 1, (void *)(fn)}

static const proc_entry entries[] = {
    E("cuInit", 2000, cuInit),
    E("cuDriverGetVersion", 2020, cuDriverGetVersion),
    E("cuGetErrorString", 6000, cuGetErrorString),
    E("cuGetErrorName", 6000, cuGetErrorName),
    E("cuDeviceGet", 2000, cuDeviceGet),
    E("cuDeviceGetCount", 2000, cuDeviceGetCount),
    E("cuDeviceGetName", 2000, cuDeviceGetName),
    E("cuDeviceGetUuid", 9020, cuDeviceGetUuid),
    E("cuDeviceGetUuid", 11040, cuDeviceGetUuid_v2),
    E("cuDeviceTotalMem", 2000, cuDeviceTotalMem),
    E("cuDeviceTotalMem", 3020, cuDeviceTotalMem_v2),
    E("cuDeviceGetAttribute", 2000, cuDeviceGetAttribute),
    E("cuDeviceGetPCIBusId", 4010, cuDeviceGetPCIBusId),
    E("cuDeviceGetDefaultMemPool", 11020, cuDeviceGetDefaultMemPool),
    E("cuDeviceGetMemPool", 11020, cuDeviceGetMemPool),
    E("cuDeviceSetMemPool", 11020, cuDeviceSetMemPool),
    E("cuDevicePrimaryCtxRetain", 7000, cuDevicePrimaryCtxRetain),
    E("cuDevicePrimaryCtxGetState", 7000, cuDevicePrimaryCtxGetState),
    E("cuDevicePrimaryCtxRelease", 7000, cuDevicePrimaryCtxRelease),
    E("cuDevicePrimaryCtxRelease", 11000, cuDevicePrimaryCtxRelease_v2),
    E("cuDevicePrimaryCtxReset", 7000, cuDevicePrimaryCtxReset),
    E("cuDevicePrimaryCtxReset", 11000, cuDevicePrimaryCtxReset_v2),
    E("cuCtxCreate", 3020, cuCtxCreate_v2),
    E("cuCtxCreate", 11040, cuCtxCreate_v3),
    E("cuCtxCreate", 12050, cuCtxCreate_v4),
    E("cuCtxDestroy", 4000, cuCtxDestroy_v2),
    E("cuCtxGetCurrent", 4000, cuCtxGetCurrent),
    E("cuCtxSetCurrent", 4000, cuCtxSetCurrent),
    E("cuCtxGetDevice", 2000, cuCtxGetDevice),
    E("cuCtxSynchronize", 2000, cuCtxSynchronize),
    E("cuCtxSetLimit", 3010, cuCtxSetLimit),
    E("cuCtxGetLimit", 3010, cuCtxGetLimit),
    E("cuMemAlloc", 2000, cuMemAlloc),
    E("cuMemAlloc", 3020, cuMemAlloc_v2),
    E("cuMemFree", 2000, cuMemFree),
    E("cuMemFree", 3020, cuMemFree_v2),
    E("cuMemAllocHost", 3020, cuMemAllocHost_v2),
    E("cuMemHostAlloc", 2020, cuMemHostAlloc),
    E("cuMemFreeHost", 2000, cuMemFreeHost),
    E("cuMemHostRegister", 6050, cuMemHostRegister_v2),
    E("cuMemHostUnregister", 4000, cuMemHostUnregister),
    E("cuMemAllocPitch", 3020, cuMemAllocPitch_v2),
    E("cuMemAllocManaged", 6000, cuMemAllocManaged),
    E("cuMemGetInfo", 2000, cuMemGetInfo),
    E("cuMemGetInfo", 3020, cuMemGetInfo_v2),
    E("cuMemcpyHtoD", 3020, cuMemcpyHtoD_v2),
    P("cuMemcpyHtoD", 7000, cuMemcpyHtoD_v2_ptds),
    E("cuMemcpyDtoH", 3020, cuMemcpyDtoH_v2),
    P("cuMemcpyDtoH", 7000, cuMemcpyDtoH_v2_ptds),
    E("cuMemAllocAsync", 11020, cuMemAllocAsync),
    P("cuMemAllocAsync", 11020, cuMemAllocAsync_ptsz),
    E("cuMemFreeAsync", 11020, cuMemFreeAsync),
    P("cuMemFreeAsync", 11020, cuMemFreeAsync_ptsz),
    E("cuMemAllocFromPoolAsync", 11020, cuMemAllocFromPoolAsync),
    P("cuMemAllocFromPoolAsync", 11020, cuMemAllocFromPoolAsync_ptsz),
    E("cuMemPoolCreate", 11020, cuMemPoolCreate),
    E("cuMemPoolDestroy", 11020, cuMemPoolDestroy),
    E("cuMemPoolTrimTo", 11020, cuMemPoolTrimTo),
    E("cuMemPoolGetAttribute", 11020, cuMemPoolGetAttribute),
    E("cuMemPoolSetAttribute", 11020, cuMemPoolSetAttribute),
    E("cuMemCreate", 10020, cuMemCreate),
    E("cuMemRelease", 10020, cuMemRelease),
    E("cuMemRetainAllocationHandle", 11000, cuMemRetainAllocationHandle),
    E("cuMemAddressReserve", 10020, cuMemAddressReserve),
    E("cuMemAddressFree", 10020, cuMemAddressFree),
    E("cuMemMap", 10020, cuMemMap),
    E("cuMemUnmap", 10020, cuMemUnmap),
    E("cuMemSetAccess", 10020, cuMemSetAccess),
    E("cuMemGetAllocationGranularity", 10020, cuMemGetAllocationGranularity),
    E("cuMemExportToShareableHandle", 10020, cuMemExportToShareableHandle),
    E("cuMemImportFromShareableHandle", 10020, cuMemImportFromShareableHandle),
    E("cuMemGetAllocationPropertiesFromHandle", 10020, cuMemGetAllocationPropertiesFromHandle),
    E("cuDeviceGetDevResource", 12040, cuDeviceGetDevResource),
    E("cuDevSmResourceSplitByCount", 12040, cuDevSmResourceSplitByCount),
    E("cuDevResourceGenerateDesc", 12040, cuDevResourceGenerateDesc),
    E("cuGreenCtxCreate", 12040, cuGreenCtxCreate),
    E("cuGreenCtxDestroy", 12040, cuGreenCtxDestroy),
    E("cuCtxFromGreenCtx", 12040, cuCtxFromGreenCtx),
    E("cuGreenCtxGetDevResource", 12040, cuGreenCtxGetDevResource),
    E("cuGreenCtxStreamCreate", 12040, cuGreenCtxStreamCreate),
    E("cuImportExternalMemory", 10000, cuImportExternalMemory),
    E("cuExternalMemoryGetMappedBuffer", 10000, cuExternalMemoryGetMappedBuffer),
    E("cuExternalMemoryGetMappedMipmappedArray", 10000, cuExternalMemoryGetMappedMipmappedArray),
    E("cuDestroyExternalMemory", 10000, cuDestroyExternalMemory),
    E("cuIpcGetMemHandle", 4010, cuIpcGetMemHandle),
    E("cuIpcOpenMemHandle", 11000, cuIpcOpenMemHandle_v2),
    E("cuIpcCloseMemHandle", 4010, cuIpcCloseMemHandle),
    E("cuMemGetAddressRange", 3020, cuMemGetAddressRange_v2),
    E("cuArrayCreate", 3020, cuArrayCreate_v2),
    E("cuArray3DCreate", 3020, cuArray3DCreate_v2),
    E("cuArrayDestroy", 2000, cuArrayDestroy),
    E("cuArrayGetMemoryRequirements", 11060, cuArrayGetMemoryRequirements),
    E("cuMipmappedArrayCreate", 5000, cuMipmappedArrayCreate),
    E("cuMipmappedArrayDestroy", 5000, cuMipmappedArrayDestroy),
    E("cuMipmappedArrayGetMemoryRequirements", 11060, cuMipmappedArrayGetMemoryRequirements),
    E("cuModuleLoadData", 2000, cuModuleLoadData),
    E("cuModuleGetFunction", 2000, cuModuleGetFunction),
    E("cuModuleUnload", 2000, cuModuleUnload),
    E("cuLaunchKernel", 4000, cuLaunchKernel),
    P("cuLaunchKernel", 7000, cuLaunchKernel_ptsz),
    E("cuLaunchKernelEx", 11060, cuLaunchKernelEx),
    P("cuLaunchKernelEx", 11060, cuLaunchKernelEx_ptsz),
    E("cuLaunchCooperativeKernel", 9000, cuLaunchCooperativeKernel),
    P("cuLaunchCooperativeKernel", 9000, cuLaunchCooperativeKernel_ptsz),
    E("cuGraphCreate", 10000, cuGraphCreate),
    E("cuGraphAddMemAllocNode", 11040, cuGraphAddMemAllocNode),
    E("cuGraphAddMemFreeNode", 11040, cuGraphAddMemFreeNode),
    E("cuGraphGetNodes", 10000, cuGraphGetNodes),
    E("cuGraphNodeGetType", 10000, cuGraphNodeGetType),
    E("cuGraphMemAllocNodeGetParams", 11040, cuGraphMemAllocNodeGetParams),
    E("cuDeviceGetGraphMemAttribute", 11040, cuDeviceGetGraphMemAttribute),
    E("cuDeviceGraphMemTrim", 11040, cuDeviceGraphMemTrim),
    E("cuGraphInstantiate", 11000, cuGraphInstantiate_v2),
    E("cuGraphInstantiate", 12000, cuGraphInstantiateWithFlags),
    E("cuGraphInstantiateWithFlags", 11040, cuGraphInstantiateWithFlags),
    E("cuGraphInstantiateWithParams", 12000, cuGraphInstantiateWithParams),
    P("cuGraphInstantiateWithParams", 12000, cuGraphInstantiateWithParams_ptsz),
    E("cuGraphUpload", 11010, cuGraphUpload),
    P("cuGraphUpload", 11010, cuGraphUpload_ptsz),
    E("cuGraphLaunch", 10000, cuGraphLaunch),
    P("cuGraphLaunch", 10000, cuGraphLaunch_ptsz),
    E("cuGraphExecDestroy", 10000, cuGraphExecDestroy),
    E("cuGraphDestroy", 10000, cuGraphDestroy),
    E("cuStreamCreate", 2000, cuStreamCreate),
    E("cuStreamDestroy", 4000, cuStreamDestroy_v2),
    E("cuStreamSynchronize", 2000, cuStreamSynchronize),
    P("cuStreamSynchronize", 7000, cuStreamSynchronize_ptsz),
    E("cuStreamBeginCapture", 10010, cuStreamBeginCapture_v2),
    P("cuStreamBeginCapture", 10010, cuStreamBeginCapture_v2_ptsz),
    E("cuStreamEndCapture", 10000, cuStreamEndCapture),
    P("cuStreamEndCapture", 10000, cuStreamEndCapture_ptsz),
    E("cuStreamGetDevice", 12080, cuStreamGetDevice),
    E("cuStreamIsCapturing", 10000, cuStreamIsCapturing),
    P("cuStreamIsCapturing", 10000, cuStreamIsCapturing_ptsz),
    E("cuStreamGetCaptureInfo", 11030, cuStreamGetCaptureInfo_v2),
    P("cuStreamGetCaptureInfo", 11030, cuStreamGetCaptureInfo_v2_ptsz),
    E("cuStreamGetCaptureInfo", 12030, cuStreamGetCaptureInfo_v3),
    P("cuStreamGetCaptureInfo", 12030, cuStreamGetCaptureInfo_v3_ptsz),
    E("cuGetProcAddress", 11030, cuGetProcAddress),
    E("cuGetProcAddress", 12000, cuGetProcAddress_v2),
    E("cuGetExportTable", 3000, cuGetExportTable),
};

static CUresult resolve(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                        CUdriverProcAddressQueryResult *status)
{
    if (symbol == NULL || pfn == NULL ||
        (flags & ~(cuuint64_t)(CU_GET_PROC_ADDRESS_LEGACY_STREAM |
                               CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    int want_ptsz = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
    const proc_entry *best = NULL;
    int known = 0, has_ptsz = 0;
    size_t n = sizeof(entries) / sizeof(entries[0]);
    for (size_t i = 0; i < n; i++)
        if (strcmp(entries[i].base, symbol) == 0 && entries[i].ptsz)
            has_ptsz = 1;
    for (size_t i = 0; i < n; i++) {
        const proc_entry *e = &entries[i];
        if (strcmp(e->base, symbol) != 0)
            continue;
        known = 1;
        /* Without a per-thread variant, the ordinary one serves both flags. */
        if (e->ptsz != (want_ptsz && has_ptsz) || e->version > cudaVersion)
            continue;
        if (best == NULL || e->version > best->version)
            best = e;
    }
    *pfn = best != NULL ? best->fn : NULL;
    if (status != NULL)
        *status = best != NULL ? CU_GET_PROC_ADDRESS_SUCCESS
                  : known      ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                               : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_SUCCESS;
}

CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
    return resolve(symbol, pfn, cudaVersion, flags, NULL);
}

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                             CUdriverProcAddressQueryResult *symbolStatus)
{
    return resolve(symbol, pfn, cudaVersion, flags, symbolStatus);
}
