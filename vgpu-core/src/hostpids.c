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

/* hostpids.c - see hostpids.h. */
#include "hostpids.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

static uint64_t mono_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * Parses one decimal field ending at sep: digits only, no sign, no leading
 * zero, in [min, max]. Advances *p past sep. Returns false when malformed.
 */
static bool field(const char **p, const char *end, char sep, uint64_t min, uint64_t max,
                  uint64_t *out)
{
    const char *s = *p;
    uint64_t v = 0;

    if (s >= end || *s < '0' || *s > '9' || (*s == '0' && s + 1 < end && s[1] != sep))
        return false;
    for (; s < end && *s >= '0' && *s <= '9'; s++) {
        if (v > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
            return false;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    if (s >= end || *s != sep || v < min || v > max)
        return false;
    *p = s + 1;
    *out = v;
    return true;
}

int vgpu_hostpids_parse(const char *text, size_t len, struct vgpu_hostpid_entry *out, int max,
                        char err[VGPU_ERRMSG_MAX])
{
    const char *p = text, *end = text + len;
    int n = 0, line = 1;

    if (len < strlen(VGPU_HOSTPIDS_HEADER) ||
        memcmp(text, VGPU_HOSTPIDS_HEADER, strlen(VGPU_HOSTPIDS_HEADER)) != 0) {
        snprintf(err, VGPU_ERRMSG_MAX, "line 1: want \"version=1\"");
        return -1;
    }
    p += strlen(VGPU_HOSTPIDS_HEADER);
    while (p < end) {
        uint64_t ns, pid, start, host;

        line++;
        if (n == max) {
            snprintf(err, VGPU_ERRMSG_MAX, "line %d: more than %d processes", line, max);
            return -1;
        }
        if (!field(&p, end, ' ', 1, UINT64_MAX, &ns) || !field(&p, end, ' ', 1, VGPU_PID_MAX, &pid) ||
            !field(&p, end, ' ', 0, UINT64_MAX, &start) ||
            !field(&p, end, '\n', 1, VGPU_PID_MAX, &host)) {
            snprintf(err, VGPU_ERRMSG_MAX,
                     "line %d: want \"<pidns inode> <pid> <start time> <host pid>\" in decimal",
                     line);
            return -1;
        }
        out[n++] = (struct vgpu_hostpid_entry){.pidns = ns, .pid = (uint32_t)pid,
                                               .start_time = start, .host_pid = (uint32_t)host};
    }
    return n;
}

void vgpu_hostpids_init(struct vgpu_hostpids *h, const char *dir)
{
    memset(h, 0, sizeof(*h));
    pthread_mutex_init(&h->mu, NULL);
    snprintf(h->path, sizeof(h->path), "%s/%s", dir, VGPU_HOSTPIDS_FILE);
}

void vgpu_hostpids_forked(struct vgpu_hostpids *h)
{
    pthread_mutex_init(&h->mu, NULL);
}

/* Reads the file into buf (NUL not added). Returns its length or -1 with errno set. */
static ssize_t read_map(int fd, char *buf, size_t cap)
{
    size_t len = 0;
    ssize_t r;

    while (len < cap && (r = read(fd, buf + len, cap - len)) != 0) {
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        len += (size_t)r;
    }
    return (ssize_t)len;
}

/* Re-reads the map if it was replaced since the last read. Called with h->mu held. */
static void refresh(struct vgpu_hostpids *h)
{
    char err[VGPU_ERRMSG_MAX];
    struct stat st;
    char *buf;
    ssize_t len;
    int fd, n;

    fd = open(h->path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) {
        h->n = 0; /* no map (yet): not in a container of a plugin that writes one */
        h->ino = 0;
        return;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        h->n = 0;
        return;
    }
    if ((uint64_t)st.st_ino == h->ino && (uint64_t)st.st_size == h->size &&
        (uint64_t)st.st_mtim.tv_sec * 1000000000ull + (uint64_t)st.st_mtim.tv_nsec == h->mtime_ns) {
        close(fd);
        return;
    }
    h->ino = (uint64_t)st.st_ino;
    h->size = (uint64_t)st.st_size;
    h->mtime_ns = (uint64_t)st.st_mtim.tv_sec * 1000000000ull + (uint64_t)st.st_mtim.tv_nsec;
    h->n = 0;
    if (h->table == NULL)
        h->table = malloc(VGPU_HOSTPIDS_MAX * sizeof(*h->table));
    buf = malloc(VGPU_HOSTPIDS_MAX_BYTES + 1);
    if (h->table == NULL || buf == NULL) {
        free(buf);
        close(fd);
        h->ino = 0; /* try again next time */
        return;
    }
    len = read_map(fd, buf, VGPU_HOSTPIDS_MAX_BYTES + 1);
    close(fd);
    if (len < 0) {
        VGPU_WARN("%s: cannot read: %s", h->path, strerror(errno));
    } else if (len > VGPU_HOSTPIDS_MAX_BYTES) {
        VGPU_WARN("%s: ignored: larger than %d bytes", h->path, VGPU_HOSTPIDS_MAX_BYTES);
    } else if ((n = vgpu_hostpids_parse(buf, (size_t)len, h->table, VGPU_HOSTPIDS_MAX, err)) < 0) {
        VGPU_WARN("%s: ignored: %s", h->path, err);
    } else {
        h->n = n;
        VGPU_DEBUG("%s: %d process(es) mapped to host pids", h->path, n);
    }
    free(buf);
}

uint32_t vgpu_hostpids_lookup(struct vgpu_hostpids *h, uint64_t pidns, uint32_t pid,
                              uint64_t start_time)
{
    uint32_t host = 0;
    uint64_t now;

    if (pthread_mutex_trylock(&h->mu) != 0)
        return 0;
    now = mono_ns();
    if (now >= h->next_check_ns) {
        refresh(h);
        h->next_check_ns = now + VGPU_HOSTPIDS_RECHECK_NS;
    }
    for (int i = 0; i < h->n; i++) {
        const struct vgpu_hostpid_entry *e = &h->table[i];

        if (e->pidns == pidns && e->pid == pid && e->start_time == start_time) {
            host = e->host_pid;
            break;
        }
    }
    pthread_mutex_unlock(&h->mu);
    return host;
}
