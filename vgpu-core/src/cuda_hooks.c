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
 * cuda_hooks.c - the CUDA driver API wrappers exported by libvgpu.so.
 *
 * Each wrapper has the exact name of the driver export it replaces (the
 * version script lists them). Allocation paths reserve before calling the
 * driver and commit or roll back after; frees of pointers never tracked go
 * straight to the driver. Out-parameters are only touched after success.
 */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "acct.h"
#include "driver.h"
#include "gpus.h"
#include "graphs.h"
#include "limiter.h"
#include "log.h"
#include "mps.h"
#include "mps_user.h"
#include "process.h"
#include "nvml_query.h"
#include "pools.h"
#include "region.h"
#include "sharefd.h"

/* Loads the driver and our limits; a driver without the function reports NOT_INITIALIZED. */
#define ENTER(name)                                                                                \
    do {                                                                                           \
        if (vgpu_driver_cuda_load() != 0 || vgpu_cu.name == NULL)                                  \
            return CUDA_ERROR_NOT_INITIALIZED;                                                     \
        vgpu_process_init();                                                                        \
    } while (0)

/* Device of the current context; false when there is none (the driver will then fail). */
static bool current_device(CUdevice *dev)
{
    return vgpu_cu.cuCtxGetDevice != NULL && vgpu_cu.cuCtxGetDevice(dev) == CUDA_SUCCESS;
}

/*
 * Contexts: the driver's memory for a new context, or for a context limit
 * raised with cuCtxSetLimit (stack, printf FIFO, malloc heap), shows in
 * NVML as this process's, and the overhead rule charges it. It counts
 * against the claim like an allocation: measured right after the driver
 * call; when the call took the claim past its limit, it is undone (the
 * context given back, the limit set back) and fails with
 * CUDA_ERROR_OUT_OF_MEMORY, as the driver's own does on a GPU without room.
 * So a container cannot hold memory beyond its limit in contexts (one per
 * process, or many per process) or their limits. Memory a driver maps only
 * later (a heap at the first launch that uses it) is charged by the
 * overhead rule at the next cuMemGetInfo.
 */
static uint64_t context_overhead(struct vgpu_gpu *g)
{
    if (g == NULL || !g->enforce)
        return 0;
    vgpu_acct_gpu_verify(g);
    return vgpu_nvml_query_overhead(g);
}

/*
 * After a driver call that may have taken memory for a context, with
 * before the overhead charged before it: whether it took the claim past its
 * limit (overhead is charged without a limit check, so only it can).
 */
static bool took_past_limit(struct vgpu_gpu *g, uint64_t before)
{
    if (context_overhead(g) <= before)
        return false;
    return (g->limit != 0 && vgpu_acct_gpu_used(g) > vgpu_acct_gpu_limit_now(g)) ||
           (g->nparts > 0 && g->parts[0].limit != 0 &&
            vgpu_region_used(g->parts[0].shm, g->parts[0].rec) > vgpu_part_limit(g, 0));
}

/* After undoing such a call: returns what it took and says why the call fails. */
static CUresult refused(struct vgpu_gpu *g, const char *what)
{
    (void)context_overhead(g);
    VGPU_INFO("GPU %s: %s would take the claim past its limit; refused", g->uuid, what);
    return CUDA_ERROR_OUT_OF_MEMORY;
}

#define CONTEXT_BODY(name, pctx, dev, undo, ...)                                                   \
    do {                                                                                           \
        struct vgpu_gpu *g;                                                                        \
        uint64_t before;                                                                           \
        __typeof__(*(pctx)) saved;                                                                 \
        CUresult rc;                                                                               \
        ENTER(name);                                                                               \
        g = NULL;                                                                                  \
        if (pctx != NULL && (rc = vgpu_gpu_refusal(dev, &g)) != CUDA_SUCCESS)                      \
            return rc;                                                                             \
        if (g == NULL || !g->enforce)                                                              \
            return vgpu_cu.name(__VA_ARGS__);                                                      \
        before = context_overhead(g);                                                              \
        saved = *pctx;                                                                             \
        rc = vgpu_cu.name(__VA_ARGS__);                                                            \
        if (rc != CUDA_SUCCESS || !took_past_limit(g, before))                                     \
            return rc;                                                                             \
        undo;                                                                                      \
        *pctx = saved;                                                                             \
        return refused(g, "a new context");                                                       \
    } while (0)

/*
 * Undoes a context creation: destroys the context, which creation made
 * current, and makes current again the one that was (prev, read before).
 */
static void destroy_context(CUcontext ctx, CUcontext prev)
{
    if (vgpu_cu.cuCtxDestroy_v2 != NULL)
        vgpu_cu.cuCtxDestroy_v2(ctx);
    if (vgpu_cu.cuCtxSetCurrent != NULL)
        vgpu_cu.cuCtxSetCurrent(prev);
}

/* The current context, NULL if none (or unknown). */
static CUcontext current_context(void)
{
    CUcontext c = NULL;

    if (vgpu_cu.cuCtxGetCurrent == NULL || vgpu_cu.cuCtxGetCurrent(&c) != CUDA_SUCCESS)
        return NULL;
    return c;
}

/* Undoes a primary context retain that created it. */
#define RELEASE_PRIMARY(dev)                                                                       \
    do {                                                                                           \
        if (vgpu_cu.cuDevicePrimaryCtxRelease_v2 != NULL)                                          \
            vgpu_cu.cuDevicePrimaryCtxRelease_v2(dev);                                             \
    } while (0)

CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    unsigned int flags = 0;
    int active = 0;

    ENTER(cuDevicePrimaryCtxRetain);
    /* Active already: the retain takes nothing (and skips NVML on this frequent call). */
    if (vgpu_cu.cuDevicePrimaryCtxGetState != NULL &&
        vgpu_cu.cuDevicePrimaryCtxGetState(dev, &flags, &active) == CUDA_SUCCESS && active)
        return vgpu_cu.cuDevicePrimaryCtxRetain(pctx, dev);
    CONTEXT_BODY(cuDevicePrimaryCtxRetain, pctx, dev, RELEASE_PRIMARY(dev), pctx, dev);
}

