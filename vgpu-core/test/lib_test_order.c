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
 * lib_test_order.c - lib_test scenarios: no call made before cuInit decides a
 * GPU's limits.
 *
 * The table below has one row per entry point libvgpu.so exports. The
 * driver (expect_call_order) reads the library's real export list with
 * `nm -D --defined-only` and fails for an export without a row (a new
 * wrapper must be added here) and for a row the library does not export.
 * For every row it runs the scenario "order:<symbol>" in a preloaded
 * process under a claim that limits GPU 0 to 1 GiB: the process calls that
 * entry point first, before cuInit, then initialises CUDA, and must find GPU
 * 0 enforced: 2 GiB and 4 GiB allocations refused, 512 MiB granted, the
 * limit reported as the GPU's size.
 *
 * To add a wrapper: write a call_<symbol> function that calls it once with
 * arguments a program could pass before cuInit (device 0 where it takes a
 * device) and add {"<symbol>", call_<symbol>, WANT} to rows[].
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "lib_test.h"
#include "vgpu_cuda.h"
#include "vgpu_nvml.h"

/* A row's result before cuInit is not checked (it depends on the driver, not on us). */
#define ANY (-1)

/* Device pointers and handles no driver ever handed out. */
#define BOGUS_PTR ((CUdeviceptr)0x1234)

static CUdeviceptr p;
static CUdeviceptr_v1 p32;
static CUcontext ctx;
static size_t sz, sz2;
static unsigned int u32, u32b;

static CUmemAllocationProp vmm_prop(void)
{
    CUmemAllocationProp prop;

    memset(&prop, 0, sizeof(prop));
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    return prop;
}

/* ---- driver entry points ------------------------------------------------ */

static int call_dlsym(void)
{
    PFN_cuDevicePrimaryCtxRetain f =
        (PFN_cuDevicePrimaryCtxRetain)dlsym(RTLD_DEFAULT, "cuDevicePrimaryCtxRetain");

    return f != NULL ? f(&ctx, 0) : CUDA_ERROR_NOT_FOUND;
}

/* dlerror decides nothing: called first, the limit must hold all the same. */
static int call_dlerror(void)
{
    return dlerror() == NULL ? 0 : 1;
}

/* cuInit first: it only sets an MPS claim's variables (none here); the GPU is limited afterwards. */
static int call_cuInit(void)
{
    return cuInit(0);
}

/* The pointers cuGetProcAddress hands out are called too: the runtime's path. */
static int call_cuGetProcAddress(void)
{
    void *f = NULL;
    CUresult rc = cuGetProcAddress("cuCtxCreate", &f, 12000, CU_GET_PROC_ADDRESS_DEFAULT);

    if (rc == CUDA_SUCCESS && f != NULL)
        return ((PFN_cuCtxCreate_v2)f)(&ctx, 0, 0);
    return rc;
}

static int call_cuGetProcAddress_v2(void)
{
    CUdriverProcAddressQueryResult st;
    void *f = NULL;
    CUresult rc = cuGetProcAddress_v2("cuDevicePrimaryCtxRetain", &f, 12000,
                                      CU_GET_PROC_ADDRESS_DEFAULT, &st);

    if (rc == CUDA_SUCCESS && f != NULL)
        return ((PFN_cuDevicePrimaryCtxRetain)f)(&ctx, 0);
    return rc;
}

static int call_cuMemAlloc_v2(void) { return cuMemAlloc_v2(&p, MiB); }
static int call_cuMemAllocPitch_v2(void) { return cuMemAllocPitch_v2(&p, &sz, 1024, 1024, 4); }
static int call_cuMemAllocManaged(void) { return cuMemAllocManaged(&p, MiB, CU_MEM_ATTACH_GLOBAL); }
static int call_cuMemFree_v2(void) { return cuMemFree_v2(BOGUS_PTR); }
static int call_cuMemAllocAsync(void) { return cuMemAllocAsync(&p, MiB, NULL); }
static int call_cuMemAllocAsync_ptsz(void) { return cuMemAllocAsync_ptsz(&p, MiB, NULL); }
static int call_cuMemAllocFromPoolAsync(void)
{
    return cuMemAllocFromPoolAsync(&p, MiB, NULL, NULL);
}
static int call_cuMemAllocFromPoolAsync_ptsz(void)
{
    return cuMemAllocFromPoolAsync_ptsz(&p, MiB, NULL, NULL);
}
static int call_cuMemFreeAsync(void) { return cuMemFreeAsync(BOGUS_PTR, NULL); }
static int call_cuMemFreeAsync_ptsz(void) { return cuMemFreeAsync_ptsz(BOGUS_PTR, NULL); }
static int call_cuMemPoolTrimTo(void) { return cuMemPoolTrimTo(NULL, 0); }
static int call_cuMemPoolDestroy(void) { return cuMemPoolDestroy(NULL); }

