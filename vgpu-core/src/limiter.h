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
 * limiter.h - the SM time-share limiter inside libvgpu.so.
 *
 * Every launch on a GPU under an SM limit is admitted through the claim's
 * token bucket in the shared region (limiter_math.h): one atomic operation while
 * tokens remain, a sleep otherwise. One process of the claim, elected by a
 * lease in the region, refills the bucket and runs the closed-loop controller
 * on NVML's per-process utilisation (on a MIG instance, where NVML has none,
 * on the launches each process times with CUDA events); the others take over
 * when its lease runs out. The work happens on one helper thread per process, started by
 * the first launch on a limited GPU, or on a claim's GPU without a limit, which it only
 * counts (below); never in an idle process.
 */
#ifndef VGPU_LIMITER_H
#define VGPU_LIMITER_H

#include <stdbool.h>
#include <stdint.h>

#include "limiter_math.h"
#include "vgpu_cuda.h"

/* The refiller's lease: another process takes over when it lapses. */
#define VGPU_REFILLER_LEASE_NS 500000000ull
/*
 * A lease its holder has not renewed for this long (it renews every
 * VGPU_REFILL_PERIOD_NS) is looked at: if the holder is dead (SIGKILL), the
 * next process takes over at once instead of waiting for the lease to lapse,
 * which would leave the claim without refills (its launches waiting) that long.
 */
#define VGPU_REFILLER_STALE_NS 20000000ull
/* Period of the helper thread (refill, lease, publishing counters). */
#define VGPU_REFILL_PERIOD_NS 5000000ull

struct vgpu_gpu;

/*
 * Admission of one launch into hStream (ptsz: the _ptsz variant). Returns
 * when the launch may go to the driver. Never delays or synchronizes a
 * launch into a capturing stream. Returns the launch's GPU when the launch
 * is to be timed (a timed GPU's sample is due): the caller then launches and
 * calls vgpu_limiter_launched at once; NULL otherwise.
 */
struct vgpu_gpu *vgpu_limiter_admit(CUstream hStream, bool ptsz);

/*
 * After a launch that vgpu_limiter_admit chose to time (g), with the
 * driver's answer rc: marks the launch's end in hStream with the second
 * event (nothing when rc failed). The helper thread reads the pair once it
 * completed.
 */
void vgpu_limiter_launched(struct vgpu_gpu *g, CUstream hStream, bool ptsz, CUresult rc);

/*
 * Before ctx is destroyed (NULL: a primary context is released or reset,
 * whose handle is not known): timing events of that context (NULL: of any)
 * are destroyed while it still exists, so that no handle of a destroyed
 * context is ever used.
 */
void vgpu_limiter_context_ending(CUcontext ctx);

/*
 * Counting without a limit. A claim's GPU without an SM limit (cores: 0,
 * compute policy disabled) is limited by nothing, but its launches are
 * counted and its processes' utilisation (NVML's, sampled once a second
 * by each process for itself) published in the region for the monitor.
 * When no GPU of the process has an SM limit, a launch costs one relaxed
 * load and store of vgpu_counted_launches (no device lookup); the helper
 * thread, started by the first one, publishes the count on the process's
 * first such GPU. With an SM limit anywhere in the process, admission
 * knows the launch's GPU and counts it there.
 */
extern uint64_t vgpu_counted_launches;

/* The first counted launch of the process (or since its fork): starts the helper thread. */
void vgpu_limiter_count_start(void);

/* One launch on a GPU without an SM limit, while no GPU of the process has one. */
static inline void vgpu_limiter_count(void)
{
    /* Plain load and store: a count lost to two threads at one instant is a count. */
    uint64_t n = __atomic_load_n(&vgpu_counted_launches, __ATOMIC_RELAXED);

    __atomic_store_n(&vgpu_counted_launches, n + 1, __ATOMIC_RELAXED);
    if (n == 0)
        vgpu_limiter_count_start();
}

/* Fork child: the helper thread did not survive the fork. */
void vgpu_limiter_forked(void);

/* Process exit: hands our refiller leases over at once. */
void vgpu_limiter_exit(void);


#endif /* VGPU_LIMITER_H */
