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
 * fake_cuda_mem.c - fake CUDA driver memory: linear, pitched, managed,
 * stream-ordered (pools), virtual memory management and arrays.
 *
 * There is no backing store: device addresses are numbers handed out from a
 * per-process range and never reused. What is enforced is the physical
 * total of each GPU, across processes, through the shared state: a request
 * that does not fit fails with exactly CUDA_ERROR_OUT_OF_MEMORY. Sizes are
 * charged exactly as requested (no rounding) except where the real API
 * defines the size: pitch x height, pool growth in 2 MiB granules, VMM
 * handles (multiples of the granularity) and arrays (the size reported by
 * the memory-requirements queries).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "fake_cuda.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define ARRAY_ALIGN (64ULL << 10)
#define VA_BASE 0x300000000000ULL
#define LINEAR_ALIGN 512ULL

/*
 * REC_IPC: memory of another process opened with cuIpcOpenMemHandle (charged to nobody here).
 * REC_EXT: an imported external memory object (cuImportExternalMemory), keyed by its handle.
 */
typedef enum rec_kind { REC_LINEAR, REC_POOL, REC_VMM, REC_ARRAY, REC_IPC, REC_EXT } rec_kind;

/* One live allocation, keyed by device address or handle value. */
typedef struct rec {
    uint64_t key;
    uint64_t size;    /* requested (linear, pool) or charged size */
    uint64_t charged; /* bytes charged to the GPU for this record */
    int dev;
    rec_kind kind;
    fake_pool *pool;
    unsigned int refs;  /* VMM: handle references + mappings; the memory goes with the last */
    unsigned int hrefs; /* VMM: handle references (cuMemCreate + retains) not yet released */
    int ipc;            /* linear or VMM exported, REC_IPC or a VMM import: its shared record
                           (fake_ipc), else -1 */
    uint64_t ipc_id;    /* that record's export id */
    int fd;             /* VMM shared as a POSIX fd: the file naming it (kept open), else -1 */
    unsigned int htypes; /* VMM: CUmemAllocationHandleType bits it may be exported as */
    CUmemLocation host;  /* VMM in host memory: its location (type 0: device memory on dev) */
    struct rec *next;
} rec;

typedef struct va_range {
    uint64_t base;
    uint64_t size;
    rec *handle; /* mappings only */
    struct va_range *next;
} va_range;

static rec **table;
static size_t table_buckets;
static size_t table_count;
static uint64_t next_va = VA_BASE;
static uint64_t next_handle = 0x1000;
static va_range *reservations;
static va_range *mappings;

static uint64_t round_up(uint64_t v, uint64_t a)
{
    return (v + a - 1) / a * a;
}

static size_t bucket_of(uint64_t key, size_t buckets)
{
    return (size_t)((key * 0x9e3779b97f4a7c15ULL) >> 20) & (buckets - 1);
}

/* Inserts r; returns -1 when the table cannot grow. */
static int table_put(rec *r)
{
    if (table_count >= table_buckets * 2) {
        size_t nb = table_buckets == 0 ? 1024 : table_buckets * 2;
        rec **nt = calloc(nb, sizeof(*nt));
        if (nt == NULL)
            return -1;
        for (size_t i = 0; i < table_buckets; i++) {
            for (rec *e = table[i], *next; e != NULL; e = next) {
                next = e->next;
                size_t b = bucket_of(e->key, nb);
                e->next = nt[b];
                nt[b] = e;
            }
        }
        free(table);
        table = nt;
        table_buckets = nb;
    }
    size_t b = bucket_of(r->key, table_buckets);
    r->next = table[b];
    table[b] = r;
    table_count++;
    return 0;
}

static rec *table_get(uint64_t key)
{
    if (table_buckets == 0)
        return NULL;
    for (rec *e = table[bucket_of(key, table_buckets)]; e != NULL; e = e->next)
        if (e->key == key)
            return e;
    return NULL;
}

static void table_del(rec *r)
{
    rec **p = &table[bucket_of(r->key, table_buckets)];
    while (*p != r)
        p = &(*p)->next;
    *p = r->next;
    table_count--;
}

/* Creates and registers a record (mu held); NULL when out of host memory. */
static rec *rec_new(uint64_t key, uint64_t size, uint64_t charged, int dev, rec_kind kind)
{
    rec *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return NULL;
    *r = (rec){.key = key, .size = size, .charged = charged, .dev = dev, .kind = kind, .refs = 1,
               .ipc = -1, .fd = -1};
    if (table_put(r) != 0) {
        free(r);
        return NULL;
    }
    return r;
}

static uint64_t take_va(uint64_t size, uint64_t align)
{
    uint64_t base = round_up(next_va, align);
    next_va = base + round_up(size, LINEAR_ALIGN);
    return base;
}

/* Legacy 32-bit allocations get addresses below 4 GiB; 0 when that range is used up. */
#define VA_LOW_BASE 0x10000000ULL
#define VA_LOW_END 0x100000000ULL
static uint64_t next_va_low = VA_LOW_BASE;

static uint64_t take_va_low(uint64_t size)
{
    uint64_t base = round_up(next_va_low, LINEAR_ALIGN);

    if (size > VA_LOW_END - base || round_up(size, LINEAR_ALIGN) > VA_LOW_END - base)
        return 0;
    next_va_low = base + round_up(size, LINEAR_ALIGN);
    return base;
}

/* ------------------------------------------------------------------------ */
/* Pools                                                                    */
/* ------------------------------------------------------------------------ */

static void pool_init(fake_pool *p, int dev)
{
    memset(p, 0, sizeof(*p));
    p->magic = FAKE_MAGIC_POOL;
    p->dev = dev;
}

void fake_mem_init(void)
{
    for (int d = 0; d < g_fake.cfg->gpu_count; d++) {
        pool_init(&g_fake.graph_pool[d], d);
        pool_init(&g_fake.default_pool[d], d);
        g_fake.current_pool[d] = &g_fake.default_pool[d];
    }
}

static void pool_trim(fake_pool *p, uint64_t keep)
{
    uint64_t target = round_up(p->used > keep ? p->used : keep, FAKE_GRANULARITY);
    if (p->reserved > target) {
        fake_uncharge(p->dev, p->reserved - target);
        p->reserved = target;
    }
}

static void pool_free_if_done(fake_pool *p)
{
    if (!p->destroyed || p->used != 0)
        return;
    pool_trim(p, 0);
    for (fake_pool **pp = &g_fake.pools; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == p) {
            *pp = p->next;
            break;
        }
    }
    p->magic = 0;
    free(p);
}

void fake_pools_release_on_sync(int dev)
{
    if (g_fake.default_pool[dev].reserved > g_fake.default_pool[dev].threshold)
        pool_trim(&g_fake.default_pool[dev], g_fake.default_pool[dev].threshold);
    for (fake_pool *p = g_fake.pools; p != NULL; p = p->next)
        if (p->dev == dev && p->reserved > p->threshold)
            pool_trim(p, p->threshold);
}

static fake_pool *valid_pool(CUmemoryPool pool)
{
    fake_pool *p = (fake_pool *)pool;
    return p != NULL && p->magic == FAKE_MAGIC_POOL && !p->destroyed ? p : NULL;
}

