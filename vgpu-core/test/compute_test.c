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
 * compute_test.c - the compute limiter with the fake driver: real processes,
 * real threads, real time. Shares are measured against the fake GPU's true
 * busy time (its simulated timeline, read from the fake's state file), not
 * against the NVML sensor the limiter itself reads; the timeline places
 * kernels from their durations, so a busy host cannot distort the truth,
 * only the application's own launching.
 *
 * The parent writes the claims (one claims root per claim, so that each
 * child sees only its own) and starts children of this program with
 * LD_PRELOAD=libvgpu.so. Children launch kernels with log-normal durations
 * asynchronously into one or two streams, a few per stream between
 * synchronisations, with full or small grids.
 *
 *   compute_test quick   a short representative subset run by `make test`
 *                        (~15 s, four fake GPUs in parallel) with bounds that
 *                        hold on a loaded 2-core machine: 30 % with mixed
 *                        kernels, the 30/70 pair, two processes of a 30 %
 *                        claim with 0.1 ms kernels (2 x 3000 launches/s),
 *                        and at 10 % with 50 ms kernels two launches in a row
 *                        wait while 100 capture launches do not; then
 *                        processes SIGKILLed and replaced (kills, ~12 s);
 *                        then a limit change 30 -> 60 % (~14 s); then one
 *                        process launching small grids of 2 ms from 8 threads
 *                        on 8 streams at 30 % (streams, ~13 s).
 *   compute_test kills   that SIGKILL case alone.
 *   compute_test streams that 8-stream case alone; "streams LIMIT THREADS
 *                        KERNEL_US small|full" one such run of any cell,
 *                        printed with its seconds, no goals checked.
 *   compute_test sweep   the accuracy table: limits 10..90 % x 1, 2, 4
 *                        processes per claim x 1 and 2 claims per GPU (the
 *                        second at 100 - limit) x kernels 0.1 ms, 2 ms,
 *                        20 ms, mix, up to eight cells (24 processes) at a
 *                        time (~5 min; "sweep LIMIT" runs one limit); prints
 *                        the table (late runs with their seconds) and checks
 *                        the goals (mean absolute error <= 1, worst <= 3,
 *                        first second <= limit + 5, once settled no second
 *                        below limit - 5 or the kernels' own spread in 99 %
 *                        of the runs, 99 % of the runs settled within 3 s),
 *                        each claim measured from its own start.
 *   compute_test cell LIMIT PROCS CLAIMS KERNELS COPIES
 *                        one cell of that sweep (KERNELS: 0.1, 2, 20 or mix)
 *                        run COPIES times at once on as many GPUs (1-8): each
 *                        copy's seconds, then how the first claim's seconds
 *                        from 3 s vary (standard deviation, lowest, highest)
 *                        and its settling; a measurement, no goals checked.
 *
 * Env: VGPU_TEST_LIB (libvgpu.so), VGPU_FAKE_STATE_DIR, VGPU_FAKE_GPU_COUNT
 * (>= 4 quick, >= 8 sweep, >= COPIES cell).
 */
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "claimns.h"
#include "fake_cuda.h"
#include "fake_state.h"
#include "vgpu_cuda.h"
#include "vgpu_nvml.h"
#include "vgpu_region.h"

#define S 1000000000ull
#define RUN_S 12
#define MEASURE_FROM_S 4
#define MAX_CELLS 8
#define MAX_BATCH_PROCS 24
#define MAX_PROCS 4
/* Processes of all copies of `cell` together (the fake has 64 slots, some for the parent). */
#define MAX_CELL_COPY_PROCS 48
/* Busy children read the parent's stop pipe on this descriptor. */
#define STOP_FD 9

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int fail(const char *what, CUresult rc)
{
    fprintf(stderr, "compute_test child: %s failed: %d\n", what, (int)rc);
    return 1;
}

#define TRY(call)                                                                                  \
    do {                                                                                           \
        CUresult rc_ = (call);                                                                     \
        if (rc_ != CUDA_SUCCESS)                                                                   \
            return fail(#call, rc_);                                                               \
    } while (0)

static int open_device(int ord, CUmodule *mod)
{
    CUdevice dev;
    CUcontext ctx;

    TRY(cuInit(0));
    TRY(cuDeviceGet(&dev, ord));
    TRY(cuDevicePrimaryCtxRetain(&ctx, dev));
    TRY(cuCtxSetCurrent(ctx));
    TRY(cuModuleLoadData(mod, "compute_test"));
    return 0;
}

/*
 * Child: launches kernel (a fake kernel name) into nstreams streams, depth
 * launches per stream between synchronisations of that stream, grid blocks
 * per launch (fewer than the GPU's SMs: a small grid), until the parent
 * closes the stop pipe (STOP_FD).
 */
static int child_busy(int ord, const char *kernel, int nstreams, int depth, unsigned grid)
{
    CUmodule mod;
    CUfunction f;
    CUstream s[2];
    struct pollfd stop = {.fd = STOP_FD, .events = POLLIN};

    if (open_device(ord, &mod) != 0)
        return 1;
    TRY(cuModuleGetFunction(&f, mod, kernel));
    for (int i = 0; i < nstreams; i++)
        TRY(cuStreamCreate(&s[i], CU_STREAM_NON_BLOCKING));
    /* Until the parent, having measured, closes the stop pipe: a busy host only delays that. */
    while (poll(&stop, 1, 0) == 0) {
        for (int i = 0; i < nstreams; i++) {
            TRY(cuStreamSynchronize(s[i]));
            for (int k = 0; k < depth; k++)
                TRY(cuLaunchKernel(f, grid, 1, 1, 128, 1, 1, 0, s[i], NULL, NULL));
        }
    }
    for (int i = 0; i < nstreams; i++)
        TRY(cuStreamSynchronize(s[i]));
    return 0;
}

/* One host thread of child_threads: its own stream, depth launches per synchronisation. */
struct launcher {
    CUcontext ctx;
    CUfunction f;
    CUstream s;
    int depth;
    unsigned grid;
    int rc;
};

static void *launcher_main(void *arg)
{
    struct launcher *l = arg;
    struct pollfd stop = {.fd = STOP_FD, .events = POLLIN};

    if (cuCtxSetCurrent(l->ctx) != CUDA_SUCCESS) {
        l->rc = fail("cuCtxSetCurrent", CUDA_ERROR_INVALID_CONTEXT);
        return NULL;
    }
    while (poll(&stop, 1, 0) == 0) {
        CUresult rc = cuStreamSynchronize(l->s);

        for (int k = 0; k < l->depth && rc == CUDA_SUCCESS; k++)
            rc = cuLaunchKernel(l->f, l->grid, 1, 1, 128, 1, 1, 0, l->s, NULL, NULL);
        if (rc != CUDA_SUCCESS) {
            l->rc = fail("launch loop", rc);
            return NULL;
        }
    }
    l->rc = cuStreamSynchronize(l->s) == CUDA_SUCCESS ? 0 : 1;
    return NULL;
}

/*
 * Child: nthreads host threads (at most 8), each launching kernel into a
 * stream of its own, depth launches between synchronisations of it, grid
 * blocks per launch, until the parent closes the stop pipe (STOP_FD).
 */
static int child_threads(int ord, const char *kernel, int nthreads, int depth, unsigned grid)
{
    struct launcher l[8];
    pthread_t tid[8];
    CUmodule mod;
    CUfunction f;
    CUcontext ctx;
    int rc = 0;

    if (nthreads < 1 || nthreads > 8 || open_device(ord, &mod) != 0)
        return 1;
    TRY(cuModuleGetFunction(&f, mod, kernel));
    TRY(cuCtxGetCurrent(&ctx));
    for (int i = 0; i < nthreads; i++) {
        l[i] = (struct launcher){.ctx = ctx, .f = f, .depth = depth, .grid = grid};
        TRY(cuStreamCreate(&l[i].s, CU_STREAM_NON_BLOCKING));
    }
    for (int i = 0; i < nthreads; i++) {
        if (pthread_create(&tid[i], NULL, launcher_main, &l[i]) != 0)
            return 1;
    }
    for (int i = 0; i < nthreads; i++) {
        pthread_join(tid[i], NULL);
        rc |= l[i].rc;
    }
    return rc;
}

/* Child: launches wait once the limiter knows their cost; capture launches never. */
static int child_capture(int ord)
{
    CUmodule mod;
    CUfunction big, small;
    CUstream s;
    CUgraph g;
    CUgraphExec e;
    double t0, capture_s, wait_s, learn_end = now_s() + 4;

    if (open_device(ord, &mod) != 0)
        return 1;
    TRY(cuModuleGetFunction(&big, mod, "big_50000us"));
    TRY(cuModuleGetFunction(&small, mod, "small_100us"));
    TRY(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    /* Long enough for NVML's window and the cost estimate to see the 50 ms kernels. */
    while (now_s() < learn_end) {
        TRY(cuLaunchKernel(big, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));
        TRY(cuStreamSynchronize(NULL));
    }
    /* At 10 %, two 50 ms kernels cannot both pass within 200 ms. */
    t0 = now_s();
    TRY(cuLaunchKernel(big, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));
    TRY(cuLaunchKernel(big, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));
    wait_s = now_s() - t0;
    TRY(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    t0 = now_s();
    for (int i = 0; i < 100; i++)
        TRY(cuLaunchKernel_ptsz(small, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL));
    capture_s = now_s() - t0;
    TRY(cuStreamEndCapture(s, &g));
    TRY(cuGraphInstantiateWithFlags(&e, g, 0));
    TRY(cuGraphLaunch(e, s));
    TRY(cuStreamSynchronize(s));
    printf("%.6f %.6f\n", capture_s, wait_s);
    return 0;
}

/* Writes claim name under root (its own claims root) limiting uuid to sm percent. */
static int write_claim(const char *root, const char *name, const char *uuid, unsigned sm)
{
    char path[512];
    FILE *f;
    int fd;

    if (mkdir(root, 0777) != 0)
        return -1;
    snprintf(path, sizeof(path), "%s/%s", root, name);
    if (mkdir(path, 0777) != 0)
        return -1;
    snprintf(path, sizeof(path), "%s/%s/shm", root, name);
    if (mkdir(path, 0777) != 0)
        return -1;
    snprintf(path, sizeof(path), "%s/%s/config", root, name);
    if ((f = fopen(path, "w")) == NULL)
        return -1;
    fprintf(f, "version=1\nclaim=%s\ncompute_policy=strict\npriority=low\ndevice.count=1\n"
               "device.0.uuid=%s\ndevice.0.memory_limit_bytes=0\ndevice.0.sm_limit_percent=%u\n",
            name, uuid, sm);
    fclose(f);
    snprintf(path, sizeof(path), "%s/%s/shm/region", root, name);
    fd = open(path, O_RDWR | O_CREAT, 0666);
    if (fd < 0 || ftruncate(fd, VGPU_REGION_SIZE) != 0)
        return -1;
    close(fd);
    return 0;
}

/* The stop pipe of the running cells: busy children exit when the write end closes. */
static int stop_pipe[2] = {-1, -1};

/* Starts this program as a child with argv under libvgpu.so and claims root root. */
static pid_t spawn(const char *self, const char *root, int out_fd, char *const *args)
{
    char *argv[12];
    int n = 0;
    pid_t pid = fork();

    if (pid != 0)
        return pid;
    setenv("LD_PRELOAD", getenv("VGPU_TEST_LIB"), 1);
    setenv("VGPU_CLAIMS_ROOT", root, 1);
    if (vgpu_test_enter_claims_ns(root) != 0)
        _exit(125);
    if (out_fd >= 0)
        dup2(out_fd, 1);
    if (stop_pipe[0] >= 0) {
        dup2(stop_pipe[0], STOP_FD);
        close(stop_pipe[1]);
    }
    argv[n++] = (char *)self;
    for (int i = 0; args[i] != NULL && n < 11; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    execv(self, argv);
    _exit(127);
}

static struct vgpu_region *map_region(const char *root, const char *name)
{
    char path[512];
    void *m;
    int fd;

    snprintf(path, sizeof(path), "%s/%s/shm/region", root, name);
    fd = open(path, O_RDONLY);
    if (fd < 0)
        return NULL;
    m = mmap(NULL, VGPU_REGION_SIZE, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    return m == MAP_FAILED ? NULL : m;
}

enum kernels { K_100US, K_2MS, K_20MS, K_MIX, K_COUNT };

static const char *const kernel_names[K_COUNT] = {"0.1 ms", "2 ms", "20 ms", "mix"};
/* The same, as `compute_test cell` takes them. */
static const char *const kernel_args[K_COUNT] = {"0.1", "2", "20", "mix"};

/* One cell: claims on one fake GPU, each with procs processes. */
struct cell {
    int ord, nclaims, procs;
    unsigned limit[2];
    enum kernels k;
    char root[2][600];
    pid_t pid[2][MAX_PROCS];
    uint64_t start[2]; /* CLOCK_MONOTONIC ns when each claim's first process was started */
    double share[2], first_s[2];
    double settle_s[2]; /* two-second means within the band from then on */
    double second[2][RUN_S]; /* true share of each whole second from the start */
    int seconds[2];          /* how many were measured */
    double band[2];
};

static const char *kernel_of(enum kernels k, int j)
{
    static const char *const fixed[3] = {"k_ln100us", "k_ln2000us", "k_ln20000us"};

    return k == K_MIX ? fixed[j % 3] : fixed[k];
}

static void start_cell(const char *self, const char *base, struct cell *c, char uuid[][96])
{
    static const double mean_ns[3] = {100e3, 2e6, 20e6};
    char ordstr[16], streams[8], depth[8], grid[16];

    snprintf(ordstr, sizeof(ordstr), "%d", c->ord);
    for (int a = 0; a < c->nclaims; a++) {
        c->start[a] = (uint64_t)(now_s() * 1e9);
        snprintf(c->root[a], sizeof(c->root[a]), "%s/gpu%d-claim%d", base, c->ord, a);
        CHECK(write_claim(c->root[a], "c", uuid[c->ord], c->limit[a]) == 0);
        for (int j = 0; j < c->procs; j++) {
            /*
             * Processes differ as real ones do (queue depth, grid size) but
             * all keep two streams busy, so that a host too loaded to wake
             * them in time does not leave the GPU idle (the test is about
             * the limiter, not about the host).
             */
            snprintf(streams, sizeof(streams), "%d", 2);
            double mean = mean_ns[c->k == K_MIX ? j % 3 : (int)c->k];
            int d = 2 + 3 * (j % 3);

            /* Short kernels are queued deeper, as applications do (a batch of >= 20 ms). */
            snprintf(depth, sizeof(depth), "%d", d * mean >= 20e6 ? d : (int)(20e6 / mean));
            snprintf(grid, sizeof(grid), "%u", j % 2 == 1 ? 8u : 4096u);
            char *args[] = {"busy", ordstr, (char *)kernel_of(c->k, j), streams, depth, grid,
                            NULL};

            c->pid[a][j] = spawn(self, c->root[a], -1, args);
        }
    }
}

/* The claim's true share of [from, to) (CLOCK_MONOTONIC), from the fake's timeline. */
static double true_share(fake_state *st, const struct cell *c, int a, uint64_t from, uint64_t to)
{
    double busy = 0;

    for (int j = 0; j < c->procs; j++) {
        int64_t b = fake_state_true_busy(st, c->ord, (unsigned)c->pid[a][j], from, to);

        CHECK(b >= 0);
        busy += b > 0 ? (double)b : 0;
    }
    return 100.0 * busy / (double)(to - from);
}

/*
 * Settling of claim a of c: from start, the time after which every
 * two-second mean of its true share (sliding by one sample period, up to
 * to) stays within the band: 2 points, or 4 sigma of what two seconds of
 * its kernels vary by themselves (log-normal, FAKE_KERNEL_SIGMA; mixed
 * kernels: as the 20 ms class), whichever is larger.
 */
static void settling(fake_state *st, struct cell *c, int a, uint64_t start, uint64_t to)
{
    static const double mean_ns[3] = {100e3, 2e6, 20e6};
    enum { W = 12 };
    double share[128], target = c->limit[a];
    double mean = mean_ns[c->k == K_MIX ? 2 : (int)c->k];
    double noise = target * sqrt(exp(FAKE_KERNEL_SIGMA * FAKE_KERNEL_SIGMA) - 1) /
                   sqrt(target / 100 * 2e9 / mean);
    uint64_t p0 = (start + GPU_SAMPLE_NS - 1) / GPU_SAMPLE_NS;
    int n = 0, settled = 0;

    c->band[a] = noise * 4 > 2 ? noise * 4 : 2;
    for (uint64_t p = p0; (p + 1) * GPU_SAMPLE_NS <= to && n < 128; p++)
        share[n++] = true_share(st, c, a, p * GPU_SAMPLE_NS, (p + 1) * GPU_SAMPLE_NS);
    for (int k = 0; k + W <= n; k++) {
        double m = 0;

        for (int j = 0; j < W; j++)
            m += share[k + j] / W;
        if (m - target > c->band[a] || target - m > c->band[a])
            settled = k + 1;
    }
    c->settle_s[a] = (double)((p0 + (uint64_t)settled) * GPU_SAMPLE_NS - start) / 1e9;
}

/* The end of the last whole sample period: no kernel can be placed into it any more. */
static uint64_t measurable_until(void)
{
    return ((uint64_t)(now_s() * 1e9) / GPU_SAMPLE_NS - 1) * GPU_SAMPLE_NS;
}

/* Runs cells in parallel, RUN_S seconds, and measures them while their processes live. */
static void run_cells(const char *self, const char *base, struct cell *cells, int n,
                      char uuid[][96], fake_state *st)
{
    uint64_t to;
    int status;

    CHECK(pipe(stop_pipe) == 0);
    for (int i = 0; i < n; i++)
        start_cell(self, base, &cells[i], uuid);
    close(stop_pipe[0]);
    sleep(RUN_S);
    to = measurable_until();
    for (int i = 0; i < n; i++) {
        for (int a = 0; a < cells[i].nclaims; a++) {
            /* From the claim's own start: the claims of a batch start one after another. */
            uint64_t start = cells[i].start[a];

            cells[i].share[a] = true_share(st, &cells[i], a, start + MEASURE_FROM_S * S, to);
            cells[i].first_s[a] = true_share(st, &cells[i], a, start, start + S);
            settling(st, &cells[i], a, start, to);
            for (int k = 0; k < RUN_S && start + (uint64_t)(k + 1) * S <= to; k++) {
                cells[i].second[a][k] = true_share(st, &cells[i], a, start + (uint64_t)k * S,
                                                   start + (uint64_t)(k + 1) * S);
                cells[i].seconds[a] = k + 1;
            }
        }
    }
    close(stop_pipe[1]);
    stop_pipe[0] = stop_pipe[1] = -1;
    for (int i = 0; i < n; i++) {
        for (int a = 0; a < cells[i].nclaims; a++) {
            for (int j = 0; j < cells[i].procs; j++) {
                CHECK(waitpid(cells[i].pid[a][j], &status, 0) == cells[i].pid[a][j]);
                CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
            }
        }
    }
}

static double absd(double v)
{
    return v < 0 ? -v : v;
}

/* While both run: one elected refiller, both processes' launch counts and the achieved share. */
static void check_region(const char *root)
{
    struct vgpu_region *r = map_region(root, "c");
    int active = 0;
    struct timespec ts;

    CHECK(r != NULL);
    if (r == NULL)
        return;
    clock_gettime(CLOCK_REALTIME, &ts);
    CHECK(r->devices[0].refiller_generation >= 1);
    CHECK(r->devices[0].refiller_pid != 0);
    CHECK(r->devices[0].bucket_refill_rate > 0);
    /* The achieved share the monitor exports, fresh. */
    CHECK(r->devices[0].sm_share_permyriad >= 2000 && r->devices[0].sm_share_permyriad <= 4000);
    CHECK(r->devices[0].sm_share_time_ns + 2 * S >= (uint64_t)ts.tv_sec * S + (uint64_t)ts.tv_nsec);
    for (int s = 0; s < VGPU_REGION_MAX_SLOTS; s++)
        active += r->slots[s].devices[0].kernel_launches > 0 &&
                  r->slots[s].devices[0].launch_cost_ns > 0;
    CHECK(active == 2);
    munmap(r, VGPU_REGION_SIZE);
}

/* GPU ord's true share of [from, to), all processes together (the fake's timeline). */
static double gpu_share(fake_state *st, int ord, uint64_t from, uint64_t to)
{
    int64_t b = fake_state_true_busy(st, ord, 0, from, to);

    CHECK(b >= 0);
    return 100.0 * (double)b / (double)(to - from);
}

/*
 * The share of [from, to) of GPU ord less that of the processes in others
 * (0 = none): their kernels fill the GPU, so they never run beside the rest.
 */
static double share_less(fake_state *st, int ord, const pid_t *others, int n, uint64_t from,
                         uint64_t to)
{
    double share = gpu_share(st, ord, from, to);

    for (int j = 0; j < n && others[j] != 0; j++) {
        int64_t b = fake_state_true_busy(st, ord, (unsigned)others[j], from, to);

        CHECK(b >= 0);
        share -= 100.0 * (double)b / (double)(to - from);
    }
    return share;
}

/*
 * When the share of GPU ord less others' (see share_less) settled after
 * from: from then on every two-second mean, sliding by a sample period up
 * to to, is within band of target.
 */
static uint64_t settled_after(fake_state *st, int ord, const pid_t *others, int n, uint64_t from,
                              uint64_t to, double target, double band)
{
    uint64_t settled = from;

    for (uint64_t t = from; t + 2 * S <= to; t += GPU_SAMPLE_NS) {
        if (absd(share_less(st, ord, others, n, t, t + 2 * S) - target) > band)
            settled = t + GPU_SAMPLE_NS;
    }
    return settled;
}

/*
 * The hard limit under SIGKILL: two processes of a 30 % claim keep GPU ord
 * busy with kernels of exactly 2 ms (so that a second's share shows the
 * limiter, not the kernels' own spread: log-normal ones vary by 2.3 points
 * a second by themselves here); for KILL_S seconds one of them, chosen at
 * random, is SIGKILLed every 100-400 ms (mid-launch, mid-wait, as the
 * refiller) and replaced at once. Nothing the kills do lifts the claim: no
 * second of the GPU's true busy time, during the kills or after, above the
 * limit + 5. Nothing they do starves it beyond what the limit's safety
 * costs: a process NVML has not measured yet is charged the longest kernel
 * planned for (20 ms), so a claim of such processes only runs at 2/20 of
 * its limit (3 %); the kill phase must stay above KILLS_FLOOR (no refill
 * lost to a dead refiller's lease, the launches a dead process was charged
 * for and never made given back, over-charges NVML proves refunded: 4.2-5.3 %;
 * without those, 2.5-2.8 %). After the kills, every two-second mean from
 * 3 s on is within 2 points and no second from 2 s on falls more than 5
 * points short. With neighbour, two processes of a claim at 50 % keep the
 * same GPU busy all along (the 30 % claim contended, so it keeps the deeper
 * bucket), and the claim's share is the GPU's less theirs.
 */
#define KILL_S 6
#define KILL_AFTER_S 6
#define KILLS_FLOOR 3.3
static void kills(const char *self, const char *base, const char *uuid, int ord, fake_state *st,
                  bool neighbour)
{
    char root[600], ordstr[16];
    char *args[] = {"busy", ordstr, "k_2000us", "2", "10", "4096", NULL};
    pid_t pid[2], busy[2] = {0, 0};
    int status, n = 0;
    uint64_t start, calm, to, settled;
    /* Kernels of exactly 2 ms: they do not vary by themselves, so the band is 2 points. */
    double band = 2;
    double worst = 0, low = 100, during;

    snprintf(ordstr, sizeof(ordstr), "%d", ord);
    CHECK(pipe(stop_pipe) == 0);
    if (neighbour) {
        snprintf(root, sizeof(root), "%s/gpu%d-neighbour", base, ord);
        CHECK(write_claim(root, "c", uuid, 50) == 0);
        for (int j = 0; j < 2; j++)
            busy[j] = spawn(self, root, -1, args);
    }
    snprintf(root, sizeof(root), "%s/gpu%d-kills", base, ord);
    CHECK(write_claim(root, "c", uuid, 30) == 0);
    srand((unsigned)getpid());
    start = (uint64_t)(now_s() * 1e9);
    for (int j = 0; j < 2; j++)
        pid[j] = spawn(self, root, -1, args);
    while ((uint64_t)(now_s() * 1e9) < start + KILL_S * S) {
        int j = rand() % 2;

        usleep(100000 + (useconds_t)(rand() % 300000));
        kill(pid[j], SIGKILL);
        CHECK(waitpid(pid[j], &status, 0) == pid[j]);
        pid[j] = spawn(self, root, -1, args);
        n++;
    }
    calm = (uint64_t)(now_s() * 1e9);
    sleep(KILL_AFTER_S);
    to = measurable_until();
    for (uint64_t t = start; t + S <= to; t += GPU_SAMPLE_NS) {
        double share = share_less(st, ord, busy, 2, t, t + S);

        worst = share > worst ? share : worst;
        if (t >= calm + 2 * S && share < low)
            low = share;
    }
    settled = settled_after(st, ord, busy, 2, calm, to, 30, band);
    during = share_less(st, ord, busy, 2, start + S, calm);
    close(stop_pipe[0]);
    close(stop_pipe[1]);
    stop_pipe[0] = stop_pipe[1] = -1;
    for (int j = 0; j < 4; j++) {
        pid_t p = j < 2 ? pid[j] : busy[j - 2];

        CHECK(p == 0 || waitpid(p, &status, 0) == p);
        CHECK(p == 0 || (WIFEXITED(status) && WEXITSTATUS(status) == 0));
    }
    printf("  30 %%%s, %d SIGKILLs in %d s: %.2f%% during the kills (>= %.1f), busiest second "
           "%.2f%%; after them within %.1f points from %.2f s, lowest second from 2 s %.2f%%\n",
           neighbour ? " next to a busy claim at 50 %" : "", n, KILL_S, during, KILLS_FLOOR, worst, band, (double)(settled - calm) / 1e9, low);
    CHECK(n >= KILL_S * 2);
    CHECK(worst <= 35);
    CHECK(during >= KILLS_FLOOR);
    CHECK(settled - calm <= 3 * S);
    CHECK(low >= 25);
}

/*
 * A limit change in real time: a claim at 60 % whose only process lowers
 * the limit to 30 % (CUDA_DEVICE_SM_LIMIT) and so refills at 30 %; at
 * CHANGE_AT_S it stops and a process without the variable starts, the
 * claim's limit 60 % then. The new refiller runs from its own target, not
 * from the rate the old one left: every two-second mean within 2 points
 * of 60 % from 3 s after the change at the latest (a design that inherited
 * the rate took 4-7 s), and no first second above 65 %. Kernels of exactly
 * 2 ms before and 0.1 ms after, so that the band is the limiter's, not
 * the kernels' spread.
 */
#define CHANGE_AT_S 6
#define CHANGE_AFTER_S 8
static void limit_change(const char *self, const char *base, const char *uuid, int ord,
                         fake_state *st)
{
    char root[600], ordstr[16];
    char *before_args[] = {"busy", ordstr, "k_2000us", "2", "10", "4096", NULL};
    char *after_args[] = {"busy", ordstr, "k_100us", "2", "200", "4096", NULL};
    pid_t first, second;
    int status;
    uint64_t start, change, to, settled;
    double before, after, first_s;

    snprintf(ordstr, sizeof(ordstr), "%d", ord);
    snprintf(root, sizeof(root), "%s/gpu%d-change", base, ord);
    CHECK(write_claim(root, "c", uuid, 60) == 0);
    /* A stop pipe per process: close-on-exec, so that neither child holds the other's open. */
    CHECK(pipe2(stop_pipe, O_CLOEXEC) == 0);
    setenv("CUDA_DEVICE_SM_LIMIT", "30", 1);
    start = (uint64_t)(now_s() * 1e9);
    first = spawn(self, root, -1, before_args);
    unsetenv("CUDA_DEVICE_SM_LIMIT");
    close(stop_pipe[0]);
    sleep(CHANGE_AT_S);
    close(stop_pipe[1]);
    CHECK(pipe2(stop_pipe, O_CLOEXEC) == 0);
    change = (uint64_t)(now_s() * 1e9);
    second = spawn(self, root, -1, after_args);
    close(stop_pipe[0]);
    CHECK(waitpid(first, &status, 0) == first && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    sleep(CHANGE_AFTER_S);
    to = measurable_until();
    before = gpu_share(st, ord, start + 2 * S, change);
    after = gpu_share(st, ord, change + MEASURE_FROM_S * S, to);
    first_s = gpu_share(st, ord, change, change + S);
    settled = settled_after(st, ord, NULL, 0, change, to, 60, 2);
    close(stop_pipe[1]);
    stop_pipe[0] = stop_pipe[1] = -1;
    CHECK(waitpid(second, &status, 0) == second && WIFEXITED(status) &&
          WEXITSTATUS(status) == 0);
    printf("  limit 30 %% -> 60 %% with a new process: %.2f%% before, %.2f%% after, within 2 "
           "points from %.2f s, first second %.2f%%\n",
           before, after, (double)(settled - change) / 1e9, first_s);
    CHECK(absd(before - 30) <= 3);
    CHECK(absd(after - 60) <= 3);
    CHECK(settled - change <= 3 * S);
    CHECK(first_s <= 65);
}

struct streams_run {
    unsigned limit;
    const char *kernel; /* a fake kernel name */
    int threads;        /* each launching into a stream of its own */
    unsigned grid;      /* blocks per launch: 8 is a small grid */
    int ord;            /* the fake GPU it runs on */
    pid_t pid;
    uint64_t start;
    double mean, first_s, worst, settled_s;
    double second[RUN_S]; /* the GPU's true share of each whole second from the start */
    double cpu_wait;      /* share of the run some host task waited for a CPU, or < 0 */
};

/*
 * Microseconds some task of the host has waited for a CPU since boot (the
 * kernel's pressure stall information), or -1 where the kernel has none:
 * shows whether a run that missed met a busy host.
 */
static double cpu_wait_us(void)
{
    FILE *f = fopen("/proc/pressure/cpu", "r");
    unsigned long long total = 0;
    int got;

    if (f == NULL)
        return -1;
    got = fscanf(f, "some avg10=%*f avg60=%*f avg300=%*f total=%llu", &total);
    fclose(f);
    return got == 1 ? (double)total : -1;
}

/* Starts one process of a claim at r->limit launching r->kernel from r->threads threads. */
static void streams_start(const char *self, const char *base, const char *uuid,
                          struct streams_run *r)
{
    char root[600], cmd[700], ordstr[16], threads[8], grid[16];
    char *args[] = {"threads", ordstr, (char *)r->kernel, threads, "4", grid, NULL};

    snprintf(ordstr, sizeof(ordstr), "%d", r->ord);
    snprintf(threads, sizeof(threads), "%d", r->threads);
    snprintf(grid, sizeof(grid), "%u", r->grid);
    snprintf(root, sizeof(root), "%s/gpu%d-streams", base, r->ord);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
    CHECK(system(cmd) == 0);
    CHECK(write_claim(root, "c", uuid, r->limit) == 0);
    r->start = (uint64_t)(now_s() * 1e9);
    r->pid = spawn(self, root, -1, args);
}

/* Measures a run up to `to` (its process still launching), then waits for it (stopped). */
static void streams_measure(fake_state *st, struct streams_run *r, uint64_t to)
{
    uint64_t settled;

    for (int k = 0; k < RUN_S; k++)
        r->second[k] = r->start + (uint64_t)(k + 1) * S <= to
                           ? gpu_share(st, r->ord, r->start + (uint64_t)k * S,
                                       r->start + (uint64_t)(k + 1) * S)
                           : -1;
    r->mean = gpu_share(st, r->ord, r->start + MEASURE_FROM_S * S, to);
    r->first_s = r->second[0];
    r->worst = 0;
    for (uint64_t t = r->start; t + S <= to; t += GPU_SAMPLE_NS) {
        double share = gpu_share(st, r->ord, t, t + S);

        r->worst = share > r->worst ? share : r->worst;
    }
    settled = settled_after(st, r->ord, NULL, 0, r->start, to, r->limit, 2);
    r->settled_s = (double)(settled - r->start) / 1e9;
}

/*
 * Prints the run's seconds and, where the kernel tells, how long some task
 * of the host waited for a CPU.
 */
static void streams_print_seconds(const struct streams_run *r)
{
    printf("    seconds:");
    for (int k = 0; k < RUN_S && r->second[k] >= 0; k++)
        printf(" %.1f", r->second[k]);
    if (r->cpu_wait >= 0)
        printf("; a task of the host waiting for a CPU %.0f%% of the run", r->cpu_wait * 100);
    printf("\n");
}

static void streams_print(const struct streams_run *r)
{
    printf("  %2u %%, %d thread(s) on as many streams, %s grids of %s: %.2f%% from %d s, first "
           "second %.2f%%, busiest second %.2f%%, within 2 points from %.2f s\n",
           r->limit, r->threads, r->grid < 132 ? "small" : "full", r->kernel + 2, r->mean,
           MEASURE_FROM_S, r->first_s, r->worst, r->settled_s);
}

/* Runs n streams runs at once (each on its own GPU r[i].ord) for RUN_S seconds. */
static void streams_batch(const char *self, const char *base, char uuid[][96], fake_state *st,
                          struct streams_run *r, int n)
{
    uint64_t to;
    int status;
    double waited = cpu_wait_us(), began = now_s(), cpu_wait;

    CHECK(pipe(stop_pipe) == 0);
    for (int i = 0; i < n; i++)
        streams_start(self, base, uuid[r[i].ord], &r[i]);
    close(stop_pipe[0]);
    sleep(RUN_S);
    to = measurable_until();
    cpu_wait = waited < 0 ? -1 : (cpu_wait_us() - waited) / ((now_s() - began) * 1e6);
    for (int i = 0; i < n; i++) {
        streams_measure(st, &r[i], to);
        r[i].cpu_wait = cpu_wait;
    }
    close(stop_pipe[1]);
    stop_pipe[0] = stop_pipe[1] = -1;
    for (int i = 0; i < n; i++) {
        CHECK(waitpid(r[i].pid, &status, 0) == r[i].pid && WIFEXITED(status) &&
              WEXITSTATUS(status) == 0);
        streams_print(&r[i]);
    }
}

/* Whether a streams run missed a goal of the sweep. */
static bool streams_missed(const struct streams_run *r)
{
    /* A second may hold one 20 ms kernel more than the limit's share: 2 points. */
    double over = strcmp(r->kernel, "k_20000us") == 0 ? 2 : 0;

    return absd(r->mean - r->limit) > 3 || r->settled_s > 3 ||
           r->worst > r->limit + 5 + over || r->first_s > r->limit + 5 + over;
}

/*
 * The streams grid in real time (docs/limiter.md, "Concurrent kernels on
 * many streams"): one process launching from 1, 4 or 8 threads, each into a
 * stream of its own (four per synchronisation), full or small grids of
 * exactly 0.1, 2 or 20 ms, at 10, 30 and 70 %; `parallel` runs at once.
 * Every run must meet the goals of the sweep: mean absolute error <= 1,
 * worst <= 3, first second <= limit + 5, settling <= 3 s, and no second
 * above the limit + 5 (a 20 ms kernel more for 20 ms kernels). A run that
 * misses is run again alone, up to twice, its seconds and the host's CPU
 * pressure printed: a stall of a shared host delays one run (on a busy
 * 2-core CI machine, 2 of 54 settled late, the later at 6.2 s), a fault of
 * the limiter repeats. No more than 6 runs may need a rerun.
 */
#define STREAMS_RERUNS 2
#define STREAMS_MAX_MISSED 6
static void streams_grid(const char *self, const char *base, char uuid[][96], fake_state *st,
                         int parallel)
{
    static const unsigned limits[] = {10, 30, 70};
    static const int threads[] = {1, 4, 8};
    static const char *const kernels[] = {"k_100us", "k_2000us", "k_20000us"};
    static struct streams_run runs[54];
    int n = 0, missed = 0, failed = 0;
    double sum_err = 0, worst_err = 0, worst_settle = 0;

    for (int k = 0; k < 3; k++)
        for (int l = 0; l < 3; l++)
            for (int t = 0; t < 3; t++)
                for (int g = 0; g < 2; g++)
                    runs[n++] = (struct streams_run){.limit = limits[l], .threads = threads[t],
                                                     .kernel = kernels[k],
                                                     .grid = g == 0 ? 8 : 1024};
    for (int i = 0; i < n; i += parallel) {
        int m = n - i < parallel ? n - i : parallel;

        for (int j = 0; j < m; j++)
            runs[i + j].ord = j;
        streams_batch(self, base, uuid, st, &runs[i], m);
    }
    for (int i = 0; i < n; i++) {
        struct streams_run *r = &runs[i];

        missed += streams_missed(r);
        for (int attempt = 0; attempt < STREAMS_RERUNS && streams_missed(r); attempt++) {
            printf("  missed a goal:\n");
            streams_print(r);
            streams_print_seconds(r);
            printf("  again alone:\n");
            r->ord = 0;
            streams_batch(self, base, uuid, st, r, 1);
        }
        failed += streams_missed(r);
        sum_err += absd(r->mean - r->limit);
        worst_err = fmax(worst_err, absd(r->mean - r->limit));
        worst_settle = fmax(worst_settle, r->settled_s);
    }
    printf("streams grid in real time: %d runs, mean absolute error %.2f points (goal <= 1), "
           "worst %.2f (<= 3), settled within %.2f s (<= 3), %d missed a goal at first (<= %d), "
           "%d after %d reruns alone (none)\n",
           n, sum_err / n, worst_err, worst_settle, missed, STREAMS_MAX_MISSED, failed,
           STREAMS_RERUNS);
    CHECK(sum_err / n <= 1);
    CHECK(missed <= STREAMS_MAX_MISSED);
    CHECK(failed == 0);
}

/*
 * Concurrent kernels on many streams (docs/limiter.md): one process of a
 * 30 % claim launches small grids (8 blocks) of exactly 2 ms from 8 threads,
 * each into a stream of its own, four per synchronisation. Its kernels run
 * side by side while a burst lets them through and one at a time once
 * throttled; the estimate must not learn the first and overshoot: mean
 * within 1.5 points from 4 s, no second (sliding by a sample period) above
 * the limit + 5, every two-second mean within 2 points from 3 s on. Now:
 * busiest second 30.2-30.5 %, within 2 points from 0.83-1.83 s (four
 * runs); when refunds filled the bucket and the estimate learned from the
 * bursts they let through: 35.3-38.2 % (38.2 % at this depth), 1.5-1.8 s.
 */
static void streams_case(const char *self, const char *base, char uuid[][96], int ord,
                         fake_state *st)
{
    struct streams_run r = {.limit = 30, .kernel = "k_2000us", .threads = 8, .grid = 8,
                            .ord = ord};

    streams_batch(self, base, uuid, st, &r, 1);
    CHECK(absd(r.mean - 30) <= 1.5);
    CHECK(r.worst <= 35);
    CHECK(r.settled_s <= 3);
}

static int quick(const char *self, const char *base, char uuid[][96], fake_state *st)
{
    struct cell cells[3] = {
        {.ord = 0, .nclaims = 1, .procs = 1, .limit = {30}, .k = K_MIX},
        {.ord = 1, .nclaims = 2, .procs = 1, .limit = {30, 70}, .k = K_2MS},
        {.ord = 2, .nclaims = 1, .procs = 2, .limit = {30}, .k = K_100US},
    };
    char root[600], ordstr[16];
    int pipefd[2], status;
    pid_t cap;
    FILE *f;
    double capture_s = -1, wait_s = -1;

    snprintf(root, sizeof(root), "%s/gpu3", base);
    snprintf(ordstr, sizeof(ordstr), "%d", 3);
    CHECK(write_claim(root, "c", uuid[3], 10) == 0);
    CHECK(pipe(pipefd) == 0);
    {
        char *args[] = {"capture", ordstr, NULL};

        cap = spawn(self, root, pipefd[1], args);
    }
    close(pipefd[1]);
    /* The region check needs the cells running: do it from a forked observer at 8 s. */
    {
        pid_t obs;

        snprintf(root, sizeof(root), "%s/gpu%d-claim0", base, cells[2].ord);
        obs = fork();
        if (obs == 0) {
            sleep(8);
            check_region(root);
            _exit(check_failures != 0);
        }
        run_cells(self, base, cells, 3, uuid, st);
        CHECK(waitpid(obs, &status, 0) == obs && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    f = fdopen(pipefd[0], "r");
    CHECK(f != NULL && fscanf(f, "%lf %lf", &capture_s, &wait_s) == 2);
    CHECK(waitpid(cap, &status, 0) == cap && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    printf("true share (fake GPU timeline), mean of %d..%d s:\n", MEASURE_FROM_S, RUN_S);
    printf("  30 %%, one process, mixed kernels     %6.2f%%  (first second %5.2f%%)\n",
           cells[0].share[0], cells[0].first_s[0]);
    printf("  30/70 pair, 2 ms kernels              %6.2f%% / %6.2f%%\n", cells[1].share[0],
           cells[1].share[1]);
    printf("  30 %%, two processes, 0.1 ms kernels  %6.2f%%\n", cells[2].share[0]);
    printf("  10 %%, 50 ms kernels: two launches took %.0f ms; 100 capture launches %.1f ms\n",
           wait_s * 1e3, capture_s * 1e3);
    /* Bounds for a loaded 2-core machine; `compute_test sweep` checks the goals. */
    CHECK(absd(cells[0].share[0] - 30) <= 3);
    CHECK(cells[0].first_s[0] <= 35);
    CHECK(absd(cells[1].share[0] - 30) <= 3);
    CHECK(absd(cells[1].share[1] - 70) <= 3);
    CHECK(absd(cells[2].share[0] - 30) <= 3);
    CHECK(capture_s >= 0 && capture_s < 0.1);
    CHECK(wait_s > 0.2);
    kills(self, base, uuid[0], 0, st, false);
    kills(self, base, uuid[1], 1, st, true);
    limit_change(self, base, uuid[2], 2, st);
    streams_case(self, base, uuid, 3, st);
    return 0;
}

static int sweep(const char *self, const char *base, char uuid[][96], fake_state *st,
                 unsigned only_limit)
{
    static const unsigned limits[] = {10, 30, 50, 70, 90};
    static const int procs[] = {1, 2, 4};
    struct cell all[5 * 3 * 2 * K_COUNT];
    int n = 0;
    double sum = 0, worst = 0, worst_first = -100, worst_settle = 0, worst_low = 100;
    int runs = 0, settle[3] = {0, 0, 0}, short_runs = 0;

    for (size_t a = 0; a < sizeof(limits) / sizeof(limits[0]); a++)
        for (size_t b = 0; b < sizeof(procs) / sizeof(procs[0]); b++)
            for (int nc = 1; nc <= 2; nc++)
                for (int k = 0; k < K_COUNT && (only_limit == 0 || only_limit == limits[a]); k++)
                    all[n++] = (struct cell){.nclaims = nc, .procs = procs[b],
                                             .limit = {limits[a], 100 - limits[a]}, .k = k};
    for (int i = 0, batch = 0; i < n; i += batch) {
        int procs_in_batch = 0;
        char dir[600];

        /* Up to MAX_CELLS GPUs and MAX_BATCH_PROCS processes (the fake has 64 slots) at once. */
        for (batch = 0; i + batch < n && batch < MAX_CELLS &&
                        procs_in_batch + all[i + batch].procs * all[i + batch].nclaims <=
                            MAX_BATCH_PROCS;
             batch++)
            procs_in_batch += all[i + batch].procs * all[i + batch].nclaims;
        snprintf(dir, sizeof(dir), "%s/batch%d", base, i);
        CHECK(mkdir(dir, 0777) == 0);
        for (int j = 0; j < batch; j++)
            all[i + j].ord = j;
        run_cells(self, dir, &all[i], batch, uuid, st);
    }
    printf("limit | procs | claims | kernels |  share  | error | first s | settling (band) | "
           "lowest s\n");
    printf("------|-------|--------|---------|---------|-------|---------|-----------------|"
           "---------\n");
    for (int i = 0; i < n; i++) {
        for (int a = 0; a < all[i].nclaims; a++) {
            double e = all[i].share[a] - all[i].limit[a], low = 100;
            /* One second varies by sqrt 2 times what the two-second band allows. */
            double allowed = fmax(5, all[i].band[a] * M_SQRT2);

            /* The lowest whole second once settled, from 3 s at the earliest. */
            for (int k = (int)ceil(fmax(3, all[i].settle_s[a])); k < all[i].seconds[a]; k++)
                low = fmin(low, all[i].second[a][k]);
            printf("%4u%% | %5d | %6d | %7s | %6.2f%% | %+5.2f | %6.1f%% | %5.2f s (%4.1f) | "
                   "%6.1f%%\n",
                   all[i].limit[a], all[i].procs, all[i].nclaims, kernel_names[all[i].k],
                   all[i].share[a], e, all[i].first_s[a], all[i].settle_s[a], all[i].band[a],
                   low);
            if (low < all[i].limit[a] - allowed)
                short_runs++;
            if (allowed <= 5 && low - all[i].limit[a] < worst_low)
                worst_low = low - all[i].limit[a];
            if (all[i].settle_s[a] > 3 || low < all[i].limit[a] - allowed) {
                /* What a late or short run did, second by second. */
                printf("      seconds:");
                for (int k = 0; k < all[i].seconds[a]; k++)
                    printf(" %.1f", all[i].second[a][k]);
                printf("\n");
            }
            settle[all[i].settle_s[a] <= 3 ? 0 : all[i].settle_s[a] <= 5 ? 1 : 2]++;
            worst_settle = all[i].settle_s[a] > worst_settle ? all[i].settle_s[a] : worst_settle;
            sum += absd(e);
            worst = absd(e) > worst ? absd(e) : worst;
            if (all[i].first_s[a] - all[i].limit[a] > worst_first)
                worst_first = all[i].first_s[a] - all[i].limit[a];
            runs++;
        }
    }
    printf("mean absolute error %.2f points over %d claim runs (goal <= 1); worst %.2f (<= 3); "
           "worst first second %+.2f points (<= +5); settled within 3 s: %d, 3-5 s: %d, later: %d "
           "(worst %.2f s); lowest second once settled %+.2f points (>= -5; kernels that vary "
           "more by themselves: their spread), below that in %d runs\n",
           sum / runs, runs, worst, worst_first, settle[0], settle[1], settle[2], worst_settle,
           worst_low, short_runs);
    CHECK(sum / runs <= 1);
    CHECK(worst <= 3);
    CHECK(worst_first <= 5);
    /*
     * Real time on a shared host, where a child starved of CPU leaves a dip
     * in its claim's busy time that the limiter cannot see: 99 % of the runs
     * settled within 3 s and without a second more than 5 points (or the
     * kernels' own spread) below the limit, so that one run caught by a stall
     * does not fail the sweep (on a quiet host every run meets both: 180 of
     * 180 in each of four sweeps, worst settling 2.31 s).
     */
    CHECK(short_runs <= runs / 100);
    CHECK(settle[0] >= runs * 99 / 100);
    return 0;
}

/* One cell run in copies at once (see the header): the figures behind "how much a second varies". */
static int cell_copies(const char *self, const char *base, char uuid[][96], fake_state *st,
                       const struct cell *proto, int copies)
{
    struct cell cells[MAX_CELLS];
    double sd_sum = 0, lo = 100, hi = 0, settle_sum = 0, settle_worst = 0;

    for (int i = 0; i < copies; i++) {
        cells[i] = *proto;
        cells[i].ord = i;
    }
    run_cells(self, base, cells, copies, uuid, st);
    for (int i = 0; i < copies; i++) {
        const struct cell *c = &cells[i];
        double sum = 0, sq = 0;
        int n = 0;

        for (int a = 0; a < c->nclaims; a++) {
            printf("copy %d claim %d (%u %%): %.2f %%, settled %.2f s, seconds:", i, a,
                   c->limit[a], c->share[a], c->settle_s[a]);
            for (int k = 0; k < c->seconds[a]; k++)
                printf(" %.1f", c->second[a][k]);
            printf("\n");
        }
        for (int k = 3; k < c->seconds[0]; k++, n++) {
            sum += c->second[0][k];
            sq += c->second[0][k] * c->second[0][k];
            lo = fmin(lo, c->second[0][k]);
            hi = fmax(hi, c->second[0][k]);
        }
        if (n > 0)
            sd_sum += sqrt(fmax(0, sq / n - (sum / n) * (sum / n)));
        settle_sum += c->settle_s[0];
        settle_worst = fmax(settle_worst, c->settle_s[0]);
    }
    printf("%u %% claim, %d process(es) of %s kernels, %d claim(s) per GPU, %d copies: seconds "
           "from 3 s vary by %.2f points (standard deviation, mean over copies), lowest %.1f %%, "
           "highest %.1f %%; settled in %.2f s on average, %.2f s at worst\n",
           proto->limit[0], proto->procs, kernel_names[proto->k], proto->nclaims, copies,
           sd_sum / copies, lo, hi, settle_sum / copies, settle_worst);
    return 0;
}

/* Parses `cell`'s arguments into proto and copies; false (and says which) if one is bad. */
static bool cell_args(char **argv, struct cell *proto, int *copies)
{
    char *end;
    long limit = strtol(argv[2], &end, 10), procs, claims;

    if (*end != '\0' || limit < 1 || limit > 99) {
        fprintf(stderr, "compute_test cell: LIMIT must be 1-99 (percent), not %s\n", argv[2]);
        return false;
    }
    procs = strtol(argv[3], &end, 10);
    if (*end != '\0' || procs < 1 || procs > MAX_PROCS) {
        fprintf(stderr, "compute_test cell: PROCS must be 1-%d, not %s\n", MAX_PROCS, argv[3]);
        return false;
    }
    claims = strtol(argv[4], &end, 10);
    if (*end != '\0' || claims < 1 || claims > 2) {
        fprintf(stderr, "compute_test cell: CLAIMS must be 1 or 2, not %s\n", argv[4]);
        return false;
    }
    *proto = (struct cell){.nclaims = (int)claims, .procs = (int)procs,
                           .limit = {(unsigned)limit, 100 - (unsigned)limit}, .k = K_COUNT};
    for (int k = 0; k < K_COUNT; k++) {
        if (strcmp(argv[5], kernel_args[k]) == 0)
            proto->k = (enum kernels)k;
    }
    if (proto->k == K_COUNT) {
        fprintf(stderr, "compute_test cell: KERNELS must be 0.1, 2, 20 or mix, not %s\n",
                argv[5]);
        return false;
    }
    *copies = (int)strtol(argv[6], &end, 10);
    if (*end != '\0' || *copies < 1 || *copies > MAX_CELLS ||
        *copies * (int)(procs * claims) > MAX_CELL_COPY_PROCS) {
        fprintf(stderr, "compute_test cell: COPIES must be 1-%d, with at most %d processes in "
                        "all, not %s\n", MAX_CELLS, MAX_CELL_COPY_PROCS, argv[6]);
        return false;
    }
    return true;
}

int main(int argc, char **argv)
{
    char base[] = "/tmp/vgpu-compute-XXXXXX", uuid[8][96], cmd[600], err[256];
    const char *dir = getenv("VGPU_FAKE_STATE_DIR");
    bool full = (argc == 2 || argc == 3) && strcmp(argv[1], "sweep") == 0;
    bool kills_only = argc == 2 && strcmp(argv[1], "kills") == 0;
    bool streams_only = argc == 2 && strcmp(argv[1], "streams") == 0;
    bool streams_one = argc == 6 && strcmp(argv[1], "streams") == 0;
    bool streams_grid_run = (argc == 2 || (argc == 3 && atoi(argv[2]) >= 1 && atoi(argv[2]) <= 8)) &&
                            strcmp(argv[1], "streams-grid") == 0;
    bool one_cell = argc == 7 && strcmp(argv[1], "cell") == 0;
    struct cell proto;
    int copies = 0, need = full || streams_grid_run ? 8 : 4;
    fake_state st;
    nvmlDevice_t dev;

    if (argc == 7 && strcmp(argv[1], "busy") == 0)
        return child_busy(atoi(argv[2]), argv[3], atoi(argv[4]), atoi(argv[5]),
                          (unsigned)atoi(argv[6]));
    if (argc == 7 && strcmp(argv[1], "threads") == 0)
        return child_threads(atoi(argv[2]), argv[3], atoi(argv[4]), atoi(argv[5]),
                             (unsigned)atoi(argv[6]));
    if (argc == 3 && strcmp(argv[1], "capture") == 0)
        return child_capture(atoi(argv[2]));
    if (one_cell) {
        if (!cell_args(argv, &proto, &copies))
            return 2;
        need = copies;
    }
    if (vgpu_test_claims_ns_supported() != 0) {
        check_unavailable("compute_test", "claims must be read-only mounts in a private mount "
                          "namespace, which needs root");
        return check_report("compute_test");
    }
    if ((!full && !kills_only && !streams_only && !streams_one && !streams_grid_run && !one_cell &&
         (argc != 2 || strcmp(argv[1], "quick") != 0)) ||
        getenv("VGPU_TEST_LIB") == NULL || dir == NULL || mkdtemp(base) == NULL ||
        nvmlInit_v2() != NVML_SUCCESS) {
        fprintf(stderr, "usage: compute_test quick | kills | streams [LIMIT THREADS KERNEL_US "
                        "small|full] | streams-grid [PARALLEL] | sweep [LIMIT] | cell "
                        "LIMIT PROCS CLAIMS KERNELS COPIES (needs VGPU_TEST_LIB, "
                        "VGPU_FAKE_STATE_DIR and the fake NVML)\n");
        return 2;
    }
    if (fake_state_open(&st, dir, 0, err, sizeof(err)) != 0) {
        fprintf(stderr, "compute_test: %s\n", err);
        return 2;
    }
    for (int i = 0; i < need; i++) {
        CHECK(nvmlDeviceGetHandleByIndex_v2((unsigned)i, &dev) == NVML_SUCCESS);
        CHECK(nvmlDeviceGetUUID(dev, uuid[i], sizeof(uuid[i])) == NVML_SUCCESS);
    }
    if (check_failures != 0)
        return check_report("compute_test");
    if (kills_only) {
        kills(argv[0], base, uuid[0], 0, &st, false);
        kills(argv[0], base, uuid[1], 1, &st, true);
    } else if (streams_only) {
        streams_case(argv[0], base, uuid, 0, &st);
    } else if (streams_one) {
        char kernel[32];
        struct streams_run r = {.limit = (unsigned)atoi(argv[2]), .threads = atoi(argv[3]),
                                .kernel = kernel,
                                .grid = strcmp(argv[5], "small") == 0 ? 8 : 1024};

        snprintf(kernel, sizeof(kernel), "k_%dus", atoi(argv[4]));
        streams_batch(argv[0], base, uuid, &st, &r, 1);
        streams_print_seconds(&r);
    } else if (streams_grid_run) {
        streams_grid(argv[0], base, uuid, &st, argc == 3 ? atoi(argv[2]) : 2);
    }
    else if (full)
        sweep(argv[0], base, uuid, &st, argc == 3 ? (unsigned)atoi(argv[2]) : 0);
    else if (one_cell)
        cell_copies(argv[0], base, uuid, &st, &proto, copies);
    else
        quick(argv[0], base, uuid, &st);
    fake_state_close(&st);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", base);
    CHECK(system(cmd) == 0);
    return check_report("compute_test");
}
