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

/* region.c - see region.h. */
#include "region.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sched.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "limiter_math.h"
#include "log.h"
#include "sharefd.h"
#include "vgpu_reserve.h"

static uint64_t realtime_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* After fork() the inherited descriptor shares the parent's OFD lock: open our own. */
static int own_fd(struct vgpu_region_map *s)
{
    int fd;

    if (s->fd_pid == getpid())
        return 0;
    fd = open(s->path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return -1;
    close(s->fd);
    s->fd = fd;
    s->fd_pid = getpid();
    return 0;
}

static int lock_region(struct vgpu_region_map *s)
{
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1};

    if (own_fd(s) != 0)
        return -1;
    while (fcntl(s->fd, F_OFD_SETLKW, &fl) != 0) {
        if (errno != EINTR)
            return -1;
    }
    return 0;
}

static void unlock_region(struct vgpu_region_map *s)
{
    struct flock fl = {.l_type = F_UNLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1};

    fcntl(s->fd, F_OFD_SETLK, &fl);
}

const char *vgpu_region_check_header(const struct vgpu_region_header *h)
{
    if (h->magic != VGPU_REGION_MAGIC)
        return "bad magic";
    if (h->major != VGPU_REGION_MAJOR)
        return "unsupported layout major version";
    if (h->region_size != VGPU_REGION_SIZE || h->header_size != VGPU_REGION_HEADER_SIZE ||
        h->device_size != VGPU_REGION_DEVICE_SIZE || h->slot_size != VGPU_REGION_SLOT_SIZE ||
        h->max_devices != VGPU_REGION_MAX_DEVICES || h->max_slots != VGPU_REGION_MAX_SLOTS ||
        h->devices_offset != VGPU_REGION_DEVICES_OFFSET ||
        h->slots_offset != VGPU_REGION_SLOTS_OFFSET)
        return "size or offset fields disagree with this library";
    if (h->device_count > VGPU_REGION_MAX_DEVICES)
        return "device_count out of range";
    return NULL;
}

/* Writes a fresh header; called with the lock held and init_state INITIALISING. */
static void init_header(struct vgpu_region *r)
{
    struct vgpu_region_header *h = &r->header;
    uint64_t gen = h->generation;

    memset(r->devices, 0, sizeof(r->devices));
    memset(r->slots, 0, sizeof(r->slots));
    h->magic = VGPU_REGION_MAGIC;
    h->major = VGPU_REGION_MAJOR;
    h->minor = VGPU_REGION_MINOR;
    h->region_size = VGPU_REGION_SIZE;
    h->header_size = VGPU_REGION_HEADER_SIZE;
    h->device_size = VGPU_REGION_DEVICE_SIZE;
    h->slot_size = VGPU_REGION_SLOT_SIZE;
    h->max_devices = VGPU_REGION_MAX_DEVICES;
    h->max_slots = VGPU_REGION_MAX_SLOTS;
    h->device_count = 0;
    h->devices_offset = VGPU_REGION_DEVICES_OFFSET;
    h->slots_offset = VGPU_REGION_SLOTS_OFFSET;
    h->generation = gen + 1;
    h->init_time_ns = realtime_ns();
}

