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

/* gpus.c - see gpus.h. */
#include "gpus.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "driver.h"
#include "injected.h"
#include "log.h"
#include "parse.h"
#include "vgpu_config.h"
#include "vgpu_env.h"

struct claim {
    char dir[PATH_MAX];
    struct vgpu_claim_config cfg;
    bool valid;
    char err[VGPU_ERRMSG_MAX];
    int shm_state; /* 0 not tried, 1 attached, -1 failed */
    struct vgpu_region_map shm;
    struct vgpu_hostpids hostpids;
    struct vgpu_burst burst;
};

/*
 * Process-wide by nature (one per process, like the driver's own state):
 * written once under init_once, then only under mu.
 */
static struct {
    pthread_once_t init_once;
    pthread_mutex_t mu;
    struct vgpu_procinfo self;
    bool enforced;           /* at least one claim config file exists */
    bool unreadable_claim;   /* a config we could not attribute to GPUs: fail closed */
    char unreadable_err[VGPU_ERRMSG_MAX];
    bool any_enforcement;    /* a claim or env var limits something: unidentified GPUs refuse */
    int nclaims;
    struct claim *claims;
    int standalone_state;    /* like claim.shm_state, for CUDA_DEVICE_MEMORY_SHARED_CACHE */
    struct vgpu_region_map standalone;
    int ngpus;
    struct vgpu_gpu gpus[VGPU_MAX_GPUS];
    struct vgpu_gpu *by_ordinal[VGPU_MAX_GPUS];
} G = {.init_once = PTHREAD_ONCE_INIT, .mu = PTHREAD_MUTEX_INITIALIZER};

bool vgpu_any_sm_limit;
bool vgpu_any_claim;

static uint64_t mono_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void vgpu_lock(void)
{
    pthread_mutex_lock(&G.mu);
}

void vgpu_unlock(void)
{
    pthread_mutex_unlock(&G.mu);
}

int vgpu_gpus_snapshot_locked(struct vgpu_gpu **out, int max)
{
    int n = G.ngpus < max ? G.ngpus : max;

    for (int i = 0; i < n; i++)
        out[i] = &G.gpus[i];
    return n;
}

int vgpu_gpus_snapshot(struct vgpu_gpu **out, int max)
{
    int n;

    pthread_mutex_lock(&G.mu);
    n = vgpu_gpus_snapshot_locked(out, max);
    pthread_mutex_unlock(&G.mu);
    return n;
}

const struct vgpu_procinfo *vgpu_self(void)
{
    return &G.self;
}

uint32_t vgpu_self_host_pid(struct vgpu_gpu *g)
{
    uint32_t host = __atomic_load_n(&G.self.host_pid, __ATOMIC_RELAXED);

    if (host != 0 || g == NULL || g->hostpids == NULL)
        return host;
    host = vgpu_hostpids_lookup(g->hostpids, G.self.pidns, (uint32_t)G.self.pid,
                                G.self.start_time);
    if (host == 0)
        return 0;
    pthread_mutex_lock(&G.mu);
    if (G.self.host_pid == 0) {
        __atomic_store_n(&G.self.host_pid, host, __ATOMIC_RELAXED);
        /* The monitor and other processes' refillers match NVML samples by the slot's host pid. */
        for (int i = 0; i < G.nclaims; i++) {
            if (G.claims[i].shm.r != NULL)
                vgpu_region_slot_set_host_pid(&G.claims[i].shm, host);
        }
        if (G.standalone.r != NULL)
            vgpu_region_slot_set_host_pid(&G.standalone, host);
        VGPU_INFO("host pid %u, from %s", host, g->hostpids->path);
    }
    pthread_mutex_unlock(&G.mu);
    return host;
}

/*
 * The config rule: anything that keeps the library from applying every
 * injected config makes every GPU of the container fail closed. why is
 * logged here, once; the GPUs set up later refuse without a line each.
 */
static void fail_all(const char *why)
{
    G.enforced = true;
    VGPU_ERROR("%s", why);
    if (!G.unreadable_claim) {
        G.unreadable_claim = true;
        snprintf(G.unreadable_err, sizeof(G.unreadable_err), "%s", why);
    }
}

