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

/* procinfo.c - see procinfo.h. */
#include "procinfo.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vgpu_region.h"

/* Reads a small /proc file into buf (NUL-terminated). Returns bytes read or -errno. */
static ssize_t read_small(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n;

    if (fd < 0)
        return -errno;
    n = read(fd, buf, len - 1);
    if (n < 0)
        n = -errno;
    close(fd);
    if (n >= 0)
        buf[n] = '\0';
    return n;
}

int vgpu_proc_start_time(pid_t pid, uint64_t *start)
{
    char path[64], buf[1024];
    const char *p;
    ssize_t n;
    int field;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    n = read_small(path, buf, sizeof(buf));
    if (n < 0)
        return (int)n;
    /* comm (field 2) may hold spaces and parentheses: fields resume after the last ')'. */
    p = strrchr(buf, ')');
    if (p == NULL)
        return -EINVAL;
    p++;
    /* A zombie has released its GPU memory already: report it as gone. */
    if (p[0] == ' ' && (p[1] == 'Z' || p[1] == 'X'))
        return -ESRCH;
    /* p is at the space before field 3 (state); advance to the one before field 22. */
    for (field = 3; field < 22 && p != NULL; field++) {
        p = strchr(p + 1, ' ');
    }
    if (p == NULL)
        return -EINVAL;
    *start = strtoull(p + 1, NULL, 10);
    return 0;
}

/* Parses the first number of the "NSpid:" line of /proc/self/status when it has several. */
static uint32_t outer_pid_from_status(void)
{
    char buf[4096];
    const char *line;
    unsigned long first, second;

    if (read_small("/proc/self/status", buf, sizeof(buf)) < 0)
        return 0;
    line = strstr(buf, "\nNSpid:");
    if (line == NULL)
        return 0;
    if (sscanf(line + strlen("\nNSpid:"), "%lu %lu", &first, &second) == 2)
        return (uint32_t)first;
    return 0;
}

int vgpu_procinfo_self(struct vgpu_procinfo *info)
{
    struct stat st;

    memset(info, 0, sizeof(*info));
    info->pid = getpid();
    if (vgpu_proc_start_time(info->pid, &info->start_time) != 0)
        return -1;
    if (stat("/proc/self/ns/pid", &st) == 0)
        info->pidns = (uint64_t)st.st_ino;
    /* In the initial namespace our pid is the host pid; below it /proc may show the outer one. */
    if (info->pidns == VGPU_INIT_PIDNS_INO)
        info->host_pid = (uint32_t)info->pid;
    else
        info->host_pid = outer_pid_from_status();
    return 0;
}

bool vgpu_proc_owner_alive(const struct vgpu_procinfo *self, pid_t pid, uint64_t pidns,
                           uint64_t start_time)
{
    uint64_t now_start;
    int rc;

    if (pidns == 0 || pidns != self->pidns)
        return true;
    if (pid == self->pid)
        return start_time == self->start_time;
    rc = vgpu_proc_start_time(pid, &now_start);
    if (rc == -ENOENT || rc == -ESRCH)
        return false;
    if (rc != 0)
        return true;
    return now_start == start_time;
}