static int ensure_initialised(struct vgpu_region_map *s, char *err)
{
    struct vgpu_region_header *h = &s->r->header;
    uint32_t state = __atomic_load_n(&h->init_state, __ATOMIC_ACQUIRE);
    const char *bad;

    if (state != VGPU_REGION_READY) {
        if (lock_region(s) != 0) {
            snprintf(err, VGPU_ERRMSG_MAX, "%s: cannot lock: %s", s->path, strerror(errno));
            return -1;
        }
        state = __atomic_load_n(&h->init_state, __ATOMIC_ACQUIRE);
        if (state == VGPU_REGION_UNINIT || state == VGPU_REGION_INITIALISING) {
            /* INITIALISING seen under the lock was left by a process that died holding it. */
            if (state == VGPU_REGION_INITIALISING)
                VGPU_INFO("%s: recovering an initialisation interrupted by a dead process", s->path);
            if (__atomic_compare_exchange_n(&h->init_state, &state, VGPU_REGION_INITIALISING, false,
                                            __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
                init_header(s->r);
                __atomic_store_n(&h->init_state, VGPU_REGION_READY, __ATOMIC_RELEASE);
                state = VGPU_REGION_READY;
            }
        }
        unlock_region(s);
        if (state != VGPU_REGION_READY) {
            snprintf(err, VGPU_ERRMSG_MAX, "%s: corrupt init_state %u", s->path, state);
            return -1;
        }
    }
    bad = vgpu_region_check_header(h);
    if (bad != NULL) {
        snprintf(err, VGPU_ERRMSG_MAX, "%s: %s", s->path, bad);
        return -1;
    }
    return 0;
}

int vgpu_region_attach(struct vgpu_region_map *s, const char *path, bool create, char err[VGPU_ERRMSG_MAX])
{
    struct stat st;
    void *m;

    memset(s, 0, sizeof(*s));
    s->fd = -1;
    s->slot = -1;
    s->adopted = -1;
    if (strlen(path) >= sizeof(s->path)) {
        snprintf(err, VGPU_ERRMSG_MAX, "region path too long");
        return -1;
    }
    snprintf(s->path, sizeof(s->path), "%s", path);
    s->fd = open(path, O_RDWR | O_CLOEXEC | (create ? O_CREAT : 0), 0666);
    if (s->fd < 0) {
        snprintf(err, VGPU_ERRMSG_MAX, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    s->fd_pid = getpid();
    if (fstat(s->fd, &st) != 0) {
        snprintf(err, VGPU_ERRMSG_MAX, "%s: cannot stat: %s", path, strerror(errno));
        goto fail;
    }
    if (create && st.st_size == 0) {
        /* Several processes may race here; extending to the same size is idempotent. */
        if (ftruncate(s->fd, VGPU_REGION_SIZE) != 0) {
            snprintf(err, VGPU_ERRMSG_MAX, "%s: cannot size: %s", path, strerror(errno));
            goto fail;
        }
        /* Undo the umask so that other users of the claim can open it. */
        fchmod(s->fd, 0666);
        st.st_size = VGPU_REGION_SIZE;
    }
    if (st.st_size != VGPU_REGION_SIZE) {
        snprintf(err, VGPU_ERRMSG_MAX, "%s: size %lld, want %d (truncated or foreign file)", path,
                 (long long)st.st_size, VGPU_REGION_SIZE);
        goto fail;
    }
    m = mmap(NULL, VGPU_REGION_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, s->fd, 0);
    if (m == MAP_FAILED) {
        snprintf(err, VGPU_ERRMSG_MAX, "%s: cannot map: %s", path, strerror(errno));
        goto fail;
    }
    s->r = m;
    if (ensure_initialised(s, err) != 0) {
        munmap(m, VGPU_REGION_SIZE);
        s->r = NULL;
        goto fail;
    }
    s->dev = (uint64_t)st.st_dev;
    s->ino = (uint64_t)st.st_ino;
    s->generation = __atomic_load_n(&s->r->header.generation, __ATOMIC_RELAXED);
    s->init_ns = __atomic_load_n(&s->r->header.init_time_ns, __ATOMIC_RELAXED);
    return 0;
fail:
    close(s->fd);
    s->fd = -1;
    return -1;
}

void vgpu_region_detach(struct vgpu_region_map *s)
{
    if (s->r != NULL)
        munmap(s->r, VGPU_REGION_SIZE);
    if (s->fd >= 0)
        close(s->fd);
    s->r = NULL;
    s->fd = -1;
    s->slot = -1;
}

static int find_device(const struct vgpu_region *r, const char *uuid)
{
    uint32_t n = __atomic_load_n(&r->header.device_count, __ATOMIC_ACQUIRE);

    if (n > VGPU_REGION_MAX_DEVICES)
        n = VGPU_REGION_MAX_DEVICES;
    for (uint32_t i = 0; i < n; i++) {
        if (strncmp(r->devices[i].uuid, uuid, VGPU_REGION_UUID_LEN) == 0)
            return (int)i;
    }
    return -1;
}

int vgpu_region_find_device(struct vgpu_region_map *s, const char *uuid, uint64_t memory_limit,
                    uint32_t sm_limit, uint32_t policy)
{
    struct vgpu_region_device *d;
    uint32_t n;
    int i = find_device(s->r, uuid);

    if (i >= 0)
        return i;
    if (lock_region(s) != 0)
        return -1;
    i = find_device(s->r, uuid);
    n = s->r->header.device_count;
    if (i < 0 && n < VGPU_REGION_MAX_DEVICES) {
        d = &s->r->devices[n];
        memset(d, 0, sizeof(*d));
        snprintf(d->uuid, sizeof(d->uuid), "%s", uuid);
        d->memory_limit = memory_limit;
        d->sm_limit_percent = sm_limit;
        d->compute_policy = policy;
        d->state = VGPU_DEVICE_ACTIVE;
        /* Publish the record only once it is complete. */
        __atomic_store_n(&s->r->header.device_count, n + 1, __ATOMIC_RELEASE);
        i = (int)n;
    }
    unlock_region(s);
    return i;
}

/*
 * Slot i's owner holds an OFD write lock on byte VGPU_REGION_SIZE + i (past
 * the end of the file) for as long as it lives; the kernel drops it when the
 * process dies, SIGKILL included, whatever pid namespace it was in.
 */
/* fcntl(cmd) of lock *type on slot i's byte; *type receives F_OFD_GETLK's answer. */
static int slot_lock(struct vgpu_region_map *s, int i, int cmd, short *type)
{
    struct flock fl = {.l_type = *type, .l_whence = SEEK_SET,
                       .l_start = VGPU_REGION_SIZE + (off_t)i, .l_len = 1};
    int rc = fcntl(s->fd, cmd, &fl);

    *type = fl.l_type;
    return rc;
}

/*
 * Whether slot i's owner lives. It holds the slot's lock, unless /proc in our
 * pid namespace says it is gone (a fork child that never claimed a slot
 * shares its dead parent's open file description, and with it the lock).
 * Our own slot and the one we are reclaiming are ours: our own lock does not
 * show through F_OFD_GETLK.
 */
static bool slot_owner_alive(struct vgpu_region_map *s, int i)
{
    struct vgpu_region_slot *sl = &s->r->slots[i];
    short type = F_WRLCK;

    if (i == s->slot || i == __atomic_load_n(&s->adopted, __ATOMIC_RELAXED))
        return true;
    if (s->self != NULL &&
        !vgpu_proc_owner_alive(s->self, (pid_t)sl->pid, sl->pidns, sl->start_time))
        return false;
    /* Locks that cannot be queried: presume alive (never steal from the living). */
    if (slot_lock(s, i, F_OFD_GETLK, &type) != 0)
        return true;
    return type != F_UNLCK;
}

/*
 * Rolls back the change a dead holder of rec's charge lock left half done:
 * used_bytes and the named slot's charged_bytes get their values from before
 * it. Only lock holders write them, so the record is exact. Lock held.
 */
static void undo_change(struct vgpu_region_map *s, int rec)
{
    struct vgpu_region_device *d = &s->r->devices[rec];
    uint32_t u = __atomic_load_n(&d->undo_slot, __ATOMIC_ACQUIRE);
    uint32_t slot = u & VGPU_UNDO_SLOT_MASK;
    uint32_t sh = (u >> VGPU_UNDO_SHARED_SHIFT) & VGPU_UNDO_SHARED_MASK;

    if (u == 0)
        return;
    if (slot >= 1 && slot <= VGPU_REGION_MAX_SLOTS) {
        __atomic_store_n(&d->used_bytes, d->undo_used_bytes, __ATOMIC_RELAXED);
        __atomic_store_n(&s->r->slots[slot - 1].devices[rec].charged_bytes, d->undo_charged_bytes,
                         __ATOMIC_RELAXED);
        /* The shared record the change made or freed gets its state from before it. */
        if (sh >= 1 && sh <= VGPU_REGION_MAX_SHARED) {
            struct vgpu_region_shared *r = &s->r->shared[sh - 1];

            if (u & VGPU_UNDO_SHARED_WAS_LIVE) {
                __atomic_fetch_or(&r->holders[(slot - 1) / 64], 1ULL << ((slot - 1) % 64),
                                  __ATOMIC_RELAXED);
                __atomic_store_n(&r->state, VGPU_SHARED_LIVE, __ATOMIC_RELEASE);
            } else {
                __atomic_store_n(&r->state, VGPU_SHARED_FREE, __ATOMIC_RELEASE);
                for (int w = 0; w < VGPU_REGION_MAX_SLOTS / 64; w++)
                    __atomic_store_n(&r->holders[w], 0, __ATOMIC_RELAXED);
            }
        }
        VGPU_INFO("%s: undid a change of slot %u interrupted by its death", s->path, slot - 1);
    }
    __atomic_store_n(&d->undo_slot, 0, __ATOMIC_RELEASE);
}

/* Spins this many times between looks at the holder's liveness. */
#define CHARGE_SPINS 200

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/*
 * Takes rec's charge lock for slot me (an index). The holder is almost
 * always inside a handful of stores; a holder that died there (the kernel
 * dropped its slot lock) is replaced by compare-and-swap and its change
 * undone. A value no slot can hold (written by someone else) counts as dead.
 */
static void charge_lock(struct vgpu_region_map *s, int rec, int me)
{
    uint32_t *lock = &s->r->devices[rec].charge_lock;
    uint32_t want = (uint32_t)me + 1;
    unsigned spins = 0;

    for (;;) {
        uint32_t cur = 0;

        if (__atomic_compare_exchange_n(lock, &cur, want, false, __ATOMIC_ACQUIRE,
                                        __ATOMIC_RELAXED))
            return;
        if (++spins < CHARGE_SPINS) {
            cpu_relax();
            continue;
        }
        spins = 0;
        /* Our own slot: another thread of this (live) process holds it. */
        if (cur != want && (cur > VGPU_REGION_MAX_SLOTS || !slot_owner_alive(s, (int)cur - 1)) &&
            __atomic_compare_exchange_n(lock, &cur, want, false, __ATOMIC_ACQUIRE,
                                        __ATOMIC_RELAXED)) {
            undo_change(s, rec);
            return;
        }
        sched_yield();
    }
}

static void charge_unlock(struct vgpu_region_map *s, int rec)
{
    __atomic_store_n(&s->r->devices[rec].charge_lock, 0, __ATOMIC_RELEASE);
}

/*
 * Sets rec's used_bytes to used and slot i's charged_bytes to charged,
 * recoverably: the undo record is complete (release) before either moves,
 * and cleared only after both moved. Charge lock held.
 */
static void charge_set(struct vgpu_region_map *s, int rec, int i, uint64_t used, uint64_t charged)
{
    struct vgpu_region_device *d = &s->r->devices[rec];
    uint64_t *slot_charged = &s->r->slots[i].devices[rec].charged_bytes;
    uint64_t peak;

    d->undo_used_bytes = __atomic_load_n(&d->used_bytes, __ATOMIC_RELAXED);
    d->undo_charged_bytes = __atomic_load_n(slot_charged, __ATOMIC_RELAXED);
    __atomic_store_n(&d->undo_slot, (uint32_t)i + 1, __ATOMIC_RELEASE);
    /* The record must be visible before either counter moves. */
    __atomic_thread_fence(__ATOMIC_RELEASE);
    __atomic_store_n(&d->used_bytes, used, __ATOMIC_RELAXED);
    __atomic_store_n(slot_charged, charged, __ATOMIC_RELAXED);
    __atomic_store_n(&d->undo_slot, 0, __ATOMIC_RELEASE);
    peak = __atomic_load_n(&d->peak_bytes, __ATOMIC_RELAXED);
    if (used > peak)
        __atomic_store_n(&d->peak_bytes, used, __ATOMIC_RELAXED);
}

/* Whether slot i holds shared record r. */
static bool share_held(const struct vgpu_region_shared *r, int i)
{
    return (__atomic_load_n(&r->holders[i / 64], __ATOMIC_RELAXED) >> (i % 64)) & 1;
}

/* Whether a slot other than i holds shared record r. */
static bool share_other_holder(const struct vgpu_region_shared *r, int i)
{
    for (int w = 0; w < VGPU_REGION_MAX_SLOTS / 64; w++) {
        uint64_t h = __atomic_load_n(&r->holders[w], __ATOMIC_RELAXED);

        if (w == i / 64)
            h &= ~(1ULL << (i % 64));
        if (h != 0)
            return true;
    }
    return false;
}

/* Whether any slot holds shared record r. */
static bool share_any_holder(const struct vgpu_region_shared *r)
{
    for (int w = 0; w < VGPU_REGION_MAX_SLOTS / 64; w++)
        if (__atomic_load_n(&r->holders[w], __ATOMIC_RELAXED) != 0)
            return true;
    return false;
}

/*
 * Whether record r may still be held by a VMM fd it was exported as: the
 * driver keeps the memory until the fd's description closes, wherever it
 * went, and the description keeps the exporter's mark until then
 * (sharefd.h). System calls: read before the charge lock is taken.
 */
static bool share_fd_open(const struct vgpu_region_shared *r)
{
    uint64_t dev, ino, nonce;

    if (__atomic_load_n(&r->kind, __ATOMIC_RELAXED) != VGPU_SHARED_KIND_VMM_FD)
        return false;
    memcpy(&dev, r->key, sizeof(dev));
    memcpy(&ino, r->key + 8, sizeof(ino));
    memcpy(&nonce, r->key + VGPU_SHAREFD_KEY_NONCE, sizeof(nonce));
    /* A regular file's key is (st_dev, st_ino); any other's is the nonce alone. */
    return vgpu_sharefd_open(dev, ino, dev == 0 && ino == 0 ? nonce : 0) != 0;
}

/* Whether record r is live on device record rec (a value someone else wrote may not be). */
static bool share_live_on(const struct vgpu_region_shared *r, int rec)
{
    return __atomic_load_n(&r->state, __ATOMIC_ACQUIRE) == VGPU_SHARED_LIVE &&
           __atomic_load_n(&r->device, __ATOMIC_RELAXED) == (uint32_t)rec;
}

/*
 * Drops slot i as a holder of record idx, live on rec. Not the last holder,
 * or the last while an exported fd may still hold the memory (fd_open,
 * share_fd_open): one atomic store, the record stays live and charged
 * without a holder until a sweep finds the fd closed. The last: the record
 * is freed and its bytes leave used_bytes, recoverably (the undo record
 * names the record, so an undo makes it live again with slot i holding
 * it). Charge lock of rec held.
 */
static void share_drop_locked(struct vgpu_region_map *s, int rec, int i, int idx, bool fd_open)
{
    struct vgpu_region_device *d = &s->r->devices[rec];
    struct vgpu_region_shared *r = &s->r->shared[idx];
    uint64_t used, bytes;

    if (!share_held(r, i))
        return;
    /* Others hold it (they change holders only under this lock too): one store. */
    if (fd_open || share_other_holder(r, i)) {
        __atomic_fetch_and(&r->holders[i / 64], ~(1ULL << (i % 64)), __ATOMIC_RELAXED);
        return;
    }
    /* The last holder: the record goes, its bytes leave the counter, recoverably. */
    used = __atomic_load_n(&d->used_bytes, __ATOMIC_RELAXED);
    bytes = __atomic_load_n(&r->bytes, __ATOMIC_RELAXED);
    d->undo_used_bytes = used;
    d->undo_charged_bytes = __atomic_load_n(&s->r->slots[i].devices[rec].charged_bytes,
                                            __ATOMIC_RELAXED);
    __atomic_store_n(&d->undo_slot,
                     ((uint32_t)i + 1) | ((uint32_t)idx + 1) << VGPU_UNDO_SHARED_SHIFT |
                         VGPU_UNDO_SHARED_WAS_LIVE,
                     __ATOMIC_RELEASE);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    __atomic_fetch_and(&r->holders[i / 64], ~(1ULL << (i % 64)), __ATOMIC_RELAXED);
    __atomic_store_n(&r->state, VGPU_SHARED_FREE, __ATOMIC_RELEASE);
    /* Bytes someone else wrote must not take the counter below 0. */
    __atomic_store_n(&d->used_bytes, used > bytes ? used - bytes : 0, __ATOMIC_RELAXED);
    __atomic_store_n(&d->undo_slot, 0, __ATOMIC_RELEASE);
}

/* Drops slot i from every shared record it holds, on any device (slot being freed). */
static void share_drop_all(struct vgpu_region_map *s, int i)
{
    for (int idx = 0; idx < VGPU_REGION_MAX_SHARED; idx++) {
        struct vgpu_region_shared *r = &s->r->shared[idx];
        uint32_t rec = __atomic_load_n(&r->device, __ATOMIC_RELAXED);

        bool fd_open;

        if (rec >= VGPU_REGION_MAX_DEVICES || !share_held(r, i) ||
            __atomic_load_n(&r->state, __ATOMIC_ACQUIRE) != VGPU_SHARED_LIVE)
            continue;
        fd_open = share_fd_open(r);
        charge_lock(s, (int)rec, i);
        if (share_live_on(r, (int)rec))
            share_drop_locked(s, (int)rec, i, idx, fd_open);
        charge_unlock(s, (int)rec);
    }
}

/*
 * Frees the live records no slot holds whose exported fds are all closed
 * (share_fd_open): our slot me takes the record over and drops it as its
 * last holder, recoverably. Returns how many. Region lock held.
 */
static int share_sweep_locked(struct vgpu_region_map *s, int me)
{
    int n = 0;

    for (int idx = 0; idx < VGPU_REGION_MAX_SHARED && me >= 0; idx++) {
        struct vgpu_region_shared *r = &s->r->shared[idx];
        uint32_t rec = __atomic_load_n(&r->device, __ATOMIC_RELAXED);

        if (rec >= VGPU_REGION_MAX_DEVICES || !share_live_on(r, (int)rec) ||
            share_any_holder(r) || share_fd_open(r))
            continue;
        charge_lock(s, (int)rec, me);
        if (share_live_on(r, (int)rec) && !share_any_holder(r)) {
            __atomic_fetch_or(&r->holders[me / 64], 1ULL << (me % 64), __ATOMIC_RELAXED);
            share_drop_locked(s, (int)rec, me, idx, false);
            n++;
        }
        charge_unlock(s, (int)rec);
    }
    return n;
}

/*
 * Returns slot i's charged bytes to the device counters and the launch
 * charges it left waiting to the compute buckets, and frees it: our own
 * slot at exit, or a dead one we adopted (we hold its slot lock, so a
 * charge lock it died holding is ours now and its change is undone).
 * Region lock held.
 */
static void free_slot(struct vgpu_region_map *s, int i, bool adopted)
{
    struct vgpu_region_slot *sl = &s->r->slots[i];
    uint32_t n = __atomic_load_n(&s->r->header.device_count, __ATOMIC_ACQUIRE);

    /* A change it died in is undone first: its charge locks are ours now. */
    for (uint32_t d = 0; adopted && d < VGPU_REGION_MAX_DEVICES; d++) {
        if (__atomic_load_n(&s->r->devices[d].charge_lock, __ATOMIC_ACQUIRE) == (uint32_t)i + 1) {
            undo_change(s, (int)d);
            charge_unlock(s, (int)d);
        }
    }
    /* The shared allocations it held: the last holder's bytes leave the counter. */
    share_drop_all(s, i);
    for (uint32_t d = 0; d < n && d < VGPU_REGION_MAX_DEVICES; d++) {
        uint32_t pending = __atomic_load_n(&sl->devices[d].pending_charge_us, __ATOMIC_RELAXED);
        uint64_t charged, used;

        /* Launches it was charged for and will never make: the claim gets them back. */
        if (pending != 0)
            vgpu_bucket_credit(&s->r->devices[d], (uint64_t)pending * 1000);

        if (__atomic_load_n(&sl->devices[d].charged_bytes, __ATOMIC_RELAXED) == 0)
            continue;
        charge_lock(s, (int)d, i);
        charged = sl->devices[d].charged_bytes;
        used = __atomic_load_n(&s->r->devices[d].used_bytes, __ATOMIC_RELAXED);
        if (charged != 0)
            charge_set(s, (int)d, i, used > charged ? used - charged : 0, 0);
        charge_unlock(s, (int)d);
    }
    memset(sl, 0, sizeof(*sl));
}

/*
 * Frees the slots of dead owners. A slot whose lock we can take has no live
 * owner; holding it while we return its bytes keeps others from taking us
 * for the dead owner.
 */
static int reclaim_locked(struct vgpu_region_map *s)
{
    int n = 0;

    for (int i = 0; i < VGPU_REGION_MAX_SLOTS; i++) {
        struct vgpu_region_slot *sl = &s->r->slots[i];
        short type = F_WRLCK;

        if (i == s->slot || __atomic_load_n(&sl->state, __ATOMIC_ACQUIRE) != VGPU_SLOT_ACTIVE)
            continue;
        if (slot_lock(s, i, F_OFD_SETLK, &type) != 0)
            continue;
        __atomic_store_n(&s->adopted, i, __ATOMIC_RELAXED);
        VGPU_INFO("%s: reclaiming slot %d of dead pid %u (start time %llu)", s->path, i, sl->pid,
                  (unsigned long long)sl->start_time);
        free_slot(s, i, true);
        __atomic_store_n(&s->adopted, -1, __ATOMIC_RELAXED);
        type = F_UNLCK;
        slot_lock(s, i, F_OFD_SETLK, &type);
        n++;
    }
    return n;
}

bool vgpu_region_slot_dead(struct vgpu_region_map *s, int i)
{
    return i >= 0 && i < VGPU_REGION_MAX_SLOTS &&
           __atomic_load_n(&s->r->slots[i].state, __ATOMIC_ACQUIRE) == VGPU_SLOT_ACTIVE &&
           !slot_owner_alive(s, i);
}

int vgpu_region_reclaim(struct vgpu_region_map *s, const struct vgpu_procinfo *self)
{
    int n;

    if (self != NULL)
        s->self = self;
    if (lock_region(s) != 0)
        return 0;
    n = reclaim_locked(s);
    n += share_sweep_locked(s, s->slot);
    unlock_region(s);
    return n;
}

int vgpu_region_claim_slot(struct vgpu_region_map *s, const struct vgpu_procinfo *self)
{
    int found = -1;

    if (s->slot >= 0)
        return 0;
    s->self = self;
    if (lock_region(s) != 0)
        return -1;
    reclaim_locked(s);
    for (int i = 0; i < VGPU_REGION_MAX_SLOTS && found < 0; i++) {
        struct vgpu_region_slot *sl = &s->r->slots[i];

        short type = F_WRLCK;

        /* A free slot whose lock is still held belongs to someone releasing it: skip it. */
        if (sl->state != VGPU_SLOT_FREE || slot_lock(s, i, F_OFD_SETLK, &type) != 0)
            continue;
        memset(sl, 0, sizeof(*sl));
        sl->pid = (uint32_t)self->pid;
        sl->host_pid = self->host_pid;
        sl->start_time = self->start_time;
        sl->pidns = self->pidns;
        sl->heartbeat_ns = realtime_ns();
        __atomic_store_n(&sl->state, VGPU_SLOT_ACTIVE, __ATOMIC_RELEASE);
        found = i;
    }
    if (found >= 0) {
        /* Slots are claimed lowest first, so the monitor reads only up to here. */
        uint32_t in_use = __atomic_load_n(&s->r->header.slots_in_use, __ATOMIC_RELAXED);

        /* An out-of-range value (written by someone else) must not hide slots. */
        if (in_use > VGPU_REGION_MAX_SLOTS)
            __atomic_store_n(&s->r->header.slots_in_use, VGPU_REGION_MAX_SLOTS, __ATOMIC_RELEASE);
        else if (in_use < (uint32_t)found + 1)
            __atomic_store_n(&s->r->header.slots_in_use, (uint32_t)found + 1, __ATOMIC_RELEASE);
    }
    unlock_region(s);
    if (found < 0)
        return -1;
    s->slot = found;
    return 0;
}

int vgpu_region_reserve(struct vgpu_region_map *s, int rec, uint64_t size, uint64_t limit)
{
    struct vgpu_region_device *d = &s->r->devices[rec];
    uint64_t used, charged;
    int rc = -1;

    if (s->slot < 0)
        return -1;
    charge_lock(s, rec, s->slot);
    used = __atomic_load_n(&d->used_bytes, __ATOMIC_RELAXED);
    charged = s->r->slots[s->slot].devices[rec].charged_bytes;
    if (vgpu_reserve_fits(used, size, limit) && charged <= UINT64_MAX - size) {
        charge_set(s, rec, s->slot, used + size, charged + size);
        rc = 0;
    }
    charge_unlock(s, rec);
    return rc;
}

void vgpu_region_unreserve(struct vgpu_region_map *s, int rec, uint64_t size)
{
    struct vgpu_region_device *d = &s->r->devices[rec];
    uint64_t used, charged;

    if (s->slot < 0)
        return;
    charge_lock(s, rec, s->slot);
    used = __atomic_load_n(&d->used_bytes, __ATOMIC_RELAXED);
    charged = s->r->slots[s->slot].devices[rec].charged_bytes;
    /* Never more than we charged: a counter someone else lowered must not wrap. */
    if (size > charged)
        size = charged;
    charge_set(s, rec, s->slot, used > size ? used - size : 0, charged - size);
    charge_unlock(s, rec);
}

uint64_t vgpu_region_slot_charged(const struct vgpu_region_map *s, int rec)
{
    return s->slot < 0 ? 0
                       : __atomic_load_n(&s->r->slots[s->slot].devices[rec].charged_bytes,
                                         __ATOMIC_RELAXED);
}

int vgpu_region_verify(struct vgpu_region_map *s, char err[VGPU_ERRMSG_MAX])
{
    struct vgpu_region_header *h = &s->r->header;
    struct stat st;
    const char *bad;

    if (stat(s->path, &st) != 0) {
        snprintf(err, VGPU_ERRMSG_MAX, "%s: gone: %s", s->path, strerror(errno));
        return -1;
    }
    if ((uint64_t)st.st_dev != s->dev || (uint64_t)st.st_ino != s->ino) {
        snprintf(err, VGPU_ERRMSG_MAX, "%s: replaced by another file", s->path);
        return -1;
    }
    if (st.st_size != VGPU_REGION_SIZE) {
        snprintf(err, VGPU_ERRMSG_MAX, "%s: size changed to %lld", s->path, (long long)st.st_size);
        return -1;
    }
    bad = vgpu_region_check_header(h);
    if (bad == NULL && (__atomic_load_n(&h->init_state, __ATOMIC_ACQUIRE) != VGPU_REGION_READY ||
                        __atomic_load_n(&h->generation, __ATOMIC_RELAXED) != s->generation ||
                        __atomic_load_n(&h->init_time_ns, __ATOMIC_RELAXED) != s->init_ns))
        bad = "re-initialised under us";
    if (bad != NULL) {
        snprintf(err, VGPU_ERRMSG_MAX, "%s: %s", s->path, bad);
        return -1;
    }
    return 0;
}

void vgpu_region_slot_mark_fail_closed(struct vgpu_region_map *s)
{
    if (s->slot >= 0)
        __atomic_fetch_or(&s->r->slots[s->slot].flags, VGPU_SLOT_FLAG_FAIL_CLOSED,
                          __ATOMIC_RELEASE);
}

void vgpu_region_count_refused(struct vgpu_region_map *s, int rec)
{
    if (rec >= 0 && rec < VGPU_REGION_MAX_DEVICES)
        __atomic_fetch_add(&s->r->devices[rec].refused_processes, 1, __ATOMIC_RELAXED);
}

void vgpu_region_note_refusal(struct vgpu_region_map *s, int rec, uint64_t size)
{
    struct vgpu_region_device *d;

    if (s == NULL || s->r == NULL)
        return;
    d = &s->r->devices[rec];
    /* The three fields are read together only for display: no seqlock, count last. */
    __atomic_store_n(&d->last_refused_bytes, size, __ATOMIC_RELAXED);
    __atomic_store_n(&d->last_refused_ns, realtime_ns(), __ATOMIC_RELAXED);
    __atomic_fetch_add(&d->refusals, 1, __ATOMIC_RELEASE);
}

uint64_t vgpu_region_used(const struct vgpu_region_map *s, int rec)
{
    return __atomic_load_n(&s->r->devices[rec].used_bytes, __ATOMIC_ACQUIRE);
}

/* Opens a seqlock write section on our slot; returns the slot. */
static struct vgpu_region_slot *slot_begin(struct vgpu_region_map *s)
{
    struct vgpu_region_slot *sl = &s->r->slots[s->slot];

    __atomic_store_n(&sl->seq, sl->seq + 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    return sl;
}

static void slot_end(struct vgpu_region_slot *sl)
{
    __atomic_store_n(&sl->seq, sl->seq + 1, __ATOMIC_RELEASE);
}

void vgpu_region_slot_add(struct vgpu_region_map *s, int rec, int64_t delta)
{
    struct vgpu_region_slot *sl;
    struct vgpu_region_slot_device *sd;

    if (s->slot < 0)
        return;
    sl = slot_begin(s);
    sd = &sl->devices[rec];
    if (delta >= 0)
        sd->used_bytes += (uint64_t)delta;
    else
        sd->used_bytes -= sd->used_bytes > (uint64_t)-delta ? (uint64_t)-delta : sd->used_bytes;
    if (sd->used_bytes > sd->peak_bytes)
        sd->peak_bytes = sd->used_bytes;
    slot_end(sl);
}

void vgpu_region_slot_set_compute(struct vgpu_region_map *s, int rec, uint64_t launches,
                               uint64_t throttled_ns)
{
    struct vgpu_region_slot *sl;

    if (s->slot < 0)
        return;
    sl = &s->r->slots[s->slot];
    if (sl->devices[rec].kernel_launches == launches && sl->devices[rec].throttled_ns == throttled_ns)
        return;
    sl = slot_begin(s);
    __atomic_store_n(&sl->devices[rec].kernel_launches, launches, __ATOMIC_RELAXED);
    __atomic_store_n(&sl->devices[rec].throttled_ns, throttled_ns, __ATOMIC_RELAXED);
    slot_end(sl);
}

void vgpu_region_slot_set_host_pid(struct vgpu_region_map *s, uint32_t host_pid)
{
    struct vgpu_region_slot *sl;

    if (s->slot < 0)
        return;
    sl = slot_begin(s);
    __atomic_store_n(&sl->host_pid, host_pid, __ATOMIC_RELAXED);
    slot_end(sl);
}

uint64_t vgpu_region_slot_used(const struct vgpu_region_map *s, int rec)
{
    return s->slot < 0 ? 0 : s->r->slots[s->slot].devices[rec].used_bytes;
}

void vgpu_region_slot_set_overhead(struct vgpu_region_map *s, int rec, uint64_t overhead)
{
    struct vgpu_region_slot *sl;
    uint64_t old;

    if (s->slot < 0)
        return;
    old = s->r->slots[s->slot].devices[rec].overhead_bytes;
    if (old == overhead)
        return;
    /* Overhead is already in use on the GPU: charge it without a limit check. */
    if (overhead > old && vgpu_region_reserve(s, rec, overhead - old, 0) != 0)
        return;
    if (overhead < old)
        vgpu_region_unreserve(s, rec, old - overhead);
    sl = slot_begin(s);
    sl->devices[rec].overhead_bytes = overhead;
    /* Only here, not per allocation: a clock read would double the cost of the hot path. */
    sl->heartbeat_ns = realtime_ns();
    slot_end(sl);
}

void vgpu_region_release_slot(struct vgpu_region_map *s)
{
    short type = F_UNLCK;

    if (s->slot < 0 || lock_region(s) != 0)
        return;
    free_slot(s, s->slot, false);
    slot_lock(s, s->slot, F_OFD_SETLK, &type);
    unlock_region(s);
    s->slot = -1;
}

int vgpu_region_share_export(struct vgpu_region_map *s, int rec, uint32_t kind,
                             const uint8_t key[VGPU_REGION_SHARED_KEY_LEN], uint64_t bytes)
{
    struct vgpu_region_device *d = &s->r->devices[rec];
    int me = s->slot, found = -1;

    bool any_free = false;

    if (me < 0 || bytes == 0 || lock_region(s) != 0)
        return -1;
    /* Every record taken: those that only closed fds held are freed first. */
    for (int idx = 0; idx < VGPU_REGION_MAX_SHARED && !any_free; idx++)
        any_free = __atomic_load_n(&s->r->shared[idx].state, __ATOMIC_ACQUIRE) == VGPU_SHARED_FREE;
    if (!any_free)
        share_sweep_locked(s, me);
    charge_lock(s, rec, me);
    for (int idx = 0; idx < VGPU_REGION_MAX_SHARED; idx++) {
        struct vgpu_region_shared *r = &s->r->shared[idx];

        if (share_live_on(r, rec) && __atomic_load_n(&r->kind, __ATOMIC_RELAXED) == kind &&
            memcmp(r->key, key, VGPU_REGION_SHARED_KEY_LEN) == 0) {
            found = -1; /* the key is taken (stale or forged): keep the charge where it is */
            goto out;
        }
    }
    for (int idx = 0; idx < VGPU_REGION_MAX_SHARED && found < 0; idx++) {
        struct vgpu_region_shared *r = &s->r->shared[idx];
        uint64_t charged = s->r->slots[me].devices[rec].charged_bytes;
        bool named = false;

        if (__atomic_load_n(&r->state, __ATOMIC_ACQUIRE) != VGPU_SHARED_FREE)
            continue;
        /* A free record an unfinished drop still names may come back to life: skip it. */
        for (int o = 0; o < VGPU_REGION_MAX_DEVICES && !named; o++) {
            uint32_t u = __atomic_load_n(&s->r->devices[o].undo_slot, __ATOMIC_ACQUIRE);
            named = ((u >> VGPU_UNDO_SHARED_SHIFT) & VGPU_UNDO_SHARED_MASK) == (uint32_t)idx + 1;
        }
        if (named)
            continue;
        if (charged < bytes)
            break;
        /* Free records are written only here, under the region lock. */
        memcpy(r->key, key, VGPU_REGION_SHARED_KEY_LEN);
        r->bytes = bytes;
        r->device = (uint32_t)rec;
        r->kind = kind;
        for (int w = 0; w < VGPU_REGION_MAX_SLOTS / 64; w++)
            __atomic_store_n(&r->holders[w], 0, __ATOMIC_RELAXED);
        __atomic_store_n(&r->holders[me / 64], 1ULL << (me % 64), __ATOMIC_RELAXED);
        d->undo_used_bytes = __atomic_load_n(&d->used_bytes, __ATOMIC_RELAXED);
        d->undo_charged_bytes = charged;
        __atomic_store_n(&d->undo_slot,
                         ((uint32_t)me + 1) | ((uint32_t)idx + 1) << VGPU_UNDO_SHARED_SHIFT,
                         __ATOMIC_RELEASE);
        __atomic_thread_fence(__ATOMIC_RELEASE);
        __atomic_store_n(&r->state, VGPU_SHARED_LIVE, __ATOMIC_RELEASE);
        __atomic_store_n(&s->r->slots[me].devices[rec].charged_bytes, charged - bytes,
                         __ATOMIC_RELAXED);
        __atomic_store_n(&d->undo_slot, 0, __ATOMIC_RELEASE);
        found = idx;
    }
out:
    charge_unlock(s, rec);
    unlock_region(s);
    return found;
}

int vgpu_region_share_hold(struct vgpu_region_map *s, int rec, uint32_t kind,
                           const uint8_t key[VGPU_REGION_SHARED_KEY_LEN], uint64_t *bytes)
{
    int me = s->slot, found = -1;

    if (me < 0)
        return -1;
    charge_lock(s, rec, me);
    for (int idx = 0; idx < VGPU_REGION_MAX_SHARED && found < 0; idx++) {
        struct vgpu_region_shared *r = &s->r->shared[idx];

        if (!share_live_on(r, rec) || __atomic_load_n(&r->kind, __ATOMIC_RELAXED) != kind ||
            memcmp(r->key, key, VGPU_REGION_SHARED_KEY_LEN) != 0)
            continue;
        __atomic_fetch_or(&r->holders[me / 64], 1ULL << (me % 64), __ATOMIC_RELAXED);
        *bytes = __atomic_load_n(&r->bytes, __ATOMIC_RELAXED);
        found = idx;
    }
    charge_unlock(s, rec);
    return found;
}

uint64_t vgpu_region_share_bytes(const struct vgpu_region_map *s, int rec, uint32_t kind,
                                 const uint8_t key[VGPU_REGION_SHARED_KEY_LEN])
{
    for (int idx = 0; idx < VGPU_REGION_MAX_SHARED; idx++) {
        const struct vgpu_region_shared *r = &s->r->shared[idx];

        if (share_live_on(r, rec) && __atomic_load_n(&r->kind, __ATOMIC_RELAXED) == kind &&
            memcmp(r->key, key, VGPU_REGION_SHARED_KEY_LEN) == 0)
            return __atomic_load_n(&r->bytes, __ATOMIC_RELAXED);
    }
    return 0;
}

void vgpu_region_share_drop(struct vgpu_region_map *s, int rec, int idx)
{
    bool fd_open;

    if (s->slot < 0 || idx < 0 || idx >= VGPU_REGION_MAX_SHARED)
        return;
    fd_open = share_fd_open(&s->r->shared[idx]);
    charge_lock(s, rec, s->slot);
    if (share_live_on(&s->r->shared[idx], rec))
        share_drop_locked(s, rec, s->slot, idx, fd_open);
    charge_unlock(s, rec);
}

uint64_t vgpu_region_slot_shared(const struct vgpu_region_map *s, int rec)
{
    uint64_t sum = 0;

    if (s->slot < 0)
        return 0;
    for (int idx = 0; idx < VGPU_REGION_MAX_SHARED; idx++) {
        const struct vgpu_region_shared *r = &s->r->shared[idx];
        uint64_t b = __atomic_load_n(&r->bytes, __ATOMIC_RELAXED);

        if (share_live_on(r, rec) && share_held(r, s->slot))
            sum = b > UINT64_MAX - sum ? UINT64_MAX : sum + b;
    }
    return sum;
}
