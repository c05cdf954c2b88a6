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
 * fake_test.c - tests of the fake libcuda.so.1, the fake libnvidia-ml.so.1
 * and cuda-probe. Linked against both fakes like an application; runs
 * cuda-probe (FAKE_TEST_PROBE, libraries from FAKE_TEST_LIBDIR) as other
 * processes sharing the same simulated GPUs.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "fake_config.h"
#include "fake_state.h"
#include "vgpu_cuda.h"
#include "vgpu_nvml.h"

#define GiB (1ULL << 30)
#define MiB (1ULL << 20)
#define GPU_MEMORY (8 * GiB)

static char state_dir[] = "/tmp/vgpu-fake-test-XXXXXX";
static nvmlDevice_t nv0;

static uint64_t nvml_used(void)
{
    nvmlMemory_t m;
    CHECK_EQ(nvmlDeviceGetMemoryInfo(nv0, &m), NVML_SUCCESS);
    return m.used;
}

/* Bytes NVML reports for pid on GPU 0, or -1 when pid is not listed. */
static long long nvml_process_used(unsigned int pid)
{
    nvmlProcessInfo_t infos[64];
    unsigned int n = 64;
    CHECK_EQ(nvmlDeviceGetComputeRunningProcesses_v3(nv0, &n, infos), NVML_SUCCESS);
    for (unsigned int i = 0; i < n; i++)
        if (infos[i].pid == pid)
            return (long long)infos[i].usedGpuMemory;
    return -1;
}

static void test_parse_size(void)
{
    static const struct {
        const char *in;
        int ok;
        uint64_t want;
    } cases[] = {
        {"0", 1, 0},          {"1", 1, 1},           {"80Gi", 1, 80 * GiB},
        {"2K", 1, 2000},      {"3Mi", 1, 3 * MiB},   {"1T", 1, 1000000000000ULL},
        {"18446744073709551615", 1, UINT64_MAX},     {"18446744073709551616", 0, 0},
        {"16777216Ti", 0, 0}, {"", 0, 0},            {"-1", 0, 0},
        {"1.5Gi", 0, 0},      {"0x10", 0, 0},        {" 1", 0, 0},
        {"1 ", 0, 0},         {"1g", 0, 0},          {"1GiB", 0, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        uint64_t v = 0;
        int rc = fake_parse_size(cases[i].in, &v);
        if ((rc == 0) != cases[i].ok || (cases[i].ok && v != cases[i].want)) {
            fprintf(stderr, "parse_size(\"%s\") = %d, %llu\n", cases[i].in, rc,
                    (unsigned long long)v);
            check_failures++;
        }
    }
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f != NULL) {
        fputs(text, f);
        fclose(f);
    }
}

static void test_config_file(void)
{
    char path[256], err[256];
    fake_config c;
    snprintf(path, sizeof(path), "%s/config", state_dir);
    write_file(path, "# simulated node\ngpu_count = 4\ngpu_memory=141Gi\n"
                     "gpu_product=NVIDIA H200\ncompute_capability=9.0\ncuda_version=13.0\n");
    setenv("VGPU_FAKE_CONFIG", path, 1);
    setenv("VGPU_FAKE_GPU_COUNT", "1", 1); /* the file wins */
    CHECK_EQ(fake_config_load(&c, err, sizeof(err)), 0);
    CHECK_EQ(c.gpu_count, 4);
    CHECK_EQ(c.gpu_memory, 141 * GiB);
    CHECK(strcmp(c.gpu_product, "NVIDIA H200") == 0);
    CHECK_EQ(c.cuda_version, 13000);
    CHECK(strncmp(c.gpus[3].uuid, "GPU-", 4) == 0 && strlen(c.gpus[3].uuid) == 40);
    CHECK(strcmp(c.gpus[0].uuid, c.gpus[1].uuid) != 0);

    write_file(path, "gpu_memory=lots\n");
    CHECK_EQ(fake_config_load(&c, err, sizeof(err)), -1);
    CHECK(strstr(err, "gpu_memory") != NULL);
    write_file(path, "gpus=3\n");
    CHECK_EQ(fake_config_load(&c, err, sizeof(err)), -1);
    CHECK(strstr(err, "unknown key gpus") != NULL);
    unsetenv("VGPU_FAKE_CONFIG");
    setenv("VGPU_FAKE_GPU_COUNT", "17", 1);
    CHECK_EQ(fake_config_load(&c, err, sizeof(err)), -1);
    CHECK(strstr(err, "VGPU_FAKE_GPU_COUNT") != NULL);
    setenv("VGPU_FAKE_GPU_COUNT", "2", 1);
}

