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
 * acct.h - device-memory accounting: reserve before the driver call, commit
 * or roll back after it, and match frees through per-kind tracking maps.
 *
 * A reservation moves the claim-wide counter in the shared region and this
 * process's slot together, under the device record's charge lock (region.h),
 * so processes racing for the last bytes never exceed the limit together,
 * and a process killed at any instant leaves the counter equal to what the
 * live processes hold. Without a region (standalone mode only) a
 * process-private counter is used; in enforced mode a GPU whose region is
 * unusable fails closed (gpus.h).
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
    VGPU_KIND_IPC,     /* exported allocations and imports (cuIpc*): pool = shared record + 1 */
    VGPU_KIND_EXT,     /* imported external memory objects (cuImportExternalMemory) */
    VGPU_KIND_COUNT,
};

/* An allocation in flight between reservation and commit. */
struct vgpu_charge {
    struct vgpu_gpu *gpu; /* NULL: nothing reserved, nothing to track */
    CUdevice device;
    int part;             /* claim charged (index into gpu->parts) */
    uint64_t size;
};

/*
 * Reserves size bytes on CUDA device dev for an allocation about to be made,
 * on claim part of the GPU, or (part -1) on the first of its claims, in UID
 * order, with room for all of it. The reservation is in this process's slot
 * from the instant it is on the claim's counter, so a kill at any point
 * returns it. Returns CUDA_SUCCESS (c->gpu is NULL when the device is not
 * enforced) or CUDA_ERROR_OUT_OF_MEMORY when no claim has room, or when the
 * GPU fails closed. Zero bytes always fit (a pool serving from memory it
 * already holds), unless the GPU fails closed.
 */
CUresult vgpu_charge_begin(CUdevice dev, int part, uint64_t size, struct vgpu_charge *c);

/*
 * Changes the reservation to the exact size the driver used (pitch, array
 * requirements), on the same claim. Returns CUDA_SUCCESS or
 * CUDA_ERROR_OUT_OF_MEMORY (the reservation is then unchanged and the caller
 * must undo the allocation).
 */
CUresult vgpu_charge_resize(struct vgpu_charge *c, uint64_t size);

/*
 * Pools: keeps the reservation as part of this process's charge without
 * tracking a handle (the caller accounts for it, see pools.h).
 */
void vgpu_charge_keep(struct vgpu_charge *c);

/* Pools: the claim of CUDA device dev a new pool is charged to: the first with room. */
int vgpu_pick_part(CUdevice dev);

/* Pools: charges size bytes already in use on claim part of dev, whatever the limit. */
void vgpu_bytes_add(CUdevice dev, int part, uint64_t size);

/* Pools: returns size bytes charged with vgpu_charge_keep or vgpu_bytes_add. */
void vgpu_bytes_sub(CUdevice dev, int part, uint64_t size);

/* Driver call failed: gives the reservation back. */
void vgpu_charge_abort(struct vgpu_charge *c);

/* Driver call succeeded: tracks key so that its free returns the bytes. */
void vgpu_charge_commit(struct vgpu_charge *c, enum vgpu_kind kind, uint64_t key);

/*
 * Free path, before the driver's free: stops tracking key (so a new
 * allocation the driver gives the same key is tracked afresh). Returns true
 * and fills *e if key was tracked; then call vgpu_untrack_end.
 */
bool vgpu_untrack(enum vgpu_kind kind, uint64_t key, struct vgpu_ptrmap_entry *e);

/*
 * Free path, after the driver's free returned rc: on success the entry's
 * bytes leave the claim's counter and our slot, together; on failure the
 * entry is tracked again. Until this runs the bytes stay charged (the claim
 * over-counts for the length of the driver call, never under-counts), and a
 * kill before it returns them through our slot's charged_bytes.
 */
void vgpu_untrack_end(enum vgpu_kind kind, const struct vgpu_ptrmap_entry *e, CUresult rc);

