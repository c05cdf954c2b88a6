/* fake_gpu.c - see fake_gpu.h. */
#include "fake_gpu.h"

#include <math.h>
#include <stddef.h>

#define BUSY_MASK ((1ULL << GPU_BUSY_BITS) - 1)

_Static_assert(GPU_SAMPLE_NS <= BUSY_MASK, "a period's busy time fits its ring entry");

uint64_t gpu_place(gpu_engine *e, uint32_t owner, bool small, uint64_t now,
                   uint64_t stream_tail, uint64_t ns)
{
    uint64_t start = now > stream_tail ? now : stream_tail;
    uint64_t last = atomic_load_explicit(&e->last_start, memory_order_relaxed);
    uint64_t tail = atomic_load_explicit(&e->tail, memory_order_relaxed);
    /* Small grids of one process share the SMs; anything else waits for the engine. */
    bool beside = small && atomic_load_explicit(&e->last_small, memory_order_relaxed) &&
                  atomic_load_explicit(&e->last_owner, memory_order_relaxed) == owner + 1;
    uint64_t free_at = beside ? last : tail;

    if (start < free_at)
        start = free_at;
    atomic_store_explicit(&e->last_start, start, memory_order_relaxed);
    if (start + ns > tail)
        atomic_store_explicit(&e->tail, start + ns, memory_order_relaxed);
    atomic_store_explicit(&e->last_owner, owner + 1, memory_order_relaxed);
    atomic_store_explicit(&e->last_small, small, memory_order_relaxed);
    return start;
}

/* Adds ns to period p's ring entry (the entry of an older period is replaced). */
static void ring_add(gpu_busy *b, uint64_t p, uint64_t ns)
{
    _Atomic uint64_t *r = &b->ring[p % GPU_PERIODS];
    uint64_t cur = atomic_load_explicit(r, memory_order_relaxed);
    uint64_t busy = (cur >> GPU_BUSY_BITS) == p ? (cur & BUSY_MASK) + ns : ns;

    if (busy > GPU_SAMPLE_NS)
        busy = GPU_SAMPLE_NS;
    atomic_store_explicit(r, (p << GPU_BUSY_BITS) | busy, memory_order_relaxed);
}

void gpu_busy_add(gpu_busy *b, uint64_t start, uint64_t end)
{
    uint64_t until = atomic_load_explicit(&b->until, memory_order_relaxed);

    if (start < until)
        start = until; /* the overlap is already counted */
    if (end <= start)
        return;
    atomic_store_explicit(&b->until, end, memory_order_relaxed);
    atomic_fetch_add_explicit(&b->total, end - start, memory_order_relaxed);
    while (start < end) {
        uint64_t p = start / GPU_SAMPLE_NS, pend = (p + 1) * GPU_SAMPLE_NS;
        uint64_t stop = end < pend ? end : pend;

        ring_add(b, p, stop - start);
        start = stop;
    }
}

void gpu_busy_reset(gpu_busy *b)
{
    atomic_store_explicit(&b->until, 0, memory_order_relaxed);
    atomic_store_explicit(&b->total, 0, memory_order_relaxed);
    for (int i = 0; i < GPU_PERIODS; i++)
        atomic_store_explicit(&b->ring[i], 0, memory_order_relaxed);
}

/* Busy ns recorded for period p (0 when the ring no longer or not yet holds it). */
static uint64_t period_busy(const gpu_busy *b, uint64_t p)
{
    uint64_t v = atomic_load_explicit(&b->ring[p % GPU_PERIODS], memory_order_relaxed);

    return (v >> GPU_BUSY_BITS) == p ? v & BUSY_MASK : 0;
}

uint64_t gpu_busy_between(const gpu_busy *b, uint64_t from, uint64_t to)
{
    double sum = 0;

    for (uint64_t p = from / GPU_SAMPLE_NS; p * GPU_SAMPLE_NS < to; p++) {
        uint64_t ps = p * GPU_SAMPLE_NS, pe = ps + GPU_SAMPLE_NS;
        uint64_t a = from > ps ? from : ps, z = to < pe ? to : pe;

        sum += (double)period_busy(b, p) * (double)(z - a) / (double)GPU_SAMPLE_NS;
    }
    return (uint64_t)(sum + 0.5);
}

static uint64_t mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

unsigned gpu_sensor_percent(const gpu_busy *b, uint64_t now, uint64_t seed,
                            uint64_t *window_end)
{
    uint64_t k = now / GPU_SAMPLE_NS, busy = 0;
    double pct, dither;

    if (window_end != NULL)
        *window_end = k * GPU_SAMPLE_NS;
    for (uint64_t p = k >= GPU_WINDOW_PERIODS ? k - GPU_WINDOW_PERIODS : 0; p < k; p++)
        busy += period_busy(b, p);
    if (busy == 0)
        return 0;
    pct = 100.0 * (double)busy / (double)(GPU_WINDOW_PERIODS * GPU_SAMPLE_NS);
    /* One dither value per sample and record: whole percents, unbiased on average. */
    dither = (double)(mix(k * 0x9e3779b97f4a7c15ULL ^ mix(seed + 1)) >> 11) / 9007199254740992.0;
    pct = floor(pct + dither);
    return pct > 100 ? 100 : (unsigned)pct;
}

uint64_t gpu_rand_next(uint64_t *state)
{
    *state += 0x9e3779b97f4a7c15ULL;
    return mix(*state);
}

double gpu_rand_unit(uint64_t *state)
{
    return (double)(gpu_rand_next(state) >> 11) / 9007199254740992.0;
}

uint64_t gpu_rand_lognormal(uint64_t *state, uint64_t mean, double sigma, uint64_t lo,
                            uint64_t hi)
{
    double u1 = gpu_rand_unit(state), u2 = gpu_rand_unit(state);
    double z = sqrt(-2.0 * log(1.0 - u1)) * cos(2.0 * M_PI * u2);
    double v = exp(log((double)mean) - sigma * sigma / 2 + sigma * z);

    if (v < (double)lo)
        return lo;
    return v > (double)hi ? hi : (uint64_t)v;
}
