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

/* acct.c - see acct.h. */
#include "acct.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "burst.h"
#include "log.h"
#include "region.h"
#include "sharefd.h"
#include "vgpu_reserve.h"

/* One map per kind for the whole process; guarded by vgpu_lock(). */
static struct vgpu_ptrmap maps[VGPU_KIND_COUNT];

/* Reserves size on claim part of g (limit 0: whatever the limit). 0 or -1. */
static inline int reserve(struct vgpu_gpu *g, int part, uint64_t size, uint64_t limit)
{
    if (g->nparts == 0)
        return vgpu_reserve(&g->private_used, size, limit);
    return vgpu_region_reserve(g->parts[part].shm, g->parts[part].rec, size, limit);
}

static void unreserve(struct vgpu_gpu *g, int part, uint64_t size)
{
    if (g->nparts == 0)
        vgpu_unreserve(&g->private_used, size);
    else
        vgpu_region_unreserve(g->parts[part].shm, g->parts[part].rec, size);
}

/* The limit a reservation on part is checked against: guarantee + the grant last read. */
static uint64_t part_limit(const struct vgpu_gpu *g, int part)
{
    return g->nparts == 0 ? g->limit
                          : atomic_load_explicit(&g->parts[part].cap, memory_order_relaxed);
}

uint64_t vgpu_part_limit(const struct vgpu_gpu *g, int part)
{
    return part_limit(g, part);
}

/* Reads part's grant from the claim's burst file and caches it. Returns the new limit. */
static uint64_t burst_reread(struct vgpu_gpu *g, int part)
{
    struct vgpu_part *pt = &g->parts[part];

    uint64_t grant = vgpu_burst_grant(pt->burst, g->uuid);
    uint64_t cap = grant > UINT64_MAX - pt->limit ? UINT64_MAX : pt->limit + grant;

    atomic_store_explicit(&pt->cap, cap, memory_order_relaxed);
    return cap;
}

/*
 * A reservation that took the claim above its guarantee relied on the grant:
 * re-reads it and rolls the reservation back when the claim's counter is now
 * over it (the plugin may have lowered the grant since it was read:
 * write-then-read handshake, docs/architecture.md "Burstable memory"). 0 or -1.
 */
static __attribute__((noinline)) int burst_recheck(struct vgpu_gpu *g, int part, uint64_t size)
{
    struct vgpu_part *pt = &g->parts[part];

    if (vgpu_region_used(pt->shm, pt->rec) <= pt->limit ||
        vgpu_region_used(pt->shm, pt->rec) <= burst_reread(g, part))
        return 0;
    unreserve(g, part, size);
    return -1;
}

/* Reserves size on part like reserve(), then burst_recheck where the grant was relied on. */
static inline __attribute__((always_inline)) int reserve_checked(struct vgpu_gpu *g, int part,
                                                                 uint64_t size)
{
    uint64_t cap = part_limit(g, part);

    if (reserve(g, part, size, cap) != 0)
        return -1;
    /* No grant in the limit (cap is the guarantee): today's path, nothing more. */
    if (g->nparts == 0 || cap == g->parts[part].limit)
        return 0;
    return burst_recheck(g, part, size);
}

/*
 * An allocation of size crossed guarantee + grant on part (or every part,
 * -1): re-reads the grants (another process of the claim may have been
 * granted more); if still over, asks the plugin for the whole need above the
 * guarantee, re-reads the file and tries once more. Returns the part
 * reserved on or -1.
 */