/*
 * A green context (CUDA 12.4+) is a context of its own on part of the
 * device's SMs: the memory it takes is charged by the context rule like
 * cuCtxCreate's, and past the limit it is destroyed again and refused
 * (creation does not make it current: nothing else to undo). Its launches
 * go through the launch wrappers like any context's; the SM limit is the
 * claim's share of the whole GPU's time, whatever partition runs them.
 */
CUresult cuGreenCtxCreate(CUgreenCtx *phCtx, CUdevResourceDesc desc, CUdevice dev,
                          unsigned int flags)
{
    CONTEXT_BODY(cuGreenCtxCreate, phCtx, dev, vgpu_cu.cuGreenCtxDestroy(*phCtx), phCtx, desc,
                 dev, flags);
}

/* Not a context: a NULL context passed to a destroy ends no timing. */
#define CU_CONTEXT_NONE ((CUcontext)(uintptr_t)1)

/*
 * Context ends: the compute limiter's timing events in the context go first,
 * while it exists (limiter.h). A primary context's handle is not known from
 * its device, so its release or reset ends every timing; the next timed
 * launch starts new ones.
 */
#define CONTEXT_ENDING(name, ctx, ...)                                                             \
    do {                                                                                           \
        ENTER(name);                                                                               \
        if (__atomic_load_n(&vgpu_any_sm_limit, __ATOMIC_RELAXED))                                  \
            vgpu_limiter_context_ending(ctx);                                                      \
        return vgpu_cu.name(__VA_ARGS__);                                                          \
    } while (0)

CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
    CONTEXT_ENDING(cuDevicePrimaryCtxRelease, NULL, dev);
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    CONTEXT_ENDING(cuDevicePrimaryCtxRelease_v2, NULL, dev);
}

CUresult cuDevicePrimaryCtxReset(CUdevice dev)
{
    CONTEXT_ENDING(cuDevicePrimaryCtxReset, NULL, dev);
}

CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
    CONTEXT_ENDING(cuDevicePrimaryCtxReset_v2, NULL, dev);
}

/* A NULL context is the driver's error to report: no timing ends. */
CUresult cuCtxDestroy(CUcontext ctx)
{
    CONTEXT_ENDING(cuCtxDestroy, ctx != NULL ? ctx : CU_CONTEXT_NONE, ctx);
}

CUresult cuCtxDestroy_v2(CUcontext ctx)
{
    CONTEXT_ENDING(cuCtxDestroy_v2, ctx != NULL ? ctx : CU_CONTEXT_NONE, ctx);
}

/* Its CUcontext is not known here: every timing ends, as for a primary context. */
CUresult cuGreenCtxDestroy(CUgreenCtx hCtx)
{
    CONTEXT_ENDING(cuGreenCtxDestroy, NULL, hCtx);
}

CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    CUcontext prev = current_context();

    CONTEXT_BODY(cuCtxCreate_v2, pctx, dev, destroy_context(*pctx, prev), pctx, flags, dev);
}

CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray, int numParams,
                        unsigned int flags, CUdevice dev)
{
    CUcontext prev = current_context();

    CONTEXT_BODY(cuCtxCreate_v3, pctx, dev, destroy_context(*pctx, prev), pctx, paramsArray,
                 numParams, flags, dev);
}

CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams, unsigned int flags,
                        CUdevice dev)
{
    CUcontext prev = current_context();

    CONTEXT_BODY(cuCtxCreate_v4, pctx, dev, destroy_context(*pctx, prev), pctx, ctxCreateParams,
                 flags, dev);
}

CUresult cuCtxSetLimit(CUlimit limit, size_t value)
{
    struct vgpu_gpu *g;
    uint64_t before;
    size_t old = 0;
    CUdevice dev;
    CUresult rc;

    ENTER(cuCtxSetLimit);
    if (!current_device(&dev))
        return vgpu_cu.cuCtxSetLimit(limit, value);
    if ((rc = vgpu_gpu_refusal(dev, &g)) != CUDA_SUCCESS)
        return rc;
    if (g == NULL || !g->enforce ||
        vgpu_cu.cuCtxGetLimit == NULL || vgpu_cu.cuCtxGetLimit(&old, limit) != CUDA_SUCCESS)
        return vgpu_cu.cuCtxSetLimit(limit, value);
    before = context_overhead(g);
    rc = vgpu_cu.cuCtxSetLimit(limit, value);
    if (rc != CUDA_SUCCESS || !took_past_limit(g, before))
        return rc;
    vgpu_cu.cuCtxSetLimit(limit, old);
    return refused(g, "a larger context limit");
}

/* Shared body of the allocators that return a device pointer. */
#define ALLOC_BODY(name, dptr, size, ...)                                                          \
    do {                                                                                           \
        struct vgpu_charge c;                                                                      \
        CUdevice dev;                                                                              \
        CUresult rc;                                                                               \
        ENTER(name);                                                                               \
        if (dptr == NULL || !current_device(&dev))                                                 \
            return vgpu_cu.name(__VA_ARGS__);                                                      \
        rc = vgpu_charge_begin(dev, -1, size, &c);                                                 \
        if (rc != CUDA_SUCCESS)                                                                    \
            return rc;                                                                             \
        rc = vgpu_cu.name(__VA_ARGS__);                                                            \
        if (rc == CUDA_SUCCESS)                                                                    \
            vgpu_charge_commit(&c, VGPU_KIND_PTR, *dptr);                                          \
        else                                                                                       \
            vgpu_charge_abort(&c);                                                                 \
        return rc;                                                                                 \
    } while (0)

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    ALLOC_BODY(cuMemAlloc_v2, dptr, bytesize, dptr, bytesize);
}

CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    ALLOC_BODY(cuMemAllocManaged, dptr, bytesize, dptr, bytesize, flags);
}

/*
 * Device of a stream: the legacy and per-thread streams belong to the
 * current context. Drivers before CUDA 12.8 cannot tell for other streams:
 * the current context's device is charged there.
 */
