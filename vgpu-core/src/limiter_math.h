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
 * limiter_math.h - the compute limiter's arithmetic: the claim-wide token bucket
 * and the closed-loop controller that sets its refill rate.
 *
 * Nothing here reads a clock, sleeps or starts a thread: every function gets
 * "now" from its caller. The library drives it with CLOCK_MONOTONIC and NVML
 * (limiter.c); the unit test drives it with a discrete-time model of a GPU,
 * so the controller that ships is the controller that is tested.
 *
 * Units: one token is one nanosecond of estimated GPU time. A rate is a
 * fraction of GPU time (0.3 = 30 %), stored in the region as tokens per
 * second.
 */
#ifndef VGPU_LIMITER_MATH_H
#define VGPU_LIMITER_MATH_H

#include <stdbool.h>
#include <stdint.h>

#include "vgpu_region.h"

/* Balance that stands for "not throttling" (workConserving without contention). */
#define VGPU_BUCKET_OPEN (INT64_MAX / 4)
/* The bucket holds this much refill time: the largest burst above the share. */
#define VGPU_BUCKET_DEPTH_NS 100000000ull
/*
 * While another claim's kernels share the GPU, a claim that launches keeps
 * this much refill: what it could not spend while the other claim's kernels
 * held the engine (its own queued behind them), or while the kernels it was
 * charged for ran longer than their estimate, would otherwise spill at the
 * brim, and the seconds its kernels run shorter could not make it up.
 */
#define VGPU_BUCKET_CONTENDED_DEPTH_NS 200000000ull
/* Smallest capacity (tokens), so that tiny rates still admit short kernels. */
#define VGPU_BUCKET_MIN_CAPACITY 100000ll
/* A waiting launch looks at the bucket at least this often (it may have been opened). */
#define VGPU_WAIT_MAX_NS 5000000ull
/* No launch waits longer than this for its place in the debt (a bucket's rate fell meanwhile). */
#define VGPU_WAIT_LIMIT_NS 10000000000ull

/* NVML's per-process smUtil is the busy share of this trailing window. */
#define VGPU_CTL_WINDOW_NS 1000000000ull
/*
 * A launch this much older than the end of an NVML window has run within it
 * (a queue of a few kernels): only such launches bound a cost from above.
 */
#define VGPU_CTL_SENSOR_LAG_NS 100000000ull
/* NVML's driver samples utilisation this often (about 1/6 s). */
#define VGPU_CTL_SAMPLE_NS 166666667ull
/* The controller runs at this period. */
#define VGPU_CTL_PERIOD_NS 100000000ull
/*
 * Launch cost assumed before a process's first estimate (ns of GPU time):
 * the longest kernel we plan for, so a process starts below its share,
 * never above it; its first estimate follows NVML's first sample.
 */
#define VGPU_CTL_DEFAULT_COST_NS 20000000ull
/* Launch counts kept per process, one per control period (covers a window and its lag). */
#define VGPU_CTL_HISTORY 20
/* workConserving: contention is remembered this long after it was last seen. */
#define VGPU_CTL_CONTENTION_HOLD_NS 2000000000ull
/* Time constant of the achieved share published for the monitor. */
#define VGPU_CTL_SHARE_TAU_NS 10000000000ull

/*
 * Timed launches (where NVML reports no per-process utilisation: a MIG
 * instance). A process times one launch at a time with a pair of CUDA
 * events around it, the next no sooner than this after the last one ended.
 */
#define VGPU_TIMED_GAP_NS 1000000ull
/* Time constant of the mean of timed launches. */
#define VGPU_TIMED_TAU_NS 300000000ull

/*
 * The cost estimate of a process whose launches are timed: the mean GPU
 * time of its timed launches, each weighing less as it ages (time constant
 * VGPU_TIMED_TAU_NS), the first one alone at first. Zero-filled is empty.
 */
struct vgpu_timed_cost {
    double sum_ns;
    double weight;
    uint64_t last_ns; /* when the last timed launch was added */
};

/*
 * Adds a launch that took elapsed_ns of GPU time, as seen at now, and
 * returns the estimate (ns per launch). A negative, NaN or absurd time
 * (beyond the longest kernel the engine plans for x 1000) adds nothing.
 */
double vgpu_timed_cost_add(struct vgpu_timed_cost *t, double elapsed_ns, uint64_t now);

/*
 * Sets the refill rate (fraction of GPU time) and the capacity derived from
 * it (depth_ns of refill). An open bucket (or a balance above the new
 * capacity) is reset to a full bucket, so throttling starts with at most one
 * burst.
 */