/* Fails every GPU closed for config path: "invalid claim config <path>:<line>: <reason>". */
static void invalid_config(const char *path, unsigned line, const char *reason)
{
    char msg[PATH_MAX + VGPU_ERRMSG_MAX + 64];
    size_t n = strlen(path);

    /* Messages of the mount checks start with the path already. */
    if (strncmp(reason, path, n) == 0 && strncmp(reason + n, ": ", 2) == 0)
        reason += n + 2;
    snprintf(msg, sizeof(msg), "invalid claim config %s:%u: %s", path, line, reason);
    fail_all(msg);
}

/* Loads one injected config (injected.h); any failure fails every GPU closed. */
static void load_claim(const char *root, const struct vgpu_injected_config *ic)
{
    struct claim *c = &G.claims[G.nclaims];
    char path[PATH_MAX + 16];
    char *text = NULL;
    unsigned line = 0;
    size_t len = 0;
    int fd;

    if (snprintf(c->dir, sizeof(c->dir), "%s/%s", root, ic->name) >= (int)sizeof(c->dir)) {
        fail_all("claims root path too long");
        return;
    }
    snprintf(path, sizeof(path), "%s/" VGPU_CONFIG_FILE, c->dir);
    G.enforced = true;
    G.nclaims++;
    vgpu_hostpids_init(&c->hostpids, c->dir);
    vgpu_burst_init(&c->burst, c->dir);
    fd = vgpu_injected_open(root, ic, c->err);
    if (fd >= 0 && (text = vgpu_config_read(fd, &len)) == NULL)
        snprintf(c->err, sizeof(c->err), "cannot read: %s", strerror(errno));
    if (text != NULL) {
        c->valid = vgpu_config_parse(text, len, &c->cfg, c->err, &line) == 0;
        free(text);
    }
    if (c->valid) {
        VGPU_DEBUG("claim %s: %u device(s), enforcement %s", c->cfg.claim, c->cfg.device_count,
                   c->cfg.enforcement ? "enabled" : "disabled");
        return;
    }
    invalid_config(path, line, c->err);
}

/* Whether <root>/<name>/config exists at all (a mount point or not). */
static bool has_config_file(const char *root, const char *name)
{
    char path[PATH_MAX + 16];
    struct stat st;

    snprintf(path, sizeof(path), "%s/%s/" VGPU_CONFIG_FILE, root, name);
    return lstat(path, &st) == 0;
}

/*
 * Configs that are not injected mounts are ignored, with one warning each;
 * without a mount table none can be told apart, so their presence fails
 * closed.
 */
static void scan_others(const struct vgpu_injected_set *set)
{
    struct dirent **names;
    int n = scandir(set->root, &names, NULL, alphasort);
    bool told = false;

    for (int i = 0; i < n; i++) {
        const char *name = names[i]->d_name;

        if (name[0] != '.' && !vgpu_injected_has(set, name) && has_config_file(set->root, name)) {
            if (!set->mountinfo_ok) {
                if (!told)
                    fail_all("cannot read " VGPU_MOUNTINFO_PATH " to tell injected claim configs");
                told = true;
            } else
                VGPU_WARN("ignoring %s/%s/" VGPU_CONFIG_FILE ": not a read-only config mount of the kubelet "
                          "plugin", set->root, name);
        }
        free(names[i]);
    }
    if (n >= 0)
        free(names);
}

static void load_claims(void)
{
    struct vgpu_injected_set *set = calloc(1, sizeof(*set));

    G.claims = calloc(VGPU_INJECTED_MAX, sizeof(*G.claims));
    if (set == NULL || G.claims == NULL) {
        fail_all("out of memory reading claims");
        free(set);
        return;
    }
    vgpu_injected_find(VGPU_MOUNTINFO_PATH, VGPU_CANONICAL_CLAIMS_ROOT, getenv(VGPU_ENV_CLAIMS_ROOT),
                       false, set);
    for (int i = 0; i < set->count && i < VGPU_INJECTED_MAX; i++)
        load_claim(set->root, &set->configs[i]);
    if (set->count > VGPU_INJECTED_MAX)
        fail_all("more injected claim configs than the library can hold");
    scan_others(set);
    free(set);
}

