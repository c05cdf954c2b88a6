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
 * pools.h - stream-ordered allocations charged by what their memory pool
 * reserves (CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), not by what they request.
 *
 * A pool keeps physical memory after frees, up to its release threshold, so
 * the claim is charged each pool's reserved bytes: growth when an allocation
 * makes the pool grow (reserved first, then settled to the observed delta),
 * shrinkage when a trim, destroy, synchronize or free shows the pool smaller.
 * One record per pool (default pools included) holds the last observed value.
 * A pool is charged to its own device (its location), not to the device of
 * the context that allocates from it, and to one claim of that device.
 */
#ifndef VGPU_POOLS_H
#define VGPU_POOLS_H

#include <stdbool.h>
#include <stdint.h>

#include "acct.h"
#include "gpus.h"
#include "vgpu_cuda.h"

/*
 * Pools and graph memory grow in whole pages of the VMM granularity (2 MiB on
 * current GPUs), so an allocation reserves its shortfall rounded up to it.
 */
#define VGPU_POOL_GRANULE (2ULL << 20)

/* bytes rounded up to whole granules, saturating. */
static inline uint64_t vgpu_granules(uint64_t bytes)
{
    return bytes > UINT64_MAX - VGPU_POOL_GRANULE
               ? UINT64_MAX
               : (bytes + VGPU_POOL_GRANULE - 1) & ~(VGPU_POOL_GRANULE - 1);
}

/* A pool allocation between vgpu_pool_alloc_begin and vgpu_pool_alloc_end. */
struct vgpu_pool_op {
    bool active;         /* false: the device is not enforced, nothing to do */
    CUmemoryPool pool;
    CUdevice device;
    uint64_t before;     /* the pool's reserved bytes before the driver call */
    struct vgpu_charge c;
};

/* After cuMemPoolCreate: pool lives on CUDA device dev (its location), whoever uses it. */
void vgpu_pool_created(CUmemoryPool pool, CUdevice dev);

/*
 * The device whose memory pool is: its location at creation, or the device
 * it is the default or current pool of; fallback when neither is known.
 */
CUdevice vgpu_pool_device(CUmemoryPool pool, CUdevice fallback);

/*
 * Prepares an allocation of size bytes from pool (NULL: the current pool of
 * CUDA device dev, which must be the pool's device) and reserves the bytes the pool may have to grow by.
 * Returns CUDA_SUCCESS, CUDA_ERROR_OUT_OF_MEMORY over the limit, or the
 * driver's error when the pool cannot be queried. On success the caller must
 * call the driver and then vgpu_pool_alloc_end, whatever happens.
 */
CUresult vgpu_pool_alloc_begin(CUdevice dev, CUmemoryPool pool, size_t size,
                               struct vgpu_pool_op *op);

/*
 * Settles op after the driver returned rc (and wrote *dptr on success): the
 * claim is charged the pool's observed growth. Growth beyond the limit undoes
 * the allocation (freed on stream, pool trimmed back), restores *dptr to
 * saved and returns CUDA_ERROR_OUT_OF_MEMORY. Otherwise returns rc.
 */
CUresult vgpu_pool_alloc_end(struct vgpu_pool_op *op, CUresult rc, CUdeviceptr *dptr,
                             CUdeviceptr saved, CUstream stream, bool ptsz);

/* A free of a pointer acct does not track, between begin and end. */
struct vgpu_pool_free {
    struct vgpu_ptrmap_entry e;
};

/*
 * Stops tracking ptr if it came from a pool. Returns true (fills *f) if so;
 * then call vgpu_pool_free_end after the driver's free.
 */
bool vgpu_pool_free_begin(CUdeviceptr ptr, struct vgpu_pool_free *f);

/* After the driver's free returned rc: re-tracks on failure, else observes the pool. */
void vgpu_pool_free_end(const struct vgpu_pool_free *f, CUresult rc);

/* After cuMemPoolTrimTo: returns what the pool released. */
void vgpu_pool_observe(CUmemoryPool pool);

/* After cuMemPoolDestroy succeeded: its bytes go once its last allocation is freed. */
void vgpu_pool_destroyed(CUmemoryPool pool);

/* After a stream or context synchronize: pools may have released down to their threshold. */
void vgpu_pools_observe_all(void);

/*
 * Graph memory: the physical memory a device keeps for the allocation nodes
 * of graphs (CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT), charged like one more
 * pool of that device. It grows when a graph is launched or uploaded (or
 * instantiated with CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD), so those calls are
 * bracketed by vgpu_pools_graph_mem_begin/end with what the graph may allocate.
 */
struct vgpu_graph_op {
    bool active;                        /* mu held: vgpu_pools_graph_mem_end must follow */
    uint64_t before[VGPU_MAX_GPUS];     /* reserved graph memory before the driver call */
    struct vgpu_charge c[VGPU_MAX_GPUS]; /* the reservation on each device (gpu NULL: none) */
};

/*
 * Before a driver call that may allocate bytes[d] of graph memory on each
 * CUDA device d < VGPU_MAX_GPUS: reserves on each enforced device what its
 * graph memory may have to grow by (bytes beyond what it holds unused).
 * Returns CUDA_SUCCESS (then call the driver and vgpu_pools_graph_mem_end, whatever
 * happens), CUDA_ERROR_OUT_OF_MEMORY over a limit (nothing reserved), or the
 * driver's error when a device's graph memory cannot be queried.
 */
CUresult vgpu_pools_graph_mem_begin(const uint64_t *bytes, struct vgpu_graph_op *op);

/*
 * After the driver call: each device's claim is charged its graph memory's
 * observed growth. A launch cannot be undone, so growth beyond what was
 * reserved is charged even past the limit (and logged): the reservation is
 * the graph's whole footprint, so only the driver's rounding can exceed it.
 */
void vgpu_pools_graph_mem_end(struct vgpu_graph_op *op);

/* After cuDeviceGraphMemTrim: returns what the device's graph memory released. */
void vgpu_pools_graph_mem_observe(CUdevice dev);

#endif /* VGPU_POOLS_H */