void vgpu_bucket_set_rate(struct vgpu_region_device *d, double rate, uint64_t depth_ns,
                          uint64_t now);

/*
 * Sets up a bucket that has none yet (capacity 0): its rate, and a full
 * bucket on top of what launches charged meanwhile owe. A no-op on a bucket
 * already set up, so every process of the claim calls it at its start and
 * no launch ever meets a bucket without a rate.
 */
void vgpu_bucket_init(struct vgpu_region_device *d, double rate, uint64_t now);

/* Opens the bucket: every launch is admitted at one atomic operation. */
void vgpu_bucket_open(struct vgpu_region_device *d);

/* Whether the bucket is open. */
bool vgpu_bucket_is_open(const struct vgpu_region_device *d);

/*
 * Whether every launch charged so far is paid for: the bucket is open or its
 * balance is not negative (refills and refunds covered the whole debt). A
 * waiting launch may then go before the wait vgpu_bucket_take gave it, which
 * assumed that only the refill would pay.
 */
bool vgpu_bucket_paid(const struct vgpu_region_device *d);

/*
 * Adds rate x (now - last refill) tokens, capped at the capacity. Safe
 * against a concurrent refiller (the elapsed interval is claimed by
 * compare-and-swap, so no time is credited twice).
 */
void vgpu_bucket_refill(struct vgpu_region_device *d, uint64_t now);

/*
 * Gives tokens back (launches charged more than they ran), capped at the
 * capacity like a refill; a no-op on an open bucket.
 */
void vgpu_bucket_credit(struct vgpu_region_device *d, uint64_t tokens);

/*
 * Admission of a launch costing cost tokens. The cost is always charged (one
 * atomic operation). Returns 0 if the balance is still non-negative: the
 * launch goes at once. Otherwise the launch has taken its place at the end of
 * the debt and must wait until the refill has paid everything up to it: the
 * debt over the rate, returned in ns (at most VGPU_WAIT_LIMIT_NS; with a rate
 * of 0, VGPU_WAIT_MAX_NS). Waiting launches are admitted in the order they
 * were charged, whatever their cost: a process charged a large cost is never
 * starved by one of small launches, and a kernel larger than the bucket
 * waits for its whole cost.
 */
uint64_t vgpu_bucket_take(struct vgpu_region_device *d, uint64_t cost);

/*
 * The wait vgpu_bucket_take gave a launch, taken at now, less the refill the
 * bucket has accrued since its last refill (its refiller credits it in
 * steps of VGPU_WAIT_MAX_NS; no more than one step is counted, so a bucket
 * nobody refills is not paid by refills that never come): the time until a
 * continuous refill would have paid the debt up to the launch (0: it may go
 * now). A launch waiting while another of its process waits uses it: the
 * refill's steps would otherwise release them together, and a process's
 * launches waiting at once are its streams', whose small grids then run
 * side by side (see docs/limiter.md, pacing).
 */
uint64_t vgpu_bucket_paced_wait(const struct vgpu_region_device *d, uint64_t wait, uint64_t now);

/*
 * A launch that waits in the debt, charged `charged` tokens with wait_ns of
 * its wait left, is charged its process's launch cost as it is now (a new
 * estimate, or a bound NVML proved), as any launch taken now would be: the
 * difference is given back (as far as the bucket is in debt: never banked
 * above a balance of zero) or charged on top, and its wait shortens or grows
 * by it over the rate. Returns the wait left (0: it may go; at most
 * VGPU_WAIT_LIMIT_NS; unchanged at a rate of 0, where waits are polled).
 * Without it, the launches that wait when a process's estimate falls (at its
 * start, charged the default cost of the longest kernels) hold the claim
 * back for as long as that overcharge takes to refill; both ways, so that
 * waits spanning an estimate's ups and downs are charged neither its lows
 * nor its highs.
 */
uint64_t vgpu_bucket_reprice(struct vgpu_region_device *d, uint64_t charged, uint64_t cost,
                             uint64_t wait_ns);

