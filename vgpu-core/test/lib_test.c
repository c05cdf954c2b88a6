/*
 * lib_test.c - tests of libvgpu.so against the fake CUDA driver and NVML.
 *
 * Run without arguments it is the driver: for each scenario it prepares a
 * claims root (config + region, as the kubelet plugin would) and runs this
 * program again with LD_PRELOAD=libvgpu.so and the scenario name, like an
 * application linked with -lcuda. Scenarios that need several processes
 * start helpers ("hold", "grab") the same way; "hostpid" runs in its own pid
 * and mount namespaces (as root; skipped otherwise).
 *
 * Env: VGPU_TEST_LIB (libvgpu.so to preload), VGPU_TEST_PRELOAD_PREFIX
 * (preloaded first, e.g. libasan.so), VGPU_TEST_VALGRIND (skip checks that
 * cannot hold under valgrind: thread counts and timing).
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
#include "claimns.h"
#include "vgpu_cuda.h"
#include "vgpu_nvml.h"
#include "vgpu_region.h"

extern char **environ;

#define MiB (1024ull * 1024ull)
#define GiB (1024ull * MiB)
#define PHYS (16 * GiB) /* VGPU_FAKE_GPU_MEMORY in the Makefile */

static char self_exe[4096];
static char root[256];          /* claims root of the current scenario */
static char uuids[2][64];       /* fake GPU UUIDs */

/* ---------------------------------------------------------------------- */
/* Helpers used inside preloaded scenario processes                        */
/* ---------------------------------------------------------------------- */

static CUcontext ctx_on(int dev)
{
    CUcontext ctx = NULL;

    CHECK(cuInit(0) == CUDA_SUCCESS);
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev) == CUDA_SUCCESS);
    CHECK(cuCtxSetCurrent(ctx) == CUDA_SUCCESS);
    return ctx;
}

/* Claim-wide used bytes of uuid in the region at path (read-only, as the monitor does). */
static uint64_t region_used(const char *path, const char *uuid)
{
    struct vgpu_region r;
    int fd = open(path, O_RDONLY);
    uint64_t used = UINT64_MAX;

    if (fd < 0 || pread(fd, &r, sizeof(r), 0) != (ssize_t)sizeof(r)) {
        if (fd >= 0)
            close(fd);
        return used;
    }
    close(fd);
    for (uint32_t i = 0; i < r.header.device_count && i < VGPU_REGION_MAX_DEVICES; i++) {
        if (strcmp(r.devices[i].uuid, uuid) == 0)
            used = r.devices[i].used_bytes;
    }
    return used;
}

static uint64_t now_realtime_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static char *claim_region(void);

/* Refusal counters of device record 0 of the claim's region (read-only, as the monitor does). */
static uint64_t refusals0(uint64_t *last_bytes, uint64_t *last_ns)
{
    struct vgpu_region r;
    int fd = open(claim_region(), O_RDONLY);
    bool ok = fd >= 0 && pread(fd, &r, sizeof(r), 0) == (ssize_t)sizeof(r);

    if (fd >= 0)
        close(fd);
    if (!ok)
        return UINT64_MAX;
    if (last_bytes != NULL)
        *last_bytes = r.devices[0].last_refused_bytes;
    if (last_ns != NULL)
        *last_ns = r.devices[0].last_refused_ns;
    return r.devices[0].refusals;
}

static char *claim_region(void)
{
    static char path[512];

    snprintf(path, sizeof(path), "%s/claim-a/shm/region", getenv("VGPU_CLAIMS_ROOT"));
    return path;
}

static uint64_t used0(void)
{
    return region_used(claim_region(), getenv("VGPU_TEST_UUID0"));
}

static uint64_t mem_free(void)
{
    size_t f = 0, t = 0;

    CHECK(cuMemGetInfo_v2(&f, &t) == CUDA_SUCCESS);
    return f;
}

static uint64_t mem_total(void)
{
    size_t f = 0, t = 0;

    CHECK(cuMemGetInfo_v2(&f, &t) == CUDA_SUCCESS);
    return t;
}

/* Starts this program with args, its stdin and stdout piped to us. */
static pid_t spawn_helper(char *const args[], int *to, int *from)
{
    int in[2], out[2];
    posix_spawn_file_actions_t fa;
    pid_t pid;

    /* Close-on-exec: other helpers must not inherit our ends (stdin EOF is their signal). */
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0)
        return -1;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_addclose(&fa, in[1]);
    posix_spawn_file_actions_addclose(&fa, out[0]);
    if (posix_spawn(&pid, self_exe, &fa, NULL, args, environ) != 0)
        pid = -1;
    posix_spawn_file_actions_destroy(&fa);
    close(in[0]);
    close(out[1]);
    *to = in[1];
    *from = out[0];
    return pid;
}

