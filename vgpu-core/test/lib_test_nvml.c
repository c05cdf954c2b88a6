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
 * lib_test_nvml.c - lib_test scenarios: what NVML and CUDA report, host pids, fork, idle processes.
 */
#include <dirent.h>
#include <poll.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <time.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "check.h"
#include "lib_test.h"
#include "claimns.h"
#include "vgpu_cuda.h"
#include "vgpu_nvml.h"
#include "vgpu_region.h"

/* The expected limit of GPU 0 comes in VGPU_TEST_EXPECT (bytes, 0 = physical). */
void sc_expect_total(void)
{
    uint64_t want = strtoull(getenv("VGPU_TEST_EXPECT"), NULL, 10);
    CUdeviceptr p;

    ctx_on(0);
    CHECK_EQ_U64(mem_total(), want ? want : PHYS);
    if (want != 0) {
        CHECK(cuMemAlloc_v2(&p, want + 1) == CUDA_ERROR_OUT_OF_MEMORY);
        CHECK(cuMemAlloc_v2(&p, want) == CUDA_SUCCESS);
    } else {
        CHECK(cuMemAlloc_v2(&p, 2 * GiB) == CUDA_SUCCESS);
    }
}

/* NVML inside the container shows the claim's limit and use. */
void sc_nvml(void)
{
    nvmlDevice_t dev;
    nvmlMemory_t m1;
    nvmlMemory_v2_t m2 = {.version = nvmlMemory_v2};
    CUdeviceptr p;

    ctx_on(0);
    CHECK(cuMemAlloc_v2(&p, 256 * MiB) == CUDA_SUCCESS);
    CHECK(nvmlInit_v2() == NVML_SUCCESS);
    CHECK(nvmlDeviceGetHandleByUUID(getenv("VGPU_TEST_UUID0"), &dev) == NVML_SUCCESS);
    CHECK(nvmlDeviceGetMemoryInfo(dev, &m1) == NVML_SUCCESS);
    CHECK_EQ_U64(m1.total, GiB);
    CHECK_EQ_U64(m1.free + m1.used, GiB);
    CHECK(m1.used >= 256 * MiB);
    CHECK(nvmlDeviceGetMemoryInfo_v2(dev, &m2) == NVML_SUCCESS);
    CHECK_EQ_U64(m2.total, GiB);
    CHECK_EQ_U64(m2.used, used0());
    CHECK_EQ_U64(m2.free + m2.used + m2.reserved, GiB);
    m2.version = 1;
    CHECK(nvmlDeviceGetMemoryInfo_v2(dev, &m2) == NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
}

/* Context overhead from NVML (fake: VGPU_FAKE_CONTEXT_MEMORY) is charged separately. */
void sc_overhead(void)
{
    CUdeviceptr p;

    ctx_on(0);
    /* The context's 64 MiB is charged when it is made. */
    CHECK_EQ_U64(used0(), 64 * MiB);
    CHECK(cuMemAlloc_v2(&p, 100 * MiB) == CUDA_SUCCESS);
    CHECK_EQ_U64(used0(), 164 * MiB);
    /* cuMemGetInfo refreshes it too. */
    CHECK_EQ_U64(mem_free(), GiB - 164 * MiB);
    CHECK_EQ_U64(used0(), 164 * MiB);
    CHECK(cuMemAlloc_v2(&p, 900 * MiB) == CUDA_ERROR_OUT_OF_MEMORY);
}

/* Device record 0 of the claim's region (read-only, as the monitor does). */
static bool region_device0(struct vgpu_region_device *out, uint32_t *slot_host_pid)
{
    struct vgpu_region r;
    int fd = open(claim_region(), O_RDONLY);
    bool ok = fd >= 0 && pread(fd, &r, sizeof(r), 0) == (ssize_t)sizeof(r);

    if (fd >= 0)
        close(fd);
    if (!ok)
        return false;
    *out = r.devices[0];
    *slot_host_pid = 0;
    for (int i = 0; i < VGPU_REGION_MAX_SLOTS; i++) {
        if (r.slots[i].state == VGPU_SLOT_ACTIVE && r.slots[i].pid == (uint32_t)getpid())
            *slot_host_pid = r.slots[i].host_pid;
    }
    return true;
}

/* Launches 10 ms kernels (two in flight, then sync) for ms milliseconds. */
static void busy_for(CUfunction f, long ms)
{
    struct timespec t0, t;

    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        CHECK(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL) == CUDA_SUCCESS);
        CHECK(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL) == CUDA_SUCCESS);
        CHECK(cuStreamSynchronize(NULL) == CUDA_SUCCESS);
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < ms);
}