static void test_devices(void)
{
    int count = 0;
    CHECK_EQ(cuDeviceGetCount(&count), CUDA_SUCCESS);
    CHECK_EQ(count, 2);
    unsigned int ncount = 0;
    CHECK_EQ(nvmlDeviceGetCount_v2(&ncount), NVML_SUCCESS);
    CHECK_EQ(ncount, 2);
    for (int d = 0; d < count; d++) {
        CUuuid u, u2;
        char want[NVML_DEVICE_UUID_V2_BUFFER_SIZE], got[64], bus[32];
        nvmlDevice_t nd;
        nvmlPciInfo_t pci;
        size_t total = 0;
        CHECK_EQ(cuDeviceGetUuid(&u, d), CUDA_SUCCESS);
        CHECK_EQ(cuDeviceGetUuid_v2(&u2, d), CUDA_SUCCESS);
        CHECK(memcmp(u.bytes, u2.bytes, 16) == 0);
        const unsigned char *b = (const unsigned char *)u.bytes;
        snprintf(got, sizeof(got),
                 "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                 b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
                 b[14], b[15]);
        CHECK_EQ(nvmlDeviceGetHandleByIndex_v2((unsigned int)d, &nd), NVML_SUCCESS);
        CHECK_EQ(nvmlDeviceGetUUID(nd, want, sizeof(want)), NVML_SUCCESS);
        CHECK(strcmp(got, want) == 0);
        nvmlDevice_t by_uuid = NULL, by_bus = NULL;
        CHECK_EQ(nvmlDeviceGetHandleByUUID(want, &by_uuid), NVML_SUCCESS);
        CHECK(by_uuid == nd);
        CHECK_EQ(cuDeviceTotalMem_v2(&total, d), CUDA_SUCCESS);
        CHECK_EQ(total, GPU_MEMORY);
        CHECK_EQ(cuDeviceGetPCIBusId(bus, sizeof(bus), d), CUDA_SUCCESS);
        CHECK_EQ(nvmlDeviceGetPciInfo_v3(nd, &pci), NVML_SUCCESS);
        CHECK(strcmp(bus, pci.busIdLegacy) == 0);
        CHECK_EQ(nvmlDeviceGetHandleByPciBusId_v2(pci.busId, &by_bus), NVML_SUCCESS);
        CHECK(by_bus == nd);
        int bus_attr = -1;
        CHECK_EQ(cuDeviceGetAttribute(&bus_attr, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, d), CUDA_SUCCESS);
        CHECK_EQ(bus_attr, pci.bus);
    }
    CUdevice dev;
    CHECK_EQ(cuDeviceGet(&dev, 2), CUDA_ERROR_INVALID_DEVICE);
    char small[4];
    CHECK_EQ(nvmlDeviceGetUUID(nv0, small, sizeof(small)), NVML_ERROR_INSUFFICIENT_SIZE);
    nvmlMemory_v2_t m2 = {.version = 1};
    CHECK_EQ(nvmlDeviceGetMemoryInfo_v2(nv0, &m2), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    m2.version = nvmlMemory_v2;
    CHECK_EQ(nvmlDeviceGetMemoryInfo_v2(nv0, &m2), NVML_SUCCESS);
    CHECK_EQ(m2.total, GPU_MEMORY);
    unsigned int cur, pend;
    CHECK_EQ(nvmlDeviceGetMigMode(nv0, &cur, &pend), NVML_ERROR_NOT_SUPPORTED);
}

static void test_linear(void)
{
    CUdeviceptr p = 0, q = 0;
    size_t free_b = 0, total = 0, pitch = 0;
    uint64_t base = nvml_used();
    CHECK_EQ(cuMemAlloc_v2(&p, GiB), CUDA_SUCCESS);
    CHECK_EQ(nvml_used(), base + GiB);
    CHECK_EQ(nvml_process_used((unsigned int)getpid()), (long long)(base + GiB));
    CHECK_EQ(cuMemGetInfo_v2(&free_b, &total), CUDA_SUCCESS);
    CHECK_EQ(total, GPU_MEMORY);
    CHECK_EQ(free_b, GPU_MEMORY - base - GiB);
    CHECK_EQ(cuMemGetInfo_v2(NULL, &total), CUDA_SUCCESS);
    /* Beyond the physical total: exactly OUT_OF_MEMORY, nothing charged. */
    CHECK_EQ(cuMemAlloc_v2(&q, GPU_MEMORY), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_EQ(nvml_used(), base + GiB);
    CHECK_EQ(cuMemFree_v2(p), CUDA_SUCCESS);
    CHECK_EQ(cuMemFree_v2(p), CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ(nvml_used(), base);

    CHECK_EQ(cuMemAllocPitch_v2(&p, &pitch, 1000, 300, 4), CUDA_SUCCESS);
    CHECK(pitch >= 1000 && pitch % 512 == 0);
    CHECK_EQ(nvml_used(), base + pitch * 300);
    CHECK_EQ(cuMemAllocPitch_v2(&q, &pitch, 1000, 300, 3), CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ(cuMemFree_v2(p), CUDA_SUCCESS);
    CHECK_EQ(cuMemAllocManaged(&p, 3 * MiB, CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
    CHECK_EQ(nvml_used(), base + 3 * MiB);
    unsigned char buf[64];
    memset(buf, 0xff, sizeof(buf));
    CHECK_EQ(cuMemcpyHtoD_v2(p + 100, buf, sizeof(buf)), CUDA_SUCCESS);
    CHECK_EQ(cuMemcpyDtoH_v2(buf, p + 100, sizeof(buf)), CUDA_SUCCESS);
    CHECK_EQ(buf[0], 0);
    CHECK_EQ(cuMemcpyDtoH_v2(buf, p + 3 * MiB - 8, sizeof(buf)), CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ(cuMemFree_v2(p), CUDA_SUCCESS);
    CHECK_EQ(nvml_used(), base);
}

static void test_pools(void)
{
    CUmemoryPool pool, dpool;
    CUdeviceptr a, b;
    cuuint64_t v = 0;
    uint64_t base = nvml_used();
    CHECK_EQ(cuDeviceGetDefaultMemPool(&dpool, 0), CUDA_SUCCESS);
    CHECK_EQ(cuMemAllocAsync(&a, MiB + 1, NULL), CUDA_SUCCESS);
    CHECK_EQ(cuMemPoolGetAttribute(dpool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &v), CUDA_SUCCESS);
    CHECK_EQ(v, 2 * MiB); /* grows in 2 MiB granules */
    CHECK_EQ(nvml_used(), base + 2 * MiB);
    CHECK_EQ(cuMemAllocAsync_ptsz(&b, MiB - 1, NULL), CUDA_SUCCESS); /* fits in the spare */
    CHECK_EQ(nvml_used(), base + 2 * MiB);
    CHECK_EQ(cuMemFreeAsync(a, NULL), CUDA_SUCCESS);
    CHECK_EQ(cuMemFreeAsync(b, NULL), CUDA_SUCCESS);
    CHECK_EQ(nvml_used(), base + 2 * MiB); /* kept until a synchronize */
    CHECK_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
    CHECK_EQ(nvml_used(), base);

    CUmemPoolProps props;
    memset(&props, 0, sizeof(props));
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = 0;
    CHECK_EQ(cuMemPoolCreate(&pool, &props), CUDA_SUCCESS);
    v = 64 * MiB;
    CHECK_EQ(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &v), CUDA_SUCCESS);
    CHECK_EQ(cuMemAllocFromPoolAsync(&a, 10 * MiB, pool, NULL), CUDA_SUCCESS);
    CHECK_EQ(cuMemFreeAsync(a, NULL), CUDA_SUCCESS);
    CHECK_EQ(cuStreamSynchronize(NULL), CUDA_SUCCESS);
    CHECK_EQ(nvml_used(), base + 10 * MiB); /* below the threshold: kept */
    CHECK_EQ(cuMemPoolTrimTo(pool, 0), CUDA_SUCCESS);
    CHECK_EQ(nvml_used(), base);
    CHECK_EQ(cuMemAllocFromPoolAsync(&a, GPU_MEMORY + 1, pool, NULL), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_EQ(cuMemAllocFromPoolAsync(&a, 4 * MiB, pool, NULL), CUDA_SUCCESS);
    /* Destroyed with an allocation outstanding: released at its free. */
    CHECK_EQ(cuMemPoolDestroy(pool), CUDA_SUCCESS);
    CHECK_EQ(nvml_used(), base + 4 * MiB);
    CHECK_EQ(cuMemFree_v2(a), CUDA_SUCCESS);
    CHECK_EQ(nvml_used(), base);
    CHECK_EQ(cuMemPoolDestroy(dpool), CUDA_ERROR_INVALID_VALUE);
}

static void test_vmm(void)
{
    CUmemAllocationProp prop;
    CUmemGenericAllocationHandle h, h2;
    CUdeviceptr va;
    size_t gran = 0;
    uint64_t base = nvml_used();
    memset(&prop, 0, sizeof(prop));
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    CHECK_EQ(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
             CUDA_SUCCESS);
    CHECK_EQ(gran, 2 * MiB);
    CHECK_EQ(cuMemCreate(&h, gran + 1, &prop, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ(cuMemCreate(&h, 2 * GPU_MEMORY, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_EQ(cuMemCreate(&h, 4 * gran, &prop, 0), CUDA_SUCCESS);
    CHECK_EQ(nvml_used(), base + 4 * gran);
    /* Reserving address space costs no memory. */
    CHECK_EQ(cuMemAddressReserve(&va, 16 * gran, 0, 0, 0), CUDA_SUCCESS);
    CHECK_EQ(nvml_used(), base + 4 * gran);
    CHECK_EQ(cuMemMap(va, 4 * gran, 0, h, 0), CUDA_SUCCESS);
    CHECK_EQ(cuMemMap(va, 4 * gran, 0, h, 0), CUDA_ERROR_ALREADY_MAPPED);
    CUmemAccessDesc acc = {.location = prop.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    CHECK_EQ(cuMemSetAccess(va, 4 * gran, &acc, 1), CUDA_SUCCESS);
    CHECK_EQ(cuMemSetAccess(va, 5 * gran, &acc, 1), CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ(cuMemRetainAllocationHandle(&h2, (void *)(uintptr_t)(va + gran)), CUDA_SUCCESS);
    CHECK_EQ(h2, h);
    CHECK_EQ(cuMemRelease(h), CUDA_SUCCESS);
    CHECK_EQ(cuMemRelease(h2), CUDA_SUCCESS);
    CHECK_EQ(nvml_used(), base + 4 * gran); /* the mapping keeps it */
    /* Every reference released: the handle is gone, though its mapping keeps the memory. */
    CHECK_EQ(cuMemRelease(h), CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ(cuMemMap(va + 8 * gran, 4 * gran, 0, h, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ(nvml_used(), base + 4 * gran);
    /* A range cutting a mapping unmaps nothing. */
    CHECK_EQ(cuMemUnmap(va, 2 * gran), CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ(nvml_used(), base + 4 * gran);
    CHECK_EQ(cuMemUnmap(va, 4 * gran), CUDA_SUCCESS);
    CHECK_EQ(nvml_used(), base);
    CHECK_EQ(cuMemRelease(h), CUDA_ERROR_INVALID_VALUE);
    /* One handle mapped twice, and one range unmapping mappings of two handles. */
    CHECK_EQ(cuMemCreate(&h, 2 * gran, &prop, 0), CUDA_SUCCESS);
    CHECK_EQ(cuMemCreate(&h2, 2 * gran, &prop, 0), CUDA_SUCCESS);
    CHECK_EQ(cuMemMap(va, 2 * gran, 0, h, 0), CUDA_SUCCESS);
    CHECK_EQ(cuMemMap(va + 2 * gran, 2 * gran, 0, h2, 0), CUDA_SUCCESS);
    CHECK_EQ(cuMemMap(va + 8 * gran, gran, gran, h, 0), CUDA_SUCCESS);
    CHECK_EQ(cuMemRelease(h), CUDA_SUCCESS);
    CHECK_EQ(cuMemRelease(h2), CUDA_SUCCESS);
    CHECK_EQ(nvml_used(), base + 4 * gran);
    CHECK_EQ(cuMemUnmap(va, 4 * gran), CUDA_SUCCESS);
    CHECK_EQ(nvml_used(), base + 2 * gran); /* h's second mapping */
    CHECK_EQ(cuMemUnmap(va + 8 * gran, gran), CUDA_SUCCESS);
    CHECK_EQ(nvml_used(), base);
    CHECK_EQ(cuMemAddressFree(va, 16 * gran), CUDA_SUCCESS);
}

/* VMM shareable handles: one file per allocation, every fd export a new fd of it. */
static void test_vmm_share(void)
{
    CUmemAllocationProp prop, got;
    CUmemGenericAllocationHandle h, plain, back, fab_back;
    CUmemFabricHandle fab;
    struct stat a, b;
    int fa = -1, fb = -1;
    uint64_t base = nvml_used();
    memset(&prop, 0, sizeof(prop));
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    CHECK_EQ(cuMemCreate(&plain, 2 * MiB, &prop, 0), CUDA_SUCCESS);
    /* Not asked for at creation: the driver refuses the export. */
    CHECK_EQ(cuMemExportToShareableHandle(&fa, plain, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
             CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ(cuMemRelease(plain), CUDA_SUCCESS);
    prop.requestedHandleTypes =
        (CUmemAllocationHandleType)(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR | CU_MEM_HANDLE_TYPE_FABRIC);
    CHECK_EQ(cuMemCreate(&h, 8 * MiB, &prop, 0), CUDA_SUCCESS);
    CHECK_EQ(cuMemExportToShareableHandle(&fa, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
             CUDA_SUCCESS);
    CHECK_EQ(cuMemExportToShareableHandle(&fb, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
             CUDA_SUCCESS);
    CHECK(fa >= 0 && fb >= 0 && fa != fb);
    CHECK_EQ(fstat(fa, &a), 0);
    CHECK_EQ(fstat(fb, &b), 0);
    CHECK(a.st_dev == b.st_dev && a.st_ino == b.st_ino); /* the same file names it */
    CHECK_EQ((uint64_t)a.st_size, 8 * MiB);
    CHECK_EQ(nvml_used(), base + 8 * MiB); /* exporting costs nothing */
    CHECK_EQ(cuMemGetAllocationPropertiesFromHandle(&got, h), CUDA_SUCCESS);
    CHECK_EQ(got.location.type, CU_MEM_LOCATION_TYPE_DEVICE);
    CHECK_EQ(got.location.id, 0);
    /* Imported where it is held already: another reference to the same allocation. */
    CHECK_EQ(cuMemImportFromShareableHandle(&back, (void *)(intptr_t)fb,
                                            CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
             CUDA_SUCCESS);
    CHECK_EQ(back, h);
    CHECK_EQ(cuMemExportToShareableHandle(&fab, h, CU_MEM_HANDLE_TYPE_FABRIC, 0), CUDA_SUCCESS);
    CHECK_EQ(cuMemImportFromShareableHandle(&fab_back, &fab, CU_MEM_HANDLE_TYPE_FABRIC),
             CUDA_SUCCESS);
    CHECK_EQ(fab_back, h);
    CHECK_EQ(cuMemImportFromShareableHandle(&back, (void *)(intptr_t)-1,
                                            CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
             CUDA_ERROR_INVALID_VALUE);
    close(fa);
    close(fb);
    CHECK_EQ(cuMemRelease(h), CUDA_SUCCESS);
    CHECK_EQ(cuMemRelease(h), CUDA_SUCCESS);
    CHECK_EQ(nvml_used(), base + 8 * MiB); /* one reference left */
    CHECK_EQ(cuMemRelease(h), CUDA_SUCCESS);
    CHECK_EQ(nvml_used(), base);
    CHECK_EQ(cuMemRelease(h), CUDA_ERROR_INVALID_VALUE);
}

static void test_arrays(void)
{
    CUarray a;
    CUmipmappedArray m;
    CUDA_ARRAY_MEMORY_REQUIREMENTS req;
    uint64_t base = nvml_used();
    CUDA_ARRAY_DESCRIPTOR d = {.Width = 1000, .Height = 100, .Format = CU_AD_FORMAT_FLOAT,
                               .NumChannels = 4};
    CHECK_EQ(cuArrayCreate_v2(&a, &d), CUDA_SUCCESS);
    CHECK_EQ(cuArrayGetMemoryRequirements(&req, a, 0), CUDA_SUCCESS);
    CHECK(req.size >= 1000ULL * 100 * 16 && req.size % req.alignment == 0);
    CHECK_EQ(nvml_used(), base + req.size);
    CHECK_EQ(cuArrayDestroy(a), CUDA_SUCCESS);
    CHECK_EQ(nvml_used(), base);
    CUDA_ARRAY3D_DESCRIPTOR d3 = {.Width = 64, .Height = 64, .Depth = 64,
                                  .Format = CU_AD_FORMAT_UNSIGNED_INT8, .NumChannels = 1};
    CHECK_EQ(cuArray3DCreate_v2(&a, &d3), CUDA_SUCCESS);
    CHECK_EQ(cuArrayGetMemoryRequirements(&req, a, 0), CUDA_SUCCESS);
    CHECK_EQ(nvml_used(), base + req.size);
    CHECK_EQ(cuArrayDestroy(a), CUDA_SUCCESS);
    CHECK_EQ(cuMipmappedArrayCreate(&m, &d3, 8), CUDA_ERROR_INVALID_VALUE); /* 64 has 7 levels */
    CHECK_EQ(cuMipmappedArrayCreate(&m, &d3, 7), CUDA_SUCCESS);
    CHECK_EQ(cuMipmappedArrayGetMemoryRequirements(&req, m, 0), CUDA_SUCCESS);
    CHECK_EQ(nvml_used(), base + req.size);
    CHECK_EQ(cuMipmappedArrayDestroy(m), CUDA_SUCCESS);
    CHECK_EQ(nvml_used(), base);
    d.NumChannels = 3;
    CHECK_EQ(cuArrayCreate_v2(&a, &d), CUDA_ERROR_INVALID_VALUE);
}

/* Name of the exported symbol at fn. */
static const char *symbol_of(void *fn)
{
    Dl_info info;
    if (fn == NULL || dladdr(fn, &info) == 0 || info.dli_sname == NULL)
        return "";
    return info.dli_sname;
}

static void test_proc_address(void)
{
    static const struct {
        const char *name;
        int version;
        cuuint64_t flags;
        const char *want; /* NULL: not found */
        CUdriverProcAddressQueryResult status;
    } cases[] = {
        {"cuMemAlloc", 11030, 0, "cuMemAlloc_v2", CU_GET_PROC_ADDRESS_SUCCESS},
        {"cuMemAlloc", 13000, 2, "cuMemAlloc_v2", CU_GET_PROC_ADDRESS_SUCCESS},
        {"cuLaunchKernel", 12000, 0, "cuLaunchKernel", CU_GET_PROC_ADDRESS_SUCCESS},
        {"cuLaunchKernel", 12000, 2, "cuLaunchKernel_ptsz", CU_GET_PROC_ADDRESS_SUCCESS},
        {"cuLaunchKernel", 12000, 1, "cuLaunchKernel", CU_GET_PROC_ADDRESS_SUCCESS},
        {"cuCtxCreate", 11030, 0, "cuCtxCreate_v2", CU_GET_PROC_ADDRESS_SUCCESS},
        {"cuCtxCreate", 12000, 0, "cuCtxCreate_v3", CU_GET_PROC_ADDRESS_SUCCESS},
        {"cuCtxCreate", 13000, 0, "cuCtxCreate_v4", CU_GET_PROC_ADDRESS_SUCCESS},
        {"cuMemAllocAsync", 12000, 2, "cuMemAllocAsync_ptsz", CU_GET_PROC_ADDRESS_SUCCESS},
        {"cuGraphLaunch", 13000, 2, "cuGraphLaunch_ptsz", CU_GET_PROC_ADDRESS_SUCCESS},
        {"cuStreamGetCaptureInfo", 12000, 0, "cuStreamGetCaptureInfo_v2",
         CU_GET_PROC_ADDRESS_SUCCESS},
        {"cuStreamGetCaptureInfo", 13000, 2, "cuStreamGetCaptureInfo_v3_ptsz",
         CU_GET_PROC_ADDRESS_SUCCESS},
        {"cuDeviceGetUuid", 11030, 0, "cuDeviceGetUuid", CU_GET_PROC_ADDRESS_SUCCESS},
        {"cuDeviceGetUuid", 12000, 0, "cuDeviceGetUuid_v2", CU_GET_PROC_ADDRESS_SUCCESS},
        {"cuMemcpyHtoD", 12000, 2, "cuMemcpyHtoD_v2_ptds", CU_GET_PROC_ADDRESS_SUCCESS},
        {"cuGetProcAddress", 11030, 0, "cuGetProcAddress", CU_GET_PROC_ADDRESS_SUCCESS},
        {"cuGetProcAddress", 12000, 0, "cuGetProcAddress_v2", CU_GET_PROC_ADDRESS_SUCCESS},
        {"cuLaunchKernelEx", 11030, 0, NULL, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT},
        {"cuMemAlloc_v2", 12000, 0, NULL, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND},
        {"cuNoSuchThing", 12000, 0, NULL, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        void *fn = (void *)1, *fn1 = (void *)1;
        CUdriverProcAddressQueryResult st = (CUdriverProcAddressQueryResult)99;
        CUresult r = cuGetProcAddress_v2(cases[i].name, &fn, cases[i].version, cases[i].flags, &st);
        CUresult r1 = cuGetProcAddress(cases[i].name, &fn1, cases[i].version, cases[i].flags);
        int ok = st == cases[i].status && fn == fn1 && r == r1 &&
                 r == CUDA_SUCCESS &&
                 (cases[i].want == NULL ? fn == NULL
                                        : strcmp(symbol_of(fn), cases[i].want) == 0);
        if (!ok) {
            fprintf(stderr, "cuGetProcAddress(%s, %d, %llu) = %d status %d -> %s\n",
                    cases[i].name, cases[i].version, (unsigned long long)cases[i].flags, (int)r,
                    (int)st, symbol_of(fn));
            check_failures++;
        }
    }
    /* Every exported variant keeps its own address (dladdr names it). */
    static const char *const exported[] = {
        "cuLaunchKernel", "cuLaunchKernel_ptsz", "cuMemAllocAsync", "cuMemAllocAsync_ptsz",
        "cuDeviceGetUuid", "cuDeviceGetUuid_v2", "cuDevicePrimaryCtxRelease",
        "cuDevicePrimaryCtxRelease_v2", "cuStreamSynchronize", "cuStreamSynchronize_ptsz",
        "cuGraphLaunch", "cuGraphLaunch_ptsz", "cuMemcpyDtoH_v2", "cuMemcpyDtoH_v2_ptds",
    };
    for (size_t i = 0; i < sizeof(exported) / sizeof(exported[0]); i++) {
        void *fn = dlsym(RTLD_DEFAULT, exported[i]);
        if (strcmp(symbol_of(fn), exported[i]) != 0) {
            fprintf(stderr, "dladdr(%s) = %s\n", exported[i], symbol_of(fn));
            check_failures++;
        }
    }
}

static uint64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void test_launch_and_capture(void)
{
    CUmodule mod;
    CUfunction k;
    CUstream s;
    nvmlProcessUtilizationSample_t samples[8];
    unsigned int n = 8;
    nvmlUtilization_t util;
    static const char image[] = "fake";
    CHECK_EQ(nvmlDeviceGetProcessUtilization(nv0, samples, &n, 0), NVML_ERROR_NOT_FOUND);
    CHECK_EQ(cuModuleLoadData(&mod, image), CUDA_SUCCESS);
    CHECK_EQ(cuModuleGetFunction(&k, mod, "busy_50000us"), CUDA_SUCCESS);
    CHECK_EQ(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    uint64_t t0 = mono_ms();
    for (int i = 0; i < 4; i++)
        CHECK_EQ(cuLaunchKernel(k, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL), CUDA_SUCCESS);
    CHECK(mono_ms() - t0 < 150); /* asynchronous: well below the 200 ms queued */
    CHECK_EQ(cuStreamSynchronize(s), CUDA_SUCCESS);
    uint64_t waited = mono_ms() - t0;
    CHECK(waited >= 199 && waited < 1000);
    /* NVML reports complete sample periods (1/6 s): wait until the last one is reported. */
    usleep(170000);
    CHECK_EQ(nvmlDeviceGetUtilizationRates(nv0, &util), NVML_SUCCESS);
    CHECK(util.gpu >= 15 && util.gpu <= 30); /* 200 ms of the last second */
    n = 0;
    CHECK_EQ(nvmlDeviceGetProcessUtilization(nv0, NULL, &n, 0), NVML_ERROR_INSUFFICIENT_SIZE);
    CHECK_EQ(n, 1);
    CHECK_EQ(nvmlDeviceGetProcessUtilization(nv0, samples, &n, 0), NVML_SUCCESS);
    CHECK_EQ(samples[0].pid, getpid());
    /* The same busy time; each sensor dithers on its own (whole percents). */
    CHECK(samples[0].smUtil + 1 >= util.gpu && samples[0].smUtil <= util.gpu + 1);

    /* Captured launches run nothing until the graph is launched. */
    CUstreamCaptureStatus st;
    CUgraph g;
    CUgraphExec e;
    CHECK_EQ(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    CHECK_EQ(cuStreamIsCapturing(s, &st), CUDA_SUCCESS);
    CHECK_EQ(st, CU_STREAM_CAPTURE_STATUS_ACTIVE);
    cuuint64_t id = 0;
    CHECK_EQ(cuStreamGetCaptureInfo_v2(s, &st, &id, NULL, NULL, NULL), CUDA_SUCCESS);
    CHECK(id != 0 && st == CU_STREAM_CAPTURE_STATUS_ACTIVE);
    t0 = mono_ms();
    CHECK_EQ(cuLaunchKernel(k, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL), CUDA_SUCCESS);
    CHECK_EQ(cuLaunchKernel(k, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL), CUDA_SUCCESS);
    CHECK_EQ(cuStreamEndCapture(s, &g), CUDA_SUCCESS);
    CHECK_EQ(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK(mono_ms() - t0 < 90); /* executed, they would take 100 ms */
    CHECK_EQ(cuGraphInstantiateWithFlags(&e, g, 0), CUDA_SUCCESS);
    t0 = mono_ms();
    CHECK_EQ(cuGraphLaunch(e, s), CUDA_SUCCESS);
    CHECK_EQ(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK(mono_ms() - t0 >= 99);
    CHECK_EQ(cuGraphExecDestroy(e), CUDA_SUCCESS);
    CHECK_EQ(cuGraphDestroy(g), CUDA_SUCCESS);
    /* Synchronizing while capturing is refused and invalidates the capture. */
    CHECK_EQ(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    CHECK_EQ(cuCtxSynchronize(), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CHECK_EQ(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CHECK_EQ(cuStreamBeginCapture_v2(NULL, CU_STREAM_CAPTURE_MODE_GLOBAL),
             CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CHECK_EQ(cuStreamDestroy_v2(s), CUDA_SUCCESS);
    CHECK_EQ(cuModuleUnload(mod), CUDA_SUCCESS);
}

/* Runs one 10 ms kernel on s and returns how long until its stream synchronised (ms). */
static uint64_t launch_and_sync_ms(CUfunction k, CUstream s)
{
    uint64_t t0 = mono_ms();
    CHECK_EQ(cuLaunchKernel(k, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL), CUDA_SUCCESS);
    CHECK_EQ(cuStreamSynchronize(s), CUDA_SUCCESS);
    return mono_ms() - t0;
}

/*
 * A child that takes a process slot of the shared state and then, by what:
 * 'q' queues 2 s of kernels on GPU 0 and waits to be killed; 'l' takes GPU
 * 0's engine lock and stops itself (as if frozen inside). Returns its pid
 * once it got that far.
 */
static pid_t engine_child(char what)
{
    int ready[2];
    char c;
    CHECK(pipe(ready) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        fake_state st;
        char err[256];
        if (fake_state_open(&st, state_dir, 1, err, sizeof(err)) != 0)
            _exit(1);
        if (what == 'q') {
            for (int i = 0; i < 20; i++)
                if (fake_state_submit(&st, 0, 1, false, 100000000ULL) < 0)
                    _exit(1);
        } else {
            uint64_t word = (fake_now_ns() & ~((1ULL << FAKE_ENGINE_SLOT_BITS) - 1)) |
                            (uint64_t)(st.slot + 1);
            uint64_t free_word = 0;
            if (!atomic_compare_exchange_strong(&st.file->engines[0].lock, &free_word, word))
                _exit(1);
        }
        if (write(ready[1], "r", 1) != 1)
            _exit(1);
        if (what == 'l')
            raise(SIGSTOP);
        pause();
        _exit(0);
    }
    close(ready[1]);
    CHECK(pid > 0 && read(ready[0], &c, 1) == 1);
    close(ready[0]);
    return pid;
}

/*
 * The engine shared by every process survives its users: a killed process's
 * queued kernels are dropped once its slot is reclaimed; a lock holder
 * killed inside loses the lock within 50 ms, one stopped inside within a
 * second; and an engine whose running kernels were lost (a stopped holder
 * wrote after its takeover) is repaired by the next waiter.
 */
static void test_engine_survival(void)
{
    CUmodule mod;
    CUfunction k;
    CUstream s;
    fake_state st;
    char err[256];
    int status;
    static const char image[] = "fake";
    CHECK_EQ(cuModuleLoadData(&mod, image), CUDA_SUCCESS);
    CHECK_EQ(cuModuleGetFunction(&k, mod, "busy_10000us"), CUDA_SUCCESS);
    CHECK_EQ(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CHECK_EQ(fake_state_open(&st, state_dir, 0, err, sizeof(err)), 0);

    /* 2 s of another process's kernels hold the engine; killed, they are dropped. */
    pid_t q = engine_child('q');
    CHECK(kill(q, SIGKILL) == 0 && waitpid(q, &status, 0) == q);
    (void)nvml_used(); /* an NVML query reclaims the dead process's slot */
    uint64_t took = launch_and_sync_ms(k, s);
    CHECK(took >= 10 && took < 300);

    /* The lock's holder died inside: taken over after 50 ms. */
    _Atomic uint64_t *lock = &st.file->engines[0].lock;
    atomic_store(lock, (fake_now_ns() & ~((1ULL << FAKE_ENGINE_SLOT_BITS) - 1)) |
                           (uint64_t)FAKE_MAX_SLOTS);
    took = launch_and_sync_ms(k, s);
    CHECK(took >= 50 && took < 500);

    /* The holder is alive but stopped inside: taken over after a second. */
    pid_t l = engine_child('l');
    CHECK(waitpid(l, &status, WUNTRACED) == l && WIFSTOPPED(status));
    took = launch_and_sync_ms(k, s);
    CHECK(took >= 1000 && took < 2500);
    CHECK(kill(l, SIGKILL) == 0 && waitpid(l, &status, 0) == l);

    /* Running kernels lost from the engine's books: the waiter repairs it. */
    uint64_t t0 = mono_ms();
    CHECK_EQ(cuLaunchKernel(k, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL), CUDA_SUCCESS);
    CHECK_EQ(cuLaunchKernel(k, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL), CUDA_SUCCESS);
    for (int i = 0; i < GPU_CONCURRENT; i++)
        st.file->engines[0].sched.running[i] = 0;
    CHECK_EQ(cuStreamSynchronize(s), CUDA_SUCCESS);
    took = mono_ms() - t0;
    CHECK(took >= 20 && took < 300);

    fake_state_close(&st);
    CHECK_EQ(cuStreamDestroy_v2(s), CUDA_SUCCESS);
    CHECK_EQ(cuModuleUnload(mod), CUDA_SUCCESS);
}

static void test_xid_events(void)
{
    nvmlEventSet_t set;
    nvmlEventData_t data;
    char path[256], uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE], line[160];
    unsigned long long types = 0;
    nvmlDevice_t nv1;
    snprintf(path, sizeof(path), "%s/xid-events", state_dir);
    write_file(path, "0 13\n"); /* older than the set: not delivered */
    CHECK_EQ(nvmlDeviceGetHandleByIndex_v2(1, &nv1), NVML_SUCCESS);
    CHECK_EQ(nvmlDeviceGetUUID(nv1, uuid, sizeof(uuid)), NVML_SUCCESS);
    CHECK_EQ(nvmlEventSetCreate(&set), NVML_SUCCESS);
    CHECK_EQ(nvmlDeviceGetSupportedEventTypes(nv1, &types), NVML_SUCCESS);
    CHECK(types & nvmlEventTypeXidCriticalError);
    CHECK_EQ(nvmlDeviceRegisterEvents(nv1, nvmlEventTypeXidCriticalError, set), NVML_SUCCESS);
    CHECK_EQ(nvmlEventSetWait_v2(set, &data, 20), NVML_ERROR_TIMEOUT);
    FILE *f = fopen(path, "a");
    CHECK(f != NULL);
    if (f != NULL) {
        snprintf(line, sizeof(line), "0 31\n%s 79\n", uuid); /* GPU 0 is not registered */
        fputs(line, f);
        fclose(f);
    }
    CHECK_EQ(nvmlEventSetWait_v2(set, &data, 1000), NVML_SUCCESS);
    CHECK(data.device == nv1);
    CHECK_EQ(data.eventType, nvmlEventTypeXidCriticalError);
    CHECK_EQ(data.eventData, 79);
    CHECK_EQ(nvmlEventSetWait_v2(set, &data, 0), NVML_ERROR_TIMEOUT);
    CHECK_EQ(nvmlEventSetFree(set), NVML_SUCCESS);
}

/* Starts cuda-probe with args; its stdout is returned as a FILE. */
static pid_t spawn_probe(char *const args[], FILE **out)
{
    int fds[2];
    if (pipe(fds) != 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        execv(args[0], args);
        _exit(127);
    }
    close(fds[1]);
    *out = fdopen(fds[0], "r");
    return pid;
}

/* Value of the integer field "key" in a JSON line, or -1. */
static long long json_int(const char *line, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof(pat), "\"%s\":", key);
    const char *p = strstr(line, pat);
    return p == NULL ? -1 : strtoll(p + strlen(pat), NULL, 10);
}

static void test_cross_process(const char *probe)
{
    char line[512];
    FILE *out;
    int status;
    uint64_t base = nvml_used();
    char *hold[] = {(char *)probe, "alloc", "1Gi", "hold", "60", NULL};
    pid_t pid = spawn_probe(hold, &out);
    CHECK(pid > 0);
    CHECK(fgets(line, sizeof(line), out) != NULL);
    CHECK(strstr(line, "\"action\":\"alloc\"") != NULL);
    /* Another process's memory is visible here, attributed to its pid. */
    CHECK_EQ(nvml_used(), base + GiB);
    CHECK_EQ(nvml_process_used((unsigned int)pid), (long long)GiB);
    /* ...and counts against this process's allocations. */
    size_t free_b = 0, total = 0;
    CHECK_EQ(cuMemGetInfo_v2(&free_b, &total), CUDA_SUCCESS);
    CHECK_EQ(free_b, GPU_MEMORY - base - GiB);
    /* SIGKILL: the kernel drops the slot lock; the memory comes back. */
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    fclose(out);
    CHECK_EQ(nvml_used(), base);
    CHECK_EQ(nvml_process_used((unsigned int)pid), -1);

    /* Two processes share one GPU: the probe gets what this one left. */
    CUdeviceptr p;
    CHECK_EQ(cuMemAlloc_v2(&p, 5 * GiB), CUDA_SUCCESS);
    uint64_t before = nvml_used();
    uint64_t expect = (GPU_MEMORY - before) / GiB * GiB;
    char *oom[] = {(char *)probe, "alloc-until-oom", "1Gi", "mem-info", NULL};
    pid = spawn_probe(oom, &out);
    CHECK(fgets(line, sizeof(line), out) != NULL);
    CHECK(strstr(line, "CUDA_ERROR_OUT_OF_MEMORY") != NULL);
    CHECK_EQ(json_int(line, "allocated"), (long long)expect);
    CHECK(fgets(line, sizeof(line), out) != NULL);
    CHECK_EQ(json_int(line, "free"), (long long)(GPU_MEMORY - before - expect));
    waitpid(pid, &status, 0);
    fclose(out);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK_EQ(nvml_used(), base + 5 * GiB); /* normal exit released it too */
    CHECK_EQ(cuMemFree_v2(p), CUDA_SUCCESS);

    /* A usage error exits 2 with a JSON error. */
    char *bad[] = {(char *)probe, "alloc", "1.5Gi", NULL};
    pid = spawn_probe(bad, &out);
    CHECK(fgets(line, sizeof(line), out) != NULL);
    CHECK(strstr(line, "\"error\"") != NULL);
    waitpid(pid, &status, 0);
    fclose(out);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 2);
}

/* Forks a process into mid's pid namespace that writes nvml_process_used(pid) to fd. */
static void query_from_namespace(unsigned int pid, int fd)
{
    pid_t q = fork();
    if (q == 0) {
        long long used = nvml_process_used(pid);
        _exit(write(fd, &used, sizeof(used)) == (ssize_t)sizeof(used) ? 0 : 1);
    }
    if (q > 0)
        waitpid(q, NULL, 0);
}

/*
 * NVML reports host pids: cuda-probe running as pid 1 of a new pid namespace
 * is listed under the pid the host knows it by, also by NVML inside that
 * namespace soon after it starts, not only after the node's next memory
 * query: the host's XID event waits (the kubelet plugin's health watcher)
 * resolve new processes as the kernel driver knows them from the start.
 */
static void test_pid_namespace(const char *probe)
{
    int out[2], ask[2], answer[2], report[2], status;
    char line[512];
    if (pipe(out) != 0 || pipe(ask) != 0 || pipe(answer) != 0 || pipe(report) != 0) {
        CHECK(0);
        return;
    }
    pid_t mid = fork();
    if (mid == 0) {
        /* Only the parent writes questions: the loop below ends when it closes them. */
        close(ask[1]);
        close(answer[0]);
        int ok = unshare(CLONE_NEWPID) == 0;
        pid_t holder = ok ? fork() : -1;
        if (holder == 0) {
            dup2(out[1], 1);
            execl(probe, probe, "alloc", "1Gi", "hold", "60", (char *)NULL);
            _exit(127);
        }
        int v = ok ? (int)holder : -errno;
        if (write(report[1], &v, sizeof(v)) != (ssize_t)sizeof(v))
            _exit(1);
        /* Each host pid the parent sends is looked up by a process of the namespace. */
        unsigned int host;
        while (ok && read(ask[0], &host, sizeof(host)) == (ssize_t)sizeof(host))
            query_from_namespace(host, answer[1]);
        if (holder > 0)
            waitpid(holder, NULL, 0);
        _exit(0);
    }
    close(out[1]);
    close(ask[0]);
    close(answer[1]);
    close(report[1]);
    int host_pid = 0;
    FILE *probe_out = fdopen(out[0], "r");
    CHECK(read(report[0], &host_pid, sizeof(host_pid)) == (ssize_t)sizeof(host_pid));
    close(report[0]);
    if (host_pid <= 0) {
        check_unavailable("fake_test pid namespace", "unshare(CLONE_NEWPID): %s",
                          strerror(-host_pid));
    } else {
        CHECK(fgets(line, sizeof(line), probe_out) != NULL);
        CHECK(strstr(line, "\"action\":\"alloc\"") != NULL);
        unsigned int h = (unsigned int)host_pid;
        long long seen = 0;
        /* No host-side call yet: the namespace cannot name its process by its host pid. */
        CHECK(write(ask[1], &h, sizeof(h)) == (ssize_t)sizeof(h));
        CHECK(read(answer[0], &seen, sizeof(seen)) == (ssize_t)sizeof(seen));
        CHECK_EQ(seen, -1);
        /* An event wait on the host (it times out: no XID) resolves it. */
        nvmlEventSet_t set;
        nvmlEventData_t data;
        CHECK_EQ(nvmlEventSetCreate(&set), NVML_SUCCESS);
        CHECK_EQ(nvmlDeviceRegisterEvents(nv0, nvmlEventTypeXidCriticalError, set), NVML_SUCCESS);
        CHECK_EQ(nvmlEventSetWait_v2(set, &data, 50), NVML_ERROR_TIMEOUT);
        CHECK_EQ(nvmlEventSetFree(set), NVML_SUCCESS);
        CHECK(write(ask[1], &h, sizeof(h)) == (ssize_t)sizeof(h));
        CHECK(read(answer[0], &seen, sizeof(seen)) == (ssize_t)sizeof(seen));
        CHECK_EQ(seen, (long long)GiB);
        /* The host lists it by its host pid, never by its pid in the namespace. */
        CHECK_EQ(nvml_process_used(h), (long long)GiB);
        CHECK_EQ(nvml_process_used(1), -1);
        kill(host_pid, SIGKILL);
    }
    close(ask[1]);
    close(answer[0]);
    fclose(probe_out);
    waitpid(mid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* Node indices of the GPUs in view, e.g. "1,3". */
static const char *phys_list(const fake_config *view)
{
    static char buf[128];
    size_t n = 0;
    buf[0] = '\0';
    for (int i = 0; i < view->gpu_count && n + 8 < sizeof(buf); i++)
        n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%s%d", i ? "," : "", view->gpus[i].phys);
    return buf;
}

static void touch(const char *dir, const char *name)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CREAT, 0644);
    CHECK(fd >= 0);
    if (fd >= 0)
        close(fd);
}

/* Which GPUs a process sees: device nodes first, then CUDA_VISIBLE_DEVICES. */
static void test_visibility_rules(void)
{
    char dev[] = "/tmp/vgpu-fake-dev-XXXXXX", err[256], uuid_prefix[20];
    fake_config node, v;
    CHECK(mkdtemp(dev) != NULL);
    setenv("VGPU_FAKE_GPU_COUNT", "4", 1);
    CHECK_EQ(fake_config_load(&node, err, sizeof(err)), 0);
    setenv("VGPU_FAKE_GPU_COUNT", "2", 1);

    /* No driver control node: a host that simulates no device nodes sees all. */
    touch(dev, "nvidia1");
    fake_config_restrict(&node, dev, NULL, &v);
    CHECK(strcmp(phys_list(&v), "0,1,2,3") == 0);
    /* With nvidiactl, only GPUs with a node, numbered from 0. */
    touch(dev, "nvidiactl");
    touch(dev, "nvidia3");
    fake_config_restrict(&node, dev, NULL, &v);
    CHECK(strcmp(phys_list(&v), "1,3") == 0);
    CHECK(strcmp(v.gpus[0].uuid, node.gpus[1].uuid) == 0);
    CHECK_EQ(v.gpus[0].pci_bus, node.gpus[1].pci_bus);
    /* CUDA_VISIBLE_DEVICES indexes the visible GPUs, reorders, takes UUIDs and prefixes. */
    fake_config_restrict(&node, dev, "1,0", &v);
    CHECK(strcmp(phys_list(&v), "3,1") == 0);
    fake_config_restrict(&node, dev, " 1 ", &v);
    CHECK(strcmp(phys_list(&v), "3") == 0);
    snprintf(uuid_prefix, sizeof(uuid_prefix), "%.12s", node.gpus[3].uuid);
    fake_config_restrict(&node, dev, uuid_prefix, &v);
    CHECK(strcmp(phys_list(&v), "3") == 0);
    /* Up to the first invalid or repeated entry; a GPU without its node is invalid. */
    fake_config_restrict(&node, dev, "0,7,1", &v);
    CHECK(strcmp(phys_list(&v), "1") == 0);
    fake_config_restrict(&node, dev, "0,0", &v);
    CHECK(strcmp(phys_list(&v), "1") == 0);
    fake_config_restrict(&node, dev, node.gpus[0].uuid, &v);
    CHECK_EQ(v.gpu_count, 0);
    fake_config_restrict(&node, dev, "", &v);
    CHECK_EQ(v.gpu_count, 0);

    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dev);
    CHECK(system(cmd) == 0);
}

/*
 * Run as "fake_test view" in a container-like /dev: prints what NVML and
 * CUDA show, allocates 1 GiB on CUDA device 0 and holds it until stdin
 * closes.
 */
static int view_main(void)
{
    unsigned int ncount = 0, minor = 99;
    int ccount = 0;
    char nuuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = "", cuuid[64] = "";
    nvmlDevice_t nd;
    CUuuid u;
    CUcontext ctx;
    CUdeviceptr p;

    if (nvmlInit_v2() != NVML_SUCCESS || nvmlDeviceGetCount_v2(&ncount) != NVML_SUCCESS ||
        nvmlDeviceGetHandleByIndex_v2(0, &nd) != NVML_SUCCESS ||
        nvmlDeviceGetUUID(nd, nuuid, sizeof(nuuid)) != NVML_SUCCESS ||
        nvmlDeviceGetMinorNumber(nd, &minor) != NVML_SUCCESS)
        return 3;
    if (cuInit(0) != CUDA_SUCCESS || cuDeviceGetCount(&ccount) != CUDA_SUCCESS ||
        cuDeviceGetUuid_v2(&u, 0) != CUDA_SUCCESS ||
        cuDevicePrimaryCtxRetain(&ctx, 0) != CUDA_SUCCESS || cuCtxSetCurrent(ctx) != CUDA_SUCCESS ||
        cuMemAlloc_v2(&p, GiB) != CUDA_SUCCESS)
        return 4;
    const unsigned char *b = (const unsigned char *)u.bytes;
    snprintf(cuuid, sizeof(cuuid),
             "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
             b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
             b[15]);
    printf("%u %s %u %d %s\n", ncount, nuuid, minor, ccount, cuuid);
    fflush(stdout);
    while (getchar() != EOF) {
    }
    return 0;
}

/*
 * A process whose /dev has nvidiactl and nvidia1 only (as a container with
 * a claim on gpu-1 gets from CDI) sees that GPU alone, as NVML index 0 and
 * CUDA device 0, and its memory lands on the node's GPU 1. With dev_dir
 * NULL the nodes are in a private /dev (the default device directory; needs
 * root), else in dev_dir, named by VGPU_FAKE_DEV_DIR.
 */
static void test_visibility_container(const char *cuda_visible, const char *nodes,
                                      const char *want_prefix, const char *dev_dir)
{
    int in[2], out[2], status;
    char line[512] = "";
    if (pipe(in) != 0 || pipe(out) != 0) {
        CHECK(0);
        return;
    }
    uint64_t used0 = nvml_used();
    pid_t pid = fork();
    if (pid == 0) {
        char exe[4096];
        ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
        if (n <= 0)
            _exit(127);
        if (dev_dir != NULL) {
            setenv("VGPU_FAKE_DEV_DIR", dev_dir, 1);
        } else {
            unsetenv("VGPU_FAKE_DEV_DIR");
            if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
                mount("tmpfs", "/dev", "tmpfs", 0, "mode=0755") != 0)
                _exit(125);
            mknod("/dev/null", S_IFCHR | 0666, makedev(1, 3));
        }
        exe[n] = '\0';
        for (const char *s = nodes; *s != '\0'; s += strcspn(s, " "), s += *s == ' ') {
            char name[32];
            snprintf(name, sizeof(name), "%.*s", (int)strcspn(s, " "), s);
            touch(dev_dir != NULL ? dev_dir : "/dev", name);
        }
        if (cuda_visible != NULL)
            setenv("CUDA_VISIBLE_DEVICES", cuda_visible, 1);
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[1]);
        close(out[0]);
        execl(exe, exe, "view", (char *)NULL);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    FILE *f = fdopen(out[0], "r");
    if (fgets(line, sizeof(line), f) == NULL) {
        close(in[1]);
        waitpid(pid, &status, 0);
        if (WIFEXITED(status) && WEXITSTATUS(status) == 125) {
            printf("fake_test: skipping the container visibility test: needs root for a private /dev\n");
        } else {
            fprintf(stderr, "view process failed: status %d\n", status);
            CHECK(0);
        }
        fclose(f);
        return;
    }
    line[strcspn(line, "\n")] = '\0';
    if (strcmp(line, want_prefix) != 0)
        fprintf(stderr, "view: got \"%s\", want \"%s\"\n", line, want_prefix);
    CHECK(strcmp(line, want_prefix) == 0);
    /* Its CUDA device 0 is the node's GPU 1: GPU 0 (nv0 here) did not move. */
    CHECK_EQ(nvml_used(), used0);
    nvmlDevice_t nv1;
    nvmlMemory_t m;
    CHECK_EQ(nvmlDeviceGetHandleByIndex_v2(1, &nv1), NVML_SUCCESS);
    CHECK_EQ(nvmlDeviceGetMemoryInfo(nv1, &m), NVML_SUCCESS);
    CHECK(m.used >= GiB);
    close(in[1]);
    waitpid(pid, &status, 0);
    fclose(f);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/*
 * Processes racing to fill a GPU in chunks get exactly what fits, never more
 * and, with room left, never a refusal: each of 4 processes charges 1 MiB
 * chunks of a 64 MiB GPU straight through fake_state until refused; the
 * chunks granted add up to 64, and to nothing once they are gone.
 */
static void test_reserve_race(void)
{
    const uint64_t mib = 1ULL << 20, total = 64 * mib;
    char dir[] = "/tmp/vgpu-fake-race-XXXXXX", err[256], cmd[300];
    fake_state reader;
    CHECK(mkdtemp(dir) != NULL);
    CHECK_EQ(fake_state_open(&reader, dir, 0, err, sizeof(err)), 0);
    for (int round = 0; round < 50; round++) {
        int go[2], done[2], hold[2];
        pid_t pids[4];
        CHECK(pipe(go) == 0 && pipe(done) == 0 && pipe(hold) == 0);
        for (int c = 0; c < 4; c++) {
            pids[c] = fork();
            if (pids[c] == 0) {
                fake_state st;
                char b;
                int n = 0;
                close(go[1]);
                close(done[0]);
                close(hold[1]);
                if (fake_state_open(&st, dir, 1, err, sizeof(err)) != 0)
                    _exit(2);
                if (read(go[0], &b, 1) != 0)
                    _exit(3);
                while (fake_state_reserve(&st, 0, mib, total) == 0)
                    n++;
                if (write(done[1], &n, sizeof(n)) != (ssize_t)sizeof(n))
                    _exit(4);
                /* Alive (slot held) until the parent has looked. */
                if (read(hold[0], &b, 1) != 0)
                    _exit(5);
                _exit(0);
            }
        }
        close(go[0]);
        close(done[1]);
        close(hold[0]);
        close(go[1]); /* all start at once */
        int granted = 0, n;
        for (int c = 0; c < 4; c++) {
            if (read(done[0], &n, sizeof(n)) == (ssize_t)sizeof(n))
                granted += n;
        }
        if (granted != 64)
            fprintf(stderr, "reserve race round %d: %d chunks of 64 granted\n", round, granted);
        CHECK_EQ(granted, 64);
        CHECK_EQ(fake_state_used(&reader, 0), total);
        close(hold[1]);
        for (int c = 0; c < 4; c++) {
            int status;
            CHECK(waitpid(pids[c], &status, 0) == pids[c] && WIFEXITED(status) &&
                  WEXITSTATUS(status) == 0);
        }
        close(done[0]);
        CHECK_EQ(fake_state_used(&reader, 0), 0);
        if (check_failures != 0)
            break;
    }
    fake_state_close(&reader);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
}

static void remove_state(void)
{
    char path[256];
    static const char *const files[] = {"state", "config", "xid-events"};
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s", state_dir, files[i]);
        unlink(path);
    }
    rmdir(state_dir);
}

/*
 * After one launch on GPU 0: the share the engine holds this process to
 * (0: it is no MPS client there).
 */
static uint32_t engine_share(fake_state *reader)
{
    CUcontext ctx;
    CUmodule mod;
    CUfunction k;
    static const char image[] = "fake";

    CHECK_EQ(cuDevicePrimaryCtxRetain(&ctx, 0), CUDA_SUCCESS);
    CHECK_EQ(cuCtxSetCurrent(ctx), CUDA_SUCCESS);
    CHECK_EQ(cuModuleLoadData(&mod, image), CUDA_SUCCESS);
    CHECK_EQ(cuModuleGetFunction(&k, mod, "busy_10us"), CUDA_SUCCESS);
    CHECK_EQ(cuLaunchKernel(k, 1024, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL), CUDA_SUCCESS);
    CHECK_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
    for (int i = 0; i < FAKE_MAX_SLOTS; i++) {
        const gpu_queue *q = &reader->file->engines[0].sched.q[i];

        if (atomic_load(&reader->file->slots[i].active) &&
            atomic_load(&reader->file->slots[i].pid) == (uint32_t)getpid())
            return q->group != 0 ? q->share_pm : 0;
    }
    return 0;
}

/*
 * cuInit of a child with CUDA_MPS_PIPE_DIRECTORY=dir and the share share
 * (NULL: unset): returns its result, and in *share_pm the share the fake
 * recorded for it (0: not an MPS client), which its engine must hold it to.
 */
static CUresult mps_child_init(const char *dir, const char *share, uint32_t *share_pm)
{
    int st, fds[2];
    uint32_t got[2] = {0, 0};
    pid_t pid;

    CHECK(pipe(fds) == 0);
    pid = fork();
    if (pid == 0) {
        fake_state reader;
        char err[256];

        close(fds[0]);
        setenv("CUDA_MPS_PIPE_DIRECTORY", dir, 1);
        if (share != NULL)
            setenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", share, 1);
        else
            unsetenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE");
        got[0] = (uint32_t)cuInit(0);
        if (got[0] == CUDA_SUCCESS && fake_state_open(&reader, state_dir, 0, err, sizeof(err)) == 0) {
            if (!fake_state_mps_client(&reader, (unsigned int)getpid(), &got[1]))
                got[1] = 0;
            if (engine_share(&reader) != got[1])
                got[1] = 9999;
        }
        _exit(write(fds[1], got, sizeof(got)) == (ssize_t)sizeof(got) ? 0 : 1);
    }
    close(fds[1]);
    CHECK(pid > 0 && read(fds[0], got, sizeof(got)) == (ssize_t)sizeof(got));
    close(fds[0]);
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    *share_pm = got[1];
    return (CUresult)got[0];
}

/*
 * An MPS client (CUDA_MPS_PIPE_DIRECTORY set): cuInit connects to the
 * control daemon's unix socket <dir>/control and fails with
 * CUDA_ERROR_MPS_CONNECTION_FAILED when nothing answers, as NVIDIA's driver
 * does; a client's share is what it read from its environment at cuInit.
 */
static void test_mps_client(void)
{
    char dir[] = "/tmp/vgpu-fake-mps-XXXXXX";
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    const char *name = NULL, *text = NULL;
    uint32_t pm = 0;
    int lfd;

    CHECK(mkdtemp(dir) != NULL);
    /* No socket, then a socket nobody listens on (a daemon that died). */
    CHECK_EQ(mps_child_init(dir, "40", &pm), CUDA_ERROR_MPS_CONNECTION_FAILED);
    snprintf(addr.sun_path, sizeof(addr.sun_path), "%s/control", dir);
    lfd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
    CHECK(lfd >= 0 && bind(lfd, (struct sockaddr *)&addr, sizeof(addr)) == 0);
    CHECK_EQ(mps_child_init(dir, "40", &pm), CUDA_ERROR_MPS_CONNECTION_FAILED);
    CHECK_EQ(cuGetErrorName(CUDA_ERROR_MPS_CONNECTION_FAILED, &name), CUDA_SUCCESS);
    CHECK(name != NULL && strcmp(name, "CUDA_ERROR_MPS_CONNECTION_FAILED") == 0);
    CHECK_EQ(cuGetErrorString(CUDA_ERROR_MPS_CLIENT_TERMINATED, &text), CUDA_SUCCESS);
    /* A listening daemon: the client connects, with the share of its environment. */
    CHECK(listen(lfd, 8) == 0);
    CHECK_EQ(mps_child_init(dir, "40", &pm), CUDA_SUCCESS);
    CHECK_EQ(pm, 400);
    CHECK_EQ(mps_child_init(dir, "12.5", &pm), CUDA_SUCCESS);
    CHECK_EQ(pm, 125);
    CHECK_EQ(mps_child_init(dir, NULL, &pm), CUDA_SUCCESS);
    CHECK_EQ(pm, 1000);
    CHECK_EQ(mps_child_init(dir, "250", &pm), CUDA_SUCCESS);
    CHECK_EQ(pm, 1000);
    close(lfd);
    unlink(addr.sun_path);
    rmdir(dir);
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "view") == 0)
        return view_main();
    const char *probe = getenv("FAKE_TEST_PROBE"), *libdir = getenv("FAKE_TEST_LIBDIR");
    if (probe == NULL || libdir == NULL || mkdtemp(state_dir) == NULL) {
        fprintf(stderr, "set FAKE_TEST_PROBE and FAKE_TEST_LIBDIR\n");
        return 2;
    }
    setenv("VGPU_FAKE_STATE_DIR", state_dir, 1);
    setenv("VGPU_FAKE_GPU_COUNT", "2", 1);
    setenv("VGPU_FAKE_GPU_MEMORY", "8Gi", 1);
    setenv("LD_LIBRARY_PATH", libdir, 1);
    unsetenv("VGPU_FAKE_CONFIG");
    unsetenv("VGPU_FAKE_CONTEXT_MEMORY");
    unsetenv("VGPU_FAKE_KERNEL_US");

    test_parse_size();
    test_config_file();
    test_visibility_rules();
    test_reserve_race();
    test_mps_client();

    CUdeviceptr p;
    CHECK_EQ(cuMemAlloc_v2(&p, 1), CUDA_ERROR_NOT_INITIALIZED);
    CHECK_EQ(cuInit(0), CUDA_SUCCESS);
    CHECK_EQ(nvmlInit_v2(), NVML_SUCCESS);
    CHECK_EQ(nvmlDeviceGetHandleByIndex_v2(0, &nv0), NVML_SUCCESS);
    test_devices();
    CHECK_EQ(cuMemAlloc_v2(&p, 1), CUDA_ERROR_INVALID_CONTEXT);
    CUcontext ctx;
    CHECK_EQ(cuDevicePrimaryCtxRetain(&ctx, 0), CUDA_SUCCESS);
    CHECK_EQ(cuCtxSetCurrent(ctx), CUDA_SUCCESS);
    CHECK_EQ(nvml_process_used((unsigned int)getpid()), 0); /* listed: it has a context */
    test_linear();
    test_pools();
    test_vmm();
    test_vmm_share();
    test_arrays();
    test_proc_address();
    test_launch_and_capture();
    test_engine_survival();
    test_xid_events();
    test_cross_process(probe);
    test_pid_namespace(probe);
    {
        char u0[NVML_DEVICE_UUID_V2_BUFFER_SIZE], u1[NVML_DEVICE_UUID_V2_BUFFER_SIZE], want[300];
        nvmlDevice_t nv1;
        CHECK_EQ(nvmlDeviceGetHandleByIndex_v2(1, &nv1), NVML_SUCCESS);
        CHECK_EQ(nvmlDeviceGetUUID(nv0, u0, sizeof(u0)), NVML_SUCCESS);
        CHECK_EQ(nvmlDeviceGetUUID(nv1, u1, sizeof(u1)), NVML_SUCCESS);
        /* A claim on gpu-1: one GPU, index 0 in NVML and CUDA, minor 1. */
        snprintf(want, sizeof(want), "1 %s 1 1 %s", u1, u1);
        test_visibility_container(NULL, "nvidiactl nvidia1", want, NULL);
        /* The same nodes in the directory VGPU_FAKE_DEV_DIR names: no root needed. */
        {
            char dev[] = "/tmp/vgpu-fake-devdir-XXXXXX", cmd[300];
            CHECK(mkdtemp(dev) != NULL);
            test_visibility_container(NULL, "nvidiactl nvidia1", want, dev);
            snprintf(cmd, sizeof(cmd), "rm -rf %s", dev);
            CHECK(system(cmd) == 0);
        }
        /* Both nodes and CUDA_VISIBLE_DEVICES=1: NVML ignores the variable, CUDA does not. */
        snprintf(want, sizeof(want), "2 %s 0 1 %s", u0, u1);
        test_visibility_container("1", "nvidiactl nvidia0 nvidia1", want, NULL);
    }
    CHECK_EQ(cuDevicePrimaryCtxRelease_v2(0), CUDA_SUCCESS);
    CHECK_EQ(nvml_process_used((unsigned int)getpid()), -1);
    CHECK_EQ(nvmlShutdown(), NVML_SUCCESS);
    remove_state();
    return check_report("fake_test");
}
