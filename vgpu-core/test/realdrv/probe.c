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
 * probe.c - build/realdrv-probe NAMES [CUDART]: what NVIDIA's real userspace
 * driver libraries (libcuda.so.1, libnvidia-ml.so.1, found on the library
 * path) answer on a machine without a GPU, printed line by line on stdout.
 * test/realdrv/run.sh runs it with and without libvgpu.so preloaded and
 * compares the two outputs, which must be identical.
 *
 * NAMES is a file of entry point names, one a line ('#' starts a comment).
 * For each name the probe prints whether dlsym / dlvsym find it (RTLD_DEFAULT
 * and RTLD_NEXT before libcuda is loaded, after it is opened RTLD_LOCAL, and
 * through its handle) and what cuGetProcAddress and cuGetProcAddress_v2
 * answer for it at several CUDA versions and flags: return code,
 * symbolStatus and whether the pointer is NULL, never a pointer's value (it
 * differs between runs), and dlerror's text after a lookup that fails.
 * Then the return code of every CUDA entry point libvgpu.so wraps, before
 * and after cuInit, cuInit itself, cuDriverGetVersion, the error names and
 * strings, NVML's init and shutdown calls, error strings and device queries
 * before and after init, lookups once the driver is promoted to RTLD_GLOBAL
 * and, when CUDART names NVIDIA's CUDA runtime, the runtime's view on top of
 * the driver. "--unload [--calls]" instead only tells whether dlclose unloads
 * each library (after a few calls with --calls), in a process of its own.
 * Nothing in here needs a GPU; without one cuInit answers 100 and
 * nvmlInit_v2 9.
 */
#include <dlfcn.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int (*cu_init_fn)(unsigned int);
typedef int (*cu_version_fn)(int *);
typedef int (*cu_error_fn)(int, const char **);
typedef int (*cu_proc_fn)(const char *, void **, int, uint64_t);
typedef int (*cu_proc_v2_fn)(const char *, void **, int, uint64_t, int *);
typedef int (*nvml_void_fn)(void);
typedef int (*nvml_flags_fn)(unsigned int);
typedef const char *(*nvml_error_fn)(int);
typedef int (*nvml_version_fn)(char *, unsigned int);
typedef int (*nvml_count_fn)(unsigned int *);
typedef int (*nvml_index_fn)(unsigned int, void **);
typedef int (*nvml_dev_buf_fn)(void *, void *);
typedef int (*nvml_procs_fn)(void *, unsigned int *, void *);
typedef int (*nvml_util_fn)(void *, void *, unsigned int *, unsigned long long);
typedef int (*rt_count_fn)(int *);
typedef const char *(*rt_error_fn)(int);

/* The versions and flags the CUDA 12 runtime passes (CU_GET_PROC_ADDRESS_*). */
static const int versions[] = {1000, 3020, 11030, 12000, 12040, 12080};
static const uint64_t flags[] = {0, 1, 2};

static char **names;
static size_t n_names;

/* "ptr" or "NULL": a pointer's value differs between runs, its presence must not. */
static const char *np(const void *p)
{
    return p != NULL ? "ptr" : "NULL";
}

/* Reads NAMES into names[]; exits 2 when it cannot. */
static void read_names(const char *path)
{
    char line[256];
    size_t cap = 0;
    FILE *f = fopen(path, "r");

    if (f == NULL) {
        perror(path);
        exit(2);
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        line[strcspn(line, " \t\r\n#")] = '\0';
        if (line[0] == '\0')
            continue;
        if (n_names == cap) {
            cap = cap ? cap * 2 : 256;
            names = realloc(names, cap * sizeof(*names));
            if (names == NULL)
                exit(2);
        }
        names[n_names++] = strdup(line);
    }
    fclose(f);
}

/* " " and dlerror's text after a lookup that gave NULL, "" after one that found its name. */
static const char *error_text(const void *p)
{
    static char buf[512];
    const char *e = dlerror();

    if (p != NULL || e == NULL)
        return "";
    snprintf(buf, sizeof(buf), " %s", e);
    return buf;
}

/* dlsym/dlvsym of every name through handle h, one line each, with dlerror's text. */
static void lookups(const char *stage, const char *what, void *h)
{
    for (size_t i = 0; i < n_names; i++) {
        void *p;

        dlerror();
        p = dlsym(h, names[i]);
        printf("%s dlsym(%s, %s) %s%s\n", stage, what, names[i], np(p), error_text(p));
        p = dlvsym(h, names[i], "VGPU_PROBE_1");
        printf("%s dlvsym(%s, %s, VGPU_PROBE_1) %s%s\n", stage, what, names[i], np(p), error_text(p));
    }
}

