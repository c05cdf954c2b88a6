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
 * fake_nvml_mig.c - the fake NVML's MIG entry points: MIG mode from the
 * configuration, GPU- and compute-instance profiles and placements of the
 * GPU's geometry (fake_mig.c), instances created and destroyed in the shared
 * state file (fake_mig_state.c) so that every process sees them, and MIG
 * device handles with their own UUID and memory.
 *
 * Order of checks, as NVIDIA's library: initialised, then the handle, then
 * the GPU's MIG support and mode (NOT_SUPPORTED), then the other arguments.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fake_mig.h"
#include "fake_nvml_int.h"
#include "fake_nvml_mig.h"
#include "fake_state.h"

#define NVML_MAGIC_GI 0x4e564901u
#define NVML_MAGIC_CI 0x4e564301u
/* What nvmlDeviceGetMaxMigDeviceCount reports for a MIG-capable GPU. */
#define MAX_MIG_DEVICES 7

struct nvmlGpuInstance_st {
    uint32_t magic;
    int index;
    unsigned int gi;
};

struct nvmlComputeInstance_st {
    uint32_t magic;
    int index;
    unsigned int gi, ci;
};

/* Handles are fixed per (GPU, ids): a handle names the instance with those ids. */
static struct nvmlGpuInstance_st gi_handles[FAKE_MAX_GPUS][FAKE_MIG_MAX_GI + 1];
static struct nvmlComputeInstance_st ci_handles[FAKE_MAX_GPUS][FAKE_MIG_MAX_GI + 1][FAKE_MIG_MAX_CI];
static struct nvmlDevice_st mig_handles[FAKE_MAX_GPUS][FAKE_MIG_MAX_GI + 1][FAKE_MIG_MAX_CI];

#define REQUIRE_INIT()                             \
    do {                                           \
        if (!fake_nvml_initialized())              \
            return NVML_ERROR_UNINITIALIZED;       \
    } while (0)

static const fake_gpu *gpu_of(int i)
{
    return &fake_nvml_config()->gpus[i];
}

static fake_mig_gpu *table_of(int i)
{
    return &fake_nvml_state()->file->mig[gpu_of(i)->phys];
}

static const fake_mig_geometry *geometry_of(int i)
{
    return fake_mig_geometry_of(gpu_of(i)->mig_geometry);
}

static bool mig_on(int i)
{
    return geometry_of(i) != NULL && gpu_of(i)->mig_current == NVML_DEVICE_MIG_ENABLE;
}

/* The live GPU-instance entry gi of GPU i, or NULL. */
static fake_mig_gi *live_gi(int i, unsigned int gi)
{
    if (gi < 1 || gi > FAKE_MIG_MAX_GI)
        return NULL;
    fake_mig_gi *e = &table_of(i)->gi[gi];
    return atomic_load(&e->live) ? e : NULL;
}

static fake_mig_ci *live_ci(int i, unsigned int gi, unsigned int ci)
{
    fake_mig_gi *e = live_gi(i, gi);
    if (e == NULL || ci >= FAKE_MIG_MAX_CI || !atomic_load(&e->ci[ci].live))
        return NULL;
    return &e->ci[ci];
}

/* Fills every handle once, so that handing one out never writes (threads may race). */
static void init_handles(void)
{
    for (int i = 0; i < FAKE_MAX_GPUS; i++) {
        for (unsigned int gi = 0; gi <= FAKE_MIG_MAX_GI; gi++) {
            gi_handles[i][gi] = (struct nvmlGpuInstance_st){.magic = NVML_MAGIC_GI, .index = i,
                                                           .gi = gi};
            for (unsigned int ci = 0; ci < FAKE_MIG_MAX_CI; ci++) {
                ci_handles[i][gi][ci] = (struct nvmlComputeInstance_st){
                    .magic = NVML_MAGIC_CI, .index = i, .gi = gi, .ci = ci};
                mig_handles[i][gi][ci] = (struct nvmlDevice_st){
                    .magic = NVML_MAGIC_MIG, .index = i, .gi = gi, .ci = ci};
            }
        }
    }
}

static pthread_once_t handles_once = PTHREAD_ONCE_INIT;

static nvmlGpuInstance_t gi_handle(int i, unsigned int gi)
{
    pthread_once(&handles_once, init_handles);
    return &gi_handles[i][gi];
}

static nvmlComputeInstance_t ci_handle(int i, unsigned int gi, unsigned int ci)
{
    pthread_once(&handles_once, init_handles);
    return &ci_handles[i][gi][ci];
}

static nvmlDevice_t mig_handle(int i, unsigned int gi, unsigned int ci)
{
    pthread_once(&handles_once, init_handles);
    return &mig_handles[i][gi][ci];
}

