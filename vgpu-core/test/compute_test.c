/*
 * compute_test.c - the compute limiter with the fake driver: real processes,
 * real threads, real time; shares measured through the fake NVML.
 *
 * The parent writes one claim per fake GPU and starts children of this
 * program with LD_PRELOAD=libvgpu.so, all at once (the cases run in
 * parallel, ~15 s in all):
 *   GPU 0: one process at a 30 % limit        -> 30 +- 7 % over 10 s
 *   GPU 1: one process at a 100 % limit       -> more than 90 %
 *   GPU 2: two processes of one claim at 30 % -> together 30 +- 7 %
 *   GPU 3: a 10 % limit on 50 ms kernels: once the limiter has learned their
 *          cost, two launches in a row wait, while 100 launches into a
 *          capturing stream are never delayed.
 * The fake NVML keeps 128 busy intervals per process, so the kernels are
 * 10 ms long (a shorter kernel followed by a sync would overflow it).
 * Bounds are wide on purpose: the CI machine has 2 shared cores.
 *
 * Env: VGPU_TEST_LIB (libvgpu.so), VGPU_FAKE_STATE_DIR, VGPU_FAKE_GPU_COUNT >= 4.
 */
#include <fcntl.h>
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
#include "vgpu_cuda.h"
#include "vgpu_nvml.h"
#include "vgpu_region.h"

#define RUN_S 13
#define MEASURE_FROM_S 3
#define NGPUS 4

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

/* Child: keeps GPU ord busy with 10 ms kernels (two in flight, then sync) for RUN_S seconds. */
static int child_busy(int ord)
{
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUfunction f;
    double end = now_s() + RUN_S;

    TRY(cuInit(0));
    TRY(cuDeviceGet(&dev, ord));
    TRY(cuDevicePrimaryCtxRetain(&ctx, dev));
    TRY(cuCtxSetCurrent(ctx));
    TRY(cuModuleLoadData(&mod, "compute_test"));
    TRY(cuModuleGetFunction(&f, mod, "busy_10000us"));
    while (now_s() < end) {
        TRY(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));
        TRY(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));
        TRY(cuStreamSynchronize(NULL));
    }
    return 0;
}

