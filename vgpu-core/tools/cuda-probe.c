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
 * cuda-probe - drives a CUDA driver the way the CUDA runtime does and runs
 * scripted actions, printing one JSON object per action on stdout.
 *
 *   cuda-probe [--cuda-version N] [--ptsz] [--device N] ACTION...
 *
 * Loading: dlopen("libcuda.so.1"), dlsym "cuGetProcAddress_v2" (else
 * "cuGetProcAddress"), then, as the runtime does, the resolver is asked for
 * "cuGetProcAddress" itself and every other entry point is resolved through
 * the resolver it returns, by name, CUDA version and flags.
 *
 * Actions (see fake/README.md): info, mem-info, alloc SIZE,
 * alloc-until-oom STEP, alloc-async SIZE, vmm SIZE, free-all, sync,
 * hold SECONDS, launch SECONDS KERNEL_MS, memcpy SIZE.
 * Exit status: 0 when every action succeeded, 1 when one failed (its JSON
 * object carries "error"), 2 on a usage error.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vgpu_cuda.h"
#include "vgpu_nvml.h"

#define MAX_ALLOCS 65536

typedef enum alloc_kind { ALLOC_SYNC, ALLOC_ASYNC, ALLOC_VMM } alloc_kind;

typedef struct allocation {
    CUdeviceptr ptr;
    size_t size;
    alloc_kind kind;
    CUmemGenericAllocationHandle handle;
} allocation;

/* The entry points the probe uses, resolved once at start. */
typedef struct driver {
    PFN_cuInit init;
    PFN_cuDriverGetVersion driver_version;
    PFN_cuGetErrorName error_name;
    PFN_cuDeviceGet device_get;
    PFN_cuDeviceGetName device_name;
    PFN_cuDeviceGetUuid_v2 device_uuid;
    PFN_cuDevicePrimaryCtxRetain ctx_retain;
    PFN_cuCtxSetCurrent ctx_set;
    PFN_cuCtxSynchronize ctx_sync;
    PFN_cuMemGetInfo_v2 mem_info;
    PFN_cuMemAlloc_v2 mem_alloc;
    PFN_cuMemFree_v2 mem_free;
    PFN_cuMemAllocAsync mem_alloc_async;
    PFN_cuMemFreeAsync mem_free_async;
    PFN_cuMemcpyHtoD_v2 memcpy_htod;
    PFN_cuMemcpyDtoH_v2 memcpy_dtoh;
    PFN_cuMemGetAllocationGranularity granularity;
    PFN_cuMemCreate mem_create;
    PFN_cuMemRelease mem_release;
    PFN_cuMemAddressReserve addr_reserve;
    PFN_cuMemAddressFree addr_free;
    PFN_cuMemMap mem_map;
    PFN_cuMemUnmap mem_unmap;
    PFN_cuMemSetAccess set_access;
    PFN_cuStreamCreate stream_create;
    PFN_cuStreamSynchronize stream_sync;
    PFN_cuModuleLoadData module_load;
    PFN_cuModuleGetFunction module_function;
    PFN_cuLaunchKernel launch;
} driver;

typedef struct probe {
    driver d;
    int device;
    CUstream stream;
    CUmodule module;
    allocation *allocs;
    size_t nallocs;
} probe;

static const char *err_name(const probe *p, CUresult r)
{
    const char *s = NULL;
    if (p->d.error_name == NULL || p->d.error_name(r, &s) != CUDA_SUCCESS || s == NULL)
        return "CUDA_ERROR_UNKNOWN";
    return s;
}

static void print_error(const probe *p, const char *action, const char *call, CUresult r)
{
    printf("{\"action\":\"%s\",\"call\":\"%s\",\"code\":%d,\"error\":\"%s\"}\n", action, call,
           (int)r, err_name(p, r));
}

static int usage(const char *msg)
{
    printf("{\"action\":\"usage\",\"error\":\"%s\"}\n", msg);
    return 2;
}

/* Strict byte size: digits with an optional K/M/G/T or Ki/Mi/Gi/Ti unit. */
static int parse_size(const char *s, uint64_t *out)
{
    static const struct {
        const char *unit;
        uint64_t mult;
    } units[] = {{"", 1},          {"K", 1000ULL},   {"M", 1000000ULL}, {"G", 1000000000ULL},
                 {"T", 1000000000000ULL}, {"Ki", 1ULL << 10}, {"Mi", 1ULL << 20},
                 {"Gi", 1ULL << 30}, {"Ti", 1ULL << 40}};
    uint64_t v = 0;
    const char *c = s;
    if (*c < '0' || *c > '9')
        return -1;
    for (; *c >= '0' && *c <= '9'; c++) {
        if (v > (UINT64_MAX - 9) / 10)
            return -1;
        v = v * 10 + (uint64_t)(*c - '0');
    }
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strcmp(c, units[i].unit) == 0) {
            if (v > UINT64_MAX / units[i].mult)
                return -1;
            *out = v * units[i].mult;
            return 0;
        }
    }
    return -1;
}