/* Reads one line from fd into buf. */
static void read_line(int fd, char *buf, size_t len)
{
    size_t n = 0;

    while (n + 1 < len && read(fd, buf + n, 1) == 1 && buf[n] != '\n')
        n++;
    buf[n] = '\0';
}

/* ---------------------------------------------------------------------- */
/* Scenarios (run preloaded)                                               */
/* ---------------------------------------------------------------------- */

/* Limit 1 GiB on GPU 0, unlimited GPU 1. */
static void sc_limit(void)
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
static void sc_paths(void)
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

static void sc_procaddr(void)
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
    /* Unknown symbol and too-new version: the driver's status comes through. */
    fn = (void *)1;
    CHECK(gpa("cuNoSuchFunction", &fn, 12000, 0, &st) != CUDA_SUCCESS);
    CHECK(st == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    CHECK(gpa("cuMemAllocAsync", &fn, 11000, 0, &st) != CUDA_SUCCESS);
    CHECK(st == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
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
static int sc_hold(const char *bytes)
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
static int sc_grab(void)
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

/* A pool on GPU 0 whose release threshold keeps everything it reserves. */
static CUmemoryPool keeping_pool(void)
{
    CUmemPoolProps props = {.allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                            .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    cuuint64_t keep = UINT64_MAX;
    CUmemoryPool pool = NULL;

    CHECK(cuMemPoolCreate(&pool, &props) == CUDA_SUCCESS);
    CHECK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep) == CUDA_SUCCESS);
    return pool;
}

/* Pools are charged what they reserve, freed or not, until trim, destroy or sync (1 GiB). */
static void sc_pools(void)
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
static int sc_pgrab(void)
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
static void sc_pool_race(void)
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

/* Two processes share the claim's 1 GiB; normal exit and SIGKILL give memory back. */
static void sc_share(void)
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

/* What the region says about device uuid: the invariant's terms. */
struct region_view {
    uint64_t used;        /* device.used_bytes */
    uint64_t charged_sum; /* sum over active slots of charged_bytes */
    uint64_t own_charged; /* the caller's slot, by pid */
    int active;           /* active slots */
    uint32_t lock, undo;  /* charge_lock, undo_slot */
    uint64_t refused;     /* refused_processes */
    int fail_closed;      /* active slots flagged fail closed */
};

static bool region_view(const char *path, const char *uuid, struct region_view *v)
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
 * keeping pool (trimmed), VMM with retains, arrays and mipmapped arrays.
 * Prints "ready" once the first round is done.
 */
static int sc_churn(const char *seed_arg)
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

    ctx_on(0);
    pool = keeping_pool();
    for (long round = 0;; round++) {
        int i = rand_r(&seed) % SLOTS, op = rand_r(&seed) % 7;
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
static void sc_killstress(void)
{
    const char *kills_env = getenv("VGPU_TEST_KILLS");
    int kills = kills_env != NULL ? atoi(kills_env) : 500, in_lock = 0, bad = 0;
    unsigned seed = (unsigned)getpid();
    struct region_view v;
    CUdeviceptr held, p;

    ctx_on(0);
    CHECK(cuMemAlloc_v2(&held, 100 * MiB) == CUDA_SUCCESS);
    for (int k = 0; k < kills; k++) {
        char seed_arg[32], line[64];
        char *args[] = {self_exe, "churn", seed_arg, NULL};
        struct timespec ts = {0, 0};
        int to, from, st;
        pid_t pid;

        snprintf(seed_arg, sizeof(seed_arg), "%u", rand_r(&seed));
        pid = spawn_helper(args, &to, &from);
        read_line(from, line, sizeof(line));
        CHECK(strcmp(line, "ready") == 0);
        ts.tv_nsec = (long)(rand_r(&seed) % 3000) * 1000;
        nanosleep(&ts, NULL);
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
        close(to);
        close(from);
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
static void sc_lastkill(void)
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
static void sc_race(void)
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
static void sc_fail_closed(void)
{
    CUdeviceptr p = 0;
    size_t f = 1, t = 0;

    ctx_on(0);
    CHECK(cuMemAlloc_v2(&p, 1) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(cuMemGetInfo_v2(&f, &t) == CUDA_SUCCESS);
    CHECK_EQ_U64(f, 0);
    CHECK(t > 0);
}

/* The expected limit of GPU 0 comes in VGPU_TEST_EXPECT (bytes, 0 = physical). */
static void sc_expect_total(void)
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
static void sc_nvml(void)
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
static void sc_overhead(void)
{
    CUdeviceptr p;

    ctx_on(0);
    CHECK(cuMemAlloc_v2(&p, 100 * MiB) == CUDA_SUCCESS);
    CHECK_EQ_U64(used0(), 100 * MiB);
    /* cuMemGetInfo refreshes the overhead (64 MiB context). */
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
static void sc_hostpid(void)
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
static void sc_closed(void)
{
    ctx_on(0);
    check_closed();
}

/*
 * The region is replaced under a running process (a new file at its path):
 * from its next memory query on the process fails closed and flags its slot
 * in the file it mapped, where the monitor sees it.
 */
static void sc_replaced(void)
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
static void sc_twoclaims(void)
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
static void sc_twoclaims_capped(void)
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
static void sc_pooldev(void)
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
static int sc_busyhold(const char *bytes)
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
static void sc_nvml_procs(void)
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
static void sc_fork(void)
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
static void sc_idle(void)
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

/* ---------------------------------------------------------------------- */
/* Driver                                                                  */
/* ---------------------------------------------------------------------- */

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");

    CHECK(f != NULL);
    if (f != NULL) {
        fputs(text, f);
        fclose(f);
    }
}

/* Creates <root>/claim-a with config text and a zero region of the contract size. */
static void make_claim(const char *config)
{
    char path[512];
    int fd;

    snprintf(path, sizeof(path), "rm -rf %s && mkdir -p %s/claim-a/shm", root, root);
    CHECK(system(path) == 0);
    snprintf(path, sizeof(path), "%s/claim-a/config", root);
    write_file(path, config);
    snprintf(path, sizeof(path), "%s/claim-a/shm/region", root);
    fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0666);
    CHECK(fd >= 0 && ftruncate(fd, VGPU_REGION_SIZE) == 0);
    close(fd);
}

/* Standard config: GPU 0 limited to mem0 bytes, GPU 1 unlimited; extra lines appended. */
static void make_std_claim(uint64_t mem0, const char *extra)
{
    char cfg[2048];

    snprintf(cfg, sizeof(cfg),
             "version=1\nclaim=a\ncompute_policy=strict\npriority=low\nlog_level=%s\n"
             "enforcement=enabled\ndevice.count=2\n"
             "device.0.uuid=%s\ndevice.0.memory_limit_bytes=%llu\ndevice.0.sm_limit_percent=0\n"
             "device.1.uuid=%s\ndevice.1.memory_limit_bytes=0\ndevice.1.sm_limit_percent=0\n%s",
             getenv("VGPU_TEST_LOG") ? getenv("VGPU_TEST_LOG") : "warning", uuids[0],
             (unsigned long long)mem0, uuids[1], extra);
    make_claim(cfg);
}

/*
 * Runs this program preloaded with scenario name; env is NULL-terminated
 * "K=V" additions. Returns the exit status; stderr goes to errfile.
 */
static int run_preloaded(const char *name, const char *const env[], const char *errfile)
{
    char preload[8192];
    const char *prefix = getenv("VGPU_TEST_PRELOAD_PREFIX");
    pid_t pid;
    int st;

    snprintf(preload, sizeof(preload), "%s%s%s", prefix ? prefix : "", prefix ? ":" : "",
             getenv("VGPU_TEST_LIB"));
    pid = fork();
    if (pid == 0) {
        int fd = open(errfile, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0)
            dup2(fd, 2);
        setenv("LD_PRELOAD", preload, 1);
        setenv("VGPU_CLAIMS_ROOT", root, 0);
        setenv("VGPU_TEST_UUID0", uuids[0], 1);
        setenv("VGPU_TEST_UUID1", uuids[1], 1);
        for (int i = 0; env != NULL && env[i] != NULL; i++)
            putenv((char *)env[i]);
        if (vgpu_test_enter_claims_ns(getenv("VGPU_CLAIMS_ROOT")) != 0)
            _exit(125);
        if (strcmp(name, "bin-true") == 0)
            execl("/bin/true", "true", (char *)NULL);
        else
            execl(self_exe, self_exe, name, (char *)NULL);
        _exit(127);
    }
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static off_t file_size(const char *path)
{
    struct stat st;

    return stat(path, &st) == 0 ? st.st_size : -1;
}

static void expect(const char *name, const char *const env[], int want_rc, bool want_quiet)
{
    char errfile[512], cmd[1100];
    int rc = run_preloaded(name, env, (snprintf(errfile, sizeof(errfile), "%s.%s.err", root, name),
                                       errfile));

    if (rc != want_rc || (want_quiet && file_size(errfile) != 0)) {
        fprintf(stderr, "scenario %s: exit %d (want %d)%s; its stderr:\n", name, rc, want_rc,
                want_quiet ? ", must print nothing" : "");
        snprintf(cmd, sizeof(cmd), "cat %s >&2", errfile);
        if (system(cmd) != 0)
            fprintf(stderr, "(cannot show %s)\n", errfile);
        check_failures++;
    } else {
        printf("ok   %s\n", name);
    }
}

/* Innermost pid (in its own namespace) and start time of host pid pid, from the host's /proc. */
static bool proc_identity(pid_t pid, uint64_t *pidns, unsigned long *nspid, unsigned long long *start)
{
    char path[64], buf[4096];
    struct stat st;
    FILE *f;
    char *p;

    snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)pid);
    if (stat(path, &st) != 0)
        return false;
    *pidns = (uint64_t)st.st_ino;
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    *nspid = 0;
    if ((f = fopen(path, "r")) == NULL)
        return false;
    while (fgets(buf, sizeof(buf), f) != NULL) {
        if (strncmp(buf, "NSpid:", 6) == 0) {
            for (p = buf + 6; *p != '\0' && *p != '\n';) {
                char *next;
                unsigned long v = strtoul(p, &next, 10);
                if (next == p)
                    break;
                *nspid = v;
                p = next;
            }
        }
    }
    fclose(f);
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    if ((f = fopen(path, "r")) == NULL)
        return false;
    p = fgets(buf, sizeof(buf), f) != NULL ? strrchr(buf, ')') : NULL;
    fclose(f);
    /* Field 22 is the 20th after the ')' that ends field 2. */
    for (int field = 2; p != NULL && field < 22; field++)
        p = strchr(p + 1, ' ');
    if (p == NULL)
        return false;
    *start = strtoull(p + 1, NULL, 10);
    return *nspid != 0;
}

/*
 * The hostpid scenario in a new pid and mount namespace with its own /proc.
 * The driver plays the kubelet plugin: it resolves the scenario's host pid
 * through the host's /proc, writes the claim's host pid map, and (as the
 * monitor's NVML calls do) lets the fake NVML on the host learn the pid.
 */
static void expect_hostpid(void)
{
    char preload[8192], map[256], path[600], tmp[620], line[64];
    const char *prefix = getenv("VGPU_TEST_PRELOAD_PREFIX");
    int to[2], from[2], report[2], st, child = 0;
    uint64_t pidns = 0;
    unsigned long nspid = 0;
    unsigned long long start = 0;
    nvmlDevice_t dev;
    nvmlProcessInfo_t procs[64];
    unsigned int count = 64;
    pid_t mid;
    FILE *f;

    snprintf(preload, sizeof(preload), "%s%s%s", prefix ? prefix : "", prefix ? ":" : "",
             getenv("VGPU_TEST_LIB"));
    if (pipe2(to, O_CLOEXEC) != 0 || pipe2(from, O_CLOEXEC) != 0 || pipe2(report, O_CLOEXEC) != 0) {
        CHECK(0);
        return;
    }
    fflush(stdout); /* the child must not inherit our buffered output */
    mid = fork();
    if (mid == 0) {
        pid_t c = -1;
        int rc = 0;

        if (unshare(CLONE_NEWPID | CLONE_NEWNS) == 0)
            c = fork();
        if (c == 0) {
            /* Our own /proc, as a container runtime mounts it, kept out of the host's mounts. */
            if (mount("none", "/", "none", MS_REC | MS_PRIVATE, NULL) != 0 ||
                mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0 ||
                vgpu_test_bind_claims(root) != 0)
                _exit(126);
            dup2(to[0], 0);
            dup2(from[1], 1);
            setenv("LD_PRELOAD", preload, 1);
            setenv("VGPU_CLAIMS_ROOT", root, 1);
            setenv("VGPU_TEST_UUID0", uuids[0], 1);
        setenv("VGPU_TEST_UUID1", uuids[1], 1);
            setenv("VGPU_FAKE_CONTEXT_MEMORY", "64Mi", 1);
            execl(self_exe, self_exe, "hostpid", (char *)NULL);
            _exit(127);
        }
        rc = c > 0 ? (int)c : -errno;
        if (write(report[1], &rc, sizeof(rc)) != (ssize_t)sizeof(rc) || c < 0)
            _exit(0);
        waitpid(c, &st, 0);
        _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
    }
    close(to[0]);
    close(from[1]);
    close(report[1]);
    CHECK(read(report[0], &child, sizeof(child)) == (ssize_t)sizeof(child));
    close(report[0]);
    if (child <= 0) {
        printf("skip hostpid (unshare(CLONE_NEWPID | CLONE_NEWNS): %s)\n", strerror(-child));
        close(to[1]);
        close(from[0]);
        waitpid(mid, &st, 0);
        return;
    }
    read_line(from[0], line, sizeof(line));
    CHECK(strcmp(line, "ready") == 0);
    CHECK(proc_identity(child, &pidns, &nspid, &start));
    CHECK(nspid == 1); /* pid 1 of its namespace: the host pid is elsewhere */
    snprintf(path, sizeof(path), "%s/claim-a/host", root);
    CHECK(mkdir(path, 0755) == 0 || errno == EEXIST);
    snprintf(path, sizeof(path), "%s/claim-a/host/pids", root);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    snprintf(map, sizeof(map), "version=1\n%llu %lu %llu %d\n", (unsigned long long)pidns, nspid,
             start, child);
    if ((f = fopen(tmp, "w")) != NULL) {
        fputs(map, f);
        fclose(f);
    }
    CHECK(rename(tmp, path) == 0);
    /* On a node the driver reports host pids; the fake learns them from a host-side NVML query. */
    CHECK(nvmlInit_v2() == NVML_SUCCESS);
    CHECK(nvmlDeviceGetHandleByUUID(uuids[0], &dev) == NVML_SUCCESS);
    CHECK(nvmlDeviceGetComputeRunningProcesses_v3(dev, &count, procs) == NVML_SUCCESS);
    CHECK(count >= 1 && procs[0].pid == (unsigned int)child);
    CHECK(write(to[1], "go\n", 3) == 3);
    read_line(from[0], line, sizeof(line));
    snprintf(map, sizeof(map), "host %d", child);
    CHECK(strcmp(line, map) == 0);
    close(to[1]);
    close(from[0]);
    waitpid(mid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "scenario hostpid: exit status %d\n", st);
        check_failures++;
    } else {
        printf("ok   hostpid\n");
    }
}

static void uuid_of(int dev, char out[64])
{
    CUuuid u;
    char *p = out + 4;

    CHECK(cuDeviceGetUuid_v2(&u, dev) == CUDA_SUCCESS);
    memcpy(out, "GPU-", 4);
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            *p++ = '-';
        p += sprintf(p, "%02x", (unsigned char)u.bytes[i]);
    }
}

/* Overwrites the magic of an initialised region. */
static void corrupt_magic(const char *path)
{
    uint64_t junk = 0x4b4e554a4b4e554aull;
    int fd = open(path, O_WRONLY);

    CHECK(fd >= 0 && pwrite(fd, &junk, sizeof(junk), 0) == (ssize_t)sizeof(junk));
    if (fd >= 0)
        close(fd);
}

/*
 * Every slot of the region is held by a live process (us, as the library
 * would hold them): one more process cannot be accounted, so it fails
 * closed, and the region counts it for the monitor.
 */
static void expect_slots_exhausted(const char *path)
{
    static struct vgpu_region r;
    struct region_view v;
    unsigned long nspid;
    unsigned long long start;
    uint64_t pidns;
    int fd;

    expect("limit", NULL, 0, true); /* initialises it, leaves no slot behind */
    fd = open(path, O_RDWR);
    CHECK(fd >= 0 && pread(fd, &r, sizeof(r), 0) == (ssize_t)sizeof(r));
    CHECK(proc_identity(getpid(), &pidns, &nspid, &start));
    for (int i = 0; i < VGPU_REGION_MAX_SLOTS; i++) {
        struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET,
                           .l_start = VGPU_REGION_SIZE + i, .l_len = 1};

        CHECK(fcntl(fd, F_OFD_SETLK, &fl) == 0);
        r.slots[i].state = VGPU_SLOT_ACTIVE;
        r.slots[i].pid = (uint32_t)nspid;
        r.slots[i].pidns = pidns;
        r.slots[i].start_time = start;
    }
    CHECK(pwrite(fd, r.slots, sizeof(r.slots), VGPU_REGION_SLOTS_OFFSET) ==
          (ssize_t)sizeof(r.slots));
    expect("closed", NULL, 0, false);
    CHECK(region_view(path, uuids[0], &v));
    CHECK_EQ_U64(v.refused, 1);
    CHECK_EQ_U64(v.used, 0);
    if (fd >= 0)
        close(fd);
}

