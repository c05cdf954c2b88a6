/*
 * limiter.h - the compute limiter's arithmetic: the claim-wide token bucket
 * and the closed-loop controller that sets its refill rate.
 *
 * Nothing here reads a clock, sleeps or starts a thread: every function gets
 * "now" from its caller. The library drives it with CLOCK_MONOTONIC and NVML
 * (compute.c); the unit test drives it with a discrete-time model of a GPU,
 * so the controller that ships is the controller that is tested.
 *
 * Units: one token is one nanosecond of estimated GPU time. A rate is a
 * fraction of GPU time (0.3 = 30 %), stored in the region as tokens per
 * second.
 */
#ifndef VGPU_LIMITER_H
#define VGPU_LIMITER_H

#include <stdbool.h>
#include <stdint.h>

#include "vgpu_region.h"

/* Balance that stands for "not throttling" (workConserving without contention). */
#define VGPU_BUCKET_OPEN (INT64_MAX / 4)
/* The bucket holds this much refill time: the largest burst above the share. */
#define VGPU_BUCKET_DEPTH_NS 50000000ull
/* Smallest capacity (tokens), so that tiny rates still admit short kernels. */
#define VGPU_BUCKET_MIN_CAPACITY 100000ll
/* Sleeps of a throttled launch stay within these bounds (ns). */
#define VGPU_WAIT_MIN_NS 20000ull
#define VGPU_WAIT_MAX_NS 5000000ull

/* NVML's per-process smUtil is a share of (up to) this trailing window. */
#define VGPU_CTL_WINDOW_NS 1000000000ull
/* The controller runs at this period. */
#define VGPU_CTL_PERIOD_NS 100000000ull
/* Launch cost assumed before the first estimate (ns of GPU time). */
#define VGPU_CTL_DEFAULT_COST_NS 200000ull
/* Launch counts kept per process, one per control period (covers the window). */
#define VGPU_CTL_HISTORY 16
/* workConserving: contention is remembered this long after it was last seen. */
#define VGPU_CTL_CONTENTION_HOLD_NS 2000000000ull

/*
 * Sets the refill rate (fraction of GPU time) and the capacity derived from
 * it. An open bucket (or a balance above the new capacity) is reset to a full
 * bucket, so throttling starts with at most one burst.
 */
void vgpu_bucket_set_rate(struct vgpu_region_device *d, double rate, uint64_t now);

/* Sets the rate of a bucket never used before and fills it (the refiller's first act). */
void vgpu_bucket_init(struct vgpu_region_device *d, double rate, uint64_t now);

/* Opens the bucket: every launch is admitted at one atomic operation. */
void vgpu_bucket_open(struct vgpu_region_device *d);

/* Whether the bucket is open. */
bool vgpu_bucket_is_open(const struct vgpu_region_device *d);

/*
 * Adds rate x (now - last refill) tokens, capped at the capacity. Safe
 * against a concurrent refiller (the elapsed interval is claimed by
 * compare-and-swap, so no time is credited twice).
 */
void vgpu_bucket_refill(struct vgpu_region_device *d, uint64_t now);

/*
 * Admission of a launch costing cost tokens: admitted if the balance stays
 * non-negative after charging it, or if the bucket was full (a kernel larger
 * than the bucket runs on a full bucket and leaves a debt, so it is never
 * starved and still pays its full cost). One atomic operation when admitted
 * with tokens to spare. Returns true if admitted (the cost is then charged).
 */
bool vgpu_bucket_take(struct vgpu_region_device *d, uint64_t cost);

/* How long a refused launch of cost should sleep before trying again (ns). */
uint64_t vgpu_bucket_wait_ns(const struct vgpu_region_device *d, uint64_t cost);

/* Launch-count history of one process (one region slot) for its cost estimate. */
struct vgpu_ctl_proc {
    uint64_t id;      /* identity of the slot owner; a new owner restarts the history */
    unsigned n, head; /* ring of (time, cumulative launches) */
    uint64_t t[VGPU_CTL_HISTORY];
    uint64_t launches[VGPU_CTL_HISTORY];
    double cost_ns;   /* current estimate, 0 = none yet */
    uint64_t throttled_ns; /* last seen cumulative wait */
};

