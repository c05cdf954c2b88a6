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
 * burst_test.c - libvgpu.so's burst grants (docs/architecture.md "Burstable
 * memory"): a claim's limit on a GPU is guarantee + the grant in
 * <claim>/host/burst, which the library reads only when an allocation
 * crosses it, asking the plugin over <claim>/host/burst.sock first
 * (include/vgpu_burstsock.h).
 *
 * Run without arguments it is the driver: it writes a claim (guarantee
 * 1 GiB on the fake GPU 0) as the plugin would, serves host/burst.sock from a
 * thread (a scripted plugin: grants up to a room, refuses, sleeps, answers
 * garbage or lies, closes, hangs; it writes host/burst atomically before a
 * grant is answered and counts connections), and runs itself preloaded with
 * libvgpu.so (VGPU_TEST_LIB) as "probe OP..." in a private mount namespace,
 * as root. Probe ops: a:<MiB>:ok|oom (allocate and keep), f (free all),
 * t:<MiB> (cuMemGetInfo and NVML total), w:<MiB> (the plugin lowers or
 * raises the grant: host/burst rewritten), x:<MiB> (race: wait on fd 3,
 * allocate, exit 10 on success, 11 on OOM, after holding it 300 ms),
 * ms:<lo>:<hi> (the last allocation took lo..hi ms).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "claimns.h"
#include "vgpu_burstsock.h"
#include "vgpu_cuda.h"
#include "vgpu_nvml.h"
#include "vgpu_region.h"

#define MiB (1ULL << 20)
#define GUARANTEE (1024 * MiB)

static char self_exe[4096];
static char root[600], claim[700], uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];

/* ---- the probe ---- */

static uint64_t now_ms(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

/* Writes the claim's host/burst with one grant (bytes) for gpu, atomically. */
static int write_burst(const char *dir, const char *gpu, uint64_t bytes)
{
    char path[800], tmp[800], text[200];
    int fd, n;

    snprintf(path, sizeof(path), "%s/host/burst", dir);
    snprintf(tmp, sizeof(tmp), "%s/host/.burst.tmp", dir);
    n = snprintf(text, sizeof(text), "version=1\ngpu %s %" PRIu64 "\n", gpu, bytes);
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || write(fd, text, (size_t)n) != n) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    close(fd);
    return rename(tmp, path);
}