static CUresult check_device_location(const CUmemLocation *loc)
{
    if (loc->type != CU_MEM_LOCATION_TYPE_DEVICE || !fake_valid_device(loc->id))
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps)
{
    CUresult r = fake_ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (pool == NULL || poolProps == NULL || poolProps->allocType != CU_MEM_ALLOCATION_TYPE_PINNED)
        return CUDA_ERROR_INVALID_VALUE;
    if ((r = check_device_location(&poolProps->location)) != CUDA_SUCCESS)
        return r;
    fake_pool *p = malloc(sizeof(*p));
    if (p == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pool_init(p, poolProps->location.id);
    pthread_mutex_lock(&g_fake.mu);
    p->next = g_fake.pools;
    g_fake.pools = p;
    pthread_mutex_unlock(&g_fake.mu);
    *pool = (CUmemoryPool)p;
    return CUDA_SUCCESS;
}

CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
    CUresult r = fake_ready();
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&g_fake.mu);
    fake_pool *p = valid_pool(pool);
    if (p == NULL || p == &g_fake.default_pool[p->dev]) {
        pthread_mutex_unlock(&g_fake.mu);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (g_fake.current_pool[p->dev] == p)
        g_fake.current_pool[p->dev] = &g_fake.default_pool[p->dev];
    /* Outstanding allocations keep the pool until they are freed. */
    p->destroyed = 1;
    pool_free_if_done(p);
    pthread_mutex_unlock(&g_fake.mu);
    return CUDA_SUCCESS;
}

CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
    CUresult r = fake_ready();
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&g_fake.mu);
    fake_pool *p = valid_pool(pool);
    if (p != NULL)
        pool_trim(p, minBytesToKeep);
    pthread_mutex_unlock(&g_fake.mu);
    return p == NULL ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

static CUresult pool_attribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value, int set)
{
    CUresult r = fake_ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (value == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_fake.mu);
    fake_pool *p = valid_pool(pool);
    cuuint64_t *v64 = value;
    int *vi = value;
    r = p == NULL ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
    if (p != NULL) {
        switch (attr) {
        case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
        case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
        case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
            if (set)
                p->reuse[attr - 1] = *vi;
            else
                *vi = p->reuse[attr - 1];
            break;
        case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
            if (set)
                p->threshold = *v64;
            else
                *v64 = p->threshold;
            break;
        case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT:
        case CU_MEMPOOL_ATTR_USED_MEM_CURRENT:
            if (set)
                r = CUDA_ERROR_INVALID_VALUE;
            else
                *v64 = attr == CU_MEMPOOL_ATTR_USED_MEM_CURRENT ? p->used : p->reserved;
            break;
        case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
        case CU_MEMPOOL_ATTR_USED_MEM_HIGH: {
            uint64_t *high = attr == CU_MEMPOOL_ATTR_USED_MEM_HIGH ? &p->used_high
                                                                   : &p->reserved_high;
            /* Only a reset to zero may be written; it restarts the watermark. */
            if (!set)
                *v64 = *high;
            else if (*v64 != 0)
                r = CUDA_ERROR_INVALID_VALUE;
            else
                *high = attr == CU_MEMPOOL_ATTR_USED_MEM_HIGH ? p->used : p->reserved;
            break;
        }
        default:
            r = CUDA_ERROR_INVALID_VALUE;
        }
    }
    pthread_mutex_unlock(&g_fake.mu);
    return r;
}

CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    return pool_attribute(pool, attr, value, 0);
}

CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    return pool_attribute(pool, attr, value, 1);
}

static CUresult device_pool(CUmemoryPool *pool, CUdevice dev, int current)
{
    CUresult r = fake_ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (pool == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (!fake_valid_device(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&g_fake.mu);
    *pool = (CUmemoryPool)(current ? g_fake.current_pool[dev] : &g_fake.default_pool[dev]);
    pthread_mutex_unlock(&g_fake.mu);
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev)
{
    return device_pool(pool_out, dev, 0);
}

CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
    return device_pool(pool, dev, 1);
}

CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool)
{
    CUresult r = fake_ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (!fake_valid_device(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&g_fake.mu);
    fake_pool *p = valid_pool(pool);
    if (p != NULL && p->dev == dev)
        g_fake.current_pool[dev] = p;
    pthread_mutex_unlock(&g_fake.mu);
    return p != NULL && p->dev == dev ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* Takes bytes from pool p, growing its reservation in granules (mu held). */
static CUresult pool_alloc(fake_pool *p, CUdeviceptr *dptr, size_t bytesize)
{
    uint64_t spare = p->reserved - p->used;
    if (bytesize > spare) {
        uint64_t grow = round_up(bytesize - spare, FAKE_GRANULARITY);
        if (fake_charge(p->dev, grow) != 0)
            return CUDA_ERROR_OUT_OF_MEMORY;
        p->reserved += grow;
    }
    uint64_t va = take_va(bytesize, LINEAR_ALIGN);
    rec *r = rec_new(va, bytesize, 0, p->dev, REC_POOL);
    if (r == NULL) {
        pool_trim(p, 0);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    r->pool = p;
    p->used += bytesize;
    if (p->used > p->used_high)
        p->used_high = p->used;
    if (p->reserved > p->reserved_high)
        p->reserved_high = p->reserved;
    *dptr = va;
    return CUDA_SUCCESS;
}

/*
 * Checks every allocation starts with: the driver is ready, there is an
 * out-pointer and a non-zero size, and a context is current; its device is
 * returned in *dev.
 */
static CUresult alloc_begin(const void *out, uint64_t size, int *dev)
{
    CUresult r = fake_ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (out == NULL || size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    return fake_current_device(dev);
}

static CUresult alloc_async(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                            CUstream hStream, int ptsz, int from_pool)
{
    int dev;
    CUresult r = alloc_begin(dptr, bytesize, &dev);
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&g_fake.mu);
    fake_stream *s = fake_resolve_stream(hStream, ptsz, dev);
    /* As the real driver: the current pool of the stream's device. */
    fake_pool *p = from_pool ? valid_pool(pool) : s != NULL ? g_fake.current_pool[s->dev] : NULL;
    if (s == NULL) {
        r = CUDA_ERROR_INVALID_HANDLE;
    } else if (p == NULL) {
        r = CUDA_ERROR_INVALID_VALUE;
    } else if (s->capture == CU_STREAM_CAPTURE_STATUS_ACTIVE) {
        /* Captured: an allocation node of the graph, on the pool's device. */
        CUDA_MEM_ALLOC_NODE_PARAMS params = {.bytesize = bytesize};
        params.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
        params.poolProps.location = (CUmemLocation){CU_MEM_LOCATION_TYPE_DEVICE, p->dev};
        r = fake_graph_add_alloc(s->capture_graph, &params, NULL);
        if (r == CUDA_SUCCESS)
            *dptr = params.dptr;
    } else {
        r = pool_alloc(p, dptr, bytesize);
    }
    pthread_mutex_unlock(&g_fake.mu);
    return r;
}

CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    return alloc_async(dptr, bytesize, NULL, hStream, 0, 0);
}

CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    return alloc_async(dptr, bytesize, NULL, hStream, 1, 0);
}

CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                 CUstream hStream)
{
    return alloc_async(dptr, bytesize, pool, hStream, 0, 1);
}

CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                      CUstream hStream)
{
    return alloc_async(dptr, bytesize, pool, hStream, 1, 1);
}

/* ------------------------------------------------------------------------ */
/* Graph memory                                                             */
/* ------------------------------------------------------------------------ */

static CUresult free_linear(CUdeviceptr dptr);