/* GPU index of a valid GPU-instance handle whose instance exists, else -1. */
static int gi_index(nvmlGpuInstance_t h)
{
    const fake_config *cfg = fake_nvml_config();
    if (h == NULL || h < &gi_handles[0][0] || h > &gi_handles[FAKE_MAX_GPUS - 1][FAKE_MIG_MAX_GI] ||
        h->magic != NVML_MAGIC_GI || h->index < 0 || h->index >= cfg->gpu_count ||
        live_gi(h->index, h->gi) == NULL)
        return -1;
    return h->index;
}

static int ci_index(nvmlComputeInstance_t h)
{
    const fake_config *cfg = fake_nvml_config();
    if (h == NULL || h < &ci_handles[0][0][0] ||
        h > &ci_handles[FAKE_MAX_GPUS - 1][FAKE_MIG_MAX_GI][FAKE_MIG_MAX_CI - 1] ||
        h->magic != NVML_MAGIC_CI || h->index < 0 || h->index >= cfg->gpu_count ||
        live_ci(h->index, h->gi, h->ci) == NULL)
        return -1;
    return h->index;
}

int fake_nvml_mig_index(nvmlDevice_t d, uint32_t *mig)
{
    const fake_config *cfg = fake_nvml_config();
    if (d == NULL || d < &mig_handles[0][0][0] ||
        d > &mig_handles[FAKE_MAX_GPUS - 1][FAKE_MIG_MAX_GI][FAKE_MIG_MAX_CI - 1] ||
        d->magic != NVML_MAGIC_MIG || d->index < 0 || d->index >= cfg->gpu_count ||
        live_ci(d->index, d->gi, d->ci) == NULL)
        return -1;
    *mig = FAKE_MIG_TAG(d->gi, d->ci);
    return d->index;
}

uint64_t fake_nvml_mig_memory(int i, unsigned int gi)
{
    fake_mig_gi *e = live_gi(i, gi);
    const fake_gi_profile *p = e != NULL ? fake_mig_gi_profile(geometry_of(i), e->profile) : NULL;
    return p != NULL ? p->memory_mb << 20 : 0;
}

int fake_nvml_mig_describe(int i, uint32_t mig, fake_nvml_mig_desc *out)
{
    const fake_mig_geometry *g = geometry_of(i);
    fake_mig_gi *e = live_gi(i, FAKE_MIG_TAG_GI(mig));
    fake_mig_ci *c = live_ci(i, FAKE_MIG_TAG_GI(mig), FAKE_MIG_TAG_CI(mig));
    const fake_gi_profile *p = e != NULL ? fake_mig_gi_profile(g, e->profile) : NULL;
    fake_ci_profile cp;
    if (p == NULL || c == NULL || fake_mig_ci_profile(g, p, c->profile, &cp) != 0)
        return -1;
    *out = (fake_nvml_mig_desc){.profile = p->name,
                                .multiprocessors = cp.multiprocessors,
                                .memory_mb = p->memory_mb,
                                .gi_slices = p->slices,
                                .ci_slices = cp.slices,
                                .copy_engines = p->copy_engines,
                                .decoders = p->decoders,
                                .encoders = p->encoders,
                                .jpegs = p->jpegs,
                                .ofas = p->ofas};
    return 0;
}

nvmlReturn_t fake_nvml_mig_by_uuid(const char *uuid, nvmlDevice_t *device)
{
    const fake_config *cfg = fake_nvml_config();
    if (strncasecmp(uuid, "MIG-", 4) != 0)
        return NVML_ERROR_NOT_FOUND;
    for (int i = 0; i < cfg->gpu_count; i++) {
        if (!mig_on(i))
            continue;
        for (unsigned int gi = 1; gi <= FAKE_MIG_MAX_GI; gi++) {
            for (unsigned int ci = 0; ci < FAKE_MIG_MAX_CI; ci++) {
                char u[48];
                unsigned char b[16];
                if (live_ci(i, gi, ci) == NULL)
                    continue;
                fake_mig_uuid(gpu_of(i), gi, ci, u, b);
                if (strcasecmp(u, uuid) == 0) {
                    *device = mig_handle(i, gi, ci);
                    return NVML_SUCCESS;
                }
            }
        }
    }
    return NVML_ERROR_NOT_FOUND;
}

/* A GPU handle: i its index; INVALID_ARGUMENT for anything else. */
#define REQUIRE_GPU(d, i)                                \
    int i;                                               \
    do {                                                 \
        REQUIRE_INIT();                                  \
        if ((i = fake_nvml_gpu_index(d)) < 0)            \
            return NVML_ERROR_INVALID_ARGUMENT;          \
    } while (0)

/* A GPU in MIG mode. */
#define REQUIRE_MIG_GPU(d, i)                            \
    REQUIRE_GPU(d, i);                                   \
    do {                                                 \
        if (!mig_on(i))                                  \
            return NVML_ERROR_NOT_SUPPORTED;             \
    } while (0)