/* Controller state of one claim on one GPU. */
struct vgpu_ctl {
    double target;               /* fraction of GPU time, (0, 1] */
    double integ;                /* integral correction added to target */
    double rate;                 /* last output */
    uint64_t last_ns;            /* time of the last step, 0 = none */
    uint64_t contended_until_ns; /* workConserving: throttle until then */
    struct vgpu_ctl_proc procs[VGPU_REGION_MAX_SLOTS];
};

/* Starts a controller for target (fraction of GPU time). */
void vgpu_ctl_init(struct vgpu_ctl *c, double target);

/*
 * Updates the launch-cost estimate of process slot i and returns it (ns; 0
 * when there is none yet). id identifies the owner, launches is its
 * cumulative launch count, util its NVML smUtil (fraction, trailing window)
 * and util_known whether NVML could be asked about it. A process that
 * launched but has no NVML sample is counted at half of NVML's 1 % step.
 */
double vgpu_ctl_cost(struct vgpu_ctl *c, int i, uint64_t id, uint64_t launches, double util,
                     bool util_known, uint64_t now);

/* One control period's measurement of the claim on the GPU. */
struct vgpu_ctl_input {
    uint64_t now;
    bool util_known; /* NVML answered for every process of the claim */
    double util;     /* claim's summed smUtil, fraction */
    bool throttled;  /* some launch of the claim waited during the period */
};

/*
 * One PI step: returns the new rate (fraction of GPU time). Integrates only
 * outside a deadband, never while the claim is below target without being
 * throttled (it is not asking for more: anti-windup), and never beyond the
 * rate limits (conditional integration). Without a measurement the rate is
 * held.
 */
double vgpu_ctl_step(struct vgpu_ctl *c, const struct vgpu_ctl_input *in);

/*
 * Whether the claim is throttled now. strict: always; disabled: never;
 * workConserving: while another claim's process was seen busy on the GPU in
 * the last VGPU_CTL_CONTENTION_HOLD_NS (held so that throttling does not
 * flap), except for a high-priority claim, which contention never throttles.
 */
bool vgpu_ctl_should_limit(struct vgpu_ctl *c, uint32_t policy, bool high_priority,
                           bool foreign_busy, uint64_t now);

/* What the refiller observed of one process of the claim this period. */
struct vgpu_ctl_obs {
    int slot;              /* region slot index (0..VGPU_REGION_MAX_SLOTS-1) */
    uint64_t id;           /* identity of the slot's owner */
    uint64_t launches;     /* cumulative launches (slot kernel_launches) */
    uint64_t throttled_ns; /* cumulative wait (slot throttled_ns) */
    double util;           /* NVML smUtil, fraction; 0 when NVML had no sample */
};

/* One control period of a claim on a GPU. */
struct vgpu_ctl_tick {
    uint64_t now;
    uint32_t policy;   /* VGPU_POLICY_* */
    bool high_priority;
    bool util_known;   /* NVML answered and every process could be matched */
    bool foreign_busy; /* a process outside the claim ran kernels on the GPU */
    int nobs;
    const struct vgpu_ctl_obs *obs;
    double *cost_ns;   /* out, one per obs: launch cost to charge (0 = default) */
    double util;       /* out: the claim's measured share, fraction */
    bool limited;      /* out: the bucket is throttling */
};

/*
 * The refiller's control period: updates every process's launch-cost
 * estimate, decides the policy, and either opens the bucket or runs one PI
 * step and sets the bucket's rate. Refilling is separate (vgpu_bucket_refill,
 * more often).
 */
void vgpu_ctl_tick(struct vgpu_ctl *c, struct vgpu_region_device *d, struct vgpu_ctl_tick *t);

#endif /* VGPU_LIMITER_H */
