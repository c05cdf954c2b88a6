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
 * lib_test_sharing.c - lib_test scenarios: processes and claims sharing a limit, crashes, failing closed.
 */
#include <dirent.h>
#include <poll.h>
#include <pthread.h>
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

/* Two processes share the claim's 1 GiB; normal exit and SIGKILL give memory back. */
void sc_share(void)
{
    char *args[] = {self_exe, "hold", "734003200", NULL}; /* 700 MiB */
    char line[64];
    CUdeviceptr a, b;
    int to, from, st;
    pid_t pid;

    ctx_on(0);
    pid = spawn_helper(args, &to, &from);
    read_line(from, line, sizeof(line));
    CHECK(strcmp(line, "held") == 0);
    CHECK_EQ_U64(used0(), 700 * MiB);
    CHECK(cuMemAlloc_v2(&a, 400 * MiB) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(mem_free() == 324 * MiB);
    CHECK(cuMemAlloc_v2(&a, 300 * MiB) == CUDA_SUCCESS);
    close(to); /* helper exits normally */
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    close(from);
    CHECK_EQ_U64(used0(), 300 * MiB);
    CHECK(cuMemAlloc_v2(&b, 700 * MiB) == CUDA_SUCCESS);
    CHECK(cuMemFree_v2(b) == CUDA_SUCCESS);

    /* SIGKILL: no exit handler runs; the next refused allocation reclaims its slot. */
    pid = spawn_helper(args, &to, &from);
    read_line(from, line, sizeof(line));
    CHECK(strcmp(line, "held") == 0);
    CHECK_EQ_U64(used0(), 1000 * MiB);
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    CHECK(WIFSIGNALED(st));
    close(to);
    close(from);
    CHECK(cuMemAlloc_v2(&b, 700 * MiB) == CUDA_SUCCESS);
    CHECK_EQ_U64(used0(), 1000 * MiB);
}

bool region_view(const char *path, const char *uuid, struct region_view *v)
{
    static struct vgpu_region r;
    int fd = open(path, O_RDONLY), rec = -1;
    bool ok;

    memset(v, 0, sizeof(*v));
    ok = fd >= 0 && pread(fd, &r, sizeof(r), 0) == (ssize_t)sizeof(r);
    if (fd >= 0)
        close(fd);
    for (uint32_t i = 0; ok && i < r.header.device_count && i < VGPU_REGION_MAX_DEVICES; i++) {
        if (strcmp(r.devices[i].uuid, uuid) == 0)
            rec = (int)i;
    }
    if (!ok || rec < 0)
        return false;
    v->used = r.devices[rec].used_bytes;
    v->lock = r.devices[rec].charge_lock;
    v->undo = r.devices[rec].undo_slot;
    v->refused = r.devices[rec].refused_processes;
    for (int k = 0; k < VGPU_REGION_MAX_SHARED; k++) {
        if (r.shared[k].state == VGPU_SHARED_LIVE && r.shared[k].device == (uint32_t)rec) {
            v->shared_sum += r.shared[k].bytes;
            v->shared_live++;
        }
    }
    for (int i = 0; i < VGPU_REGION_MAX_SLOTS; i++) {
        if (r.slots[i].state != VGPU_SLOT_ACTIVE)
            continue;
        v->active++;
        v->charged_sum += r.slots[i].devices[rec].charged_bytes;
        v->fail_closed += (r.slots[i].flags & VGPU_SLOT_FLAG_FAIL_CLOSED) != 0;
        if (r.slots[i].pid == (uint32_t)getpid())
            v->own_charged = r.slots[i].devices[rec].charged_bytes;
    }
    return true;
}

/*
 * Allocates and frees on every counted path at random until killed: linear,
 * pitched, managed, async from the default pool (synchronized), from a
 * keeping pool (trimmed), VMM with retains, arrays and mipmapped arrays,
 * launches of a graph that allocates (graph memory, trimmed), context heap
 * limits and contexts made and destroyed. Prints "ready" once the first round
 * is done.
 */
int sc_churn(const char *seed_arg)
{
    enum { SLOTS = 6 };
    CUdeviceptr lin[SLOTS] = {0}, asy[SLOTS] = {0}, fp[SLOTS] = {0};
    CUmemGenericAllocationHandle vmm[SLOTS] = {0};
    CUarray arr[SLOTS] = {0};
    CUmipmappedArray mip[SLOTS] = {0};
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    CUmemoryPool pool;
    unsigned seed = (unsigned)strtoul(seed_arg, NULL, 10);
    size_t pitch;
    /* A graph that allocates 8 MiB and frees it: each launch maps graph memory. */
    CUDA_MEM_ALLOC_NODE_PARAMS gp = {.bytesize = 8 * MiB};
    CUgraph graph = NULL;
    CUgraphNode node;
    CUgraphExec exec = NULL;

    ctx_on(0);
    pool = keeping_pool();
    gp.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    gp.poolProps.location = (CUmemLocation){CU_MEM_LOCATION_TYPE_DEVICE, 0};
    if (cuGraphCreate(&graph, 0) != CUDA_SUCCESS ||
        cuGraphAddMemAllocNode(&node, graph, NULL, 0, &gp) != CUDA_SUCCESS ||
        cuGraphAddMemFreeNode(&node, graph, &node, 1, gp.dptr) != CUDA_SUCCESS ||
        cuGraphInstantiateWithFlags(&exec, graph, 0) != CUDA_SUCCESS)
        return 1;
    for (long round = 0;; round++) {
        int i = rand_r(&seed) % SLOTS, op = rand_r(&seed) % 9;
        size_t mib = 1 + (size_t)(rand_r(&seed) % 24);

        switch (op) {
        case 0:
            if (lin[i] != 0) {
                cuMemFree_v2(lin[i]);
                lin[i] = 0;
            } else if (rand_r(&seed) % 3 == 0) {
                if (cuMemAllocPitch_v2(&lin[i], &pitch, mib * MiB / 512, 512, 4) != CUDA_SUCCESS)
                    lin[i] = 0;
            } else if (rand_r(&seed) % 2 == 0) {
                if (cuMemAllocManaged(&lin[i], mib * MiB, CU_MEM_ATTACH_GLOBAL) != CUDA_SUCCESS)
                    lin[i] = 0;
            } else if (cuMemAlloc_v2(&lin[i], mib * MiB) != CUDA_SUCCESS) {
                lin[i] = 0;
            }
            break;
        case 1:
            if (asy[i] != 0) {
                cuMemFreeAsync(asy[i], NULL);
                asy[i] = 0;
                if (rand_r(&seed) % 4 == 0)
                    cuStreamSynchronize(NULL);
            } else if (cuMemAllocAsync(&asy[i], mib * MiB, NULL) != CUDA_SUCCESS) {
                asy[i] = 0;
            }
            break;
        case 2:
            if (fp[i] != 0) {
                cuMemFreeAsync(fp[i], NULL);
                fp[i] = 0;
            } else if (cuMemAllocFromPoolAsync(&fp[i], mib * MiB, pool, NULL) != CUDA_SUCCESS) {
                fp[i] = 0;
            }
            break;
        case 3:
            cuMemPoolTrimTo(pool, (size_t)(rand_r(&seed) % 4) * 16 * MiB);
            break;
        case 4:
            if (vmm[i] != 0) {
                cuMemRelease(vmm[i]);
                vmm[i] = 0;
            } else if (cuMemCreate(&vmm[i], mib * 2 * MiB, &prop, 0) != CUDA_SUCCESS) {
                vmm[i] = 0;
            }
            break;
        case 5:
            if (arr[i] != NULL) {
                cuArrayDestroy(arr[i]);
                arr[i] = NULL;
            } else {
                CUDA_ARRAY_DESCRIPTOR ad = {.Width = 1024, .Height = 256 * mib,
                                            .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1};
                if (cuArrayCreate_v2(&arr[i], &ad) != CUDA_SUCCESS)
                    arr[i] = NULL;
            }
            break;
        case 6:
            if (mip[i] != NULL) {
                cuMipmappedArrayDestroy(mip[i]);
                mip[i] = NULL;
            } else {
                CUDA_ARRAY3D_DESCRIPTOR a3 = {.Width = 1024, .Height = 256 * mib, .Depth = 0,
                                              .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1};
                if (cuMipmappedArrayCreate(&mip[i], &a3, 2) != CUDA_SUCCESS)
                    mip[i] = NULL;
            }
            break;
        case 7:
            if (rand_r(&seed) % 4 == 0)
                cuDeviceGraphMemTrim(0);
            else
                cuGraphLaunch(exec, NULL);
            break;
        case 8:
            /* Context memory: a heap of up to 64 MiB more, or a context made and destroyed. */
            if (rand_r(&seed) % 2 == 0) {
                cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, (8 + mib * 2) * MiB);
            } else {
                CUcontext cur = NULL, extra = NULL;

                cuCtxGetCurrent(&cur);
                if (cuCtxCreate_v2(&extra, 0, 0) == CUDA_SUCCESS)
                    cuCtxDestroy_v2(extra);
                cuCtxSetCurrent(cur);
            }
            break;
        }
        if (round == 64) {
            printf("ready\n");
            fflush(stdout);
        }
    }
    return 0;
}