#define REQUIRE_GI(h, i)                                 \
    int i;                                               \
    do {                                                 \
        REQUIRE_INIT();                                  \
        if ((i = gi_index(h)) < 0)                       \
            return NVML_ERROR_INVALID_ARGUMENT;          \
    } while (0)

#define REQUIRE_CI(h, i)                                 \
    int i;                                               \
    do {                                                 \
        REQUIRE_INIT();                                  \
        if ((i = ci_index(h)) < 0)                       \
            return NVML_ERROR_INVALID_ARGUMENT;          \
    } while (0)

/* ------------------------------------------------------------------------ */
/* Mode                                                                     */
/* ------------------------------------------------------------------------ */

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *currentMode,
                                  unsigned int *pendingMode)
{
    REQUIRE_GPU(device, i);
    if (geometry_of(i) == NULL)
        return NVML_ERROR_NOT_SUPPORTED;
    if (currentMode == NULL || pendingMode == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    *currentMode = (unsigned int)gpu_of(i)->mig_current;
    *pendingMode = (unsigned int)gpu_of(i)->mig_pending;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int *count)
{
    REQUIRE_GPU(device, i);
    if (count == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    *count = geometry_of(i) != NULL ? MAX_MIG_DEVICES : 0;
    return NVML_SUCCESS;
}

/* ------------------------------------------------------------------------ */
/* GPU-instance profiles and placements                                     */
/* ------------------------------------------------------------------------ */

/* The profile of GPU i in MIG mode; NVML's answer for a profile it lacks otherwise. */
static nvmlReturn_t gi_profile(int i, unsigned int profile, const fake_gi_profile **out)
{
    if (profile >= NVML_GPU_INSTANCE_PROFILE_COUNT)
        return NVML_ERROR_INVALID_ARGUMENT;
    *out = fake_mig_gi_profile(geometry_of(i), profile);
    return *out != NULL ? NVML_SUCCESS : NVML_ERROR_NOT_SUPPORTED;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfo(nvmlDevice_t device, unsigned int profile,
                                                 nvmlGpuInstanceProfileInfo_t *info)
{
    const fake_gi_profile *p;
    REQUIRE_MIG_GPU(device, i);
    nvmlReturn_t r = gi_profile(i, profile, &p);
    if (r != NVML_SUCCESS)
        return r;
    if (info == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    const fake_mig_geometry *g = geometry_of(i);
    *info = (nvmlGpuInstanceProfileInfo_t){
        .id = p->id, .isP2pSupported = g->p2p, .sliceCount = p->slices,
        .instanceCount = p->instances, .multiprocessorCount = p->slices * g->sm_per_slice,
        .copyEngineCount = p->copy_engines, .decoderCount = p->decoders,
        .encoderCount = p->encoders, .jpegCount = p->jpegs, .ofaCount = p->ofas,
        .memorySizeMB = p->memory_mb};
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfoV(nvmlDevice_t device, unsigned int profile,
                                                  nvmlGpuInstanceProfileInfo_v2_t *info)
{
    const fake_gi_profile *p;
    REQUIRE_MIG_GPU(device, i);
    nvmlReturn_t r = gi_profile(i, profile, &p);
    if (r != NVML_SUCCESS)
        return r;
    if (info == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    const fake_mig_geometry *g = geometry_of(i);
    unsigned int mps = p->slices * g->sm_per_slice;
    if (info->version == nvmlGpuInstanceProfileInfo_v2) {
        *info = (nvmlGpuInstanceProfileInfo_v2_t){
            .version = nvmlGpuInstanceProfileInfo_v2, .id = p->id, .isP2pSupported = g->p2p,
            .sliceCount = p->slices, .instanceCount = p->instances, .multiprocessorCount = mps,
            .copyEngineCount = p->copy_engines, .decoderCount = p->decoders,
            .encoderCount = p->encoders, .jpegCount = p->jpegs, .ofaCount = p->ofas,
            .memorySizeMB = p->memory_mb};
        snprintf(info->name, sizeof(info->name), "MIG %s", p->name);
        return NVML_SUCCESS;
    }
    if (info->version == nvmlGpuInstanceProfileInfo_v3) {
        nvmlGpuInstanceProfileInfo_v3_t *v3 = (nvmlGpuInstanceProfileInfo_v3_t *)(void *)info;
        *v3 = (nvmlGpuInstanceProfileInfo_v3_t){
            .version = nvmlGpuInstanceProfileInfo_v3, .id = p->id, .sliceCount = p->slices,
            .instanceCount = p->instances, .multiprocessorCount = mps,
            .copyEngineCount = p->copy_engines, .decoderCount = p->decoders,
            .encoderCount = p->encoders, .jpegCount = p->jpegs, .ofaCount = p->ofas,
            .memorySizeMB = p->memory_mb, .capabilities = g->p2p ? 0x1u : 0u};
        snprintf(v3->name, sizeof(v3->name), "MIG %s", p->name);
        return NVML_SUCCESS;
    }
    return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
}

static nvmlReturn_t gi_placements(nvmlDevice_t device, unsigned int profileId,
                                  nvmlGpuInstancePlacement_t *placements, unsigned int *count)
{
    const fake_gi_profile *p;
    REQUIRE_MIG_GPU(device, i);
    nvmlReturn_t r = gi_profile(i, profileId, &p);
    if (r != NVML_SUCCESS)
        return r;
    if (count == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    /* NULL placements: the count only. */
    if (placements == NULL) {
        *count = p->nplacements;
        return NVML_SUCCESS;
    }
    if (*count < p->nplacements) {
        *count = p->nplacements;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    for (unsigned int k = 0; k < p->nplacements; k++)
        placements[k] = (nvmlGpuInstancePlacement_t){p->placements[k].start, p->placements[k].size};
    *count = p->nplacements;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstancePossiblePlacements(nvmlDevice_t device,
                                                        unsigned int profileId,
                                                        nvmlGpuInstancePlacement_t *placements,
                                                        unsigned int *count)
{
    return gi_placements(device, profileId, placements, count);
}

nvmlReturn_t nvmlDeviceGetGpuInstancePossiblePlacements_v2(nvmlDevice_t device,
                                                           unsigned int profileId,
                                                           nvmlGpuInstancePlacement_t *placements,
                                                           unsigned int *count)
{
    return gi_placements(device, profileId, placements, count);
}

nvmlReturn_t nvmlDeviceGetGpuInstanceRemainingCapacity(nvmlDevice_t device,
                                                       unsigned int profileId, unsigned int *count)
{
    const fake_gi_profile *p;
    REQUIRE_MIG_GPU(device, i);
    nvmlReturn_t r = gi_profile(i, profileId, &p);
    if (r != NVML_SUCCESS)
        return r;
    if (count == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    /* How many more instances of the profile could be created, one after the other. */
    const fake_mig_geometry *g = geometry_of(i);
    const fake_mig_gpu *m = table_of(i);
    unsigned int used_slices = 0, same = 0, free_ids = 0;
    unsigned char taken[FAKE_MIG_MAX_PLACEMENTS * 2] = {0};
    for (unsigned int id = 1; id <= FAKE_MIG_MAX_GI; id++) {
        const fake_mig_gi *e = &m->gi[id];
        if (!atomic_load(&e->live)) {
            free_ids++;
            continue;
        }
        const fake_gi_profile *ep = fake_mig_gi_profile(g, e->profile);
        used_slices += ep != NULL ? ep->slices : e->size;
        same += e->profile == p->id;
        for (unsigned int s = e->start; s < e->start + e->size && s < sizeof(taken); s++)
            taken[s] = 1;
    }
    unsigned int n = 0;
    for (unsigned int k = 0; k < p->nplacements; k++) {
        fake_mig_range pl = p->placements[k];
        bool ok = used_slices + p->slices <= g->compute_slices && same + n < p->instances &&
                  n < free_ids;
        for (unsigned int s = pl.start; ok && s < pl.start + pl.size && s < sizeof(taken); s++)
            ok = !taken[s];
        if (!ok)
            continue;
        for (unsigned int s = pl.start; s < pl.start + pl.size && s < sizeof(taken); s++)
            taken[s] = 1;
        used_slices += p->slices;
        n++;
    }
    *count = n;
    return NVML_SUCCESS;
}

/* ------------------------------------------------------------------------ */
/* GPU instances                                                            */
/* ------------------------------------------------------------------------ */

/*
 * MIG capability files (key mig_proc_root): the NVIDIA driver publishes, per
 * GPU instance and compute instance, <procfs>/driver/nvidia/capabilities/
 * gpu<minor>/mig/gi<id>/access (and .../gi<id>/ci<id>/access) naming the
 * minor of /dev/nvidia-caps/nvidia-cap<N> that grants access to it. The fake
 * writes them under mig_proc_root when it creates an instance and removes
 * them when it destroys it; N is a function of GPU, GI and CI alone.
 */
static int cap_path(char *buf, size_t len, int phys, unsigned int gi, int ci)
{
    const char *root = fake_nvml_config()->mig_proc_root;
    int n = ci < 0 ? snprintf(buf, len, "%s/driver/nvidia/capabilities/gpu%d/mig/gi%u", root, phys, gi)
                   : snprintf(buf, len, "%s/driver/nvidia/capabilities/gpu%d/mig/gi%u/ci%d", root,
                              phys, gi, ci);
    return root[0] == '\0' || n < 0 || (size_t)n >= len ? -1 : 0;
}

/* The capability minor of GI gi (ci < 0) or of its CI ci on GPU phys. */
static unsigned int cap_minor(int phys, unsigned int gi, int ci)
{
    return 1 + ((unsigned int)phys * (FAKE_MIG_MAX_GI + 1) + gi) * (FAKE_MIG_MAX_CI + 1) +
           (unsigned int)(ci + 1);
}

/* mkdir -p of dir; errors show up when the file is written. */
static void make_dirs(char *dir)
{
    for (char *p = dir + 1; *p != '\0'; p++) {
        if (*p == '/') {
            *p = '\0';
            mkdir(dir, 0755);
            *p = '/';
        }
    }
    mkdir(dir, 0755);
}

static void cap_write(int phys, unsigned int gi, int ci)
{
    char dir[512], file[540];
    if (cap_path(dir, sizeof(dir), phys, gi, ci) != 0)
        return;
    make_dirs(dir);
    snprintf(file, sizeof(file), "%s/access", dir);
    FILE *f = fopen(file, "we");
    if (f == NULL)
        return;
    fprintf(f, "DeviceFileMinor: %u\nDeviceFileMode: 292\nDeviceFileModify: 1\n",
            cap_minor(phys, gi, ci));
    fclose(f);
}

static void cap_remove(int phys, unsigned int gi, int ci)
{
    char dir[512], file[540];
    if (cap_path(dir, sizeof(dir), phys, gi, ci) != 0)
        return;
    snprintf(file, sizeof(file), "%s/access", dir);
    unlink(file);
    rmdir(dir);
}

/*
 * Makes GPU i's capability files match its instances in the shared state,
 * under the GPU's MIG lock: the files follow the state, so neither a process
 * killed between a change and its files nor two processes changing the GPU
 * at once leave a file of a gone instance or miss one of a live instance
 * (any later change of the GPU repairs what a kill left).
 */
static void cap_sync(int i)
{
    int phys = gpu_of(i)->phys;
    if (fake_nvml_config()->mig_proc_root[0] == '\0' ||
        fake_state_mig_lock(fake_nvml_state(), phys, true) != 0)
        return;
    for (unsigned int gi = 1; gi <= FAKE_MIG_MAX_GI; gi++) {
        bool gi_live = live_gi(i, gi) != NULL;
        for (unsigned int ci = 0; ci < FAKE_MIG_MAX_CI; ci++) {
            if (gi_live && live_ci(i, gi, ci) != NULL)
                cap_write(phys, gi, (int)ci);
            else
                cap_remove(phys, gi, (int)ci);
        }
        if (gi_live)
            cap_write(phys, gi, -1);
        else
            cap_remove(phys, gi, -1);
    }
    fake_state_mig_lock(fake_nvml_state(), phys, false);
}

static nvmlReturn_t create_gi(nvmlDevice_t device, unsigned int profileId,
                              const nvmlGpuInstancePlacement_t *placement,
                              nvmlGpuInstance_t *gpuInstance, bool with_placement)
{
    const fake_gi_profile *p;
    unsigned int id;
    REQUIRE_MIG_GPU(device, i);
    nvmlReturn_t r = gi_profile(i, profileId, &p);
    if (r == NVML_ERROR_NOT_SUPPORTED)
        r = NVML_ERROR_INVALID_ARGUMENT;
    if (r != NVML_SUCCESS)
        return r;
    if (gpuInstance == NULL || (with_placement && placement == NULL))
        return NVML_ERROR_INVALID_ARGUMENT;
    fake_mig_range pl = {0, 0};
    if (with_placement)
        pl = (fake_mig_range){placement->start, placement->size};
    r = (nvmlReturn_t)fake_mig_create_gi(fake_nvml_state(), gpu_of(i), profileId,
                                         with_placement ? &pl : NULL, &id);
    if (r == NVML_SUCCESS) {
        *gpuInstance = gi_handle(i, id);
        cap_sync(i);
    }
    return r;
}

nvmlReturn_t nvmlDeviceCreateGpuInstance(nvmlDevice_t device, unsigned int profileId,
                                         nvmlGpuInstance_t *gpuInstance)
{
    return create_gi(device, profileId, NULL, gpuInstance, false);
}

nvmlReturn_t nvmlDeviceCreateGpuInstanceWithPlacement(nvmlDevice_t device, unsigned int profileId,
                                                      const nvmlGpuInstancePlacement_t *placement,
                                                      nvmlGpuInstance_t *gpuInstance)
{
    return create_gi(device, profileId, placement, gpuInstance, true);
}

nvmlReturn_t nvmlGpuInstanceDestroy(nvmlGpuInstance_t gpuInstance)
{
    REQUIRE_GI(gpuInstance, i);
    nvmlReturn_t r =
        (nvmlReturn_t)fake_mig_destroy_gi(fake_nvml_state(), gpu_of(i), gpuInstance->gi);
    if (r == NVML_SUCCESS)
        cap_sync(i);
    return r;
}

nvmlReturn_t nvmlDeviceGetGpuInstances(nvmlDevice_t device, unsigned int profileId,
                                       nvmlGpuInstance_t *gpuInstances, unsigned int *count)
{
    const fake_gi_profile *p;
    REQUIRE_MIG_GPU(device, i);
    nvmlReturn_t r = gi_profile(i, profileId, &p);
    if (r != NVML_SUCCESS)
        return r;
    if (gpuInstances == NULL || count == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    /* The buffer holds the profile's instance count, as NVML's callers size it. */
    unsigned int n = 0;
    for (unsigned int id = 1; id <= FAKE_MIG_MAX_GI && n < p->instances; id++) {
        fake_mig_gi *e = live_gi(i, id);
        if (e != NULL && e->profile == profileId)
            gpuInstances[n++] = gi_handle(i, id);
    }
    *count = n;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceById(nvmlDevice_t device, unsigned int id,
                                          nvmlGpuInstance_t *gpuInstance)
{
    REQUIRE_MIG_GPU(device, i);
    if (gpuInstance == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (live_gi(i, id) == NULL)
        return NVML_ERROR_NOT_FOUND;
    *gpuInstance = gi_handle(i, id);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpuInstanceGetInfo(nvmlGpuInstance_t gpuInstance, nvmlGpuInstanceInfo_t *info)
{
    REQUIRE_GI(gpuInstance, i);
    if (info == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    fake_mig_gi *e = live_gi(i, gpuInstance->gi);
    *info = (nvmlGpuInstanceInfo_t){.device = fake_nvml_device(i),
                                    .id = gpuInstance->gi,
                                    .profileId = e->profile,
                                    .placement = {e->start, e->size}};
    return NVML_SUCCESS;
}

/* ------------------------------------------------------------------------ */
/* Compute instances                                                        */
/* ------------------------------------------------------------------------ */

/* Compute-instance profile of GPU instance h (valid, of GPU i). */
static nvmlReturn_t ci_profile(int i, nvmlGpuInstance_t h, unsigned int profile,
                               unsigned int engProfile, fake_ci_profile *out,
                               const fake_gi_profile **gp)
{
    if (profile >= NVML_COMPUTE_INSTANCE_PROFILE_COUNT ||
        engProfile >= NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_COUNT)
        return NVML_ERROR_INVALID_ARGUMENT;
    const fake_mig_geometry *g = geometry_of(i);
    *gp = fake_mig_gi_profile(g, live_gi(i, h->gi)->profile);
    return fake_mig_ci_profile(g, *gp, profile, out) == 0 ? NVML_SUCCESS
                                                          : NVML_ERROR_NOT_SUPPORTED;
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfo(nvmlGpuInstance_t gpuInstance,
                                                          unsigned int profile,
                                                          unsigned int engProfile,
                                                          nvmlComputeInstanceProfileInfo_t *info)
{
    fake_ci_profile cp;
    const fake_gi_profile *gp;
    REQUIRE_GI(gpuInstance, i);
    nvmlReturn_t r = ci_profile(i, gpuInstance, profile, engProfile, &cp, &gp);
    if (r != NVML_SUCCESS)
        return r;
    if (info == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    *info = (nvmlComputeInstanceProfileInfo_t){
        .id = cp.id, .sliceCount = cp.slices, .instanceCount = cp.instances,
        .multiprocessorCount = cp.multiprocessors, .sharedCopyEngineCount = gp->copy_engines,
        .sharedDecoderCount = gp->decoders, .sharedEncoderCount = gp->encoders,
        .sharedJpegCount = gp->jpegs, .sharedOfaCount = gp->ofas};
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfoV(nvmlGpuInstance_t gpuInstance,
                                                           unsigned int profile,
                                                           unsigned int engProfile,
                                                           nvmlComputeInstanceProfileInfo_v2_t *info)
{
    fake_ci_profile cp;
    const fake_gi_profile *gp;
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
    REQUIRE_GI(gpuInstance, i);
    nvmlReturn_t r = ci_profile(i, gpuInstance, profile, engProfile, &cp, &gp);
    if (r != NVML_SUCCESS)
        return r;
    if (info == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    /* nvidia-smi's names: "MIG 3g.71gb" for the full compute instance, "MIG 1c.3g.71gb" else. */
    if (cp.slices == gp->slices)
        snprintf(name, sizeof(name), "MIG %s", gp->name);
    else
        snprintf(name, sizeof(name), "MIG %uc.%s", cp.slices, gp->name);
    nvmlComputeInstanceProfileInfo_v2_t v = {
        .version = info->version, .id = cp.id, .sliceCount = cp.slices,
        .instanceCount = cp.instances, .multiprocessorCount = cp.multiprocessors,
        .sharedCopyEngineCount = gp->copy_engines, .sharedDecoderCount = gp->decoders,
        .sharedEncoderCount = gp->encoders, .sharedJpegCount = gp->jpegs,
        .sharedOfaCount = gp->ofas};
    memcpy(v.name, name, sizeof(v.name));
    if (info->version == nvmlComputeInstanceProfileInfo_v2) {
        *info = v;
        return NVML_SUCCESS;
    }
    if (info->version == nvmlComputeInstanceProfileInfo_v3) {
        /* v3 is v2 plus capabilities (no graphics: 0). */
        nvmlComputeInstanceProfileInfo_v3_t *v3 = (nvmlComputeInstanceProfileInfo_v3_t *)(void *)info;
        memcpy(v3, &v, sizeof(v));
        v3->capabilities = 0;
        return NVML_SUCCESS;
    }
    return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstancePossiblePlacements(
    nvmlGpuInstance_t gpuInstance, unsigned int profileId,
    nvmlComputeInstancePlacement_t *placements, unsigned int *count)
{
    fake_ci_profile cp;
    const fake_gi_profile *gp;
    REQUIRE_GI(gpuInstance, i);
    nvmlReturn_t r = ci_profile(i, gpuInstance, profileId, 0, &cp, &gp);
    if (r != NVML_SUCCESS)
        return r;
    if (count == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (placements == NULL) {
        *count = cp.nplacements;
        return NVML_SUCCESS;
    }
    if (*count < cp.nplacements) {
        *count = cp.nplacements;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    for (unsigned int k = 0; k < cp.nplacements; k++)
        placements[k] = (nvmlComputeInstancePlacement_t){cp.placements[k].start,
                                                         cp.placements[k].size};
    *count = cp.nplacements;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstanceRemainingCapacity(nvmlGpuInstance_t gpuInstance,
                                                                unsigned int profileId,
                                                                unsigned int *count)
{
    fake_ci_profile cp;
    const fake_gi_profile *gp;
    REQUIRE_GI(gpuInstance, i);
    nvmlReturn_t r = ci_profile(i, gpuInstance, profileId, 0, &cp, &gp);
    if (r != NVML_SUCCESS)
        return r;
    if (count == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    const fake_mig_gi *e = live_gi(i, gpuInstance->gi);
    unsigned char taken[FAKE_MIG_MAX_CI] = {0};
    unsigned int free_ids = 0, n = 0;
    for (unsigned int c = 0; c < FAKE_MIG_MAX_CI; c++) {
        if (!atomic_load(&e->ci[c].live)) {
            free_ids++;
            continue;
        }
        for (unsigned int s = e->ci[c].start; s < e->ci[c].start + e->ci[c].size && s < FAKE_MIG_MAX_CI; s++)
            taken[s] = 1;
    }
    for (unsigned int k = 0; k < cp.nplacements && n < free_ids; k++) {
        bool ok = true;
        for (unsigned int s = cp.placements[k].start; s < cp.placements[k].start + cp.placements[k].size; s++)
            ok = ok && !taken[s];
        if (!ok)
            continue;
        for (unsigned int s = cp.placements[k].start; s < cp.placements[k].start + cp.placements[k].size; s++)
            taken[s] = 1;
        n++;
    }
    *count = n;
    return NVML_SUCCESS;
}

static nvmlReturn_t create_ci(nvmlGpuInstance_t gpuInstance, unsigned int profileId,
                              const nvmlComputeInstancePlacement_t *placement,
                              nvmlComputeInstance_t *computeInstance, bool with_placement)
{
    fake_ci_profile cp;
    const fake_gi_profile *gp;
    unsigned int id;
    REQUIRE_GI(gpuInstance, i);
    nvmlReturn_t r = ci_profile(i, gpuInstance, profileId, 0, &cp, &gp);
    if (r == NVML_ERROR_NOT_SUPPORTED)
        r = NVML_ERROR_INVALID_ARGUMENT;
    if (r != NVML_SUCCESS)
        return r;
    if (computeInstance == NULL || (with_placement && placement == NULL))
        return NVML_ERROR_INVALID_ARGUMENT;
    fake_mig_range pl = {0, 0};
    if (with_placement)
        pl = (fake_mig_range){placement->start, placement->size};
    r = (nvmlReturn_t)fake_mig_create_ci(fake_nvml_state(), gpu_of(i), gpuInstance->gi, profileId,
                                         with_placement ? &pl : NULL, &id);
    if (r == NVML_SUCCESS) {
        *computeInstance = ci_handle(i, gpuInstance->gi, id);
        cap_sync(i);
    }
    return r;
}

nvmlReturn_t nvmlGpuInstanceCreateComputeInstance(nvmlGpuInstance_t gpuInstance,
                                                  unsigned int profileId,
                                                  nvmlComputeInstance_t *computeInstance)
{
    return create_ci(gpuInstance, profileId, NULL, computeInstance, false);
}

nvmlReturn_t nvmlGpuInstanceCreateComputeInstanceWithPlacement(
    nvmlGpuInstance_t gpuInstance, unsigned int profileId,
    const nvmlComputeInstancePlacement_t *placement, nvmlComputeInstance_t *computeInstance)
{
    return create_ci(gpuInstance, profileId, placement, computeInstance, true);
}

nvmlReturn_t nvmlComputeInstanceDestroy(nvmlComputeInstance_t computeInstance)
{
    REQUIRE_CI(computeInstance, i);
    nvmlReturn_t r = (nvmlReturn_t)fake_mig_destroy_ci(fake_nvml_state(), gpu_of(i),
                                                       computeInstance->gi, computeInstance->ci);
    if (r == NVML_SUCCESS)
        cap_sync(i);
    return r;
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstances(nvmlGpuInstance_t gpuInstance,
                                                unsigned int profileId,
                                                nvmlComputeInstance_t *computeInstances,
                                                unsigned int *count)
{
    fake_ci_profile cp;
    const fake_gi_profile *gp;
    REQUIRE_GI(gpuInstance, i);
    nvmlReturn_t r = ci_profile(i, gpuInstance, profileId, 0, &cp, &gp);
    if (r != NVML_SUCCESS)
        return r;
    if (computeInstances == NULL || count == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    unsigned int n = 0;
    for (unsigned int c = 0; c < FAKE_MIG_MAX_CI && n < cp.instances; c++) {
        fake_mig_ci *e = live_ci(i, gpuInstance->gi, c);
        if (e != NULL && e->profile == profileId)
            computeInstances[n++] = ci_handle(i, gpuInstance->gi, c);
    }
    *count = n;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstanceById(nvmlGpuInstance_t gpuInstance, unsigned int id,
                                                   nvmlComputeInstance_t *computeInstance)
{
    REQUIRE_GI(gpuInstance, i);
    if (computeInstance == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (live_ci(i, gpuInstance->gi, id) == NULL)
        return NVML_ERROR_NOT_FOUND;
    *computeInstance = ci_handle(i, gpuInstance->gi, id);
    return NVML_SUCCESS;
}

static nvmlReturn_t ci_info(nvmlComputeInstance_t computeInstance, nvmlComputeInstanceInfo_t *info)
{
    REQUIRE_CI(computeInstance, i);
    if (info == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    fake_mig_ci *e = live_ci(i, computeInstance->gi, computeInstance->ci);
    *info = (nvmlComputeInstanceInfo_t){.device = fake_nvml_device(i),
                                        .gpuInstance = gi_handle(i, computeInstance->gi),
                                        .id = computeInstance->ci,
                                        .profileId = e->profile,
                                        .placement = {e->start, e->size}};
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlComputeInstanceGetInfo(nvmlComputeInstance_t computeInstance,
                                        nvmlComputeInstanceInfo_t *info)
{
    return ci_info(computeInstance, info);
}

nvmlReturn_t nvmlComputeInstanceGetInfo_v2(nvmlComputeInstance_t computeInstance,
                                           nvmlComputeInstanceInfo_t *info)
{
    return ci_info(computeInstance, info);
}

/* ------------------------------------------------------------------------ */
/* MIG device handles                                                       */
/* ------------------------------------------------------------------------ */

nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int *isMigDevice)
{
    uint32_t mig;
    REQUIRE_INIT();
    int gpu = fake_nvml_gpu_index(device);
    int parent = gpu < 0 ? fake_nvml_mig_index(device, &mig) : -1;
    if (gpu < 0 && parent < 0)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (isMigDevice == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    *isMigDevice = parent >= 0;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index,
                                                 nvmlDevice_t *migDevice)
{
    REQUIRE_MIG_GPU(device, i);
    if (migDevice == NULL || index >= MAX_MIG_DEVICES * 2)
        return NVML_ERROR_INVALID_ARGUMENT;
    /* MIG devices in GPU-instance id order, then compute-instance id. */
    unsigned int n = 0;
    for (unsigned int gi = 1; gi <= FAKE_MIG_MAX_GI; gi++) {
        for (unsigned int ci = 0; ci < FAKE_MIG_MAX_CI; ci++) {
            if (live_ci(i, gi, ci) == NULL)
                continue;
            if (n++ == index) {
                *migDevice = mig_handle(i, gi, ci);
                return NVML_SUCCESS;
            }
        }
    }
    return NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t migDevice,
                                                          nvmlDevice_t *device)
{
    uint32_t mig;
    REQUIRE_INIT();
    int i = fake_nvml_mig_index(migDevice, &mig);
    if (i < 0 || device == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    *device = fake_nvml_device(i);
    return NVML_SUCCESS;
}

static nvmlReturn_t instance_id(nvmlDevice_t device, unsigned int *id, bool compute)
{
    uint32_t mig;
    REQUIRE_INIT();
    int i = fake_nvml_mig_index(device, &mig);
    if (i < 0)
        return fake_nvml_gpu_index(device) >= 0 ? NVML_ERROR_NOT_SUPPORTED
                                                : NVML_ERROR_INVALID_ARGUMENT;
    if (id == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    *id = compute ? FAKE_MIG_TAG_CI(mig) : FAKE_MIG_TAG_GI(mig);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int *id)
{
    return instance_id(device, id, false);
}

nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int *id)
{
    return instance_id(device, id, true);
}
