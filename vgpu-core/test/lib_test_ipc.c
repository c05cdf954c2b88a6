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
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "lib_test.h"
#include "vgpu_cuda.h"
#include "vgpu_region.h"

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
 * process): their own allocations, and shared memory some live one holds.
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
        if ((atomic_load(&f->ipc[k].holders) & live) != 0 && f->ipc[k].dev == 0)
            sum += f->ipc[k].bytes;
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
    int kills = kills_env != NULL ? atoi(kills_env) : 200, bad = 0;
    unsigned seed = (unsigned)getpid();
    char hex[2 * CU_IPC_HANDLE_SIZE + 1];
    CUipcMemHandle h;
    CUdeviceptr p = 0;

    ctx_on(0);
    CHECK(cuMemAlloc_v2(&p, 100 * MiB) == CUDA_SUCCESS);
    CHECK(cuIpcGetMemHandle(&h, p) == CUDA_SUCCESS);
    to_hex(&h, hex);
    setenv("VGPU_TEST_IPC_HANDLE", hex, 1);
    for (int k = 0; k < kills; k++) {
        struct region_view v;
        int st = kill_helper_at_random("ipc_churn", &seed);

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
