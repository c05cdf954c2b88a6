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
 * overhead.c - per-call cost added by libvgpu.so, measured in one process:
 * the same fake driver called straight and through libvgpu.so's wrappers,
 * with a claim config and region in place (the enforced, claim-wide path).
 *
 * usage: overhead LIBVGPU.so FAKE_LIBCUDA.so.1 [sm-limit]
 * Prints ns per call for both, the difference and the ratio. Targets:
 * <= 15 ns added per cuLaunchKernel, <= 150 ns per cuMemAlloc+cuMemFree; the
 * stream-ordered pair (pool accounting) is printed without a target.
 * With "sm-limit" the claim also sets a 50 % SM limit (workConserving, no
 * other claim: the limiter admits every launch through the bucket's fast
 * path) and only cuLaunchKernel is measured, without a target.
 * Each figure is the best of several interleaved rounds (shared CPUs).
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "claimns.h"
#include "vgpu_cuda.h"
#include "vgpu_region.h"

#define ROUNDS 5
#define LAUNCHES 1000000
#define PAIRS 200000

struct api {
    PFN_cuLaunchKernel launch;
    PFN_cuMemAlloc_v2 alloc;
    PFN_cuMemFree_v2 free_;
    PFN_cuMemAllocAsync alloc_async;
    PFN_cuMemFreeAsync free_async;
};

static double now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static double time_launch(const struct api *a, CUfunction f)
{
    double t0 = now_ns();

    for (int i = 0; i < LAUNCHES; i++) {
        if (a->launch(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL) != CUDA_SUCCESS)
            return -1;
    }
    return (now_ns() - t0) / LAUNCHES;
}

static double time_alloc(const struct api *a)
{
    double t0 = now_ns();
    CUdeviceptr p;

    for (int i = 0; i < PAIRS; i++) {
        if (a->alloc(&p, 1 << 20) != CUDA_SUCCESS || a->free_(p) != CUDA_SUCCESS)
            return -1;
    }
    return (now_ns() - t0) / PAIRS;
}

/* Stream-ordered pairs on the default pool: the pool serves them from the memory it keeps. */
static double time_alloc_async(const struct api *a)
{
    double t0 = now_ns();
    CUdeviceptr p;

    for (int i = 0; i < PAIRS; i++) {
        if (a->alloc_async(&p, 1 << 20, NULL) != CUDA_SUCCESS ||
            a->free_async(p, NULL) != CUDA_SUCCESS)
            return -1;
    }
    return (now_ns() - t0) / PAIRS;
}

/*
 * Writes a claim (8 GiB limit on GPU 0, sm percent of SM time, 0 = none) under
 * dir, as the kubelet plugin would.
 */
static int make_claim(const char *dir, const char *uuid, unsigned sm)
{
    char path[512];
    FILE *f;
    int fd;

    if (mkdir(dir, 0777) != 0)
        return -1;
    snprintf(path, sizeof(path), "%s/bench", dir);
    if (mkdir(path, 0777) != 0)
        return -1;
    snprintf(path, sizeof(path), "%s/bench/shm", dir);
    if (mkdir(path, 0777) != 0)
        return -1;
    snprintf(path, sizeof(path), "%s/bench/config", dir);
    f = fopen(path, "w");
    if (f == NULL)
        return -1;
    fprintf(f, "version=1\nclaim=bench\ncompute_policy=workConserving\ndevice.count=1\n"
               "device.0.uuid=%s\ndevice.0.memory_limit_bytes=8589934592\n"
               "device.0.sm_limit_percent=%u\n", uuid, sm);
    fclose(f);
    snprintf(path, sizeof(path), "%s/bench/shm/region", dir);
    fd = open(path, O_RDWR | O_CREAT, 0666);
    if (fd < 0 || ftruncate(fd, VGPU_REGION_SIZE) != 0)
        return -1;
    close(fd);
    return 0;
}

static void report(const char *what, double direct, double via, double target)
{
    printf("%-22s direct %7.1f ns   libvgpu %7.1f ns   added %6.1f ns   ratio %.2f   "
           "(target <= %.0f ns added: %s)\n",
           what, direct, via, via - direct, via / direct, target,
           via - direct <= target ? "met" : "MISSED");
}

