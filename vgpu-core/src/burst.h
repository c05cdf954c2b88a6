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
 * burst.h - a claim's burst grants as the library reads and asks for them
 * (docs/architecture.md, "Burstable memory").
 *
 * The grant of each GPU is read from <claim dir>/host/burst (vgpu_burstfile.h)
 * only when an allocation crosses guarantee + the grant last read, or when a
 * reservation above the guarantee checks that its grant still holds (the
 * write-then-read handshake). Asking the plugin for more is one request over
 * <claim dir>/host/burst.sock (include/vgpu_burstsock.h). Everything here is the
 * slow path: an allocation within the guarantee never comes here.
 */
#ifndef VGPU_BURST_H
#define VGPU_BURST_H

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "burstfile.h"
#include "vgpu_burstsock.h"

/* A claim's burst file as last read, and its socket. */
struct vgpu_burst {
    pthread_mutex_t mu;
    char path[PATH_MAX];          /* <dir>/host/burst */
    char sock[PATH_MAX];          /* <dir>/host/burst.sock */
    uint64_t dev, ino, mtime_ns, size; /* identity of the file table came from; ino 0: none */
    int n;                        /* entries in table (0: no file, or a refused one) */
    struct vgpu_burst_grant table[VGPU_BURST_MAX_GPUS];
};

/* Sets up b for the claim directory dir; reads nothing. */
void vgpu_burst_init(struct vgpu_burst *b, const char *dir);

/* Fork child: a lock held by a parent thread at the fork is not the child's. */
void vgpu_burst_forked(struct vgpu_burst *b);

/*
 * Returns the grant of GPU uuid in the claim's burst file: re-read when it
 * was replaced since the last read (one stat when it was not). A missing,
 * unreadable or malformed file is no grant (0): the claim is held to its
 * guarantee. Thread-safe.
 */
uint64_t vgpu_burst_grant(struct vgpu_burst *b, const char *uuid);

/*
 * Asks the plugin for a grant of need bytes in all on GPU uuid (one
 * connection, one request, one reply within VGPU_BURST_WAIT_MS). Returns 0
 * when the reply is "granted", -1 otherwise (refused, malformed, late,
 * closed, no server), with the refusal's reason or what went wrong in why.
 * The number in the reply is not used: only the file grants.
 */
int vgpu_burst_ask(const struct vgpu_burst *b, const char *uuid, uint64_t need, char why[64]);

/*
 * Reads one reply of len bytes as vgpu_burst_ask does: returns 0 for
 * "granted <n>\n", -1 for anything else, with why "granted", "refused: " and
 * the server's reason (at most 40 bytes), or "malformed reply".
 */
int vgpu_burst_parse_reply(const char *msg, size_t len, char why[64]);

#endif /* VGPU_BURST_H */