static int call_cuMemPoolCreate(void)
{
    CUmemPoolProps props;
    CUmemoryPool pool = NULL;

    memset(&props, 0, sizeof(props));
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = 0;
    return cuMemPoolCreate(&pool, &props);
}

static int call_cuGraphInstantiate_v2(void)
{
    CUgraphExec e = NULL;

    return cuGraphInstantiate_v2(&e, NULL, NULL, NULL, 0);
}

static int call_cuGraphInstantiateWithFlags(void)
{
    CUgraphExec e = NULL;

    return cuGraphInstantiateWithFlags(&e, NULL, 0);
}

static int call_cuGraphInstantiateWithParams(void)
{
    CUDA_GRAPH_INSTANTIATE_PARAMS params;
    CUgraphExec e = NULL;

    memset(&params, 0, sizeof(params));
    return cuGraphInstantiateWithParams(&e, NULL, &params);
}

static int call_cuGraphInstantiateWithParams_ptsz(void)
{
    CUDA_GRAPH_INSTANTIATE_PARAMS params;
    CUgraphExec e = NULL;

    memset(&params, 0, sizeof(params));
    return cuGraphInstantiateWithParams_ptsz(&e, NULL, &params);
}

static int call_cuGraphUpload(void) { return cuGraphUpload(NULL, NULL); }
static int call_cuGraphUpload_ptsz(void) { return cuGraphUpload_ptsz(NULL, NULL); }
static int call_cuGraphExecDestroy(void) { return cuGraphExecDestroy(NULL); }
static int call_cuDeviceGraphMemTrim(void) { return cuDeviceGraphMemTrim(0); }
static int call_cuDevicePrimaryCtxRetain(void) { return cuDevicePrimaryCtxRetain(&ctx, 0); }
static int call_cuDevicePrimaryCtxRelease(void) { return cuDevicePrimaryCtxRelease(0); }
static int call_cuDevicePrimaryCtxRelease_v2(void) { return cuDevicePrimaryCtxRelease_v2(0); }
static int call_cuDevicePrimaryCtxReset(void) { return cuDevicePrimaryCtxReset(0); }
static int call_cuDevicePrimaryCtxReset_v2(void) { return cuDevicePrimaryCtxReset_v2(0); }
static int call_cuCtxDestroy(void) { return cuCtxDestroy(ctx); }
static int call_cuCtxDestroy_v2(void) { return cuCtxDestroy_v2(ctx); }
static int call_cuCtxCreate_v2(void) { return cuCtxCreate_v2(&ctx, 0, 0); }
static int call_cuCtxCreate_v3(void) { return cuCtxCreate_v3(&ctx, NULL, 0, 0, 0); }
static int call_cuCtxCreate_v4(void) { return cuCtxCreate_v4(&ctx, NULL, 0, 0); }
static int call_cuCtxSetLimit(void) { return cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 64 * MiB); }
static int call_cuStreamSynchronize(void) { return cuStreamSynchronize(NULL); }
static int call_cuStreamSynchronize_ptsz(void) { return cuStreamSynchronize_ptsz(NULL); }
static int call_cuCtxSynchronize(void) { return cuCtxSynchronize(); }

static int call_cuMemCreate(void)
{
    CUmemAllocationProp prop = vmm_prop();
    CUmemGenericAllocationHandle h = 0;

    return cuMemCreate(&h, 2 * MiB, &prop, 0);
}

static int call_cuMemRelease(void) { return cuMemRelease((CUmemGenericAllocationHandle)0x1234); }

static int call_cuMemMap(void)
{
    return cuMemMap(BOGUS_PTR, 2 * MiB, 0, (CUmemGenericAllocationHandle)0x1234, 0);
}

