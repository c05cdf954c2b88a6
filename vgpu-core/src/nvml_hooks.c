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
 * nvml_hooks.c - the NVML wrappers: memory info inside the container shows
 * the claim, process and utilisation queries list the claim's processes.
 * The library's own NVML queries are nvml_query.c's.
 */
#include <stddef.h>
#include <string.h>
#include <time.h>

#include "acct.h"
#include "driver.h"
#include "gpus.h"
#include "hostpids.h"
#include "log.h"
#include "process.h"
#include "region.h"

/* Maps an NVML device to our state by its UUID (NVML indexes are not CUDA ordinals). */
static struct vgpu_gpu *gpu_of(nvmlDevice_t device)
{
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    unsigned int index;
    int env_index = -1;

    if (vgpu_nvml.nvmlDeviceGetUUID == NULL ||
        vgpu_nvml.nvmlDeviceGetUUID(device, uuid, sizeof(uuid)) != NVML_SUCCESS ||
        !vgpu_uuid_valid(uuid))
        return NULL;
    if (vgpu_nvml.nvmlDeviceGetIndex != NULL &&
        vgpu_nvml.nvmlDeviceGetIndex(device, &index) == NVML_SUCCESS)
        env_index = (int)index;
    return vgpu_gpu_for_uuid(uuid, env_index);
}

/*
 * The limit replaces the GPU's size: total = min(limit, physical), used =
 * what the claim uses (clamped to total), reserved kept within what is left,
 * free = the rest, never more than the driver's free.
 */
static void clamp(struct vgpu_gpu *g, unsigned long long *total, unsigned long long *free_b,
                  unsigned long long *used, unsigned long long *reserved)
{
    unsigned long long t, u, r, f, l;

    if (g == NULL || !g->enforce || (g->limit == 0 && !g->fail_closed))
        return;
    l = vgpu_acct_gpu_limit_now(g); /* guarantee + current burst grant */
    t = l != 0 && l < *total ? l : *total;
    u = vgpu_acct_gpu_used(g);
    u = u < t ? u : t;
    r = reserved != NULL && *reserved < t - u ? *reserved : 0;
    f = t - u - r;
    f = f < *free_b ? f : *free_b;
    /* Fail closed: the same total as cuMemGetInfo, nothing free; the rest shows as used. */
    if (g->fail_closed) {
        f = 0;
        u = t - r;
    }
    *total = t;
    *free_b = f;
    *used = reserved != NULL ? u : t - f;
    if (reserved != NULL)
        *reserved = r;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
    nvmlReturn_t rc;

    if (vgpu_driver_nvml_load() != 0 || vgpu_nvml.nvmlDeviceGetMemoryInfo == NULL)
        return NVML_ERROR_FUNCTION_NOT_FOUND;
    vgpu_process_init();
    rc = vgpu_nvml.nvmlDeviceGetMemoryInfo(device, memory);
    if (rc == NVML_SUCCESS && memory != NULL)
        clamp(gpu_of(device), &memory->total, &memory->free, &memory->used, NULL);
    return rc;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
    nvmlReturn_t rc;

    if (vgpu_driver_nvml_load() != 0 || vgpu_nvml.nvmlDeviceGetMemoryInfo_v2 == NULL)
        return NVML_ERROR_FUNCTION_NOT_FOUND;
    vgpu_process_init();
    /* The driver checks memory->version; we only touch a result it accepted. */
    rc = vgpu_nvml.nvmlDeviceGetMemoryInfo_v2(device, memory);
    if (rc == NVML_SUCCESS && memory != NULL)
        clamp(gpu_of(device), &memory->total, &memory->free, &memory->used, &memory->reserved);
    return rc;
}

/* ---------------------------------------------------------------------- */
/* Process and utilisation queries: the claim's processes only            */
/* ---------------------------------------------------------------------- */

/* Bound on processes one query handles; NVML lists at most a few dozen per GPU. */
#define CLAIM_PROCS_MAX 256

/* A process of the claim on one GPU: host pid (as NVML names it) and its bytes as the claim counts them. */
struct claim_proc {
    uint32_t pid;
    uint64_t bytes;
};

/*
 * Lists the claim's processes on g. Returns their number, or -1 when g is
 * not a GPU of an enforced claim (the query then passes through: there is
 * no claim whose view it could narrow). A process whose host pid nobody can
 * tell is left out: NVML could not name it either.
 */
