/* plant.c - see plant.h. */
#include "plant.h"

#include <stdlib.h>
#include <string.h>

#define NEVER UINT64_MAX
#define HIST (VGPU_CTL_WINDOW_NS / VGPU_CTL_PERIOD_NS)

struct proc {
    int inflight;
    uint64_t next_try;  /* NEVER while its queue is full */
    uint64_t wait_mark; /* start of the current unaccounted wait, 0 = none */
    uint64_t launches, throttled_ns, busy_done;
    uint64_t cum[HIST + 1]; /* cumulative busy at the last ticks (ring) */
    double cost_ns;         /* cost the refiller set, 0 = default */
};

struct kernel {
    int proc;
    uint64_t len;
};

struct model {
    const struct plant_spec *spec;
    struct proc procs[PLANT_MAX_PROCS];
    struct vgpu_region_device dev[PLANT_MAX_CLAIMS];
    struct vgpu_ctl *ctl[PLANT_MAX_CLAIMS];
    struct kernel fifo[PLANT_MAX_PROCS * PLANT_DEPTH];
    int fifo_head, fifo_len;
    int running; /* proc of the running kernel, -1 idle */
    uint64_t run_start, run_end, run_len;
    int ticks;
};

static bool limited(const struct model *m, int claim)
{
    return m->spec->claims[claim].limit_percent != 0;
}

static void start_next(struct model *m, uint64_t t)
{
    struct kernel k;

    if (m->running >= 0 || m->fifo_len == 0)
        return;
    k = m->fifo[m->fifo_head];
    m->fifo_head = (m->fifo_head + 1) % (PLANT_MAX_PROCS * PLANT_DEPTH);
    m->fifo_len--;
    m->running = k.proc;
    m->run_start = t;
    m->run_len = k.len;
    m->run_end = t + k.len;
}

static void finish(struct model *m, uint64_t t)
{
    struct proc *p = &m->procs[m->running];

    p->busy_done += m->run_len;
    p->inflight--;
    if (p->next_try == NEVER)
        p->next_try = t;
    m->running = -1;
    start_next(m, t);
}

static uint64_t busy_at(const struct model *m, int i, uint64_t t)
{
    return m->procs[i].busy_done + (m->running == i ? t - m->run_start : 0);
}

/* NVML smUtil of process i: whole percent of the trailing window. */
static double sm_util(const struct model *m, int i)
{
    const struct proc *p = &m->procs[i];
    int now = m->ticks % (int)(HIST + 1), then = (m->ticks + 1) % (int)(HIST + 1);
    uint64_t busy = p->cum[now] - (m->ticks >= (int)HIST ? p->cum[then] : 0);

    return (double)((busy * 100 + VGPU_CTL_WINDOW_NS / 2) / VGPU_CTL_WINDOW_NS) / 100.0;
}

static void control(struct model *m, struct plant_result *res, uint64_t t)
{
    const struct plant_spec *s = m->spec;
    double util[PLANT_MAX_PROCS];

    for (int i = 0; i < s->nprocs; i++)
        m->procs[i].cum[m->ticks % (int)(HIST + 1)] = busy_at(m, i, t);
    for (int i = 0; i < s->nprocs; i++)
        util[i] = sm_util(m, i);
    for (int c = 0; c < s->nclaims; c++) {
        struct vgpu_ctl_obs obs[PLANT_MAX_PROCS];
        double cost[PLANT_MAX_PROCS];
        int idx[PLANT_MAX_PROCS], n = 0;
        bool foreign = false;
        double share = 0;
        struct vgpu_ctl_tick tick = {.now = t, .policy = s->claims[c].policy,
                                     .high_priority = s->claims[c].high_priority,
                                     .util_known = true, .obs = obs, .cost_ns = cost};

        for (int i = 0; i < s->nprocs; i++) {
            if (s->procs[i].claim != c) {
                foreign |= util[i] > 0;
                continue;
            }
            share += util[i];
            if (s->procs[i].start_ns > t)
                continue;
            obs[n] = (struct vgpu_ctl_obs){.slot = i, .id = (uint64_t)i + 1,
                                           .launches = m->procs[i].launches,
                                           .throttled_ns = m->procs[i].throttled_ns,
                                           .util = util[i]};
            idx[n++] = i;
        }
        if (m->ticks < PLANT_MAX_TICKS)
            res->share[m->ticks][c] = share * 100;
        if (!limited(m, c))
            continue;
        tick.foreign_busy = foreign;
        tick.nobs = n;
        vgpu_ctl_tick(m->ctl[c], &m->dev[c], &tick);
        for (int k = 0; k < n; k++)
            m->procs[idx[k]].cost_ns = cost[k];
    }
    m->ticks++;
}

