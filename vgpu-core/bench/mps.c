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
 * mps.c - four claims' processes on one fake GPU, under MPS and
 * time-sliced: what MPS buys small kernels, and how well each claim is
 * held to its share of the SMs.
 *
 * usage: mps LIBVGPU.so FAKE_LIBCUDA.so.1
 * Each process has its own claim (cores 10, 20, 30, 40: the config's
 * mps.activeThreadPercent.0) mounted as the plugin injects it, and sets
 * CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=100 itself, which libvgpu.so's cuInit
 * replaces with its claim's share. Under MPS the processes' pipe directory
 * holds a listening control socket (all four are clients of one daemon);
 * time-sliced they have none. Printed, not asserted (the figures depend on
 * the machine's load):
 *   - small kernels (0.2 ms, 4 blocks, one stream per process): the
 *     aggregate kernels per second under MPS, time-sliced, and their ratio;
 *   - full grids (1 ms on the whole GPU) under MPS: each claim's share of
 *     the SMs (its kernels' whole-GPU time per second of wall time) against
 *     its cores, and the mean absolute error in points.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "claimns.h"
#include "vgpu_cuda.h"
#include "vgpu_region.h"

#define PROCS 4
#define RUN_S 3.0
#define BATCH 8

static const unsigned cores[PROCS] = {10, 20, 30, 40};

/* One run's result from a process. */
struct result {
    int ok;
    double kernels;
    double seconds;
};

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* GPU 0's UUID, from a child (the parent never initialises CUDA: its children could not). */
static int gpu_uuid(const char *fake, char uuid[64])
{
    int fds[2], st;
    pid_t pid;

    if (pipe(fds) != 0)
        return -1;
    pid = fork();
    if (pid == 0) {
        void *cuda = dlopen(fake, RTLD_NOW | RTLD_GLOBAL);
        PFN_cuInit init = cuda != NULL ? (PFN_cuInit)dlsym(cuda, "cuInit") : NULL;
        PFN_cuDeviceGetUuid_v2 get = cuda != NULL ? (PFN_cuDeviceGetUuid_v2)dlsym(cuda, "cuDeviceGetUuid_v2")
                                                  : NULL;
        char out[64] = "", *p = out;
        CUuuid u;

        if (init != NULL && get != NULL && init(0) == CUDA_SUCCESS && get(&u, 0) == CUDA_SUCCESS) {
            p += sprintf(p, "GPU-");
            for (int i = 0; i < 16; i++)
                p += sprintf(p, "%s%02x", i == 4 || i == 6 || i == 8 || i == 10 ? "-" : "",
                             (unsigned char)u.bytes[i]);
        }
        _exit(write(fds[1], out, sizeof(out)) == (ssize_t)sizeof(out) && out[0] != '\0' ? 0 : 1);
    }
    close(fds[1]);
    if (pid < 0 || read(fds[0], uuid, 64) != 64 || waitpid(pid, &st, 0) != pid ||
        !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        close(fds[0]);
        return -1;
    }
    close(fds[0]);
    return 0;
}

/* <root>/c/config with the MPS lines of a claim of the given cores, and its region. */
static int write_claim(const char *root, const char *uuid, unsigned pct)
{
    char path[512];
    FILE *f;
    int fd;

    snprintf(path, sizeof(path), "mkdir -p %s/c/shm", root);
    if (system(path) != 0)
        return -1;
    snprintf(path, sizeof(path), "%s/c/config", root);
    if ((f = fopen(path, "w")) == NULL)
        return -1;
    fprintf(f,
            "version=1\nclaim=c\ndevice.count=1\ndevice.0.uuid=%s\n"
            "device.0.memory_limit_bytes=%llu\ndevice.0.sm_limit_percent=0\n"
            "mps.activeThreadPercent.0=%u\nmps.pinnedMemoryLimit.0=%llu\n",
            uuid, 1ull << 30, pct, 1ull << 30);
    fclose(f);
    snprintf(path, sizeof(path), "%s/c/shm/region", root);
    fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0666);
    if (fd < 0 || ftruncate(fd, VGPU_REGION_SIZE) != 0)
        return -1;
    close(fd);
    return 0;
}

#define RESOLVE(h, name, var)                                                                      \
    do {                                                                                           \
        *(void **)&(var) = dlsym((h), (name));                                                     \
        if ((var) == NULL)                                                                         \
            return r;                                                                              \
    } while (0)

/*
 * One process: its claim mounted, the application's view through
 * libvgpu.so; after the go byte, launches kernel (grid blocks) in batches
 * on one stream for RUN_S seconds.
 */
static struct result run_process(const char *lib, const char *fake, const char *root,
                                 const char *pipe_dir, const char *kernel, unsigned grid, int go)
{
    struct result r = {0, 0, 0};
    PFN_cuInit init;
    PFN_cuDevicePrimaryCtxRetain retain;
    PFN_cuCtxSetCurrent set_current;
    PFN_cuModuleLoadData load;
    PFN_cuModuleGetFunction get_fn;
    PFN_cuLaunchKernel launch;
    PFN_cuCtxSynchronize sync;
    CUcontext ctx;
    CUmodule mod;
    CUfunction fn;
    void *cuda, *vgpu;
    double t0;
    char byte;

    setenv("VGPU_CLAIMS_ROOT", root, 1);
    setenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "100", 1);
    if (pipe_dir != NULL)
        setenv("CUDA_MPS_PIPE_DIRECTORY", pipe_dir, 1);
    if (vgpu_test_enter_claims_ns(root) != 0 || vgpu_test_serve_mps_users(root) < 0)
        return r;
    cuda = dlopen(fake, RTLD_NOW | RTLD_GLOBAL);
    vgpu = cuda != NULL ? dlopen(lib, RTLD_NOW | RTLD_LOCAL) : NULL;
    if (vgpu == NULL)
        return r;
    RESOLVE(vgpu, "cuInit", init);
    RESOLVE(vgpu, "cuDevicePrimaryCtxRetain", retain);
    RESOLVE(vgpu, "cuLaunchKernel", launch);
    RESOLVE(vgpu, "cuCtxSynchronize", sync);
    RESOLVE(cuda, "cuCtxSetCurrent", set_current);
    RESOLVE(cuda, "cuModuleLoadData", load);
    RESOLVE(cuda, "cuModuleGetFunction", get_fn);
    if (init(0) != CUDA_SUCCESS || retain(&ctx, 0) != CUDA_SUCCESS ||
        set_current(ctx) != CUDA_SUCCESS || load(&mod, "bench") != CUDA_SUCCESS ||
        get_fn(&fn, mod, kernel) != CUDA_SUCCESS)
        return r;
    if (read(go, &byte, 1) != 1)
        return r;
    t0 = now_s();
    while (now_s() - t0 < RUN_S) {
        for (int i = 0; i < BATCH; i++) {
            if (launch(fn, grid, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL) != CUDA_SUCCESS)
                return r;
        }
        if (sync() != CUDA_SUCCESS)
            return r;
        r.kernels += BATCH;
    }
    r.seconds = now_s() - t0;
    r.ok = 1;
    return r;
}

