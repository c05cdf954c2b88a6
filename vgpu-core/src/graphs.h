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
 * graphs.h - graph memory: what the allocation nodes of each instantiated
 * graph may take on each device, so that its launches and uploads reserve
 * it before the driver maps it (pools.h charges the device's graph memory).
 *
 * Allocation nodes (cuGraphAddMemAllocNode, or cuMemAllocAsync captured
 * into a graph) get their memory from the device's graph memory when the
 * graph is launched or uploaded, not when the node is made; the driver
 * offers no way to list the nodes of an executable graph, so the footprint
 * is summed from the graph when it is instantiated and kept per executable.
 */
#ifndef VGPU_GRAPHS_H
#define VGPU_GRAPHS_H

#include <stdbool.h>
#include <stdint.h>

#include "gpus.h"
#include "vgpu_cuda.h"

/*
 * Sums the allocation nodes of graph (child graphs included) per CUDA
 * device into bytes[VGPU_MAX_GPUS] (zeroed first), each node rounded up to
 * whole granules. Returns CUDA_SUCCESS, or the driver's error when the
 * graph cannot be read. Returns whether any node allocates in *any.
 */
CUresult vgpu_graph_footprint(CUgraph graph, uint64_t *bytes, bool *any);

/* Remembers the footprint of exec (a copy of bytes). False if out of memory. */
bool vgpu_graph_exec_add(CUgraphExec exec, const uint64_t *bytes);

/* Copies exec's footprint into bytes; false when exec allocates nothing. */
bool vgpu_graph_exec_get(CUgraphExec exec, uint64_t *bytes);

/*
 * Runs a launch or upload of exec (fn: the driver's cuGraphLaunch or
 * cuGraphUpload, or a _ptsz form) with the graph memory it may take reserved
 * around it (pools.h); CUDA_ERROR_OUT_OF_MEMORY without calling fn when it
 * does not fit the limit.
 */
CUresult vgpu_graph_run(CUresult (*fn)(CUgraphExec, CUstream), CUgraphExec exec, CUstream stream);

/* After cuGraphExecDestroy succeeded. */
void vgpu_graph_exec_forget(CUgraphExec exec);

#endif /* VGPU_GRAPHS_H */
