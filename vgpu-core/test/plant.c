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

/* plant.c - see plant.h. */
#include "plant.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NEVER UINT64_MAX

_Static_assert(PLANT_MAX_PROCS <= GPU_OWNERS, "every process has its queue on the engine");
_Static_assert(PLANT_MAX_STREAMS * PLANT_MAX_DEPTH <= GPU_QUEUE, "a process's queue never fills");
#define P GPU_SAMPLE_NS

struct stream {
    int n;    /* kernels queued, waiting or running */
    int left; /* kernels of the batch still to launch (synced processes) */
};

/* A host thread of a process: it launches into its streams, one launch at a time. */
struct thread {
    uint64_t next_try;
    bool pending;   /* a launch was charged and waits for the debt to be paid */
    uint64_t pending_cost; /* what it was charged */
    uint64_t wait_until; /* when the refill will have paid it */
};

struct proc {
    const struct plant_proc_spec *spec;
    struct stream streams[PLANT_MAX_STREAMS];
    int nstreams, depth, next_stream;
    struct thread threads[PLANT_MAX_STREAMS]; /* one, or one per stream (spec->threaded) */
    int nthreads;
    uint64_t next_try; /* the earliest of its threads' */
    uint64_t launches;
    double cost_ns; /* what the refiller set, 0 = default */
    uint64_t rng;
    gpu_busy busy;  /* what NVML's per-process sensor sees */
    bool gone;      /* stopped, its kernels dropped */
    uint64_t traced_busy, traced_launches; /* at the last trace line */
};

struct model {
    const struct plant_spec *spec;
    gpu_sched engine;
    gpu_sched_hooks hooks;
    gpu_busy device;
    gpu_busy claim_busy[PLANT_MAX_CLAIMS]; /* ground truth */
    struct proc procs[PLANT_MAX_PROCS];
    struct vgpu_region_device dev[PLANT_MAX_CLAIMS];
    struct vgpu_ctl *ctl[PLANT_MAX_CLAIMS];
    int refiller[PLANT_MAX_CLAIMS]; /* process index, -1 = none */
};

/* The engine started a kernel of process i: busy records. */
static void kernel_started(void *ctx, int i, uint64_t start, uint64_t end)
{
    struct model *m = ctx;
    struct proc *p = &m->procs[i];

    gpu_busy_add(&m->device, start, end);
    gpu_busy_add(&m->claim_busy[p->spec->claim], start, end);
    gpu_busy_add(&p->busy, start, end);
}

/* A kernel of process i finished: its queue has room, it may launch again. */
static void kernel_finished(void *ctx, int i, uint32_t stream)
{
    struct model *m = ctx;
    struct proc *p = &m->procs[i];

    struct thread *th = &p->threads[p->nthreads > 1 ? stream : 0];

    p->streams[stream].n--;
    if (th->next_try > m->engine.now)
        th->next_try = m->engine.now;
    if (p->next_try > m->engine.now)
        p->next_try = m->engine.now;
}

static bool alive(const struct proc *p, uint64_t t)
{
    return t >= p->spec->start_ns && (p->spec->stop_ns == 0 || t < p->spec->stop_ns);
}

/* Start of the next busy phase at or after t (t itself when busy now); NEVER once stopped. */
static uint64_t busy_from(const struct proc *p, uint64_t t)
{
    const struct plant_proc_spec *s = p->spec;
    uint64_t cycle, into, at;

    if (t < s->start_ns)
        t = s->start_ns;
    if (s->idle_ns != 0) {
        cycle = s->busy_ns + s->idle_ns;
        into = (t - s->start_ns) % cycle;
        at = into < s->busy_ns ? t : t + (cycle - into);
    } else {
        at = t;
    }
    return s->stop_ns != 0 && at >= s->stop_ns ? NEVER : at;
}

static unsigned limit_of(const struct model *m, int i)
{
    const struct plant_proc_spec *s = m->procs[i].spec;

    return s->limit_percent != 0 ? s->limit_percent : m->spec->claims[s->claim].limit_percent;
}

static bool limited(const struct model *m, int claim)
{
    return m->spec->claims[claim].limit_percent != 0;
}

