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
 * limiter_test.c - the compute limiter (src/limiter_math.c) against the simulated
 * plant (test/plant.c): deterministic, no threads, no clocks. Every share
 * is the true busy share of the model GPU, not what the limiter's sensor
 * (the modelled NVML) said.
 *
 * Checks the accuracy goals over the grid limits 10..90 % x 1, 2, 4
 * processes per claim x 1 and 2 claims per GPU x kernels of 0.1 ms, 2 ms,
 * 20 ms and a mix: mean absolute error <= 1 point, worst cell <= 3 points,
 * settling (two-second means within 2 points, or within what such kernels
 * vary by themselves) <= 3 s, first second <= limit + 5 points; cells of a
 * GPU booked to 90 % or more by several processes per claim are held to
 * looser bounds (see test_grid). The streams grid: one process launching
 * from 1, 4 or 8 threads, a stream each, full or small grids (see
 * test_streams). Then: claims at 30/70 within 1 point each, 10/90 within 10 %
 * of 1:9, a limit change through a new process, a process joining, idle
 * phases, workConserving (>= 95 % alone within 2 s, back at the limit
 * within 2 s of contention, never 5 points below it once contended), high
 * priority, disabled, processes SIGKILLed and replaced (not starved beyond
 * what the start-up cost implies, never above the limit + 5, settled after),
 * a hostile container killing its own processes, and the bucket's admission
 * and refund rules.
 *
 * limiter_test trace LIMIT STREAMS small|full KERNEL_US [SEED [SECONDS]]
 * prints one run of the streams grid's process period by period instead
 * (see trace_streams), checking nothing.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "plant.h"

#define S 1000000000ull
#define US 1000ull
#define MS 1000000ull
#define GRID_RUN (15 * S)

static struct plant_result res;

static double absd(double v)
{
    return v < 0 ? -v : v;
}

static void test_bucket(void)
{
    struct vgpu_region_device d;

    memset(&d, 0, sizeof(d));
    /* A launch charged before the bucket is set up stays owed; a second setup changes nothing. */
    CHECK_EQ_U64(vgpu_bucket_take(&d, 5 * MS), VGPU_WAIT_MAX_NS);
    vgpu_bucket_init(&d, 0.25, 1000);
    CHECK_EQ_U64(d.bucket_tokens, 20 * MS);
    vgpu_bucket_init(&d, 0.5, 2000);
    CHECK_EQ_U64(d.bucket_capacity, 25 * MS);
    CHECK_EQ_U64(d.bucket_last_refill_ns, 1000);
    CHECK_EQ_U64(vgpu_bucket_take(&d, 20 * MS), 0);
    memset(&d, 0, sizeof(d));
    vgpu_bucket_init(&d, 0.25, 1000);
    /* 100 ms of refill at 25 %: 25 ms of tokens, full. */
    CHECK_EQ_U64(d.bucket_capacity, 25 * MS);
    CHECK_EQ_U64(d.bucket_tokens, 25 * MS);
    CHECK_EQ_U64(vgpu_bucket_take(&d, 10 * MS), 0);
    CHECK_EQ_U64(vgpu_bucket_take(&d, 10 * MS), 0);
    /* 5 ms left: a 10 ms launch is charged all the same and waits for the 5 ms of debt (20 ms). */
    CHECK_EQ_U64(vgpu_bucket_take(&d, 10 * MS), 20 * MS);
    CHECK(d.bucket_tokens == -5 * (int64_t)MS);
    /* A launch after it queues behind it: the debt grows, nothing is given back. */
    CHECK_EQ_U64(vgpu_bucket_take(&d, 1 * MS), 24 * MS);
    CHECK(d.bucket_tokens == -6 * (int64_t)MS);
    /* Refill credits rate x elapsed once: 4 ms of refill pay 1 ms. */
    vgpu_bucket_refill(&d, 1000 + 4 * MS);
    CHECK(d.bucket_tokens == -5 * (int64_t)MS);
    vgpu_bucket_refill(&d, 1000 + 4 * MS);
    CHECK(d.bucket_tokens == -5 * (int64_t)MS);
    vgpu_bucket_refill(&d, 1000 + 24 * MS);
    CHECK(d.bucket_tokens == 0);
    /* Capped at the capacity, also after a gap longer than the debt and a bucketful. */
    CHECK_EQ_U64(vgpu_bucket_take(&d, 10 * MS), 40 * MS);
    vgpu_bucket_refill(&d, 1000 + 10 * S);
    CHECK_EQ_U64(d.bucket_tokens, 25 * MS);
    /* A kernel larger than the bucket waits for its whole cost, even on a full bucket. */
    CHECK_EQ_U64(vgpu_bucket_take(&d, 100 * MS), 300 * MS);
    CHECK(d.bucket_tokens == -75 * (int64_t)MS);
    /* One refill after a long gap pays the whole debt. */
    vgpu_bucket_refill(&d, 1000 + 10 * S + 400 * MS);
    CHECK_EQ_U64(d.bucket_tokens, 25 * MS);
    CHECK_EQ_U64(vgpu_bucket_take(&d, 25 * MS), 0);
    /* Open: everything passes; closing again starts from a full bucket. */
    vgpu_bucket_open(&d);
    CHECK(vgpu_bucket_is_open(&d));
    for (int i = 0; i < 1000; i++)
        CHECK_EQ_U64(vgpu_bucket_take(&d, 50 * MS), 0);
    vgpu_bucket_set_rate(&d, 0.1, VGPU_BUCKET_DEPTH_NS, 2 * S);
    CHECK(!vgpu_bucket_is_open(&d));
    CHECK_EQ_U64(d.bucket_tokens, 10 * MS);
    /* A tiny rate keeps a minimum capacity so short kernels still pass. */
    vgpu_bucket_set_rate(&d, 0.0001, VGPU_BUCKET_DEPTH_NS, 3 * S);
    CHECK_EQ_U64(d.bucket_capacity, VGPU_BUCKET_MIN_CAPACITY);
    /* No launch is told to wait longer than VGPU_WAIT_LIMIT_NS (100 ms at 0.01 % is 1000 s). */
    CHECK_EQ_U64(vgpu_bucket_take(&d, 100 * MS), VGPU_WAIT_LIMIT_NS);
    /* Tokens given back pay the debt first and never fill the bucket beyond its capacity. */
    memset(&d, 0, sizeof(d));
    vgpu_bucket_init(&d, 0.25, 1000);
    CHECK_EQ_U64(vgpu_bucket_take(&d, 45 * MS), 80 * MS);
    vgpu_bucket_credit(&d, 15 * MS);
    CHECK(d.bucket_tokens == -5 * (int64_t)MS);
    /* Waiters may go early only once the whole debt is paid. */
    CHECK(!vgpu_bucket_paid(&d));
    vgpu_bucket_credit(&d, 1000 * MS);
    CHECK_EQ_U64(d.bucket_tokens, 25 * MS);
    CHECK(vgpu_bucket_paid(&d));
    vgpu_bucket_credit(&d, UINT64_MAX);
    CHECK_EQ_U64(d.bucket_tokens, 25 * MS);
    vgpu_bucket_open(&d);
    vgpu_bucket_credit(&d, 5 * MS);
    CHECK(d.bucket_tokens == VGPU_BUCKET_OPEN);
    /*
     * A waiting launch is charged its process's cost as it is now: a cost
     * that fell gives the difference back and the wait shortens by it over
     * the rate (to nothing, at most); one that rose charges it on top and the
     * wait grows.
     */
    memset(&d, 0, sizeof(d));
    vgpu_bucket_init(&d, 0.25, 1000);
    CHECK_EQ_U64(vgpu_bucket_take(&d, 20 * MS), 0);
    CHECK_EQ_U64(vgpu_bucket_take(&d, 20 * MS), 60 * MS);
    CHECK_EQ_U64(vgpu_bucket_take(&d, 20 * MS), 140 * MS);
    CHECK_EQ_U64(vgpu_bucket_reprice(&d, 20 * MS, 5 * MS, 130 * MS), 70 * MS);
    CHECK(d.bucket_tokens == -20 * (int64_t)MS);
    CHECK_EQ_U64(vgpu_bucket_reprice(&d, 5 * MS, 8 * MS, 70 * MS), 82 * MS);
    CHECK(d.bucket_tokens == -23 * (int64_t)MS);
    CHECK_EQ_U64(vgpu_bucket_reprice(&d, 8 * MS, 8 * MS, 82 * MS), 82 * MS);
    CHECK(d.bucket_tokens == -23 * (int64_t)MS);
    CHECK_EQ_U64(vgpu_bucket_reprice(&d, 8 * MS, 1 * MS, 10 * MS), 0);
    CHECK(d.bucket_tokens == -16 * (int64_t)MS);
    /*
     * What a fall gives back pays the debt and is never banked (a bucket
     * lifted above zero by it lets the launches of several streams through
     * at once); at a rate of 0 the wait is polled, not moved.
     */
    CHECK_EQ_U64(vgpu_bucket_reprice(&d, 1000 * MS, 0, 10 * MS), 0);
    CHECK_EQ_U64(d.bucket_tokens, 0);
    vgpu_bucket_set_rate(&d, 0, VGPU_BUCKET_DEPTH_NS, 2 * S);
    CHECK(vgpu_bucket_take(&d, 10 * MS) != 0);
    CHECK_EQ_U64(vgpu_bucket_reprice(&d, 10 * MS, 1 * MS, 3 * MS), 3 * MS);
    CHECK(d.bucket_tokens == -(int64_t)MS);
    /* A balance above zero (a refill came meanwhile) keeps what it has, and no more. */
    d.bucket_tokens = 50000;
    CHECK_EQ_U64(vgpu_bucket_reprice(&d, 10 * MS, 1 * MS, 3 * MS), 3 * MS);
    CHECK(d.bucket_tokens == 50000);
    /*
     * A paced wait counts the refill accrued since the last refill, one
     * refill step at most: 1 ms accrued shortens a 3 ms wait to 2; 7 ms
     * accrued (a refiller late or gone) only by 5; a wait the accrual pays
     * is none; a refill time ahead of now changes nothing.
     */
    d.bucket_last_refill_ns = 10 * MS;
    CHECK_EQ_U64(vgpu_bucket_paced_wait(&d, 3 * MS, 11 * MS), 2 * MS);
    CHECK_EQ_U64(vgpu_bucket_paced_wait(&d, 20 * MS, 17 * MS), 15 * MS);
    CHECK_EQ_U64(vgpu_bucket_paced_wait(&d, 3 * MS, 14 * MS), 0);
    CHECK_EQ_U64(vgpu_bucket_paced_wait(&d, 3 * MS, 9 * MS), 3 * MS);
    /* No launch is told to wait longer than VGPU_WAIT_LIMIT_NS. */
    vgpu_bucket_set_rate(&d, 0.0001, VGPU_BUCKET_DEPTH_NS, 3 * S);
    CHECK_EQ_U64(vgpu_bucket_reprice(&d, 1 * MS, 100 * MS, 1 * S), VGPU_WAIT_LIMIT_NS);
}