#define RESOLVE(h, name, out)                                                                      \
    do {                                                                                           \
        *(void **)&(out) = dlsym(h, name);                                                         \
        if ((out) == NULL) {                                                                       \
            fprintf(stderr, "overhead: %s: %s\n", name, dlerror());                                \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

int main(int argc, char **argv)
{
    char dir[] = "/tmp/vgpu-bench-XXXXXX", uuid[64], cmd[128], *p;
    struct api direct, via;
    PFN_cuInit init;
    PFN_cuDeviceGetUuid_v2 get_uuid;
    PFN_cuDevicePrimaryCtxRetain retain;
    PFN_cuCtxSetCurrent set_current;
    PFN_cuModuleLoadData load;
    PFN_cuModuleGetFunction get_fn;
    PFN_cuGetProcAddress_v2 gpa;
    CUcontext ctx;
    CUmodule mod;
    CUfunction fn;
    CUuuid u;
    void *cuda, *vgpu;
    double best[5] = {1e18, 1e18, 1e18, 1e18, 1e18}, async_direct = 1e18;
    int limited = argc == 4 && strcmp(argv[3], "sm-limit") == 0;

    if (argc != 3 && !limited) {
        fprintf(stderr, "usage: overhead LIBVGPU.so FAKE_LIBCUDA.so.1 [sm-limit]\n");
        return 2;
    }
    cuda = dlopen(argv[2], RTLD_NOW | RTLD_GLOBAL);
    if (cuda == NULL) {
        fprintf(stderr, "overhead: %s\n", dlerror());
        return 1;
    }
    RESOLVE(cuda, "cuInit", init);
    RESOLVE(cuda, "cuDeviceGetUuid_v2", get_uuid);
    RESOLVE(cuda, "cuDevicePrimaryCtxRetain", retain);
    RESOLVE(cuda, "cuCtxSetCurrent", set_current);
    RESOLVE(cuda, "cuModuleLoadData", load);
    RESOLVE(cuda, "cuModuleGetFunction", get_fn);
    RESOLVE(cuda, "cuLaunchKernel", direct.launch);
    RESOLVE(cuda, "cuMemAlloc_v2", direct.alloc);
    RESOLVE(cuda, "cuMemFree_v2", direct.free_);
    RESOLVE(cuda, "cuMemAllocAsync", direct.alloc_async);
    RESOLVE(cuda, "cuMemFreeAsync", direct.free_async);
    if (init(0) != CUDA_SUCCESS || get_uuid(&u, 0) != CUDA_SUCCESS ||
        retain(&ctx, 0) != CUDA_SUCCESS || set_current(ctx) != CUDA_SUCCESS ||
        load(&mod, "bench") != CUDA_SUCCESS || get_fn(&fn, mod, "bench_0us") != CUDA_SUCCESS) {
        fprintf(stderr, "overhead: fake driver setup failed\n");
        return 1;
    }
    p = uuid + sprintf(uuid, "GPU-");
    for (int i = 0; i < 16; i++)
        p += sprintf(p, "%s%02x", i == 4 || i == 6 || i == 8 || i == 10 ? "-" : "",
                     (unsigned char)u.bytes[i]);
    if (mkdtemp(dir) == NULL || rmdir(dir) != 0 || make_claim(dir, uuid, limited ? 50 : 0) != 0) {
        fprintf(stderr, "overhead: cannot write the claim under %s\n", dir);
        return 1;
    }
    setenv("VGPU_CLAIMS_ROOT", dir, 1);
    if (vgpu_test_enter_claims_ns(dir) != 0) {
        fprintf(stderr, "overhead: cannot mount the claim read-only in a private mount namespace "
                "(run as root)\n");
        return 1;
    }
    /* The application's view: its resolver and allocators come from libvgpu.so. */
    vgpu = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (vgpu == NULL) {
        fprintf(stderr, "overhead: %s\n", dlerror());
        return 1;
    }
    RESOLVE(vgpu, "cuGetProcAddress_v2", gpa);
    RESOLVE(vgpu, "cuMemAlloc_v2", via.alloc);
    RESOLVE(vgpu, "cuMemFree_v2", via.free_);
    RESOLVE(vgpu, "cuMemAllocAsync", via.alloc_async);
    RESOLVE(vgpu, "cuMemFreeAsync", via.free_async);
    if (gpa("cuLaunchKernel", (void **)&via.launch, 12000, 0, NULL) != CUDA_SUCCESS) {
        fprintf(stderr, "overhead: cuGetProcAddress(cuLaunchKernel) failed\n");
        return 1;
    }
    if (limited) {
        /* The first launches start the limiter; it opens the bucket at its first period. */
        if (time_launch(&via, fn) < 0)
            return 1;
        usleep(300000);
        for (int r = 0; r < ROUNDS; r++) {
            double d = time_launch(&direct, fn), v = time_launch(&via, fn);

            if (d < 0 || v < 0) {
                fprintf(stderr, "overhead: a launch failed in round %d\n", r);
                return 1;
            }
            best[0] = d < best[0] ? d : best[0];
            best[1] = v < best[1] ? v : best[1];
        }
        printf("%-22s direct %7.1f ns   libvgpu %7.1f ns   added %6.1f ns   ratio %.2f\n",
               "cuLaunchKernel, 50% SM", best[0], best[1], best[1] - best[0], best[1] / best[0]);
        snprintf(cmd, sizeof(cmd), "%s/bench/config", dir);
        umount2(cmd, MNT_DETACH);
        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        return system(cmd) == 0 ? 0 : 1;
    }
    for (int r = 0; r < ROUNDS; r++) {
        double v[5] = {time_launch(&direct, fn), time_launch(&via, fn), time_alloc(&direct),
                       time_alloc(&via), time_alloc_async(&via)};
        double d = time_alloc_async(&direct);

        if (d < 0) {
            fprintf(stderr, "overhead: a call failed in round %d\n", r);
            return 1;
        }
        if (d < async_direct)
            async_direct = d;
        for (int i = 0; i < 5; i++) {
            if (v[i] < 0) {
                fprintf(stderr, "overhead: a call failed in round %d\n", r);
                return 1;
            }
            if (v[i] < best[i])
                best[i] = v[i];
        }
    }
    report("cuLaunchKernel", best[0], best[1], 15);
    report("cuMemAlloc+cuMemFree", best[2], best[3], 150);
    /* No target: each pool allocation queries the pool twice before and once after. */
    printf("%-22s direct %7.1f ns   libvgpu %7.1f ns   added %6.1f ns   ratio %.2f\n",
           "cuMemAllocAsync+Free", async_direct, best[4], best[4] - async_direct,
           best[4] / async_direct);
    /* The claim's config is a mount point in our namespace: unmount it before removing. */
    snprintf(cmd, sizeof(cmd), "%s/bench/config", dir);
    umount2(cmd, MNT_DETACH);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "overhead: cannot remove %s\n", dir);
    return 0;
}