/* Whether a thread of p has a launch waiting in the bucket. */
static bool waiting(const struct proc *p)
{
    for (int h = 0; h < p->nthreads; h++) {
        if (p->threads[h].pending)
            return true;
    }
    return false;
}

/* Launches what thread h of process i may launch at t; sets its next attempt. */
static void thread_launch(struct model *m, int i, int h, uint64_t t)
{
    struct proc *p = &m->procs[i];
    struct thread *th = &p->threads[h];
    int c = p->spec->claim;
    uint64_t at = busy_from(p, t);

    if (at != t) {
        th->next_try = at;
        return;
    }
    for (;;) {
        struct stream *st = NULL;
        uint64_t cost, len, wait;

        if (p->nthreads > 1) {
            /* A thread of its own per stream: synchronising it, or keeping it depth deep. */
            st = &p->streams[h];
            if (p->spec->synced && st->left == 0 && st->n == 0)
                st->left = p->depth;
            if (p->spec->synced ? st->left == 0 : st->n >= p->depth)
                st = NULL;
        } else if (p->spec->synced) {
            /* Its host thread waits for the next stream to drain, then queues a batch. */
            struct stream *next = &p->streams[p->next_stream];

            if (next->left == 0 && next->n == 0)
                next->left = p->depth;
            st = next->left > 0 ? next : NULL;
        } else {
            for (int k = 0; k < p->nstreams && st == NULL; k++) {
                int j = (p->next_stream + k) % p->nstreams;

                if (p->streams[j].n < p->depth) {
                    st = &p->streams[j];
                    p->next_stream = (j + 1) % p->nstreams;
                }
            }
        }
        if (st == NULL) {
            /* Queues full, or the stream it synchronises still busy: a finished kernel wakes it. */
            th->next_try = NEVER;
            return;
        }
        cost = p->cost_ns > 0 ? (uint64_t)p->cost_ns : VGPU_CTL_DEFAULT_COST_NS;
        if (limited(m, c) && !th->pending && (wait = vgpu_bucket_take(&m->dev[c], cost)) != 0) {
            /*
             * Charged: it goes once the refill paid the debt up to it (or all
             * debt was paid). As limiter.c: behind another waiting launch of
             * its process, paced as a continuous refill would pay.
             */
            if (waiting(p))
                wait = vgpu_bucket_paced_wait(&m->dev[c], wait, t);
            th->pending = true;
            th->pending_cost = cost;
            th->wait_until = t + wait;
        }
        if (th->pending) {
            /* As limiter.c: a waiting launch is charged its process's cost as it is now. */
            th->wait_until = t + vgpu_bucket_reprice(&m->dev[c], th->pending_cost, cost,
                                                     th->wait_until > t ? th->wait_until - t : 0);
            th->pending_cost = cost;
        }
        if (th->pending && t < th->wait_until && !vgpu_bucket_paid(&m->dev[c])) {
            /* As limiter.c: a look at the bucket every VGPU_WAIT_MAX_NS at least. */
            th->next_try =
                th->wait_until - t < VGPU_WAIT_MAX_NS ? th->wait_until : t + VGPU_WAIT_MAX_NS;
            return;
        }
        th->pending = false;
        len = p->spec->sigma > 0
                  ? gpu_rand_lognormal(&p->rng, p->spec->kernel_ns, p->spec->sigma, 50000,
                                       20000000)
                  : p->spec->kernel_ns;
        p->launches++;
        st->n++;
        if (p->spec->synced && --st->left == 0 && p->nthreads == 1)
            p->next_stream = (p->next_stream + 1) % p->nstreams;
        (void)gpu_sched_submit(&m->engine, i, (uint32_t)(st - p->streams), p->spec->small_grid,
                               len, t, &m->hooks);
    }
}

/* Runs the threads of process i that are due at t; sets the process's next attempt. */
static void try_launch(struct model *m, int i, uint64_t t)
{
    struct proc *p = &m->procs[i];

    p->next_try = NEVER;
    for (int h = 0; h < p->nthreads; h++) {
        if (p->threads[h].next_try <= t)
            thread_launch(m, i, h, t);
        if (p->threads[h].next_try < p->next_try)
            p->next_try = p->threads[h].next_try;
    }
}

