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
 * vgpu_env.h - environment variables libvgpu.so reads (contract with the
 * kubelet plugin, which sets them in the claim's CDI spec; the Go side spells
 * them in pkg/contract/names, and a test there compares both).
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
