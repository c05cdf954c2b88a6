/* limiter.c - see limiter.h. */
#include "limiter.h"

#include <string.h>

/*
 * PI gains, tuned on the simulated plant (test/limiter_sim.c) for a sensor
 * that averages over one second: KI = 0.5/s gives a closed-loop time constant
 * of ~2 s, well clear of the window's ~0.5 s dead time, so no oscillation;
 * KP only speeds the first second up. The launch-cost estimate does most of
 * the work; the integral removes the bias it leaves.
 */
#define CTL_KP 0.2
#define CTL_KI 0.5
/* NVML reports whole percents: errors below half a step are noise. */
#define CTL_DEADBAND 0.005
/* The rate may drift this far from target to absorb cost-estimate bias. */
#define CTL_RATE_MAX 2.0
#define CTL_RATE_MIN_FRACTION 0.1
/* Weight of a new launch-cost sample (one per control period). */
#define CTL_COST_GAIN 0.3
#define CTL_COST_MIN_NS 100.0
#define CTL_COST_MAX_NS 1e10

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

void vgpu_bucket_open(struct vgpu_region_device *d)
{
    __atomic_store_n(&d->bucket_tokens, VGPU_BUCKET_OPEN, __ATOMIC_RELAXED);
}

void vgpu_bucket_set_rate(struct vgpu_region_device *d, double rate, uint64_t now)
{
    double per_s = rate > 0 ? rate * 1e9 : 0;
    int64_t cap = (int64_t)(per_s * (double)VGPU_BUCKET_DEPTH_NS / 1e9);
    int64_t t;
    uint64_t last = 0;

    if (cap < VGPU_BUCKET_MIN_CAPACITY)
        cap = VGPU_BUCKET_MIN_CAPACITY;
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
    vgpu_bucket_set_rate(d, rate, now);
    __atomic_store_n(&d->bucket_tokens, capacity_of(d), __ATOMIC_RELAXED);
    __atomic_store_n(&d->bucket_last_refill_ns, now, __ATOMIC_RELAXED);
}

