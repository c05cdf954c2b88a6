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
 * fake_gpu.h - the model of a GPU and its driver's utilisation sensor,
 * shared by the fake libcuda/NVML (real time, records in the shared state
 * file) and the compute limiter's simulated plant (test/plant.c, virtual
 * time), so that both tell the same story.
 *
 * Engine (gpu_sched). As a real GPU's scheduler: kernels wait in their
 * process's queue until the engine starts them. The engine runs one context
 * (process, "owner") at a time for a time slice (about 1 ms, NVIDIA's
 * default): while its slice lasts, or nobody else waits, it starts the
 * owner's next kernels (a stream runs its kernels in order; a small grid,
 * one that leaves SMs free, runs beside the owner's other small grids);
 * once the slice is over and another process waits, the engine lets the
 * running kernels finish and gives the next slice to the next process with
 * work, round robin. A context that runs out of work yields at once.
 *
 * MPS. The clients of one MPS control daemon (gpu_sched_set_client: the
 * same group) are one context, the daemon's server: while the slice is
 * theirs, every client's kernels run at the same time, each client held to
 * its share of the SMs (its active-thread percentage): a full grid runs on
 * that share only, so it takes len x 1000 / share_pm; a small grid is taken
 * to fit within the share and runs in len. A client with kernels running
 * holds its share of the SMs; another client's kernel starts only while the
 * shares held add up to no more than the whole GPU (or nothing runs). Per
 * client the rules of a process hold (a stream in order, small grids beside
 * each other). Clients of different daemons, and processes that are no
 * client, take turns as above. It is simulated lazily: whoever calls advances it to "now", so a kernel's start
 * depends only on what was launched before it, not on when the host gets
 * round to looking.
 *
 * Busy records. Per process and per GPU: the cumulative busy time (ground
 * truth, including the rest of the kernels running) and the busy time of
 * each sample period (GPU_SAMPLE_NS, about 1/6 s, as NVML's driver
 * samples), in a ring of GPU_PERIODS periods (about 21 s). Nothing is
 * dropped at any kernel rate.
 *
 * Sensor. What NVML reports at time t: the busy share of the last
 * GPU_WINDOW_PERIODS complete periods (a one-second moving window; the
 * current, incomplete period is not reported yet: lag of up to one period),
 * in whole percent with a per-sample dither of up to one point (jitter;
 * unbiased on average).
 *
 * No clock, no lock: callers pass "now" and serialise calls on one engine
 * (the fake with a cross-process lock, the plant by being single
 * threaded). Busy records are atomics so that readers in other processes
 * see whole values without the lock.
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
    _Atomic uint64_t total;            /* busy ns ever recorded (also the rest of running kernels) */
    _Atomic uint64_t ring[GPU_PERIODS]; /* (period << GPU_BUSY_BITS) | busy ns in that period */
} gpu_busy;

/* Processes per GPU the engine tells apart (the fake's slots, the plant's processes). */
#define GPU_OWNERS 64
/* Kernels per process and GPU waiting or running; a launch into a full queue waits. */
#define GPU_QUEUE 512
/* How deep into a process's queue the engine looks for a kernel it can start. */
#define GPU_LOOKAHEAD 64
/* Kernels running at once (small grids of one process in different streams). */
#define GPU_CONCURRENT 8
/* NVIDIA's default time slice. */
#define GPU_SLICE_NS 1000000ULL
/* The longest kernel the engine runs (a longer one is cut: nothing real runs an hour). */
#define GPU_KERNEL_MAX_NS 3600000000000ULL

enum { GPU_K_WAITING = 1, GPU_K_RUNNING, GPU_K_DONE };

/* One kernel in its process's queue. */
typedef struct gpu_kernel {
    uint64_t len;    /* duration */
    uint64_t end;    /* set when it starts */
    uint32_t stream; /* the process's stream: a stream runs its kernels in order */
    uint16_t state;  /* GPU_K_* */
    uint16_t small;  /* a grid smaller than the GPU */
} gpu_kernel;

/* The kernels of one process on one GPU: tickets [head, tail) live at k[ticket % GPU_QUEUE]. */
typedef struct gpu_queue {
    uint64_t head;    /* oldest kernel not done */
    uint64_t tail;    /* kernels ever submitted: the next ticket */
    uint64_t waiting; /* kernels not started */
    uint64_t group;   /* MPS: the process's control daemon, 0 = not an MPS client */
    uint32_t share_pm; /* MPS: its share of the SMs, per mille (1..1000) */
    uint32_t reserved;
    gpu_kernel k[GPU_QUEUE];
} gpu_queue;