static int parse_uint(const char *s, unsigned long max, unsigned long *out)
{
    char *end;
    if (*s < '0' || *s > '9')
        return -1;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno != 0 || *end != '\0' || v > max)
        return -1;
    *out = v;
    return 0;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* ------------------------------------------------------------------------ */
/* Loading, as the CUDA runtime does                                        */
/* ------------------------------------------------------------------------ */

typedef struct resolver {
    PFN_cuGetProcAddress_v2 v2;
    PFN_cuGetProcAddress v1;
    int version;
    cuuint64_t flags;
} resolver;

static void *resolve(const resolver *r, const char *name)
{
    void *fn = NULL;
    CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SUCCESS;
    CUresult res = r->v2 != NULL ? r->v2(name, &fn, r->version, r->flags, &status)
                                 : r->v1(name, &fn, r->version, r->flags);
    if (res != CUDA_SUCCESS || status != CU_GET_PROC_ADDRESS_SUCCESS || fn == NULL) {
        printf("{\"action\":\"load\",\"symbol\":\"%s\",\"code\":%d,\"status\":%d,"
               "\"error\":\"cannot resolve symbol\"}\n",
               name, (int)res, (int)status);
        return NULL;
    }
    return fn;
}

static int load_driver(driver *d, int version, cuuint64_t flags)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (lib == NULL) {
        printf("{\"action\":\"load\",\"error\":\"dlopen libcuda.so.1 failed\"}\n");
        return -1;
    }
    resolver boot = {.version = version, .flags = 0};
    boot.v2 = (PFN_cuGetProcAddress_v2)dlsym(lib, "cuGetProcAddress_v2");
    if (boot.v2 == NULL)
        boot.v1 = (PFN_cuGetProcAddress)dlsym(lib, "cuGetProcAddress");
    if (boot.v2 == NULL && boot.v1 == NULL) {
        printf("{\"action\":\"load\",\"error\":\"libcuda.so.1 has no cuGetProcAddress\"}\n");
        return -1;
    }
    /* The resolver for the requested version: _v2 from CUDA 12.0 on. */
    void *self = resolve(&boot, "cuGetProcAddress");
    if (self == NULL)
        return -1;
    resolver r = {.version = version, .flags = flags};
    if (version >= 12000)
        r.v2 = (PFN_cuGetProcAddress_v2)self;
    else
        r.v1 = (PFN_cuGetProcAddress)self;
    struct {
        void **slot;
        const char *name;
    } syms[] = {
        {(void **)&d->init, "cuInit"},
        {(void **)&d->driver_version, "cuDriverGetVersion"},
        {(void **)&d->error_name, "cuGetErrorName"},
        {(void **)&d->device_get, "cuDeviceGet"},
        {(void **)&d->device_name, "cuDeviceGetName"},
        {(void **)&d->device_uuid, "cuDeviceGetUuid"},
        {(void **)&d->ctx_retain, "cuDevicePrimaryCtxRetain"},
        {(void **)&d->ctx_set, "cuCtxSetCurrent"},
        {(void **)&d->ctx_sync, "cuCtxSynchronize"},
        {(void **)&d->mem_info, "cuMemGetInfo"},
        {(void **)&d->mem_alloc, "cuMemAlloc"},
        {(void **)&d->mem_free, "cuMemFree"},
        {(void **)&d->mem_alloc_async, "cuMemAllocAsync"},
        {(void **)&d->mem_free_async, "cuMemFreeAsync"},
        {(void **)&d->memcpy_htod, "cuMemcpyHtoD"},
        {(void **)&d->memcpy_dtoh, "cuMemcpyDtoH"},
        {(void **)&d->granularity, "cuMemGetAllocationGranularity"},
        {(void **)&d->mem_create, "cuMemCreate"},
        {(void **)&d->mem_release, "cuMemRelease"},
        {(void **)&d->addr_reserve, "cuMemAddressReserve"},
        {(void **)&d->addr_free, "cuMemAddressFree"},
        {(void **)&d->mem_map, "cuMemMap"},
        {(void **)&d->mem_unmap, "cuMemUnmap"},
        {(void **)&d->set_access, "cuMemSetAccess"},
        {(void **)&d->stream_create, "cuStreamCreate"},
        {(void **)&d->stream_sync, "cuStreamSynchronize"},
        {(void **)&d->module_load, "cuModuleLoadData"},
        {(void **)&d->module_function, "cuModuleGetFunction"},
        {(void **)&d->launch, "cuLaunchKernel"},
    };
    for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++)
        if ((*syms[i].slot = resolve(&r, syms[i].name)) == NULL)
            return -1;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Actions                                                                  */