/*
 * VMM lifetime. The driver keeps the physical memory of a cuMemCreate handle
 * until its handle is released (cuMemRelease, once per cuMemCreate and per
 * cuMemRetainAllocationHandle) AND its last mapping is unmapped (cuMemUnmap),
 * in any order. The charge follows it: a tracked handle counts references
 * (refcount) and mappings (maps); its bytes leave the claim only when both
 * are 0. Every step keeps the claim over-counting during a driver call,
 * never under-counting, and the charge stays in this process's slot all
 * along, so a kill at any instant returns exactly what the driver frees.
 */

/* After a successful cuMemRetainAllocationHandle: one more reference on a tracked handle. */
void vgpu_acct_vmm_retain(uint64_t handle);

/* What releasing a handle does to its charge (vgpu_acct_vmm_release_begin). */
enum vgpu_acct_vmm_release {
    VGPU_VMM_UNTRACKED, /* not ours: straight to the driver */
    VGPU_VMM_LAST,      /* last reference, no mapping: untracked, finish with vgpu_untrack_end */
    VGPU_VMM_LIVES,     /* the memory outlives this reference: vgpu_acct_vmm_release_end finishes */
};

/*
 * cuMemRelease, before the driver call. For VGPU_VMM_LAST the handle is no
 * longer tracked and *e holds its charge (as vgpu_untrack does).
 */
enum vgpu_acct_vmm_release vgpu_acct_vmm_release_begin(uint64_t handle,
                                                       struct vgpu_ptrmap_entry *e);

/*
 * cuMemRelease of a VGPU_VMM_LIVES handle, after the driver returned rc: on
 * success one reference goes, and the bytes leave the claim if that left
 * neither a reference nor a mapping (a concurrent unmap).
 */
void vgpu_acct_vmm_release_end(uint64_t handle, CUresult rc);

/*
 * cuMemMap, before the driver call: counts the mapping on a tracked handle
 * (so a concurrent release of the last reference keeps the charge).
 * Returns whether the handle is tracked.
 */
bool vgpu_acct_vmm_map_begin(uint64_t handle);

/*
 * cuMemMap, after the driver returned rc: on success records [base, base +
 * size) as mapped to handle; on failure uncounts the mapping (and returns
 * the bytes if nothing else holds them).
 */
void vgpu_acct_vmm_map_end(uint64_t handle, uint64_t base, uint64_t size, CUresult rc);

/* An unmap in flight: the mappings it takes away (vgpu_acct_vmm_unmap_begin). */
struct vgpu_acct_vmm_unmap {
    struct vgpu_vamap_entry *taken;
    long n;
};

/*
 * cuMemUnmap, before the driver call: takes the recorded mappings wholly
 * inside [base, base + size) out of the VA map (a concurrent map of the
 * same addresses after the driver's unmap is then recorded afresh). Their
 * handles stay charged until vgpu_acct_vmm_unmap_end.
 */
void vgpu_acct_vmm_unmap_begin(uint64_t base, uint64_t size, struct vgpu_acct_vmm_unmap *u);

/*
 * cuMemUnmap, after the driver returned rc: on success each mapping taken
 * goes, and a handle left with neither a reference nor a mapping leaves the
 * claim; on failure they are recorded again.
 */
void vgpu_acct_vmm_unmap_end(struct vgpu_acct_vmm_unmap *u, CUresult rc);

/*
 * The limit a reservation on claim part of g is held to now: the claim's
 * guarantee + the burst grant last read (docs/architecture.md "Burstable
 * memory"); no system call.
 */
uint64_t vgpu_part_limit(const struct vgpu_gpu *g, int part);

/*
 * The limit the memory queries report for g (cuMemGetInfo, cuDeviceTotalMem,
 * NVML): the sum over its claims of guarantee + current grant, the burst
 * files re-read where they changed (a stat per claim). Not the claims'
 * memoryLimit ceiling: memory above the grant may never come, and a program
 * sizing a cache from the total must not be told of it. 0 = unlimited.
 */
uint64_t vgpu_acct_gpu_limit_now(struct vgpu_gpu *g);

/*
 * Memory shared between processes (cuIpc*, region.h "shared allocations").
 * An exported allocation's charge moves from our slot into a claim-wide
 * shared record that every process of the claim holding the memory is a
 * holder of; its bytes leave the claim with the last holder, a dead one
 * included. An import with no record in our claim's region is charged to
 * us as a new allocation of the imported size, against the limit.
 */

