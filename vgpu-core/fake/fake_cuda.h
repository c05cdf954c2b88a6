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
 * fake_cuda.h - internals shared by the translation units of the fake
 * libcuda.so.1 (not installed; the public API is vgpu_cuda.h).
 *
 * One process-wide structure holds everything; g_fake.mu guards all of it
 * except the launch fast path (a kernel with zero busy time touches no
 * shared data).
 */
#ifndef VGPU_FAKE_CUDA_H
#define VGPU_FAKE_CUDA_H

#include <pthread.h>
#include <stdint.h>

#include "fake_config.h"
#include "fake_state.h"
#include "vgpu_cuda.h"

/* Log-normal kernel durations ("_ln<N>us" names): shape and bounds. */
#define FAKE_KERNEL_SIGMA 0.8
#define FAKE_KERNEL_MIN_NS 50000ULL
#define FAKE_KERNEL_MAX_NS 20000000ULL

/* cuCtxSetLimit values that take device memory: stack, printf FIFO, malloc heap. */
#define FAKE_MEMORY_LIMITS 3

typedef struct fake_ctx {
    uint32_t magic;
    int dev;
    int primary;
    unsigned int refs; /* primary contexts: retain count */
    size_t limits[FAKE_MEMORY_LIMITS]; /* 0 = the default */
    uint64_t limit_bytes; /* charged for them beyond the defaults */
} fake_ctx;

typedef struct fake_stream {
    uint32_t magic;
    int dev;
    uint32_t id;                       /* the engine's stream id, 0 = none yet */
    uint64_t last;                     /* ticket + 1 of its last kernel, 0 = none */
    CUstreamCaptureStatus capture;
    CUstreamCaptureMode capture_mode;
    uint64_t capture_id;
    uint64_t capture_cost;
    struct fake_graph *capture_graph; /* nodes captured so far (allocation nodes) */
    struct fake_stream *next; /* created streams */
} fake_stream;

/* An event: where its stream stood when it was recorded, and its time once it completed. */
typedef struct fake_event {
    uint32_t magic;
    unsigned int flags;
    const fake_ctx *ctx;        /* the context it lives in */
    struct fake_event *next;    /* live events */
    int dev;
    int recorded;
    uint32_t stream;    /* the engine's stream id */
    uint64_t last;      /* ticket + 1 of the stream's last kernel then, 0 = none */
    uint64_t record_ns;
    uint64_t at;        /* its GPU time once completed, 0 = not seen completed yet */
} fake_event;

typedef struct fake_pool {
    uint32_t magic;
    int dev;
    int destroyed;        /* destroyed with allocations outstanding */
    uint64_t reserved;    /* charged to the GPU */
    uint64_t used;        /* handed out */
    uint64_t reserved_high;
    uint64_t used_high;
    uint64_t threshold;   /* CU_MEMPOOL_ATTR_RELEASE_THRESHOLD */
    int reuse[3];         /* CU_MEMPOOL_ATTR_REUSE_*, stored only */
    struct fake_pool *next;
} fake_pool;

typedef struct fake_process {
    pthread_mutex_t mu;
    int initialized;
    int forked; /* set in a child after fork: CUDA is unusable there */
    CUresult init_result;
    int mps_fd;                /* an MPS client's connection to its control daemon, -1: none */
    uint32_t mps_share_pm;     /* an MPS client's share of the SMs, per mille */
    uint32_t mps_driver_mem_mib; /* device 0's NVIDIA_GPU_MEMORY_LIMITS entry, MiB; 0: none */
    const fake_config *cfg;
    fake_state state;
    fake_ctx primary[FAKE_MAX_GPUS];
    fake_stream legacy[FAKE_MAX_GPUS];
    uint32_t stream_ids;    /* the last stream id handed out */
    fake_pool default_pool[FAKE_MAX_GPUS];
    fake_pool *current_pool[FAKE_MAX_GPUS];
    fake_pool *pools;       /* created pools */
    fake_pool graph_pool[FAKE_MAX_GPUS]; /* memory of graph allocation nodes */
    fake_stream *streams;   /* created streams */
    uint64_t capture_seq;
    uint64_t rng; /* log-normal kernel durations (seeded by the pid) */
    struct fake_event *events; /* live events */
} fake_process;

