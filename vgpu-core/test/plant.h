/*
 * plant.h - a discrete-time model of a GPU shared by claims, to drive the
 * compute limiter (src/limiter.c) without threads or clocks.
 *
 * The GPU runs one kernel at a time from a FIFO of launched kernels (time
 * slicing between processes). Each process keeps up to PLANT_DEPTH kernels
 * of a fixed length in flight and launches through its claim's token bucket
 * exactly as libvgpu.so does (take, else sleep vgpu_bucket_wait_ns and try
 * again). NVML is modelled as the fake driver does: per-process smUtil =
 * whole percent of the trailing second with a kernel of the process running.
 * The refiller refills every PLANT_REFILL_NS and runs vgpu_ctl_tick every
 * VGPU_CTL_PERIOD_NS, as the library's refiller thread does.
 */
#ifndef VGPU_PLANT_H
#define VGPU_PLANT_H

#include <stdbool.h>
#include <stdint.h>

#include "limiter.h"

#define PLANT_MAX_CLAIMS 4
#define PLANT_MAX_PROCS 8
#define PLANT_DEPTH 2
#define PLANT_REFILL_NS 5000000ull
#define PLANT_MAX_TICKS 1024

struct plant_proc_spec {
    int claim;
    uint64_t kernel_ns;
    uint64_t start_ns; /* the process starts launching here (mid-run joins) */
};

struct plant_claim_spec {
    unsigned limit_percent; /* 0 = no limit: the process launches freely */
    uint32_t policy;        /* VGPU_POLICY_* */
    bool high_priority;
};

struct plant_spec {
    uint64_t duration_ns;
    int nclaims, nprocs;
    struct plant_claim_spec claims[PLANT_MAX_CLAIMS];
    struct plant_proc_spec procs[PLANT_MAX_PROCS];
};

struct plant_result {
    int nticks;
    /* Per control tick and claim: the share NVML reported (percent, summed smUtil). */
    double share[PLANT_MAX_TICKS][PLANT_MAX_CLAIMS];
    uint64_t launches[PLANT_MAX_PROCS];
};

/* Runs the model. Returns 0, or -1 if the spec is out of range. */
int plant_run(const struct plant_spec *spec, struct plant_result *res);

/* Mean share of claim over ticks whose time lies in [from_ns, to_ns). */
double plant_mean_share(const struct plant_result *res, int claim, uint64_t from_ns,
                        uint64_t to_ns);

/*
 * Settling time of claim: the time after which every measured share stays
 * within band points of target. Returns the run's duration if it never
 * settles.
 */
uint64_t plant_settling_ns(const struct plant_result *res, int claim, double target, double band);

#endif /* VGPU_PLANT_H */