/*
 * Starts a busy helper of a second claim (root-b, 1 GiB on GPU 0), checks
 * that the fake NVML itself lists it, then runs nvml_procs in claim a.
 */
static void expect_two_claims_nvml(void)
{
    char rootb[300], cfg[1024], path[600], line[64], pidenv[64];
    int in[2], out[2], st, fd;
    unsigned int n = 16;
    nvmlProcessInfo_t procs[16];
    nvmlDevice_t dev;
    bool listed = false;
    pid_t pid;

    make_std_claim(GiB, "");
    snprintf(rootb, sizeof(rootb), "%s-b", root);
    snprintf(path, sizeof(path), "rm -rf %s && mkdir -p %s/claim-b/shm", rootb, rootb);
    CHECK(system(path) == 0);
    snprintf(cfg, sizeof(cfg),
             "version=1\nclaim=b\ndevice.count=1\ndevice.0.uuid=%s\n"
             "device.0.memory_limit_bytes=1073741824\ndevice.0.sm_limit_percent=0\n", uuids[0]);
    snprintf(path, sizeof(path), "%s/claim-b/config", rootb);
    write_file(path, cfg);
    snprintf(path, sizeof(path), "%s/claim-b/shm/region", rootb);
    fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0666);
    CHECK(fd >= 0 && ftruncate(fd, VGPU_REGION_SIZE) == 0);
    close(fd);
    CHECK(pipe(in) == 0 && pipe(out) == 0);
    pid = fork();
    if (pid == 0) {
        char preload[8192];
        const char *prefix = getenv("VGPU_TEST_PRELOAD_PREFIX");

        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[1]);
        close(out[0]);
        snprintf(preload, sizeof(preload), "%s%s%s", prefix ? prefix : "", prefix ? ":" : "",
                 getenv("VGPU_TEST_LIB"));
        setenv("LD_PRELOAD", preload, 1);
        setenv("VGPU_CLAIMS_ROOT", rootb, 1);
        if (vgpu_test_enter_claims_ns(rootb) != 0)
            _exit(125);
        execl(self_exe, self_exe, "busyhold", "314572800", (char *)NULL);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    read_line(out[0], line, sizeof(line));
    CHECK(strcmp(line, "held") == 0);
    /* Unfiltered, the driver lists claim b's process: the scenario must not. */
    CHECK(nvmlInit_v2() == NVML_SUCCESS);
    CHECK(nvmlDeviceGetHandleByUUID(uuids[0], &dev) == NVML_SUCCESS);
    CHECK(nvmlDeviceGetComputeRunningProcesses_v3(dev, &n, procs) == NVML_SUCCESS);
    for (unsigned int i = 0; i < n; i++)
        listed |= procs[i].pid == (unsigned int)pid;
    CHECK(listed);
    snprintf(pidenv, sizeof(pidenv), "VGPU_TEST_OTHER_PID=%d", (int)pid);
    {
        const char *env[] = {pidenv, NULL};
        expect("nvml_procs", env, 0, true);
    }
    close(in[1]);
    waitpid(pid, &st, 0);
    close(out[0]);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    snprintf(path, sizeof(path), "rm -rf %s", rootb);
    CHECK(system(path) == 0);
}

