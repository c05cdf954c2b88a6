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
 * fake_config.c - parsing of the simulated GPU configuration.
 */
#include "fake_config.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <time.h>

#include "fake_mig.h"
#include "vgpu_nvml.h"

#define DEFAULT_STATE_DIR "/tmp/vgpu-fake-state"

uint64_t fake_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* Strict unsigned decimal: no sign, no spaces, no junk, overflow checked. */
static int parse_u64(const char *s, const char **end, uint64_t *out)
{
    uint64_t v = 0;
    const char *p = s;
    if (!isdigit((unsigned char)*p))
        return -1;
    for (; isdigit((unsigned char)*p); p++) {
        uint64_t d = (uint64_t)(*p - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    *end = p;
    *out = v;
    return 0;
}

int fake_parse_size(const char *s, uint64_t *out)
{
    static const struct {
        const char *suffix;
        uint64_t mult;
    } units[] = {
        {"", 1},
        {"K", 1000ULL},
        {"M", 1000ULL * 1000},
        {"G", 1000ULL * 1000 * 1000},
        {"T", 1000ULL * 1000 * 1000 * 1000},
        {"Ki", 1ULL << 10},
        {"Mi", 1ULL << 20},
        {"Gi", 1ULL << 30},
        {"Ti", 1ULL << 40},
    };
    const char *end;
    uint64_t v;
    if (s == NULL || parse_u64(s, &end, &v) != 0)
        return -1;
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strcmp(end, units[i].suffix) == 0) {
            if (v > UINT64_MAX / units[i].mult)
                return -1;
            *out = v * units[i].mult;
            return 0;
        }
    }
    return -1;
}

static int parse_int(const char *s, int min, int max, int *out)
{
    const char *end;
    uint64_t v;
    int neg = 0;
    if (*s == '-') {
        neg = 1;
        s++;
    }
    if (parse_u64(s, &end, &v) != 0 || *end != '\0' || v > (uint64_t)max + (neg ? 1u : 0u))
        return -1;
    long long r = neg ? -(long long)v : (long long)v;
    if (r < min || r > max)
        return -1;
    *out = (int)r;
    return 0;
}

/* "MAJOR.MINOR" with small non-negative parts. */
static int parse_version_pair(const char *s, int *major, int *minor)
{
    const char *end;
    uint64_t a, b;
    if (parse_u64(s, &end, &a) != 0 || *end != '.' || a > 999)
        return -1;
    if (parse_u64(end + 1, &end, &b) != 0 || *end != '\0' || b > 99)
        return -1;
    *major = (int)a;
    *minor = (int)b;
    return 0;
}

static int copy_string(char *dst, size_t len, const char *src)
{
    size_t n = strlen(src);
    if (n == 0 || n >= len)
        return -1;
    memcpy(dst, src, n + 1);
    return 0;
}

/* A mig_mode value: "disabled", "enabled", "enable-pending", "disable-pending". */
static int parse_mig_mode(const char *val, int *current, int *pending)
{
    static const struct {
        const char *name;
        int current, pending;
    } modes[] = {
        {"disabled", NVML_DEVICE_MIG_DISABLE, NVML_DEVICE_MIG_DISABLE},
        {"enabled", NVML_DEVICE_MIG_ENABLE, NVML_DEVICE_MIG_ENABLE},
        {"enable-pending", NVML_DEVICE_MIG_DISABLE, NVML_DEVICE_MIG_ENABLE},
        {"disable-pending", NVML_DEVICE_MIG_ENABLE, NVML_DEVICE_MIG_DISABLE},
    };
    for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
        if (strcmp(val, modes[i].name) == 0) {
            *current = modes[i].current;
            *pending = modes[i].pending;
            return 0;
        }
    }
    return -1;
}

/* Per-GPU keys gpu<N>_mig_geometry and gpu<N>_mig_mode; 1 when key is none of them. */
static int apply_gpu_key(fake_config *cfg, const char *key, const char *val)
{
    char *end;
    if (strncmp(key, "gpu", 3) != 0 || !isdigit((unsigned char)key[3]))
        return 1;
    errno = 0;
    long n = strtol(key + 3, &end, 10);
    if (errno != 0 || n < 0 || n >= FAKE_MAX_GPUS || (key[3] == '0' && end != key + 4))
        return 1;
    fake_gpu *g = &cfg->gpus[n];
    if (strcmp(end, "_mig_geometry") == 0) {
        int geo = fake_mig_geometry_parse(val);
        if (geo < 0)
            return -1;
        g->mig_geometry = geo;
        g->mig_set |= 1;
        return 0;
    }
    if (strcmp(end, "_mig_mode") == 0) {
        if (parse_mig_mode(val, &g->mig_current, &g->mig_pending) != 0)
            return -1;
        g->mig_set |= 2;
        return 0;
    }
    return 1;
}

