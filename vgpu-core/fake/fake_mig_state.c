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
 * fake_mig_state.c - MIG instances of the simulated GPUs in the shared state
 * file: creation and destruction with NVML's rules and error codes, and the
 * lookup of a MIG UUID for the CUDA view (see fake_mig.h).
 */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "fake_mig.h"
#include "fake_state.h"
#include "vgpu_nvml.h"

static bool overlaps(unsigned int a, unsigned int an, unsigned int b, unsigned int bn)
{
    return a < b + bn && b < a + an;
}

/*
 * Whether GPU instance `profile` fits at placement pl next to the live
 * instances of m: no shared memory slice, compute slices and the profile's
 * instance count not exceeded.
 */
static bool gi_fits(const fake_mig_geometry *g, const fake_mig_gpu *m, const fake_gi_profile *p,
                    fake_mig_range pl)
{
    unsigned int slices = p->slices, same = 0;
    for (unsigned int id = 1; id <= FAKE_MIG_MAX_GI; id++) {
        const fake_mig_gi *e = &m->gi[id];
        if (!atomic_load(&e->live))
            continue;
        if (overlaps(pl.start, pl.size, e->start, e->size))
            return false;
        const fake_gi_profile *ep = fake_mig_gi_profile(g, e->profile);
        slices += ep != NULL ? ep->slices : e->size;
        same += e->profile == p->id;
    }
    return slices <= g->compute_slices && same < p->instances;
}