static bool stream_device(CUstream stream, CUdevice *dev)
{
    if (stream != NULL && stream != CU_STREAM_LEGACY && stream != CU_STREAM_PER_THREAD &&
        vgpu_cu.cuStreamGetDevice != NULL)
        return vgpu_cu.cuStreamGetDevice(stream, dev) == CUDA_SUCCESS;
    return current_device(dev);
}

/*
 * Stream-ordered allocations: the claim is charged what their pool reserves
 * (pools.h), on the pool's device: the location of an explicit pool, the
 * stream's device for its current pool.
 */
#define POOL_ALLOC_BODY(name, dptr, size, explicit_pool, pool, stream, ptsz, ...)                  \
    do {                                                                                           \
        struct vgpu_pool_op op;                                                                    \
        CUdeviceptr saved;                                                                         \
        CUdevice dev;                                                                              \
        CUresult rc;                                                                               \
        ENTER(name);                                                                               \
        if (dptr == NULL || size == 0 || !stream_device(stream, &dev))                             \
            return vgpu_cu.name(__VA_ARGS__);                                                      \
        /* Captured: an allocation node, charged when its graph is launched (graphs.h). */       \
        if (vgpu_stream_capturing(stream, ptsz))                                                   \
            return vgpu_cu.name(__VA_ARGS__);                                                      \
        /* A NULL pool given explicitly is invalid: the driver refuses it, nothing to charge. */  \
        if (explicit_pool && pool == NULL)                                                         \
            return vgpu_cu.name(__VA_ARGS__);                                                      \
        if (explicit_pool)                                                                         \
            dev = vgpu_pool_device(pool, dev);                                                     \
        rc = vgpu_pool_alloc_begin(dev, pool, size, &op);                                          \
        if (rc != CUDA_SUCCESS)                                                                    \
            return rc;                                                                             \
        saved = *dptr;                                                                             \
        rc = vgpu_cu.name(__VA_ARGS__);                                                            \
        return vgpu_pool_alloc_end(&op, rc, dptr, saved, stream, ptsz);                            \
    } while (0)

CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    POOL_ALLOC_BODY(cuMemAllocAsync, dptr, bytesize, false, NULL, hStream, false, dptr, bytesize,
                    hStream);
}

CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    POOL_ALLOC_BODY(cuMemAllocAsync_ptsz, dptr, bytesize, false, NULL, hStream, true, dptr,
                    bytesize, hStream);
}

CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                 CUstream hStream)
{
    POOL_ALLOC_BODY(cuMemAllocFromPoolAsync, dptr, bytesize, true, pool, hStream, false, dptr,
                    bytesize, pool, hStream);
}

CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                      CUstream hStream)
{
    POOL_ALLOC_BODY(cuMemAllocFromPoolAsync_ptsz, dptr, bytesize, true, pool, hStream, true, dptr,
                    bytesize, pool, hStream);
}

/* Calls the driver and, when it succeeded, observes what it released (after). */
#define CALL_THEN(name, after, ...)                                                                \
    do {                                                                                           \
        CUresult rc;                                                                               \
        ENTER(name);                                                                               \
        rc = vgpu_cu.name(__VA_ARGS__);                                                            \
        if (rc == CUDA_SUCCESS)                                                                    \
            after;                                                                                 \
        return rc;                                                                                 \
    } while (0)

CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
    CALL_THEN(cuMemPoolTrimTo, vgpu_pool_observe(pool), pool, minBytesToKeep);
}

CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps)
{
    CUresult rc;

    ENTER(cuMemPoolCreate);
    rc = vgpu_cu.cuMemPoolCreate(pool, poolProps);
    if (rc == CUDA_SUCCESS && pool != NULL && poolProps != NULL &&
        poolProps->location.type == CU_MEM_LOCATION_TYPE_DEVICE)
        vgpu_pool_created(*pool, poolProps->location.id);
    return rc;
}

CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
    CALL_THEN(cuMemPoolDestroy, vgpu_pool_destroyed(pool), pool);
}

/* Synchronizing lets pools (and graph memory) release memory down to their threshold. */
#define SYNC_BODY(name, ...) CALL_THEN(name, vgpu_pools_observe_all(), __VA_ARGS__)

CUresult cuStreamSynchronize(CUstream hStream)
{
    SYNC_BODY(cuStreamSynchronize, hStream);
}

CUresult cuStreamSynchronize_ptsz(CUstream hStream)
{
    SYNC_BODY(cuStreamSynchronize_ptsz, hStream);
}

CUresult cuCtxSynchronize(void)
{
    SYNC_BODY(cuCtxSynchronize);
}

/*
 * Graph memory (graphs.h): instantiation records what the graph's allocation
 * nodes take per device; an upload at instantiation reserves it like a launch.
 */
#define INSTANTIATE_BODY(name, exec, graph, upload, ...)                                           \
    do {                                                                                           \
        uint64_t bytes[VGPU_MAX_GPUS];                                                             \
        struct vgpu_graph_op op;                                                                   \
        bool any;                                                                                  \
        CUresult rc;                                                                               \
        ENTER(name);                                                                               \
        if (exec == NULL || graph == NULL)                                                         \
            return vgpu_cu.name(__VA_ARGS__);                                                      \
        rc = vgpu_graph_footprint(graph, bytes, &any);                                             \
        if (rc != CUDA_SUCCESS)                                                                    \
            return rc;                                                                             \
        if (!any)                                                                                  \
            return vgpu_cu.name(__VA_ARGS__);                                                      \
        op.active = false;                                                                         \
        if ((upload) && (rc = vgpu_pools_graph_mem_begin(bytes, &op)) != CUDA_SUCCESS)             \
            return rc;                                                                             \
        rc = vgpu_cu.name(__VA_ARGS__);                                                            \
        vgpu_pools_graph_mem_end(&op);                                                             \
        if (rc == CUDA_SUCCESS && !vgpu_graph_exec_add(*exec, bytes)) {                            \
            /* Unrecorded, its launches would allocate unseen. */                                  \
            VGPU_WARN("out of memory recording a graph's allocations; refusing the graph");        \
            if (vgpu_cu.cuGraphExecDestroy != NULL)                                                \
                vgpu_cu.cuGraphExecDestroy(*exec);                                                 \
            rc = CUDA_ERROR_OUT_OF_MEMORY;                                                         \
        }                                                                                          \
        return rc;                                                                                 \
    } while (0)

