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

/* fake_fdscan.c - see fake_fdscan.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "fake_fdscan.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The eventfd counter of fd n of process pid, via its fdinfo; -1 if unreadable. */
static int eventfd_count(const char *pid, const char *n, unsigned long long *count)
{
    char path[600], buf[1024], *p;
    ssize_t len;
    int in;

    snprintf(path, sizeof(path), "/proc/%s/fdinfo/%s", pid, n);
    in = open(path, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return -1;
    len = read(in, buf, sizeof(buf) - 1);
    close(in);
    if (len <= 0)
        return -1;
    buf[len] = '\0';
    p = strstr(buf, "eventfd-count:");
    return p != NULL && sscanf(p, "eventfd-count: %llx", count) == 1 ? 0 : -1;
}

/* Whether process pid (a /proc entry name) has such an fd open. */
static bool process_has(const char *pid, uint32_t kind, uint64_t dev, uint64_t ino, uint64_t tag)
{
    char path[300];
    struct dirent *e;
    bool found = false;
    DIR *d;

    snprintf(path, sizeof(path), "/proc/%s/fd", pid);
    d = opendir(path);
    if (d == NULL)
        return false;
    while (!found && (e = readdir(d)) != NULL) {
        struct stat st;
        unsigned long long count;

        if (e->d_name[0] == '.' || fstatat(dirfd(d), e->d_name, &st, 0) != 0 ||
            (uint64_t)st.st_dev != dev || (uint64_t)st.st_ino != ino)
            continue;
        found = kind == FAKE_FDSCAN_MEMFD ||
                (eventfd_count(pid, e->d_name, &count) == 0 && count == tag);
    }
    closedir(d);
    return found;
}

bool fake_fdscan_open(uint32_t kind, uint64_t dev, uint64_t ino, uint64_t tag)
{
    struct dirent *e;
    bool found = false;
    DIR *d;

    if (kind != FAKE_FDSCAN_MEMFD && kind != FAKE_FDSCAN_EVENTFD)
        return false;
    d = opendir("/proc");
    if (d == NULL)
        return true; /* cannot look: the memory stays */
    while (!found && (e = readdir(d)) != NULL)
        if (e->d_name[0] >= '1' && e->d_name[0] <= '9')
            found = process_has(e->d_name, kind, dev, ino, tag);
    closedir(d);
    return found;
}