int fake_mig_create_gi(fake_state *st, const fake_gpu *gpu, unsigned int profile,
                       const fake_mig_range *placement, unsigned int *gi)
{
    const fake_mig_geometry *g = fake_mig_geometry_of(gpu->mig_geometry);
    if (g == NULL || gpu->mig_current != NVML_DEVICE_MIG_ENABLE)
        return NVML_ERROR_NOT_SUPPORTED;
    const fake_gi_profile *p = fake_mig_gi_profile(g, profile);
    if (p == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (placement != NULL) {
        bool known = false;
        for (unsigned int k = 0; k < p->nplacements; k++)
            known |= p->placements[k].start == placement->start &&
                     p->placements[k].size == placement->size;
        if (!known)
            return NVML_ERROR_INVALID_ARGUMENT;
    }
    if (fake_state_mig_lock(st, gpu->phys, true) != 0)
        return NVML_ERROR_UNKNOWN;
    fake_mig_gpu *m = &st->file->mig[gpu->phys];
    int rc = NVML_ERROR_INSUFFICIENT_RESOURCES;
    unsigned int id = 1;
    while (id <= FAKE_MIG_MAX_GI && atomic_load(&m->gi[id].live))
        id++;
    for (unsigned int k = 0; id <= FAKE_MIG_MAX_GI && k < p->nplacements; k++) {
        fake_mig_range pl = placement != NULL ? *placement : p->placements[k];
        if (gi_fits(g, m, p, pl)) {
            fake_mig_gi *e = &m->gi[id];
            e->profile = p->id;
            e->start = pl.start;
            e->size = pl.size;
            for (unsigned int c = 0; c < FAKE_MIG_MAX_CI; c++)
                atomic_store(&e->ci[c].live, 0);
            atomic_store(&e->live, 1); /* published last */
            *gi = id;
            rc = NVML_SUCCESS;
            break;
        }
        if (placement != NULL)
            break;
    }
    fake_state_mig_lock(st, gpu->phys, false);
    return rc;
}

/* An engine no live compute instance of m uses (FAKE_MIG_ENGINES if none: cannot be). */
static unsigned int free_engine(const fake_mig_gpu *m)
{
    bool used[FAKE_MIG_ENGINES] = {false};
    for (unsigned int g = 1; g <= FAKE_MIG_MAX_GI; g++) {
        if (!atomic_load(&m->gi[g].live))
            continue;
        for (unsigned int c = 0; c < FAKE_MIG_MAX_CI; c++)
            if (atomic_load(&m->gi[g].ci[c].live) && m->gi[g].ci[c].engine < FAKE_MIG_ENGINES)
                used[m->gi[g].ci[c].engine] = true;
    }
    unsigned int e = 0;
    while (e < FAKE_MIG_ENGINES && used[e])
        e++;
    return e;
}

int fake_mig_create_ci(fake_state *st, const fake_gpu *gpu, unsigned int gi, unsigned int profile,
                       const fake_mig_range *placement, unsigned int *ci)
{
    const fake_mig_geometry *g = fake_mig_geometry_of(gpu->mig_geometry);
    if (g == NULL || gpu->mig_current != NVML_DEVICE_MIG_ENABLE)
        return NVML_ERROR_NOT_SUPPORTED;
    if (gi < 1 || gi > FAKE_MIG_MAX_GI)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (fake_state_mig_lock(st, gpu->phys, true) != 0)
        return NVML_ERROR_UNKNOWN;
    fake_mig_gi *e = &st->file->mig[gpu->phys].gi[gi];
    fake_ci_profile cp;
    int rc = NVML_ERROR_INVALID_ARGUMENT;
    if (!atomic_load(&e->live) ||
        fake_mig_ci_profile(g, fake_mig_gi_profile(g, e->profile), profile, &cp) != 0)
        goto out;
    rc = NVML_ERROR_INSUFFICIENT_RESOURCES;
    unsigned int id = 0;
    while (id < FAKE_MIG_MAX_CI && atomic_load(&e->ci[id].live))
        id++;
    for (unsigned int k = 0; id < FAKE_MIG_MAX_CI && k < cp.nplacements; k++) {
        fake_mig_range pl = placement != NULL ? *placement : cp.placements[k];
        if (placement != NULL) {
            bool known = false;
            for (unsigned int j = 0; j < cp.nplacements; j++)
                known |= cp.placements[j].start == pl.start && cp.placements[j].size == pl.size;
            if (!known) {
                rc = NVML_ERROR_INVALID_ARGUMENT;
                break;
            }
        }
        bool free_slices = true;
        for (unsigned int c = 0; c < FAKE_MIG_MAX_CI; c++)
            if (atomic_load(&e->ci[c].live) &&
                overlaps(pl.start, pl.size, e->ci[c].start, e->ci[c].size))
                free_slices = false;
        unsigned int engine = free_engine(&st->file->mig[gpu->phys]);
        if (free_slices && engine < FAKE_MIG_ENGINES) {
            fake_mig_ci *c = &e->ci[id];
            c->profile = cp.id;
            c->start = pl.start;
            c->size = pl.size;
            c->engine = engine;
            fake_state_mig_engine_reset(st, gpu->phys, engine);
            atomic_store(&c->live, 1); /* published last */
            *ci = id;
            rc = NVML_SUCCESS;
            break;
        }
        if (placement != NULL)
            break;
    }
out:
    fake_state_mig_lock(st, gpu->phys, false);
    return rc;
}

int fake_mig_destroy_ci(fake_state *st, const fake_gpu *gpu, unsigned int gi, unsigned int ci)
{
    if (gpu->mig_current != NVML_DEVICE_MIG_ENABLE)
        return NVML_ERROR_NOT_SUPPORTED;
    if (gi < 1 || gi > FAKE_MIG_MAX_GI || ci >= FAKE_MIG_MAX_CI)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (fake_state_mig_lock(st, gpu->phys, true) != 0)
        return NVML_ERROR_UNKNOWN;
    fake_mig_gi *e = &st->file->mig[gpu->phys].gi[gi];
    int rc = NVML_SUCCESS;
    if (!atomic_load(&e->live) || !atomic_load(&e->ci[ci].live))
        rc = NVML_ERROR_INVALID_ARGUMENT;
    else if (fake_state_mig_in_use(st, gpu->phys, gi, (int)ci))
        rc = NVML_ERROR_IN_USE;
    else
        atomic_store(&e->ci[ci].live, 0);
    fake_state_mig_lock(st, gpu->phys, false);
    return rc;
}

int fake_mig_destroy_gi(fake_state *st, const fake_gpu *gpu, unsigned int gi)
{
    if (gpu->mig_current != NVML_DEVICE_MIG_ENABLE)
        return NVML_ERROR_NOT_SUPPORTED;
    if (gi < 1 || gi > FAKE_MIG_MAX_GI)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (fake_state_mig_lock(st, gpu->phys, true) != 0)
        return NVML_ERROR_UNKNOWN;
    fake_mig_gi *e = &st->file->mig[gpu->phys].gi[gi];
    int rc = NVML_SUCCESS;
    if (!atomic_load(&e->live)) {
        rc = NVML_ERROR_INVALID_ARGUMENT;
    } else {
        for (unsigned int c = 0; c < FAKE_MIG_MAX_CI; c++)
            if (atomic_load(&e->ci[c].live))
                rc = NVML_ERROR_IN_USE;
        if (rc == NVML_SUCCESS && fake_state_mig_in_use(st, gpu->phys, gi, -1))
            rc = NVML_ERROR_IN_USE;
        if (rc == NVML_SUCCESS)
            atomic_store(&e->live, 0);
    }
    fake_state_mig_lock(st, gpu->phys, false);
    return rc;
}

int fake_mig_find(const fake_config *node, const fake_config *present, const char *entry,
                  size_t len, fake_gpu *out)
{
    fake_state st;
    char err[256];
    int found = -1, matches = 0;
    if (fake_state_open(&st, node->state_dir, 0, err, sizeof(err)) != 0)
        return -1;
    for (int i = 0; i < present->gpu_count; i++) {
        const fake_gpu *p = &present->gpus[i];
        const fake_mig_geometry *g = fake_mig_geometry_of(p->mig_geometry);
        if (g == NULL || p->mig_current != NVML_DEVICE_MIG_ENABLE)
            continue;
        const fake_mig_gpu *m = &st.file->mig[p->phys];
        for (unsigned int gi = 1; gi <= FAKE_MIG_MAX_GI; gi++) {
            const fake_mig_gi *e = &m->gi[gi];
            if (!atomic_load(&e->live))
                continue;
            for (unsigned int ci = 0; ci < FAKE_MIG_MAX_CI; ci++) {
                char uuid[48];
                unsigned char bytes[16];
                fake_ci_profile cp;
                const fake_gi_profile *gp = fake_mig_gi_profile(g, e->profile);
                if (!atomic_load(&e->ci[ci].live) || gp == NULL ||
                    fake_mig_ci_profile(g, gp, e->ci[ci].profile, &cp) != 0)
                    continue;
                fake_mig_uuid(p, gi, ci, uuid, bytes);
                if (len > strlen(uuid) || strncasecmp(uuid, entry, len) != 0)
                    continue;
                matches++;
                *out = *p;
                memcpy(out->uuid, uuid, sizeof(out->uuid));
                memcpy(out->uuid_bytes, bytes, sizeof(out->uuid_bytes));
                out->memory = gp->memory_mb << 20;
                out->multiprocessors = (int)cp.multiprocessors;
                out->mig_gi = gi;
                out->mig_ci = ci;
                snprintf(out->mig_profile, sizeof(out->mig_profile), "%s", gp->name);
                found = p->phys;
            }
        }
    }
    fake_state_close(&st);
    /* A prefix must name one instance, as for GPU UUIDs. */
    return matches == 1 ? found : -1;
}
