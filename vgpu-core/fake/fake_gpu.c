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

/* fake_gpu.c - see fake_gpu.h. */
#include "fake_gpu.h"

#include <math.h>
#include <stddef.h>

#define BUSY_MASK ((1ULL << GPU_BUSY_BITS) - 1)

_Static_assert(GPU_SAMPLE_NS <= BUSY_MASK, "a period's busy time fits its ring entry");

static gpu_kernel *kernel(gpu_sched *s, int owner, uint64_t ticket)
{
    return &s->q[owner].k[ticket % GPU_QUEUE];
}

static int running_count(const gpu_sched *s)
{
    int n = 0;

    for (int i = 0; i < GPU_CONCURRENT; i++)
        n += s->running[i] != 0;
    return n;
}

/* Drops the finished kernels at the head of owner's queue. */
static void pop_done(gpu_sched *s, int owner)
{
    gpu_queue *q = &s->q[owner];

    while (q->head < q->tail && kernel(s, owner, q->head)->state == GPU_K_DONE)
        q->head++;
}

/*
 * The kernel of owner the engine can start next (small_only: a small grid,
 * to run beside running ones): the oldest waiting kernel within
 * GPU_LOOKAHEAD of the head whose stream has nothing running or waiting
 * before it. Returns its ticket, or -1.
 */
static int64_t startable(gpu_sched *s, int owner, bool small_only)
{
    gpu_queue *q = &s->q[owner];
    uint32_t blocked[GPU_LOOKAHEAD];
    int nblocked = 0;

    for (uint64_t t = q->head; t < q->tail && t < q->head + GPU_LOOKAHEAD; t++) {
        const gpu_kernel *k = kernel(s, owner, t);
        bool free = true;

        if (k->state == GPU_K_DONE)
            continue;
        for (int i = 0; i < nblocked && free; i++)
            free = blocked[i] != k->stream;
        if (free && k->state == GPU_K_WAITING && (!small_only || k->small))
            return (int64_t)t;
        if (free)
            blocked[nblocked++] = k->stream;
    }
    return -1;
}

/* An MPS client's share in per mille; 1000 for anything else (the file is writable by all). */
static uint32_t share_of(const gpu_sched *s, int owner)
{
    uint32_t pm = s->q[owner].share_pm;

    return s->q[owner].group != 0 && pm >= 1 && pm <= 1000 ? pm : 1000;
}

/* How long kernel k of owner runs: a full grid of an MPS client on its share of the SMs. */
static uint64_t run_len(const gpu_sched *s, int owner, const gpu_kernel *k)
{
    uint64_t len = k->len < GPU_KERNEL_MAX_NS ? k->len : GPU_KERNEL_MAX_NS;
    uint32_t pm = share_of(s, owner);

    if (s->q[owner].group == 0 || k->small || pm == 1000)
        return len;
    len = len > GPU_KERNEL_MAX_NS / 1000 ? GPU_KERNEL_MAX_NS : len * 1000 / pm;
    return len < GPU_KERNEL_MAX_NS ? len : GPU_KERNEL_MAX_NS;
}

static void start(gpu_sched *s, int owner, uint64_t ticket, const gpu_sched_hooks *h)
{
    gpu_kernel *k = kernel(s, owner, ticket);

    for (int i = 0; i < GPU_CONCURRENT; i++) {
        if (s->running[i] == 0) {
            s->running[i] = ticket + 1;
            s->run_owner[i] = (uint8_t)owner;
            break;
        }
    }
    k->end = s->now + run_len(s, owner, k);
    k->state = GPU_K_RUNNING;
    s->small = k->small;
    s->q[owner].waiting--;
    s->waiting--;
    h->started(h->ctx, owner, s->now, k->end);
}

/* Whether owner j runs in the slice of owner o: o itself, or a client of o's MPS daemon. */
static bool in_slice(const gpu_sched *s, int o, int j)
{
    return j == o || (s->q[o].group != 0 && s->q[j].group == s->q[o].group);
}

/* Kernels waiting in o's slice: o's own, or every client's of its MPS daemon. */
static uint64_t slice_waiting(const gpu_sched *s, int o)
{
    uint64_t n = 0;

    if (s->q[o].group == 0)
        return s->q[o].waiting;
    for (int j = 0; j < GPU_OWNERS; j++)
        n += in_slice(s, o, j) ? s->q[j].waiting : 0;
    return n;
}

/*
 * The next kernel of an MPS client in o's slice (see "MPS" in fake_gpu.h),
 * round robin from the client after *who (o: the last one started); its
 * owner in *who. Returns its ticket, or -1.
 */