static int run_driver(void)
{
    char cache[512], errfile[600];
    int ns = vgpu_test_claims_ns_supported();

    if (ns != 0) {
        printf("skip lib_test: claims must be read-only mounts in a private mount namespace, "
               "which needs root (unshare(CLONE_NEWNS): %s)\n", strerror(-ns));
        return 0;
    }
    /* Not preloaded here: the driver talks to the fake directly. */
    CHECK(cuInit(0) == CUDA_SUCCESS);
    uuid_of(0, uuids[0]);
    uuid_of(1, uuids[1]);
    snprintf(root, sizeof(root), "/tmp/vgpu-libtest-%d", (int)getpid());
    snprintf(cache, sizeof(cache), "CUDA_DEVICE_MEMORY_SHARED_CACHE=%s/standalone.region", root);

    make_std_claim(GiB, "");
    if (getenv("VGPU_TEST_ONLY") != NULL) {
        expect(getenv("VGPU_TEST_ONLY"), NULL, 0, true);
        return check_report("lib_test");
    }
    expect("limit", NULL, 0, true);
    expect("paths", NULL, 0, true);
    expect("procaddr", NULL, 0, true);
    expect("share", NULL, 0, true);
    expect("race", NULL, 0, true);
    expect("pools", NULL, 0, true);
    expect("pool_race", NULL, 0, true);
    expect("nvml", NULL, 0, true);
    expect("fork", NULL, 0, true);
    expect_two_claims_nvml();
    {
        /* Fewer kills under valgrind and the sanitizers: each start costs seconds there. */
        const char *env[] = {getenv("VGPU_TEST_VALGRIND") != NULL ? "VGPU_TEST_KILLS=10"
                             : getenv("VGPU_TEST_PRELOAD_PREFIX") != NULL ? "VGPU_TEST_KILLS=100"
                                                                          : NULL,
                             NULL};
        expect("killstress", env, 0, true);
        /* The last process killed: a fresh one gets the whole limit back. */
        expect("lastkill", NULL, 0, true);
    }
    {
        const char *env[] = {"VGPU_FAKE_CONTEXT_MEMORY=64Mi", NULL};
        expect("overhead", env, 0, true);
    }
    /* A process in its own pid namespace learns its host pid from the claim's map. */
    {
        char cfg[1024];
        snprintf(cfg, sizeof(cfg),
                 "version=1\nclaim=a\ndevice.count=1\ndevice.0.uuid=%s\n"
                 "device.0.memory_limit_bytes=1073741824\ndevice.0.sm_limit_percent=30\n",
                 uuids[0]);
        make_claim(cfg);
        expect_hostpid();
    }
    /* Env may lower a configured limit, never raise it. */
    {
        const char *lower[] = {"CUDA_DEVICE_MEMORY_LIMIT_0=512m", "VGPU_TEST_EXPECT=536870912",
                               NULL};
        const char *raise[] = {"CUDA_DEVICE_MEMORY_LIMIT=4g", "VGPU_TEST_EXPECT=1073741824",
                               NULL};
        const char *bad[] = {"CUDA_DEVICE_MEMORY_LIMIT_0=1.5g", NULL};
        expect("expect_total", lower, 0, true);
        expect("expect_total", raise, 0, true);
        expect("fail_closed", bad, 0, false);
    }
    /* enforcement=disabled: nothing enforced. */
    make_std_claim(GiB, "");
    {
        char cfg[1024];
        snprintf(cfg, sizeof(cfg),
                 "version=1\nclaim=a\nenforcement=disabled\ndevice.count=1\n"
                 "device.0.uuid=%s\ndevice.0.memory_limit_bytes=1073741824\n"
                 "device.0.sm_limit_percent=0\n", uuids[0]);
        make_claim(cfg);
    }
    {
        const char *env[] = {"VGPU_TEST_EXPECT=0", NULL};
        expect("expect_total", env, 0, true);
    }
    /* Invalid configs fail closed on their GPUs: wrong version, duplicate key. */
    make_std_claim(GiB, "version=1\n");
    expect("fail_closed", NULL, 0, false);
    {
        char cfg[1024];
        snprintf(cfg, sizeof(cfg), "version=2\nclaim=a\ndevice.count=1\ndevice.0.uuid=%s\n",
                 uuids[0]);
        make_claim(cfg);
        expect("fail_closed", NULL, 0, false);
    }
    /* Pools count on their own device; two claims on one GPU add up. */
    {
        char cfg[1024], path[600];
        snprintf(cfg, sizeof(cfg),
                 "version=1\nclaim=a\ndevice.count=2\ndevice.0.uuid=%s\n"
                 "device.0.memory_limit_bytes=1073741824\ndevice.0.sm_limit_percent=0\n"
                 "device.1.uuid=%s\ndevice.1.memory_limit_bytes=268435456\n"
                 "device.1.sm_limit_percent=0\n", uuids[0], uuids[1]);
        make_claim(cfg);
        expect("pooldev", NULL, 0, true);
        make_std_claim(GiB, "");
        snprintf(path, sizeof(path), "mkdir -p %s/claim-b/shm", root);
        CHECK(system(path) == 0);
        snprintf(cfg, sizeof(cfg),
                 "version=1\nclaim=b\ndevice.count=1\ndevice.0.uuid=%s\n"
                 "device.0.memory_limit_bytes=536870912\ndevice.0.sm_limit_percent=0\n",
                 uuids[0]);
        snprintf(path, sizeof(path), "%s/claim-b/config", root);
        write_file(path, cfg);
        snprintf(path, sizeof(path), "%s/claim-b/shm/region", root);
        int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0666);
        CHECK(fd >= 0 && ftruncate(fd, VGPU_REGION_SIZE) == 0);
        close(fd);
        expect("twoclaims", NULL, 0, true);
        const char *capped[] = {"CUDA_DEVICE_MEMORY_LIMIT_0=1200m", NULL};
        expect("twoclaims_capped", capped, 0, true);
    }
    /* An unusable region fails closed: never N processes x the limit. */
    {
        char path[600];
        snprintf(path, sizeof(path), "%s/claim-a/shm/region", root);
        make_std_claim(GiB, "");
        CHECK(truncate(path, 100) == 0);
        expect("closed", NULL, 0, false);
        make_std_claim(GiB, "");
        CHECK(unlink(path) == 0);
        expect("closed", NULL, 0, false);
        CHECK(access(path, F_OK) != 0); /* never created in enforced mode */
        make_std_claim(GiB, "");
        expect("limit", NULL, 0, true); /* initialises it */
        corrupt_magic(path);
        expect("closed", NULL, 0, false);
        make_std_claim(GiB, "");
        expect("replaced", NULL, 0, false);
        make_std_claim(GiB, "");
        expect_slots_exhausted(path);
    }
    /* Standalone: HAMi env vars alone, region created on demand. */
    {
        char nr[600];
        snprintf(nr, sizeof(nr), "VGPU_CLAIMS_ROOT=%s/none", root);
        const char *env[] = {nr, cache, "CUDA_DEVICE_MEMORY_LIMIT_0=1g",
                             "VGPU_TEST_EXPECT=1073741824", NULL};
        const char *bad[] = {nr, "CUDA_DEVICE_MEMORY_LIMIT=abc", "VGPU_TEST_EXPECT=0", NULL};
        expect("expect_total", env, 0, true);
        CHECK(file_size(cache + strlen("CUDA_DEVICE_MEMORY_SHARED_CACHE=")) == VGPU_REGION_SIZE);
        expect("expect_total", bad, 0, false);
        unlink(cache + strlen("CUDA_DEVICE_MEMORY_SHARED_CACHE="));
        const char *idle[] = {nr, cache, "CUDA_DEVICE_MEMORY_LIMIT_0=1g", NULL};
        if (getenv("VGPU_TEST_VALGRIND") == NULL)
            expect("idle", idle, 0, true);
        expect("bin-true", idle, 0, true);
        CHECK(access(cache + strlen("CUDA_DEVICE_MEMORY_SHARED_CACHE="), F_OK) != 0);
    }
    snprintf(errfile, sizeof(errfile), "rm -rf %s %s.*.err", root, root);
    if (check_failures == 0 && getenv("VGPU_TEST_KEEP") == NULL && system(errfile) != 0)
        fprintf(stderr, "cannot clean %s\n", root);
    return check_report("lib_test");
}

