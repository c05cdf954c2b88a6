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
 * plant.h - a deterministic model of a GPU, its driver and the processes of
 * several claims, to drive the compute limiter (src/limiter_math.c) in virtual
 * time, without threads or clocks.
 *
 * The GPU and NVML are the model the fake driver follows in real time
 * (fake/fake_gpu.h), with the same code: a time-sliced engine that starts
 * queued kernels when it picks them (one process at a time for about 1 ms
 * while others wait, small grids of that process side by side), busy time
 * as the exact union of kernels, and NVML's per-process utilisation as a
 * one-second moving window of 1/6 s sample periods, lagged by up to one
 * period, in whole percents with jitter.
 *
 * A process launches asynchronously into its streams, keeping up to depth
 * kernels queued on each (or, synced, waiting for its next stream to drain
 * and queueing depth kernels on it), from one host thread or (threaded) one
 * per stream, each with its own launch waiting in the bucket, with
 * log-normal durations around a
 * mean (50 us .. 20 ms), through its claim's token bucket exactly as
 * libvgpu.so does
 * (charge; if in debt, wait what vgpu_bucket_take says, paced by
 * vgpu_bucket_paced_wait behind another waiting launch of the process, looking at the
 * bucket every VGPU_WAIT_MAX_NS and going early once the whole debt is paid
 * (vgpu_bucket_paid); count the launch when it goes; the bucket
 * set up at the start, as every process's library does); it starts, may alternate
 * busy and idle phases, and may stop (as if killed: the GPU drops its
 * queued kernels; a launch it was charged for and never made is given back by
 * the refiller's next control period, which reclaims its slot). The
 * refiller is elected among the claim's live processes (the lowest index)
 * and keeps the lease while it lives; one that stopped is replaced
 * VGPU_REFILLER_STALE_NS later, as the library notices a dead lease holder.
 * A new refiller takes over with vgpu_ctl_takeover as limiter.c does,
 * refills every PLANT_REFILL_NS and runs vgpu_ctl_tick every
 * VGPU_CTL_PERIOD_NS on what NVML reports.
 *
 * Results are the ground truth: each claim's true share of every sample
 * period, not what the limiter's sensor said.
 */
#ifndef VGPU_PLANT_H
#define VGPU_PLANT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "fake_gpu.h"
#include "limiter.h"
#include "limiter_math.h"

#define PLANT_MAX_CLAIMS 4
#define PLANT_MAX_PROCS 64
#define PLANT_MAX_STREAMS 8
#define PLANT_MAX_DEPTH 16
#define PLANT_REFILL_NS 5000000ull
/* Sample periods recorded (about 170 s). */
#define PLANT_MAX_PERIODS 1024

struct plant_proc_spec {
    int claim;
    unsigned limit_percent; /* the limit this process read from its config; 0 = the claim's */
    uint64_t kernel_ns;     /* mean kernel duration */
    double sigma;           /* log-normal shape; 0 = every kernel kernel_ns long */
    int streams;            /* 1..PLANT_MAX_STREAMS (0 = 1) */
    int depth;              /* kernels queued per stream, 1..PLANT_MAX_DEPTH (0 = 2) */
    bool small_grid;        /* grids smaller than the GPU: its streams run side by side */
    bool threaded;          /* a host thread per stream, each with its own launch waiting in
                               the bucket (else one thread launches into every stream) */
    bool synced;            /* each stream in turn: synchronise it, then queue depth kernels
                               (else every stream is kept depth kernels deep) */
    uint64_t start_ns;      /* starts launching here */
    uint64_t stop_ns;       /* exits here; 0 = runs to the end */
    uint64_t busy_ns, idle_ns; /* alternating phases (idle_ns 0 = always busy) */
};

struct plant_claim_spec {
    unsigned limit_percent; /* 0 = no limit: the processes launch freely */
    uint32_t policy;        /* VGPU_POLICY_* */
    bool high_priority;
};

struct plant_spec {
    uint64_t duration_ns;
    uint64_t seed; /* kernel durations, sensor jitter */
    int nclaims, nprocs;
    struct plant_claim_spec claims[PLANT_MAX_CLAIMS];
    struct plant_proc_spec procs[PLANT_MAX_PROCS];
    /*
     * NULL, or where each control period of every limited claim is written,
     * one line per process: the time, its true share of the period, NVML's
     * reading, its launches in the period, the cost the refiller set, whether
     * it is measured, the bucket's balance and whether the period was marked
     * a burst (to see what the estimate, bucket and controller do).
     */
    FILE *trace;
};

struct plant_result {
    int nperiods;
    /* True share of each claim in each sample period (percent of GPU time). */
    double share[PLANT_MAX_PERIODS][PLANT_MAX_CLAIMS];
    uint64_t launches[PLANT_MAX_PROCS];
    uint64_t refiller_changes[PLANT_MAX_CLAIMS];
};

/* Runs the model. Returns 0, or -1 if the spec is out of range. */
int plant_run(const struct plant_spec *spec, struct plant_result *res);

/* Mean true share of claim over [from_ns, to_ns) (whole sample periods within it). */
double plant_mean_share(const struct plant_result *res, int claim, uint64_t from_ns,
                        uint64_t to_ns);

/* Settling is judged on two-second means (12 sample periods). */
#define PLANT_SETTLE_PERIODS 12

/*
 * Settling: the time from from_ns after which the claim's true share,
 * averaged over two seconds, stays within band points of target: every
 * two-second window starting then or later (sliding by one sample period,
 * up to to_ns) is within the band.
 */
uint64_t plant_settling_ns(const struct plant_result *res, int claim, double target, double band,
                           uint64_t from_ns, uint64_t to_ns);

/* Highest and lowest one-second mean of the claim's true share within [from_ns, to_ns). */
double plant_max_share(const struct plant_result *res, int claim, uint64_t from_ns,
                       uint64_t to_ns);
double plant_min_share(const struct plant_result *res, int claim, uint64_t from_ns,
                       uint64_t to_ns);

/* The accuracy grid of the compute limiter: kernel classes. */
enum plant_kernels { PLANT_K_100US, PLANT_K_2MS, PLANT_K_20MS, PLANT_K_MIX, PLANT_K_COUNT };

/* Name of a kernel class for tables ("0.1 ms", "2 ms", "20 ms", "mix"). */
const char *plant_kernels_name(enum plant_kernels k);

/* One cell of the grid, measured on the true share. */
struct plant_cell {
    double share[2];      /* steady-state mean of each claim (last third of the run) */
    double first_s[2];    /* mean of the first second */
    double band[2];       /* settling band: 2 points, or 4 x the spread two seconds of
                             kernels of this class have by themselves, if larger */
    double settling_s[2]; /* plant_settling_ns in seconds within band */
    double low[2];        /* lowest one-second mean once settled (from 3 s at the earliest) */
    double peak[2];       /* busiest one-second mean of the run */
    double spread[2];     /* what one second of such kernels varies by itself (sd, points) */
};

/*
 * Runs one cell: nclaims (1 or 2) claims on one GPU, the first at limit,
 * the second at 100 - limit, each with procs saturating processes (1..4)
 * launching kernels of class k (log-normal durations; processes differ in
 * streams, queue depth and grid size), for duration_ns. Returns 0 or -1.
 */
int plant_grid_cell(unsigned limit, int procs, int nclaims, enum plant_kernels k,
                    uint64_t duration_ns, uint64_t seed, struct plant_cell *out);

/*
 * Runs one cell of the streams grid: one claim at limit with one process of
 * streams host threads, each launching kernels of class k (not the mix;
 * log-normal of shape sigma, 0: all alike) into a stream of its own kept two
 * deep, small grids
 * (side by side on the GPU) or full ones, for duration_ns. Returns 0 or -1.
 */
int plant_streams_cell(unsigned limit, int streams, bool small_grid, enum plant_kernels k,
                       double sigma, uint64_t duration_ns, uint64_t seed, struct plant_cell *out);

#endif /* VGPU_PLANT_H */