static int burst_cross(struct vgpu_gpu *g, int part, uint64_t size)
{
    int first = -1;
    char why[64];

    if (g->nparts == 0 || g->capped)
        return -1;
    for (int p = part < 0 ? 0 : part; p < (part < 0 ? g->nparts : part + 1); p++) {
        if (g->parts[p].burst == NULL)
            continue;
        if (first < 0)
            first = p;
        burst_reread(g, p);
        if (reserve_checked(g, p, size) == 0)
            return p;
    }
    if (first < 0)
        return -1;
    struct vgpu_part *pt = &g->parts[first];
    uint64_t used = vgpu_region_used(pt->shm, pt->rec);

    if (size > VGPU_BURST_MAX_GRANT || used > VGPU_BURST_MAX_GRANT ||
        used + size <= pt->limit || used + size - pt->limit > VGPU_BURST_MAX_GRANT)
        return -1;
    if (vgpu_burst_ask(pt->burst, g->uuid, used + size - pt->limit, why) != 0)
        VGPU_INFO("GPU %s: burst of %llu bytes above the guarantee not granted (%s)", g->uuid,
                  (unsigned long long)(used + size - pt->limit), why);
    /* Whatever the reply said, only the file grants. */
    burst_reread(g, first);
    return reserve_checked(g, first, size) == 0 ? first : -1;
}

/* Publishes tracked bytes of part in our slot (informational; the charge is already there). */
static void slot_add(struct vgpu_gpu *g, int part, int64_t delta)
{
    if (g->nparts == 0)
        return;
    vgpu_lock();
    vgpu_region_slot_add(g->parts[part].shm, g->parts[part].rec, delta);
    vgpu_unlock();
}

uint64_t vgpu_acct_gpu_limit_now(struct vgpu_gpu *g)
{
    uint64_t sum = 0;

    if (g->nparts == 0 || g->limit == 0 || g->capped)
        return g->limit;
    for (int p = 0; p < g->nparts; p++) {
        uint64_t l = g->parts[p].burst != NULL ? burst_reread(g, p) : g->parts[p].limit;

        sum = l > UINT64_MAX - sum ? UINT64_MAX : sum + l;
    }
    return sum;
}

uint64_t vgpu_acct_gpu_used(const struct vgpu_gpu *g)
{
    uint64_t sum = 0;

    if (g->nparts == 0)
        return atomic_load_explicit(&g->private_used, memory_order_acquire);
    for (int p = 0; p < g->nparts; p++) {
        uint64_t u = vgpu_region_used(g->parts[p].shm, g->parts[p].rec);
        sum = u > UINT64_MAX - sum ? UINT64_MAX : sum + u;
    }
    return sum;
}

/*
 * Makes sure we have a slot in every region of g (a fork child starts
 * without one). A process that cannot have one cannot be accounted
 * claim-wide: the GPU fails closed for it, and the region counts it.
 */
static bool have_slots(struct vgpu_gpu *g)
{
    bool ok = true;
    int missing = 0;

    for (int p = 0; p < g->nparts; p++)
        missing += __atomic_load_n(&g->parts[p].shm->slot, __ATOMIC_RELAXED) < 0;
    if (missing == 0)
        return true;
    vgpu_lock();
    for (int p = 0; p < g->nparts && ok; p++) {
        struct vgpu_part *pt = &g->parts[p];

        if (pt->shm->slot >= 0 || vgpu_region_claim_slot(pt->shm, vgpu_self()) == 0)
            continue;
        vgpu_region_count_refused(pt->shm, pt->rec);
        ok = false;
        g->fail_closed = true;
        VGPU_ERROR("GPU %s: no free process slot in %s; refusing all allocations (fail closed)",
                   g->uuid, pt->shm->path);
    }
    vgpu_unlock();
    return ok;
}

/* Fails g closed if a region is no longer the file we mapped; vgpu_lock() held. */
static void verify_locked(struct vgpu_gpu *g)
{
    char err[VGPU_ERRMSG_MAX];

    for (int p = 0; p < g->nparts && !g->fail_closed; p++) {
        if (vgpu_region_verify(g->parts[p].shm, err) != 0) {
            g->fail_closed = true;
            for (int q = 0; q < g->nparts; q++)
                vgpu_region_slot_mark_fail_closed(g->parts[q].shm);
            VGPU_ERROR("GPU %s: shared region unusable (%s); refusing all allocations "
                       "(fail closed)", g->uuid, err);
        }
    }
}