static int64_t mps_startable(gpu_sched *s, int o, int *who)
{
    uint32_t held = 0;
    bool holds[GPU_OWNERS] = {false}, full[GPU_OWNERS] = {false};

    for (int i = 0; i < GPU_CONCURRENT; i++) {
        int r = s->run_owner[i];
        const gpu_kernel *k;

        if (s->running[i] == 0)
            continue;
        k = kernel(s, r, s->running[i] - 1);
        full[r] = full[r] || !k->small;
        if (!holds[r])
            held += share_of(s, r);
        holds[r] = true;
    }
    for (int step = 1; step <= GPU_OWNERS; step++) {
        int j = (*who + step) % GPU_OWNERS;
        int64_t t;

        if (!in_slice(s, o, j) || s->q[j].waiting == 0 || full[j])
            continue;
        if (!holds[j] && held != 0 && held + share_of(s, j) > 1000)
            continue;
        t = startable(s, j, holds[j]);
        if (t >= 0) {
            *who = j;
            return t;
        }
    }
    return -1;
}

/* Starts what the engine picks at s->now (see fake_gpu.h). */
static void dispatch(gpu_sched *s, const gpu_sched_hooks *h)
{
    for (;;) {
        int o = (int)s->owner - 1, n = running_count(s), who = o;
        int64_t t = -1;
        bool others = s->waiting > (o >= 0 ? slice_waiting(s, o) : 0);

        if (o >= 0 && n < GPU_CONCURRENT && (s->now < s->slice_end || !others)) {
            if (s->q[o].group == 0 && (n == 0 || s->small)) {
                t = startable(s, o, n > 0);
            } else if (s->q[o].group != 0) {
                t = mps_startable(s, o, &who);
            }
        }
        if (t >= 0) {
            /* The daemon's slice stays; its clients take turns at the free SMs. */
            s->owner = (uint32_t)who + 1;
            start(s, who, (uint64_t)t, h);
            continue;
        }
        if (n > 0 || s->waiting == 0)
            return;
        /* Idle: the next process with work gets a slice, round robin from the owner. */
        for (int j = 1; j <= GPU_OWNERS && t < 0; j++) {
            o = ((int)s->owner - 1 + j + GPU_OWNERS) % GPU_OWNERS;
            if (s->q[o].waiting > 0)
                t = startable(s, o, false);
        }
        if (t < 0)
            return;
        s->owner = (uint32_t)o + 1;
        s->slice_end = s->now + GPU_SLICE_NS;
        start(s, o, (uint64_t)t, h);
    }
}

void gpu_sched_set_client(gpu_sched *s, int owner, uint64_t group, uint32_t share_pm)
{
    s->q[owner].group = group;
    s->q[owner].share_pm = share_pm >= 1 && share_pm <= 1000 ? share_pm : 1000;
}

uint64_t gpu_sched_next_end(const gpu_sched *s)
{
    uint64_t next = UINT64_MAX;

    for (int i = 0; i < GPU_CONCURRENT; i++) {
        if (s->running[i] != 0) {
            uint64_t end = s->q[s->run_owner[i]].k[(s->running[i] - 1) % GPU_QUEUE].end;

            next = end < next ? end : next;
        }
    }
    return next;
}

void gpu_sched_advance(gpu_sched *s, uint64_t now, const gpu_sched_hooks *h)
{
    uint64_t next;

    /* What a dropped process left idle goes on at once. */
    dispatch(s, h);
    while ((next = gpu_sched_next_end(s)) <= now) {
        if (next > s->now)
            s->now = next;
        for (int i = 0; i < GPU_CONCURRENT; i++) {
            int o = s->run_owner[i];
            gpu_kernel *k;

            if (s->running[i] == 0)
                continue;
            k = kernel(s, o, s->running[i] - 1);
            if (k->end > s->now)
                continue;
            k->state = GPU_K_DONE;
            s->running[i] = 0;
            if (h->finished != NULL)
                h->finished(h->ctx, o, k->stream);
            pop_done(s, o);
        }
        dispatch(s, h);
    }
    if (now > s->now)
        s->now = now;
}

int64_t gpu_sched_submit(gpu_sched *s, int owner, uint32_t stream, bool small, uint64_t len,
                         uint64_t now, const gpu_sched_hooks *h)
{
    gpu_queue *q = &s->q[owner];
    uint64_t ticket;
    gpu_kernel *k;

    gpu_sched_advance(s, now, h);
    if (q->tail - q->head >= GPU_QUEUE)
        return -1;
    ticket = q->tail;
    k = kernel(s, owner, ticket);
    *k = (gpu_kernel){.len = len < GPU_KERNEL_MAX_NS ? len : GPU_KERNEL_MAX_NS, .stream = stream,
                      .state = GPU_K_WAITING, .small = small};
    q->tail = ticket + 1;
    q->waiting++;
    s->waiting++;
    dispatch(s, h);
    return (int64_t)ticket;
}