/*
 * cuIpcGetMemHandle succeeded for dptr with handle key: a tracked
 * allocation's charge moves into a shared record (tracked as
 * VGPU_KIND_IPC from then on). Without a free record it stays ours.
 */
void vgpu_acct_ipc_exported(uint64_t dptr, const uint8_t key[64]);

/*
 * cuIpcOpenMemHandle succeeded on CUDA device dev, mapping size bytes
 * (size 0: unknown) at dptr from handle key: holds the claim's record, or
 * charges size against the limit. Returns CUDA_SUCCESS, or
 * CUDA_ERROR_OUT_OF_MEMORY when the charge does not fit (the caller then
 * closes the import).
 */
CUresult vgpu_acct_ipc_imported(CUdevice dev, uint64_t dptr, uint64_t size, const uint8_t key[64]);

/*
 * Frees of an exported allocation and cuIpcCloseMemHandle, before the
 * driver call: untracks dptr. Returns whether it was an IPC entry.
 */
bool vgpu_acct_ipc_untrack(uint64_t dptr, struct vgpu_ptrmap_entry *e);

/*
 * After the driver returned rc: on success our hold on the record goes
 * (the bytes leave the claim if we were its last holder) or the import's
 * own charge is returned; on failure the entry is tracked again.
 */
void vgpu_acct_ipc_untrack_end(const struct vgpu_ptrmap_entry *e, CUresult rc);

/*
 * VMM shareable handles (cuMemExportToShareableHandle and
 * cuMemImportFromShareableHandle) use the same shared records, keyed by
 * what names the allocation in every process (VGPU_SHARED_KIND_VMM_FD,
 * _VMM_FABRIC; layouts in vgpu_region.h): a regular file's (st_dev,
 * st_ino), the nonce the exporter marked any other fd's open file
 * description with (sharefd.h), a fabric handle's 64 bytes. The handle
 * stays a tracked VMM handle with its lifetime (release + last unmap);
 * when it ends, our hold on the record goes instead of the charge.
 */

/*
 * cuMemExportToShareableHandle succeeded for handle, named by key of kind:
 * a tracked handle's charge moves into a shared record held by us (once;
 * a handle already shared stays as it is). Without a free record it stays
 * ours. lock_fd >= 0 is an exported fd that is no regular file: key lacks
 * the nonce, and lock_fd is marked with the handle's record's nonce (a
 * fresh one for a new record) first; unmarked, nothing is shared.
 */
void vgpu_acct_vmm_exported(uint64_t handle, uint32_t kind, const uint8_t key[64], int lock_fd);

/*
 * cuMemImportFromShareableHandle returned handle for an allocation on CUDA
 * device dev named by key of kind, of size bytes (0: unknown): a handle we
 * track already gets one more reference; otherwise we hold our claim's
 * record, or are charged size against the limit like a cuMemCreate.
 * Returns CUDA_SUCCESS, or CUDA_ERROR_OUT_OF_MEMORY when the charge does
 * not fit or the size is unknown (the caller then releases the handle).
 */
CUresult vgpu_acct_vmm_imported(CUdevice dev, uint64_t handle, uint64_t size, uint32_t kind,
                                const uint8_t key[64]);

/*
 * The bytes of our claim's record of kind and key for an allocation on CUDA
 * device dev (the first claim on it that has one), 0 when none has.
 */
uint64_t vgpu_acct_vmm_shared_bytes(CUdevice dev, uint32_t kind, const uint8_t key[64]);

/* Bytes currently charged for gpu: the sum over its claims (regions), or the process's (private). */
uint64_t vgpu_acct_gpu_used(const struct vgpu_gpu *g);

/*
 * Checks that g's regions are still the files this process mapped (memory
 * queries and refusals call it; a stat per region). One that was replaced,
 * truncated or re-initialised makes g fail closed, flagged in our slots.
 */
void vgpu_acct_gpu_verify(struct vgpu_gpu *g);

/* Fork child: forgets every tracked allocation (they belong to the parent). */
void vgpu_acct_forget_all(void);

#endif /* VGPU_ACCT_H */