static int claim_procs(struct vgpu_gpu *g, struct claim_proc *out, int max)
{
    int n = 0;

    if (g == NULL || !g->enforce)
        return -1;
    if (g->shm == NULL) {
        /* Process-private accounting: this process is all the claim we know. */
        uint32_t self = vgpu_self_host_pid(g);

        if (self != 0 && max > 0)
            out[n++] = (struct claim_proc){.pid = self, .bytes = vgpu_acct_gpu_used(g)};
        return n;
    }
    vgpu_self_host_pid(g);
    for (int s = 0; s < VGPU_REGION_MAX_SLOTS && n < max; s++) {
        const struct vgpu_region_slot *sl = &g->shm->r->slots[s];
        const struct vgpu_region_slot_device *sd = &sl->devices[g->rec];
        uint32_t host_pid;

        if (__atomic_load_n(&sl->state, __ATOMIC_ACQUIRE) != VGPU_SLOT_ACTIVE)
            continue;
        host_pid = __atomic_load_n(&sl->host_pid, __ATOMIC_RELAXED);
        if (host_pid == 0 && g->hostpids != NULL)
            host_pid = vgpu_hostpids_lookup(g->hostpids,
                                            __atomic_load_n(&sl->pidns, __ATOMIC_RELAXED),
                                            __atomic_load_n(&sl->pid, __ATOMIC_RELAXED),
                                            __atomic_load_n(&sl->start_time, __ATOMIC_RELAXED));
        if (host_pid == 0)
            continue;
        /* Display only: a torn pair of counters is harmless, so no seqlock retry. */
        out[n++] = (struct claim_proc){
            .pid = host_pid,
            .bytes = __atomic_load_n(&sd->used_bytes, __ATOMIC_RELAXED) +
                     __atomic_load_n(&sd->overhead_bytes, __ATOMIC_RELAXED)};
    }
    return n;
}

static const struct claim_proc *find_proc(const struct claim_proc *procs, int n, uint32_t pid)
{
    for (int i = 0; i < n; i++) {
        if (procs[i].pid == pid)
            return &procs[i];
    }
    return NULL;
}

typedef nvmlReturn_t (*process_query_fn)(nvmlDevice_t device, unsigned int *count, void *infos);

/*
 * Shared body of the running-process queries: asks the driver for every
 * process on the GPU (entries of elem bytes; pid at offset 0 and
 * usedGpuMemory at offset 8 in every version), keeps the claim's, with the
 * bytes the claim counts for them, and answers with NVML's
 * INSUFFICIENT_SIZE protocol.
 */