/* ------------------------------------------------------------------------ */

static int track(probe *p, CUdeviceptr ptr, size_t size, alloc_kind kind,
                 CUmemGenericAllocationHandle handle)
{
    if (p->nallocs == MAX_ALLOCS)
        return -1;
    p->allocs[p->nallocs++] = (allocation){.ptr = ptr, .size = size, .kind = kind,
                                           .handle = handle};
    return 0;
}

static int do_info(probe *p)
{
    char name[256];
    CUuuid u;
    size_t free_b = 0, total = 0;
    int version = 0;
    CUresult r;
    if ((r = p->d.device_name(name, sizeof(name), p->device)) != CUDA_SUCCESS)
        return print_error(p, "info", "cuDeviceGetName", r), 1;
    if ((r = p->d.device_uuid(&u, p->device)) != CUDA_SUCCESS)
        return print_error(p, "info", "cuDeviceGetUuid", r), 1;
    if ((r = p->d.mem_info(&free_b, &total)) != CUDA_SUCCESS)
        return print_error(p, "info", "cuMemGetInfo", r), 1;
    if ((r = p->d.driver_version(&version)) != CUDA_SUCCESS)
        return print_error(p, "info", "cuDriverGetVersion", r), 1;
    const unsigned char *b = (const unsigned char *)u.bytes;
    printf("{\"action\":\"info\",\"device\":%d,\"name\":\"%s\",\"uuid\":\"GPU-%02x%02x%02x%02x-"
           "%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x\",\"total\":%zu,\"free\":%zu,"
           "\"driver_version\":%d}\n",
           p->device, name, b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10],
           b[11], b[12], b[13], b[14], b[15], total, free_b, version);
    return 0;
}

/* The GPUs NVML shows this process, loaded the way go-nvml and nvidia-smi load it. */
static int do_nvml(void)
{
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_GLOBAL);
    PFN_nvmlInit_v2 init = lib ? (PFN_nvmlInit_v2)dlsym(lib, "nvmlInit_v2") : NULL;
    PFN_nvmlDeviceGetCount_v2 count =
        lib ? (PFN_nvmlDeviceGetCount_v2)dlsym(lib, "nvmlDeviceGetCount_v2") : NULL;
    PFN_nvmlDeviceGetHandleByIndex_v2 handle =
        lib ? (PFN_nvmlDeviceGetHandleByIndex_v2)dlsym(lib, "nvmlDeviceGetHandleByIndex_v2") : NULL;
    PFN_nvmlDeviceGetUUID get_uuid =
        lib ? (PFN_nvmlDeviceGetUUID)dlsym(lib, "nvmlDeviceGetUUID") : NULL;
    unsigned int n = 0;

    if (init == NULL || count == NULL || handle == NULL || get_uuid == NULL) {
        printf("{\"action\":\"nvml\",\"error\":\"libnvidia-ml.so.1 not loadable\"}\n");
        return 1;
    }
    if (init() != NVML_SUCCESS || count(&n) != NVML_SUCCESS) {
        printf("{\"action\":\"nvml\",\"error\":\"NVML init or device count failed\"}\n");
        return 1;
    }
    printf("{\"action\":\"nvml\",\"count\":%u,\"uuids\":[", n);
    for (unsigned int i = 0; i < n; i++) {
        char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = "";
        nvmlDevice_t dev;
        if (handle(i, &dev) != NVML_SUCCESS || get_uuid(dev, uuid, sizeof(uuid)) != NVML_SUCCESS)
            uuid[0] = '\0';
        printf("%s\"%s\"", i ? "," : "", uuid);
    }
    printf("]}\n");
    return 0;
}