static int probe(int argc, char **argv)
{
    CUdeviceptr ptrs[64];
    int nptrs = 0;
    uint64_t last_ms = 0;
    CUcontext ctx;
    CUresult rc;

    CHECK_EQ(cuInit(0), CUDA_SUCCESS);
    CHECK_EQ(cuCtxCreate_v2(&ctx, 0, 0), CUDA_SUCCESS);
    for (int i = 2; i < argc; i++) {
        const char *op = argv[i];
        unsigned long long a = 0, b = 0;
        char want[8] = "";

        if (sscanf(op, "a:%llu:%7s", &a, want) == 2) {
            uint64_t t0 = now_ms();
            CUdeviceptr p = 0;

            rc = cuMemAlloc_v2(&p, a * MiB);
            last_ms = now_ms() - t0;
            if (strcmp(want, "ok") == 0) {
                CHECK_EQ(rc, CUDA_SUCCESS);
            } else {
                CHECK_EQ(rc, CUDA_ERROR_OUT_OF_MEMORY);
            }
            if (rc == CUDA_SUCCESS && nptrs < 64)
                ptrs[nptrs++] = p;
            if (check_failures != 0)
                fprintf(stderr, "probe: op %s failed (rc %d)\n", op, (int)rc);
        } else if (strcmp(op, "f") == 0) {
            while (nptrs > 0)
                CHECK_EQ(cuMemFree_v2(ptrs[--nptrs]), CUDA_SUCCESS);
        } else if (sscanf(op, "t:%llu", &a) == 1) {
            size_t fr = 0, tot = 0;
            nvmlDevice_t dev;
            nvmlMemory_t mem = {0};

            CHECK_EQ(cuMemGetInfo_v2(&fr, &tot), CUDA_SUCCESS);
            CHECK_EQ_U64(tot, a * MiB);
            CHECK_EQ(nvmlInit_v2(), NVML_SUCCESS);
            CHECK_EQ(nvmlDeviceGetHandleByIndex_v2(0, &dev), NVML_SUCCESS);
            CHECK_EQ(nvmlDeviceGetMemoryInfo(dev, &mem), NVML_SUCCESS);
            CHECK_EQ_U64(mem.total, a * MiB);
        } else if (sscanf(op, "w:%llu", &a) == 1) {
            CHECK_EQ(write_burst(getenv("BURST_TEST_CLAIM"), getenv("BURST_TEST_UUID"), a * MiB), 0);
        } else if (sscanf(op, "x:%llu", &a) == 1) {
            CUdeviceptr p = 0;
            char c;

            CHECK_EQ(read(3, &c, 1), 1);
            rc = cuMemAlloc_v2(&p, a * MiB);
            usleep(300000);
            if (check_failures != 0)
                return 1;
            return rc == CUDA_SUCCESS ? 10 : rc == CUDA_ERROR_OUT_OF_MEMORY ? 11 : 1;
        } else if (sscanf(op, "u:%7[a-z]:%llu", want, &a) == 2) {
            char path[700];
            const struct vgpu_region *r;
            int fd;

            snprintf(path, sizeof(path), "%s/%s/shm/region", getenv("VGPU_CLAIMS_ROOT"), want);
            fd = open(path, O_RDONLY);
            CHECK(fd >= 0);
            r = fd < 0 ? MAP_FAILED : mmap(NULL, VGPU_REGION_SIZE, PROT_READ, MAP_SHARED, fd, 0);
            if (fd >= 0)
                close(fd);
            CHECK(r != MAP_FAILED);
            if (r != MAP_FAILED) {
                CHECK_EQ_U64(__atomic_load_n(&r->devices[0].used_bytes, __ATOMIC_ACQUIRE),
                             a * MiB);
                munmap((void *)r, VGPU_REGION_SIZE);
            }
        } else if (sscanf(op, "ms:%llu:%llu", &a, &b) == 2) {
            CHECK(last_ms >= a && last_ms <= b);
            if (last_ms < a || last_ms > b)
                fprintf(stderr, "probe: last allocation took %llu ms\n",
                        (unsigned long long)last_ms);
        } else {
            fprintf(stderr, "probe: unknown op %s\n", op);
            return 1;
        }
    }
    return check_failures != 0;
}

/* ---- the scripted plugin ---- */

enum mode { GRANT, REFUSE, SLEEP, GARBAGE, LIAR, CLOSE, HANG };

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    enum mode mode;
    uint64_t room;     /* GRANT: the largest total grant given */
    uint64_t grant;    /* what host/burst says */
    int connects;
    int fd;
    bool stop;
    char last[VGPU_BURST_MSG_MAX + 1];
} S = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static void answer(int c)
{
    char req[VGPU_BURST_MSG_MAX + 1], rep[VGPU_BURST_MSG_MAX], gpu[64];
    unsigned long long need;
    enum mode m;
    ssize_t n = recv(c, req, sizeof(req) - 1, 0);
    int len = 0;

    if (n <= 0)
        return;
    req[n] = '\0';
    pthread_mutex_lock(&S.mu);
    snprintf(S.last, sizeof(S.last), "%s", req);
    m = S.mode;
    pthread_mutex_unlock(&S.mu);
    if (sscanf(req, "grow %63s %llu", gpu, &need) != 2 || req[n - 1] != '\n') {
        len = snprintf(rep, sizeof(rep), "refused request 0\n");
    } else if (m == GRANT) {
        pthread_mutex_lock(&S.mu);
        if (strcasecmp(gpu, uuid) != 0) {
            len = snprintf(rep, sizeof(rep), "refused gpu 0\n");
        } else if (need > S.room) {
            len = snprintf(rep, sizeof(rep), "refused full %" PRIu64 "\n", S.grant);
        } else {
            if (need > S.grant) {
                S.grant = need;
                CHECK_EQ(write_burst(claim, uuid, S.grant), 0); /* before the answer */
            }
            len = snprintf(rep, sizeof(rep), "granted %" PRIu64 "\n", S.grant);
        }
        pthread_mutex_unlock(&S.mu);
    } else if (m == REFUSE) {
        len = snprintf(rep, sizeof(rep), "refused limit 0\n");
    } else if (m == SLEEP) {
        sleep(1);
        len = snprintf(rep, sizeof(rep), "granted 1073741824\n");
    } else if (m == GARBAGE) {
        len = snprintf(rep, sizeof(rep), "yes, take it all\n");
    } else if (m == LIAR) {
        len = snprintf(rep, sizeof(rep), "granted 1073741824\n"); /* host/burst says nothing */
    } else if (m == HANG) {
        pthread_mutex_lock(&S.mu);
        while (!S.stop && S.mode == HANG)
            pthread_cond_wait(&S.cv, &S.mu);
        pthread_mutex_unlock(&S.mu);
        return;
    } else {
        return; /* CLOSE */
    }
    if (send(c, rep, (size_t)len, MSG_NOSIGNAL) != len)
        fprintf(stderr, "server: send: %s\n", strerror(errno));
}

