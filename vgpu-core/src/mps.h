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
 * The MPS client reads its share from its environment when it initialises
 * CUDA. A container can set those variables itself, and MPS lets a client
 * lower its share below the control daemon's but never raise it; the daemon
 * holds the largest claim's share. So each claim's own, smaller value comes
 * from its read-only config and is put into the environment before the
 * driver's cuInit runs: the container's value is kept only where it is
 * lower (a client may always lower its own share), never where it is higher
 * or unreadable.
 */
#ifndef VGPU_MPS_H
#define VGPU_MPS_H

#include <stdbool.h>

#include "config.h"

/* NVIDIA's names: the client's share of the SMs and its pinned device memory. */
#define VGPU_MPS_ENV_THREADS "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"
#define VGPU_MPS_ENV_PINNED "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"

#define VGPU_MPS_VALUE_MAX 512

/* What to put into the environment. */
struct vgpu_mps_env {
    bool threads_set;                /* set VGPU_MPS_ENV_THREADS to threads */
    char threads[32];
    bool pinned_set;                 /* set VGPU_MPS_ENV_PINNED to pinned */
    char pinned[VGPU_MPS_VALUE_MAX]; /* "<index>=<MiB>M" entries, comma-separated */
    char why[VGPU_ERRMSG_MAX];       /* the container's value that was replaced, for the log */
};

/*
 * Computes the MPS variables for the n valid claim configs cfgs given the
 * container's values cur_threads and cur_pinned (NULL: unset). The share is
 * the smallest mps.activeThreadPercent of any device; the pinned limit of
 * device index k the smallest non-zero mps.pinnedMemoryLimit.<k>, in whole
 * MiB rounded down (at least 1). A container value is kept where it is
 * lower: a share that parses as a number in (0, share), a pinned entry
 * "<k>=<n>{K,M,G,T}[B]" below the config's for k (entries for indexes the
 * configs do not limit are kept); an unreadable pinned value is replaced
 * whole. Returns false when no config has mps lines: nothing is set.
 */
bool vgpu_mps_settings(const struct vgpu_claim_config *const cfgs[], int n, const char *cur_threads,
                       const char *cur_pinned, struct vgpu_mps_env *out);

/*
 * Applies vgpu_mps_settings to the process environment (setenv) and logs
 * what it set. Called once, before the driver's cuInit runs.
 */
void vgpu_mps_apply(const struct vgpu_claim_config *const cfgs[], int n);

#endif /* VGPU_MPS_H */
