/* acct.c - see acct.h. */
#include "acct.h"

#include "log.h"
#include "shm.h"

/* One map per kind for the whole process; guarded by vgpu_lock(). */
static struct vgpu_ptrmap maps[VGPU_KIND_COUNT];

static int private_reserve(struct vgpu_gpu *g, uint64_t size, uint64_t limit)
{
    uint64_t cur = __atomic_load_n(&g->private_used, __ATOMIC_RELAXED), next;

    do {
        if (cur > UINT64_MAX - size)
            return -1;
        next = cur + size;
        if (limit != 0 && next > limit)
            return -1;
    } while (!__atomic_compare_exchange_n(&g->private_used, &cur, next, true, __ATOMIC_ACQ_REL,
                                          __ATOMIC_RELAXED));
    return 0;
}

static void private_unreserve(struct vgpu_gpu *g, uint64_t size)
{
    uint64_t cur = __atomic_load_n(&g->private_used, __ATOMIC_RELAXED);

    while (!__atomic_compare_exchange_n(&g->private_used, &cur, cur > size ? cur - size : 0, true,
                                        __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
    }
}

static int reserve(struct vgpu_gpu *g, uint64_t size, uint64_t limit)
{
    if (g->shm != NULL)
        return vgpu_shm_reserve(g->shm, g->rec, size, limit);
    return private_reserve(g, size, limit);
}

static void unreserve(struct vgpu_gpu *g, uint64_t size)
{
    if (g->shm != NULL)
        vgpu_shm_unreserve(g->shm, g->rec, size);
    else
        private_unreserve(g, size);
}

uint64_t vgpu_gpu_used(const struct vgpu_gpu *g)
{
    if (g->shm != NULL)
        return vgpu_shm_used(g->shm, g->rec);
    return __atomic_load_n(&g->private_used, __ATOMIC_ACQUIRE);
}

CUresult vgpu_charge_begin(CUdevice dev, uint64_t size, struct vgpu_charge *c)
{
    struct vgpu_gpu *g = vgpu_gpu_for_cuda(dev);

    c->gpu = NULL;
    c->device = dev;
    c->size = size;
    if (g == NULL || !g->enforce)
        return CUDA_SUCCESS;
    if (g->fail_closed)
        return CUDA_ERROR_OUT_OF_MEMORY;
    /* A fork child starts without a slot: its bytes must be published in one of its own. */
    if (g->shm != NULL && g->shm->slot < 0) {
        int rc;

        vgpu_lock();
        rc = vgpu_shm_claim_slot(g->shm, vgpu_self());
        vgpu_unlock();
        if (rc != 0) {
            VGPU_WARN("GPU %s: no free process slot in %s; refusing the allocation", g->uuid,
                      g->shm->path);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
    }
    if (size != 0 && reserve(g, size, g->limit) != 0) {
        /* Bytes of killed processes may still be charged: reclaim them and try once more. */
        if (g->shm == NULL || vgpu_shm_reclaim(g->shm, vgpu_self()) == 0 ||
            reserve(g, size, g->limit) != 0) {
            vgpu_shm_note_refusal(g->shm, g->rec, size);
            VGPU_INFO("GPU %s: refusing %llu bytes: %llu of %llu in use", g->uuid,
                      (unsigned long long)size, (unsigned long long)vgpu_gpu_used(g),
                      (unsigned long long)g->limit);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
    }
    c->gpu = g;
    return CUDA_SUCCESS;
}

CUresult vgpu_charge_resize(struct vgpu_charge *c, uint64_t size)
{
    if (c->gpu == NULL || size == c->size)
        return CUDA_SUCCESS;
    if (size > c->size) {
        if (reserve(c->gpu, size - c->size, c->gpu->limit) != 0) {
            vgpu_shm_note_refusal(c->gpu->shm, c->gpu->rec, size);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
    } else {
        unreserve(c->gpu, c->size - size);
    }
    c->size = size;
    return CUDA_SUCCESS;
}

void vgpu_charge_keep(struct vgpu_charge *c)
{
    if (c->gpu == NULL || c->gpu->shm == NULL)
        return;
    vgpu_lock();
    vgpu_shm_slot_add(c->gpu->shm, c->gpu->rec, (int64_t)c->size);
    vgpu_unlock();
}

void vgpu_bytes_add(CUdevice dev, uint64_t size)
{
    struct vgpu_gpu *g = vgpu_gpu_for_cuda(dev);

    if (g == NULL || !g->enforce || size == 0)
        return;
    /* Limit 0: the memory is already in use, so it counts whatever the limit. */
    reserve(g, size, 0);
    if (g->shm != NULL) {
        vgpu_lock();
        vgpu_shm_slot_add(g->shm, g->rec, (int64_t)size);
        vgpu_unlock();
    }
}

void vgpu_bytes_sub(CUdevice dev, uint64_t size)
{
    struct vgpu_gpu *g = vgpu_gpu_for_cuda(dev);

    if (g == NULL || !g->enforce || size == 0)
        return;
    unreserve(g, size);
    if (g->shm != NULL) {
        vgpu_lock();
        vgpu_shm_slot_add(g->shm, g->rec, -(int64_t)size);
        vgpu_unlock();
    }
}

void vgpu_charge_abort(struct vgpu_charge *c)
{
    if (c->gpu != NULL)
        unreserve(c->gpu, c->size);
    c->gpu = NULL;
}

void vgpu_charge_commit(struct vgpu_charge *c, enum vgpu_kind kind, uint64_t key)
{
    struct vgpu_ptrmap_entry e = {.key = key, .size = c->size, .device = c->device, .refcount = 1};
    int rc;

    if (c->gpu == NULL)
        return;
    vgpu_lock();
    rc = vgpu_ptrmap_put(&maps[kind], &e);
    if (rc == 0 && c->gpu->shm != NULL)
        vgpu_shm_slot_add(c->gpu->shm, c->gpu->rec, (int64_t)c->size);
    vgpu_unlock();
    if (rc != 0) {
        /* Untracked, its free would never return the bytes: give them back now. */
        VGPU_WARN("out of memory tracking an allocation; it is not counted");
        unreserve(c->gpu, c->size);
    }
}

bool vgpu_uncharge(enum vgpu_kind kind, uint64_t key, struct vgpu_ptrmap_entry *e)
{
    struct vgpu_gpu *g;
    bool found;

    vgpu_lock();
    found = vgpu_ptrmap_remove(&maps[kind], key, e) == 0;
    if (found) {
        /* Tracked implies set up: this lookup is the lock-free cached path. */
        g = vgpu_gpu_for_cuda(e->device);
        unreserve(g, e->size);
        if (g->shm != NULL)
            vgpu_shm_slot_add(g->shm, g->rec, -(int64_t)e->size);
    }
    vgpu_unlock();
    return found;
}

void vgpu_uncharge_undo(enum vgpu_kind kind, const struct vgpu_ptrmap_entry *e)
{
    struct vgpu_gpu *g = vgpu_gpu_for_cuda(e->device);
    int rc;

    if (g == NULL)
        return;
    /* The bytes are still in use on the GPU: count them whatever the limit. */
    reserve(g, e->size, 0);
    vgpu_lock();
    rc = vgpu_ptrmap_put(&maps[kind], e);
    if (rc == 0 && g->shm != NULL)
        vgpu_shm_slot_add(g->shm, g->rec, (int64_t)e->size);
    vgpu_unlock();
    if (rc != 0)
        unreserve(g, e->size);
}

void vgpu_vmm_retain(uint64_t handle)
{
    struct vgpu_ptrmap_entry *e;

    vgpu_lock();
    e = vgpu_ptrmap_get(&maps[VGPU_KIND_VMM], handle);
    if (e != NULL)
        e->refcount++;
    vgpu_unlock();
}

bool vgpu_vmm_release_ref(uint64_t handle)
{
    struct vgpu_ptrmap_entry *e;
    bool alive = false;

    vgpu_lock();
    e = vgpu_ptrmap_get(&maps[VGPU_KIND_VMM], handle);
    if (e != NULL && e->refcount > 1) {
        e->refcount--;
        alive = true;
    }
    vgpu_unlock();
    return alive;
}

void vgpu_vmm_restore_ref(uint64_t handle)
{
    vgpu_vmm_retain(handle);
}

void vgpu_acct_forget_all(void)
{
    for (int k = 0; k < VGPU_KIND_COUNT; k++)
        vgpu_ptrmap_clear(&maps[k]);
}
