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
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "lib_test.h"
#include "claimns.h"
#include "fake_state.h"
#include "vgpu_cuda.h"
#include "vgpu_nvml.h"
#include "vgpu_region.h"
#include "vgpu_mps_user.h"

extern char **environ;

char self_exe[4096];
char root[256];    /* claims root of the current scenario */
char uuids[2][64]; /* fake GPU UUIDs */

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
/* Starts scenario name preloaded in the claims root with env added; returns its pid. */
static pid_t start_preloaded(const char *name, const char *const env[], const char *errfile)
{
    char preload[8192];
    const char *prefix = getenv("VGPU_TEST_PRELOAD_PREFIX");
    pid_t pid;

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
    return pid;
}

static int run_preloaded(const char *name, const char *const env[], const char *errfile)
{
    int st;

    waitpid(start_preloaded(name, env, errfile), &st, 0);
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
        check_unavailable("lib_test hostpid", "unshare(CLONE_NEWPID | CLONE_NEWNS): %s",
                          strerror(-child));
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

/* A scenario that must exit 0 and print nothing (the call-order rows). */
static void expect_quiet(const char *name)
{
    expect(name, NULL, 0, true);
}

/*
 * Scenario: cuInit (through the symbol, or with VGPU_TEST_VIA=procaddr through
 * cuGetProcAddress as the CUDA runtime calls it) must return
 * VGPU_TEST_EXPECT_RC (default 0); then the fake driver must have read the
 * share VGPU_TEST_EXPECT_SHARE (per mille) as this process's MPS client
 * share, and CUDA_MPS_PINNED_DEVICE_MEM_LIMIT must be VGPU_TEST_EXPECT_PINNED
 * ("unset": not set); with VGPU_TEST_EXPECT_DRIVER_MEM the fake driver must
 * have read that device-0 limit in MiB from NVIDIA_GPU_MEMORY_LIMITS in its
 * cuInit (0: none).
 */
static void sc_mps_init(void)
{
    const char *rc = getenv("VGPU_TEST_EXPECT_RC"), *via = getenv("VGPU_TEST_VIA");
    const char *share = getenv("VGPU_TEST_EXPECT_SHARE"), *pinned = getenv("VGPU_TEST_EXPECT_PINNED");
    const char *driver_mem = getenv("VGPU_TEST_EXPECT_DRIVER_MEM");
    const char *have;
    PFN_cuInit init = cuInit;
    fake_state st;
    uint32_t pm = 0;
    char err[256];

    if (via != NULL && strcmp(via, "procaddr") == 0)
        CHECK(cuGetProcAddress_v2("cuInit", (void **)&init, 12000, 0, NULL) == CUDA_SUCCESS);
    CHECK_EQ(init(0), rc != NULL ? atoi(rc) : 0);
    if (share != NULL) {
        CHECK(fake_state_open(&st, getenv("VGPU_FAKE_STATE_DIR"), 0, err, sizeof(err)) == 0);
        CHECK(fake_state_mps_client(&st, (unsigned int)getpid(), &pm));
        CHECK_EQ(pm, (uint32_t)atoi(share));
        fake_state_close(&st);
    }
    if (driver_mem != NULL) {
        uint32_t mib = 0;

        CHECK(fake_state_open(&st, getenv("VGPU_FAKE_STATE_DIR"), 0, err, sizeof(err)) == 0);
        CHECK(fake_state_mps_driver_mem(&st, (unsigned int)getpid(), &mib));
        CHECK_EQ(mib, (uint32_t)atoi(driver_mem));
        fake_state_close(&st);
    }
    have = getenv("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT");
    if (pinned != NULL) {
        char got_b[600], want_b[600];

        snprintf(got_b, sizeof(got_b), "[%s]", have != NULL ? have : "unset");
        snprintf(want_b, sizeof(want_b), "[%s]", pinned);
        CHECK_STR_CONTAINS(got_b, want_b);
    }
}

/* A control socket listening at <root>/mps/control, as the MPS control daemon's; returns its fd. */
static int mps_listen(void)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    char dir[300];
    int fd;

    snprintf(dir, sizeof(dir), "%s/mps", root);
    CHECK(mkdir(dir, 0755) == 0 || errno == EEXIST);
    snprintf(addr.sun_path, sizeof(addr.sun_path), "%s/control", dir);
    unlink(addr.sun_path);
    fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&addr, sizeof(addr)) == 0 && listen(fd, 64) == 0);
    return fd;
}

