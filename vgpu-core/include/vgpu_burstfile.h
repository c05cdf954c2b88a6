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
 * vgpu_burstfile.h - a claim's burst grants, <claimdir>/host/burst (contract
 * between the kubelet plugin, which writes it, and libvgpu.so, which reads
 * it; the Go side is pkg/contract/burstfile; docs/architecture.md,
 * "Burstable memory").
 *
 * The plugin lends a claim memory above its guarantee on a GPU and publishes
 * what it lent in the claim's read-only host directory, written atomically
 * by rename before the grant is answered. Format:
 *
 *   version=1
 *   gpu <GPU UUID> <grant bytes>
 *   ...
 *
 * One line per GPU, each ending in '\n', fields one space apart; the UUID is
 * "GPU-" or "MIG-" and 8-4-4-4-12 hex digits (in either case; a GPU is named
 * once, whatever the case), the grant decimal without sign or leading zeros,
 * at most VGPU_BURST_MAX_GRANT. At most VGPU_BURST_MAX_GPUS lines and
 * VGPU_BURST_MAX_BYTES bytes. The file comes from the host but is parsed as
 * untrusted input: anything malformed rejects the whole file, and then no
 * GPU has a grant (the claim is held to its guarantee). The effective limit
 * on a GPU is guarantee + grant.
 */
#ifndef VGPU_BURSTFILE_CONTRACT_H
#define VGPU_BURSTFILE_CONTRACT_H

#include "vgpu_region.h"

/* The file's path below the claim directory. */
#define VGPU_BURST_FILE "host/burst"
/* The first line of a file of this format version. */
#define VGPU_BURST_HEADER "version=1\n"
/* What starts each grant line. */
#define VGPU_BURST_KEYWORD "gpu "
/* Largest file accepted. */
#define VGPU_BURST_MAX_BYTES 4096
/* Largest grant accepted, 2^50 bytes: sums cannot overflow. */
#define VGPU_BURST_MAX_GRANT (1ull << 50)
/* A file names at most as many GPUs as a claim holds. */
#define VGPU_BURST_MAX_GPUS VGPU_REGION_MAX_DEVICES
/* Length of a GPU UUID ("GPU-" and 8-4-4-4-12 hex digits). */
#define VGPU_BURST_UUID_LEN 40

#endif /* VGPU_BURSTFILE_CONTRACT_H */
