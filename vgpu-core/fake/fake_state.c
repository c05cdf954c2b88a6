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
 * fake_state.c - the cross-process simulated GPU state (see fake_state.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "fake_state.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sched.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

_Static_assert(FAKE_MAX_SLOTS <= GPU_OWNERS, "every slot has its queue on each engine");
_Static_assert(FAKE_MAX_SLOTS < (1 << FAKE_ENGINE_SLOT_BITS), "slot + 1 fits the lock word");

/* A lock of type on the lock byte of slot i. */
static struct flock slot_flock(int i, short type)
{
    struct flock fl;
    memset(&fl, 0, sizeof(fl));
    fl.l_type = type;
    fl.l_whence = SEEK_SET;
    fl.l_start = FAKE_LOCK_BASE + i;
    fl.l_len = 1;
    return fl;
}

/* Takes (F_OFD_SETLK) or drops the lock byte of slot i; returns 0 on success. */
static int slot_lock(int fd, int i, short type)
{
    struct flock fl = slot_flock(i, type);
    return fcntl(fd, F_OFD_SETLK, &fl);
}

static void drop_kernels(fake_state *st, fake_dev_engine *e, int slot);
static void pause_briefly(unsigned spins);

/* The engine of live compute instance mig (FAKE_MIG_TAG) of dev, or NULL. */
static fake_dev_engine *mig_engine(fake_state_file *f, int dev, uint32_t mig)
{
    unsigned int gi = FAKE_MIG_TAG_GI(mig), ci = FAKE_MIG_TAG_CI(mig);
    if (gi < 1 || gi > FAKE_MIG_MAX_GI || ci >= FAKE_MIG_MAX_CI)
        return NULL;
    const fake_mig_gi *g = &f->mig[dev].gi[gi];
    const fake_mig_ci *c = &g->ci[ci];
    if (!atomic_load(&g->live) || !atomic_load(&c->live) || c->engine >= FAKE_MIG_ENGINES)
        return NULL;
    return &f->mig_engines[dev][c->engine];
}

/*
 * Drops slot i as a holder of IPC record k; the last holder frees it. A
 * record slot i claimed and died before holding is freed too.
 */
static void ipc_drop_slot(fake_state_file *f, int k, int i)
{
    fake_ipc *x = &f->ipc[k];
    uint64_t bit = 1ULL << i, h = atomic_load(&x->holders);

    while ((h & bit) != 0 && !atomic_compare_exchange_weak(&x->holders, &h, h & ~bit))
        ;
    /* An exported fd holds it too: fake_state_ipc_fd_held frees it once that is closed. */
    if (atomic_load(&x->fd_kind) != FAKE_FDSCAN_NONE)
        return;
    if ((h & bit) != 0 && (h & ~bit) == 0)
        atomic_store(&x->claim, 0);
    else if (h == 0 && atomic_load(&x->claim) == (uint32_t)i + 1)
        atomic_store(&x->claim, 0);
}

bool fake_state_ipc_fd_held(fake_ipc *x)
{
    uint32_t claim = atomic_load(&x->claim);

    if (claim == 0 || atomic_load(&x->holders) != 0 ||
        atomic_load(&x->fd_kind) == FAKE_FDSCAN_NONE)
        return false;
    if (fake_fdscan_open(atomic_load(&x->fd_kind), x->fd_dev, x->fd_ino, x->fd_tag))
        return true;
    /* Every fd is closed and nobody holds it: the memory is freed. */
    if (atomic_load(&x->holders) == 0 && atomic_compare_exchange_strong(&x->claim, &claim, 0))
        atomic_store(&x->fd_kind, FAKE_FDSCAN_NONE);
    return false;
}

/*
 * Bytes of live IPC records on dev: held by a process, or (mask 0) by an
 * exported fd alone. With mask, only those that processes in mask hold.
 */
static uint64_t ipc_used(fake_state_file *f, int dev, uint64_t mask)
{
    uint64_t sum = 0;
    for (int k = 0; k < FAKE_MAX_IPC; k++) {
        fake_ipc *x = &f->ipc[k];
        uint64_t h = atomic_load(&x->holders);
        if (x->dev != (uint32_t)dev)
            continue;
        if (h != 0 ? mask == 0 || (h & mask) != 0 : mask == 0 && fake_state_ipc_fd_held(x))
            sum += x->bytes;
    }
    return sum;
}

/*
 * Returns the memory of slot i (whose lock the caller holds) to the GPUs and
 * drops its kernels, as the driver tears a dead process's context down.
 */
static void slot_clear(fake_state *st, int i)
{
    fake_state_file *f = st->file;
    fake_slot *s = &f->slots[i];
    for (int d = 0; d < FAKE_MAX_GPUS; d++) {
        gpu_queue *q = &f->engines[d].sched.q[i];
        if (q->head != q->tail)
            drop_kernels(st, &f->engines[d], i);
        /* Its engine starts afresh with a compute instance: only live ones hold kernels. */
        for (int g = 1; g <= FAKE_MIG_MAX_GI; g++) {
            for (int c = 0; c < FAKE_MIG_MAX_CI && atomic_load(&f->mig[d].gi[g].live); c++) {
                fake_dev_engine *e = mig_engine(f, d, FAKE_MIG_TAG(g, c));
                if (e == NULL)
                    continue;
                q = &e->sched.q[i];
                if (q->head != q->tail)
                    drop_kernels(st, e, i);
            }
        }
        /* The GPU's total is the sum of the slots: this frees all the process held. */
        atomic_store(&s->dev[d].used, 0);
        atomic_store(&s->dev[d].pending, 0);
        atomic_store(&s->dev[d].contexts, 0);
        atomic_store(&s->dev[d].mig, 0);
        gpu_busy_reset(&s->dev[d].busy);
    }
    /* Its holds on shared memory go; memory nobody else holds is freed. */
    for (int k = 0; k < FAKE_MAX_IPC; k++)
        ipc_drop_slot(f, k, i);
    atomic_store(&f->ident[i].host_pid, 0);
    atomic_store(&f->ident[i].pidns, 0);
    atomic_store(&s->pid, 0);
    atomic_store(&s->active, 0);
}

/* The initial pid namespace's inode (PROC_PID_INIT_INO, fixed since Linux 3.8). */
#define FAKE_INIT_PIDNS_INO 0xEFFFFFFCULL

/* Inode of the pid namespace of /proc/<pid> ("self" for the caller), 0 if unreadable. */
static uint64_t pidns_of(const char *pid)
{
    char path[300]; /* a /proc entry name is up to 255 bytes */
    struct stat sb;
    snprintf(path, sizeof(path), "/proc/%s/ns/pid", pid);
    return stat(path, &sb) == 0 ? (uint64_t)sb.st_ino : 0;
}

/* The innermost pid of /proc/<pid>/status's NSpid line (pid in its own namespace), 0 if none. */
static unsigned long innermost_nspid(const char *pid)
{
    char path[300], buf[4096];
    snprintf(path, sizeof(path), "/proc/%s/status", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    char *line = strstr(buf, "\nNSpid:");
    if (line == NULL)
        return 0;
    char *end = strchr(line + 1, '\n');
    if (end != NULL)
        *end = '\0';
    unsigned long last = 0;
    for (char *p = line + strlen("\nNSpid:"); *p != '\0';) {
        char *next;
        unsigned long v = strtoul(p, &next, 10);
        if (next == p)
            break;
        last = v;
        p = next;
    }
    return last;
}

/* The caller's pid for the process that is pid in namespace ns, from /proc; 0 if not visible. */
static unsigned int find_in_proc(uint64_t ns, unsigned int pid)
{
    DIR *d = opendir("/proc");
    struct dirent *e;
    unsigned int found = 0;
    if (d == NULL)
        return 0;
    while (found == 0 && (e = readdir(d)) != NULL) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9')
            continue;
        if (pidns_of(e->d_name) == ns && innermost_nspid(e->d_name) == pid)
            found = (unsigned int)strtoul(e->d_name, NULL, 10);
    }
    closedir(d);
    return found;
}

/*
 * The pid NVML reports for slot i, as the kernel driver would: the host pid.
 * own_ns is the caller's pid namespace.
 */
static unsigned int reported_pid(fake_state_file *f, int i, uint64_t own_ns)
{
    unsigned int pid = atomic_load(&f->slots[i].pid);
    unsigned int host = atomic_load(&f->ident[i].host_pid);
    uint64_t ns = atomic_load(&f->ident[i].pidns);
    if (host != 0)
        return host;
    if (ns == 0 || own_ns == 0)
        return pid; /* written before namespaces were recorded, or no /proc */
    unsigned int mine = ns == own_ns ? pid : find_in_proc(ns, pid);
    if (mine == 0)
        return pid; /* the caller is in a child namespace: it cannot name the process */
    /* Seen from the host namespace the pid is the host pid for every later caller too. */
    if (own_ns == FAKE_INIT_PIDNS_INO)
        atomic_store(&f->ident[i].host_pid, mine);
    return mine;
}

static int ensure_dir(const char *dir, char *err, size_t errlen)
{
    if (mkdir(dir, 0777) == 0) {
        /* Containers may run as another user: undo the umask. */
        if (chmod(dir, 0777) != 0) {
            snprintf(err, errlen, "chmod %s: %s", dir, strerror(errno));
            return -1;
        }
        return 0;
    }
    if (errno != EEXIST) {
        snprintf(err, errlen, "mkdir %s: %s", dir, strerror(errno));
        return -1;
    }
    return 0;
}

static int open_file(const char *path, char *err, size_t errlen)
{
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) {
        if (fchmod(fd, 0666) != 0) {
            snprintf(err, errlen, "chmod %s: %s", path, strerror(errno));
            close(fd);
            return -1;
        }
        return fd;
    }
    if (errno == EEXIST)
        fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        snprintf(err, errlen, "open %s: %s", path, strerror(errno));
    return fd;
}