/*
 * Run as pid 1 of a new pid namespace with its own /proc (a container):
 * neither /proc nor NSpid tell the host pid, so the overhead rule and the
 * limiter's measurement are blind until the driver writes the claim's host
 * pid map; then both work, and the slot publishes the host pid.
 */
void sc_hostpid(void)
{
    struct vgpu_region_device d;
    uint32_t host_pid = 0;
    CUdeviceptr p;
    CUmodule mod;
    CUfunction f;
    char line[64];
    bool learnt = false;

    ctx_on(0);
    CHECK(cuModuleLoadData(&mod, "lib_test") == CUDA_SUCCESS);
    CHECK(cuModuleGetFunction(&f, mod, "busy_10000us") == CUDA_SUCCESS);
    CHECK(cuMemAlloc_v2(&p, 100 * MiB) == CUDA_SUCCESS);
    busy_for(f, 1200);
    /* Blind: no overhead charged, no share measured. */
    CHECK_EQ_U64(mem_free(), GiB - 100 * MiB);
    CHECK(region_device0(&d, &host_pid));
    CHECK_EQ_U64(d.sm_util_percent, 0);
    CHECK_EQ_U64(host_pid, 0);
    printf("ready\n");
    fflush(stdout);
    read_line(0, line, sizeof(line));
    CHECK(strcmp(line, "go") == 0);
    /* The map is re-read within a second; the refiller measures within its window. */
    for (int i = 0; i < 40 && !learnt; i++) {
        busy_for(f, 100);
        learnt = mem_free() == GiB - 164 * MiB && region_device0(&d, &host_pid) &&
                 d.sm_util_percent > 0 && host_pid != 0;
    }
    CHECK(learnt);
    CHECK_EQ_U64(used0(), 164 * MiB);
    printf("host %u\n", host_pid);
    fflush(stdout);
}


/*
 * A claim's GPU without an SM limit (no limit, or compute_policy=disabled)
 * is limited by nothing but watched all the same: every launch is counted
 * in our slot, and within seconds NVML's utilisation of our busy kernels
 * shows in our slot and, summed over the claim's processes, in the device
 * record, for the monitor.
 */
void sc_unlimited_counted(void)
{
    struct vgpu_region r;
    uint64_t launched = 0, counted = 0;
    uint32_t mine = 0, claim = 0;
    CUmodule mod;
    CUfunction f;
    int fd;

    ctx_on(0);
    CHECK(cuModuleLoadData(&mod, "lib_test") == CUDA_SUCCESS);
    CHECK(cuModuleGetFunction(&f, mod, "busy_10000us") == CUDA_SUCCESS);
    for (int i = 0; i < 100 && (counted != launched || mine == 0 || claim == 0); i++) {
        for (int k = 0; k < 10; k++) {
            CHECK(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL) == CUDA_SUCCESS);
            CHECK(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL) == CUDA_SUCCESS);
            CHECK(cuStreamSynchronize(NULL) == CUDA_SUCCESS);
            launched += 2;
        }
        usleep(20000); /* the helper publishes every 5 ms */
        fd = open(claim_region(), O_RDONLY);
        CHECK(fd >= 0 && pread(fd, &r, sizeof(r), 0) == (ssize_t)sizeof(r));
        if (fd >= 0)
            close(fd);
        for (int s = 0; s < VGPU_REGION_MAX_SLOTS; s++) {
            if (r.slots[s].state == VGPU_SLOT_ACTIVE && r.slots[s].pid == (uint32_t)getpid()) {
                counted = r.slots[s].devices[0].kernel_launches;
                mine = r.slots[s].devices[0].sm_util_percent;
            }
        }
        claim = r.devices[0].sm_util_percent;
    }
    CHECK_EQ_U64(counted, launched);
    CHECK(mine > 0);
    CHECK(claim >= mine);
    CHECK_EQ_U64(r.devices[0].bucket_tokens, 0); /* never a bucket: nothing limited */
}

int sc_busyhold(const char *bytes)
{
    struct pollfd pfd = {.fd = 0, .events = POLLIN};
    CUdeviceptr p;
    CUmodule mod;
    CUfunction f;

    ctx_on(0);
    if (cuMemAlloc_v2(&p, strtoull(bytes, NULL, 10)) != CUDA_SUCCESS ||
        cuModuleLoadData(&mod, "lib_test") != CUDA_SUCCESS ||
        cuModuleGetFunction(&f, mod, "busy_10000us") != CUDA_SUCCESS)
        return 2;
    printf("held\n");
    fflush(stdout);
    while (poll(&pfd, 1, 0) == 0)
        busy_for(f, 50);
    return check_failures != 0;
}

