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

/* config.c - see config.h. */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "parse.h"

/* Bits of the "seen" mask for keys that are not per device. */
enum {
    SEEN_VERSION = 1u << 0,
    SEEN_CLAIM = 1u << 1,
    SEEN_POLICY = 1u << 2,
    SEEN_PRIORITY = 1u << 3,
    SEEN_LOG = 1u << 4,
    SEEN_ENFORCEMENT = 1u << 5,
    SEEN_COUNT = 1u << 6,
};

/* Bits of the per-device "seen" mask. */
enum {
    DEV_UUID = 1u << 0,
    DEV_MEM = 1u << 1,
    DEV_SM = 1u << 2,
    DEV_ALL = 7u,
    DEV_MPS_PCT = 1u << 3,
    DEV_MPS_PINNED = 1u << 4,
    DEV_MPS_ALL = DEV_MPS_PCT | DEV_MPS_PINNED,
    DEV_MPS_DRIVER = 1u << 5,
};

struct parse_state {
    struct vgpu_claim_config *cfg;
    char *err;
    unsigned seen;
    unsigned dev_seen[VGPU_REGION_MAX_DEVICES];
    unsigned dev_line[VGPU_REGION_MAX_DEVICES];  /* first line of each device's keys */
    unsigned uuid_line[VGPU_REGION_MAX_DEVICES]; /* line of each device.<k>.uuid */
    unsigned line;                               /* line being parsed, 0 after the last */
    unsigned *err_line;
    int failed;
};