/* Applies one key; returns 0, 1 for an unknown key, -1 for a bad value. */
static int apply(fake_config *cfg, const char *key, const char *val)
{
    uint64_t u;
    if (strcmp(key, "mig_geometry") == 0) {
        int geo = fake_mig_geometry_parse(val);
        if (geo < 0)
            return -1;
        cfg->mig_geometry = geo;
        return 0;
    }
    if (strcmp(key, "mig_mode") == 0)
        return parse_mig_mode(val, &cfg->mig_current, &cfg->mig_pending);
    if (strcmp(key, "gpu_count") == 0)
        return parse_int(val, 0, FAKE_MAX_GPUS, &cfg->gpu_count);
    if (strcmp(key, "gpu_memory") == 0) {
        if (fake_parse_size(val, &u) != 0 || u == 0)
            return -1;
        cfg->gpu_memory = u;
        return 0;
    }
    if (strcmp(key, "gpu_product") == 0)
        return copy_string(cfg->gpu_product, sizeof(cfg->gpu_product), val);
    if (strcmp(key, "uuid_seed") == 0)
        return copy_string(cfg->uuid_seed, sizeof(cfg->uuid_seed), val);
    if (strcmp(key, "driver_version") == 0)
        return copy_string(cfg->driver_version, sizeof(cfg->driver_version), val);
    if (strcmp(key, "cuda_version") == 0) {
        int major, minor;
        if (parse_version_pair(val, &major, &minor) != 0)
            return -1;
        cfg->cuda_version = major * 1000 + minor * 10;
        return 0;
    }
    if (strcmp(key, "compute_capability") == 0)
        return parse_version_pair(val, &cfg->cc_major, &cfg->cc_minor);
    if (strcmp(key, "multiprocessors") == 0)
        return parse_int(val, 1, 1024, &cfg->multiprocessors);
    if (strcmp(key, "cores_per_sm") == 0)
        return parse_int(val, 1, 1024, &cfg->cores_per_sm);
    if (strcmp(key, "numa_node") == 0)
        return parse_int(val, -1, 1023, &cfg->numa_node);
    if (strcmp(key, "kernel_us") == 0) {
        const char *end;
        if (parse_u64(val, &end, &u) != 0 || *end != '\0' || u > UINT64_MAX / 1000)
            return -1;
        cfg->kernel_ns = u * 1000;
        return 0;
    }
    if (strcmp(key, "context_memory") == 0) {
        if (fake_parse_size(val, &cfg->context_memory) != 0)
            return -1;
        return 0;
    }
    if (strcmp(key, "state_dir") == 0)
        return val[0] == '/' ? copy_string(cfg->state_dir, sizeof(cfg->state_dir), val) : -1;
    if (strcmp(key, "mig_proc_root") == 0)
        return val[0] == '/' || val[0] == '\0'
                   ? copy_string(cfg->mig_proc_root, sizeof(cfg->mig_proc_root), val)
                   : -1;
    return apply_gpu_key(cfg, key, val);
}

static const char *const keys[] = {
    "gpu_count", "gpu_memory", "gpu_product", "uuid_seed", "driver_version",
    "cuda_version", "compute_capability", "multiprocessors", "cores_per_sm",
    "numa_node", "kernel_us", "context_memory", "state_dir", "mig_geometry", "mig_mode",
    "mig_proc_root",
};

static void set_defaults(fake_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->gpu_count = 2;
    cfg->gpu_memory = 80ULL << 30;
    strcpy(cfg->gpu_product, "NVIDIA H100 80GB HBM3");
    strcpy(cfg->uuid_seed, "vgpu-fake");
    strcpy(cfg->driver_version, "580.95.05");
    cfg->cuda_version = 12090;
    cfg->cc_major = 9;
    cfg->cc_minor = 0;
    cfg->multiprocessors = 132;
    cfg->cores_per_sm = 128;
    cfg->numa_node = 0;
    strcpy(cfg->state_dir, DEFAULT_STATE_DIR);
}