void vgpu_bucket_refill(struct vgpu_region_device *d, uint64_t now)
{
    uint64_t last = load_u64(&d->bucket_last_refill_ns);
    int64_t cap = capacity_of(d), add, t;
    double amount;

    if (now <= last || vgpu_bucket_is_open(d))
        return;
    if (!__atomic_compare_exchange_n(&d->bucket_last_refill_ns, &last, now, false,
                                     __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        return; /* another refiller credited this interval */
    amount = (double)load_u64(&d->bucket_refill_rate) * (double)(now - last) / 1e9;
    /* More than a bucketful is capped anyway; this bound also keeps the sum in range. */
    add = amount >= (double)cap ? cap : (int64_t)amount;
    t = __atomic_add_fetch(&d->bucket_tokens, add, __ATOMIC_RELAXED);
    while (t > cap && !__atomic_compare_exchange_n(&d->bucket_tokens, &t, cap, true,
                                                   __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
}

bool vgpu_bucket_take(struct vgpu_region_device *d, uint64_t cost)
{
    int64_t c = cost > (uint64_t)INT64_MAX / 8 ? INT64_MAX / 8 : (int64_t)cost;
    int64_t old = __atomic_fetch_sub(&d->bucket_tokens, c, __ATOMIC_RELAXED);

    if (old - c >= 0)
        return true;
    /* A full bucket admits anything: the debt is paid by later refills. */
    if (old >= capacity_of(d))
        return true;
    __atomic_fetch_add(&d->bucket_tokens, c, __ATOMIC_RELAXED);
    return false;
}

uint64_t vgpu_bucket_wait_ns(const struct vgpu_region_device *d, uint64_t cost)
{
    int64_t cap = capacity_of(d);
    int64_t want = cost < (uint64_t)cap ? (int64_t)cost : cap;
    int64_t need = want - __atomic_load_n(&d->bucket_tokens, __ATOMIC_RELAXED);
    uint64_t rate = load_u64(&d->bucket_refill_rate);
    double w;

    if (need <= 0)
        return VGPU_WAIT_MIN_NS;
    if (rate == 0)
        return VGPU_WAIT_MAX_NS;
    w = (double)need * 1e9 / (double)rate;
    if (w < (double)VGPU_WAIT_MIN_NS)
        return VGPU_WAIT_MIN_NS;
    return w > (double)VGPU_WAIT_MAX_NS ? VGPU_WAIT_MAX_NS : (uint64_t)w;
}

void vgpu_ctl_init(struct vgpu_ctl *c, double target)
{
    memset(c, 0, sizeof(*c));
    c->target = target;
    c->rate = target;
}

double vgpu_ctl_cost(struct vgpu_ctl *c, int i, uint64_t id, uint64_t launches, double util,
                     bool util_known, uint64_t now)
{
    struct vgpu_ctl_proc *p;
    uint64_t best_t = 0, best_n = 0, dt, dn;
    double sample;
    bool found = false;

    if (i < 0 || i >= VGPU_REGION_MAX_SLOTS)
        return 0;
    p = &c->procs[i];
    if (p->id != id || (p->n > 0 && launches < p->launches[(p->head + VGPU_CTL_HISTORY - 1) %
                                                             VGPU_CTL_HISTORY])) {
        memset(p, 0, sizeof(*p));
        p->id = id;
    }
    /* Reference point: the newest record at least one NVML window old, else the oldest. */
    for (unsigned k = 0; k < p->n; k++) {
        unsigned j = (p->head + VGPU_CTL_HISTORY - 1 - k) % VGPU_CTL_HISTORY;

        if (p->t[j] >= now)
            continue;
        best_t = p->t[j];
        best_n = p->launches[j];
        found = true;
        if (now - best_t >= VGPU_CTL_WINDOW_NS)
            break;
    }
    p->t[p->head] = now;
    p->launches[p->head] = launches;
    p->head = (p->head + 1) % VGPU_CTL_HISTORY;
    if (p->n < VGPU_CTL_HISTORY)
        p->n++;
    if (!found || !util_known)
        return p->cost_ns;
    dt = now - best_t;
    dn = launches - best_n;
    /* Too short a history says little; no launches say nothing about their cost. */
    if (dt < VGPU_CTL_WINDOW_NS / 2 || dn == 0)
        return p->cost_ns;
    if (util <= 0)
        util = 0.005;
    sample = util * (double)dt / (double)dn;
    if (sample < CTL_COST_MIN_NS)
        sample = CTL_COST_MIN_NS;
    if (sample > CTL_COST_MAX_NS)
        sample = CTL_COST_MAX_NS;
    p->cost_ns = p->cost_ns == 0 ? sample : p->cost_ns + CTL_COST_GAIN * (sample - p->cost_ns);
    return p->cost_ns;
}

static double clamp(double v, double lo, double hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

double vgpu_ctl_step(struct vgpu_ctl *c, const struct vgpu_ctl_input *in)
{
    double lo = c->target * CTL_RATE_MIN_FRACTION, hi = CTL_RATE_MAX;
    double dt, e, ei;

    dt = c->last_ns != 0 && in->now > c->last_ns ? (double)(in->now - c->last_ns) / 1e9 : 0;
    /* A stalled controller (stopped process, takeover) must not integrate the gap. */
    if (dt > 2.0 * (double)VGPU_CTL_PERIOD_NS / 1e9)
        dt = (double)VGPU_CTL_PERIOD_NS / 1e9;
    c->last_ns = in->now;
    if (!in->util_known)
        return c->rate;
    e = c->target - in->util;
    /* Below target without waiting: the claim asks for no more, so do not push the rate up. */
    if (e > 0 && !in->throttled)
        e = 0;
    ei = e > -CTL_DEADBAND && e < CTL_DEADBAND ? 0 : e;
    c->integ = clamp(c->integ + CTL_KI * ei * dt, lo - c->target, hi - c->target);
    c->rate = clamp(c->target + CTL_KP * e + c->integ, lo, hi);
    return c->rate;
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

void vgpu_ctl_tick(struct vgpu_ctl *c, struct vgpu_region_device *d, struct vgpu_ctl_tick *t)
{
    struct vgpu_ctl_input in = {.now = t->now, .util_known = t->util_known};
    double util = 0;

    for (int i = 0; i < t->nobs; i++) {
        const struct vgpu_ctl_obs *o = &t->obs[i];
        struct vgpu_ctl_proc *p;

        t->cost_ns[i] = vgpu_ctl_cost(c, o->slot, o->id, o->launches, o->util, t->util_known,
                                      t->now);
        if (o->slot < 0 || o->slot >= VGPU_REGION_MAX_SLOTS)
            continue;
        p = &c->procs[o->slot];
        in.throttled |= o->throttled_ns != p->throttled_ns;
        p->throttled_ns = o->throttled_ns;
        util += o->util;
    }
    in.util = util;
    t->util = util;
    __atomic_store_n(&d->sm_util_percent, (uint32_t)(clamp(util, 0, 1) * 100 + 0.5),
                     __ATOMIC_RELAXED);
    t->limited = vgpu_ctl_should_limit(c, t->policy, t->high_priority, t->foreign_busy, t->now);
    if (!t->limited) {
        /* Not throttling: keep the integrator as it is for when contention returns. */
        c->last_ns = t->now;
        vgpu_bucket_open(d);
        return;
    }
    vgpu_bucket_set_rate(d, vgpu_ctl_step(c, &in), t->now);
}