int main(int argc, char **argv)
{
    ssize_t n = readlink("/proc/self/exe", self_exe, sizeof(self_exe) - 1);

    if (n <= 0)
        return 2;
    self_exe[n] = '\0';
    if (argc < 2)
        return run_driver();
    if (strcmp(argv[1], "hold") == 0 && argc == 3)
        return sc_hold(argv[2]);
    if (strcmp(argv[1], "grab") == 0)
        return sc_grab();
    if (strcmp(argv[1], "pgrab") == 0)
        return sc_pgrab();
    if (strcmp(argv[1], "churn") == 0 && argc == 3)
        return sc_churn(argv[2]);
    if (strcmp(argv[1], "busyhold") == 0 && argc == 3)
        return sc_busyhold(argv[2]);
    static const struct {
        const char *name;
        void (*fn)(void);
    } scenarios[] = {
        {"limit", sc_limit},       {"paths", sc_paths},
        {"procaddr", sc_procaddr}, {"share", sc_share},
        {"race", sc_race},         {"fail_closed", sc_fail_closed},
        {"expect_total", sc_expect_total}, {"nvml", sc_nvml},
        {"overhead", sc_overhead}, {"fork", sc_fork},
        {"hostpid", sc_hostpid},   {"pools", sc_pools},
        {"pool_race", sc_pool_race},
        {"killstress", sc_killstress}, {"lastkill", sc_lastkill},
        {"closed", sc_closed},     {"replaced", sc_replaced},
        {"twoclaims", sc_twoclaims}, {"pooldev", sc_pooldev},
        {"twoclaims_capped", sc_twoclaims_capped},
        {"idle", sc_idle},         {"nvml_procs", sc_nvml_procs},
    };
    for (size_t i = 0; i < sizeof(scenarios) / sizeof(scenarios[0]); i++) {
        if (strcmp(argv[1], scenarios[i].name) == 0) {
            scenarios[i].fn();
            return check_failures != 0;
        }
    }
    fprintf(stderr, "unknown scenario %s\n", argv[1]);
    return 2;
}
