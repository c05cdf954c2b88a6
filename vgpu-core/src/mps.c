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

/* mps.c - see mps.h. */
#include "mps.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "injected.h"
#include "log.h"
#include "parse.h"
#include "vgpu_env.h"

#define MIB (1024ull * 1024ull)

/* Per device index: a limit in MiB, 0 = none. */
struct mib_limits {
    uint64_t mib[VGPU_REGION_MAX_DEVICES];
};

/* Parses "<n>{K,M,G,T}[B]" (binary units) into MiB rounded down, at least 1; -1 if it is not that. */
static int parse_size_mib(const char *s, size_t len, uint64_t *mib)
{
    static const char units[] = "KMGT";
    char buf[32], *end;
    unsigned long long v;
    const char *u;
    int shift;

    if (len == 0 || len >= sizeof(buf))
        return -1;
    memcpy(buf, s, len);
    buf[len] = '\0';
    if (buf[0] < '0' || buf[0] > '9')
        return -1;
    errno = 0;
    v = strtoull(buf, &end, 10);
    if (errno != 0 || *end == '\0' || (u = strchr(units, *end)) == NULL)
        return -1;
    if (end[1] != '\0' && !(end[1] == 'B' && end[2] == '\0'))
        return -1;
    shift = 10 * (int)(u - units); /* K=0: KiB, M=10 ... relative to KiB */
    if (shift >= 10) {
        shift -= 10;
        if (v > (UINT64_MAX >> shift))
            return -1;
        *mib = (uint64_t)v << shift;
    } else {
        *mib = v / 1024;
    }
    if (*mib == 0)
        *mib = 1;
    return 0;
}

/* Parses a plain decimal MiB count "<n>" (at least 1) of len bytes; -1 if it is not that. */
static int parse_plain_mib(const char *s, size_t len, uint64_t *mib)
{
    char buf[32];
    uint64_t v;

    if (len == 0 || len >= sizeof(buf))
        return -1;
    memcpy(buf, s, len);
    buf[len] = '\0';
    if (vgpu_parse_uint(buf, UINT64_MAX, &v) != 0 || v == 0)
        return -1;
    *mib = v;
    return 0;
}

/*
 * Parses the container's "<k>=<value>,..." into out (MiB per index, the
 * smallest of repeated indexes), each value read by parse_value; -1 if any
 * entry is unreadable.
 */
static int parse_entries(const char *s, int (*parse_value)(const char *, size_t, uint64_t *),
                         struct mib_limits *out)
{
    memset(out, 0, sizeof(*out));
    while (*s != '\0') {
        const char *comma = strchr(s, ',');
        const char *eq = strchr(s, '=');
        size_t len = comma != NULL ? (size_t)(comma - s) : strlen(s);
        char *end;
        unsigned long k;
        uint64_t mib;

        if (eq == NULL || eq >= s + len || s[0] < '0' || s[0] > '9')
            return -1;
        errno = 0;
        k = strtoul(s, &end, 10);
        if (errno != 0 || end != eq || k >= VGPU_REGION_MAX_DEVICES)
            return -1;
        if (parse_value(eq + 1, len - (size_t)(eq + 1 - s), &mib) != 0)
            return -1;
        if (out->mib[k] == 0 || mib < out->mib[k])
            out->mib[k] = mib;
        s += len;
        if (*s == ',')
            s++;
    }
    return 0;
}

/*
 * Merges the config's per-index limits want with the container's value cur
 * (entries read by parse_value) into buf as "<k>=<MiB><unit>" entries, the
 * smaller of the two per index; an unreadable cur is replaced whole and
 * noted in why (at *why). Returns whether buf differs from cur.
 */
