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
 * lib_test_helpers.c - helpers of the scenarios of lib_test (run inside the preloaded process).
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

CUcontext ctx_on(int dev)
{
    CUcontext ctx = NULL;

    CHECK(cuInit(0) == CUDA_SUCCESS);
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev) == CUDA_SUCCESS);
    CHECK(cuCtxSetCurrent(ctx) == CUDA_SUCCESS);
    return ctx;
}

/* Claim-wide used bytes of uuid in the region at path (read-only, as the monitor does). */
uint64_t region_used(const char *path, const char *uuid)
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

uint64_t now_realtime_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}


/* Refusal counters of device record 0 of the claim's region (read-only, as the monitor does). */
uint64_t refusals0(uint64_t *last_bytes, uint64_t *last_ns)
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

char *claim_region(void)
{
    static char path[512];

    snprintf(path, sizeof(path), "%s/claim-a/shm/region", getenv("VGPU_CLAIMS_ROOT"));
    return path;
}

uint64_t used0(void)
{
    return region_used(claim_region(), getenv("VGPU_TEST_UUID0"));
}

uint64_t mem_free(void)
{
    size_t f = 0, t = 0;

    CHECK(cuMemGetInfo_v2(&f, &t) == CUDA_SUCCESS);
    return f;
}

uint64_t mem_total(void)
{
    size_t f = 0, t = 0;

    CHECK(cuMemGetInfo_v2(&f, &t) == CUDA_SUCCESS);
    return t;
}

/* Starts this program with args, its stdin and stdout piped to us. */
pid_t spawn_helper(char *const args[], int *to, int *from)
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
void read_line(int fd, char *buf, size_t len)
{
    size_t n = 0;

    while (n + 1 < len && read(fd, buf + n, 1) == 1 && buf[n] != '\n')
        n++;
    buf[n] = '\0';
}

int kill_helper_at_random(const char *scenario, unsigned *seed)
{
    char seed_arg[32], line[64];
    char *args[] = {self_exe, (char *)scenario, seed_arg, NULL};
    struct timespec ts = {0, 0};
    int to, from, st;
    pid_t pid;

    snprintf(seed_arg, sizeof(seed_arg), "%u", rand_r(seed));
    pid = spawn_helper(args, &to, &from);
    read_line(from, line, sizeof(line));
    CHECK(strcmp(line, "ready") == 0);
    ts.tv_nsec = (long)(rand_r(seed) % 3000) * 1000;
    nanosleep(&ts, NULL);
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    close(to);
    close(from);
    return st;
}

/* A pool on GPU 0 whose release threshold keeps everything it reserves. */
CUmemoryPool keeping_pool(void)
{
    CUmemPoolProps props = {.allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                            .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    cuuint64_t keep = UINT64_MAX;
    CUmemoryPool pool = NULL;

    CHECK(cuMemPoolCreate(&pool, &props) == CUDA_SUCCESS);
    CHECK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep) == CUDA_SUCCESS);
    return pool;
}
