/*
 * nvml_hooks.h - what the NVML wrappers (nvml_hooks.c) offer the rest of the
 * library: NVML's view of this process's context overhead on a GPU.
 */
#ifndef VGPU_NVML_HOOKS_H
#define VGPU_NVML_HOOKS_H

#include "gpus.h"

/*
 * Refreshes the NVML-reported context overhead of this process on g (rule in
 * README.md) and charges the difference to the claim.
 */
void vgpu_overhead_refresh(struct vgpu_gpu *g);

#endif /* VGPU_NVML_HOOKS_H */
