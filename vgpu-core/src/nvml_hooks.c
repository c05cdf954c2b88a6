/*
 * nvml_hooks.c - NVML wrappers (memory info inside the container), the
 * context-overhead rule, which needs NVML's per-process memory, and the
 * per-process utilisation samples the compute limiter is driven by.
 */
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "acct.h"
#include "compute.h"
#include "driver.h"
#include "hooks.h"
#include "gpus.h"
#include "log.h"
#include "shm.h"

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
static void clamp(const struct vgpu_gpu *g, unsigned long long *total, unsigned long long *free_b,
                  unsigned long long *used, unsigned long long *reserved)
{
    unsigned long long t, u, r, f;

    if (g == NULL || !g->enforce || (g->limit == 0 && !g->fail_closed))
        return;
    t = g->limit != 0 && g->limit < *total ? g->limit : *total;
    u = vgpu_gpu_used(g);
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

    if (vgpu_nvml_load() != 0 || vgpu_nvml.nvmlDeviceGetMemoryInfo == NULL)
        return NVML_ERROR_FUNCTION_NOT_FOUND;
    vgpu_limits_init();
    rc = vgpu_nvml.nvmlDeviceGetMemoryInfo(device, memory);
    if (rc == NVML_SUCCESS && memory != NULL)
        clamp(gpu_of(device), &memory->total, &memory->free, &memory->used, NULL);
    return rc;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
    nvmlReturn_t rc;

    if (vgpu_nvml_load() != 0 || vgpu_nvml.nvmlDeviceGetMemoryInfo_v2 == NULL)
        return NVML_ERROR_FUNCTION_NOT_FOUND;
    vgpu_limits_init();
    /* The driver checks memory->version; we only touch a result it accepted. */
    rc = vgpu_nvml.nvmlDeviceGetMemoryInfo_v2(device, memory);
    if (rc == NVML_SUCCESS && memory != NULL)
        clamp(gpu_of(device), &memory->total, &memory->free, &memory->used, &memory->reserved);
    return rc;
}

static pthread_mutex_t nvml_init_mu = PTHREAD_MUTEX_INITIALIZER;
static int nvml_init_done; /* atomic; nvml_init_rc is final once set */
static nvmlReturn_t nvml_init_rc = NVML_ERROR_UNINITIALIZED;

/* Initialises NVML once it can be loaded; until then it is looked for again on each call. */
static nvmlReturn_t nvml_init(void)
{
    if (__atomic_load_n(&nvml_init_done, __ATOMIC_ACQUIRE))
        return nvml_init_rc;
    pthread_mutex_lock(&nvml_init_mu);
    if (!nvml_init_done && vgpu_nvml_load() == 0) {
        if (vgpu_nvml.nvmlInit_v2 != NULL)
            nvml_init_rc = vgpu_nvml.nvmlInit_v2();
        __atomic_store_n(&nvml_init_done, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&nvml_init_mu);
    return nvml_init_rc;
}

/*
 * Overhead rule: NVML's used memory for our host pid on g minus the bytes we
 * track there, floored at 0. It is charged to the claim like an allocation
 * (without a limit check: it is already in use) and published separately in
 * the slot. Unknowable (no NVML, no process entry, host pid neither in /proc
 * nor in the claim's host pid map, process-private accounting) means 0.
 */
void vgpu_overhead_refresh(struct vgpu_gpu *g)
{
    nvmlProcessInfo_t procs[64];
    unsigned int count = 64;
    nvmlDevice_t dev;
    uint32_t host_pid;
    unsigned long long used = 0;

    if (g == NULL || !g->enforce || g->shm == NULL || (host_pid = vgpu_self_host_pid(g)) == 0)
        return;
    if (nvml_init() != NVML_SUCCESS || vgpu_nvml.nvmlDeviceGetHandleByUUID == NULL ||
        vgpu_nvml.nvmlDeviceGetComputeRunningProcesses_v3 == NULL ||
        vgpu_nvml.nvmlDeviceGetHandleByUUID(g->uuid, &dev) != NVML_SUCCESS ||
        vgpu_nvml.nvmlDeviceGetComputeRunningProcesses_v3(dev, &count, procs) != NVML_SUCCESS)
        return;
    for (unsigned int i = 0; i < count && i < 64; i++) {
        if (procs[i].pid == host_pid)
            used = procs[i].usedGpuMemory;
    }
    vgpu_lock();
    {
        /* What we track on every claim of the GPU; the overhead goes to the first. */
        uint64_t tracked = 0;

        for (int p = 0; p < g->nparts; p++)
            tracked += vgpu_shm_slot_used(g->parts[p].shm, g->parts[p].rec);
        vgpu_shm_slot_set_overhead(g->shm, g->rec, used > tracked ? used - tracked : 0);
    }
    vgpu_unlock();
}

int vgpu_nvml_sm_samples(const char *uuid, struct vgpu_sm_sample *out, int max)
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
