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

/* burst.c - see burst.h. */
#include "burst.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

void vgpu_burst_init(struct vgpu_burst *b, const char *dir)
{
    memset(b, 0, sizeof(*b));
    pthread_mutex_init(&b->mu, NULL);
    snprintf(b->path, sizeof(b->path), "%s/%s", dir, VGPU_BURST_FILE);
    snprintf(b->sock, sizeof(b->sock), "%s/%s", dir, VGPU_BURST_SOCK);
}

void vgpu_burst_forked(struct vgpu_burst *b)
{
    pthread_mutex_init(&b->mu, NULL);
}

static uint64_t mtime_of(const struct stat *st)
{
    return (uint64_t)st->st_mtim.tv_sec * 1000000000ull + (uint64_t)st->st_mtim.tv_nsec;
}

/* Re-reads the file if it is not the one table came from; b->mu held. */
static void refresh(struct vgpu_burst *b)
{
    char buf[VGPU_BURST_MAX_BYTES + 1], err[VGPU_ERRMSG_MAX];
    struct stat st;
    size_t len = 0;
    ssize_t r;
    int fd, n;

    /* The plugin replaces the file by rename: a new inode each time. */
    if (stat(b->path, &st) == 0 && b->ino != 0 && (uint64_t)st.st_dev == b->dev &&
        (uint64_t)st.st_ino == b->ino && (uint64_t)st.st_size == b->size &&
        mtime_of(&st) == b->mtime_ns)
        return;
    b->n = 0;
    b->ino = 0;
    fd = open(b->path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return; /* no grant (yet) */
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return;
    }
    while (len < sizeof(buf) && (r = read(fd, buf + len, sizeof(buf) - len)) != 0) {
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            VGPU_WARN("%s: cannot read: %s", b->path, strerror(errno));
            close(fd);
            return;
        }
        len += (size_t)r;
    }
    close(fd);
    b->dev = (uint64_t)st.st_dev;
    b->ino = (uint64_t)st.st_ino;
    b->size = (uint64_t)st.st_size;
    b->mtime_ns = mtime_of(&st);
    n = vgpu_burstfile_parse(buf, len, b->table, VGPU_BURST_MAX_GPUS, err);
    if (n < 0) {
        VGPU_WARN("%s: ignored (no burst grant): %s", b->path, err);
        return;
    }
    b->n = n;
}

uint64_t vgpu_burst_grant(struct vgpu_burst *b, const char *uuid)
{
    uint64_t grant;

    pthread_mutex_lock(&b->mu);
    refresh(b);
    grant = vgpu_burstfile_lookup(b->table, b->n, uuid);
    pthread_mutex_unlock(&b->mu);
    return grant;
}

static int64_t ms_left(const struct timespec *deadline)
{
    struct timespec now;

    clock_gettime(CLOCK_MONOTONIC, &now);
    return (int64_t)(deadline->tv_sec - now.tv_sec) * 1000 +
           (deadline->tv_nsec - now.tv_nsec) / 1000000;
}

/* Waits until fd is ready for events or the deadline passes. 0 or -1. */
static int wait_for(int fd, short events, const struct timespec *deadline)
{
    struct pollfd p = {.fd = fd, .events = events};
    int64_t left;
    int r;

    for (;;) {
        left = ms_left(deadline);
        if (left < 0)
            left = 0;
        r = poll(&p, 1, (int)left);
        if (r > 0)
            return 0;
        if (r == 0 || errno != EINTR)
            return -1;
    }
}

/* Whether s (NUL-terminated) is a plain decimal: digits, no sign, no leading zero. */
static bool plain_decimal(const char *s)
{
    if (s[0] < '0' || s[0] > '9' || (s[0] == '0' && s[1] != '\0'))
        return false;
    for (; *s != '\0'; s++) {
        if (*s < '0' || *s > '9')
            return false;
    }
    return true;
}

int vgpu_burst_parse_reply(const char *msg, size_t len, char why[64])
{
    char text[VGPU_BURST_MSG_MAX + 1], *sp;

    if (len == 0 || len > VGPU_BURST_MSG_MAX || msg[len - 1] != '\n' || memchr(msg, '\0', len)) {
        snprintf(why, 64, "malformed reply");
        return -1;
    }
    memcpy(text, msg, len - 1);
    text[len - 1] = '\0';
    if (strncmp(text, VGPU_BURST_REPLY_GRANTED " ", strlen(VGPU_BURST_REPLY_GRANTED) + 1) == 0 &&
        plain_decimal(text + strlen(VGPU_BURST_REPLY_GRANTED) + 1)) {
        snprintf(why, 64, "granted");
        return 0;
    }
    if (strncmp(text, VGPU_BURST_REPLY_REFUSED " ", strlen(VGPU_BURST_REPLY_REFUSED) + 1) == 0 &&
        (sp = strchr(text + strlen(VGPU_BURST_REPLY_REFUSED) + 1, ' ')) != NULL &&
        plain_decimal(sp + 1)) {
        const char *reason = text + strlen(VGPU_BURST_REPLY_REFUSED) + 1;

        snprintf(why, 64, "refused: %.*s", (int)(sp - reason) < 40 ? (int)(sp - reason) : 40,
                 reason);
        return -1;
    }
    snprintf(why, 64, "malformed reply");
    return -1;
}

int vgpu_burst_ask(const struct vgpu_burst *b, const char *uuid, uint64_t need, char why[64])
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    char req[VGPU_BURST_MSG_MAX], rep[VGPU_BURST_MSG_MAX + 1];
    struct timespec deadline;
    ssize_t r;
    int fd, len, rc = -1;

    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += VGPU_BURST_WAIT_MS / 1000;
    deadline.tv_nsec += (long)(VGPU_BURST_WAIT_MS % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    len = snprintf(req, sizeof(req), VGPU_BURST_REQ_GROW " %s %" PRIu64 "\n", uuid, need);
    if (len <= 0 || len >= (int)sizeof(req) || strlen(b->sock) >= sizeof(addr.sun_path)) {
        snprintf(why, 64, "request or socket path too long");
        return -1;
    }
    memcpy(addr.sun_path, b->sock, strlen(b->sock) + 1);
    fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        snprintf(why, 64, "socket: %s", strerror(errno));
        return -1;
    }
    if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) != 0 &&
        (errno != EAGAIN && errno != EINPROGRESS && errno != EINTR)) {
        snprintf(why, 64, "connect: %s", strerror(errno));
        goto out;
    }
    if (wait_for(fd, POLLOUT, &deadline) != 0) {
        snprintf(why, 64, "connect: no answer in %d ms", VGPU_BURST_WAIT_MS);
        goto out;
    }
    while ((r = send(fd, req, (size_t)len, MSG_NOSIGNAL)) < 0 && errno == EINTR)
        ;
    if (r != len) {
        snprintf(why, 64, "send: %s", r < 0 ? strerror(errno) : "short");
        goto out;
    }
    if (wait_for(fd, POLLIN, &deadline) != 0) {
        snprintf(why, 64, "no reply in %d ms", VGPU_BURST_WAIT_MS);
        goto out;
    }
    /* One more byte than a message may have: a longer reply is seen as too long. */
    while ((r = recv(fd, rep, sizeof(rep), MSG_TRUNC)) < 0 && errno == EINTR)
        ;
    if (r <= 0) {
        snprintf(why, 64, "%s", r == 0 ? "closed without a reply" : strerror(errno));
        goto out;
    }
    rc = vgpu_burst_parse_reply(rep, (size_t)r > sizeof(rep) ? sizeof(rep) : (size_t)r, why);
out:
    close(fd);
    return rc;
}
