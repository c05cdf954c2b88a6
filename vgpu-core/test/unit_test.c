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
 * unit_test.c - tests of the pieces of libvgpu.so that need no driver: the
 * size parser, the claim config reader, the host pid map reader, the
 * tracking map and the shared
 * region (init protocol, CAS reservation under a multi-process race, slot
 * reclaim after SIGKILL, rejection of corrupt files).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "config.h"
#include "mps.h"
#include "hostpids.h"
#include "burstfile.h"
#include "parse.h"
#include "procinfo.h"
#include "ptrmap.h"
#include "limiter_math.h"
#include "region.h"
#include "vgpu_reserve.h"

static void test_parse_size(void)
{
    static const struct {
        const char *in;
        int rc;
        uint64_t want;
    } cases[] = {
        {"0", 0, 0},
        {"4096", 0, 4096},
        {"1Gi", 0, 1ull << 30},
        {"1GiB", 0, 1ull << 30},
        {"1G", 0, 1ull << 30},
        {"1g", 0, 1ull << 30},
        {"4096m", 0, 4096ull << 20},
        {"3Mi", 0, 3ull << 20},
        {"5KiB", 0, 5ull << 10},
        {"5k", 0, 5ull << 10},
        {"2T", 0, 2ull << 40},
        {"2g ", 0, 2ull << 30},
        {"  7\t", 0, 7},
        {"18446744073709551615", 0, UINT64_MAX},
        {"010g", -EINVAL, 0},
        {"0x10g", -EINVAL, 0},
        {"abc", -EINVAL, 0},
        {"-1", -EINVAL, 0},
        {"+1", -EINVAL, 0},
        {"1.5g", -EINVAL, 0},
        {"1 g", -EINVAL, 0},
        {"1gg", -EINVAL, 0},
        {"1x", -EINVAL, 0},
        {"", -EINVAL, 0},
        {"   ", -EINVAL, 0},
        {"18446744073709551616", -ERANGE, 0},
        {"16777216T", -ERANGE, 0},
        {"17179869184G", -ERANGE, 0},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        uint64_t v = 12345;
        int rc = vgpu_parse_size(cases[i].in, &v);

        if (rc != cases[i].rc || (rc == 0 && v != cases[i].want)) {
            fprintf(stderr, "parse_size(\"%s\") = %d, %" PRIu64 "; want %d, %" PRIu64 "\n",
                    cases[i].in, rc, v, cases[i].rc, cases[i].want);
            check_failures++;
        }
        if (rc != 0)
            CHECK_EQ_U64(v, 12345); /* untouched on error */
    }
    CHECK(vgpu_parse_size(NULL, &(uint64_t){0}) == -EINVAL);
}

static void test_parse_uint(void)
{
    uint64_t v;

    CHECK(vgpu_parse_uint("100", 100, &v) == 0 && v == 100);
    CHECK(vgpu_parse_uint("101", 100, &v) == -ERANGE);
    CHECK(vgpu_parse_uint("1k", 100000, &v) == -EINVAL);
    CHECK(vgpu_parse_uint("007", 100, &v) == -EINVAL);
}

#define UUID0 "GPU-11111111-2222-3333-4444-555555555555"
#define UUID1 "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"

static const char good_config[] =
    "version=1\n"
    "claim=8f0c-uid\n"
    "compute_policy=workConserving\n"
    "priority=high\n"
    "log_level=debug\n"
    "enforcement=enabled\n"
    "future_key=whatever\n"
    "# a comment\n"
    "\n"
    "device.count=2\n"
    "device.0.uuid=" UUID0 "\n"
    "device.0.memory_limit_bytes=4294967296\n"
    "device.0.sm_limit_percent=30\n"
    "device.1.uuid=" UUID1 "\r\n"
    "device.1.memory_limit_bytes=0\n"
    "device.1.sm_limit_percent=0\n";

static unsigned variant_line; /* line of the last parse_variant's error */

/* Parses good_config with one line replaced (or appended when from is NULL). */
static int parse_variant(const char *from, const char *to, struct vgpu_claim_config *cfg,
                         char err[VGPU_ERRMSG_MAX])
{
    char text[2048];
    const char *at = from != NULL ? strstr(good_config, from) : NULL;

    if (from == NULL) {
        snprintf(text, sizeof(text), "%s%s", good_config, to);
    } else {
        size_t pre = (size_t)(at - good_config);
        snprintf(text, sizeof(text), "%.*s%s%s", (int)pre, good_config, to, at + strlen(from));
    }
    return vgpu_config_parse(text, strlen(text), cfg, err, &variant_line);
}

static void test_config(void)
{
    struct vgpu_claim_config cfg;
    char err[VGPU_ERRMSG_MAX];

    CHECK(vgpu_config_parse(good_config, strlen(good_config), &cfg, err, NULL) == 0);
    CHECK(strcmp(cfg.claim, "8f0c-uid") == 0);
    CHECK_EQ_U64(cfg.compute_policy, VGPU_POLICY_WORK_CONSERVING);
    CHECK(cfg.priority == VGPU_PRIORITY_HIGH);
    CHECK(cfg.has_log_level && cfg.log_level == VGPU_LOG_DEBUG);
    CHECK(cfg.enforcement);
    CHECK_EQ_U64(cfg.device_count, 2);
    CHECK(strcmp(cfg.devices[0].uuid, UUID0) == 0);
    CHECK_EQ_U64(cfg.devices[0].memory_limit, 4294967296ull);
    CHECK_EQ_U64(cfg.devices[0].sm_limit, 30);
    CHECK(strcmp(cfg.devices[1].uuid, UUID1) == 0);
    CHECK_EQ_U64(cfg.devices[1].memory_limit, 0);

    CHECK(parse_variant("enforcement=enabled", "enforcement=disabled", &cfg, err) == 0);
    CHECK(!cfg.enforcement);

    CHECK(parse_variant("version=1", "version=2", &cfg, err) != 0);
    CHECK_STR_CONTAINS(err, "version");
    CHECK(parse_variant("version=1\n", "", &cfg, err) != 0);
    CHECK_STR_CONTAINS(err, "version: missing");
    CHECK(parse_variant(NULL, "priority=low\n", &cfg, err) != 0);
    CHECK_STR_CONTAINS(err, "duplicate key priority");
    CHECK(parse_variant("device.0.sm_limit_percent=30\n", "", &cfg, err) != 0);
    CHECK_STR_CONTAINS(err, "device.0: missing sm_limit_percent");
    CHECK(parse_variant("device.0.memory_limit_bytes=4294967296",
                        "device.0.memory_limit_bytes=4Gi", &cfg, err) != 0);
    CHECK_STR_CONTAINS(err, "device.0.memory_limit_bytes");
    CHECK(parse_variant("device.0.sm_limit_percent=30", "device.0.sm_limit_percent=101", &cfg,
                        err) != 0);
    CHECK_STR_CONTAINS(err, "sm_limit_percent");
    CHECK(parse_variant("device.1.uuid=" UUID1, "device.1.uuid=GPU-xyz", &cfg, err) != 0);
    CHECK_STR_CONTAINS(err, "device.1.uuid");
    CHECK(parse_variant("device.count=2", "device.count=1", &cfg, err) != 0);
    CHECK_STR_CONTAINS(err, "not below device.count");
    CHECK(parse_variant("compute_policy=workConserving", "compute_policy=fast", &cfg, err) != 0);
    CHECK_STR_CONTAINS(err, "compute_policy");
    CHECK(parse_variant("device.1.uuid=" UUID1, "device.1.uuid=" UUID0, &cfg, err) != 0);
    CHECK_STR_CONTAINS(err, "device.1.uuid: same GPU as device.0");
    CHECK(parse_variant(NULL, "garbage line\n", &cfg, err) != 0);
    CHECK_STR_CONTAINS(err, "without '='");
    CHECK(parse_variant("device.count=2", "device.count=17", &cfg, err) != 0);
    CHECK_STR_CONTAINS(err, "device.count");

    CHECK(vgpu_uuid_valid(UUID0));
    CHECK(vgpu_uuid_valid("GPU-AAAAAAAA-bbbb-cccc-dddd-eeeeeeeeeeee"));
    CHECK(!vgpu_uuid_valid(UUID0 "0"));
    CHECK(!vgpu_uuid_valid(UUID0 " "));
    /* A MIG instance, as NVML and the plugin name it. */
    CHECK(vgpu_uuid_valid("MIG-11111111-2222-3333-4444-555555555555"));
    CHECK(!vgpu_uuid_valid("MIG-GPU-11111111-2222-3333-4444-555555555555/1/0"));
    CHECK(!vgpu_uuid_valid("mig-11111111-2222-3333-4444-555555555555"));
    CHECK(!vgpu_uuid_valid("CPU-11111111-2222-3333-4444-555555555555"));
    /* CUDA formats an instance's bytes as GPU-: the same device. */
    CHECK(vgpu_uuid_same("MIG-11111111-2222-3333-4444-555555555555", "GPU-11111111-2222-3333-4444-555555555555"));
    CHECK(vgpu_uuid_same("MIG-AAAAAAAA-2222-3333-4444-555555555555", "GPU-aaaaaaaa-2222-3333-4444-555555555555"));
    CHECK(!vgpu_uuid_same("MIG-11111111-2222-3333-4444-555555555555", "GPU-11111111-2222-3333-4444-555555555556"));
    CHECK(vgpu_uuid_same("", ""));
    CHECK(!vgpu_uuid_same(UUID0, ""));
}

