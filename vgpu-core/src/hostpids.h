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
 * hostpids.h - libvgpu.so's reader of the claim's host pid map (format:
 * include/vgpu_hostpids.h): the parser, and the table a process looks its
 * host pid up in, read again when the plugin replaces the file. A malformed
 * map is logged once per change of the file and maps nothing.
 */
#ifndef VGPU_HOSTPIDS_H
#define VGPU_HOSTPIDS_H

#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "vgpu_hostpids.h"

/* How often an unchanged or missing file is looked at again. */
#define VGPU_HOSTPIDS_RECHECK_NS 1000000000ull

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