static nvmlReturn_t claim_process_query(void *real, size_t elem, nvmlDevice_t device,
                                        unsigned int *infoCount, void *infos)
{
    process_query_fn fn = (process_query_fn)real;
    struct claim_proc mine[CLAIM_PROCS_MAX];
    unsigned char all[CLAIM_PROCS_MAX * sizeof(nvmlProcessInfo_t)];
    unsigned int n = CLAIM_PROCS_MAX, kept = 0;
    nvmlReturn_t rc;
    int nmine;

    if (fn == NULL)
        return NVML_ERROR_FUNCTION_NOT_FOUND;
    /* Arguments the query cannot take: the driver's answer, in its order of checks. */
    if (infoCount == NULL || (*infoCount > 0 && infos == NULL))
        return fn(device, infoCount, infos);
    vgpu_process_init();
    nmine = claim_procs(gpu_of(device), mine, CLAIM_PROCS_MAX);
    if (nmine < 0)
        return fn(device, infoCount, infos);
    rc = fn(device, &n, all);
    if (rc != NVML_SUCCESS)
        return rc;
    for (unsigned int i = 0; i < n; i++) {
        unsigned char *e = all + (size_t)i * elem;
        unsigned long long bytes;
        const struct claim_proc *p;
        unsigned int pid;

        memcpy(&pid, e, sizeof(pid));
        if ((p = find_proc(mine, nmine, pid)) == NULL)
            continue;
        if (kept < *infoCount) {
            bytes = p->bytes;
            memcpy(e + offsetof(nvmlProcessInfo_t, usedGpuMemory), &bytes, sizeof(bytes));
            memcpy((unsigned char *)infos + (size_t)kept * elem, e, elem);
        }
        kept++;
    }
    if (kept > *infoCount) {
        *infoCount = kept;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    *infoCount = kept;
    return NVML_SUCCESS;
}

#define PROCESS_QUERY(name, type)                                                                  \
    nvmlReturn_t name(nvmlDevice_t device, unsigned int *infoCount, type *infos)                   \
    {                                                                                              \
        if (vgpu_driver_nvml_load() != 0)                                                          \
            return NVML_ERROR_FUNCTION_NOT_FOUND;                                                  \
        return claim_process_query((void *)vgpu_nvml.name, sizeof(type), device, infoCount,        \
                                   infos);                                                         \
    }

PROCESS_QUERY(nvmlDeviceGetComputeRunningProcesses, nvmlProcessInfo_v1_t)
PROCESS_QUERY(nvmlDeviceGetComputeRunningProcesses_v2, nvmlProcessInfo_t)
PROCESS_QUERY(nvmlDeviceGetComputeRunningProcesses_v3, nvmlProcessInfo_t)
PROCESS_QUERY(nvmlDeviceGetGraphicsRunningProcesses, nvmlProcessInfo_v1_t)
PROCESS_QUERY(nvmlDeviceGetGraphicsRunningProcesses_v2, nvmlProcessInfo_t)
PROCESS_QUERY(nvmlDeviceGetGraphicsRunningProcesses_v3, nvmlProcessInfo_t)

/*
 * Samples of the claim's processes only (NOT_FOUND when none of them ran,
 * as the driver answers for an idle GPU). nmine < 0 keeps every sample.
 * Returns the driver's error, else NVML_SUCCESS with *count samples in out.
 */
static nvmlReturn_t claim_samples(nvmlDevice_t device, unsigned long long lastSeen,
                                  nvmlProcessUtilizationSample_t *out, unsigned int *count,
                                  int *nmine)
{
    struct claim_proc mine[CLAIM_PROCS_MAX];
    unsigned int n = CLAIM_PROCS_MAX, kept = 0;
    nvmlReturn_t rc;

    vgpu_process_init();
    *nmine = claim_procs(gpu_of(device), mine, CLAIM_PROCS_MAX);
    rc = vgpu_nvml.nvmlDeviceGetProcessUtilization(device, out, &n, lastSeen);
    if (rc != NVML_SUCCESS)
        return rc;
    for (unsigned int i = 0; i < n && i < CLAIM_PROCS_MAX; i++) {
        if (*nmine < 0 || find_proc(mine, *nmine, out[i].pid) != NULL)
            out[kept++] = out[i];
    }
    *count = kept;
    return kept == 0 ? NVML_ERROR_NOT_FOUND : NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device,
                                             nvmlProcessUtilizationSample_t *utilization,
                                             unsigned int *processSamplesCount,
                                             unsigned long long lastSeenTimeStamp)
{
    nvmlProcessUtilizationSample_t buf[CLAIM_PROCS_MAX];
    unsigned int n = 0;
    nvmlReturn_t rc;
    int nmine;

    if (vgpu_driver_nvml_load() != 0 || vgpu_nvml.nvmlDeviceGetProcessUtilization == NULL)
        return NVML_ERROR_FUNCTION_NOT_FOUND;
    /* No count to answer in: the driver's answer (uninitialised, bad device, bad argument). */
    if (processSamplesCount == NULL)
        return vgpu_nvml.nvmlDeviceGetProcessUtilization(device, utilization, processSamplesCount,
                                                         lastSeenTimeStamp);
    rc = claim_samples(device, lastSeenTimeStamp, buf, &n, &nmine);
    if (rc != NVML_SUCCESS)
        return rc;
    if (utilization == NULL || *processSamplesCount < n) {
        *processSamplesCount = n;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    memcpy(utilization, buf, n * sizeof(buf[0]));
    *processSamplesCount = n;
    return NVML_SUCCESS;
}

/*
 * Under a claim the GPU's busy share is the claim's: the sum of its
 * processes' samples of the last second (capped at 100), 0 when they were
 * idle, whatever other tenants ran.
 */
nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *utilization)
{
    nvmlProcessUtilizationSample_t buf[CLAIM_PROCS_MAX];
    unsigned int n = 0, sm = 0, mem = 0;
    struct timespec ts;
    nvmlReturn_t rc;
    int nmine;

    if (vgpu_driver_nvml_load() != 0 || vgpu_nvml.nvmlDeviceGetUtilizationRates == NULL)
        return NVML_ERROR_FUNCTION_NOT_FOUND;
    rc = vgpu_nvml.nvmlDeviceGetUtilizationRates(device, utilization);
    if (rc != NVML_SUCCESS || utilization == NULL || vgpu_nvml.nvmlDeviceGetProcessUtilization == NULL)
        return rc;
    clock_gettime(CLOCK_REALTIME, &ts);
    rc = claim_samples(device,
                       (unsigned long long)ts.tv_sec * 1000000ull - 1000000ull +
                           (unsigned long long)ts.tv_nsec / 1000,
                       buf, &n, &nmine);
    if (nmine < 0)
        return NVML_SUCCESS;
    if (rc != NVML_SUCCESS && rc != NVML_ERROR_NOT_FOUND)
        return rc;
    for (unsigned int i = 0; i < n; i++) {
        sm += buf[i].smUtil;
        mem += buf[i].memUtil;
    }
    utilization->gpu = sm > 100 ? 100 : sm;
    utilization->memory = mem > 100 ? 100 : mem;
    return NVML_SUCCESS;
}