/* An MPS claim's mps.* keys (docs/mps.md): both per device or neither, each value checked. */
static void test_config_mps(void)
{
    struct vgpu_claim_config cfg;
    char err[VGPU_ERRMSG_MAX];

    CHECK(parse_variant(NULL, "mps.activeThreadPercent.0=30\nmps.pinnedMemoryLimit.0=1610612736\n",
                        &cfg, err) == 0);
    CHECK(cfg.devices[0].mps && !cfg.devices[1].mps);
    CHECK_EQ_U64(cfg.devices[0].mps_active_thread_percent, 30);
    CHECK_EQ_U64(cfg.devices[0].mps_pinned_memory_limit, 1610612736ull);
    CHECK(parse_variant(NULL, "", &cfg, err) == 0);
    CHECK(!cfg.devices[0].mps);
    CHECK(parse_variant(NULL, "mps.activeThreadPercent.0=0\nmps.pinnedMemoryLimit.0=0\n", &cfg,
                        err) != 0);
    CHECK_STR_CONTAINS(err, "mps.activeThreadPercent.0: 0 is not an integer in 1..100");
    CHECK_EQ_U64(variant_line, 17);
    CHECK(parse_variant(NULL, "mps.activeThreadPercent.0=101\nmps.pinnedMemoryLimit.0=0\n", &cfg,
                        err) != 0);
    CHECK_STR_CONTAINS(err, "mps.activeThreadPercent.0: 101");
    CHECK(parse_variant(NULL, "mps.activeThreadPercent.0=30\nmps.pinnedMemoryLimit.0=2Gi\n", &cfg,
                        err) != 0);
    CHECK_STR_CONTAINS(err, "mps.pinnedMemoryLimit.0: 2Gi is not a decimal byte count");
    CHECK_EQ_U64(variant_line, 18);
    CHECK(parse_variant(NULL, "mps.activeThreadPercent.0=30\n", &cfg, err) != 0);
    CHECK_STR_CONTAINS(err, "mps.pinnedMemoryLimit.0: missing");
    CHECK(parse_variant(NULL, "mps.pinnedMemoryLimit.1=0\n", &cfg, err) != 0);
    CHECK_STR_CONTAINS(err, "mps.activeThreadPercent.1: missing");
    CHECK(parse_variant(NULL, "mps.activeThreadPercent.0=30\nmps.activeThreadPercent.0=20\n"
                        "mps.pinnedMemoryLimit.0=0\n", &cfg, err) != 0);
    CHECK_STR_CONTAINS(err, "duplicate key mps.activeThreadPercent.0");
    CHECK(parse_variant(NULL, "mps.activeThreadPercent.2=30\nmps.pinnedMemoryLimit.2=0\n", &cfg,
                        err) != 0);
    CHECK_STR_CONTAINS(err, "mps.*.2: index not below device.count 2");
    CHECK(parse_variant(NULL, "mps.activeThreadPercent.x=30\n", &cfg, err) != 0);
    CHECK_STR_CONTAINS(err, "mps.activeThreadPercent.x: device index");
    /* Other mps.* keys are unknown keys: ignored. */
    CHECK(parse_variant(NULL, "mps.future.0=1\n", &cfg, err) == 0);

    /* mps.driverMemoryLimit.<k> (r615+): bytes of at least 1 MiB, only beside the pair. */
    CHECK(parse_variant(NULL, "mps.activeThreadPercent.0=30\nmps.pinnedMemoryLimit.0=1610612736\n"
                        "mps.driverMemoryLimit.0=1610612736\n", &cfg, err) == 0);
    CHECK(cfg.devices[0].mps);
    CHECK_EQ_U64(cfg.devices[0].mps_driver_memory_limit, 1610612736ull);
    CHECK_EQ_U64(cfg.devices[1].mps_driver_memory_limit, 0);
    static const char *const bad_driver[] = {"0", "1048575", "1Gi", "-1", "0x100000", "",
                                             "99999999999999999999", "1e9"};
    for (size_t i = 0; i < sizeof(bad_driver) / sizeof(bad_driver[0]); i++) {
        char text[256];

        snprintf(text, sizeof(text), "mps.activeThreadPercent.0=30\nmps.pinnedMemoryLimit.0=0\n"
                 "mps.driverMemoryLimit.0=%s\n", bad_driver[i]);
        CHECK(parse_variant(NULL, text, &cfg, err) != 0);
        CHECK_STR_CONTAINS(err, "mps.driverMemoryLimit.0: ");
        CHECK_STR_CONTAINS(err, "is not a decimal byte count of at least 1048576");
    }
    CHECK(parse_variant(NULL, "mps.driverMemoryLimit.0=1610612736\n", &cfg, err) != 0);
    CHECK_STR_CONTAINS(err, "mps.driverMemoryLimit.0: set without mps.activeThreadPercent.0 and "
                            "mps.pinnedMemoryLimit.0");
    CHECK(parse_variant(NULL, "mps.activeThreadPercent.1=30\nmps.pinnedMemoryLimit.1=0\n"
                        "mps.driverMemoryLimit.0=1610612736\n", &cfg, err) != 0);
    CHECK_STR_CONTAINS(err, "mps.driverMemoryLimit.0: set without");
    CHECK(parse_variant(NULL, "mps.activeThreadPercent.0=30\nmps.pinnedMemoryLimit.0=0\n"
                        "mps.driverMemoryLimit.0=1610612736\nmps.driverMemoryLimit.0=1048576\n",
                        &cfg, err) != 0);
    CHECK_STR_CONTAINS(err, "duplicate key mps.driverMemoryLimit.0");
    CHECK(parse_variant(NULL, "mps.activeThreadPercent.0=30\nmps.pinnedMemoryLimit.0=0\n"
                        "mps.driverMemoryLimit.2=1610612736\n", &cfg, err) != 0);
    CHECK_STR_CONTAINS(err, "index not below device.count 2");
}