/* Runs the PROCS processes together; their results in res. Returns 0 when all worked. */
static int run_all(const char *lib, const char *fake, const char *dir, const char *pipe_dir,
                   const char *kernel, unsigned grid, struct result res[PROCS])
{
    int go[2], out[PROCS][2], failed = 0;
    pid_t pids[PROCS];

    if (pipe(go) != 0)
        return -1;
    for (int i = 0; i < PROCS; i++) {
        char root[300];

        snprintf(root, sizeof(root), "%s/root%d", dir, i);
        if (pipe(out[i]) != 0)
            return -1;
        pids[i] = fork();
        if (pids[i] == 0) {
            struct result r;

            close(go[1]);
            r = run_process(lib, fake, root, pipe_dir, kernel, grid, go[0]);
            _exit(write(out[i][1], &r, sizeof(r)) == (ssize_t)sizeof(r) ? 0 : 1);
        }
        close(out[i][1]);
    }
    close(go[0]);
    usleep(300000); /* all initialised */
    for (int i = 0; i < PROCS; i++)
        failed |= write(go[1], "g", 1) != 1;
    close(go[1]);
    for (int i = 0; i < PROCS; i++) {
        int st;

        if (read(out[i][0], &res[i], sizeof(res[i])) != (ssize_t)sizeof(res[i]))
            res[i].ok = 0;
        close(out[i][0]);
        failed |= waitpid(pids[i], &st, 0) != pids[i] || !res[i].ok;
    }
    return failed ? -1 : 0;
}