static bool merge_entries(const struct mib_limits *want, const char *cur,
                          int (*parse_value)(const char *, size_t, uint64_t *), const char *unit,
                          const char *name, char *buf, size_t size, char *why, size_t why_size,
                          size_t *why_len)
{
    struct mib_limits have;
    bool have_ok = cur != NULL && parse_entries(cur, parse_value, &have) == 0;
    size_t pos = 0;

    if (cur != NULL && !have_ok && *why_len < why_size)
        *why_len += (size_t)snprintf(why + *why_len, why_size - *why_len, "%s%s=%.64s (unreadable)",
                                     *why_len > 0 ? ", " : "", name, cur);
    buf[0] = '\0';
    for (unsigned k = 0; k < VGPU_REGION_MAX_DEVICES; k++) {
        uint64_t mib = want->mib[k];

        if (have_ok && have.mib[k] != 0 && (mib == 0 || have.mib[k] < mib))
            mib = have.mib[k];
        if (mib == 0)
            continue;
        pos += (size_t)snprintf(buf + pos, size - pos, "%s%u=%llu%s", pos > 0 ? "," : "", k,
                                (unsigned long long)mib, unit);
    }
    return cur == NULL || strcmp(cur, buf) != 0;
}

/* The container's share when it is a plain integer below share (kept), else share. */
static uint32_t threads_value(const char *cur, uint32_t share)
{
    uint64_t v;

    if (cur != NULL && vgpu_parse_uint(cur, 100, &v) == 0 && v >= 1 && v < share)
        return (uint32_t)v;
    return share;
}

/* Lowers want's limit of index k to bytes in whole MiB (rounded down, at least 1). */
static void want_mib(struct mib_limits *want, uint32_t k, uint64_t bytes)
{
    uint64_t mib = bytes / MIB;

    if (mib == 0)
        mib = 1;
    if (want->mib[k] == 0 || mib < want->mib[k])
        want->mib[k] = mib;
}

bool vgpu_mps_settings(const struct vgpu_claim_config *const cfgs[], int n, const char *cur_threads,
                       const char *cur_pinned, const char *cur_driver_mem, struct vgpu_mps_env *out)
{
    uint32_t share = 0;
    struct mib_limits want = {{0}}, want_driver = {{0}};
    bool any_pinned = false, any_driver = false;
    size_t why = 0;

    memset(out, 0, sizeof(*out));
    for (int i = 0; i < n; i++) {
        for (uint32_t k = 0; k < cfgs[i]->device_count; k++) {
            const struct vgpu_claim_device *d = &cfgs[i]->devices[k];

            if (!d->mps)
                continue;
            if (share == 0 || d->mps_active_thread_percent < share)
                share = d->mps_active_thread_percent;
            if (d->mps_driver_memory_limit != 0) {
                want_mib(&want_driver, k, d->mps_driver_memory_limit);
                any_driver = true;
            }
            if (d->mps_pinned_memory_limit != 0) {
                want_mib(&want, k, d->mps_pinned_memory_limit);
                any_pinned = true;
            }
        }
    }
    if (share == 0)
        return false;

    snprintf(out->threads, sizeof(out->threads), "%u", threads_value(cur_threads, share));
    out->threads_set = cur_threads == NULL || strcmp(cur_threads, out->threads) != 0;
    if (cur_threads != NULL && threads_value(cur_threads, share) == share &&
        strcmp(cur_threads, out->threads) != 0)
        why += (size_t)snprintf(out->why, sizeof(out->why), VGPU_MPS_ENV_THREADS "=%.32s",
                                cur_threads);

    /* Without a limit in the config the container's own stays. */
    if (any_pinned)
        out->pinned_set = merge_entries(&want, cur_pinned, parse_size_mib, "M", VGPU_MPS_ENV_PINNED,
                                        out->pinned, sizeof(out->pinned), out->why,
                                        sizeof(out->why), &why);
    if (any_driver)
        out->driver_mem_set = merge_entries(&want_driver, cur_driver_mem, parse_plain_mib, "",
                                            VGPU_MPS_ENV_DRIVER_MEM, out->driver_mem,
                                            sizeof(out->driver_mem), out->why, sizeof(out->why), &why);
    return true;
}