/* The claim's refiller: its lowest live process, as the lease would settle on one. */
static int elect(const struct model *m, int claim, uint64_t t)
{
    for (int i = 0; i < m->spec->nprocs; i++) {
        if (m->procs[i].spec->claim == claim && alive(&m->procs[i], t))
            return i;
    }
    return -1;
}

/*
 * The refiller's election and takeover (run at every refill, as the lease is
 * contested): a live refiller keeps its lease; one that stopped is replaced
 * VGPU_REFILLER_STALE_NS later (the library notices a dead holder's lease
 * once it has gone that long unrenewed), meanwhile nobody refills.
 */
static void elect_refiller(struct model *m, struct plant_result *res, int c, uint64_t t)
{
    int r, cur = m->refiller[c];
    uint64_t seed[VGPU_REGION_MAX_SLOTS] = {0};

    if (cur >= 0 && alive(&m->procs[cur], t))
        return;
    if (cur >= 0 && t < m->procs[cur].spec->stop_ns + VGPU_REFILLER_STALE_NS)
        return;
    r = elect(m, c, t);
    if (r == cur)
        return;
    m->refiller[c] = r;
    if (r < 0)
        return;
    for (int i = 0; i < m->spec->nprocs; i++)
        seed[i] = alive(&m->procs[i], t) ? (uint64_t)m->procs[i].cost_ns : 0;
    vgpu_ctl_takeover(m->ctl[c], &m->dev[c], limit_of(m, r) / 100.0, seed, t);
    res->refiller_changes[c]++;
}

/*
 * One line per observed process of claim c after its control period at t
 * (see plant_spec.trace). Busy time is what the engine placed in the period
 * (kernels counted when they start, their union), in percent of the period.
 */
static void trace(struct model *m, int c, uint64_t t, const struct vgpu_ctl_obs *obs, int n)
{
    const struct vgpu_ctl *ctl = m->ctl[c];

    for (int k = 0; k < n; k++) {
        struct proc *p = &m->procs[obs[k].slot];
        const struct vgpu_ctl_proc *cp = &ctl->procs[obs[k].slot];
        uint64_t busy = p->busy.total;
        unsigned newest = (cp->head + VGPU_CTL_HISTORY - 1) % VGPU_CTL_HISTORY;

        fprintf(m->spec->trace,
                "%7.3f s claim %d proc %2d: busy %5.1f%% nvml %3.0f%% launches %6llu "
                "cost %9.1f us %s tokens %+9.1f us%s\n",
                t / 1e9, c, obs[k].slot,
                100.0 * (double)(busy - p->traced_busy) / (double)VGPU_CTL_PERIOD_NS,
                obs[k].util * 100, (unsigned long long)(p->launches - p->traced_launches),
                cp->cost_ns / 1e3, cp->measured ? "measured" : "bounded ",
                (double)m->dev[c].bucket_tokens / 1e3, cp->burst[newest] ? " burst" : "");
        p->traced_busy = busy;
        p->traced_launches = p->launches;
    }
}

static void control(struct model *m, int c, uint64_t t)
{
    const struct plant_spec *s = m->spec;
    struct vgpu_ctl_obs obs[PLANT_MAX_PROCS];
    double cost[PLANT_MAX_PROCS];
    int idx[PLANT_MAX_PROCS], n = 0;
    bool foreign = false;
    struct vgpu_ctl_tick tick = {.now = t, .policy = s->claims[c].policy,
                                 .high_priority = s->claims[c].high_priority,
                                 .util_known = true, .obs = obs, .cost_ns = cost};

    if (m->refiller[c] < 0)
        return;
    /*
     * A process that stopped while its launch waited: the refiller reclaims
     * its slot and gives the charge back (whole microseconds, as the slot
     * shows it).
     */
    for (int i = 0; i < s->nprocs; i++) {
        struct proc *p = &m->procs[i];

        for (int h = 0; h < p->nthreads; h++) {
            struct thread *th = &p->threads[h];

            if (p->spec->claim == c && th->pending && !alive(p, t)) {
                vgpu_bucket_credit(&m->dev[c], th->pending_cost / 1000 * 1000);
                th->pending = false;
            }
        }
    }
    for (int i = 0; i < s->nprocs; i++) {
        struct proc *p = &m->procs[i];
        uint64_t we;
        unsigned u;

        if (!alive(p, t))
            continue;
        u = gpu_sensor_percent(&p->busy, t, s->seed ^ (uint64_t)i, &we);
        if (p->spec->claim != c) {
            foreign |= u > 0;
            continue;
        }
        obs[n] = (struct vgpu_ctl_obs){.slot = i, .id = (uint64_t)i + 1,
                                       .launches = p->launches, .util = u / 100.0,
                                       .window_end = we};
        idx[n++] = i;
    }
    tick.foreign_busy = foreign;
    tick.nobs = n;
    vgpu_ctl_tick(m->ctl[c], &m->dev[c], &tick);
    for (int k = 0; k < n; k++)
        m->procs[idx[k]].cost_ns = cost[k];
    if (s->trace != NULL)
        trace(m, c, t, obs, n);
}