/* The environment an MPS claim's client gets (mps.h): the config's share, or the container's lower one. */
static void test_mps_settings(void)
{
    struct vgpu_claim_config a, b;
    const struct vgpu_claim_config *cfgs[2] = {&a, &b};
    struct vgpu_mps_env env;
    char err[VGPU_ERRMSG_MAX];

    CHECK(parse_variant(NULL, "", &a, err) == 0);
    CHECK(!vgpu_mps_settings(cfgs, 1, "100", "0=1G", NULL, &env));
    CHECK(parse_variant(NULL, "mps.activeThreadPercent.0=30\nmps.pinnedMemoryLimit.0=1610612736\n",
                        &a, err) == 0);
    CHECK(vgpu_mps_settings(cfgs, 1, NULL, NULL, NULL, &env));
    CHECK(env.threads_set && strcmp(env.threads, "30") == 0);
    CHECK(env.pinned_set && strcmp(env.pinned, "0=1536M") == 0);
    CHECK(env.why[0] == '\0');
    /* The container's higher values are replaced, its lower ones kept. */
    CHECK(vgpu_mps_settings(cfgs, 1, "100", "0=2G", NULL, &env));
    CHECK(env.threads_set && strcmp(env.threads, "30") == 0);
    CHECK_STR_CONTAINS(env.why, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=100");
    CHECK(env.pinned_set && strcmp(env.pinned, "0=1536M") == 0);
    CHECK(vgpu_mps_settings(cfgs, 1, "10", "0=512M,1=1G", NULL, &env));
    CHECK(!env.threads_set && strcmp(env.threads, "10") == 0);
    CHECK(env.pinned_set && strcmp(env.pinned, "0=512M,1=1024M") == 0);
    CHECK(vgpu_mps_settings(cfgs, 1, "29", "0=1048576KB", NULL, &env));
    CHECK(!env.threads_set && strcmp(env.threads, "29") == 0);
    CHECK(strcmp(env.pinned, "0=1024M") == 0);
    /* Already what it should be: nothing to set. */
    CHECK(vgpu_mps_settings(cfgs, 1, "30", "0=1536M", NULL, &env));
    CHECK(!env.threads_set && !env.pinned_set && env.why[0] == '\0');
    /* Zero, unreadable or not a plain integer: replaced (the driver reads what was compared). */
    static const char *const bad_threads[] = {"0", "30x", "nan", "12.5", "0x10", "-5", "1e1", "", "101"};
    for (size_t i = 0; i < sizeof(bad_threads) / sizeof(bad_threads[0]); i++) {
        CHECK(vgpu_mps_settings(cfgs, 1, bad_threads[i], NULL, NULL, &env));
        CHECK(env.threads_set && strcmp(env.threads, "30") == 0);
        CHECK_STR_CONTAINS(env.why, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=");
    }
    static const char *const bad_pinned[] = {"0=1G,junk", "0=512", "1=99999999999999999999G",
                                             "x=1G", "0=-1G", "=1G", "0=1Q"};
    for (size_t i = 0; i < sizeof(bad_pinned) / sizeof(bad_pinned[0]); i++) {
        CHECK(vgpu_mps_settings(cfgs, 1, NULL, bad_pinned[i], NULL, &env));
        CHECK(env.pinned_set && strcmp(env.pinned, "0=1536M") == 0);
        CHECK_STR_CONTAINS(env.why, "(unreadable)");
    }
    /* A zero limit of the container's becomes the least the driver takes, 1 MiB. */
    CHECK(vgpu_mps_settings(cfgs, 1, NULL, "0=0M", NULL, &env));
    CHECK(strcmp(env.pinned, "0=1M") == 0);
    /* No pinned limit in the config: the container's own stays untouched. */
    CHECK(parse_variant(NULL, "mps.activeThreadPercent.1=50\nmps.pinnedMemoryLimit.1=0\n", &b,
                        err) == 0);
    CHECK(vgpu_mps_settings(&cfgs[1], 1, NULL, "0=1G", NULL, &env));
    CHECK(strcmp(env.threads, "50") == 0 && !env.pinned_set);
    /* Two claims: the smaller share, each index's own limit. */
    CHECK(vgpu_mps_settings(cfgs, 2, NULL, NULL, NULL, &env));
    CHECK(strcmp(env.threads, "30") == 0 && strcmp(env.pinned, "0=1536M") == 0);
    /* Below one MiB: at least 1. */
    CHECK(parse_variant(NULL, "mps.activeThreadPercent.0=5\nmps.pinnedMemoryLimit.0=1000\n", &a,
                        err) == 0);
    CHECK(vgpu_mps_settings(cfgs, 1, NULL, NULL, NULL, &env));
    CHECK(strcmp(env.threads, "5") == 0 && strcmp(env.pinned, "0=1M") == 0);
}

/*
 * NVIDIA_GPU_MEMORY_LIMITS (mps.h): set from mps.driverMemoryLimit in whole
 * MiB, the container's lower entry kept, a higher, zero or unreadable value
 * replaced; left alone without the line (a driver before r615).
 */
static void test_mps_driver_memory(void)
{
    struct vgpu_claim_config a, b;
    const struct vgpu_claim_config *cfgs[2] = {&a, &b};
    struct vgpu_mps_env env;
    char err[VGPU_ERRMSG_MAX];

    CHECK(parse_variant(NULL, "mps.activeThreadPercent.0=30\nmps.pinnedMemoryLimit.0=1610612736\n",
                        &a, err) == 0);
    CHECK(vgpu_mps_settings(cfgs, 1, NULL, NULL, "0=999999", &env));
    CHECK(!env.driver_mem_set && env.driver_mem[0] == '\0');
    CHECK(env.why[0] == '\0');

    CHECK(parse_variant(NULL, "mps.activeThreadPercent.0=30\nmps.pinnedMemoryLimit.0=1610612736\n"
                        "mps.driverMemoryLimit.0=1611661312\n", &a, err) == 0);
    CHECK(vgpu_mps_settings(cfgs, 1, NULL, NULL, NULL, &env));
    CHECK(env.driver_mem_set && strcmp(env.driver_mem, "0=1537") == 0);
    CHECK(vgpu_mps_settings(cfgs, 1, "30", "0=1536M", "0=1537", &env));
    CHECK(!env.driver_mem_set && env.why[0] == '\0');
    /* Higher: replaced; lower: kept; other indexes kept, the smallest of repeats. */
    CHECK(vgpu_mps_settings(cfgs, 1, NULL, NULL, "0=4096", &env));
    CHECK(env.driver_mem_set && strcmp(env.driver_mem, "0=1537") == 0);
    CHECK(vgpu_mps_settings(cfgs, 1, NULL, NULL, "0=512,3=100,0=1024", &env));
    CHECK(env.driver_mem_set && strcmp(env.driver_mem, "0=512,3=100") == 0);
    /* Zero, units, junk, out-of-range indexes: the whole value replaced, logged. */
    static const char *const bad[] = {"0=0", "0=512M", "0=1G", "junk", "0=", "=512", "0=512,x",
                                      "64=1", "0=-1", "0=99999999999999999999", "0=0x10", "", ","};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        CHECK(vgpu_mps_settings(cfgs, 1, NULL, NULL, bad[i], &env));
        CHECK(env.driver_mem_set && strcmp(env.driver_mem, "0=1537") == 0);
        if (bad[i][0] != '\0')
            CHECK_STR_CONTAINS(env.why, "NVIDIA_GPU_MEMORY_LIMITS=");
    }
    /* Two claims: each index its smallest limit. */
    CHECK(parse_variant(NULL, "mps.activeThreadPercent.0=50\nmps.pinnedMemoryLimit.0=0\n"
                        "mps.driverMemoryLimit.0=1048576\n", &b, err) == 0);
    CHECK(vgpu_mps_settings(cfgs, 2, NULL, NULL, NULL, &env));
    CHECK(strcmp(env.driver_mem, "0=1") == 0);
}

/*
 * The config rule (README "Config rule"): every line the library cannot
 * apply makes the config invalid, named by its line (0: the whole file).
 * good_config's lines: 1 version .. 10 device.count, 11-13 device 0,
 * 14-16 device 1.
 */
static void test_config_rule(void)
{
    struct vgpu_claim_config cfg;
    char err[VGPU_ERRMSG_MAX], text[2048];
    static char big[VGPU_CONFIG_MAX_BYTES + 2];
    unsigned line = 99;
    size_t n;

    /* Upper-case UUIDs are the same GPUs: stored as the driver's lower case. */
    CHECK(parse_variant("device.1.uuid=" UUID1, "device.1.uuid=GPU-AAAAAAAA-BBBB-CCCC-DDDD-EEEEEEEEEEEE",
                        &cfg, err) == 0);
    CHECK(strcmp(cfg.devices[1].uuid, UUID1) == 0);
    /* ... so a case-only duplicate is a duplicate. */
    CHECK(parse_variant("device.1.uuid=" UUID1, "device.1.uuid=GPU-11111111-2222-3333-4444-555555555555",
                        &cfg, err) != 0);
    CHECK(parse_variant("device.0.uuid=" UUID0, "device.0.uuid=" UUID1, &cfg, err) != 0);
    CHECK_STR_CONTAINS(err, "device.1.uuid: same GPU as device.0");
    CHECK_EQ_U64(variant_line, 14);
    /* A UUID with a trailing space, a non-ASCII one: not UUIDs. */
    CHECK(parse_variant("device.1.uuid=" UUID1, "device.1.uuid=" UUID1 " ", &cfg, err) != 0);
    CHECK_STR_CONTAINS(err, "device.1.uuid");
    CHECK_EQ_U64(variant_line, 14);
    CHECK(parse_variant("device.1.uuid=" UUID1, "device.1.uuid=GPU-\xc3\xa9" "aaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee",
                        &cfg, err) != 0);
    CHECK_STR_CONTAINS(err, "not printable ASCII");
    CHECK_EQ_U64(variant_line, 14);
    /* Any byte outside printable ASCII, even in a comment or an unknown key. */
    CHECK(parse_variant("# a comment", "# caf\xc3\xa9", &cfg, err) != 0);
    CHECK_STR_CONTAINS(err, "byte 0xc3 at column 6");
    CHECK_EQ_U64(variant_line, 8);
    CHECK(parse_variant("future_key=whatever", "future_key=what\tever", &cfg, err) != 0);
    CHECK_EQ_U64(variant_line, 7);
    /* Unknown keys stay ignored (keys that change enforcement need a new version). */
    CHECK(parse_variant("future_key=whatever", "device.0.future=1", &cfg, err) == 0);
    /* An index that is not the plugin's decimal: device.01 is not device 1. */
    CHECK(parse_variant("device.1.uuid=" UUID1, "device.01.uuid=" UUID1, &cfg, err) != 0);
    CHECK_STR_CONTAINS(err, "device.01.uuid: device index");
    CHECK_EQ_U64(variant_line, 14);
    CHECK(parse_variant("device.1.sm_limit_percent=0", "device.+1.sm_limit_percent=0", &cfg, err) != 0);
    CHECK_EQ_U64(variant_line, 16);
    /* Missing keys concern the whole file: line 0. */
    CHECK(parse_variant("device.0.sm_limit_percent=30\n", "", &cfg, err) != 0);
    CHECK_EQ_U64(variant_line, 0);
    CHECK(parse_variant("device.count=2", "device.count=1", &cfg, err) != 0);
    CHECK_STR_CONTAINS(err, "device.1: index not below device.count 1");
    CHECK_EQ_U64(variant_line, 14);

    /* An embedded NUL: the bytes after it are part of the file, never ignored. */
    n = (size_t)snprintf(text, sizeof(text), "%s", good_config);
    memcpy(text + n, "device.2.uuid=\0x\n", 17);
    CHECK(vgpu_config_parse(text, n + 17, &cfg, err, &line) != 0);
    CHECK_STR_CONTAINS(err, "embedded NUL byte at column 15");
    CHECK_EQ_U64(line, 17);
    text[0] = '\0';
    CHECK(vgpu_config_parse(text, n, &cfg, err, &line) != 0);
    CHECK_EQ_U64(line, 1);

    /* The size limit: a valid file padded with comments to exactly the limit, then one byte more. */
    n = (size_t)snprintf(big, sizeof(big), "%s", good_config);
    while (n < VGPU_CONFIG_MAX_BYTES) {
        size_t k = VGPU_CONFIG_MAX_BYTES - n < 64 ? VGPU_CONFIG_MAX_BYTES - n : 64;
        memset(big + n, '#', k - 1);
        big[n + k - 1] = '\n';
        n += k;
    }
    CHECK(vgpu_config_parse(big, VGPU_CONFIG_MAX_BYTES, &cfg, err, &line) == 0);
    big[VGPU_CONFIG_MAX_BYTES] = '#';
    CHECK(vgpu_config_parse(big, VGPU_CONFIG_MAX_BYTES + 1, &cfg, err, &line) != 0);
    CHECK_STR_CONTAINS(err, "file larger than 65536 bytes");
    CHECK_EQ_U64(line, 16 + (VGPU_CONFIG_MAX_BYTES - strlen(good_config) + 63) / 64 + 1);
}

static void test_ptrmap(void)
{
    struct vgpu_ptrmap m = {0};
    enum { N = 20000 };
    uint64_t *keys = malloc(N * sizeof(*keys));
    uint64_t x = 88172645463325252ull;

    for (int i = 0; i < N; i++) {
        struct vgpu_ptrmap_entry e;
        /* xorshift keys, aligned like device pointers to stress the hash */
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        keys[i] = (x | 1) << 9;
        e = (struct vgpu_ptrmap_entry){.key = keys[i], .size = (uint64_t)i, .device = i % 3};
        CHECK(vgpu_ptrmap_put(&m, &e) == 0);
    }
    CHECK_EQ_U64(m.count, N);
    for (int i = 0; i < N; i += 2) {
        struct vgpu_ptrmap_entry out;
        CHECK(vgpu_ptrmap_remove(&m, keys[i], &out) == 0);
        CHECK_EQ_U64(out.size, (uint64_t)i);
    }
    CHECK_EQ_U64(m.count, N / 2);
    for (int i = 0; i < N; i++) {
        struct vgpu_ptrmap_entry *e = vgpu_ptrmap_get(&m, keys[i]);
        if (i % 2 == 0) {
            CHECK(e == NULL);
        } else {
            CHECK(e != NULL && e->size == (uint64_t)i && e->device == i % 3);
        }
    }
    CHECK(vgpu_ptrmap_remove(&m, keys[0], NULL) == -1);
    CHECK(vgpu_ptrmap_get(&m, 0) == NULL);
    vgpu_ptrmap_clear(&m);
    CHECK(vgpu_ptrmap_get(&m, keys[1]) == NULL);
    vgpu_ptrmap_destroy(&m);
    free(keys);
}

static char tmpdir[] = "/tmp/vgpu-unit-XXXXXX";

static void region_path(char *out, size_t len, const char *name)
{
    snprintf(out, len, "%s/%s", tmpdir, name);
}

/* Creates name as the plugin does: zero-filled, exactly VGPU_REGION_SIZE bytes. */
static void create_region(const char *path)
{
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0666);

    CHECK(fd >= 0 && ftruncate(fd, VGPU_REGION_SIZE) == 0);
    close(fd);
}

