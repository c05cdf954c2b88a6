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
 * fake_fdscan.h - whether an exported VMM fd's open file description is
 * still open anywhere on the node (fake driver and its tests).
 *
 * NVIDIA's resource manager holds the exported memory object for as long as
 * the fd it exported is open, in whatever process it reached: the memory
 * lives on after every handle is released and every mapping unmapped. The
 * fake driver cannot count a description's references, so it looks: a
 * process's fds are in /proc/<pid>/fd, each one's file identity by stat and
 * its state in /proc/<pid>/fdinfo. An fd inside an SCM_RIGHTS message in
 * flight is in no process and is not seen.
 */
#ifndef VGPU_FAKE_FDSCAN_H
#define VGPU_FAKE_FDSCAN_H

#include <stdbool.h>
#include <stdint.h>

/* How an export's description is recognised (fake_ipc.fd_kind). */
#define FAKE_FDSCAN_NONE 0u
#define FAKE_FDSCAN_MEMFD 1u   /* the allocation's own memfd: its (st_dev, st_ino) */
#define FAKE_FDSCAN_EVENTFD 2u /* an eventfd (one inode for all) whose counter is tag */

/*
 * Whether some process has an fd open on an export of kind, file (dev, ino)
 * and, for an eventfd, counter tag.
 */
bool fake_fdscan_open(uint32_t kind, uint64_t dev, uint64_t ino, uint64_t tag);

#endif /* VGPU_FAKE_FDSCAN_H */