/* Launch-count history and cost estimate of one process (one region slot). */
struct vgpu_ctl_proc {
    uint64_t id;       /* identity of the slot owner; a new owner restarts the history */
    unsigned n, head;  /* ring of (time, cumulative launches, cumulative charge) */
    uint64_t t[VGPU_CTL_HISTORY];
    uint64_t launches[VGPU_CTL_HISTORY];
    double charged[VGPU_CTL_HISTORY]; /* ns charged for those launches, at the costs then set */
    bool burst[VGPU_CTL_HISTORY]; /* the period up to that record was a burst (see vgpu_ctl_cost) */
    bool fresh;        /* appeared while this controller ran: it launched from 0 */
    uint64_t first_ns; /* when this controller first saw it */
    uint64_t window_end; /* end of the last NVML window used */
    double busy_acc, launch_acc; /* decaying sums of busy ns and launches over windows */
    bool measured;     /* the estimate is a mean of readings, not a bound from above */
    double cost_ns;    /* current estimate, 0 = none yet */
    uint64_t refunded_to; /* launches up to this time were refunded (or need not be) */
    uint64_t block_from; /* the last block refunded: the launches from this time to refunded_to */
    double block_ns;     /* what that block stands charged, net of its refunds */
    double refund_ns;  /* over-charge proven since the last tick, owed back to the bucket */
};

/* Controller state of one claim on one GPU. */
struct vgpu_ctl {
    double target;               /* fraction of GPU time, (0, 1] */
    double share_sum, share_weight; /* decaying time-weighted sums of the claim's share:
                                       their ratio is its mean over ~VGPU_CTL_SHARE_TAU_NS */
    uint64_t last_ns;            /* time of the last tick, 0 = none */
    uint64_t contended_until_ns; /* workConserving: throttle until then */
    bool limited;                /* the last tick throttled the bucket */
    struct vgpu_ctl_proc procs[VGPU_REGION_MAX_SLOTS];
};

/* Starts a controller for target (fraction of GPU time). */
void vgpu_ctl_init(struct vgpu_ctl *c, double target);

/*
 * A process becomes the claim's refiller: starts c for target and sets the
 * bucket's rate to it (a bucket never used is filled). Nothing of a previous
 * refiller's control state is inherited (its rate may have been computed for
 * another limit or other processes); the launch-cost estimates it published
 * seed ours (seed_cost_ns per slot, 0 = none), since they describe the
 * processes, not the refiller.
 */
void vgpu_ctl_takeover(struct vgpu_ctl *c, struct vgpu_region_device *d, double target,
                       const uint64_t *seed_cost_ns, uint64_t now);

/* What the refiller observed of one process of the claim this period. */
struct vgpu_ctl_obs {
    int slot;              /* region slot index (0..VGPU_REGION_MAX_SLOTS-1) */
    uint64_t id;           /* identity of the slot's owner */
    uint64_t launches;     /* cumulative launches (slot kernel_launches) */
    double util;           /* NVML smUtil, fraction; 0 when NVML had no sample */
    uint64_t window_end;   /* end of the window util describes (same clock as now); 0 = no
                              sample: idle up to one sample period before now */
    uint64_t timed_cost_ns; /* timed GPUs: the cost the process published (0 = none yet) */
};

/*
 * Timed GPUs (no NVML utilisation per process): sets each obs's util to the
 * launches its process made since the previous period times the cost it
 * published, over the time between (0 for a process first seen now).
 */
void vgpu_ctl_timed_util(struct vgpu_ctl *c, struct vgpu_ctl_obs *obs, int nobs, uint64_t now);

/*
 * Updates the launch-cost estimate of the observed process and returns it
 * (ns; 0 when there is none yet). An estimate is busy / launches over the
 * same NVML window: NVML's window is aligned with the launch counts of the
 * history (so lag and start-up do not bias it) and each window is used once.
 * While readings are below 1 % (NVML's resolution), the window holds the
 * process's start or precedes this controller's first record of it, a
 * reading only bounds the cost from above: (reading + one percent, a whole
 * step of the dithered sensor) over the launches VGPU_CTL_SENSOR_LAG_NS
 * older than the window's end (those known), and the estimate only moves
 * down; what those launches were charged beyond that bound is added to the
 * process's refund_ns, which vgpu_ctl_tick gives back to the bucket. Each
 * launch is refunded once, but the launches of one window are reconciled
 * together: a block refunded by an earlier window that lies wholly within
 * this one is merged with the new launches, and the block as a whole stands
 * charged at most the bound (what launches were charged is kept in the
 * history, at the costs set then). From a reading of 1 % over a whole window
 * on it is measured: windows, zeros included, are summed with decaying
 * weights (time constant ~0.3 s on top of the window's own second; the whole
 * windows it was bounded over count too, so the first reading of 1 % does
 * not stand alone), so no single reading moves it by more than a fraction; a
 * zero for launches it says NVML must have seen returns it to bounding.
 * Windows that hold a burst of the process (a control period in which, while
 * the bucket throttled, it was charged more than the claim's whole refill
 * could pay: refunds, re-pricing, a full bucket let it through) are left out
 * of the sums: small grids of a burst run side by side on several streams,
 * so NVML sees a fraction of the busy time the same launches take once paced
 * (see docs/limiter.md, concurrent kernels on many streams).
 */