static void test_region_init(void)
{
    struct vgpu_region_map s, s2;
    char path[256], err[VGPU_ERRMSG_MAX];
    struct vgpu_region_header *h;

    region_path(path, sizeof(path), "init");
    create_region(path);
    CHECK(vgpu_region_attach(&s, path, false, err) == 0);
    h = &s.r->header;
    CHECK(h->magic == VGPU_REGION_MAGIC);
    CHECK_EQ_U64(h->init_state, VGPU_REGION_READY);
    CHECK_EQ_U64(h->major, VGPU_REGION_MAJOR);
    CHECK_EQ_U64(h->region_size, VGPU_REGION_SIZE);
    CHECK_EQ_U64(h->generation, 1);
    CHECK(vgpu_region_check_header(h) == NULL);
    CHECK_EQ_U64(vgpu_region_find_device(&s, UUID0, 100, 30, VGPU_POLICY_STRICT), 0);
    CHECK_EQ_U64(vgpu_region_find_device(&s, UUID1, 0, 0, VGPU_POLICY_STRICT), 1);
    CHECK_EQ_U64(vgpu_region_find_device(&s, UUID0, 100, 30, VGPU_POLICY_STRICT), 0);
    CHECK_EQ_U64(h->device_count, 2);
    /* A second attach sees the same region without re-initialising it. */
    CHECK(vgpu_region_attach(&s2, path, false, err) == 0);
    CHECK_EQ_U64(s2.r->header.generation, 1);
    CHECK_EQ_U64(s2.r->devices[0].memory_limit, 100);
    vgpu_region_detach(&s2);

    /* A stale INITIALISING (initialiser died holding the lock) is recovered. */
    h->init_state = VGPU_REGION_INITIALISING;
    CHECK(vgpu_region_attach(&s2, path, false, err) == 0);
    CHECK_EQ_U64(s2.r->header.generation, 2);
    CHECK_EQ_U64(s2.r->header.device_count, 0);
    vgpu_region_detach(&s2);
    vgpu_region_detach(&s);

    /* Missing file without create, and standalone creation. */
    region_path(path, sizeof(path), "missing");
    CHECK(vgpu_region_attach(&s, path, false, err) != 0);
    CHECK_STR_CONTAINS(err, "cannot open");
    CHECK(vgpu_region_attach(&s, path, true, err) == 0);
    {
        struct stat st;
        CHECK(stat(path, &st) == 0 && st.st_size == VGPU_REGION_SIZE);
        CHECK((st.st_mode & 0777) == 0666);
    }
    vgpu_region_detach(&s);
}

/* Writes bytes at off of path. */
static void poke(const char *path, off_t off, const void *bytes, size_t n)
{
    int fd = open(path, O_RDWR);

    CHECK(fd >= 0 && pwrite(fd, bytes, n, off) == (ssize_t)n);
    close(fd);
}