/*
 * cuGetProcAddress and _v2 for every name x version x flag, each line
 * prefixed with stage (the runtime does its lookups before cuInit, and more
 * after it).
 */
static void proc_lookups(void *cuda, const char *stage)
{
    cu_proc_fn get = (cu_proc_fn)dlsym(cuda, "cuGetProcAddress");
    cu_proc_v2_fn get2 = (cu_proc_v2_fn)dlsym(cuda, "cuGetProcAddress_v2");

    printf("%s cuGetProcAddress %s cuGetProcAddress_v2 %s\n", stage, np((void *)get),
           np((void *)get2));
    for (size_t i = 0; i < n_names; i++) {
        for (size_t v = 0; v < sizeof(versions) / sizeof(versions[0]); v++) {
            for (size_t f = 0; f < sizeof(flags) / sizeof(flags[0]); f++) {
                void *p = NULL;
                int rc, status = -1;

                if (get != NULL) {
                    rc = get(names[i], &p, versions[v], flags[f]);
                    printf("%s cuGetProcAddress(%s, %d, %llu) %d %s\n", stage, names[i], versions[v],
                           (unsigned long long)flags[f], rc, np(p));
                }
                if (get2 != NULL) {
                    p = NULL;
                    rc = get2(names[i], &p, versions[v], flags[f], &status);
                    printf("%s cuGetProcAddress_v2(%s, %d, %llu) %d status %d %s\n", stage, names[i],
                           versions[v], (unsigned long long)flags[f], rc, status, np(p));
                }
            }
        }
    }
    if (get2 != NULL) { /* a NULL symbolStatus (a NULL name or pfn crashes the driver) */
        void *p = NULL;
        printf("%s cuGetProcAddress_v2(cuInit, 12040, 0, NULL status) %d\n", stage,
               get2("cuInit", &p, 12040, 0, NULL));
    }
}

/* Looks name up in the driver's handle h (with libvgpu.so: its wrapper). */
#define SYM(h, type, name) ((type)dlsym((h), (name)))
/* Prints "stage name rc", or "stage name absent" where h lacks the name. */
#define CALL(stage, h, name, type, ...)                                                   \
    do {                                                                                  \
        __typeof__(type) fn_ = SYM(h, type, name);                                        \
        if (fn_ == NULL)                                                                  \
            printf("%s %s absent\n", (stage), (name));                                    \
        else                                                                              \
            printf("%s %s %d\n", (stage), (name), fn_(__VA_ARGS__));                       \
    } while (0)

typedef unsigned long long devptr;

/*
 * Every CUDA entry point libvgpu.so wraps, called with valid out-arguments
 * and zero or small sizes, each line prefixed with stage. Without a GPU the
 * driver refuses them all; the library must refuse them the same way.
 */