/*
 * The engine of one GPU. Zero-filled is a valid idle engine. Callers
 * serialise every call on one engine (the fake with a cross-process lock,
 * the plant by being single threaded).
 */
typedef struct gpu_sched {
    uint64_t now;       /* simulated up to */
    uint64_t slice_end;
    uint64_t waiting;   /* kernels not started, all processes */
    uint32_t owner;     /* process holding the slice + 1, 0 = none yet */
    uint32_t small;     /* the running kernels are small grids (a process that is no MPS client) */
    uint64_t running[GPU_CONCURRENT]; /* tickets + 1 of the running kernels, 0 = free */
    uint8_t run_owner[GPU_CONCURRENT]; /* whose: the owner, or an MPS client of its group */
    gpu_queue q[GPU_OWNERS];
} gpu_sched;

/* What the engine tells its user: a kernel started (busy records), one finished. */
typedef struct gpu_sched_hooks {
    void (*started)(void *ctx, int owner, uint64_t start, uint64_t end);
    void (*finished)(void *ctx, int owner, uint32_t stream); /* NULL: nothing to do */
    void *ctx;
} gpu_sched_hooks;

/*
 * Makes owner an MPS client of the daemon group (0: no client) with
 * share_pm per mille of the SMs (out of 1..1000: the whole GPU), for the
 * kernels it submits from now on.
 */
void gpu_sched_set_client(gpu_sched *s, int owner, uint64_t group, uint32_t share_pm);

/* Runs the engine up to now (an earlier now changes nothing). */
void gpu_sched_advance(gpu_sched *s, uint64_t now, const gpu_sched_hooks *h);

/*
 * Queues a kernel of owner (len ns, on its stream; small: a small grid)
 * launched at now, after running the engine up to now; it starts at once if
 * the engine picks it. Returns its ticket, or -1 when owner's queue is full
 * (wait for gpu_sched_wait(s, owner, 0, GPU_WAIT_OLDEST)).
 */
int64_t gpu_sched_submit(gpu_sched *s, int owner, uint32_t stream, bool small, uint64_t len,
                         uint64_t now, const gpu_sched_hooks *h);

/* gpu_sched_wait's what: the oldest kernel of the queue, or every kernel up to the ticket. */
#define GPU_WAIT_OLDEST (-1)
#define GPU_WAIT_ALL (-2)

/*
 * Whether owner's kernel ticket has finished by the engine's now: returns
 * 0 if so, else the earliest time it can have (a lower bound: sleep until
 * then, advance and ask again). what: the ticket's stream (the stream's
 * kernels up to the ticket), GPU_WAIT_ALL (every kernel of owner up to the
 * ticket: returns the earliest end of any of them) or GPU_WAIT_OLDEST (the
 * oldest kernel of owner; ticket unused).
 */
uint64_t gpu_sched_wait(const gpu_sched *s, int owner, uint64_t ticket, int64_t what);

/* Forgets owner's kernels, waiting or running (its process is gone). */
void gpu_sched_drop(gpu_sched *s, int owner);

/* Earliest end of a running kernel, UINT64_MAX when idle. */
uint64_t gpu_sched_next_end(const gpu_sched *s);

/*
 * Whether the engine's fields are within their bounds (an owner that
 * exists, queues no longer than GPU_QUEUE, running kernels inside their
 * queue), as every call expects; a few loads per process. The fake's
 * engine lives in a file every process on the node can write.
 */
bool gpu_sched_sane(const gpu_sched *s);

/*
 * Makes the derived fields consistent with the queues again, after a
 * caller died between the stores of one call (the fake's lock was stolen)
 * or anything else wrote into the engine: after it, gpu_sched_sane holds.
 */
void gpu_sched_repair(gpu_sched *s);

/*
 * Records that [start, end) was busy. start must not precede the start of
 * any interval recorded before (true for the engine's starts), so overlaps
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

/*
 * The generator state of stream `stream` (a process) of seed `seed`.
 * Streams of nearby seeds or indices are unrelated: splitmix64 states that
 * differ by a multiple of its increment (such as seed x increment + index)
 * replay one sequence shifted, which would give every process the same
 * kernels a few launches apart.
 */
uint64_t gpu_rand_seed(uint64_t seed, uint64_t stream);

/* A uniform double in [0, 1). */
double gpu_rand_unit(uint64_t *state);

/*
 * A log-normal duration with the given mean (ns) and shape (sigma of the
 * underlying normal), clipped to [lo, hi].
 */
uint64_t gpu_rand_lognormal(uint64_t *state, uint64_t mean, double sigma, uint64_t lo,
                            uint64_t hi);

#endif /* VGPU_FAKE_GPU_H */