uint64_t gpu_sched_wait(const gpu_sched *s, int owner, uint64_t ticket, int64_t what)
{
    const gpu_queue *q = &s->q[owner];
    uint64_t at = s->now, earliest = UINT64_MAX;

    if (what == GPU_WAIT_OLDEST)
        ticket = q->head;
    if (ticket < q->head || ticket >= q->tail)
        return 0;
    for (uint64_t t = q->head; t <= ticket; t++) {
        const gpu_kernel *k = &q->k[t % GPU_QUEUE];
        uint64_t end = k->state == GPU_K_RUNNING ? k->end : s->now + k->len;

        if (k->state == GPU_K_DONE)
            continue;
        /* The stream's kernels run one after another: the rest of them at the least. */
        if (what >= 0 && k->stream == (uint32_t)what)
            at = k->state == GPU_K_RUNNING ? k->end : at + k->len;
        earliest = end < earliest ? end : earliest;
    }
    if (what >= 0)
        return q->k[ticket % GPU_QUEUE].state == GPU_K_DONE ? 0 : at;
    if (what == GPU_WAIT_OLDEST)
        return earliest;
    return earliest == UINT64_MAX ? 0 : earliest;
}

void gpu_sched_drop(gpu_sched *s, int owner)
{
    gpu_queue *q = &s->q[owner];

    for (int i = 0; i < GPU_CONCURRENT; i++) {
        if (s->running[i] != 0 && s->run_owner[i] == owner)
            s->running[i] = 0;
    }
    s->waiting -= q->waiting < s->waiting ? q->waiting : s->waiting;
    q->waiting = 0;
    q->head = q->tail;
}

bool gpu_sched_sane(const gpu_sched *s)
{
    const gpu_queue *q;

    if (s->owner > GPU_OWNERS)
        return false;
    for (int j = 0; j < GPU_OWNERS; j++) {
        q = &s->q[j];
        if (q->tail < q->head || q->tail - q->head > GPU_QUEUE || q->waiting > GPU_QUEUE)
            return false;
    }
    for (int i = 0; i < GPU_CONCURRENT; i++) {
        uint64_t t = s->running[i] - 1;

        if (s->running[i] == 0)
            continue;
        if (s->owner == 0 || s->run_owner[i] >= GPU_OWNERS ||
            !in_slice(s, (int)s->owner - 1, s->run_owner[i]))
            return false;
        q = &s->q[s->run_owner[i]];
        if (t < q->head || t >= q->tail || q->k[t % GPU_QUEUE].state != GPU_K_RUNNING ||
            q->k[t % GPU_QUEUE].end > s->now + GPU_KERNEL_MAX_NS)
            return false;
    }
    return s->waiting <= (uint64_t)GPU_OWNERS * GPU_QUEUE;
}

void gpu_sched_repair(gpu_sched *s)
{
    int o, n = 0;

    if (s->owner > GPU_OWNERS)
        s->owner = 0;
    o = (int)s->owner - 1;

    s->waiting = 0;
    for (int i = 0; i < GPU_CONCURRENT; i++)
        s->running[i] = 0;
    for (int j = 0; j < GPU_OWNERS; j++) {
        gpu_queue *q = &s->q[j];

        if (q->tail < q->head || q->tail - q->head > GPU_QUEUE)
            q->head = q->tail;
        q->waiting = 0;
        for (uint64_t t = q->head; t < q->tail; t++) {
            gpu_kernel *k = kernel(s, j, t);

            if (k->len > GPU_KERNEL_MAX_NS)
                k->len = GPU_KERNEL_MAX_NS;
            if (k->state == GPU_K_RUNNING && k->end > s->now + run_len(s, j, k))
                k->end = s->now + run_len(s, j, k);
            if (k->state == GPU_K_RUNNING && o >= 0 && in_slice(s, o, j) && n < GPU_CONCURRENT) {
                s->run_owner[n] = (uint8_t)j;
                s->running[n++] = t + 1;
            } else if (k->state == GPU_K_RUNNING) {
                k->state = GPU_K_DONE; /* only the slice's kernels can be running */
            }
            else if (k->state != GPU_K_DONE)
                k->state = GPU_K_WAITING;
            q->waiting += k->state == GPU_K_WAITING;
        }
        pop_done(s, j);
        s->waiting += q->waiting;
    }
}

