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
 * fake_mig.c - MIG geometries of the simulated GPUs (see fake_mig.h).
 *
 * The numbers are those of go-nvml's mock GPUs (pkg/nvml/mock/gpus, which
 * follow NVIDIA's MIG user guide tables): A100 with 8 memory slices and 14
 * SMs per compute slice, H100/H200 with 7 memory slices (a 3g takes 3) and
 * 16 SMs per compute slice.
 */
#include "fake_mig.h"

#include <stdio.h>
#include <string.h>

#define R1(a) {a, 1}
#define SEVEN_ONES 7, {R1(0), R1(1), R1(2), R1(3), R1(4), R1(5), R1(6)}

/* A100: id, name, slices, instances, ce, dec, enc, jpeg, ofa, MiB, placements. */
#define A100_PROFILES(m1, m2, m3, m7, n1, n2, n3, n4, n7, n1r2)                                  \
    7, {                                                                                         \
        {0, n1, 1, 7, 1, 0, 0, 0, 0, m1, SEVEN_ONES},                                            \
        {7, n1 "+me", 1, 1, 1, 1, 0, 1, 1, m1, SEVEN_ONES},                                      \
        {9, n1r2, 1, 4, 1, 1, 0, 0, 0, m2, 4, {{0, 2}, {2, 2}, {4, 2}, {6, 2}}},                 \
        {1, n2, 2, 3, 2, 1, 0, 0, 0, m2, 3, {{0, 2}, {2, 2}, {4, 2}}},                           \
        {2, n3, 3, 2, 3, 2, 0, 0, 0, m3, 2, {{0, 4}, {4, 4}}},                                   \
        {3, n4, 4, 1, 4, 2, 0, 0, 0, m3, 1, {{0, 4}}},                                           \
        {4, n7, 7, 1, 7, 5, 0, 1, 1, m7, 1, {{0, 8}}},                                           \
    }

/* H100/H200. */
#define HOPPER_PROFILES(m1, m2, m3, m7, n1, n2, n3, n4, n7, n1r2)                                \
    7, {                                                                                         \
        {0, n1, 1, 7, 1, 1, 0, 0, 0, m1, SEVEN_ONES},                                            \
        {7, n1 "+me", 1, 1, 1, 1, 0, 1, 1, m1, SEVEN_ONES},                                      \
        {9, n1r2, 1, 4, 1, 1, 0, 0, 0, m2, SEVEN_ONES},                                          \
        {1, n2, 2, 3, 2, 1, 0, 0, 0, m2, 3, {{0, 2}, {2, 2}, {4, 2}}},                           \
        {2, n3, 3, 2, 3, 2, 0, 0, 0, m3, 2, {{0, 3}, {4, 3}}},                                   \
        {3, n4, 4, 1, 4, 2, 0, 0, 0, m3, 1, {{0, 4}}},                                           \
        {4, n7, 7, 1, 7, 5, 0, 0, 0, m7, 1, {{0, 7}}},                                           \
    }

static const fake_mig_geometry geometries[FAKE_MIG_GEOMETRIES] = {
    [FAKE_MIG_A100_40GB] = {"a100-40gb", 8, 7, 14, 0,
                            A100_PROFILES(4864, 9856, 19968, 40192, "1g.5gb", "2g.10gb",
                                          "3g.20gb", "4g.20gb", "7g.40gb", "1g.10gb")},
    [FAKE_MIG_A100_80GB] = {"a100-80gb", 8, 7, 14, 0,
                            A100_PROFILES(9856, 19968, 40192, 80384, "1g.10gb", "2g.20gb",
                                          "3g.40gb", "4g.40gb", "7g.80gb", "1g.20gb")},
    [FAKE_MIG_H100_80GB] = {"h100-80gb", 7, 7, 16, 1,
                            HOPPER_PROFILES(10240, 20480, 40960, 81920, "1g.10gb", "2g.20gb",
                                            "3g.40gb", "4g.40gb", "7g.80gb", "1g.20gb")},
    [FAKE_MIG_H200_141GB] = {"h200-141gb", 7, 7, 16, 1,
                             HOPPER_PROFILES(18432, 35840, 72704, 144384, "1g.18gb", "2g.35gb",
                                             "3g.71gb", "4g.71gb", "7g.141gb", "1g.35gb")},
};

const fake_mig_geometry *fake_mig_geometry_of(int geometry)
{
    if (geometry <= FAKE_MIG_NONE || geometry >= FAKE_MIG_GEOMETRIES)
        return NULL;
    return &geometries[geometry];
}

int fake_mig_geometry_parse(const char *s)
{
    if (strcmp(s, "none") == 0)
        return FAKE_MIG_NONE;
    for (int g = FAKE_MIG_NONE + 1; g < FAKE_MIG_GEOMETRIES; g++)
        if (strcmp(s, geometries[g].key) == 0)
            return g;
    return -1;
}

const fake_gi_profile *fake_mig_gi_profile(const fake_mig_geometry *g, unsigned int id)
{
    for (unsigned int i = 0; g != NULL && i < g->nprofiles; i++)
        if (g->profiles[i].id == id)
            return &g->profiles[i];
    return NULL;
}

int fake_mig_ci_profile(const fake_mig_geometry *g, const fake_gi_profile *gi, unsigned int id,
                        fake_ci_profile *out)
{
    /* Compute-instance profile id -> its compute slices (NVML_COMPUTE_INSTANCE_PROFILE_*). */
    static const unsigned int slices_of[] = {1, 2, 3, 4, 7};
    if (g == NULL || gi == NULL || id >= sizeof(slices_of) / sizeof(slices_of[0]))
        return -1;
    unsigned int s = slices_of[id];
    /* Hopper's full instance has no 4-slice compute instance (as go-nvml's mocks). */
    if (s > gi->slices || (s == 4 && gi->slices == 7 && g->sm_per_slice == 16))
        return -1;
    memset(out, 0, sizeof(*out));
    out->id = id;
    out->slices = s;
    out->multiprocessors = s * g->sm_per_slice;
    /* Aligned starts; a 3-slice compute instance starts at 0 or 4, as a 3g GPU instance. */
    unsigned int step = s == 3 ? 4 : s;
    for (unsigned int start = 0; start + s <= gi->slices && out->nplacements < FAKE_MIG_MAX_CI;
         start += step)
        out->placements[out->nplacements++] = (fake_mig_range){start, s};
    out->instances = out->nplacements;
    return 0;
}

/* FNV-1a 64-bit and the splitmix64 finaliser, as for the GPUs' UUIDs. */
static uint64_t fnv1a(const char *s, uint64_t h)
{
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ULL;
    }
    return h;
}

static uint64_t mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void fake_mig_uuid(const fake_gpu *parent, unsigned int gi, unsigned int ci, char uuid[48],
                   unsigned char bytes[16])
{
    char key[96];
    snprintf(key, sizeof(key), "%s/mig/%u/%u", parent->uuid, gi, ci);
    uint64_t hi = mix(fnv1a(key, 0xcbf29ce484222325ULL));
    uint64_t lo = mix(fnv1a(key, hi ^ 0x9e3779b97f4a7c15ULL));
    for (int b = 0; b < 8; b++) {
        bytes[b] = (unsigned char)(hi >> (56 - 8 * b));
        bytes[8 + b] = (unsigned char)(lo >> (56 - 8 * b));
    }
    const unsigned char *u = bytes;
    snprintf(uuid, 48,
             "MIG-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0],
             u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
             u[14], u[15]);
}
