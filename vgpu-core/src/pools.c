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

/* pools.c - see pools.h. */
#include "pools.h"

#include <pthread.h>
#include <stdlib.h>

#include "driver.h"
#include "gpus.h"
#include "log.h"
#include "ptrmap.h"

struct pool_rec {
    uint64_t pool;      /* the pool's handle, or graph_key(device) for its graph memory */
    bool graph;         /* the device's graph memory, queried with cuDeviceGetGraphMemAttribute */
    CUdevice device;    /* the pool's location */
    int part;           /* the claim of the device it is charged to */
    uint64_t charged;   /* last observed reserved bytes, charged to the claim */
    uint64_t live;      /* tracked allocations from the pool not yet freed */
    bool destroyed;     /* destroyed: unqueryable, released with its last allocation */
};

/*
 * Process-wide; mu is held across a pool allocation's driver call, so the
 * reserved value seen after it includes only that allocation's growth
 * (frees and synchronizes observe under mu too). Lock order: mu, then
 * vgpu_lock (taken inside acct).
 */
static struct {
    pthread_once_t once;
    pthread_mutex_t mu;
    struct pool_rec *recs;
    size_t n, cap;          /* n is also read without mu: zero means no pool seen */
    struct vgpu_ptrmap ptrs; /* pool allocation -> pool */
} P = {.once = PTHREAD_ONCE_INIT, .mu = PTHREAD_MUTEX_INITIALIZER};

static void fork_prepare(void)
{
    pthread_mutex_lock(&P.mu);
}

static void fork_parent(void)
{
    pthread_mutex_unlock(&P.mu);
}

/* The child has no CUDA context and none of the parent's allocations. */
static void fork_child(void)
{
    __atomic_store_n(&P.n, 0, __ATOMIC_RELAXED);
    vgpu_ptrmap_clear(&P.ptrs);
    pthread_mutex_unlock(&P.mu);
}

static void init(void)
{
    pthread_atfork(fork_prepare, fork_parent, fork_child);
}

static CUresult query(CUmemoryPool pool, CUmemPool_attribute attr, uint64_t *out)
{
    cuuint64_t v = 0;
    CUresult rc;

    if (vgpu_cu.cuMemPoolGetAttribute == NULL)
        return CUDA_ERROR_NOT_SUPPORTED;
    rc = vgpu_cu.cuMemPoolGetAttribute(pool, attr, &v);
    if (rc == CUDA_SUCCESS)
        *out = v;
    return rc;
}

/* Pool handles are pointers, so an odd key never names a pool. */
static uint64_t graph_key(CUdevice dev)
{
    return ((uint64_t)(unsigned)dev << 1) | 1;
}

static CUresult query_graph(CUdevice dev, CUgraphMem_attribute attr, uint64_t *out)
{
    cuuint64_t v = 0;
    CUresult rc;

    if (vgpu_cu.cuDeviceGetGraphMemAttribute == NULL)
        return CUDA_ERROR_NOT_SUPPORTED;
    rc = vgpu_cu.cuDeviceGetGraphMemAttribute(dev, attr, &v);
    if (rc == CUDA_SUCCESS)
        *out = v;
    return rc;
}

/* The reserved bytes of what r describes. */
static CUresult query_reserved(const struct pool_rec *r, uint64_t *out)
{
    if (r->graph)
        return query_graph(r->device, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, out);
    return query((CUmemoryPool)(uintptr_t)r->pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, out);
}

/* The live record of pool, or NULL (mu held). */
static struct pool_rec *find(uint64_t pool)
{
    for (size_t i = 0; i < P.n; i++) {
        if (P.recs[i].pool == pool && !P.recs[i].destroyed)
            return &P.recs[i];
    }
    return NULL;
}

/* A destroyed pool's record still waiting for its allocations, or the live one (mu held). */
static struct pool_rec *find_for_free(uint64_t pool)
{
    for (size_t i = 0; i < P.n; i++) {
        if (P.recs[i].pool == pool && P.recs[i].destroyed)
            return &P.recs[i];
    }
    return find(pool);
}

static struct pool_rec *add(uint64_t pool, CUdevice dev)
{
    if (P.n == P.cap) {
        size_t cap = P.cap == 0 ? 8 : P.cap * 2;
        struct pool_rec *r = realloc(P.recs, cap * sizeof(*r));

        if (r == NULL)
            return NULL;
        P.recs = r;
        P.cap = cap;
    }
    P.recs[P.n] = (struct pool_rec){.pool = pool, .device = dev, .part = vgpu_pick_part(dev)};
    __atomic_store_n(&P.n, P.n + 1, __ATOMIC_RELAXED);
    return &P.recs[P.n - 1];
}