static void test_region_corrupt(void)
{
    struct vgpu_region_map s;
    char path[256], err[VGPU_ERRMSG_MAX];
    uint16_t major = VGPU_REGION_MAJOR + 1;
    uint64_t junk = 0x1234;
    uint32_t bad_state = 7;
    int fd;

    region_path(path, sizeof(path), "corrupt");
    create_region(path);
    CHECK(vgpu_region_attach(&s, path, false, err) == 0);
    vgpu_region_detach(&s);
    poke(path, offsetof(struct vgpu_region_header, major), &major, sizeof(major));
    CHECK(vgpu_region_attach(&s, path, false, err) != 0);
    CHECK_STR_CONTAINS(err, "major");

    create_region(path);
    CHECK(vgpu_region_attach(&s, path, false, err) == 0);
    vgpu_region_detach(&s);
    poke(path, 0, &junk, sizeof(junk));
    CHECK(vgpu_region_attach(&s, path, false, err) != 0);
    CHECK_STR_CONTAINS(err, "bad magic");

    create_region(path);
    poke(path, offsetof(struct vgpu_region_header, init_state), &bad_state, sizeof(bad_state));
    CHECK(vgpu_region_attach(&s, path, false, err) != 0);
    CHECK_STR_CONTAINS(err, "init_state");

    fd = open(path, O_RDWR | O_TRUNC);
    CHECK(fd >= 0 && ftruncate(fd, 4096) == 0);
    close(fd);
    CHECK(vgpu_region_attach(&s, path, false, err) != 0);
    CHECK_STR_CONTAINS(err, "truncated");
}