/*
 * The bucket's depth: 100 ms of refill; 200 ms while the claim launches,
 * another claim's kernels share the GPU and the usual bucket holds few of
 * its launches (what it could not spend behind them is kept); back to
 * 100 ms once it stops launching or the contention has been gone for its
 * hold time.
 */
static void test_contended_depth(void)
{
    static struct vgpu_ctl c;
    struct vgpu_region_device d;
    struct vgpu_ctl_obs o = {.slot = 0, .id = 1, .util = 0.3, .window_end = 0};
    double cost;
    struct vgpu_ctl_tick t = {.policy = VGPU_POLICY_STRICT, .util_known = true, .nobs = 1,
                              .obs = &o, .cost_ns = &cost};
    static const struct {
        uint64_t launches;
        bool foreign;
        uint64_t capacity;
    } steps[] = {
        {10, false, 30 * MS},  /* alone */
        {20, true, 60 * MS},   /* launching, another claim busy */
        {20, true, 30 * MS},   /* not launching: the usual burst */
        {30, false, 60 * MS},  /* contention is remembered for its hold time */
        {40, false, 60 * MS},
    };
    uint64_t now = 1 * S, seed[VGPU_REGION_MAX_SLOTS] = {0};

    memset(&d, 0, sizeof(d));
    vgpu_ctl_takeover(&c, &d, 0.3, NULL, now);
    for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
        now += VGPU_CTL_PERIOD_NS;
        o.launches = steps[i].launches;
        t.now = now;
        t.foreign_busy = steps[i].foreign;
        vgpu_ctl_tick(&c, &d, &t);
        CHECK_EQ_U64(d.bucket_capacity, steps[i].capacity);
        /* A long gap fills it to that capacity (a deep balance is cut when the depth returns). */
        vgpu_bucket_refill(&d, now + 1 * S);
        CHECK_EQ_U64(d.bucket_tokens, steps[i].capacity);
    }
    o.launches = 50;
    t.now = now + VGPU_CTL_CONTENTION_HOLD_NS;
    t.foreign_busy = false;
    vgpu_ctl_tick(&c, &d, &t);
    CHECK_EQ_U64(d.bucket_capacity, 30 * MS);
    CHECK_EQ_U64(d.bucket_tokens, 30 * MS);

    /* Launches of 1 ms (the usual bucket holds 30 of them) deepen it as well. */
    memset(&d, 0, sizeof(d));
    seed[0] = 1 * MS;
    vgpu_ctl_takeover(&c, &d, 0.3, seed, now);
    o.launches = 60;
    t.now = now + VGPU_CTL_PERIOD_NS;
    t.foreign_busy = true;
    vgpu_ctl_tick(&c, &d, &t);
    CHECK(cost == 1 * MS);
    CHECK_EQ_U64(d.bucket_capacity, 60 * MS);

    /*
     * Refunds pay the debt and are never banked as a burst: a contended
     * claim whose process was charged the start-up cost for 0.3 s is owed
     * 56.7 ms (see test_cost_estimate), but a bucket holding it would let
     * a burst through at once, whose kernels on several streams overlap
     * (see test_streams). In debt, the debt shrinks by the refund.
     */
    {
        struct vgpu_ctl_obs fresh = {.slot = 3, .id = 7};
        struct vgpu_ctl_tick ft = {.policy = VGPU_POLICY_STRICT, .util_known = true,
                                   .foreign_busy = true, .nobs = 1, .obs = &fresh,
                                   .cost_ns = &cost};

        memset(&d, 0, sizeof(d));
        vgpu_ctl_takeover(&c, &d, 0.3, NULL, 0);
        d.bucket_tokens = 0;
        for (ft.now = 100 * MS; ft.now <= 300 * MS; ft.now += 100 * MS) {
            fresh.launches = ft.now / MS / 10;
            vgpu_ctl_tick(&c, &d, &ft);
        }
        CHECK(absd(ft.refund_ns - (10.0 / 3 * 20 - 10) * MS) < 0.1 * MS);
        CHECK_EQ_U64(d.bucket_capacity, 60 * MS);
        CHECK(d.bucket_tokens == 0);
        memset(&d, 0, sizeof(d));
        vgpu_ctl_takeover(&c, &d, 0.3, NULL, 0);
        d.bucket_tokens = -100 * (int64_t)MS;
        for (ft.now = 100 * MS; ft.now <= 300 * MS; ft.now += 100 * MS) {
            fresh.launches = ft.now / MS / 10;
            vgpu_ctl_tick(&c, &d, &ft);
        }
        CHECK(absd((double)d.bucket_tokens + 100 * MS - ft.refund_ns) < 0.1 * MS);
    }

    /* workConserving: an open bucket restarts full with the usual burst, deepens a period later. */
    memset(&d, 0, sizeof(d));
    vgpu_ctl_takeover(&c, &d, 0.3, NULL, now);
    t.policy = VGPU_POLICY_WORK_CONSERVING;
    t.foreign_busy = false;
    for (int i = 0; i < 3; i++) {
        o.launches += 10;
        t.now += VGPU_CTL_PERIOD_NS;
        vgpu_ctl_tick(&c, &d, &t);
        CHECK(vgpu_bucket_is_open(&d) == (i == 0));
        CHECK_EQ_U64(d.bucket_capacity, i < 2 ? 30 * MS : 60 * MS);
        CHECK(i != 1 || d.bucket_tokens == 30 * (int64_t)MS);
        t.foreign_busy = true;
    }
}

/* The cost estimate's bounds and measurements, driven directly. */
static void test_cost_estimate(void)
{
    static struct vgpu_ctl c;
    struct vgpu_ctl_obs o = {.slot = 3, .id = 7};
    uint64_t t;

    /*
     * A process NVML has no sample of (window_end 0) was idle up to one
     * sample period ago, not up to now: its launches of the last 1/6 s + lag
     * bound nothing yet.
     */
    vgpu_ctl_init(&c, 0.3);
    for (t = 100 * MS; t <= 200 * MS; t += 100 * MS) {
        o.launches = t / MS / 10; /* 100 launches a second */
        CHECK(vgpu_ctl_cost(&c, &o, true, t) == 0);
    }
    /*
     * Later zeros bound it: (0 + 1 %, a whole step of the dithered sensor)
     * x 1 s over the launches older than the lag. What those launches were
     * charged beyond it (20 ms each before the first bound) is owed back,
     * each launch once: the first bound proves (n x 20 ms - 10 ms) for its n
     * launches (3.3 at 0.3 s), 56.7 ms.
     */
    for (; t <= 300 * MS; t += 100 * MS) {
        o.launches = t / MS / 10;
        vgpu_ctl_cost(&c, &o, true, t);
    }
    CHECK(absd(c.procs[3].refund_ns - (10.0 / 3 * 20 - 10) * MS) < 0.1 * MS);
    for (; t <= 2 * S; t += 100 * MS) {
        o.launches = t / MS / 10;
        vgpu_ctl_cost(&c, &o, true, t);
    }
    CHECK(c.procs[3].cost_ns > 0 && !c.procs[3].measured);
    CHECK(c.procs[3].cost_ns <= 0.01 * S / 70 && c.procs[3].cost_ns >= 0.01 * S / 110);
    CHECK(c.procs[3].refunded_to >= 1500 * MS && c.procs[3].refunded_to <= 1900 * MS);
    /*
     * Later windows reconcile every launch they hold, not only those no
     * earlier window did: launches are refunded in blocks, each lying within
     * one window and standing charged at most its bound (10 ms). The 1.5-1.9 s
     * of launches refunded so far are two blocks: net of the refunds, they
     * stand charged 10-20 ms. (Reconciled 100 ms at a time, each range
     * against a whole window's bound, the launches of the first second kept
     * what they were charged at 20 ms and 3 ms: over 500 ms.)
     */
    {
        const struct vgpu_ctl_proc *p = &c.procs[3];
        double charged = p->charged[(p->head + VGPU_CTL_HISTORY - 1) % VGPU_CTL_HISTORY];
        double since = (double)(2 * S - p->refunded_to) / S * 100 * p->cost_ns;
        double net = charged - since - p->refund_ns;

        CHECK(net > 10 * MS && net < 20.1 * MS);
    }
    c.procs[3].refund_ns = 0;
    /*
     * A reading of 1 % over a whole window measures it: 10 ms / 100 launches,
     * nothing owed. The first such reading joins the zeros of the windows
     * before it (the first step of a dithered sensor is more often noise than
     * not), so it does not set the estimate to 10 ms / 100 on its own.
     */
    {
        uint64_t we = (t / GPU_SAMPLE_NS + 1) * GPU_SAMPLE_NS;

        t = we + 10 * MS;
        o.launches = t / MS / 10;
        o.util = 0.01;
        o.window_end = we;
        vgpu_ctl_cost(&c, &o, true, t);
        CHECK(c.procs[3].measured);
        CHECK(c.procs[3].cost_ns < 0.01 * S / 100 * 0.6);
    }
    for (; t <= 4 * S; t += 100 * MS) {
        o.launches = t / MS / 10;
        o.util = 0.01;
        o.window_end = t / GPU_SAMPLE_NS * GPU_SAMPLE_NS;
        vgpu_ctl_cost(&c, &o, true, t);
    }
    CHECK(c.procs[3].measured);
    CHECK(absd(c.procs[3].cost_ns - 0.01 * S / 100) < 0.01 * S / 100 * 0.05);
    CHECK(c.procs[3].refund_ns == 0);
    /* NVML sees nothing of launches the estimate says it must see: back to bounding. */
    o.util = 0;
    o.launches = t / MS * 2; /* 2000 a second from now on */
    for (uint64_t end = t + 2 * S; t <= end; t += 100 * MS) {
        o.launches += 200;
        o.window_end = t / GPU_SAMPLE_NS * GPU_SAMPLE_NS;
        vgpu_ctl_cost(&c, &o, true, t);
    }
    CHECK(!c.procs[3].measured);
    CHECK(c.procs[3].cost_ns < 0.01 * S / 100 / 10);

    /*
     * A new process whose kernels take what it is charged (10 launches a
     * second of 20 ms: NVML reads 20 %) gets nothing back, and its bound
     * stays at the truth or above.
     */
    o = (struct vgpu_ctl_obs){.slot = 4, .id = 9};
    for (t += 100 * MS; t <= 12 * S; t += 100 * MS) {
        o.launches += 1;
        o.util = 0.2;
        o.window_end = t / GPU_SAMPLE_NS * GPU_SAMPLE_NS;
        vgpu_ctl_cost(&c, &o, true, t);
    }
    CHECK(c.procs[4].refund_ns == 0);
    CHECK(c.procs[4].cost_ns >= 0.2 * S / 10 * 0.99);
}