static void wrapped_calls(void *h, const char *stage)
{
    devptr d = 0;
    unsigned int d32 = 0, u32 = 0;
    size_t pitch = 0, a = 0, b = 0;
    void *obj = NULL;
    unsigned long long mh = 0;
    unsigned char props[256] = {0};

    CALL(stage, h, "cuMemAlloc_v2", int (*)(devptr *, size_t), &d, 1 << 20);
    CALL(stage, h, "cuMemAlloc", int (*)(unsigned int *, unsigned int), &d32, 1 << 20);
    CALL(stage, h, "cuMemAllocPitch_v2", int (*)(devptr *, size_t *, size_t, size_t, unsigned int),
         &d, &pitch, 256, 256, 4);
    CALL(stage, h, "cuMemAllocManaged", int (*)(devptr *, size_t, unsigned int), &d, 1 << 20, 1);
    CALL(stage, h, "cuMemFree_v2", int (*)(devptr), 0);
    CALL(stage, h, "cuMemGetInfo_v2", int (*)(size_t *, size_t *), &a, &b);
    CALL(stage, h, "cuDeviceTotalMem_v2", int (*)(size_t *, int), &a, 0);
    CALL(stage, h, "cuDevicePrimaryCtxRetain", int (*)(void **, int), &obj, 0);
    CALL(stage, h, "cuCtxCreate_v2", int (*)(void **, unsigned int, int), &obj, 0, 0);
    CALL(stage, h, "cuCtxSetLimit", int (*)(int, size_t), 0, 1024);
    CALL(stage, h, "cuCtxSynchronize", int (*)(void));
    CALL(stage, h, "cuStreamSynchronize", int (*)(void *), NULL);
    CALL(stage, h, "cuMemAllocAsync", int (*)(devptr *, size_t, void *), &d, 1 << 20, NULL);
    CALL(stage, h, "cuMemFreeAsync", int (*)(devptr, void *), 0, NULL);
    CALL(stage, h, "cuMemPoolCreate", int (*)(void **, const void *), &obj, props);
    CALL(stage, h, "cuMemPoolTrimTo", int (*)(void *, size_t), NULL, 0);
    CALL(stage, h, "cuMemCreate", int (*)(unsigned long long *, size_t, const void *, unsigned long long),
         &mh, 2 << 20, props, 0);
    CALL(stage, h, "cuMemRetainAllocationHandle", int (*)(unsigned long long *, void *), &mh, props);
    CALL(stage, h, "cuMemRelease", int (*)(unsigned long long), 0);
    CALL(stage, h, "cuMemMap", int (*)(devptr, size_t, size_t, unsigned long long, unsigned long long),
         0, 2 << 20, 0, 0, 0);
    CALL(stage, h, "cuMemUnmap", int (*)(devptr, size_t), 0, 2 << 20);
    CALL(stage, h, "cuArrayCreate_v2", int (*)(void **, const void *), &obj, props);
    CALL(stage, h, "cuArray3DCreate_v2", int (*)(void **, const void *), &obj, props);
    CALL(stage, h, "cuArrayDestroy", int (*)(void *), NULL);
    CALL(stage, h, "cuMipmappedArrayCreate", int (*)(void **, const void *, unsigned int), &obj, props, 1);
    CALL(stage, h, "cuMipmappedArrayDestroy", int (*)(void *), NULL);
    CALL(stage, h, "cuMemAllocFromPoolAsync", int (*)(devptr *, size_t, void *, void *), &d, 1 << 20,
         NULL, NULL);
    CALL(stage, h, "cuMemPoolDestroy", int (*)(void *), NULL);
    CALL(stage, h, "cuGraphInstantiateWithFlags", int (*)(void **, void *, unsigned long long), &obj,
         NULL, 0);
    CALL(stage, h, "cuGraphUpload", int (*)(void *, void *), NULL, NULL);
    CALL(stage, h, "cuGraphLaunch", int (*)(void *, void *), NULL, NULL);
    CALL(stage, h, "cuGraphExecDestroy", int (*)(void *), NULL);
    CALL(stage, h, "cuDeviceGraphMemTrim", int (*)(int), 0);
    CALL(stage, h, "cuMemGetInfo", int (*)(unsigned int *, unsigned int *), &d32, &u32);
    CALL(stage, h, "cuDeviceTotalMem", int (*)(unsigned int *, int), &d32, 0);
    CALL(stage, h, "cuMemFree", int (*)(unsigned int), 0);
    CALL(stage, h, "cuLaunchKernel",
         int (*)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *,
                 void **, void **),
         NULL, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL);
    /* An OPAQUE_FD descriptor of 2 MiB on fd -1 (type at 0, fd at 8, size at 24). */
    memset(props, 0, sizeof(props));
    props[0] = 1;
    memset(props + 8, 0xff, 4);
    props[24 + 2] = 0x20;
    CALL(stage, h, "cuImportExternalMemory", int (*)(void **, const void *), &obj, props);
    CALL(stage, h, "cuDestroyExternalMemory", int (*)(void *), NULL);
    /* Green contexts (CUDA 12.4+: absent from older drivers, with the library too). */
    CALL(stage, h, "cuGreenCtxCreate", int (*)(void **, void *, int, unsigned int), &obj, NULL, 0,
         1);
    CALL(stage, h, "cuGreenCtxDestroy", int (*)(void *), NULL);
    CALL(stage, h, "cuLaunchCooperativeKernel",
         int (*)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *,
                 void **),
         NULL, 1, 1, 1, 1, 1, 1, 0, NULL, NULL);
}