static void set_log_level(void)
{
    enum vgpu_log_level level = VGPU_LOG_WARNING;
    const char *env = getenv(VGPU_ENV_LOG_LEVEL);
    bool from_config = false;

    /* The most verbose level any claim asks for wins: the admin asked for it. */
    for (int i = 0; i < G.nclaims; i++) {
        if (G.claims[i].valid && G.claims[i].cfg.has_log_level &&
            (!from_config || G.claims[i].cfg.log_level > level)) {
            level = G.claims[i].cfg.log_level;
            from_config = true;
        }
    }
    if (!from_config && env != NULL && vgpu_log_parse_level(env, &level) != 0)
        VGPU_WARN(VGPU_ENV_LOG_LEVEL ": unknown value %.32s, using warning", env);
    vgpu_log_set_level(level);
}

static void release_slots(struct vgpu_region_map *s)
{
    if (s->r != NULL && s->slot >= 0)
        vgpu_region_release_slot(s);
}

void vgpu_gpus_release_slots(void)
{
    for (int i = 0; i < G.nclaims; i++)
        release_slots(&G.claims[i].shm);
    release_slots(&G.standalone);
}

void vgpu_gpus_forked(void)
{
    for (int i = 0; i < G.nclaims; i++) {
        G.claims[i].shm.slot = -1;
        vgpu_hostpids_forked(&G.claims[i].hostpids);
        vgpu_burst_forked(&G.claims[i].burst);
    }
    G.standalone.slot = -1;
    for (int i = 0; i < G.ngpus; i++)
        G.gpus[i].private_used = 0;
    vgpu_procinfo_self(&G.self);
}

/* Whether any launch may need the limiter: a claim or env var sets an SM limit. */
static bool any_sm_limit(void)
{
    extern char **environ;

    for (int i = 0; i < G.nclaims; i++) {
        const struct vgpu_claim_config *cfg = &G.claims[i].cfg;

        if (!G.claims[i].valid || !cfg->enforcement || cfg->compute_policy == VGPU_POLICY_DISABLED)
            continue;
        for (uint32_t k = 0; k < cfg->device_count; k++) {
            if (cfg->devices[k].sm_limit != 0)
                return true;
        }
    }
    for (char **e = environ; e != NULL && *e != NULL; e++) {
        if (strncmp(*e, VGPU_ENV_SM_LIMIT, strlen(VGPU_ENV_SM_LIMIT)) == 0)
            return true;
    }
    return false;
}

/* Whether anything limits this process: then a GPU it cannot identify refuses (vgpu_gpu_refusal). */
static bool any_enforcement(void)
{
    extern char **environ;

    if (G.unreadable_claim)
        return true;
    for (int i = 0; i < G.nclaims; i++) {
        if (!G.claims[i].valid || G.claims[i].cfg.enforcement)
            return true;
    }
    for (char **e = environ; e != NULL && *e != NULL; e++) {
        if (strncmp(*e, VGPU_ENV_MEMORY_LIMIT, strlen(VGPU_ENV_MEMORY_LIMIT)) == 0 ||
            strncmp(*e, VGPU_ENV_SM_LIMIT, strlen(VGPU_ENV_SM_LIMIT)) == 0)
            return true;
    }
    return false;
}

/* Whether some valid claim config enforces its GPUs. */
static bool any_claim(void)
{
    for (int i = 0; i < G.nclaims; i++) {
        if (G.claims[i].valid && G.claims[i].cfg.enforcement)
            return true;
    }
    return false;
}

static void init(void)
{
    load_claims();
    set_log_level();
    if (vgpu_procinfo_self(&G.self) != 0)
        VGPU_WARN("cannot read /proc/self/stat: dead-process reclaim disabled");
    vgpu_any_sm_limit = any_sm_limit();
    vgpu_any_claim = any_claim();
    G.any_enforcement = any_enforcement();
    VGPU_DEBUG("initialised: %d claim(s), %s mode", G.nclaims,
               G.enforced ? "enforced" : "standalone");
}

void vgpu_gpus_init(void)
{
    pthread_once(&G.init_once, init);
}

/* Attaches a region once; a failure is logged once, by the caller's rule. */
static struct vgpu_region_map *attach(struct vgpu_region_map *s, int *state, const char *path, bool create,
                               char err[VGPU_ERRMSG_MAX])
{
    if (*state == 0)
        *state = vgpu_region_attach(s, path, create, err) == 0 ? 1 : -1;
    else if (*state < 0)
        snprintf(err, VGPU_ERRMSG_MAX, "%s: unusable (see the first error)", path);
    return *state > 0 ? s : NULL;
}