/* True when no process holds a slot lock of the file (nobody can be using it). */
static int unused_file(int fd)
{
    struct flock fl;
    memset(&fl, 0, sizeof(fl));
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    fl.l_start = FAKE_LOCK_BASE;
    fl.l_len = FAKE_MAX_SLOTS;
    return fcntl(fd, F_OFD_GETLK, &fl) == 0 && fl.l_type == F_UNLCK;
}

static int claim_slot(fake_state *st, char *err, size_t errlen)
{
    for (int i = 0; i < FAKE_MAX_SLOTS; i++) {
        if (slot_lock(st->fd, i, F_WRLCK) != 0)
            continue;
        /* The lock is ours: any previous owner is dead. */
        if (atomic_load(&st->file->slots[i].active))
            slot_clear(st, i);
        atomic_store(&st->file->ident[i].host_pid, 0);
        atomic_store(&st->file->ident[i].pidns, pidns_of("self"));
        atomic_store(&st->file->mps[i].sock_ino, 0);
        atomic_store(&st->file->slots[i].pid, (uint32_t)getpid());
        atomic_store(&st->file->slots[i].active, 1);
        st->slot = i;
        return 0;
    }
    snprintf(err, errlen, "all %d fake GPU process slots are in use", FAKE_MAX_SLOTS);
    return -1;
}