static void drop(struct pool_rec *r)
{
    *r = P.recs[P.n - 1];
    __atomic_store_n(&P.n, P.n - 1, __ATOMIC_RELAXED);
}

/* Charges or returns the difference between reserved and what r has charged (mu held). */
static void settle(struct pool_rec *r, uint64_t reserved)
{
    if (reserved > r->charged)
        vgpu_bytes_add(r->device, r->part, reserved - r->charged);
    else
        vgpu_bytes_sub(r->device, r->part, r->charged - reserved);
    r->charged = reserved;
}

/* Re-reads r's reserved bytes; a destroyed pool is settled to 0 once empty (mu held). */
static void observe(struct pool_rec *r)
{
    uint64_t reserved;

    if (r->destroyed) {
        if (r->live == 0) {
            settle(r, 0);
            drop(r);
        }
        return;
    }
    if (query_reserved(r, &reserved) == CUDA_SUCCESS)
        settle(r, reserved);
}

/*
 * Before a driver call that may take size more bytes from what r describes,
 * which reserves reserved and uses used of them now: settles r and reserves
 * on its claim what it may have to grow by (mu held).
 */
static CUresult reserve_growth(struct pool_rec *r, uint64_t reserved, uint64_t used,
                               uint64_t size, struct vgpu_charge *c)
{
    uint64_t spare = reserved > used ? reserved - used : 0;

    settle(r, reserved);
    /* A pool is charged to one device and claim all its life. */
    return vgpu_charge_begin(r->device, r->part, size > spare ? vgpu_granules(size - spare) : 0,
                             c);
}

/*
 * After the driver call, r having reserved before before it: keeps of c the
 * growth observed and sets *after. False (c untouched) when the growth does
 * not fit the limit (mu held).
 */
static bool keep_growth(struct pool_rec *r, uint64_t before, struct vgpu_charge *c,
                        uint64_t *after)
{
    /* Unobservable now: assume it grew by all we reserved (never undercharge). */
    if (query_reserved(r, after) != CUDA_SUCCESS)
        *after = before + c->size;
    if (vgpu_charge_resize(c, *after > before ? *after - before : 0) != CUDA_SUCCESS)
        return false;
    vgpu_charge_keep(c);
    r->charged = before + c->size;
    settle(r, *after);
    return true;
}

void vgpu_pool_created(CUmemoryPool pool, CUdevice dev)
{
    pthread_once(&P.once, init);
    pthread_mutex_lock(&P.mu);
    if (find((uintptr_t)pool) == NULL && add((uintptr_t)pool, dev) == NULL)
        VGPU_WARN("out of memory tracking a memory pool; it is charged to the device it is used on");
    pthread_mutex_unlock(&P.mu);
}

CUdevice vgpu_pool_device(CUmemoryPool pool, CUdevice fallback)
{
    struct pool_rec *r;
    CUmemoryPool p;
    int n = 0;

    pthread_once(&P.once, init);
    pthread_mutex_lock(&P.mu);
    r = find((uintptr_t)pool);
    if (r != NULL) {
        CUdevice dev = r->device;
        pthread_mutex_unlock(&P.mu);
        return dev;
    }
    pthread_mutex_unlock(&P.mu);
    /* Not created through us: a device's default or current pool. */
    if (vgpu_cu.cuDeviceGetCount == NULL || vgpu_cu.cuDeviceGetCount(&n) != CUDA_SUCCESS)
        return fallback;
    for (CUdevice d = 0; d < n; d++) {
        if ((vgpu_cu.cuDeviceGetDefaultMemPool != NULL &&
             vgpu_cu.cuDeviceGetDefaultMemPool(&p, d) == CUDA_SUCCESS && p == pool) ||
            (vgpu_cu.cuDeviceGetMemPool != NULL && vgpu_cu.cuDeviceGetMemPool(&p, d) == CUDA_SUCCESS &&
             p == pool))
            return d;
    }
    return fallback;
}

CUresult vgpu_pool_alloc_begin(CUdevice dev, CUmemoryPool pool, size_t size,
                               struct vgpu_pool_op *op)
{
    struct vgpu_gpu *g;
    struct pool_rec *r;
    uint64_t reserved = 0, used = 0;
    CUresult rc = vgpu_gpu_refusal(dev, &g);

