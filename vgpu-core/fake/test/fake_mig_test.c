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
 * fake_mig_test.c - tests of the fakes' MIG model: per-GPU MIG configuration,
 * the four geometries' profiles and placements through NVML, instance
 * creation and destruction with NVML's error codes, MIG device handles and
 * UUIDs, instances shared by processes through the state file (also when a
 * changer is SIGKILLed holding the MIG lock), and the CUDA view of a MIG
 * instance (CUDA_VISIBLE_DEVICES=MIG-...): its memory, UUID, SMs, memory
 * charged to it, kernels run on its own engine.
 *
 * Simulated node: GPU 0 H200-141GB, 1 H100-80GB, 2 A100-80GB, 3 A100-40GB,
 * all in MIG mode; GPU 4 H200 with MIG enabling (pending); GPU 5 no MIG.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "fake_config.h"
#include "fake_gpu.h"
#include "fake_mig.h"
#include "fake_nvml_mig.h"
#include "fake_state.h"
#include "vgpu_cuda.h"
#include "vgpu_nvml.h"

#define MiB (1ULL << 20)
#define GiB (1ULL << 30)

static char state_dir[] = "/tmp/vgpu-fake-mig-test-XXXXXX";
static char proc_root[] = "/tmp/vgpu-fake-mig-proc-XXXXXX";
static nvmlDevice_t gpu[6];

static nvmlGpuInstance_t create_gi(int g, unsigned int profile, unsigned int start,
                                   unsigned int size, nvmlReturn_t want)
{
    nvmlGpuInstance_t gi = NULL;
    nvmlGpuInstancePlacement_t pl = {start, size};
    nvmlReturn_t r = nvmlDeviceCreateGpuInstanceWithPlacement(gpu[g], profile, &pl, &gi);
    if (r != want)
        fprintf(stderr, "create GI profile %u at %u+%u on GPU %d: %d, want %d\n", profile, start,
                size, g, r, want);
    CHECK_EQ(r, want);
    return gi;
}

static unsigned int gi_id(nvmlGpuInstance_t gi)
{
    nvmlGpuInstanceInfo_t info;
    CHECK_EQ(nvmlGpuInstanceGetInfo(gi, &info), NVML_SUCCESS);
    return info.id;
}

/* Every instance of GPU g destroyed (compute instances first). */
static void destroy_all(int g)
{
    for (unsigned int id = 1; id <= FAKE_MIG_MAX_GI; id++) {
        nvmlGpuInstance_t gi;
        if (nvmlDeviceGetGpuInstanceById(gpu[g], id, &gi) != NVML_SUCCESS)
            continue;
        for (unsigned int c = 0; c < FAKE_MIG_MAX_CI; c++) {
            nvmlComputeInstance_t ci;
            if (nvmlGpuInstanceGetComputeInstanceById(gi, c, &ci) == NVML_SUCCESS)
                CHECK_EQ(nvmlComputeInstanceDestroy(ci), NVML_SUCCESS);
        }
        CHECK_EQ(nvmlGpuInstanceDestroy(gi), NVML_SUCCESS);
    }
}

static void test_config(void)
{
    fake_config cfg;
    char err[256];
    unsigned int cur, pend, count;
    CHECK_EQ(nvmlDeviceGetMigMode(gpu[0], &cur, &pend), NVML_SUCCESS);
    CHECK(cur == NVML_DEVICE_MIG_ENABLE && pend == NVML_DEVICE_MIG_ENABLE);
    CHECK_EQ(nvmlDeviceGetMigMode(gpu[4], &cur, &pend), NVML_SUCCESS);
    CHECK(cur == NVML_DEVICE_MIG_DISABLE && pend == NVML_DEVICE_MIG_ENABLE);
    CHECK_EQ(nvmlDeviceGetMigMode(gpu[5], &cur, &pend), NVML_ERROR_NOT_SUPPORTED);
    CHECK_EQ(nvmlDeviceGetMaxMigDeviceCount(gpu[0], &count), NVML_SUCCESS);
    CHECK_EQ(count, 7);
    CHECK_EQ(nvmlDeviceGetMaxMigDeviceCount(gpu[5], &count), NVML_SUCCESS);
    CHECK_EQ(count, 0);
    /* Not in MIG mode (yet): no profiles, no instances. */
    nvmlGpuInstanceProfileInfo_t info;
    nvmlGpuInstance_t gi;
    CHECK_EQ(nvmlDeviceGetGpuInstanceProfileInfo(gpu[4], 0, &info), NVML_ERROR_NOT_SUPPORTED);
    CHECK_EQ(nvmlDeviceCreateGpuInstance(gpu[4], 0, &gi), NVML_ERROR_NOT_SUPPORTED);
    CHECK_EQ(nvmlDeviceCreateGpuInstance(gpu[5], 0, &gi), NVML_ERROR_NOT_SUPPORTED);

    /* Bad values name the key; a MIG mode needs a geometry. */
    setenv("VGPU_FAKE_GPU1_MIG_MODE", "sometimes", 1);
    CHECK_EQ(fake_config_load(&cfg, err, sizeof(err)), -1);
    CHECK_STR_CONTAINS(err, "VGPU_FAKE_GPU1_MIG_MODE");
    setenv("VGPU_FAKE_GPU1_MIG_MODE", "enabled", 1);
    setenv("VGPU_FAKE_GPU1_MIG_GEOMETRY", "b300", 1);
    CHECK_EQ(fake_config_load(&cfg, err, sizeof(err)), -1);
    CHECK_STR_CONTAINS(err, "VGPU_FAKE_GPU1_MIG_GEOMETRY");
    setenv("VGPU_FAKE_GPU1_MIG_GEOMETRY", "h100-80gb", 1);
    setenv("VGPU_FAKE_GPU5_MIG_MODE", "enabled", 1);
    CHECK_EQ(fake_config_load(&cfg, err, sizeof(err)), -1);
    CHECK_STR_CONTAINS(err, "GPU 5");
    setenv("VGPU_FAKE_GPU5_MIG_MODE", "disabled", 1);
    CHECK_EQ(fake_config_load(&cfg, err, sizeof(err)), 0);
    CHECK_EQ(cfg.gpus[1].mig_geometry, FAKE_MIG_H100_80GB);
    CHECK_EQ(cfg.gpus[4].mig_pending, NVML_DEVICE_MIG_ENABLE);
    CHECK_EQ(cfg.gpus[5].mig_geometry, FAKE_MIG_NONE);
}

/* One expected GPU-instance profile: id, slices, instances, SMs, MiB, placements (start, size). */
struct want_profile {
    unsigned int id, slices, instances, sms;
    unsigned long long mb;
    const char *name;
    unsigned int n, starts[7], size;
};

