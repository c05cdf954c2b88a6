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
 * vgpu_burstsock.h - the burst request protocol over a claim's host/burst.sock
 * (contract between libvgpu.so, the client, and the kubelet plugin's
 * per-claim server; the Go side is pkg/contract/burstsock;
 * docs/architecture.md, "Burstable memory").
 *
 * Transport: AF_UNIX SOCK_SEQPACKET at <claim dir>/host/burst.sock. The
 * client connects once per request (a plugin restart is invisible to it),
 * sends exactly one message and reads exactly one reply:
 *
 *   request:  "grow <GPU> <bytes>\n"
 *   replies:  "granted <grant bytes>\n"
 *             "refused <reason> <grant bytes>\n"
 *
 * <GPU> is the device's name in the claim's config and burst file: its
 * GPU- UUID, or MIG-<uuid> for a MIG instance (hex digits in either case:
 * the library sends the config's name lower-cased). <bytes> is the whole grant
 * the client needs on that GPU: claim-wide use + the allocation - the
 * guarantee. Numbers are decimal, no sign, no leading zeros. Every message is
 * at most VGPU_BURST_MSG_MAX bytes. The server replies only after the
 * claim's host/burst shows the answer (written atomically, by rename).
 *
 * The client treats any reply other than "granted", a reply later than its
 * wait (VGPU_BURST_WAIT_MS), a closed connection or a connect error as a
 * refusal, and never trusts the number in a reply over host/burst: only
 * the file raises its limit.
 */
#ifndef VGPU_BURSTSOCK_H
#define VGPU_BURSTSOCK_H

/* The socket's path below the claim directory. */
#define VGPU_BURST_SOCK "host/burst.sock"
/* Largest request or reply, newline included. */
#define VGPU_BURST_MSG_MAX 128
/* How long the client waits for the reply, connect included. */
#define VGPU_BURST_WAIT_MS 100

#define VGPU_BURST_REQ_GROW "grow"
#define VGPU_BURST_REPLY_GRANTED "granted"
#define VGPU_BURST_REPLY_REFUSED "refused"

/* Refusal reasons. */
#define VGPU_BURST_REFUSED_LIMIT "limit"           /* above the claim's memoryLimit */
#define VGPU_BURST_REFUSED_FULL "full"             /* does not fit on the GPU */
#define VGPU_BURST_REFUSED_RECLAIMING "reclaiming" /* the claim is being reclaimed from */
#define VGPU_BURST_REFUSED_NEVER "never"           /* burst: never, or no ceiling above the guarantee */
#define VGPU_BURST_REFUSED_GPU "gpu"               /* the claim has no share of that GPU */
#define VGPU_BURST_REFUSED_REQUEST "request"       /* malformed request */
#define VGPU_BURST_REFUSED_RATE "rate"             /* the claim asked faster than its token bucket */

#endif /* VGPU_BURSTSOCK_H */