/*
 * The plugin's host/mps.sock of claim-a, as a thread of this process: it
 * answers each request with its reply (NULL: never answers) and keeps the
 * connections open until their peers close them, as the plugin keeps an
 * allowed process's; held is how many it keeps.
 */
#define MPS_USER_CONNS 256
static struct {
    pthread_t th;
    int lfd, stop[2];
    const char *reply;
    int conns[MPS_USER_CONNS], nconns;
    _Atomic int held;
    char last[VGPU_MPS_USER_MSG_MAX + 1];
} U = {.lfd = -1};

static void *mps_user_server(void *arg)
{
    (void)arg;
    for (;;) {
        struct pollfd p[2 + MPS_USER_CONNS] = {{.fd = U.lfd, .events = POLLIN}, {.fd = U.stop[0], .events = POLLIN}};
        ssize_t n;
        int c;

        for (int i = 0; i < U.nconns; i++)
            p[2 + i] = (struct pollfd){.fd = U.conns[i], .events = POLLIN};
        if (poll(p, 2 + (nfds_t)U.nconns, -1) < 0 && errno == EINTR)
            continue;
        if (p[1].revents != 0)
            return NULL;
        /* A held connection's process ended: its hold goes. */
        for (int i = U.nconns - 1; i >= 0; i--) {
            if (p[2 + i].revents != 0) {
                close(U.conns[i]);
                U.conns[i] = U.conns[--U.nconns];
            }
        }
        U.held = U.nconns;
        if (p[0].revents == 0 || (c = accept4(U.lfd, NULL, NULL, SOCK_CLOEXEC)) < 0)
            continue;
        n = recv(c, U.last, sizeof(U.last) - 1, 0);
        U.last[n > 0 ? n : 0] = '\0';
        if (U.reply != NULL)
            send(c, U.reply, strlen(U.reply), MSG_NOSIGNAL);
        if (U.nconns < MPS_USER_CONNS)
            U.conns[U.nconns++] = c;
        else
            close(c);
        U.held = U.nconns;
    }
}

/* Serves claim-a's host/mps.sock with reply until mps_user_stop. */
static void mps_user_start(const char *reply)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    char dir[400];

    snprintf(dir, sizeof(dir), "%s/claim-a/host", root);
    CHECK(mkdir(dir, 0755) == 0 || errno == EEXIST);
    snprintf(addr.sun_path, sizeof(addr.sun_path), "%s/mps.sock", dir);
    unlink(addr.sun_path);
    U.reply = reply;
    U.nconns = 0;
    U.held = 0;
    U.last[0] = '\0';
    U.lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    CHECK(U.lfd >= 0 && bind(U.lfd, (struct sockaddr *)&addr, sizeof(addr)) == 0 && listen(U.lfd, 64) == 0);
    CHECK(pipe2(U.stop, O_CLOEXEC) == 0);
    CHECK(pthread_create(&U.th, NULL, mps_user_server, NULL) == 0);
}

static void mps_user_stop(void)
{
    char path[400];

    if (U.lfd < 0)
        return;
    CHECK(write(U.stop[1], "x", 1) == 1);
    pthread_join(U.th, NULL);
    for (int i = 0; i < U.nconns; i++)
        close(U.conns[i]);
    close(U.lfd);
    close(U.stop[0]);
    close(U.stop[1]);
    U.lfd = -1;
    snprintf(path, sizeof(path), "%s/claim-a/host/mps.sock", root);
    unlink(path);
}

/*
 * Runs sc_mps_init with the pipe directory, env (NULL-terminated) and the
 * expectations; with logged set, its stderr must contain it, else be empty.
 */
