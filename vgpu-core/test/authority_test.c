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
 * authority_test.c - limits come only from the claim configs the kubelet
 * plugin injected (src/injected.h).
 *
 * Run without arguments it is the driver. Each case runs in a child that
 * enters a private mount namespace, mounts a tmpfs on /usr/local (so the
 * canonical claims root /usr/local/vgpu/claims can be built without
 * touching the machine), lays out what a container might contain there
 * (configs injected as read-only root-owned file mounts, files shipped in
 * the image, writable or foreign-owned mounts, an override root) and then
 * execs this program preloaded with libvgpu.so as "probe", which reports
 * what the library enforces on GPU 0. Needs root; skipped otherwise.
 *
 * It also tests the mount table parser directly.
 *
 * Env: VGPU_TEST_LIB, VGPU_TEST_PRELOAD_PREFIX, VGPU_TEST_VALGRIND (as lib_test).
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "claimns.h"
#include "injected.h"
#include "vgpu_cuda.h"
#include "vgpu_region.h"

#define MiB (1024ull * 1024ull)
#define GiB (1024ull * MiB)
#define PHYS (16 * GiB) /* VGPU_FAKE_GPU_MEMORY in the Makefile */
#define CANON VGPU_CANONICAL_CLAIMS_ROOT
#define SRC "/usr/local/.plugin" /* stands for the host's /var/lib/vgpu-dra/claims */
#define OVERRIDE "/usr/local/.test-root"

static char self_exe[4096];
static char uuid0[64], uuid1[64];

/* ---------------------------------------------------------------------- */
/* The preloaded probe                                                     */
/* ---------------------------------------------------------------------- */

/* Allocates 2 GiB, then 1 MiB on the current context, freeing each; their results. */
static void try_allocs(CUresult *big, CUresult *small)
{
    CUdeviceptr p;

    *big = cuMemAlloc_v2(&p, 2 * GiB);
    if (*big == CUDA_SUCCESS)
        cuMemFree_v2(p);
    *small = cuMemAlloc_v2(&p, MiB);
    if (*small == CUDA_SUCCESS)
        cuMemFree_v2(p);
}

/*
 * Prints "total=T big=RC small=RC big1=RC small1=RC": GPU 0's reported
 * total and two allocations' results, then the same allocations on GPU 1.
 */