CUresult cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
                               char *logBuffer, size_t bufferSize)
{
    INSTANTIATE_BODY(cuGraphInstantiate_v2, phGraphExec, hGraph, false, phGraphExec, hGraph,
                     phErrorNode, logBuffer, bufferSize);
}

CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph,
                                     unsigned long long flags)
{
    INSTANTIATE_BODY(cuGraphInstantiateWithFlags, phGraphExec, hGraph, false, phGraphExec, hGraph,
                     flags);
}

/* Whether instantiating with params p uploads the graph (maps its memory). */
#define UPLOADS(p) ((p) != NULL && ((p)->flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD))

CUresult cuGraphInstantiateWithParams(CUgraphExec *phGraphExec, CUgraph hGraph,
                                      CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
    INSTANTIATE_BODY(cuGraphInstantiateWithParams, phGraphExec, hGraph, UPLOADS(instantiateParams),
                     phGraphExec, hGraph, instantiateParams);
}

CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec *phGraphExec, CUgraph hGraph,
                                           CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
    INSTANTIATE_BODY(cuGraphInstantiateWithParams_ptsz, phGraphExec, hGraph,
                     UPLOADS(instantiateParams), phGraphExec, hGraph, instantiateParams);
}

/* An upload maps the graph's memory ahead of its launch. */
CUresult cuGraphUpload(CUgraphExec hGraphExec, CUstream hStream)
{
    ENTER(cuGraphUpload);
    return vgpu_graph_run(vgpu_cu.cuGraphUpload, hGraphExec, hStream);
}

CUresult cuGraphUpload_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
    ENTER(cuGraphUpload_ptsz);
    return vgpu_graph_run(vgpu_cu.cuGraphUpload_ptsz, hGraphExec, hStream);
}

CUresult cuGraphExecDestroy(CUgraphExec hGraphExec)
{
    CALL_THEN(cuGraphExecDestroy, vgpu_graph_exec_forget(hGraphExec), hGraphExec);
}

CUresult cuDeviceGraphMemTrim(CUdevice device)
{
    CALL_THEN(cuDeviceGraphMemTrim, vgpu_pools_graph_mem_observe(device), device);
}

CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
                            unsigned int ElementSizeBytes)
{
    struct vgpu_charge c;
    CUdevice dev;
    CUresult rc;

    ENTER(cuMemAllocPitch_v2);
    if (dptr == NULL || pPitch == NULL || !current_device(&dev) ||
        (Height != 0 && WidthInBytes > SIZE_MAX / Height))
        return vgpu_cu.cuMemAllocPitch_v2(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
    /* Reserve the unpadded size first, then the padding once the driver chose the pitch. */
    rc = vgpu_charge_begin(dev, -1, (uint64_t)WidthInBytes * Height, &c);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = vgpu_cu.cuMemAllocPitch_v2(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
    if (rc != CUDA_SUCCESS) {
        vgpu_charge_abort(&c);
        return rc;
    }
    if (*pPitch > WidthInBytes &&
        vgpu_charge_resize(&c, (uint64_t)*pPitch * Height) != CUDA_SUCCESS) {
        vgpu_cu.cuMemFree_v2(*dptr);
        vgpu_charge_abort(&c);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    vgpu_charge_commit(&c, VGPU_KIND_PTR, *dptr);
    return CUDA_SUCCESS;
}

/*
 * Shared body of the frees: key of the given kind is untracked before the
 * driver call and its bytes leave the claim after it (acct.h): the claim
 * over-counts while the driver frees, never under-counts.
 */
#define FREE_BODY(name, kind, key, ...)                                                            \
    do {                                                                                           \
        struct vgpu_ptrmap_entry e;                                                                \
        bool tracked;                                                                              \
        CUresult rc;                                                                               \
        ENTER(name);                                                                               \
        tracked = vgpu_untrack(kind, key, &e);                                                     \
        rc = vgpu_cu.name(__VA_ARGS__);                                                            \
        if (tracked)                                                                               \
            vgpu_untrack_end(kind, &e, rc);                                                        \
        return rc;                                                                                 \
    } while (0)

/* Frees of device pointers: tracked allocations first, then pool allocations. */
#define FREE_PTR_BODY(name, dptr, ...)                                                             \
    do {                                                                                           \
        struct vgpu_ptrmap_entry e;                                                                \
        struct vgpu_pool_free pf;                                                                  \
        bool tracked, pooled = false, shared = false;                                              \
        CUresult rc;                                                                               \
        ENTER(name);                                                                               \
        tracked = vgpu_untrack(VGPU_KIND_PTR, dptr, &e);                                           \
        if (!tracked)                                                                              \
            pooled = vgpu_pool_free_begin(dptr, &pf);                                              \
        /* Exported (cuIpcGetMemHandle): our hold on the shared record goes with it. */            \
        if (!tracked && !pooled)                                                                   \
            shared = vgpu_acct_ipc_untrack(dptr, &e);                                              \
        rc = vgpu_cu.name(__VA_ARGS__);                                                            \
        if (tracked)                                                                               \
            vgpu_untrack_end(VGPU_KIND_PTR, &e, rc);                                               \
        if (pooled)                                                                                \
            vgpu_pool_free_end(&pf, rc);                                                           \
        if (shared)                                                                                \
            vgpu_acct_ipc_untrack_end(&e, rc);                                                     \
        return rc;                                                                                 \
    } while (0)

CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    FREE_PTR_BODY(cuMemFree_v2, dptr, dptr);
}

CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    FREE_PTR_BODY(cuMemFreeAsync, dptr, dptr, hStream);
}

CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
    FREE_PTR_BODY(cuMemFreeAsync_ptsz, dptr, dptr, hStream);
}

/*
 * Legacy IPC (acct.h): an exported allocation's charge moves into the
 * claim's shared record; an import holds it (our claim's memory, charged
 * once) or is charged its size against the limit (another claim's), and is
 * closed again with CUDA_ERROR_OUT_OF_MEMORY when that does not fit.
 */
