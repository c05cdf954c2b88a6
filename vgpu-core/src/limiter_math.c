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

/* limiter_math.c - see limiter_math.h. */
#include "limiter_math.h"

#include <string.h>

/*
 * Weight kept by the older windows at each new NVML window (1/6 s): a time
 * constant of ~0.3 s on top of the window's own second. Longer memories
 * (0.85: ~1 s) trail the changes of a small grid's cost on a saturated GPU
 * and let a claim's start-up drag on; the noise of a short memory stays within
 * what the kernels vary by themselves.
 */
#define CTL_COST_DECAY 0.6
/* A reading stands for up to this much more: whole percents, dithered by up to one. */
#define CTL_IDLE_BOUND 0.01
/* NVML's zero means less than this busy. */
#define CTL_IDLE_MAX 0.01
/* Readings from this share up measure a process; below, they only bound its cost. */
#define CTL_MEASURABLE 0.01
/*
 * A control period in which a process was charged more than this many times
 * the claim's refill, plus two launches, was a burst: credits, not the
 * refill, paid for it.
 */
#define CTL_BURST_FACTOR 1.25
#define CTL_COST_MIN_NS 100.0
#define CTL_COST_MAX_NS 1e10

static double clamp(double v, double lo, double hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

static uint64_t load_u64(const uint64_t *p)
{
    return __atomic_load_n(p, __ATOMIC_RELAXED);
}

static int64_t capacity_of(const struct vgpu_region_device *d)
{
    uint64_t cap = load_u64(&d->bucket_capacity);

    return cap > (uint64_t)INT64_MAX / 8 ? INT64_MAX / 8 : (int64_t)cap;
}

bool vgpu_bucket_is_open(const struct vgpu_region_device *d)
{
    return __atomic_load_n(&d->bucket_tokens, __ATOMIC_RELAXED) > INT64_MAX / 8;
}

bool vgpu_bucket_paid(const struct vgpu_region_device *d)
{
    return __atomic_load_n(&d->bucket_tokens, __ATOMIC_RELAXED) >= 0;
}

void vgpu_bucket_open(struct vgpu_region_device *d)
{
    __atomic_store_n(&d->bucket_tokens, VGPU_BUCKET_OPEN, __ATOMIC_RELAXED);
}

/* Capacity (tokens) of a bucket holding depth_ns of refill at rate (fraction of GPU time). */
static int64_t capacity_for(double rate, uint64_t depth_ns)
{
    int64_t cap = (int64_t)(rate * (double)depth_ns);

    return cap < VGPU_BUCKET_MIN_CAPACITY ? VGPU_BUCKET_MIN_CAPACITY : cap;
}

void vgpu_bucket_set_rate(struct vgpu_region_device *d, double rate, uint64_t depth_ns,
                          uint64_t now)
{
    double per_s = rate > 0 ? rate * 1e9 : 0;
    int64_t cap = capacity_for(rate, depth_ns), t;
    uint64_t last = 0;

    __atomic_store_n(&d->bucket_refill_rate, (uint64_t)per_s, __ATOMIC_RELAXED);
    __atomic_store_n(&d->bucket_capacity, (uint64_t)cap, __ATOMIC_RELAXED);
    t = __atomic_load_n(&d->bucket_tokens, __ATOMIC_RELAXED);
    while (t > cap && !__atomic_compare_exchange_n(&d->bucket_tokens, &t, cap, true,
                                                   __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
    /* Refill time starts now for a bucket that never had one. */
    __atomic_compare_exchange_n(&d->bucket_last_refill_ns, &last, now, false, __ATOMIC_RELAXED,
                                __ATOMIC_RELAXED);
}

void vgpu_bucket_init(struct vgpu_region_device *d, double rate, uint64_t now)
{
    uint64_t none = 0;
    int64_t cap = capacity_for(rate, VGPU_BUCKET_DEPTH_NS);

    /* Whoever sets the capacity first sets the bucket up: launches charged before stay owed. */
    if (!__atomic_compare_exchange_n(&d->bucket_capacity, &none, (uint64_t)cap, false,
                                     __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        return;
    __atomic_store_n(&d->bucket_last_refill_ns, now, __ATOMIC_RELAXED);
    __atomic_store_n(&d->bucket_refill_rate, (uint64_t)(rate > 0 ? rate * 1e9 : 0),
                     __ATOMIC_RELAXED);
    __atomic_fetch_add(&d->bucket_tokens, cap, __ATOMIC_RELAXED);
}

/*
 * Adds amount (>= 0) to the balance, up to cap; a balance already at or
 * above cap is left as it is. The sum is taken in doubles, since the
 * balance is writable by the container and may hold anything: a balance
 * near INT64_MIN ends at cap rather than overflowing. Compare-and-swap, so
 * that launches charged meanwhile are not lost.
 */
static void add_capped(struct vgpu_region_device *d, double amount, int64_t cap)
{
    int64_t t = __atomic_load_n(&d->bucket_tokens, __ATOMIC_RELAXED), sum;

    do {
        if (t >= cap)
            return;
        sum = (double)t + amount >= (double)cap ? cap : (int64_t)((double)t + amount);
    } while (!__atomic_compare_exchange_n(&d->bucket_tokens, &t, sum, true, __ATOMIC_RELAXED,
                                          __ATOMIC_RELAXED));
}

void vgpu_bucket_refill(struct vgpu_region_device *d, uint64_t now)
{
    uint64_t last = load_u64(&d->bucket_last_refill_ns);

    if (now <= last || vgpu_bucket_is_open(d))
        return;
    if (!__atomic_compare_exchange_n(&d->bucket_last_refill_ns, &last, now, false,
                                     __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        return; /* another refiller credited this interval */
    add_capped(d, (double)load_u64(&d->bucket_refill_rate) * (double)(now - last) / 1e9,
               capacity_of(d));
}

void vgpu_bucket_credit(struct vgpu_region_device *d, uint64_t tokens)
{
    if (tokens != 0 && !vgpu_bucket_is_open(d))
        add_capped(d, (double)tokens, capacity_of(d));
}

uint64_t vgpu_bucket_take(struct vgpu_region_device *d, uint64_t cost)
{
    int64_t c = cost > (uint64_t)INT64_MAX / 8 ? INT64_MAX / 8 : (int64_t)cost;
    int64_t t = __atomic_sub_fetch(&d->bucket_tokens, c, __ATOMIC_RELAXED);
    uint64_t rate;
    double w;

    if (t >= 0)
        return 0;
    rate = load_u64(&d->bucket_refill_rate);
    if (rate == 0)
        return VGPU_WAIT_MAX_NS;
    /* Negated in doubles: -t overflows at INT64_MIN, which a container can write. */
    w = -(double)t * 1e9 / (double)rate;
    return w < 1 ? 1 : w > (double)VGPU_WAIT_LIMIT_NS ? VGPU_WAIT_LIMIT_NS : (uint64_t)w;
}

uint64_t vgpu_bucket_paced_wait(const struct vgpu_region_device *d, uint64_t wait, uint64_t now)
{
    uint64_t last = load_u64(&d->bucket_last_refill_ns), accrued;

    if (now <= last)
        return wait;
    accrued = now - last < VGPU_WAIT_MAX_NS ? now - last : VGPU_WAIT_MAX_NS;
    return wait > accrued ? wait - accrued : 0;
}

uint64_t vgpu_bucket_reprice(struct vgpu_region_device *d, uint64_t charged, uint64_t cost,
                             uint64_t wait_ns)
{
    uint64_t rate = load_u64(&d->bucket_refill_rate);
    double w;

    /*
     * A fall pays the debt, never lifts the balance above zero: the launches
     * waiting go in their order as soon as it is paid, but nothing is banked
     * to let a burst through whose small grids on several streams overlap
     * (the estimates taken over it then charge too little once paced).
     */
    if (cost < charged && !vgpu_bucket_is_open(d))
        add_capped(d, (double)(charged - cost), 0);
    else if (cost > charged)
        (void)vgpu_bucket_take(d, cost - charged);
    if (rate == 0)
        return wait_ns;
    w = (double)wait_ns + ((double)cost - (double)charged) * 1e9 / (double)rate;
    return w <= 0 ? 0 : w > (double)VGPU_WAIT_LIMIT_NS ? VGPU_WAIT_LIMIT_NS : (uint64_t)w;
}

void vgpu_ctl_init(struct vgpu_ctl *c, double target)
{
    memset(c, 0, sizeof(*c));
    c->target = target;
}

void vgpu_ctl_takeover(struct vgpu_ctl *c, struct vgpu_region_device *d, double target,
                       const uint64_t *seed_cost_ns, uint64_t now)
{
    vgpu_ctl_init(c, target);
    for (int i = 0; seed_cost_ns != NULL && i < VGPU_REGION_MAX_SLOTS; i++) {
        double seed = (double)seed_cost_ns[i];

        if (seed >= CTL_COST_MIN_NS && seed <= CTL_COST_MAX_NS)
            c->procs[i].cost_ns = seed;
    }
    vgpu_bucket_init(d, target, now);
    if (!vgpu_bucket_is_open(d))
        vgpu_bucket_set_rate(d, target, VGPU_BUCKET_DEPTH_NS, now);
}

/* Indices of p's oldest and newest history records (meaningful once p->n > 0). */
static unsigned oldest_record(const struct vgpu_ctl_proc *p)
{
    return (p->head + VGPU_CTL_HISTORY - p->n) % VGPU_CTL_HISTORY;
}

static unsigned newest_record(const struct vgpu_ctl_proc *p)
{
    return (p->head + VGPU_CTL_HISTORY - 1) % VGPU_CTL_HISTORY;
}

/*
 * Cumulative launches of p at time t and what they were charged (either may
 * be NULL), interpolated from its history; false if unknown.
 */
static bool history_at(const struct vgpu_ctl_proc *p, uint64_t t, double *launches,
                       double *charged)
{
    unsigned oldest = oldest_record(p), newest = newest_record(p);
    uint64_t t0 = p->t[oldest];

    if (p->n == 0)
        return false;
    if (t < t0) {
        /* Before its first record: a process that appeared meanwhile had launched nothing. */
        double f;

        if (!p->fresh)
            return false;
        f = t + VGPU_CTL_PERIOD_NS <= t0
                ? 0 : (double)(t + VGPU_CTL_PERIOD_NS - t0) / (double)VGPU_CTL_PERIOD_NS;
        if (launches != NULL)
            *launches = (double)p->launches[oldest] * f;
        if (charged != NULL)
            *charged = p->charged[oldest] * f;
        return true;
    }
    for (unsigned k = 1; k < p->n; k++) {
        unsigned a = (oldest + k - 1) % VGPU_CTL_HISTORY, b = (oldest + k) % VGPU_CTL_HISTORY;

        if (t <= p->t[b]) {
            double f = p->t[b] > p->t[a] ? (double)(t - p->t[a]) / (double)(p->t[b] - p->t[a]) : 1;

            if (launches != NULL)
                *launches = (double)p->launches[a] + f * (double)(p->launches[b] - p->launches[a]);
            if (charged != NULL)
                *charged = p->charged[a] + f * (p->charged[b] - p->charged[a]);
            return true;
        }
    }
    if (launches != NULL)
        *launches = (double)p->launches[newest];
    if (charged != NULL)
        *charged = p->charged[newest];
    return true;
}

/*
 * The launches from time from (or refunded_to, if later) up to time to ran
 * within a window that was busy at most busy ns: what they were charged
 * beyond it is owed back to the claim. The last block refunded, if it lies
 * wholly within the window (it starts at or after window_start and ends
 * where these launches begin), is reconciled with them: the window bounds
 * their busy time together, so the merged block stands charged at most busy
 * (refunded once each, a block of launches never stands charged less than
 * the bound of a window holding it all).
 */
static void refund(struct vgpu_ctl_proc *p, uint64_t window_start, uint64_t from, uint64_t to,
                   double busy)
{
    double c0, c1, net;

    if (from < p->refunded_to)
        from = p->refunded_to;
    if (to <= from || !history_at(p, from, NULL, &c0) || !history_at(p, to, NULL, &c1))
        return;
    net = c1 - c0;
    if (p->block_from >= window_start && p->refunded_to == from) {
        net += p->block_ns;
        from = p->block_from;
    }
    if (net > busy) {
        p->refund_ns += net - busy;
        net = busy;
    }
    p->block_from = from;
    p->block_ns = net;
    p->refunded_to = to;
}

/*
 * Whether a period p marked a burst lies (partly) within [from, to): the
 * window's busy time then holds launches that ran side by side.
 */
static bool burst_within(const struct vgpu_ctl_proc *p, uint64_t from, uint64_t to)
{
    unsigned oldest = oldest_record(p);

    for (unsigned k = 1; k < p->n; k++) {
        unsigned a = (oldest + k - 1) % VGPU_CTL_HISTORY, b = (oldest + k) % VGPU_CTL_HISTORY;

        if (p->burst[b] && p->t[b] > from && p->t[a] < to)
            return true;
    }
    return false;
}

/* Adds a window's reading and launches to p's decaying sums: every reading, zeros too. */
static void accumulate(struct vgpu_ctl_proc *p, double util, double launches)
{
    p->busy_acc = p->busy_acc * CTL_COST_DECAY + util * (double)VGPU_CTL_WINDOW_NS;
    p->launch_acc = p->launch_acc * CTL_COST_DECAY + launches;
}

/*
 * The NVML window o's reading describes: [*ws, *we). Without a sample of its
 * own, the process was idle up to NVML's last sample at the latest.
 */
static void window_of(const struct vgpu_ctl_obs *o, uint64_t now, uint64_t *ws, uint64_t *we)
{
    *we = o->window_end != 0 && o->window_end <= now ? o->window_end
          : now > VGPU_CTL_SAMPLE_NS                ? now - VGPU_CTL_SAMPLE_NS
                                                    : 0;
    *ws = *we > VGPU_CTL_WINDOW_NS ? *we - VGPU_CTL_WINDOW_NS : 0;
}

/* The launch cost p's launches are charged now (the default before any estimate). */
static double charge_of(const struct vgpu_ctl_proc *p)
{
    return p->cost_ns > 0 ? p->cost_ns : (double)VGPU_CTL_DEFAULT_COST_NS;
}

/*
 * The state of o's slot, restarted for a new owner (another identity, or a
 * launch count that went back). At the first tick the owners are the
 * takeover's: their published estimates (seeds) are kept, and one without
 * any is new enough to have launched from 0 in our history ("fresh"), as is
 * every process that appears later.
 */
static struct vgpu_ctl_proc *proc_of(struct vgpu_ctl *c, const struct vgpu_ctl_obs *o,
                                     uint64_t now)
{
    struct vgpu_ctl_proc *p = &c->procs[o->slot];

    if (p->id != o->id || (p->n > 0 && o->launches < p->launches[newest_record(p)])) {
        double seed = c->last_ns == 0 ? p->cost_ns : 0;

        memset(p, 0, sizeof(*p));
        p->id = o->id;
        p->cost_ns = seed;
        p->fresh = seed == 0;
        p->first_ns = now;
    }
    return p;
}

/*
 * Appends this period's record to p's history: its launches, what they
 * were charged (the cost set at the last record, before any: the default),
 * and whether the period was a burst. While its cost is bounded (its
 * start-up) and the bucket throttled, a process charged more in a period
 * than the claim's whole refill pays for (with two launches of slack) spent
 * credits: the refunds and re-priced waits that bring the start-up cost
 * down. Its launches went in a burst. (Once measured, what it spends beyond
 * the refill is what the bucket saved for it, and its estimate already
 * holds such periods.)
 */
static void record(const struct vgpu_ctl *c, struct vgpu_ctl_proc *p, uint64_t launches,
                   uint64_t now)
{
    unsigned last = newest_record(p);

    p->charged[p->head] = (p->n > 0 ? p->charged[last] : 0) +
                          (double)(launches - (p->n > 0 ? p->launches[last] : 0)) * charge_of(p);
    p->t[p->head] = now;
    p->launches[p->head] = launches;
    p->burst[p->head] =
        p->n > 0 && c->limited && !p->measured && now > p->t[last] &&
        p->charged[p->head] - p->charged[last] >
            CTL_BURST_FACTOR * c->target * (double)(now - p->t[last]) + 2 * charge_of(p);
    p->head = (p->head + 1) % VGPU_CTL_HISTORY;
    if (p->n < VGPU_CTL_HISTORY)
        p->n++;
}

/* The launches of one NVML window, as p's history knows them. */
struct window {
    uint64_t ws, we;     /* the window */
    uint64_t first_known; /* the first time of it whose launches are known */
    double n;            /* launches within it (those known) */
    double n_old;        /* of them, those VGPU_CTL_SENSOR_LAG_NS older than its end */
    bool partial;        /* launches before first_known are unknown (a takeover) */
};

/*
 * The launches of [ws, we) (false: the window was used already or its end
 * is not in the history). A process that was running before this
 * controller took over has no history before its first record: only the
 * launches since then are known to fall within the window, fewer than it
 * made there, which is enough to bound its cost from above (not to measure
 * it). Each NVML window is used once, and only with the launch counts of
 * that very window.
 */
static bool window_launches(struct vgpu_ctl_proc *p, uint64_t ws, uint64_t we, struct window *w)
{
    double from, to, old;

    if (we <= p->window_end || !history_at(p, we, &to, NULL))
        return false;
    w->ws = ws;
    w->we = we;
    w->partial = !history_at(p, ws, &from, NULL);
    if (w->partial) {
        from = (double)p->launches[oldest_record(p)];
        w->first_known = p->t[oldest_record(p)];
    } else {
        w->first_known = ws;
    }
    p->window_end = we;
    w->n = to - from;
    /* Launches old enough for NVML to have reported their kernels. */
    w->n_old = we > ws + VGPU_CTL_SENSOR_LAG_NS &&
                       history_at(p, we - VGPU_CTL_SENSOR_LAG_NS, &old, NULL) ? old - from : 0;
    return true;
}

/*
 * At the sensor's resolution, or over a window in which the process started
 * (its first launches may still be queued at the window's end), a reading
 * only bounds the cost from above: (reading + a whole step, since a reading
 * may be dithered down by one) over the launches it must have seen. What
 * they were charged beyond it is refunded; the cost only ever moves down
 * (from the default's, before the first bound).
 */
static void bound(struct vgpu_ctl_proc *p, double util, const struct window *w)
{
    double busy = (util + CTL_IDLE_BOUND) * (double)VGPU_CTL_WINDOW_NS;

    /*
     * Whole windows after its start are summed as a measured process's are,
     * zeros included, so that the reading of 1 % that ends bounding (more
     * likely a step of the dither than not, when it first comes) joins the
     * readings before it instead of standing alone.
     */
    if (w->ws >= p->first_ns && !w->partial && w->n >= 0.5 && !burst_within(p, w->ws, w->we))
        accumulate(p, util, w->n);
    if (w->n_old >= 0.5) {
        refund(p, w->ws, w->first_known, w->we - VGPU_CTL_SENSOR_LAG_NS, busy);
        if (busy / w->n_old < charge_of(p))
            p->cost_ns = clamp(busy / w->n_old, CTL_COST_MIN_NS, CTL_COST_MAX_NS);
    }
}

/*
 * NVML saw nothing of launches that the estimate says it must have seen
 * (more than CTL_IDLE_MAX busy): the kernels became shorter. Back to
 * bounding from above, from what a zero allows; the launches before were
 * charged the measured cost, nothing of them is refunded.
 */
static bool became_shorter(struct vgpu_ctl_proc *p, double util, const struct window *w)
{
    if (util > 0 || w->n_old < 0.5 || p->cost_ns * w->n_old <= CTL_IDLE_MAX * VGPU_CTL_WINDOW_NS)
        return false;
    p->measured = false;
    p->busy_acc = p->launch_acc = 0;
    p->refunded_to = p->block_from = w->we;
    p->block_ns = 0;
    p->cost_ns = clamp(CTL_IDLE_BOUND * (double)VGPU_CTL_WINDOW_NS / w->n_old, CTL_COST_MIN_NS,
                       CTL_COST_MAX_NS);
    return true;
}

double vgpu_ctl_cost(struct vgpu_ctl *c, const struct vgpu_ctl_obs *o, bool util_known,
                     uint64_t now)
{
    struct vgpu_ctl_proc *p;
    struct window w;
    uint64_t ws, we;

    if (o->slot < 0 || o->slot >= VGPU_REGION_MAX_SLOTS)
        return 0;
    p = proc_of(c, o, now);
    record(c, p, o->launches, now);
    window_of(o, now, &ws, &we);
    if (!util_known || !window_launches(p, ws, we, &w))
        return p->cost_ns;
    if (!p->measured && (o->util < CTL_MEASURABLE || ws < p->first_ns || w.partial)) {
        bound(p, o->util, &w);
        return p->cost_ns;
    }
    p->measured = true;
    /* No launches say nothing about their cost. */
    if (w.n < 0.5 || became_shorter(p, o->util, &w))
        return p->cost_ns;
    /*
     * A burst's kernels on several streams ran side by side: NVML saw a
     * fraction of what the same launches take once throttling paces them.
     * Such a window says nothing of the cost the bucket will charge.
     */
    if (burst_within(p, ws, we))
        return p->cost_ns;
    accumulate(p, o->util, w.n);
    p->cost_ns = clamp(p->busy_acc / p->launch_acc, CTL_COST_MIN_NS, CTL_COST_MAX_NS);
    return p->cost_ns;
}

bool vgpu_ctl_should_limit(struct vgpu_ctl *c, uint32_t policy, bool high_priority,
                           bool foreign_busy, uint64_t now)
{
    if (foreign_busy)
        c->contended_until_ns = now + VGPU_CTL_CONTENTION_HOLD_NS;
    switch (policy) {
    case VGPU_POLICY_DISABLED:
        return false;
    case VGPU_POLICY_WORK_CONSERVING:
        return !high_priority && now < c->contended_until_ns;
    default:
        return true;
    }
}

/* Whether p launched between its two newest history records (from 0 for a new owner). */
static bool launched(const struct vgpu_ctl_proc *p)
{
    unsigned newest = newest_record(p);

    return p->n > 1 ? p->launches[newest] != p->launches[(newest + VGPU_CTL_HISTORY - 1) %
                                                          VGPU_CTL_HISTORY]
                    : p->n == 1 && p->launches[newest] > 0;
}

void vgpu_ctl_tick(struct vgpu_ctl *c, struct vgpu_region_device *d, struct vgpu_ctl_tick *t)
{
    double util = 0, dt = c->last_ns != 0 && t->now > c->last_ns
                              ? (double)(t->now - c->last_ns) : 0;
    bool launching = false; /* a process of the claim launched this period */

    t->refund_ns = 0;
    for (int i = 0; i < t->nobs; i++) {
        if (t->timed) {
            t->cost_ns[i] = 0;
            util += t->obs[i].util;
            launching |= t->obs[i].util > 0;
            continue;
        }
        t->cost_ns[i] = vgpu_ctl_cost(c, &t->obs[i], t->util_known, t->now);
        util += t->obs[i].util;
        if (t->obs[i].slot >= 0 && t->obs[i].slot < VGPU_REGION_MAX_SLOTS) {
            struct vgpu_ctl_proc *p = &c->procs[t->obs[i].slot];

            t->refund_ns += p->refund_ns;
            p->refund_ns = 0;
            launching |= launched(p);
        }
    }
    t->util = util;
    if (t->util_known && dt > 0) {
        /* The monitor's achieved share: NVML's readings averaged over the last ~10 s. */
        double keep = 1 - clamp(dt / (double)VGPU_CTL_SHARE_TAU_NS, 0, 1);

        c->share_sum = c->share_sum * keep + util * dt;
        c->share_weight = c->share_weight * keep + dt;
        __atomic_store_n(&d->sm_util_percent, (uint32_t)(clamp(util, 0, 1) * 100 + 0.5),
                         __ATOMIC_RELAXED);
        __atomic_store_n(&d->sm_share_permyriad,
                         (uint32_t)(clamp(c->share_sum / c->share_weight, 0, 1) * 10000 + 0.5),
                         __ATOMIC_RELAXED);
        t->share_updated = true;
    }
    c->last_ns = t->now;
    t->limited = vgpu_ctl_should_limit(c, t->policy, t->high_priority, t->foreign_busy, t->now);
    c->limited = t->limited;
    if (!t->limited) {
        vgpu_bucket_open(d);
        return;
    }
    /*
     * A claim that launches while another claim's kernels share the GPU
     * keeps what it could not spend behind them longer; one that stopped
     * launching is back to the usual burst at the next period, and a bucket
     * that was open restarts full with the usual burst.
     */
    vgpu_bucket_set_rate(d, c->target,
                         t->now < c->contended_until_ns && !vgpu_bucket_is_open(d) && launching
                             ? VGPU_BUCKET_CONTENDED_DEPTH_NS
                             : VGPU_BUCKET_DEPTH_NS,
                         t->now);
    /*
     * Launches charged more than NVML shows they ran: the claim gets it
     * back, as far as it is in debt. Refunds pay the launches waiting, in
     * their order, and are never banked as a burst: a bucket filled by them
     * lets tens of launches through at once, whose small grids on several
     * streams run side by side, so NVML sees a fraction of their serial
     * time; the bounds and estimates taken over such windows then charge
     * less than the launches cost once throttling spreads them out again
     * (30 %, 8 streams of 2 ms small grids: 1.4 ms, a second at 37.8 %).
     * Nor would the contended depth keep over-charges: only refill the
     * other claim's kernels kept the claim from spending.
     */
    {
        /* In doubles: the balance is writable by the container, any value. */
        double room = -(double)__atomic_load_n(&d->bucket_tokens, __ATOMIC_RELAXED);
        double refund = t->refund_ns < room ? t->refund_ns : room;

        if (refund >= 1)
            vgpu_bucket_credit(d, (uint64_t)refund);
    }
}

void vgpu_ctl_timed_util(struct vgpu_ctl *c, struct vgpu_ctl_obs *obs, int nobs, uint64_t now)
{
    for (int i = 0; i < nobs; i++) {
        struct vgpu_ctl_proc *p;

        obs[i].util = 0;
        if (obs[i].slot < 0 || obs[i].slot >= VGPU_REGION_MAX_SLOTS)
            continue;
        /* The history's first record holds the previous period's count. */
        p = &c->procs[obs[i].slot];
        if (p->id == obs[i].id && p->n > 0 && now > p->t[0] &&
            obs[i].launches >= p->launches[0])
            obs[i].util = clamp((double)(obs[i].launches - p->launches[0]) *
                                    (double)obs[i].timed_cost_ns / (double)(now - p->t[0]),
                                0, 1);
        p->id = obs[i].id;
        p->n = 1;
        p->t[0] = now;
        p->launches[0] = obs[i].launches;
    }
}

double vgpu_timed_cost_add(struct vgpu_timed_cost *t, double elapsed_ns, uint64_t now)
{
    if (elapsed_ns >= 0 && elapsed_ns <= 1000.0 * VGPU_CTL_DEFAULT_COST_NS) {
        double keep = t->weight > 0 && now > t->last_ns
                          ? 1 - clamp((double)(now - t->last_ns) / VGPU_TIMED_TAU_NS, 0, 1)
                          : 1;

        t->sum_ns = t->sum_ns * keep + elapsed_ns;
        t->weight = t->weight * keep + 1;
        t->last_ns = now;
    }
    return t->weight > 0 ? t->sum_ns / t->weight : 0;
}

void vgpu_limiter_math_state_init(struct vgpu_limiter_state *c,
                                  struct vgpu_region_device *bucket, bool active_allowed,
                                  uint32_t sm_limit, uint32_t policy, bool high_priority,
                                  uint64_t now)
{
    c->target = sm_limit / 100.0;
    c->policy = policy;
    c->high_priority = high_priority;
    c->bucket = bucket != NULL ? bucket : &c->private_bucket;
    c->active = active_allowed && sm_limit > 0 && policy != VGPU_POLICY_DISABLED;
    if (c->active)
        vgpu_bucket_init(c->bucket, c->target, now);
}