/* Child: launches wait once the limiter knows their cost; capture launches never. */
static int child_capture(int ord)
{
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUfunction big, small;
    CUstream s;
    CUgraph g;
    CUgraphExec e;
    double t0, capture_s, wait_s, learn_end = now_s() + 4;

    TRY(cuInit(0));
    TRY(cuDeviceGet(&dev, ord));
    TRY(cuDevicePrimaryCtxRetain(&ctx, dev));
    TRY(cuCtxSetCurrent(ctx));
    TRY(cuModuleLoadData(&mod, "compute_test"));
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

static int write_claim(const char *root, const char *name, const char *uuid, unsigned sm)
{
    char path[512];
    FILE *f;
    int fd;

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

static pid_t spawn(const char *self, const char *mode, int ord, int out_fd)
{
    char ordstr[16];
    pid_t pid = fork();

    if (pid != 0)
        return pid;
    snprintf(ordstr, sizeof(ordstr), "%d", ord);
    setenv("LD_PRELOAD", getenv("VGPU_TEST_LIB"), 1);
    if (vgpu_test_enter_claims_ns(getenv("VGPU_CLAIMS_ROOT")) != 0)
        _exit(125);
    if (out_fd >= 0)
        dup2(out_fd, 1);
    execl(self, self, mode, ordstr, (char *)NULL);
    _exit(127);
}

/* Summed smUtil of every process NVML sees busy on dev (percent). */
static unsigned share(nvmlDevice_t dev)
{
    nvmlProcessUtilizationSample_t s[16];
    unsigned int n = 16, sum = 0;

    if (nvmlDeviceGetProcessUtilization(dev, s, &n, 0) != NVML_SUCCESS)
        return 0;
    for (unsigned int i = 0; i < n; i++)
        sum += s[i].smUtil;
    return sum;
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

/* While both run: one elected refiller, both processes' launches counted in their slots. */
static void check_region(const char *root, const char *name)
{
    struct vgpu_region *r = map_region(root, name);
    int active = 0;

    CHECK(r != NULL);
    if (r == NULL)
        return;
    CHECK(r->devices[0].refiller_generation >= 1);
    CHECK(r->devices[0].refiller_pid != 0);
    CHECK(r->devices[0].bucket_refill_rate > 0);
    for (int s = 0; s < VGPU_REGION_MAX_SLOTS; s++)
        active += r->slots[s].devices[0].kernel_launches > 0 &&
                  r->slots[s].devices[0].launch_cost_ns > 0;
    CHECK(active == 2);
    munmap(r, VGPU_REGION_SIZE);
}

int main(int argc, char **argv)
{
    static const char *const names[NGPUS] = {"a-30", "b-100", "c-30x2", "d-10"};
    static const unsigned limits[NGPUS] = {30, 100, 30, 10};
    char root[] = "/tmp/vgpu-compute-XXXXXX", uuid[NGPUS][96], cmd[600];
    nvmlDevice_t devs[NGPUS];
    double sum[NGPUS] = {0};
    int nsamples = 0, pipefd[2], status;
    pid_t kids[5];
    FILE *cap;
    double capture_s = -1, wait_s = -1;

    if (argc == 3)
        return strcmp(argv[1], "capture") == 0 ? child_capture(atoi(argv[2]))
                                                : child_busy(atoi(argv[2]));
    if (vgpu_test_claims_ns_supported() != 0) {
        printf("skip compute_test: claims must be read-only mounts in a private mount namespace, "
               "which needs root\n");
        return 0;
    }
    if (getenv("VGPU_TEST_LIB") == NULL || mkdtemp(root) == NULL || nvmlInit_v2() != NVML_SUCCESS) {
        fprintf(stderr, "compute_test: needs VGPU_TEST_LIB and the fake NVML\n");
        return 2;
    }
    for (int i = 0; i < NGPUS; i++) {
        CHECK(nvmlDeviceGetHandleByIndex_v2((unsigned)i, &devs[i]) == NVML_SUCCESS);
        CHECK(nvmlDeviceGetUUID(devs[i], uuid[i], sizeof(uuid[i])) == NVML_SUCCESS);
        CHECK(write_claim(root, names[i], uuid[i], limits[i]) == 0);
    }
    if (check_failures != 0)
        return check_report("compute_test");
    setenv("VGPU_CLAIMS_ROOT", root, 1);
    CHECK(pipe(pipefd) == 0);
    kids[0] = spawn(argv[0], "busy", 0, -1);
    kids[1] = spawn(argv[0], "busy", 1, -1);
    kids[2] = spawn(argv[0], "busy", 2, -1);
    kids[3] = spawn(argv[0], "busy", 2, -1);
    kids[4] = spawn(argv[0], "capture", 3, pipefd[1]);
    close(pipefd[1]);
    for (int t = 1; t <= RUN_S - 1; t++) {
        sleep(1);
        if (t < MEASURE_FROM_S)
            continue;
        for (int i = 0; i < NGPUS; i++)
            sum[i] += share(devs[i]);
        nsamples++;
    }
    check_region(root, names[2]);
    cap = fdopen(pipefd[0], "r");
    CHECK(cap != NULL && fscanf(cap, "%lf %lf", &capture_s, &wait_s) == 2);
    for (int k = 0; k < 5; k++) {
        CHECK(waitpid(kids[k], &status, 0) == kids[k]);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    printf("limit -> share through the fake NVML (mean of %d one-second samples)\n", nsamples);
    printf("  30%%, one process     %5.1f%%\n", sum[0] / nsamples);
    printf("  100%%, one process    %5.1f%%\n", sum[1] / nsamples);
    printf("  30%%, two processes   %5.1f%%\n", sum[2] / nsamples);
    printf("  10%%, 50 ms kernels: two launches took %.0f ms; 100 capture launches %.1f ms\n",
           wait_s * 1e3, capture_s * 1e3);
    CHECK(sum[0] / nsamples >= 23 && sum[0] / nsamples <= 37);
    CHECK(sum[1] / nsamples > 90);
    CHECK(sum[2] / nsamples >= 23 && sum[2] / nsamples <= 37);
    CHECK(capture_s >= 0 && capture_s < 0.1);
    CHECK(wait_s > 0.2);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
    CHECK(system(cmd) == 0);
    return check_report("compute_test");
}
