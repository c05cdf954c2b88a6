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
 * burstfile.h - a claim's burst grants (<claimdir>/host/burst).
 *
 * The kubelet plugin lends a claim memory above its guarantee on a GPU
 * (docs/architecture.md, "Burstable memory") and publishes what it lent in a
 * file of the claim's read-only host directory, written atomically by rename
 * before the grant is answered (Go side: pkg/node/burst). Format, every number
 * decimal, one space apart:
 *
 *   version=1
 *   gpu <GPU UUID> <grant bytes>
 *   ...
 *
 * The file comes from the host but is parsed as untrusted input: anything
 * malformed rejects the whole file, and then no GPU has a grant (the claim is
 * held to its guarantee). The effective limit on a GPU is guarantee + grant.
 *
 * This unit is the parser and the limit; reading the file at a crossing and
 * asking the plugin over host/burst.sock are burst.h's.
 */
#ifndef VGPU_BURSTFILE_H
#define VGPU_BURSTFILE_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"

/* The file's path below the claim directory. */
#define VGPU_BURST_FILE "host/burst"
/* Largest file accepted (pkg/node/burst MaxFileBytes). */
#define VGPU_BURST_MAX_BYTES 4096
/* Largest grant accepted, 2^50 bytes (pkg/node/burst MaxGrantBytes): sums cannot overflow. */
#define VGPU_BURST_MAX_GRANT (1ull << 50)
/* Length of a GPU UUID ("GPU-" and 8-4-4-4-12 hex digits). */
#define VGPU_BURST_UUID_LEN 40

/* One GPU's grant. */
struct vgpu_burst_grant {
    char uuid[VGPU_BURST_UUID_LEN + 1];
    uint64_t bytes;
};

/*
 * Parses the file text (len bytes, need not be NUL-terminated) into out (max
 * entries). Refuses more than VGPU_BURST_MAX_BYTES, another header, a missing
 * final newline, empty lines, CRs, other separators than one space, a
 * malformed UUID, a sign, leading zeros, a grant above VGPU_BURST_MAX_GRANT,
 * a GPU twice (in any hex case) and more than max GPUs. Returns the number of
 * entries, or -1 with the reason (naming the line) in err.
 */
int vgpu_burst_parse(const char *text, size_t len, struct vgpu_burst_grant *out, int max,
                     char err[VGPU_ERRMSG_MAX]);

/* Returns the grant of the GPU uuid among the n entries (UUIDs compared in any hex case), 0 if none. */
uint64_t vgpu_burst_lookup(const struct vgpu_burst_grant *g, int n, const char *uuid);

/* Returns guarantee + grant, saturating at UINT64_MAX. */
uint64_t vgpu_burst_limit(uint64_t guarantee, uint64_t grant);

#endif /* VGPU_BURSTFILE_H */
