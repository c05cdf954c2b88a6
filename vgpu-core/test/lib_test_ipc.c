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
 * lib_test_ipc.c - memory shared between processes with cuIpc*: charged to
 * the claim once, for as long as any process of the claim holds it, whoever
 * frees, closes, exits or is killed first; an import the claim has no record
 * of is charged to the importer against its limit. Ground truth is the fake
 * driver's state file: what the live processes' allocations and the shared
 * memory they hold add up to.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "claimns.h"
#include "lib_test.h"
#include "vgpu_cuda.h"
#include "vgpu_region.h"

#include "../fake/fake_fdscan.h"
#include "../fake/fake_state.h"

/* The fake driver's state file, read-only. */
static const fake_state_file *fake_file(void)
{
    static const fake_state_file *f;
    const char *dir = getenv("VGPU_FAKE_STATE_DIR");

    if (f == NULL) {
        char path[4096];
        int fd;
        void *p;

        snprintf(path, sizeof(path), "%s/state", dir != NULL ? dir : "/tmp/vgpu-fake-state");
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            return NULL;
        p = mmap(NULL, sizeof(*f), PROT_READ, MAP_SHARED, fd, 0);
        close(fd);
        if (p != MAP_FAILED)
            f = p;
    }
    return f;
}

/* Whether the owner of fake slot i lives (pids are ours: no pid namespace in between). */
static bool fake_slot_live(const fake_state_file *f, int i)
{
    pid_t pid = (pid_t)atomic_load(&f->slots[i].pid);

    return atomic_load(&f->slots[i].active) && pid > 0 && (kill(pid, 0) == 0 || errno == EPERM);
}

/*
 * GPU 0 memory the fake driver holds for live processes (only_me: for this
 * process): their own allocations, and shared memory some live one holds;
 * for all of them, shared memory only an open exported fd holds too.
 */
static uint64_t truth(bool only_me)
{
    const fake_state_file *f = fake_file();
    uint64_t live = 0, sum = 0;

    CHECK(f != NULL);
    if (f == NULL)
        return UINT64_MAX;
    for (int i = 0; i < FAKE_MAX_SLOTS; i++) {
        if (!fake_slot_live(f, i) ||
            (only_me && atomic_load(&f->slots[i].pid) != (uint32_t)getpid()))
            continue;
        live |= 1ULL << i;
        sum += atomic_load(&f->slots[i].dev[0].used);
    }
    for (int k = 0; k < FAKE_MAX_IPC; k++) {
        const fake_ipc *x = &f->ipc[k];
        uint64_t h = atomic_load(&x->holders);

        if (x->dev != 0)
            continue;
        /* Held by a live process, or (all of them) by an exported fd still open somewhere. */
        if ((h & live) != 0 ||
            (!only_me && h == 0 && atomic_load(&x->claim) != 0 &&
             fake_fdscan_open(atomic_load(&x->fd_kind), x->fd_dev, x->fd_ino, x->fd_tag)))
            sum += x->bytes;
    }
    return sum;
}

/* The region's invariant holds and its counter is what the driver holds for the living. */
#define CHECK_EXACT(want)                                                                          \
    do {                                                                                           \
        struct region_view v_;                                                                     \
        CHECK(region_view(claim_region(), getenv("VGPU_TEST_UUID0"), &v_));                        \
        CHECK_EQ_U64(v_.used, v_.charged_sum + v_.shared_sum);                                     \
        CHECK_EQ_U64(v_.used, (want));                                                             \
        CHECK_EQ_U64(truth(false), (want));                                                        \
    } while (0)

static void to_hex(const CUipcMemHandle *h, char out[2 * CU_IPC_HANDLE_SIZE + 1])
{
    for (int i = 0; i < CU_IPC_HANDLE_SIZE; i++)
        snprintf(out + 2 * i, 3, "%02x", (unsigned char)h->reserved[i]);
}

static bool from_hex(const char *s, CUipcMemHandle *h)
{
    for (int i = 0; i < CU_IPC_HANDLE_SIZE; i++) {
        unsigned v;

        if (sscanf(s + 2 * i, "%2x", &v) != 1)
            return false;
        h->reserved[i] = (char)v;
    }
    return true;
}

/*
 * Starts a helper of this program with pipes to it; foreign: without
 * libvgpu.so (a process outside the claim, on the bare driver).
 */
static pid_t spawn(char *const args[], bool foreign, int *to, int *from)
{
    int in[2], out[2];
    pid_t pid;

    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0)
        return -1;
    pid = fork();
    if (pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        if (foreign)
            unsetenv("LD_PRELOAD");
        execv(self_exe, args);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    *to = in[1];
    *from = out[0];
    return pid;
}

static void say(int fd, const char *line)
{
    CHECK(write(fd, line, strlen(line)) == (ssize_t)strlen(line));
}

/* A helper process and its pipes. */
struct helper {
    pid_t pid;
    int to, from;
};

/* Starts an exporter of mib MiB and reads its handle. */
static struct helper exporter(const char *mib, bool foreign, CUipcMemHandle *h)
{
    char *args[] = {self_exe, "ipc_export", (char *)mib, NULL};
    char line[256];
    struct helper x;

    x.pid = spawn(args, foreign, &x.to, &x.from);
    read_line(x.from, line, sizeof(line));
    CHECK(from_hex(line, h));
    return x;
}

/* Starts an importer and has it open h; returns it, its open's result in *rc. */
static struct helper importer(const CUipcMemHandle *h, int *rc)
{
    char *args[] = {self_exe, "ipc_import", NULL};
    char line[256], hex[2 * CU_IPC_HANDLE_SIZE + 2];
    struct helper x;

    x.pid = spawn(args, false, &x.to, &x.from);
    to_hex(h, hex);
    strcat(hex, "\n");
    say(x.to, hex);
    read_line(x.from, line, sizeof(line));
    CHECK(sscanf(line, "opened %d", rc) == 1);
    return x;
}

/* Sends cmd, checks the answer starts with want. */
static void ask(struct helper *x, const char *cmd, const char *want)
{
    char line[256];

    say(x->to, cmd);
    read_line(x->from, line, sizeof(line));
    CHECK(strncmp(line, want, strlen(want)) == 0);
}

static void finish(struct helper *x, bool killed)
{
    int st;

    if (killed)
        kill(x->pid, SIGKILL);
    else
        say(x->to, "exit\n");
    waitpid(x->pid, &st, 0);
    CHECK(killed ? WIFSIGNALED(st) : WIFEXITED(st) && WEXITSTATUS(st) == 0);
    close(x->to);
    close(x->from);
}

/* A refused allocation reclaims dead processes' slots on its way (acct.c recover). */
static void reclaim_dead(void)
{
    CUdeviceptr x = 0;

    CHECK(cuMemAlloc_v2(&x, 4 * GiB) == CUDA_ERROR_OUT_OF_MEMORY);
}