double vgpu_ctl_cost(struct vgpu_ctl *c, const struct vgpu_ctl_obs *o, bool util_known,
                     uint64_t now);

/*
 * Whether the claim is throttled now. strict: always; disabled: never;
 * workConserving: while another claim's process was seen busy on the GPU in
 * the last VGPU_CTL_CONTENTION_HOLD_NS (held so that throttling does not
 * flap), except for a high-priority claim, which contention never throttles.
 */
bool vgpu_ctl_should_limit(struct vgpu_ctl *c, uint32_t policy, bool high_priority,
                           bool foreign_busy, uint64_t now);

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
    double util;       /* out: the claim's measured share now, fraction */
    double refund_ns;  /* out: tokens given back for launches charged beyond their GPU time */
    bool share_updated; /* out: the device's sm_share_permyriad was updated */
    bool limited;      /* out: the bucket is throttling */
    /*
     * The processes time their launches (a GPU whose NVML has no
     * per-process utilisation): each obs's util is its launches of the
     * period times the cost the process published, no cost is estimated
     * here and nothing is refunded.
     */
    bool timed;
};

/*
 * The refiller's control period: updates every process's launch-cost
 * estimate and the achieved share, decides the policy, and either opens the
 * bucket or sets its rate and depth (VGPU_BUCKET_CONTENDED_DEPTH_NS for a
 * claim that launched this period while contended). The
 * loop closes through the cost estimates: with every launch charged its
 * measured GPU time, the bucket's rate is the share, so no integrator sits
 * on top of them to wind up or to be inherited; a new refiller restarts at
 * the target. Refunds pay the bucket's debt and never lift its balance
 * above zero: banked, they let a burst through whose kernels on several
 * streams overlap, and the estimates taken while they overlap undercharge
 * once throttling spreads them out. Refilling is separate
 * (vgpu_bucket_refill, more often).
 */
void vgpu_ctl_tick(struct vgpu_ctl *c, struct vgpu_region_device *d, struct vgpu_ctl_tick *t);

/* Compute state of one GPU in this process. */
struct vgpu_limiter_state {
    bool active;                   /* launches go through the bucket */
    bool counted;                  /* a claim's GPU without an SM limit: launches counted and
                                      utilisation sampled for the monitor, nothing limited */
    uint64_t next_sample_ns;       /* counted: the next look at NVML (helper thread only) */
    double target;                 /* SM limit, fraction of GPU time */
    uint32_t policy;               /* VGPU_POLICY_* */
    bool high_priority;
    struct vgpu_region_device *bucket; /* region record, or private_bucket */
    struct vgpu_region_device private_bucket;
    uint64_t private_cost_ns;      /* launch cost without a region slot, or a timed GPU's own */
    uint64_t launches;             /* this process's launches (single relaxed store) */
    uint64_t throttled_ns;         /* this process's time waiting for tokens */
    uint32_t waiting;              /* this process's launches waiting in the bucket now */
    bool timed;                    /* launches are timed with events (VGPU_TIMED_GAP_NS) */
    struct vgpu_launch_timer *timer; /* limiter.c's, from the first timed launch */
    /* refiller state (helper thread only) */
    bool owner;
    uint64_t lease_ns;             /* the lease value we wrote */
    uint64_t next_tick_ns;
    struct vgpu_ctl *ctl;
};

/*
 * Sets up one GPU's compute state: a target of sm_limit percent (0 = none)
 * under policy, on the claim's bucket (NULL: a private one, standalone).
 * Active only when active_allowed (the GPU is enforced and not failed
 * closed), the limit is set and the policy is not disabled; the bucket is
 * then initialised at now unless another process did it first.
 */
void vgpu_limiter_math_state_init(struct vgpu_limiter_state *c,
                                  struct vgpu_region_device *bucket, bool active_allowed,
                                  uint32_t sm_limit, uint32_t policy, bool high_priority,
                                  uint64_t now);

#endif /* VGPU_LIMITER_MATH_H */
