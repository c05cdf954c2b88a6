/*
 * fake_gpu.h - the model of a GPU and its driver's utilisation sensor,
 * shared by the fake libcuda/NVML (real time, records in the shared state
 * file) and the compute limiter's simulated plant (test/plant.c, virtual
 * time), so that both tell the same story.
 *
 * Engine. Kernels are placed on a per-GPU timeline when they are launched,
 * from their durations alone: a kernel starts at max(launch time, end of
 * its stream's queue, engine constraint) and runs for its duration. The
 * engine runs one context (process) at a time, switching at kernel
 * boundaries in launch order (time slicing); a kernel whose grid is smaller
 * than the GPU may run beside the previous kernel when that one is also a
 * small grid of the same process (other streams). Starts on one engine
 * never go backwards, so the busy time of a process or of the GPU is the
 * exact union of its kernels, kept in O(1) per kernel.
 *
 * Busy records. Per process and per GPU: the cumulative busy time (ground
 * truth, including work already queued for the future) and the busy time
 * of each sample period (GPU_SAMPLE_NS, about 1/6 s, as NVML's driver
 * samples), in a ring of GPU_PERIODS periods (about 21 s: any queued future
 * work fits). Nothing is dropped at any kernel rate.
 *
 * Sensor. What NVML reports at time t: the busy share of the last
 * GPU_WINDOW_PERIODS complete periods (a one-second moving window; the
 * current, incomplete period is not reported yet: lag of up to one period),
 * in whole percent with a per-sample dither of up to one point (jitter;
 * unbiased on average).
 *
 * No clock, no lock: callers pass "now" and serialise placements on one
 * engine (the fake with a cross-process lock, the plant by being single
 * threaded). Fields are atomics so that readers in other processes see
 * whole values.
 */
#ifndef VGPU_FAKE_GPU_H
#define VGPU_FAKE_GPU_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* NVML's driver samples utilisation about six times a second. */
#define GPU_SAMPLE_NS 166666667ULL
/* Periods in the moving window NVML reports (one second). */
#define GPU_WINDOW_PERIODS 6
/* Periods kept per record (about 21 s). */
#define GPU_PERIODS 128
/* A period's busy time fits in the low bits of a ring entry; the period number in the rest. */
#define GPU_BUSY_BITS 28

/* Busy time of one process on one GPU, or of the whole GPU. */
typedef struct gpu_busy {
    _Atomic uint64_t until;            /* end of the latest busy interval recorded */
    _Atomic uint64_t total;            /* busy ns ever recorded (also queued future work) */
    _Atomic uint64_t ring[GPU_PERIODS]; /* (period << GPU_BUSY_BITS) | busy ns in that period */
} gpu_busy;

/* The timeline of one GPU. */
typedef struct gpu_engine {
    _Atomic uint64_t last_start; /* start of the latest placed kernel */
    _Atomic uint64_t tail;       /* end of all placed work */
    _Atomic uint32_t last_owner; /* owner id of the latest placed kernel + 1, 0 = none */
    _Atomic uint32_t last_small; /* whether it was a small grid */
} gpu_engine;

/*
 * Places a kernel of duration ns launched at now by owner (any id) on a
 * stream whose queue ends at stream_tail; small: its grid leaves SMs free.
 * Returns its start; the end is start + ns. The caller serialises calls on
 * one engine.
 */
uint64_t gpu_place(gpu_engine *e, uint32_t owner, bool small, uint64_t now,
                   uint64_t stream_tail, uint64_t ns);

/*
 * Records that [start, end) was busy. start must not precede the start of
 * any interval recorded before (true for gpu_place's results), so overlaps
 * are counted once. One writer at a time per record.
 */
void gpu_busy_add(gpu_busy *b, uint64_t start, uint64_t end);

/* Forgets everything (a record reused by a new process). */
void gpu_busy_reset(gpu_busy *b);

/*
 * Busy ns in [from, to), exact for intervals on period boundaries and
 * within the ring (the last GPU_PERIODS periods before the newest write);
 * partial periods at either end count pro rata.
 */
uint64_t gpu_busy_between(const gpu_busy *b, uint64_t from, uint64_t to);

/*
 * The sensor: whole percent NVML reports at now for the record, seed
 * choosing the dither sequence (a process id). *window_end (optional)
 * receives the end of the window the value describes. Returns 0 for an idle
 * record.
 */
unsigned gpu_sensor_percent(const gpu_busy *b, uint64_t now, uint64_t seed,
                            uint64_t *window_end);

/* Deterministic pseudo-random numbers (splitmix64) for the models. */
uint64_t gpu_rand_next(uint64_t *state);

/* A uniform double in [0, 1). */
double gpu_rand_unit(uint64_t *state);

/*
 * A log-normal duration with the given mean (ns) and shape (sigma of the
 * underlying normal), clipped to [lo, hi].
 */
uint64_t gpu_rand_lognormal(uint64_t *state, uint64_t mean, double sigma, uint64_t lo,
                            uint64_t hi);

#endif /* VGPU_FAKE_GPU_H */