/* Reads CUDA_DEVICE_MEMORY_LIMIT_<index>, else CUDA_DEVICE_MEMORY_LIMIT. 0 = not set. */
static int env_memory_limit(int index, uint64_t *out, char *err)
{
    char name[64];
    const char *v = NULL;
    int rc;

    *out = 0;
    if (index >= 0) {
        snprintf(name, sizeof(name), VGPU_ENV_MEMORY_LIMIT "_%d", index);
        v = getenv(name);
    }
    if (v == NULL) {
        snprintf(name, sizeof(name), VGPU_ENV_MEMORY_LIMIT);
        v = getenv(name);
    }
    if (v == NULL)
        return 0;
    rc = vgpu_parse_size(v, out);
    if (rc != 0) {
        snprintf(err, VGPU_ERRMSG_MAX, "%s=%.32s: %s", name, v,
                 rc == -ERANGE ? "size overflows 64 bits" : "not a size like 4096m or 8Gi");
        return -1;
    }
    return 0;
}

/* Reads CUDA_DEVICE_SM_LIMIT_<index>, else CUDA_DEVICE_SM_LIMIT (percent). 0 = not set. */
static int env_sm_limit(int index, uint32_t *out, char *err)
{
    char name[64];
    const char *v = NULL;
    uint64_t pct;

    *out = 0;
    if (index >= 0) {
        snprintf(name, sizeof(name), VGPU_ENV_SM_LIMIT "_%d", index);
        v = getenv(name);
    }
    if (v == NULL) {
        snprintf(name, sizeof(name), VGPU_ENV_SM_LIMIT);
        v = getenv(name);
    }
    if (v == NULL)
        return 0;
    if (vgpu_parse_uint(v, 100, &pct) != 0) {
        snprintf(err, VGPU_ERRMSG_MAX, "%s=%.32s: not an integer percent in 0..100", name, v);
        return -1;
    }
    *out = (uint32_t)pct;
    return 0;
}

static void fail_closed(struct vgpu_gpu *g, const char *why)
{
    g->fail_closed = true;
    VGPU_ERROR("GPU %s: refusing all allocations: %s", g->uuid[0] ? g->uuid : "(unknown)", why);
}

/*
 * Finds the valid claims listing uuid, in claim directory (UID) order: up to
 * max into out with the device index in each into k. *invalid is set to an
 * invalid claim listing it, if any.
 */
static int find_claims(const char *uuid, struct claim **out, int *k, int max,
                       struct claim **invalid)
{
    int n = 0;

    *invalid = NULL;
    for (int i = 0; i < G.nclaims && uuid[0] != '\0'; i++) {
        struct claim *c = &G.claims[i];

        for (int d = 0; d < VGPU_REGION_MAX_DEVICES; d++) {
            if (!vgpu_uuid_same(c->cfg.devices[d].uuid, uuid))
                continue;
            if (!c->valid) {
                if (*invalid == NULL)
                    *invalid = c;
            } else if (n < max) {
                out[n] = c;
                k[n++] = d;
            } else {
                VGPU_ERROR("GPU %s: more than %d claims name it; ignoring %s", uuid, max, c->dir);
            }
            break;
        }
    }
    return n;
}

/*
 * Joins claim c's region as the next part of g: its device record and a
 * process slot. Enforced mode has no fallback: a claim whose region cannot
 * account this process makes the GPU fail closed. Returns 0 or -1.
 */
static int add_part(struct vgpu_gpu *g, struct claim *c, uint64_t limit, uint32_t sm,
                    uint32_t policy)
{
    char err[VGPU_ERRMSG_MAX], path[PATH_MAX + 16];
    struct vgpu_part *pt = &g->parts[g->nparts];

    snprintf(path, sizeof(path), "%s/shm/region", c->dir);
    /* Never created here: in a prepared container the plugin's file is mounted at path. */
    pt->shm = attach(&c->shm, &c->shm_state, path, false, err);
    if (pt->shm == NULL) {
        fail_closed(g, err);
        return -1;
    }
    pt->rec = vgpu_region_find_device(pt->shm, g->uuid, limit, sm, policy);
    if (pt->rec < 0) {
        snprintf(err, sizeof(err), "%s: no free device record", path);
        fail_closed(g, err);
        return -1;
    }
    if (vgpu_region_claim_slot(pt->shm, &G.self) != 0) {
        vgpu_region_count_refused(pt->shm, pt->rec);
        snprintf(err, sizeof(err), "%s: no free process slot (more live processes than slots)",
                 path);
        fail_closed(g, err);
        return -1;
    }
    pt->limit = limit;
    atomic_store_explicit(&pt->cap, limit, memory_order_relaxed);
    pt->burst = limit != 0 ? &c->burst : NULL; /* an unlimited claim has nothing to grow */
    g->nparts++;
    return 0;
}

