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
 * sharefd.h - what names a VMM allocation exported as a POSIX fd that is not
 * a regular file (VGPU_SHARED_KIND_VMM_FD keys, vgpu_region.h).
 *
 * NVIDIA's driver exports onto a fresh open of its control node: every
 * export has the same inode, and only the open file description is the
 * allocation's. The exporter's library marks that description with an OFD
 * lock (F_OFD_SETLK) of one byte at a random offset, the nonce, which it
 * also puts in the claim's shared record. An OFD lock belongs to the
 * description: it travels with the fd (SCM_RIGHTS, pidfd_getfd, dup, fork)
 * and goes when the description's last fd is closed. An importer reads it
 * back from /proc/self/fdinfo/<fd>, which lists only locks of that
 * description (OFD ones owned by it, POSIX ones our process took through
 * it). The nonce is no secret (/proc/locks shows it); it only has to be
 * unique, so that a mark never names another claim's or another
 * allocation's record.
 */
#ifndef VGPU_SHAREFD_H
#define VGPU_SHAREFD_H

#include <stdint.h>

/* Nonces are 1..2^62-1: the one-byte lock range stays far below OFFSET_MAX. */
#define VGPU_SHAREFD_NONCE_MAX ((1ULL << 62) - 1)

/* Offset of the nonce in a VGPU_SHARED_KIND_VMM_FD key (8 bytes, little endian). */
#define VGPU_SHAREFD_KEY_NONCE 16

/* A fresh random nonce into *nonce. Returns 0, or -1 (errno set; no randomness yet: no wait). */
int vgpu_sharefd_nonce_new(uint64_t *nonce);

/*
 * Marks fd's open file description with nonce: a one-byte OFD lock at
 * offset nonce, a read lock unless fd is open write-only. Marking it again
 * with the same nonce changes nothing. Returns 0, or -1 (errno set).
 */
int vgpu_sharefd_mark(int fd, uint64_t nonce);

/*
 * The nonce of fd's open file description into *nonce: its one OFD lock,
 * one byte long at an offset in 1..VGPU_SHAREFD_NONCE_MAX. Returns 0, or -1
 * when /proc/self/fdinfo/<fd> cannot be read, lists no OFD lock, several,
 * or one of another form (never a guess).
 */
int vgpu_sharefd_nonce(int fd, uint64_t *nonce);

/*
 * Whether an export's open file description may still be open somewhere:
 * an OFD lock in /proc/locks (which lists OFD locks of every pid
 * namespace) at offset nonce, or, for nonce 0, any OFD lock on the file
 * (dev, ino) (a regular file's export, marked at a random offset). The
 * lock goes with the description's last fd, wherever that was. Returns 1,
 * 0 when there is none, or 1 when /proc/locks cannot be read (the memory
 * is then taken to be held: over-charge, never under-charge).
 */
int vgpu_sharefd_open(uint64_t dev, uint64_t ino, uint64_t nonce);

#endif /* VGPU_SHAREFD_H */