static int do_mem_info(probe *p)
{
    size_t free_b = 0, total = 0;
    CUresult r = p->d.mem_info(&free_b, &total);
    if (r != CUDA_SUCCESS)
        return print_error(p, "mem-info", "cuMemGetInfo", r), 1;
    printf("{\"action\":\"mem-info\",\"device\":%d,\"total\":%zu,\"free\":%zu}\n", p->device,
           total, free_b);
    return 0;
}

static int do_alloc(probe *p, uint64_t size, int async)
{
    const char *action = async ? "alloc-async" : "alloc";
    CUdeviceptr ptr = 0;
    CUresult r = async ? p->d.mem_alloc_async(&ptr, size, p->stream) : p->d.mem_alloc(&ptr, size);
    if (r != CUDA_SUCCESS)
        return print_error(p, action, async ? "cuMemAllocAsync" : "cuMemAlloc", r), 1;
    if (track(p, ptr, size, async ? ALLOC_ASYNC : ALLOC_SYNC, 0) != 0) {
        printf("{\"action\":\"%s\",\"error\":\"too many allocations\"}\n", action);
        return 1;
    }
    printf("{\"action\":\"%s\",\"size\":%llu,\"ptr\":\"0x%llx\"}\n", action,
           (unsigned long long)size, (unsigned long long)ptr);
    return 0;
}

static int do_alloc_until_oom(probe *p, uint64_t step)
{
    uint64_t allocated = 0;
    unsigned long count = 0;
    CUresult r;
    for (;;) {
        CUdeviceptr ptr = 0;
        r = p->d.mem_alloc(&ptr, step);
        if (r != CUDA_SUCCESS)
            break;
        if (track(p, ptr, step, ALLOC_SYNC, 0) != 0) {
            p->d.mem_free(ptr);
            printf("{\"action\":\"alloc-until-oom\",\"error\":\"too many allocations\"}\n");
            return 1;
        }
        allocated += step;
        count++;
    }
    printf("{\"action\":\"alloc-until-oom\",\"step\":%llu,\"allocated\":%llu,\"count\":%lu,"
           "\"code\":%d,\"error\":\"%s\"}\n",
           (unsigned long long)step, (unsigned long long)allocated, count, (int)r,
           err_name(p, r));
    return r == CUDA_ERROR_OUT_OF_MEMORY ? 0 : 1;
}

/* Maps size bytes (rounded up to the granularity) with cuMemCreate + cuMemMap. */
static int do_vmm(probe *p, uint64_t size)
{
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof(prop));
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = p->device;
    size_t gran = 0;
    CUmemGenericAllocationHandle h = 0;
    CUdeviceptr va = 0;
    CUresult r = p->d.granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
    if (r != CUDA_SUCCESS || gran == 0)
        return print_error(p, "vmm", "cuMemGetAllocationGranularity", r), 1;
    size = (size + gran - 1) / gran * gran;
    if ((r = p->d.mem_create(&h, size, &prop, 0)) != CUDA_SUCCESS)
        return print_error(p, "vmm", "cuMemCreate", r), 1;
    if ((r = p->d.addr_reserve(&va, size, 0, 0, 0)) != CUDA_SUCCESS) {
        p->d.mem_release(h);
        return print_error(p, "vmm", "cuMemAddressReserve", r), 1;
    }
    CUmemAccessDesc access = {.location = prop.location,
                              .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    const char *call = "cuMemMap";
    if ((r = p->d.mem_map(va, size, 0, h, 0)) == CUDA_SUCCESS) {
        call = "cuMemSetAccess";
        r = p->d.set_access(va, size, &access, 1);
        if (r != CUDA_SUCCESS)
            p->d.mem_unmap(va, size);
    }
    if (r == CUDA_SUCCESS && track(p, va, size, ALLOC_VMM, h) == 0) {
        printf("{\"action\":\"vmm\",\"size\":%llu,\"ptr\":\"0x%llx\"}\n",
               (unsigned long long)size, (unsigned long long)va);
        return 0;
    }
    if (r == CUDA_SUCCESS) {
        p->d.mem_unmap(va, size);
        call = "track";
    }
    p->d.addr_free(va, size);
    p->d.mem_release(h);
    return print_error(p, "vmm", call, r), 1;
}

