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
 * hostpids.h - the host pid map of a claim (<claimdir>/host/pids).
 *
 * NVML names processes by their pid in the host's pid namespace. Inside a
 * container (own pid namespace, own /proc) a process cannot learn that pid,
 * so the kubelet plugin, which runs in the host pid namespace, resolves the
 * region's process slots through /proc and publishes the result in a
 * read-only directory mounted into the claim's containers. Format (written
 * atomically by rename; every field decimal, one space apart):
 *
 *   version=1
 *   <pid namespace inode> <pid> <start time> <host pid>
 *   ...
 *
 * The file comes from the host but is parsed as untrusted input: anything
 * malformed rejects the whole file (logged once per change of the file).
 */
#ifndef VGPU_HOSTPIDS_H
#define VGPU_HOSTPIDS_H

#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "vgpu_region.h"

/* The map's path below the claim directory. */
#define VGPU_HOSTPIDS_FILE "host/pids"
/* A map has at most one line per region slot. */
#define VGPU_HOSTPIDS_MAX VGPU_REGION_MAX_SLOTS
/* Largest file accepted: the header plus VGPU_HOSTPIDS_MAX lines of four maximal numbers. */
#define VGPU_HOSTPIDS_MAX_BYTES (16 + VGPU_HOSTPIDS_MAX * 64)
/* How often an unchanged or missing file is looked at again. */
#define VGPU_HOSTPIDS_RECHECK_NS 1000000000ull
/* Largest pid Linux hands out (PID_MAX_LIMIT on 64-bit). */
#define VGPU_PID_MAX 4194304u

/* One process of the claim: its identity in its own namespace and its host pid. */
struct vgpu_hostpid_entry {
    uint64_t pidns;
    uint64_t start_time;
    uint32_t pid;
    uint32_t host_pid;
};

/*
 * Parses the map text (len bytes, need not be NUL-terminated) into out (max
 * entries). Returns the number of entries, or -1 with the reason (naming the
 * line) in err.
 */
int vgpu_hostpids_parse(const char *text, size_t len, struct vgpu_hostpid_entry *out, int max,
                        char err[VGPU_ERRMSG_MAX]);

/* A claim's map as last read, refreshed lazily. */
struct vgpu_hostpids {
    pthread_mutex_t mu;
    char path[PATH_MAX];
    uint64_t next_check_ns; /* CLOCK_MONOTONIC before which the file is not looked at */
    uint64_t ino, mtime_ns, size; /* identity of the file the table came from */
    int n;                         /* entries in table */
    struct vgpu_hostpid_entry *table; /* VGPU_HOSTPIDS_MAX entries, allocated on first read */
};

/* Sets up h for the claim directory dir; reads nothing. */
void vgpu_hostpids_init(struct vgpu_hostpids *h, const char *dir);

/*
 * Returns the host pid of the process (pidns, pid, start_time) from the map,
 * or 0 when the map does not list it. The file is read again only when at
 * least VGPU_HOSTPIDS_RECHECK_NS passed since the last look and it was
 * replaced since. Thread-safe; returns 0 at once if another thread is
 * reading the map.
 */
uint32_t vgpu_hostpids_lookup(struct vgpu_hostpids *h, uint64_t pidns, uint32_t pid,
                              uint64_t start_time);

/* Fork child: a lock held by a parent thread at the fork is not the child's. */
void vgpu_hostpids_forked(struct vgpu_hostpids *h);

#endif /* VGPU_HOSTPIDS_H */