static unsigned int architecture_of(int major, int minor)
{
    if (major >= 10)
        return NVML_DEVICE_ARCH_BLACKWELL;
    if (major == 9)
        return NVML_DEVICE_ARCH_HOPPER;
    if (major == 8)
        return minor >= 9 ? NVML_DEVICE_ARCH_ADA : NVML_DEVICE_ARCH_AMPERE;
    if (major == 7)
        return minor >= 5 ? NVML_DEVICE_ARCH_TURING : NVML_DEVICE_ARCH_VOLTA;
    if (major == 6)
        return NVML_DEVICE_ARCH_PASCAL;
    return NVML_DEVICE_ARCH_UNKNOWN;
}

/* FNV-1a 64-bit, used only to derive stable UUID bytes from the seed. */
static uint64_t fnv1a(const char *s, uint64_t h)
{
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ULL;
    }
    return h;
}

/* splitmix64 finaliser: neighbouring seeds give unrelated UUIDs. */
static uint64_t mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static void derive_gpus(fake_config *cfg)
{
    for (int i = 0; i < cfg->gpu_count; i++) {
        fake_gpu *g = &cfg->gpus[i];
        char key[160];
        snprintf(key, sizeof(key), "%s/%d", cfg->uuid_seed, i);
        uint64_t hi = mix(fnv1a(key, 0xcbf29ce484222325ULL));
        uint64_t lo = mix(fnv1a(key, hi ^ 0x9e3779b97f4a7c15ULL));
        for (int b = 0; b < 8; b++) {
            g->uuid_bytes[b] = (unsigned char)(hi >> (56 - 8 * b));
            g->uuid_bytes[8 + b] = (unsigned char)(lo >> (56 - 8 * b));
        }
        const unsigned char *u = g->uuid_bytes;
        snprintf(g->uuid, sizeof(g->uuid),
                 "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                 u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11],
                 u[12], u[13], u[14], u[15]);
        /* Spread GPUs over distinct buses as on a real multi-GPU board. */
        g->pci_bus = 0x18u + 0x10u * (unsigned int)i;
        g->phys = i;
        snprintf(g->pci_bus_id, sizeof(g->pci_bus_id), "00000000:%02X:00.0", g->pci_bus);
        snprintf(g->pci_bus_id_legacy, sizeof(g->pci_bus_id_legacy), "0000:%02X:00.0",
                 g->pci_bus);
        g->memory = cfg->gpu_memory;
        g->multiprocessors = cfg->multiprocessors;
        if ((g->mig_set & 1) == 0)
            g->mig_geometry = cfg->mig_geometry;
        if ((g->mig_set & 2) == 0) {
            g->mig_current = cfg->mig_current;
            g->mig_pending = cfg->mig_pending;
        }
        g->mig_gi = g->mig_ci = 0;
    }
}

/* A GPU in (or going to) MIG mode needs a geometry; returns the first that has none, or -1. */
static int mig_without_geometry(const fake_config *cfg)
{
    for (int i = 0; i < cfg->gpu_count; i++) {
        const fake_gpu *g = &cfg->gpus[i];
        if (g->mig_geometry == FAKE_MIG_NONE &&
            (g->mig_current == NVML_DEVICE_MIG_ENABLE || g->mig_pending == NVML_DEVICE_MIG_ENABLE))
            return i;
    }
    return -1;
}

static void trim(char **s)
{
    char *p = *s;
    while (*p == ' ' || *p == '\t')
        p++;
    size_t n = strlen(p);
    while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t' || p[n - 1] == '\r' || p[n - 1] == '\n'))
        p[--n] = '\0';
    *s = p;
}

