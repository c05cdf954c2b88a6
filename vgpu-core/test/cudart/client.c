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
 * client.c - a small program on NVIDIA's real CUDA runtime (libcudart.so.12)
 * and, when given, cuBLAS (libcublas.so.12), loaded by path. It prints one
 * line per call, "name result [value]", so a run with libvgpu.so preloaded
 * can be compared line by line with a run without it (test/cudart/run.sh).
 *
 * usage: cudart-client LIBCUDART [LIBCUBLAS]
 */
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>

typedef int cudaError_t;
typedef cudaError_t (*int_out_fn)(int *);
typedef cudaError_t (*int_in_fn)(int);
typedef cudaError_t (*malloc_fn)(void **, size_t);
typedef cudaError_t (*free_fn)(void *);
typedef cudaError_t (*meminfo_fn)(size_t *, size_t *);
typedef const char *(*errname_fn)(cudaError_t);
typedef int (*blas_create_fn)(void **);
typedef int (*blas_version_fn)(void *, int *);

#define LOAD(h, type, name)                                                                        \
    type name = (type)dlsym(h, #name);                                                             \
    if (name == NULL) {                                                                            \
        fprintf(stderr, "cudart-client: %s: %s\n", #name, dlerror());                              \
        return 2;                                                                                  \
    }

int main(int argc, char **argv)
{
    void *rt, *blas, *blas_handle = NULL, *dptr = NULL;
    int version = 0, count = -1;
    size_t free_b = 0, total_b = 0;
    cudaError_t rc;

    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: cudart-client LIBCUDART [LIBCUBLAS]\n");
        return 2;
    }
    if ((rt = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL)) == NULL) {
        fprintf(stderr, "cudart-client: %s\n", dlerror());
        return 2;
    }
    LOAD(rt, int_out_fn, cudaRuntimeGetVersion)
    LOAD(rt, int_out_fn, cudaDriverGetVersion)
    LOAD(rt, int_out_fn, cudaGetDeviceCount)
    LOAD(rt, int_in_fn, cudaSetDevice)
    LOAD(rt, malloc_fn, cudaMalloc)
    LOAD(rt, free_fn, cudaFree)
    LOAD(rt, meminfo_fn, cudaMemGetInfo)
    LOAD(rt, errname_fn, cudaGetErrorName)

    rc = cudaRuntimeGetVersion(&version);
    printf("cudaRuntimeGetVersion %s %d\n", cudaGetErrorName(rc), version);
    rc = cudaDriverGetVersion(&version);
    printf("cudaDriverGetVersion %s %d\n", cudaGetErrorName(rc), version);
    rc = cudaGetDeviceCount(&count);
    printf("cudaGetDeviceCount %s %d\n", cudaGetErrorName(rc), count);
    rc = cudaSetDevice(0);
    printf("cudaSetDevice %s\n", cudaGetErrorName(rc));
    rc = cudaMalloc(&dptr, 1 << 20);
    printf("cudaMalloc %s\n", cudaGetErrorName(rc));
    if (rc == 0)
        printf("cudaFree %s\n", cudaGetErrorName(cudaFree(dptr)));
    rc = cudaMemGetInfo(&free_b, &total_b);
    printf("cudaMemGetInfo %s\n", cudaGetErrorName(rc));
    if (argc == 3) {
        if ((blas = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL)) == NULL) {
            fprintf(stderr, "cudart-client: %s\n", dlerror());
            return 2;
        }
        LOAD(blas, blas_create_fn, cublasCreate_v2)
        LOAD(blas, blas_version_fn, cublasGetVersion_v2)
        printf("cublasCreate_v2 %d\n", cublasCreate_v2(&blas_handle));
        version = 0;
        printf("cublasGetVersion_v2 %d %d\n", cublasGetVersion_v2(blas_handle, &version), version);
    }
    return 0;
}
