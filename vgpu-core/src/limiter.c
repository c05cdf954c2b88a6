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

/* limiter.c - see limiter.h. */
#include "limiter.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <time.h>

#include "driver.h"
#include "gpus.h"
#include "log.h"
#include "nvml_query.h"
#include "region.h"

#define MAX_SAMPLES 256

/* The helper thread: one per process, started lazily, restarted in a fork child. */
static struct {
    pthread_mutex_t mu;
    bool started;
    bool stopping; /* process exit: no more NVML calls (its destructors may have run) */
} T = {.mu = PTHREAD_MUTEX_INITIALIZER};

static uint64_t mono_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t wall_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_ns(uint64_t ns)
{
    struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000ull),
                          .tv_nsec = (long)(ns % 1000000000ull)};

    nanosleep(&ts, NULL);
}

/* Our slot's per-device record on g, or NULL without a region slot. */
static struct vgpu_region_slot_device *own_slot(const struct vgpu_gpu *g)
{
    if (g->shm == NULL || g->shm->slot < 0)
        return NULL;
    return &g->shm->r->slots[g->shm->slot].devices[g->rec];
}

/*
 * What a launch is charged: the estimate the refiller set in our slot, or
 * our own where nobody else sets it (no slot; a timed GPU, whose slot only
 * shows our estimate to the refiller: a value written there changes no
 * charge).
 */
static uint64_t launch_cost(const struct vgpu_gpu *g)
{
    const struct vgpu_region_slot_device *sd = g->compute.timed ? NULL : own_slot(g);
    uint64_t c = sd != NULL ? __atomic_load_n(&sd->launch_cost_ns, __ATOMIC_RELAXED)
                            : __atomic_load_n(&g->compute.private_cost_ns, __ATOMIC_RELAXED);

    return c != 0 ? c : VGPU_CTL_DEFAULT_COST_NS;
}

/* A waiting launch's charge as its slot shows it (whole microseconds). */
static uint32_t pending_us(uint64_t cost)
{
    return cost / 1000 < UINT32_MAX ? (uint32_t)(cost / 1000) : UINT32_MAX;
}

/*
 * Launch timing, for a GPU whose NVML reports no per-process utilisation (a
 * MIG instance): one launch at a time gets a CUDA event recorded before it
 * and one after it in its stream, the helper thread reads their GPU time
 * once the second completed and folds it into the process's cost estimate.
 * The mutex covers the events: the launching thread holds it from the first
 * record to the second (the launch between), the helper while it reads
 * them, a context's destruction while it destroys them. Neither the launch
 * path nor the helper ever waits for it.
 */
enum { TIMER_IDLE, TIMER_ARMED, TIMER_RECORDED };

struct vgpu_launch_timer {
    pthread_mutex_t mu;
    bool held;          /* the driver stays loaded for the helper's calls: else no timing */
    int state;          /* TIMER_* */
    CUcontext ctx;      /* the events' context, NULL = no events */
    CUevent ev[2];      /* before and after the timed launch */
    uint64_t due_ns;    /* no new timing before then */
    struct vgpu_timed_cost cost; /* helper thread only */
};

static struct vgpu_launch_timer *timer_of(struct vgpu_gpu *g)
{
    struct vgpu_limiter_state *c = &g->compute;
    struct vgpu_launch_timer *t = __atomic_load_n(&c->timer, __ATOMIC_ACQUIRE), *fresh;

    if (t != NULL)
        return t;
    fresh = calloc(1, sizeof(*fresh));
    if (fresh == NULL)
        return NULL;
    pthread_mutex_init(&fresh->mu, NULL);
    /* The helper calls the driver on its own behalf: an application's dlclose must not unload it. */
    fresh->held = vgpu_driver_cuda_hold() == 0;
    if (!fresh->held)
        VGPU_ERROR("GPU %s: cannot keep the CUDA driver loaded: launches are not timed, each is "
                   "charged the longest kernel planned for", g->uuid);
    if (__atomic_compare_exchange_n(&c->timer, &t, fresh, false, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE))
        return fresh;
    free(fresh);
    return t;
}

/* Records ev into the launch's stream, relaxed towards other threads' stream captures. */
static CUresult record(CUevent ev, CUstream s, bool ptsz)
{
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    CUresult rc;

    if (s == NULL && ptsz)
        s = CU_STREAM_PER_THREAD;
    if (vgpu_cu.cuThreadExchangeStreamCaptureMode != NULL &&
        vgpu_cu.cuThreadExchangeStreamCaptureMode(&mode) != CUDA_SUCCESS)
        return CUDA_ERROR_NOT_SUPPORTED;
    rc = vgpu_cu.cuEventRecord(ev, s);
    if (vgpu_cu.cuThreadExchangeStreamCaptureMode != NULL)
        vgpu_cu.cuThreadExchangeStreamCaptureMode(&mode);
    return rc;
}