static int load_file(fake_config *cfg, const char *path, char *errbuf, unsigned int errlen)
{
    FILE *f = fopen(path, "re");
    if (f == NULL) {
        snprintf(errbuf, errlen, "VGPU_FAKE_CONFIG %s: %s", path, strerror(errno));
        return -1;
    }
    char line[512];
    int lineno = 0, rc = 0;
    while (rc == 0 && fgets(line, sizeof(line), f) != NULL) {
        lineno++;
        char *s = line;
        trim(&s);
        if (*s == '\0' || *s == '#')
            continue;
        char *eq = strchr(s, '=');
        if (eq == NULL) {
            snprintf(errbuf, errlen, "%s:%d: expected key=value", path, lineno);
            rc = -1;
            break;
        }
        *eq = '\0';
        char *key = s, *val = eq + 1;
        trim(&key);
        trim(&val);
        int r = apply(cfg, key, val);
        if (r < 0)
            snprintf(errbuf, errlen, "%s:%d: invalid value %.64s for key %s", path, lineno, val,
                     key);
        else if (r > 0)
            snprintf(errbuf, errlen, "%s:%d: unknown key %.64s", path, lineno, key);
        rc = r == 0 ? 0 : -1;
    }
    fclose(f);
    return rc;
}

int fake_config_load(fake_config *cfg, char *errbuf, unsigned int errlen)
{
    int rc = 0;
    set_defaults(cfg);
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        char env[64] = "VGPU_FAKE_";
        size_t n = strlen(env);
        for (const char *k = keys[i]; *k && n + 1 < sizeof(env); k++)
            env[n++] = (char)toupper((unsigned char)*k);
        env[n] = '\0';
        const char *v = getenv(env);
        if (v != NULL && rc == 0 && apply(cfg, keys[i], v) != 0) {
            snprintf(errbuf, errlen, "invalid value %.64s for %s", v, env);
            rc = -1;
        }
    }
    /* Per-GPU keys: VGPU_FAKE_GPU<N>_MIG_GEOMETRY, VGPU_FAKE_GPU<N>_MIG_MODE. */
    for (int n = 0; n < FAKE_MAX_GPUS && rc == 0; n++) {
        static const char *const gpu_keys[] = {"mig_geometry", "mig_mode"};
        for (size_t k = 0; k < 2 && rc == 0; k++) {
            char env[64], key[64];
            snprintf(key, sizeof(key), "gpu%d_%s", n, gpu_keys[k]);
            snprintf(env, sizeof(env), "VGPU_FAKE_GPU%d_%s", n,
                     k == 0 ? "MIG_GEOMETRY" : "MIG_MODE");
            const char *v = getenv(env);
            if (v != NULL && apply(cfg, key, v) != 0) {
                snprintf(errbuf, errlen, "invalid value %.64s for %s", v, env);
                rc = -1;
            }
        }
    }
    const char *path = getenv("VGPU_FAKE_CONFIG");
    if (rc == 0 && path != NULL && *path != '\0')
        rc = load_file(cfg, path, errbuf, errlen);
    cfg->architecture = architecture_of(cfg->cc_major, cfg->cc_minor);
    cfg->brand = NVML_BRAND_NVIDIA;
    derive_gpus(cfg);
    int bad = mig_without_geometry(cfg);
    if (rc == 0 && bad >= 0) {
        snprintf(errbuf, errlen, "GPU %d: a MIG mode other than disabled needs a mig_geometry",
                 bad);
        rc = -1;
    }
    return rc;
}

static fake_config g_config;
static char g_config_err[256];
static int g_config_rc;
static pthread_once_t g_config_once = PTHREAD_ONCE_INIT;

static void load_once(void)
{
    g_config_rc = fake_config_load(&g_config, g_config_err, sizeof(g_config_err));
}

const fake_config *fake_config_get(const char **err)
{
    pthread_once(&g_config_once, load_once);
    if (err != NULL)
        *err = g_config_rc == 0 ? NULL : g_config_err;
    return &g_config;
}

/* Index among the first n GPUs of view named by a CUDA_VISIBLE_DEVICES entry, or -1. */
static int cuda_entry(const fake_config *view, int n, const char *e, size_t len)
{
    char buf[64];
    int found = -1;

    if (len == 0 || len >= sizeof(buf))
        return -1;
    memcpy(buf, e, len);
    buf[len] = '\0';
    if (strspn(buf, "0123456789") == len) {
        long v = strtol(buf, NULL, 10);
        return v < n ? (int)v : -1;
    }
    /* A UUID, or an unambiguous prefix of one, as CUDA accepts. */
    if (strncmp(buf, "GPU-", 4) != 0)
        return -1;
    for (int i = 0; i < n; i++) {
        if (strncasecmp(view->gpus[i].uuid, buf, len) == 0) {
            if (found >= 0)
                return -1;
            found = i;
        }
    }
    return found;
}