/* Adds ns to period p's ring entry (the entry of an older period is replaced). */
static void ring_add(gpu_busy *b, uint64_t p, uint64_t ns)
{
    _Atomic uint64_t *r = &b->ring[p % GPU_PERIODS];
    uint64_t cur = atomic_load_explicit(r, memory_order_relaxed);
    uint64_t busy = (cur >> GPU_BUSY_BITS) == p ? (cur & BUSY_MASK) + ns : ns;

    if (busy > GPU_SAMPLE_NS)
        busy = GPU_SAMPLE_NS;
    atomic_store_explicit(r, (p << GPU_BUSY_BITS) | busy, memory_order_relaxed);
}

void gpu_busy_add(gpu_busy *b, uint64_t start, uint64_t end)
{
    uint64_t until = atomic_load_explicit(&b->until, memory_order_relaxed);

    if (start < until)
        start = until; /* the overlap is already counted */
    if (end <= start)
        return;
    atomic_store_explicit(&b->until, end, memory_order_relaxed);
    atomic_fetch_add_explicit(&b->total, end - start, memory_order_relaxed);
    while (start < end) {
        uint64_t p = start / GPU_SAMPLE_NS, pend = (p + 1) * GPU_SAMPLE_NS;
        uint64_t stop = end < pend ? end : pend;

        ring_add(b, p, stop - start);
        start = stop;
    }
}

void gpu_busy_reset(gpu_busy *b)
{
    atomic_store_explicit(&b->until, 0, memory_order_relaxed);
    atomic_store_explicit(&b->total, 0, memory_order_relaxed);
    for (int i = 0; i < GPU_PERIODS; i++)
        atomic_store_explicit(&b->ring[i], 0, memory_order_relaxed);
}

/* Busy ns recorded for period p (0 when the ring no longer or not yet holds it). */
static uint64_t period_busy(const gpu_busy *b, uint64_t p)
{
    uint64_t v = atomic_load_explicit(&b->ring[p % GPU_PERIODS], memory_order_relaxed);

    return (v >> GPU_BUSY_BITS) == p ? v & BUSY_MASK : 0;
}

uint64_t gpu_busy_between(const gpu_busy *b, uint64_t from, uint64_t to)
{
    double sum = 0;

    for (uint64_t p = from / GPU_SAMPLE_NS; p * GPU_SAMPLE_NS < to; p++) {
        uint64_t ps = p * GPU_SAMPLE_NS, pe = ps + GPU_SAMPLE_NS;
        uint64_t a = from > ps ? from : ps, z = to < pe ? to : pe;

        sum += (double)period_busy(b, p) * (double)(z - a) / (double)GPU_SAMPLE_NS;
    }
    return (uint64_t)(sum + 0.5);
}

static uint64_t mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

unsigned gpu_sensor_percent(const gpu_busy *b, uint64_t now, uint64_t seed,
                            uint64_t *window_end)
{
    uint64_t k = now / GPU_SAMPLE_NS, busy = 0;
    double pct, dither;

    if (window_end != NULL)
        *window_end = k * GPU_SAMPLE_NS;
    for (uint64_t p = k >= GPU_WINDOW_PERIODS ? k - GPU_WINDOW_PERIODS : 0; p < k; p++)
        busy += period_busy(b, p);
    if (busy == 0)
        return 0;
    pct = 100.0 * (double)busy / (double)(GPU_WINDOW_PERIODS * GPU_SAMPLE_NS);
    /* One dither value per sample and record: whole percents, unbiased on average. */
    dither = (double)(mix(k * 0x9e3779b97f4a7c15ULL ^ mix(seed + 1)) >> 11) / 9007199254740992.0;
    pct = floor(pct + dither);
    return pct > 100 ? 100 : (unsigned)pct;
}

uint64_t gpu_rand_next(uint64_t *state)
{
    *state += 0x9e3779b97f4a7c15ULL;
    return mix(*state);
}

uint64_t gpu_rand_seed(uint64_t seed, uint64_t stream)
{
    return mix(mix(seed + 1) ^ mix(stream + 0x632be59bd9b4e019ULL));
}

double gpu_rand_unit(uint64_t *state)
{
    return (double)(gpu_rand_next(state) >> 11) / 9007199254740992.0;
}

uint64_t gpu_rand_lognormal(uint64_t *state, uint64_t mean, double sigma, uint64_t lo,
                            uint64_t hi)
{
    double u1 = gpu_rand_unit(state), u2 = gpu_rand_unit(state);
    double z = sqrt(-2.0 * log(1.0 - u1)) * cos(2.0 * M_PI * u2);
    double v = exp(log((double)mean) - sigma * sigma / 2 + sigma * z);

    if (v < (double)lo)
        return lo;
    return v > (double)hi ? hi : (uint64_t)v;
}