/* The sensor: lagged by a period, whole percents, unbiased jitter; nothing dropped. */
static void test_sensor(void)
{
    static gpu_busy b;
    uint64_t t = 0, we, sum = 0;
    int n = 0;

    gpu_busy_reset(&b);
    /* 10 us kernels at 30 % duty: 30000 kernels a second, none lost. */
    for (uint64_t k = 0; k < 300000; k++)
        gpu_busy_add(&b, k * 33333, k * 33333 + 10 * US);
    CHECK_EQ_U64(atomic_load(&b.total), 300000 * 10 * US);
    CHECK(absd((double)gpu_busy_between(&b, 2 * S, 8 * S) / (6.0 * S) - 0.3) < 0.001);
    for (t = 2 * S; t < 9 * S; t += 10 * MS) {
        unsigned u = gpu_sensor_percent(&b, t, 7, &we);

        CHECK(u >= 29 && u <= 31);
        CHECK(we <= t && t - we < GPU_SAMPLE_NS);
        sum += u;
        n++;
    }
    /* Dithered whole percents average out to the true share. */
    CHECK(absd((double)sum / n - 30.0) < 0.3);
    /* Work that just started is not reported until its sample period is complete. */
    gpu_busy_reset(&b);
    gpu_busy_add(&b, 60 * GPU_SAMPLE_NS, 60 * GPU_SAMPLE_NS + 50 * MS);
    CHECK(gpu_sensor_percent(&b, 60 * GPU_SAMPLE_NS + 60 * MS, 7, NULL) == 0);
    CHECK(gpu_sensor_percent(&b, 61 * GPU_SAMPLE_NS, 7, NULL) >= 4);
    /* Overlapping kernels count once. */
    gpu_busy_reset(&b);
    gpu_busy_add(&b, 0, 10 * MS);
    gpu_busy_add(&b, 5 * MS, 12 * MS);
    CHECK_EQ_U64(atomic_load(&b.total), 12 * MS);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

/*
 * Kernel durations of different processes are unrelated: no draw of one
 * generator appears among another's, for neighbouring pids (the fake: stream
 * 0 of seed pid) and neighbouring seeds and processes (the plant). States
 * that differ by a multiple of splitmix64's increment, as pid x increment
 * or seed x increment + index did, replay one sequence a few draws apart.
 */
static void test_rand_streams(void)
{
    enum { GENS = 24, DRAWS = 512 };
    static uint64_t v[GENS * DRAWS];
    int n = 0, same = 0;

    for (int g = 0; g < GENS; g++) {
        uint64_t st = g < 8 ? gpu_rand_seed(4000 + (uint64_t)g, 0)
                            : gpu_rand_seed(1 + (uint64_t)(g - 8) / 4, (uint64_t)(g - 8) % 4);

        for (int k = 0; k < DRAWS; k++)
            v[n++] = gpu_rand_next(&st);
    }
    qsort(v, (size_t)n, sizeof(v[0]), cmp_u64);
    for (int i = 1; i < n; i++)
        same += v[i] == v[i - 1];
    CHECK(same == 0);
}

/* The engine's records: who started what when (owner, start), and what finished. */
static struct {
    int n, finished;
    int owner[64];
    uint64_t start[64], end[64];
} ran;

static void ran_started(void *ctx, int owner, uint64_t start, uint64_t end)
{
    (void)ctx;
    if (ran.n < 64) {
        ran.owner[ran.n] = owner;
        ran.start[ran.n] = start;
        ran.end[ran.n] = end;
    }
    ran.n++;
}

static void ran_finished(void *ctx, int owner, uint32_t stream)
{
    (void)ctx;
    (void)owner;
    (void)stream;
    ran.finished++;
}

/* Kernels the engine runs now. */
static int running_in(const gpu_sched *e)
{
    int n = 0;

    for (int i = 0; i < GPU_CONCURRENT; i++)
        n += e->running[i] != 0;
    return n;
}

/* The time-sliced engine shared by the plant and the fake driver. */
static void test_engine(void)
{
    static gpu_sched e;
    const gpu_sched_hooks h = {.started = ran_started, .finished = ran_finished};

    /* Small grids of one process run side by side; another process waits for the engine. */
    memset(&e, 0, sizeof(e));
    memset(&ran, 0, sizeof(ran));
    CHECK(gpu_sched_submit(&e, 1, 0, true, 10 * MS, 0, &h) == 0);
    CHECK(gpu_sched_submit(&e, 1, 1, true, 10 * MS, 1 * MS, &h) == 1);
    CHECK(gpu_sched_submit(&e, 2, 0, true, 10 * MS, 2 * MS, &h) == 0);
    CHECK(ran.n == 2 && ran.start[1] == 1 * MS);
    gpu_sched_advance(&e, 30 * MS, &h);
    CHECK(ran.n == 3 && ran.owner[2] == 2 && ran.start[2] == 11 * MS);
    CHECK(ran.finished == 3);

    /*
     * Eight streams of one process: small grids all run at once and NVML's
     * busy time is the wall time with any of them running (2 ms for eight
     * 2 ms kernels); full grids run one after another (16 ms).
     */
    for (int small = 0; small <= 1; small++) {
        static gpu_busy b;
        uint64_t t = 0;

        memset(&e, 0, sizeof(e));
        memset(&ran, 0, sizeof(ran));
        gpu_busy_reset(&b);
        for (uint32_t st = 0; st < 8; st++)
            CHECK(gpu_sched_submit(&e, 0, st, small, 2 * MS, 0, &h) == st);
        gpu_sched_advance(&e, 100 * MS, &h);
        CHECK(ran.n == 8 && ran.finished == 8);
        for (int k = 0; k < 8; k++) {
            CHECK_EQ_U64(ran.start[k], small ? 0 : (uint64_t)k * 2 * MS);
            gpu_busy_add(&b, ran.start[k], ran.end[k]);
            t = ran.end[k] > t ? ran.end[k] : t;
        }
        CHECK_EQ_U64(atomic_load(&b.total), small ? 2 * MS : 16 * MS);
        CHECK_EQ_U64(t, small ? 2 * MS : 16 * MS);
    }

    /* One stream runs its kernels in order, also small grids. */
    memset(&e, 0, sizeof(e));
    memset(&ran, 0, sizeof(ran));
    CHECK(gpu_sched_submit(&e, 0, 4, true, 1 * MS, 0, &h) == 0);
    CHECK(gpu_sched_submit(&e, 0, 4, true, 1 * MS, 0, &h) == 1);
    CHECK(ran.n == 1);
    /* The stream's last kernel ends 2 ms from now at the earliest; its first at 1 ms. */
    CHECK_EQ_U64(gpu_sched_wait(&e, 0, 1, 4), 2 * MS);
    CHECK_EQ_U64(gpu_sched_wait(&e, 0, 1, GPU_WAIT_ALL), 1 * MS);
    CHECK_EQ_U64(gpu_sched_wait(&e, 0, 0, GPU_WAIT_OLDEST), 1 * MS);
    gpu_sched_advance(&e, 1 * MS, &h);
    CHECK_EQ_U64(gpu_sched_wait(&e, 0, 0, 4), 0);
    CHECK(ran.n == 2 && ran.start[1] == 1 * MS);
    gpu_sched_advance(&e, 2 * MS, &h);
    CHECK_EQ_U64(gpu_sched_wait(&e, 0, 1, GPU_WAIT_ALL), 0);

    /*
     * Time slices: two processes with full grids queued take turns at about
     * 1 ms, a slice running on while its owner has work (0.3 ms kernels: four
     * of them, as the slice ends during the fourth), not one kernel each.
     */
    memset(&e, 0, sizeof(e));
    memset(&ran, 0, sizeof(ran));
    for (int k = 0; k < 8; k++) {
        CHECK(gpu_sched_submit(&e, 3, 0, false, 300 * US, 0, &h) == k);
        CHECK(gpu_sched_submit(&e, 5, 0, false, 300 * US, 0, &h) == k);
    }
    gpu_sched_advance(&e, 100 * MS, &h);
    CHECK(ran.n == 16);
    for (int k = 0; k < 16; k++) {
        CHECK(ran.owner[k] == (k / 4 % 2 == 0 ? 3 : 5));
        CHECK_EQ_U64(ran.start[k], (uint64_t)k * 300 * US);
    }
    /* Alone, a process keeps the engine past its slice. */
    memset(&e, 0, sizeof(e));
    memset(&ran, 0, sizeof(ran));
    for (int k = 0; k < 6; k++)
        CHECK(gpu_sched_submit(&e, 7, 0, false, 300 * US, 0, &h) == k);
    CHECK(gpu_sched_submit(&e, 8, 0, false, 300 * US, 1400 * US, &h) == 0);
    gpu_sched_advance(&e, 100 * MS, &h);
    /* The newcomer gets the engine when the running kernel ends: after 5 of 6. */
    CHECK(ran.n == 7 && ran.owner[5] == 8 && ran.start[5] == 1500 * US);
    CHECK(ran.owner[6] == 7 && ran.start[6] == 1800 * US);

    /* A full queue refuses; a process that died loses its kernels; repair recounts. */
    memset(&e, 0, sizeof(e));
    memset(&ran, 0, sizeof(ran));
    for (int k = 0; k < GPU_QUEUE; k++)
        CHECK(gpu_sched_submit(&e, 9, (uint32_t)k % 2, false, 1 * MS, 0, &h) == k);
    CHECK(gpu_sched_submit(&e, 9, 0, false, 1 * MS, 0, &h) == -1);
    CHECK(gpu_sched_submit(&e, 10, 0, false, 1 * MS, 0, &h) == 0);
    e.waiting = 3;
    e.running[0] = 0;
    gpu_sched_repair(&e);
    CHECK_EQ_U64(e.waiting, GPU_QUEUE);
    CHECK_EQ_U64(e.running[0], 1);
    CHECK(gpu_sched_sane(&e));
    gpu_sched_drop(&e, 9);
    CHECK_EQ_U64(e.waiting, 1);
    CHECK_EQ_U64(gpu_sched_wait(&e, 9, 5, GPU_WAIT_ALL), 0);
    gpu_sched_advance(&e, 500 * US, &h);
    CHECK(ran.n == 2 && ran.owner[1] == 10 && ran.start[1] == 0);
    CHECK_EQ_U64(gpu_sched_next_end(&e), 1 * MS);

    /* Garbage written into the engine (the fake's lives in a shared file) is found and repaired. */
    e.owner = 1000;
    CHECK(!gpu_sched_sane(&e));
    gpu_sched_repair(&e);
    CHECK(gpu_sched_sane(&e) && e.owner == 0);
    e.q[3].tail = e.q[3].head + GPU_QUEUE + 7;
    CHECK(!gpu_sched_sane(&e));
    gpu_sched_repair(&e);
    CHECK(gpu_sched_sane(&e) && e.q[3].head == e.q[3].tail);
    memset(&e, 0, sizeof(e));
    CHECK(gpu_sched_submit(&e, 2, 0, false, UINT64_MAX, 0, &h) == 0);
    CHECK_EQ_U64(gpu_sched_next_end(&e), GPU_KERNEL_MAX_NS);
    e.q[2].k[0].end = UINT64_MAX;
    CHECK(!gpu_sched_sane(&e));
    gpu_sched_repair(&e);
    CHECK(gpu_sched_sane(&e) && gpu_sched_next_end(&e) == GPU_KERNEL_MAX_NS);
}

/*
 * MPS (fake_gpu.h): the clients of one daemon run at the same time, each on
 * its share of the SMs; without MPS, or across daemons, processes take turns.
 */
static void test_engine_mps(void)
{
    static gpu_sched e;
    const gpu_sched_hooks h = {.started = ran_started, .finished = ran_finished};

    /* Four clients at 25 %: full grids all start at 0 and run four times as long. */
    memset(&e, 0, sizeof(e));
    memset(&ran, 0, sizeof(ran));
    for (int o = 0; o < 4; o++) {
        gpu_sched_set_client(&e, o, 77, 250);
        CHECK(gpu_sched_submit(&e, o, 0, false, 1 * MS, 0, &h) == 0);
    }
    CHECK(ran.n == 4);
    for (int k = 0; k < 4; k++)
        CHECK(ran.start[k] == 0 && ran.end[k] == 4 * MS);
    /* Small grids fit in the share: they run in their own time. */
    for (int o = 0; o < 4; o++)
        CHECK(gpu_sched_submit(&e, o, 1, true, 1 * MS, 0, &h) == 1);
    gpu_sched_advance(&e, 100 * MS, &h);
    CHECK(ran.n == 8 && ran.finished == 8);
    for (int k = 4; k < 8; k++)
        CHECK(ran.start[k] == 4 * MS && ran.end[k] == 5 * MS);

    /* Shares past the whole GPU: 60 % and 60 % do not run at once; the first waits for nothing. */
    memset(&e, 0, sizeof(e));
    memset(&ran, 0, sizeof(ran));
    gpu_sched_set_client(&e, 1, 5, 600);
    gpu_sched_set_client(&e, 2, 5, 600);
    CHECK(gpu_sched_submit(&e, 1, 0, false, 6 * MS, 0, &h) == 0);
    CHECK(gpu_sched_submit(&e, 2, 0, false, 6 * MS, 0, &h) == 0);
    gpu_sched_advance(&e, 100 * MS, &h);
    CHECK(ran.n == 2 && ran.start[0] == 0 && ran.end[0] == 10 * MS);
    CHECK(ran.owner[1] == 2 && ran.start[1] == 10 * MS && ran.end[1] == 20 * MS);
    CHECK(gpu_sched_sane(&e));

    /* Clients of two daemons, and a process that is no client, take turns. */
    memset(&e, 0, sizeof(e));
    memset(&ran, 0, sizeof(ran));
    gpu_sched_set_client(&e, 1, 5, 500);
    gpu_sched_set_client(&e, 2, 6, 500);
    CHECK(gpu_sched_submit(&e, 1, 0, false, 1 * MS, 0, &h) == 0);
    CHECK(gpu_sched_submit(&e, 2, 0, false, 1 * MS, 0, &h) == 0);
    CHECK(gpu_sched_submit(&e, 3, 0, false, 1 * MS, 0, &h) == 0);
    gpu_sched_advance(&e, 100 * MS, &h);
    CHECK(ran.n == 3 && ran.start[1] == 2 * MS && ran.start[2] == 4 * MS);

    /*
     * The daemon's slice: two 50 % clients with work run side by side, and a
     * process that is no client gets the GPU once the slice is over.
     */
    memset(&e, 0, sizeof(e));
    memset(&ran, 0, sizeof(ran));
    gpu_sched_set_client(&e, 1, 5, 500);
    gpu_sched_set_client(&e, 2, 5, 500);
    for (int k = 0; k < 4; k++) {
        CHECK(gpu_sched_submit(&e, 1, 0, false, 300 * US, 0, &h) == k);
        CHECK(gpu_sched_submit(&e, 2, 0, false, 300 * US, 0, &h) == k);
    }
    CHECK(gpu_sched_submit(&e, 3, 0, false, 300 * US, 0, &h) == 0);
    gpu_sched_advance(&e, 100 * MS, &h);
    CHECK(ran.n == 9);
    /* Each client's 0.6 ms kernels: two side by side at 0 and 0.6 ms; the slice ends at 1 ms. */
    CHECK(ran.start[0] == 0 && ran.start[1] == 0 && ran.start[2] == 600 * US &&
          ran.start[3] == 600 * US);
    CHECK(ran.owner[4] == 3 && ran.start[4] == 1200 * US);
    /* A client's share is no bigger than the GPU; junk is the whole GPU. */
    gpu_sched_set_client(&e, 4, 5, 5000);
    CHECK_EQ_U64(e.q[4].share_pm, 1000);
    /* Repair keeps the slice's clients' kernels running. */
    memset(&e, 0, sizeof(e));
    memset(&ran, 0, sizeof(ran));
    gpu_sched_set_client(&e, 1, 5, 250);
    gpu_sched_set_client(&e, 2, 5, 250);
    CHECK(gpu_sched_submit(&e, 1, 0, false, 1 * MS, 0, &h) == 0);
    CHECK(gpu_sched_submit(&e, 2, 0, false, 1 * MS, 0, &h) == 0);
    gpu_sched_repair(&e);
    CHECK(gpu_sched_sane(&e) && running_in(&e) == 2);
}

/* Settling is counted in sample periods: 18 of them (3 s) come to 3.000000006 s. */
#define SETTLE_GOAL_S 3.000001

static void test_grid(void)
{
    static const unsigned limits[] = {10, 30, 50, 70, 90};
    static const int procs[] = {1, 2, 4};
    double sum = 0, worst = 0, worst_settle = 0, worst_first = -100, worst_low = 100;
    int n = 0;

    printf("limit procs claims kernels |  share  error  first s  settling (band)  lowest s\n");
    for (size_t a = 0; a < sizeof(limits) / sizeof(limits[0]); a++) {
        for (size_t b = 0; b < sizeof(procs) / sizeof(procs[0]); b++) {
            for (int nc = 1; nc <= 2; nc++) {
                for (int k = 0; k < PLANT_K_COUNT; k++) {
                    struct plant_cell cell;

                    CHECK(plant_grid_cell(limits[a], procs[b], nc, k, GRID_RUN, 1, &cell) == 0);
                    for (int c = 0; c < nc; c++) {
                        double target = c == 0 ? limits[a] : 100 - limits[a];
                        double e = absd(cell.share[c] - target);
                        bool settled = cell.settling_s[c] <= SETTLE_GOAL_S;

                        sum += e;
                        n++;
                        printf("%4.0f%% %5d %6d %7s | %6.2f%% %+5.2f %6.1f%%  %5.2f s (%4.1f) "
                               "%6.1f%%%s\n",
                               target, procs[b], nc, plant_kernels_name(k), cell.share[c],
                               cell.share[c] - target, cell.first_s[c], cell.settling_s[c],
                               cell.band[c], cell.low[c],
                               settled ? "" : "  MISSED");
                        worst = e > worst ? e : worst;
                        if (cell.first_s[c] - target > worst_first)
                            worst_first = cell.first_s[c] - target;
                        CHECK(e <= 3);
                        CHECK(cell.first_s[c] <= target + 5);
                        if (cell.settling_s[c] > worst_settle)
                            worst_settle = cell.settling_s[c];
                        CHECK(settled);
                        /*
                         * Once settled, no second falls 5 points short, or more than a
                         * second of such kernels varies by itself (the band is for
                         * two-second means: x sqrt 2).
                         */
                        CHECK(cell.low[c] >= target - fmax(5, cell.band[c] * M_SQRT2));
                        if (cell.band[c] * M_SQRT2 <= 5 && cell.low[c] - target < worst_low)
                            worst_low = cell.low[c] - target;
                    }
                }
            }
        }
    }
    printf("grid: %d claim runs, mean absolute error %.2f points (goal <= 1), worst %.2f (<= 3), "
           "worst first second %+.2f points (<= +5), lowest second once settled %+.2f points "
           "(>= -5; kernels that vary more by themselves: their spread); settling <= %.2f s "
           "(<= 3)\n",
           n, sum / n, worst, worst_first, worst_low, worst_settle);
    CHECK(sum / n <= 1.0);
}

/*
 * One process launching from 1, 4 or 8 threads, each into a stream of its
 * own, full grids (one at a time on the GPU) or small ones (side by side),
 * at 10, 30, 70 %, kernels all alike (as in real time): the goals of the
 * grid, and no second above the limit + 5 (a whole kernel more for 20 ms
 * ones). While small grids overlap, NVML
 * sees less busy time per launch than once throttling spreads them out; the
 * estimate must not follow the overlap down and then overshoot.
 */
static void test_streams(void)
{
    static const unsigned limits[] = {10, 30, 70};
    static const int streams[] = {1, 4, 8};
    static const uint64_t means[] = {100 * US, 2 * MS, 20 * MS};
    double sum = 0, worst = 0, worst_settle = 0, worst_first = -100;
    int n = 0;

    printf("limit streams grid  kernels |  share  error  first s  busiest s  settling (band)  "
           "lowest s\n");
    for (size_t a = 0; a < sizeof(limits) / sizeof(limits[0]); a++) {
        for (size_t b = 0; b < sizeof(streams) / sizeof(streams[0]); b++) {
            for (int small = 0; small <= 1; small++) {
                for (int k = 0; k < PLANT_K_MIX; k++) {
                    struct plant_cell cell;
                    double target = limits[a], e, quantum;
                    bool settled, peak_ok;

                    CHECK(plant_streams_cell(limits[a], streams[b], small, k, 0, GRID_RUN, 1,
                                             &cell) == 0);
                    e = absd(cell.share[0] - target);
                    settled = cell.settling_s[0] <= SETTLE_GOAL_S;
                    sum += e;
                    n++;
                    /* Kernels all alike: a second holds whole ones (20 ms: 2 points). */
                    quantum = 100.0 * (double)means[k] / S;
                    peak_ok = cell.peak[0] <= target + 5 + quantum;
                    printf("%4.0f%% %7d %5s %7s | %6.2f%% %+5.2f %6.1f%%  %6.1f%%    %5.2f s "
                           "(%4.1f) %6.1f%%%s\n",
                           target, streams[b], small ? "small" : "full", plant_kernels_name(k),
                           cell.share[0], cell.share[0] - target, cell.first_s[0], cell.peak[0],
                           cell.settling_s[0], cell.band[0], cell.low[0],
                           settled && e <= 3 && peak_ok ? "" : "  MISSED");
                    worst = e > worst ? e : worst;
                    worst_first = fmax(worst_first, cell.first_s[0] - target);
                    worst_settle = fmax(worst_settle, cell.settling_s[0]);
                    CHECK(e <= 3);
                    CHECK(cell.first_s[0] <= target + 5 + quantum);
                    /* Nor any later second. */
                    CHECK(peak_ok);
                    CHECK(settled);
                    CHECK(cell.low[0] >= target - fmax(5, cell.band[0] * M_SQRT2));
                }
            }
        }
    }
    /*
     * The cell of the issue over twelve seeds (the sensor's dither): 30 %,
     * 8 streams of 2 ms small grids. When refunds filled the bucket and the
     * sums kept the windows of its bursts: busiest second 37.7-39.2 %.
     */
    {
        double peak_max = 0, peak_sum = 0, settle_max = 0;

        for (uint64_t seed = 1; seed <= 12; seed++) {
            struct plant_cell cell;

            CHECK(plant_streams_cell(30, 8, true, PLANT_K_2MS, 0, GRID_RUN, seed, &cell) == 0);
            peak_max = fmax(peak_max, cell.peak[0]);
            peak_sum += cell.peak[0];
            settle_max = fmax(settle_max, cell.settling_s[0]);
            CHECK(absd(cell.share[0] - 30) <= 1);
        }
        printf("30 %%, 8 streams of 2 ms small grids, seeds 1-12: busiest second %.2f%% on "
               "average, %.2f%% at worst; settled within %.2f s\n",
               peak_sum / 12, peak_max, settle_max);
        CHECK(peak_max <= 35);
        CHECK(peak_sum / 12 <= 33);
        CHECK(settle_max <= SETTLE_GOAL_S);
    }
    /*
     * 70 %, 4 and 8 streams of 0.1 ms small grids over twelve seeds. While
     * the refill's 5 ms steps released a process's waiting launches together
     * (each step 35-60 launches, side by side), busy time per launch fell as
     * launches rose and the estimate took 4.2-5.3 s to settle.
     */
    for (int b = 4; b <= 8; b += 4) {
        double settle_max = 0, peak_max = 0;

        for (uint64_t seed = 1; seed <= 12; seed++) {
            struct plant_cell cell;

            CHECK(plant_streams_cell(70, b, true, PLANT_K_100US, 0, GRID_RUN, seed, &cell) == 0);
            settle_max = fmax(settle_max, cell.settling_s[0]);
            peak_max = fmax(peak_max, cell.peak[0]);
            CHECK(absd(cell.share[0] - 70) <= 1);
        }
        printf("70 %%, %d streams of 0.1 ms small grids, seeds 1-12: settled within %.2f s, "
               "busiest second %.2f%%\n", b, settle_max, peak_max);
        CHECK(settle_max <= SETTLE_GOAL_S);
        CHECK(peak_max <= 75);
    }
    printf("streams: %d runs, mean absolute error %.2f points (goal <= 1), worst %.2f (<= 3), "
           "worst first second %+.2f points (<= +5, a kernel more for 20 ms ones), settling <= "
           "%.2f s (<= 3)\n",
           n, sum / n, worst, worst_first, worst_settle);
    CHECK(sum / n <= 1.0);
}

/*
 * The cells hardest to settle, over two more seeds: a GPU fully booked by
 * claims of several processes each, where the claims are held back by
 * their queues as much as by their buckets.
 */
static void test_grid_fully_booked(void)
{
    static const unsigned limits[] = {10, 30, 50, 70, 90};
    static const int procs[] = {2, 4};
    double sum = 0, worst = 0, worst_settle = 0, worst_low = 100;
    int n = 0;

    for (uint64_t seed = 2; seed <= 3; seed++) {
        for (size_t a = 0; a < sizeof(limits) / sizeof(limits[0]); a++) {
            for (size_t b = 0; b < sizeof(procs) / sizeof(procs[0]); b++) {
                for (int nc = 1; nc <= 2; nc++) {
                    for (int k = 0; k < PLANT_K_COUNT; k++) {
                        struct plant_cell cell;

                        if (nc == 1 && limits[a] < 90)
                            continue; /* not fully booked */
                        CHECK(plant_grid_cell(limits[a], procs[b], nc, k, GRID_RUN, seed,
                                              &cell) == 0);
                        for (int c = 0; c < nc; c++) {
                            double target = c == 0 ? limits[a] : 100 - limits[a];
                            double e = absd(cell.share[c] - target);

                            sum += e;
                            n++;
                            worst = e > worst ? e : worst;
                            if (cell.settling_s[c] > worst_settle)
                                worst_settle = cell.settling_s[c];
                            if (cell.band[c] * M_SQRT2 <= 5 && cell.low[c] - target < worst_low)
                                worst_low = cell.low[c] - target;
                            if (e > 3 || cell.settling_s[c] > SETTLE_GOAL_S ||
                                cell.low[c] < target - fmax(5, cell.band[c] * M_SQRT2))
                                printf("fully booked, seed %llu: %.0f%% x %d, %d claim(s), %s: "
                                       "share %.2f%%, settling %.2f s, lowest %.1f%%\n",
                                       (unsigned long long)seed, target, procs[b], nc,
                                       plant_kernels_name(k), cell.share[c], cell.settling_s[c],
                                       cell.low[c]);
                            CHECK(e <= 3);
                            CHECK(cell.settling_s[c] <= SETTLE_GOAL_S);
                            CHECK(cell.low[c] >= target - fmax(5, cell.band[c] * M_SQRT2));
                        }
                    }
                }
            }
        }
    }
    printf("fully booked cells, seeds 2-3: %d claim runs, "
           "mean absolute error %.2f points, worst %.2f, settling <= %.2f s in every run, lowest "
           "second once settled %+.2f points\n",
           n, sum / n, worst, worst_settle, worst_low);
    CHECK(sum / n <= 1.0);
}

static void test_pairs(void)
{
    struct plant_spec s = {.duration_ns = 20 * S, .seed = 3, .nclaims = 2, .nprocs = 2};
    double a, b;

    s.claims[0].limit_percent = 30;
    s.claims[1].limit_percent = 70;
    s.procs[0] = (struct plant_proc_spec){.claim = 0, .kernel_ns = 1 * MS, .sigma = 0.8,
                                          .streams = 2, .depth = 4};
    s.procs[1] = (struct plant_proc_spec){.claim = 1, .kernel_ns = 200 * US, .sigma = 0.8,
                                          .depth = 8, .small_grid = true, .streams = 3};
    CHECK(plant_run(&s, &res) == 0);
    a = plant_mean_share(&res, 0, 5 * S, 20 * S);
    b = plant_mean_share(&res, 1, 5 * S, 20 * S);
    printf("claims at 30/70 on one GPU: %.2f%% / %.2f%%\n", a, b);
    CHECK(absd(a - 30) <= 1);
    CHECK(absd(b - 70) <= 1);

    s.claims[0].limit_percent = 10;
    s.claims[1].limit_percent = 90;
    CHECK(plant_run(&s, &res) == 0);
    a = plant_mean_share(&res, 0, 5 * S, 20 * S);
    b = plant_mean_share(&res, 1, 5 * S, 20 * S);
    printf("claims at 10/90 on one GPU: %.2f%% / %.2f%% (ratio 1:%.2f)\n", a, b, b / a);
    CHECK(b / a >= 9 * 0.9 && b / a <= 9 * 1.1);

    /*
     * 70/30, fully booked by one process each of 20 ms kernels queued two
     * deep: while the 30 % claim's kernel holds the GPU, the 70 % claim's
     * queue is full and its refill must not be lost at the bucket's brim
     * (with a 100 ms bucket it ended 0.6-1.1 points short).
     */
    for (uint64_t seed = 1; seed <= 4; seed++) {
        s = (struct plant_spec){.duration_ns = 30 * S, .seed = seed, .nclaims = 2, .nprocs = 2};
        s.claims[0].limit_percent = 70;
        s.claims[1].limit_percent = 30;
        for (int c = 0; c < 2; c++)
            s.procs[c] = (struct plant_proc_spec){.claim = c, .kernel_ns = 20 * MS, .sigma = 0.5};
        CHECK(plant_run(&s, &res) == 0);
        a = plant_mean_share(&res, 0, 5 * S, 30 * S);
        b = plant_mean_share(&res, 1, 5 * S, 30 * S);
        printf("claims at 70/30, one process each of 20 ms kernels, seed %llu: %.2f%% / %.2f%%\n",
               (unsigned long long)seed, a, b);
        CHECK(absd(a - 70) <= 0.5);
        CHECK(absd(b - 30) <= 0.5);
    }

    /*
     * 30/70, fully booked by one or two processes each of 2 ms kernels that
     * synchronise a stream and queue ten on it, two streams in turn (as
     * compute_test's processes do): seconds whose kernels ran longer than
     * charged leave the 70 % claim engine-bound, and their refill must wait
     * for the seconds whose kernels ran shorter (with the usual 100 ms
     * bucket while contended it ended 0.4-1.0 points short). Real time loses
     * a few tenths more to the host, hence half a point here.
     */
    for (int procs = 1; procs <= 2; procs++) {
        for (uint64_t seed = 1; seed <= 3; seed++) {
            s = (struct plant_spec){.duration_ns = 30 * S, .seed = seed, .nclaims = 2};
            s.claims[0].limit_percent = 30;
            s.claims[1].limit_percent = 70;
            for (int c = 0; c < 2; c++)
                for (int j = 0; j < procs; j++)
                    s.procs[s.nprocs++] = (struct plant_proc_spec){
                        .claim = c, .kernel_ns = 2 * MS, .sigma = 0.8, /* the fake's */
                        .streams = 2, .depth = 10, .synced = true};
            CHECK(plant_run(&s, &res) == 0);
            a = plant_mean_share(&res, 0, 5 * S, 30 * S);
            b = plant_mean_share(&res, 1, 5 * S, 30 * S);
            printf("claims at 30/70, %d synchronising process(es) each of 2 ms kernels, seed "
                   "%llu: %.2f%% / %.2f%%\n",
                   procs, (unsigned long long)seed, a, b);
            CHECK(absd(a - 30) <= 0.5);
            CHECK(absd(b - 70) <= 0.5);
        }
    }
}

/* A limit change arrives with a new process: it must not inherit the old refiller's state. */
static void test_limit_change(void)
{
    struct plant_spec s = {.duration_ns = 25 * S, .seed = 5, .nclaims = 1, .nprocs = 2};
    double before, after;
    uint64_t settle;

    s.claims[0].limit_percent = 30;
    s.procs[0] = (struct plant_proc_spec){.claim = 0, .kernel_ns = 2 * MS, .sigma = 0.5,
                                          .stop_ns = 10 * S};
    s.procs[1] = (struct plant_proc_spec){.claim = 0, .limit_percent = 60, .kernel_ns = 100 * US,
                                          .sigma = 0.5, .depth = 4, .start_ns = 10 * S};
    CHECK(plant_run(&s, &res) == 0);
    before = plant_mean_share(&res, 0, 5 * S, 10 * S);
    after = plant_mean_share(&res, 0, 15 * S, 25 * S);
    settle = plant_settling_ns(&res, 0, 60, 2, 10 * S, 25 * S);
    printf("limit 30 %% -> 60 %% with a new process at 10 s: %.2f%% before, %.2f%% after, "
           "settled in %.2f s, first second %.2f%%\n", before, after, settle / 1e9,
           plant_mean_share(&res, 0, 10 * S, 11 * S));
    CHECK(absd(before - 30) <= 1);
    CHECK(absd(after - 60) <= 1);
    CHECK(settle <= 3 * S);
    CHECK(plant_mean_share(&res, 0, 10 * S, 11 * S) <= 65);
    CHECK(res.refiller_changes[0] == 2);
}

/*
 * Four processes of 0.1 ms kernels starting together at 10 %: the slowest
 * start-up, since only NVML's 1 % steps bound their cost down from the
 * default of the longest kernels and each process gets 2.5 %. Launches that
 * wait when a bound lowers their process's cost are charged the new cost:
 * charged the old one, they held the claim back (settling 2.5-2.8 s).
 */
static void test_short_kernel_start(void)
{
    struct plant_spec s = {.duration_ns = 10 * S, .nclaims = 1, .nprocs = 4};
    double mean = 0, worst = 0;

    s.claims[0].limit_percent = 10;
    for (int j = 0; j < 4; j++)
        s.procs[j] = (struct plant_proc_spec){.claim = 0, .kernel_ns = 100 * US, .sigma = 0.5,
                                              .streams = 2, .depth = 16,
                                              .small_grid = j % 2 == 1};
    for (s.seed = 1; s.seed <= 6; s.seed++) {
        double settle;

        CHECK(plant_run(&s, &res) == 0);
        settle = plant_settling_ns(&res, 0, 10, 2, 0, s.duration_ns) / 1e9;
        mean += settle / 6;
        worst = settle > worst ? settle : worst;
        CHECK(plant_max_share(&res, 0, 0, s.duration_ns) <= 13);
    }
    printf("four processes of 0.1 ms kernels starting at 10 %%, six seeds: settling %.2f s on "
           "average, %.2f s at worst\n", mean, worst);
    CHECK(mean <= 2.2);
    CHECK(worst <= 2.5);
}

static void test_join_and_idle(void)
{
    struct plant_spec s = {.duration_ns = 30 * S, .seed = 9, .nclaims = 1, .nprocs = 2};
    double before, after;

    s.claims[0].limit_percent = 30;
    s.procs[0] = (struct plant_proc_spec){.claim = 0, .kernel_ns = 1 * MS, .sigma = 0.5};
    s.procs[1] = (struct plant_proc_spec){.claim = 0, .kernel_ns = 100 * US, .sigma = 0.5,
                                          .start_ns = 12 * S};
    CHECK(plant_run(&s, &res) == 0);
    before = plant_mean_share(&res, 0, 5 * S, 12 * S);
    after = plant_mean_share(&res, 0, 15 * S, 30 * S);
    printf("process joining at 12 s: claim share %.2f%% before, %.2f%% after, worst second "
           "after the join %.2f%%\n", before, after, plant_max_share(&res, 0, 12 * S, 30 * S));
    CHECK(absd(before - 30) <= 1);
    CHECK(absd(after - 30) <= 1);
    CHECK(plant_max_share(&res, 0, 12 * S, 30 * S) <= 35);
    CHECK(res.launches[1] > 0);

    /* A process that idles 2 s out of every 5 s: busy phases at the limit, no burst after idling. */
    s.nprocs = 1;
    s.procs[0] = (struct plant_proc_spec){.claim = 0, .kernel_ns = 2 * MS, .sigma = 0.5,
                                          .busy_ns = 3 * S, .idle_ns = 2 * S};
    CHECK(plant_run(&s, &res) == 0);
    before = plant_mean_share(&res, 0, 10 * S, 30 * S);
    printf("process busy 3 s / idle 2 s at 30 %%: %.2f%% (ideal 18 %%), busiest second %.2f%%\n",
           before, plant_max_share(&res, 0, 1 * S, 30 * S));
    CHECK(absd(before - 18) <= 1.5);
    /* A busy phase starts on a full bucket: limit + 5 points, plus its burst (3 points). */
    CHECK(plant_max_share(&res, 0, 1 * S, 30 * S) <= 38);

    /*
     * The same with 20 ms kernels next to a busy claim, over four seeds: a
     * claim of long kernels keeps a deeper bucket while the other claim is
     * busy, but not while it idles (kept deep, the busiest seconds average
     * 39 %).
     */
    {
        double busiest = 0, mean = 0;

        s.nclaims = s.nprocs = 2;
        s.claims[1].limit_percent = 50;
        s.procs[0].kernel_ns = 20 * MS;
        s.procs[1] = (struct plant_proc_spec){.claim = 1, .kernel_ns = 2 * MS, .sigma = 0.5};
        for (s.seed = 9; s.seed < 13; s.seed++) {
            CHECK(plant_run(&s, &res) == 0);
            mean += plant_mean_share(&res, 0, 10 * S, 30 * S) / 4;
            busiest += plant_max_share(&res, 0, 1 * S, 30 * S) / 4;
        }
        printf("process of 20 ms kernels busy 3 s / idle 2 s at 30 %% next to a busy claim, four "
               "seeds: %.2f%%, busiest second %.2f%% on average\n", mean, busiest);
        CHECK(absd(mean - 18) <= 1.5);
        CHECK(busiest <= 38);
    }
}

static void test_work_conserving(void)
{
    struct plant_spec s = {.duration_ns = 30 * S, .seed = 11, .nclaims = 2, .nprocs = 2};
    double alone, shared, other;

    s.claims[0] = (struct plant_claim_spec){.limit_percent = 30,
                                            .policy = VGPU_POLICY_WORK_CONSERVING};
    s.claims[1].limit_percent = 50;
    s.procs[0] = (struct plant_proc_spec){.claim = 0, .kernel_ns = 1 * MS, .sigma = 0.5,
                                          .depth = 4};
    s.procs[1] = (struct plant_proc_spec){.claim = 1, .kernel_ns = 1 * MS, .sigma = 0.5,
                                          .start_ns = 15 * S};
    CHECK(plant_run(&s, &res) == 0);
    alone = plant_min_share(&res, 0, 2 * S, 15 * S);
    shared = plant_mean_share(&res, 0, 17 * S, 30 * S);
    other = plant_mean_share(&res, 1, 17 * S, 30 * S);
    printf("workConserving 30%%: >= %.2f%% alone from 2 s, %.2f%% (other claim %.2f%%) "
           "contended, back within %.2f s, lowest second %.2f%%\n", alone, shared, other,
           plant_settling_ns(&res, 0, 30, 2, 15 * S, 30 * S) / 1e9,
           plant_min_share(&res, 0, 15 * S, 30 * S));
    CHECK(alone >= 95);
    CHECK(absd(shared - 30) <= 1);
    CHECK(absd(other - 50) <= 1);
    CHECK(plant_settling_ns(&res, 0, 30, 2, 15 * S, 30 * S) <= 2 * S);
    CHECK(plant_min_share(&res, 0, 15 * S, 30 * S) >= 25);

    /* High priority: contention with the other claim never throttles it. */
    s.claims[0].high_priority = true;
    CHECK(plant_run(&s, &res) == 0);
    shared = plant_mean_share(&res, 0, 22 * S, 30 * S);
    printf("workConserving 30%%, high priority: %.2f%% contended\n", shared);
    CHECK(shared > 45);

    /* disabled: never limited. */
    s.claims[0] = (struct plant_claim_spec){.limit_percent = 30, .policy = VGPU_POLICY_DISABLED};
    s.procs[1].start_ns = 0;
    CHECK(plant_run(&s, &res) == 0);
    CHECK(plant_mean_share(&res, 0, 20 * S, 30 * S) > 45);
}

/*
 * Processes SIGKILLed and replaced at random instants (compute_test's kills
 * case on the plant): two processes of a 30 % claim keep the GPU busy;
 * every 100-400 ms one of them, chosen at random, stops where it is (a
 * launch it was charged for and never made stays owed; as refiller, its
 * lease is taken over) and a new one starts. With other_limit, a second
 * claim at that limit keeps one process of 2 ms kernels busy beside it all
 * along (contention). *kills_end is when the last kill was.
 */
static void kill_spec(struct plant_spec *s, uint64_t seed, uint64_t kernel_ns, int depth,
                      uint64_t min_gap_ns, uint64_t max_gap_ns, uint64_t kill_s,
                      unsigned other_limit, uint64_t *kills_end)
{
    uint64_t rng = seed, t = 0;
    int lane[2] = {0, 1};

    memset(s, 0, sizeof(*s));
    s->duration_ns = kill_s * S + 10 * S;
    s->seed = seed;
    s->nclaims = 1;
    s->claims[0].limit_percent = 30;
    for (int j = 0; j < 2; j++)
        s->procs[s->nprocs++] = (struct plant_proc_spec){.claim = 0, .kernel_ns = kernel_ns,
                                                          .sigma = 0.5, .streams = 2,
                                                          .depth = depth};
    if (other_limit != 0) {
        s->nclaims = 2;
        s->claims[1].limit_percent = other_limit;
        s->procs[s->nprocs++] = (struct plant_proc_spec){.claim = 1, .kernel_ns = 2 * MS,
                                                          .sigma = 0.5};
    }
    for (;;) {
        int j = (int)(gpu_rand_next(&rng) % 2);

        t += min_gap_ns + gpu_rand_next(&rng) % (max_gap_ns - min_gap_ns);
        if (t >= kill_s * S || s->nprocs == PLANT_MAX_PROCS)
            break;
        s->procs[lane[j]].stop_ns = t;
        s->procs[s->nprocs] = s->procs[lane[j]];
        s->procs[s->nprocs].stop_ns = 0;
        s->procs[s->nprocs].start_ns = t;
        lane[j] = s->nprocs++;
        *kills_end = t;
    }
}

/* What one second of claim target's kernels (mean mean_ns, log-normal sigma) varies by itself. */
static double second_spread(double target, double mean_ns, double sigma)
{
    return target * sqrt(exp(sigma * sigma) - 1) / sqrt(target / 100 * 1e9 / mean_ns);
}

static void test_kills(void)
{
    static struct plant_spec s;
    uint64_t end, settle;
    double during = 0, top, low, band;

    /*
     * Until NVML has measured it, a process is charged the longest kernel
     * planned for (VGPU_CTL_DEFAULT_COST_NS), so that replacing processes
     * can never raise the claim's share: with 2 ms kernels, a claim whose
     * processes all are that new runs at 2/20 of its limit (3 %), the floor
     * here. Above it, nothing may be lost: no refill to a dead refiller's
     * lease, no launch a dead process was charged for and never made, and
     * what NVML shows a process was charged beyond its GPU time comes back.
     * (Without those three: 2.9-3.4 % over five seeds; with them 4.9-5.8 %.)
     * Two seconds of 2 ms kernels at 30 % vary by 0.9 points by themselves:
     * the settling band is 4 sigma, as in the grid.
     */
    band = 4 * second_spread(30, 2e6, 0.5) / M_SQRT2;
    for (uint64_t seed = 1; seed <= 5; seed++) {
        kill_spec(&s, seed, 2 * MS, 10, 100 * MS, 400 * MS, 6, 0, &end);
        CHECK(s.nprocs >= 20);
        CHECK(plant_run(&s, &res) == 0);
        during += plant_mean_share(&res, 0, 1 * S, end) / 5;
        top = plant_max_share(&res, 0, 0, s.duration_ns);
        settle = plant_settling_ns(&res, 0, 30, band, end, s.duration_ns);
        low = plant_min_share(&res, 0, end + 2 * S, s.duration_ns);
        printf("30 %%, %d processes, one SIGKILLed every 100-400 ms for 6 s (seed %llu): %.2f%% "
               "during the kills, busiest second %.2f%%, within %.1f points %.2f s after them, "
               "lowest second from 2 s after them %.2f%%\n", s.nprocs, (unsigned long long)seed,
               plant_mean_share(&res, 0, 1 * S, end), top, band, settle / 1e9, low);
        CHECK(top <= 35);
        CHECK(settle <= 3 * S);
        CHECK(low >= 25);
    }
    printf("30 %%, processes SIGKILLed: %.2f%% during the kills over five seeds (floor 3 %%)\n",
           during);
    CHECK(during >= 4.25);

    /*
     * A hostile container killing its own processes on purpose: kernels of
     * each class (up to the longest planned for), deep queues, processes
     * replaced every 50-500 ms. It gains nothing: the kill phase stays
     * below the limit, and no second goes above the limit + 5 points, plus
     * what one second of such kernels varies by itself (a limiter that
     * counts launches cannot know a kernel's duration before it runs;
     * without kills, two processes of 20 ms kernels reach 35.2 %).
     */
    for (int i = 0; i < 6; i++) {
        static const uint64_t kernel[3] = {100 * US, 2 * MS, 20 * MS};
        /*
         * Alone, and next to a claim at 50 % busy all along: every new
         * process is charged the longest kernel planned for, so the claim
         * keeps its deeper contended bucket; that too gains nothing.
         */
        unsigned other = i < 3 ? 0 : 50;
        int k = i % 3;
        double allowed = 35 + second_spread(30, (double)kernel[k], 0.5);

        for (uint64_t seed = 2; seed <= 3; seed++) {
            kill_spec(&s, seed * 31 + (uint64_t)k, kernel[k], PLANT_MAX_DEPTH, 50 * MS,
                      500 * MS, 8, other, &end);
            CHECK(plant_run(&s, &res) == 0);
            top = plant_max_share(&res, 0, 0, s.duration_ns);
            during = plant_mean_share(&res, 0, 0, end);
            printf("hostile kills%s, %s kernels, seed %llu: %d processes, %.2f%% during the "
                   "kills, busiest second %.2f%% (<= %.2f)\n",
                   other != 0 ? " next to a busy claim" : "",
                   plant_kernels_name((enum plant_kernels)k), (unsigned long long)seed, s.nprocs,
                   during, top, allowed);
            CHECK(during <= 30);
            CHECK(top <= allowed);
        }
    }
}

static void test_bad_spec(void)
{
    struct plant_spec s = {.duration_ns = 1 * S, .nclaims = 1, .nprocs = 1};
    struct plant_cell cell;

    s.procs[0].claim = 3;
    s.procs[0].kernel_ns = MS;
    CHECK(plant_run(&s, &res) == -1);
    s.procs[0].claim = 0;
    s.claims[0].limit_percent = 101;
    CHECK(plant_run(&s, &res) == -1);
    s.claims[0].limit_percent = 10;
    s.procs[0].streams = PLANT_MAX_STREAMS + 1;
    CHECK(plant_run(&s, &res) == -1);
    CHECK(plant_grid_cell(0, 1, 1, PLANT_K_2MS, S, 1, &cell) == -1);
    CHECK(plant_grid_cell(30, 1, 3, PLANT_K_2MS, S, 1, &cell) == -1);
}

/* The refiller's work due by t: a refill every 5 ms, the rate set every 100 ms. */
static void refill_until(struct vgpu_region_device *d, double rate, uint64_t t,
                         uint64_t *next_refill, uint64_t *next_rate)
{
    while (*next_refill <= t) {
        if (*next_rate <= *next_refill) {
            vgpu_bucket_set_rate(d, rate, VGPU_BUCKET_DEPTH_NS, *next_refill);
            *next_rate += 100 * MS;
        }
        vgpu_bucket_refill(d, *next_refill);
        *next_refill += 5 * MS;
    }
}

/*
 * GPU time admitted in one simulated second to a process that launches
 * 1 ms kernels back to back on d, with the refiller refilling every 5 ms and
 * setting the rate every 100 ms, as the library's helper thread does. A
 * charged launch waits as limiter.c's does: looking at the bucket at least
 * every VGPU_WAIT_MAX_NS and going early once it reads paid.
 */
static double admitted_in_a_second(struct vgpu_region_device *d, double rate, uint64_t t0)
{
    uint64_t t = t0, next_refill = t0, next_rate = t0;
    double busy = 0;

    while (t < t0 + 1000 * MS) {
        uint64_t wait, until;

        refill_until(d, rate, t, &next_refill, &next_rate);
        wait = vgpu_bucket_take(d, MS);
        for (until = t + wait; t < until && !vgpu_bucket_paid(d);) {
            t = until - t < VGPU_WAIT_MAX_NS ? until : t + VGPU_WAIT_MAX_NS;
            refill_until(d, rate, t, &next_refill, &next_rate);
        }
        busy += (double)MS;
        t += MS;
    }
    return busy / 1e9;
}

/*
 * The bucket lives in a region the claim's containers can write. Whatever
 * they write there, the refiller's next period restores the bucket: at most
 * one controller period (100 ms) of free GPU time, never a raised limit, and
 * never a hang (waits are bounded).
 */
static void test_hostile_bucket(void)
{
    static const struct {
        const char *name;
        int field;
        uint64_t value;
    } writes[] = {
        {"tokens = INT64_MAX", 0, (uint64_t)INT64_MAX},
        {"tokens = INT64_MIN", 0, (uint64_t)INT64_MIN},
        {"tokens = open", 0, (uint64_t)VGPU_BUCKET_OPEN},
        {"capacity = UINT64_MAX", 1, UINT64_MAX},
        {"rate = UINT64_MAX", 2, UINT64_MAX},
        {"last refill = UINT64_MAX", 3, UINT64_MAX},
        {"last refill = 0", 3, 0},
    };
    const double rate = 0.3;

    for (size_t i = 0; i < sizeof(writes) / sizeof(writes[0]); i++) {
        struct vgpu_region_device d;
        uint64_t t0 = 10000 * MS;
        double share;

        memset(&d, 0, sizeof(d));
        vgpu_bucket_init(&d, rate, t0 - 1000 * MS);
        switch (writes[i].field) {
        case 0: d.bucket_tokens = (int64_t)writes[i].value; break;
        case 1: d.bucket_capacity = writes[i].value; break;
        case 2: d.bucket_refill_rate = writes[i].value; break;
        default: d.bucket_last_refill_ns = writes[i].value; break;
        }
        share = admitted_in_a_second(&d, rate, t0);
        printf("hostile bucket, %s: %.1f %% of the next second at a 30 %% limit\n", writes[i].name,
               100 * share);
        /* The limit, the bucket's depth (100 ms at the rate) and one free controller period. */
        CHECK(share <= rate + rate * 0.1 + 0.1 + 0.001);
        /* The second after: back at the limit. */
        share = admitted_in_a_second(&d, rate, t0 + 1000 * MS);
        CHECK(share <= rate + 0.01);
    }
    /* A charge that leaves the balance at INT64_MIN: the longest wait, not an overflow. */
    {
        struct vgpu_region_device d;

        memset(&d, 0, sizeof(d));
        vgpu_bucket_init(&d, rate, 0);
        d.bucket_tokens = INT64_MIN + (int64_t)MS;
        CHECK(vgpu_bucket_take(&d, MS) == VGPU_WAIT_LIMIT_NS);
    }
    /*
     * A waiting launch is re-priced at whatever cost its slot shows, which
     * the container can write: a round trip through any costs the refiller
     * could set gives nothing back that was not charged, garbage costs never
     * lift the balance above the capacity, and no launch is told to wait
     * longer than VGPU_WAIT_LIMIT_NS.
     */
    for (int garbage = 0; garbage <= 1; garbage++) {
        struct vgpu_region_device d;
        uint64_t rng = 99, charged = 20 * MS;
        int64_t before;

        memset(&d, 0, sizeof(d));
        vgpu_bucket_init(&d, rate, 1000);
        for (int k = 0; k < 10; k++)
            (void)vgpu_bucket_take(&d, 20 * MS);
        before = d.bucket_tokens;
        for (int k = 0; k < 1000; k++) {
            uint64_t r = gpu_rand_next(&rng), cost;

            cost = garbage && k % 3 == 0 ? UINT64_MAX >> (r % 64) : 1 + r % (10 * S);
            CHECK(vgpu_bucket_reprice(&d, charged, cost, r % (20 * S)) <= VGPU_WAIT_LIMIT_NS);
            CHECK(d.bucket_tokens <= (int64_t)d.bucket_capacity);
            charged = cost;
        }
        (void)vgpu_bucket_reprice(&d, charged, 20 * MS, 0);
        if (!garbage)
            CHECK(d.bucket_tokens == before);
        printf("waiting launch re-priced 1000 times at %s costs: balance %.1f ms (%.1f ms before)\n",
               garbage ? "garbage" : "random", (double)d.bucket_tokens / 1e6, (double)before / 1e6);
    }
}

/*
 * The refiller reads each process's launch count from the process's slot,
 * which the container can write, and NVML's readings. Whatever garbage they
 * hold (counts at UINT64_MAX, going back to 0, jumping at random; readings of
 * 0 or 100 % with windows ending anywhere; balances at either end of their
 * range), the estimate stays a finite cost
 * within its clamps, refunds stay finite and never lift the balance above
 * the capacity, and once the writes stop the process is charged the default
 * again (a count that went back is a new process).
 */
static void test_hostile_counters(void)
{
    static struct vgpu_ctl c;
    struct vgpu_region_device d;
    uint64_t rng = 42, t = 0;
    double cost = 0, refunded = 0;
    int deep = 0;

    memset(&d, 0, sizeof(d));
    vgpu_ctl_takeover(&c, &d, 0.3, NULL, 0);
    for (int i = 0; i < 400; i++) {
        uint64_t r = gpu_rand_next(&rng);
        struct vgpu_ctl_obs o = {.slot = 5, .id = 11};
        struct vgpu_ctl_tick k = {.now = t += 100 * MS, .policy = VGPU_POLICY_STRICT,
                                  .util_known = true, .nobs = 1, .obs = &o, .cost_ns = &cost,
                                  .foreign_busy = (r & 2048) != 0};

        o.launches = r % 4 == 0 ? UINT64_MAX : r % 4 == 1 ? r >> (r % 64) : (uint64_t)i * 1000;
        o.util = r & 256 ? 1.0 : 0;
        o.window_end = r & 512 ? t - (r >> 40) % (3 * S) : r & 1024 ? UINT64_MAX : 0;
        /* The balance is the container's to write too: the refund's room must not overflow. */
        if (r & 4096)
            d.bucket_tokens = r & 8192 ? INT64_MIN : r & 16384 ? INT64_MAX : -(int64_t)(r >> 2);
        vgpu_ctl_tick(&c, &d, &k);
        CHECK(isfinite(cost) && (cost == 0 || (cost >= 100 && cost <= 1e10)));
        CHECK(isfinite(k.refund_ns) && k.refund_ns >= 0);
        CHECK(d.bucket_tokens <= (int64_t)d.bucket_capacity);
        /* The depth, whatever the counts say: 100 ms of refill, or 200 ms while contended. */
        CHECK(d.bucket_capacity == 30 * MS || d.bucket_capacity == 60 * MS);
        deep += d.bucket_capacity == 60 * MS;
        refunded += k.refund_ns;
    }
    CHECK(refunded > 0); /* the refund path ran on the garbage */
    CHECK(deep > 0);     /* and so did the contended depth */
    /*
     * The writes stop: an honest count, lower than the last garbage, starts a
     * new process, charged the default, then bounded from its own launches
     * only (zeros over at most 5 launches: 10 ms / 5 or more).
     */
    for (uint64_t n = 0; n < 6; n++) {
        struct vgpu_ctl_obs o = {.slot = 5, .id = 11, .launches = n};
        struct vgpu_ctl_tick k = {.now = t += 100 * MS, .policy = VGPU_POLICY_STRICT,
                                  .util_known = true, .nobs = 1, .obs = &o, .cost_ns = &cost};

        vgpu_ctl_tick(&c, &d, &k);
        if (n == 0)
            CHECK(cost == 0);
    }
    CHECK(cost == 0 || cost >= 0.01 * S / 5);
    printf("hostile counters: 400 periods of garbage launch counts and readings, contended or "
           "not, estimates finite and clamped, balance never above the capacity, the depth 100 "
           "or 200 ms (200 in %d)\n", deep);
}

/*
 * limiter_test trace LIMIT STREAMS small|full KERNEL_US [SEED [SECONDS]]: one
 * run of the streams grid's process (kernels all alike), every control
 * period traced (see plant_spec.trace), then its true share second by second.
 */
static int trace_streams(int argc, char **argv)
{
    struct plant_spec s = {.nclaims = 1, .nprocs = 1, .trace = stdout};
    double secs = argc > 7 ? atof(argv[7]) : 15;

    s.seed = argc > 6 ? strtoull(argv[6], NULL, 10) : 1;
    s.duration_ns = (uint64_t)(secs * S);
    s.claims[0].limit_percent = (unsigned)atoi(argv[2]);
    s.procs[0] = (struct plant_proc_spec){.kernel_ns = strtoull(argv[5], NULL, 10) * US,
                                          .streams = atoi(argv[3]), .depth = 2,
                                          .small_grid = strcmp(argv[4], "small") == 0,
                                          .threaded = true};
    if (plant_run(&s, &res) != 0) {
        fprintf(stderr, "limiter_test trace: spec out of range\n");
        return 2;
    }
    for (uint64_t k = 0; k + 1 <= (uint64_t)secs; k++)
        printf("second %2llu: %6.2f%%\n", (unsigned long long)k,
               plant_mean_share(&res, 0, k * S, (k + 1) * S));
    printf("busiest second %.2f%%, settling %.2f s (2 points)\n",
           plant_max_share(&res, 0, 0, s.duration_ns),
           plant_settling_ns(&res, 0, s.claims[0].limit_percent, 2, 0, s.duration_ns) / 1e9);
    return 0;
}

/*
 * Timed launches (a MIG instance): the estimate is the decaying mean of
 * the timed launches, absurd times add nothing; the tick takes each
 * process's published cost as it is, estimates and refunds nothing, and
 * measures the claim's share as launches x cost over the period.
 */
static void test_timed(void)
{
    static struct vgpu_ctl c;
    struct vgpu_timed_cost tc = {0};
    struct vgpu_region_device d;
    struct vgpu_ctl_obs o[2] = {{.slot = 0, .id = 1}, {.slot = 3, .id = 7}};
    double cost[2] = {-1, -1}, est;
    struct vgpu_ctl_tick t = {.policy = VGPU_POLICY_STRICT, .util_known = true, .timed = true,
                              .foreign_busy = true, .nobs = 2, .obs = o, .cost_ns = cost};
    uint64_t now = 1 * S;

    CHECK(absd(vgpu_timed_cost_add(&tc, 2e6, now) - 2e6) < 1);
    CHECK(absd(vgpu_timed_cost_add(&tc, -1, now) - 2e6) < 1);
    CHECK(absd(vgpu_timed_cost_add(&tc, 0.0 / 0.0, now) - 2e6) < 1);
    CHECK(absd(vgpu_timed_cost_add(&tc, 1e15, now) - 2e6) < 1);
    /* Two at once weigh alike; a second later the old ones are forgotten. */
    CHECK(absd(vgpu_timed_cost_add(&tc, 4e6, now) - 3e6) < 1);
    est = vgpu_timed_cost_add(&tc, 1e6, now + VGPU_TIMED_TAU_NS / 2);
    CHECK(est > 1.5e6 && est < 2.5e6);
    CHECK(absd(vgpu_timed_cost_add(&tc, 5e5, now + 10 * S) - 5e5) < 1);

    memset(&d, 0, sizeof(d));
    vgpu_ctl_takeover(&c, &d, 0.3, NULL, now);
    d.bucket_tokens = -(int64_t)(10 * MS);
    /* First sight: no share yet. Then 60 and 90 launches of 0.5 and 1 ms in 100 ms: 30 + 90 %. */
    o[0].launches = 100;
    o[1].launches = 5;
    o[0].timed_cost_ns = 500 * US;
    o[1].timed_cost_ns = 1 * MS;
    vgpu_ctl_timed_util(&c, o, 2, now);
    CHECK(o[0].util == 0 && o[1].util == 0);
    now += VGPU_CTL_PERIOD_NS;
    o[0].launches += 60;
    o[1].launches += 90;
    vgpu_ctl_timed_util(&c, o, 2, now);
    CHECK(absd(o[0].util - 0.3) < 1e-9 && absd(o[1].util - 0.9) < 1e-9);
    t.now = now;
    vgpu_ctl_tick(&c, &d, &t);
    CHECK(cost[0] == 0 && cost[1] == 0);
    CHECK(absd(t.util - 1.2) < 1e-9);
    CHECK(t.limited);
    CHECK(t.refund_ns == 0);
    CHECK_EQ(d.bucket_tokens, -(int64_t)(10 * MS));
    /* A new process in a slot restarts its count; a count gone backwards measures nothing. */
    now += VGPU_CTL_PERIOD_NS;
    o[0].id = 2;
    o[1].launches -= 10;
    vgpu_ctl_timed_util(&c, o, 2, now);
    CHECK(o[0].util == 0 && o[1].util == 0);
    /* A cost or a count a container wrote into its slot: a share of at most the whole GPU. */
    now += VGPU_CTL_PERIOD_NS;
    o[0].launches = UINT64_MAX;
    o[0].timed_cost_ns = UINT64_MAX;
    o[1].launches += 1;
    o[1].timed_cost_ns = UINT64_MAX;
    vgpu_ctl_timed_util(&c, o, 2, now);
    CHECK(o[0].util <= 1 && o[1].util == 1);
}

int main(int argc, char **argv)
{
    if (argc >= 6 && strcmp(argv[1], "trace") == 0)
        return trace_streams(argc, argv);
    test_bucket();
    test_contended_depth();
    test_timed();
    test_hostile_bucket();
    test_hostile_counters();
    test_cost_estimate();
    test_sensor();
    test_rand_streams();
    test_engine();
    test_engine_mps();
    test_grid();
    test_streams();
    test_grid_fully_booked();
    test_pairs();
    test_limit_change();
    test_short_kernel_start();
    test_join_and_idle();
    test_work_conserving();
    test_kills();
    test_bad_spec();
    return check_report("limiter_test");
}