static void check_geometry(int g, const struct want_profile *want, size_t nwant)
{
    unsigned int found = 0;
    for (unsigned int id = 0; id < NVML_GPU_INSTANCE_PROFILE_COUNT; id++) {
        nvmlGpuInstanceProfileInfo_t info;
        nvmlReturn_t r = nvmlDeviceGetGpuInstanceProfileInfo(gpu[g], id, &info);
        const struct want_profile *w = NULL;
        for (size_t k = 0; k < nwant; k++)
            if (want[k].id == id)
                w = &want[k];
        if (w == NULL) {
            CHECK_EQ(r, NVML_ERROR_NOT_SUPPORTED);
            continue;
        }
        found++;
        CHECK_EQ(r, NVML_SUCCESS);
        CHECK_EQ(info.id, id);
        CHECK_EQ(info.sliceCount, w->slices);
        CHECK_EQ(info.instanceCount, w->instances);
        CHECK_EQ(info.multiprocessorCount, w->sms);
        CHECK_EQ_U64(info.memorySizeMB, w->mb);
        nvmlGpuInstanceProfileInfo_v2_t v2 = {.version = nvmlGpuInstanceProfileInfo_v2};
        CHECK_EQ(nvmlDeviceGetGpuInstanceProfileInfoV(gpu[g], id, &v2), NVML_SUCCESS);
        CHECK_EQ_U64(v2.memorySizeMB, w->mb);
        char name[64];
        snprintf(name, sizeof(name), "MIG %s", w->name);
        CHECK(strcmp(v2.name, name) == 0);
        nvmlGpuInstancePlacement_t pl[8];
        unsigned int n = 0;
        CHECK_EQ(nvmlDeviceGetGpuInstancePossiblePlacements_v2(gpu[g], id, NULL, &n), NVML_SUCCESS);
        CHECK_EQ(n, w->n);
        n = 1;
        if (w->n > 1)
            CHECK_EQ(nvmlDeviceGetGpuInstancePossiblePlacements_v2(gpu[g], id, pl, &n),
                     NVML_ERROR_INSUFFICIENT_SIZE);
        n = 8;
        CHECK_EQ(nvmlDeviceGetGpuInstancePossiblePlacements_v2(gpu[g], id, pl, &n), NVML_SUCCESS);
        CHECK_EQ(n, w->n);
        for (unsigned int k = 0; k < n && k < w->n; k++) {
            CHECK_EQ(pl[k].start, w->starts[k]);
            CHECK_EQ(pl[k].size, w->size);
        }
    }
    CHECK_EQ(found, nwant);
    nvmlGpuInstanceProfileInfo_t info;
    CHECK_EQ(nvmlDeviceGetGpuInstanceProfileInfo(gpu[g], NVML_GPU_INSTANCE_PROFILE_COUNT, &info),
             NVML_ERROR_INVALID_ARGUMENT);
    nvmlGpuInstanceProfileInfo_v2_t bad = {.version = 0};
    CHECK_EQ(nvmlDeviceGetGpuInstanceProfileInfoV(gpu[g], 0, &bad),
             NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
}

#define ALL7 7, {0, 1, 2, 3, 4, 5, 6}, 1

/* The numbers of go-nvml's mock GPUs (pkg/nvml/mock/gpus). */
static void test_geometries(void)
{
    static const struct want_profile h200[] = {
        {0, 1, 7, 16, 18432, "1g.18gb", ALL7},
        {7, 1, 1, 16, 18432, "1g.18gb+me", ALL7},
        {9, 1, 4, 16, 35840, "1g.35gb", ALL7},
        {1, 2, 3, 32, 35840, "2g.35gb", 3, {0, 2, 4}, 2},
        {2, 3, 2, 48, 72704, "3g.71gb", 2, {0, 4}, 3},
        {3, 4, 1, 64, 72704, "4g.71gb", 1, {0}, 4},
        {4, 7, 1, 112, 144384, "7g.141gb", 1, {0}, 7},
    };
    static const struct want_profile h100[] = {
        {0, 1, 7, 16, 10240, "1g.10gb", ALL7},
        {7, 1, 1, 16, 10240, "1g.10gb+me", ALL7},
        {9, 1, 4, 16, 20480, "1g.20gb", ALL7},
        {1, 2, 3, 32, 20480, "2g.20gb", 3, {0, 2, 4}, 2},
        {2, 3, 2, 48, 40960, "3g.40gb", 2, {0, 4}, 3},
        {3, 4, 1, 64, 40960, "4g.40gb", 1, {0}, 4},
        {4, 7, 1, 112, 81920, "7g.80gb", 1, {0}, 7},
    };
    static const struct want_profile a100_80[] = {
        {0, 1, 7, 14, 9856, "1g.10gb", ALL7},
        {7, 1, 1, 14, 9856, "1g.10gb+me", ALL7},
        {9, 1, 4, 14, 19968, "1g.20gb", 4, {0, 2, 4, 6}, 2},
        {1, 2, 3, 28, 19968, "2g.20gb", 3, {0, 2, 4}, 2},
        {2, 3, 2, 42, 40192, "3g.40gb", 2, {0, 4}, 4},
        {3, 4, 1, 56, 40192, "4g.40gb", 1, {0}, 4},
        {4, 7, 1, 98, 80384, "7g.80gb", 1, {0}, 8},
    };
    static const struct want_profile a100_40[] = {
        {0, 1, 7, 14, 4864, "1g.5gb", ALL7},
        {7, 1, 1, 14, 4864, "1g.5gb+me", ALL7},
        {9, 1, 4, 14, 9856, "1g.10gb", 4, {0, 2, 4, 6}, 2},
        {1, 2, 3, 28, 9856, "2g.10gb", 3, {0, 2, 4}, 2},
        {2, 3, 2, 42, 19968, "3g.20gb", 2, {0, 4}, 4},
        {3, 4, 1, 56, 19968, "4g.20gb", 1, {0}, 4},
        {4, 7, 1, 98, 40192, "7g.40gb", 1, {0}, 8},
    };
    check_geometry(0, h200, sizeof(h200) / sizeof(h200[0]));
    check_geometry(1, h100, sizeof(h100) / sizeof(h100[0]));
    check_geometry(2, a100_80, sizeof(a100_80) / sizeof(a100_80[0]));
    check_geometry(3, a100_40, sizeof(a100_40) / sizeof(a100_40[0]));
}

/* Placement rules and error codes on the H200 (GPU 0) and an A100 (GPU 2). */
static void test_create_destroy(void)
{
    nvmlGpuInstance_t a, b, c;
    unsigned int count;
    /* Two 3g fit, a third does not; the 1g left at slice 3 fills the 7 compute slices. */
    a = create_gi(0, NVML_GPU_INSTANCE_PROFILE_3_SLICE, 0, 3, NVML_SUCCESS);
    b = create_gi(0, NVML_GPU_INSTANCE_PROFILE_3_SLICE, 4, 3, NVML_SUCCESS);
    CHECK_EQ(nvmlDeviceCreateGpuInstance(gpu[0], NVML_GPU_INSTANCE_PROFILE_3_SLICE, &c),
             NVML_ERROR_INSUFFICIENT_RESOURCES);
    CHECK_EQ(nvmlDeviceGetGpuInstanceRemainingCapacity(gpu[0], NVML_GPU_INSTANCE_PROFILE_1_SLICE,
                                                       &count), NVML_SUCCESS);
    CHECK_EQ(count, 1);
    create_gi(0, NVML_GPU_INSTANCE_PROFILE_1_SLICE, 4, 1, NVML_ERROR_INSUFFICIENT_RESOURCES);
    c = create_gi(0, NVML_GPU_INSTANCE_PROFILE_1_SLICE, 3, 1, NVML_SUCCESS);
    CHECK(a != NULL && b != NULL && c != NULL);
    CHECK(gi_id(a) != gi_id(b) && gi_id(b) != gi_id(c));
    nvmlGpuInstance_t list[7];
    count = 7;
    CHECK_EQ(nvmlDeviceGetGpuInstances(gpu[0], NVML_GPU_INSTANCE_PROFILE_3_SLICE, list, &count),
             NVML_SUCCESS);
    CHECK_EQ(count, 2);
    /* A placement the profile does not have. */
    create_gi(0, NVML_GPU_INSTANCE_PROFILE_2_SLICE, 1, 2, NVML_ERROR_INVALID_ARGUMENT);
    CHECK_EQ(nvmlGpuInstanceDestroy(b), NVML_SUCCESS);
    CHECK_EQ(nvmlGpuInstanceDestroy(b), NVML_ERROR_INVALID_ARGUMENT); /* gone */
    nvmlGpuInstanceInfo_t info;
    CHECK_EQ(nvmlGpuInstanceGetInfo(b, &info), NVML_ERROR_INVALID_ARGUMENT);
    /* A 1g at slice 4 blocks the 3g at slice 4. */
    b = create_gi(0, NVML_GPU_INSTANCE_PROFILE_1_SLICE, 4, 1, NVML_SUCCESS);
    create_gi(0, NVML_GPU_INSTANCE_PROFILE_3_SLICE, 4, 3, NVML_ERROR_INSUFFICIENT_RESOURCES);
    destroy_all(0);
    /* The 4g sits on slices 0-3: a 1g at 4 leaves it room, a 1g at 0 does not. */
    a = create_gi(0, NVML_GPU_INSTANCE_PROFILE_1_SLICE, 4, 1, NVML_SUCCESS);
    create_gi(0, NVML_GPU_INSTANCE_PROFILE_4_SLICE, 0, 4, NVML_SUCCESS);
    destroy_all(0);
    create_gi(0, NVML_GPU_INSTANCE_PROFILE_1_SLICE, 0, 1, NVML_SUCCESS);
    create_gi(0, NVML_GPU_INSTANCE_PROFILE_4_SLICE, 0, 4, NVML_ERROR_INSUFFICIENT_RESOURCES);
    destroy_all(0);
    /* One 1g+me per GPU; at most four 1g.35gb though seven placements exist; seven 1g. */
    create_gi(0, NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1, 0, 1, NVML_SUCCESS);
    create_gi(0, NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1, 1, 1, NVML_ERROR_INSUFFICIENT_RESOURCES);
    destroy_all(0);
    for (unsigned int s = 0; s < 5; s++)
        create_gi(0, NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2, s, 1,
                  s < 4 ? NVML_SUCCESS : NVML_ERROR_INSUFFICIENT_RESOURCES);
    destroy_all(0);
    for (unsigned int s = 0; s < 7; s++)
        create_gi(0, NVML_GPU_INSTANCE_PROFILE_1_SLICE, s, 1, NVML_SUCCESS);
    CHECK_EQ(nvmlDeviceCreateGpuInstance(gpu[0], NVML_GPU_INSTANCE_PROFILE_1_SLICE, &c),
             NVML_ERROR_INSUFFICIENT_RESOURCES);
    destroy_all(0);
    /* A100: a 3g takes 4 memory slices, the 7g all 8. */
    create_gi(2, NVML_GPU_INSTANCE_PROFILE_3_SLICE, 4, 4, NVML_SUCCESS);
    create_gi(2, NVML_GPU_INSTANCE_PROFILE_1_SLICE, 6, 1, NVML_ERROR_INSUFFICIENT_RESOURCES);
    create_gi(2, NVML_GPU_INSTANCE_PROFILE_7_SLICE, 0, 8, NVML_ERROR_INSUFFICIENT_RESOURCES);
    destroy_all(2);
    create_gi(2, NVML_GPU_INSTANCE_PROFILE_7_SLICE, 0, 8, NVML_SUCCESS);
    destroy_all(2);

    /* Compute instances, and destroying in the wrong order. */
    a = create_gi(0, NVML_GPU_INSTANCE_PROFILE_3_SLICE, 4, 3, NVML_SUCCESS);
    nvmlComputeInstanceProfileInfo_t cip;
    CHECK_EQ(nvmlGpuInstanceGetComputeInstanceProfileInfo(a, NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE,
                                                          NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED,
                                                          &cip), NVML_SUCCESS);
    CHECK_EQ(cip.multiprocessorCount, 48);
    CHECK_EQ(cip.instanceCount, 1);
    CHECK_EQ(nvmlGpuInstanceGetComputeInstanceProfileInfo(a, NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE,
                                                          0, &cip), NVML_ERROR_NOT_SUPPORTED);
    CHECK_EQ(nvmlGpuInstanceGetComputeInstanceProfileInfo(a, NVML_COMPUTE_INSTANCE_PROFILE_COUNT,
                                                          0, &cip), NVML_ERROR_INVALID_ARGUMENT);
    CHECK_EQ(nvmlGpuInstanceGetComputeInstanceProfileInfo(a, 0, 1, &cip),
             NVML_ERROR_INVALID_ARGUMENT);
    nvmlComputeInstanceProfileInfo_v2_t civ = {.version = nvmlComputeInstanceProfileInfo_v2};
    CHECK_EQ(nvmlGpuInstanceGetComputeInstanceProfileInfoV(a, NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE,
                                                           0, &civ), NVML_SUCCESS);
    CHECK(strcmp(civ.name, "MIG 1c.3g.71gb") == 0);
    CHECK_EQ(civ.instanceCount, 3);
    nvmlComputeInstance_t ci, ci2, cis[8];
    CHECK_EQ(nvmlGpuInstanceCreateComputeInstance(a, NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE, &ci),
             NVML_SUCCESS);
    CHECK_EQ(nvmlGpuInstanceCreateComputeInstance(a, NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE, &ci2),
             NVML_ERROR_INSUFFICIENT_RESOURCES);
    count = 8;
    CHECK_EQ(nvmlGpuInstanceGetComputeInstances(a, NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE, cis,
                                                &count), NVML_SUCCESS);
    CHECK_EQ(count, 1);
    nvmlComputeInstanceInfo_t cinfo;
    CHECK_EQ(nvmlComputeInstanceGetInfo_v2(ci, &cinfo), NVML_SUCCESS);
    CHECK(cinfo.device == gpu[0] && cinfo.gpuInstance == a);
    CHECK_EQ(cinfo.profileId, NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE);
    CHECK_EQ(cinfo.placement.size, 3);
    CHECK_EQ(nvmlGpuInstanceDestroy(a), NVML_ERROR_IN_USE);
    CHECK_EQ(nvmlComputeInstanceDestroy(ci), NVML_SUCCESS);
    CHECK_EQ(nvmlComputeInstanceDestroy(ci), NVML_ERROR_INVALID_ARGUMENT);
    /* Three 1-slice compute instances fill the 3g. */
    for (int k = 0; k < 3; k++)
        CHECK_EQ(nvmlGpuInstanceCreateComputeInstance(a, NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE,
                                                      &ci2), NVML_SUCCESS);
    CHECK_EQ(nvmlGpuInstanceCreateComputeInstance(a, NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE, &ci2),
             NVML_ERROR_INSUFFICIENT_RESOURCES);
    destroy_all(0);
    /* Bad ids. */
    nvmlGpuInstance_t none;
    CHECK_EQ(nvmlDeviceGetGpuInstanceById(gpu[0], 5, &none), NVML_ERROR_NOT_FOUND);
    CHECK_EQ(nvmlDeviceCreateGpuInstance(gpu[0], 5, &none), NVML_ERROR_INVALID_ARGUMENT);
    CHECK_EQ(nvmlDeviceCreateGpuInstance(gpu[0], 99, &none), NVML_ERROR_INVALID_ARGUMENT);
    CHECK_EQ(nvmlGpuInstanceDestroy(NULL), NVML_ERROR_INVALID_ARGUMENT);
}

/* MIG device handles, UUIDs and memory. */
static void test_mig_handles(void)
{
    nvmlGpuInstance_t a = create_gi(0, NVML_GPU_INSTANCE_PROFILE_3_SLICE, 0, 3, NVML_SUCCESS);
    nvmlComputeInstance_t ci;
    CHECK_EQ(nvmlGpuInstanceCreateComputeInstance(a, NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE, &ci),
             NVML_SUCCESS);
    nvmlDevice_t mig, parent, other;
    unsigned int is_mig = 9, id;
    CHECK_EQ(nvmlDeviceGetMigDeviceHandleByIndex(gpu[0], 0, &mig), NVML_SUCCESS);
    CHECK_EQ(nvmlDeviceGetMigDeviceHandleByIndex(gpu[0], 1, &other), NVML_ERROR_NOT_FOUND);
    CHECK_EQ(nvmlDeviceIsMigDeviceHandle(mig, &is_mig), NVML_SUCCESS);
    CHECK_EQ(is_mig, 1);
    CHECK_EQ(nvmlDeviceIsMigDeviceHandle(gpu[0], &is_mig), NVML_SUCCESS);
    CHECK_EQ(is_mig, 0);
    CHECK_EQ(nvmlDeviceGetDeviceHandleFromMigDeviceHandle(mig, &parent), NVML_SUCCESS);
    CHECK(parent == gpu[0]);
    CHECK_EQ(nvmlDeviceGetDeviceHandleFromMigDeviceHandle(gpu[0], &parent),
             NVML_ERROR_INVALID_ARGUMENT);
    CHECK_EQ(nvmlDeviceGetGpuInstanceId(mig, &id), NVML_SUCCESS);
    CHECK_EQ(id, gi_id(a));
    CHECK_EQ(nvmlDeviceGetComputeInstanceId(mig, &id), NVML_SUCCESS);
    CHECK_EQ(id, 0);
    CHECK_EQ(nvmlDeviceGetGpuInstanceId(gpu[0], &id), NVML_ERROR_NOT_SUPPORTED);
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE], again[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    char parent_uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    CHECK_EQ(nvmlDeviceGetUUID(mig, uuid, sizeof(uuid)), NVML_SUCCESS);
    CHECK_EQ(nvmlDeviceGetUUID(gpu[0], parent_uuid, sizeof(parent_uuid)), NVML_SUCCESS);
    CHECK(strncmp(uuid, "MIG-", 4) == 0 && strlen(uuid) == 40);
    CHECK(strcmp(uuid + 4, parent_uuid + 4) != 0);
    CHECK_EQ(nvmlDeviceGetHandleByUUID(uuid, &other), NVML_SUCCESS);
    CHECK(other == mig);
    nvmlMemory_t m;
    nvmlMemory_v2_t m2 = {.version = nvmlMemory_v2};
    CHECK_EQ(nvmlDeviceGetMemoryInfo(mig, &m), NVML_SUCCESS);
    CHECK_EQ_U64(m.total, 72704 * MiB);
    CHECK_EQ_U64(m.used, 0);
    CHECK_EQ(nvmlDeviceGetMemoryInfo_v2(mig, &m2), NVML_SUCCESS);
    CHECK_EQ_U64(m2.total, 72704 * MiB);
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
    CHECK_EQ(nvmlDeviceGetName(mig, name, sizeof(name)), NVML_SUCCESS);
    CHECK(strcmp(name, "NVIDIA H200 141GB HBM3e MIG 3g.71gb") == 0);
    nvmlDeviceAttributes_t attr;
    CHECK_EQ(nvmlDeviceGetAttributes_v2(mig, &attr), NVML_SUCCESS);
    CHECK_EQ(attr.multiprocessorCount, 48);
    CHECK_EQ(attr.gpuInstanceSliceCount, 3);
    CHECK_EQ(attr.computeInstanceSliceCount, 3);
    CHECK_EQ_U64(attr.memorySizeMB, 72704);
    /* An XID in the instance: the parent's event, with the instance's ids. */
    nvmlEventSet_t set;
    nvmlEventData_t ev;
    char path[300];
    CHECK_EQ(nvmlEventSetCreate(&set), NVML_SUCCESS);
    CHECK_EQ(nvmlDeviceRegisterEvents(gpu[0], nvmlEventTypeXidCriticalError, set), NVML_SUCCESS);
    snprintf(path, sizeof(path), "%s/xid-events", state_dir);
    FILE *xf = fopen(path, "a");
    CHECK(xf != NULL);
    if (xf != NULL) {
        fprintf(xf, "%s 94\n", uuid);
        fclose(xf);
    }
    CHECK_EQ(nvmlEventSetWait_v2(set, &ev, 2000), NVML_SUCCESS);
    CHECK(ev.device == gpu[0]);
    CHECK_EQ(ev.eventData, 94);
    CHECK_EQ(ev.gpuInstanceId, gi_id(a));
    CHECK_EQ(ev.computeInstanceId, 0);
    CHECK_EQ(nvmlEventSetFree(set), NVML_SUCCESS);
    /* As on NVIDIA's driver: no utilisation in MIG mode, GPU-wide, per instance or per process. */
    nvmlUtilization_t u;
    nvmlProcessUtilizationSample_t ps[4];
    unsigned int nps = 4;
    CHECK_EQ(nvmlDeviceGetUtilizationRates(gpu[0], &u), NVML_ERROR_NOT_SUPPORTED);
    CHECK_EQ(nvmlDeviceGetUtilizationRates(mig, &u), NVML_ERROR_NOT_SUPPORTED);
    CHECK_EQ(nvmlDeviceGetProcessUtilization(gpu[0], ps, &nps, 0), NVML_ERROR_NOT_SUPPORTED);
    CHECK_EQ(nvmlDeviceGetProcessUtilization(mig, ps, &nps, 0), NVML_ERROR_NOT_SUPPORTED);
    /* Re-created with the same ids: the same UUID. */
    destroy_all(0);
    CHECK_EQ(nvmlDeviceGetUUID(mig, again, sizeof(again)), NVML_ERROR_INVALID_ARGUMENT);
    CHECK_EQ(nvmlDeviceGetHandleByUUID(uuid, &other), NVML_ERROR_NOT_FOUND);
    a = create_gi(0, NVML_GPU_INSTANCE_PROFILE_3_SLICE, 0, 3, NVML_SUCCESS);
    CHECK_EQ(nvmlGpuInstanceCreateComputeInstance(a, NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE, &ci),
             NVML_SUCCESS);
    CHECK_EQ(nvmlDeviceGetMigDeviceHandleByIndex(gpu[0], 0, &mig), NVML_SUCCESS);
    CHECK_EQ(nvmlDeviceGetUUID(mig, again, sizeof(again)), NVML_SUCCESS);
    CHECK(strcmp(uuid, again) == 0);
    destroy_all(0);
}

/* Runs this program as `self mode` with extra environment; returns its exit status. */
static int run_self(const char *mode, const char *env_name, const char *env_value, int *out_fd,
                    pid_t *out_pid)
{
    int out[2];
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0 || pipe(out) != 0)
        return -1;
    exe[n] = '\0';
    pid_t pid = fork();
    if (pid == 0) {
        if (env_name != NULL)
            setenv(env_name, env_value, 1);
        dup2(out[1], 1);
        close(out[0]);
        execl(exe, exe, mode, (char *)NULL);
        _exit(127);
    }
    close(out[1]);
    if (out_fd != NULL) {
        *out_fd = out[0];
        *out_pid = pid;
        return 0;
    }
    int status;
    close(out[0]);
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Child: creates a 2g with its compute instance on GPU 0 and exits. */
static int child_create(void)
{
    nvmlDevice_t d;
    nvmlGpuInstance_t gi;
    nvmlComputeInstance_t ci;
    nvmlGpuInstancePlacement_t pl = {2, 2};
    if (nvmlInit_v2() != NVML_SUCCESS || nvmlDeviceGetHandleByIndex_v2(0, &d) != NVML_SUCCESS ||
        nvmlDeviceCreateGpuInstanceWithPlacement(d, NVML_GPU_INSTANCE_PROFILE_2_SLICE, &pl, &gi) !=
            NVML_SUCCESS ||
        nvmlGpuInstanceCreateComputeInstance(gi, NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE, &ci) !=
            NVML_SUCCESS)
        return 1;
    nvmlShutdown();
    return 0;
}

static const char *state_dir_env(void)
{
    return getenv("VGPU_FAKE_STATE_DIR");
}

/* Child: takes GPU 0's MIG lock, says so, and waits to be killed. */
static int child_hold_lock(void)
{
    fake_state st;
    char err[256];
    if (fake_state_open(&st, state_dir_env(), 0, err, sizeof(err)) != 0 ||
        fake_state_mig_lock(&st, 0, true) != 0)
        return 1;
    printf("locked\n");
    fflush(stdout);
    pause();
    return 0;
}

static _Atomic int created;

static void *create_full(void *arg)
{
    (void)arg;
    create_gi(0, NVML_GPU_INSTANCE_PROFILE_7_SLICE, 0, 7, NVML_SUCCESS);
    atomic_store(&created, 1);
    return NULL;
}

static void test_cross_process(void)
{
    /* What another process created is seen here, and can be destroyed here. */
    CHECK_EQ(run_self("child-create", NULL, NULL, NULL, NULL), 0);
    nvmlGpuInstance_t list[3];
    unsigned int count = 3;
    CHECK_EQ(nvmlDeviceGetGpuInstances(gpu[0], NVML_GPU_INSTANCE_PROFILE_2_SLICE, list, &count),
             NVML_SUCCESS);
    CHECK_EQ(count, 1);
    nvmlGpuInstanceInfo_t info;
    CHECK_EQ(nvmlGpuInstanceGetInfo(list[0], &info), NVML_SUCCESS);
    CHECK(info.placement.start == 2 && info.placement.size == 2);
    nvmlDevice_t mig;
    CHECK_EQ(nvmlDeviceGetMigDeviceHandleByIndex(gpu[0], 0, &mig), NVML_SUCCESS);
    destroy_all(0);

    /* A changer SIGKILLed holding the MIG lock blocks nobody. */
    int fd;
    pid_t pid;
    char line[32] = "";
    CHECK_EQ(run_self("child-hold-lock", NULL, NULL, &fd, &pid), 0);
    FILE *f = fdopen(fd, "r");
    CHECK(fgets(line, sizeof(line), f) != NULL && strcmp(line, "locked\n") == 0);
    /* A change waits for the holder... */
    pthread_t th;
    CHECK_EQ(pthread_create(&th, NULL, create_full, NULL), 0);
    struct timespec ts = {0, 200000000L};
    nanosleep(&ts, NULL);
    CHECK_EQ(atomic_load(&created), 0);
    /* ...and goes ahead once it is killed. */
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    fclose(f);
    CHECK_EQ(pthread_join(th, NULL), 0);
    CHECK_EQ(atomic_load(&created), 1);
    destroy_all(0);
}


/* "MIG-" + the 16 bytes as 8-4-4-4-12 hex. */
static void format_mig_uuid(const unsigned char *b, char *out, size_t len)
{
    snprintf(out, len,
             "MIG-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
             b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
             b[14], b[15]);
}

/*
 * Children of test_cuda. plain: no CUDA_VISIBLE_DEVICES, so only the GPUs
 * not in MIG mode (4 and 5) are CUDA devices. mig: CUDA_VISIBLE_DEVICES is
 * a MIG instance (a 3g.71gb, FAKE_MIG_WANT_UUID): one device of its size
 * whose memory is its own; allocates 70 GiB, runs 300 ms of kernels, says
 * "done" and waits to be killed.
 */
static int child_cuda(const char *mode)
{
    int n = -1;
    CHECK_EQ(cuInit(0), CUDA_SUCCESS);
    CHECK_EQ(cuDeviceGetCount(&n), CUDA_SUCCESS);
    if (strcmp(mode, "child-cuda-plain") == 0) {
        CHECK_EQ(n, 2);
        return check_failures != 0;
    }
    CHECK_EQ(n, 1);
    CUuuid u;
    char uuid[64];
    size_t total = 0, free_b = 0;
    int sms = 0;
    CHECK_EQ(cuDeviceGetUuid_v2(&u, 0), CUDA_SUCCESS);
    format_mig_uuid((const unsigned char *)u.bytes, uuid, sizeof(uuid));
    CHECK(strcmp(uuid, getenv("FAKE_MIG_WANT_UUID")) == 0);
    CHECK_EQ(cuDeviceTotalMem_v2(&total, 0), CUDA_SUCCESS);
    CHECK_EQ_U64(total, 72704 * MiB);
    char name[128];
    CHECK_EQ(cuDeviceGetName(name, sizeof(name), 0), CUDA_SUCCESS);
    CHECK(strcmp(name, "NVIDIA H200 141GB HBM3e MIG 3g.71gb") == 0);
    CHECK_EQ(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0), CUDA_SUCCESS);
    const char *want_sms = getenv("FAKE_MIG_WANT_SMS");
    CHECK_EQ(sms, (want_sms != NULL ? atoi(want_sms) : 48));
    CUcontext ctx;
    CHECK_EQ(cuDevicePrimaryCtxRetain(&ctx, 0), CUDA_SUCCESS);
    CHECK_EQ(cuCtxSetCurrent(ctx), CUDA_SUCCESS);
    CUdeviceptr p, q;
    if (getenv("FAKE_MIG_GI_FULL") != NULL) {
        /* Another compute instance of the GPU instance holds its memory: shared, and full. */
        CHECK_EQ(cuMemAlloc_v2(&q, 2 * GiB), CUDA_ERROR_OUT_OF_MEMORY);
        printf("%s\n", check_failures == 0 ? "done" : "failed");
        fflush(stdout);
        pause();
        return 0;
    }
    CHECK_EQ(cuMemAlloc_v2(&p, 70 * GiB), CUDA_SUCCESS);
    /* The parent GPU has 71 GiB free, the instance not 2. */
    CHECK_EQ(cuMemAlloc_v2(&q, 2 * GiB), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_EQ(cuMemGetInfo_v2(&free_b, &total), CUDA_SUCCESS);
    CHECK_EQ_U64(total, 72704 * MiB);
    CHECK_EQ_U64(free_b, 72704 * MiB - 70 * GiB);
    CUmodule mod;
    CUfunction k;
    CHECK_EQ(cuModuleLoadData(&mod, "fake"), CUDA_SUCCESS);
    CHECK_EQ(cuModuleGetFunction(&k, mod, "busy_100000us"), CUDA_SUCCESS);
    for (int i = 0; i < 3; i++)
        CHECK_EQ(cuLaunchKernel(k, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL), CUDA_SUCCESS);
    CHECK_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
    printf("%s\n", check_failures == 0 ? "done" : "failed");
    fflush(stdout);
    pause();
    return 0;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* Bytes NVML reports in use on handle d. */
static uint64_t nvml_used(nvmlDevice_t d)
{
    nvmlMemory_t m = {0};
    CHECK_EQ(nvmlDeviceGetMemoryInfo(d, &m), NVML_SUCCESS);
    return m.used;
}

static void test_cuda(void)
{
    CHECK_EQ(run_self("child-cuda-plain", NULL, NULL, NULL, NULL), 0);

    nvmlGpuInstance_t a = create_gi(0, NVML_GPU_INSTANCE_PROFILE_3_SLICE, 0, 3, NVML_SUCCESS);
    nvmlGpuInstance_t b = create_gi(0, NVML_GPU_INSTANCE_PROFILE_3_SLICE, 4, 3, NVML_SUCCESS);
    nvmlComputeInstance_t ca, cb;
    CHECK_EQ(nvmlGpuInstanceCreateComputeInstance(a, NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE, &ca),
             NVML_SUCCESS);
    CHECK_EQ(nvmlGpuInstanceCreateComputeInstance(b, NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE, &cb),
             NVML_SUCCESS);
    nvmlDevice_t ma, mb;
    CHECK_EQ(nvmlDeviceGetMigDeviceHandleByIndex(gpu[0], 0, &ma), NVML_SUCCESS);
    CHECK_EQ(nvmlDeviceGetMigDeviceHandleByIndex(gpu[0], 1, &mb), NVML_SUCCESS);
    unsigned int ida, idb;
    CHECK_EQ(nvmlDeviceGetGpuInstanceId(ma, &ida), NVML_SUCCESS);
    CHECK_EQ(nvmlDeviceGetGpuInstanceId(mb, &idb), NVML_SUCCESS);
    CHECK_EQ(ida, gi_id(a));
    char ua[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    CHECK_EQ(nvmlDeviceGetUUID(ma, ua, sizeof(ua)), NVML_SUCCESS);

    fake_state st;
    char err[256];
    CHECK_EQ(fake_state_open(&st, state_dir, 0, err, sizeof(err)), 0);
    uint64_t t0 = now_ns();
    int fd;
    pid_t pid;
    char line[32] = "", visible[64];
    setenv("FAKE_MIG_WANT_UUID", ua, 1);
    /* A unique prefix names the instance too, as for GPU UUIDs. */
    snprintf(visible, sizeof(visible), "%.20s", ua);
    CHECK_EQ(run_self("child-cuda-mig", "CUDA_VISIBLE_DEVICES", visible, &fd, &pid), 0);
    FILE *f = fdopen(fd, "r");
    CHECK(fgets(line, sizeof(line), f) != NULL);
    CHECK(strcmp(line, "done\n") == 0);
    uint64_t t1 = now_ns();
    /* Memory: charged to instance A only, and to the GPU. */
    CHECK_EQ_U64(nvml_used(ma), 70 * GiB);
    CHECK_EQ_U64(nvml_used(mb), 0);
    CHECK_EQ_U64(nvml_used(gpu[0]), 70 * GiB);
    nvmlProcessInfo_t infos[4];
    unsigned int n = 4;
    CHECK_EQ(nvmlDeviceGetComputeRunningProcesses_v3(ma, &n, infos), NVML_SUCCESS);
    CHECK_EQ(n, 1);
    CHECK_EQ(infos[0].gpuInstanceId, ida);
    CHECK_EQ(infos[0].computeInstanceId, 0);
    n = 4;
    CHECK_EQ(nvmlDeviceGetComputeRunningProcesses_v3(mb, &n, infos), NVML_SUCCESS);
    CHECK_EQ(n, 0);
    /* Busy time: 300 ms on A's engine, nothing on B's or the GPU-wide one. */
    /* The compute instance's engine was new with it: its running total is this child's work. */
    CHECK(fake_state_mig_true_busy(&st, 0, FAKE_MIG_TAG(ida, 0), t0, t1 + 1) > 0);
    uint64_t busy_a = atomic_load(&st.file->mig_engines[0][st.file->mig[0].gi[ida].ci[0].engine].busy.total);
    if (busy_a < 299000000ULL || busy_a > 301000000ULL)
        fprintf(stderr, "busy on instance A: %llu ns\n", (unsigned long long)busy_a);
    CHECK(busy_a >= 299000000ULL && busy_a <= 301000000ULL);
    CHECK_EQ(atomic_load(&st.file->mig_engines[0][st.file->mig[0].gi[idb].ci[0].engine].busy.total), 0);
    CHECK_EQ(fake_state_mig_true_busy(&st, 0, FAKE_MIG_TAG(idb, 0), t0, t1 + 1), 0);
    CHECK_EQ(fake_state_true_busy(&st, 0, 0, t0, t1 + 1), 0);
    /* A process runs in it: it cannot go. */
    CHECK_EQ(nvmlComputeInstanceDestroy(ca), NVML_ERROR_IN_USE);

    /* Instance B's memory is its own too: 70 GiB more fit there, and its kernels run there. */
    char uuid_b[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    CHECK_EQ(nvmlDeviceGetUUID(mb, uuid_b, sizeof(uuid_b)), NVML_SUCCESS);
    setenv("FAKE_MIG_WANT_UUID", uuid_b, 1);
    int fd2;
    pid_t pid2;
    CHECK_EQ(run_self("child-cuda-mig", "CUDA_VISIBLE_DEVICES", uuid_b, &fd2, &pid2), 0);
    FILE *f2 = fdopen(fd2, "r");
    CHECK(fgets(line, sizeof(line), f2) != NULL);
    CHECK(strcmp(line, "done\n") == 0);
    CHECK_EQ_U64(nvml_used(ma), 70 * GiB);
    CHECK_EQ_U64(nvml_used(mb), 70 * GiB);
    CHECK_EQ_U64(nvml_used(gpu[0]), 140 * GiB);
    uint64_t busy_b = atomic_load(&st.file->mig_engines[0][st.file->mig[0].gi[idb].ci[0].engine].busy.total);
    CHECK(busy_b >= 299000000ULL && busy_b <= 301000000ULL);
    CHECK_EQ_U64(atomic_load(&st.file->mig_engines[0][st.file->mig[0].gi[ida].ci[0].engine].busy.total), busy_a);

    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    fclose(f);
    /* SIGKILL returns exactly what it held. */
    CHECK_EQ_U64(nvml_used(ma), 0);
    CHECK_EQ_U64(nvml_used(mb), 70 * GiB);
    kill(pid2, SIGKILL);
    waitpid(pid2, NULL, 0);
    fclose(f2);
    CHECK_EQ_U64(nvml_used(mb), 0);
    CHECK_EQ_U64(nvml_used(gpu[0]), 0);
    destroy_all(0);

    /*
     * Two compute instances of one 3g: SMs and engines their own, memory
     * the GPU instance's, shared.
     */
    a = create_gi(0, NVML_GPU_INSTANCE_PROFILE_3_SLICE, 0, 3, NVML_SUCCESS);
    nvmlComputeInstance_t c0, c1;
    /* The 2-slice one takes slices 0-1, the 1-slice one slice 2. */
    CHECK_EQ(nvmlGpuInstanceCreateComputeInstance(a, NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE, &c1),
             NVML_SUCCESS);
    CHECK_EQ(nvmlGpuInstanceCreateComputeInstance(a, NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE, &c0),
             NVML_SUCCESS);
    nvmlDevice_t m0, m1;
    char u0[NVML_DEVICE_UUID_V2_BUFFER_SIZE], u1[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    /* MIG devices in id order: compute instance 0 is the 2-slice one. */
    CHECK_EQ(nvmlDeviceGetMigDeviceHandleByIndex(gpu[0], 1, &m0), NVML_SUCCESS);
    CHECK_EQ(nvmlDeviceGetMigDeviceHandleByIndex(gpu[0], 0, &m1), NVML_SUCCESS);
    CHECK_EQ(nvmlDeviceGetUUID(m0, u0, sizeof(u0)), NVML_SUCCESS);
    CHECK_EQ(nvmlDeviceGetUUID(m1, u1, sizeof(u1)), NVML_SUCCESS);
    CHECK(strcmp(u0, u1) != 0);
    ida = gi_id(a);
    setenv("FAKE_MIG_WANT_UUID", u0, 1);
    setenv("FAKE_MIG_WANT_SMS", "16", 1);
    CHECK_EQ(run_self("child-cuda-mig", "CUDA_VISIBLE_DEVICES", u0, &fd, &pid), 0);
    f = fdopen(fd, "r");
    CHECK(fgets(line, sizeof(line), f) != NULL);
    CHECK(strcmp(line, "done\n") == 0);
    setenv("FAKE_MIG_WANT_UUID", u1, 1);
    setenv("FAKE_MIG_WANT_SMS", "32", 1);
    setenv("FAKE_MIG_GI_FULL", "1", 1);
    CHECK_EQ(run_self("child-cuda-mig", "CUDA_VISIBLE_DEVICES", u1, &fd2, &pid2), 0);
    f2 = fdopen(fd2, "r");
    CHECK(fgets(line, sizeof(line), f2) != NULL);
    CHECK(strcmp(line, "done\n") == 0);
    unsetenv("FAKE_MIG_GI_FULL");
    unsetenv("FAKE_MIG_WANT_SMS");
    CHECK_EQ_U64(nvml_used(m0), 70 * GiB);
    CHECK_EQ_U64(nvml_used(m1), 70 * GiB); /* the GPU instance's memory, shared */
    const fake_mig_gi *e = &st.file->mig[0].gi[ida];
    CHECK(e->ci[0].engine != e->ci[1].engine);
    uint64_t b0 = atomic_load(&st.file->mig_engines[0][e->ci[1].engine].busy.total);
    CHECK(b0 >= 299000000ULL && b0 <= 301000000ULL);
    CHECK_EQ_U64(atomic_load(&st.file->mig_engines[0][e->ci[0].engine].busy.total), 0);
    kill(pid, SIGKILL);
    kill(pid2, SIGKILL);
    waitpid(pid, NULL, 0);
    waitpid(pid2, NULL, 0);
    fclose(f);
    fclose(f2);
    CHECK_EQ_U64(nvml_used(gpu[0]), 0);
    fake_state_close(&st);
    destroy_all(0);
    unsetenv("FAKE_MIG_WANT_UUID");
}

/* Child: creates and destroys random instances on GPU 0 for ever (until killed). */
static int child_churn(void)
{
    static const unsigned int profiles[] = {0, 7, 9, 1, 2, 3, 4};
    nvmlDevice_t d;
    uint64_t rng = gpu_rand_seed((uint64_t)getpid(), 7);
    if (nvmlInit_v2() != NVML_SUCCESS || nvmlDeviceGetHandleByIndex_v2(0, &d) != NVML_SUCCESS)
        return 1;
    printf("ready\n");
    fflush(stdout);
    for (;;) {
        unsigned int profile = profiles[gpu_rand_next(&rng) % 7];
        nvmlGpuInstance_t gi;
        nvmlComputeInstance_t ci;
        if (nvmlDeviceCreateGpuInstance(d, profile, &gi) == NVML_SUCCESS) {
            nvmlGpuInstanceCreateComputeInstance(gi, NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE, &ci);
            if (gpu_rand_next(&rng) % 3 != 0) {
                nvmlComputeInstanceDestroy(ci);
                nvmlGpuInstanceDestroy(gi);
            }
        } else {
            /* Full: free one instance (compute instances first). */
            unsigned int id = 1 + (unsigned int)(gpu_rand_next(&rng) % FAKE_MIG_MAX_GI);
            if (nvmlDeviceGetGpuInstanceById(d, id, &gi) == NVML_SUCCESS) {
                for (unsigned int c = 0; c < FAKE_MIG_MAX_CI; c++)
                    if (nvmlGpuInstanceGetComputeInstanceById(gi, c, &ci) == NVML_SUCCESS)
                        nvmlComputeInstanceDestroy(ci);
                nvmlGpuInstanceDestroy(gi);
            }
        }
    }
}

/* The layout of GPU 0 in the state file obeys every rule; returns the live GPU instances. */
static int check_layout(const fake_state *st)
{
    const fake_mig_geometry *g = fake_mig_geometry_of(FAKE_MIG_H200_141GB);
    const fake_mig_gpu *m = &st->file->mig[0];
    unsigned int slices = 0, per_profile[32] = {0};
    int live = 0;
    for (unsigned int a = 1; a <= FAKE_MIG_MAX_GI; a++) {
        const fake_mig_gi *e = &m->gi[a];
        if (!atomic_load(&e->live))
            continue;
        live++;
        const fake_gi_profile *p = fake_mig_gi_profile(g, e->profile);
        CHECK(p != NULL);
        if (p == NULL)
            continue;
        bool known = false;
        for (unsigned int k = 0; k < p->nplacements; k++)
            known |= p->placements[k].start == e->start && p->placements[k].size == e->size;
        CHECK(known);
        slices += p->slices;
        per_profile[p->id]++;
        CHECK(per_profile[p->id] <= p->instances);
        for (unsigned int b = a + 1; b <= FAKE_MIG_MAX_GI; b++) {
            const fake_mig_gi *o = &m->gi[b];
            if (atomic_load(&o->live))
                CHECK(e->start + e->size <= o->start || o->start + o->size <= e->start);
        }
        unsigned int ci_slices = 0;
        for (unsigned int c = 0; c < FAKE_MIG_MAX_CI; c++)
            if (atomic_load(&e->ci[c].live))
                ci_slices += e->ci[c].size;
        CHECK(ci_slices <= p->slices);
    }
    CHECK(slices <= g->compute_slices);
    return live;
}

/*
 * Two processes change GPU 0's instances at once and are SIGKILLed at
 * random instants, 40 times: the layout obeys every rule after each kill,
 * and the next change is never blocked.
 */
static void test_kill_during_changes(void)
{
    fake_state st;
    char err[256];
    CHECK_EQ(fake_state_open(&st, state_dir, 0, err, sizeof(err)), 0);
    uint64_t rng = gpu_rand_seed(42, 1);
    int seen_live = 0;
    for (int round = 0; round < 40; round++) {
        int fds[2];
        pid_t pids[2];
        char line[16];
        FILE *f[2];
        for (int k = 0; k < 2; k++) {
            CHECK_EQ(run_self("child-churn", NULL, NULL, &fds[k], &pids[k]), 0);
            f[k] = fdopen(fds[k], "r");
            CHECK(fgets(line, sizeof(line), f[k]) != NULL);
        }
        struct timespec ts = {0, (long)(gpu_rand_next(&rng) % 20000000ULL)};
        nanosleep(&ts, NULL);
        for (int k = 0; k < 2; k++) {
            kill(pids[k], SIGKILL);
            waitpid(pids[k], NULL, 0);
            fclose(f[k]);
        }
        seen_live += check_layout(&st) > 0;
        if (round % 10 == 9)
            destroy_all(0);
    }
    /* The churn did create instances (the test exercised something). */
    CHECK(seen_live > 0);
    destroy_all(0);
    create_gi(0, NVML_GPU_INSTANCE_PROFILE_7_SLICE, 0, 7, NVML_SUCCESS);
    destroy_all(0);
    fake_state_close(&st);
}

/*
 * A version 4 state file (before MIG) that no process uses is started
 * afresh at the new size, its old contents gone.
 */
static void test_old_state_file(void)
{
    char dir[] = "/tmp/vgpu-fake-mig-old-XXXXXX", path[300], err[256];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof(path), "%s/state", dir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f == NULL)
        return;
    uint64_t head[4] = {FAKE_STATE_MAGIC, 4, 0xdeadbeef, 0xdeadbeef};
    fwrite(head, sizeof(head), 1, f);
    CHECK_EQ(fseek(f, 4 << 20, SEEK_SET), 0);
    fputc(1, f);
    fclose(f);
    fake_state st;
    CHECK_EQ(fake_state_open(&st, dir, 0, err, sizeof(err)), 0);
    CHECK_EQ(atomic_load(&st.file->version), FAKE_STATE_VERSION);
    CHECK_EQ(((const unsigned char *)st.file)[4 << 20], 0);
    CHECK_EQ(((const unsigned char *)st.file)[16], 0); /* was 0xef */
    fake_state_close(&st);
    struct stat sb;
    CHECK(stat(path, &sb) == 0 && (size_t)sb.st_size == sizeof(fake_state_file));
    unlink(path);
    rmdir(dir);
}

/* The capability minor an access file names; -1 when it does not exist. */
static long cap_file_minor(const char *rel)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/driver/nvidia/capabilities/%s/access", proc_root, rel);
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return -1;
    long minor = -1;
    if (fscanf(f, "DeviceFileMinor: %ld", &minor) != 1)
        minor = -2;
    fclose(f);
    return minor;
}

/* Creating an instance writes the driver's capability files under
 * mig_proc_root, destroying it removes them; each names its own minor. */
static void test_capability_files(void)
{
    nvmlGpuInstance_t a = create_gi(0, NVML_GPU_INSTANCE_PROFILE_3_SLICE, 4, 3, NVML_SUCCESS);
    CHECK(a != NULL);
    char gi[64], ci[80];
    snprintf(gi, sizeof(gi), "gpu0/mig/gi%u", gi_id(a));
    long gim = cap_file_minor(gi);
    CHECK(gim > 0);
    nvmlComputeInstanceProfileInfo_t cip;
    CHECK_EQ(nvmlGpuInstanceGetComputeInstanceProfileInfo(a, NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE,
                                                           NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED,
                                                           &cip), NVML_SUCCESS);
    nvmlComputeInstance_t c;
    CHECK_EQ(nvmlGpuInstanceCreateComputeInstance(a, cip.id, &c), NVML_SUCCESS);
    nvmlComputeInstanceInfo_t info;
    CHECK_EQ(nvmlComputeInstanceGetInfo(c, &info), NVML_SUCCESS);
    snprintf(ci, sizeof(ci), "%s/ci%u", gi, info.id);
    long cim = cap_file_minor(ci);
    CHECK(cim > 0 && cim != gim);
    CHECK_EQ(nvmlComputeInstanceDestroy(c), NVML_SUCCESS);
    CHECK_EQ(cap_file_minor(ci), -1);
    CHECK_EQ(cap_file_minor(gi), gim);
    CHECK_EQ(nvmlGpuInstanceDestroy(a), NVML_SUCCESS);
    CHECK_EQ(cap_file_minor(gi), -1);
    /* Another GPU's instance of the same id has another minor. */
    nvmlGpuInstance_t b = create_gi(1, NVML_GPU_INSTANCE_PROFILE_1_SLICE, 0, 1, NVML_SUCCESS);
    snprintf(gi, sizeof(gi), "gpu1/mig/gi%u", gi_id(b));
    CHECK(cap_file_minor(gi) > 0 && cap_file_minor(gi) != gim);
    CHECK_EQ(nvmlGpuInstanceDestroy(b), NVML_SUCCESS);
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "child-create") == 0)
        return child_create();
    if (argc == 2 && strcmp(argv[1], "child-churn") == 0)
        return child_churn();
    if (argc == 2 && strcmp(argv[1], "child-hold-lock") == 0)
        return child_hold_lock();
    if (argc == 2 && strncmp(argv[1], "child-cuda", 10) == 0)
        return child_cuda(argv[1]);
    if (mkdtemp(state_dir) == NULL)
        return 2;
    setenv("VGPU_FAKE_STATE_DIR", state_dir, 1);
    if (mkdtemp(proc_root) == NULL)
        return 2;
    setenv("VGPU_FAKE_MIG_PROC_ROOT", proc_root, 1);
    setenv("VGPU_FAKE_GPU_COUNT", "6", 1);
    setenv("VGPU_FAKE_GPU_MEMORY", "141Gi", 1);
    setenv("VGPU_FAKE_GPU_PRODUCT", "NVIDIA H200 141GB HBM3e", 1);
    setenv("VGPU_FAKE_MIG_MODE", "enabled", 1);
    setenv("VGPU_FAKE_GPU0_MIG_GEOMETRY", "h200-141gb", 1);
    setenv("VGPU_FAKE_GPU1_MIG_GEOMETRY", "h100-80gb", 1);
    setenv("VGPU_FAKE_GPU2_MIG_GEOMETRY", "a100-80gb", 1);
    setenv("VGPU_FAKE_GPU3_MIG_GEOMETRY", "a100-40gb", 1);
    setenv("VGPU_FAKE_GPU4_MIG_GEOMETRY", "h200-141gb", 1);
    setenv("VGPU_FAKE_GPU4_MIG_MODE", "enable-pending", 1);
    setenv("VGPU_FAKE_GPU5_MIG_MODE", "disabled", 1);
    unsetenv("VGPU_FAKE_CONFIG");
    unsetenv("CUDA_VISIBLE_DEVICES");

    CHECK_EQ(nvmlInit_v2(), NVML_SUCCESS);
    for (unsigned int i = 0; i < 6; i++)
        CHECK_EQ(nvmlDeviceGetHandleByIndex_v2(i, &gpu[i]), NVML_SUCCESS);
    test_old_state_file();
    test_config();
    test_geometries();
    test_create_destroy();
    test_capability_files();
    test_mig_handles();
    test_cross_process();
    test_kill_during_changes();
    test_cuda();
    CHECK_EQ(nvmlShutdown(), NVML_SUCCESS);
    char path[300];
    snprintf(path, sizeof(path), "%s/state", state_dir);
    unlink(path);
    snprintf(path, sizeof(path), "%s/xid-events", state_dir);
    unlink(path);
    rmdir(state_dir);
    for (int g = 0; g < 6; g++) {
        snprintf(path, sizeof(path), "%s/driver/nvidia/capabilities/gpu%d/mig", proc_root, g);
        rmdir(path);
        snprintf(path, sizeof(path), "%s/driver/nvidia/capabilities/gpu%d", proc_root, g);
        rmdir(path);
    }
    snprintf(path, sizeof(path), "%s/driver/nvidia/capabilities", proc_root);
    rmdir(path);
    snprintf(path, sizeof(path), "%s/driver/nvidia", proc_root);
    rmdir(path);
    snprintf(path, sizeof(path), "%s/driver", proc_root);
    rmdir(path);
    CHECK_EQ(rmdir(proc_root), 0); /* every capability file was removed */
    return check_report("fake_mig_test");
}