/* 8 processes race for the last bytes: the sum of grants never exceeds the limit. */
static void test_region_race(void)
{
    enum { PROCS = 8, TRIES = 400, LIMIT = 1000 };
    struct vgpu_region_map s;
    char path[256], err[VGPU_ERRMSG_MAX];
    struct vgpu_procinfo self;
    int *granted, done[2], hold[2];
    pid_t pids[PROCS];
    int total = 0;

    region_path(path, sizeof(path), "race");
    create_region(path);
    CHECK(vgpu_region_attach(&s, path, false, err) == 0);
    CHECK_EQ_U64(vgpu_region_find_device(&s, UUID0, LIMIT, 0, 0), 0);
    CHECK(vgpu_region_reserve(&s, 0, 1, LIMIT) != 0); /* no slot: nothing can be charged */
    granted = mmap(NULL, PROCS * sizeof(int), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                   -1, 0);
    /* The children stay alive until all are counted: a dead one's bytes would be reclaimed. */
    CHECK(pipe(done) == 0 && pipe(hold) == 0);
    for (int p = 0; p < PROCS; p++) {
        pids[p] = fork();
        if (pids[p] == 0) {
            struct vgpu_region_map c;
            struct vgpu_procinfo me;
            char e[VGPU_ERRMSG_MAX], x;
            int n = 0;

            close(hold[1]);
            if (vgpu_region_attach(&c, path, false, e) != 0 || vgpu_procinfo_self(&me) != 0 ||
                vgpu_region_claim_slot(&c, &me) != 0)
                _exit(2);
            for (int i = 0; i < TRIES; i++)
                n += vgpu_region_reserve(&c, 0, 1, LIMIT) == 0;
            granted[p] = n;
            if (write(done[1], "d", 1) != 1 || read(hold[0], &x, 1) != 0)
                _exit(3);
            _exit(0);
        }
    }
    for (int p = 0; p < PROCS; p++) {
        char x;
        CHECK(read(done[0], &x, 1) == 1);
    }
    for (int p = 0; p < PROCS; p++)
        total += granted[p];
    CHECK_EQ_U64(total, LIMIT);
    CHECK_EQ_U64(vgpu_region_used(&s, 0), LIMIT);
    CHECK_EQ_U64(s.r->devices[0].peak_bytes, LIMIT);
    close(hold[1]);
    for (int p = 0; p < PROCS; p++) {
        int st;
        waitpid(pids[p], &st, 0);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    close(hold[0]);
    close(done[0]);
    close(done[1]);
    /* The exited children's charges come back; then ours are what is used. */
    CHECK(vgpu_procinfo_self(&self) == 0);
    CHECK(vgpu_region_claim_slot(&s, &self) == 0);
    CHECK_EQ_U64(vgpu_region_used(&s, 0), 0);
    CHECK(vgpu_region_reserve(&s, 0, LIMIT - 10, LIMIT) == 0);
    CHECK(vgpu_region_reserve(&s, 0, 11, LIMIT) != 0);
    vgpu_region_unreserve(&s, 0, 10);
    CHECK(vgpu_region_reserve(&s, 0, 20, LIMIT) == 0);
    CHECK_EQ_U64(vgpu_region_slot_charged(&s, 0), LIMIT);
    CHECK(vgpu_region_reserve(&s, 0, UINT64_MAX, 0) != 0); /* overflow refused even unlimited */
    vgpu_region_unreserve(&s, 0, 2 * LIMIT); /* never more than we charged */
    CHECK_EQ_U64(vgpu_region_used(&s, 0), 0);
    CHECK_EQ_U64(vgpu_region_slot_charged(&s, 0), 0);
    munmap(granted, PROCS * sizeof(int));
    vgpu_region_detach(&s);
}

/* A SIGKILLed process's slot and bytes come back at the next reclaim. */
static void test_region_reclaim(void)
{
    struct vgpu_region_map s;
    struct vgpu_procinfo self;
    char path[256], err[VGPU_ERRMSG_MAX];
    int st, pipefd[2];
    pid_t pid;
    char c;

    region_path(path, sizeof(path), "reclaim");
    create_region(path);
    CHECK(vgpu_procinfo_self(&self) == 0);
    CHECK(self.start_time > 0 && self.pidns != 0);
    CHECK(vgpu_region_attach(&s, path, false, err) == 0);
    CHECK_EQ_U64(vgpu_region_find_device(&s, UUID0, 0, 0, 0), 0);
    CHECK(vgpu_region_claim_slot(&s, &self) == 0);
    CHECK(pipe(pipefd) == 0);
    pid = fork();
    if (pid == 0) {
        struct vgpu_region_map cs;
        struct vgpu_procinfo me;
        char e[VGPU_ERRMSG_MAX];

        if (vgpu_region_attach(&cs, path, false, e) != 0 || vgpu_procinfo_self(&me) != 0 ||
            vgpu_region_claim_slot(&cs, &me) != 0 || vgpu_region_reserve(&cs, 0, 700, 0) != 0)
            _exit(2);
        vgpu_region_slot_add(&cs, 0, 700);
        vgpu_region_slot_set_overhead(&cs, 0, 50);
        /* A launch charged 50 ms and waiting for its turn in a 30 % bucket when the kill comes. */
        vgpu_bucket_init(&cs.r->devices[0], 0.3, 1);
        vgpu_bucket_take(&cs.r->devices[0], 50000000);
        cs.r->slots[cs.slot].devices[0].pending_charge_us = 50000;
        if (write(pipefd[1], "k", 1) != 1)
            _exit(3);
        pause();
        _exit(0);
    }
    CHECK(read(pipefd[0], &c, 1) == 1);
    CHECK_EQ_U64(vgpu_region_used(&s, 0), 750);
    /* Slots are claimed lowest first and the header bounds them for readers. */
    CHECK_EQ_U64(s.r->header.slots_in_use, 2);
    /* Alive: nothing reclaimed. */
    CHECK(!vgpu_region_slot_dead(&s, 1));
    CHECK_EQ_U64(vgpu_region_reclaim(&s, &self), 0);
    CHECK_EQ_U64(vgpu_region_used(&s, 0), 750);
    CHECK(s.r->devices[0].bucket_tokens == -20000000);
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    CHECK(WIFSIGNALED(st));
    CHECK(vgpu_region_slot_dead(&s, 1));
    CHECK(!vgpu_region_slot_dead(&s, 0));
    CHECK_EQ_U64(vgpu_region_reclaim(&s, &self), 1);
    CHECK_EQ_U64(vgpu_region_used(&s, 0), 0);
    CHECK(!vgpu_region_slot_dead(&s, 1));
    /* The launch it was charged for and never made is given back, up to a full bucket. */
    CHECK(s.r->devices[0].bucket_tokens == 30000000);
    /*
     * A slot left by a process of another pid namespace (another container of
     * the claim): its pid means nothing here, but nobody holds its lock.
     */
    {
        struct vgpu_region_slot *sl = &s.r->slots[VGPU_REGION_MAX_SLOTS - 1];

        s.r->devices[0].used_bytes += 300;
        sl->pid = 1;
        sl->pidns = self.pidns + 1;
        sl->start_time = 1;
        sl->devices[0].used_bytes = 300;
        sl->devices[0].charged_bytes = 300;
        /* Hostile: the largest waiting charge a container can write, on a bucket deep in debt. */
        sl->devices[0].pending_charge_us = UINT32_MAX;
        s.r->devices[0].bucket_tokens = -5000000000LL;
        sl->state = VGPU_SLOT_ACTIVE;
        CHECK_EQ_U64(vgpu_region_reclaim(&s, &self), 1);
        CHECK_EQ_U64(vgpu_region_used(&s, 0), 0);
        CHECK_EQ_U64(sl->state, VGPU_SLOT_FREE);
        /* It buys one full bucket (the burst any process may take), never more. */
        CHECK(s.r->devices[0].bucket_tokens == 30000000);
    }
    /* Our own slot survives reclaim; release returns its bytes. */
    CHECK(vgpu_region_reserve(&s, 0, 5, 0) == 0);
    vgpu_region_slot_add(&s, 0, 5);
    CHECK_EQ_U64(vgpu_region_slot_used(&s, 0), 5);
    vgpu_region_release_slot(&s);
    CHECK_EQ_U64(vgpu_region_used(&s, 0), 0);
    CHECK(s.slot == -1);
    close(pipefd[0]);
    close(pipefd[1]);
    vgpu_region_detach(&s);
}

/* VA map: random mappings on a grid and random range takes, against a brute-force model. */
static void test_vamap(void)
{
    enum { SLOTS = 512, UNIT = 1 << 21 };
    struct vgpu_vamap m = {0};
    uint64_t model[SLOTS] = {0}; /* size mapped at slot i (base i * 8 units), 0 = none */
    unsigned seed = 7;

    for (int step = 0; step < 20000; step++) {
        int i = rand_r(&seed) % SLOTS;

        if (rand_r(&seed) % 2 == 0) {
            struct vgpu_vamap_entry e = {.base = (uint64_t)i * 8 * UNIT,
                                         .size = (uint64_t)(1 + rand_r(&seed) % 8) * UNIT,
                                         .handle = (uint64_t)step + 1};
            if (model[i] != 0)
                continue;
            CHECK(vgpu_vamap_put(&m, &e) == 0);
            model[i] = e.size;
        } else {
            /* From inside slot i (or its start) over a few slots' worth, possibly cutting some. */
            uint64_t base = (uint64_t)i * 8 * UNIT + (uint64_t)(rand_r(&seed) % 3) * UNIT;
            uint64_t size = (uint64_t)(1 + rand_r(&seed) % 40) * UNIT;
            struct vgpu_vamap_entry *out = NULL;
            long n = vgpu_vamap_take(&m, base, size, &out), want = 0;

            for (int j = 0; j < SLOTS; j++) {
                uint64_t b = (uint64_t)j * 8 * UNIT;
                if (model[j] == 0 || b < base || b + model[j] > base + size)
                    continue;
                bool found = false;
                for (long k = 0; k < n; k++)
                    found |= out[k].base == b && out[k].size == model[j];
                CHECK(found);
                model[j] = 0;
                want++;
            }
            CHECK_EQ_U64((uint64_t)n, (uint64_t)want);
            free(out);
        }
        if (step % 1000 == 0) {
            size_t count = 0;
            for (int j = 0; j < SLOTS; j++)
                count += model[j] != 0;
            CHECK_EQ_U64(m.count, count);
            for (size_t k = 1; k < m.count; k++)
                CHECK(m.v[k - 1].base + m.v[k - 1].size <= m.v[k].base);
        }
    }
    /* Same base replaces; a take of nothing returns 0 and no buffer. */
    {
        struct vgpu_vamap_entry e = {.base = 1ull << 40, .size = UNIT, .handle = 1}, *out = NULL;
        size_t before = m.count;

        CHECK(vgpu_vamap_put(&m, &e) == 0);
        e.handle = 2;
        CHECK(vgpu_vamap_put(&m, &e) == 0);
        CHECK_EQ_U64(m.count, before + 1);
        CHECK(vgpu_vamap_take(&m, (1ull << 40) + UNIT, UNIT, &out) == 0 && out == NULL);
        CHECK(vgpu_vamap_take(&m, 1ull << 40, UINT64_MAX, &out) == 1 && out != NULL &&
              out[0].handle == 2);
        free(out);
    }
    vgpu_vamap_clear(&m);
    CHECK_EQ_U64(m.count, 0);
    free(m.v);
}

static void test_procinfo(void)
{
    struct vgpu_procinfo self;
    uint64_t t;

    CHECK(vgpu_procinfo_self(&self) == 0);
    CHECK(vgpu_proc_owner_alive(&self, self.pid, self.pidns, self.start_time));
    CHECK(!vgpu_proc_owner_alive(&self, self.pid, self.pidns, self.start_time + 1));
    /* An owner in another pid namespace cannot be judged from here. */
    CHECK(vgpu_proc_owner_alive(&self, 999999, self.pidns + 1, 1));
    CHECK(vgpu_proc_start_time(999999999, &t) == -ENOENT);
    /* Field 22 counted independently: the 20th token after the last ')'. */
    {
        char buf[1024], *tok, *save = NULL;
        FILE *f = fopen("/proc/self/stat", "r");
        size_t n = f != NULL ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
        int i = 0;

        if (f != NULL)
            fclose(f);
        buf[n] = '\0';
        for (tok = strtok_r(strrchr(buf, ')') + 1, " ", &save); tok != NULL && ++i < 20;
             tok = strtok_r(NULL, " ", &save)) {
        }
        CHECK(tok != NULL && strtoull(tok, NULL, 10) == self.start_time);
    }
}

/* The host pid map: strict format, every bad line rejects the whole file. */
static void test_hostpids_parse(void)
{
    struct vgpu_hostpid_entry e[4];
    char err[VGPU_ERRMSG_MAX];
    static const char *const bad[] = {
        "",                                   /* no header */
        "version=2\n",                        /* other version */
        "version=1\n1 2 3\n",                 /* missing field */
        "version=1\n1 2 3 4 5\n",             /* extra field */
        "version=1\n1 2 3 4",                 /* no final newline */
        "version=1\n1  2 3 4\n",              /* double space */
        "version=1\n 1 2 3 4\n",              /* leading space */
        "version=1\n1 2 3 4\r\n",            /* CR */
        "version=1\n01 2 3 4\n",              /* leading zero */
        "version=1\n-1 2 3 4\n",              /* sign */
        "version=1\n0 2 3 4\n",               /* namespace 0 */
        "version=1\n1 0 3 4\n",               /* pid 0 */
        "version=1\n1 2 3 0\n",               /* host pid 0 */
        "version=1\n1 4194305 3 4\n",         /* pid beyond PID_MAX_LIMIT */
        "version=1\n1 2 18446744073709551616 4\n", /* start time overflows */
        "version=1\n1 2 3 4\n\n",             /* empty line */
        "version=1\n1 2 3 4\n5 6 7 8\n9 10 11 12\n13 14 15 16\n17 18 19 20\n", /* > max */
    };
    const char *good = "version=1\n4026532000 1 123456 4242\n4026532001 7 0 4194304\n";

    CHECK(vgpu_hostpids_parse(good, strlen(good), e, 4, err) == 2);
    CHECK_EQ_U64(e[0].pidns, 4026532000ull);
    CHECK_EQ_U64(e[0].pid, 1);
    CHECK_EQ_U64(e[0].start_time, 123456);
    CHECK_EQ_U64(e[0].host_pid, 4242);
    CHECK_EQ_U64(e[1].start_time, 0);
    CHECK_EQ_U64(e[1].host_pid, 4194304);
    CHECK(vgpu_hostpids_parse("version=1\n", 10, e, 4, err) == 0);
    /* Only len bytes count: text after them is never read. */
    CHECK(vgpu_hostpids_parse(good, 10, e, 4, err) == 0);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = '\0';
        if (vgpu_hostpids_parse(bad[i], strlen(bad[i]), e, 4, err) != -1 || err[0] == '\0') {
            fprintf(stderr, "hostpids: accepted or no reason for bad input %zu\n", i);
            check_failures++;
        }
    }
    CHECK(strstr(err, "line 6") != NULL); /* the fifth process line exceeds max */
}