/*
 * Two claims on GPU 0: this process (claim a) and a busy helper of claim b
 * (pid in VGPU_TEST_OTHER_PID). NVML's process and utilisation queries show
 * only claim a's processes, with the bytes the claim counts for them.
 */
void sc_nvml_procs(void)
{
    unsigned int other = (unsigned int)strtoul(getenv("VGPU_TEST_OTHER_PID"), NULL, 10);
    nvmlProcessUtilizationSample_t samples[16];
    nvmlProcessInfo_v1_t v1[8];
    nvmlProcessInfo_t v3[8];
    nvmlUtilization_t util;
    nvmlDevice_t dev;
    unsigned int n;
    CUdeviceptr p;
    CUmodule mod;
    CUfunction f;
    bool seen = false;

    ctx_on(0);
    CHECK(cuMemAlloc_v2(&p, 200 * MiB) == CUDA_SUCCESS);
    CHECK(nvmlInit_v2() == NVML_SUCCESS);
    CHECK(nvmlDeviceGetHandleByUUID(getenv("VGPU_TEST_UUID0"), &dev) == NVML_SUCCESS);
    n = 0;
    CHECK(nvmlDeviceGetComputeRunningProcesses_v3(dev, &n, NULL) == NVML_ERROR_INSUFFICIENT_SIZE);
    CHECK_EQ_U64(n, 1);
    n = 8;
    CHECK(nvmlDeviceGetComputeRunningProcesses_v3(dev, &n, v3) == NVML_SUCCESS);
    CHECK_EQ_U64(n, 1);
    CHECK_EQ_U64(v3[0].pid, (unsigned int)getpid());
    CHECK_EQ_U64(v3[0].usedGpuMemory, 200 * MiB);
    n = 8;
    CHECK(nvmlDeviceGetComputeRunningProcesses_v2(dev, &n, v3) == NVML_SUCCESS);
    CHECK_EQ_U64(n, 1);
    CHECK_EQ_U64(v3[0].pid, (unsigned int)getpid());
    n = 8;
    CHECK(nvmlDeviceGetComputeRunningProcesses(dev, &n, v1) == NVML_SUCCESS);
    CHECK_EQ_U64(n, 1);
    CHECK_EQ_U64(v1[0].pid, (unsigned int)getpid());
    CHECK_EQ_U64(v1[0].usedGpuMemory, 200 * MiB);
    n = 8;
    CHECK(nvmlDeviceGetGraphicsRunningProcesses_v3(dev, &n, v3) == NVML_SUCCESS);
    CHECK_EQ_U64(n, 0);
    n = 8;
    CHECK(nvmlDeviceGetGraphicsRunningProcesses(dev, &n, v1) == NVML_SUCCESS);
    CHECK_EQ_U64(n, 0);
    /* Claim b keeps the GPU busy; claim a has run nothing: idle, whatever the GPU does. */
    n = 16;
    CHECK(nvmlDeviceGetProcessUtilization(dev, samples, &n, 0) == NVML_ERROR_NOT_FOUND);
    CHECK(nvmlDeviceGetUtilizationRates(dev, &util) == NVML_SUCCESS);
    CHECK_EQ_U64(util.gpu, 0);
    /* Now ours run: only our samples, and the rate is our share. */
    CHECK(cuModuleLoadData(&mod, "lib_test") == CUDA_SUCCESS);
    CHECK(cuModuleGetFunction(&f, mod, "busy_2000us") == CUDA_SUCCESS);
    busy_for(f, 300);
    n = 16;
    CHECK(nvmlDeviceGetProcessUtilization(dev, samples, &n, 0) == NVML_SUCCESS);
    for (unsigned int i = 0; i < n; i++) {
        CHECK(samples[i].pid != other);
        seen |= samples[i].pid == (unsigned int)getpid();
    }
    CHECK(seen);
    CHECK(nvmlDeviceGetUtilizationRates(dev, &util) == NVML_SUCCESS);
    CHECK(util.gpu > 0 && util.gpu <= 100);
}

