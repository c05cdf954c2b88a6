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
 * gpus.h - what libvgpu.so enforces on each GPU of this process.
 *
 * Limits come only from the claim configs the kubelet plugin injected
 * (injected.h), keyed by GPU UUID; the HAMi-style env vars may only lower
 * them. Without any injected config the library runs standalone on the env
 * vars alone.
 */
#ifndef VGPU_GPUS_H
#define VGPU_GPUS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "burst.h"
#include "config.h"
#include "hostpids.h"
#include "limiter_math.h"
#include "procinfo.h"
#include "region.h"
#include "vgpu_cuda.h"

#define VGPU_MAX_GPUS 64
/* Claims of one container that may name the same GPU (their limits add up). */
#define VGPU_MAX_PARTS 4

/* One claim's share of a GPU: its region's device record and its own limit. */
struct vgpu_part {
    struct vgpu_region_map *shm; /* the claim's region */
    int rec;              /* device record index in shm */
    uint64_t limit;       /* bytes, 0 = unlimited: the claim's guarantee on this GPU */
    struct vgpu_burst *burst; /* the claim's burst grants; NULL: no burst (unlimited, env-capped) */
    _Atomic uint64_t cap;     /* limit + the grant last read from burst (= limit without a
                                 grant): the claim's counter never exceeds it */
};

/* Enforcement state of one physical GPU (by UUID), fixed once set up. */
struct vgpu_gpu {
    char uuid[VGPU_REGION_UUID_LEN]; /* lower case, as the driver reports it */
    bool enforce;                    /* false: pass everything through uncounted */
    bool fail_closed;                /* true: refuse every allocation */
    uint64_t limit;                  /* bytes, 0 = unlimited: the sum of the parts' limits,
                                        lowered by env */
    bool capped;                     /* env lowered limit below the sum of several parts */
    int nparts;                      /* 0: process-private accounting (standalone only) */
    struct vgpu_part parts[VGPU_MAX_PARTS]; /* in claim UID order */
    struct vgpu_region_map *shm;            /* parts[0].shm (compute limiter, overhead), or NULL */
    struct vgpu_hostpids *hostpids;  /* the claim's host pid map, NULL standalone */
    int rec;                         /* parts[0].rec */
    _Atomic uint64_t private_used;   /* counter used when nparts is 0 (vgpu_reserve.h) */
    struct vgpu_limiter_state compute;     /* SM limiter */
};

/*
 * Reads the injected configs and the env once (the first call; later calls
 * return at once). Every lookup below calls it; the process's fork and exit
 * handlers are process.h's.
 */
void vgpu_gpus_init(void);

/* True once any claim (or env var) sets an SM limit: launches must be looked at. */
extern bool vgpu_any_sm_limit;
/*
 * Some claim config enforces GPUs, with or without an SM limit: launches
 * on those without one are counted for the monitor (limiter.h).
 */
extern bool vgpu_any_claim;

/* Process exit: hands this process's slots in every region back. vgpu_lock() held. */
void vgpu_gpus_release_slots(void);

/*
 * Fork child, vgpu_lock() held: the parent's slots, its process-private
 * counts and its identity are not the child's.
 */
void vgpu_gpus_forked(void);

/*
 * Returns the state of CUDA device ordinal dev, set up and kept from the
 * first call at which the driver reports its UUID. NULL while it cannot be
 * identified (before cuInit the driver answers CUDA_ERROR_NOT_INITIALIZED)
 * or for an ordinal beyond VGPU_MAX_GPUS: nothing is cached then, the next
 * call asks the driver again, so no call made before cuInit decides a GPU's
 * limits (README "Call order"). Wrappers use vgpu_gpu_refusal instead.
 */
struct vgpu_gpu *vgpu_gpu_for_cuda(CUdevice dev);

/*
 * The call-order rule, for a wrapper about to act on CUDA device dev: sets
 * *g as vgpu_gpu_for_cuda does and returns CUDA_SUCCESS, *g being NULL only
 * when the GPU is not identified and nothing limits this process (call the
 * driver, count nothing). When it is not identified and an injected config
 * or a limit env var applies, returns the error to return without calling
 * the driver: the driver's own answer to the UUID query
 * (CUDA_ERROR_NOT_INITIALIZED before cuInit, CUDA_ERROR_INVALID_DEVICE for
 * an ordinal it does not have), or CUDA_ERROR_OUT_OF_MEMORY for a GPU the
 * library cannot track. A GPU that a limit may apply to never runs
 * unlimited for want of its UUID.
 */
CUresult vgpu_gpu_refusal(CUdevice dev, struct vgpu_gpu **g);

/* Returns the state of the GPU with uuid (env_index names its CUDA_DEVICE_MEMORY_LIMIT_<i>). */
struct vgpu_gpu *vgpu_gpu_for_uuid(const char *uuid, int env_index);

/*
 * Copies pointers to the GPUs set up so far into out (at most max) and
 * returns their number. Entries never move or disappear. The _locked
 * variant is for callers that hold vgpu_lock() already.
 */
int vgpu_gpus_snapshot(struct vgpu_gpu **out, int max);
int vgpu_gpus_snapshot_locked(struct vgpu_gpu **out, int max);

/* Identity of this process (refreshed in a fork child). */
const struct vgpu_procinfo *vgpu_self(void);

/*
 * Returns this process's host pid, 0 while unknown. Inside a pid namespace
 * it is looked up in g's claim host pid map (re-read at most every
 * VGPU_HOSTPIDS_RECHECK_NS); once found it is kept and published in our
 * slot of every region we use. Takes vgpu_lock(): call it without.
 */
uint32_t vgpu_self_host_pid(struct vgpu_gpu *g);

/*
 * The process accounting mutex: it serialises the tracking maps and the
 * single-writer seqlock of our slots.
 */
void vgpu_lock(void);
void vgpu_unlock(void);

#endif /* VGPU_GPUS_H */