CUresult cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr)
{
    CUresult rc;

    ENTER(cuIpcGetMemHandle);
    rc = vgpu_cu.cuIpcGetMemHandle(pHandle, dptr);
    if (rc == CUDA_SUCCESS && pHandle != NULL)
        vgpu_acct_ipc_exported(dptr, (const uint8_t *)pHandle->reserved);
    return rc;
}

CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags)
{
    CUdeviceptr base = 0;
    size_t size = 0;
    CUdevice dev;
    CUresult rc;

    ENTER(cuIpcOpenMemHandle_v2);
    rc = vgpu_cu.cuIpcOpenMemHandle_v2(pdptr, handle, Flags);
    if (rc != CUDA_SUCCESS || pdptr == NULL || !current_device(&dev))
        return rc;
    if (vgpu_cu.cuMemGetAddressRange_v2 == NULL ||
        vgpu_cu.cuMemGetAddressRange_v2(&base, &size, *pdptr) != CUDA_SUCCESS)
        size = 0;
    if (vgpu_acct_ipc_imported(dev, *pdptr, size, (const uint8_t *)handle.reserved) !=
        CUDA_SUCCESS) {
        vgpu_cu.cuIpcCloseMemHandle(*pdptr);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    return rc;
}

CUresult cuIpcCloseMemHandle(CUdeviceptr dptr)
{
    struct vgpu_ptrmap_entry e;
    bool tracked;
    CUresult rc;

    ENTER(cuIpcCloseMemHandle);
    tracked = vgpu_acct_ipc_untrack(dptr, &e);
    rc = vgpu_cu.cuIpcCloseMemHandle(dptr);
    if (tracked)
        vgpu_acct_ipc_untrack_end(&e, rc);
    return rc;
}

CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                     const CUmemAllocationProp *prop, unsigned long long flags)
{
    struct vgpu_charge c;
    CUresult rc;

    ENTER(cuMemCreate);
    /* Only device memory counts; host and host-NUMA locations pass through. */
    if (handle == NULL || prop == NULL || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
        return vgpu_cu.cuMemCreate(handle, size, prop, flags);
    rc = vgpu_charge_begin(prop->location.id, -1, size, &c);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = vgpu_cu.cuMemCreate(handle, size, prop, flags);
    if (rc == CUDA_SUCCESS)
        vgpu_charge_commit(&c, VGPU_KIND_VMM, *handle);
    else
        vgpu_charge_abort(&c);
    return rc;
}

CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
    CUresult rc;

    ENTER(cuMemRetainAllocationHandle);
    rc = vgpu_cu.cuMemRetainAllocationHandle(handle, addr);
    if (rc == CUDA_SUCCESS && handle != NULL)
        vgpu_acct_vmm_retain(*handle);
    return rc;
}

/*
 * VMM (acct.h): the charge taken at cuMemCreate stays until the handle's
 * last reference is released and its last mapping unmapped, whatever the
 * order (NVIDIA's samples release right after mapping).
 */
CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    struct vgpu_ptrmap_entry e;
    CUresult rc;

    ENTER(cuMemRelease);
    switch (vgpu_acct_vmm_release_begin(handle, &e)) {
    case VGPU_VMM_LAST:
        rc = vgpu_cu.cuMemRelease(handle);
        vgpu_untrack_end(VGPU_KIND_VMM, &e, rc);
        return rc;
    case VGPU_VMM_LIVES:
        rc = vgpu_cu.cuMemRelease(handle);
        vgpu_acct_vmm_release_end(handle, rc);
        return rc;
    default:
        return vgpu_cu.cuMemRelease(handle);
    }
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags)
{
    bool tracked;
    CUresult rc;

    ENTER(cuMemMap);
    tracked = vgpu_acct_vmm_map_begin(handle);
    rc = vgpu_cu.cuMemMap(ptr, size, offset, handle, flags);
    if (tracked)
        vgpu_acct_vmm_map_end(handle, ptr, size, rc);
    return rc;
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    struct vgpu_acct_vmm_unmap u;
    CUresult rc;

    ENTER(cuMemUnmap);
    vgpu_acct_vmm_unmap_begin(ptr, size, &u);
    rc = vgpu_cu.cuMemUnmap(ptr, size);
    vgpu_acct_vmm_unmap_end(&u, rc);
    return rc;
}

/*
 * The key that names a shareable handle in every process it reaches
 * (acct.h; layouts in vgpu_region.h): a regular file's (st_dev, st_ino),
 * the same file in every process the fd is passed to, or a fabric handle's
 * bytes. *size gets what the file says of the allocation's size (0:
 * nothing). *marked is set for an fd that is no regular file (NVIDIA's
 * driver exports onto fresh opens of its control node, one inode for all):
 * its key is the nonce marking its open file description, which the caller
 * adds (sharefd.h). Returns the VGPU_SHARED_KIND_* or 0 for a handle the
 * library does not share (Win32).
 */
static uint32_t share_key(CUmemAllocationHandleType type, int fd, const void *fabric,
                          uint8_t key[VGPU_REGION_SHARED_KEY_LEN], uint64_t *size, bool *marked)
{
    struct stat st;
    uint64_t dev, ino;

    memset(key, 0, VGPU_REGION_SHARED_KEY_LEN);
    *size = 0;
    *marked = false;
    if (type == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
        /* An fd fstat refuses is treated as one of no size: marked or refused, never free. */
        if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
            *marked = true;
            return VGPU_SHARED_KIND_VMM_FD;
        }
        dev = (uint64_t)st.st_dev;
        ino = (uint64_t)st.st_ino;
        memcpy(key, &dev, sizeof(dev));
        memcpy(key + 8, &ino, sizeof(ino));
        *size = st.st_size > 0 ? (uint64_t)st.st_size : 0;
        return VGPU_SHARED_KIND_VMM_FD;
    }
    if (type == CU_MEM_HANDLE_TYPE_FABRIC && fabric != NULL) {
        memcpy(key, fabric, sizeof(CUmemFabricHandle));
        return VGPU_SHARED_KIND_VMM_FABRIC;
    }
    return 0;
}