/* The SM limit a GPU's claims or env set, with the first claim's policy. */
struct sm_setting {
    uint32_t limit;
    uint32_t policy;
    enum vgpu_priority priority;
};

/*
 * Fills g from the n claims that name it: memory limits add up (one
 * unlimited claim makes the GPU unlimited), the compute limits are the first
 * claim's. Returns false when a claim disables enforcement: g then passes
 * everything through. G.mu held.
 */
static bool setup_claims(struct vgpu_gpu *g, struct claim **cs, const int *ks, int n,
                         struct sm_setting *sm, int sm_rc, const char *sm_err)
{
    bool unlimited = false;

    /* The claim's name of the device: MIG-<uuid> for an instance, which CUDA reports as GPU-. */
    snprintf(g->uuid, sizeof(g->uuid), "%s", cs[0]->cfg.devices[ks[0]].uuid);
    for (int i = 0; i < n; i++) {
        if (!cs[i]->cfg.enforcement) {
            g->enforce = false;
            return false;
        }
    }
    sm->limit = cs[0]->cfg.devices[ks[0]].sm_limit;
    sm->policy = cs[0]->cfg.compute_policy;
    sm->priority = cs[0]->cfg.priority;
    /* A bad env value cannot lower the limit; the claim's own limit still holds. */
    if (sm_rc != 0)
        VGPU_ERROR("ignoring %s; GPU %s keeps the claim's SM limit %u%%", sm_err, g->uuid,
                   sm->limit);
    g->hostpids = &cs[0]->hostpids;
    for (int i = 0; i < n; i++) {
        uint64_t lim = cs[i]->cfg.devices[ks[i]].memory_limit;

        unlimited |= lim == 0;
        g->limit = unlimited ? 0 : lim > UINT64_MAX - g->limit ? UINT64_MAX : g->limit + lim;
    }
    for (int i = 0; i < n; i++) {
        if (add_part(g, cs[i], cs[i]->cfg.devices[ks[i]].memory_limit, sm->limit, sm->policy) != 0)
            break;
    }
    return true;
}

/*
 * Fills g without a claim: the env alone, and the standalone region
 * (CUDA_DEVICE_MEMORY_SHARED_CACHE) when one is named. A bad env value is
 * ignored (set to 0) with a warning. Returns false when nothing is
 * enforced: g then passes everything through. G.mu held.
 */
static bool setup_standalone(struct vgpu_gpu *g, uint64_t *env_limit, int env_rc,
                             const char *err, uint32_t *sm_env, int sm_rc, const char *sm_err,
                             uint32_t policy)
{
    const char *uuid = g->uuid[0] ? g->uuid : "(unknown)";
    const char *cache = getenv(VGPU_ENV_SHARED_REGION);
    char attach_err[VGPU_ERRMSG_MAX];

    if (env_rc != 0) {
        VGPU_WARN("ignoring %s; GPU %s unlimited", err, uuid);
        *env_limit = 0;
    }
    if (sm_rc != 0) {
        VGPU_WARN("ignoring %s; GPU %s has no SM limit", sm_err, uuid);
        *sm_env = 0;
    }
    if (cache != NULL && cache[0] != '\0' && g->uuid[0] != '\0') {
        struct vgpu_part *pt = &g->parts[0];

        pt->shm = attach(&G.standalone, &G.standalone_state, cache, true, attach_err);
        if (pt->shm == NULL)
            VGPU_WARN("shared region unusable (%s); using process-private accounting", attach_err);
        else if ((pt->rec = vgpu_region_find_device(pt->shm, g->uuid, *env_limit, *sm_env, policy)) < 0 ||
                 vgpu_region_claim_slot(pt->shm, &G.self) != 0)
            VGPU_WARN("%s: no free device record or process slot; using process-private "
                      "accounting", pt->shm->path);
        else
            g->nparts = 1;
    }
    if (*env_limit == 0 && *sm_env == 0 && g->nparts == 0) {
        g->enforce = false; /* nothing to enforce or publish */
        return false;
    }
    return true;
}