static double throughput(const struct result res[PROCS])
{
    double sum = 0;

    for (int i = 0; i < PROCS; i++)
        sum += res[i].kernels / res[i].seconds;
    return sum;
}

int main(int argc, char **argv)
{
    char dir[] = "/tmp/vgpu-bench-mps-XXXXXX", uuid[64], pipe_dir[300], cmd[400];
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    struct result mps[PROCS], sliced[PROCS], full[PROCS];
    double mae = 0;
    int lfd, rc = 0;

    if (argc != 3) {
        fprintf(stderr, "usage: mps LIBVGPU.so FAKE_LIBCUDA.so.1\n");
        return 2;
    }
    if (vgpu_test_claims_ns_supported() != 0) {
        printf("skip mps bench: claims must be read-only mounts in a private mount namespace "
               "(run as root)\n");
        return 0;
    }
    if (gpu_uuid(argv[2], uuid) != 0 || mkdtemp(dir) == NULL) {
        fprintf(stderr, "mps bench: fake driver setup failed\n");
        return 1;
    }
    for (int i = 0; i < PROCS; i++) {
        char root[300];

        snprintf(root, sizeof(root), "%s/root%d", dir, i);
        if (write_claim(root, uuid, cores[i]) != 0) {
            fprintf(stderr, "mps bench: cannot write the claim under %s\n", root);
            return 1;
        }
    }
    /* The control daemon, as far as a client sees it: a listening socket named control. */
    snprintf(pipe_dir, sizeof(pipe_dir), "%s/pipe", dir);
    snprintf(addr.sun_path, sizeof(addr.sun_path), "%s/control", pipe_dir);
    lfd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
    if (mkdir(pipe_dir, 0755) != 0 || lfd < 0 ||
        bind(lfd, (struct sockaddr *)&addr, sizeof(addr)) != 0 || listen(lfd, 64) != 0) {
        fprintf(stderr, "mps bench: control socket: %s\n", strerror(errno));
        return 1;
    }
    if (run_all(argv[1], argv[2], dir, pipe_dir, "k_200us", 4, mps) != 0 ||
        run_all(argv[1], argv[2], dir, NULL, "k_200us", 4, sliced) != 0 ||
        run_all(argv[1], argv[2], dir, pipe_dir, "k_1000us", 1024, full) != 0) {
        fprintf(stderr, "mps bench: a process failed\n");
        rc = 1;
    } else {
        printf("MPS, %d processes, 0.2 ms small kernels: %8.0f kernels/s under MPS, %8.0f "
               "time-sliced, ratio %.2f\n",
               PROCS, throughput(mps), throughput(sliced), throughput(mps) / throughput(sliced));
        for (int i = 0; i < PROCS; i++) {
            double share = full[i].kernels * 1e-3 / full[i].seconds * 100;

            mae += (share > cores[i] ? share - cores[i] : cores[i] - share) / PROCS;
            printf("MPS, full grids: claim %d, cores %2u: %5.2f%% of the SMs\n", i, cores[i],
                   share);
        }
        printf("MPS, full grids: mean absolute error %.2f points\n", mae);
    }
    close(lfd);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    return system(cmd) == 0 ? rc : 1;
}
