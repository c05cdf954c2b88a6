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
 * vgpu_mps_user.h - the MPS user protocol over an MPS claim's
 * host/mps.sock (contract between libvgpu.so and the kubelet plugin's
 * per-claim server; Go side: pkg/contract/mpsuser; docs/mps.md,
 * "Containers of different users").
 *
 * Before multi-user MPS, one MPS server serves one user id at a time: a
 * client of another uid waits until the running server's clients are done.
 * So a process of an MPS claim asks before the driver's cuInit, and the
 * plugin answers from the uid the kernel gives it for the connection
 * (SO_PEERCRED, which the container cannot forge).
 *
 * Transport: AF_UNIX SOCK_SEQPACKET at <claim dir>/host/mps.sock. The
 * client sends exactly one message and reads exactly one reply. Every
 * message is at most VGPU_MPS_USER_MSG_MAX bytes, ends with '\n', has its
 * fields separated by one space and its numbers in plain decimal (no sign,
 * no leading zeros, at most 4294967295):
 *
 *   request:  "use\n"
 *   replies:  "allowed <asker uid>\n"
 *             "refused user <GPU UUID> <served uid> <asker uid>\n"
 *             "refused request\n"        the request was malformed
 *             "refused limit <holds>\n"  the claim's processes hold as many
 *                                        connections as it may
 *
 * <GPU UUID> is "GPU-" followed by hex digits and dashes, 5 to 64 bytes.
 * An allowed client keeps the connection open for its process's life: the
 * connection is its hold on the GPU's user, released when the kernel closes
 * it (exit, SIGKILL). Anything else a reply may be is malformed; the client
 * fails closed on it, on no reply within VGPU_MPS_USER_WAIT_MS (connect
 * retries of a socket not there yet included) and on a refusal.
 */
#ifndef VGPU_MPS_USER_PROTO_H
#define VGPU_MPS_USER_PROTO_H

/* The socket's path below the claim directory. */
#define VGPU_MPS_USER_SOCK "host/mps.sock"
/* Largest request or reply, newline included. */
#define VGPU_MPS_USER_MSG_MAX 128
/* How long the client waits for its reply, connect and its retries included. */
#define VGPU_MPS_USER_WAIT_MS 5000

#define VGPU_MPS_USER_REQUEST "use\n"
#define VGPU_MPS_USER_ALLOWED "allowed"
#define VGPU_MPS_USER_REFUSED "refused"

/* Refusal reasons. */
#define VGPU_MPS_USER_REFUSED_USER "user"       /* the GPU's MPS serves another uid */
#define VGPU_MPS_USER_REFUSED_REQUEST "request" /* malformed request */
#define VGPU_MPS_USER_REFUSED_LIMIT "limit"     /* the claim holds its bound of connections */

#endif /* VGPU_MPS_USER_PROTO_H */
