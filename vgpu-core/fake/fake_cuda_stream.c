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
 * fake_cuda_stream.c - fake CUDA driver: modules, streams, stream capture,
 * kernel launches and graphs.
 *
 * Kernels do nothing; each launch occupies its stream for a busy time,
 * recorded in the shared state so that NVML reports utilisation and
 * synchronisation waits for it.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "fake_cuda.h"

#include <errno.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------------------ */
/* Modules                                                                  */
/* ------------------------------------------------------------------------ */

#define FAKE_MAGIC_MODULE 0x4d4f4401u
#define FAKE_MAGIC_FUNC 0x46554e01u

typedef struct fake_func {
    uint32_t magic;
    uint64_t cost_ns;
    int lognormal; /* cost_ns is the mean of log-normal durations */
    struct fake_func *next;
    char name[];
} fake_func;

typedef struct fake_module {
    uint32_t magic;
    fake_func *funcs;
} fake_module;

/*
 * Busy time encoded in a kernel name ending in "_<N>us" (fixed), or
 * "_ln<N>us" (log-normal durations of mean N us, see fake_cuda.h); else the
 * default.
 */
static uint64_t kernel_cost(const char *name, int *lognormal)
{
    size_t n = strlen(name);
    *lognormal = 0;
    if (n < 4 || strcmp(name + n - 2, "us") != 0)
        return g_fake.cfg->kernel_ns;
    size_t end = n - 2, i = end;
    while (i > 0 && name[i - 1] >= '0' && name[i - 1] <= '9')
        i--;
    if (i == end || end - i > 12)
        return g_fake.cfg->kernel_ns;
    size_t digits = i;
    if (i >= 3 && name[i - 1] == 'n' && name[i - 2] == 'l' && name[i - 3] == '_') {
        *lognormal = 1;
        i -= 2;
    }
    if (i == 0 || name[i - 1] != '_') {
        *lognormal = 0;
        return g_fake.cfg->kernel_ns;
    }
    uint64_t us = 0;
    for (size_t k = digits; k < end; k++)
        us = us * 10 + (uint64_t)(name[k] - '0');
    return us * 1000;
}

