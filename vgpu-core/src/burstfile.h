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
 * burstfile.h - libvgpu.so's parser of a claim's burst grants (format:
 * include/vgpu_burstfile.h) and the limit they give.
 */
#ifndef VGPU_BURSTFILE_H
#define VGPU_BURSTFILE_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "vgpu_burstfile.h"

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
int vgpu_burstfile_parse(const char *text, size_t len, struct vgpu_burst_grant *out, int max,
                         char err[VGPU_ERRMSG_MAX]);

/* Returns the grant of the GPU uuid among the n entries (UUIDs compared in any hex case), 0 if none. */
uint64_t vgpu_burstfile_lookup(const struct vgpu_burst_grant *g, int n, const char *uuid);

/* Returns guarantee + grant, saturating at UINT64_MAX. */
uint64_t vgpu_burstfile_limit(uint64_t guarantee, uint64_t grant);

#endif /* VGPU_BURSTFILE_H */