/*
 * VMM shareable handles (acct.h): an export moves the handle's charge into
 * the claim's shared record; an import holds it (charged once per claim) or
 * is charged its size against the limit, and is released again with
 * CUDA_ERROR_OUT_OF_MEMORY when that does not fit or the size is unknown.
 */
CUresult cuMemExportToShareableHandle(void *shareableHandle, CUmemGenericAllocationHandle handle,
                                      CUmemAllocationHandleType handleType,
                                      unsigned long long flags)
{
    uint8_t key[VGPU_REGION_SHARED_KEY_LEN];
    bool marked;
    uint64_t size, nonce;
    uint32_t kind;
    CUresult rc;
    int fd;

    ENTER(cuMemExportToShareableHandle);
    rc = vgpu_cu.cuMemExportToShareableHandle(shareableHandle, handle, handleType, flags);
    if (rc != CUDA_SUCCESS || shareableHandle == NULL)
        return rc;
    fd = handleType == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR ? *(const int *)shareableHandle
                                                                : -1;
    kind = share_key(handleType, fd, shareableHandle, key, &size, &marked);
    /*
     * A regular file's description is marked too, at a random offset: the
     * fd holds the memory while it is open, and the mark shows that
     * (sharefd.h). Unmarked, the charge goes with the last handle.
     */
    if (kind == VGPU_SHARED_KIND_VMM_FD && !marked &&
        (vgpu_sharefd_nonce_new(&nonce) != 0 || vgpu_sharefd_mark(fd, nonce) != 0))
        VGPU_INFO("an exported VMM fd cannot be marked (%s): its charge ends with the "
                  "allocation's last handle and mapping", strerror(errno));
    if (kind != 0)
        vgpu_acct_vmm_exported(handle, kind, key, marked ? fd : -1);
    return rc;
}

/*
 * Whether imported allocation h (of properties prop) is larger than bytes:
 * the driver maps one granule at offset bytes only then (a mapping past an
 * allocation's end is refused). Unable to tell: true.
 */
static bool larger_than(CUmemGenericAllocationHandle h, const CUmemAllocationProp *prop,
                        uint64_t bytes)
{
    size_t gran = 0;
    CUdeviceptr va = 0;
    CUresult rc;

    if (vgpu_cu.cuMemGetAllocationGranularity == NULL || vgpu_cu.cuMemAddressReserve == NULL ||
        vgpu_cu.cuMemAddressFree == NULL ||
        vgpu_cu.cuMemGetAllocationGranularity(&gran, prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) !=
            CUDA_SUCCESS ||
        gran == 0 || vgpu_cu.cuMemAddressReserve(&va, gran, 0, 0, 0) != CUDA_SUCCESS)
        return true;
    rc = vgpu_cu.cuMemMap(va, gran, (size_t)bytes, h, 0);
    if (rc == CUDA_SUCCESS)
        vgpu_cu.cuMemUnmap(va, gran);
    vgpu_cu.cuMemAddressFree(va, gran);
    return rc == CUDA_SUCCESS;
}

CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle, void *osHandle,
                                        CUmemAllocationHandleType shHandleType)
{
    uint8_t key[VGPU_REGION_SHARED_KEY_LEN];
    CUmemAllocationProp prop;
    uint64_t size, nonce = 0;
    bool marked;
    uint32_t kind;
    CUdevice dev;
    CUresult rc;
    int fd = (int)(intptr_t)osHandle;

    ENTER(cuMemImportFromShareableHandle);
    rc = vgpu_cu.cuMemImportFromShareableHandle(handle, osHandle, shHandleType);
    if (rc != CUDA_SUCCESS || handle == NULL)
        return rc;
    kind = share_key(shHandleType, fd, osHandle, key, &size, &marked);
    if (kind == 0)
        return rc;
    /*
     * Unmarked, marked twice, or unreadable (no /proc): the nonce stays 0,
     * which no record has, and an fd's file tells no size: refused below
     * unless the handle is our own (fail closed, never free).
     */
    if (marked && vgpu_sharefd_nonce(fd, &nonce) == 0)
        memcpy(key + VGPU_SHAREFD_KEY_NONCE, &nonce, sizeof(nonce));
    /* The allocation's own device; the current one if the driver will not say. */
    memset(&prop, 0, sizeof(prop));
    if (vgpu_cu.cuMemGetAllocationPropertiesFromHandle != NULL &&
        vgpu_cu.cuMemGetAllocationPropertiesFromHandle(&prop, *handle) == CUDA_SUCCESS) {
        /* Host memory is not charged (as cuMemCreate). */
        if (prop.location.type != CU_MEM_LOCATION_TYPE_DEVICE)
            return rc;
        dev = prop.location.id;
    } else if (!current_device(&dev)) {
        return rc;
    }
    /*
     * A mark names a record, but any holder of the fd can move it
     * (security.md): the allocation must not be larger than the record it
     * names, as the driver tells, else it names none (refused below).
     */
    if (nonce != 0) {
        uint64_t bytes = vgpu_acct_vmm_shared_bytes(dev, kind, key);

        if (bytes != 0 && larger_than(*handle, &prop, bytes)) {
            VGPU_INFO("an imported VMM fd is larger than the record of this claim its mark "
                      "names (%llu bytes): the mark was moved, refused",
                      (unsigned long long)bytes);
            nonce = 0;
            memset(key + VGPU_SHAREFD_KEY_NONCE, 0, sizeof(nonce));
        }
    }
    if (vgpu_acct_vmm_imported(dev, *handle, size, kind, key) != CUDA_SUCCESS) {
        if (marked)
            VGPU_INFO("an imported VMM fd names no allocation of this claim (%s): its size is "
                      "unknown, refused", nonce != 0 ? "another claim's, or a record gone"
                                                     : "no single mark of an export on it");
        vgpu_cu.cuMemRelease(*handle);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    return rc;
}

/*
 * External memory: another API's allocation (a Vulkan or OpenGL buffer, a
 * Direct3D heap, an NvSciBuf object) imported into the current context's
 * device is that device's memory, and the import keeps it alive: charged at
 * its declared size against the limit before the driver call (refused with
 * CUDA_ERROR_OUT_OF_MEMORY, the caller keeping its fd, when it does not
 * fit) and returned when the object is destroyed. Its mapped buffers and
 * mipmapped arrays are views with no memory of their own: not wrapped, and
 * their frees pass through as frees of untracked pointers.
 */
CUresult cuImportExternalMemory(CUexternalMemory *extMem_out,
                                const CUDA_EXTERNAL_MEMORY_HANDLE_DESC *memHandleDesc)
{
    struct vgpu_charge c;
    CUdevice dev;
    CUresult rc;

    ENTER(cuImportExternalMemory);
    if (extMem_out == NULL || memHandleDesc == NULL || memHandleDesc->size == 0 ||
        !current_device(&dev))
        return vgpu_cu.cuImportExternalMemory(extMem_out, memHandleDesc);
    rc = vgpu_charge_begin(dev, -1, memHandleDesc->size, &c);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = vgpu_cu.cuImportExternalMemory(extMem_out, memHandleDesc);
    if (rc == CUDA_SUCCESS)
        vgpu_charge_commit(&c, VGPU_KIND_EXT, (uintptr_t)*extMem_out);
    else
        vgpu_charge_abort(&c);
    return rc;
}

CUresult cuDestroyExternalMemory(CUexternalMemory extMem)
{
    FREE_BODY(cuDestroyExternalMemory, VGPU_KIND_EXT, (uintptr_t)extMem, extMem);
}

/* Bytes per element of an array format; unknown (newer) formats count as 16. */
static uint64_t format_bytes(CUarray_format f)
{
    switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8:
        return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF:
        return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32:
    case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT:
        return 4;
    default:
        return 16;
    }
}