/* Destroys the events, if any (t->mu held; their context still exists). */
static void timer_forget(struct vgpu_launch_timer *t, uint64_t due)
{
    for (int i = 0; i < 2 && t->ctx != NULL; i++) {
        if (t->ev[i] != NULL && vgpu_cu.cuEventDestroy_v2 != NULL)
            vgpu_cu.cuEventDestroy_v2(t->ev[i]);
        t->ev[i] = NULL;
    }
    t->ctx = NULL;
    t->state = TIMER_IDLE;
    __atomic_store_n(&t->due_ns, due, __ATOMIC_RELAXED);
}

/*
 * Whether to time this launch on g: a timing is due and nobody else's is
 * under way. If so, the first event is recorded and t->mu stays held until
 * vgpu_limiter_launched.
 */
static bool timer_arm(struct vgpu_gpu *g, CUstream s, bool ptsz)
{
    struct vgpu_launch_timer *t = timer_of(g);
    CUcontext cur = NULL;
    uint64_t now;

    if (t == NULL || !t->held || __atomic_load_n(&t->state, __ATOMIC_ACQUIRE) != TIMER_IDLE)
        return false;
    now = mono_ns();
    if (now < __atomic_load_n(&t->due_ns, __ATOMIC_RELAXED) || pthread_mutex_trylock(&t->mu) != 0)
        return false;
    if (t->state != TIMER_IDLE || vgpu_cu.cuEventCreate == NULL || vgpu_cu.cuEventRecord == NULL ||
        vgpu_cu.cuEventQuery == NULL || vgpu_cu.cuEventElapsedTime == NULL ||
        vgpu_cu.cuCtxGetCurrent == NULL || vgpu_cu.cuCtxGetCurrent(&cur) != CUDA_SUCCESS ||
        cur == NULL)
        goto skip;
    /* Events live in a context: the launch's (the current one; it exists while it launches). */
    if (t->ctx != cur) {
        timer_forget(t, 0);
        if (vgpu_cu.cuEventCreate(&t->ev[0], CU_EVENT_DEFAULT) != CUDA_SUCCESS) {
            t->ev[0] = NULL;
            goto skip;
        }
        t->ctx = cur;
        if (vgpu_cu.cuEventCreate(&t->ev[1], CU_EVENT_DEFAULT) != CUDA_SUCCESS) {
            t->ev[1] = NULL;
            timer_forget(t, 0);
            goto skip;
        }
    }
    if (record(t->ev[0], s, ptsz) != CUDA_SUCCESS)
        goto skip;
    __atomic_store_n(&t->state, TIMER_ARMED, __ATOMIC_RELEASE);
    return true;
skip:
    /* Not this launch: the next try after a gap, so a failing driver costs no launch much. */
    __atomic_store_n(&t->due_ns, now + VGPU_TIMED_GAP_NS, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&t->mu);
    return false;
}

void vgpu_limiter_launched(struct vgpu_gpu *g, CUstream hStream, bool ptsz, CUresult rc)
{
    struct vgpu_launch_timer *t = g->compute.timer;

    if (rc == CUDA_SUCCESS)
        rc = record(t->ev[1], hStream, ptsz);
    if (rc == CUDA_SUCCESS) {
        __atomic_store_n(&t->state, TIMER_RECORDED, __ATOMIC_RELEASE);
    } else {
        __atomic_store_n(&t->state, TIMER_IDLE, __ATOMIC_RELEASE);
        __atomic_store_n(&t->due_ns, mono_ns() + VGPU_TIMED_GAP_NS, __ATOMIC_RELAXED);
    }
    pthread_mutex_unlock(&t->mu);
}

/* Sets a timed process's cost estimate, and shows it in its slot for the refiller. */
static void publish_cost(struct vgpu_gpu *g, double cost)
{
    struct vgpu_region_slot_device *sd = own_slot(g);
    uint64_t c = cost >= 1 ? (uint64_t)cost : 1;

    __atomic_store_n(&g->compute.private_cost_ns, c, __ATOMIC_RELAXED);
    if (sd != NULL)
        __atomic_store_n(&sd->launch_cost_ns, c, __ATOMIC_RELAXED);
}