/*
 * SIGKILLs a churning process at random instants, VGPU_TEST_KILLS times
 * (500 by default). After every kill the invariant must hold once the dead
 * process is reclaimed (our refused allocation reclaims it): the claim's
 * counter equals the sum of the live slots' charges, which is exactly what
 * we hold. At the end, with every process gone, a fresh one gets the limit.
 */
void sc_killstress(void)
{
    const char *kills_env = getenv("VGPU_TEST_KILLS");
    int kills = kills_env != NULL ? atoi(kills_env) : 500, in_lock = 0, bad = 0;
    unsigned seed = (unsigned)getpid();
    struct region_view v;
    CUdeviceptr held, p;

    ctx_on(0);
    CHECK(cuMemAlloc_v2(&held, 100 * MiB) == CUDA_SUCCESS);
    for (int k = 0; k < kills; k++) {
        int st = kill_helper_at_random("churn", &seed);

        CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
        /* Killed inside a counter change: left for the next locker to undo. */
        if (region_view(claim_region(), getenv("VGPU_TEST_UUID0"), &v) && (v.lock || v.undo))
            in_lock++;
        /* Refused (we hold 100 MiB): reclaims the dead process on the way. */
        CHECK(cuMemAlloc_v2(&p, GiB) == CUDA_ERROR_OUT_OF_MEMORY);
        CHECK(region_view(claim_region(), getenv("VGPU_TEST_UUID0"), &v));
        if (v.used != v.charged_sum || v.used != 100 * MiB || v.own_charged != 100 * MiB ||
            v.active != 1 || v.lock != 0 || v.undo != 0) {
            fprintf(stderr, "after kill %d: used %llu, live charges %llu, ours %llu, %d active "
                    "slot(s), lock %u, undo %u\n", k, (unsigned long long)v.used,
                    (unsigned long long)v.charged_sum, (unsigned long long)v.own_charged,
                    v.active, v.lock, v.undo);
            if (++bad == 3)
                break;
        }
    }
    CHECK_EQ_U64(bad, 0);
    printf("killstress: %d kills, %d inside a counter change\n", kills, in_lock);
    CHECK(cuMemFree_v2(held) == CUDA_SUCCESS);
    CHECK(region_view(claim_region(), getenv("VGPU_TEST_UUID0"), &v));
    CHECK_EQ_U64(v.used, 0);
    CHECK_EQ_U64(v.charged_sum, 0);
}