static void expect_mps_logged(const char *const env[], const char *rc, const char *share,
                              const char *pinned, const char *driver_mem, const char *via,
                              const char *logged)
{
    char pipe_env[400], rc_env[64], share_env[64], pinned_env[128], via_env[64], driver_env[64];
    const char *all[18];
    int n = 0;

    snprintf(pipe_env, sizeof(pipe_env), "CUDA_MPS_PIPE_DIRECTORY=%s/mps", root);
    all[n++] = pipe_env;
    for (int i = 0; env != NULL && env[i] != NULL && n < 10; i++)
        all[n++] = env[i];
    snprintf(rc_env, sizeof(rc_env), "VGPU_TEST_EXPECT_RC=%s", rc);
    all[n++] = rc_env;
    if (share != NULL) {
        snprintf(share_env, sizeof(share_env), "VGPU_TEST_EXPECT_SHARE=%s", share);
        all[n++] = share_env;
    }
    if (pinned != NULL) {
        snprintf(pinned_env, sizeof(pinned_env), "VGPU_TEST_EXPECT_PINNED=%s", pinned);
        all[n++] = pinned_env;
    }
    if (driver_mem != NULL) {
        snprintf(driver_env, sizeof(driver_env), "VGPU_TEST_EXPECT_DRIVER_MEM=%s", driver_mem);
        all[n++] = driver_env;
    }
    snprintf(via_env, sizeof(via_env), "VGPU_TEST_VIA=%s", via);
    all[n++] = via_env;
    all[n] = NULL;
    expect("mps_init", all, 0, logged == NULL);
    if (logged != NULL) {
        char path[600], text[4096] = "";
        FILE *f;

        snprintf(path, sizeof(path), "%s.mps_init.err", root);
        f = fopen(path, "r");
        if (f != NULL) {
            size_t got = fread(text, 1, sizeof(text) - 1, f);
            text[got] = '\0';
            fclose(f);
        }
        CHECK_STR_CONTAINS(text, logged);
    }
}

static void expect_mps(const char *const env[], const char *rc, const char *share, const char *pinned,
                       const char *via)
{
    expect_mps_logged(env, rc, share, pinned, NULL, via, NULL);
}

static void expect_mps_driver(const char *const env[], const char *share, const char *driver_mem,
                              const char *via)
{
    expect_mps_logged(env, "0", share, NULL, driver_mem, via, NULL);
}

/*
 * An MPS claim's share, pinned limit and (r615+, mps.driverMemoryLimit)
 * driver memory limit reach the driver from the read-only config before its
 * cuInit reads the environment, through the symbol and through
 * cuGetProcAddress: the container's higher, zero or unreadable values are
 * replaced, its lower ones kept; without mps lines the environment is the
 * container's, and without the driver line its NVIDIA_GPU_MEMORY_LIMITS. A
 * client without a daemon gets the driver's 805 unchanged. A malformed mps
 * line fails the claim closed.
 */