/* w*h*d*channels*format bytes, saturating at UINT64_MAX (the reservation then fails). */
static uint64_t array_bytes(size_t w, size_t h, size_t d, unsigned channels, CUarray_format f)
{
    uint64_t dims[5] = {w, h ? h : 1, d ? d : 1, channels ? channels : 1, format_bytes(f)};
    uint64_t total = 1;

    for (int i = 0; i < 5; i++) {
        if (dims[i] != 0 && total > UINT64_MAX / dims[i])
            return UINT64_MAX;
        total *= dims[i];
    }
    return total;
}

/*
 * Shared tail of the array creators: the driver's memory requirements (when
 * it offers the query) replace our estimate.
 */
static CUresult finish_array(struct vgpu_charge *c, CUresult rc, enum vgpu_kind kind,
                             uint64_t key)
{
    CUDA_ARRAY_MEMORY_REQUIREMENTS req;
    CUresult q = CUDA_ERROR_NOT_SUPPORTED;

    if (rc != CUDA_SUCCESS) {
        vgpu_charge_abort(c);
        return rc;
    }
    if (c->gpu != NULL && kind == VGPU_KIND_ARRAY && vgpu_cu.cuArrayGetMemoryRequirements != NULL)
        q = vgpu_cu.cuArrayGetMemoryRequirements(&req, (CUarray)(uintptr_t)key, c->device);
    else if (c->gpu != NULL && kind == VGPU_KIND_MIPMAP &&
             vgpu_cu.cuMipmappedArrayGetMemoryRequirements != NULL)
        q = vgpu_cu.cuMipmappedArrayGetMemoryRequirements(&req, (CUmipmappedArray)(uintptr_t)key,
                                                          c->device);
    if (q == CUDA_SUCCESS && vgpu_charge_resize(c, req.size) != CUDA_SUCCESS) {
        if (kind == VGPU_KIND_ARRAY)
            vgpu_cu.cuArrayDestroy((CUarray)(uintptr_t)key);
        else
            vgpu_cu.cuMipmappedArrayDestroy((CUmipmappedArray)(uintptr_t)key);
        vgpu_charge_abort(c);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    vgpu_charge_commit(c, kind, key);
    return CUDA_SUCCESS;
}

CUresult cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *desc)
{
    struct vgpu_charge c;
    CUdevice dev;
    CUresult rc;

    ENTER(cuArrayCreate_v2);
    if (pHandle == NULL || desc == NULL || !current_device(&dev))
        return vgpu_cu.cuArrayCreate_v2(pHandle, desc);
    rc = vgpu_charge_begin(dev, -1, array_bytes(desc->Width, desc->Height, 1, desc->NumChannels,
                                            desc->Format), &c);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = vgpu_cu.cuArrayCreate_v2(pHandle, desc);
    return finish_array(&c, rc, VGPU_KIND_ARRAY, rc == CUDA_SUCCESS ? (uintptr_t)*pHandle : 0);
}

CUresult cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *desc)
{
    struct vgpu_charge c;
    CUdevice dev;
    CUresult rc;

    ENTER(cuArray3DCreate_v2);
    if (pHandle == NULL || desc == NULL || !current_device(&dev))
        return vgpu_cu.cuArray3DCreate_v2(pHandle, desc);
    rc = vgpu_charge_begin(dev, -1, array_bytes(desc->Width, desc->Height, desc->Depth,
                                            desc->NumChannels, desc->Format), &c);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = vgpu_cu.cuArray3DCreate_v2(pHandle, desc);
    return finish_array(&c, rc, VGPU_KIND_ARRAY, rc == CUDA_SUCCESS ? (uintptr_t)*pHandle : 0);
}

CUresult cuMipmappedArrayCreate(CUmipmappedArray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *desc,
                                unsigned int numMipmapLevels)
{
    struct vgpu_charge c;
    CUdevice dev;
    CUresult rc;
    uint64_t total = 0;
    size_t w, h, d;

    ENTER(cuMipmappedArrayCreate);
    if (pHandle == NULL || desc == NULL || !current_device(&dev))
        return vgpu_cu.cuMipmappedArrayCreate(pHandle, desc, numMipmapLevels);
    w = desc->Width;
    h = desc->Height;
    d = desc->Depth;
    /* Each level halves every extent (down to 1). */
    for (unsigned l = 0; l < numMipmapLevels && total != UINT64_MAX; l++) {
        uint64_t b = array_bytes(w, h, d, desc->NumChannels, desc->Format);
        total = b > UINT64_MAX - total ? UINT64_MAX : total + b;
        w = w > 1 ? w / 2 : 1;
        h = h > 1 ? h / 2 : h;
        d = d > 1 && !(desc->Flags & CUDA_ARRAY3D_LAYERED) ? d / 2 : d;
    }
    rc = vgpu_charge_begin(dev, -1, total, &c);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = vgpu_cu.cuMipmappedArrayCreate(pHandle, desc, numMipmapLevels);
    return finish_array(&c, rc, VGPU_KIND_MIPMAP, rc == CUDA_SUCCESS ? (uintptr_t)*pHandle : 0);
}