static int check_spec(const struct plant_spec *spec)
{
    if (spec->nclaims < 1 || spec->nclaims > PLANT_MAX_CLAIMS || spec->nprocs < 1 ||
        spec->nprocs > PLANT_MAX_PROCS || spec->duration_ns / P > PLANT_MAX_PERIODS)
        return -1;
    for (int c = 0; c < spec->nclaims; c++) {
        if (spec->claims[c].limit_percent > 100)
            return -1;
    }
    for (int i = 0; i < spec->nprocs; i++) {
        const struct plant_proc_spec *p = &spec->procs[i];

        if (p->claim < 0 || p->claim >= spec->nclaims || p->kernel_ns == 0 ||
            p->limit_percent > 100 || p->streams < 0 || p->streams > PLANT_MAX_STREAMS ||
            p->depth < 0 || p->depth > PLANT_MAX_DEPTH || (p->idle_ns != 0 && p->busy_ns == 0))
            return -1;
    }
    return 0;
}

int plant_run(const struct plant_spec *spec, struct plant_result *res)
{
    struct model *m;
    uint64_t t = 0, next_refill = PLANT_REFILL_NS, next_ctl = VGPU_CTL_PERIOD_NS;
    int rc = 0, recorded = 0;

    if (check_spec(spec) != 0 || (m = calloc(1, sizeof(*m))) == NULL)
        return -1;
    memset(res, 0, sizeof(*res));
    m->spec = spec;
    m->hooks = (gpu_sched_hooks){.started = kernel_started, .finished = kernel_finished, .ctx = m};
    for (int i = 0; i < spec->nprocs; i++) {
        struct proc *p = &m->procs[i];

        p->spec = &spec->procs[i];
        p->nstreams = p->spec->streams > 0 ? p->spec->streams : 1;
        p->depth = p->spec->depth > 0 ? p->spec->depth : 2;
        p->nthreads = p->spec->threaded ? p->nstreams : 1;
        for (int h = 0; h < p->nthreads; h++)
            p->threads[h].next_try = p->spec->start_ns;
        p->next_try = p->spec->start_ns;
        p->rng = gpu_rand_seed(spec->seed, (uint64_t)i);
    }
    for (int c = 0; c < spec->nclaims; c++) {
        m->refiller[c] = -1;
        if (limited(m, c) && (m->ctl[c] = malloc(sizeof(*m->ctl[c]))) == NULL) {
            rc = -1;
            goto out;
        }
        /* As every process's library at its start (limiter.c). */
        if (limited(m, c))
            vgpu_bucket_init(&m->dev[c], spec->claims[c].limit_percent / 100.0, 0);
    }
    while (t < spec->duration_ns) {
        uint64_t next = next_refill < next_ctl ? next_refill : next_ctl;

        if (t >= next_refill) {
            for (int c = 0; c < spec->nclaims; c++) {
                if (!limited(m, c))
                    continue;
                elect_refiller(m, res, c, t);
                if (m->refiller[c] >= 0)
                    vgpu_bucket_refill(&m->dev[c], t);
            }
            next_refill += PLANT_REFILL_NS;
        }
        if (t >= next_ctl) {
            for (int c = 0; c < spec->nclaims; c++) {
                if (limited(m, c))
                    control(m, c, t);
            }
            next_ctl += VGPU_CTL_PERIOD_NS;
        }
        /* Kernels that ended free queues (their processes may launch at t). */
        gpu_sched_advance(&m->engine, t, &m->hooks);
        for (int i = 0; i < spec->nprocs; i++) {
            struct proc *p = &m->procs[i];

            /* A process that exited: the driver tears its context down. */
            if (p->spec->stop_ns != 0 && t >= p->spec->stop_ns && !p->gone) {
                gpu_sched_drop(&m->engine, i);
                p->gone = true;
            }
        }
        for (int i = 0; i < spec->nprocs; i++) {
            if (m->procs[i].next_try <= t)
                try_launch(m, i, t);
            if (m->procs[i].next_try < next)
                next = m->procs[i].next_try;
        }
        if (gpu_sched_next_end(&m->engine) < next)
            next = gpu_sched_next_end(&m->engine);
        /* Periods that ended are final: no kernel placed from now on can reach back. */
        while ((uint64_t)(recorded + 1) * P <= t && recorded < PLANT_MAX_PERIODS) {
            for (int c = 0; c < spec->nclaims; c++)
                res->share[recorded][c] = 100.0 *
                    (double)gpu_busy_between(&m->claim_busy[c], (uint64_t)recorded * P,
                                             (uint64_t)(recorded + 1) * P) / (double)P;
            recorded++;
        }
        t = next > t ? next : t + 1;
    }
    res->nperiods = recorded;
    for (int i = 0; i < spec->nprocs; i++)
        res->launches[i] = m->procs[i].launches;
out:
    for (int c = 0; c < spec->nclaims; c++)
        free(m->ctl[c]);
    free(m);
    return rc;
}

