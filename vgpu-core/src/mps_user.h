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
 * mps_user.h - an MPS claim's process asks the kubelet plugin whether its
 * uid may use the claim's MPS GPU before the driver's cuInit
 * (vgpu_mps_user.h holds the protocol; docs/mps.md, "Containers of
 * different users"). A process the plugin refuses, or that gets no answer,
 * fails cuInit with CUDA_ERROR_MPS_CONNECTION_FAILED at once instead of
 * waiting inside the driver for a server of another user to end.
 */
#ifndef VGPU_MPS_USER_H
#define VGPU_MPS_USER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vgpu_mps_user.h"

/* One parsed reply. */
struct vgpu_mps_user_reply {
    bool allowed;
    char reason[16];  /* a VGPU_MPS_USER_REFUSED_* word when refused */
    char gpu[65];     /* VGPU_MPS_USER_REFUSED_USER: the GPU */
    uint32_t served;  /* VGPU_MPS_USER_REFUSED_USER: the uid its MPS serves */
    uint32_t asker;   /* allowed and VGPU_MPS_USER_REFUSED_USER: the asker's uid */
    uint32_t limit;   /* VGPU_MPS_USER_REFUSED_LIMIT: the claim's bound */
};

/*
 * Parses the len bytes of msg as a reply (vgpu_mps_user.h). Returns 0, or
 * -1 for anything the protocol does not allow (out is then unspecified).
 */
int vgpu_mps_user_reply_parse(const char *msg, size_t len, struct vgpu_mps_user_reply *out);

/* Writes the message for reply r into buf (always terminated). */
void vgpu_mps_user_reply_message(const struct vgpu_mps_user_reply *r, char *buf, size_t size);

/*
 * Asks the server at sock (a socket path) once, waiting at most wait_ms in
 * all (connect retried while the socket is missing or refuses, as during a
 * plugin restart). Returns the connected descriptor when allowed (the
 * caller keeps it open: it is the hold), or -1 with why filled (the
 * refusal's message, or what failed).
 */
int vgpu_mps_user_ask(const char *sock, int wait_ms, char *why, size_t why_size);

/*
 * Once per process, before the driver's cuInit: asks the socket of every
 * injected claim with mps lines (none: nothing to ask). Returns 0 when all
 * allowed, keeping their connections open for the process's life; else -1
 * after logging the reason at error level (stderr). Concurrent callers wait
 * for the first; later calls return its result.
 */
int vgpu_mps_user_check(void);

#endif /* VGPU_MPS_USER_H */
