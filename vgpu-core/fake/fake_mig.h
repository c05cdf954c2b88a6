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
 * fake_mig.h - the MIG model of the simulated GPUs: per geometry (A100-40GB,
 * A100-80GB, H100-80GB, H200-141GB) the GPU-instance profiles with their
 * placements and the compute-instance profiles inside each, the rules for
 * creating instances, and the deterministic MIG UUIDs. The instances that
 * exist live in the shared state file (fake_state.h, fake_mig_gpu) so that
 * every process on the node sees what another created.
 */
#ifndef VGPU_FAKE_MIG_H
#define VGPU_FAKE_MIG_H

#include <stddef.h>
#include <stdint.h>

#include "fake_config.h"

/* GPU-instance ids are 1..FAKE_MIG_MAX_GI, compute-instance ids 0..FAKE_MIG_MAX_CI-1. */
#define FAKE_MIG_MAX_GI 7
#define FAKE_MIG_MAX_CI 8
#define FAKE_MIG_MAX_PLACEMENTS 8

/* Geometries (fake_gpu.mig_geometry). */
enum {
    FAKE_MIG_NONE = 0, /* not MIG capable */
    FAKE_MIG_A100_40GB,
    FAKE_MIG_A100_80GB,
    FAKE_MIG_H100_80GB,
    FAKE_MIG_H200_141GB,
    FAKE_MIG_GEOMETRIES
};

typedef struct fake_mig_range {
    unsigned int start, size;
} fake_mig_range;

/* A GPU-instance profile of a geometry, with NVML's numbers. */
typedef struct fake_gi_profile {
    unsigned int id;         /* NVML_GPU_INSTANCE_PROFILE_* */
    const char *name;        /* nvidia-smi's name, e.g. "3g.71gb" */
    unsigned int slices;     /* compute slices */
    unsigned int instances;  /* at most this many at once */
    unsigned int copy_engines, decoders, encoders, jpegs, ofas;
    unsigned long long memory_mb;
    unsigned int nplacements;
    fake_mig_range placements[FAKE_MIG_MAX_PLACEMENTS]; /* memory slices */
} fake_gi_profile;

/* A compute-instance profile inside a GPU instance of some slice count. */
typedef struct fake_ci_profile {
    unsigned int id;        /* NVML_COMPUTE_INSTANCE_PROFILE_* */
    unsigned int slices;
    unsigned int instances; /* = nplacements */
    unsigned int multiprocessors;
    unsigned int nplacements;
    fake_mig_range placements[FAKE_MIG_MAX_CI]; /* compute slices within the GPU instance */
} fake_ci_profile;

typedef struct fake_mig_geometry {
    const char *key;               /* config value, e.g. "h200-141gb" */
    unsigned int memory_slices;    /* what the placements span */
    unsigned int compute_slices;   /* 7 */
    unsigned int sm_per_slice;     /* multiprocessors per compute slice */
    unsigned int p2p;              /* isP2pSupported of every profile */
    unsigned int nprofiles;
    fake_gi_profile profiles[8];
} fake_mig_geometry;

/* The geometry with that FAKE_MIG_* value, NULL for FAKE_MIG_NONE or junk. */
const fake_mig_geometry *fake_mig_geometry_of(int geometry);

/* FAKE_MIG_* named by a config value ("none", "a100-40gb", ...), -1 if unknown. */
int fake_mig_geometry_parse(const char *s);

/* The GPU-instance profile id of geometry g, NULL where g has none. */
const fake_gi_profile *fake_mig_gi_profile(const fake_mig_geometry *g, unsigned int id);

/*
 * Fills *out with compute-instance profile id inside a GPU instance of
 * profile gi of geometry g. Returns 0, or -1 where that GPU instance has no
 * such profile.
 */
int fake_mig_ci_profile(const fake_mig_geometry *g, const fake_gi_profile *gi, unsigned int id,
                        fake_ci_profile *out);

/*
 * The UUID of compute instance ci of GPU instance gi of parent: "MIG-" +
 * 8-4-4-4-12 hex of 16 bytes derived from the parent's UUID and both ids,
 * so a re-created instance with the same ids has the same UUID.
 */
void fake_mig_uuid(const fake_gpu *parent, unsigned int gi, unsigned int ci, char uuid[48],
                   unsigned char bytes[16]);

/*
 * Finds the compute instance a CUDA_VISIBLE_DEVICES entry (entry, len bytes:
 * "MIG-" + a UUID or a unique prefix of one) names among the MIG-mode GPUs of
 * present, in the shared state under node->state_dir. Fills *out with the
 * CUDA device it is (the parent's identity but the instance's UUID, memory
 * and SMs, mig_gi/mig_ci set) and returns the parent's node index, or -1.
 */
int fake_mig_find(const fake_config *node, const fake_config *present, const char *entry,
                  size_t len, fake_gpu *out);

struct fake_state;

/*
 * Instance changes on the shared state, each under the GPU's MIG lock and
 * exact under SIGKILL (fake_state.h). dev is the node index of gpu. Each
 * returns an nvmlReturn_t: NVML_SUCCESS, NVML_ERROR_NOT_SUPPORTED (the GPU is
 * not in MIG mode), NVML_ERROR_INVALID_ARGUMENT (no such profile, placement
 * or instance), NVML_ERROR_INSUFFICIENT_RESOURCES (the placement overlaps an
 * instance, the slices or the profile's instance count are used up),
 * NVML_ERROR_IN_USE (destroying an instance with compute instances or
 * processes in it).
 */

/* Creates a GPU instance of profile at placement (NULL: the first free one); *gi its id. */
int fake_mig_create_gi(struct fake_state *st, const fake_gpu *gpu, unsigned int profile,
                       const fake_mig_range *placement, unsigned int *gi);

/* Creates a compute instance of profile in GPU instance gi at placement (NULL: first free). */
int fake_mig_create_ci(struct fake_state *st, const fake_gpu *gpu, unsigned int gi,
                       unsigned int profile, const fake_mig_range *placement, unsigned int *ci);

/* Destroys compute instance ci of GPU instance gi. */
int fake_mig_destroy_ci(struct fake_state *st, const fake_gpu *gpu, unsigned int gi,
                        unsigned int ci);

/* Destroys GPU instance gi (which must have no compute instance left). */
int fake_mig_destroy_gi(struct fake_state *st, const fake_gpu *gpu, unsigned int gi);

#endif /* VGPU_FAKE_MIG_H */
