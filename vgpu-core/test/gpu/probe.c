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
 * probe.c - the CUDA driver API cases of run.sh, built there with gcc against
 * NVIDIA's cuda.h (-DVGPU_PROBE_REAL) and linked with libcuda, or against
 * vgpu-core's own headers and the fake driver (run.sh --fake, which checks
 * the script and this program without a GPU). Each case prints what it
 * measured as "key value" lines; run.sh judges the figures.
 *
 *   probe uuid
 *       the UUID of device 0 (GPU-...), for the claim's config
 *   probe streams PTX FUNC THREADS SECONDS KERNEL_US WARMUP_S
 *       THREADS host threads, each launching FUNC (spin, see spin.cu) with a
 *       single block of 32 threads (a small grid) into a stream of its own,
 *       four launches per synchronisation, for SECONDS; then the GPU's busy
 *       share from WARMUP_S on and its busiest second, from the kernels' own
 *       %globaltimer stamps (the union of their intervals: the busy time
 *       NVML counts and the limiter controls)
 *   probe vmm BLOCK_MIB BLOCKS
 *       cuMemCreate of BLOCKS blocks of BLOCK_MIB, each created block
 *       mapped into a reserved range and given access; then every block
 *       unmapped and released, and one created again
 *   probe overhead PTX FUNC N
 *       ns per cuLaunchKernel of FUNC (empty) over N launches, best of 3
 *   probe vmmfd BLOCK_MIB BLOCKS
 *       BLOCKS times: cuMemCreate of BLOCK_MIB shareable as a POSIX fd,
 *       exported to an fd, released, the fd kept ("create i rc"); then
 *       "created n" and "held n"; after a line on stdin it closes the fds
 *       ("closed n"), after another it exits: what the driver holds for
 *       open exported fds, read between the steps
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef VGPU_PROBE_REAL
#include <cuda.h>
#else
#include "vgpu_cuda.h"
#endif

#define MIB (1024ull * 1024)
#define SLOTS 8192 /* launches recorded per thread */
#define MAX_THREADS 16
#define MAX_BLOCKS 16