/* Fills g for uuid; called with G.mu held. */
static void setup(struct vgpu_gpu *g, const char *uuid, int env_index)
{
    struct claim *invalid, *cs[VGPU_MAX_PARTS];
    char err[VGPU_ERRMSG_MAX], sm_err[VGPU_ERRMSG_MAX];
    uint64_t env_limit;
    uint32_t sm_env;
    struct sm_setting sm = {.policy = VGPU_POLICY_STRICT, .priority = VGPU_PRIORITY_LOW};
    int ks[VGPU_MAX_PARTS], n, env_rc, sm_rc;

    snprintf(g->uuid, sizeof(g->uuid), "%s", uuid);
    g->enforce = true;
    g->rec = -1;
    env_rc = env_memory_limit(env_index, &env_limit, err);
    sm_rc = env_sm_limit(env_index, &sm_env, sm_err);
    n = find_claims(uuid, cs, ks, VGPU_MAX_PARTS, &invalid);
    if (G.unreadable_claim) {
        /* The config rule: logged once, when the config was read; every GPU refuses. */
        g->fail_closed = true;
    } else if (n > 0) {
        if (!setup_claims(g, cs, ks, n, &sm, sm_rc, sm_err))
            return;
        if (env_rc != 0)
            fail_closed(g, err);
    } else if (invalid != NULL) {
        fail_closed(g, invalid->err); /* not reached: an invalid claim fails every GPU */
    } else if (!setup_standalone(g, &env_limit, env_rc, err, &sm_env, sm_rc, sm_err, sm.policy)) {
        return;
    }
    if (env_rc == 0 && env_limit != 0 && (g->limit == 0 || env_limit < g->limit)) {
        g->limit = env_limit;
        /* Env may only lower a limit: a burst grant cannot raise it again. */
        for (int p = 0; p < g->nparts; p++)
            g->parts[p].burst = NULL;
        if (g->nparts == 1 && (g->parts[0].limit == 0 || env_limit < g->parts[0].limit))
            g->parts[0].limit = g->parts[0].cap = env_limit;
        g->capped = g->nparts > 1;
    }
    if (sm_rc == 0 && sm_env != 0 && (sm.limit == 0 || sm_env < sm.limit))
        sm.limit = sm_env;
    if (g->nparts > 0) {
        g->shm = g->parts[0].shm;
        g->rec = g->parts[0].rec;
    }
    vgpu_limiter_math_state_init(&g->compute,
                                 g->shm != NULL ? &g->shm->r->devices[g->rec] : NULL,
                                 g->enforce && !g->fail_closed, sm.limit, sm.policy,
                                 sm.priority == VGPU_PRIORITY_HIGH, mono_ns());
    /* NVML reports no utilisation per process on a MIG instance: its launches are timed. */
    g->compute.timed = g->compute.active && strncasecmp(g->uuid, "MIG-", 4) == 0;
    /* Without an SM limit a claim's GPU is still watched: launches, utilisation (limiter.h). */
    g->compute.counted = !g->compute.active && g->enforce && !g->fail_closed && g->nparts > 0;
    if (g->compute.active)
        VGPU_INFO("GPU %s: SM limit %u%%, policy %s%s", g->uuid, sm.limit,
                  sm.policy == VGPU_POLICY_WORK_CONSERVING ? "workConserving" : "strict",
                  g->compute.high_priority ? ", high priority" : "");
    VGPU_INFO("GPU %s: memory limit %llu bytes%s", uuid[0] ? uuid : "(unknown)",
              (unsigned long long)g->limit,
              g->fail_closed ? ", fail closed"
                             : g->nparts > 0 ? ", claim-wide accounting" : ", process-private");
}

/* Returns the gpu entry for uuid, creating it; G.mu held. */
static struct vgpu_gpu *lookup_locked(const char *uuid, int env_index)
{
    struct vgpu_gpu *g;