double plant_mean_share(const struct plant_result *res, int claim, uint64_t from_ns,
                        uint64_t to_ns)
{
    double sum = 0;
    int n = 0;

    for (int k = 0; k < res->nperiods; k++) {
        if ((uint64_t)k * P >= from_ns && (uint64_t)(k + 1) * P <= to_ns) {
            sum += res->share[k][claim];
            n++;
        }
    }
    return n > 0 ? sum / n : 0;
}

/* Mean of the claim's share over the w periods starting at period k. */
static double mean_at(const struct plant_result *res, int claim, int k, int w)
{
    double sum = 0;

    for (int j = 0; j < w; j++)
        sum += res->share[k + j][claim];
    return sum / w;
}

uint64_t plant_settling_ns(const struct plant_result *res, int claim, double target, double band,
                           uint64_t from_ns, uint64_t to_ns)
{
    const int w = PLANT_SETTLE_PERIODS;
    int first = (int)((from_ns + P - 1) / P), settled = first;

    for (int k = first; k + w <= res->nperiods && (uint64_t)(k + w) * P <= to_ns + P / 2; k++) {
        double e = mean_at(res, claim, k, w) - target;

        if (e > band || e < -band)
            settled = k + 1;
    }
    return (uint64_t)settled * P - from_ns;
}

static double extreme_share(const struct plant_result *res, int claim, uint64_t from_ns,
                            uint64_t to_ns, bool want_max)
{
    double best = want_max ? -1 : 1000;

    for (int k = (int)((from_ns + P - 1) / P);
         k + GPU_WINDOW_PERIODS <= res->nperiods &&
         (uint64_t)(k + GPU_WINDOW_PERIODS) * P <= to_ns + P / 2;
         k++) {
        double v = mean_at(res, claim, k, GPU_WINDOW_PERIODS);

        if (want_max ? v > best : v < best)
            best = v;
    }
    return best;
}

double plant_max_share(const struct plant_result *res, int claim, uint64_t from_ns,
                       uint64_t to_ns)
{
    return extreme_share(res, claim, from_ns, to_ns, true);
}

double plant_min_share(const struct plant_result *res, int claim, uint64_t from_ns,
                       uint64_t to_ns)
{
    return extreme_share(res, claim, from_ns, to_ns, false);
}

const char *plant_kernels_name(enum plant_kernels k)
{
    static const char *const names[PLANT_K_COUNT] = {"0.1 ms", "2 ms", "20 ms", "mix"};

    return k < PLANT_K_COUNT ? names[k] : "?";
}

static void measure_cell(const struct plant_result *res, int nclaims, unsigned limit,
                         double mean, double sigma, uint64_t duration_ns, struct plant_cell *out);