static void *serve_one(void *arg)
{
    int c = (int)(intptr_t)arg;

    answer(c);
    close(c);
    return NULL;
}

static void *server(void *arg)
{
    (void)arg;
    for (;;) {
        int c = accept4(S.fd, NULL, NULL, SOCK_CLOEXEC);

        if (c < 0) {
            if (errno == EINTR)
                continue;
            return NULL;
        }
        pthread_mutex_lock(&S.mu);
        if (S.stop) {
            pthread_mutex_unlock(&S.mu);
            close(c);
            return NULL;
        }
        S.connects++;
        pthread_cond_broadcast(&S.cv);
        pthread_mutex_unlock(&S.mu);
        /* One thread per connection: a sleeping answer does not hold up the next. */
        pthread_t t;

        if (pthread_create(&t, NULL, serve_one, (void *)(intptr_t)c) != 0) {
            answer(c);
            close(c);
        } else {
            pthread_detach(t);
        }
    }
}

/* Sets the plugin's script; a fresh host/burst with the grant (or none when grant is -1). */
static void script(enum mode m, uint64_t room, int64_t grant)
{
    char path[800];

    pthread_mutex_lock(&S.mu);
    S.mode = m;
    S.room = room;
    S.connects = 0;
    S.grant = grant < 0 ? 0 : (uint64_t)grant;
    S.last[0] = '\0';
    pthread_cond_broadcast(&S.cv);
    pthread_mutex_unlock(&S.mu);
    snprintf(path, sizeof(path), "%s/host/burst", claim);
    unlink(path);
    if (grant >= 0)
        CHECK_EQ(write_burst(claim, uuid, (uint64_t)grant), 0);
}

static int connects(void)
{
    int n;

    pthread_mutex_lock(&S.mu);
    n = S.connects;
    pthread_mutex_unlock(&S.mu);
    return n;
}

/* Starts the probe with ops (NULL-terminated), fd 3 = race_fd when >= 0; returns its pid. */
static pid_t start_probe(const char *const *ops, int race_fd)
{
    pid_t pid = fork();

    if (pid == 0) {
        const char *argv[32] = {self_exe, "probe"};
        int n = 2;

        for (; ops[n - 2] != NULL && n < 31; n++)
            argv[n] = ops[n - 2];
        argv[n] = NULL;
        if (race_fd >= 0 && dup2(race_fd, 3) != 3)
            _exit(126);
        const char *prefix = getenv("VGPU_TEST_PRELOAD_PREFIX");
        char preload[4096];

        snprintf(preload, sizeof(preload), "%s%s%s", prefix != NULL ? prefix : "",
                 prefix != NULL ? ":" : "", getenv("VGPU_TEST_LIB"));
        setenv("LD_PRELOAD", preload, 1);
        setenv("VGPU_CLAIMS_ROOT", root, 1);
        setenv("BURST_TEST_CLAIM", claim, 1);
        setenv("BURST_TEST_UUID", uuid, 1);
        if (vgpu_test_enter_claims_ns(root) != 0)
            _exit(125);
        execv(self_exe, (char *const *)argv);
        _exit(127);
    }
    return pid;
}

