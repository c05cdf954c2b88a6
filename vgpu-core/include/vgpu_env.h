/*
 * vgpu_env.h - environment variables libvgpu.so reads (contract with the
 * kubelet plugin, which sets them in the claim's CDI spec; the Go side spells
 * them in pkg/devices/names, and a test there compares both).
 *
 * The limits may only lower what the claim's config grants, never raise it.
 */
#ifndef VGPU_ENV_H
#define VGPU_ENV_H

/* Memory limit of a GPU: VGPU_ENV_MEMORY_LIMIT "_<CUDA index>", or without a
 * suffix for every GPU; a size such as "4096m". */
#define VGPU_ENV_MEMORY_LIMIT "CUDA_DEVICE_MEMORY_LIMIT"

/* SM share of a GPU in percent, suffixed like VGPU_ENV_MEMORY_LIMIT. */
#define VGPU_ENV_SM_LIMIT "CUDA_DEVICE_SM_LIMIT"

/* Path of the claim's shared region inside the container. */
#define VGPU_ENV_SHARED_REGION "CUDA_DEVICE_MEMORY_SHARED_CACHE"

/* Where the claims' configs are mounted, for tests (default the canonical root). */
#define VGPU_ENV_CLAIMS_ROOT "VGPU_CLAIMS_ROOT"

/* Log level of the library. */
#define VGPU_ENV_LOG_LEVEL "LIBCUDA_LOG_LEVEL"

#endif /* VGPU_ENV_H */