/*
 * The helper's look at g's timed launch: once the second event completed,
 * the launch's GPU time goes into the estimate and the next timing is due
 * after a gap; an error other than "not yet" (the context broke) drops the
 * events.
 */
static void timer_poll(struct vgpu_gpu *g, uint64_t now)
{
    static __thread bool relaxed; /* the helper thread's capture mode (only it runs this) */
    struct vgpu_launch_timer *t = __atomic_load_n(&g->compute.timer, __ATOMIC_ACQUIRE);
    CUresult rc;
    float ms = -1;

    if (t == NULL || __atomic_load_n(&t->state, __ATOMIC_ACQUIRE) != TIMER_RECORDED ||
        pthread_mutex_trylock(&t->mu) != 0)
        return;
    if (!relaxed && vgpu_cu.cuThreadExchangeStreamCaptureMode != NULL) {
        CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;

        relaxed = vgpu_cu.cuThreadExchangeStreamCaptureMode(&mode) == CUDA_SUCCESS;
    }
    if (t->state != TIMER_RECORDED) {
        pthread_mutex_unlock(&t->mu);
        return;
    }
    rc = vgpu_cu.cuCtxSetCurrent(t->ctx);
    if (rc == CUDA_SUCCESS)
        rc = vgpu_cu.cuEventQuery(t->ev[1]);
    if (rc == CUDA_SUCCESS)
        rc = vgpu_cu.cuEventElapsedTime(&ms, t->ev[0], t->ev[1]);
    if (rc == CUDA_SUCCESS) {
        publish_cost(g, vgpu_timed_cost_add(&t->cost, (double)ms * 1e6, now));
        __atomic_store_n(&t->due_ns, now + VGPU_TIMED_GAP_NS, __ATOMIC_RELAXED);
        __atomic_store_n(&t->state, TIMER_IDLE, __ATOMIC_RELEASE);
    } else if (rc != CUDA_ERROR_NOT_READY) {
        VGPU_DEBUG("GPU %s: timing a launch failed (%d): its events are dropped", g->uuid, rc);
        timer_forget(t, now + VGPU_CTL_PERIOD_NS);
    }
    vgpu_cu.cuCtxSetCurrent(NULL);
    pthread_mutex_unlock(&t->mu);
}

void vgpu_limiter_context_ending(CUcontext ctx)
{
    struct vgpu_gpu *gpus[VGPU_MAX_GPUS];
    int n = vgpu_gpus_snapshot(gpus, VGPU_MAX_GPUS);

    for (int i = 0; i < n; i++) {
        struct vgpu_launch_timer *t = __atomic_load_n(&gpus[i]->compute.timer, __ATOMIC_ACQUIRE);

        if (t == NULL)
            continue;
        pthread_mutex_lock(&t->mu);
        if (t->ctx != NULL && (ctx == NULL || t->ctx == ctx))
            timer_forget(t, 0);
        pthread_mutex_unlock(&t->mu);
    }
}

static void *helper_main(void *arg);

static void start_helper(void)
{
    pthread_t t;
    pthread_attr_t attr;
    sigset_t all, old;

    pthread_mutex_lock(&T.mu);
    if (!T.started) {
        /* Signals stay with the application's threads. */
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&t, &attr, helper_main, NULL) == 0)
            __atomic_store_n(&T.started, true, __ATOMIC_RELEASE);
        else
            VGPU_ERROR("cannot start the compute limiter thread: SM limits are not refilled");
        pthread_attr_destroy(&attr);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
    }
    pthread_mutex_unlock(&T.mu);
}

/* A line of its own: its stores must not evict the read-mostly flags every wrapper loads. */
uint64_t vgpu_counted_launches __attribute__((aligned(64)));

void vgpu_limiter_count_start(void)
{
    if (!__atomic_load_n(&T.started, __ATOMIC_ACQUIRE))
        start_helper();
}

struct vgpu_gpu *vgpu_limiter_admit(CUstream hStream, bool ptsz)
{
    struct vgpu_gpu *g;
    struct vgpu_limiter_state *c;
    CUdevice dev;
    uint64_t cost, wait, t0, now;