void fake_config_restrict(const fake_config *node, const char *dev_dir, const char *cuda_visible,
                          fake_config *out)
{
    char path[512];
    fake_config present;
    int used[FAKE_MAX_GPUS] = {0};

    present = *node;
    present.gpu_count = 0;
    snprintf(path, sizeof(path), "%s/nvidiactl", dev_dir);
    int nodes = access(path, F_OK) == 0;
    for (int i = 0; i < node->gpu_count; i++) {
        snprintf(path, sizeof(path), "%s/nvidia%d", dev_dir, node->gpus[i].phys);
        if (!nodes || access(path, F_OK) == 0)
            present.gpus[present.gpu_count++] = node->gpus[i];
    }
    *out = present;
    if (cuda_visible == NULL)
        return;
    /* Entries up to the first invalid (or repeated) one count, as in CUDA. */
    out->gpu_count = 0;
    for (const char *e = cuda_visible; *e != '\0';) {
        size_t len = strcspn(e, ",");
        while (len > 0 && isspace((unsigned char)*e)) {
            e++;
            len--;
        }
        size_t tlen = len;
        while (tlen > 0 && isspace((unsigned char)e[tlen - 1]))
            tlen--;
        int i = cuda_entry(&present, present.gpu_count, e, tlen);
        if (i < 0 || used[i])
            break;
        used[i] = 1;
        out->gpus[out->gpu_count++] = present.gpus[i];
        e += len;
        if (*e == ',')
            e++;
    }
}

void fake_config_restrict_cuda(const fake_config *node, const char *dev_dir,
                               const char *cuda_visible, fake_config *out)
{
    fake_config present, plain;
    int used[FAKE_MAX_GPUS] = {0};
    int mig_used[FAKE_MAX_GPUS] = {0};

    fake_config_restrict(node, dev_dir, NULL, &present);
    /* A GPU in MIG mode runs CUDA work only inside an instance. */
    plain = present;
    plain.gpu_count = 0;
    for (int i = 0; i < present.gpu_count; i++)
        if (present.gpus[i].mig_current != NVML_DEVICE_MIG_ENABLE)
            plain.gpus[plain.gpu_count++] = present.gpus[i];
    *out = plain;
    if (cuda_visible == NULL)
        return;
    out->gpu_count = 0;
    for (const char *e = cuda_visible; *e != '\0';) {
        size_t len = strcspn(e, ",");
        while (len > 0 && isspace((unsigned char)*e)) {
            e++;
            len--;
        }
        size_t tlen = len;
        while (tlen > 0 && isspace((unsigned char)e[tlen - 1]))
            tlen--;
        if (tlen > 4 && strncmp(e, "MIG-", 4) == 0) {
            fake_gpu g;
            int phys = fake_mig_find(node, &present, e, tlen, &g);
            /* One instance per GPU, as CUDA enumerates them. */
            if (phys < 0 || mig_used[phys])
                break;
            mig_used[phys] = 1;
            out->gpus[out->gpu_count++] = g;
        } else {
            int i = cuda_entry(&plain, plain.gpu_count, e, tlen);
            if (i < 0 || used[i])
                break;
            used[i] = 1;
            out->gpus[out->gpu_count++] = plain.gpus[i];
        }
        e += len;
        if (*e == ',')
            e++;
    }
}

static fake_config g_views[2];
static const char *g_view_err;
static pthread_once_t g_views_once = PTHREAD_ONCE_INIT;

static void views_once(void)
{
    const fake_config *node = fake_config_get(&g_view_err);

    /* Tests name a directory of their own, so the host's /dev cannot change what they see. */
    const char *dev = getenv("VGPU_FAKE_DEV_DIR");
    if (dev == NULL || dev[0] == '\0')
        dev = "/dev";

    fake_config_restrict(node, dev, NULL, &g_views[FAKE_VIEW_NVML]);
    fake_config_restrict_cuda(node, dev, getenv("CUDA_VISIBLE_DEVICES"), &g_views[FAKE_VIEW_CUDA]);
}

const fake_config *fake_config_view(int view, const char **err)
{
    pthread_once(&g_views_once, views_once);
    if (err != NULL)
        *err = g_view_err;
    return &g_views[view == FAKE_VIEW_CUDA ? FAKE_VIEW_CUDA : FAKE_VIEW_NVML];
}
