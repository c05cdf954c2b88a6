/*
 * launch_hooks.c - the kernel and graph launch wrappers: every launch path
 * of the driver API, with its _ptsz variant, goes through the compute
 * limiter's admission (limiter.h) before the driver sees it.
 *
 * With no SM limit anywhere in the process the wrapper costs one load of a
 * flag on top of the lazy-initialisation checks every wrapper makes.
 */
#include "limiter.h"
#include "driver.h"
#include "gpus.h"
#include "graphs.h"
#include "pools.h"

#define LAUNCH_BODY(name, stream, ptsz, ...)                                                       \
    do {                                                                                           \
        if (vgpu_cuda_load() != 0 || vgpu_cu.name == NULL)                                         \
            return CUDA_ERROR_NOT_INITIALIZED;                                                     \
        vgpu_limits_init();                                                                        \
        if (__atomic_load_n(&vgpu_compute_any, __ATOMIC_RELAXED))                                  \
            vgpu_compute_admit(stream, ptsz);                                                      \
        return vgpu_cu.name(__VA_ARGS__);                                                          \
    } while (0)

CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                        unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                        unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                        void **kernelParams, void **extra)
{
    LAUNCH_BODY(cuLaunchKernel, hStream, false, f, gridDimX, gridDimY, gridDimZ, blockDimX,
                blockDimY, blockDimZ, sharedMemBytes, hStream, kernelParams, extra);
}

CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                             unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                             unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                             void **kernelParams, void **extra)
{
    LAUNCH_BODY(cuLaunchKernel_ptsz, hStream, true, f, gridDimX, gridDimY, gridDimZ, blockDimX,
                blockDimY, blockDimZ, sharedMemBytes, hStream, kernelParams, extra);
}

/* A NULL config is the driver's error to report: it has no stream to look at. */
CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernelParams,
                          void **extra)
{
    LAUNCH_BODY(cuLaunchKernelEx, config != NULL ? config->hStream : NULL, false, config, f,
                kernelParams, extra);
}

CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f, void **kernelParams,
                               void **extra)
{
    LAUNCH_BODY(cuLaunchKernelEx_ptsz, config != NULL ? config->hStream : NULL, true, config, f,
                kernelParams, extra);
}

CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                   unsigned int gridDimZ, unsigned int blockDimX,
                                   unsigned int blockDimY, unsigned int blockDimZ,
                                   unsigned int sharedMemBytes, CUstream hStream,
                                   void **kernelParams)
{
    LAUNCH_BODY(cuLaunchCooperativeKernel, hStream, false, f, gridDimX, gridDimY, gridDimZ,
                blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream, kernelParams);
}

CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gridDimX,
                                        unsigned int gridDimY, unsigned int gridDimZ,
                                        unsigned int blockDimX, unsigned int blockDimY,
                                        unsigned int blockDimZ, unsigned int sharedMemBytes,
                                        CUstream hStream, void **kernelParams)
{
    LAUNCH_BODY(cuLaunchCooperativeKernel_ptsz, hStream, true, f, gridDimX, gridDimY, gridDimZ,
                blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream, kernelParams);
}

/*
 * A graph launch is charged like one launch; its cost estimate learns the
 * graph's length. A graph with allocation nodes first reserves the memory
 * they may take (graphs.h); the limiter's wait comes before, so no lock is
 * held while it waits.
 */
#define GRAPH_LAUNCH_BODY(name, exec, stream, ptsz)                                                \
    do {                                                                                           \
        uint64_t bytes[VGPU_MAX_GPUS];                                                             \
        struct vgpu_graph_op op;                                                                   \
        CUresult rc;                                                                               \
        if (vgpu_cuda_load() != 0 || vgpu_cu.name == NULL)                                         \
            return CUDA_ERROR_NOT_INITIALIZED;                                                     \
        vgpu_limits_init();                                                                        \
        if (__atomic_load_n(&vgpu_compute_any, __ATOMIC_RELAXED))                                  \
            vgpu_compute_admit(stream, ptsz);                                                      \
        if (!vgpu_graph_exec_get(exec, bytes))                                                     \
            return vgpu_cu.name(exec, stream);                                                     \
        rc = vgpu_graph_mem_begin(bytes, &op);                                                     \
        if (rc != CUDA_SUCCESS)                                                                    \
            return rc;                                                                             \
        rc = vgpu_cu.name(exec, stream);                                                           \
        vgpu_graph_mem_end(&op);                                                                   \
        return rc;                                                                                 \
    } while (0)

CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
    GRAPH_LAUNCH_BODY(cuGraphLaunch, hGraphExec, hStream, false);
}

CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
    GRAPH_LAUNCH_BODY(cuGraphLaunch_ptsz, hGraphExec, hStream, true);
}