    if (vgpu_cu.cuCtxGetDevice == NULL || vgpu_cu.cuCtxGetDevice(&dev) != CUDA_SUCCESS)
        return NULL;
    g = vgpu_gpu_for_cuda(dev);
    if (g == NULL)
        return NULL;
    if (!g->compute.active) {
        /* Another GPU of the process has an SM limit, this one not: only counted. */
        if (g->compute.counted) {
            __atomic_store_n(&g->compute.launches,
                             __atomic_load_n(&g->compute.launches, __ATOMIC_RELAXED) + 1,
                             __ATOMIC_RELAXED);
            vgpu_limiter_count_start();
        }
        return NULL;
    }
    /* Launches into a capturing stream only build a graph: its launch is charged instead. */
    if (vgpu_stream_capturing(hStream, ptsz))
        return NULL;
    c = &g->compute;
    if (!__atomic_load_n(&T.started, __ATOMIC_ACQUIRE))
        start_helper();
    cost = launch_cost(g);
    wait = vgpu_bucket_take(c->bucket, cost);
    if (wait != 0) {
        /*
         * Charged: wait until the refill has paid the debt up to this launch,
         * or until refunds paid the whole debt sooner, or the bucket opens.
         * While it waits, the charge is shown in our slot, so that if we are
         * killed meanwhile, whoever reclaims the slot gives it back: nobody
         * else repays a launch that never happens. Shown after the charge and
         * withdrawn before the launch, so that a kill in between only ever
         * forgives less.
         */
        struct vgpu_region_slot_device *sd = own_slot(g);
        uint32_t pending = pending_us(cost);

        if (sd != NULL)
            __atomic_fetch_add(&sd->pending_charge_us, pending, __ATOMIC_RELAXED);
        t0 = now = mono_ns();
        /*
         * Behind another of our launches waiting (another stream's thread),
         * paced as a continuous refill would pay: the refiller's steps would
         * release them together and their small grids would run side by side.
         * On a timed GPU every waiting launch is: a timing measures a
         * kernel's run, not the busy time it adds beside the others.
         */
        if (__atomic_fetch_add(&c->waiting, 1, __ATOMIC_RELAXED) > 0 || c->timed)
            wait = vgpu_bucket_paced_wait(c->bucket, wait, now);
        while (now - t0 < wait && !vgpu_bucket_paid(c->bucket)) {
            uint64_t now_cost = launch_cost(g);

            if (now_cost != cost) {
                /*
                 * Our cost changed while we waited: we are charged the new
                 * one. The slot shows the lower of the two charges
                 * meanwhile, so a kill in between only ever forgives less.
                 */
                uint32_t now_pending = pending_us(now_cost);

                if (sd != NULL && now_pending < pending)
                    __atomic_fetch_sub(&sd->pending_charge_us, pending - now_pending,
                                       __ATOMIC_RELAXED);
                wait = now - t0 + vgpu_bucket_reprice(c->bucket, cost, now_cost,
                                                      wait - (now - t0));
                if (sd != NULL && now_pending > pending)
                    __atomic_fetch_add(&sd->pending_charge_us, now_pending - pending,
                                       __ATOMIC_RELAXED);
                pending = now_pending;
                cost = now_cost;
                continue;
            }
            sleep_ns(wait - (now - t0) < VGPU_WAIT_MAX_NS ? wait - (now - t0) : VGPU_WAIT_MAX_NS);
            now = mono_ns();
        }
        __atomic_fetch_sub(&c->waiting, 1, __ATOMIC_RELAXED);
        if (sd != NULL)
            __atomic_fetch_sub(&sd->pending_charge_us, pending, __ATOMIC_RELAXED);
        __atomic_fetch_add(&c->throttled_ns, now - t0, __ATOMIC_RELAXED);
    }
    /*
     * Counted when it goes to the driver, not while it waits: the cost
     * estimate divides NVML's busy time by launches that could have run.
     * Plain load and store, not an atomic add: the bucket's is the only
     * atomic read-modify-write of the fast path. A count lost to two threads
     * of one process launching at the same instant only nudges the estimate.
     */
    __atomic_store_n(&c->launches, __atomic_load_n(&c->launches, __ATOMIC_RELAXED) + 1,
                     __ATOMIC_RELAXED);
    return c->timed && timer_arm(g, hStream, ptsz) ? g : NULL;
}

/* Copies our counters (and extra launches counted for the process) into our slot. */
static void publish(struct vgpu_gpu *g, uint64_t extra)
{
    struct vgpu_limiter_state *c = &g->compute;

    if (g->shm == NULL)
        return;
    vgpu_lock();
    vgpu_region_slot_set_compute(g->shm, g->rec,
                                 __atomic_load_n(&c->launches, __ATOMIC_RELAXED) + extra,
                                 __atomic_load_n(&c->throttled_ns, __ATOMIC_RELAXED));
    vgpu_unlock();
}