int plant_grid_cell(unsigned limit, int procs, int nclaims, enum plant_kernels k,
                    uint64_t duration_ns, uint64_t seed, struct plant_cell *out)
{
    static const uint64_t means[3] = {100000, 2000000, 20000000};
    static struct plant_result res;
    struct plant_spec s = {.duration_ns = duration_ns, .seed = seed, .nclaims = nclaims};

    if (nclaims < 1 || nclaims > 2 || procs < 1 || procs > PLANT_MAX_PROCS / 2 || limit == 0 ||
        limit >= 100 || k >= PLANT_K_COUNT)
        return -1;
    s.claims[0].limit_percent = limit;
    s.claims[1].limit_percent = 100 - limit;
    for (int c = 0; c < nclaims; c++) {
        for (int j = 0; j < procs; j++) {
            struct plant_proc_spec *p = &s.procs[s.nprocs++];

            p->claim = c;
            /* Both claims run the same workload: neither wins by queueing deeper. */
            p->kernel_ns = k == PLANT_K_MIX ? means[j % 3] : means[k];
            p->sigma = k == PLANT_K_MIX ? 1.0 : 0.5;
            p->streams = 1 + j % 2;
            p->depth = 2 + 3 * (j % 3);
            p->small_grid = j % 2 == 1;
        }
    }
    if (plant_run(&s, &res) != 0)
        return -1;
    measure_cell(&res, nclaims, limit, k == PLANT_K_MIX ? (double)means[2] : (double)means[k],
                 k == PLANT_K_MIX ? 1.0 : 0.5, duration_ns, out);
    return 0;
}

int plant_streams_cell(unsigned limit, int streams, bool small_grid, enum plant_kernels k,
                       double sigma, uint64_t duration_ns, uint64_t seed, struct plant_cell *out)
{
    static const uint64_t means[3] = {100000, 2000000, 20000000};
    static struct plant_result res;
    struct plant_spec s = {.duration_ns = duration_ns, .seed = seed, .nclaims = 1, .nprocs = 1};

    if (streams < 1 || streams > PLANT_MAX_STREAMS || limit == 0 || limit >= 100 ||
        k >= PLANT_K_MIX)
        return -1;
    s.claims[0].limit_percent = limit;
    s.procs[0] = (struct plant_proc_spec){.kernel_ns = means[k], .sigma = sigma, .streams = streams,
                                          .depth = 2, .small_grid = small_grid,
                                          .threaded = true};
    if (plant_run(&s, &res) != 0)
        return -1;
    measure_cell(&res, 1, limit, (double)means[k], sigma, duration_ns, out);
    return 0;
}

static void measure_cell(const struct plant_result *res, int nclaims, unsigned limit,
                         double mean, double sigma, uint64_t duration_ns, struct plant_cell *out)
{
    for (int c = 0; c < nclaims; c++) {
        double target = c == 0 ? limit : 100 - limit;
        /*
         * A launch-count limiter cannot know a kernel's duration before it
         * runs: two seconds holding N kernels of relative spread cv vary by
         * sigma = target x cv / sqrt(N) on their own. 4 sigma: charging every
         * launch the exact mean cost, two-second means of a 30 s run stray
         * 3.5-4 sigma (30 %, 2 ms kernels: up to 3.7 points, sigma 0.92).
         */
        double kernels = target / 100 * 2e9 / mean;
        double noise = target * sqrt(exp(sigma * sigma) - 1) / sqrt(kernels);

        out->band[c] = noise * 4 > 2 ? noise * 4 : 2;
        out->spread[c] = noise * M_SQRT2;
        out->peak[c] = plant_max_share(res, c, 0, duration_ns);
        out->share[c] = plant_mean_share(res, c, duration_ns * 2 / 3, duration_ns);
        out->first_s[c] = plant_mean_share(res, c, 0, 1000000000ull);
        out->settling_s[c] =
            plant_settling_ns(res, c, target, out->band[c], 0, duration_ns) / 1e9;
        out->low[c] = plant_min_share(res, c,
                                      out->settling_s[c] > 3 ? (uint64_t)(out->settling_s[c] * 1e9)
                                                             : 3000000000ull,
                                      duration_ns);
    }
}