/* Launches what process i can launch at t; sets its next attempt. */
static void try_launch(struct model *m, int i, uint64_t t)
{
    struct proc *p = &m->procs[i];
    int c = m->spec->procs[i].claim;
    uint64_t cost = p->cost_ns > 0 ? (uint64_t)p->cost_ns : VGPU_CTL_DEFAULT_COST_NS;

    while (p->inflight < PLANT_DEPTH) {
        if (limited(m, c) && !vgpu_bucket_take(&m->dev[c], cost)) {
            if (p->wait_mark != 0)
                p->throttled_ns += t - p->wait_mark;
            p->wait_mark = t;
            p->next_try = t + vgpu_bucket_wait_ns(&m->dev[c], cost);
            return;
        }
        if (p->wait_mark != 0)
            p->throttled_ns += t - p->wait_mark;
        p->wait_mark = 0;
        p->inflight++;
        p->launches++;
        m->fifo[(m->fifo_head + m->fifo_len) % (PLANT_MAX_PROCS * PLANT_DEPTH)] =
            (struct kernel){.proc = i, .len = m->spec->procs[i].kernel_ns};
        m->fifo_len++;
        start_next(m, t);
    }
    p->next_try = NEVER;
}

int plant_run(const struct plant_spec *spec, struct plant_result *res)
{
    struct model m = {.spec = spec, .running = -1};
    uint64_t t = 0, next_refill = PLANT_REFILL_NS, next_ctl = VGPU_CTL_PERIOD_NS;
    int rc = 0;

    if (spec->nclaims < 1 || spec->nclaims > PLANT_MAX_CLAIMS || spec->nprocs < 1 ||
        spec->nprocs > PLANT_MAX_PROCS || spec->duration_ns / VGPU_CTL_PERIOD_NS > PLANT_MAX_TICKS)
        return -1;
    memset(res, 0, sizeof(*res));
    for (int i = 0; i < spec->nprocs; i++) {
        if (spec->procs[i].claim < 0 || spec->procs[i].claim >= spec->nclaims ||
            spec->procs[i].kernel_ns == 0)
            return -1;
        m.procs[i].next_try = spec->procs[i].start_ns;
    }
    for (int c = 0; c < spec->nclaims; c++) {
        if (!limited(&m, c))
            continue;
        if (spec->claims[c].limit_percent > 100 ||
            (m.ctl[c] = malloc(sizeof(*m.ctl[c]))) == NULL) {
            rc = -1;
            goto out;
        }
        vgpu_ctl_init(m.ctl[c], spec->claims[c].limit_percent / 100.0);
        vgpu_bucket_init(&m.dev[c], m.ctl[c]->target, 1);
    }
    while (t < spec->duration_ns) {
        uint64_t next = next_refill < next_ctl ? next_refill : next_ctl;

        if (m.running >= 0 && m.run_end <= t)
            finish(&m, t);
        if (t >= next_refill) {
            for (int c = 0; c < spec->nclaims; c++) {
                if (limited(&m, c))
                    vgpu_bucket_refill(&m.dev[c], t);
            }
            next_refill += PLANT_REFILL_NS;
        }
        if (t >= next_ctl) {
            control(&m, res, t);
            next_ctl += VGPU_CTL_PERIOD_NS;
        }
        for (int i = 0; i < spec->nprocs; i++) {
            if (m.procs[i].next_try <= t)
                try_launch(&m, i, t);
        }
        if (m.running >= 0 && m.run_end < next)
            next = m.run_end;
        for (int i = 0; i < spec->nprocs; i++) {
            if (m.procs[i].next_try < next)
                next = m.procs[i].next_try;
        }
        t = next > t ? next : t + 1;
    }
    res->nticks = m.ticks < PLANT_MAX_TICKS ? m.ticks : PLANT_MAX_TICKS;
    for (int i = 0; i < spec->nprocs; i++)
        res->launches[i] = m.procs[i].launches;
out:
    for (int c = 0; c < spec->nclaims; c++)
        free(m.ctl[c]);
    return rc;
}

double plant_mean_share(const struct plant_result *res, int claim, uint64_t from_ns,
                        uint64_t to_ns)
{
    double sum = 0;
    int n = 0;

    for (int k = 0; k < res->nticks; k++) {
        uint64_t at = (uint64_t)(k + 1) * VGPU_CTL_PERIOD_NS;

        if (at >= from_ns && at < to_ns) {
            sum += res->share[k][claim];
            n++;
        }
    }
    return n > 0 ? sum / n : 0;
}

uint64_t plant_settling_ns(const struct plant_result *res, int claim, double target, double band)
{
    int last_out = -1;

    for (int k = 0; k < res->nticks; k++) {
        double e = res->share[k][claim] - target;

        if (e > band || e < -band)
            last_out = k;
    }
    return (uint64_t)(last_out + 2) * VGPU_CTL_PERIOD_NS;
}