/* fork: the child's exit does not release the parent's slot or memory. */
void sc_fork(void)
{
    CUdeviceptr p;
    pid_t pid;
    int st;

    ctx_on(0);
    CHECK(cuMemAlloc_v2(&p, 128 * MiB) == CUDA_SUCCESS);
    pid = fork();
    if (pid == 0)
        exit(0); /* runs exit handlers */
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CHECK_EQ_U64(used0(), 128 * MiB);
    CHECK(cuMemFree_v2(p) == CUDA_SUCCESS);
    CHECK_EQ_U64(used0(), 0);
}

/* Preloaded but no CUDA call: no thread, no file, no output (stderr checked by the driver). */
void sc_idle(void)
{
    DIR *d = opendir("/proc/self/task");
    int tasks = 0;

    while (d != NULL && readdir(d) != NULL)
        tasks++;
    if (d != NULL)
        closedir(d);
    CHECK_EQ_U64(tasks, 3); /* ".", "..", ourselves */
    CHECK(access(getenv("CUDA_DEVICE_MEMORY_SHARED_CACHE"), F_OK) != 0);
    /* A non-CUDA dlsym through the hook still works and still creates nothing. */
    CHECK(dlsym(RTLD_DEFAULT, "malloc") != NULL);
    CHECK(access(getenv("CUDA_DEVICE_MEMORY_SHARED_CACHE"), F_OK) != 0);
}

/*
 * Contexts and their limits take memory (300 MiB per context here, limit
 * 1 GiB): charged when made or raised, and a context or limit that would take
 * the claim past its limit is refused and undone (the context given back,
 * the one current before it current again; the limit set back).
 */
void sc_contexts(void)
{
    CUcontext c1 = ctx_on(0), c2 = NULL, c3 = NULL, c4 = NULL, cur = NULL;
    CUdeviceptr p = 0;
    size_t v = 0;

    CHECK_EQ_U64(used0(), 300 * MiB);
    /* A 16 KiB stack for every resident thread would take 960 MiB more: refused, set back. */
    CHECK(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 16 << 10) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(cuCtxGetLimit(&v, CU_LIMIT_STACK_SIZE) == CUDA_SUCCESS && v == 1024);
    CHECK_EQ_U64(used0(), 300 * MiB);
    /* A heap 256 MiB larger fits, and is charged at once; set back, it is returned. */
    CHECK(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, (8 + 256) * MiB) == CUDA_SUCCESS);
    CHECK_EQ_U64(used0(), 556 * MiB);
    CHECK(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 8 * MiB) == CUDA_SUCCESS);
    CHECK_EQ_U64(used0(), 300 * MiB);
    /* Hostile input: the driver's own errors, nothing charged, limits as they were. */
    CHECK(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, SIZE_MAX) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(cuCtxSetLimit((CUlimit)99, GiB) == CUDA_ERROR_UNSUPPORTED_LIMIT);
    CHECK(cuCtxGetLimit(&v, CU_LIMIT_STACK_SIZE) == CUDA_SUCCESS && v == 1024);
    CHECK(cuCtxCreate_v2(NULL, 0, 0) == CUDA_ERROR_INVALID_VALUE);
    CHECK(cuCtxCreate_v2(&c2, 0, 99) == CUDA_ERROR_INVALID_DEVICE && c2 == NULL);
    CHECK(cuDevicePrimaryCtxRetain(&c2, -1) == CUDA_ERROR_INVALID_DEVICE && c2 == NULL);
    CHECK_EQ_U64(used0(), 300 * MiB);
    CHECK(cuCtxCreate_v2(&c2, 0, 0) == CUDA_SUCCESS);
    CHECK_EQ_U64(used0(), 600 * MiB);
    CHECK(cuCtxCreate_v4(&c3, NULL, 0, 0) == CUDA_SUCCESS);
    CHECK_EQ_U64(used0(), 900 * MiB);
    CHECK(cuMemAlloc_v2(&p, 200 * MiB) == CUDA_ERROR_OUT_OF_MEMORY);
    /* A fourth would make 1200 MiB: refused, nothing kept, c3 still current. */
    CHECK(cuCtxCreate_v2(&c4, 0, 0) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(c4 == NULL);
    CHECK_EQ_U64(used0(), 900 * MiB);
    CHECK(cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == c3);
    /* Retaining the primary context again takes nothing: allowed at any charge. */
    CHECK(cuDevicePrimaryCtxRetain(&cur, 0) == CUDA_SUCCESS && cur == c1);
    CHECK_EQ_U64(used0(), 900 * MiB);
    /* A destroyed context's memory comes back at the next refresh; then one fits again. */
    CHECK(cuCtxDestroy_v2(c3) == CUDA_SUCCESS);
    CHECK(cuCtxSetCurrent(c2) == CUDA_SUCCESS);
    CHECK_EQ_U64(mem_free(), GiB - 600 * MiB);
    CHECK_EQ_U64(used0(), 600 * MiB);
    CHECK(cuCtxCreate_v2(&c4, 0, 0) == CUDA_SUCCESS);
    CHECK_EQ_U64(used0(), 900 * MiB);
    CHECK(cuCtxDestroy_v2(c4) == CUDA_SUCCESS);
    CHECK(cuCtxDestroy_v2(c2) == CUDA_SUCCESS);
}

