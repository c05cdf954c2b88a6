/*
 * acct.h - device-memory accounting: reserve before the driver call, commit
 * or roll back after it, and match frees through per-kind tracking maps.
 *
 * The reservation is a compare-and-swap on the claim-wide counter in the
 * shared region (or on a process-private counter when there is none), so
 * processes racing for the last bytes can never exceed the limit together.
 */
#ifndef VGPU_ACCT_H
#define VGPU_ACCT_H

#include <stdbool.h>
#include <stdint.h>

#include "gpus.h"
#include "ptrmap.h"
#include "vgpu_cuda.h"

/* What a tracked handle is; each kind has its own map since their key spaces overlap. */
enum vgpu_kind {
    VGPU_KIND_PTR,     /* cuMemAlloc*, managed, async, pools */
    VGPU_KIND_VMM,     /* cuMemCreate handles */
    VGPU_KIND_ARRAY,   /* cuArrayCreate / cuArray3DCreate */
    VGPU_KIND_MIPMAP,  /* cuMipmappedArrayCreate */
    VGPU_KIND_COUNT,
};

/* An allocation in flight between reservation and commit. */
struct vgpu_charge {
    struct vgpu_gpu *gpu; /* NULL: nothing reserved, nothing to track */
    CUdevice device;
    uint64_t size;
};

/*
 * Reserves size bytes on CUDA device dev for an allocation about to be made.
 * Returns CUDA_SUCCESS (c->gpu is NULL when the device is not enforced) or
 * CUDA_ERROR_OUT_OF_MEMORY when the limit would be exceeded. Zero bytes
 * always fit (a pool serving from memory it already holds), unless the GPU
 * fails closed.
 */
CUresult vgpu_charge_begin(CUdevice dev, uint64_t size, struct vgpu_charge *c);

/*
 * Changes the reservation to the exact size the driver used (pitch, array
 * requirements). Returns CUDA_SUCCESS or CUDA_ERROR_OUT_OF_MEMORY (the
 * reservation is then unchanged and the caller must undo the allocation).
 */
CUresult vgpu_charge_resize(struct vgpu_charge *c, uint64_t size);

/*
 * Pools: keeps the reservation as part of this process's charge without
 * tracking a handle (the caller accounts for it, see pools.h).
 */
void vgpu_charge_keep(struct vgpu_charge *c);

/* Pools: charges size bytes already in use on CUDA device dev, whatever the limit. */
void vgpu_bytes_add(CUdevice dev, uint64_t size);

/* Pools: returns size bytes charged with vgpu_charge_keep or vgpu_bytes_add. */
void vgpu_bytes_sub(CUdevice dev, uint64_t size);

/* Driver call failed: gives the reservation back. */
void vgpu_charge_abort(struct vgpu_charge *c);

/* Driver call succeeded: tracks key so that its free returns the bytes. */
void vgpu_charge_commit(struct vgpu_charge *c, enum vgpu_kind kind, uint64_t key);

/*
 * Stops tracking key and returns its bytes. Returns true and fills *e if key
 * was tracked. Call before the driver frees it; on a driver error call
 * vgpu_uncharge_undo so the bytes count again.
 */
bool vgpu_uncharge(enum vgpu_kind kind, uint64_t key, struct vgpu_ptrmap_entry *e);

/* Re-tracks an entry whose free the driver refused. */
void vgpu_uncharge_undo(enum vgpu_kind kind, const struct vgpu_ptrmap_entry *e);

/* VMM: counts one more cuMemRetainAllocationHandle reference on a tracked handle. */
void vgpu_vmm_retain(uint64_t handle);

/*
 * VMM: drops one reference of handle. Returns true if the handle stays alive
 * (more references), false if this is the last one or it is not tracked.
 */
bool vgpu_vmm_release_ref(uint64_t handle);

/* VMM: undoes vgpu_vmm_release_ref after the driver refused the release. */
void vgpu_vmm_restore_ref(uint64_t handle);

/* Bytes currently charged on the claim (region) or process (private) for gpu. */
uint64_t vgpu_gpu_used(const struct vgpu_gpu *g);

/* Fork child: forgets every tracked allocation (they belong to the parent). */
void vgpu_acct_forget_all(void);

#endif /* VGPU_ACCT_H */
