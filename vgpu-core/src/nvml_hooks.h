/*
 * nvml_hooks.h - what the NVML wrappers (nvml_hooks.c) offer the rest of the
 * library: NVML's view of this process's context overhead on a GPU, and of
 * the claim's processes' SM utilisation.
 */
#ifndef VGPU_NVML_HOOKS_H
#define VGPU_NVML_HOOKS_H

#include <stdint.h>

#include "gpus.h"

/*
 * Refreshes the NVML-reported context overhead of this process on g (rule in
 * docs/memory.md, "Context overhead") and charges the difference to the claim. Returns the overhead
 * now charged (0 when it cannot be known).
 */
uint64_t vgpu_overhead_refresh(struct vgpu_gpu *g);

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
int vgpu_nvml_sm_samples(const char *uuid, struct vgpu_sm_sample *out, int max);

#endif /* VGPU_NVML_HOOKS_H */