/* How often a process looks at its own utilisation on a GPU without an SM limit. */
#define SAMPLE_PERIOD_NS 1000000000ull

/*
 * The helper's work on a counted GPU (limiter.h): our launches into our
 * slot (first: the process-wide count too), and once a second our own
 * utilisation there from NVML into our slot, and the claim's, the sum of
 * its live processes' (at most 100), into the device record. Every process
 * of the claim writes that sum: they all write what the slots say.
 */
static void monitor(struct vgpu_gpu *g, uint64_t now, bool first)
{
    struct vgpu_limiter_state *c = &g->compute;
    struct vgpu_sm_sample samples[MAX_SAMPLES];
    struct vgpu_region_slot_device *sd = own_slot(g);
    const struct vgpu_region *r;
    uint32_t pid, util = 0, sum = 0;
    int n;

    publish(g, first ? __atomic_load_n(&vgpu_counted_launches, __ATOMIC_RELAXED) : 0);
    if (__atomic_load_n(&T.stopping, __ATOMIC_ACQUIRE) || sd == NULL || now < c->next_sample_ns)
        return;
    c->next_sample_ns = now + SAMPLE_PERIOD_NS;
    pid = vgpu_self_host_pid(g);
    n = pid != 0 ? vgpu_nvml_query_sm_samples(g->uuid, samples, MAX_SAMPLES) : -1;
    if (n < 0)
        return;
    for (int i = 0; i < n; i++) {
        if (samples[i].pid == pid && samples[i].sm_util > util)
            util = samples[i].sm_util;
    }
    __atomic_store_n(&sd->sm_util_percent, util > 100 ? 100 : util, __ATOMIC_RELAXED);
    r = g->shm->r;
    for (int s = 0; s < VGPU_REGION_MAX_SLOTS; s++) {
        uint32_t u;

        if (__atomic_load_n(&r->slots[s].state, __ATOMIC_ACQUIRE) != VGPU_SLOT_ACTIVE)
            continue;
        u = __atomic_load_n(&r->slots[s].devices[g->rec].sm_util_percent, __ATOMIC_RELAXED);
        sum += u > 100 ? 100 : u; /* a value someone else wrote must not overflow the sum */
    }
    __atomic_store_n(&g->shm->r->devices[g->rec].sm_util_percent, sum > 100 ? 100 : sum,
                     __ATOMIC_RELAXED);
}

/*
 * Whether the holder of a lease that runs until lease is dead. Only a lease
 * left unrenewed for VGPU_REFILLER_STALE_NS is looked at: a holder that just
 * took it over may not have published its identity yet, and the one
 * published may be its dead predecessor's.
 */
static bool refiller_dead(struct vgpu_gpu *g, uint64_t lease, uint64_t now)
{
    const struct vgpu_region_device *d = g->compute.bucket;
    const struct vgpu_region *r = g->shm->r;
    uint32_t pid = __atomic_load_n(&d->refiller_pid, __ATOMIC_RELAXED);
    uint64_t pidns = __atomic_load_n(&d->refiller_pidns, __ATOMIC_RELAXED);
    uint64_t start = __atomic_load_n(&d->refiller_start_time, __ATOMIC_RELAXED);
    uint32_t n = __atomic_load_n(&r->header.slots_in_use, __ATOMIC_RELAXED);

    if (lease - now > VGPU_REFILLER_LEASE_NS - VGPU_REFILLER_STALE_NS)
        return false;
    /*
     * Its slot tells. No slot at all: it was reclaimed (the holder died and
     * a process starting meanwhile took its slot back), or the holder never
     * had one (a fork child that only launches), which a lease this stale
     * makes stalled at least: if it lives, its next renewal learns it lost.
     */
    for (uint32_t i = 0; i < n && i < VGPU_REGION_MAX_SLOTS; i++) {
        const struct vgpu_region_slot *sl = &r->slots[i];

        if (__atomic_load_n(&sl->state, __ATOMIC_ACQUIRE) == VGPU_SLOT_ACTIVE &&
            __atomic_load_n(&sl->pid, __ATOMIC_RELAXED) == pid &&
            __atomic_load_n(&sl->pidns, __ATOMIC_RELAXED) == pidns &&
            __atomic_load_n(&sl->start_time, __ATOMIC_RELAXED) == start)
            return vgpu_region_slot_dead(g->shm, (int)i);
    }
    return true;
}

/*
 * The refiller lease: whoever moves refiller_lease_ns forward from an
 * expired value by compare-and-swap owns the bucket until it lapses; the
 * owner renews it by compare-and-swap from the value it wrote, so a process
 * that stalled past its lease learns that it was replaced. A lease whose
 * holder died is taken over the same way before it lapses.
 */
