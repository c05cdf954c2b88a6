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
 * procinfo.h - identity of a process for slot ownership: pid, pid namespace
 * and start time, so that a reused pid is never taken for a live owner.
 */
#ifndef VGPU_PROCINFO_H
#define VGPU_PROCINFO_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct vgpu_procinfo {
    pid_t pid;
    uint32_t host_pid;   /* 0 when /proc cannot tell (pid namespace): see hostpids.h */
    uint64_t start_time; /* /proc/<pid>/stat field 22 */
    uint64_t pidns;      /* inode of /proc/self/ns/pid, 0 if unreadable */
};

/* Fills *info for the calling process. Returns 0, or -1 if /proc/self/stat is unreadable. */
int vgpu_procinfo_self(struct vgpu_procinfo *info);

/*
 * Reads the start time of pid from /proc. Returns 0 and sets *start, -ENOENT
 * if the process does not exist, -ESRCH if it is a zombie, or another
 * negative errno when unknowable.
 */
int vgpu_proc_start_time(pid_t pid, uint64_t *start);

/*
 * Returns true unless the owner (pid, start_time) in pid namespace pidns is
 * known to be gone. Owners in other pid namespaces are presumed alive: their
 * pids mean nothing here.
 */
bool vgpu_proc_owner_alive(const struct vgpu_procinfo *self, pid_t pid, uint64_t pidns,
                           uint64_t start_time);

#endif /* VGPU_PROCINFO_H */