void vgpu_acct_gpu_verify(struct vgpu_gpu *g)
{
    if (g == NULL || !g->enforce || g->fail_closed || g->nparts == 0)
        return;
    vgpu_lock();
    verify_locked(g);
    vgpu_unlock();
}

/*
 * Slow path before a refusal: a region that is no longer the file we
 * mapped makes the GPU fail closed; otherwise dead processes' bytes are
 * reclaimed. Returns true when a retry may succeed.
 */
static bool recover(struct vgpu_gpu *g)
{
    int n = 0;

    vgpu_lock();
    verify_locked(g);
    for (int p = 0; p < g->nparts && !g->fail_closed; p++)
        n += vgpu_region_reclaim(g->parts[p].shm, vgpu_self());
    vgpu_unlock();
    return !g->fail_closed && n > 0;
}

/*
 * Records a refused allocation of size bytes in the region of the claim that
 * refused it (part), or of every claim on the GPU when none had room (-1),
 * for the monitor's refusal counters and events.
 */
static void note_refusal(struct vgpu_gpu *g, int part, uint64_t size)
{
    for (int p = 0; p < g->nparts; p++) {
        if (part < 0 || p == part)
            vgpu_region_note_refusal(g->parts[p].shm, g->parts[p].rec, size);
    }
}

/* Reserves size on part, or on the first part with room (part -1). Returns the part or -1. */
static int reserve_any(struct vgpu_gpu *g, int part, uint64_t size)
{
    /* Env lowered the sum of several claims: best effort, each claim's own limit is exact. */
    if (g->capped && (vgpu_acct_gpu_used(g) > g->limit || size > g->limit - vgpu_acct_gpu_used(g)))
        return -1;
    if (part >= 0)
        return reserve_checked(g, part, size) == 0 ? part : -1;
    for (int p = 0; p < (g->nparts > 0 ? g->nparts : 1); p++) {
        if (reserve_checked(g, p, size) == 0)
            return p;
    }
    return -1;
}

