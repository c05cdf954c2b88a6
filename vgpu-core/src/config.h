/*
 * config.h - the per-claim config file written by the kubelet plugin.
 *
 * Format (contract, docs/architecture.md): key=value lines; '#' comments and blank
 * lines are skipped; unknown keys are ignored for forward compatibility.
 * Required: version=1, claim, device.count and, for each k < count,
 * device.<k>.uuid, device.<k>.memory_limit_bytes, device.<k>.sm_limit_percent.
 * Optional with safe defaults: compute_policy (strict), priority (low),
 * log_level (unset), enforcement (enabled). A duplicate key, a malformed
 * value or a missing required key makes the whole claim invalid.
 */
#ifndef VGPU_CONFIG_H
#define VGPU_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "log.h"
#include "vgpu_region.h"

#define VGPU_CLAIM_UID_MAX 128
#define VGPU_CONFIG_MAX_BYTES 65536
#define VGPU_ERRMSG_MAX 256

enum vgpu_priority { VGPU_PRIORITY_LOW = 0, VGPU_PRIORITY_HIGH = 1 };

struct vgpu_claim_device {
    char uuid[VGPU_REGION_UUID_LEN];
    uint64_t memory_limit; /* bytes, 0 = unlimited */
    uint32_t sm_limit;     /* percent, 0 = unlimited */
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
 * Parses the text of a config file (NUL-terminated). Returns 0 on success.
 * On error returns -1 and writes a message naming the bad key to err; cfg
 * then still holds every device.<k>.uuid that was well-formed (others are
 * empty strings), so the caller can fail closed on exactly those GPUs.
 */
int vgpu_config_parse(const char *text, struct vgpu_claim_config *cfg, char err[VGPU_ERRMSG_MAX]);

/* Returns true if s is "GPU-" followed by a lowercase or uppercase 8-4-4-4-12 hex UUID. */
bool vgpu_uuid_valid(const char *s);

#endif /* VGPU_CONFIG_H */