static CUresult graph_add(fake_graph *g, fake_gnode *node, fake_gnode **out)
{
    if (g->n == g->cap) {
        size_t cap = g->cap == 0 ? 8 : g->cap * 2;
        fake_gnode **nodes = realloc(g->nodes, cap * sizeof(*nodes));
        if (nodes == NULL) {
            free(node);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        g->nodes = nodes;
        g->cap = cap;
    }
    node->magic = FAKE_MAGIC_GNODE;
    g->nodes[g->n++] = node;
    if (out != NULL)
        *out = node;
    return CUDA_SUCCESS;
}

CUresult fake_graph_add_alloc(fake_graph *g, CUDA_MEM_ALLOC_NODE_PARAMS *params,
                              fake_gnode **out)
{
    if (params == NULL || params->bytesize == 0 ||
        params->poolProps.allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
        check_device_location(&params->poolProps.location) != CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_VALUE;
    fake_gnode *node = calloc(1, sizeof(*node));
    if (node == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    node->type = CU_GRAPH_NODE_TYPE_MEM_ALLOC;
    node->alloc = *params;
    node->alloc.dptr = take_va(params->bytesize, LINEAR_ALIGN);
    CUresult r = graph_add(g, node, out);
    if (r == CUDA_SUCCESS)
        params->dptr = node->alloc.dptr;
    return r;
}

CUresult fake_graph_add_free(fake_graph *g, CUdeviceptr ptr, fake_gnode **out)
{
    fake_gnode *node = calloc(1, sizeof(*node));
    if (node == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    node->type = CU_GRAPH_NODE_TYPE_MEM_FREE;
    node->free_ptr = ptr;
    return graph_add(g, node, out);
}

/* Grows dev's graph pool so that need more bytes fit unused (mu held). */
static CUresult graph_pool_fit(int dev, uint64_t need)
{
    fake_pool *p = &g_fake.graph_pool[dev];
    uint64_t spare = p->reserved - p->used;
    if (need > spare) {
        uint64_t grow = round_up(need - spare, FAKE_GRANULARITY);
        if (fake_charge(dev, grow) != 0)
            return CUDA_ERROR_OUT_OF_MEMORY;
        p->reserved += grow;
        if (p->reserved > p->reserved_high)
            p->reserved_high = p->reserved;
    }
    return CUDA_SUCCESS;
}

CUresult fake_graph_mem(fake_gnode *const *nodes, size_t n, int map)
{
    uint64_t need[FAKE_MAX_GPUS] = {0};
    for (size_t i = 0; i < n; i++) {
        const fake_gnode *node = nodes[i];
        if (node->type != CU_GRAPH_NODE_TYPE_MEM_ALLOC)
            continue;
        if (map && table_get(node->alloc.dptr) != NULL)
            return CUDA_ERROR_INVALID_VALUE; /* still allocated by an earlier launch */
        need[node->alloc.poolProps.location.id] += node->alloc.bytesize;
    }
    for (int d = 0; d < g_fake.cfg->gpu_count; d++) {
        CUresult r = need[d] != 0 ? graph_pool_fit(d, need[d]) : CUDA_SUCCESS;
        if (r != CUDA_SUCCESS)
            return r;
    }
    if (!map)
        return CUDA_SUCCESS;
    for (size_t i = 0; i < n; i++) {
        const fake_gnode *node = nodes[i];
        if (node->type != CU_GRAPH_NODE_TYPE_MEM_ALLOC)
            continue;
        fake_pool *p = &g_fake.graph_pool[node->alloc.poolProps.location.id];
        rec *r = rec_new(node->alloc.dptr, node->alloc.bytesize, 0, p->dev, REC_POOL);
        if (r == NULL)
            return CUDA_ERROR_OUT_OF_MEMORY;
        r->pool = p;
        p->used += node->alloc.bytesize;
        if (p->used > p->used_high)
            p->used_high = p->used;
    }
    for (size_t i = 0; i < n; i++) {
        if (nodes[i]->type == CU_GRAPH_NODE_TYPE_MEM_FREE)
            (void)free_linear(nodes[i]->free_ptr);
    }
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr, void *value)
{
    REQUIRE_READY();
    if (!fake_valid_device(device))
        return CUDA_ERROR_INVALID_DEVICE;
    if (value == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&g_fake.mu);
    const fake_pool *p = &g_fake.graph_pool[device];
    switch (attr) {
    case CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT:
        *(cuuint64_t *)value = p->used;
        break;
    case CU_GRAPH_MEM_ATTR_USED_MEM_HIGH:
        *(cuuint64_t *)value = p->used_high;
        break;
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT:
        *(cuuint64_t *)value = p->reserved;
        break;
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH:
        *(cuuint64_t *)value = p->reserved_high;
        break;
    default:
        r = CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_unlock(&g_fake.mu);
    return r;
}

CUresult cuDeviceGraphMemTrim(CUdevice device)
{
    REQUIRE_READY();
    if (!fake_valid_device(device))
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&g_fake.mu);
    pool_trim(&g_fake.graph_pool[device], 0);
    pthread_mutex_unlock(&g_fake.mu);
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------------ */
/* Linear memory                                                            */
/* ------------------------------------------------------------------------ */

/* low: a legacy allocation, addressed below 4 GiB. */
static CUresult alloc_linear_at(CUdeviceptr *dptr, uint64_t size, int low)
{
    int dev;
    CUresult r = alloc_begin(dptr, size, &dev);
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&g_fake.mu);
    if (fake_charge(dev, size) != 0) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        uint64_t va = low ? take_va_low(size) : take_va(size, LINEAR_ALIGN);
        if (va == 0 || rec_new(va, size, size, dev, REC_LINEAR) == NULL) {
            fake_uncharge(dev, size);
            r = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            *dptr = va;
        }
    }
    pthread_mutex_unlock(&g_fake.mu);
    return r;
}

static CUresult alloc_linear(CUdeviceptr *dptr, uint64_t size)
{
    return alloc_linear_at(dptr, size, 0);
}

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    return alloc_linear(dptr, bytesize);
}

CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST)
        return CUDA_ERROR_INVALID_VALUE;
    return alloc_linear(dptr, bytesize);
}

CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
                            unsigned int ElementSizeBytes)
{
    if (pPitch == NULL || WidthInBytes == 0 || Height == 0 ||
        (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16))
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t pitch = round_up(WidthInBytes, LINEAR_ALIGN);
    if (pitch < WidthInBytes || Height > UINT64_MAX / pitch)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = alloc_linear(dptr, pitch * Height);
    if (r == CUDA_SUCCESS)
        *pPitch = (size_t)pitch;
    return r;
}

/* Frees a linear or pool allocation (mu held). */
static CUresult free_linear(CUdeviceptr dptr)
{
    rec *r = table_get(dptr);
    if (r == NULL || (r->kind != REC_LINEAR && r->kind != REC_POOL))
        return CUDA_ERROR_INVALID_VALUE;
    table_del(r);
    if (r->kind == REC_POOL) {
        r->pool->used -= r->size;
        pool_free_if_done(r->pool);
    } else {
        fake_uncharge(r->dev, r->charged);
    }
    /* Exported: the memory lives on while an importer holds it. */
    if (r->ipc >= 0)
        fake_state_ipc_drop(&g_fake.state, r->ipc);
    free(r);
    return CUDA_SUCCESS;
}

/*
 * Legacy IPC. The handle carries a magic, the shared record's index and its
 * export id; the record lives in the node-wide state file, so a process
 * that opens the handle holds the physical memory, whichever process frees,
 * closes, exits or is killed first (fake_state.h).
 */
#define IPC_MAGIC 0x4350494b41464756ULL /* "VGFAKIPC" */

typedef struct ipc_wire {
    uint64_t magic;
    uint32_t idx;
    uint32_t reserved;
    uint64_t id;
    uint64_t size;
} ipc_wire;

CUresult cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr)
{
    CUresult res = fake_ready();
    if (res != CUDA_SUCCESS)
        return res;
    if (pHandle == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_fake.mu);
    rec *r = table_get(dptr);
    if (r == NULL || r->kind != REC_LINEAR) {
        res = CUDA_ERROR_INVALID_VALUE;
    } else if (r->ipc < 0) {
        uint64_t id = 0;
        int k = fake_state_ipc_export(&g_fake.state, g_fake.cfg->gpus[r->dev].phys, r->charged,
                                      &id);
        if (k < 0) {
            res = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            r->ipc = k;
            r->ipc_id = id;
            r->charged = 0; /* on the shared record's books now */
        }
    }
    if (res == CUDA_SUCCESS) {
        ipc_wire w = {.magic = IPC_MAGIC, .idx = (uint32_t)r->ipc, .id = r->ipc_id,
                      .size = r->size};
        memset(pHandle, 0, sizeof(*pHandle));
        memcpy(pHandle->reserved, &w, sizeof(w));
    }
    pthread_mutex_unlock(&g_fake.mu);
    return res;
}

CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags)
{
    CUresult res = fake_ready();
    ipc_wire w;
    int phys = -1, dev = -1, cur;
    uint64_t bytes = 0;
    if (res != CUDA_SUCCESS)
        return res;
    if ((res = fake_current_device(&cur)) != CUDA_SUCCESS)
        return res;
    memcpy(&w, handle.reserved, sizeof(w));
    if (pdptr == NULL || (Flags & ~(unsigned int)CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) != 0 ||
        w.magic != IPC_MAGIC)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_fake.mu);
    int o = fake_state_ipc_open(&g_fake.state, (int)w.idx, w.id, &phys, &bytes);
    if (o != 0) {
        /* Our own export, opened by ourselves: the driver refuses it. */
        res = o > 0 ? CUDA_ERROR_ALREADY_MAPPED : CUDA_ERROR_INVALID_VALUE;
    } else {
        for (int d = 0; d < g_fake.cfg->gpu_count && dev < 0; d++)
            if (g_fake.cfg->gpus[d].phys == phys)
                dev = d;
        uint64_t va = dev < 0 ? 0 : take_va(w.size, LINEAR_ALIGN);
        rec *r = va == 0 ? NULL : rec_new(va, w.size, 0, dev, REC_IPC);
        if (r == NULL) {
            fake_state_ipc_drop(&g_fake.state, (int)w.idx);
            res = dev < 0 ? CUDA_ERROR_INVALID_DEVICE : CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            r->ipc = (int)w.idx;
            r->ipc_id = w.id;
            *pdptr = va;
        }
    }
    pthread_mutex_unlock(&g_fake.mu);
    return res;
}

CUresult cuIpcCloseMemHandle(CUdeviceptr dptr)
{
    CUresult res = fake_ready();
    if (res != CUDA_SUCCESS)
        return res;
    pthread_mutex_lock(&g_fake.mu);
    rec *r = table_get(dptr);
    if (r == NULL || r->kind != REC_IPC) {
        res = CUDA_ERROR_INVALID_VALUE;
    } else {
        table_del(r);
        fake_state_ipc_drop(&g_fake.state, r->ipc);
        free(r);
    }
    pthread_mutex_unlock(&g_fake.mu);
    return res;
}

CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
    CUresult res = fake_ready();
    if (res != CUDA_SUCCESS)
        return res;
    res = CUDA_ERROR_NOT_FOUND;
    pthread_mutex_lock(&g_fake.mu);
    for (size_t b = 0; b < table_buckets && res != CUDA_SUCCESS; b++)
        for (rec *e = table[b]; e != NULL && res != CUDA_SUCCESS; e = e->next)
            if ((e->kind == REC_LINEAR || e->kind == REC_POOL || e->kind == REC_IPC) &&
                dptr >= e->key && dptr - e->key < (e->size == 0 ? 1 : e->size)) {
                if (pbase != NULL)
                    *pbase = e->key;
                if (psize != NULL)
                    *psize = (size_t)e->size;
                res = CUDA_SUCCESS;
            }
    pthread_mutex_unlock(&g_fake.mu);
    return res;
}

static CUresult free_any(CUdeviceptr dptr, CUstream hStream, int ptsz, int async)
{
    CUresult r = fake_ready();
    fake_stream *s = NULL;
    int dev;
    if (r != CUDA_SUCCESS)
        return r;
    if (async) {
        if ((r = fake_current_device(&dev)) != CUDA_SUCCESS)
            return r;
        if ((s = fake_resolve_stream(hStream, ptsz, dev)) == NULL)
            return CUDA_ERROR_INVALID_HANDLE;
    } else if (dptr == 0) {
        return CUDA_SUCCESS;
    }
    pthread_mutex_lock(&g_fake.mu);
    if (s != NULL && s->capture == CU_STREAM_CAPTURE_STATUS_ACTIVE)
        r = fake_graph_add_free(s->capture_graph, dptr, NULL); /* a free node */
    else
        r = free_linear(dptr);
    pthread_mutex_unlock(&g_fake.mu);
    return r;
}

CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    return free_any(dptr, NULL, 0, 0);
}

CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize)
{
    CUdeviceptr p = 0;
    CUresult r = alloc_linear_at(dptr != NULL ? &p : NULL, bytesize, 1);
    if (r == CUDA_SUCCESS)
        *dptr = (CUdeviceptr_v1)p;
    return r;
}

CUresult cuMemFree(CUdeviceptr_v1 dptr)
{
    return free_any(dptr, NULL, 0, 0);
}

CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    return free_any(dptr, hStream, 0, 1);
}

CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
    return free_any(dptr, hStream, 1, 1);
}

static CUresult mem_info(uint64_t *free_out, uint64_t *total_out)
{
    CUresult r = fake_ready();
    int dev;
    if (r != CUDA_SUCCESS)
        return r;
    if ((r = fake_current_device(&dev)) != CUDA_SUCCESS)
        return r;
    /* A MIG instance's memory is its own: what its processes hold of it. */
    uint64_t total = g_fake.cfg->gpus[dev].memory;
    uint64_t used = fake_state_used_mig(&g_fake.state, g_fake.cfg->gpus[dev].phys,
                                        g_fake.cfg->gpus[dev].mig_gi);
    *total_out = total;
    *free_out = used >= total ? 0 : total - used;
    return CUDA_SUCCESS;
}

CUresult cuMemGetInfo_v2(size_t *free, size_t *total)
{
    uint64_t f, t;
    CUresult r = mem_info(&f, &t);
    if (r == CUDA_SUCCESS) {
        if (free != NULL)
            *free = (size_t)f;
        if (total != NULL)
            *total = (size_t)t;
    }
    return r;
}

CUresult cuMemGetInfo(unsigned int *free, unsigned int *total)
{
    uint64_t f, t;
    CUresult r = mem_info(&f, &t);
    if (r == CUDA_SUCCESS) {
        if (free != NULL)
            *free = f > 0xffffffffULL ? 0xffffffffU : (unsigned int)f;
        if (total != NULL)
            *total = t > 0xffffffffULL ? 0xffffffffU : (unsigned int)t;
    }
    return r;
}

/* 1 when [p, p+n) lies inside one linear/pool allocation or one mapping (mu held). */
static int device_range_valid(uint64_t p, uint64_t n)
{
    for (size_t b = 0; b < table_buckets; b++)
        for (rec *e = table[b]; e != NULL; e = e->next)
            if ((e->kind == REC_LINEAR || e->kind == REC_POOL || e->kind == REC_IPC) &&
                p >= e->key && n <= e->size && p - e->key <= e->size - n)
                return 1;
    for (va_range *m = mappings; m != NULL; m = m->next)
        if (p >= m->base && n <= m->size && p - m->base <= m->size - n)
            return 1;
    return 0;
}

static CUresult copy_check(CUdeviceptr dev_ptr, const void *host, size_t n)
{
    CUresult r = fake_ready();
    int dev;
    if (r != CUDA_SUCCESS)
        return r;
    if ((r = fake_current_device(&dev)) != CUDA_SUCCESS)
        return r;
    if (n == 0)
        return CUDA_SUCCESS;
    if (host == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_fake.mu);
    int ok = device_range_valid(dev_ptr, n);
    pthread_mutex_unlock(&g_fake.mu);
    return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
    return copy_check(dstDevice, srcHost, ByteCount);
}

CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
    return copy_check(dstDevice, srcHost, ByteCount);
}

/* Device memory has no contents: it always reads back as zeros. */
static CUresult copy_out(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
    CUresult r = copy_check(srcDevice, dstHost, ByteCount);
    if (r == CUDA_SUCCESS && ByteCount > 0)
        memset(dstHost, 0, ByteCount);
    return r;
}

CUresult cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
    return copy_out(dstHost, srcDevice, ByteCount);
}

CUresult cuMemcpyDtoH_v2_ptds(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
    return copy_out(dstHost, srcDevice, ByteCount);
}

/* ------------------------------------------------------------------------ */
/* Virtual memory management                                                */
/* ------------------------------------------------------------------------ */

/* Whether host NUMA node id exists (/sys tells; without it, node 0 only). */
static int numa_node_valid(int id)
{
    char path[64];
    struct stat st;

    if (id < 0)
        return 0;
    if (stat("/sys/devices/system/node", &st) != 0)
        return id == 0;
    snprintf(path, sizeof(path), "/sys/devices/system/node/node%d", id);
    return stat(path, &st) == 0;
}

/*
 * A VMM allocation's properties: on a device, or in host memory (CUDA
 * 12.2+): CU_MEM_LOCATION_TYPE_HOST (id ignored, not shareable),
 * _HOST_NUMA (id a NUMA node), _HOST_NUMA_CURRENT (the caller's node).
 */
static CUresult check_prop(const CUmemAllocationProp *prop)
{
    if (prop == NULL || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED)
        return CUDA_ERROR_INVALID_VALUE;
    switch (prop->location.type) {
    case CU_MEM_LOCATION_TYPE_HOST:
        return prop->requestedHandleTypes == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    case CU_MEM_LOCATION_TYPE_HOST_NUMA:
        return numa_node_valid(prop->location.id) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    case CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT:
        return CUDA_SUCCESS;
    default:
        return check_device_location(&prop->location);
    }
}

CUresult cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                       CUmemAllocationGranularity_flags option)
{
    CUresult r = fake_ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (granularity == NULL || option > CU_MEM_ALLOC_GRANULARITY_RECOMMENDED)
        return CUDA_ERROR_INVALID_VALUE;
    if ((r = check_prop(prop)) != CUDA_SUCCESS)
        return r;
    *granularity = (size_t)FAKE_GRANULARITY;
    return CUDA_SUCCESS;
}

CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                     const CUmemAllocationProp *prop, unsigned long long flags)
{
    CUresult r = fake_ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (handle == NULL || flags != 0 || size == 0 || size % FAKE_GRANULARITY != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if ((r = check_prop(prop)) != CUDA_SUCCESS)
        return r;
    /* Host memory is the host's: no GPU's memory is taken (its books name device 0). */
    int host = prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE;
    int dev = host ? 0 : prop->location.id;
    uint64_t charge = host ? 0 : size;
    pthread_mutex_lock(&g_fake.mu);
    if (charge != 0 && fake_charge(dev, charge) != 0) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        uint64_t h = next_handle;
        rec *v = rec_new(h, size, charge, dev, REC_VMM);
        if (v == NULL) {
            fake_uncharge(dev, charge);
            r = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            v->hrefs = 1;
            v->htypes = (unsigned int)prop->requestedHandleTypes;
            if (host) {
                v->host = prop->location;
                /* The node the driver chose for the caller (the fake's: node 0). */
                if (v->host.type == CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT)
                    v->host = (CUmemLocation){.type = CU_MEM_LOCATION_TYPE_HOST_NUMA, .id = 0};
                else if (v->host.type == CU_MEM_LOCATION_TYPE_HOST)
                    v->host.id = 0;
            }
            next_handle += 0x10;
            *handle = h;
        }
    }
    pthread_mutex_unlock(&g_fake.mu);
    return r;
}

/*
 * Drops one reference to a VMM allocation (mu held). As in the real driver,
 * the physical memory goes only when every handle reference is released
 * and every mapping unmapped, in either order.
 */
static void vmm_unref(rec *r)
{
    if (--r->refs > 0)
        return;
    table_del(r);
    fake_uncharge(r->dev, r->charged);
    /* Shared (exported or imported): the memory lives on while another process holds it. */
    if (r->ipc >= 0)
        fake_state_ipc_drop(&g_fake.state, r->ipc);
    if (r->fd >= 0)
        close(r->fd);
    free(r);
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    CUresult r = fake_ready();
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&g_fake.mu);
    rec *e = table_get(handle);
    /* A handle released as often as it was created and retained is gone, even if mapped. */
    if (e == NULL || e->kind != REC_VMM || e->hrefs == 0) {
        r = CUDA_ERROR_INVALID_VALUE;
    } else {
        e->hrefs--;
        vmm_unref(e);
    }
    pthread_mutex_unlock(&g_fake.mu);
    return r;
}

/*
 * VMM shareable handles. An export moves the allocation onto a shared
 * record of the state file, as cuIpcGetMemHandle does, so that the physical
 * memory lives while any process holds a handle or a mapping of it. As a
 * POSIX fd, the allocation is a memfd (one per allocation, its size the
 * allocation's, the record's wire at offset 0): every export returns a new
 * fd of that file, so the file (its inode) names the allocation in every
 * process the fd reaches, and every holder keeps it open. As a fabric
 * handle, the wire is in the handle's bytes.
 */
#define VMM_MAGIC 0x4d4d564b41464756ULL /* "VGFAKVMM" */

/* Puts VMM allocation r on a shared record (mu held); 0 or a CUDA error. */
static CUresult vmm_share(rec *r)
{
    uint64_t id = 0;
    int k;

    if (r->ipc >= 0)
        return CUDA_SUCCESS;
    k = fake_state_ipc_export(&g_fake.state, g_fake.cfg->gpus[r->dev].phys, r->charged, &id);
    if (k < 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    r->ipc = k;
    r->ipc_id = id;
    r->charged = 0; /* on the shared record's books now */
    return CUDA_SUCCESS;
}

/* The file naming shared VMM allocation r, created at its first fd export (mu held). */
static int vmm_file(rec *r)
{
    ipc_wire w = {.magic = VMM_MAGIC, .idx = (uint32_t)r->ipc, .id = r->ipc_id, .size = r->size};
    int fd;

    if (r->fd >= 0)
        return r->fd;
    fd = memfd_create("vgpu-fake-vmm", MFD_CLOEXEC);
    if (fd < 0)
        return -1;
    if (ftruncate(fd, (off_t)r->size) != 0 || pwrite(fd, &w, sizeof(w), 0) != (ssize_t)sizeof(w)) {
        close(fd);
        return -1;
    }
    r->fd = fd;
    return fd;
}

/*
 * Shared VMM allocation r was exported as fd (of kind, eventfd counter tag):
 * the fd's description holds the allocation from now on, as NVIDIA's
 * resource manager holds an exported object until its fd closes (mu held).
 */
static void vmm_fd_held(rec *r, int fd, uint32_t kind, uint64_t tag)
{
    struct stat st;

    if (fd >= 0 && fstat(fd, &st) == 0)
        fake_state_ipc_fd_exported(&g_fake.state, r->ipc, kind, (uint64_t)st.st_dev,
                                   (uint64_t)st.st_ino, tag);
}

CUresult cuMemExportToShareableHandle(void *shareableHandle, CUmemGenericAllocationHandle handle,
                                      CUmemAllocationHandleType handleType,
                                      unsigned long long flags)
{
    CUresult res = fake_ready();
    if (res != CUDA_SUCCESS)
        return res;
    if (shareableHandle == NULL || flags != 0 ||
        (handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR &&
         handleType != CU_MEM_HANDLE_TYPE_FABRIC))
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_fake.mu);
    rec *r = table_get(handle);
    /* Only as the types asked for at cuMemCreate, as the driver checks. */
    if (r == NULL || r->kind != REC_VMM || r->hrefs == 0 || (r->htypes & handleType) == 0) {
        res = CUDA_ERROR_INVALID_VALUE;
    } else if ((res = vmm_share(r)) == CUDA_SUCCESS) {
        if (handleType == CU_MEM_HANDLE_TYPE_FABRIC) {
            ipc_wire w = {.magic = VMM_MAGIC, .idx = (uint32_t)r->ipc, .id = r->ipc_id,
                          .size = r->size};
            CUmemFabricHandle fh;
            memset(&fh, 0, sizeof(fh));
            memcpy(fh.data, &w, sizeof(w));
            memcpy(shareableHandle, &fh, sizeof(fh));
        } else if (getenv("VGPU_FAKE_VMM_FD_DEVICE") != NULL &&
                   *getenv("VGPU_FAKE_VMM_FD_DEVICE") != '\0') {
            /*
             * As NVIDIA's driver does: every export a new open file
             * description on one inode shared by all (every eventfd is on
             * the one anonymous inode), the allocation named only by the
             * description's own state (its counter: the record's index and
             * export id), as the driver's per-open data names it.
             */
            uint64_t v = r->ipc_id * FAKE_MAX_IPC + (uint64_t)r->ipc;
            int out = eventfd(0, EFD_CLOEXEC);
            if (out >= 0 && write(out, &v, sizeof(v)) != (ssize_t)sizeof(v)) {
                close(out);
                out = -1;
            }
            if (out < 0)
                res = CUDA_ERROR_OUT_OF_MEMORY;
            else
                *(int *)shareableHandle = out;
            vmm_fd_held(r, out, FAKE_FDSCAN_EVENTFD, v);
        } else {
            int fd = vmm_file(r), out = fd < 0 ? -1 : dup(fd);
            if (out < 0)
                res = CUDA_ERROR_OUT_OF_MEMORY;
            else
                *(int *)shareableHandle = out;
            vmm_fd_held(r, out, FAKE_FDSCAN_MEMFD, 0);
        }
    }
    pthread_mutex_unlock(&g_fake.mu);
    return res;
}