/* Helper: allocates mib MiB, exports it, prints the handle; "free" frees it, "exit" exits. */
int sc_ipc_export(const char *mib)
{
    CUipcMemHandle h;
    CUdeviceptr p = 0;
    char hex[2 * CU_IPC_HANDLE_SIZE + 1], line[64];

    ctx_on(0);
    if (cuMemAlloc_v2(&p, strtoull(mib, NULL, 10) * MiB) != CUDA_SUCCESS ||
        cuIpcGetMemHandle(&h, p) != CUDA_SUCCESS)
        return 1;
    to_hex(&h, hex);
    printf("%s\n", hex);
    fflush(stdout);
    for (;;) {
        read_line(0, line, sizeof(line));
        if (strcmp(line, "free") == 0) {
            printf("freed %d\n", cuMemFree_v2(p));
            fflush(stdout);
        } else {
            return 0;
        }
    }
}

/* Helper: reads a handle, opens it, prints "opened <rc>"; "close" closes it, "exit" exits. */
int sc_ipc_import(void)
{
    CUipcMemHandle h;
    CUdeviceptr p = 0;
    char line[256];

    ctx_on(0);
    read_line(0, line, sizeof(line));
    if (!from_hex(line, &h))
        return 1;
    printf("opened %d\n", cuIpcOpenMemHandle_v2(&p, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    fflush(stdout);
    for (;;) {
        read_line(0, line, sizeof(line));
        if (strcmp(line, "close") == 0) {
            printf("closed %d\n", cuIpcCloseMemHandle(p));
            fflush(stdout);
        } else {
            return 0;
        }
    }
}

/*
 * The case: a process of the claim allocates 800 MiB under a 1 GiB
 * limit and exports it, this process imports it, the exporter frees it and
 * exits (or is killed). The driver still holds the 800 MiB for the claim:
 * the counter must say so, and the claim must have only what is left.
 */
void sc_ipc_exporter_gone(void)
{
    ctx_on(0);
    for (int killed = 0; killed < 2; killed++) {
        CUipcMemHandle h;
        struct helper e = exporter("800", false, &h);
        CUdeviceptr p = 0, x = 0;

        CHECK_EXACT(800 * MiB);
        CHECK(cuIpcOpenMemHandle_v2(&p, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) == CUDA_SUCCESS);
        CHECK_EXACT(800 * MiB); /* the claim's own memory: not charged twice */
        if (!killed)
            ask(&e, "free\n", "freed 0");
        finish(&e, killed);
        reclaim_dead();
        CHECK_EXACT(800 * MiB); /* the import holds it */
        CHECK(cuMemAlloc_v2(&x, 300 * MiB) == CUDA_ERROR_OUT_OF_MEMORY);
        CHECK(cuMemAlloc_v2(&x, 200 * MiB) == CUDA_SUCCESS);
        CHECK(cuMemFree_v2(x) == CUDA_SUCCESS);
        /* The overhead rule counts the held bytes as tracked: nothing added. */
        CHECK_EQ_U64(mem_free(), 224 * MiB);
        CHECK_EXACT(800 * MiB);
        CHECK(cuIpcCloseMemHandle(p) == CUDA_SUCCESS);
        CHECK_EXACT(0);
        CHECK_EQ_U64(mem_free(), GiB);
    }
}

/* Two importers; the exporter frees first, one importer closes, the other is killed. */
void sc_ipc_two_importers(void)
{
    CUipcMemHandle h;
    CUdeviceptr p = 0, x = 0;
    struct helper a, b;
    int rc;

    ctx_on(0);
    CHECK(cuMemAlloc_v2(&p, 600 * MiB) == CUDA_SUCCESS);
    CHECK(cuIpcGetMemHandle(&h, p) == CUDA_SUCCESS);
    CHECK(cuIpcGetMemHandle(&h, p) == CUDA_SUCCESS); /* again: the same record */
    CHECK_EXACT(600 * MiB);
    a = importer(&h, &rc);
    CHECK_EQ_U64(rc, CUDA_SUCCESS);
    b = importer(&h, &rc);
    CHECK_EQ_U64(rc, CUDA_SUCCESS);
    CHECK_EXACT(600 * MiB);
    CHECK(cuMemAlloc_v2(&x, 500 * MiB) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(cuMemFree_v2(p) == CUDA_SUCCESS);
    CHECK_EXACT(600 * MiB); /* both importers hold it */
    ask(&a, "close\n", "closed 0");
    CHECK_EXACT(600 * MiB);
    finish(&a, false);
    finish(&b, true);
    reclaim_dead();
    CHECK_EXACT(0);
    CHECK(cuMemAlloc_v2(&x, GiB) == CUDA_SUCCESS);
    CHECK(cuMemFree_v2(x) == CUDA_SUCCESS);
    CHECK_EXACT(0);
}

/*
 * An import the claim has no record of (exported by a process outside the
 * claim, as one of another claim is) is the importer's to pay for, against
 * its limit; refused, the driver's import is undone.
 */
void sc_ipc_foreign(void)
{
    CUipcMemHandle h;
    CUdeviceptr p = 0, a = 0;
    struct helper e;

    ctx_on(0);
    e = exporter("800", true, &h);
    CHECK_EQ_U64(used0(), 0);
    CHECK(cuMemAlloc_v2(&a, 300 * MiB) == CUDA_SUCCESS);
    CHECK(cuIpcOpenMemHandle_v2(&p, h, 0) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_EQ_U64(used0(), 300 * MiB);
    CHECK_EQ_U64(truth(true), 300 * MiB); /* the driver's import was closed again */
    CHECK(cuMemFree_v2(a) == CUDA_SUCCESS);
    CHECK(cuIpcOpenMemHandle_v2(&p, h, 0) == CUDA_SUCCESS);
    CHECK_EQ_U64(used0(), 800 * MiB);
    CHECK_EQ_U64(truth(true), 800 * MiB);
    CHECK(cuMemAlloc_v2(&a, 300 * MiB) == CUDA_ERROR_OUT_OF_MEMORY);
    ask(&e, "free\n", "freed 0");
    finish(&e, false);
    CHECK_EQ_U64(used0(), 800 * MiB); /* we hold it alone now */
    CHECK_EQ_U64(mem_free(), 224 * MiB);
    CHECK(cuIpcCloseMemHandle(p) == CUDA_SUCCESS);
    CHECK_EQ_U64(used0(), 0);
    CHECK_EQ_U64(truth(false), 0);
}

/*
 * SIGKILLs the churn helper at random instants kills times while this
 * process holds 100 MiB through one shared record: after each kill the
 * claim counter must equal the live charges plus live records, the fake
 * driver's truth and the 100 MiB, with no lock or undo record left.
 */
static void kill_churn_at_random(const char *helper, int kills, unsigned *seed)
{
    int bad = 0;

    for (int k = 0; k < kills; k++) {
        struct region_view v;
        int st = kill_helper_at_random(helper, seed);

        CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
        reclaim_dead();
        CHECK(region_view(claim_region(), getenv("VGPU_TEST_UUID0"), &v));
        if (v.used != v.charged_sum + v.shared_sum || v.used != truth(false) ||
            v.used != 100 * MiB || v.active != 1 || v.shared_live != 1 || v.lock != 0 ||
            v.undo != 0) {
            fprintf(stderr, "after kill %d: used %llu, charges %llu + shared %llu (%d live), "
                    "driver holds %llu, %d active slot(s), lock %u undo %#x\n", k,
                    (unsigned long long)v.used, (unsigned long long)v.charged_sum,
                    (unsigned long long)v.shared_sum, v.shared_live,
                    (unsigned long long)truth(false), v.active, v.lock, v.undo);
            if (++bad == 3)
                break;
        }
    }
    CHECK_EQ_U64(bad, 0);
}

/*
 * Helper killed at random instants: opens and closes the parent's export
 * (VGPU_TEST_IPC_HANDLE), allocates, exports and frees memory of its own,
 * and has a child importer of its own exports open and close them.
 */
int sc_ipc_churn(const char *seed_arg)
{
    enum { N = 4 };
    unsigned seed = (unsigned)strtoul(seed_arg, NULL, 10);
    const char *hex = getenv("VGPU_TEST_IPC_HANDLE");
    CUipcMemHandle parent, mine[N];
    CUdeviceptr imp = 0, own[N] = {0};
    bool exported[N] = {false};

    ctx_on(0);
    if (hex == NULL || !from_hex(hex, &parent))
        return 1;
    printf("ready\n");
    fflush(stdout);
    for (;;) {
        int i = rand_r(&seed) % N;

        switch (rand_r(&seed) % 3) {
        case 0:
            if (imp == 0) {
                if (cuIpcOpenMemHandle_v2(&imp, parent, 0) != CUDA_SUCCESS)
                    imp = 0;
            } else if (cuIpcCloseMemHandle(imp) == CUDA_SUCCESS) {
                imp = 0;
            }
            break;
        case 1:
            if (own[i] == 0) {
                if (cuMemAlloc_v2(&own[i], 2 * MiB * (1 + rand_r(&seed) % 8)) != CUDA_SUCCESS)
                    own[i] = 0;
                exported[i] = false;
            } else if (!exported[i]) {
                exported[i] = cuIpcGetMemHandle(&mine[i], own[i]) == CUDA_SUCCESS;
            }
            break;
        default:
            if (own[i] != 0 && cuMemFree_v2(own[i]) == CUDA_SUCCESS)
                own[i] = 0;
            break;
        }
    }
}

/*
 * SIGKILL at random instants of a process that exports, imports, closes and
 * frees, while this one holds 100 MiB it exported: after each kill the
 * counter is what the survivors' driver allocations hold, the invariant
 * exact; 0 after the last holder is gone.
 */
void sc_ipc_kill(void)
{
    const char *kills_env = getenv("VGPU_TEST_KILLS");
    int kills = kills_env != NULL ? atoi(kills_env) : 200;
    unsigned seed = (unsigned)getpid();
    char hex[2 * CU_IPC_HANDLE_SIZE + 1];
    CUipcMemHandle h;
    CUdeviceptr p = 0;

    ctx_on(0);
    CHECK(cuMemAlloc_v2(&p, 100 * MiB) == CUDA_SUCCESS);
    CHECK(cuIpcGetMemHandle(&h, p) == CUDA_SUCCESS);
    to_hex(&h, hex);
    setenv("VGPU_TEST_IPC_HANDLE", hex, 1);
    kill_churn_at_random("ipc_churn", kills, &seed);
    CHECK(cuMemFree_v2(p) == CUDA_SUCCESS);
    CHECK_EXACT(0);
}

/*
 * Garbage in the shared records of our own region (any process of the claim
 * can write it): whatever it says, the library never crashes, never wraps a
 * counter below 0, and honest sharing still adds up.
 */
void sc_ipc_hostile(void)
{
    struct vgpu_region *r;
    CUipcMemHandle h;
    CUdeviceptr p = 0, x = 0;
    struct helper a;
    int fd, rc;

    ctx_on(0);
    CHECK(cuMemAlloc_v2(&p, 200 * MiB) == CUDA_SUCCESS);
    CHECK(cuIpcGetMemHandle(&h, p) == CUDA_SUCCESS);
    CHECK_EXACT(200 * MiB);
    fd = open(claim_region(), O_RDWR);
    CHECK(fd >= 0);
    r = mmap(NULL, VGPU_REGION_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    CHECK(r != MAP_FAILED);
    if (r == MAP_FAILED)
        return;
    /* Our record claims far more than it holds; its drop must not wrap the counter. */
    for (int k = 0; k < VGPU_REGION_MAX_SHARED; k++) {
        if (r->shared[k].state == VGPU_SHARED_LIVE)
            r->shared[k].bytes = UINT64_MAX;
    }
    CHECK(cuMemFree_v2(p) == CUDA_SUCCESS);
    CHECK_EQ_U64(used0(), 0);
    /* Records out of every range: another device, a bad state, every holder bit. */
    for (int k = 0; k < VGPU_REGION_MAX_SHARED; k += 2) {
        memset(&r->shared[k], 0xa5, sizeof(r->shared[k]));
        if (k % 4 == 0)
            r->shared[k].state = VGPU_SHARED_LIVE;
    }
    /* A live record of device 0 nobody will ever drop: it can only cost our own claim. */
    memset(&r->shared[1], 0, sizeof(r->shared[1]));
    memset(r->shared[1].holders, 0xff, sizeof(r->shared[1].holders));
    r->shared[1].bytes = 100 * MiB;
    r->shared[1].state = VGPU_SHARED_LIVE;
    r->shared[1].kind = VGPU_SHARED_KIND_IPC;
    /* A charge lock no slot can hold, with an undo record naming a shared record out of range. */
    r->devices[0].undo_used_bytes = 0;
    r->devices[0].undo_charged_bytes = 0;
    r->devices[0].undo_slot = VGPU_REGION_MAX_SLOTS | 200u << VGPU_UNDO_SHARED_SHIFT |
                              VGPU_UNDO_SHARED_WAS_LIVE;
    __atomic_store_n(&r->devices[0].charge_lock, 0xffffu, __ATOMIC_RELEASE);
    /* Honest sharing still adds up. */
    CHECK(cuMemAlloc_v2(&p, 300 * MiB) == CUDA_SUCCESS);
    CHECK(cuIpcGetMemHandle(&h, p) == CUDA_SUCCESS);
    a = importer(&h, &rc);
    CHECK_EQ_U64(rc, CUDA_SUCCESS);
    CHECK_EQ_U64(used0(), 300 * MiB);
    CHECK(cuMemFree_v2(p) == CUDA_SUCCESS);
    CHECK_EQ_U64(used0(), 300 * MiB);
    finish(&a, true);
    reclaim_dead();
    CHECK_EQ_U64(used0(), 0);
    CHECK(cuMemAlloc_v2(&x, GiB) == CUDA_SUCCESS);
    CHECK(cuMemFree_v2(x) == CUDA_SUCCESS);
    CHECK_EQ_U64(used0(), 0);
    CHECK_EQ_U64(truth(false), 0);
    munmap(r, VGPU_REGION_SIZE);
}

/*
 * VMM shareable handles (cuMemExportToShareableHandle /
 * cuMemImportFromShareableHandle), passed as POSIX fds over a socketpair
 * (SCM_RIGHTS): the same rule as cuIpc*, the allocation's charge on the
 * claim while any process of it holds a handle or a mapping of it.
 */
#include <sys/socket.h>

#define VMM_GRAN (2 * MiB)
#define FD_SOCK 3 /* where a helper finds its end of the socketpair */

static const CUmemAllocationProp share_prop = {
    .type = CU_MEM_ALLOCATION_TYPE_PINNED,
    .requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
    .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};

static void send_fd(int sock, int fd)
{
    char data = 'f', buf[CMSG_SPACE(sizeof(int))];
    struct iovec iov = {.iov_base = &data, .iov_len = 1};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = buf,
                       .msg_controllen = sizeof(buf)};
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);

    memset(buf, 0, sizeof(buf));
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof(int));
    CHECK(sendmsg(sock, &m, 0) == 1);
}

static int recv_fd(int sock)
{
    char data, buf[CMSG_SPACE(sizeof(int))];
    struct iovec iov = {.iov_base = &data, .iov_len = 1};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = buf,
                       .msg_controllen = sizeof(buf)};
    struct cmsghdr *c;
    int fd = -1;

    if (recvmsg(sock, &m, MSG_CMSG_CLOEXEC) != 1)
        return -1;
    c = CMSG_FIRSTHDR(&m);
    if (c != NULL && c->cmsg_type == SCM_RIGHTS)
        memcpy(&fd, CMSG_DATA(c), sizeof(int));
    return fd;
}

/*
 * Where a helper runs: in our claim, outside any claim (without
 * libvgpu.so), or in another claim on GPU 0 (other_claim()).
 */
enum where { IN_CLAIM, OUTSIDE, OTHER_CLAIM };

/* The claims root of the other claim, once other_claim() made it. */
static char other_root[512];

/* Makes a second claim (1 GiB on GPU 0) under a claims root of its own, once. */
static void other_claim(void)
{
    if (other_root[0] != '\0')
        return;
    snprintf(other_root, sizeof(other_root), "%s-other", getenv("VGPU_CLAIMS_ROOT"));
    CHECK(vgpu_test_make_claim(other_root, getenv("VGPU_TEST_UUID0")) == 0);
}

/* Removes the other claim's files (its helpers' mounts went with their namespaces). */
static void other_claim_gone(void)
{
    char cmd[600];

    snprintf(cmd, sizeof(cmd), "rm -rf %s", other_root);
    CHECK(system(cmd) == 0);
    other_root[0] = '\0';
}

/* A helper as spawn() starts it, with a socketpair end at FD_SOCK; ours in *sock. */
static pid_t spawn_sock(char *const args[], enum where where, int *to, int *from, int *sock)
{
    int in[2], out[2], sv[2];
    pid_t pid;

    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0 ||
        socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        return -1;
    pid = fork();
    if (pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        dup2(sv[1], FD_SOCK); /* dup2 clears close-on-exec */
        if (where == OUTSIDE)
            unsetenv("LD_PRELOAD");
        if (where == OTHER_CLAIM &&
            (setenv("VGPU_CLAIMS_ROOT", other_root, 1) != 0 ||
             vgpu_test_enter_claims_ns(other_root) != 0))
            _exit(125);
        execv(self_exe, args);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    close(sv[1]);
    *to = in[1];
    *from = out[0];
    *sock = sv[0];
    return pid;
}

/* Maps handle h of size at a fresh VA range, read-write; returns the range. */
static CUdeviceptr map_rw(CUmemGenericAllocationHandle h, size_t size)
{
    CUmemAccessDesc acc = {.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0},
                           .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    CUdeviceptr va = 0;

    if (cuMemAddressReserve(&va, size, 0, 0, 0) != CUDA_SUCCESS)
        return 0;
    if (cuMemMap(va, size, 0, h, 0) != CUDA_SUCCESS) {
        cuMemAddressFree(va, size);
        return 0;
    }
    cuMemSetAccess(va, size, &acc, 1);
    return va;
}

/* Unmaps and frees a range from map_rw. */
static CUresult unmap_rw(CUdeviceptr va, size_t size)
{
    CUresult rc = cuMemUnmap(va, size);

    cuMemAddressFree(va, size);
    return rc;
}

/*
 * Helper: creates mib MiB shareable as an fd, maps it, sends an export over
 * FD_SOCK, prints "exported"; "release" releases and unmaps it, "exit" exits.
 */
int sc_vmm_share_export(const char *mib)
{
    size_t size = strtoull(mib, NULL, 10) * MiB;
    CUmemGenericAllocationHandle h = 0;
    CUdeviceptr va;
    char line[64];
    int fd = -1;

    ctx_on(0);
    if (cuMemCreate(&h, size, &share_prop, 0) != CUDA_SUCCESS || (va = map_rw(h, size)) == 0 ||
        cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0) !=
            CUDA_SUCCESS)
        return 1;
    send_fd(FD_SOCK, fd);
    close(fd);
    printf("exported\n");
    fflush(stdout);
    for (;;) {
        read_line(0, line, sizeof(line));
        if (strcmp(line, "release") == 0) {
            CUresult a = cuMemRelease(h), b = unmap_rw(va, size);

            printf("released %d\n", a != CUDA_SUCCESS ? a : b);
            fflush(stdout);
        } else {
            return 0;
        }
    }
}

/*
 * Helper: receives an fd on FD_SOCK, imports it and maps mib MiB of it,
 * prints "imported <rc>"; "release" releases and unmaps it, "exit" exits.
 */
int sc_vmm_share_import(const char *mib)
{
    size_t size = strtoull(mib, NULL, 10) * MiB;
    CUmemGenericAllocationHandle h = 0;
    CUdeviceptr va = 0;
    char line[64];
    CUresult rc;
    int fd;

    ctx_on(0);
    fd = recv_fd(FD_SOCK);
    rc = cuMemImportFromShareableHandle(&h, (void *)(intptr_t)fd,
                                        CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    close(fd);
    if (rc == CUDA_SUCCESS && (va = map_rw(h, size)) == 0)
        rc = CUDA_ERROR_UNKNOWN;
    printf("imported %d\n", rc);
    fflush(stdout);
    for (;;) {
        read_line(0, line, sizeof(line));
        if (strcmp(line, "release") == 0) {
            CUresult a = cuMemRelease(h), b = unmap_rw(va, size);

            printf("released %d\n", a != CUDA_SUCCESS ? a : b);
            fflush(stdout);
        } else {
            return 0;
        }
    }
}

/* Starts an exporter of mib MiB; its fd in *fd, its socket in *sock. */
static struct helper vmm_exporter(const char *mib, enum where where, int *fd, int *sock)
{
    char *args[] = {self_exe, "vmm_share_export", (char *)mib, NULL};
    char line[64];
    struct helper x;

    x.pid = spawn_sock(args, where, &x.to, &x.from, sock);
    *fd = recv_fd(*sock);
    CHECK(*fd >= 0);
    read_line(x.from, line, sizeof(line));
    CHECK(strcmp(line, "exported") == 0);
    return x;
}

/* Starts an importer of fd (mapping mib MiB); its import's result in *rc. */
static struct helper vmm_importer(int fd, const char *mib, int *rc, int *sock)
{
    char *args[] = {self_exe, "vmm_share_import", (char *)mib, NULL};
    char line[64];
    struct helper x;

    x.pid = spawn_sock(args, IN_CLAIM, &x.to, &x.from, sock);
    send_fd(*sock, fd);
    read_line(x.from, line, sizeof(line));
    CHECK(sscanf(line, "imported %d", rc) == 1);
    return x;
}

static CUresult import_fd(int fd, CUmemGenericAllocationHandle *h)
{
    return cuMemImportFromShareableHandle(h, (void *)(intptr_t)fd,
                                          CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
}

/*
 * The brief's case: under a 1 GiB claim a process creates 800 MiB, maps it
 * and exports it as an fd; this process imports and maps it; the exporter
 * releases, unmaps and exits (or is killed). The driver still holds the
 * 800 MiB for the claim: the counter says so and 300 MiB more is refused;
 * 0 once this process releases and unmaps it.
 */
void sc_vmm_share_exporter_gone(void)
{
    ctx_on(0);
    for (int killed = 0; killed < 2; killed++) {
        CUmemGenericAllocationHandle h = 0;
        CUdeviceptr va, x = 0;
        int fd, sock;
        struct helper e = vmm_exporter("800", IN_CLAIM, &fd, &sock);

        CHECK_EXACT(800 * MiB);
        CHECK(import_fd(fd, &h) == CUDA_SUCCESS);
        close(fd);
        va = map_rw(h, 800 * MiB);
        CHECK(va != 0);
        CHECK_EXACT(800 * MiB); /* the claim's own memory: not charged twice */
        if (!killed)
            ask(&e, "release\n", "released 0");
        finish(&e, killed);
        close(sock);
        reclaim_dead();
        CHECK_EXACT(800 * MiB); /* the import holds it */
        CHECK(cuMemAlloc_v2(&x, 300 * MiB) == CUDA_ERROR_OUT_OF_MEMORY);
        CHECK(cuMemAlloc_v2(&x, 200 * MiB) == CUDA_SUCCESS);
        CHECK(cuMemFree_v2(x) == CUDA_SUCCESS);
        CHECK_EQ_U64(mem_free(), 224 * MiB);
        /* Released, still mapped: held; unmapped too: gone. */
        CHECK(cuMemRelease(h) == CUDA_SUCCESS);
        CHECK_EXACT(800 * MiB);
        CHECK(unmap_rw(va, 800 * MiB) == CUDA_SUCCESS);
        CHECK_EXACT(0);
        CHECK_EQ_U64(mem_free(), GiB);
    }
}

/* Two importers of two exports of one handle; the exporter releases first. */
void sc_vmm_share_two_importers(void)
{
    CUmemGenericAllocationHandle h = 0, again = 0;
    CUdeviceptr x = 0;
    struct helper a, b;
    int fa = -1, fb = -1, sa, sb, rc;

    ctx_on(0);
    CHECK(cuMemCreate(&h, 600 * MiB, &share_prop, 0) == CUDA_SUCCESS);
    CHECK(cuMemExportToShareableHandle(&fa, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0) ==
          CUDA_SUCCESS);
    CHECK(cuMemExportToShareableHandle(&fb, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0) ==
          CUDA_SUCCESS); /* again: the same record */
    CHECK_EXACT(600 * MiB);
    /* Our own export imported by ourselves: the same memory, no second charge. */
    CHECK(import_fd(fa, &again) == CUDA_SUCCESS);
    CHECK_EXACT(600 * MiB);
    CHECK(cuMemRelease(again) == CUDA_SUCCESS);
    CHECK_EXACT(600 * MiB);
    a = vmm_importer(fa, "600", &rc, &sa);
    CHECK_EQ_U64(rc, CUDA_SUCCESS);
    b = vmm_importer(fb, "600", &rc, &sb);
    CHECK_EQ_U64(rc, CUDA_SUCCESS);
    close(fa);
    close(fb);
    CHECK_EXACT(600 * MiB);
    CHECK(cuMemAlloc_v2(&x, 500 * MiB) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(cuMemRelease(h) == CUDA_SUCCESS);
    CHECK_EXACT(600 * MiB); /* both importers hold it */
    ask(&a, "release\n", "released 0");
    CHECK_EXACT(600 * MiB);
    finish(&a, false);
    finish(&b, true);
    close(sa);
    close(sb);
    reclaim_dead();
    CHECK_EXACT(0);
    CHECK(cuMemAlloc_v2(&x, GiB) == CUDA_SUCCESS);
    CHECK(cuMemFree_v2(x) == CUDA_SUCCESS);
    CHECK_EXACT(0);
}

/*
 * An fd from a process outside the claim: the import is charged to us at
 * the allocation's size against the limit; refused, the import is undone.
 */
void sc_vmm_share_foreign(void)
{
    CUmemGenericAllocationHandle h = 0;
    CUdeviceptr a = 0, va;
    struct helper e;
    int fd, sock;

    ctx_on(0);
    e = vmm_exporter("800", OUTSIDE, &fd, &sock);
    CHECK_EQ_U64(used0(), 0);
    CHECK(cuMemAlloc_v2(&a, 300 * MiB) == CUDA_SUCCESS);
    CHECK(import_fd(fd, &h) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_EQ_U64(used0(), 300 * MiB);
    CHECK_EQ_U64(truth(true), 300 * MiB); /* the driver's import was released again */
    CHECK(cuMemFree_v2(a) == CUDA_SUCCESS);
    CHECK(import_fd(fd, &h) == CUDA_SUCCESS);
    close(fd);
    CHECK_EQ_U64(used0(), 800 * MiB);
    CHECK_EQ_U64(truth(true), 800 * MiB);
    CHECK(cuMemAlloc_v2(&a, 300 * MiB) == CUDA_ERROR_OUT_OF_MEMORY);
    va = map_rw(h, 800 * MiB);
    CHECK(va != 0);
    ask(&e, "release\n", "released 0");
    finish(&e, false);
    close(sock);
    CHECK_EQ_U64(used0(), 800 * MiB); /* we hold it alone now */
    CHECK(cuMemRelease(h) == CUDA_SUCCESS);
    CHECK_EQ_U64(used0(), 800 * MiB); /* still mapped */
    CHECK(unmap_rw(va, 800 * MiB) == CUDA_SUCCESS);
    CHECK_EQ_U64(used0(), 0);
    CHECK_EQ_U64(truth(false), 0);
}

/*
 * Helper killed at random instants: imports, maps, unmaps and releases the
 * parent's export (fd VGPU_TEST_VMM_FD, inherited), creates, maps, exports,
 * re-imports, unmaps and releases memory of its own, at random keeping an
 * export's fd open after its release and closing it later.
 */
int sc_vmm_share_churn(const char *seed_arg)
{
    enum { N = 4 };
    unsigned seed = (unsigned)strtoul(seed_arg, NULL, 10);
    const char *fd_env = getenv("VGPU_TEST_VMM_FD");
    CUmemGenericAllocationHandle imp = 0, own[N] = {0}, back[N] = {0};
    CUdeviceptr imp_va = 0, own_va[N] = {0};
    int pfd = fd_env != NULL ? atoi(fd_env) : -1, ofd[N] = {-1, -1, -1, -1};

    ctx_on(0);
    if (pfd < 0)
        return 1;
    printf("ready\n");
    fflush(stdout);
    for (;;) {
        int i = rand_r(&seed) % N;

        switch (rand_r(&seed) % 5) {
        case 0: /* the parent's allocation: import, map, release, unmap */
            if (imp == 0 && imp_va == 0) {
                if (import_fd(pfd, &imp) != CUDA_SUCCESS)
                    imp = 0;
            } else if (imp != 0 && imp_va == 0) {
                imp_va = map_rw(imp, 100 * MiB);
            } else if (imp != 0) {
                if (cuMemRelease(imp) == CUDA_SUCCESS)
                    imp = 0;
            } else if (unmap_rw(imp_va, 100 * MiB) == CUDA_SUCCESS) {
                imp_va = 0;
            }
            break;
        case 1: /* our own: create, map */
            if (own[i] == 0 && own_va[i] == 0) {
                if (cuMemCreate(&own[i], VMM_GRAN * (1 + rand_r(&seed) % 8), &share_prop, 0) !=
                    CUDA_SUCCESS)
                    own[i] = 0;
            } else if (own[i] != 0 && own_va[i] == 0) {
                own_va[i] = map_rw(own[i], VMM_GRAN);
            }
            break;
        case 2: /* export it, import our own export back */
            if (own[i] != 0 && ofd[i] < 0) {
                if (cuMemExportToShareableHandle(&ofd[i], own[i],
                                                 CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                                                 0) != CUDA_SUCCESS)
                    ofd[i] = -1;
            } else if (ofd[i] >= 0 && back[i] == 0) {
                if (import_fd(ofd[i], &back[i]) != CUDA_SUCCESS)
                    back[i] = 0;
            } else if (back[i] != 0 && cuMemRelease(back[i]) == CUDA_SUCCESS) {
                back[i] = 0;
            }
            break;
        case 3: /* release, at random keeping its exported fd open (a reference) */
            if (own[i] != 0 && cuMemRelease(own[i]) == CUDA_SUCCESS) {
                own[i] = 0;
                if (ofd[i] >= 0 && rand_r(&seed) % 2 == 0) {
                    close(ofd[i]);
                    ofd[i] = -1;
                }
            } else if (own[i] == 0 && ofd[i] >= 0 && back[i] == 0) {
                close(ofd[i]); /* the last reference of a released export */
                ofd[i] = -1;
            }
            break;
        default: /* unmap */
            if (own_va[i] != 0 && unmap_rw(own_va[i], VMM_GRAN) == CUDA_SUCCESS)
                own_va[i] = 0;
            break;
        }
    }
}

/*
 * SIGKILL at random instants of a process that imports this one's export
 * and creates, exports, imports, maps, releases and unmaps its own, while
 * this one holds 100 MiB it exported: after each kill the counter is what
 * the survivors' driver allocations hold; 0 after the last holder is gone.
 */
void sc_vmm_share_kill(void)
{
    const char *kills_env = getenv("VGPU_TEST_KILLS");
    int kills = kills_env != NULL ? atoi(kills_env) : 200, fd = -1, keep;
    unsigned seed = (unsigned)getpid();
    CUmemGenericAllocationHandle h = 0;
    char num[16];

    ctx_on(0);
    CHECK(cuMemCreate(&h, 100 * MiB, &share_prop, 0) == CUDA_SUCCESS);
    CHECK(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0) ==
          CUDA_SUCCESS);
    keep = dup(fd); /* without close-on-exec: the helpers inherit it */
    close(fd);
    snprintf(num, sizeof(num), "%d", keep);
    setenv("VGPU_TEST_VMM_FD", num, 1);
    kill_churn_at_random("vmm_share_churn", kills, &seed);
    close(keep);
    unsetenv("VGPU_TEST_VMM_FD");
    CHECK(cuMemRelease(h) == CUDA_SUCCESS);
    CHECK_EXACT(0);
}

/* Helper: reads a fabric handle (hex) on stdin, imports and maps 400 MiB of it, as the fd one. */
int sc_vmm_share_fabric_import(void)
{
    CUmemGenericAllocationHandle h = 0;
    CUmemFabricHandle fh;
    CUdeviceptr va = 0;
    char line[256];
    CUresult rc;

    ctx_on(0);
    read_line(0, line, sizeof(line));
    if (!from_hex(line, (CUipcMemHandle *)(void *)&fh))
        return 1;
    rc = cuMemImportFromShareableHandle(&h, &fh, CU_MEM_HANDLE_TYPE_FABRIC);
    if (rc == CUDA_SUCCESS && (va = map_rw(h, 400 * MiB)) == 0)
        rc = CUDA_ERROR_UNKNOWN;
    printf("imported %d\n", rc);
    fflush(stdout);
    for (;;) {
        read_line(0, line, sizeof(line));
        if (strcmp(line, "release") == 0) {
            CUresult a = cuMemRelease(h), b = unmap_rw(va, 400 * MiB);

            printf("released %d\n", a != CUDA_SUCCESS ? a : b);
            fflush(stdout);
        } else {
            return 0;
        }
    }
}

/*
 * A fabric handle (its 64 bytes are the key) exported here and imported by
 * another process of the claim: charged once; the exporter releases first,
 * the importer's death returns it.
 */
void sc_vmm_share_fabric(void)
{
    static const CUmemAllocationProp fprop = {
        .type = CU_MEM_ALLOCATION_TYPE_PINNED,
        .requestedHandleTypes = CU_MEM_HANDLE_TYPE_FABRIC,
        .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    char *args[] = {self_exe, "vmm_share_fabric_import", NULL};
    char hex[2 * CU_IPC_HANDLE_SIZE + 2], line[64];
    CUmemGenericAllocationHandle h = 0;
    CUmemFabricHandle fh;
    CUdeviceptr x = 0;
    struct helper a;
    int rc = -1;

    ctx_on(0);
    CHECK(cuMemCreate(&h, 400 * MiB, &fprop, 0) == CUDA_SUCCESS);
    CHECK(cuMemExportToShareableHandle(&fh, h, CU_MEM_HANDLE_TYPE_FABRIC, 0) == CUDA_SUCCESS);
    CHECK_EXACT(400 * MiB);
    a.pid = spawn(args, false, &a.to, &a.from);
    to_hex((const CUipcMemHandle *)(const void *)&fh, hex);
    strcat(hex, "\n");
    say(a.to, hex);
    read_line(a.from, line, sizeof(line));
    CHECK(sscanf(line, "imported %d", &rc) == 1);
    CHECK_EQ_U64(rc, CUDA_SUCCESS);
    CHECK_EXACT(400 * MiB);
    CHECK(cuMemRelease(h) == CUDA_SUCCESS);
    CHECK_EXACT(400 * MiB); /* the importer holds it */
    CHECK(cuMemAlloc_v2(&x, 700 * MiB) == CUDA_ERROR_OUT_OF_MEMORY);
    finish(&a, true);
    reclaim_dead();
    CHECK_EXACT(0);
}

/*
 * An exported fd is a reference to the allocation: the driver keeps the
 * memory while the fd is open, after every handle is released and every
 * mapping unmapped, in whatever process the fd went to. Under a 1 GiB
 * claim: 8 x (create 1 GiB, export it, release it, keep the fd) makes one,
 * and the claim stays charged for it (a further 1 GiB refused); the fd
 * imports the same memory again at no charge; an exporter that releases,
 * unmaps and exits leaves the memory to the fd it sent; each charge ends
 * once its fds are closed (found at the next refusal's sweep).
 */
static void fd_hold(void)
{
    CUmemGenericAllocationHandle h = 0, back = 0;
    CUdeviceptr x = 0;
    int fds[8], made = 0, fd, sock;
    struct helper e;

    ctx_on(0);
    for (int i = 0; i < 8; i++) {
        fds[i] = -1;
        if (cuMemCreate(&h, GiB, &share_prop, 0) != CUDA_SUCCESS)
            continue;
        made++;
        CHECK(cuMemExportToShareableHandle(&fds[i], h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                                           0) == CUDA_SUCCESS);
        CHECK(cuMemRelease(h) == CUDA_SUCCESS);
    }
    CHECK_EQ_U64(made, 1);
    CHECK_EXACT(GiB);
    CHECK(cuMemAlloc_v2(&x, GiB) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_EXACT(GiB);
    CHECK(import_fd(fds[0], &back) == CUDA_SUCCESS);
    CHECK_EXACT(GiB);
    CHECK(cuMemRelease(back) == CUDA_SUCCESS);
    CHECK_EXACT(GiB);
    for (int i = 0; i < 8; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    reclaim_dead();
    CHECK_EXACT(0);
    CHECK(cuMemAlloc_v2(&x, GiB) == CUDA_SUCCESS);
    CHECK(cuMemFree_v2(x) == CUDA_SUCCESS);
    /* The exporter gone, its fd here, never imported: still held. */
    e = vmm_exporter("800", IN_CLAIM, &fd, &sock);
    ask(&e, "release\n", "released 0");
    finish(&e, false);
    close(sock);
    reclaim_dead();
    CHECK_EXACT(800 * MiB);
    CHECK(cuMemAlloc_v2(&x, 300 * MiB) == CUDA_ERROR_OUT_OF_MEMORY);
    close(fd);
    reclaim_dead();
    CHECK_EXACT(0);
}

void sc_vmm_share_fd_hold(void)
{
    fd_hold();
}

/*
 * More exports than the region has shared records, each released while
 * its fd is open and the fd closed after: the records only closed fds held
 * are freed when an export finds none free, so the last export still gets
 * one, and its open fd keeps the claim charged after its release.
 */
void sc_vmm_share_fd_many(void)
{
    CUmemGenericAllocationHandle h = 0;
    int fd = -1;

    ctx_on(0);
    for (int i = 0; i < VGPU_REGION_MAX_SHARED + 6; i++) {
        if (fd >= 0)
            close(fd);
        CHECK(cuMemCreate(&h, VMM_GRAN, &share_prop, 0) == CUDA_SUCCESS);
        CHECK(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0) ==
              CUDA_SUCCESS);
        CHECK(cuMemRelease(h) == CUDA_SUCCESS);
    }
    reclaim_dead(); /* the closed ones' records go; the open one's stays */
    CHECK_EXACT(VMM_GRAN);
    close(fd);
    reclaim_dead();
    CHECK_EXACT(0);
}

/*
 * The fake as NVIDIA's driver: every fd export a fresh open file
 * description on one inode shared by all (VGPU_FAKE_VMM_FD_DEVICE); its
 * helpers inherit the setting.
 */
static void devfd_driver(void)
{
    CHECK(setenv("VGPU_FAKE_VMM_FD_DEVICE", "1", 1) == 0);
}

/* fd_hold on exports onto one inode: the mark shows while the description is open. */
void sc_vmm_devfd_fd_hold(void)
{
    devfd_driver();
    fd_hold();
}

/*
 * The OFD locks fd's open file description carries, from fdinfo: their
 * count; the first one's range in *start, *end.
 */
static int ofd_locks(int fd, long long *start, long long *end)
{
    char path[64], line[256];
    int n = 0;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
    f = fopen(path, "r");
    CHECK(f != NULL);
    if (f == NULL)
        return -1;
    while (fgets(line, sizeof(line), f) != NULL) {
        long long s, e;

        if (strstr(line, "OFDLCK") == NULL ||
            sscanf(line, "lock: %*d: %*s %*s %*s %*s %*s %lld %lld", &s, &e) != 2)
            continue;
        if (n++ == 0) {
            *start = s;
            *end = e;
        }
    }
    fclose(f);
    return n;
}

/* An OFD lock (F_RDLCK, or F_UNLCK) on fd's open file description over [start, start+len). */
static int ofd_lock(int fd, short type, long long start, long long len)
{
    struct flock l = {.l_type = type, .l_whence = SEEK_SET, .l_start = start, .l_len = len};

    return fcntl(fd, F_OFD_SETLK, &l);
}

/*
 * Exports onto one inode (NVIDIA's control node): the inode names no
 * allocation, so each export's open file description is marked with a
 * one-byte OFD lock at a nonce of its own, the key of its allocation's
 * record; a further export of the same handle carries the same nonce, and
 * the export's charge moves into the record as with a file of its own.
 */
void sc_vmm_share_devfd(void)
{
    CUmemGenericAllocationHandle a = 0, b = 0, again = 0;
    long long sa = 0, ea = 0, sa2 = 0, ea2 = 0, sb = 0, eb = 0;
    struct stat st_a, st_b;
    struct region_view v;
    int fa = -1, fa2 = -1, fb = -1;

    devfd_driver();
    ctx_on(0);
    CHECK(cuMemCreate(&a, 300 * MiB, &share_prop, 0) == CUDA_SUCCESS);
    CHECK(cuMemCreate(&b, 500 * MiB, &share_prop, 0) == CUDA_SUCCESS);
    CHECK(cuMemExportToShareableHandle(&fa, a, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0) ==
          CUDA_SUCCESS);
    CHECK(cuMemExportToShareableHandle(&fb, b, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0) ==
          CUDA_SUCCESS);
    CHECK(cuMemExportToShareableHandle(&fa2, a, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0) ==
          CUDA_SUCCESS);
    /* One inode for all, no regular file: only the description tells them apart. */
    CHECK(fstat(fa, &st_a) == 0 && fstat(fb, &st_b) == 0);
    CHECK(!S_ISREG(st_a.st_mode) && st_a.st_dev == st_b.st_dev && st_a.st_ino == st_b.st_ino);
    CHECK_EQ_U64(ofd_locks(fa, &sa, &ea), 1);
    CHECK_EQ_U64(ofd_locks(fa2, &sa2, &ea2), 1);
    CHECK_EQ_U64(ofd_locks(fb, &sb, &eb), 1);
    CHECK(sa > 0 && sa == ea && sa2 == sa && ea2 == ea && sb == eb && sb != sa);
    CHECK(region_view(claim_region(), getenv("VGPU_TEST_UUID0"), &v));
    CHECK_EQ_U64(v.shared_live, 2);
    CHECK_EQ_U64(v.charged_sum, 0);
    CHECK_EXACT(800 * MiB);
    /* Our own export imported by ourselves: one more reference, no second charge. */
    CHECK(import_fd(fa2, &again) == CUDA_SUCCESS);
    CHECK_EXACT(800 * MiB);
    close(fa);
    close(fa2);
    close(fb);
    CHECK(cuMemRelease(a) == CUDA_SUCCESS);
    CHECK_EXACT(800 * MiB);
    CHECK(cuMemRelease(again) == CUDA_SUCCESS);
    CHECK_EXACT(500 * MiB);
    CHECK(cuMemRelease(b) == CUDA_SUCCESS);
    CHECK_EXACT(0);
}

/* vmm_share_exporter_gone on exports onto one inode: the marks name the allocation. */
void sc_vmm_devfd_exporter_gone(void)
{
    devfd_driver();
    sc_vmm_share_exporter_gone();
}

/* vmm_share_two_importers on exports onto one inode. */
void sc_vmm_devfd_two_importers(void)
{
    devfd_driver();
    sc_vmm_share_two_importers();
}

/* vmm_share_kill on exports onto one inode: the churn's kills land in the marking too. */
void sc_vmm_devfd_kill(void)
{
    devfd_driver();
    sc_vmm_share_kill();
}

/*
 * Imports an exported fd of 800 MiB that names no allocation of this claim
 * with nothing else charged here: refused (its size is unknown: never
 * free), and the driver's import released again.
 */
static void import_refused(int fd)
{
    CUmemGenericAllocationHandle h = 0;

    CHECK(import_fd(fd, &h) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_EQ_U64(truth(true), 0);
}

/*
 * Exports onto one inode from outside the claim: from a process without
 * the library (no mark) and from a process of another claim (its mark
 * names its own claim's record): each import is refused, never free.
 */
void sc_vmm_devfd_foreign(void)
{
    char other[600];
    long long s = 0, e = 0;
    struct region_view v;
    struct helper x;
    int fd, sock;

    devfd_driver();
    ctx_on(0);
    x = vmm_exporter("800", OUTSIDE, &fd, &sock);
    CHECK_EQ_U64(ofd_locks(fd, &s, &e), 0);
    import_refused(fd);
    close(fd);
    finish(&x, false);
    close(sock);
    other_claim();
    x = vmm_exporter("800", OTHER_CLAIM, &fd, &sock);
    /* Marked, its record in the other claim's region, none in ours. */
    CHECK_EQ_U64(ofd_locks(fd, &s, &e), 1);
    snprintf(other, sizeof(other), "%s/a/shm/region", other_root);
    CHECK(region_view(other, getenv("VGPU_TEST_UUID0"), &v));
    CHECK_EQ_U64(v.shared_live, 1);
    CHECK_EQ_U64(v.used, 800 * MiB);
    CHECK(region_view(claim_region(), getenv("VGPU_TEST_UUID0"), &v));
    CHECK_EQ_U64(v.shared_live, 0);
    import_refused(fd);
    close(fd);
    finish(&x, false);
    close(sock);
    other_claim_gone();
    CHECK_EQ_U64(used0(), 0);
}

/*
 * A mark moved: a holder of another claim's export removes that claim's
 * mark and puts the nonce of a small record of ours on it. The import
 * would ride on our 64 MiB record while the allocation holds 576 MiB; the
 * driver tells it is larger than the record (a granule maps past 64 MiB),
 * so it names none: refused, the driver's import released.
 */
void sc_vmm_devfd_moved(void)
{
    CUmemGenericAllocationHandle small = 0, h = 0;
    long long s = 0, e = 0, ours = 0;
    struct helper x;
    int fd, sock, mine = -1;

    devfd_driver();
    ctx_on(0);
    CHECK(cuMemCreate(&small, 64 * MiB, &share_prop, 0) == CUDA_SUCCESS);
    CHECK(cuMemExportToShareableHandle(&mine, small, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                                       0) == CUDA_SUCCESS);
    CHECK_EQ_U64(ofd_locks(mine, &ours, &e), 1);
    CHECK_EXACT(64 * MiB);
    other_claim();
    x = vmm_exporter("576", OTHER_CLAIM, &fd, &sock);
    CHECK_EQ_U64(ofd_locks(fd, &s, &e), 1);
    CHECK(ofd_lock(fd, F_UNLCK, s, 1) == 0);
    CHECK(ofd_lock(fd, F_RDLCK, ours, 1) == 0);
    CHECK_EQ_U64(ofd_locks(fd, &s, &e), 1);
    CHECK_EQ_U64(s, ours);
    CHECK(import_fd(fd, &h) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_EQ_U64(truth(true), 64 * MiB); /* only our own allocation: the import was released */
    CHECK_EQ_U64(used0(), 64 * MiB);
    /* Our own export, its mark where we put it: ours again, charged once. */
    CHECK(import_fd(mine, &h) == CUDA_SUCCESS);
    CHECK_EQ_U64(used0(), 64 * MiB);
    CHECK(cuMemRelease(h) == CUDA_SUCCESS);
    close(fd);
    finish(&x, false);
    close(sock);
    other_claim_gone();
    CHECK(cuMemRelease(small) == CUDA_SUCCESS);
    close(mine);
    reclaim_dead();
    CHECK_EQ_U64(used0(), 0);
}

/*
 * Forged marks: a lock of some number on an unmarked export (from outside
 * the claim) names no record; a second lock beside a genuine mark, or one
 * that extends it, leaves no single mark: refused each time (the driver's
 * import released), while the genuine mark alone is held at no charge.
 */
void sc_vmm_devfd_forged(void)
{
    CUmemGenericAllocationHandle h = 0;
    long long s = 0, e = 0;
    uint64_t guess = 0;
    struct helper x;
    int fd, sock;

    devfd_driver();
    ctx_on(0);
    x = vmm_exporter("800", OUTSIDE, &fd, &sock);
    CHECK(getrandom(&guess, sizeof(guess), 0) == (ssize_t)sizeof(guess));
    CHECK(ofd_lock(fd, F_RDLCK, (long long)(guess >> 2) + 1, 1) == 0);
    import_refused(fd);
    CHECK(ofd_lock(fd, F_RDLCK, 12345, 1) == 0); /* a second one: no better */
    import_refused(fd);
    close(fd);
    finish(&x, false);
    close(sock);
    /* An export of the claim, 800 MiB charged once, its mark tampered with. */
    x = vmm_exporter("800", IN_CLAIM, &fd, &sock);
    CHECK_EXACT(800 * MiB);
    CHECK_EQ_U64(ofd_locks(fd, &s, &e), 1);
    CHECK(ofd_lock(fd, F_RDLCK, s + 1000, 1) == 0);
    CHECK(import_fd(fd, &h) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(ofd_lock(fd, F_UNLCK, s + 1000, 1) == 0);
    CHECK(ofd_lock(fd, F_RDLCK, s + 1, 1) == 0); /* merges with the mark: [s, s+1] */
    CHECK(import_fd(fd, &h) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(ofd_lock(fd, F_UNLCK, s + 1, 1) == 0);
    CHECK_EXACT(800 * MiB);
    CHECK_EQ_U64(truth(true), 0);
    /* The mark alone again: held, charged once. */
    CHECK(import_fd(fd, &h) == CUDA_SUCCESS);
    CHECK_EXACT(800 * MiB);
    CHECK(cuMemRelease(h) == CUDA_SUCCESS);
    close(fd);
    finish(&x, false);
    close(sock);
    CHECK_EXACT(0);
}