extern fake_process g_fake;

#define FAKE_MAGIC_CTX 0x43545801u
#define FAKE_MAGIC_STREAM 0x53545201u
#define FAKE_MAGIC_POOL 0x504f4c01u
#define FAKE_MAGIC_EVENT 0x45564e01u
#define FAKE_MAGIC_EVENT_DEAD 0x45564e02u

/* CUDA_SUCCESS when cuInit succeeded in this process (not a forked child). */
CUresult fake_ready(void);

/* Returns fake_ready()'s error from the calling entry point, if any. */
#define REQUIRE_READY()                 \
    do {                                \
        CUresult r_ = fake_ready();     \
        if (r_ != CUDA_SUCCESS)         \
            return r_;                  \
    } while (0)

/* Thread-specific key of each thread's per-thread default streams. */
extern pthread_key_t ptds_key;

/* The current context's device, or CUDA_ERROR_INVALID_CONTEXT. */
CUresult fake_current_device(int *dev);

/* The calling thread's current context, NULL if none. */
fake_ctx *fake_current_ctx(void);

/*
 * A context closes (g_fake.mu held): its events die with it. A dead event's
 * memory is kept and any later use of it aborts the process: on NVIDIA's
 * driver it is a handle into freed memory.
 */
void fake_events_close(const fake_ctx *c);

/* 1 when dev is a valid ordinal. */
int fake_valid_device(int dev);

/*
 * Resolves a stream handle for the current context (ptsz: the NULL handle
 * means the per-thread stream). Returns NULL for an invalid handle.
 */
fake_stream *fake_resolve_stream(CUstream h, int ptsz, int dev);

/* Charges/uncharges GPU memory of this process; 0 or -1 when it is full. */
int fake_charge(int dev, uint64_t bytes);
void fake_uncharge(int dev, uint64_t bytes);

/* Called with g_fake.mu held after a synchronize: pools shrink to their threshold. */
void fake_pools_release_on_sync(int dev);

/* Called with g_fake.mu held: releases every allocation made on dev. */
void fake_mem_reset_device(int dev);

/*
 * Graphs: nodes and their executables (fake_cuda_stream.c). Only what the
 * model needs: the summed busy time of captured kernels, and allocation and
 * free nodes, whose memory comes from the device's graph pool when the
 * executable is launched or uploaded.
 */
#define FAKE_MAGIC_GNODE 0x474e4f01u

typedef struct fake_gnode {
    uint32_t magic;
    CUgraphNodeType type;      /* CU_GRAPH_NODE_TYPE_MEM_ALLOC, _MEM_FREE or _EMPTY */
    CUDA_MEM_ALLOC_NODE_PARAMS alloc; /* allocation nodes: as given, dptr filled in */
    CUdeviceptr free_ptr;      /* free nodes */
} fake_gnode;

typedef struct fake_graph {
    uint32_t magic;
    uint64_t cost_ns;
    fake_gnode **nodes;
    size_t n, cap;
} fake_graph;

/*
 * Adds an allocation node for params (size, device location) to g, giving it
 * its address (mu held). Returns CUDA_SUCCESS or an error.
 */
CUresult fake_graph_add_alloc(fake_graph *g, CUDA_MEM_ALLOC_NODE_PARAMS *params,
                              fake_gnode **out);

/* Adds a free node of ptr to g (mu held). */
CUresult fake_graph_add_free(fake_graph *g, CUdeviceptr ptr, fake_gnode **out);

/*
 * The memory side of launching (map = 1) or uploading (map = 0) an
 * executable with these nodes (mu held): the graph pools grow to hold the
 * allocations (CUDA_ERROR_OUT_OF_MEMORY when the GPU is full); a launch makes
 * them live at their fixed addresses (CUDA_ERROR_INVALID_VALUE if one still
 * is, from an earlier launch not freed) and applies the free nodes.
 */
CUresult fake_graph_mem(fake_gnode *const *nodes, size_t n, int map);

/* Initialises the default pools (mu held, at cuInit). */
void fake_mem_init(void);

#endif /* VGPU_FAKE_CUDA_H */
