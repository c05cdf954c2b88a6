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
 * lib_test_memory.c - lib_test scenarios: the memory limit on every allocation path, memory pools.
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

/* Limit 1 GiB on GPU 0, unlimited GPU 1. */
void sc_limit(void)
{
    CUdeviceptr a = 0, b = 0, c = 0;
    size_t total = 0;
    uint64_t before, last_bytes = 0, last_ns = 0;

    ctx_on(0);
    CHECK_EQ_U64(mem_total(), GiB);
    CHECK_EQ_U64(mem_free(), GiB);
    CHECK(cuDeviceTotalMem_v2(&total, 0) == CUDA_SUCCESS);
    CHECK_EQ_U64(total, GiB);
    CHECK(cuMemAlloc_v2(&a, 512 * MiB) == CUDA_SUCCESS);
    CHECK_EQ_U64(used0(), 512 * MiB);
    CHECK_EQ_U64(mem_free(), 512 * MiB);
    CHECK_EQ_U64(refusals0(NULL, NULL), 0);
    before = now_realtime_ns();
    CHECK(cuMemAlloc_v2(&b, 600 * MiB) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_EQ_U64(b, 0); /* out-param untouched on refusal */
    CHECK_EQ_U64(used0(), 512 * MiB);
    /* The refusal is counted claim-wide with its size and time (the monitor's limit hits). */
    CHECK_EQ_U64(refusals0(&last_bytes, &last_ns), 1);
    CHECK_EQ_U64(last_bytes, 600 * MiB);
    CHECK(last_ns >= before && last_ns <= now_realtime_ns());
    CHECK(cuMemAlloc_v2(&b, 512 * MiB) == CUDA_SUCCESS);
    CHECK_EQ_U64(mem_free(), 0);
    CHECK_EQ_U64(refusals0(NULL, NULL), 1);
    CHECK(cuMemAlloc_v2(&c, 1) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_EQ_U64(refusals0(&last_bytes, NULL), 2);
    CHECK_EQ_U64(last_bytes, 1);
    /* NULL-safe out-pointers (OptiX passes NULL for free). */
    CHECK(cuMemGetInfo_v2(NULL, &total) == CUDA_SUCCESS);
    CHECK_EQ_U64(total, GiB);
    CHECK(cuMemGetInfo_v2(NULL, NULL) == CUDA_SUCCESS);
    CHECK(cuMemFree_v2(a) == CUDA_SUCCESS);
    CHECK(cuMemFree_v2(b) == CUDA_SUCCESS);
    CHECK_EQ_U64(used0(), 0);
    CHECK(cuMemAlloc_v2(&a, GiB) == CUDA_SUCCESS);
    CHECK(cuMemFree_v2(a) == CUDA_SUCCESS);
    /* A pointer never tracked goes straight to the driver, which rejects it. */
    CHECK(cuMemFree_v2((CUdeviceptr)0x1234) != CUDA_SUCCESS);
    CHECK_EQ_U64(used0(), 0);
    /* GPU 1 has no limit: the physical size shows through. */
    CHECK(cuDeviceTotalMem_v2(&total, 1) == CUDA_SUCCESS);
    CHECK_EQ_U64(total, PHYS);
}

/* Every allocation path counts and is refused over the limit (1 GiB). */
void sc_paths(void)
{
    CUdeviceptr p = 0, q = 0;
    size_t pitch = 0;
    CUmemoryPool pool = NULL;
    CUmemGenericAllocationHandle h = 0, h2 = 0;
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    CUmemAllocationProp host_prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                     .location = {.type = CU_MEM_LOCATION_TYPE_HOST, .id = 0}};
    CUDA_ARRAY_DESCRIPTOR ad = {.Width = 4096, .Height = 4096, .Format = CU_AD_FORMAT_FLOAT,
                                .NumChannels = 4};
    CUDA_ARRAY3D_DESCRIPTOR a3 = {.Width = 1024, .Height = 1024, .Depth = 64,
                                  .Format = CU_AD_FORMAT_UNSIGNED_INT8, .NumChannels = 4};
    CUDA_ARRAY3D_DESCRIPTOR huge = {.Width = 65536, .Height = 65536, .Depth = 0,
                                    .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 4};
    CUarray arr = NULL;
    CUmipmappedArray mip = NULL;
    uint64_t u;

    ctx_on(0);
    CHECK(cuMemAllocPitch_v2(&p, &pitch, 1000, 1000, 4) == CUDA_SUCCESS);
    CHECK(pitch >= 1000);
    CHECK_EQ_U64(used0(), (uint64_t)pitch * 1000);
    CHECK(cuMemAllocPitch_v2(&q, &pitch, 1 << 20, 2048, 4) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(cuMemFree_v2(p) == CUDA_SUCCESS);
    CHECK_EQ_U64(used0(), 0);

    CHECK(cuMemAllocManaged(&p, 300 * MiB, CU_MEM_ATTACH_GLOBAL) == CUDA_SUCCESS);
    CHECK_EQ_U64(used0(), 300 * MiB);
    CHECK(cuMemAllocManaged(&q, 800 * MiB, CU_MEM_ATTACH_GLOBAL) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(cuMemFree_v2(p) == CUDA_SUCCESS);

    CHECK(cuMemAllocAsync(&p, 200 * MiB, NULL) == CUDA_SUCCESS);
    CHECK(cuMemAllocAsync_ptsz(&q, 200 * MiB, NULL) == CUDA_SUCCESS);
    CHECK_EQ_U64(used0(), 400 * MiB);
    CHECK(cuMemAllocAsync(&p, 700 * MiB, NULL) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(cuMemFreeAsync(q, NULL) == CUDA_SUCCESS);
    CHECK(cuMemFreeAsync_ptsz(p, NULL) == CUDA_SUCCESS);
    /* The default pool (release threshold 0) keeps its memory until a synchronize. */
    CHECK_EQ_U64(used0(), 400 * MiB);
    CHECK(cuStreamSynchronize(NULL) == CUDA_SUCCESS);
    CHECK_EQ_U64(used0(), 0);

    CHECK(cuDeviceGetDefaultMemPool(&pool, 0) == CUDA_SUCCESS);
    CHECK(cuMemAllocFromPoolAsync(&p, 100 * MiB, pool, NULL) == CUDA_SUCCESS);
    CHECK(cuMemAllocFromPoolAsync_ptsz(&q, 100 * MiB, pool, NULL) == CUDA_SUCCESS);
    CHECK_EQ_U64(used0(), 200 * MiB);
    CHECK(cuMemAllocFromPoolAsync(&p, GiB, pool, NULL) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(cuMemFreeAsync(p, NULL) == CUDA_SUCCESS);
    CHECK(cuMemFreeAsync(q, NULL) == CUDA_SUCCESS);
    CHECK(cuCtxSynchronize() == CUDA_SUCCESS);
    CHECK_EQ_U64(used0(), 0);

    /* VMM: counted at cuMemCreate, released when the last reference goes. */
    CHECK(cuMemCreate(&h, 512 * MiB, &prop, 0) == CUDA_SUCCESS);
    CHECK_EQ_U64(used0(), 512 * MiB);
    CHECK(cuMemCreate(&h2, 600 * MiB, &prop, 0) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(cuMemAddressReserve(&p, 512 * MiB, 0, 0, 0) == CUDA_SUCCESS);
    CHECK(cuMemMap(p, 512 * MiB, 0, h, 0) == CUDA_SUCCESS);
    CHECK(cuMemRetainAllocationHandle(&h2, (void *)(uintptr_t)p) == CUDA_SUCCESS);
    CHECK_EQ_U64(h2, h);
    CHECK(cuMemRelease(h) == CUDA_SUCCESS);
    CHECK_EQ_U64(used0(), 512 * MiB); /* still retained */
    CHECK(cuMemUnmap(p, 512 * MiB) == CUDA_SUCCESS);
    CHECK(cuMemRelease(h2) == CUDA_SUCCESS);
    CHECK_EQ_U64(used0(), 0);
    CHECK(cuMemAddressFree(p, 512 * MiB) == CUDA_SUCCESS);
    /* Host-located VMM memory is not device memory. */
    if (cuMemCreate(&h, 64 * MiB, &host_prop, 0) == CUDA_SUCCESS) {
        CHECK_EQ_U64(used0(), 0);
        CHECK(cuMemRelease(h) == CUDA_SUCCESS);
    }

    /* Arrays: 4096 x 4096 x float4 = 256 MiB at least. */
    CHECK(cuArrayCreate_v2(&arr, &ad) == CUDA_SUCCESS);
    u = used0();
    CHECK(u >= 256 * MiB && u < 300 * MiB);
    CHECK(cuArrayDestroy(arr) == CUDA_SUCCESS);
    CHECK_EQ_U64(used0(), 0);
    CHECK(cuArray3DCreate_v2(&arr, &a3) == CUDA_SUCCESS);
    CHECK(used0() >= 256 * MiB);
    CHECK(cuArray3DCreate_v2(&arr, &huge) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(cuArrayDestroy(arr) == CUDA_SUCCESS);
    CHECK_EQ_U64(used0(), 0);
    CHECK(cuMipmappedArrayCreate(&mip, &a3, 4) == CUDA_SUCCESS);
    CHECK(used0() >= 256 * MiB);
    CHECK(cuMipmappedArrayCreate(&mip, &huge, 2) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(cuMipmappedArrayDestroy(mip) == CUDA_SUCCESS);
    CHECK_EQ_U64(used0(), 0);
}

/* Resolves through the cuGetProcAddress we are handed, as the CUDA runtime does. */
static void check_resolve(PFN_cuGetProcAddress_v2 gpa, const char *sym, int ver,
                          cuuint64_t flags, const char *want_lib, const char *want_name)
{
    void *fn = NULL;
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    Dl_info info;

    CHECK(gpa(sym, &fn, ver, flags, &st) == CUDA_SUCCESS);
    CHECK(st == CU_GET_PROC_ADDRESS_SUCCESS);
    if (fn == NULL || dladdr(fn, &info) == 0 || info.dli_sname == NULL) {
        fprintf(stderr, "resolve %s/%d/%llu: no symbol\n", sym, ver, (unsigned long long)flags);
        check_failures++;
        return;
    }
    if (strstr(info.dli_fname, want_lib) == NULL || strcmp(info.dli_sname, want_name) != 0) {
        fprintf(stderr, "resolve %s/%d/%llu: got %s in %s, want %s in %s\n", sym, ver,
                (unsigned long long)flags, info.dli_sname, info.dli_fname, want_name, want_lib);
        check_failures++;
    }
}

void sc_procaddr(void)
{
    static const int versions[] = {11030, 12000, 13000};
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    void *nv = dlopen("libnvidia-ml.so.1", RTLD_NOW);
    PFN_cuGetProcAddress_v2 gpa;
    PFN_cuGetProcAddress gpa1;
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SUCCESS;
    void *fn = (void *)1;
    Dl_info info;

    CHECK(h != NULL && nv != NULL);
    *(void **)&gpa = dlsym(h, "cuGetProcAddress_v2");
    *(void **)&gpa1 = dlsym(h, "cuGetProcAddress");
    CHECK(gpa != NULL && gpa1 != NULL);
    CHECK(dladdr((void *)gpa, &info) != 0 && strstr(info.dli_fname, "libvgpu") != NULL);
    CHECK(cuInit(0) == CUDA_SUCCESS);
    for (size_t v = 0; v < 3; v++) {
        for (cuuint64_t flags = 0; flags <= 2; flags += 2) {
            int ver = versions[v];
            check_resolve(gpa, "cuMemAlloc", ver, flags, "libvgpu", "cuMemAlloc_v2");
            check_resolve(gpa, "cuMemFree", ver, flags, "libvgpu", "cuMemFree_v2");
            check_resolve(gpa, "cuMemGetInfo", ver, flags, "libvgpu", "cuMemGetInfo_v2");
            check_resolve(gpa, "cuMemCreate", ver, flags, "libvgpu", "cuMemCreate");
            check_resolve(gpa, "cuMemAllocAsync", ver, flags, "libvgpu",
                          flags ? "cuMemAllocAsync_ptsz" : "cuMemAllocAsync");
            check_resolve(gpa, "cuMemFreeAsync", ver, flags, "libvgpu",
                          flags ? "cuMemFreeAsync_ptsz" : "cuMemFreeAsync");
            check_resolve(gpa, "cuLaunchKernel", ver, flags, "libvgpu",
                          flags ? "cuLaunchKernel_ptsz" : "cuLaunchKernel");
            check_resolve(gpa, "cuGraphLaunch", ver, flags, "libvgpu",
                          flags ? "cuGraphLaunch_ptsz" : "cuGraphLaunch");
            check_resolve(gpa, "cuStreamSynchronize", ver, flags, "libvgpu",
                          flags ? "cuStreamSynchronize_ptsz" : "cuStreamSynchronize");
            check_resolve(gpa, "cuCtxSynchronize", ver, flags, "libvgpu", "cuCtxSynchronize");
            check_resolve(gpa, "cuMemPoolTrimTo", ver, flags, "libvgpu", "cuMemPoolTrimTo");
            check_resolve(gpa, "cuMemPoolDestroy", ver, flags, "libvgpu", "cuMemPoolDestroy");
            /* Not wrapped: the driver's own entry point, exact variant. */
            check_resolve(gpa, "cuStreamIsCapturing", ver, flags, "fake",
                          flags ? "cuStreamIsCapturing_ptsz" : "cuStreamIsCapturing");
            check_resolve(gpa, "cuGetExportTable", ver, flags, "fake", "cuGetExportTable");
            /* Asked for itself, the resolver must stay ours. */
            check_resolve(gpa, "cuGetProcAddress", ver, flags, "libvgpu",
                          ver >= 12000 ? "cuGetProcAddress_v2" : "cuGetProcAddress");
        }
    }
    /* The CUDA 11 signature. */
    CHECK(gpa1("cuMemAlloc", &fn, 11030, 0) == CUDA_SUCCESS);
    CHECK(dladdr(fn, &info) != 0 && strcmp(info.dli_sname, "cuMemAlloc_v2") == 0 &&
          strstr(info.dli_fname, "libvgpu") != NULL);
    /*
     * Unknown symbol and too-new version: the driver's answer comes through
     * as it is (NVIDIA's drivers: CUDA_SUCCESS, the reason, a NULL pointer).
     */
    fn = (void *)1;
    CHECK(gpa("cuNoSuchFunction", &fn, 12000, 0, &st) == CUDA_SUCCESS);
    CHECK(st == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND && fn == NULL);
    fn = (void *)1;
    CHECK(gpa("cuMemAllocAsync", &fn, 11000, 0, &st) == CUDA_SUCCESS);
    CHECK(st == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT && fn == NULL);
    fn = (void *)1;
    CHECK(gpa1("cuNoSuchFunction", &fn, 12000, 0) == CUDA_SUCCESS && fn == NULL);
    /* dlsym on handles: wrapped names, pass-through names, names outside cu[A-Z]/nvml[A-Z]. */
    CHECK(dladdr(dlsym(h, "cuMemAlloc_v2"), &info) != 0 && strstr(info.dli_fname, "libvgpu"));
    CHECK(dladdr(dlsym(h, "cuLaunchKernel"), &info) != 0 && strstr(info.dli_fname, "libvgpu"));
    CHECK(dladdr(dlsym(h, "cuStreamSynchronize"), &info) != 0 &&
          strstr(info.dli_fname, "libvgpu"));
    CHECK(dladdr(dlsym(h, "cuMemPoolTrimTo"), &info) != 0 && strstr(info.dli_fname, "libvgpu"));
    CHECK(dladdr(dlsym(h, "cuStreamIsCapturing"), &info) != 0 && strstr(info.dli_fname, "fake"));
    CHECK(dladdr(dlsym(nv, "nvmlDeviceGetMemoryInfo_v2"), &info) != 0 &&
          strstr(info.dli_fname, "libvgpu"));
    CHECK(dladdr(dlsym(nv, "nvmlDeviceGetCount_v2"), &info) != 0 && strstr(info.dli_fname, "fake"));
    CHECK(dlsym(h, "cudaMalloc") == NULL);
    CHECK(dlsym(h, "cuNoSuchFunction") == NULL);
    CHECK(dlerror() != NULL);
    /* NVML's handle does not export CUDA names: no wrapper either. */
    CHECK(dlsym(nv, "cuMemAlloc_v2") == NULL);
    CHECK(dladdr(dlsym(RTLD_DEFAULT, "cuMemAlloc_v2"), &info) != 0 &&
          strstr(info.dli_fname, "libvgpu"));
}

/* Holds argv bytes on GPU 0 until stdin closes. */
int sc_hold(const char *bytes)
{
    CUdeviceptr p;

    ctx_on(0);
    if (cuMemAlloc_v2(&p, strtoull(bytes, NULL, 10)) != CUDA_SUCCESS)
        return 2;
    printf("held\n");
    fflush(stdout);
    while (getchar() != EOF) {
    }
    return 0;
}

/* Allocates 64 MiB chunks until refused, prints how many, holds them until stdin closes. */
int sc_grab(void)
{
    CUdeviceptr p;
    int n = 0;
    CUresult rc;

    ctx_on(0);
    while ((rc = cuMemAlloc_v2(&p, 64 * MiB)) == CUDA_SUCCESS)
        n++;
    printf("%d %d\n", n, rc);
    fflush(stdout);
    while (getchar() != EOF) {
    }
    return 0;
}

/* Pools are charged what they reserve, freed or not, until trim, destroy or sync (1 GiB). */
void sc_pools(void)
{
    CUdeviceptr p = 0, q = 0, lin = 0;
    CUmemoryPool pool, def = NULL;

    ctx_on(0);
    pool = keeping_pool();
    CHECK(cuMemAllocFromPoolAsync(&p, 600 * MiB, pool, NULL) == CUDA_SUCCESS);
    CHECK_EQ_U64(used0(), 600 * MiB);
    CHECK(cuMemFreeAsync(p, NULL) == CUDA_SUCCESS);
    CHECK(cuStreamSynchronize(NULL) == CUDA_SUCCESS);
    /* Freed but still reserved by the pool: still charged, elsewhere refused. */
    CHECK_EQ_U64(used0(), 600 * MiB);
    CHECK_EQ_U64(mem_free(), 424 * MiB);
    q = 0;
    CHECK(cuMemAlloc_v2(&q, 600 * MiB) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_EQ_U64(q, 0);
    CHECK(cuMemAllocAsync(&q, 600 * MiB, NULL) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_EQ_U64(q, 0);
    CHECK(cuMemAlloc_v2(&lin, 400 * MiB) == CUDA_SUCCESS);
    CHECK_EQ_U64(used0(), 1000 * MiB);
    /* Served from what the pool already holds: no growth, no refusal at 1000 of 1024 MiB. */
    CHECK(cuMemAllocFromPoolAsync(&p, 500 * MiB, pool, NULL) == CUDA_SUCCESS);
    CHECK_EQ_U64(used0(), 1000 * MiB);
    /* Growth past the limit is refused and leaves the charge as it was. */
    CHECK(cuMemAllocFromPoolAsync(&q, 200 * MiB, pool, NULL) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_EQ_U64(q, 0);
    CHECK_EQ_U64(used0(), 1000 * MiB);
    CHECK(cuMemFreeAsync(p, NULL) == CUDA_SUCCESS);
    CHECK_EQ_U64(used0(), 1000 * MiB);
    /* Trim returns the pool's memory. */
    CHECK(cuMemPoolTrimTo(pool, 0) == CUDA_SUCCESS);
    CHECK_EQ_U64(used0(), 400 * MiB);
    CHECK(cuMemFree_v2(lin) == CUDA_SUCCESS);
    CHECK_EQ_U64(used0(), 0);
    /* Growth is charged in the pool's 2 MiB units, not by the bytes asked for. */
    CHECK(cuMemAllocFromPoolAsync(&p, 1, pool, NULL) == CUDA_SUCCESS);
    CHECK_EQ_U64(used0(), 2 * MiB);
    CHECK(cuMemAllocFromPoolAsync(&q, 1, pool, NULL) == CUDA_SUCCESS);
    CHECK_EQ_U64(used0(), 2 * MiB);
    CHECK(cuMemFree_v2(p) == CUDA_SUCCESS);
    CHECK(cuMemFree_v2(q) == CUDA_SUCCESS);
    CHECK_EQ_U64(used0(), 2 * MiB);
    /* Destroy returns it. */
    CHECK(cuMemPoolDestroy(pool) == CUDA_SUCCESS);
    CHECK_EQ_U64(used0(), 0);
    /* Destroyed with an allocation outstanding: charged until that allocation is freed. */
    pool = keeping_pool();
    CHECK(cuMemAllocFromPoolAsync(&p, 100 * MiB, pool, NULL) == CUDA_SUCCESS);
    CHECK(cuMemPoolDestroy(pool) == CUDA_SUCCESS);
    CHECK_EQ_U64(used0(), 100 * MiB);
    CHECK(cuMemFreeAsync(p, NULL) == CUDA_SUCCESS);
    CHECK_EQ_U64(used0(), 0);
    /* The default pool is one pool, whichever way it is reached. */
    CHECK(cuDeviceGetDefaultMemPool(&def, 0) == CUDA_SUCCESS);
    CHECK(cuMemAllocAsync(&p, 100 * MiB, NULL) == CUDA_SUCCESS);
    CHECK(cuMemAllocFromPoolAsync(&q, 100 * MiB, def, NULL) == CUDA_SUCCESS);
    CHECK_EQ_U64(used0(), 200 * MiB);
    CHECK(cuMemFreeAsync(p, NULL) == CUDA_SUCCESS);
    CHECK(cuMemFreeAsync(q, NULL) == CUDA_SUCCESS);
    CHECK_EQ_U64(used0(), 200 * MiB);
    /* Raising the threshold changes nothing by itself; the next sync keeps the memory. */
    {
        cuuint64_t keep = 150 * MiB;
        CHECK(cuMemPoolSetAttribute(def, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep) ==
              CUDA_SUCCESS);
        CHECK_EQ_U64(used0(), 200 * MiB);
        CHECK(cuCtxSynchronize() == CUDA_SUCCESS);
        CHECK_EQ_U64(used0(), 150 * MiB);
        keep = 0;
        CHECK(cuMemPoolSetAttribute(def, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep) ==
              CUDA_SUCCESS);
    }
    CHECK(cuStreamSynchronize_ptsz(NULL) == CUDA_SUCCESS);
    CHECK_EQ_U64(used0(), 0);
    /* Invalid pools and sizes reach the driver and charge nothing. */
    CHECK(cuMemAllocFromPoolAsync(&p, MiB, NULL, NULL) != CUDA_SUCCESS);
    CHECK(cuMemAllocAsync(&p, 0, NULL) != CUDA_SUCCESS);
    CHECK_EQ_U64(used0(), 0);
}

/*
 * Allocates 64 MiB chunks from a keeping pool until refused, prints how many,
 * frees them (the pool keeps the memory), prints "freed", waits for stdin to close.
 */
int sc_pgrab(void)
{
    CUdeviceptr p[64];
    CUmemoryPool pool;
    int n = 0;
    CUresult rc = CUDA_SUCCESS;

    ctx_on(0);
    pool = keeping_pool();
    while (n < 64 && (rc = cuMemAllocFromPoolAsync(&p[n], 64 * MiB, pool, NULL)) == CUDA_SUCCESS)
        n++;
    printf("%d %d\n", n, rc);
    fflush(stdout);
    for (int i = 0; i < n; i++)
        CHECK(cuMemFreeAsync(p[i], NULL) == CUDA_SUCCESS);
    CHECK(cuCtxSynchronize() == CUDA_SUCCESS);
    printf("freed\n");
    fflush(stdout);
    while (getchar() != EOF) {
    }
    return check_failures != 0;
}

/* 8 processes grow their own pools concurrently: together exactly the limit, kept after frees. */
void sc_pool_race(void)
{
    enum { N = 8 };
    char *args[] = {self_exe, "pgrab", NULL};
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
        read_line(from[i], line, sizeof(line));
        CHECK(strcmp(line, "freed") == 0);
    }
    CHECK_EQ_U64(total, 16); /* 1 GiB / 64 MiB */
    CHECK_EQ_U64(used0(), GiB);
    /* Everything is freed but reserved by the pools: nothing left for this process. */
    ctx_on(0);
    CHECK(cuMemAllocAsync(&(CUdeviceptr){0}, 64 * MiB, NULL) == CUDA_ERROR_OUT_OF_MEMORY);
    for (int i = 0; i < N; i++) {
        int st;
        close(to[i]);
        waitpid(pid[i], &st, 0);
        close(from[i]);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    CHECK_EQ_U64(used0(), 0);
}


void sc_pooldev(void)
{
    CUmemPoolProps props = {.allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                            .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 1}};
    char u1[64];
    CUmemoryPool pool = NULL, def1 = NULL;
    CUstream s1 = NULL;
    CUdeviceptr p, q;

    snprintf(u1, sizeof(u1), "%s", getenv("VGPU_TEST_UUID1"));
    ctx_on(1);
    CHECK(cuStreamCreate(&s1, 0) == CUDA_SUCCESS);
    ctx_on(0);
    CHECK(cuMemPoolCreate(&pool, &props) == CUDA_SUCCESS);
    CHECK(cuMemAllocFromPoolAsync(&p, 300 * MiB, pool, NULL) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(cuMemAllocFromPoolAsync(&p, 200 * MiB, pool, NULL) == CUDA_SUCCESS);
    CHECK_EQ_U64(region_used(claim_region(), u1), 200 * MiB);
    CHECK(used0() == 0 || used0() == UINT64_MAX); /* GPU 0: nothing, maybe not even a record */
    CHECK(cuMemFreeAsync(p, NULL) == CUDA_SUCCESS);
    CHECK(cuMemPoolDestroy(pool) == CUDA_SUCCESS);
    CHECK_EQ_U64(region_used(claim_region(), u1), 0);
    /* The default pool of GPU 1, reached through its handle and through a GPU 1 stream. */
    CHECK(cuDeviceGetDefaultMemPool(&def1, 1) == CUDA_SUCCESS);
    CHECK(cuMemAllocFromPoolAsync(&p, 100 * MiB, def1, NULL) == CUDA_SUCCESS);
    CHECK(cuMemAllocAsync(&q, 200 * MiB, s1) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(cuMemAllocAsync(&q, 100 * MiB, s1) == CUDA_SUCCESS);
    CHECK_EQ_U64(region_used(claim_region(), u1), 200 * MiB);
    CHECK(used0() == 0 || used0() == UINT64_MAX); /* GPU 0: nothing, maybe not even a record */
    CHECK(cuMemFreeAsync(p, s1) == CUDA_SUCCESS);
    CHECK(cuMemFreeAsync(q, s1) == CUDA_SUCCESS);
    CHECK(cuStreamSynchronize(s1) == CUDA_SUCCESS);
    CHECK_EQ_U64(region_used(claim_region(), u1), 0);
}

/*
 * Helper of another claim: holds bytes on GPU 0 and keeps it busy with
 * kernels until stdin closes.
 */

/* The graph memory GPU 0 holds for this process (the driver's own count). */
static uint64_t graph_reserved0(void)
{
    cuuint64_t v = 0;

    CHECK(cuDeviceGetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &v) ==
          CUDA_SUCCESS);
    return v;
}

/*
 * Graph allocation nodes (limit 1 GiB): their memory is taken when the graph
 * is launched or uploaded, so those calls are refused over the limit before
 * the driver maps anything; the device's graph memory stays charged after
 * the allocations are freed, until cuDeviceGraphMemTrim returns it.
 */
void sc_graphs(void)
{
    CUDA_MEM_ALLOC_NODE_PARAMS a = {.bytesize = 600 * MiB};
    CUDA_GRAPH_INSTANTIATE_PARAMS upload = {.flags = CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD};
    CUgraph g = NULL, g2 = NULL, big = NULL, cap = NULL;
    CUgraphExec e = NULL, e2 = NULL, ebig = NULL, ebig2 = NULL, ecap = NULL;
    CUgraphNode n = NULL;
    CUstream s = NULL;
    CUdeviceptr p = 0, q = 0, d = 0;

    ctx_on(0);
    /* Joins the claim's region, so that used0() reads this process's charge. */
    CHECK(cuMemAlloc_v2(&p, MiB) == CUDA_SUCCESS);
    CHECK(cuMemFree_v2(p) == CUDA_SUCCESS);
    a.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    a.poolProps.location = (CUmemLocation){CU_MEM_LOCATION_TYPE_DEVICE, 0};
    CHECK(cuGraphCreate(&g, 0) == CUDA_SUCCESS);
    CHECK(cuGraphAddMemAllocNode(&n, g, NULL, 0, &a) == CUDA_SUCCESS);
    q = a.dptr;
    /* Building and instantiating allocate nothing. */
    CHECK(cuGraphInstantiateWithFlags(&e, g, 0) == CUDA_SUCCESS);
    CHECK_EQ_U64(used0(), 0);
    CHECK(cuGraphLaunch(e, NULL) == CUDA_SUCCESS);
    CHECK_EQ_U64(used0(), graph_reserved0());
    CHECK(used0() >= 600 * MiB);
    /* The graph's allocation counts against the limit like any other. */
    CHECK(cuMemAlloc_v2(&p, 600 * MiB) == CUDA_ERROR_OUT_OF_MEMORY);
    /* A second graph's 600 MiB more: refused, nothing mapped. */
    CHECK(cuGraphCreate(&g2, 0) == CUDA_SUCCESS);
    CHECK(cuGraphAddMemAllocNode(&n, g2, NULL, 0, &a) == CUDA_SUCCESS);
    CHECK(cuGraphInstantiateWithFlags(&e2, g2, 0) == CUDA_SUCCESS);
    uint64_t before = graph_reserved0();
    CHECK(cuGraphLaunch_ptsz(e2, NULL) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(cuGraphUpload(e2, NULL) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_EQ_U64(graph_reserved0(), before);
    CHECK_EQ_U64(used0(), before);
    CHECK(cuGraphInstantiateWithParams(&ebig, g2, &upload) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_EQ_U64(graph_reserved0(), before);
    /* Freed, the memory stays with the device's graph memory (charged) until a trim. */
    CHECK(cuMemFreeAsync(q, NULL) == CUDA_SUCCESS);
    CHECK(cuStreamSynchronize(NULL) == CUDA_SUCCESS);
    CHECK_EQ_U64(used0(), before);
    /* Unused graph memory serves the next launch: no growth, no refusal. */
    CHECK(cuGraphLaunch(e2, NULL) == CUDA_SUCCESS);
    CHECK_EQ_U64(used0(), before);
    CHECK(cuMemFree_v2(a.dptr) == CUDA_SUCCESS);
    CHECK(used0() == before && graph_reserved0() == before);
    CHECK(cuDeviceGraphMemTrim(0) == CUDA_SUCCESS);
    CHECK_EQ_U64(graph_reserved0(), 0);
    CHECK_EQ_U64(used0(), 0);
    CHECK(cuMemAlloc_v2(&p, 600 * MiB) == CUDA_SUCCESS);
    CHECK(cuMemFree_v2(p) == CUDA_SUCCESS);

    /* Larger than the limit by itself: refused at launch. */
    a.bytesize = 2 * GiB;
    CHECK(cuGraphCreate(&big, 0) == CUDA_SUCCESS);
    CHECK(cuGraphAddMemAllocNode(&n, big, NULL, 0, &a) == CUDA_SUCCESS);
    CHECK(cuGraphInstantiateWithFlags(&ebig, big, 0) == CUDA_SUCCESS);
    CHECK(cuGraphLaunch(ebig, NULL) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_EQ_U64(graph_reserved0(), 0);
    CHECK_EQ_U64(used0(), 0);

    /* cuMemAllocAsync captured into a graph: a node, nothing charged until the launch. */
    CHECK(cuStreamCreate(&s, 0) == CUDA_SUCCESS);
    CHECK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS);
    CHECK(cuMemAllocAsync(&q, 700 * MiB, s) == CUDA_SUCCESS);
    CHECK(cuMemAllocAsync(&d, 100 * MiB, s) == CUDA_SUCCESS);
    CHECK(cuMemFreeAsync(d, s) == CUDA_SUCCESS);
    CHECK(cuStreamEndCapture(s, &cap) == CUDA_SUCCESS);
    CHECK_EQ_U64(used0(), 0);
    CHECK(cuGraphInstantiateWithFlags(&ecap, cap, 0) == CUDA_SUCCESS);
    CHECK(cuMemAlloc_v2(&p, 300 * MiB) == CUDA_SUCCESS);
    CHECK(cuGraphLaunch(ecap, s) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(cuMemFree_v2(p) == CUDA_SUCCESS);
    CHECK(cuGraphLaunch(ecap, s) == CUDA_SUCCESS);
    CHECK(used0() >= 700 * MiB && used0() == graph_reserved0());
    CHECK(cuMemAlloc_v2(&p, 300 * MiB) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(cuMemFreeAsync(q, s) == CUDA_SUCCESS);
    CHECK(cuStreamSynchronize(s) == CUDA_SUCCESS);
    CHECK(cuDeviceGraphMemTrim(0) == CUDA_SUCCESS);
    CHECK_EQ_U64(used0(), 0);

    /* Hostile input: nothing charged, nothing mapped, the driver's own errors. */
    CHECK(cuGraphLaunch(NULL, NULL) == CUDA_ERROR_INVALID_HANDLE);
    CHECK(cuGraphUpload_ptsz(NULL, NULL) == CUDA_ERROR_INVALID_HANDLE);
    CHECK(cuGraphInstantiateWithFlags(&ebig, NULL, 0) == CUDA_ERROR_INVALID_HANDLE);
    CHECK(cuGraphInstantiateWithParams(&ebig, cap, NULL) == CUDA_ERROR_INVALID_VALUE);
    a.bytesize = 1ULL << 60; /* saturates the footprint: refused at launch, not wrapped around */
    CHECK(cuGraphAddMemAllocNode(&n, big, NULL, 0, &a) == CUDA_SUCCESS);
    CHECK(cuGraphInstantiateWithFlags(&ebig2, big, 0) == CUDA_SUCCESS);
    CHECK(cuGraphLaunch(ebig2, NULL) == CUDA_ERROR_OUT_OF_MEMORY);
    a.poolProps.location.id = 99; /* no such device: the driver refuses the node */
    CHECK(cuGraphAddMemAllocNode(&n, big, NULL, 0, &a) == CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ_U64(graph_reserved0(), 0);
    CHECK_EQ_U64(used0(), 0);

    CHECK(cuGraphExecDestroy(ebig2) == CUDA_SUCCESS);
    CHECK(cuGraphExecDestroy(e) == CUDA_SUCCESS);
    CHECK(cuGraphExecDestroy(e2) == CUDA_SUCCESS);
    CHECK(cuGraphExecDestroy(ebig) == CUDA_SUCCESS);
    CHECK(cuGraphExecDestroy(ecap) == CUDA_SUCCESS);
    CHECK(cuGraphDestroy(g) == CUDA_SUCCESS);
    CHECK(cuGraphDestroy(g2) == CUDA_SUCCESS);
    CHECK(cuGraphDestroy(big) == CUDA_SUCCESS);
    CHECK(cuGraphDestroy(cap) == CUDA_SUCCESS);
    CHECK(cuStreamDestroy_v2(s) == CUDA_SUCCESS);
}

/* A Vulkan-style export of size bytes: an fd (the fake takes any open one, as its memory). */
static int ext_fd(void)
{
    int fd = memfd_create("vgpu-test-vk", MFD_CLOEXEC);

    CHECK(fd >= 0);
    return fd;
}

/*
 * External memory under a 1 GiB claim: an imported Vulkan buffer is the
 * device's memory, charged at its size while the object lives (600 MiB,
 * a second 600 MiB refused with the caller's fd left open, a 300 MiB
 * allocation fits beside it); its mapped buffer and mipmapped array are
 * views, charged nothing, freed with cuMemFree and cuMipmappedArrayDestroy;
 * destroying the object returns it. Win32 handle types: the driver's
 * CUDA_ERROR_NOT_SUPPORTED, nothing charged.
 */
void sc_ext_memory(void)
{
    CUDA_EXTERNAL_MEMORY_HANDLE_DESC d = {.type = CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD,
                                          .size = 600 * MiB,
                                          .flags = CUDA_EXTERNAL_MEMORY_DEDICATED};
    CUDA_EXTERNAL_MEMORY_BUFFER_DESC b = {.offset = 0, .size = 600 * MiB};
    CUDA_EXTERNAL_MEMORY_MIPMAPPED_ARRAY_DESC m = {
        .arrayDesc = {.Width = 1024, .Height = 1024, .Format = CU_AD_FORMAT_FLOAT,
                      .NumChannels = 4},
        .numLevels = 1};
    CUexternalMemory ext = NULL, again = NULL;
    CUmipmappedArray view = NULL;
    CUdeviceptr buf = 0, x = 0;
    int fd;

    ctx_on(0);
    d.handle.fd = ext_fd();
    CHECK(cuImportExternalMemory(&ext, &d) == CUDA_SUCCESS);
    CHECK_EQ_U64(used0(), 600 * MiB);
    d.handle.fd = fd = ext_fd();
    CHECK(cuImportExternalMemory(&again, &d) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(again == NULL);
    CHECK(fcntl(fd, F_GETFD) >= 0); /* refused: the fd is still the caller's */
    CHECK_EQ_U64(used0(), 600 * MiB);
    CHECK(cuMemAlloc_v2(&x, 300 * MiB) == CUDA_SUCCESS);
    CHECK(cuMemFree_v2(x) == CUDA_SUCCESS);
    CHECK(cuExternalMemoryGetMappedBuffer(&buf, ext, &b) == CUDA_SUCCESS);
    CHECK(cuExternalMemoryGetMappedMipmappedArray(&view, ext, &m) == CUDA_SUCCESS);
    CHECK_EQ_U64(used0(), 600 * MiB);
    CHECK(cuMemFree_v2(buf) == CUDA_SUCCESS);
    CHECK(cuMipmappedArrayDestroy(view) == CUDA_SUCCESS);
    CHECK_EQ_U64(used0(), 600 * MiB);
    CHECK(cuDestroyExternalMemory(ext) == CUDA_SUCCESS);
    CHECK_EQ_U64(used0(), 0);
    CHECK(cuImportExternalMemory(&again, &d) == CUDA_SUCCESS);
    CHECK_EQ_U64(used0(), 600 * MiB);
    CHECK(cuDestroyExternalMemory(again) == CUDA_SUCCESS);
    CHECK_EQ_U64(used0(), 0);
    d.type = CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_WIN32;
    d.handle.win32.handle = (void *)(uintptr_t)1;
    CHECK(cuImportExternalMemory(&again, &d) == CUDA_ERROR_NOT_SUPPORTED);
    CHECK_EQ_U64(used0(), 0);
    CHECK_EQ_U64(mem_free(), GiB);
}
