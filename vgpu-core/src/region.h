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
 * region.h - one process's attachment to a claim's shared region
 * (layout and protocol: include/vgpu_region.h).
 *
 * Memory counters change under the device record's charge lock, a spin lock
 * in the region held for a handful of stores, with an undo record so that a
 * holder killed at any instant is rolled back exactly; the OFD lock on the
 * file is taken only for rare operations: initialising the header, adding a
 * device record, claiming a slot, reclaiming the slots of dead processes.
 * Callers serialise the rare operations within a process (vgpu_lock()).
 */
#ifndef VGPU_SRC_REGION_H
#define VGPU_SRC_REGION_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "config.h"
#include "procinfo.h"
#include "vgpu_region.h"

struct vgpu_region_map {
    char path[PATH_MAX];
    int fd;
    pid_t fd_pid; /* process that opened fd: OFD locks belong to the open file description */
    struct vgpu_region *r;
    int slot; /* our slot index, -1 until claimed (and again in a fork child) */
    int adopted; /* dead slot we are reclaiming (we hold its slot lock), else -1 */
    const struct vgpu_procinfo *self; /* our identity, set by the first slot claim */
    uint64_t dev, ino;            /* the file we mapped */
    uint64_t generation, init_ns; /* its header when we attached */
};

/*
 * Maps the region at path. With create, a missing file is created (0666) and
 * sized (standalone mode); otherwise it must exist with exactly
 * VGPU_REGION_SIZE bytes. Initialises the header if needed and validates it.
 * Returns 0, or -1 with a reason in err (the caller then falls back to
 * process-private accounting).
 */
int vgpu_region_attach(struct vgpu_region_map *s, const char *path, bool create, char err[VGPU_ERRMSG_MAX]);

/* Unmaps and closes (tests and tools; the library keeps its regions for life). */
void vgpu_region_detach(struct vgpu_region_map *s);

/*
 * Returns the index of the device record for uuid, adding it (with the
 * informational limits) if absent. Returns -1 if the region is full or the
 * lock cannot be taken.
 */
int vgpu_region_find_device(struct vgpu_region_map *s, const char *uuid, uint64_t memory_limit,
                    uint32_t sm_limit, uint32_t policy);

/* Claims a process slot for self if we have none (reclaiming dead ones first). Returns 0 or -1. */
int vgpu_region_claim_slot(struct vgpu_region_map *s, const struct vgpu_procinfo *self);

/*
 * Adds size to the claim-wide counter of record rec and to our slot's
 * charged_bytes, together, unless the counter would exceed limit (0 = no
 * limit). Returns 0, or -1 when refused or without a slot.
 */
int vgpu_region_reserve(struct vgpu_region_map *s, int rec, uint64_t size, uint64_t limit);

/*
 * Subtracts size (at most what our slot has charged) from the claim-wide
 * counter of rec and from our slot's charged_bytes, together.
 */
void vgpu_region_unreserve(struct vgpu_region_map *s, int rec, uint64_t size);

/* Returns what our slot has charged on rec (0 without a slot). */
uint64_t vgpu_region_slot_charged(const struct vgpu_region_map *s, int rec);

/*
 * Checks that path still names the file we mapped, with the header we
 * attached to (not replaced, truncated, re-initialised or overwritten).
 * Returns 0, or -1 with a reason in err.
 */
int vgpu_region_verify(struct vgpu_region_map *s, char err[VGPU_ERRMSG_MAX]);

/* Sets VGPU_SLOT_FLAG_FAIL_CLOSED in our slot (the monitor reports it). */
void vgpu_region_slot_mark_fail_closed(struct vgpu_region_map *s);

/* Counts one more process refused for want of a free slot on rec. */
void vgpu_region_count_refused(struct vgpu_region_map *s, int rec);
/*
 * Counts one allocation of size bytes on rec refused for the limit
 * (refusals, last_refused_bytes, last_refused_ns). s may be NULL (a process
 * without a region): then nothing is recorded. Lock-free; only the refusal
 * path pays for it.
 */
