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
 * mps.h - an MPS claim's client settings (docs/mps.md, "What the claim's
 * containers get").
 *
 * The MPS client reads its share of the SMs and its pinned-memory limit
 * from its environment when the driver initialises (cuInit). A container
 * can set those variables itself, and MPS lets a client lower its share
 * below the control daemon's but never raise it; the daemon holds the
 * largest claim's share. So each claim's own value comes from its
 * read-only config and is put into the environment before the driver's
 * cuInit runs: the container's value is kept only where it is lower (a
 * client may always lower its own share), never where it is higher, zero
 * or unreadable.
 *
 * This runs apart from the library's start (process.h): the cuInit wrapper
 * reads only the injected configs (injected.h) and sets the variables; the
 * limits, regions and limiter start where they always did, so cuInit's
 * timing and order stay the driver's.
 */
#ifndef VGPU_MPS_H
#define VGPU_MPS_H

#include <stdbool.h>

#include "config.h"

/* NVIDIA's names: the client's share of the SMs and its pinned device memory. */
#define VGPU_MPS_ENV_THREADS "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"
#define VGPU_MPS_ENV_PINNED "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"
/* The memory limit an r615+ driver holds a client to when its daemon accounts for memory (memacct). */
#define VGPU_MPS_ENV_DRIVER_MEM "NVIDIA_GPU_MEMORY_LIMITS"

#define VGPU_MPS_VALUE_MAX 512

/* What to put into the environment. */
struct vgpu_mps_env {
    bool threads_set;                /* set VGPU_MPS_ENV_THREADS to threads */
    char threads[32];
    bool pinned_set;                 /* set VGPU_MPS_ENV_PINNED to pinned */
    char pinned[VGPU_MPS_VALUE_MAX]; /* "<index>=<MiB>M" entries, comma-separated */
    bool driver_mem_set;             /* set VGPU_MPS_ENV_DRIVER_MEM to driver_mem */
    char driver_mem[VGPU_MPS_VALUE_MAX]; /* "<index>=<MiB>" entries, comma-separated */
    char why[VGPU_ERRMSG_MAX];       /* the container's values that were replaced, for the log */
};

/*
 * Computes the MPS variables for the n valid claim configs cfgs given the
 * container's values cur_threads, cur_pinned and cur_driver_mem (NULL:
 * unset). The share is the smallest mps.activeThreadPercent of any device;
 * the pinned limit of device index k the smallest non-zero
 * mps.pinnedMemoryLimit.<k>, in whole MiB rounded down (at least 1); the
 * driver's limit of k (written by the plugin only on r615+ drivers, whose
 * daemon it starts with memacct) the smallest mps.driverMemoryLimit.<k>, in
 * whole MiB rounded down. A container value is kept where it is lower: a
 * share that is a plain integer in [1, share), a pinned entry
 * "<k>=<n>{K,M,G,T}[B]" or a driver entry "<k>=<MiB>" below the config's
 * for k (entries for indexes the configs do not limit are kept); every
 * value is written back in the form above, so the driver reads exactly
 * what was compared. A higher, zero or unreadable share is replaced, an
 * unreadable pinned or driver value replaced whole. Without any
 * mps.driverMemoryLimit line the container's NVIDIA_GPU_MEMORY_LIMITS is
 * left as it is (a driver before r615 does not read it). Returns false
 * when no config has mps lines: nothing is set.
 */
bool vgpu_mps_settings(const struct vgpu_claim_config *const cfgs[], int n, const char *cur_threads,
                       const char *cur_pinned, const char *cur_driver_mem, struct vgpu_mps_env *out);

/*
 * Once per process, before the driver's cuInit: reads the configs the
 * plugin injected (the same checks as the library's start, silently: the
 * start logs what is wrong with them) and applies vgpu_mps_settings to the
 * process environment (setenv, only where a value changes), logging what it
 * replaced. An invalid config contributes nothing here; the library's start
 * fails its GPUs closed (README "Config rule"). Concurrent callers wait
 * for the first; setenv runs under that once, before the driver has read
 * the environment.
 */
void vgpu_mps_apply_env(void);

#endif /* VGPU_MPS_H */