/* The wire of an export as an eventfd (VGPU_FAKE_VMM_FD_DEVICE): its counter, read in place. */
static int devfd_wire(int fd, ipc_wire *w)
{
    char path[64], buf[1024], *p;
    unsigned long long v;
    ssize_t n;
    int in;

    snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
    in = open(path, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return -1;
    n = read(in, buf, sizeof(buf) - 1);
    close(in);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    p = strstr(buf, "eventfd-count:");
    if (p == NULL || sscanf(p, "eventfd-count: %llx", &v) != 1)
        return -1;
    *w = (ipc_wire){.magic = VMM_MAGIC, .idx = (uint32_t)(v % FAKE_MAX_IPC),
                    .id = v / FAKE_MAX_IPC};
    return 0;
}

/* A VMM record of ours on shared record idx of export id (mu held), or NULL. */
static rec *vmm_find_shared(int idx, uint64_t id)
{
    for (size_t b = 0; b < table_buckets; b++)
        for (rec *e = table[b]; e != NULL; e = e->next)
            if (e->kind == REC_VMM && e->ipc == idx && e->ipc_id == id && e->hrefs > 0)
                return e;
    return NULL;
}

CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle, void *osHandle,
                                        CUmemAllocationHandleType shHandleType)
{
    CUresult res = fake_ready();
    ipc_wire w;
    int phys = -1, dev = -1, fd = -1;
    uint64_t bytes = 0;
    if (res != CUDA_SUCCESS)
        return res;
    if (handle == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (shHandleType == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
        struct stat st;

        fd = (int)(intptr_t)osHandle;
        if (fstat(fd, &st) != 0)
            return CUDA_ERROR_INVALID_VALUE;
        if (!S_ISREG(st.st_mode)) {
            /* An eventfd export: the import keeps no reference to its description. */
            if (devfd_wire(fd, &w) != 0)
                return CUDA_ERROR_INVALID_VALUE;
            fd = -1;
        } else if (pread(fd, &w, sizeof(w), 0) != (ssize_t)sizeof(w)) {
            return CUDA_ERROR_INVALID_VALUE;
        }
    } else if (shHandleType == CU_MEM_HANDLE_TYPE_FABRIC && osHandle != NULL) {
        memcpy(&w, osHandle, sizeof(w));
    } else {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (w.magic != VMM_MAGIC)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_fake.mu);
    int o = fake_state_ipc_open(&g_fake.state, (int)w.idx, w.id, &phys, &bytes);
    if (o > 0) {
        /* Held by this process already: a new reference to the same allocation. */
        rec *r = vmm_find_shared((int)w.idx, w.id);
        if (r == NULL) {
            res = CUDA_ERROR_INVALID_VALUE;
        } else {
            r->refs++;
            r->hrefs++;
            *handle = r->key;
        }
    } else if (o < 0) {
        res = CUDA_ERROR_INVALID_VALUE;
    } else {
        for (int d = 0; d < g_fake.cfg->gpu_count && dev < 0; d++)
            if (g_fake.cfg->gpus[d].phys == phys)
                dev = d;
        int keep = fd < 0 ? -1 : fcntl(fd, F_DUPFD_CLOEXEC, 0);
        rec *r = dev < 0 || (fd >= 0 && keep < 0) ? NULL
                                                   : rec_new(next_handle, bytes, 0, dev, REC_VMM);
        if (r == NULL) {
            if (keep >= 0)
                close(keep);
            fake_state_ipc_drop(&g_fake.state, (int)w.idx);
            res = dev < 0 ? CUDA_ERROR_INVALID_DEVICE : CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            r->hrefs = 1;
            r->htypes = (unsigned int)shHandleType;
            r->ipc = (int)w.idx;
            r->ipc_id = w.id;
            r->fd = keep;
            next_handle += 0x10;
            *handle = r->key;
        }
    }
    pthread_mutex_unlock(&g_fake.mu);
    return res;
}

CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop,
                                                CUmemGenericAllocationHandle handle)
{
    CUresult res = fake_ready();
    if (res != CUDA_SUCCESS)
        return res;
    if (prop == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_fake.mu);
    rec *r = table_get(handle);
    if (r == NULL || r->kind != REC_VMM || r->hrefs == 0) {
        res = CUDA_ERROR_INVALID_VALUE;
    } else {
        memset(prop, 0, sizeof(*prop));
        prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
        prop->requestedHandleTypes = (CUmemAllocationHandleType)r->htypes;
        prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        prop->location.id = r->dev;
        if (r->host.type != 0)
            prop->location = r->host;
    }
    pthread_mutex_unlock(&g_fake.mu);
    return res;
}

static va_range *mapping_at(uint64_t addr)
{
    for (va_range *m = mappings; m != NULL; m = m->next)
        if (addr >= m->base && addr - m->base < m->size)
            return m;
    return NULL;
}

CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
    CUresult r = fake_ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (handle == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_fake.mu);
    va_range *m = mapping_at((uint64_t)(uintptr_t)addr);
    if (m == NULL) {
        r = CUDA_ERROR_INVALID_VALUE;
    } else {
        /* A new reference to the same allocation, released with its own cuMemRelease. */
        m->handle->refs++;
        m->handle->hrefs++;
        *handle = m->handle->key;
    }
    pthread_mutex_unlock(&g_fake.mu);
    return r;
}

CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                             unsigned long long flags)
{
    CUresult r = fake_ready();
    (void)addr; /* the hint is optional; the fake never honours it */
    if (r != CUDA_SUCCESS)
        return r;
    if (ptr == NULL || flags != 0 || size == 0 || size % FAKE_GRANULARITY != 0 ||
        (alignment & (alignment - 1)) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    va_range *v = calloc(1, sizeof(*v));
    if (v == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&g_fake.mu);
    v->base = take_va(size, alignment > FAKE_GRANULARITY ? alignment : FAKE_GRANULARITY);
    v->size = size;
    v->next = reservations;
    reservations = v;
    *ptr = v->base;
    pthread_mutex_unlock(&g_fake.mu);
    return CUDA_SUCCESS;
}

CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    CUresult r = fake_ready();
    if (r != CUDA_SUCCESS)
        return r;
    r = CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_fake.mu);
    for (va_range **p = &reservations; *p != NULL; p = &(*p)->next) {
        va_range *v = *p;
        if (v->base == ptr && v->size == size) {
            *p = v->next;
            free(v);
            r = CUDA_SUCCESS;
            break;
        }
    }
    pthread_mutex_unlock(&g_fake.mu);
    return r;
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags)
{
    CUresult r = fake_ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (flags != 0 || size == 0 || size % FAKE_GRANULARITY != 0 || offset % FAKE_GRANULARITY != 0)
        return CUDA_ERROR_INVALID_VALUE;
    va_range *m = calloc(1, sizeof(*m));
    if (m == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&g_fake.mu);
    rec *h = table_get(handle);
    int inside = 0, overlap = 0;
    for (va_range *v = reservations; v != NULL; v = v->next)
        if (ptr >= v->base && size <= v->size && ptr - v->base <= v->size - size)
            inside = 1;
    for (va_range *o = mappings; o != NULL; o = o->next)
        if (ptr < o->base + o->size && o->base < ptr + size)
            overlap = 1;
    if (h == NULL || h->kind != REC_VMM || h->hrefs == 0 || offset > h->size ||
        size > h->size - offset || !inside) {
        r = CUDA_ERROR_INVALID_VALUE;
    } else if (overlap) {
        r = CUDA_ERROR_ALREADY_MAPPED;
    } else {
        *m = (va_range){.base = ptr, .size = size, .handle = h, .next = mappings};
        h->refs++;
        mappings = m;
        m = NULL;
    }
    pthread_mutex_unlock(&g_fake.mu);
    free(m);
    return r;
}

/* Whether mapping m lies wholly inside [ptr, ptr + size). */
static int mapping_inside(const va_range *m, uint64_t ptr, uint64_t size)
{
    return m->base >= ptr && m->base - ptr <= size && m->size <= size - (m->base - ptr);
}

/*
 * Unmaps every mapping inside the range (one or several, from one or
 * several handles). As documented for the real driver, a mapping cannot be
 * unmapped in part: a range cutting one fails and changes nothing.
 */
CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    CUresult r = fake_ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (size == 0 || ptr > UINT64_MAX - size)
        return CUDA_ERROR_INVALID_VALUE;
    r = CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_fake.mu);
    for (va_range *m = mappings; m != NULL; m = m->next) {
        if (ptr < m->base + m->size && m->base < ptr + size && !mapping_inside(m, ptr, size)) {
            pthread_mutex_unlock(&g_fake.mu);
            return CUDA_ERROR_INVALID_VALUE;
        }
    }
    for (va_range **p = &mappings; *p != NULL;) {
        va_range *m = *p;
        if (mapping_inside(m, ptr, size)) {
            *p = m->next;
            vmm_unref(m->handle);
            free(m);
            r = CUDA_SUCCESS;
        } else {
            p = &m->next;
        }
    }
    pthread_mutex_unlock(&g_fake.mu);
    return r;
}

CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
    CUresult r = fake_ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (desc == NULL || count == 0 || size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < count; i++)
        if ((r = check_device_location(&desc[i].location)) != CUDA_SUCCESS)
            return r;
    pthread_mutex_lock(&g_fake.mu);
    /* Every granule of the range must be mapped. */
    for (uint64_t a = ptr; a - ptr < size; a += FAKE_GRANULARITY) {
        if (mapping_at(a) == NULL) {
            r = CUDA_ERROR_INVALID_VALUE;
            break;
        }
    }
    pthread_mutex_unlock(&g_fake.mu);
    return r;
}

/* ------------------------------------------------------------------------ */
/* External memory                                                          */
/* ------------------------------------------------------------------------ */

/*
 * External memory interop. Another API's allocation (a Vulkan or OpenGL
 * buffer, a Direct3D heap) is imported into the current context's device;
 * the fake has no such API, so the import stands for it: its size is
 * charged to this process's GPU memory while the object lives (NVML counts
 * a process's Vulkan memory as its own). As NVIDIA's driver: an OPAQUE_FD
 * import takes the fd (closed on success, the caller's on failure); the
 * Windows handle types are not supported on Linux, NvSciBuf off Tegra
 * neither; mapped buffers and mipmapped arrays are views of the object
 * (no memory of their own), freed with cuMemFree and
 * cuMipmappedArrayDestroy, and destroying the object does not free them.
 */
CUresult cuImportExternalMemory(CUexternalMemory *extMem_out,
                                const CUDA_EXTERNAL_MEMORY_HANDLE_DESC *memHandleDesc)
{
    const CUDA_EXTERNAL_MEMORY_HANDLE_DESC *d = memHandleDesc;
    int dev;
    CUresult r = alloc_begin(extMem_out, d != NULL ? d->size : 0, &dev);
    if (r != CUDA_SUCCESS)
        return r;
    if ((d->flags & ~(unsigned int)CUDA_EXTERNAL_MEMORY_DEDICATED) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (d->type != CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD)
        return d->type >= CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_WIN32 &&
                       d->type <= CU_EXTERNAL_MEMORY_HANDLE_TYPE_NVSCIBUF
                   ? CUDA_ERROR_NOT_SUPPORTED
                   : CUDA_ERROR_INVALID_VALUE;
    if (d->handle.fd < 0 || fcntl(d->handle.fd, F_GETFD) < 0)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_fake.mu);
    if (fake_charge(dev, d->size) != 0) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
    } else if (rec_new(next_handle, d->size, d->size, dev, REC_EXT) == NULL) {
        fake_uncharge(dev, d->size);
        r = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        *extMem_out = (CUexternalMemory)(uintptr_t)next_handle;
        next_handle += 0x10;
        close(d->handle.fd); /* the driver owns it now */
    }
    pthread_mutex_unlock(&g_fake.mu);
    return r;
}

/* The live external memory object ext (mu held), or NULL. */
static rec *ext_get(CUexternalMemory ext)
{
    rec *e = table_get((uint64_t)(uintptr_t)ext);
    return e != NULL && e->kind == REC_EXT ? e : NULL;
}

CUresult cuExternalMemoryGetMappedBuffer(CUdeviceptr *devPtr, CUexternalMemory extMem,
                                         const CUDA_EXTERNAL_MEMORY_BUFFER_DESC *bufferDesc)
{
    CUresult r = fake_ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (devPtr == NULL || bufferDesc == NULL || bufferDesc->flags != 0 || bufferDesc->size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_fake.mu);
    rec *e = ext_get(extMem);
    if (e == NULL) {
        r = CUDA_ERROR_INVALID_HANDLE;
    } else if (bufferDesc->offset > e->size || bufferDesc->size > e->size - bufferDesc->offset) {
        r = CUDA_ERROR_INVALID_VALUE;
    } else {
        uint64_t va = take_va(bufferDesc->size, LINEAR_ALIGN);
        /* A view: freed by cuMemFree like an allocation, charged nothing. */
        if (rec_new(va, bufferDesc->size, 0, e->dev, REC_LINEAR) == NULL)
            r = CUDA_ERROR_OUT_OF_MEMORY;
        else
            *devPtr = va;
    }
    pthread_mutex_unlock(&g_fake.mu);
    return r;
}