static int do_free_all(probe *p)
{
    uint64_t freed = 0;
    CUresult r, first = CUDA_SUCCESS;
    for (size_t i = 0; i < p->nallocs; i++) {
        allocation *a = &p->allocs[i];
        switch (a->kind) {
        case ALLOC_SYNC: r = p->d.mem_free(a->ptr); break;
        case ALLOC_ASYNC: r = p->d.mem_free_async(a->ptr, p->stream); break;
        default:
            r = p->d.mem_unmap(a->ptr, a->size);
            if (r == CUDA_SUCCESS)
                r = p->d.addr_free(a->ptr, a->size);
            if (r == CUDA_SUCCESS)
                r = p->d.mem_release(a->handle);
        }
        if (r == CUDA_SUCCESS)
            freed += a->size;
        else if (first == CUDA_SUCCESS)
            first = r;
    }
    p->nallocs = 0;
    if (first != CUDA_SUCCESS)
        return print_error(p, "free-all", "free", first), 1;
    printf("{\"action\":\"free-all\",\"freed\":%llu}\n", (unsigned long long)freed);
    return 0;
}

static int do_sync(probe *p)
{
    CUresult r = p->d.ctx_sync();
    if (r != CUDA_SUCCESS)
        return print_error(p, "sync", "cuCtxSynchronize", r), 1;
    printf("{\"action\":\"sync\"}\n");
    return 0;
}

static int do_hold(unsigned long seconds)
{
    struct timespec ts = {.tv_sec = (time_t)seconds, .tv_nsec = 0};
    fflush(stdout);
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
    printf("{\"action\":\"hold\",\"seconds\":%lu}\n", seconds);
    return 0;
}

/*
 * Launches a kernel that keeps the GPU busy for kernel_ms each, one after
 * another, for the given wall time. The fake driver reads the busy time from
 * the kernel name ("_<N>us" suffix); a real driver ignores it.
 */
static int do_launch(probe *p, unsigned long seconds, unsigned long kernel_ms)
{
    static const char image[] = "cuda-probe fake module";
    char name[64];
    CUfunction fn;
    CUresult r;
    if (p->module == NULL && (r = p->d.module_load(&p->module, image)) != CUDA_SUCCESS)
        return print_error(p, "launch", "cuModuleLoadData", r), 1;
    snprintf(name, sizeof(name), "probe_busy_%luus", kernel_ms * 1000);
    if ((r = p->d.module_function(&fn, p->module, name)) != CUDA_SUCCESS)
        return print_error(p, "launch", "cuModuleGetFunction", r), 1;
    uint64_t start = now_ns(), until = start + (uint64_t)seconds * 1000000000ULL;
    unsigned long launches = 0;
    do {
        r = p->d.launch(fn, 1, 1, 1, 32, 1, 1, 0, p->stream, NULL, NULL);
        if (r != CUDA_SUCCESS)
            return print_error(p, "launch", "cuLaunchKernel", r), 1;
        launches++;
        if ((r = p->d.stream_sync(p->stream)) != CUDA_SUCCESS)
            return print_error(p, "launch", "cuStreamSynchronize", r), 1;
    } while (now_ns() < until);
    printf("{\"action\":\"launch\",\"seconds\":%lu,\"kernel_ms\":%lu,\"launches\":%lu,"
           "\"elapsed_ms\":%llu}\n",
           seconds, kernel_ms, launches, (unsigned long long)((now_ns() - start) / 1000000ULL));
    return 0;
}

static int do_memcpy(probe *p, uint64_t size)
{
    CUdeviceptr ptr = 0;
    unsigned char *buf = malloc(size ? size : 1);
    CUresult r;
    const char *call = "cuMemAlloc";
    if (buf == NULL) {
        printf("{\"action\":\"memcpy\",\"error\":\"host allocation failed\"}\n");
        return 1;
    }
    memset(buf, 0x5a, size);
    if ((r = p->d.mem_alloc(&ptr, size)) == CUDA_SUCCESS) {
        call = "cuMemcpyHtoD";
        if ((r = p->d.memcpy_htod(ptr, buf, size)) == CUDA_SUCCESS) {
            call = "cuMemcpyDtoH";
            r = p->d.memcpy_dtoh(buf, ptr, size);
        }
        CUresult fr = p->d.mem_free(ptr);
        if (r == CUDA_SUCCESS && fr != CUDA_SUCCESS) {
            r = fr;
            call = "cuMemFree";
        }
    }
    free(buf);
    if (r != CUDA_SUCCESS)
        return print_error(p, "memcpy", call, r), 1;
    printf("{\"action\":\"memcpy\",\"size\":%llu}\n", (unsigned long long)size);
    return 0;
}