/* The burst grants: the text the plugin writes (pkg/contract/burstfile) parses; every deviation rejects the whole file. */
static void test_burst_parse(void)
{
    struct vgpu_burst_grant g[2];
    char err[VGPU_ERRMSG_MAX];
    char huge[VGPU_BURST_MAX_BYTES + 64];
#define U0 "GPU-11111111-2222-3333-4444-555555555555"
#define U1 "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
    static const char *const bad[] = {
        "",                                          /* no header */
        "version=2\n",                               /* other version */
        "version=1\r\n",                             /* CR in the header */
        "version=1\ngpu " U0 " 1",                   /* no final newline */
        "version=1\n\n",                             /* empty line */
        "version=1\ngpu " U0 " 1\r\n",               /* CR */
        "version=1\ngpu\t" U0 " 1\n",                /* tab */
        "version=1\ngpu  " U0 " 1\n",                /* double space */
        "version=1\ngpu " U0 "  1\n",                /* double space before the grant */
        "version=1\ngpu " U0 " 1 \n",                /* trailing space */
        "version=1\nGPU " U0 " 1\n",                 /* keyword */
        "version=1\ngpu GPU-1234 1\n",               /* short UUID */
        "version=1\ngpu CPU-11111111-2222-3333-4444-555555555555 1\n", /* not a GPU or MIG UUID */
        "version=1\ngpu MIG-GPU-11111111-2222-3333-4444-555555555555/1/0 1\n", /* pre-R470 MIG form */
        "version=1\ngpu GPU-11111111-2222-3333-4444-55555555555g 1\n", /* not hex */
        "version=1\ngpu " U0 " -1\n",                /* sign */
        "version=1\ngpu " U0 " +1\n",                /* sign */
        "version=1\ngpu " U0 " 01\n",                /* leading zero */
        "version=1\ngpu " U0 " 0x10\n",              /* hex */
        "version=1\ngpu " U0 " 256Mi\n",             /* unit */
        "version=1\ngpu " U0 " \n",                  /* no number */
        "version=1\ngpu " U0 " 1125899906842625\n",  /* 2^50 + 1 */
        "version=1\ngpu " U0 " 18446744073709551616\n", /* uint64 overflow */
        "version=1\ngpu " U0 " 99999999999999999999999999999999\n", /* huge */
        "version=1\ngpu " U0 " 1\ngpu " U0 " 2\n",   /* GPU twice */
        "version=1\ngpu " U1 " 1\ngpu GPU-AAAAAAAA-BBBB-CCCC-DDDD-EEEEEEEEEEEE 2\n", /* twice, other case */
        "version=1\ngpu " U0 " 1\ngpu " U1 " 2\ngpu GPU-00000000-0000-0000-0000-000000000000 0\n", /* > max */
    };
    /* What pkg/contract/burstfile Render writes (TestRenderAndParse). */
    const char *good = "version=1\ngpu " U0 " 805306368\ngpu " U1 " 0\n";

    CHECK(vgpu_burstfile_parse(good, strlen(good), g, 2, err) == 2);
    CHECK(strcmp(g[0].uuid, U0) == 0);
    CHECK_EQ_U64(g[0].bytes, 805306368);
    CHECK_EQ_U64(g[1].bytes, 0);
    CHECK_EQ_U64(vgpu_burstfile_lookup(g, 2, U0), 805306368);
    CHECK_EQ_U64(vgpu_burstfile_lookup(g, 2, "GPU-11111111-2222-3333-4444-555555555555"),
                 805306368);
    CHECK_EQ_U64(vgpu_burstfile_lookup(g, 2, "GPU-AAAAAAAA-BBBB-CCCC-DDDD-EEEEEEEEEEEE"), 0);
    CHECK_EQ_U64(vgpu_burstfile_lookup(g, 2, "GPU-00000000-0000-0000-0000-000000000000"), 0);
    CHECK(vgpu_burstfile_parse("version=1\ngpu " U0 " 1125899906842624\n", 55 + 17, g, 2, err) ==
          1);
    CHECK_EQ_U64(g[0].bytes, VGPU_BURST_MAX_GRANT);
    CHECK(vgpu_burstfile_parse("version=1\n", 10, g, 2, err) == 0);
    /* Only len bytes count: text after them is never read. */
    CHECK(vgpu_burstfile_parse(good, 10, g, 2, err) == 0);
    CHECK(vgpu_burstfile_parse(good, strlen(good) - 1, g, 2, err) == -1);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = '\0';
        if (vgpu_burstfile_parse(bad[i], strlen(bad[i]), g, 2, err) != -1 || err[0] == '\0') {
            fprintf(stderr, "burst: accepted or no reason for bad input %zu\n", i);
            check_failures++;
        }
    }
    CHECK(strstr(err, "line 4") != NULL); /* the third GPU exceeds max */
    memset(huge, ' ', sizeof(huge));
    memcpy(huge, "version=1\n", 10);
    CHECK(vgpu_burstfile_parse(huge, sizeof(huge), g, 2, err) == -1);
    CHECK(strstr(err, "more than 4096") != NULL);
    /* An embedded NUL is not the end of the text. */
    CHECK(vgpu_burstfile_parse("version=1\ngpu " U0 " 1\0\n", 55 + 3, g, 2, err) == -1);
    CHECK_EQ_U64(vgpu_burstfile_limit(4ull << 30, 8ull << 30), 12ull << 30);
    CHECK_EQ_U64(vgpu_burstfile_limit(UINT64_MAX - 1, 2), UINT64_MAX);
#undef U0
#undef U1
}

/* The map is found, re-read only when replaced, and at most once per recheck period. */
static void test_hostpids_lookup(void)
{
    struct vgpu_hostpids h;
    char dir[300], path[400], tmp[420];
    FILE *f;

    snprintf(dir, sizeof(dir), "%s/hp", tmpdir);
    snprintf(path, sizeof(path), "%s/host", dir);
    CHECK(mkdir(dir, 0755) == 0 && mkdir(path, 0755) == 0);
    vgpu_hostpids_init(&h, dir);
    CHECK_EQ_U64(vgpu_hostpids_lookup(&h, 5, 1, 99), 0); /* no file */
    snprintf(path, sizeof(path), "%s/host/pids", dir);
    snprintf(tmp, sizeof(tmp), "%s.new", path);
    f = fopen(tmp, "w");
    CHECK(f != NULL);
    if (f != NULL) {
        fputs("version=1\n5 1 99 777\n", f);
        fclose(f);
    }
    CHECK(rename(tmp, path) == 0);
    /* Looked at less than a second ago: not read yet. */
    CHECK_EQ_U64(vgpu_hostpids_lookup(&h, 5, 1, 99), 0);
    h.next_check_ns = 0;
    CHECK_EQ_U64(vgpu_hostpids_lookup(&h, 5, 1, 99), 777);
    CHECK_EQ_U64(vgpu_hostpids_lookup(&h, 5, 1, 100), 0); /* another start time: pid reused */
    CHECK_EQ_U64(vgpu_hostpids_lookup(&h, 6, 1, 99), 0);  /* another namespace */
    /* A malformed replacement empties the map rather than keeping stale entries. */
    f = fopen(tmp, "w");
    if (f != NULL) {
        fputs("version=1\n5 1 99 seven\n", f);
        fclose(f);
    }
    CHECK(rename(tmp, path) == 0);
    h.next_check_ns = 0;
    CHECK_EQ_U64(vgpu_hostpids_lookup(&h, 5, 1, 99), 0);
    free(h.table);
}

/*
 * A process killed while holding a device's charge lock, at each point of a
 * counter change: the next locker takes the lock over and the change is
 * undone exactly; reclaiming the dead slot then returns what it had before.
 */
