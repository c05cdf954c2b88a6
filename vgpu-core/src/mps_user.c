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

/* mps_user.c - see mps_user.h. */
#include "mps_user.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "injected.h"
#include "log.h"
#include "vgpu_env.h"

/* Between connect tries while the socket is missing or refuses. */
#define RETRY_MS 50

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits for events on fd until deadline (ms, CLOCK_MONOTONIC). 0 or -1. */
static int wait_for(int fd, short events, int64_t deadline)
{
    struct pollfd p = {.fd = fd, .events = events};
    int64_t left;
    int r;

    for (;;) {
        left = deadline - now_ms();
        r = poll(&p, 1, left < 0 ? 0 : (int)left);
        if (r > 0)
            return 0;
        if (r == 0 || errno != EINTR)
            return -1;
    }
}

/* Connects to sock, retrying a missing or refusing socket until deadline. */
static int connect_until(const char *sock, int64_t deadline, char *why, size_t why_size)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};

    if (strlen(sock) >= sizeof(addr.sun_path)) {
        snprintf(why, why_size, "socket path %s too long", sock);
        return -1;
    }
    memcpy(addr.sun_path, sock, strlen(sock) + 1);
    for (;;) {
        int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        int err;

        if (fd < 0) {
            snprintf(why, why_size, "socket: %s", strerror(errno));
            return -1;
        }
        if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) == 0 || errno == EINPROGRESS ||
            errno == EAGAIN || errno == EINTR) {
            if (wait_for(fd, POLLOUT, deadline) == 0)
                return fd;
            close(fd);
            snprintf(why, why_size, "no answer from %s within %d ms", sock, VGPU_MPS_USER_WAIT_MS);
            return -1;
        }
        err = errno;
        close(fd);
        if ((err != ENOENT && err != ECONNREFUSED) || now_ms() + RETRY_MS > deadline) {
            snprintf(why, why_size, "cannot connect to %s: %s", sock, strerror(err));
            return -1;
        }
        poll(NULL, 0, RETRY_MS);
    }
}

int vgpu_mps_user_ask(const char *sock, int wait_ms, char *why, size_t why_size)
{
    char rep[VGPU_MPS_USER_MSG_MAX + 1];
    struct vgpu_mps_user_reply r;
    int64_t deadline = now_ms() + wait_ms;
    size_t len = strlen(VGPU_MPS_USER_REQUEST);
    ssize_t n;
    int fd = connect_until(sock, deadline, why, why_size);

    if (fd < 0)
        return -1;
    while ((n = send(fd, VGPU_MPS_USER_REQUEST, len, MSG_NOSIGNAL)) < 0 && errno == EINTR)
        ;
    if (n != (ssize_t)len) {
        snprintf(why, why_size, "send to %s: %s", sock, n < 0 ? strerror(errno) : "short");
        goto fail;
    }
    if (wait_for(fd, POLLIN, deadline) != 0) {
        snprintf(why, why_size, "no reply from %s within %d ms", sock, wait_ms);
        goto fail;
    }
    /* One byte more than a reply may have: a longer one is seen as too long. */
    while ((n = recv(fd, rep, sizeof(rep), MSG_TRUNC)) < 0 && errno == EINTR)
        ;
    if (n <= 0) {
        snprintf(why, why_size, "%s: %s", sock, n == 0 ? "closed without a reply" : strerror(errno));
        goto fail;
    }
    if (vgpu_mps_user_reply_parse(rep, (size_t)n > sizeof(rep) ? sizeof(rep) : (size_t)n, &r) != 0) {
        snprintf(why, why_size, "malformed reply from %s", sock);
        goto fail;
    }
    if (!r.allowed) {
        vgpu_mps_user_reply_message(&r, why, why_size);
        goto fail;
    }
    return fd;
fail:
    close(fd);
    return -1;
}

/* The held connections: closed by the kernel at exit, or here when another claim is refused. */
static int held[VGPU_INJECTED_MAX];
static int held_count;
static int check_result;

/* Whether any device of cfg is an MPS one. */
static bool has_mps(const struct vgpu_claim_config *cfg)
{
    for (uint32_t k = 0; k < cfg->device_count; k++) {
        if (cfg->devices[k].mps)
            return true;
    }
    return false;
}

static void check(void)
{
    struct vgpu_injected_set *set = calloc(1, sizeof(*set));
    struct vgpu_claim_config *cfg = calloc(1, sizeof(*cfg));
    char why[VGPU_ERRMSG_MAX], sock[PATH_MAX + 64];

    if (set == NULL || cfg == NULL) {
        VGPU_ERROR("MPS: out of memory asking the kubelet plugin for this process's uid; "
                   "CUDA is not initialised");
        check_result = -1;
        goto out;
    }
    vgpu_injected_find(VGPU_MOUNTINFO_PATH, VGPU_CANONICAL_CLAIMS_ROOT, getenv(VGPU_ENV_CLAIMS_ROOT),
                       true, set);
    for (int i = 0; i < set->count && i < VGPU_INJECTED_MAX; i++) {
        char err[VGPU_ERRMSG_MAX];
        size_t len = 0;
        char *text;
        int fd = vgpu_injected_open(set->root, &set->configs[i], err);

        if (fd < 0 || (text = vgpu_config_read(fd, &len)) == NULL)
            continue;
        fd = vgpu_config_parse(text, len, cfg, err, NULL) == 0 && has_mps(cfg) ? 0 : -1;
        free(text);
        if (fd != 0)
            continue;
        snprintf(sock, sizeof(sock), "%s/%s/%s", set->root, set->configs[i].name, VGPU_MPS_USER_SOCK);
        fd = vgpu_mps_user_ask(sock, VGPU_MPS_USER_WAIT_MS, why, sizeof(why));
        if (fd < 0) {
            VGPU_ERROR("MPS: %s; cuInit fails with CUDA_ERROR_MPS_CONNECTION_FAILED rather than "
                       "wait for the GPU's MPS server",
                       why);
            check_result = -1;
            /* No hold on the other GPUs for a process that cannot use CUDA. */
            while (held_count > 0)
                close(held[--held_count]);
            goto out;
        }
        held[held_count++] = fd;
    }
out:
    free(cfg);
    free(set);
}

int vgpu_mps_user_check(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;

    pthread_once(&once, check);
    return check_result;
}