/* The valid injected configs with mps lines, read without logging; returns how many. */
static int read_mps_configs(struct vgpu_claim_config *cfgs, int max)
{
    struct vgpu_injected_set *set = calloc(1, sizeof(*set));
    int n = 0;

    if (set == NULL)
        return 0;
    vgpu_injected_find(VGPU_MOUNTINFO_PATH, VGPU_CANONICAL_CLAIMS_ROOT, getenv(VGPU_ENV_CLAIMS_ROOT),
                       true, set);
    for (int i = 0; i < set->count && i < VGPU_INJECTED_MAX && n < max; i++) {
        char err[VGPU_ERRMSG_MAX];
        size_t len = 0;
        char *text;
        int fd = vgpu_injected_open(set->root, &set->configs[i], err);

        if (fd < 0 || (text = vgpu_config_read(fd, &len)) == NULL)
            continue;
        if (vgpu_config_parse(text, len, &cfgs[n], err, NULL) == 0)
            n++;
        free(text);
    }
    free(set);
    return n;
}

/*
 * The log level the library's start will set (the most verbose log_level of
 * the valid configs, else LIBCUDA_LOG_LEVEL), set now so that what cuInit
 * replaced is logged by the same rule; the start sets it again.
 */
static void early_log_level(const struct vgpu_claim_config *const cfgs[], int n)
{
    enum vgpu_log_level level = VGPU_LOG_WARNING, env_level;
    const char *env = getenv(VGPU_ENV_LOG_LEVEL);
    bool from_config = false;

    for (int i = 0; i < n; i++) {
        if (cfgs[i]->has_log_level && (!from_config || cfgs[i]->log_level > level)) {
            level = cfgs[i]->log_level;
            from_config = true;
        }
    }
    if (!from_config && env != NULL && vgpu_log_parse_level(env, &env_level) == 0)
        level = env_level;
    vgpu_log_set_level(level);
}

static void apply_env(void)
{
    struct vgpu_claim_config *cfgs = calloc(VGPU_INJECTED_MAX, sizeof(*cfgs));
    const struct vgpu_claim_config *ptrs[VGPU_INJECTED_MAX];
    struct vgpu_mps_env env;
    int n;

    if (cfgs == NULL)
        return;
    n = read_mps_configs(cfgs, VGPU_INJECTED_MAX);
    for (int i = 0; i < n; i++)
        ptrs[i] = &cfgs[i];
    if (vgpu_mps_settings(ptrs, n, getenv(VGPU_MPS_ENV_THREADS), getenv(VGPU_MPS_ENV_PINNED),
                          getenv(VGPU_MPS_ENV_DRIVER_MEM), &env)) {
        early_log_level(ptrs, n);
        if (env.threads_set && setenv(VGPU_MPS_ENV_THREADS, env.threads, 1) != 0)
            VGPU_ERROR("cannot set " VGPU_MPS_ENV_THREADS ": %s", strerror(errno));
        if (env.pinned_set && setenv(VGPU_MPS_ENV_PINNED, env.pinned, 1) != 0)
            VGPU_ERROR("cannot set " VGPU_MPS_ENV_PINNED ": %s", strerror(errno));
        if (env.driver_mem_set && setenv(VGPU_MPS_ENV_DRIVER_MEM, env.driver_mem, 1) != 0)
            VGPU_ERROR("cannot set " VGPU_MPS_ENV_DRIVER_MEM ": %s", strerror(errno));
        if (env.why[0] != '\0')
            VGPU_INFO("MPS client: replaced the container's %s with the claim's limits", env.why);
        VGPU_DEBUG("MPS client: " VGPU_MPS_ENV_THREADS "=%s " VGPU_MPS_ENV_PINNED "=%s "
                   VGPU_MPS_ENV_DRIVER_MEM "=%s", env.threads,
                   env.pinned[0] != '\0' ? env.pinned : "(the container's)",
                   env.driver_mem[0] != '\0' ? env.driver_mem : "(the container's)");
    }
    free(cfgs);
}

void vgpu_mps_apply_env(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;

    pthread_once(&once, apply_env);
}