/* Runs the action at argv[*i], advancing *i past its arguments. */
static int run_action(probe *p, int argc, char **argv, int *i)
{
    const char *a = argv[(*i)++];
    uint64_t size = 0;
    unsigned long n, m;
    int nargs = 0;
    if (strcmp(a, "alloc") == 0 || strcmp(a, "alloc-until-oom") == 0 ||
        strcmp(a, "alloc-async") == 0 || strcmp(a, "vmm") == 0 || strcmp(a, "memcpy") == 0 ||
        strcmp(a, "hold") == 0)
        nargs = 1;
    else if (strcmp(a, "launch") == 0)
        nargs = 2;
    if (argc - *i < nargs)
        return usage("missing argument");
    const char *x = nargs > 0 ? argv[*i] : NULL, *y = nargs > 1 ? argv[*i + 1] : NULL;
    *i += nargs;
    if (strcmp(a, "info") == 0)
        return do_info(p);
    if (strcmp(a, "mem-info") == 0)
        return do_mem_info(p);
    if (strcmp(a, "nvml") == 0)
        return do_nvml();
    if (strcmp(a, "free-all") == 0)
        return do_free_all(p);
    if (strcmp(a, "sync") == 0)
        return do_sync(p);
    if (strcmp(a, "hold") == 0)
        return parse_uint(x, 86400, &n) != 0 ? usage("bad SECONDS") : do_hold(n);
    if (strcmp(a, "launch") == 0) {
        if (parse_uint(x, 86400, &n) != 0 || parse_uint(y, 60000, &m) != 0 || m == 0)
            return usage("bad SECONDS or KERNEL_MS");
        return do_launch(p, n, m);
    }
    if (nargs == 1 && (parse_size(x, &size) != 0 || (size == 0 && strcmp(a, "memcpy") != 0)))
        return usage("bad SIZE");
    if (strcmp(a, "alloc") == 0)
        return do_alloc(p, size, 0);
    if (strcmp(a, "alloc-async") == 0)
        return do_alloc(p, size, 1);
    if (strcmp(a, "alloc-until-oom") == 0)
        return do_alloc_until_oom(p, size);
    if (strcmp(a, "vmm") == 0)
        return do_vmm(p, size);
    if (strcmp(a, "memcpy") == 0)
        return do_memcpy(p, size);
    return usage("unknown action");
}

static int setup(probe *p)
{
    CUresult r;
    CUdevice dev;
    CUcontext ctx;
    if ((r = p->d.init(0)) != CUDA_SUCCESS)
        return print_error(p, "init", "cuInit", r), 1;
    if ((r = p->d.device_get(&dev, p->device)) != CUDA_SUCCESS)
        return print_error(p, "init", "cuDeviceGet", r), 1;
    if ((r = p->d.ctx_retain(&ctx, dev)) != CUDA_SUCCESS)
        return print_error(p, "init", "cuDevicePrimaryCtxRetain", r), 1;
    if ((r = p->d.ctx_set(ctx)) != CUDA_SUCCESS)
        return print_error(p, "init", "cuCtxSetCurrent", r), 1;
    if ((r = p->d.stream_create(&p->stream, CU_STREAM_NON_BLOCKING)) != CUDA_SUCCESS)
        return print_error(p, "init", "cuStreamCreate", r), 1;
    return 0;
}

int main(int argc, char **argv)
{
    static probe p;
    unsigned long v;
    int version = 12090, i = 1, rc;
    cuuint64_t flags = 0;
    setvbuf(stdout, NULL, _IOLBF, 0);
    for (; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
        if (strcmp(argv[i], "--ptsz") == 0) {
            flags = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
        } else if (strcmp(argv[i], "--cuda-version") == 0 && i + 1 < argc &&
                   parse_uint(argv[i + 1], 99999, &v) == 0 && v >= 11030) {
            version = (int)v;
            i++;
        } else if (strcmp(argv[i], "--device") == 0 && i + 1 < argc &&
                   parse_uint(argv[i + 1], 1023, &v) == 0) {
            p.device = (int)v;
            i++;
        } else {
            return usage("usage: cuda-probe [--cuda-version N>=11030] [--ptsz] [--device N] "
                         "ACTION...");
        }
    }
    if (i == argc)
        return usage("no action given");
    p.allocs = calloc(MAX_ALLOCS, sizeof(*p.allocs));
    if (p.allocs == NULL)
        return usage("out of host memory");
    rc = load_driver(&p.d, version, flags) != 0 ? 1 : setup(&p);
    while (rc == 0 && i < argc)
        rc = run_action(&p, argc, argv, &i);
    free(p.allocs);
    return rc;
}