/* The claim's last process is killed mid-churn: a fresh process gets the whole limit. */
void sc_lastkill(void)
{
    char *churn[] = {self_exe, "churn", "7", NULL};
    char *hold[] = {self_exe, "hold", "1073741824", NULL};
    char line[64];
    struct region_view v;
    int to, from, st;
    pid_t pid;

    for (int k = 0; k < 5; k++) {
        pid = spawn_helper(churn, &to, &from);
        read_line(from, line, sizeof(line));
        CHECK(strcmp(line, "ready") == 0);
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
        close(to);
        close(from);
    }
    pid = spawn_helper(hold, &to, &from);
    read_line(from, line, sizeof(line));
    CHECK(strcmp(line, "held") == 0);
    CHECK(region_view(claim_region(), getenv("VGPU_TEST_UUID0"), &v));
    CHECK_EQ_U64(v.used, GiB);
    CHECK_EQ_U64(v.charged_sum, GiB);
    CHECK_EQ_U64(v.active, 1);
    close(to);
    waitpid(pid, &st, 0);
    close(from);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CHECK(region_view(claim_region(), getenv("VGPU_TEST_UUID0"), &v));
    CHECK_EQ_U64(v.used, 0);
    CHECK_EQ_U64(v.active, 0);
}

/* 8 processes grab 64 MiB chunks concurrently: together exactly the limit, never more. */
void sc_race(void)
{
    enum { N = 8 };
    char *args[] = {self_exe, "grab", NULL};
    int to[N], from[N], total = 0;
    pid_t pid[N];

    for (int i = 0; i < N; i++)
        pid[i] = spawn_helper(args, &to[i], &from[i]);
    for (int i = 0; i < N; i++) {
        char line[64];
        int n = -1, rc = -1;

        read_line(from[i], line, sizeof(line));
        CHECK(sscanf(line, "%d %d", &n, &rc) == 2 && rc == CUDA_ERROR_OUT_OF_MEMORY);
        total += n;
    }
    CHECK_EQ_U64(total, 16); /* 1 GiB / 64 MiB */
    CHECK_EQ_U64(used0(), GiB);
    for (int i = 0; i < N; i++) {
        int st;
        close(to[i]);
        waitpid(pid[i], &st, 0);
        close(from[i]);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    CHECK_EQ_U64(used0(), 0);
}

/* An invalid config or env value in enforced mode refuses allocations but keeps memory info working. */
void sc_fail_closed(void)
{
    CUdeviceptr p = 0;
    size_t f = 1, t = 0;

    ctx_on(0);
    CHECK(cuMemAlloc_v2(&p, 1) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(cuMemGetInfo_v2(&f, &t) == CUDA_SUCCESS);
    CHECK_EQ_U64(f, 0);
    CHECK(t > 0);
}


/* A GPU that fails closed: every allocation refused; CUDA and NVML show the same totals. */
static void check_closed(void)
{
    nvmlDevice_t dev;
    nvmlMemory_t m1;
    nvmlMemory_v2_t m2 = {.version = nvmlMemory_v2};
    CUdeviceptr p = 0;
    size_t f = 1, t = 0;

    CHECK(cuMemGetInfo_v2(&f, &t) == CUDA_SUCCESS);
    CHECK_EQ_U64(t, GiB);
    CHECK_EQ_U64(f, 0);
    CHECK(cuMemAlloc_v2(&p, 1) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(cuMemAllocAsync(&p, MiB, NULL) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(nvmlInit_v2() == NVML_SUCCESS);
    CHECK(nvmlDeviceGetHandleByUUID(getenv("VGPU_TEST_UUID0"), &dev) == NVML_SUCCESS);
    CHECK(nvmlDeviceGetMemoryInfo(dev, &m1) == NVML_SUCCESS);
    CHECK_EQ_U64(m1.total, GiB);
    CHECK_EQ_U64(m1.free, 0);
    CHECK_EQ_U64(m1.used, GiB);
    CHECK(nvmlDeviceGetMemoryInfo_v2(dev, &m2) == NVML_SUCCESS);
    CHECK_EQ_U64(m2.total, GiB);
    CHECK_EQ_U64(m2.free, 0);
    CHECK_EQ_U64(m2.used + m2.reserved, GiB);
}

/* The claim's region is unusable from the start (missing, corrupt, no free slot). */
void sc_closed(void)
{
    ctx_on(0);
    check_closed();
}

/*
 * The region is replaced under a running process (a new file at its path):
 * from its next memory query on the process fails closed and flags its slot
 * in the file it mapped, where the monitor sees it.
 */
void sc_replaced(void)
{
    char path[600], orig[640];
    struct region_view v;
    CUdeviceptr p;
    int fd;

    ctx_on(0);
    CHECK(cuMemAlloc_v2(&p, 100 * MiB) == CUDA_SUCCESS);
    snprintf(path, sizeof(path), "%s", claim_region());
    snprintf(orig, sizeof(orig), "%s.orig", path);
    CHECK(link(path, orig) == 0);
    snprintf(orig + strlen(orig), 8, ".new");
    fd = open(orig, O_RDWR | O_CREAT | O_TRUNC, 0666);
    CHECK(fd >= 0 && ftruncate(fd, VGPU_REGION_SIZE) == 0);
    close(fd);
    CHECK(rename(orig, path) == 0);
    check_closed();
    orig[strlen(orig) - 4] = '\0';
    CHECK(region_view(orig, getenv("VGPU_TEST_UUID0"), &v));
    CHECK_EQ_U64(v.fail_closed, 1);
    CHECK_EQ_U64(v.used, 100 * MiB); /* still ours, returned at exit */
}

/*
 * Two claims name GPU 0 (claim-a 1 GiB, claim-b 512 MiB): their limits add
 * up; each allocation is charged to the first claim, by UID, with room for
 * it, its free uncharges that claim, and neither counter exceeds its limit.
 */
void sc_twoclaims(void)
{
    char b[600];
    const char *u = getenv("VGPU_TEST_UUID0");
    nvmlDevice_t dev;
    nvmlMemory_t m1;
    CUdeviceptr p1, p2, p3, p4;

    snprintf(b, sizeof(b), "%s/claim-b/shm/region", getenv("VGPU_CLAIMS_ROOT"));
    ctx_on(0);
    CHECK_EQ_U64(mem_total(), GiB + 512 * MiB);
    CHECK(cuMemAlloc_v2(&p1, 800 * MiB) == CUDA_SUCCESS);
    CHECK(cuMemAlloc_v2(&p2, 400 * MiB) == CUDA_SUCCESS); /* no room in a: b */
    CHECK(cuMemAlloc_v2(&p3, 200 * MiB) == CUDA_SUCCESS); /* a again */
    CHECK_EQ_U64(region_used(claim_region(), u), 1000 * MiB);
    CHECK_EQ_U64(region_used(b, u), 400 * MiB);
    CHECK_EQ_U64(mem_free(), 136 * MiB);
    CHECK(cuMemAlloc_v2(&p4, 120 * MiB) == CUDA_ERROR_OUT_OF_MEMORY); /* 24 + 112 left */
    CHECK(region_used(claim_region(), u) <= GiB && region_used(b, u) <= 512 * MiB);
    CHECK(cuMemAlloc_v2(&p4, 100 * MiB) == CUDA_SUCCESS);
    CHECK_EQ_U64(region_used(b, u), 500 * MiB);
    CHECK(nvmlInit_v2() == NVML_SUCCESS);
    CHECK(nvmlDeviceGetHandleByUUID(u, &dev) == NVML_SUCCESS);
    CHECK(nvmlDeviceGetMemoryInfo(dev, &m1) == NVML_SUCCESS);
    CHECK_EQ_U64(m1.total, GiB + 512 * MiB);
    CHECK_EQ_U64(m1.used, 1500 * MiB);
    CHECK_EQ_U64(region_used(claim_region(), u), 1000 * MiB); /* no overhead counted twice */
    CHECK(cuMemFree_v2(p2) == CUDA_SUCCESS);
    CHECK_EQ_U64(region_used(claim_region(), u), 1000 * MiB);
    CHECK_EQ_U64(region_used(b, u), 100 * MiB);
    CHECK(cuMemFree_v2(p1) == CUDA_SUCCESS);
    CHECK(cuMemFree_v2(p3) == CUDA_SUCCESS);
    CHECK(cuMemFree_v2(p4) == CUDA_SUCCESS);
    CHECK_EQ_U64(region_used(claim_region(), u), 0);
    CHECK_EQ_U64(region_used(b, u), 0);
}

/* Env lowers the sum of two claims (1200 MiB here): each claim still has room, the GPU not. */
void sc_twoclaims_capped(void)
{
    char b[600];
    CUdeviceptr p1, p2, p3;

    snprintf(b, sizeof(b), "%s/claim-b/shm/region", getenv("VGPU_CLAIMS_ROOT"));
    ctx_on(0);
    CHECK_EQ_U64(mem_total(), 1200 * MiB);
    CHECK(cuMemAlloc_v2(&p1, 800 * MiB) == CUDA_SUCCESS);
    CHECK(cuMemAlloc_v2(&p2, 400 * MiB) == CUDA_SUCCESS);
    CHECK_EQ_U64(region_used(b, getenv("VGPU_TEST_UUID0")), 400 * MiB);
    CHECK(cuMemAlloc_v2(&p3, MiB) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(cuMemFree_v2(p2) == CUDA_SUCCESS);
    CHECK(cuMemAlloc_v2(&p3, MiB) == CUDA_SUCCESS);
}

/*
 * Pool memory counts on the pool's device: a pool on GPU 1 (limit 256 MiB)
 * used from a context on GPU 0, and the current pool of a GPU 1 stream.
 */

/* One thread of fake_churn: 64 MiB allocations freed and made again at random. */
static void *fake_churn_thread(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    CUdeviceptr p[4] = {0};

    for (;;) {
        int i = rand_r(&seed) % 4;

        if (p[i] != 0) {
            cuMemFree_v2(p[i]);
            p[i] = 0;
        } else if (cuMemAlloc_v2(&p[i], 64 * MiB) != CUDA_SUCCESS) {
            p[i] = 0;
        }
    }
    return NULL;
}

int sc_fake_churn(const char *seed_arg)
{
    unsigned seed = (unsigned)strtoul(seed_arg, NULL, 10);
    CUcontext ctx = ctx_on(0);
    pthread_t t;

    /* Four threads: more instants inside the driver's own accounting. */
    for (int i = 0; i < 3; i++) {
        if (pthread_create(&t, NULL, fake_churn_thread, (void *)(uintptr_t)rand_r(&seed)) != 0)
            return 1;
    }
    (void)ctx;
    for (int round = 0; round < 64; round++) {
        CUdeviceptr p;

        if (cuMemAlloc_v2(&p, 64 * MiB) == CUDA_SUCCESS)
            cuMemFree_v2(p);
    }
    printf("ready\n");
    fflush(stdout);
    fake_churn_thread((void *)(uintptr_t)seed);
    return 0;
}

/* Bytes in use on the fake's GPU 0, as its NVML reports them (the caller is not preloaded). */
static uint64_t fake_gpu_used(void)
{
    nvmlDevice_t dev;
    nvmlMemory_t mem = {0};

    CHECK(nvmlInit_v2() == NVML_SUCCESS);
    CHECK(nvmlDeviceGetHandleByIndex_v2(0, &dev) == NVML_SUCCESS);
    CHECK(nvmlDeviceGetMemoryInfo(dev, &mem) == NVML_SUCCESS);
    CHECK(nvmlShutdown() == NVML_SUCCESS);
    return mem.used;
}

void fake_killstress(int kills)
{
    unsigned seed = (unsigned)getpid() ^ 0x5eedu;
    uint64_t before = fake_gpu_used(), after;

    for (int k = 0; k < kills; k++) {
        int st = kill_helper_at_random("fake_churn", &seed);

        CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    }
    /* The report reclaims the dead processes: what is left is what the survivors hold. */
    after = fake_gpu_used();
    if (after != before)
        fprintf(stderr, "fake GPU after %d kills: %llu bytes used, %llu before\n", kills,
                (unsigned long long)after, (unsigned long long)before);
    CHECK_EQ_U64(after, before);
}
