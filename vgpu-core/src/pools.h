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
#include "vgpu_cuda.h"

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

#endif /* VGPU_POOLS_H */