CUresult cuModuleLoadData(CUmodule *module, const void *image)
{
    REQUIRE_READY();
    int dev;
    if (module == NULL || image == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (fake_current_device(&dev) != CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_CONTEXT;
    fake_module *m = calloc(1, sizeof(*m));
    if (m == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    m->magic = FAKE_MAGIC_MODULE;
    *module = (CUmodule)m;
    return CUDA_SUCCESS;
}

CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
    REQUIRE_READY();
    fake_module *m = (fake_module *)hmod;
    if (hfunc == NULL || name == NULL || *name == '\0')
        return CUDA_ERROR_INVALID_VALUE;
    if (m == NULL || m->magic != FAKE_MAGIC_MODULE)
        return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&g_fake.mu);
    fake_func *f = m->funcs;
    while (f != NULL && strcmp(f->name, name) != 0)
        f = f->next;
    if (f == NULL) {
        size_t n = strlen(name);
        f = calloc(1, sizeof(*f) + n + 1);
        if (f != NULL) {
            f->magic = FAKE_MAGIC_FUNC;
            f->cost_ns = kernel_cost(name, &f->lognormal);
            memcpy(f->name, name, n + 1);
            f->next = m->funcs;
            m->funcs = f;
        }
    }
    pthread_mutex_unlock(&g_fake.mu);
    if (f == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *hfunc = (CUfunction)f;
    return CUDA_SUCCESS;
}

CUresult cuModuleUnload(CUmodule hmod)
{
    REQUIRE_READY();
    fake_module *m = (fake_module *)hmod;
    if (m == NULL || m->magic != FAKE_MAGIC_MODULE)
        return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&g_fake.mu);
    for (fake_func *f = m->funcs, *next; f != NULL; f = next) {
        next = f->next;
        f->magic = 0;
        free(f);
    }
    m->magic = 0;
    free(m);
    pthread_mutex_unlock(&g_fake.mu);
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------------ */
/* Streams                                                                  */
/* ------------------------------------------------------------------------ */

static fake_stream *per_thread_stream(int dev)
{
    fake_stream **streams = pthread_getspecific(ptds_key);
    if (streams == NULL) {
        streams = calloc(FAKE_MAX_GPUS, sizeof(*streams));
        if (streams == NULL || pthread_setspecific(ptds_key, streams) != 0) {
            free(streams);
            return NULL;
        }
    }
    if (streams[dev] == NULL) {
        streams[dev] = calloc(1, sizeof(fake_stream));
        if (streams[dev] != NULL) {
            streams[dev]->magic = FAKE_MAGIC_STREAM;
            streams[dev]->dev = dev;
        }
    }
    return streams[dev];
}

fake_stream *fake_resolve_stream(CUstream h, int ptsz, int dev)
{
    if (h == NULL)
        return ptsz ? per_thread_stream(dev) : &g_fake.legacy[dev];
    if (h == CU_STREAM_LEGACY)
        return &g_fake.legacy[dev];
    if (h == CU_STREAM_PER_THREAD)
        return per_thread_stream(dev);
    fake_stream *s = (fake_stream *)h;
    return s->magic == FAKE_MAGIC_STREAM ? s : NULL;
}

CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
    REQUIRE_READY();
    int dev;
    if (phStream == NULL || (Flags & ~(unsigned int)CU_STREAM_NON_BLOCKING) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (fake_current_device(&dev) != CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_CONTEXT;
    fake_stream *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    s->magic = FAKE_MAGIC_STREAM;
    s->dev = dev;
    pthread_mutex_lock(&g_fake.mu);
    s->next = g_fake.streams;
    g_fake.streams = s;
    pthread_mutex_unlock(&g_fake.mu);
    *phStream = (CUstream)s;
    return CUDA_SUCCESS;
}

CUresult cuStreamGetDevice(CUstream hStream, CUdevice *device)
{
    REQUIRE_READY();
    int dev;
    if (device == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (fake_current_device(&dev) != CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_CONTEXT;
    fake_stream *s = fake_resolve_stream(hStream, 0, dev);
    if (s == NULL)
        return CUDA_ERROR_INVALID_HANDLE;
    *device = s->dev;
    return CUDA_SUCCESS;
}

CUresult cuStreamDestroy_v2(CUstream hStream)
{
    REQUIRE_READY();
    fake_stream *s = (fake_stream *)hStream;
    if (s == NULL || s == (fake_stream *)CU_STREAM_LEGACY ||
        s == (fake_stream *)CU_STREAM_PER_THREAD || s->magic != FAKE_MAGIC_STREAM)
        return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&g_fake.mu);
    for (fake_stream **p = &g_fake.streams; *p != NULL; p = &(*p)->next) {
        if (*p == s) {
            *p = s->next;
            break;
        }
    }
    pthread_mutex_unlock(&g_fake.mu);
    /* Queued work still counts as busy in the shared timeline. */
    s->magic = 0;
    free(s);
    return CUDA_SUCCESS;
}

static CUresult stream_sync(CUstream hStream, int ptsz)
{
    REQUIRE_READY();
    int dev;
    if (fake_current_device(&dev) != CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_CONTEXT;
    fake_stream *s = fake_resolve_stream(hStream, ptsz, dev);
    if (s == NULL)
        return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&g_fake.mu);
    if (s->capture != CU_STREAM_CAPTURE_STATUS_NONE) {
        /* Synchronizing a capturing stream is illegal and ruins the capture. */
        s->capture = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
        pthread_mutex_unlock(&g_fake.mu);
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    uint32_t id = s->id;
    uint64_t last = s->last;
    pthread_mutex_unlock(&g_fake.mu);
    if (last != 0)
        fake_state_wait_stream(&g_fake.state, g_fake.cfg->gpus[dev].phys, id, last - 1);
    pthread_mutex_lock(&g_fake.mu);
    fake_pools_release_on_sync(s->dev);
    pthread_mutex_unlock(&g_fake.mu);
    return CUDA_SUCCESS;
}

CUresult cuStreamSynchronize(CUstream hStream)
{
    return stream_sync(hStream, 0);
}

CUresult cuStreamSynchronize_ptsz(CUstream hStream)
{
    return stream_sync(hStream, 1);
}

CUresult cuCtxSynchronize(void)
{
    REQUIRE_READY();
    int dev;
    if (fake_current_device(&dev) != CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_CONTEXT;
    pthread_mutex_lock(&g_fake.mu);
    int capturing = 0;
    for (fake_stream *s = g_fake.streams; s != NULL; s = s->next) {
        if (s->dev == dev && s->capture == CU_STREAM_CAPTURE_STATUS_ACTIVE &&
            s->capture_mode != CU_STREAM_CAPTURE_MODE_RELAXED) {
            s->capture = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
            capturing = 1;
        }
    }
    pthread_mutex_unlock(&g_fake.mu);
    if (capturing)
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    fake_state_wait_all(&g_fake.state, g_fake.cfg->gpus[dev].phys);
    pthread_mutex_lock(&g_fake.mu);
    fake_pools_release_on_sync(dev);
    pthread_mutex_unlock(&g_fake.mu);
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------------ */
/* Stream capture                                                           */
/* ------------------------------------------------------------------------ */

#define FAKE_MAGIC_GRAPH 0x47524101u
#define FAKE_MAGIC_EXEC 0x47455801u

static fake_graph *new_graph(void)
{
    fake_graph *g = calloc(1, sizeof(*g));
    if (g != NULL)
        g->magic = FAKE_MAGIC_GRAPH;
    return g;
}

static void graph_destroy(fake_graph *g)
{
    if (g == NULL)
        return;
    for (size_t i = 0; i < g->n; i++) {
        g->nodes[i]->magic = 0;
        free(g->nodes[i]);
    }
    free(g->nodes);
    g->magic = 0;
    free(g);
}

static CUresult begin_capture(CUstream hStream, CUstreamCaptureMode mode, int ptsz)
{
    REQUIRE_READY();
    int dev;
    if (fake_current_device(&dev) != CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (mode > CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_ERROR_INVALID_VALUE;
    fake_stream *s = fake_resolve_stream(hStream, ptsz, dev);
    if (s == NULL)
        return CUDA_ERROR_INVALID_HANDLE;
    if (s == &g_fake.legacy[dev])
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    CUresult r = CUDA_SUCCESS;
    fake_graph *g = new_graph();
    if (g == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&g_fake.mu);
    if (s->capture != CU_STREAM_CAPTURE_STATUS_NONE) {
        r = CUDA_ERROR_ILLEGAL_STATE;
    } else {
        graph_destroy(s->capture_graph);
        s->capture_graph = g;
        g = NULL;
        s->capture = CU_STREAM_CAPTURE_STATUS_ACTIVE;
        s->capture_mode = mode;
        s->capture_id = ++g_fake.capture_seq;
        s->capture_cost = 0;
    }
    pthread_mutex_unlock(&g_fake.mu);
    graph_destroy(g);
    return r;
}

CUresult cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode)
{
    return begin_capture(hStream, mode, 0);
}

CUresult cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode)
{
    return begin_capture(hStream, mode, 1);
}

static CUresult end_capture(CUstream hStream, CUgraph *phGraph, int ptsz)
{
    REQUIRE_READY();
    int dev;
    if (phGraph == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (fake_current_device(&dev) != CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_CONTEXT;
    fake_stream *s = fake_resolve_stream(hStream, ptsz, dev);
    if (s == NULL)
        return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&g_fake.mu);
    CUstreamCaptureStatus st = s->capture;
    fake_graph *g = s->capture_graph;
    if (g != NULL)
        g->cost_ns = s->capture_cost;
    s->capture = CU_STREAM_CAPTURE_STATUS_NONE;
    s->capture_graph = NULL;
    pthread_mutex_unlock(&g_fake.mu);
    *phGraph = NULL;
    if (st == CU_STREAM_CAPTURE_STATUS_NONE)
        return CUDA_ERROR_ILLEGAL_STATE;
    if (st == CU_STREAM_CAPTURE_STATUS_INVALIDATED || g == NULL) {
        graph_destroy(g);
        return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    }
    *phGraph = (CUgraph)g;
    return CUDA_SUCCESS;
}

CUresult cuStreamEndCapture(CUstream hStream, CUgraph *phGraph)
{
    return end_capture(hStream, phGraph, 0);
}

CUresult cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph)
{
    return end_capture(hStream, phGraph, 1);
}

static CUresult capture_info(CUstream hStream, int ptsz, CUstreamCaptureStatus *status,
                             cuuint64_t *id)
{
    REQUIRE_READY();
    int dev;
    if (status == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (fake_current_device(&dev) != CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_CONTEXT;
    fake_stream *s = fake_resolve_stream(hStream, ptsz, dev);
    if (s == NULL)
        return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&g_fake.mu);
    *status = s->capture;
    if (id != NULL)
        *id = s->capture_id;
    pthread_mutex_unlock(&g_fake.mu);
    return CUDA_SUCCESS;
}

CUresult cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
    return capture_info(hStream, 0, captureStatus, NULL);
}

CUresult cuStreamIsCapturing_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
    return capture_info(hStream, 1, captureStatus, NULL);
}

/*
 * cuStreamGetCaptureInfo_v2/_v3 and their _ptsz forms: the status and id of
 * capture_info; the graph and dependency outputs are not modelled (empty).
 */
static CUresult capture_info_deps(CUstream hStream, int ptsz, CUstreamCaptureStatus *status,
                                  cuuint64_t *id, CUgraph *graph_out, const CUgraphNode **deps,
                                  const CUgraphEdgeData **edges, size_t *num)
{
    CUresult r = capture_info(hStream, ptsz, status, id);
    if (r != CUDA_SUCCESS)
        return r;
    if (graph_out != NULL)
        *graph_out = NULL;
    if (deps != NULL)
        *deps = NULL;
    if (edges != NULL)
        *edges = NULL;
    if (num != NULL)
        *num = 0;
    return CUDA_SUCCESS;
}

CUresult cuStreamGetCaptureInfo_v2(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                   cuuint64_t *id_out, CUgraph *graph_out,
                                   const CUgraphNode **dependencies_out,
                                   size_t *numDependencies_out)
{
    return capture_info_deps(hStream, 0, captureStatus_out, id_out, graph_out, dependencies_out,
                             NULL, numDependencies_out);
}

CUresult cuStreamGetCaptureInfo_v2_ptsz(CUstream hStream,
                                        CUstreamCaptureStatus *captureStatus_out,
                                        cuuint64_t *id_out, CUgraph *graph_out,
                                        const CUgraphNode **dependencies_out,
                                        size_t *numDependencies_out)
{
    return capture_info_deps(hStream, 1, captureStatus_out, id_out, graph_out, dependencies_out,
                             NULL, numDependencies_out);
}

CUresult cuStreamGetCaptureInfo_v3(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                   cuuint64_t *id_out, CUgraph *graph_out,
                                   const CUgraphNode **dependencies_out,
                                   const CUgraphEdgeData **edgeData_out,
                                   size_t *numDependencies_out)
{
    return capture_info_deps(hStream, 0, captureStatus_out, id_out, graph_out, dependencies_out,
                             edgeData_out, numDependencies_out);
}

CUresult cuStreamGetCaptureInfo_v3_ptsz(CUstream hStream,
                                        CUstreamCaptureStatus *captureStatus_out,
                                        cuuint64_t *id_out, CUgraph *graph_out,
                                        const CUgraphNode **dependencies_out,
                                        const CUgraphEdgeData **edgeData_out,
                                        size_t *numDependencies_out)
{
    return capture_info_deps(hStream, 1, captureStatus_out, id_out, graph_out, dependencies_out,
                             edgeData_out, numDependencies_out);
}

/* ------------------------------------------------------------------------ */
/* Launches                                                                 */
/* ------------------------------------------------------------------------ */

/*
 * Queues busy time on a stream. A capturing stream only records it into the
 * graph being built. A process whose queue on the GPU is full blocks until
 * its oldest kernel finishes, as a full launch queue does.
 */
static CUresult enqueue(CUstream hStream, int ptsz, uint64_t cost, int small, int lognormal)
{
    int dev;
    if (fake_current_device(&dev) != CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_CONTEXT;
    fake_stream *s = fake_resolve_stream(hStream, ptsz, dev);
    if (s == NULL)
        return CUDA_ERROR_INVALID_HANDLE;
    if (s->dev != dev)
        return CUDA_ERROR_INVALID_HANDLE;
    if (cost == 0 && s->capture == CU_STREAM_CAPTURE_STATUS_NONE)
        return CUDA_SUCCESS;
    pthread_mutex_lock(&g_fake.mu);
    if (lognormal) {
        if (g_fake.rng == 0)
            g_fake.rng = gpu_rand_seed((uint64_t)getpid(), 0);
        cost = gpu_rand_lognormal(&g_fake.rng, cost, FAKE_KERNEL_SIGMA, FAKE_KERNEL_MIN_NS,
                                  FAKE_KERNEL_MAX_NS);
    }
    if (s->capture == CU_STREAM_CAPTURE_STATUS_ACTIVE) {
        s->capture_cost += cost;
        pthread_mutex_unlock(&g_fake.mu);
        return CUDA_SUCCESS;
    }
    if (s->capture == CU_STREAM_CAPTURE_STATUS_INVALIDATED) {
        pthread_mutex_unlock(&g_fake.mu);
        return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    }
    if (s->id == 0)
        s->id = ++g_fake.stream_ids;
    int phys = g_fake.cfg->gpus[dev].phys;
    int64_t ticket;
    /* The simulated engine decides when it runs: host scheduling cannot stretch it. */
    while ((ticket = fake_state_submit(&g_fake.state, phys, s->id, small, cost)) < 0) {
        pthread_mutex_unlock(&g_fake.mu);
        fake_state_wait_room(&g_fake.state, phys);
        pthread_mutex_lock(&g_fake.mu);
    }
    s->last = (uint64_t)ticket + 1;
    pthread_mutex_unlock(&g_fake.mu);
    return CUDA_SUCCESS;
}

static CUresult launch(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                       unsigned int bx, unsigned int by, unsigned int bz, CUstream hStream,
                       int ptsz)
{
    REQUIRE_READY();
    fake_func *fn = (fake_func *)f;
    if (fn == NULL || fn->magic != FAKE_MAGIC_FUNC)
        return CUDA_ERROR_INVALID_HANDLE;
    if (gx == 0 || gy == 0 || gz == 0 || bx == 0 || by == 0 || bz == 0 ||
        (uint64_t)bx * by * bz > 1024)
        return CUDA_ERROR_INVALID_VALUE;
    /* Fewer blocks than SMs leave room for another stream's small kernel beside it. */
    int cur, sms = g_fake.cfg->multiprocessors;
    if (fake_current_device(&cur) == CUDA_SUCCESS)
        sms = g_fake.cfg->gpus[cur].multiprocessors; /* a MIG instance's own SMs */
    int small = (uint64_t)gx * gy * gz < (uint64_t)sms;
    return enqueue(hStream, ptsz, fn->cost_ns, small, fn->lognormal);
}

CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                        unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                        unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                        void **kernelParams, void **extra)
{
    (void)sharedMemBytes;
    (void)kernelParams;
    (void)extra;
    return launch(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, hStream, 0);
}

CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                             unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                             unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                             void **kernelParams, void **extra)
{
    (void)sharedMemBytes;
    (void)kernelParams;
    (void)extra;
    return launch(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, hStream, 1);
}

static CUresult launch_ex(const CUlaunchConfig *config, CUfunction f, int ptsz)
{
    if (config == NULL || (config->numAttrs > 0 && config->attrs == NULL))
        return CUDA_ERROR_INVALID_VALUE;
    return launch(f, config->gridDimX, config->gridDimY, config->gridDimZ, config->blockDimX,
                  config->blockDimY, config->blockDimZ, config->hStream, ptsz);
}

CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernelParams,
                          void **extra)
{
    (void)kernelParams;
    (void)extra;
    return launch_ex(config, f, 0);
}

CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f, void **kernelParams,
                               void **extra)
{
    (void)kernelParams;
    (void)extra;
    return launch_ex(config, f, 1);
}

CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                   unsigned int gridDimZ, unsigned int blockDimX,
                                   unsigned int blockDimY, unsigned int blockDimZ,
                                   unsigned int sharedMemBytes, CUstream hStream,
                                   void **kernelParams)
{
    (void)sharedMemBytes;
    (void)kernelParams;
    return launch(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, hStream, 0);
}

CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gridDimX,
                                        unsigned int gridDimY, unsigned int gridDimZ,
                                        unsigned int blockDimX, unsigned int blockDimY,
                                        unsigned int blockDimZ, unsigned int sharedMemBytes,
                                        CUstream hStream, void **kernelParams)
{
    (void)sharedMemBytes;
    (void)kernelParams;
    return launch(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, hStream, 1);
}

/* ------------------------------------------------------------------------ */
/* Events                                                                   */
/* ------------------------------------------------------------------------ */

CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
    REQUIRE_READY();
    int dev;
    if (phEvent == NULL || (Flags & ~0xfu) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (fake_current_device(&dev) != CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_CONTEXT;
    fake_event *e = calloc(1, sizeof(*e));
    if (e == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&g_fake.mu);
    *e = (fake_event){.magic = FAKE_MAGIC_EVENT, .flags = Flags, .dev = dev,
                      .ctx = fake_current_ctx(), .next = g_fake.events};
    g_fake.events = e;
    pthread_mutex_unlock(&g_fake.mu);
    *phEvent = (CUevent)e;
    return CUDA_SUCCESS;
}

void fake_events_close(const fake_ctx *c)
{
    for (fake_event **p = &g_fake.events; *p != NULL;) {
        fake_event *e = *p;
        if (e->ctx == c) {
            e->magic = FAKE_MAGIC_EVENT_DEAD;
            *p = e->next;
        } else {
            p = &e->next;
        }
    }
}

static fake_event *valid_event(CUevent h)
{
    fake_event *e = (fake_event *)h;
    if (e != NULL && e->magic == FAKE_MAGIC_EVENT_DEAD) {
        fprintf(stderr, "fake libcuda: an event of a destroyed context was used\n");
        abort();
    }
    return e != NULL && e->magic == FAKE_MAGIC_EVENT ? e : NULL;
}

CUresult cuEventDestroy_v2(CUevent hEvent)
{
    REQUIRE_READY();
    fake_event *e = valid_event(hEvent);
    if (e == NULL)
        return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&g_fake.mu);
    for (fake_event **p = &g_fake.events; *p != NULL; p = &(*p)->next) {
        if (*p == e) {
            *p = e->next;
            break;
        }
    }
    pthread_mutex_unlock(&g_fake.mu);
    e->magic = 0;
    free(e);
    return CUDA_SUCCESS;
}

/* Records where the stream stands: the event completes when its work up to here has run. */
CUresult cuEventRecord(CUevent hEvent, CUstream hStream)
{
    REQUIRE_READY();
    fake_event *e = valid_event(hEvent);
    int dev;
    if (e == NULL)
        return CUDA_ERROR_INVALID_HANDLE;
    if (fake_current_device(&dev) != CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_CONTEXT;
    fake_stream *s = fake_resolve_stream(hStream, 0, dev);
    if (s == NULL || s->dev != e->dev)
        return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&g_fake.mu);
    if (s->capture != CU_STREAM_CAPTURE_STATUS_NONE) {
        /* Only the limiter records events here, never into a capture: not modelled. */
        pthread_mutex_unlock(&g_fake.mu);
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    if (s->id == 0)
        s->id = ++g_fake.stream_ids;
    e->stream = s->id;
    e->last = s->last;
    e->record_ns = fake_now_ns();
    e->at = 0;
    e->recorded = 1;
    pthread_mutex_unlock(&g_fake.mu);
    return CUDA_SUCCESS;
}

/* Whether e has completed; its time then in e->at. */
static int event_done(fake_event *e)
{
    if (!e->recorded || e->at != 0)
        return 1;
    uint64_t at;
    if (!fake_state_event_time(&g_fake.state, g_fake.cfg->gpus[e->dev].phys, e->stream, e->last,
                               e->record_ns, &at))
        return 0;
    e->at = at != 0 ? at : 1;
    return 1;
}

CUresult cuEventQuery(CUevent hEvent)
{
    REQUIRE_READY();
    fake_event *e = valid_event(hEvent);
    if (e == NULL)
        return CUDA_ERROR_INVALID_HANDLE;
    return event_done(e) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

CUresult cuEventSynchronize(CUevent hEvent)
{
    REQUIRE_READY();
    fake_event *e = valid_event(hEvent);
    if (e == NULL)
        return CUDA_ERROR_INVALID_HANDLE;
    while (!event_done(e))
        usleep(100);
    return CUDA_SUCCESS;
}

/* As the real driver: both recorded with timing, both completed, else NOT_READY. */
CUresult cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
    REQUIRE_READY();
    fake_event *a = valid_event(hStart), *b = valid_event(hEnd);
    if (pMilliseconds == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (a == NULL || b == NULL || (a->flags & CU_EVENT_DISABLE_TIMING) != 0 ||
        (b->flags & CU_EVENT_DISABLE_TIMING) != 0)
        return CUDA_ERROR_INVALID_HANDLE;
    if (!a->recorded || !b->recorded)
        return CUDA_ERROR_INVALID_HANDLE;
    if (!event_done(a) || !event_done(b))
        return CUDA_ERROR_NOT_READY;
    *pMilliseconds = (float)(((double)b->at - (double)a->at) / 1e6);
    return CUDA_SUCCESS;
}

/* Capture interaction modes are not modelled: the previous mode is handed back. */
CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode)
{
    static __thread CUstreamCaptureMode current = CU_STREAM_CAPTURE_MODE_GLOBAL;
    if (mode == NULL || *mode > CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_ERROR_INVALID_VALUE;
    CUstreamCaptureMode old = current;
    current = *mode;
    *mode = old;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------------ */
/* Graphs                                                                   */
/* ------------------------------------------------------------------------ */

CUresult cuGraphCreate(CUgraph *phGraph, unsigned int flags)
{
    REQUIRE_READY();
    if (phGraph == NULL || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    fake_graph *g = new_graph();
    if (g == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *phGraph = (CUgraph)g;
    return CUDA_SUCCESS;
}

static fake_graph *valid_graph(CUgraph h, uint32_t magic)
{
    fake_graph *g = (fake_graph *)h;
    return g != NULL && g->magic == magic ? g : NULL;
}

/* Dependencies are not modelled: nodes of one graph run in the order they were added. */
CUresult cuGraphAddMemAllocNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                const CUgraphNode *dependencies, size_t numDependencies,
                                CUDA_MEM_ALLOC_NODE_PARAMS *nodeParams)
{
    REQUIRE_READY();
    fake_graph *g = valid_graph(hGraph, FAKE_MAGIC_GRAPH);
    (void)dependencies;
    (void)numDependencies;
    if (phGraphNode == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (g == NULL)
        return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&g_fake.mu);
    CUresult r = fake_graph_add_alloc(g, nodeParams, (fake_gnode **)phGraphNode);
    pthread_mutex_unlock(&g_fake.mu);
    return r;
}

CUresult cuGraphAddMemFreeNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                               const CUgraphNode *dependencies, size_t numDependencies,
                               CUdeviceptr dptr)
{
    REQUIRE_READY();
    fake_graph *g = valid_graph(hGraph, FAKE_MAGIC_GRAPH);
    (void)dependencies;
    (void)numDependencies;
    if (phGraphNode == NULL || dptr == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (g == NULL)
        return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&g_fake.mu);
    CUresult r = fake_graph_add_free(g, dptr, (fake_gnode **)phGraphNode);
    pthread_mutex_unlock(&g_fake.mu);
    return r;
}

CUresult cuGraphGetNodes(CUgraph hGraph, CUgraphNode *nodes, size_t *numNodes)
{
    REQUIRE_READY();
    fake_graph *g = valid_graph(hGraph, FAKE_MAGIC_GRAPH);
    if (numNodes == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (g == NULL)
        return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&g_fake.mu);
    if (nodes != NULL) {
        size_t n = *numNodes < g->n ? *numNodes : g->n;
        for (size_t i = 0; i < n; i++)
            nodes[i] = (CUgraphNode)g->nodes[i];
        for (size_t i = n; i < *numNodes; i++)
            nodes[i] = NULL;
        *numNodes = n;
    } else {
        *numNodes = g->n;
    }
    pthread_mutex_unlock(&g_fake.mu);
    return CUDA_SUCCESS;
}

static fake_gnode *valid_node(CUgraphNode h)
{
    fake_gnode *n = (fake_gnode *)h;
    return n != NULL && n->magic == FAKE_MAGIC_GNODE ? n : NULL;
}

CUresult cuGraphNodeGetType(CUgraphNode hNode, CUgraphNodeType *type)
{
    REQUIRE_READY();
    fake_gnode *n = valid_node(hNode);
    if (type == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (n == NULL)
        return CUDA_ERROR_INVALID_HANDLE;
    *type = n->type;
    return CUDA_SUCCESS;
}

CUresult cuGraphMemAllocNodeGetParams(CUgraphNode hNode, CUDA_MEM_ALLOC_NODE_PARAMS *params_out)
{
    REQUIRE_READY();
    fake_gnode *n = valid_node(hNode);
    if (params_out == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (n == NULL || n->type != CU_GRAPH_NODE_TYPE_MEM_ALLOC)
        return CUDA_ERROR_INVALID_HANDLE;
    *params_out = n->alloc;
    return CUDA_SUCCESS;
}

/* An executable: a copy of the graph's nodes and its kernels' busy time. */
static CUresult instantiate(CUgraphExec *phGraphExec, CUgraph hGraph, int upload)
{
    REQUIRE_READY();
    fake_graph *g = valid_graph(hGraph, FAKE_MAGIC_GRAPH), *e;
    if (phGraphExec == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (g == NULL)
        return CUDA_ERROR_INVALID_HANDLE;
    if ((e = new_graph()) == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    e->magic = FAKE_MAGIC_EXEC;
    e->cost_ns = g->cost_ns;
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&g_fake.mu);
    if (g->n > 0 && (e->nodes = calloc(g->n, sizeof(*e->nodes))) == NULL)
        r = CUDA_ERROR_OUT_OF_MEMORY;
    for (size_t i = 0; r == CUDA_SUCCESS && i < g->n; i++) {
        if ((e->nodes[i] = malloc(sizeof(fake_gnode))) == NULL)
            r = CUDA_ERROR_OUT_OF_MEMORY;
        else
            *e->nodes[i] = *g->nodes[i];
        e->n = e->cap = i + 1;
    }
    if (r == CUDA_SUCCESS && upload)
        r = fake_graph_mem(e->nodes, e->n, 0);
    pthread_mutex_unlock(&g_fake.mu);
    if (r != CUDA_SUCCESS) {
        graph_destroy(e);
        return r;
    }
    *phGraphExec = (CUgraphExec)e;
    return CUDA_SUCCESS;
}

CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph,
                                     unsigned long long flags)
{
    (void)flags;
    return instantiate(phGraphExec, hGraph, 0);
}

CUresult cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
                               char *logBuffer, size_t bufferSize)
{
    if (phErrorNode != NULL)
        *phErrorNode = NULL;
    if (logBuffer != NULL && bufferSize > 0)
        logBuffer[0] = 0;
    return instantiate(phGraphExec, hGraph, 0);
}

static CUresult instantiate_params(CUgraphExec *phGraphExec, CUgraph hGraph,
                                   CUDA_GRAPH_INSTANTIATE_PARAMS *params)
{
    if (params == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = instantiate(phGraphExec, hGraph,
                             (params->flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD) != 0);
    params->hErrNode_out = NULL;
    params->result_out = r == CUDA_SUCCESS ? CUDA_GRAPH_INSTANTIATE_SUCCESS
                                           : CUDA_GRAPH_INSTANTIATE_ERROR;
    return r;
}

CUresult cuGraphInstantiateWithParams(CUgraphExec *phGraphExec, CUgraph hGraph,
                                      CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
    return instantiate_params(phGraphExec, hGraph, instantiateParams);
}

CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec *phGraphExec, CUgraph hGraph,
                                           CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
    return instantiate_params(phGraphExec, hGraph, instantiateParams);
}

static CUresult graph_launch(CUgraphExec hGraphExec, CUstream hStream, int ptsz)
{
    REQUIRE_READY();
    fake_graph *e = valid_graph((CUgraph)hGraphExec, FAKE_MAGIC_EXEC);
    if (e == NULL)
        return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&g_fake.mu);
    CUresult r = fake_graph_mem(e->nodes, e->n, 1);
    pthread_mutex_unlock(&g_fake.mu);
    if (r != CUDA_SUCCESS)
        return r;
    return enqueue(hStream, ptsz, e->cost_ns, 0, 0);
}

CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
    return graph_launch(hGraphExec, hStream, 0);
}

CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
    return graph_launch(hGraphExec, hStream, 1);
}

static CUresult graph_upload(CUgraphExec hGraphExec, CUstream hStream, int ptsz)
{
    REQUIRE_READY();
    fake_graph *e = valid_graph((CUgraph)hGraphExec, FAKE_MAGIC_EXEC);
    int dev;
    if (e == NULL || fake_current_device(&dev) != CUDA_SUCCESS ||
        fake_resolve_stream(hStream, ptsz, dev) == NULL)
        return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&g_fake.mu);
    CUresult r = fake_graph_mem(e->nodes, e->n, 0);
    pthread_mutex_unlock(&g_fake.mu);
    return r;
}

CUresult cuGraphUpload(CUgraphExec hGraphExec, CUstream hStream)
{
    return graph_upload(hGraphExec, hStream, 0);
}

CUresult cuGraphUpload_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
    return graph_upload(hGraphExec, hStream, 1);
}

static CUresult graph_free(fake_graph *g, uint32_t magic)
{
    REQUIRE_READY();
    if (g == NULL || g->magic != magic)
        return CUDA_ERROR_INVALID_HANDLE;
    graph_destroy(g);
    return CUDA_SUCCESS;
}

CUresult cuGraphExecDestroy(CUgraphExec hGraphExec)
{
    return graph_free((fake_graph *)hGraphExec, FAKE_MAGIC_EXEC);
}

CUresult cuGraphDestroy(CUgraph hGraph)
{
    return graph_free((fake_graph *)hGraph, FAKE_MAGIC_GRAPH);
}
