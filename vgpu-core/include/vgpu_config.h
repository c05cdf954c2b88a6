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
 * vgpu_config.h - a claim's config file, <claimdir>/config (contract between
 * the kubelet plugin, which writes it, and libvgpu.so, which reads it at
 * startup; the Go side is pkg/contract/claimconfig; docs/architecture.md).
 *
 * Format: key=value lines of printable ASCII, split at the first '=', each
 * ending in '\n' (the last may lack it; a '\r' before it is dropped), at most
 * VGPU_CONFIG_LINE_MAX bytes a line and VGPU_CONFIG_MAX_BYTES in all; lines
 * that are empty or start with '#' are skipped. Numbers are decimal without
 * sign or leading zeros, spaces around them allowed. Unknown keys are
 * ignored for forward compatibility (a key that changes enforcement needs a
 * new version). Keys:
 *
 *   version=1                          required
 *   claim=<text>                       required, 1..VGPU_CLAIM_UID_MAX-1 bytes
 *   compute_policy=strict|workConserving|disabled   default strict
 *   priority=low|high                  default low
 *   log_level=error|warning|info|debug default unset
 *   enforcement=disabled|enabled       default enabled
 *   device.count=<n>                   required, 1..VGPU_REGION_MAX_DEVICES
 *   device.<k>.uuid=<GPU-|MIG-><8-4-4-4-12 hex>      required for k < count
 *   device.<k>.memory_limit_bytes=<bytes, 0 = none>  required for k < count
 *   device.<k>.sm_limit_percent=<0..100, 0 = none>   required for k < count
 *
 * An MPS claim (docs/mps.md) also has, for each of its devices k, both
 * mps.activeThreadPercent.<k> (1..100) and mps.pinnedMemoryLimit.<k> (bytes,
 * 0 = none), or neither; on a driver whose MPS daemon accounts for memory
 * (r615+) also mps.driverMemoryLimit.<k> (bytes, at least
 * VGPU_CONFIG_MPS_DRIVER_MIN), only beside those two. Anything the parser
 * cannot apply (a duplicate key or GPU, a malformed value, a missing
 * required key, a key of an index not below device.count, a byte that is not
 * printable ASCII, an embedded NUL, a line or file over its limit) makes the
 * whole config invalid; the library then fails every GPU of the container
 * closed (README "Config rule").
 */
#ifndef VGPU_CONFIG_CONTRACT_H
#define VGPU_CONFIG_CONTRACT_H

#include "vgpu_region.h"

/* The file's name in the claim directory. */
#define VGPU_CONFIG_FILE "config"
/* The value of version= this format has. */
#define VGPU_CONFIG_VERSION 1
/* Largest file accepted. */
#define VGPU_CONFIG_MAX_BYTES 65536
/* Longest line accepted, without its '\n'. */
#define VGPU_CONFIG_LINE_MAX 511
/* Size of a claim name with its NUL: claim= holds at most one byte less. */
#define VGPU_CLAIM_UID_MAX 128
/* What starts the comment lines. */
#define VGPU_CONFIG_COMMENT '#'

/* Keys of the whole claim. */
#define VGPU_CONFIG_KEY_VERSION "version"
#define VGPU_CONFIG_KEY_CLAIM "claim"
#define VGPU_CONFIG_KEY_POLICY "compute_policy"
#define VGPU_CONFIG_KEY_PRIORITY "priority"
#define VGPU_CONFIG_KEY_LOG_LEVEL "log_level"
#define VGPU_CONFIG_KEY_ENFORCEMENT "enforcement"

/* Per-device keys: "device.<k>.<suffix>"; "device.count" is the number of devices. */
#define VGPU_CONFIG_DEVICE_PREFIX "device."
#define VGPU_CONFIG_DEVICE_COUNT "count"
#define VGPU_CONFIG_DEVICE_UUID "uuid"
#define VGPU_CONFIG_DEVICE_MEMORY "memory_limit_bytes"
#define VGPU_CONFIG_DEVICE_SM "sm_limit_percent"

/* MPS client keys: "mps.<name>.<k>". */
#define VGPU_CONFIG_MPS_PREFIX "mps."
#define VGPU_CONFIG_MPS_THREADS "activeThreadPercent"
#define VGPU_CONFIG_MPS_PINNED "pinnedMemoryLimit"
#define VGPU_CONFIG_MPS_DRIVER "driverMemoryLimit"
/* Smallest mps.driverMemoryLimit: the driver reads whole MiB, and less would be no limit. */
#define VGPU_CONFIG_MPS_DRIVER_MIN (1024u * 1024u)

#endif /* VGPU_CONFIG_CONTRACT_H */
