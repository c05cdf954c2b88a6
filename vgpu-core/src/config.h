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
 * config.h - the library's parser of a claim's config file; the format is
 * vgpu_config.h's.
 */
#ifndef VGPU_CONFIG_H
#define VGPU_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "log.h"
#include "vgpu_config.h"
#include "vgpu_region.h"

#define VGPU_ERRMSG_MAX 256

enum vgpu_priority { VGPU_PRIORITY_LOW = 0, VGPU_PRIORITY_HIGH = 1 };

struct vgpu_claim_device {
    char uuid[VGPU_REGION_UUID_LEN];
    uint64_t memory_limit; /* bytes, 0 = unlimited */
    uint32_t sm_limit;     /* percent, 0 = unlimited */
    bool mps;              /* the mps.* keys of this index are set: an MPS client */
    uint32_t mps_active_thread_percent; /* 1..100 (mps.activeThreadPercent.<k>) */
    uint64_t mps_pinned_memory_limit;   /* bytes, 0 = none (mps.pinnedMemoryLimit.<k>) */
    uint64_t mps_driver_memory_limit;   /* bytes, 0 = not written (mps.driverMemoryLimit.<k>) */
};

struct vgpu_claim_config {
    char claim[VGPU_CLAIM_UID_MAX];
    uint32_t compute_policy; /* VGPU_POLICY_* */
    enum vgpu_priority priority;
    bool has_log_level;
    enum vgpu_log_level log_level;
    bool enforcement;
    uint32_t device_count;
    struct vgpu_claim_device devices[VGPU_REGION_MAX_DEVICES];
};

/*
 * Parses the len bytes of a config file at text (no terminator needed; a
 * NUL inside is an error). UUIDs are stored in lower case. Returns 0 on
 * success. On error returns -1, writes the first problem (naming the key)
 * to err and, if err_line is not NULL, its 1-based line to *err_line: 0
 * when it concerns the whole file (a missing key).
 */
int vgpu_config_parse(const char *text, size_t len, struct vgpu_claim_config *cfg,
                      char err[VGPU_ERRMSG_MAX], unsigned *err_line);

/*
 * Reads an open config into a malloc'ed buffer and closes fd: up to one
 * byte more than VGPU_CONFIG_MAX_BYTES, so that vgpu_config_parse sees a
 * file over the limit. Sets *len; NULL with errno set on failure.
 */
char *vgpu_config_read(int fd, size_t *len);

/*
 * Returns true if s is "GPU-" (a GPU) or "MIG-" (a MIG instance, as NVML
 * names it) followed by a lowercase or uppercase 8-4-4-4-12 hex UUID.
 */
bool vgpu_uuid_valid(const char *s);

/*
 * Whether a and b name the same device: the same 128 bits, case-insensitive,
 * whatever their prefix (CUDA formats every UUID as GPU-, NVML and the
 * plugin name a MIG instance MIG-); two strings that are not UUIDs compare
 * as they are, case-insensitive.
 */
bool vgpu_uuid_same(const char *a, const char *b);

#endif /* VGPU_CONFIG_H */
