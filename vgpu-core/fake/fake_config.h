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
 * fake_config.h - configuration of the simulated GPUs, shared by the fake
 * libcuda.so.1 and libnvidia-ml.so.1 so that both describe the same devices.
 *
 * Sources, lowest precedence first: built-in defaults, VGPU_FAKE_<KEY>
 * environment variables, then the key=value file named by VGPU_FAKE_CONFIG
 * (keys are the lower-case names without the prefix). README.md lists them.
 */
#ifndef VGPU_FAKE_CONFIG_H
#define VGPU_FAKE_CONFIG_H

#include <stdint.h>

/* Upper bound on simulated GPUs; the shared state file is sized for it. */
#define FAKE_MAX_GPUS 16

/* Every VMM/pool granule and the reported allocation granularity. */
#define FAKE_GRANULARITY (2ULL << 20)

typedef struct fake_gpu {
    char uuid[48];          /* "GPU-" + 8-4-4-4-12 lower-case hex */
    unsigned char uuid_bytes[16];
    char pci_bus_id[32];    /* NVML form: "00000000:BB:00.0" */
    char pci_bus_id_legacy[16]; /* "0000:BB:00.0" */
    unsigned int pci_bus;
    int phys;               /* index on the node: minor number, device node, shared state */
    uint64_t memory;        /* bytes: the GPU's, or in a CUDA view of a MIG instance the instance's */
    int multiprocessors;    /* SMs: the GPU's, or the MIG compute instance's */
    int mig_geometry;       /* FAKE_MIG_* (fake_mig.h); FAKE_MIG_NONE: not MIG capable */
    int mig_current;        /* MIG mode now (NVML_DEVICE_MIG_ENABLE / _DISABLE) */
    int mig_pending;        /* MIG mode after the next reset */
    int mig_set;            /* bit 0: geometry, bit 1: mode set for this GPU by its own keys */
    unsigned int mig_gi;    /* CUDA view of a MIG instance: its GPU-instance id, else 0 */
    unsigned int mig_ci;    /* and its compute-instance id */
    char mig_profile[24];   /* and its GPU-instance profile's name, e.g. "3g.71gb" */
} fake_gpu;

typedef struct fake_config {
    int gpu_count;
    uint64_t gpu_memory;          /* bytes per GPU */
    char gpu_product[96];
    char uuid_seed[128];
    char driver_version[32];      /* e.g. "580.95.05" */
    int cuda_version;             /* e.g. 12090 for "12.9" */
    int cc_major;
    int cc_minor;
    int multiprocessors;
    int cores_per_sm;
    unsigned int architecture;    /* NVML_DEVICE_ARCH_* */
    unsigned int brand;           /* NVML_BRAND_* */
    int numa_node;                /* -1: NVML reports NOT_SUPPORTED */
    uint64_t kernel_ns;           /* default busy time per launch */
    uint64_t context_memory;      /* bytes charged per context */
    char state_dir[256];
    char mig_proc_root[256];      /* "": no MIG capability files (key mig_proc_root) */
    int mig_geometry;             /* default of every GPU (key mig_geometry) */
    int mig_current, mig_pending; /* default MIG mode (key mig_mode) */
    fake_gpu gpus[FAKE_MAX_GPUS];
} fake_config;

/*
 * Returns the process-wide configuration, loading it on first use (thread
 * safe). Never NULL: when a value is invalid, *err (if not NULL) receives a
 * message naming the bad key and the remaining configuration keeps defaults
 * for it; callers decide whether to fail.
 */
const fake_config *fake_config_get(const char **err);

/* Views of the node's GPUs, see fake_config_view. */
#define FAKE_VIEW_NVML 0 /* GPUs whose device nodes the process has */
#define FAKE_VIEW_CUDA 1 /* those, further selected and ordered by CUDA_VISIBLE_DEVICES */

/*
 * Returns the GPUs a process of this kind sees, as the real driver decides
 * it: where /dev/nvidiactl exists (a driver's device nodes are present, as
 * in every container the CDI spec gave GPUs), only GPUs whose
 * /dev/nvidia<minor> exists; without /dev/nvidiactl every simulated GPU (a
 * host that simulates no device nodes, e.g. the kubelet plugin in tests).
 * The CUDA view then applies CUDA_VISIBLE_DEVICES (indices into the
 * visible GPUs or GPU UUIDs, as the CUDA driver reads it; NVML ignores
 * it). Visible GPUs are numbered from 0 in that order; gpus[i].phys keeps
 * the node index. The device directory is VGPU_FAKE_DEV_DIR where set and
 * not empty (tests name their own), else /dev. Thread safe; *err as for
 * fake_config_get.
 */
const fake_config *fake_config_view(int view, const char **err);

/*
 * Builds into out the GPUs of node visible with device nodes under dev_dir
 * and, when cuda_visible is not NULL, selected by that CUDA_VISIBLE_DEVICES
 * value. Exposed for tests.
 */
void fake_config_restrict(const fake_config *node, const char *dev_dir, const char *cuda_visible,
                          fake_config *out);

/*
 * The CUDA view of node: like fake_config_restrict, but a GPU in MIG mode is
 * no CUDA device itself; a CUDA_VISIBLE_DEVICES entry "MIG-<uuid>" (or a
 * unique prefix) names a compute instance that exists in the shared state,
 * which becomes one device with that instance's UUID, memory and SMs (at
 * most one instance per GPU). Indices and GPU- UUIDs name the other GPUs.
 * cuda_visible NULL: every visible GPU not in MIG mode.
 */
void fake_config_restrict_cuda(const fake_config *node, const char *dev_dir,
                               const char *cuda_visible, fake_config *out);

/*
 * Loads a configuration into cfg from the environment and the file named by
 * VGPU_FAKE_CONFIG. Returns 0, or -1 with a message naming the bad key
 * written into errbuf. Exposed for tests.
 */
int fake_config_load(fake_config *cfg, char *errbuf, unsigned int errlen);

/*
 * Parses a byte size: decimal digits with an optional unit K, M, G, T
 * (powers of 1000), Ki, Mi, Gi, Ti (powers of 1024). Returns 0 or -1 on
 * junk or overflow.
 */
int fake_parse_size(const char *s, uint64_t *out);

/* Monotonic clock in nanoseconds (CLOCK_MONOTONIC, shared by processes). */
uint64_t fake_now_ns(void);

#endif /* VGPU_FAKE_CONFIG_H */
