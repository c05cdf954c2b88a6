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
 * fake_cuda_host.c - pinned host memory: cuMemAllocHost_v2, cuMemHostAlloc,
 * cuMemFreeHost, cuMemHostRegister_v2, cuMemHostUnregister.
 *
 * Host memory is the process's own RAM, never GPU memory: nothing is charged
 * to a GPU. Allocations are real, usable, lazily committed mappings (so a
 * test can ask for more than any GPU limit); registrations only record the
 * range, as page-locking needs no emulation here.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "fake_cuda.h"

#include <stdlib.h>
#include <sys/mman.h>

typedef struct host_range {
    void *p;
    size_t size;
    int registered; /* 1: cuMemHostRegister_v2 (caller's memory), 0: allocated here */
    struct host_range *next;
} host_range;

static host_range *ranges; /* under g_fake.mu */

/* The context checks every host allocation starts with (the real driver needs a context). */
static CUresult host_begin(const void *p, size_t size)
{
    CUresult r = fake_ready();
    int dev;
    if (r != CUDA_SUCCESS)
        return r;
    if (p == NULL || size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    return fake_current_device(&dev);
}

/* Finds the range starting at p of the given kind and unlinks it (mu held). */
static host_range *take_range(void *p, int registered)
{
    for (host_range **pp = &ranges; *pp != NULL; pp = &(*pp)->next) {
        host_range *h = *pp;
        if (h->p == p && h->registered == registered) {
            *pp = h->next;
            return h;
        }
    }
    return NULL;
}

static CUresult add_range(void *p, size_t size, int registered)
{
    host_range *h = malloc(sizeof(*h));
    if (h == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *h = (host_range){.p = p, .size = size, .registered = registered};
    pthread_mutex_lock(&g_fake.mu);
    h->next = ranges;
    ranges = h;
    pthread_mutex_unlock(&g_fake.mu);
    return CUDA_SUCCESS;
}

static CUresult host_alloc(void **pp, size_t bytesize)
{
    CUresult r = host_begin(pp, bytesize);
    void *p;
    if (r != CUDA_SUCCESS)
        return r;
    p = mmap(NULL, bytesize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
             -1, 0);
    if (p == MAP_FAILED)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if ((r = add_range(p, bytesize, 0)) != CUDA_SUCCESS) {
        munmap(p, bytesize);
        return r;
    }
    *pp = p;
    return CUDA_SUCCESS;
}

CUresult cuMemAllocHost_v2(void **pp, size_t bytesize)
{
    return host_alloc(pp, bytesize);
}

CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
    /* CU_MEMHOSTALLOC_PORTABLE | DEVICEMAP | WRITECOMBINED */
    if ((Flags & ~0x7u) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    return host_alloc(pp, bytesize);
}

CUresult cuMemFreeHost(void *p)
{
    CUresult r = fake_ready();
    host_range *h;
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&g_fake.mu);
    h = take_range(p, 0);
    pthread_mutex_unlock(&g_fake.mu);
    if (h == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    munmap(h->p, h->size);
    free(h);
    return CUDA_SUCCESS;
}

CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags)
{
    CUresult r = host_begin(p, bytesize);
    host_range *h;
    if (r != CUDA_SUCCESS)
        return r;
    /* PORTABLE | DEVICEMAP | IOMEMORY | READ_ONLY */
    if ((Flags & ~0xfu) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_fake.mu);
    for (h = ranges; h != NULL; h = h->next) {
        if (h->registered && (char *)p < (char *)h->p + h->size && (char *)h->p < (char *)p + bytesize)
            break;
    }
    pthread_mutex_unlock(&g_fake.mu);
    if (h != NULL)
        return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
    return add_range(p, bytesize, 1);
}

CUresult cuMemHostUnregister(void *p)
{
    CUresult r = fake_ready();
    host_range *h;
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&g_fake.mu);
    h = take_range(p, 1);
    pthread_mutex_unlock(&g_fake.mu);
    if (h == NULL)
        return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
    free(h);
    return CUDA_SUCCESS;
}
