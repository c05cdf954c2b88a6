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

/* sharefd.c - see sharefd.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "sharefd.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "parse.h"

int vgpu_sharefd_nonce_new(uint64_t *nonce)
{
    uint64_t v;
    ssize_t n;

    /* An export must not wait for the entropy pool: without it the fd stays unmarked. */
    n = getrandom(&v, sizeof(v), GRND_NONBLOCK);
    if (n != (ssize_t)sizeof(v)) {
        if (n >= 0)
            errno = EIO;
        return -1;
    }
    *nonce = v % VGPU_SHAREFD_NONCE_MAX + 1;
    return 0;
}

int vgpu_sharefd_mark(int fd, uint64_t nonce)
{
    struct flock l = {.l_whence = SEEK_SET, .l_start = (off_t)nonce, .l_len = 1};
    int flags = fcntl(fd, F_GETFL);

    if (flags < 0)
        return -1;
    /* A read lock needs a readable fd, a write lock a writable one. */
    l.l_type = (flags & O_ACCMODE) == O_WRONLY ? F_WRLCK : F_RDLCK;
    return fcntl(fd, F_OFD_SETLK, &l) == 0 ? 0 : -1;
}

int vgpu_sharefd_nonce(int fd, uint64_t *nonce)
{
    char path[64], buf[4096];
    size_t len = 0;
    ssize_t n = 0;
    int in, locks = 0;
    uint64_t found = 0;

    snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
    in = open(path, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return -1;
    while (len < sizeof(buf) - 1 && (n = read(in, buf + len, sizeof(buf) - 1 - len)) > 0)
        len += (size_t)n;
    close(in);
    /* A read error, or more than fits: a lock we did not see might be the other candidate. */
    if (n < 0 || len == sizeof(buf) - 1)
        return -1;
    buf[len] = '\0';
    /* "lock:\t<id>: OFDLCK ADVISORY  READ -1 <maj>:<min>:<ino> <start> <end>" */
    for (char *line = buf, *next; line != NULL; line = next) {
        char class[16], start[24], end[24];
        uint64_t s, e;

        next = strchr(line, '\n');
        if (next != NULL)
            *next++ = '\0';
        if (strncmp(line, "lock:", 5) != 0)
            continue;
        if (sscanf(line + 5, "%*d: %15s", class) != 1 || strcmp(class, "OFDLCK") != 0)
            continue;
        locks++;
        if (sscanf(line + 5, "%*d: %*s %*s %*s %*s %*s %23s %23s", start, end) != 2 ||
            vgpu_parse_uint(start, VGPU_SHAREFD_NONCE_MAX, &s) != 0 ||
            vgpu_parse_uint(end, VGPU_SHAREFD_NONCE_MAX, &e) != 0 || s != e || s == 0)
            return -1;
        found = s;
    }
    if (locks != 1)
        return -1;
    *nonce = found;
    return 0;
}

int vgpu_sharefd_open(uint64_t dev, uint64_t ino, uint64_t nonce)
{
    char *line = NULL;
    size_t cap = 0;
    int found = 0;
    FILE *f = fopen("/proc/locks", "re");

    if (f == NULL)
        return 1;
    /* "<n>: OFDLCK ADVISORY  READ -1 <maj>:<min>:<ino> <start> <end>" (waiters: "<n>: -> ..."). */
    while (!found && getline(&line, &cap, f) > 0) {
        char class[16], start[24];
        unsigned int maj, min;
        unsigned long long i;
        uint64_t s;

        if (sscanf(line, "%*d: %15s %*s %*s %*s %x:%x:%llu %23s", class, &maj, &min, &i,
                   start) != 5 ||
            strcmp(class, "OFDLCK") != 0)
            continue;
        if (nonce != 0)
            found = vgpu_parse_uint(start, VGPU_SHAREFD_NONCE_MAX, &s) == 0 && s == nonce;
        else
            found = makedev(maj, min) == (dev_t)dev && (uint64_t)i == ino;
    }
    if (ferror(f))
        found = 1;
    free(line);
    fclose(f);
    return found;
}