void vgpu_region_note_refusal(struct vgpu_region_map *s, int rec, uint64_t size);

/* Returns the claim-wide counter of rec. */
uint64_t vgpu_region_used(const struct vgpu_region_map *s, int rec);

/*
 * Publishes in our slot that tracked bytes on rec changed by delta. The
 * caller serialises calls for one slot (seqlock single writer).
 */
void vgpu_region_slot_add(struct vgpu_region_map *s, int rec, int64_t delta);

/*
 * Publishes our slot's compute counters on rec (cumulative launches and
 * time spent waiting for tokens). The caller serialises calls for one slot.
 */
void vgpu_region_slot_set_compute(struct vgpu_region_map *s, int rec, uint64_t launches,
                               uint64_t throttled_ns);

/* Publishes our host pid in our slot. The caller serialises calls for one slot. */
void vgpu_region_slot_set_host_pid(struct vgpu_region_map *s, uint32_t host_pid);

/* Returns the tracked bytes our slot holds on rec (0 without a slot). */
uint64_t vgpu_region_slot_used(const struct vgpu_region_map *s, int rec);

/*
 * Sets our slot's overhead bytes on rec, moving the claim-wide counter by
 * the difference. The caller serialises calls for one slot.
 */
void vgpu_region_slot_set_overhead(struct vgpu_region_map *s, int rec, uint64_t overhead);

/*
 * Frees the slots of dead processes in our pid namespace and returns their
 * bytes to the device counters. Returns the number of slots reclaimed.
 */
int vgpu_region_reclaim(struct vgpu_region_map *s, const struct vgpu_procinfo *self);

/*
 * Whether slot i is active and its owner is known to be dead (its slot lock
 * dropped by the kernel, or gone from /proc in our pid namespace): it is
 * waiting to be reclaimed.
 */
bool vgpu_region_slot_dead(struct vgpu_region_map *s, int i);

/* Returns our slot's bytes to the counters and frees it (normal process exit). */
void vgpu_region_release_slot(struct vgpu_region_map *s);

/*
 * Shared allocations (minor 7, include/vgpu_region.h). Exporting moves bytes
 * (at most what our slot has charged) of an allocation on rec from our slot
 * into a new shared record keyed by key, with us as its only holder, in one
 * recoverable change. Returns the record's index, or -1 (no slot, no free
 * record, the key already live on rec, or not that much charged): the charge
 * then stays in our slot. Takes the region lock (rare operation).
 */
int vgpu_region_share_export(struct vgpu_region_map *s, int rec, uint32_t kind,
                             const uint8_t key[VGPU_REGION_SHARED_KEY_LEN], uint64_t bytes);

/*
 * Adds our slot as a holder of the live record of kind and key on rec,
 * without any charge. Returns its index (and its bytes in *bytes), or -1
 * when there is none (an import from another claim, or a record gone).
 */
int vgpu_region_share_hold(struct vgpu_region_map *s, int rec, uint32_t kind,
                           const uint8_t key[VGPU_REGION_SHARED_KEY_LEN], uint64_t *bytes);

/* Bytes of the live record of kind and key on rec, 0 when there is none (nothing held). */
uint64_t vgpu_region_share_bytes(const struct vgpu_region_map *s, int rec, uint32_t kind,
                                 const uint8_t key[VGPU_REGION_SHARED_KEY_LEN]);

/*
 * Drops our slot as a holder of record idx on rec; as the last holder, the
 * record is freed and its bytes leave the claim's counter, recoverably.
 */
void vgpu_region_share_drop(struct vgpu_region_map *s, int rec, int idx);

/* Bytes of the live shared records on rec our slot holds (tracked for the overhead rule). */
uint64_t vgpu_region_slot_shared(const struct vgpu_region_map *s, int rec);

/* Validates a header read from a region; returns NULL or a description of the problem. */
const char *vgpu_region_check_header(const struct vgpu_region_header *h);

#endif /* VGPU_SRC_REGION_H */