CUresult vgpu_charge_begin(CUdevice dev, int part, uint64_t size, struct vgpu_charge *c)
{
    struct vgpu_gpu *g;
    CUresult refusal = vgpu_gpu_refusal(dev, &g);
    int got;

    c->gpu = NULL;
    c->device = dev;
    c->part = part < 0 ? 0 : part;
    c->size = size;
    if (refusal != CUDA_SUCCESS)
        return refusal;
    if (g == NULL || !g->enforce)
        return CUDA_SUCCESS;
    if (g->fail_closed || (g->nparts > 0 && !have_slots(g)))
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (size != 0) {
        got = reserve_any(g, part, size);
        /* Bytes of killed processes may still be charged: reclaim them and try once more. */
        if (got < 0 && g->nparts > 0 && recover(g))
            got = reserve_any(g, part, size);
        if (got < 0 && !g->fail_closed)
            got = burst_cross(g, part, size);
        if (got < 0) {
            note_refusal(g, part, size);
            VGPU_INFO("GPU %s: refusing %llu bytes: %llu of %llu in use%s", g->uuid,
                      (unsigned long long)size, (unsigned long long)vgpu_acct_gpu_used(g),
                      (unsigned long long)g->limit, g->fail_closed ? " (fail closed)" : "");
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        c->part = got;
    }
    c->gpu = g;
    return CUDA_SUCCESS;
}

CUresult vgpu_charge_resize(struct vgpu_charge *c, uint64_t size)
{
    if (c->gpu == NULL || size == c->size)
        return CUDA_SUCCESS;
    if (size > c->size) {
        if (reserve_checked(c->gpu, c->part, size - c->size) != 0) {
            note_refusal(c->gpu, c->part, size);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
    } else {
        unreserve(c->gpu, c->part, c->size - size);
    }
    c->size = size;
    return CUDA_SUCCESS;
}

void vgpu_charge_keep(struct vgpu_charge *c)
{
    if (c->gpu != NULL)
        slot_add(c->gpu, c->part, (int64_t)c->size);
}

int vgpu_pick_part(CUdevice dev)
{
    struct vgpu_gpu *g = vgpu_gpu_for_cuda(dev);

    for (int p = 0; g != NULL && p < g->nparts; p++) {
        if (g->parts[p].limit == 0 ||
            vgpu_region_used(g->parts[p].shm, g->parts[p].rec) < part_limit(g, p))
            return p;
    }
    return 0;
}

void vgpu_bytes_add(CUdevice dev, int part, uint64_t size)
{
    struct vgpu_gpu *g = vgpu_gpu_for_cuda(dev);

    if (g == NULL || !g->enforce || size == 0 || (g->nparts > 0 && part >= g->nparts))
        return;
    /* Limit 0: the memory is already in use, so it counts whatever the limit. */
    if (reserve(g, part, size, 0) == 0)
        slot_add(g, part, (int64_t)size);
}

void vgpu_bytes_sub(CUdevice dev, int part, uint64_t size)
{
    struct vgpu_gpu *g = vgpu_gpu_for_cuda(dev);

    if (g == NULL || !g->enforce || size == 0 || (g->nparts > 0 && part >= g->nparts))
        return;
    unreserve(g, part, size);
    slot_add(g, part, -(int64_t)size);
}

void vgpu_charge_abort(struct vgpu_charge *c)
{
    if (c->gpu != NULL)
        unreserve(c->gpu, c->part, c->size);
    c->gpu = NULL;
}

void vgpu_charge_commit(struct vgpu_charge *c, enum vgpu_kind kind, uint64_t key)
{
    struct vgpu_ptrmap_entry e = {.key = key, .size = c->size, .device = (int16_t)c->device,
                                  .part = (uint16_t)c->part, .refcount = 1};
    struct vgpu_gpu *g = c->gpu;
    int rc;

    if (g == NULL)
        return;
    vgpu_lock();
    rc = vgpu_ptrmap_put(&maps[kind], &e);
    if (rc == 0 && g->nparts > 0)
        vgpu_region_slot_add(g->parts[c->part].shm, g->parts[c->part].rec, (int64_t)c->size);
    vgpu_unlock();
    if (rc != 0) {
        /* Untracked, its free would never return the bytes: give them back now. */
        VGPU_WARN("out of memory tracking an allocation; it is not counted");
        unreserve(g, c->part, c->size);
    }
}

bool vgpu_untrack(enum vgpu_kind kind, uint64_t key, struct vgpu_ptrmap_entry *e)
{
    bool found;

    vgpu_lock();
    found = vgpu_ptrmap_remove(&maps[kind], key, e) == 0;
    vgpu_unlock();
    return found;
}

static void vmm_share_drop(struct vgpu_gpu *g, const struct vgpu_ptrmap_entry *e);

void vgpu_untrack_end(enum vgpu_kind kind, const struct vgpu_ptrmap_entry *e, CUresult rc)
{
    /* Tracked implies set up: this lookup is the lock-free cached path. */
    struct vgpu_gpu *g = vgpu_gpu_for_cuda(e->device);
    int put = 0;

    if (g == NULL)
        return;
    /* A VMM handle holding a shared record (exported or imported): our hold goes. */
    if (kind == VGPU_KIND_VMM && e->shared != 0) {
        if (rc == CUDA_SUCCESS) {
            vmm_share_drop(g, e);
            return;
        }
        /* The driver kept it: tracked again, or (no memory) held until exit, never dropped. */
        vgpu_lock();
        put = vgpu_ptrmap_put(&maps[kind], e);
        vgpu_unlock();
        if (put != 0)
            VGPU_WARN("out of memory tracking a shared allocation; it stays held until exit");
        return;
    }
    vgpu_lock();
    /* The driver kept the memory: it stays charged and tracked. */
    if (rc != CUDA_SUCCESS && (put = vgpu_ptrmap_put(&maps[kind], e)) == 0) {
        vgpu_unlock();
        return;
    }
    unreserve(g, e->part, e->size);
    if (g->nparts > 0)
        vgpu_region_slot_add(g->parts[e->part].shm, g->parts[e->part].rec, -(int64_t)e->size);
    vgpu_unlock();
    if (put != 0)
        VGPU_WARN("out of memory tracking an allocation; it is not counted");
}

/* VA ranges mapped to tracked VMM handles; guarded by vgpu_lock(). */
static struct vgpu_vamap vamap;

void vgpu_acct_vmm_retain(uint64_t handle)
{
    struct vgpu_ptrmap_entry *e;

    vgpu_lock();
    e = vgpu_ptrmap_get(&maps[VGPU_KIND_VMM], handle);
    if (e != NULL)
        e->refcount++;
    vgpu_unlock();
}

/*
 * Drops a reference (ref) or a mapping (!ref) of handle; vgpu_lock() held.
 * When neither is left the handle is untracked into *out and true returned:
 * the caller then returns its bytes with vgpu_untrack_end, lock released.
 */
static bool vmm_drop_locked(uint64_t handle, bool ref, struct vgpu_ptrmap_entry *out)
{
    struct vgpu_ptrmap_entry *e = vgpu_ptrmap_get(&maps[VGPU_KIND_VMM], handle);

    if (e == NULL)
        return false;
    if (ref && e->refcount > 0)
        e->refcount--;
    else if (!ref && e->maps > 0)
        e->maps--;
    if (e->refcount != 0 || e->maps != 0)
        return false;
    return vgpu_ptrmap_remove(&maps[VGPU_KIND_VMM], handle, out) == 0;
}

enum vgpu_acct_vmm_release vgpu_acct_vmm_release_begin(uint64_t handle,
                                                       struct vgpu_ptrmap_entry *out)
{
    struct vgpu_ptrmap_entry *e;
    enum vgpu_acct_vmm_release r = VGPU_VMM_UNTRACKED;

    vgpu_lock();
    e = vgpu_ptrmap_get(&maps[VGPU_KIND_VMM], handle);
    if (e != NULL && e->refcount <= 1 && e->maps == 0) {
        vgpu_ptrmap_remove(&maps[VGPU_KIND_VMM], handle, out);
        r = VGPU_VMM_LAST;
    } else if (e != NULL) {
        r = VGPU_VMM_LIVES;
    }
    vgpu_unlock();
    return r;
}

void vgpu_acct_vmm_release_end(uint64_t handle, CUresult rc)
{
    struct vgpu_ptrmap_entry e;
    bool gone;

    if (rc != CUDA_SUCCESS)
        return;
    vgpu_lock();
    gone = vmm_drop_locked(handle, true, &e);
    vgpu_unlock();
    if (gone)
        vgpu_untrack_end(VGPU_KIND_VMM, &e, CUDA_SUCCESS);
}

bool vgpu_acct_vmm_map_begin(uint64_t handle)
{
    struct vgpu_ptrmap_entry *e;

    vgpu_lock();
    e = vgpu_ptrmap_get(&maps[VGPU_KIND_VMM], handle);
    if (e != NULL)
        e->maps++;
    vgpu_unlock();
    return e != NULL;
}

void vgpu_acct_vmm_map_end(uint64_t handle, uint64_t base, uint64_t size, CUresult rc)
{
    struct vgpu_vamap_entry m = {.base = base, .size = size, .handle = handle};
    struct vgpu_ptrmap_entry e;
    bool gone = false;
    int put = 0;

    vgpu_lock();
    if (rc != CUDA_SUCCESS)
        gone = vmm_drop_locked(handle, false, &e);
    else
        put = vgpu_vamap_put(&vamap, &m);
    vgpu_unlock();
    if (gone)
        vgpu_untrack_end(VGPU_KIND_VMM, &e, CUDA_SUCCESS);
    /* Unrecorded, the mapping keeps its handle charged until the process exits. */
    if (put != 0)
        VGPU_WARN("out of memory recording a mapping; its memory stays counted");
}

void vgpu_acct_vmm_unmap_begin(uint64_t base, uint64_t size, struct vgpu_acct_vmm_unmap *u)
{
    vgpu_lock();
    u->n = vgpu_vamap_take(&vamap, base, size, &u->taken);
    vgpu_unlock();
    if (u->n < 0)
        VGPU_WARN("out of memory unrecording mappings; their memory stays counted");
}

void vgpu_acct_vmm_unmap_end(struct vgpu_acct_vmm_unmap *u, CUresult rc)
{
    for (long i = 0; i < u->n; i++) {
        struct vgpu_ptrmap_entry e;
        bool gone = false;
        int put = 0;

        vgpu_lock();
        if (rc == CUDA_SUCCESS)
            gone = vmm_drop_locked(u->taken[i].handle, false, &e);
        else
            put = vgpu_vamap_put(&vamap, &u->taken[i]);
        vgpu_unlock();
        if (gone)
            vgpu_untrack_end(VGPU_KIND_VMM, &e, CUDA_SUCCESS);
        if (put != 0)
            VGPU_WARN("out of memory recording a mapping; its memory stays counted");
    }
    free(u->taken);
    u->taken = NULL;
    u->n = 0;
}

void vgpu_acct_ipc_exported(uint64_t dptr, const uint8_t key[64])
{
    struct vgpu_ptrmap_entry *e, moved;
    struct vgpu_gpu *g;
    struct vgpu_part *pt;
    int idx;

    vgpu_lock();
    e = vgpu_ptrmap_get(&maps[VGPU_KIND_PTR], dptr);
    g = e != NULL ? vgpu_gpu_for_cuda(e->device) : NULL;
    /* Untracked, pool memory, or private accounting (no other process to share the books). */
    if (g == NULL || g->nparts == 0 || e->part >= g->nparts) {
        vgpu_unlock();
        return;
    }
    pt = &g->parts[e->part];
    moved = *e;
    moved.pool = 0;
    idx = vgpu_region_share_export(pt->shm, pt->rec, VGPU_SHARED_KIND_IPC, key, e->size);
    if (idx >= 0) {
        moved.pool = (uint64_t)idx + 1;
        vgpu_ptrmap_remove(&maps[VGPU_KIND_PTR], dptr, NULL);
        /* A put of an entry just removed from a map of the same size class: room is there. */
        if (vgpu_ptrmap_put(&maps[VGPU_KIND_IPC], &moved) != 0)
            VGPU_WARN("out of memory tracking an exported allocation; it stays shared");
        vgpu_region_slot_add(pt->shm, pt->rec, -(int64_t)moved.size);
    }
    vgpu_unlock();
    if (idx < 0)
        VGPU_INFO("GPU %s: no free shared record for an exported allocation of %llu bytes; "
                  "it stays charged to this process", g->uuid, (unsigned long long)moved.size);
}

/*
 * An import on CUDA device dev of the shared memory named by key (record
 * kind share_kind), tracked in map map_kind as proto: with a record of the
 * claim, we become one of its holders (charged once already: nothing new);
 * without one (another claim's memory, or a record gone) it is ours to pay
 * for, size bytes against the limit, like a new allocation. size 0 (the
 * driver would not say) fails closed.
 */
static CUresult import_shared(CUdevice dev, enum vgpu_kind map_kind, uint32_t share_kind,
                              const uint8_t key[64], struct vgpu_ptrmap_entry proto,
                              uint64_t size)
{
    struct vgpu_gpu *g = vgpu_gpu_for_cuda(dev);
    struct vgpu_charge c;
    CUresult rc;

    if (g == NULL || !g->enforce)
        return CUDA_SUCCESS;
    if (!g->fail_closed && (g->nparts == 0 || have_slots(g))) {
        for (int p = 0; p < g->nparts; p++) {
            struct vgpu_ptrmap_entry e = proto;
            uint64_t bytes = 0;
            int idx, put;

            e.device = (int16_t)dev;
            e.part = (uint16_t)p;
            vgpu_lock();
            idx = vgpu_region_share_hold(g->parts[p].shm, g->parts[p].rec, share_kind, key, &bytes);
            if (idx < 0) {
                vgpu_unlock();
                continue;
            }
            e.size = bytes;
            if (map_kind == VGPU_KIND_IPC)
                e.pool = (uint64_t)idx + 1;
            else
                e.shared = (uint32_t)idx + 1;
            put = vgpu_ptrmap_put(&maps[map_kind], &e);
            vgpu_unlock();
            if (put != 0)
                VGPU_WARN("out of memory tracking an import; it stays held until exit");
            return CUDA_SUCCESS;
        }
    }
    if (size == 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    rc = vgpu_charge_begin(dev, -1, size, &c);
    if (rc != CUDA_SUCCESS)
        return rc;
    vgpu_charge_commit(&c, map_kind, proto.key);
    return CUDA_SUCCESS;
}

CUresult vgpu_acct_ipc_imported(CUdevice dev, uint64_t dptr, uint64_t size, const uint8_t key[64])
{
    return import_shared(dev, VGPU_KIND_IPC, VGPU_SHARED_KIND_IPC, key,
                         (struct vgpu_ptrmap_entry){.key = dptr}, size);
}

bool vgpu_acct_ipc_untrack(uint64_t dptr, struct vgpu_ptrmap_entry *e)
{
    return vgpu_untrack(VGPU_KIND_IPC, dptr, e);
}

void vgpu_acct_ipc_untrack_end(const struct vgpu_ptrmap_entry *e, CUresult rc)
{
    struct vgpu_gpu *g;
    int put = 0;

    if (e->pool == 0) {
        vgpu_untrack_end(VGPU_KIND_IPC, e, rc);
        return;
    }
    g = vgpu_gpu_for_cuda(e->device);
    if (g == NULL || e->part >= g->nparts)
        return;
    vgpu_lock();
    if (rc != CUDA_SUCCESS)
        put = vgpu_ptrmap_put(&maps[VGPU_KIND_IPC], e);
    else
        vgpu_region_share_drop(g->parts[e->part].shm, g->parts[e->part].rec, (int)e->pool - 1);
    vgpu_unlock();
    if (put != 0)
        VGPU_WARN("out of memory tracking an import; it stays held until exit");
}

/*
 * A VMM handle e that held shared record e->shared - 1 is gone: drops our
 * hold unless another tracked handle of this process holds the same record
 * (the driver may hand out several handles for one allocation).
 */
static void vmm_share_drop(struct vgpu_gpu *g, const struct vgpu_ptrmap_entry *e)
{
    const struct vgpu_ptrmap *m = &maps[VGPU_KIND_VMM];
    bool other = false;

    if (e->part >= g->nparts)
        return;
    vgpu_lock();
    for (size_t i = 0; i < m->capacity && !other; i++) {
        const struct vgpu_ptrmap_entry *o = &m->buckets[i];

        other = o->key != 0 && o->shared == e->shared && o->part == e->part &&
                o->device == e->device;
    }
    if (!other)
        vgpu_region_share_drop(g->parts[e->part].shm, g->parts[e->part].rec, (int)e->shared - 1);
    vgpu_unlock();
}

/*
 * Marks lock_fd's open file description with the nonce that names the
 * record of a nonce-keyed export (vgpu_region.h), filled into key: the
 * nonce of record shared (index + 1) when the handle holds one already (a
 * further export), else a fresh one. Returns 0, an errno value, or -1 for a
 * handle shared under another key (a fabric handle, a regular file).
 * vgpu_lock() held, so that two exports of one handle agree on the nonce.
 */
static int vmm_mark_locked(const struct vgpu_part *pt, uint32_t shared, int lock_fd,
                           uint8_t key[VGPU_REGION_SHARED_KEY_LEN])
{
    uint64_t nonce = 0;

    if (shared != 0) {
        /* We hold the record: it stays live and its key unchanged meanwhile. */
        const struct vgpu_region_shared *r = &pt->shm->r->shared[shared - 1];

        if (__atomic_load_n(&r->kind, __ATOMIC_RELAXED) == VGPU_SHARED_KIND_VMM_FD)
            memcpy(&nonce, r->key + VGPU_SHAREFD_KEY_NONCE, sizeof(nonce));
        if (nonce == 0)
            return -1;
    } else if (vgpu_sharefd_nonce_new(&nonce) != 0) {
        return errno;
    }
    memcpy(key + VGPU_SHAREFD_KEY_NONCE, &nonce, sizeof(nonce));
    return vgpu_sharefd_mark(lock_fd, nonce) == 0 ? 0 : errno;
}

void vgpu_acct_vmm_exported(uint64_t handle, uint32_t kind, const uint8_t key[64], int lock_fd)
{
    uint8_t k[VGPU_REGION_SHARED_KEY_LEN];
    struct vgpu_ptrmap_entry *e;
    struct vgpu_gpu *g;
    struct vgpu_part *pt;
    uint64_t size = 0;
    int idx = -1, err = 0;
    bool made = false;

    memcpy(k, key, sizeof(k));
    vgpu_lock();
    e = vgpu_ptrmap_get(&maps[VGPU_KIND_VMM], handle);
    g = e != NULL ? vgpu_gpu_for_cuda(e->device) : NULL;
    /* Untracked, or private accounting (no other process to share the books). */
    if (g == NULL || g->nparts == 0 || e->part >= g->nparts) {
        vgpu_unlock();
        return;
    }
    pt = &g->parts[e->part];
    size = e->size;
    if (lock_fd >= 0)
        err = vmm_mark_locked(pt, e->shared, lock_fd, k);
    /* Shared already (exported before, or an import): the new fd is all there was to do. */
    if (e->shared == 0 && err == 0) {
        made = true;
        idx = vgpu_region_share_export(pt->shm, pt->rec, kind, k, size);
        if (idx >= 0) {
            e->shared = (uint32_t)idx + 1;
            vgpu_region_slot_add(pt->shm, pt->rec, -(int64_t)size);
        }
    }
    vgpu_unlock();
    if (err != 0)
        VGPU_INFO("GPU %s: an exported VMM fd of %llu bytes cannot be marked (%s); "
                  "importers of that fd are refused", g->uuid, (unsigned long long)size,
                  err > 0 ? strerror(err) : "its allocation is shared under another key");
    else if (made && idx < 0)
        VGPU_INFO("GPU %s: no free shared record for an exported VMM allocation of %llu bytes; "
                  "it stays charged to this process", g->uuid, (unsigned long long)size);
}

CUresult vgpu_acct_vmm_imported(CUdevice dev, uint64_t handle, uint64_t size, uint32_t kind,
                                const uint8_t key[64])
{
    struct vgpu_ptrmap_entry *t;

    /* The driver handed back a handle we track (our own export): one more reference. */
    vgpu_lock();
    t = vgpu_ptrmap_get(&maps[VGPU_KIND_VMM], handle);
    if (t != NULL)
        t->refcount++;
    vgpu_unlock();
    if (t != NULL)
        return CUDA_SUCCESS;
    return import_shared(dev, VGPU_KIND_VMM, kind, key,
                         (struct vgpu_ptrmap_entry){.key = handle, .refcount = 1}, size);
}

uint64_t vgpu_acct_vmm_shared_bytes(CUdevice dev, uint32_t kind, const uint8_t key[64])
{
    struct vgpu_gpu *g = vgpu_gpu_for_cuda(dev);
    uint64_t bytes = 0;

    if (g == NULL || g->fail_closed)
        return 0;
    for (int p = 0; p < g->nparts && bytes == 0; p++)
        bytes = vgpu_region_share_bytes(g->parts[p].shm, g->parts[p].rec, kind, key);
    return bytes;
}

void vgpu_acct_forget_all(void)
{
    for (int k = 0; k < VGPU_KIND_COUNT; k++)
        vgpu_ptrmap_clear(&maps[k]);
    vgpu_vamap_clear(&vamap);
}