static int probe(void)
{
    CUcontext ctx, ctx1;
    size_t f = 0, t = 0;
    CUresult big, small, big1, small1;

    if (cuInit(0) != CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&ctx, 0) != CUDA_SUCCESS ||
        cuCtxSetCurrent(ctx) != CUDA_SUCCESS || cuMemGetInfo_v2(&f, &t) != CUDA_SUCCESS)
        return 3;
    try_allocs(&big, &small);
    if (cuDevicePrimaryCtxRetain(&ctx1, 1) != CUDA_SUCCESS || cuCtxSetCurrent(ctx1) != CUDA_SUCCESS)
        return 3;
    try_allocs(&big1, &small1);
    printf("total=%llu big=%d small=%d big1=%d small1=%d\n", (unsigned long long)t, (int)big,
           (int)small, (int)big1, (int)small1);
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Layouts (run in the case's child, in its own mount namespace)           */
/* ---------------------------------------------------------------------- */

static int mkdirs(const char *path)
{
    char buf[PATH_MAX];

    snprintf(buf, sizeof(buf), "%s", path);
    for (char *p = buf + 1; *p != '\0'; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    return mkdir(buf, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

/* Writes len bytes of text (NULs included) to path with mode and owner uid. */
static int put_n(const char *path, const char *text, size_t len, mode_t mode, uid_t uid)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int ok = fd >= 0 && write(fd, text, len) == (ssize_t)len && fchmod(fd, mode) == 0 &&
             fchown(fd, uid, 0) == 0;

    if (fd >= 0)
        close(fd);
    return ok ? 0 : -1;
}

static int put(const char *path, const char *text, mode_t mode, uid_t uid)
{
    return put_n(path, text, strlen(text), mode, uid);
}

/* A claim config limiting GPU 0 to limit bytes, with extra lines. */
static const char *config(uint64_t limit, const char *extra)
{
    static char buf[1024];

    snprintf(buf, sizeof(buf),
             "version=1\nclaim=c\ndevice.count=1\ndevice.0.uuid=%s\n"
             "device.0.memory_limit_bytes=%llu\ndevice.0.sm_limit_percent=0\n%s",
             uuid0, (unsigned long long)limit, extra);
    return buf;
}

/* <root>/<name>/ with its region file, as the plugin lays a claim out. */
static int claim_dir(const char *root, const char *name)
{
    char path[PATH_MAX];
    int fd;

    snprintf(path, sizeof(path), "%s/%s/shm", root, name);
    if (mkdirs(path) != 0)
        return -1;
    snprintf(path, sizeof(path), "%s/%s/shm/region", root, name);
    fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0 || ftruncate(fd, VGPU_REGION_SIZE) != 0)
        return -1;
    close(fd);
    return 0;
}

/*
 * Mounts a config file onto <root>/<name>/config as a CDI file bind mount
 * does (read-only when ro), from a source written with mode and owner uid.
 */
static int inject_n(const char *root, const char *name, const char *text, size_t len, bool ro,
                    mode_t mode, uid_t uid)
{
    char src[PATH_MAX], dst[PATH_MAX];

    snprintf(src, sizeof(src), SRC "/%s-%s", name, ro ? "ro" : "rw");
    snprintf(dst, sizeof(dst), "%s/%s/config", root, name);
    if (mkdirs(SRC) != 0 || put_n(src, text, len, mode, uid) != 0 || claim_dir(root, name) != 0 ||
        put(dst, "", 0644, 0) != 0 || mount(src, dst, "none", MS_BIND, NULL) != 0)
        return -1;
    if (ro && mount("none", dst, "none", MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV,
                    NULL) != 0)
        return -1;
    return 0;
}

static int inject(const char *root, const char *name, const char *text, bool ro, mode_t mode,
                  uid_t uid)
{
    return inject_n(root, name, text, strlen(text), ro, mode, uid);
}

/* A plain file at <root>/<name>/config: shipped in the image or written by the container. */
static int plain(const char *root, const char *name, const char *text)
{
    char dst[PATH_MAX];

    snprintf(dst, sizeof(dst), "%s/%s/config", root, name);
    return claim_dir(root, name) == 0 && put(dst, text, 0644, 0) == 0 ? 0 : -1;
}

static int lay_injected(void)
{
    return inject(CANON, "a", config(GiB, ""), true, 0644, 0);
}

/* An image file sorting before the injected claim, with a larger limit. */
static int lay_image_larger(void)
{
    return plain(CANON, "0-image", config(8 * GiB, "")) | lay_injected();
}

/* An image file sorting first that turns enforcement off. */
static int lay_image_disabled(void)
{
    return plain(CANON, "0-image", config(GiB, "enforcement=disabled\n")) | lay_injected();
}

/* A writable mount at the canonical path is not the plugin's: fail closed. */
static int lay_writable_mount(void)
{
    return inject(CANON, "a", config(8 * GiB, ""), false, 0644, 0);
}

/* A read-only mount of a file the container's user owns: fail closed. */
static int lay_foreign_owner(void)
{
    return inject(CANON, "a", config(8 * GiB, ""), true, 0644, 1000);
}

/* A read-only mount of a world-writable file: fail closed. */
static int lay_world_writable(void)
{
    return inject(CANON, "a", config(8 * GiB, ""), true, 0666, 0);
}

/* An injected config that cannot be parsed: fail closed. */
static int lay_garbage(void)
{
    return inject(CANON, "a", "version=1\nthis is not a config\n", true, 0644, 0);
}

/* The test override points at a root that disables enforcement: refused while claims are injected. */
static int lay_override_refused(void)
{
    return inject(OVERRIDE, "x", config(GiB, "enforcement=disabled\n"), true, 0644, 0) |
           lay_injected();
}

/* Without injected claims the override is honoured, with the same mount checks. */
static int lay_override_mounted(void)
{
    return plain(CANON, "0-image", config(8 * GiB, "")) |
           inject(OVERRIDE, "x", config(GiB, ""), true, 0644, 0);
}

/* Plain files under the override root are not configs either: standalone. */
static int lay_override_plain(void)
{
    return plain(OVERRIDE, "x", config(GiB, ""));
}

/*
 * No mount table: nothing can be told apart, so any config present fails
 * closed. /proc becomes a tmpfs holding only self/environ, from which the
 * sanitizer runtimes read their options.
 */
static int lay_no_mountinfo(void)
{
    extern char **environ;
    int fd, rc = lay_injected();

    if (rc != 0 || mount("tmpfs", "/proc", "tmpfs", 0, "size=64k") != 0 ||
        mkdir("/proc/self", 0755) != 0 ||
        (fd = open("/proc/self/environ", O_WRONLY | O_CREAT | O_CLOEXEC, 0644)) < 0)
        return -1;
    for (char **e = environ; *e != NULL && rc == 0; e++) {
        size_t n = strlen(*e) + 1;
        rc = write(fd, *e, n) == (ssize_t)n ? 0 : -1;
    }
    close(fd);
    return rc;
}

/*
 * The config rule (README "Config rule"): each layout below has one line
 * the library cannot apply; every GPU of the container fails closed, also
 * GPU 1, which the line was about or which no config names.
 * two_gpus(line1) is claim a: GPU 0 limited to 1 GiB (lines 1-6), then
 * device 1 with line1 as its uuid line (line 7).
 */
static const char *two_gpus(const char *uuid_line)
{
    static char buf[1024];

    snprintf(buf, sizeof(buf),
             "version=1\nclaim=c\ndevice.count=2\ndevice.0.uuid=%s\n"
             "device.0.memory_limit_bytes=1073741824\ndevice.0.sm_limit_percent=0\n"
             "%s\ndevice.1.memory_limit_bytes=0\ndevice.1.sm_limit_percent=0\n",
             uuid0, uuid_line);
    return buf;
}

static int lay_uuid_trailing_space(void)
{
    char line[128];

    snprintf(line, sizeof(line), "device.1.uuid=%s ", uuid1);
    return inject(CANON, "a", two_gpus(line), true, 0644, 0);
}

static int lay_uuid_non_ascii(void)
{
    char line[128];

    /* The GPU 1 UUID with its first hex digit replaced by a two-byte UTF-8 letter. */
    snprintf(line, sizeof(line), "device.1.uuid=GPU-\xc3\xa9%s", uuid1 + 5);
    return inject(CANON, "a", two_gpus(line), true, 0644, 0);
}

static int lay_index_leading_zero(void)
{
    char line[128], text[1024];

    snprintf(line, sizeof(line), "device.01.uuid=%s", uuid1);
    snprintf(text, sizeof(text), "%s", two_gpus(line));
    /* device.01 is not device 1: make all of device 1's keys so. */
    for (char *p = text; (p = strstr(p, "device.1.")) != NULL; p++)
        memmove(p + 8, p + 7, strlen(p + 7) + 1), p[7] = '0', p[8] = '1';
    return inject(CANON, "a", text, true, 0644, 0);
}

static int lay_duplicate_uuid(void)
{
    char line[128];

    snprintf(line, sizeof(line), "device.1.uuid=%s", uuid0);
    return inject(CANON, "a", two_gpus(line), true, 0644, 0);
}

/* A valid config for GPU 0, a NUL, then lines that would change it. */
static int lay_embedded_nul(void)
{
    char text[1024];
    size_t n = (size_t)snprintf(text, sizeof(text), "%s", config(GiB, ""));

    n += (size_t)snprintf(text + n + 1, sizeof(text) - n - 1, "enforcement=disabled\n") + 1;
    return inject_n(CANON, "a", text, n, true, 0644, 0);
}

/* A valid config for GPU 0 padded with comments past the size limit, then more lines. */
static int lay_oversized(void)
{
    static char text[VGPU_CONFIG_MAX_BYTES + 1024];
    size_t n = (size_t)snprintf(text, sizeof(text), "%s", config(GiB, ""));

    while (n < VGPU_CONFIG_MAX_BYTES) {
        memcpy(text + n, "# padding padding padding padding padding padding padding padd\n", 64);
        n += 64;
    }
    n += (size_t)snprintf(text + n, sizeof(text) - n, "enforcement=disabled\n");
    return inject_n(CANON, "a", text, n, true, 0644, 0);
}

/* A valid claim for GPU 0 next to a bad one naming GPU 1: the bad one fails GPU 0 too. */
static int lay_bad_second_claim(void)
{
    char text[1024];

    snprintf(text, sizeof(text),
             "version=1\nclaim=d\ndevice.count=1\ndevice.0.uuid=%s\n"
             "device.0.memory_limit_bytes=1073741824\ndevice.0.sm_limit_percent=0\npriority=urgent\n",
             uuid1);
    return lay_injected() | inject(CANON, "b", text, true, 0644, 0);
}

/* A valid config naming GPU 0 in upper case: the same GPU, limited. */
static int lay_upper_case_uuid(void)
{
    char text[1024], *u;

    snprintf(text, sizeof(text), "%s", config(GiB, ""));
    u = strstr(text, uuid0);
    for (size_t i = 4; u != NULL && u[i] != '\n'; i++)
        u[i] = u[i] >= 'a' && u[i] <= 'f' ? (char)(u[i] - 'a' + 'A') : u[i];
    return inject(CANON, "a", text, true, 0644, 0);
}

/* ---------------------------------------------------------------------- */
/* Driver                                                                  */
/* ---------------------------------------------------------------------- */

struct outcome {
    int status;
    unsigned long long total;
    int big, small, big1, small1;
    char err[4096];
};

/* Runs probe preloaded, in a new mount namespace laid out by lay, with env additions. */
static void run_case(int (*lay)(void), const char *env, struct outcome *o)
{
    char preload[8192], errfile[] = "/tmp/vgpu-authority-XXXXXX", line[256] = "";
    const char *prefix = getenv("VGPU_TEST_PRELOAD_PREFIX");
    int out[2], efd = mkstemp(errfile), st;
    ssize_t n;
    pid_t pid;

    memset(o, 0, sizeof(*o));
    o->status = -1;
    snprintf(preload, sizeof(preload), "%s%s%s", prefix ? prefix : "", prefix ? ":" : "",
             getenv("VGPU_TEST_LIB"));
    if (efd < 0 || pipe(out) != 0)
        return;
    fflush(NULL);
    pid = fork();
    if (pid == 0) {
        if (unshare(CLONE_NEWNS) != 0 || mount("none", "/", "none", MS_REC | MS_PRIVATE, NULL) != 0 ||
            mount("tmpfs", "/usr/local", "tmpfs", 0, "mode=755") != 0 || mkdirs(CANON) != 0 ||
            lay() != 0)
            _exit(124);
        dup2(out[1], 1);
        dup2(efd, 2);
        setenv("LD_PRELOAD", preload, 1);
        if (env != NULL)
            putenv((char *)env);
        execl(self_exe, self_exe, "probe", (char *)NULL);
        _exit(127);
    }
    close(out[1]);
    n = read(out[0], line, sizeof(line) - 1);
    line[n > 0 ? n : 0] = '\0';
    close(out[0]);
    waitpid(pid, &st, 0);
    o->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    if (sscanf(line, "total=%llu big=%d small=%d big1=%d small1=%d", &o->total, &o->big,
               &o->small, &o->big1, &o->small1) != 5)
        o->status = o->status == 0 ? -2 : o->status;
    n = pread(efd, o->err, sizeof(o->err) - 1, 0);
    o->err[n > 0 ? n : 0] = '\0';
    close(efd);
    unlink(errfile);
}

enum want { LIMITED_1G, UNLIMITED, FAIL_CLOSED };

/*
 * GPU 0 is as want says; GPU 1, which only the config rule's layouts name,
 * is unlimited unless the case fails closed, which then takes every GPU;
 * for a config the library cannot apply, with exactly one log line, the
 * one log names.
 */
static void expect_case(const char *name, int (*lay)(void), const char *env, enum want want,
                        const char *log)
{
    struct outcome o;
    int before = check_failures;
    char *nl;

    run_case(lay, env, &o);
    CHECK(o.status == 0);
    switch (want) {
    case LIMITED_1G:
        CHECK_EQ_U64(o.total, GiB);
        CHECK(o.big == CUDA_ERROR_OUT_OF_MEMORY && o.small == CUDA_SUCCESS);
        CHECK(o.big1 == CUDA_SUCCESS && o.small1 == CUDA_SUCCESS);
        break;
    case UNLIMITED:
        CHECK_EQ_U64(o.total, PHYS);
        CHECK(o.big == CUDA_SUCCESS && o.small == CUDA_SUCCESS);
        CHECK(o.big1 == CUDA_SUCCESS && o.small1 == CUDA_SUCCESS);
        break;
    case FAIL_CLOSED:
        CHECK(o.big == CUDA_ERROR_OUT_OF_MEMORY && o.small == CUDA_ERROR_OUT_OF_MEMORY);
        CHECK(o.big1 == CUDA_ERROR_OUT_OF_MEMORY && o.small1 == CUDA_ERROR_OUT_OF_MEMORY);
        /* A config the library cannot apply: its one line is all the library says. */
        if (log != NULL && strncmp(log, "invalid claim config", 20) == 0) {
            nl = strchr(o.err, '\n');
            CHECK(nl != NULL && nl[1] == '\0');
        }
        break;
    }
    if (log != NULL)
        CHECK_STR_CONTAINS(o.err, log);
    if (check_failures != before)
        fprintf(stderr,
                "case %s: status %d total %llu big %d small %d big1 %d small1 %d; library "
                "stderr:\n%s\n",
                name, o.status, o.total, o.big, o.small, o.big1, o.small1, o.err);
    else
        printf("ok   %s\n", name);
}

/* The mount table parser on a hand-written table. */
static void test_mountinfo(void)
{
    static const char table[] =
        "22 1 0:21 / / rw,relatime - overlay overlay rw\n"
        "30 22 8:1 /v/claims/b/config /usr/local/vgpu/claims/b/config ro,nosuid - ext4 /dev/sda1 rw\n"
        "31 22 8:1 /v/claims/a/config /usr/local/vgpu/claims/a/config ro - ext4 /dev/sda1 rw\n"
        /* stacked on a: the later line is the visible mount */
        "40 31 0:50 /x /usr/local/vgpu/claims/a/config ro - tmpfs tmpfs rw\n"
        /* an escaped space in the name */
        "41 22 8:1 /s /usr/local/vgpu/claims/with\\040space/config ro - ext4 /dev/sda1 rw\n"
        /* not configs: nested, dot names, other files, other roots, a prefix of the root */
        "42 22 8:1 /n /usr/local/vgpu/claims/a/b/config ro - ext4 /dev/sda1 rw\n"
        "43 22 8:1 /n /usr/local/vgpu/claims/../config ro - ext4 /dev/sda1 rw\n"
        "44 22 8:1 /n /usr/local/vgpu/claims/./config ro - ext4 /dev/sda1 rw\n"
        "45 22 8:1 /n /usr/local/vgpu/claims/a/host ro - ext4 /dev/sda1 rw\n"
        "46 22 8:1 /n /usr/local/vgpu/claimsX/a/config ro - ext4 /dev/sda1 rw\n"
        "47 22 8:1 /n /usr/local/vgpu/claims//config ro - ext4 /dev/sda1 rw\n"
        "garbage line\n"
        "48 22 8:1";
    struct vgpu_injected_config out[4];
    int before = check_failures, n = vgpu_mountinfo_configs(table, CANON, out, 4);

    CHECK(n == 3);
    CHECK(strcmp(out[0].name, "a") == 0 && out[0].mnt_id == 40 && out[0].dev_major == 0 &&
          out[0].dev_minor == 50);
    CHECK(strcmp(out[1].name, "b") == 0 && out[1].mnt_id == 30 && out[1].dev_major == 8);
    CHECK(strcmp(out[2].name, "with space") == 0);
    /* More than fit: the count says so. */
    CHECK(vgpu_mountinfo_configs(table, CANON, out, 1) > 1);
    CHECK(vgpu_mountinfo_configs("", CANON, out, 4) == 0);
    if (check_failures == before)
        printf("ok   mountinfo parser\n");
}

static void uuid_of(int dev, char out[64])
{
    CUuuid u;
    char *p = out + sprintf(out, "GPU-");

    CHECK(cuDeviceGetUuid_v2(&u, dev) == CUDA_SUCCESS);
    for (int i = 0; i < 16; i++)
        p += sprintf(p, "%s%02x", i == 4 || i == 6 || i == 8 || i == 10 ? "-" : "",
                     (unsigned char)u.bytes[i]);
}

int main(int argc, char **argv)
{
    ssize_t n;
    int ns;

    if (argc == 2 && strcmp(argv[1], "probe") == 0)
        return probe();
    test_mountinfo();
    n = readlink("/proc/self/exe", self_exe, sizeof(self_exe) - 1);
    if (n <= 0 || getenv("VGPU_TEST_LIB") == NULL) {
        fprintf(stderr, "authority_test: needs /proc and VGPU_TEST_LIB\n");
        return 2;
    }
    self_exe[n] = '\0';
    ns = vgpu_test_claims_ns_supported();
    if (ns != 0) {
        check_unavailable("authority_test cases", "they build /usr/local/vgpu/claims in a private "
                          "mount namespace, which needs root (unshare(CLONE_NEWNS): %s)",
                          strerror(-ns));
        return check_report("authority_test");
    }
    CHECK(cuInit(0) == CUDA_SUCCESS);
    uuid_of(0, uuid0);
    uuid_of(1, uuid1);

    expect_case("injected config limits", lay_injected, NULL, LIMITED_1G, NULL);
    expect_case("image config with a larger limit is ignored", lay_image_larger, NULL,
                LIMITED_1G, "ignoring " CANON "/0-image/config");
    expect_case("image config disabling enforcement is ignored", lay_image_disabled, NULL,
                LIMITED_1G, "ignoring " CANON "/0-image/config");
    expect_case("writable config mount fails closed", lay_writable_mount, NULL, FAIL_CLOSED,
                "invalid claim config " CANON "/a/config:0: not a read-only mount\n");
    expect_case("config mount owned by a user fails closed", lay_foreign_owner, NULL,
                FAIL_CLOSED, "invalid claim config " CANON "/a/config:0: not owned by root");
    expect_case("world-writable config mount fails closed", lay_world_writable, NULL,
                FAIL_CLOSED, "invalid claim config " CANON "/a/config:0: not owned by root or "
                "writable by others (uid 0, mode 666)\n");
    expect_case("unparseable injected config fails closed", lay_garbage, NULL, FAIL_CLOSED,
                "invalid claim config " CANON "/a/config:2: line without '='");
    /* The config rule. */
    expect_case("UUID with a trailing space fails every GPU closed", lay_uuid_trailing_space,
                NULL, FAIL_CLOSED, "invalid claim config " CANON "/a/config:7: device.1.uuid: ");
    expect_case("non-ASCII UUID fails every GPU closed", lay_uuid_non_ascii, NULL, FAIL_CLOSED,
                "invalid claim config " CANON "/a/config:7: byte 0xc3 at column 19 is not "
                "printable ASCII\n");
    expect_case("index device.01 fails every GPU closed", lay_index_leading_zero, NULL,
                FAIL_CLOSED, "invalid claim config " CANON "/a/config:7: device.01.uuid: device "
                "index is not an integer");
    expect_case("duplicated UUID fails every GPU closed", lay_duplicate_uuid, NULL, FAIL_CLOSED,
                "invalid claim config " CANON "/a/config:7: device.1.uuid: same GPU as device.0\n");
    expect_case("embedded NUL fails every GPU closed", lay_embedded_nul, NULL, FAIL_CLOSED,
                "invalid claim config " CANON "/a/config:7: embedded NUL byte at column 1\n");
    expect_case("config over 65536 bytes fails every GPU closed", lay_oversized, NULL,
                FAIL_CLOSED, ": file larger than 65536 bytes\n");
    expect_case("a bad config fails the GPUs of valid ones closed too", lay_bad_second_claim,
                NULL, FAIL_CLOSED, "invalid claim config " CANON "/b/config:7: priority: unknown "
                "value urgent\n");
    expect_case("upper-case UUID names the same GPU", lay_upper_case_uuid, NULL, LIMITED_1G,
                NULL);
    expect_case("override root cannot lift injected limits", lay_override_refused,
                "VGPU_CLAIMS_ROOT=" OVERRIDE, LIMITED_1G, "ignoring VGPU_CLAIMS_ROOT");
    expect_case("override root honoured without injected claims", lay_override_mounted,
                "VGPU_CLAIMS_ROOT=" OVERRIDE, LIMITED_1G, NULL);
    expect_case("plain files under the override root are ignored", lay_override_plain,
                "VGPU_CLAIMS_ROOT=" OVERRIDE, UNLIMITED, "ignoring " OVERRIDE "/x/config");
    /* valgrind itself cannot start without /proc. */
    if (getenv("VGPU_TEST_VALGRIND") == NULL)
        expect_case("no mount table fails closed", lay_no_mountinfo, NULL, FAIL_CLOSED,
                    "cannot read /proc/self/mountinfo");
    else
        printf("skip no mount table fails closed (valgrind needs /proc)\n");
    return check_report("authority_test");
}