/* cuInit (three times), cuDriverGetVersion, the name and string of every error code. */
static void cuda_calls(void *cuda)
{
    cu_init_fn init = (cu_init_fn)dlsym(cuda, "cuInit");
    cu_version_fn version = (cu_version_fn)dlsym(cuda, "cuDriverGetVersion");
    cu_error_fn name = (cu_error_fn)dlsym(cuda, "cuGetErrorName");
    cu_error_fn string = (cu_error_fn)dlsym(cuda, "cuGetErrorString");
    int v = -1, rc;

    if (init == NULL || version == NULL || name == NULL || string == NULL) {
        printf("libcuda lacks cuInit/cuDriverGetVersion/cuGetErrorName/cuGetErrorString\n");
        return;
    }
    rc = version(&v);
    printf("cuDriverGetVersion before cuInit %d %d\n", rc, v);
    printf("cuInit(0) %d\n", init(0));
    printf("cuInit(0) again %d\n", init(0));
    printf("cuInit(1) %d\n", init(1));
    v = -1;
    rc = version(&v);
    printf("cuDriverGetVersion %d %d\n", rc, v);
    printf("cuDriverGetVersion(NULL) %d\n", version(NULL));
    for (int code = 0; code <= 1000; code++) {
        const char *n = NULL, *s = NULL;
        int rn = name(code, &n), rs = string(code, &s);

        if (rn == 0 || rs == 0)
            printf("error %d: name %d %s, string %d %s\n", code, rn, n ? n : "(null)", rs,
                   s ? s : "(null)");
    }
}

/*
 * NVML device queries with NULL handles and NULL or valid out-arguments
 * (every NVML call libvgpu.so wraps, and the count and handle lookups),
 * each line prefixed with stage.
 */
static void nvml_device_calls(void *nvml, const char *stage)
{
    unsigned char buf[4096];
    unsigned int count;
    void *dev = NULL;
    int rc;
    nvml_count_fn count_v2 = (nvml_count_fn)dlsym(nvml, "nvmlDeviceGetCount_v2");
    nvml_index_fn by_index = (nvml_index_fn)dlsym(nvml, "nvmlDeviceGetHandleByIndex_v2");
    nvml_util_fn util = (nvml_util_fn)dlsym(nvml, "nvmlDeviceGetProcessUtilization");
    static const char *const buf_calls[] = {
        "nvmlDeviceGetMemoryInfo", "nvmlDeviceGetMemoryInfo_v2", "nvmlDeviceGetUtilizationRates",
    };
    static const char *const proc_calls[] = {
        "nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetComputeRunningProcesses_v2",
        "nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetGraphicsRunningProcesses",
        "nvmlDeviceGetGraphicsRunningProcesses_v2", "nvmlDeviceGetGraphicsRunningProcesses_v3",
    };

    if (count_v2 != NULL) {
        count = 77;
        printf("%s nvmlDeviceGetCount_v2(NULL) %d\n", stage, count_v2(NULL));
        rc = count_v2(&count);
        printf("%s nvmlDeviceGetCount_v2 %d %u\n", stage, rc, count);
    }
    if (by_index != NULL) {
        rc = by_index(0, &dev);
        printf("%s nvmlDeviceGetHandleByIndex_v2(0) %d %s\n", stage, rc, np(dev));
        printf("%s nvmlDeviceGetHandleByIndex_v2(0, NULL) %d\n", stage, by_index(0, NULL));
    }
    if (util != NULL) {
        count = 0;
        printf("%s nvmlDeviceGetProcessUtilization(NULL, NULL, NULL, 0) %d\n", stage,
               util(NULL, NULL, NULL, 0));
        rc = util(NULL, NULL, &count, 0);
        printf("%s nvmlDeviceGetProcessUtilization(NULL, NULL, &0, 0) %d %u\n", stage, rc, count);
        count = 4;
        rc = util(NULL, buf, &count, 0);
        printf("%s nvmlDeviceGetProcessUtilization(NULL, buf, &4, 0) %d %u\n", stage, rc, count);
    }
    for (size_t i = 0; i < sizeof(buf_calls) / sizeof(buf_calls[0]); i++) {
        nvml_dev_buf_fn fn = (nvml_dev_buf_fn)dlsym(nvml, buf_calls[i]);

        if (fn == NULL)
            continue;
        memset(buf, 0, sizeof(buf));
        printf("%s %s(NULL, NULL) %d\n", stage, buf_calls[i], fn(NULL, NULL));
        printf("%s %s(NULL, buf) %d\n", stage, buf_calls[i], fn(NULL, buf));
    }
    for (size_t i = 0; i < sizeof(proc_calls) / sizeof(proc_calls[0]); i++) {
        nvml_procs_fn fn = (nvml_procs_fn)dlsym(nvml, proc_calls[i]);

        if (fn == NULL)
            continue;
        count = 0;
        printf("%s %s(NULL, NULL, NULL) %d\n", stage, proc_calls[i], fn(NULL, NULL, NULL));
        rc = fn(NULL, &count, NULL);
        printf("%s %s(NULL, &0, NULL) %d %u\n", stage, proc_calls[i], rc, count);
        count = 4;
        rc = fn(NULL, &count, buf);
        printf("%s %s(NULL, &4, buf) %d %u\n", stage, proc_calls[i], rc, count);
    }
}

