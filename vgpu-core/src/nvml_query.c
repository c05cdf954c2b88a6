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

/* nvml_query.c - see nvml_query.h. */
#include "nvml_query.h"

#include <pthread.h>
#include <time.h>

#include "driver.h"
#include "limiter_math.h"
#include "region.h"

static pthread_mutex_t nvml_init_mu = PTHREAD_MUTEX_INITIALIZER;
static int nvml_init_done; /* atomic; nvml_init_rc is final once set */
static nvmlReturn_t nvml_init_rc = NVML_ERROR_UNINITIALIZED;

/* Initialises NVML once it can be loaded; until then it is looked for again on each call. */
static nvmlReturn_t nvml_init(void)
{
    if (__atomic_load_n(&nvml_init_done, __ATOMIC_ACQUIRE))
        return nvml_init_rc;
    pthread_mutex_lock(&nvml_init_mu);
    /* The library's own use of NVML: it keeps the copy loaded (vgpu_driver_nvml_hold). */
    if (!nvml_init_done && vgpu_driver_nvml_hold() == 0) {
        if (vgpu_nvml.nvmlInit_v2 != NULL)
            nvml_init_rc = vgpu_nvml.nvmlInit_v2();
        __atomic_store_n(&nvml_init_done, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&nvml_init_mu);
    return nvml_init_rc;
}

uint64_t vgpu_nvml_query_overhead(struct vgpu_gpu *g)
{
    nvmlProcessInfo_t procs[64];
    unsigned int count = 64;
    nvmlDevice_t dev;
    uint32_t host_pid;
    unsigned long long used = 0;
    uint64_t overhead;

    if (g == NULL || !g->enforce || g->shm == NULL || (host_pid = vgpu_self_host_pid(g)) == 0)
        return 0;
    if (nvml_init() != NVML_SUCCESS || vgpu_nvml.nvmlDeviceGetHandleByUUID == NULL ||
        vgpu_nvml.nvmlDeviceGetComputeRunningProcesses_v3 == NULL ||
        vgpu_nvml.nvmlDeviceGetHandleByUUID(g->uuid, &dev) != NVML_SUCCESS ||
        vgpu_nvml.nvmlDeviceGetComputeRunningProcesses_v3(dev, &count, procs) != NVML_SUCCESS)
        return 0;
    for (unsigned int i = 0; i < count && i < 64; i++) {
        if (procs[i].pid == host_pid)
            used = procs[i].usedGpuMemory;
    }
    vgpu_lock();
    {
        /* What we track on every claim of the GPU; the overhead goes to the first. */
        uint64_t tracked = 0;

        for (int p = 0; p < g->nparts; p++)
            tracked += vgpu_region_slot_used(g->parts[p].shm, g->parts[p].rec) +
                       vgpu_region_slot_shared(g->parts[p].shm, g->parts[p].rec);
        overhead = used > tracked ? used - tracked : 0;
        vgpu_region_slot_set_overhead(g->shm, g->rec, overhead);
    }
    vgpu_unlock();
    return overhead;
}

int vgpu_nvml_query_sm_samples(const char *uuid, struct vgpu_sm_sample *out, int max)
{
    nvmlProcessUtilizationSample_t buf[256], *s = buf;
    unsigned long long newest[256] = {0};
    unsigned int count = 256;
    struct timespec ts, mono;
    unsigned long long since, real_us;
    nvmlDevice_t dev;
    nvmlReturn_t rc;
    int n = 0;

    if (nvml_init() != NVML_SUCCESS || vgpu_nvml.nvmlDeviceGetHandleByUUID == NULL ||
        vgpu_nvml.nvmlDeviceGetProcessUtilization == NULL ||
        vgpu_nvml.nvmlDeviceGetHandleByUUID(uuid, &dev) != NVML_SUCCESS)
        return -1;
    /* Samples are stamped in microseconds of CLOCK_REALTIME; older ones describe the past. */
    clock_gettime(CLOCK_REALTIME, &ts);
    clock_gettime(CLOCK_MONOTONIC, &mono);
    real_us = (unsigned long long)ts.tv_sec * 1000000ull + (unsigned long long)ts.tv_nsec / 1000;
    since = real_us - VGPU_CTL_WINDOW_NS / 1000;
    rc = vgpu_nvml.nvmlDeviceGetProcessUtilization(dev, s, &count, since);
    if (rc == NVML_ERROR_NOT_FOUND)
        return 0;
    if (rc != NVML_SUCCESS)
        return -1;
    /* The driver may return several samples per process: keep the newest of each. */
    for (unsigned int i = 0; i < count && i < 256; i++) {
        int j;

        for (j = 0; j < n && out[j].pid != s[i].pid; j++) {
        }
        if (j == n) {
            if (n == max)
                continue;
            n++;
        } else if (s[i].timeStamp < newest[j]) {
            continue;
        }
        newest[j] = s[i].timeStamp;
        /* The stamp, moved to CLOCK_MONOTONIC (a stamp from the future counts as now). */
        uint64_t age_ns = s[i].timeStamp < real_us ? (real_us - s[i].timeStamp) * 1000ull : 0;
        uint64_t mono_ns = (uint64_t)mono.tv_sec * 1000000000ull + (uint64_t)mono.tv_nsec;
        out[j] = (struct vgpu_sm_sample){.pid = s[i].pid,
                                         .sm_util = s[i].smUtil > 100 ? 100 : s[i].smUtil,
                                         .window_end_ns = age_ns < mono_ns ? mono_ns - age_ns : 0};
    }
    return n;
}

int vgpu_nvml_query_processes(const char *uuid, uint32_t *out, int max)
{
    nvmlProcessInfo_t procs[256];
    unsigned int count = 256;
    nvmlDevice_t dev;
    int n = 0;

    if (nvml_init() != NVML_SUCCESS || vgpu_nvml.nvmlDeviceGetHandleByUUID == NULL ||
        vgpu_nvml.nvmlDeviceGetComputeRunningProcesses_v3 == NULL ||
        vgpu_nvml.nvmlDeviceGetHandleByUUID(uuid, &dev) != NVML_SUCCESS ||
        vgpu_nvml.nvmlDeviceGetComputeRunningProcesses_v3(dev, &count, procs) != NVML_SUCCESS)
        return -1;
    for (unsigned int i = 0; i < count && i < 256 && n < max; i++)
        out[n++] = procs[i].pid;
    return n;
}