static int call_cuMemUnmap(void) { return cuMemUnmap(BOGUS_PTR, 2 * MiB); }

static int call_cuMemRetainAllocationHandle(void)
{
    CUmemGenericAllocationHandle h = 0;

    return cuMemRetainAllocationHandle(&h, (void *)BOGUS_PTR);
}

static int call_cuMemExportToShareableHandle(void)
{
    int fd = -1;

    return cuMemExportToShareableHandle(&fd, (CUmemGenericAllocationHandle)0x1234,
                                        CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
}

static int call_cuMemImportFromShareableHandle(void)
{
    CUmemGenericAllocationHandle h = 0;

    return cuMemImportFromShareableHandle(&h, (void *)(intptr_t)-1,
                                          CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
}

static int call_cuIpcGetMemHandle(void)
{
    CUipcMemHandle h;

    return cuIpcGetMemHandle(&h, BOGUS_PTR);
}

static int call_cuIpcOpenMemHandle_v2(void)
{
    CUipcMemHandle h = {{0}};

    return cuIpcOpenMemHandle_v2(&p, h, 0);
}

static int call_cuIpcCloseMemHandle(void) { return cuIpcCloseMemHandle(BOGUS_PTR); }

static int call_cuGreenCtxCreate(void)
{
    CUgreenCtx g = NULL;

    return cuGreenCtxCreate(&g, NULL, 0, CU_GREEN_CTX_DEFAULT_STREAM);
}

static int call_cuGreenCtxDestroy(void) { return cuGreenCtxDestroy(NULL); }

static int call_cuImportExternalMemory(void)
{
    CUDA_EXTERNAL_MEMORY_HANDLE_DESC d = {.type = CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD,
                                          .handle = {.fd = -1}, .size = 2 * MiB};
    CUexternalMemory m = NULL;

    return cuImportExternalMemory(&m, &d);
}

static int call_cuDestroyExternalMemory(void) { return cuDestroyExternalMemory(NULL); }

static int call_cuArrayCreate_v2(void)
{
    CUDA_ARRAY_DESCRIPTOR d = {.Width = 1024, .Height = 1024, .Format = CU_AD_FORMAT_FLOAT,
                               .NumChannels = 1};
    CUarray a = NULL;

    return cuArrayCreate_v2(&a, &d);
}

static int call_cuArray3DCreate_v2(void)
{
    CUDA_ARRAY3D_DESCRIPTOR d = {.Width = 256, .Height = 256, .Depth = 4,
                                 .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1};
    CUarray a = NULL;

    return cuArray3DCreate_v2(&a, &d);
}

static int call_cuArrayDestroy(void) { return cuArrayDestroy(NULL); }

static int call_cuMipmappedArrayCreate(void)
{
    CUDA_ARRAY3D_DESCRIPTOR d = {.Width = 256, .Height = 256, .Format = CU_AD_FORMAT_FLOAT,
                                 .NumChannels = 1};
    CUmipmappedArray m = NULL;

    return cuMipmappedArrayCreate(&m, &d, 1);
}

static int call_cuMipmappedArrayDestroy(void) { return cuMipmappedArrayDestroy(NULL); }
static int call_cuMemGetInfo_v2(void) { return cuMemGetInfo_v2(&sz, &sz2); }
static int call_cuDeviceTotalMem_v2(void) { return cuDeviceTotalMem_v2(&sz, 0); }

static int call_cuLaunchKernel(void)
{
    return cuLaunchKernel(NULL, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL);
}

static int call_cuLaunchKernel_ptsz(void)
{
    return cuLaunchKernel_ptsz(NULL, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL);
}

static int call_cuLaunchKernelEx(void)
{
    CUlaunchConfig cfg;

    memset(&cfg, 0, sizeof(cfg));
    cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
    cfg.blockDimX = cfg.blockDimY = cfg.blockDimZ = 1;
    return cuLaunchKernelEx(&cfg, NULL, NULL, NULL);
}

static int call_cuLaunchKernelEx_ptsz(void)
{
    CUlaunchConfig cfg;

    memset(&cfg, 0, sizeof(cfg));
    cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
    cfg.blockDimX = cfg.blockDimY = cfg.blockDimZ = 1;
    return cuLaunchKernelEx_ptsz(&cfg, NULL, NULL, NULL);
}

static int call_cuLaunchCooperativeKernel(void)
{
    return cuLaunchCooperativeKernel(NULL, 1, 1, 1, 1, 1, 1, 0, NULL, NULL);
}

static int call_cuLaunchCooperativeKernel_ptsz(void)
{
    return cuLaunchCooperativeKernel_ptsz(NULL, 1, 1, 1, 1, 1, 1, 0, NULL, NULL);
}

static int call_cuGraphLaunch(void) { return cuGraphLaunch(NULL, NULL); }
static int call_cuGraphLaunch_ptsz(void) { return cuGraphLaunch_ptsz(NULL, NULL); }
static int call_cuMemAlloc(void) { return cuMemAlloc(&p32, (unsigned int)MiB); }
static int call_cuMemFree(void) { return cuMemFree((CUdeviceptr_v1)BOGUS_PTR); }
static int call_cuMemGetInfo(void) { return cuMemGetInfo(&u32, &u32b); }
static int call_cuDeviceTotalMem(void) { return cuDeviceTotalMem(&u32, 0); }

/* ---- NVML: a program may well ask NVML about the GPU before cuInit ------- */

/* GPU 0 from NVML (initialised here), NULL if NVML cannot tell. */
static nvmlDevice_t nvml_gpu0(void)
{
    nvmlDevice_t d = NULL;

    if (nvmlInit_v2() != NVML_SUCCESS || nvmlDeviceGetHandleByIndex_v2(0, &d) != NVML_SUCCESS)
        return NULL;
    return d;
}

static int call_nvmlDeviceGetMemoryInfo(void)
{
    nvmlMemory_t m;

    return nvmlDeviceGetMemoryInfo(nvml_gpu0(), &m);
}

static int call_nvmlDeviceGetMemoryInfo_v2(void)
{
    nvmlMemory_v2_t m = {.version = nvmlMemory_v2};

    return nvmlDeviceGetMemoryInfo_v2(nvml_gpu0(), &m);
}

#define NVML_PROCS(name, type)                                                                     \
    static int call_##name(void)                                                                   \
    {                                                                                              \
        type infos[8];                                                                             \
        unsigned int n = 8;                                                                        \
        return name(nvml_gpu0(), &n, infos);                                                       \
    }

NVML_PROCS(nvmlDeviceGetComputeRunningProcesses, nvmlProcessInfo_v1_t)
NVML_PROCS(nvmlDeviceGetComputeRunningProcesses_v2, nvmlProcessInfo_t)
NVML_PROCS(nvmlDeviceGetComputeRunningProcesses_v3, nvmlProcessInfo_t)
NVML_PROCS(nvmlDeviceGetGraphicsRunningProcesses, nvmlProcessInfo_v1_t)
NVML_PROCS(nvmlDeviceGetGraphicsRunningProcesses_v2, nvmlProcessInfo_t)
NVML_PROCS(nvmlDeviceGetGraphicsRunningProcesses_v3, nvmlProcessInfo_t)

static int call_nvmlDeviceGetProcessUtilization(void)
{
    nvmlProcessUtilizationSample_t s[8];
    unsigned int n = 8;

    return nvmlDeviceGetProcessUtilization(nvml_gpu0(), s, &n, 0);
}

static int call_nvmlDeviceGetUtilizationRates(void)
{
    nvmlUtilization_t u;

    return nvmlDeviceGetUtilizationRates(nvml_gpu0(), &u);
}

/* ---- the table: one row per exported symbol ----------------------------- */

struct order_row {
    const char *symbol;
    int (*call)(void); /* calls symbol once, before cuInit; returns its result */
    int want;          /* that result, or ANY */
};

#define ROW(sym, want) {#sym, call_##sym, want}
#define NI CUDA_ERROR_NOT_INITIALIZED

static const struct order_row rows[] = {
    ROW(dlsym, NI),
    ROW(dlerror, ANY),
    ROW(cuInit, CUDA_SUCCESS),
    ROW(cuGetProcAddress, ANY),
    ROW(cuGetProcAddress_v2, ANY),
    ROW(cuMemAlloc_v2, NI),
    ROW(cuMemAllocPitch_v2, NI),
    ROW(cuMemAllocManaged, NI),
    ROW(cuMemFree_v2, NI),
    ROW(cuMemAllocAsync, NI),
    ROW(cuMemAllocAsync_ptsz, NI),
    ROW(cuMemAllocFromPoolAsync, NI),
    ROW(cuMemAllocFromPoolAsync_ptsz, NI),
    ROW(cuMemFreeAsync, NI),
    ROW(cuMemFreeAsync_ptsz, NI),
    ROW(cuMemPoolTrimTo, NI),
    ROW(cuMemPoolDestroy, NI),
    ROW(cuMemPoolCreate, NI),
    ROW(cuGraphInstantiate_v2, NI),
    ROW(cuGraphInstantiateWithFlags, NI),
    ROW(cuGraphInstantiateWithParams, NI),
    ROW(cuGraphInstantiateWithParams_ptsz, NI),
    ROW(cuGraphUpload, NI),
    ROW(cuGraphUpload_ptsz, NI),
    ROW(cuGraphExecDestroy, NI),
    ROW(cuDeviceGraphMemTrim, NI),
    ROW(cuDevicePrimaryCtxRetain, NI),
    ROW(cuDevicePrimaryCtxRelease, NI),
    ROW(cuDevicePrimaryCtxRelease_v2, NI),
    ROW(cuDevicePrimaryCtxReset, NI),
    ROW(cuDevicePrimaryCtxReset_v2, NI),
    ROW(cuCtxDestroy, NI),
    ROW(cuCtxDestroy_v2, NI),
    ROW(cuCtxCreate_v2, NI),
    ROW(cuCtxCreate_v3, NI),
    ROW(cuCtxCreate_v4, NI),
    ROW(cuGreenCtxCreate, NI),
    ROW(cuGreenCtxDestroy, NI),
    ROW(cuCtxSetLimit, NI),
    ROW(cuStreamSynchronize, NI),
    ROW(cuStreamSynchronize_ptsz, NI),
    ROW(cuCtxSynchronize, NI),
    ROW(cuMemCreate, NI),
    ROW(cuMemRelease, NI),
    ROW(cuMemMap, NI),
    ROW(cuMemUnmap, NI),
    ROW(cuMemRetainAllocationHandle, NI),
    ROW(cuMemExportToShareableHandle, NI),
    ROW(cuMemImportFromShareableHandle, NI),
    ROW(cuIpcGetMemHandle, NI),
    ROW(cuIpcOpenMemHandle_v2, NI),
    ROW(cuIpcCloseMemHandle, NI),
    ROW(cuImportExternalMemory, NI),
    ROW(cuDestroyExternalMemory, NI),
    ROW(cuArrayCreate_v2, NI),
    ROW(cuArray3DCreate_v2, NI),
    ROW(cuArrayDestroy, NI),
    ROW(cuMipmappedArrayCreate, NI),
    ROW(cuMipmappedArrayDestroy, NI),
    ROW(cuMemGetInfo_v2, NI),
    ROW(cuDeviceTotalMem_v2, NI),
    ROW(cuLaunchKernel, NI),
    ROW(cuLaunchKernel_ptsz, NI),
    ROW(cuLaunchKernelEx, NI),
    ROW(cuLaunchKernelEx_ptsz, NI),
    ROW(cuLaunchCooperativeKernel, NI),
    ROW(cuLaunchCooperativeKernel_ptsz, NI),
    ROW(cuGraphLaunch, NI),
    ROW(cuGraphLaunch_ptsz, NI),
    ROW(cuMemAlloc, NI),
    ROW(cuMemFree, NI),
    ROW(cuMemGetInfo, NI),
    ROW(cuDeviceTotalMem, NI),
    ROW(nvmlDeviceGetMemoryInfo, NVML_SUCCESS),
    ROW(nvmlDeviceGetMemoryInfo_v2, NVML_SUCCESS),
    ROW(nvmlDeviceGetComputeRunningProcesses, NVML_SUCCESS),
    ROW(nvmlDeviceGetComputeRunningProcesses_v2, NVML_SUCCESS),
    ROW(nvmlDeviceGetComputeRunningProcesses_v3, NVML_SUCCESS),
    ROW(nvmlDeviceGetGraphicsRunningProcesses, NVML_SUCCESS),
    ROW(nvmlDeviceGetGraphicsRunningProcesses_v2, NVML_SUCCESS),
    ROW(nvmlDeviceGetGraphicsRunningProcesses_v3, NVML_SUCCESS),
    ROW(nvmlDeviceGetProcessUtilization, ANY),
    ROW(nvmlDeviceGetUtilizationRates, NVML_SUCCESS),
};

#define NROWS (sizeof(rows) / sizeof(rows[0]))

static const struct order_row *row_of(const char *symbol)
{
    for (size_t i = 0; i < NROWS; i++) {
        if (strcmp(rows[i].symbol, symbol) == 0)
            return &rows[i];
    }
    return NULL;
}

int sc_order(const char *symbol)
{
    const struct order_row *r = row_of(symbol);
    CUdeviceptr a = 0, b = 0;
    int rc;

    if (r == NULL) {
        fprintf(stderr, "order: no row for %s\n", symbol);
        return 2;
    }
    rc = r->call();
    if (r->want != ANY && rc != r->want) {
        fprintf(stderr, "order: %s before cuInit returned %d, want %d\n", symbol, rc, r->want);
        check_failures++;
    }
    /* Then the program starts CUDA as usual: GPU 0 is limited to 1 GiB. */
    ctx_on(0);
    CHECK(cuMemAlloc_v2(&a, 2 * GiB) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(cuMemAlloc_v2(&a, 4 * GiB) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_EQ_U64(mem_total(), GiB);
    /* Enforced, not closed: what the claim grants is granted. */
    CHECK(cuMemAlloc_v2(&b, 512 * MiB) == CUDA_SUCCESS);
    CHECK_EQ_U64(used0(), 512 * MiB);
    CHECK(cuMemFree_v2(b) == CUDA_SUCCESS);
    if (check_failures != 0)
        fprintf(stderr, "order: after %s before cuInit, GPU 0 is not limited to 1 GiB\n", symbol);
    return check_failures != 0;
}

/* Names of the functions lib exports (nm -D --defined-only), into names; returns their number. */
static int exports_of(const char *lib, char names[][96], int max)
{
    char cmd[4200], line[256], type[8], name[96];
    int n = 0, st;
    FILE *f;

    /* nm's stderr would only clutter ours; its status counts. */
    snprintf(cmd, sizeof(cmd), "nm -D --defined-only '%s' 2>/dev/null", lib);
    f = popen(cmd, "r");
    CHECK(f != NULL);
    if (f == NULL)
        return 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        /* "<address> <type> <name>"; only code (T, W, i): the map exports nothing else. */
        if (sscanf(line, "%*s %7s %95s", type, name) != 2 || strchr("TWi", type[0]) == NULL)
            continue;
        /* Versioned names print as name@@VER: the symbol is the part before '@'. */
        name[strcspn(name, "@")] = '\0';
        if (n < max)
            snprintf(names[n++], sizeof(names[0]), "%s", name);
    }
    st = pclose(f);
    /* valgrind-test does not trace nm (--trace-children-skip). */
    CHECK(st == 0);
    return n;
}

void expect_call_order(void (*run)(const char *name))
{
    static char names[512][96];
    const char *lib = getenv("VGPU_TEST_LIB");
    char scenario[128];
    int n = lib != NULL ? exports_of(lib, names, 512) : 0;

    CHECK(n > 0);
    for (int i = 0; i < n; i++) {
        if (row_of(names[i]) == NULL) {
            fprintf(stderr, "call order: %s exports %s, which has no row in the table of "
                    "test/lib_test_order.c: add one\n", lib, names[i]);
            check_failures++;
        }
    }
    for (size_t k = 0; k < NROWS; k++) {
        bool exported = false;

        for (int i = 0; i < n && !exported; i++)
            exported = strcmp(names[i], rows[k].symbol) == 0;
        if (!exported) {
            fprintf(stderr, "call order: the table of test/lib_test_order.c has a row for %s, "
                    "which %s does not export\n", rows[k].symbol, lib);
            check_failures++;
            continue;
        }
        snprintf(scenario, sizeof(scenario), "order:%s", rows[k].symbol);
        run(scenario);
    }
}