    op->active = false;
    if (rc != CUDA_SUCCESS)
        return rc;
    if (g == NULL || !g->enforce)
        return CUDA_SUCCESS;
    if (pool == NULL) {
        if (vgpu_cu.cuDeviceGetMemPool == NULL)
            return CUDA_ERROR_NOT_SUPPORTED;
        rc = vgpu_cu.cuDeviceGetMemPool(&pool, dev);
        if (rc != CUDA_SUCCESS)
            return rc;
    }
    pthread_once(&P.once, init);
    pthread_mutex_lock(&P.mu);
    /* A pool we cannot observe could grow unseen: refuse with the driver's reason. */
    rc = query(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved);
    if (rc == CUDA_SUCCESS)
        rc = query(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used);
    if (rc != CUDA_SUCCESS) {
        pthread_mutex_unlock(&P.mu);
        return rc;
    }
    r = find((uintptr_t)pool);
    if (r == NULL && (r = add((uintptr_t)pool, dev)) == NULL) {
        pthread_mutex_unlock(&P.mu);
        VGPU_WARN("out of memory tracking a memory pool; refusing the allocation");
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    /* Releases the driver made on its own (e.g. at an event synchronize) count from now. */
    rc = reserve_growth(r, reserved, used, size, &op->c);
    if (rc != CUDA_SUCCESS) {
        pthread_mutex_unlock(&P.mu);
        return rc;
    }
    op->active = true;
    op->pool = pool;
    op->device = r->device;
    op->before = reserved;
    return CUDA_SUCCESS;
}

/* The pool grew past the limit: frees the allocation and trims the pool back (mu held). */
static void undo(struct vgpu_pool_op *op, struct pool_rec *r, CUdeviceptr ptr, CUstream stream,
                 bool ptsz)
{
    PFN_cuMemFreeAsync free_fn = ptsz ? vgpu_cu.cuMemFreeAsync_ptsz : vgpu_cu.cuMemFreeAsync;

    if (free_fn == NULL || free_fn(ptr, stream) != CUDA_SUCCESS)
        VGPU_WARN("cannot free a pool allocation over the limit; it stays charged");
    if (vgpu_cu.cuMemPoolTrimTo != NULL)
        vgpu_cu.cuMemPoolTrimTo(op->pool, op->before);
    vgpu_charge_abort(&op->c);
    /* What the driver could not release yet is in use: it stays charged until it is. */
    observe(r);
}

CUresult vgpu_pool_alloc_end(struct vgpu_pool_op *op, CUresult rc, CUdeviceptr *dptr,
                             CUdeviceptr saved, CUstream stream, bool ptsz)
{
    struct vgpu_ptrmap_entry e;
    struct pool_rec *r;
    uint64_t after;

    if (!op->active)
        return rc;
    r = find((uintptr_t)op->pool);
    if (rc != CUDA_SUCCESS) {
        vgpu_charge_abort(&op->c);
        pthread_mutex_unlock(&P.mu);
        return rc;
    }
    if (!keep_growth(r, op->before, &op->c, &after)) {
        undo(op, r, *dptr, stream, ptsz);
        pthread_mutex_unlock(&P.mu);
        VGPU_INFO("GPU %d: pool grew by %llu bytes, over the limit; allocation refused",
                  (int)op->device, (unsigned long long)(after - op->before));
        *dptr = saved;
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    e = (struct vgpu_ptrmap_entry){.key = *dptr, .device = op->device, .refcount = 1,
                                   .pool = (uintptr_t)op->pool};
    if (vgpu_ptrmap_put(&P.ptrs, &e) == 0)
        r->live++;
    else
        VGPU_WARN("out of memory tracking a pool allocation; its free is seen at the next sync");
    pthread_mutex_unlock(&P.mu);
    return CUDA_SUCCESS;
}

bool vgpu_pool_free_begin(CUdeviceptr ptr, struct vgpu_pool_free *f)
{
    bool found;

    if (__atomic_load_n(&P.n, __ATOMIC_RELAXED) == 0)
        return false;
    pthread_mutex_lock(&P.mu);
    found = vgpu_ptrmap_remove(&P.ptrs, ptr, &f->e) == 0;
    pthread_mutex_unlock(&P.mu);
    return found;
}

void vgpu_pool_free_end(const struct vgpu_pool_free *f, CUresult rc)
{
    struct pool_rec *r;

    pthread_mutex_lock(&P.mu);
    r = find_for_free(f->e.pool);
    if (rc != CUDA_SUCCESS) {
        if (vgpu_ptrmap_put(&P.ptrs, &f->e) != 0 && r != NULL)
            r->live--;
    } else if (r != NULL) {
        r->live--;
        observe(r);
    }
    pthread_mutex_unlock(&P.mu);
}

void vgpu_pool_observe(CUmemoryPool pool)
{
    struct pool_rec *r;

    if (__atomic_load_n(&P.n, __ATOMIC_RELAXED) == 0)
        return;
    pthread_mutex_lock(&P.mu);
    r = find((uintptr_t)pool);
    if (r != NULL)
        observe(r);
    pthread_mutex_unlock(&P.mu);
}

void vgpu_pool_destroyed(CUmemoryPool pool)
{
    struct pool_rec *r;

    if (__atomic_load_n(&P.n, __ATOMIC_RELAXED) == 0)
        return;
    pthread_mutex_lock(&P.mu);
    r = find((uintptr_t)pool);
    if (r != NULL) {
        r->destroyed = true;
        observe(r);
    }
    pthread_mutex_unlock(&P.mu);
}

void vgpu_pools_observe_all(void)
{
    if (__atomic_load_n(&P.n, __ATOMIC_RELAXED) == 0)
        return;
    pthread_mutex_lock(&P.mu);
    /* Backwards: observe may drop the record it looks at (swapped with the last). */
    for (size_t i = P.n; i > 0; i--)
        observe(&P.recs[i - 1]);
    pthread_mutex_unlock(&P.mu);
}

/* The record of dev's graph memory, added on first use (mu held). */
static struct pool_rec *graph_rec(CUdevice dev)
{
    struct pool_rec *r = find(graph_key(dev));

    if (r == NULL && (r = add(graph_key(dev), dev)) != NULL)
        r->graph = true;
    return r;
}

/* Undoes the reservations of op made so far and releases mu. */
static void graph_abort(struct vgpu_graph_op *op)
{
    for (int d = 0; d < VGPU_MAX_GPUS; d++) {
        if (op->c[d].gpu != NULL)
            vgpu_charge_abort(&op->c[d]);
    }
    op->active = false;
    pthread_mutex_unlock(&P.mu);
}

CUresult vgpu_pools_graph_mem_begin(const uint64_t *bytes, struct vgpu_graph_op *op)
{
    CUresult rc = CUDA_SUCCESS;

    op->active = false;
    for (int d = 0; d < VGPU_MAX_GPUS; d++)
        op->c[d].gpu = NULL;
    pthread_once(&P.once, init);
    pthread_mutex_lock(&P.mu);
    op->active = true;
    for (CUdevice d = 0; d < VGPU_MAX_GPUS; d++) {
        struct vgpu_gpu *g = NULL;
        uint64_t reserved = 0, used = 0;
        struct pool_rec *r;

        if (bytes[d] != 0 && (rc = vgpu_gpu_refusal(d, &g)) != CUDA_SUCCESS)
            break;
        if (g == NULL || !g->enforce)
            continue;
        /* Graph memory we cannot observe could grow unseen: refuse with the driver's reason. */
        rc = query_graph(d, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &reserved);
        if (rc == CUDA_SUCCESS)
            rc = query_graph(d, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &used);
        if (rc == CUDA_SUCCESS && (r = graph_rec(d)) == NULL) {
            VGPU_WARN("out of memory tracking graph memory; refusing the graph");
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        }
        if (rc != CUDA_SUCCESS)
            break;
        rc = reserve_growth(r, reserved, used, bytes[d], &op->c[d]);
        if (rc != CUDA_SUCCESS)
            break;
        op->before[d] = reserved;
    }
    if (rc != CUDA_SUCCESS)
        graph_abort(op);
    return rc;
}

void vgpu_pools_graph_mem_end(struct vgpu_graph_op *op)
{
    if (!op->active)
        return;
    for (CUdevice d = 0; d < VGPU_MAX_GPUS; d++) {
        struct vgpu_charge *c = &op->c[d];
        struct pool_rec *r;
        uint64_t after;

        if (c->gpu == NULL)
            continue;
        r = find(graph_key(d));
        if (!keep_growth(r, op->before[d], c, &after)) {
            vgpu_charge_abort(c);
            settle(r, after);
            VGPU_WARN("GPU %d: graph memory grew by %llu bytes, more than reserved and over the "
                      "limit; charged, since the graph already runs",
                      (int)d, (unsigned long long)(after - op->before[d]));
        }
    }
    op->active = false;
    pthread_mutex_unlock(&P.mu);
}

void vgpu_pools_graph_mem_observe(CUdevice dev)
{
    struct pool_rec *r;

    if (__atomic_load_n(&P.n, __ATOMIC_RELAXED) == 0)
        return;
    pthread_mutex_lock(&P.mu);
    r = find(graph_key(dev));
    if (r != NULL)
        observe(r);
    pthread_mutex_unlock(&P.mu);
}