/*
 * Green contexts (300 MiB per context here, limit 1 GiB): the device's SMs
 * split into groups, a descriptor of one, green contexts made on it; each
 * takes context memory, charged when made; the one that would take the
 * claim past its limit is refused and destroyed again; a destroyed one's
 * memory comes back. Its CUcontext, resource and stream answer as the
 * driver's.
 */
void sc_green_ctx(void)
{
    CUdevResource dev, groups[4], rest, mine;
    CUdevResourceDesc desc = NULL;
    CUgreenCtx g1 = NULL, g2 = NULL, g3 = NULL;
    CUcontext c = NULL, cur = NULL, first = ctx_on(0);
    CUstream s = NULL;
    unsigned int n = 0;

    CHECK_EQ_U64(used0(), 300 * MiB);
    CHECK(cuDeviceGetDevResource(0, &dev, CU_DEV_RESOURCE_TYPE_SM) == CUDA_SUCCESS);
    CHECK(dev.type == CU_DEV_RESOURCE_TYPE_SM && dev.sm.smCount >= 12);
    CHECK(cuDevSmResourceSplitByCount(NULL, &n, &dev, NULL, 0, 5) == CUDA_SUCCESS);
    CHECK_EQ_U64(n, dev.sm.smCount / 6); /* 5 rounded up to the granularity */
    n = 2;
    CHECK(cuDevSmResourceSplitByCount(groups, &n, &dev, &rest, 0, 5) == CUDA_SUCCESS);
    CHECK_EQ_U64(n, 2);
    CHECK_EQ_U64(groups[0].sm.smCount, 6);
    CHECK_EQ_U64(rest.sm.smCount, dev.sm.smCount - 12);
    CHECK(cuDevResourceGenerateDesc(&desc, groups, 1) == CUDA_SUCCESS);
    CHECK(cuGreenCtxCreate(&g1, desc, 0, 0) == CUDA_ERROR_INVALID_VALUE); /* the flag is required */
    CHECK_EQ_U64(used0(), 300 * MiB);
    CHECK(cuGreenCtxCreate(&g1, desc, 0, CU_GREEN_CTX_DEFAULT_STREAM) == CUDA_SUCCESS);
    CHECK_EQ_U64(used0(), 600 * MiB);
    CHECK(cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == first); /* not made current */
    CHECK(cuCtxFromGreenCtx(&c, g1) == CUDA_SUCCESS && c != NULL);
    CHECK(cuGreenCtxGetDevResource(g1, &mine, CU_DEV_RESOURCE_TYPE_SM) == CUDA_SUCCESS);
    CHECK_EQ_U64(mine.sm.smCount, 6);
    CHECK(cuGreenCtxStreamCreate(&s, g1, CU_STREAM_NON_BLOCKING, 0) == CUDA_SUCCESS);
    CHECK(cuStreamDestroy_v2(s) == CUDA_SUCCESS);
    CHECK(cuGreenCtxCreate(&g2, desc, 0, CU_GREEN_CTX_DEFAULT_STREAM) == CUDA_SUCCESS);
    CHECK_EQ_U64(used0(), 900 * MiB);
    /* A third would make 1200 MiB: refused, nothing kept. */
    CHECK(cuGreenCtxCreate(&g3, desc, 0, CU_GREEN_CTX_DEFAULT_STREAM) ==
          CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(g3 == NULL);
    CHECK_EQ_U64(used0(), 900 * MiB);
    CHECK(cuGreenCtxDestroy(g2) == CUDA_SUCCESS);
    CHECK_EQ_U64(mem_free(), GiB - 600 * MiB);
    CHECK(cuGreenCtxCreate(&g3, desc, 0, CU_GREEN_CTX_DEFAULT_STREAM) == CUDA_SUCCESS);
    CHECK(cuGreenCtxDestroy(g3) == CUDA_SUCCESS);
    CHECK(cuGreenCtxDestroy(g1) == CUDA_SUCCESS);
    CHECK_EQ_U64(mem_free(), GiB - 300 * MiB);
}