static bool hold_lease(struct vgpu_gpu *g, uint64_t now)
{
    struct vgpu_limiter_state *c = &g->compute;
    struct vgpu_region_device *d = c->bucket;
    const struct vgpu_procinfo *self = vgpu_self();
    uint64_t cur;

    if (g->shm == NULL)
        return true; /* process-private bucket: always ours */
    if (c->owner) {
        cur = c->lease_ns;
        if (__atomic_compare_exchange_n(&d->refiller_lease_ns, &cur, now + VGPU_REFILLER_LEASE_NS,
                                        false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
            c->lease_ns = now + VGPU_REFILLER_LEASE_NS;
            return true;
        }
        VGPU_INFO("GPU %s: refiller lease taken over by pid %u", g->uuid,
                  __atomic_load_n(&d->refiller_pid, __ATOMIC_RELAXED));
        c->owner = false;
        return false;
    }
    cur = __atomic_load_n(&d->refiller_lease_ns, __ATOMIC_ACQUIRE);
    if (now < cur && !refiller_dead(g, cur, now))
        return false;
    if (!__atomic_compare_exchange_n(&d->refiller_lease_ns, &cur, now + VGPU_REFILLER_LEASE_NS,
                                     false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
        return false;
    c->owner = true;
    c->lease_ns = now + VGPU_REFILLER_LEASE_NS;
    __atomic_store_n(&d->refiller_pid, (uint32_t)self->pid, __ATOMIC_RELAXED);
    __atomic_store_n(&d->refiller_start_time, self->start_time, __ATOMIC_RELAXED);
    __atomic_store_n(&d->refiller_pidns, self->pidns, __ATOMIC_RELAXED);
    __atomic_fetch_add(&d->refiller_generation, 1, __ATOMIC_RELEASE);
    VGPU_INFO("GPU %s: this process refills the claim's SM bucket", g->uuid);
    return true;
}

/*
 * A new refiller starts from the target, not from the previous refiller's
 * state, seeded with the launch-cost estimates published in the slots.
 */
static int start_controller(struct vgpu_gpu *g, uint64_t now)
{
    /* Static: only the helper thread runs this. */
    static uint64_t seed[VGPU_REGION_MAX_SLOTS];
    struct vgpu_limiter_state *c = &g->compute;

    if (c->ctl == NULL) {
        c->ctl = malloc(sizeof(*c->ctl));
        if (c->ctl == NULL)
            return -1;
    }
    for (int s = 0; s < VGPU_REGION_MAX_SLOTS; s++) {
        const struct vgpu_region_slot *sl = g->shm != NULL ? &g->shm->r->slots[s] : NULL;

        seed[s] = sl != NULL && __atomic_load_n(&sl->state, __ATOMIC_ACQUIRE) == VGPU_SLOT_ACTIVE
                      ? __atomic_load_n(&sl->devices[g->rec].launch_cost_ns, __ATOMIC_RELAXED)
                      : 0;
    }
    vgpu_ctl_takeover(c->ctl, c->bucket, c->target, seed, now);
    c->next_tick_ns = now;
    return 0;
}

static uint64_t slot_id(const struct vgpu_region_slot *sl)
{
    return sl->start_time * 1000003ull ^ ((uint64_t)sl->pid << 32) ^ sl->pidns;
}

/* Looks up pid among the NVML samples (marked matched) and fills o's util and window. */
static void util_of(uint32_t pid, const struct vgpu_sm_sample *s, int n, bool *matched,
                    struct vgpu_ctl_obs *o)
{
    for (int i = 0; i < n; i++) {
        if (s[i].pid == pid) {
            matched[i] = true;
            o->util = s[i].sm_util / 100.0;
            o->window_end = s[i].window_end_ns;
            return;
        }
    }
}

/*
 * Timed GPUs (a MIG instance): whether a process outside the claim has a
 * context there, from NVML's list of the instance's processes (it reports
 * no utilisation to tell whether it runs kernels). Unknown counts as
 * contended: the claim then holds its limit.
 */
static bool timed_contention(const struct vgpu_gpu *g, const uint32_t *ours, int nours)
{
    uint32_t pids[MAX_SAMPLES];
    int n = vgpu_nvml_query_processes(g->uuid, pids, MAX_SAMPLES);

    if (n < 0 || n == MAX_SAMPLES)
        return true;
    for (int i = 0; i < n; i++) {
        int j = 0;

        while (j < nours && ours[j] != pids[i])
            j++;
        /* Not ours, or one of ours whose host pid is unknown: either way, contended. */
        if (j == nours)
            return true;
    }
    return false;
}

/* One control period of the claim on g (we hold the lease). */
static void control(struct vgpu_gpu *g, uint64_t now)
{
    /* Static: only the helper thread runs this, and 30 KiB would crowd its stack. */
    static struct vgpu_ctl_obs obs[VGPU_REGION_MAX_SLOTS];
    static double cost[VGPU_REGION_MAX_SLOTS];
    struct vgpu_sm_sample samples[MAX_SAMPLES];
    bool matched[MAX_SAMPLES] = {false};
    uint32_t ours[VGPU_REGION_MAX_SLOTS]; /* host pids of the claim's processes, where known */
    int nours = 0;
    struct vgpu_limiter_state *c = &g->compute;
    bool reclaim = false;
    struct vgpu_ctl_tick t = {.now = now, .policy = c->policy, .high_priority = c->high_priority,
                              .obs = obs, .cost_ns = cost};
    int ns = __atomic_load_n(&T.stopping, __ATOMIC_ACQUIRE) || c->timed
                 ? -1 : vgpu_nvml_query_sm_samples(g->uuid, samples, MAX_SAMPLES);

    t.util_known = ns >= 0;
    if (ns < 0)
        ns = 0;
    if (g->shm == NULL) {
        uint32_t pid = vgpu_self_host_pid(g);

        obs[0] = (struct vgpu_ctl_obs){.slot = 0, .id = 1,
            .launches = __atomic_load_n(&c->launches, __ATOMIC_RELAXED),
            .timed_cost_ns = __atomic_load_n(&c->private_cost_ns, __ATOMIC_RELAXED)};
        util_of(pid, samples, ns, matched, &obs[0]);
        t.util_known &= pid != 0;
        ours[nours++] = pid;
        t.nobs = 1;
    } else {
        struct vgpu_region *r = g->shm->r;

        /* Learn (and publish) our own host pid first, so our slot is matched by name. */
        vgpu_self_host_pid(g);
        for (int s = 0; s < VGPU_REGION_MAX_SLOTS; s++) {
            const struct vgpu_region_slot *sl = &r->slots[s];
            const struct vgpu_region_slot_device *sd = &sl->devices[g->rec];
            uint32_t host_pid = __atomic_load_n(&sl->host_pid, __ATOMIC_RELAXED);

            if (__atomic_load_n(&sl->state, __ATOMIC_ACQUIRE) != VGPU_SLOT_ACTIVE)
                continue;
            /* Another process of the claim that does not know its host pid: ask the map. */
            if (host_pid == 0 && g->hostpids != NULL)
                host_pid = vgpu_hostpids_lookup(g->hostpids,
                                                __atomic_load_n(&sl->pidns, __ATOMIC_RELAXED),
                                                __atomic_load_n(&sl->pid, __ATOMIC_RELAXED),
                                                __atomic_load_n(&sl->start_time, __ATOMIC_RELAXED));
            /* A dead process that left launches waiting: reclaiming its slot gives them back. */
            if (__atomic_load_n(&sd->pending_charge_us, __ATOMIC_RELAXED) != 0 &&
                vgpu_region_slot_dead(g->shm, s))
                reclaim = true;
            obs[t.nobs] = (struct vgpu_ctl_obs){.slot = s, .id = slot_id(sl),
                .launches = __atomic_load_n(&sd->kernel_launches, __ATOMIC_RELAXED),
                .timed_cost_ns = __atomic_load_n(&sd->launch_cost_ns, __ATOMIC_RELAXED)};
            if (host_pid != 0)
                util_of(host_pid, samples, ns, matched, &obs[t.nobs]);
            if (host_pid != 0)
                ours[nours++] = host_pid;
            /* A launching process NVML cannot name would be counted as idle. */
            if (host_pid == 0 && obs[t.nobs].launches > 0)
                t.util_known = false;
            t.nobs++;
        }
    }
    if (reclaim) {
        vgpu_lock();
        vgpu_region_reclaim(g->shm, NULL);
        vgpu_unlock();
    }
    for (int i = 0; i < ns; i++)
        t.foreign_busy |= !matched[i] && samples[i].sm_util > 0;
    if (c->timed) {
        /* Each process's share from its own timed cost; other claims only by their contexts. */
        vgpu_ctl_timed_util(c->ctl, obs, t.nobs, now);
        t.timed = t.util_known = true;
        t.foreign_busy = c->policy != VGPU_POLICY_WORK_CONSERVING ||
                         __atomic_load_n(&T.stopping, __ATOMIC_ACQUIRE) ||
                         timed_contention(g, ours, nours);
    }
    vgpu_ctl_tick(c->ctl, c->bucket, &t);
    if (t.share_updated)
        __atomic_store_n(&c->bucket->sm_share_time_ns, wall_ns(), __ATOMIC_RELAXED);
    for (int i = 0; i < t.nobs; i++) {
        uint64_t est = (uint64_t)cost[i];

        if (g->shm == NULL) {
            if (est != 0)
                __atomic_store_n(&c->private_cost_ns, est, __ATOMIC_RELAXED);
            continue;
        }
        struct vgpu_region_slot_device *sd = &g->shm->r->slots[obs[i].slot].devices[g->rec];
        if (est != 0)
            __atomic_store_n(&sd->launch_cost_ns, est, __ATOMIC_RELAXED);
        __atomic_store_n(&sd->sm_util_percent, (uint32_t)(obs[i].util * 100 + 0.5),
                         __ATOMIC_RELAXED);
    }
    VGPU_DEBUG("GPU %s: claim share %.1f%%%s (%.2f%% averaged), %s", g->uuid, t.util * 100,
               t.util_known ? "" : " (unknown)",
               __atomic_load_n(&c->bucket->sm_share_permyriad, __ATOMIC_RELAXED) / 100.0,
               t.limited ? "limiting" : "open");
}

/* The helper's work on one GPU each period. */
static void service(struct vgpu_gpu *g, uint64_t now)
{
    struct vgpu_limiter_state *c = &g->compute;
    bool was_owner = c->owner;

    if (__atomic_load_n(&T.stopping, __ATOMIC_ACQUIRE))
        return;
    if (c->timed)
        timer_poll(g, now);
    publish(g, 0);
    if (!hold_lease(g, now))
        return;
    if ((!was_owner || c->ctl == NULL) && start_controller(g, now) != 0) {
        VGPU_ERROR("GPU %s: out of memory for the SM controller", g->uuid);
        return;
    }
    c->owner = true;
    vgpu_bucket_refill(c->bucket, now);
    if (now >= c->next_tick_ns) {
        control(g, now);
        c->next_tick_ns = now + VGPU_CTL_PERIOD_NS;
    }
}

static void *helper_main(void *arg)
{
    struct vgpu_gpu *gpus[VGPU_MAX_GPUS];

    (void)arg;
    for (;;) {
        int n = vgpu_gpus_snapshot(gpus, VGPU_MAX_GPUS);
        uint64_t now = mono_ns();
        bool first = true;

        for (int i = 0; i < n; i++) {
            if (gpus[i]->compute.active) {
                service(gpus[i], now);
            } else if (gpus[i]->compute.counted) {
                monitor(gpus[i], now, first);
                first = false;
            }
        }
        sleep_ns(VGPU_REFILL_PERIOD_NS);
    }
    return NULL;
}

void vgpu_limiter_forked(void)
{
    struct vgpu_gpu *gpus[VGPU_MAX_GPUS];
    int n = vgpu_gpus_snapshot_locked(gpus, VGPU_MAX_GPUS);

    pthread_mutex_init(&T.mu, NULL);
    T.started = false;
    vgpu_counted_launches = 0; /* the parent's */
    /* The parent's leases and counters are the parent's. */
    for (int i = 0; i < n; i++) {
        gpus[i]->compute.owner = false;
        gpus[i]->compute.launches = 0;
        gpus[i]->compute.throttled_ns = 0;
        gpus[i]->compute.waiting = 0; /* the parent's threads waited, not ours */
        /* The parent's events are not the child's (CUDA does not survive a fork): left behind. */
        gpus[i]->compute.timer = NULL;
    }
}

void vgpu_limiter_exit(void)
{
    struct vgpu_gpu *gpus[VGPU_MAX_GPUS];
    int n = vgpu_gpus_snapshot_locked(gpus, VGPU_MAX_GPUS);

    __atomic_store_n(&T.stopping, true, __ATOMIC_RELEASE);
    for (int i = 0; i < n; i++) {
        struct vgpu_limiter_state *c = &gpus[i]->compute;
        uint64_t mine = c->lease_ns;

        /* Expire our lease so that a surviving process refills without a gap. */
        if (c->owner && gpus[i]->shm != NULL)
            __atomic_compare_exchange_n(&c->bucket->refiller_lease_ns, &mine, 0, false,
                                        __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
    }
}