CUresult cuExternalMemoryGetMappedMipmappedArray(
    CUmipmappedArray *mipmap, CUexternalMemory extMem,
    const CUDA_EXTERNAL_MEMORY_MIPMAPPED_ARRAY_DESC *mipmapDesc)
{
    CUresult r = fake_ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (mipmap == NULL || mipmapDesc == NULL || mipmapDesc->numLevels == 0 ||
        mipmapDesc->arrayDesc.Width == 0)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_fake.mu);
    rec *e = ext_get(extMem);
    if (e == NULL) {
        r = CUDA_ERROR_INVALID_HANDLE;
    } else if (mipmapDesc->offset >= e->size) {
        r = CUDA_ERROR_INVALID_VALUE;
    } else if (rec_new(next_handle, 0, 0, e->dev, REC_ARRAY) == NULL) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        /* A view: destroyed by cuMipmappedArrayDestroy, charged nothing. */
        *mipmap = (CUmipmappedArray)(uintptr_t)next_handle;
        next_handle += 0x10;
    }
    pthread_mutex_unlock(&g_fake.mu);
    return r;
}

CUresult cuDestroyExternalMemory(CUexternalMemory extMem)
{
    CUresult r = fake_ready();
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&g_fake.mu);
    rec *e = ext_get(extMem);
    if (e == NULL) {
        r = CUDA_ERROR_INVALID_HANDLE;
    } else {
        table_del(e);
        fake_uncharge(e->dev, e->charged);
        free(e);
    }
    pthread_mutex_unlock(&g_fake.mu);
    return r;
}

/* ------------------------------------------------------------------------ */
/* Arrays                                                                   */
/* ------------------------------------------------------------------------ */

static uint64_t format_bytes(CUarray_format f)
{
    switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8: return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF: return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32:
    case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT: return 4;
    }
    return 0;
}

/* Bytes of one level; 0 when the description is invalid or overflows. */
static uint64_t level_bytes(uint64_t w, uint64_t h, uint64_t d, CUarray_format f,
                            unsigned int channels)
{
    uint64_t e = format_bytes(f);
    if (e == 0 || w == 0 || (channels != 1 && channels != 2 && channels != 4))
        return 0;
    uint64_t v = e * channels;
    uint64_t dims[3] = {w, h ? h : 1, d ? d : 1};
    for (int i = 0; i < 3; i++) {
        if (dims[i] > (UINT64_MAX - ARRAY_ALIGN) / v)
            return 0;
        v *= dims[i];
    }
    return round_up(v, ARRAY_ALIGN);
}

static CUresult array_new(uint64_t size, void **out)
{
    int dev;
    CUresult r = alloc_begin(out, size, &dev);
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&g_fake.mu);
    if (fake_charge(dev, size) != 0) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
    } else if (rec_new(next_handle, size, size, dev, REC_ARRAY) == NULL) {
        fake_uncharge(dev, size);
        r = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        *out = (void *)(uintptr_t)next_handle;
        next_handle += 0x10;
    }
    pthread_mutex_unlock(&g_fake.mu);
    return r;
}

CUresult cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *d)
{
    if (d == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    return array_new(level_bytes(d->Width, d->Height, 1, d->Format, d->NumChannels),
                     (void **)pHandle);
}

CUresult cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *d)
{
    if (d == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    return array_new(level_bytes(d->Width, d->Height, d->Depth, d->Format, d->NumChannels),
                     (void **)pHandle);
}

CUresult cuMipmappedArrayCreate(CUmipmappedArray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *d,
                                unsigned int numMipmapLevels)
{
    if (d == NULL || numMipmapLevels == 0)
        return CUDA_ERROR_INVALID_VALUE;
    /* Layers are not mipmapped; the depth of a 3D array is. */
    int layered = (d->Flags & CUDA_ARRAY3D_LAYERED) != 0;
    uint64_t extent = d->Width > d->Height ? d->Width : d->Height;
    if (!layered && d->Depth > extent)
        extent = d->Depth;
    unsigned int max_levels = 0;
    for (uint64_t e = extent; e > 0; e >>= 1)
        max_levels++;
    if (numMipmapLevels > max_levels)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t total = 0;
    for (unsigned int l = 0; l < numMipmapLevels; l++) {
        uint64_t w = d->Width >> l, h = d->Height >> l, z = layered ? d->Depth : d->Depth >> l;
        uint64_t b = level_bytes(w ? w : 1, d->Height ? (h ? h : 1) : 0,
                                 d->Depth ? (z ? z : 1) : 0, d->Format, d->NumChannels);
        if (b == 0 || total > UINT64_MAX - b)
            return CUDA_ERROR_INVALID_VALUE;
        total += b;
    }
    return array_new(total, (void **)pHandle);
}

static CUresult array_destroy(uint64_t key)
{
    CUresult r = fake_ready();
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&g_fake.mu);
    rec *e = table_get(key);
    if (e == NULL || e->kind != REC_ARRAY) {
        r = CUDA_ERROR_INVALID_HANDLE;
    } else {
        table_del(e);
        fake_uncharge(e->dev, e->charged);
        free(e);
    }
    pthread_mutex_unlock(&g_fake.mu);
    return r;
}

CUresult cuArrayDestroy(CUarray hArray)
{
    return array_destroy((uint64_t)(uintptr_t)hArray);
}

CUresult cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray)
{
    return array_destroy((uint64_t)(uintptr_t)hMipmappedArray);
}

static CUresult array_requirements(CUDA_ARRAY_MEMORY_REQUIREMENTS *req, uint64_t key,
                                   CUdevice device)
{
    CUresult r = fake_ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (req == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (!fake_valid_device(device))
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&g_fake.mu);
    rec *e = table_get(key);
    if (e == NULL || e->kind != REC_ARRAY) {
        r = CUDA_ERROR_INVALID_HANDLE;
    } else {
        memset(req, 0, sizeof(*req));
        req->size = (size_t)e->size;
        req->alignment = (size_t)ARRAY_ALIGN;
    }
    pthread_mutex_unlock(&g_fake.mu);
    return r;
}

CUresult cuArrayGetMemoryRequirements(CUDA_ARRAY_MEMORY_REQUIREMENTS *memoryRequirements,
                                      CUarray array, CUdevice device)
{
    return array_requirements(memoryRequirements, (uint64_t)(uintptr_t)array, device);
}

CUresult cuMipmappedArrayGetMemoryRequirements(CUDA_ARRAY_MEMORY_REQUIREMENTS *memoryRequirements,
                                               CUmipmappedArray mipmap, CUdevice device)
{
    return array_requirements(memoryRequirements, (uint64_t)(uintptr_t)mipmap, device);
}

/* ------------------------------------------------------------------------ */
/* Primary context reset                                                    */
/* ------------------------------------------------------------------------ */

void fake_mem_reset_device(int dev)
{
    for (va_range **p = &mappings; *p != NULL;) {
        va_range *m = *p;
        if (m->handle->dev == dev) {
            *p = m->next;
            vmm_unref(m->handle);
            free(m);
        } else {
            p = &m->next;
        }
    }
    for (size_t b = 0; b < table_buckets; b++) {
        for (rec *e = table[b], *next; e != NULL; e = next) {
            next = e->next;
            if (e->dev != dev)
                continue;
            table_del(e);
            if (e->kind == REC_POOL)
                e->pool->used -= e->size;
            else
                fake_uncharge(e->dev, e->charged);
            free(e);
        }
    }
    fake_pool *dp = &g_fake.default_pool[dev];
    pool_trim(dp, 0);
    pool_trim(&g_fake.graph_pool[dev], 0);
    for (fake_pool *p = g_fake.pools, *next; p != NULL; p = next) {
        next = p->next;
        if (p->dev == dev) {
            pool_trim(p, 0);
            pool_free_if_done(p);
        }
    }
}