static void fail(struct parse_state *st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Records the first error only: it is the one worth reporting. */
static void fail(struct parse_state *st, const char *fmt, ...)
{
    va_list ap;

    if (st->failed)
        return;
    st->failed = 1;
    *st->err_line = st->line;
    va_start(ap, fmt);
    vsnprintf(st->err, VGPU_ERRMSG_MAX, fmt, ap);
    va_end(ap);
}

static int is_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

bool vgpu_uuid_valid(const char *s)
{
    static const char pattern[] = "PPP-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx";
    size_t i;

    if (strncmp(s, "GPU-", 4) != 0 && strncmp(s, "MIG-", 4) != 0)
        return false;
    for (i = 4; pattern[i] != '\0'; i++) {
        if (pattern[i] == 'x' ? !is_hex(s[i]) : s[i] != pattern[i])
            return false;
    }
    return s[i] == '\0';
}

bool vgpu_uuid_same(const char *a, const char *b)
{
    /* CUDA reports a MIG instance's 16 bytes without saying MIG: compare them alone. */
    if (vgpu_uuid_valid(a) && vgpu_uuid_valid(b))
        return strcasecmp(a + 4, b + 4) == 0;
    return strcasecmp(a, b) == 0;
}

/* Marks key bit as seen; a second occurrence is an error. */
static int once(struct parse_state *st, unsigned *mask, unsigned bit, const char *key)
{
    if (*mask & bit) {
        fail(st, "duplicate key %s", key);
        return -1;
    }
    *mask |= bit;
    return 0;
}

static void parse_device_key(struct parse_state *st, const char *key, const char *val)
{
    const char *rest = key + strlen(VGPU_CONFIG_DEVICE_PREFIX);
    const char *dot = strchr(rest, '.');
    char idx[16];
    uint64_t k, v;
    struct vgpu_claim_device *d;

    if (strcmp(rest, VGPU_CONFIG_DEVICE_COUNT) == 0) {
        if (once(st, &st->seen, SEEN_COUNT, key) != 0)
            return;
        if (vgpu_parse_uint(val, VGPU_REGION_MAX_DEVICES, &v) != 0 || v == 0) {
            fail(st, "device.count: %.32s is not an integer in 1..%d", val, VGPU_REGION_MAX_DEVICES);
            return;
        }
        st->cfg->device_count = (uint32_t)v;
        return;
    }
    if (dot == NULL || (size_t)(dot - rest) >= sizeof(idx))
        return; /* unknown device.* key */
    memcpy(idx, rest, (size_t)(dot - rest));
    idx[dot - rest] = '\0';
    if (vgpu_parse_uint(idx, VGPU_REGION_MAX_DEVICES - 1, &k) != 0) {
        fail(st, "%.64s: device index is not an integer in 0..%d", key, VGPU_REGION_MAX_DEVICES - 1);
        return;
    }
    d = &st->cfg->devices[k];
    if (st->dev_line[k] == 0)
        st->dev_line[k] = st->line;
    if (strcmp(dot + 1, VGPU_CONFIG_DEVICE_UUID) == 0) {
        if (once(st, &st->dev_seen[k], DEV_UUID, key) != 0)
            return;
        if (!vgpu_uuid_valid(val)) {
            fail(st, "%.64s: %.64s is not a GPU UUID", key, val);
            return;
        }
        st->uuid_line[k] = st->line;
        /* Hex digits kept in lower case, as the library formats the driver's UUIDs. */
        for (size_t i = 0; val[i] != '\0' && i + 1 < sizeof(d->uuid); i++)
            d->uuid[i] = i >= 4 && val[i] >= 'A' && val[i] <= 'F' ? (char)(val[i] - 'A' + 'a')
                                                                 : val[i];
    } else if (strcmp(dot + 1, VGPU_CONFIG_DEVICE_MEMORY) == 0) {
        if (once(st, &st->dev_seen[k], DEV_MEM, key) != 0)
            return;
        if (vgpu_parse_uint(val, UINT64_MAX, &v) != 0) {
            fail(st, "%.64s: %.32s is not a decimal byte count", key, val);
            return;
        }
        d->memory_limit = v;
    } else if (strcmp(dot + 1, VGPU_CONFIG_DEVICE_SM) == 0) {
        if (once(st, &st->dev_seen[k], DEV_SM, key) != 0)
            return;
        if (vgpu_parse_uint(val, 100, &v) != 0) {
            fail(st, "%.64s: %.32s is not an integer in 0..100", key, val);
            return;
        }
        d->sm_limit = (uint32_t)v;
    }
}

/* The mps.* keys the library knows (docs/mps.md), with the bit each sets in dev_seen. */
static const struct {
    const char *name;
    unsigned bit;
} mps_keys[] = {
    {VGPU_CONFIG_MPS_THREADS, DEV_MPS_PCT},
    {VGPU_CONFIG_MPS_PINNED, DEV_MPS_PINNED},
    {VGPU_CONFIG_MPS_DRIVER, DEV_MPS_DRIVER},
};

/* mps.activeThreadPercent.<k>, mps.pinnedMemoryLimit.<k> and mps.driverMemoryLimit.<k>; other mps.* ignored. */
static void parse_mps_key(struct parse_state *st, const char *key, const char *val)
{
    const char *rest = key + strlen(VGPU_CONFIG_MPS_PREFIX);
    const char *dot = strchr(rest, '.');
    unsigned bit = 0;
    uint64_t k, v;
    struct vgpu_claim_device *d;

    if (dot == NULL)
        return;
    for (size_t i = 0; i < sizeof(mps_keys) / sizeof(mps_keys[0]); i++) {
        if ((size_t)(dot - rest) == strlen(mps_keys[i].name) &&
            strncmp(rest, mps_keys[i].name, (size_t)(dot - rest)) == 0)
            bit = mps_keys[i].bit;
    }
    if (bit == 0)
        return; /* unknown mps.* key */
    if (vgpu_parse_uint(dot + 1, VGPU_REGION_MAX_DEVICES - 1, &k) != 0) {
        fail(st, "%.64s: device index is not an integer in 0..%d", key, VGPU_REGION_MAX_DEVICES - 1);
        return;
    }
    d = &st->cfg->devices[k];
    if (st->dev_line[k] == 0)
        st->dev_line[k] = st->line;
    if (once(st, &st->dev_seen[k], bit, key) != 0)
        return;
    switch (bit) {
    case DEV_MPS_PCT:
        if (vgpu_parse_uint(val, 100, &v) != 0 || v == 0) {
            fail(st, "%.64s: %.32s is not an integer in 1..100", key, val);
            return;
        }
        d->mps_active_thread_percent = (uint32_t)v;
        break;
    case DEV_MPS_PINNED:
        if (vgpu_parse_uint(val, UINT64_MAX, &v) != 0) {
            fail(st, "%.64s: %.32s is not a decimal byte count", key, val);
            return;
        }
        d->mps_pinned_memory_limit = v;
        break;
    default:
        /* The driver reads whole MiB: a limit below one would be no limit. */
        if (vgpu_parse_uint(val, UINT64_MAX, &v) != 0 || v < VGPU_CONFIG_MPS_DRIVER_MIN) {
            fail(st, "%.64s: %.32s is not a decimal byte count of at least 1048576", key, val);
            return;
        }
        d->mps_driver_memory_limit = v;
        break;
    }
}

/* Maps val to one of names[] (index stored in *out); fails naming key otherwise. */
static void parse_enum(struct parse_state *st, const char *key, const char *val, unsigned bit,
                       const char *const names[], unsigned count, unsigned *out)
{
    if (once(st, &st->seen, bit, key) != 0)
        return;
    for (unsigned i = 0; i < count; i++) {
        if (strcmp(val, names[i]) == 0) {
            *out = i;
            return;
        }
    }
    fail(st, "%s: unknown value %.32s", key, val);
}

static void parse_line(struct parse_state *st, char *line)
{
    static const char *const policies[] = {"strict", "workConserving", "disabled"};
    static const char *const priorities[] = {"low", "high"};
    static const char *const levels[] = {"error", "warning", "info", "debug"};
    static const char *const switches[] = {"disabled", "enabled"};
    struct vgpu_claim_config *cfg = st->cfg;
    char *eq = strchr(line, '=');
    const char *key = line, *val;
    unsigned u;
    uint64_t v;

    if (eq == NULL) {
        fail(st, "line without '=': %.64s", line);
        return;
    }
    *eq = '\0';
    val = eq + 1;
    if (strcmp(key, VGPU_CONFIG_KEY_VERSION) == 0) {
        if (once(st, &st->seen, SEEN_VERSION, key) != 0)
            return;
        if (vgpu_parse_uint(val, UINT32_MAX, &v) != 0 || v != VGPU_CONFIG_VERSION)
            fail(st, "version: unsupported value %.32s (want 1)", val);
    } else if (strcmp(key, VGPU_CONFIG_KEY_CLAIM) == 0) {
        if (once(st, &st->seen, SEEN_CLAIM, key) != 0)
            return;
        if (val[0] == '\0' || strlen(val) >= sizeof(cfg->claim)) {
            fail(st, "claim: empty or longer than %zu bytes", sizeof(cfg->claim) - 1);
            return;
        }
        snprintf(cfg->claim, sizeof(cfg->claim), "%s", val);
    } else if (strcmp(key, VGPU_CONFIG_KEY_POLICY) == 0) {
        u = 0;
        parse_enum(st, key, val, SEEN_POLICY, policies, 3, &u);
        cfg->compute_policy = u;
    } else if (strcmp(key, VGPU_CONFIG_KEY_PRIORITY) == 0) {
        u = 0;
        parse_enum(st, key, val, SEEN_PRIORITY, priorities, 2, &u);
        cfg->priority = (enum vgpu_priority)u;
    } else if (strcmp(key, VGPU_CONFIG_KEY_LOG_LEVEL) == 0) {
        u = VGPU_LOG_WARNING;
        parse_enum(st, key, val, SEEN_LOG, levels, 4, &u);
        cfg->log_level = (enum vgpu_log_level)u;
        cfg->has_log_level = true;
    } else if (strcmp(key, VGPU_CONFIG_KEY_ENFORCEMENT) == 0) {
        u = 1;
        parse_enum(st, key, val, SEEN_ENFORCEMENT, switches, 2, &u);
        cfg->enforcement = u == 1;
    } else if (strncmp(key, VGPU_CONFIG_DEVICE_PREFIX, strlen(VGPU_CONFIG_DEVICE_PREFIX)) == 0) {
        parse_device_key(st, key, val);
    } else if (strncmp(key, VGPU_CONFIG_MPS_PREFIX, strlen(VGPU_CONFIG_MPS_PREFIX)) == 0) {
        parse_mps_key(st, key, val);
    }
}

/* Whether c may appear in a config line: printable ASCII (the format has nothing else). */
static bool is_text(unsigned char c)
{
    return c >= 0x20 && c < 0x7f;
}

int vgpu_config_parse(const char *text, size_t len, struct vgpu_claim_config *cfg,
                      char err[VGPU_ERRMSG_MAX], unsigned *err_line)
{
    unsigned dummy_line;
    struct parse_state st = {.cfg = cfg, .err = err,
                             .err_line = err_line != NULL ? err_line : &dummy_line};
    char line[VGPU_CONFIG_LINE_MAX + 1];
    size_t pos = 0;

    memset(cfg, 0, sizeof(*cfg));
    cfg->enforcement = true;
    cfg->compute_policy = VGPU_POLICY_STRICT;
    err[0] = '\0';
    *st.err_line = 0;
    if (len > VGPU_CONFIG_MAX_BYTES) {
        /* Named at the line holding the first byte past the limit. */
        st.line = 1;
        for (size_t i = 0; i < VGPU_CONFIG_MAX_BYTES; i++)
            st.line += text[i] == '\n';
        fail(&st, "file larger than %d bytes", VGPU_CONFIG_MAX_BYTES);
        return -1;
    }
    while (pos < len && !st.failed) {
        const char *p = text + pos;
        const char *nl = memchr(p, '\n', len - pos);
        size_t n = nl != NULL ? (size_t)(nl - p) : len - pos;

        st.line++;
        if (n > 0 && p[n - 1] == '\r')
            n--;
        for (size_t i = 0; i < n && !st.failed; i++) {
            if (p[i] == '\0')
                fail(&st, "embedded NUL byte at column %zu", i + 1);
            else if (!is_text((unsigned char)p[i]))
                fail(&st, "byte 0x%02x at column %zu is not printable ASCII", (unsigned char)p[i],
                     i + 1);
        }
        if (!st.failed && n >= sizeof(line))
            fail(&st, "line longer than %zu bytes", sizeof(line) - 1);
        if (!st.failed && n < sizeof(line)) {
            memcpy(line, p, n);
            line[n] = '\0';
            if (n > 0 && line[0] != VGPU_CONFIG_COMMENT)
                parse_line(&st, line);
        }
        pos += (nl != NULL ? (size_t)(nl - p) + 1 : len - pos);
    }
    st.line = 0; /* what follows is about the whole file */
    if (!(st.seen & SEEN_VERSION))
        fail(&st, "version: missing");
    if (!(st.seen & SEEN_CLAIM))
        fail(&st, "claim: missing");
    if (!(st.seen & SEEN_COUNT))
        fail(&st, "device.count: missing");
    for (unsigned k = 0; k < cfg->device_count; k++) {
        for (unsigned j = 0; j < k; j++) {
            if (cfg->devices[k].uuid[0] != '\0' &&
                strcmp(cfg->devices[k].uuid, cfg->devices[j].uuid) == 0) {
                st.line = st.uuid_line[k] > st.uuid_line[j] ? st.uuid_line[k] : st.uuid_line[j];
                fail(&st, "device.%u.uuid: same GPU as device.%u", k, j);
            }
        }
    }
    for (unsigned k = 0; k < VGPU_REGION_MAX_DEVICES; k++) {
        st.line = 0;
        if (k < cfg->device_count && (st.dev_seen[k] & DEV_ALL) != DEV_ALL)
            fail(&st, "device.%u: missing %s", k,
                 !(st.dev_seen[k] & DEV_UUID) ? "uuid"
                 : !(st.dev_seen[k] & DEV_MEM) ? "memory_limit_bytes"
                                               : "sm_limit_percent");
        else if (k < cfg->device_count && (st.dev_seen[k] & DEV_MPS_ALL) != 0 &&
                 (st.dev_seen[k] & DEV_MPS_ALL) != DEV_MPS_ALL)
            fail(&st, "mps.%s.%u: missing (mps.%s.%u is set)",
                 (st.dev_seen[k] & DEV_MPS_PCT) ? "pinnedMemoryLimit" : "activeThreadPercent", k,
                 (st.dev_seen[k] & DEV_MPS_PCT) ? "activeThreadPercent" : "pinnedMemoryLimit", k);
        else if (k < cfg->device_count && (st.dev_seen[k] & DEV_MPS_DRIVER) &&
                 (st.dev_seen[k] & DEV_MPS_ALL) != DEV_MPS_ALL)
            fail(&st, "mps.driverMemoryLimit.%u: set without mps.activeThreadPercent.%u and "
                      "mps.pinnedMemoryLimit.%u", k, k, k);
        else if (k >= cfg->device_count && st.dev_seen[k] != 0 && (st.seen & SEEN_COUNT)) {
            st.line = st.dev_line[k];
            fail(&st, "%s.%u: index not below device.count %u",
                 (st.dev_seen[k] & DEV_ALL) != 0 ? "device" : "mps.*", k, cfg->device_count);
        }
        cfg->devices[k].mps = (st.dev_seen[k] & DEV_MPS_ALL) == DEV_MPS_ALL;
    }
    return st.failed ? -1 : 0;
}

char *vgpu_config_read(int fd, size_t *len)
{
    char *buf = malloc(VGPU_CONFIG_MAX_BYTES + 1);
    ssize_t n;
    int e = ENOMEM;

    *len = 0;
    while (buf != NULL && *len < VGPU_CONFIG_MAX_BYTES + 1 &&
           (n = read(fd, buf + *len, VGPU_CONFIG_MAX_BYTES + 1 - *len)) != 0) {
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            e = errno;
            free(buf);
            buf = NULL;
            break;
        }
        *len += (size_t)n;
    }
    close(fd);
    errno = e;
    return buf;
}