int fake_state_open(fake_state *st, const char *dir, int own_slot, char *err, size_t errlen)
{
    char path[512];
    struct stat sb;
    st->fd = -1;
    st->file = NULL;
    st->slot = -1;
    if (ensure_dir(dir, err, errlen) != 0)
        return -1;
    snprintf(path, sizeof(path), "%s/state", dir);
    int fd = open_file(path, err, errlen);
    if (fd < 0)
        return -1;
    size_t old_size = 0;
    if (fstat(fd, &sb) != 0 ||
        ((old_size = (size_t)sb.st_size) < sizeof(fake_state_file) &&
         ftruncate(fd, (off_t)sizeof(fake_state_file)) != 0)) {
        snprintf(err, errlen, "size %s: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    void *m = mmap(NULL, sizeof(fake_state_file), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
        snprintf(err, errlen, "mmap %s: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    fake_state_file *f = m;
    /*
     * A file of an older layout that no live process uses starts afresh
     * (what it grew by is zero already: the new GPU-instance engines stay
     * holes until used).
     */
    if (atomic_load(&f->version) != 0 && atomic_load(&f->version) < FAKE_STATE_VERSION &&
        unused_file(fd))
        memset(f, 0, old_size < sizeof(*f) ? old_size : sizeof(*f));
    /* A zero-filled file is a valid empty state; stamp it once. */
    uint64_t magic = 0;
    atomic_compare_exchange_strong(&f->magic, &magic, FAKE_STATE_MAGIC);
    uint32_t version = 0;
    atomic_compare_exchange_strong(&f->version, &version, FAKE_STATE_VERSION);
    if (atomic_load(&f->magic) != FAKE_STATE_MAGIC ||
        atomic_load(&f->version) != FAKE_STATE_VERSION) {
        snprintf(err, errlen, "%s: not a version %u fake GPU state file", path,
                 FAKE_STATE_VERSION);
        munmap(m, sizeof(fake_state_file));
        close(fd);
        return -1;
    }
    st->fd = fd;
    st->file = f;
    if (own_slot && claim_slot(st, err, errlen) != 0) {
        fake_state_close(st);
        return -1;
    }
    return 0;
}

void fake_state_close(fake_state *st)
{
    if (st->file != NULL)
        munmap(st->file, sizeof(fake_state_file));
    if (st->fd >= 0)
        close(st->fd);
    st->file = NULL;
    st->fd = -1;
    st->slot = -1;
}

void fake_state_reclaim(fake_state *st)
{
    for (int i = 0; i < FAKE_MAX_SLOTS; i++) {
        if (i == st->slot || !atomic_load(&st->file->slots[i].active))
            continue;
        if (slot_lock(st->fd, i, F_WRLCK) != 0)
            continue; /* owner alive */
        if (atomic_load(&st->file->slots[i].active))
            slot_clear(st, i);
        slot_lock(st->fd, i, F_UNLCK);
    }
}

/*
 * Bytes charged on dev by every slot (dead ones not yet reclaimed
 * included), with the bytes allocators are checking (pending) too or not.
 */
static uint64_t slots_used_mig(fake_state_file *f, int dev, unsigned int gi,
                               bool with_pending)
{
    uint64_t sum = 0;
    for (int i = 0; i < FAKE_MAX_SLOTS; i++) {
        if (gi != 0 && FAKE_MIG_TAG_GI(atomic_load(&f->slots[i].dev[dev].mig)) != gi)
            continue;
        sum += atomic_load(&f->slots[i].dev[dev].used);
        if (with_pending)
            sum += atomic_load(&f->slots[i].dev[dev].pending);
    }
    /* Shared memory lives on the whole GPU's books (MIG instances do not export it here). */
    if (gi == 0)
        sum += ipc_used(f, dev, 0);
    return sum;
}

static uint64_t slots_used(fake_state_file *f, int dev, bool with_pending)
{
    return slots_used_mig(f, dev, 0, with_pending);
}

int fake_state_ipc_export(fake_state *st, int dev, uint64_t bytes, uint64_t *id)
{
    fake_state_file *f = st->file;
    for (int k = 0; k < FAKE_MAX_IPC; k++) {
        fake_ipc *x = &f->ipc[k];
        uint32_t free_claim = 0;
        if (atomic_load(&x->holders) != 0 ||
            !atomic_compare_exchange_strong(&x->claim, &free_claim, (uint32_t)st->slot + 1))
            continue;
        x->dev = (uint32_t)dev;
        x->bytes = bytes;
        atomic_store(&x->fd_kind, FAKE_FDSCAN_NONE);
        *id = atomic_fetch_add(&f->ipc_next_id, 1) + 1;
        atomic_store(&x->id, *id);
        /* Counted twice for an instant (never missing): held first, then off our slot. */
        atomic_store(&x->holders, 1ULL << st->slot);
        atomic_fetch_sub(&f->slots[st->slot].dev[dev].used, bytes);
        return k;
    }
    return -1;
}

int fake_state_ipc_open(fake_state *st, int idx, uint64_t id, int *dev, uint64_t *bytes)
{
    if (idx < 0 || idx >= FAKE_MAX_IPC)
        return -1;
    fake_ipc *x = &st->file->ipc[idx];
    uint64_t bit = 1ULL << st->slot, h = atomic_load(&x->holders);
    for (;;) {
        /* Nobody holds it: alive only through an exported fd that is still open. */
        if (atomic_load(&x->id) != id || (h == 0 && !fake_state_ipc_fd_held(x)))
            return -1;
        if ((h & bit) != 0)
            return 1;
        if (atomic_compare_exchange_weak(&x->holders, &h, h | bit))
            break;
    }
    /* Reused for another export between our looks: not ours to hold. */
    if (atomic_load(&x->id) != id) {
        fake_state_ipc_drop(st, idx);
        return -1;
    }
    *dev = (int)x->dev;
    *bytes = x->bytes;
    return 0;
}

void fake_state_ipc_drop(fake_state *st, int idx)
{
    if (idx >= 0 && idx < FAKE_MAX_IPC)
        ipc_drop_slot(st->file, idx, st->slot);
}

void fake_state_ipc_fd_exported(fake_state *st, int idx, uint32_t kind, uint64_t dev,
                                uint64_t ino, uint64_t tag)
{
    fake_ipc *x;

    if (idx < 0 || idx >= FAKE_MAX_IPC)
        return;
    x = &st->file->ipc[idx];
    if (atomic_load(&x->fd_kind) != FAKE_FDSCAN_NONE)
        return;
    x->fd_dev = dev;
    x->fd_ino = ino;
    x->fd_tag = tag;
    atomic_store(&x->fd_kind, kind);
}

int fake_state_reserve(fake_state *st, int dev, uint64_t bytes, uint64_t total)
{
    fake_slot_dev *mine = &st->file->slots[st->slot].dev[dev];
    /* Bound to a MIG instance: the instance's memory is the pool (total is its size). */
    unsigned int gi = FAKE_MIG_TAG_GI(atomic_load(&mine->mig));
    int reclaimed = 0;
    /*
     * Every step is one atomic add or subtract on this process's own
     * records, and a GPU's total is the sum over the slots: a SIGKILL at any
     * instant leaves them consistent, and the reclaimer frees exactly what
     * the dead process had charged or was checking. The allocator announces
     * its bytes as pending, sums every slot's charged and pending bytes, and
     * charges them when the sum fits (charged before the pending bytes are
     * taken back, so they are never missing from the sum). With every access
     * sequentially consistent, of two racing allocators at least one sees
     * the other's bytes, so what is charged never exceeds the physical total
     * (never 0: the config refuses it). An allocator that does not fit takes
     * its pending bytes back; it fails only when the charged bytes alone
     * leave no room (after reclaiming dead processes once), else it saw a
     * racing allocator's pending bytes and tries again.
     */
    if (bytes > total)
        return -1; /* never fits; and no add may wrap a record */
    for (unsigned tries = 0;; tries++) {
        atomic_fetch_add(&mine->pending, bytes);
        if (slots_used_mig(st->file, dev, gi, true) <= total) {
            atomic_fetch_add(&mine->used, bytes);
            atomic_fetch_sub(&mine->pending, bytes);
            return 0;
        }
        atomic_fetch_sub(&mine->pending, bytes);
        if (!reclaimed) {
            fake_state_reclaim(st);
            reclaimed = 1;
            continue;
        }
        uint64_t charged = slots_used_mig(st->file, dev, gi, false);
        if (charged > total || bytes > total - charged || tries >= 1000)
            return -1;
        pause_briefly(tries);
    }
}

void fake_state_release(fake_state *st, int dev, uint64_t bytes)
{
    atomic_fetch_sub(&st->file->slots[st->slot].dev[dev].used, bytes);
}

void fake_state_contexts(fake_state *st, int dev, int delta)
{
    atomic_fetch_add(&st->file->slots[st->slot].dev[dev].contexts, (uint32_t)delta);
}

/* Whether slot i's owner is alive: some open file description holds its lock byte. */
static bool slot_alive(int fd, int i)
{
    struct flock fl = slot_flock(i, F_WRLCK);
    return fcntl(fd, F_OFD_GETLK, &fl) != 0 || fl.l_type != F_UNLCK;
}

static void pause_briefly(unsigned spins)
{
    if (spins < 64)
        return;
    if (spins < 256) {
        sched_yield();
        return;
    }
    /* The holder is descheduled: let it run rather than compete for the CPU. */
    struct timespec ts = {.tv_sec = 0, .tv_nsec = 20000};
    nanosleep(&ts, NULL);
}

/*
 * The engine of a GPU, locked by the caller: the lock word it wrote, and
 * the hooks that record the busy time of the kernels the engine starts.
 */
struct engine_hold {
    fake_dev_engine *e;
    uint64_t word;
    fake_state_file *f;
    int dev;
    gpu_sched_hooks h;
};

static void kernel_started(void *ctx, int owner, uint64_t start, uint64_t end)
{
    struct engine_hold *hold = ctx;
    gpu_busy_add(&hold->e->busy, start, end);
    gpu_busy_add(&hold->f->slots[owner].dev[hold->dev].busy, start, end);
}

/*
 * The engine this process's kernels on dev run on: its compute instance's
 * if bound to one (the whole GPU's if that instance is gone: it cannot be
 * destroyed while the process holds a context there).
 */
static fake_dev_engine *own_engine(fake_state *st, int dev)
{
    uint32_t mig = atomic_load(&st->file->slots[st->slot].dev[dev].mig);
    fake_dev_engine *e = mig != 0 ? mig_engine(st->file, dev, mig) : NULL;
    return e != NULL ? e : &st->file->engines[dev];
}

static void engine_lock(fake_state *st, fake_dev_engine *e, int dev, struct engine_hold *hold)
{
    const uint64_t slot_mask = (1ULL << FAKE_ENGINE_SLOT_BITS) - 1;
    uint64_t mine = (uint64_t)(st->slot + 1);
    *hold = (struct engine_hold){.e = e, .f = st->file, .dev = dev,
                                 .h = {.started = kernel_started, .ctx = hold}};
    for (unsigned spins = 0;; spins++) {
        uint64_t now = fake_now_ns(), held = 0;
        hold->word = (now & ~slot_mask) | mine;
        if (hold->word == 0)
            hold->word = 1ULL << FAKE_ENGINE_SLOT_BITS;
        if (atomic_compare_exchange_weak(&e->lock, &held, hold->word)) {
            /* Every process on the node can write the file: what is out of bounds is mended. */
            if (!gpu_sched_sane(&e->sched))
                gpu_sched_repair(&e->sched);
            return;
        }
        /*
         * A holder killed inside (its slot's lock byte dropped), or one stopped
         * for a second (a frozen container must not stall every process on the
         * GPU): the lock is taken over and the engine repaired.
         */
        uint64_t since = held & ~slot_mask;
        int holder = (int)(held & slot_mask) - 1;
        bool stale = now > since + FAKE_ENGINE_STEAL_ANY_NS ||
                     (holder >= 0 && now > since + FAKE_ENGINE_STEAL_NS &&
                      !slot_alive(st->fd, holder));
        if (held != 0 && stale && atomic_compare_exchange_strong(&e->lock, &held, hold->word)) {
            gpu_sched_repair(&e->sched);
            return;
        }
        pause_briefly(spins);
    }
}

/* Unlocks, unless the lock was taken over meanwhile (the holder stalled). */
static void engine_unlock(struct engine_hold *hold)
{
    uint64_t word = hold->word;
    atomic_compare_exchange_strong(&hold->e->lock, &word, 0);
}

/* Locks engine e of dev and runs it up to now. */
static gpu_sched *engine_enter(fake_state *st, fake_dev_engine *e, int dev,
                               struct engine_hold *hold)
{
    engine_lock(st, e, dev, hold);
    gpu_sched_advance(&hold->e->sched, fake_now_ns(), &hold->h);
    return &hold->e->sched;
}

static void drop_kernels(fake_state *st, fake_dev_engine *e, int slot)
{
    struct engine_hold hold;
    engine_lock(st, e, 0, &hold);
    gpu_sched_drop(&hold.e->sched, slot);
    engine_unlock(&hold);
}

/* Runs engine e of dev up to now, so that the busy records are current. */
static void engine_catch_up(fake_state *st, fake_dev_engine *e, int dev)
{
    struct engine_hold hold;
    engine_enter(st, e, dev, &hold);
    engine_unlock(&hold);
}

/* Runs dev's engines (the whole GPU's and its instances') up to now. */
static void engines_catch_up(fake_state *st, int dev)
{
    engine_catch_up(st, &st->file->engines[dev], dev);
    for (unsigned int g = 1; g <= FAKE_MIG_MAX_GI; g++) {
        for (unsigned int c = 0; c < FAKE_MIG_MAX_CI && atomic_load(&st->file->mig[dev].gi[g].live);
             c++) {
            fake_dev_engine *e = mig_engine(st->file, dev, FAKE_MIG_TAG(g, c));
            if (e != NULL)
                engine_catch_up(st, e, dev);
        }
    }
}

int64_t fake_state_submit(fake_state *st, int dev, uint32_t stream, bool small, uint64_t ns)
{
    struct engine_hold hold;
    const fake_slot_mps *m = &st->file->mps[st->slot];
    uint64_t ino = atomic_load(&m->sock_ino);
    /* Clients of one control daemon (its socket file) share its server's slice. */
    uint64_t group = ino == 0 ? 0 : (ino ^ (m->sock_dev << 40)) | 1;
    engine_lock(st, own_engine(st, dev), dev, &hold);
    gpu_sched_set_client(&hold.e->sched, st->slot, group, atomic_load(&m->share_pm));
    /* Submitting runs the engine up to now first. */
    int64_t ticket = gpu_sched_submit(&hold.e->sched, st->slot, stream, small, ns, fake_now_ns(),
                                      &hold.h);
    engine_unlock(&hold);
    return ticket;
}

static void sleep_until(uint64_t t)
{
    struct timespec ts = {.tv_sec = (time_t)(t / 1000000000ULL),
                          .tv_nsec = (long)(t % 1000000000ULL)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

/*
 * Waits for gpu_sched_wait(ticket, what) to say done, sleeping until the
 * time it gives (the earliest the work can be done), then running the
 * engine and asking again. With all, the ticket is the newest queued now.
 */
static void wait_for(fake_state *st, int dev, uint64_t ticket, int64_t what, bool all)
{
    for (;;) {
        struct engine_hold hold;
        gpu_sched *s = engine_enter(st, own_engine(st, dev), dev, &hold);
        const gpu_queue *q = &s->q[st->slot];
        if (all) {
            if (q->tail == q->head) {
                engine_unlock(&hold);
                return;
            }
            ticket = q->tail - 1;
            all = false;
        }
        uint64_t at = gpu_sched_wait(s, st->slot, ticket, what);
        uint64_t now = s->now;
        /*
         * Work left over that the engine does not run (a kernel past its
         * end, or an idle engine): a holder stopped past its takeover wrote
         * into it afterwards. Repair, and run it again.
         */
        if (at != 0 && (at <= now || gpu_sched_next_end(s) == UINT64_MAX)) {
            gpu_sched_repair(s);
            gpu_sched_advance(s, now, &hold.h);
            at = gpu_sched_wait(s, st->slot, ticket, what);
        }
        engine_unlock(&hold);
        if (at == 0)
            return;
        sleep_until(at > now ? at : now + 1000);
    }
}

void fake_state_wait_room(fake_state *st, int dev)
{
    wait_for(st, dev, 0, GPU_WAIT_OLDEST, false);
}

void fake_state_wait_stream(fake_state *st, int dev, uint32_t stream, uint64_t ticket)
{
    wait_for(st, dev, ticket, (int64_t)stream, false);
}

void fake_state_wait_all(fake_state *st, int dev)
{
    wait_for(st, dev, 0, GPU_WAIT_ALL, true);
}

bool fake_state_event_time(fake_state *st, int dev, uint32_t stream, uint64_t last,
                           uint64_t record_ns, uint64_t *at)
{
    struct engine_hold hold;
    gpu_sched *s = engine_enter(st, own_engine(st, dev), dev, &hold);
    const gpu_queue *q = &s->q[st->slot];
    uint64_t t = record_ns;
    bool done = true;

    if (last != 0) {
        uint64_t ticket = last - 1;

        done = ticket < q->head || gpu_sched_wait(s, st->slot, ticket, (int64_t)stream) == 0;
        /* A kernel whose record the ring has reused ended long ago: the record time stands. */
        if (done && ticket < q->tail && q->tail - ticket <= GPU_QUEUE &&
            q->k[ticket % GPU_QUEUE].end > t)
            t = q->k[ticket % GPU_QUEUE].end;
    }
    done = done && t <= s->now;
    engine_unlock(&hold);
    if (done)
        *at = t;
    return done;
}

int64_t fake_state_true_busy(fake_state *st, int dev, unsigned int pid, uint64_t from,
                             uint64_t to)
{
    if (pid == 0) {
        engine_catch_up(st, &st->file->engines[dev], dev);
        return (int64_t)gpu_busy_between(&st->file->engines[dev].busy, from, to);
    }
    engines_catch_up(st, dev);
    for (int i = 0; i < FAKE_MAX_SLOTS; i++) {
        fake_slot *s = &st->file->slots[i];
        if (atomic_load(&s->active) && atomic_load(&s->pid) == pid)
            return (int64_t)gpu_busy_between(&s->dev[dev].busy, from, to);
    }
    return -1;
}

void fake_state_set_mps(fake_state *st, uint64_t sock_dev, uint64_t sock_ino, uint32_t share_pm,
                        uint32_t driver_mem_mib)
{
    fake_slot_mps *m;

    if (st->slot < 0)
        return;
    m = &st->file->mps[st->slot];
    m->sock_dev = sock_dev;
    atomic_store(&m->share_pm, share_pm);
    atomic_store(&m->driver_mem_mib, driver_mem_mib);
    atomic_store(&m->sock_ino, sock_ino);
}

bool fake_state_mps_client(fake_state *st, unsigned int pid, uint32_t *share_pm)
{
    for (int i = 0; i < FAKE_MAX_SLOTS; i++) {
        fake_slot *s = &st->file->slots[i];
        if (atomic_load(&s->active) && atomic_load(&s->pid) == pid &&
            atomic_load(&st->file->mps[i].sock_ino) != 0) {
            *share_pm = atomic_load(&st->file->mps[i].share_pm);
            return true;
        }
    }
    return false;
}

bool fake_state_mps_driver_mem(fake_state *st, unsigned int pid, uint32_t *mib)
{
    for (int i = 0; i < FAKE_MAX_SLOTS; i++) {
        fake_slot *s = &st->file->slots[i];
        if (atomic_load(&s->active) && atomic_load(&s->pid) == pid &&
            atomic_load(&st->file->mps[i].sock_ino) != 0) {
            *mib = atomic_load(&st->file->mps[i].driver_mem_mib);
            return true;
        }
    }
    return false;
}

void fake_state_resolve_host_pids(fake_state *st)
{
    fake_state_file *f = st->file;
    if (f == NULL || pidns_of("self") != FAKE_INIT_PIDNS_INO)
        return;
    for (int i = 0; i < FAKE_MAX_SLOTS; i++) {
        if (atomic_load(&f->slots[i].active) && atomic_load(&f->ident[i].host_pid) == 0)
            (void)reported_pid(f, i, FAKE_INIT_PIDNS_INO);
    }
}

uint64_t fake_state_used(fake_state *st, int dev)
{
    fake_state_reclaim(st);
    fake_state_resolve_host_pids(st);
    return slots_used(st->file, dev, false);
}

unsigned int fake_state_device_util(fake_state *st, int dev, uint64_t now)
{
    engine_catch_up(st, &st->file->engines[dev], dev);
    return gpu_sensor_percent(&st->file->engines[dev].busy, now, (uint64_t)dev << 32, NULL);
}

int fake_state_processes(fake_state *st, int dev, uint64_t now, fake_proc *out, int max)
{
    return fake_state_processes_mig(st, dev, 0, false, now, out, max);
}

int fake_state_processes_mig(fake_state *st, int dev, uint32_t mig, bool gi_only, uint64_t now,
                             fake_proc *out, int max)
{
    int count = 0;
    uint64_t own_ns = pidns_of("self");
    fake_state_reclaim(st);
    engines_catch_up(st, dev);
    for (int i = 0; i < FAKE_MAX_SLOTS; i++) {
        fake_slot *s = &st->file->slots[i];
        if (!atomic_load(&s->active))
            continue;
        /* Shared memory counts for every process holding it, as its own. */
        uint64_t used = atomic_load(&s->dev[dev].used) + ipc_used(st->file, dev, 1ULL << i);
        if (used == 0 && atomic_load(&s->dev[dev].contexts) == 0)
            continue;
        uint32_t tag = atomic_load(&s->dev[dev].mig);
        if (mig != 0 && (gi_only ? FAKE_MIG_TAG_GI(tag) != FAKE_MIG_TAG_GI(mig) : tag != mig))
            continue;
        if (count < max) {
            out[count].mig = tag;
            out[count].pid = reported_pid(st->file, i, own_ns);
            out[count].used = used;
            out[count].sm_util = gpu_sensor_percent(&s->dev[dev].busy, now,
                                                    atomic_load(&s->pid), &out[count].window_end);
        }
        count++;
    }
    return count;
}

void fake_state_bind_mig(fake_state *st, int dev, unsigned int gi, unsigned int ci)
{
    atomic_store(&st->file->slots[st->slot].dev[dev].mig, gi == 0 ? 0 : FAKE_MIG_TAG(gi, ci));
}

uint64_t fake_state_used_mig(fake_state *st, int dev, unsigned int gi)
{
    fake_state_reclaim(st);
    fake_state_resolve_host_pids(st);
    return slots_used_mig(st->file, dev, gi, false);
}

int64_t fake_state_mig_true_busy(fake_state *st, int dev, uint32_t mig, uint64_t from,
                                 uint64_t to)
{
    fake_dev_engine *e = mig_engine(st->file, dev, mig);
    if (e == NULL)
        return -1;
    engine_catch_up(st, e, dev);
    return (int64_t)gpu_busy_between(&e->busy, from, to);
}

int fake_state_mig_lock(fake_state *st, int dev, bool lock)
{
    struct flock fl;
    memset(&fl, 0, sizeof(fl));
    fl.l_type = lock ? F_WRLCK : F_UNLCK;
    fl.l_whence = SEEK_SET;
    fl.l_start = FAKE_MIG_LOCK_BASE + dev;
    fl.l_len = 1;
    /* The kernel drops it when the holder dies, so a killed creator blocks nobody. */
    while (fcntl(st->fd, F_OFD_SETLKW, &fl) != 0) {
        if (errno != EINTR)
            return -1;
    }
    return 0;
}

bool fake_state_mig_in_use(fake_state *st, int dev, unsigned int gi, int ci)
{
    fake_state_reclaim(st);
    for (int i = 0; i < FAKE_MAX_SLOTS; i++) {
        fake_slot *s = &st->file->slots[i];
        if (!atomic_load(&s->active))
            continue;
        uint32_t tag = atomic_load(&s->dev[dev].mig);
        if (FAKE_MIG_TAG_GI(tag) != gi || (ci >= 0 && FAKE_MIG_TAG_CI(tag) != (uint32_t)ci))
            continue;
        if (atomic_load(&s->dev[dev].used) != 0 || atomic_load(&s->dev[dev].contexts) != 0)
            return true;
    }
    return false;
}

void fake_state_mig_engine_reset(fake_state *st, int dev, unsigned int engine)
{
    struct engine_hold hold;
    if (engine >= FAKE_MIG_ENGINES)
        return;
    fake_dev_engine *e = &st->file->mig_engines[dev][engine];
    engine_lock(st, e, dev, &hold);
    memset(&e->sched, 0, sizeof(e->sched));
    gpu_busy_reset(&e->busy);
    engine_unlock(&hold);
}