static int wait_probe(pid_t pid)
{
    int st;

    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

#define RUN(...)                                                                    \
    do {                                                                            \
        const char *ops_[] = {__VA_ARGS__, NULL};                                   \
        int st_ = wait_probe(start_probe(ops_, -1));                               \
        CHECK_EQ(st_, 0);                                                           \
        if (st_ != 0)                                                               \
            fprintf(stderr, "burst_test:%d: probe exited %d\n", __LINE__, st_);    \
    } while (0)

/* The claim's region, device record 0: used bytes and refusals. */
static void region_counts(uint64_t *used, uint64_t *refusals)
{
    char path[800];
    const struct vgpu_region *r;
    int fd;

    *used = *refusals = UINT64_MAX;
    snprintf(path, sizeof(path), "%s/shm/region", claim);
    fd = open(path, O_RDONLY);
    if (fd < 0)
        return;
    r = mmap(NULL, VGPU_REGION_SIZE, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (r == MAP_FAILED)
        return;
    *used = __atomic_load_n(&r->devices[0].used_bytes, __ATOMIC_ACQUIRE);
    *refusals = __atomic_load_n(&r->devices[0].refusals, __ATOMIC_ACQUIRE);
    munmap((void *)r, VGPU_REGION_SIZE);
}

/* Two probes race for the last grant: exactly one gets it. */
static void race(void)
{
    const char *ops[] = {"a:512:ok", "x:256", NULL};
    int p[2], st[2];
    pid_t a, b;

    script(GRANT, 256 * MiB, -1);
    CHECK_EQ(pipe(p), 0);
    a = start_probe(ops, p[0]);
    b = start_probe(ops, p[0]);
    close(p[0]);
    usleep(500000); /* both hold 512 MiB: the claim is at its guarantee */
    CHECK_EQ(write(p[1], "xx", 2), 2);
    close(p[1]);
    st[0] = wait_probe(a);
    st[1] = wait_probe(b);
    CHECK((st[0] == 10 && st[1] == 11) || (st[0] == 11 && st[1] == 10));
    if (!((st[0] == 10 && st[1] == 11) || (st[0] == 11 && st[1] == 10)))
        fprintf(stderr, "burst_test: race: probes exited %d and %d\n", st[0], st[1]);
}

/* A probe killed while it waits for the plugin leaves the claim's counter exact. */
static void killed_asking(void)
{
    const char *ops[] = {"a:768:ok", "a:512:oom", NULL};
    uint64_t used, refusals;
    struct timespec until;
    pid_t pid;
    int rc = 0;

    script(HANG, 0, -1);
    pid = start_probe(ops, -1);
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 10;
    pthread_mutex_lock(&S.mu);
    while (S.connects == 0 && rc == 0)
        rc = pthread_cond_timedwait(&S.cv, &S.mu, &until);
    pthread_mutex_unlock(&S.mu);
    CHECK_EQ(rc, 0);
    kill(pid, SIGKILL);
    CHECK_EQ(wait_probe(pid), 128 + SIGKILL);
    script(GRANT, 0, -1);
    /* The dead probe's 768 MiB come back: the whole guarantee fits again. */
    RUN("a:1024:ok", "f");
    region_counts(&used, &refusals);
    CHECK_EQ_U64(used, 0);
}

/*
 * Two claims of the container on the GPU, b with a grant: the grant raises
 * b's limit, never a's (each claim's counter stays within its own
 * guarantee + grant).
 */
static void two_claims(void)
{
    char path[800], cfg[512];
    FILE *f;
    int fd;

    snprintf(path, sizeof(path), "mkdir -p %s/b/shm %s/b/host", root, root);
    CHECK(system(path) == 0);
    snprintf(cfg, sizeof(cfg),
             "version=1\nclaim=b\ndevice.count=1\ndevice.0.uuid=%s\n"
             "device.0.memory_limit_bytes=%llu\ndevice.0.sm_limit_percent=0\n",
             uuid, (unsigned long long)GUARANTEE);
    snprintf(path, sizeof(path), "%s/b/config", root);
    f = fopen(path, "w");
    CHECK(f != NULL);
    if (f == NULL)
        return;
    fputs(cfg, f);
    fclose(f);
    snprintf(path, sizeof(path), "%s/b/shm/region", root);
    fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0666);
    CHECK(fd >= 0 && ftruncate(fd, VGPU_REGION_SIZE) == 0);
    if (fd >= 0)
        close(fd);
    snprintf(path, sizeof(path), "%s/b", root);
    CHECK_EQ(write_burst(path, uuid, 512 * MiB), 0);
    script(REFUSE, 0, -1); /* a: no grant */
    RUN("a:1024:ok", "a:1024:ok", "a:512:ok", "u:a:1024", "u:b:1536", "a:1:oom", "t:2560",
        "u:a:1024", "f");
    snprintf(path, sizeof(path), "rm -rf %s/b", root);
    CHECK(system(path) == 0);
}

static int driver(void)
{
    char state[] = "/tmp/vgpu-burst-test-XXXXXX", cmd[800], path[800];
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    uint64_t used, refusals, before;
    nvmlDevice_t gpu;
    pthread_t th;

    if (vgpu_test_claims_ns_supported() != 0) {
        check_unavailable("burst_test", "needs root for a private mount namespace");
        return check_report("burst_test");
    }
    CHECK(mkdtemp(state) != NULL);
    setenv("VGPU_FAKE_STATE_DIR", state, 1);
    snprintf(root, sizeof(root), "%s/claims", state);
    snprintf(claim, sizeof(claim), "%s/a", root);
    CHECK_EQ(nvmlInit_v2(), NVML_SUCCESS);
    CHECK_EQ(nvmlDeviceGetHandleByIndex_v2(0, &gpu), NVML_SUCCESS);
    CHECK_EQ(nvmlDeviceGetUUID(gpu, uuid, sizeof(uuid)), NVML_SUCCESS);
    CHECK_EQ(vgpu_test_make_claim(root, uuid), 0); /* guarantee 1 GiB */
    snprintf(path, sizeof(path), "%s/host", claim);
    CHECK_EQ(mkdir(path, 0755), 0);
    snprintf(addr.sun_path, sizeof(addr.sun_path), "%s/host/burst.sock", claim);
    S.fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    CHECK(S.fd >= 0);
    CHECK_EQ(bind(S.fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
    CHECK_EQ(listen(S.fd, 16), 0);
    CHECK_EQ(pthread_create(&th, NULL, server, NULL), 0);
    if (check_failures != 0)
        return check_report("burst_test");

    /* Within the guarantee: no connection, no file needed. */
    script(GRANT, 4096 * MiB, -1);
    RUN("a:512:ok", "a:512:ok", "t:1024", "f");
    CHECK_EQ(connects(), 0);

    /* Crossing, granted: the plugin writes 256 MiB, the total shows it. */
    script(GRANT, 4096 * MiB, -1);
    RUN("a:768:ok", "a:512:ok", "t:1280", "a:128:ok", "t:1408", "f");
    CHECK_EQ(connects(), 2); /* each crossing asked for its whole need: 256, then 384 MiB */
    pthread_mutex_lock(&S.mu);
    CHECK_EQ_U64(S.grant, 384 * MiB);
    pthread_mutex_unlock(&S.mu);
    /* Beyond the plugin's room: refused (full), the grant given stays usable. */
    script(GRANT, 256 * MiB, -1);
    RUN("a:768:ok", "a:512:ok", "a:128:oom", "t:1280", "f");
    CHECK_EQ(connects(), 2);

    /* Crossing, refused: OOM, counted in the region. */
    script(REFUSE, 0, -1);
    region_counts(&used, &before);
    RUN("a:768:ok", "a:512:oom", "t:1024", "f");
    CHECK_EQ(connects(), 1);
    region_counts(&used, &refusals);
    CHECK_EQ_U64(refusals, before + 1);
    CHECK_EQ_U64(used, 0);

    /* The request names the GPU and the whole need above the guarantee. */
    snprintf(cmd, sizeof(cmd), "grow %s %llu\n", uuid, 256 * MiB);
    CHECK(strcasecmp(S.last, cmd) == 0);

    /* A plugin that sleeps 1 s: OOM after the 100 ms wait. */
    script(SLEEP, 0, -1);
    RUN("a:768:ok", "a:512:oom", "ms:90:600", "f");
    /* Garbage, a reply the file does not back, no reply: OOM. */
    script(GARBAGE, 0, -1);
    RUN("a:768:ok", "a:512:oom", "f");
    script(LIAR, 0, -1);
    RUN("a:768:ok", "a:512:oom", "t:1024", "f");
    script(CLOSE, 0, -1);
    RUN("a:768:ok", "a:512:oom", "f");
    CHECK_EQ(connects(), 1);

    /* A grant already in the file is used without asking. */
    script(REFUSE, 0, 512 * MiB);
    RUN("t:1536", "a:1024:ok", "a:512:ok", "a:1:oom", "f");
    CHECK_EQ(connects(), 1); /* only the last, 1 MiB past the grant, asked */

    /* The plugin lowers the grant after the probe read it: the reservation rolls back. */
    script(REFUSE, 0, 512 * MiB);
    RUN("a:1024:ok", "a:512:ok", "f", "w:0", "a:1024:ok", "a:256:oom", "t:1024", "f");
    region_counts(&used, &refusals);
    CHECK_EQ_U64(used, 0);

    /* A host/burst that does not parse, or grants another GPU: the guarantee only. */
    script(REFUSE, 0, -1);
    snprintf(path, sizeof(path), "%s/host/burst", claim);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f != NULL) {
        fprintf(f, "version=1\ngpu %s 0536870912\n", uuid);
        fclose(f);
    }
    RUN("t:1024", "a:1024:ok", "a:1:oom", "f");
    CHECK_EQ(write_burst(claim, "GPU-00000000-1111-2222-3333-444444444444", 4096 * MiB), 0);
    RUN("t:1024", "a:1024:ok", "a:1:oom", "f");
    /* Another claim's file is not this claim's grant. */
    snprintf(cmd, sizeof(cmd), "mkdir -p %s/b/host", root);
    CHECK(system(cmd) == 0);
    snprintf(path, sizeof(path), "%s/b", root);
    CHECK_EQ(write_burst(path, uuid, 4096 * MiB), 0);
    RUN("t:1024", "a:1024:ok", "a:1:oom", "f");

    race();
    killed_asking();
    two_claims();

    pthread_mutex_lock(&S.mu);
    S.stop = true;
    pthread_cond_broadcast(&S.cv);
    pthread_mutex_unlock(&S.mu);
    shutdown(S.fd, SHUT_RDWR);
    {
        int c = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

        connect(c, (struct sockaddr *)&addr, sizeof(addr)); /* wakes accept */
        close(c);
    }
    pthread_join(th, NULL);
    close(S.fd);
    nvmlShutdown();
    snprintf(cmd, sizeof(cmd), "rm -rf %s", state);
    CHECK(system(cmd) == 0);
    return check_report("burst_test");
}

int main(int argc, char **argv)
{
    ssize_t n = readlink("/proc/self/exe", self_exe, sizeof(self_exe) - 1);

    if (n > 0)
        self_exe[n] = '\0';
    if (argc > 1 && strcmp(argv[1], "probe") == 0)
        return probe(argc, argv);
    return driver();
}