CUresult cuArrayDestroy(CUarray hArray)
{
    FREE_BODY(cuArrayDestroy, VGPU_KIND_ARRAY, (uintptr_t)hArray, hArray);
}

CUresult cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray)
{
    FREE_BODY(cuMipmappedArrayDestroy, VGPU_KIND_MIPMAP, (uintptr_t)hMipmappedArray,
              hMipmappedArray);
}

/*
 * Reports the limit as the size of the GPU: total = min(limit, physical),
 * free = clamp(total - used, 0, physical free). Never fails because usage
 * exceeds the limit (cudaMemGetInfo must keep working). A GPU that fails
 * closed reports the same total with nothing free, as NVML does.
 */
static void clamp_info(struct vgpu_gpu *g, uint64_t *free_b, uint64_t *total_b)
{
    uint64_t used, total, limit;

    if (g == NULL || !g->enforce || (g->limit == 0 && !g->fail_closed))
        return;
    limit = vgpu_acct_gpu_limit_now(g); /* guarantee + current burst grant */
    total = limit != 0 && limit < *total_b ? limit : *total_b;
    used = vgpu_acct_gpu_used(g);
    *free_b = used < total ? (total - used < *free_b ? total - used : *free_b) : 0;
    if (g->fail_closed)
        *free_b = 0;
    *total_b = total;
}

/*
 * An MPS claim's share and pinned limit go into the environment before the
 * driver reads it (mps.h), and its process asks whether its uid may use the
 * GPU's MPS server now (mps_user.h): refused, it fails here instead of
 * waiting inside the driver. Only that: the library itself starts where it
 * always did, at the first wrapper that needs it, so cuInit stays the
 * driver's own call in time and order.
 */
CUresult cuInit(unsigned int Flags)
{
    if (vgpu_driver_cuda_load() != 0 || vgpu_cu.cuInit == NULL)
        return CUDA_ERROR_NOT_INITIALIZED;
    vgpu_mps_apply_env();
    if (vgpu_mps_user_check() != 0)
        return CUDA_ERROR_MPS_CONNECTION_FAILED;
    return vgpu_cu.cuInit(Flags);
}

CUresult cuMemGetInfo_v2(size_t *free_out, size_t *total_out)
{
    size_t f = 0, t = 0;
    uint64_t f64, t64;
    CUdevice dev;
    CUresult rc;

    ENTER(cuMemGetInfo_v2);
    rc = vgpu_cu.cuMemGetInfo_v2(&f, &t);
    if (rc != CUDA_SUCCESS)
        return rc;
    f64 = f;
    t64 = t;
    if (current_device(&dev)) {
        struct vgpu_gpu *g;

        /* Never the physical size of a GPU that may be limited. */
        if ((rc = vgpu_gpu_refusal(dev, &g)) != CUDA_SUCCESS)
            return rc;
        vgpu_acct_gpu_verify(g);
        vgpu_nvml_query_overhead(g);
        clamp_info(g, &f64, &t64);
    }
    if (free_out != NULL)
        *free_out = (size_t)f64;
    if (total_out != NULL)
        *total_out = (size_t)t64;
    return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    struct vgpu_gpu *g;
    size_t t = 0;
    uint64_t f64 = UINT64_MAX, t64;
    CUresult rc;

    ENTER(cuDeviceTotalMem_v2);
    if (bytes == NULL)
        return vgpu_cu.cuDeviceTotalMem_v2(bytes, dev);
    rc = vgpu_cu.cuDeviceTotalMem_v2(&t, dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    t64 = t;
    if ((rc = vgpu_gpu_refusal(dev, &g)) != CUDA_SUCCESS)
        return rc;
    clamp_info(g, &f64, &t64);
    *bytes = (size_t)t64;
    return CUDA_SUCCESS;
}

/*
 * Legacy entry points (CUDA < 3.2) that the driver still exports, with
 * 32-bit addresses and sizes: old binaries call them by these names. They
 * are accounted exactly as their _v2 forms; the reports are the _v2 ones,
 * saturated to 32 bits as the driver's own legacy calls saturate.
 */
static unsigned int saturate_u32(size_t v)
{
    return v > UINT32_MAX ? UINT32_MAX : (unsigned int)v;
}

CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize)
{
    ALLOC_BODY(cuMemAlloc, dptr, bytesize, dptr, bytesize);
}

CUresult cuMemFree(CUdeviceptr_v1 dptr)
{
    FREE_PTR_BODY(cuMemFree, (CUdeviceptr)dptr, dptr);
}

CUresult cuMemGetInfo(unsigned int *free_out, unsigned int *total_out)
{
    size_t f = 0, t = 0;
    CUresult rc;

    ENTER(cuMemGetInfo);
    if (vgpu_cu.cuMemGetInfo_v2 == NULL)
        return vgpu_cu.cuMemGetInfo(free_out, total_out);
    rc = cuMemGetInfo_v2(&f, &t);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (free_out != NULL)
        *free_out = saturate_u32(f);
    if (total_out != NULL)
        *total_out = saturate_u32(t);
    return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev)
{
    size_t t = 0;
    CUresult rc;

    ENTER(cuDeviceTotalMem);
    if (bytes == NULL || vgpu_cu.cuDeviceTotalMem_v2 == NULL)
        return vgpu_cu.cuDeviceTotalMem(bytes, dev);
    rc = cuDeviceTotalMem_v2(&t, dev);
    if (rc == CUDA_SUCCESS)
        *bytes = saturate_u32(t);
    return rc;
}
