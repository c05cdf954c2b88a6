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
 * nvml_query.h - the library's own NVML queries: NVML's view of this
 * process's context overhead on a GPU, and of the claim's processes' SM
 * utilisation. NVML is initialised once, at the first query that can load it.
 */
#ifndef VGPU_NVML_QUERY_H
#define VGPU_NVML_QUERY_H

#include <stdint.h>

#include "gpus.h"

/*
 * The overhead rule (docs/memory.md, "Context overhead"): NVML's used memory
 * for our host pid on g minus the bytes we track there, floored at 0. It is
 * charged to the claim like an allocation, without a limit check (it is
 * already in use), and published separately in the slot. Unknowable (no
 * NVML, no process entry, host pid neither in /proc nor in the claim's host
 * pid map, process-private accounting) means 0. Returns the overhead now
 * charged.
 */
uint64_t vgpu_nvml_query_overhead(struct vgpu_gpu *g);

/* One NVML per-process utilisation sample. */
struct vgpu_sm_sample {
    uint32_t pid;           /* host pid */
    uint32_t sm_util;       /* percent */
    uint64_t window_end_ns; /* CLOCK_MONOTONIC end of the window it describes (its stamp) */
};

/*
 * Newest NVML smUtil sample per process on the GPU with uuid, from the last
 * VGPU_CTL_WINDOW_NS, for the limiter. Returns the
 * number stored in out (0 when NVML saw no process busy), or -1 when NVML
 * cannot tell.
 */
int vgpu_nvml_query_sm_samples(const char *uuid, struct vgpu_sm_sample *out, int max);

/*
 * Host pids of the processes NVML lists with a context on the GPU with uuid
 * (on a MIG device: in that instance), for the limiter where NVML reports no
 * utilisation. Returns the number stored in out (at most max), or -1 when
 * NVML cannot tell.
 */
int vgpu_nvml_query_processes(const char *uuid, uint32_t *out, int max);

#endif /* VGPU_NVML_QUERY_H */