static void test_charge_undo(void)
{
    struct vgpu_region_map s;
    struct vgpu_procinfo self;
    char path[256], err[VGPU_ERRMSG_MAX];

    region_path(path, sizeof(path), "undo");
    create_region(path);
    CHECK(vgpu_procinfo_self(&self) == 0);
    CHECK(vgpu_region_attach(&s, path, false, err) == 0);
    CHECK_EQ_U64(vgpu_region_find_device(&s, UUID0, 1000, 0, 0), 0);
    CHECK(vgpu_region_claim_slot(&s, &self) == 0);
    CHECK(vgpu_region_reserve(&s, 0, 100, 1000) == 0);
    /* 0: lock taken; 1: undo record set; 2: counter moved; 3: both moved, record not cleared. */
    for (int point = 0; point < 4; point++) {
        int st, pipefd[2];
        pid_t pid;
        char c;

        CHECK(pipe(pipefd) == 0);
        pid = fork();
        if (pid == 0) {
            struct vgpu_region_map cs;
            struct vgpu_procinfo me;
            struct vgpu_region_device *d;
            char e[VGPU_ERRMSG_MAX];

            if (vgpu_region_attach(&cs, path, false, e) != 0 || vgpu_procinfo_self(&me) != 0 ||
                vgpu_region_claim_slot(&cs, &me) != 0 || vgpu_region_reserve(&cs, 0, 300, 1000) != 0)
                _exit(2);
            /* By hand, as vgpu_region_reserve would for 200 more bytes, stopping at point. */
            d = &cs.r->devices[0];
            d->charge_lock = (uint32_t)cs.slot + 1;
            if (point >= 1) {
                d->undo_used_bytes = d->used_bytes;
                d->undo_charged_bytes = cs.r->slots[cs.slot].devices[0].charged_bytes;
                d->undo_slot = (uint32_t)cs.slot + 1;
            }
            if (point >= 2)
                d->used_bytes += 200;
            if (point >= 3)
                cs.r->slots[cs.slot].devices[0].charged_bytes += 200;
            if (write(pipefd[1], "k", 1) != 1)
                _exit(3);
            pause();
            _exit(0);
        }
        CHECK(read(pipefd[0], &c, 1) == 1);
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
        CHECK(WIFSIGNALED(st));
        /* Takes the dead holder's lock over (spins first), undoes, charges ours. */
        CHECK(vgpu_region_reserve(&s, 0, 50, 1000) == 0);
        CHECK_EQ_U64(s.r->devices[0].charge_lock, 0);
        CHECK_EQ_U64(s.r->devices[0].undo_slot, 0);
        CHECK_EQ_U64(vgpu_region_used(&s, 0), 100 + 300 + 50);
        CHECK_EQ_U64(vgpu_region_reclaim(&s, &self), 1);
        CHECK_EQ_U64(vgpu_region_used(&s, 0), 150);
        CHECK_EQ_U64(vgpu_region_slot_charged(&s, 0), 150);
        vgpu_region_unreserve(&s, 0, 50);
        close(pipefd[0]);
        close(pipefd[1]);
    }
    /* Killed holding the lock with no other locker around: reclaim alone undoes it. */
    {
        int st;
        pid_t pid = fork();

        if (pid == 0) {
            struct vgpu_region_map cs;
            struct vgpu_procinfo me;
            char e[VGPU_ERRMSG_MAX];

            if (vgpu_region_attach(&cs, path, false, e) != 0 || vgpu_procinfo_self(&me) != 0 ||
                vgpu_region_claim_slot(&cs, &me) != 0 || vgpu_region_reserve(&cs, 0, 300, 1000) != 0)
                _exit(2);
            cs.r->devices[0].charge_lock = (uint32_t)cs.slot + 1;
            cs.r->devices[0].undo_used_bytes = cs.r->devices[0].used_bytes;
            cs.r->devices[0].undo_charged_bytes = 300;
            cs.r->devices[0].undo_slot = (uint32_t)cs.slot + 1;
            cs.r->devices[0].used_bytes += 200;
            raise(SIGKILL);
        }
        waitpid(pid, &st, 0);
        CHECK(WIFSIGNALED(st));
        CHECK_EQ_U64(vgpu_region_reclaim(&s, &self), 1);
        CHECK_EQ_U64(s.r->devices[0].charge_lock, 0);
        CHECK_EQ_U64(vgpu_region_used(&s, 0), 100);
    }
    /* A lock value no slot can hold (someone wrote it) is taken over too. */
    s.r->devices[0].charge_lock = VGPU_REGION_MAX_SLOTS + 7;
    CHECK(vgpu_region_reserve(&s, 0, 1, 1000) == 0);
    CHECK_EQ_U64(vgpu_region_used(&s, 0), 101);
    vgpu_region_release_slot(&s);
    CHECK_EQ_U64(vgpu_region_used(&s, 0), 0);
    vgpu_region_detach(&s);
}

/* vgpu_reserve.h: bounds, wrap-around, and no overshoot under contention. */
#define RESERVE_THREADS 4
#define RESERVE_TRIES 20000

struct reserve_worker {
    _Atomic uint64_t *counter;
    uint64_t granted;
};

static void *reserve_worker_run(void *arg)
{
    struct reserve_worker *w = arg;

    for (int i = 0; i < RESERVE_TRIES; i++)
        if (vgpu_reserve(w->counter, 3, 30000) == 0)
            w->granted += 3;
    return NULL;
}

static void test_reserve(void)
{
    _Atomic uint64_t counter = 0;
    struct reserve_worker workers[RESERVE_THREADS];
    pthread_t threads[RESERVE_THREADS];
    uint64_t granted = 0;

    CHECK(vgpu_reserve_fits(0, 10, 10));
    CHECK(!vgpu_reserve_fits(1, 10, 10));
    CHECK(vgpu_reserve_fits(UINT64_MAX - 1, 1, 0));
    CHECK(!vgpu_reserve_fits(UINT64_MAX, 1, 0));
    CHECK(!vgpu_reserve_fits(2, UINT64_MAX - 1, 0));

    CHECK(vgpu_reserve(&counter, 8, 10) == 0);
    CHECK(vgpu_reserve(&counter, 3, 10) == -1);
    CHECK_EQ_U64(atomic_load(&counter), 8);
    CHECK(vgpu_reserve(&counter, 2, 10) == 0);
    CHECK(vgpu_reserve(&counter, UINT64_MAX, 0) == -1);
    CHECK_EQ_U64(atomic_load(&counter), 10);
    vgpu_unreserve(&counter, 4);
    CHECK_EQ_U64(atomic_load(&counter), 6);
    vgpu_unreserve(&counter, 100);
    CHECK_EQ_U64(atomic_load(&counter), 0);

    for (int i = 0; i < RESERVE_THREADS; i++) {
        workers[i] = (struct reserve_worker){.counter = &counter};
        CHECK(pthread_create(&threads[i], NULL, reserve_worker_run, &workers[i]) == 0);
    }
    for (int i = 0; i < RESERVE_THREADS; i++) {
        pthread_join(threads[i], NULL);
        granted += workers[i].granted;
    }
    /* Exactly up to the limit: every grant counted, none past it. */
    CHECK_EQ_U64(granted, 30000);
    CHECK_EQ_U64(atomic_load(&counter), 30000);
}

/*
 * check_unavailable in a child (its output to /dev/null) with CI set to ci,
 * or unset for NULL, and the skip log at log: returns the child's
 * check_failures * 10 + check_unrun, -1 if it did not exit normally.
 */
static int unavailable_in_child(const char *ci, const char *log)
{
    int st;
    pid_t pid;

    fflush(NULL);
    pid = fork();
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);

        dup2(null, 1);
        dup2(null, 2);
        if (ci != NULL)
            setenv("CI", ci, 1);
        else
            unsetenv("CI");
        setenv("VGPU_TEST_SKIP_LOG", log, 1);
        check_failures = 0;
        check_unrun = 0;
        check_unavailable("suite part", "needs %s", "root");
        fflush(NULL);
        _exit(check_failures * 10 + check_unrun);
    }
    if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
        return -1;
    return WEXITSTATUS(st);
}

/* A test that cannot run here fails under CI, and elsewhere is counted and logged. */
static void test_check_unavailable(void)
{
    char log[600], line[128] = "";
    FILE *f;

    snprintf(log, sizeof(log), "%s/skipped", tmpdir);
    CHECK_EQ(unavailable_in_child("true", log), 10);
    CHECK(access(log, F_OK) != 0);
    CHECK_EQ(unavailable_in_child("", log), 1);
    CHECK_EQ(unavailable_in_child(NULL, log), 1);
    f = fopen(log, "r");
    CHECK(f != NULL);
    if (f == NULL)
        return;
    CHECK(fgets(line, sizeof(line), f) != NULL);
    CHECK(strcmp(line, "suite part: needs root\n") == 0);
    CHECK(fgets(line, sizeof(line), f) != NULL);
    CHECK(strcmp(line, "suite part: needs root\n") == 0);
    CHECK(fgets(line, sizeof(line), f) == NULL);
    fclose(f);
}

int main(void)
{
    char cmd[64];

    if (mkdtemp(tmpdir) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    test_parse_size();
    test_parse_uint();
    test_config();
    test_config_rule();
    test_config_mps();
    test_mps_settings();
    test_mps_driver_memory();
    test_ptrmap();
    test_vamap();
    test_procinfo();
    test_hostpids_parse();
    test_burst_parse();
    test_hostpids_lookup();
    test_region_init();
    test_region_corrupt();
    test_region_race();
    test_region_reclaim();
    test_charge_undo();
    test_reserve();
    test_check_unavailable();
    snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", tmpdir);
    return check_report("unit_test");
}