static void test_mps(void)
{
    static const char *const vias[] = {"symbol", "procaddr"};
    char cfg[1024], dir[300];
    int lfd;

    snprintf(cfg, sizeof(cfg),
             "version=1\nclaim=a\ndevice.count=1\ndevice.0.uuid=%s\n"
             "device.0.memory_limit_bytes=1073741824\ndevice.0.sm_limit_percent=30\n"
             "mps.activeThreadPercent.0=30\nmps.pinnedMemoryLimit.0=1610612736\n"
             "mps.driverMemoryLimit.0=1610612736\n", uuids[0]);
    make_claim(cfg);
    mps_user_start(VGPU_MPS_USER_ALLOWED " 0\n");
    snprintf(dir, sizeof(dir), "%s/mps", root);
    CHECK(mkdir(dir, 0755) == 0);
    {
        const char *env[] = {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=100", NULL};
        char want[16];

        snprintf(want, sizeof(want), "%d", (int)CUDA_ERROR_MPS_CONNECTION_FAILED);
        expect_mps(env, want, NULL, NULL, "symbol");
    }
    lfd = mps_listen();
    for (size_t v = 0; v < sizeof(vias) / sizeof(vias[0]); v++) {
        const char *higher[] = {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=100",
                                "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=4G", NULL};
        const char *lower[] = {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=10",
                               "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=512M", NULL};
        const char *zero[] = {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=0", NULL};
        const char *junk[] = {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=0x64",
                              "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=all", NULL};

        const char *driver_higher[] = {"NVIDIA_GPU_MEMORY_LIMITS=0=4096", NULL};
        const char *driver_lower[] = {"NVIDIA_GPU_MEMORY_LIMITS=0=512", NULL};
        const char *driver_zero[] = {"NVIDIA_GPU_MEMORY_LIMITS=0=0", NULL};
        const char *driver_junk[] = {"NVIDIA_GPU_MEMORY_LIMITS=0=4G", NULL};

        expect_mps(higher, "0", "300", "0=1536M", vias[v]);
        expect_mps(lower, "0", "100", "0=512M", vias[v]);
        expect_mps(NULL, "0", "300", "0=1536M", vias[v]);
        expect_mps(zero, "0", "300", "0=1536M", vias[v]);
        expect_mps(junk, "0", "300", "0=1536M", vias[v]);
        expect_mps_driver(NULL, "300", "1536", vias[v]);
        expect_mps_driver(driver_higher, "300", "1536", vias[v]);
        expect_mps_driver(driver_lower, "300", "512", vias[v]);
        expect_mps_driver(driver_zero, "300", "1536", vias[v]);
        expect_mps_driver(driver_junk, "300", "1536", vias[v]);
    }
    /*
     * Clients SIGKILLed at random instants of their MPS start (config read,
     * environment set, the driver's cuInit, connected): the next client
     * still gets the claim's share, pinned and driver limits, whatever it
     * asks.
     */
    {
        char pipe_env[400], errfile[512];
        const char *env[] = {pipe_env, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=100",
                             "NVIDIA_GPU_MEMORY_LIMITS=0=4096", NULL};
        const char *higher[] = {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=100", NULL};
        const char *driver_higher[] = {"NVIDIA_GPU_MEMORY_LIMITS=0=4096", NULL};

        snprintf(pipe_env, sizeof(pipe_env), "CUDA_MPS_PIPE_DIRECTORY=%s/mps", root);
        snprintf(errfile, sizeof(errfile), "%s.mps_kill.err", root);
        srand((unsigned int)getpid());
        for (int i = 0; i < 40; i++) {
            pid_t pid = start_preloaded("mps_init", env, errfile);
            int st;

            usleep((useconds_t)(rand() % 3000));
            kill(pid, SIGKILL);
            CHECK(waitpid(pid, &st, 0) == pid);
        }
        expect_mps(higher, "0", "300", "0=1536M", "symbol");
        expect_mps_driver(driver_higher, "300", "1536", "symbol");
    }
    /* At log level info the replacement is logged, though cuInit comes before the library's start. */
    snprintf(cfg, sizeof(cfg),
             "version=1\nclaim=a\nlog_level=info\ndevice.count=1\ndevice.0.uuid=%s\n"
             "device.0.memory_limit_bytes=1073741824\ndevice.0.sm_limit_percent=30\n"
             "mps.activeThreadPercent.0=30\nmps.pinnedMemoryLimit.0=1610612736\n", uuids[0]);
    mps_user_stop();
    make_claim(cfg);
    mps_user_start(VGPU_MPS_USER_ALLOWED " 0\n");
    close(lfd);
    CHECK(mkdir(dir, 0755) == 0);
    lfd = mps_listen();
    {
        const char *higher[] = {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=100", NULL};

        const char *driver_own[] = {"NVIDIA_GPU_MEMORY_LIMITS=0=4096", NULL};

        expect_mps_logged(higher, "0", "300", "0=1536M", NULL, "symbol",
                          "MPS client: replaced the container's CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=100");
        /* No mps.driverMemoryLimit line (a driver before r615): the container's own value. */
        expect_mps_driver(driver_own, "300", "4096", "symbol");
        expect_mps_driver(NULL, "300", "0", "symbol");
    }
    /* No mps lines: the container's own values reach the driver. */
    mps_user_stop();
    make_std_claim(GiB, "");
    close(lfd);
    CHECK(mkdir(dir, 0755) == 0);
    lfd = mps_listen();
    {
        const char *env[] = {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=100", NULL};

        expect_mps(env, "0", "1000", "unset", "symbol");
    }
    close(lfd);
    /* A malformed mps line fails the claim closed, naming the key. */
    snprintf(cfg, sizeof(cfg),
             "version=1\nclaim=a\ndevice.count=1\ndevice.0.uuid=%s\n"
             "device.0.memory_limit_bytes=1073741824\ndevice.0.sm_limit_percent=30\n"
             "mps.activeThreadPercent.0=300\nmps.pinnedMemoryLimit.0=1073741824\n", uuids[0]);
    make_claim(cfg);
    expect("fail_closed", NULL, 0, false);
    {
        char path[600], text[4096] = "";
        FILE *f;

        snprintf(path, sizeof(path), "%s.fail_closed.err", root);
        f = fopen(path, "r");
        if (f != NULL) {
            size_t n = fread(text, 1, sizeof(text) - 1, f);
            text[n] = '\0';
            fclose(f);
        }
        CHECK_STR_CONTAINS(text, "mps.activeThreadPercent.0: 300 is not an integer in 1..100");
    }
}

/* Whether a connection waits on the listening socket lfd (the driver's cuInit connected). */
static bool connection_waits(int lfd)
{
    struct pollfd p = {.fd = lfd, .events = POLLIN};

    return poll(&p, 1, 0) == 1;
}

/*
 * An MPS claim's process asks the plugin on host/mps.sock before the
 * driver's cuInit: allowed, it proceeds, its connection held; refused,
 * cuInit fails with 805 and the refusal's message on stderr without the
 * driver's cuInit being called (which would wait for the other user's
 * server); a malformed reply or a missing socket fails it closed the same
 * way, through the symbol and through cuGetProcAddress.
 */
static void test_mps_user(void)
{
    static const char *const vias[] = {"symbol", "procaddr"};
    const char *higher[] = {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=100", NULL};
    char cfg[1024], dir[300], want[16], refusal[256], message[256];
    int lfd;

    snprintf(cfg, sizeof(cfg),
             "version=1\nclaim=a\ndevice.count=1\ndevice.0.uuid=%s\n"
             "device.0.memory_limit_bytes=1073741824\ndevice.0.sm_limit_percent=30\n"
             "mps.activeThreadPercent.0=30\nmps.pinnedMemoryLimit.0=1610612736\n", uuids[0]);
    make_claim(cfg);
    snprintf(dir, sizeof(dir), "%s/mps", root);
    CHECK(mkdir(dir, 0755) == 0);
    lfd = mps_listen();
    snprintf(want, sizeof(want), "%d", (int)CUDA_ERROR_MPS_CONNECTION_FAILED);
    snprintf(refusal, sizeof(refusal), VGPU_MPS_USER_REFUSED " " VGPU_MPS_USER_REFUSED_USER " %s 1000 2000\n",
             uuids[0]);
    snprintf(message, sizeof(message),
             "MPS on %s serves uid 1000 until its clients end; this process runs as uid 2000", uuids[0]);
    for (size_t v = 0; v < sizeof(vias) / sizeof(vias[0]); v++) {
        mps_user_start(VGPU_MPS_USER_ALLOWED " 0\n");
        expect_mps(higher, "0", "300", "0=1536M", vias[v]);
        CHECK_EQ(strcmp(U.last, VGPU_MPS_USER_REQUEST), 0);
        mps_user_stop();
        /* The driver's client connected: a fresh control socket for the next. */
        close(lfd);
        lfd = mps_listen();

        mps_user_start(refusal);
        expect_mps_logged(higher, want, NULL, NULL, NULL, vias[v], message);
        CHECK(!connection_waits(lfd));
        mps_user_stop();

        mps_user_start(VGPU_MPS_USER_ALLOWED " 0 more\n");
        expect_mps_logged(higher, want, NULL, NULL, NULL, vias[v], "malformed reply");
        CHECK(!connection_waits(lfd));
        mps_user_stop();
    }
    /* No socket (no plugin serves the claim): closed after the bounded wait. */
    expect_mps_logged(higher, want, NULL, NULL, NULL, "symbol", "cannot connect to");
    CHECK(!connection_waits(lfd));
    close(lfd);
}

/* Whether the server's holds go (their processes ended), waiting up to 5 s for it to see them close. */
static bool no_holds_left(void)
{
    for (int i = 0; i < 500 && U.held != 0; i++)
        usleep(10000);
    return U.held == 0;
}

/*
 * MPS claim processes SIGKILLed at random instants of their start, their
 * ask on host/mps.sock included, leave no hold behind (the kernel closes
 * their connections) and nothing that keeps the next process from being
 * allowed.
 */
static void test_mps_user_killed(void)
{
    char cfg[1024], errfile[512], pipe_env[400];
    const char *env[] = {pipe_env, "VGPU_TEST_EXPECT_RC=0", NULL};
    int lfd;

    snprintf(cfg, sizeof(cfg),
             "version=1\nclaim=a\ndevice.count=1\ndevice.0.uuid=%s\n"
             "device.0.memory_limit_bytes=1073741824\ndevice.0.sm_limit_percent=30\n"
             "mps.activeThreadPercent.0=30\nmps.pinnedMemoryLimit.0=1610612736\n", uuids[0]);
    make_claim(cfg);
    snprintf(pipe_env, sizeof(pipe_env), "CUDA_MPS_PIPE_DIRECTORY=%s/mps", root);
    snprintf(errfile, sizeof(errfile), "%s.mps_killed.err", root);
    mps_user_start(VGPU_MPS_USER_ALLOWED " 0\n");
    srand((unsigned)getpid());
    for (int round = 0; round < 10; round++) {
        pid_t pids[4];
        int st;

        /* A fresh control socket each round: the killed clients' connections fill no backlog. */
        lfd = mps_listen();
        for (int i = 0; i < 4; i++)
            pids[i] = start_preloaded("mps_init", env, errfile);
        for (int i = 0; i < 4; i++) {
            usleep((useconds_t)(rand() % 20000));
            CHECK(kill(pids[i], SIGKILL) == 0);
            CHECK(waitpid(pids[i], &st, 0) == pids[i]);
        }
        close(lfd);
    }
    CHECK(no_holds_left());
    lfd = mps_listen();
    expect_mps(NULL, "0", "300", NULL, "symbol");
    CHECK(no_holds_left());
    close(lfd);
    mps_user_stop();
}

static int run_driver(void)
{
    char cache[512], errfile[600];
    int ns = vgpu_test_claims_ns_supported();

    if (ns != 0) {
        check_unavailable("lib_test", "claims must be read-only mounts in a private mount namespace, "
                          "which needs root (unshare(CLONE_NEWNS): %s)", strerror(-ns));
        return check_report("lib_test");
    }
    /* Not preloaded here: the driver talks to the fake directly. */
    CHECK(cuInit(0) == CUDA_SUCCESS);
    /* The fake driver's own accounting survives SIGKILL at any instant. */
    if (getenv("VGPU_TEST_ONLY") == NULL || strcmp(getenv("VGPU_TEST_ONLY"), "fake_kill") == 0) {
        fake_killstress(getenv("VGPU_TEST_VALGRIND") != NULL ? 10 : 100);
        if (getenv("VGPU_TEST_ONLY") != NULL)
            return check_report("lib_test");
    }
    uuid_of(0, uuids[0]);
    uuid_of(1, uuids[1]);
    snprintf(root, sizeof(root), "/tmp/vgpu-libtest-%d", (int)getpid());
    snprintf(cache, sizeof(cache), "CUDA_DEVICE_MEMORY_SHARED_CACHE=%s/standalone.region", root);

    make_std_claim(GiB, "");
    if (getenv("VGPU_TEST_ONLY") != NULL) {
        if (strcmp(getenv("VGPU_TEST_ONLY"), "order") == 0)
            expect_call_order(expect_quiet);
        else if (strcmp(getenv("VGPU_TEST_ONLY"), "mps") == 0) {
            test_mps();
            test_mps_user();
            test_mps_user_killed();
        }
        else
            expect(getenv("VGPU_TEST_ONLY"), NULL, 0, true);
        return check_report("lib_test");
    }
    expect("limit", NULL, 0, true);
    expect("paths", NULL, 0, true);
    expect("ext_memory", NULL, 0, true);
    expect("procaddr", NULL, 0, true);
    /* Whatever a program calls first, before cuInit, GPU 0 is limited afterwards. */
    expect_call_order(expect_quiet);
    expect("share", NULL, 0, true);
    expect("race", NULL, 0, true);
    expect("pools", NULL, 0, true);
    expect("graphs", NULL, 0, true);
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
    /* VMM memory is charged while the driver holds it (lib_test_vmm.c). */
    {
        const char *env[] = {getenv("VGPU_TEST_VALGRIND") != NULL ? "VGPU_TEST_KILLS=10"
                             : getenv("VGPU_TEST_PRELOAD_PREFIX") != NULL ? "VGPU_TEST_KILLS=60"
                                                                          : NULL,
                             NULL};
        expect("vmm_sample", NULL, 0, true);
        expect("vmm_alias", NULL, 0, true);
        expect("vmm_expandable", NULL, 0, true);
        expect("vmm_kill", env, 0, true);
        expect("vmm_threads", NULL, 0, true);
        expect("vmm_host_numa", NULL, 0, true);
    }
    /* Memory shared between processes is charged once, while any holder lives (lib_test_ipc.c). */
    {
        const char *env[] = {getenv("VGPU_TEST_VALGRIND") != NULL ? "VGPU_TEST_KILLS=10"
                             : getenv("VGPU_TEST_PRELOAD_PREFIX") != NULL ? "VGPU_TEST_KILLS=60"
                                                                          : NULL,
                             NULL};
        expect("ipc_exporter_gone", NULL, 0, true);
        expect("ipc_two_importers", NULL, 0, true);
        expect("ipc_foreign", NULL, 0, true);
        expect("ipc_kill", env, 0, true);
        /* The same for VMM shareable handles passed as fds. */
        expect("vmm_share_exporter_gone", NULL, 0, true);
        expect("vmm_share_two_importers", NULL, 0, true);
        expect("vmm_share_foreign", NULL, 0, true);
        expect("vmm_share_kill", env, 0, true);
        expect("vmm_share_fabric", NULL, 0, true);
        expect("vmm_share_fd_hold", NULL, 0, true);
        expect("vmm_share_fd_many", NULL, 0, true);
        /* Exports onto one inode, as NVIDIA's driver's: the open file description's mark. */
        expect("vmm_share_devfd", NULL, 0, true);
        expect("vmm_devfd_exporter_gone", NULL, 0, true);
        expect("vmm_devfd_two_importers", NULL, 0, true);
        expect("vmm_devfd_foreign", NULL, 0, true);
        expect("vmm_devfd_forged", NULL, 0, true);
        expect("vmm_devfd_kill", env, 0, true);
        expect("vmm_devfd_fd_hold", NULL, 0, true);
        expect("vmm_devfd_moved", NULL, 0, true);
        /* Last: it leaves forged records in the claim's region. */
        expect("ipc_hostile", NULL, 0, false);
    }
    {
        const char *env[] = {"VGPU_FAKE_CONTEXT_MEMORY=64Mi", NULL};
        const char *big[] = {"VGPU_FAKE_CONTEXT_MEMORY=300Mi", NULL};

        expect("overhead", env, 0, true);
        expect("contexts", big, 0, true);
        expect("green_ctx", big, 0, true);
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
    /* Without an SM limit (none, or policy disabled): launches and utilisation still counted. */
    make_std_claim(GiB, "");
    expect("unlimited_counted", NULL, 0, true);
    {
        char cfg[1024];
        snprintf(cfg, sizeof(cfg),
                 "version=1\nclaim=a\ncompute_policy=disabled\ndevice.count=1\n"
                 "device.0.uuid=%s\ndevice.0.memory_limit_bytes=1073741824\n"
                 "device.0.sm_limit_percent=30\n", uuids[0]);
        make_claim(cfg);
        expect("unlimited_counted", NULL, 0, true);
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
    test_mps();
    test_mps_user();
    test_mps_user_killed();
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
    if (strcmp(argv[1], "fake_churn") == 0 && argc == 3)
        return sc_fake_churn(argv[2]);
    if (strncmp(argv[1], "order:", 6) == 0)
        return sc_order(argv[1] + 6);
    if (strcmp(argv[1], "busyhold") == 0 && argc == 3)
        return sc_busyhold(argv[2]);
    if (strcmp(argv[1], "vmm_churn") == 0 && argc == 3)
        return sc_vmm_churn(argv[2]);
    if (strcmp(argv[1], "vmm_share_export") == 0 && argc == 3)
        return sc_vmm_share_export(argv[2]);
    if (strcmp(argv[1], "vmm_share_import") == 0 && argc == 3)
        return sc_vmm_share_import(argv[2]);
    if (strcmp(argv[1], "vmm_share_fabric_import") == 0)
        return sc_vmm_share_fabric_import();
    if (strcmp(argv[1], "vmm_share_churn") == 0 && argc == 3)
        return sc_vmm_share_churn(argv[2]);
    if (strcmp(argv[1], "ipc_export") == 0 && argc == 3)
        return sc_ipc_export(argv[2]);
    if (strcmp(argv[1], "ipc_import") == 0)
        return sc_ipc_import();
    if (strcmp(argv[1], "ipc_churn") == 0 && argc == 3)
        return sc_ipc_churn(argv[2]);
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
        {"unlimited_counted", sc_unlimited_counted}, {"ext_memory", sc_ext_memory},
        {"vmm_host_numa", sc_vmm_host_numa}, {"green_ctx", sc_green_ctx},
        {"pool_race", sc_pool_race},
        {"killstress", sc_killstress}, {"lastkill", sc_lastkill},
        {"closed", sc_closed},     {"replaced", sc_replaced},
        {"mps_init", sc_mps_init},
        {"twoclaims", sc_twoclaims}, {"pooldev", sc_pooldev},
        {"twoclaims_capped", sc_twoclaims_capped},
        {"idle", sc_idle},         {"nvml_procs", sc_nvml_procs},
        {"graphs", sc_graphs},     {"contexts", sc_contexts},
        {"vmm_sample", sc_vmm_sample}, {"vmm_alias", sc_vmm_alias},
        {"vmm_expandable", sc_vmm_expandable}, {"vmm_kill", sc_vmm_kill},
        {"vmm_threads", sc_vmm_threads},
        {"ipc_exporter_gone", sc_ipc_exporter_gone}, {"ipc_two_importers", sc_ipc_two_importers},
        {"ipc_foreign", sc_ipc_foreign}, {"ipc_kill", sc_ipc_kill},
        {"ipc_hostile", sc_ipc_hostile},
        {"vmm_share_exporter_gone", sc_vmm_share_exporter_gone},
        {"vmm_share_two_importers", sc_vmm_share_two_importers},
        {"vmm_share_foreign", sc_vmm_share_foreign}, {"vmm_share_kill", sc_vmm_share_kill},
        {"vmm_share_fabric", sc_vmm_share_fabric}, {"vmm_share_devfd", sc_vmm_share_devfd},
        {"vmm_devfd_exporter_gone", sc_vmm_devfd_exporter_gone},
        {"vmm_devfd_two_importers", sc_vmm_devfd_two_importers},
        {"vmm_devfd_foreign", sc_vmm_devfd_foreign}, {"vmm_devfd_forged", sc_vmm_devfd_forged},
        {"vmm_devfd_kill", sc_vmm_devfd_kill}, {"vmm_share_fd_hold", sc_vmm_share_fd_hold},
        {"vmm_share_fd_many", sc_vmm_share_fd_many},
        {"vmm_devfd_fd_hold", sc_vmm_devfd_fd_hold}, {"vmm_devfd_moved", sc_vmm_devfd_moved},
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