#define TRY(call)                                                                                  \
    do {                                                                                           \
        CUresult rc_ = (call);                                                                     \
        if (rc_ != CUDA_SUCCESS) {                                                                 \
            fprintf(stderr, "probe: %s: error %d\n", #call, (int)rc_);                             \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static CUcontext ctx;

static uint64_t mono_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The primary context of device 0, current in the calling thread. */
static void setup(void)
{
    CUdevice dev;

    TRY(cuInit(0));
    TRY(cuDeviceGet(&dev, 0));
    TRY(cuDevicePrimaryCtxRetain(&ctx, dev));
    TRY(cuCtxSetCurrent(ctx));
}

/* Loads func from the file at path (PTX text; anything for the fake driver). */
static CUfunction load(const char *path, const char *func)
{
    static char image[1 << 20];
    CUmodule mod;
    CUfunction f;
    FILE *fp = fopen(path, "rb");
    size_t n;

    if (fp == NULL) {
        perror(path);
        exit(1);
    }
    n = fread(image, 1, sizeof(image) - 1, fp);
    fclose(fp);
    image[n] = '\0';
    TRY(cuModuleLoadData(&mod, image));
    TRY(cuModuleGetFunction(&f, mod, func));
    return f;
}

static int cmd_uuid(void)
{
    CUdevice dev;
    CUuuid u;
    const unsigned char *b;

    TRY(cuInit(0));
    TRY(cuDeviceGet(&dev, 0));
    TRY(cuDeviceGetUuid(&u, dev));
    b = (const unsigned char *)u.bytes;
    printf("GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x\n", b[0],
           b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
           b[15]);
    return 0;
}

/* One launching thread of the streams case. */
struct streamer {
    pthread_t t;
    CUfunction f;
    CUdeviceptr stamps; /* SLOTS x {start, end} */
    unsigned long long kernel_ns;
    uint64_t until;
    unsigned launches;
};

static void *stream_main(void *arg)
{
    struct streamer *s = arg;
    CUstream st;

    TRY(cuCtxSetCurrent(ctx));
    TRY(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    while (mono_ns() < s->until && s->launches < SLOTS) {
        CUdeviceptr out = s->stamps + (CUdeviceptr)s->launches * 16;
        void *params[] = {&s->kernel_ns, &out};

        TRY(cuLaunchKernel(s->f, 1, 1, 1, 32, 1, 1, 0, st, params, NULL));
        if (++s->launches % 4 == 0)
            TRY(cuStreamSynchronize(st));
    }
    TRY(cuStreamSynchronize(st));
    return NULL;
}

struct interval {
    uint64_t a, b;
};

static int by_start(const void *x, const void *y)
{
    const struct interval *p = x, *q = y;

    return p->a < q->a ? -1 : p->a > q->a;
}

/* Busy ns within [from, to) of the n intervals sorted by start: their union. */
static uint64_t union_within(const struct interval *v, size_t n, uint64_t from, uint64_t to)
{
    uint64_t busy = 0, a = 0, b = 0;

    for (size_t i = 0; i <= n; i++) {
        if (i > 0 && i < n && v[i].a <= b) {
            if (v[i].b > b)
                b = v[i].b;
            continue;
        }
        if (i > 0) {
            uint64_t lo = a < from ? from : a, hi = b > to ? to : b;

            busy += hi > lo ? hi - lo : 0;
        }
        if (i < n) {
            a = v[i].a;
            b = v[i].b;
        }
    }
    return busy;
}

static int cmd_streams(int argc, char **argv)
{
    int threads = argc == 8 ? atoi(argv[4]) : 0;
    double seconds = argc == 8 ? atof(argv[5]) : 0, warmup = argc == 8 ? atof(argv[7]) : 0;
    struct streamer s[MAX_THREADS];
    struct interval *v;
    size_t n = 0;
    unsigned launches = 0;
    uint64_t first = UINT64_MAX, end, from, busy, peak = 0;
    CUfunction f;

    if (threads < 1 || threads > MAX_THREADS || seconds < warmup + 2) {
        fprintf(stderr, "usage: probe streams PTX FUNC THREADS(1-%d) SECONDS KERNEL_US WARMUP_S "
                        "(SECONDS >= WARMUP_S + 2)\n", MAX_THREADS);
        return 2;
    }
    setup();
    f = load(argv[2], argv[3]);
    for (int i = 0; i < threads; i++) {
        s[i] = (struct streamer){.f = f, .kernel_ns = strtoull(argv[6], NULL, 10) * 1000ull,
                                 .until = mono_ns() + (uint64_t)(seconds * 1e9)};
        TRY(cuMemAlloc_v2(&s[i].stamps, SLOTS * 16));
    }
    TRY(cuCtxSynchronize());
    for (int i = 0; i < threads; i++)
        if (pthread_create(&s[i].t, NULL, stream_main, &s[i]) != 0) {
            fprintf(stderr, "probe: pthread_create failed\n");
            return 1;
        }
    v = calloc((size_t)threads * SLOTS, sizeof(*v));
    if (v == NULL)
        return 1;
    for (int i = 0; i < threads; i++) {
        uint64_t *stamps = calloc(SLOTS, 16);

        pthread_join(s[i].t, NULL);
        launches += s[i].launches;
        if (stamps == NULL)
            return 1;
        TRY(cuMemcpyDtoH_v2(stamps, s[i].stamps, SLOTS * 16));
        for (unsigned k = 0; k < s[i].launches; k++) {
            if (stamps[2 * k] != 0 && stamps[2 * k + 1] > stamps[2 * k]) {
                v[n].a = stamps[2 * k];
                v[n++].b = stamps[2 * k + 1];
                if (stamps[2 * k] < first)
                    first = stamps[2 * k];
            }
        }
        free(stamps);
    }
    printf("launches %u\n", launches);
    printf("stamped %zu\n", n);
    if (n == 0) {
        /* The fake driver runs no kernel code: nothing stamped. */
        printf("share -1\npeak -1\n");
        return 0;
    }
    qsort(v, n, sizeof(*v), by_start);
    from = first + (uint64_t)(warmup * 1e9);
    end = first + (uint64_t)(seconds * 1e9);
    busy = union_within(v, n, from, end);
    /* Busiest one-second window, sliding by 100 ms. */
    for (uint64_t t = first; t + 1000000000ull <= end; t += 100000000ull) {
        uint64_t b = union_within(v, n, t, t + 1000000000ull);

        if (b > peak)
            peak = b;
    }
    printf("share %.2f\n", 100.0 * (double)busy / (double)(end - from));
    printf("peak %.2f\n", 100.0 * (double)peak / 1e9);
    free(v);
    return 0;
}

static int cmd_vmm(int argc, char **argv)
{
    size_t block = argc == 4 ? strtoull(argv[2], NULL, 10) * MIB : 0, gran = 0;
    int blocks = argc == 4 ? atoi(argv[3]) : 0, created = 0, mapped = 0;
    CUmemGenericAllocationHandle h[MAX_BLOCKS];
    CUmemAllocationProp prop;
    CUmemAccessDesc access;
    CUdeviceptr base;
    CUresult rc;

    if (block == 0 || blocks < 1 || blocks > MAX_BLOCKS) {
        fprintf(stderr, "usage: probe vmm BLOCK_MIB BLOCKS(1-%d)\n", MAX_BLOCKS);
        return 2;
    }
    setup();
    memset(&prop, 0, sizeof(prop));
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    TRY(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    if (gran == 0 || block % gran != 0) {
        fprintf(stderr, "probe: block %zu not a multiple of the granularity %zu\n", block, gran);
        return 1;
    }
    TRY(cuMemAddressReserve(&base, block * (size_t)blocks, 0, 0, 0));
    memset(&access, 0, sizeof(access));
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    for (int i = 0; i < blocks; i++) {
        rc = cuMemCreate(&h[i], block, &prop, 0);
        printf("create %d %d\n", i + 1, (int)rc);
        if (rc != CUDA_SUCCESS)
            break;
        created++;
        TRY(cuMemMap(base + (CUdeviceptr)(block * (size_t)i), block, 0, h[i], 0));
        TRY(cuMemSetAccess(base + (CUdeviceptr)(block * (size_t)i), block, &access, 1));
        mapped++;
    }
    printf("created %d\nmapped %d\n", created, mapped);
    for (int i = 0; i < mapped; i++)
        TRY(cuMemUnmap(base + (CUdeviceptr)(block * (size_t)i), block));
    for (int i = 0; i < created; i++)
        TRY(cuMemRelease(h[i]));
    TRY(cuMemAddressFree(base, block * (size_t)blocks));
    /* Released blocks no longer count against the limit. */
    rc = cuMemCreate(&h[0], block, &prop, 0);
    printf("again %d\n", (int)rc);
    if (rc == CUDA_SUCCESS)
        TRY(cuMemRelease(h[0]));
    return 0;
}

static int cmd_overhead(int argc, char **argv)
{
    long n = argc == 5 ? atol(argv[4]) : 0;
    double best = 0;
    CUfunction f;

    if (n < 1) {
        fprintf(stderr, "usage: probe overhead PTX FUNC N\n");
        return 2;
    }
    setup();
    f = load(argv[2], argv[3]);
    for (long i = 0; i < 1000; i++)
        TRY(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
    TRY(cuCtxSynchronize());
    for (int round = 0; round < 3; round++) {
        uint64_t t0 = mono_ns();
        double per;

        for (long i = 0; i < n; i++)
            TRY(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
        per = (double)(mono_ns() - t0) / (double)n;
        TRY(cuCtxSynchronize());
        if (round == 0 || per < best)
            best = per;
    }
    printf("ns_per_launch %.1f\n", best);
    return 0;
}

static int cmd_vmmfd(int argc, char **argv)
{
    size_t block = argc == 4 ? strtoull(argv[2], NULL, 10) * MIB : 0;
    int blocks = argc == 4 ? atoi(argv[3]) : 0, created = 0, fd[MAX_BLOCKS];
    CUmemGenericAllocationHandle h;
    CUmemAllocationProp prop;
    char line[64];
    CUresult rc;

    if (block == 0 || blocks < 1 || blocks > MAX_BLOCKS) {
        fprintf(stderr, "usage: probe vmmfd BLOCK_MIB BLOCKS(1-%d)\n", MAX_BLOCKS);
        return 2;
    }
    setup();
    memset(&prop, 0, sizeof(prop));
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    for (int i = 0; i < blocks; i++) {
        rc = cuMemCreate(&h, block, &prop, 0);
        printf("create %d %d\n", i + 1, (int)rc);
        if (rc != CUDA_SUCCESS)
            break;
        TRY(cuMemExportToShareableHandle(&fd[created], h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                                         0));
        TRY(cuMemRelease(h));
        created++;
    }
    printf("created %d\nheld %d\n", created, created);
    fflush(stdout);
    if (fgets(line, sizeof(line), stdin) == NULL)
        line[0] = '\0';
    for (int i = 0; i < created; i++)
        close(fd[i]);
    printf("closed %d\n", created);
    fflush(stdout);
    if (fgets(line, sizeof(line), stdin) == NULL)
        line[0] = '\0';
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "uuid") == 0)
        return cmd_uuid();
    if (argc >= 2 && strcmp(argv[1], "streams") == 0)
        return cmd_streams(argc, argv);
    if (argc >= 2 && strcmp(argv[1], "vmm") == 0)
        return cmd_vmm(argc, argv);
    if (argc >= 2 && strcmp(argv[1], "overhead") == 0)
        return cmd_overhead(argc, argv);
    if (argc >= 2 && strcmp(argv[1], "vmmfd") == 0)
        return cmd_vmmfd(argc, argv);
    fprintf(stderr,
            "usage: probe uuid | streams ... | vmm ... | overhead ... | vmmfd ... (see probe.c)\n");
    return 2;
}
