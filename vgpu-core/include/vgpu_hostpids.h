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
 * vgpu_hostpids.h - the host pid map of a claim, <claimdir>/host/pids
 * (contract between the kubelet plugin, which writes it, and libvgpu.so,
 * which reads it; the Go side is pkg/contract/hostpids).
 *
 * NVML names processes by their pid in the host's pid namespace. Inside a
 * container (own pid namespace, own /proc) a process cannot learn that pid,
 * so the plugin, which runs in the host pid namespace, resolves the region's
 * process slots through /proc and publishes the result in the claim's
 * read-only host directory. Format (written atomically by rename):
 *
 *   version=1
 *   <pid namespace inode> <pid> <start time> <host pid>
 *   ...
 *
 * Every line ends in '\n'; fields are decimal without sign or leading zeros,
 * one space apart; the pid namespace inode is at least 1, pid and host pid
 * are in 1..VGPU_PID_MAX, the start time (field 22 of /proc/<pid>/stat) is
 * any 64-bit value. At most VGPU_HOSTPIDS_MAX lines and
 * VGPU_HOSTPIDS_MAX_BYTES bytes. The file comes from the host but is parsed
 * as untrusted input: anything malformed rejects the whole file.
 */
#ifndef VGPU_HOSTPIDS_CONTRACT_H
#define VGPU_HOSTPIDS_CONTRACT_H

#include "vgpu_region.h"

/* The map's path below the claim directory. */
#define VGPU_HOSTPIDS_FILE "host/pids"
/* The first line of a map of this format version. */
#define VGPU_HOSTPIDS_HEADER "version=1\n"
/* A map has at most one line per region slot. */
#define VGPU_HOSTPIDS_MAX VGPU_REGION_MAX_SLOTS
/* Largest file accepted: the header plus VGPU_HOSTPIDS_MAX lines of four maximal numbers. */
#define VGPU_HOSTPIDS_MAX_BYTES (16 + VGPU_HOSTPIDS_MAX * 64)
/* Largest pid Linux hands out (PID_MAX_LIMIT on 64-bit). */
#define VGPU_PID_MAX 4194304u

#endif /* VGPU_HOSTPIDS_CONTRACT_H */
