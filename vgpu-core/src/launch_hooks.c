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
 * launch_hooks.c - the kernel and graph launch wrappers: every launch path
 * of the driver API, with its _ptsz variant, goes through the compute
 * limiter's admission (limiter.h) before the driver sees it.
 *
 * With no SM limit anywhere in the process the wrapper costs one load of a
 * flag on top of the lazy-initialisation checks every wrapper makes, and in
 * a claim one more load and a relaxed increment (the launch is counted).
 */
#include "limiter.h"
#include "driver.h"
#include "gpus.h"
#include "graphs.h"
#include "process.h"

/*
 * Loads the driver and our limits, then waits for the launch's turn in the
 * compute limiter; timed is set to the launch's GPU when the limiter times
 * this launch (vgpu_limiter_launched follows it).
 */
#define ADMIT(name, stream, ptsz, timed)                                                           \
    do {                                                                                           \
        if (vgpu_driver_cuda_load() != 0 || vgpu_cu.name == NULL)                                  \
            return CUDA_ERROR_NOT_INITIALIZED;                                                     \
        vgpu_process_init();                                                                        \
        if (__atomic_load_n(&vgpu_any_sm_limit, __ATOMIC_RELAXED))                                  \
            timed = vgpu_limiter_admit(stream, ptsz);                                              \
        else if (__atomic_load_n(&vgpu_any_claim, __ATOMIC_RELAXED))                               \
            vgpu_limiter_count();                                                                  \
    } while (0)

/* Admits, launches with launch (an expression), and closes a timed launch. */
#define ADMITTED_LAUNCH(name, stream, ptsz, launch)                                                \
    do {                                                                                           \
        struct vgpu_gpu *timed = NULL;                                                             \
        CUresult rc;                                                                               \
        ADMIT(name, stream, ptsz, timed);                                                          \
        rc = (launch);                                                                             \
        if (timed != NULL)                                                                         \
            vgpu_limiter_launched(timed, stream, ptsz, rc);                                        \
        return rc;                                                                                 \
    } while (0)

#define LAUNCH_BODY(name, stream, ptsz, ...)                                                       \
    ADMITTED_LAUNCH(name, stream, ptsz, vgpu_cu.name(__VA_ARGS__))

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
CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
    ADMITTED_LAUNCH(cuGraphLaunch, hStream, false,
                    vgpu_graph_run(vgpu_cu.cuGraphLaunch, hGraphExec, hStream));
}

CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
    ADMITTED_LAUNCH(cuGraphLaunch_ptsz, hStream, true,
                    vgpu_graph_run(vgpu_cu.cuGraphLaunch_ptsz, hGraphExec, hStream));
}