/* NVML error strings, device queries before and after nvmlInit_v2, the init and shutdown calls. */
static void nvml_calls(void *nvml)
{
    nvml_void_fn init_v2 = (nvml_void_fn)dlsym(nvml, "nvmlInit_v2");
    nvml_void_fn init = (nvml_void_fn)dlsym(nvml, "nvmlInit");
    nvml_flags_fn init_flags = (nvml_flags_fn)dlsym(nvml, "nvmlInitWithFlags");
    nvml_void_fn shutdown = (nvml_void_fn)dlsym(nvml, "nvmlShutdown");
    nvml_error_fn error = (nvml_error_fn)dlsym(nvml, "nvmlErrorString");
    nvml_version_fn version = (nvml_version_fn)dlsym(nvml, "nvmlSystemGetDriverVersion");
    char buf[96];
    int rc;

    if (error != NULL)
        for (int code = -1; code <= 1000; code++) {
            const char *s = error(code);

            printf("nvmlErrorString(%d) %s\n", code, s ? s : "(null)");
        }
    nvml_device_calls(nvml, "before init:");
    if (version != NULL) {
        strcpy(buf, "unset");
        rc = version(buf, sizeof(buf));
        printf("nvmlSystemGetDriverVersion before init %d %s\n", rc, buf);
    }
    if (shutdown != NULL)
        printf("nvmlShutdown before init %d\n", shutdown());
    if (init_v2 != NULL)
        printf("nvmlInit_v2 %d\n", init_v2());
    nvml_device_calls(nvml, "after nvmlInit_v2:");
    if (version != NULL) {
        strcpy(buf, "unset");
        rc = version(buf, sizeof(buf));
        printf("nvmlSystemGetDriverVersion %d %s\n", rc, buf);
        printf("nvmlSystemGetDriverVersion(NULL) %d\n", version(NULL, 80));
    }
    if (init != NULL)
        printf("nvmlInit %d\n", init());
    if (init_flags != NULL) {
        printf("nvmlInitWithFlags(0) %d\n", init_flags(0));
        printf("nvmlInitWithFlags(1) %d\n", init_flags(1));
    }
    if (shutdown != NULL)
        printf("nvmlShutdown %d\n", shutdown());
}

/*
 * Whether dlclose unloads a library that only this probe opened: with calls
 * set, after its init call and one call that libvgpu.so wraps (cuInit and
 * cuMemGetInfo_v2, or nvmlInit_v2 and nvmlDeviceGetMemoryInfo).
 */
static void unload(const char *soname, int calls)
{
    int cuda = strncmp(soname, "libcuda", 7) == 0;
    void *h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);

    if (h == NULL) {
        printf("dlopen(%s) NULL\n", soname);
        return;
    }
    if (calls && cuda) {
        cu_init_fn init = (cu_init_fn)dlsym(h, "cuInit");
        int (*info)(size_t *, size_t *) = (int (*)(size_t *, size_t *))dlsym(h, "cuMemGetInfo_v2");
        size_t free_b = 0, total_b = 0;

        printf("cuInit %d\n", init != NULL ? init(0) : -1);
        printf("cuMemGetInfo_v2 %d\n", info != NULL ? info(&free_b, &total_b) : -1);
    } else if (calls) {
        nvml_void_fn init = (nvml_void_fn)dlsym(h, "nvmlInit_v2");
        nvml_dev_buf_fn info = (nvml_dev_buf_fn)dlsym(h, "nvmlDeviceGetMemoryInfo");
        unsigned char buf[64];

        printf("nvmlInit_v2 %d\n", init != NULL ? init() : -1);
        printf("nvmlDeviceGetMemoryInfo(NULL) %d\n", info != NULL ? info(NULL, buf) : -1);
    }
    printf("dlclose(%s) %d\n", soname, dlclose(h));
    h = dlopen(soname, RTLD_NOW | RTLD_NOLOAD);
    printf("%s still loaded after dlclose: %s\n", soname, h != NULL ? "yes" : "no");
    if (h != NULL)
        dlclose(h);
}