    /* UUIDs compare as CUDA does: case-insensitive (and a MIG instance's whatever its prefix). */
    for (int i = 0; i < G.ngpus; i++) {
        if (uuid[0] != '\0' && vgpu_uuid_same(G.gpus[i].uuid, uuid))
            return &G.gpus[i];
    }
    if (G.ngpus == VGPU_MAX_GPUS)
        return NULL;
    g = &G.gpus[G.ngpus++];
    setup(g, uuid, env_index);
    return g;
}

struct vgpu_gpu *vgpu_gpu_for_uuid(const char *uuid, int env_index)
{
    struct vgpu_gpu *g;

    vgpu_gpus_init();
    pthread_mutex_lock(&G.mu);
    g = lookup_locked(uuid, env_index);
    pthread_mutex_unlock(&G.mu);
    return g;
}

/* Formats the 16 UUID bytes as NVML does: GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx. */
static void format_uuid(const CUuuid *u, char out[VGPU_REGION_UUID_LEN])
{
    static const char hex[] = "0123456789abcdef";
    char *p = out + 4;

    memcpy(out, "GPU-", 4);
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            *p++ = '-';
        *p++ = hex[((unsigned char)u->bytes[i]) >> 4];
        *p++ = hex[((unsigned char)u->bytes[i]) & 15];
    }
    *p = '\0';
}

/*
 * Asks the driver for dev's UUID, outside our mutex (the driver may call
 * back into hooked functions). Returns its answer; a driver without the
 * query cannot identify any GPU: CUDA_ERROR_NOT_SUPPORTED.
 */
static CUresult query_uuid(CUdevice dev, char uuid[VGPU_REGION_UUID_LEN])
{
    CUuuid u;
    CUresult rc = CUDA_ERROR_NOT_SUPPORTED;

    uuid[0] = '\0';
    if (vgpu_cu.cuDeviceGetUuid_v2 != NULL)
        rc = vgpu_cu.cuDeviceGetUuid_v2(&u, dev);
    else if (vgpu_cu.cuDeviceGetUuid != NULL)
        rc = vgpu_cu.cuDeviceGetUuid(&u, dev);
    if (rc == CUDA_SUCCESS)
        format_uuid(&u, uuid);
    return rc;
}

/*
 * The state of dev, set up and kept once the driver tells its UUID. NULL
 * when it cannot be identified now (nothing is cached: the next call asks
 * again), with in *why the driver's answer, or CUDA_ERROR_OUT_OF_MEMORY
 * when it is identified but beyond what the library can track.
 */
static struct vgpu_gpu *identify(CUdevice dev, CUresult *why)
{
    struct vgpu_gpu *g;
    char uuid[VGPU_REGION_UUID_LEN];
    CUresult rc;

    *why = CUDA_SUCCESS;
    if (dev >= 0 && dev < VGPU_MAX_GPUS) {
        g = __atomic_load_n(&G.by_ordinal[dev], __ATOMIC_ACQUIRE);
        if (g != NULL)
            return g;
    }
    vgpu_gpus_init();
    rc = query_uuid(dev, uuid);
    if (rc != CUDA_SUCCESS) {
        *why = rc;
        return NULL;
    }
    if (dev < 0 || dev >= VGPU_MAX_GPUS) {
        *why = CUDA_ERROR_OUT_OF_MEMORY;
        return NULL;
    }
    pthread_mutex_lock(&G.mu);
    g = G.by_ordinal[dev];
    if (g == NULL) {
        g = lookup_locked(uuid, dev);
        if (g != NULL)
            __atomic_store_n(&G.by_ordinal[dev], g, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&G.mu);
    if (g == NULL)
        *why = CUDA_ERROR_OUT_OF_MEMORY;
    return g;
}

struct vgpu_gpu *vgpu_gpu_for_cuda(CUdevice dev)
{
    CUresult why;

    return identify(dev, &why);
}

CUresult vgpu_gpu_refusal(CUdevice dev, struct vgpu_gpu **g)
{
    CUresult why;

    *g = identify(dev, &why);
    if (*g != NULL || !G.any_enforcement)
        return CUDA_SUCCESS;
    VGPU_DEBUG("CUDA device %d not identified (driver: %d): refusing the call", (int)dev, (int)why);
    return why;
}
