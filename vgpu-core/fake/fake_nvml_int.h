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
 * fake_nvml_int.h - what the fake NVML's files (fake_nvml.c, fake_nvml_mig.c)
 * share; not exported.
 */
#ifndef VGPU_FAKE_NVML_INT_H
#define VGPU_FAKE_NVML_INT_H

#include <stdint.h>

#include "fake_config.h"
#include "fake_state.h"
#include "vgpu_nvml.h"

#define NVML_MAGIC_DEVICE 0x4e564401u
#define NVML_MAGIC_MIG 0x4e564d01u

/* A GPU (magic NVML_MAGIC_DEVICE) or a MIG device (NVML_MAGIC_MIG, gi >= 1). */
struct nvmlDevice_st {
    uint32_t magic;
    int index;        /* the GPU's NVML index; of a MIG device, its parent's */
    unsigned int gi;  /* MIG device: GPU-instance id */
    unsigned int ci;  /* MIG device: compute-instance id */
};

/* The configuration (NVML view) once initialised. */
const fake_config *fake_nvml_config(void);

/* The shared state once initialised. */
fake_state *fake_nvml_state(void);

/* The handle of the GPU at NVML index i. */
nvmlDevice_t fake_nvml_device(int i);

/* Whether nvmlInit has succeeded more often than nvmlShutdown was called. */
int fake_nvml_initialized(void);

/*
 * Index of the GPU of handle d, d a GPU handle; -1 otherwise (MIG handles
 * included).
 */
int fake_nvml_gpu_index(nvmlDevice_t d);

/*
 * For a MIG device handle d whose compute instance still exists: its
 * parent's index, with *mig its FAKE_MIG_TAG; -1 otherwise.
 */
int fake_nvml_mig_index(nvmlDevice_t d, uint32_t *mig);

/* nvmlDeviceGetHandleByUUID for a "MIG-" UUID: NVML_SUCCESS or NVML_ERROR_NOT_FOUND. */
nvmlReturn_t fake_nvml_mig_by_uuid(const char *uuid, nvmlDevice_t *device);

/* Bytes of memory of GPU instance gi of the GPU at NVML index i. */
uint64_t fake_nvml_mig_memory(int i, unsigned int gi);

/* What a MIG device is: its profile's name, SMs, memory, slices and engines. */
typedef struct fake_nvml_mig_desc {
    const char *profile;           /* e.g. "3g.71gb" */
    unsigned int multiprocessors;  /* of the compute instance */
    unsigned long long memory_mb;  /* of the GPU instance */
    unsigned int gi_slices, ci_slices;
    unsigned int copy_engines, decoders, encoders, jpegs, ofas;
} fake_nvml_mig_desc;

/* Describes MIG device tag mig of the GPU at NVML index i; returns 0, or -1 if it is gone. */
int fake_nvml_mig_describe(int i, uint32_t mig, fake_nvml_mig_desc *out);

#endif /* VGPU_FAKE_NVML_INT_H */