/* NVIDIA's CUDA runtime at path on top of the driver: its version and device count. */
static void cudart_calls(const char *path)
{
    void *rt = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    rt_count_fn count, version;
    rt_error_fn error, name;
    int n = -1, v = -1, rc;

    if (rt == NULL) {
        printf("cudart: dlopen failed\n");
        return;
    }
    count = (rt_count_fn)dlsym(rt, "cudaGetDeviceCount");
    version = (rt_count_fn)dlsym(rt, "cudaDriverGetVersion");
    error = (rt_error_fn)dlsym(rt, "cudaGetErrorString");
    name = (rt_error_fn)dlsym(rt, "cudaGetErrorName");
    if (count == NULL || version == NULL || error == NULL || name == NULL) {
        printf("cudart: missing entry points\n");
        return;
    }
    rc = version(&v);
    printf("cudaDriverGetVersion %d %d %s\n", rc, v, error(rc));
    rc = count(&n);
    printf("cudaGetDeviceCount %d %d %s %s\n", rc, n, name(rc), error(rc));
    rc = count(&n);
    printf("cudaGetDeviceCount again %d %d %s\n", rc, n, error(rc));
    rc = version(&v);
    printf("cudaDriverGetVersion after %d %d\n", rc, v);
}

/* dl_iterate_phdr callback: counts loaded objects named libvgpu.so. */
static int find_vgpu(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    if (info->dlpi_name != NULL && strstr(info->dlpi_name, "libvgpu.so") != NULL)
        ++*(int *)data;
    return 0;
}

int main(int argc, char **argv)
{
    int vgpu = 0;
    void *cuda, *nvml;

    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: %s NAMES [LIBCUDART] | %s --unload [--calls]\n", argv[0], argv[0]);
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0); /* a crash still shows its last line */
    /* On stderr (not compared): run.sh checks the preload took effect. */
    dl_iterate_phdr(find_vgpu, &vgpu);
    fprintf(stderr, "probe: libvgpu.so loaded: %s\n", vgpu ? "yes" : "no");
    if (strcmp(argv[1], "--unload") == 0) {
        int calls = argc == 3 && strcmp(argv[2], "--calls") == 0;

        unload("libnvidia-ml.so.1", calls);
        unload("libcuda.so.1", calls);
        fflush(stdout);
        return 0;
    }
    read_names(argv[1]);
    printf("%zu names\n", n_names);

    lookups("before load:", "RTLD_DEFAULT", RTLD_DEFAULT);
    lookups("before load:", "RTLD_NEXT", RTLD_NEXT);

    cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    printf("dlopen(libcuda.so.1) %s dlopen(libnvidia-ml.so.1) %s\n", np(cuda), np(nvml));
    if (cuda == NULL || nvml == NULL) {
        fflush(stdout);
        fprintf(stderr, "%s: %s\n", argv[0], dlerror());
        return 3;
    }
    lookups("RTLD_LOCAL:", "RTLD_DEFAULT", RTLD_DEFAULT);
    lookups("RTLD_LOCAL:", "RTLD_NEXT", RTLD_NEXT);
    lookups("RTLD_LOCAL:", "libcuda", cuda);
    lookups("RTLD_LOCAL:", "libnvidia-ml", nvml);

    proc_lookups(cuda, "before cuInit:");
    wrapped_calls(cuda, "before cuInit:");
    cuda_calls(cuda);
    proc_lookups(cuda, "after cuInit:");
    wrapped_calls(cuda, "after cuInit:");
    nvml_calls(nvml);

    /* Promoted to RTLD_GLOBAL: the default scope now sees the drivers. */
    if (dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD) == NULL ||
        dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD) == NULL)
        printf("RTLD_GLOBAL promotion failed\n");
    lookups("RTLD_GLOBAL:", "RTLD_DEFAULT", RTLD_DEFAULT);
    if (argc == 3)
        cudart_calls(argv[2]);
    fflush(stdout);
    return 0;
}
