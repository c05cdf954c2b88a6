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

/* graphs.c - see graphs.h. */
#include "graphs.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"
#include "pools.h"

/* Child graphs nest; a graph nested deeper than this is refused as unreadable. */
#define MAX_DEPTH 64

struct exec_rec {
    uintptr_t exec;
    uint64_t *bytes; /* VGPU_MAX_GPUS entries */
};

/* Process-wide: executables with allocation nodes (few: most graphs have none). */
static struct {
    pthread_once_t once;
    pthread_mutex_t mu;
    struct exec_rec *recs;
    size_t n, cap; /* n is also read without mu: zero means no such executable */
} G = {.once = PTHREAD_ONCE_INIT, .mu = PTHREAD_MUTEX_INITIALIZER};

static void fork_prepare(void)
{
    pthread_mutex_lock(&G.mu);
}

static void fork_parent(void)
{
    pthread_mutex_unlock(&G.mu);
}

/* The child has no CUDA context, hence none of the parent's graphs. */
static void fork_child(void)
{
    for (size_t i = 0; i < G.n; i++)
        free(G.recs[i].bytes);
    __atomic_store_n(&G.n, 0, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&G.mu);
}

static void init(void)
{
    pthread_atfork(fork_prepare, fork_parent, fork_child);
}

static uint64_t add_sat(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static CUresult sum_graph(CUgraph graph, uint64_t *bytes, bool *any, int depth)
{
    CUgraphNode *nodes;
    size_t n = 0;
    CUresult rc;

    /* A driver without graphs (or without allocation nodes) has nothing to allocate. */
    if (vgpu_cu.cuGraphGetNodes == NULL || vgpu_cu.cuGraphNodeGetType == NULL)
        return CUDA_SUCCESS;
    if (depth > MAX_DEPTH)
        return CUDA_ERROR_INVALID_VALUE;
    rc = vgpu_cu.cuGraphGetNodes(graph, NULL, &n);
    if (rc != CUDA_SUCCESS || n == 0)
        return rc;
    nodes = calloc(n, sizeof(*nodes));
    if (nodes == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    rc = vgpu_cu.cuGraphGetNodes(graph, nodes, &n);
    for (size_t i = 0; rc == CUDA_SUCCESS && i < n; i++) {
        CUgraphNodeType type;
        CUDA_MEM_ALLOC_NODE_PARAMS p;
        CUgraph child;

        rc = vgpu_cu.cuGraphNodeGetType(nodes[i], &type);
        if (rc != CUDA_SUCCESS)
            break;
        if (type == CU_GRAPH_NODE_TYPE_MEM_ALLOC) {
            memset(&p, 0, sizeof(p));
            rc = vgpu_cu.cuGraphMemAllocNodeGetParams != NULL
                     ? vgpu_cu.cuGraphMemAllocNodeGetParams(nodes[i], &p)
                     : CUDA_ERROR_NOT_SUPPORTED;
            if (rc != CUDA_SUCCESS)
                break;
            *any = true;
            /* Only device memory is limited; a device outside our range cannot be enforced. */
            if (p.poolProps.location.type == CU_MEM_LOCATION_TYPE_DEVICE &&
                p.poolProps.location.id >= 0 && p.poolProps.location.id < VGPU_MAX_GPUS) {
                int d = p.poolProps.location.id;

                bytes[d] = add_sat(bytes[d], vgpu_granules(p.bytesize));
            }
        } else if (type == CU_GRAPH_NODE_TYPE_GRAPH) {
            rc = vgpu_cu.cuGraphChildGraphNodeGetGraph != NULL
                     ? vgpu_cu.cuGraphChildGraphNodeGetGraph(nodes[i], &child)
                     : CUDA_ERROR_NOT_SUPPORTED;
            if (rc == CUDA_SUCCESS)
                rc = sum_graph(child, bytes, any, depth + 1);
        }
    }
    free(nodes);
    return rc;
}

CUresult vgpu_graph_footprint(CUgraph graph, uint64_t *bytes, bool *any)
{
    memset(bytes, 0, VGPU_MAX_GPUS * sizeof(*bytes));
    *any = false;
    return sum_graph(graph, bytes, any, 0);
}

/* The record of exec, or NULL (mu held). */
static struct exec_rec *find(uintptr_t exec)
{
    for (size_t i = 0; i < G.n; i++) {
        if (G.recs[i].exec == exec)
            return &G.recs[i];
    }
    return NULL;
}

bool vgpu_graph_exec_add(CUgraphExec exec, const uint64_t *bytes)
{
    uint64_t *copy = malloc(VGPU_MAX_GPUS * sizeof(*copy));
    struct exec_rec *r;

    if (copy == NULL)
        return false;
    memcpy(copy, bytes, VGPU_MAX_GPUS * sizeof(*copy));
    pthread_once(&G.once, init);
    pthread_mutex_lock(&G.mu);
    /* A handle the driver reuses after a destroy we did not see: the new graph replaces it. */
    r = find((uintptr_t)exec);
    if (r == NULL && G.n == G.cap) {
        size_t cap = G.cap == 0 ? 8 : G.cap * 2;
        struct exec_rec *grown = realloc(G.recs, cap * sizeof(*grown));

        if (grown != NULL) {
            G.recs = grown;
            G.cap = cap;
        }
    }
    if (r == NULL && G.n < G.cap) {
        r = &G.recs[G.n];
        *r = (struct exec_rec){.exec = (uintptr_t)exec};
        __atomic_store_n(&G.n, G.n + 1, __ATOMIC_RELAXED);
    }
    if (r != NULL) {
        free(r->bytes);
        r->bytes = copy;
    }
    pthread_mutex_unlock(&G.mu);
    if (r == NULL)
        free(copy);
    return r != NULL;
}

bool vgpu_graph_exec_get(CUgraphExec exec, uint64_t *bytes)
{
    struct exec_rec *r;

    if (__atomic_load_n(&G.n, __ATOMIC_RELAXED) == 0)
        return false;
    pthread_mutex_lock(&G.mu);
    r = find((uintptr_t)exec);
    if (r != NULL)
        memcpy(bytes, r->bytes, VGPU_MAX_GPUS * sizeof(*bytes));
    pthread_mutex_unlock(&G.mu);
    return r != NULL;
}

CUresult vgpu_graph_run(CUresult (*fn)(CUgraphExec, CUstream), CUgraphExec exec, CUstream stream)
{
    uint64_t bytes[VGPU_MAX_GPUS];
    struct vgpu_graph_op op;
    CUresult rc;

    if (!vgpu_graph_exec_get(exec, bytes))
        return fn(exec, stream);
    rc = vgpu_pools_graph_mem_begin(bytes, &op);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = fn(exec, stream);
    vgpu_pools_graph_mem_end(&op);
    return rc;
}

void vgpu_graph_exec_forget(CUgraphExec exec)
{
    struct exec_rec *r;

    if (__atomic_load_n(&G.n, __ATOMIC_RELAXED) == 0)
        return;
    pthread_mutex_lock(&G.mu);
    r = find((uintptr_t)exec);
    if (r != NULL) {
        free(r->bytes);
        *r = G.recs[G.n - 1];
        __atomic_store_n(&G.n, G.n - 1, __ATOMIC_RELAXED);
    }
    pthread_mutex_unlock(&G.mu);
}
