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
 * dlclose_test.c - the application's last dlclose of libnvidia-ml or
 * libcuda unloads it with libvgpu.so as without it (the library keeps no
 * reference to a copy the application loaded and it does not use for
 * itself), and a copy loaded again later is used afresh, limits included.
 *
 * Run without arguments it is the driver: it runs "probe" without the
 * library, preloaded, and preloaded with an environment limit of 1 GiB, and
 * checks the probe's lines. Env: VGPU_TEST_LIB, VGPU_TEST_FAKE_DIR.
 */
#include <dlfcn.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "probe_run.h"
#include "vgpu_cuda.h"
#include "vgpu_nvml.h"

#define MiB (1024ull * 1024ull)
#define GiB (1024ull * MiB)

#define SYM(h, name) ((PFN_##name)dlsym((h), #name))

typedef nvmlReturn_t (*PFN_nvml_void)(void);
typedef nvmlReturn_t (*PFN_nvml_by_index)(unsigned int, nvmlDevice_t *);

static const char *loaded(const char *soname)
{
    void *h = dlopen(soname, RTLD_LAZY | RTLD_NOLOAD);

    if (h == NULL)
        return "unloaded";
    dlclose(h);
    return "loaded";
}

static void nvml_round(const char *dir)
{
    char path[4096];
    nvmlDevice_t dev;
    nvmlMemory_t mem;
    void *h;

    snprintf(path, sizeof(path), "%s/libnvidia-ml.so.1", dir);
    h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        printf("nvml open failed\n");
        return;
    }
    printf("nvml init = %d\n", (int)((PFN_nvml_void)dlsym(h, "nvmlInit_v2"))());
    printf("nvml handle = %d\n",
           (int)((PFN_nvml_by_index)dlsym(h, "nvmlDeviceGetHandleByIndex_v2"))(0, &dev));
    printf("nvml memory = %d\n", (int)SYM(h, nvmlDeviceGetMemoryInfo)(dev, &mem));
    printf("nvml shutdown = %d\n", (int)((PFN_nvml_void)dlsym(h, "nvmlShutdown"))());
    dlclose(h);
    printf("nvml after dlclose: %s\n", loaded("libnvidia-ml.so.1"));
}

/* The address range a loaded object spans (its PT_LOAD segments). */
struct extent {
    const char *path;
    uintptr_t start, end;
};

static int find_extent(struct dl_phdr_info *info, size_t size, void *arg)
{
    struct extent *e = arg;

    (void)size;
    if (info->dlpi_name == NULL || strcmp(info->dlpi_name, e->path) != 0)
        return 0;
    e->start = UINTPTR_MAX;
    e->end = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t a = info->dlpi_addr + ph->p_vaddr, b = a + ph->p_memsz;

        if (ph->p_type != PT_LOAD)
            continue;
        e->start = a < e->start ? a : e->start;
        e->end = b > e->end ? b : e->end;
    }
    return 1;
}

static uintptr_t base_of(void *fn)
{
    Dl_info info;

    return fn != NULL && dladdr(fn, &info) != 0 ? (uintptr_t)info.dli_fbase : 0;
}

static uintptr_t first_base;

static void cuda_round(const char *dir, const char *tag)
{
    struct extent ext = {0};
    char path[4096];
    CUcontext ctx;
    CUdeviceptr p = 0;
    size_t f = 0, t = 0;
    void *h;

    snprintf(path, sizeof(path), "%s/libcuda.so.1", dir);
    h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        printf("%s open failed\n", tag);
        return;
    }
    ext.path = path;
    dl_iterate_phdr(find_extent, &ext);
    /* Where the driver's code lies: a name libvgpu.so does not wrap. */
    if (first_base == 0)
        first_base = base_of(dlsym(h, "cuDriverGetVersion"));
    else
        printf("%s moved: %s\n", tag, base_of(dlsym(h, "cuDriverGetVersion")) != first_base ? "yes" : "no");
    printf("%s init = %d\n", tag, (int)SYM(h, cuInit)(0));
    printf("%s retain = %d\n", tag, (int)SYM(h, cuDevicePrimaryCtxRetain)(&ctx, 0));
    printf("%s current = %d\n", tag, (int)SYM(h, cuCtxSetCurrent)(ctx));
    printf("%s alloc 2GiB = %d\n", tag, (int)SYM(h, cuMemAlloc_v2)(&p, 2 * GiB));
    if (p != 0)
        SYM(h, cuMemFree_v2)(p);
    p = 0;
    printf("%s alloc 512MiB = %d\n", tag, (int)SYM(h, cuMemAlloc_v2)(&p, 512 * MiB));
    printf("%s info = %d\n", tag, (int)SYM(h, cuMemGetInfo_v2)(&f, &t));
    printf("%s free = %d\n", tag, (int)SYM(h, cuMemFree_v2)(p));
    printf("%s release = %d\n", tag, (int)SYM(h, cuDevicePrimaryCtxRelease_v2)(0));
    dlclose(h);
    printf("%s after dlclose: %s\n", tag, loaded("libcuda.so.1"));
    /* Keep the range it used: a copy loaded again lands elsewhere, at new addresses. */
    if (ext.end > ext.start)
        mmap((void *)(ext.start & ~(uintptr_t)4095), ext.end - (ext.start & ~(uintptr_t)4095),
             PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
}

static int probe(const char *dir)
{
    nvml_round(dir);
    nvml_round(dir);
    cuda_round(dir, "cuda");
    /* Loaded again: the wrappers use the new copy, and the limit holds. */
    cuda_round(dir, "cuda again");
    fflush(stdout);
    return 0;
}

static void expect(const char *what, const char *out, const char *line)
{
    char want[256];

    snprintf(want, sizeof(want), "%s\n", line);
    if (strstr(out, want) == NULL)
        fprintf(stderr, "%s: missing \"%s\" in:\n%s", what, line, out);
    CHECK(strstr(out, want) != NULL);
}

int main(int argc, char **argv)
{
    static char out[1 << 16];
    const char *lib = getenv("VGPU_TEST_LIB");
    static const char *const envs[] = {NULL, "CUDA_DEVICE_MEMORY_LIMIT=1g"};

    if (argc == 3 && strcmp(argv[1], "probe") == 0)
        return probe(argv[2]);
    if (lib == NULL || getenv("VGPU_TEST_FAKE_DIR") == NULL) {
        fprintf(stderr, "dlclose_test: set VGPU_TEST_LIB and VGPU_TEST_FAKE_DIR\n");
        return 2;
    }
    const char *const args[] = {"probe", getenv("VGPU_TEST_FAKE_DIR"), NULL};
    /* The fakes unload on their last dlclose, like NVIDIA's. */
    CHECK_EQ(vgpu_test_run_self(args, NULL, NULL, out, sizeof(out)), 0);
    expect("without libvgpu.so", out, "nvml after dlclose: unloaded");
    expect("without libvgpu.so", out, "cuda after dlclose: unloaded");
    for (int e = 0; e < 2; e++) {
        const char *what = envs[e] == NULL ? "preloaded" : "preloaded, 1 GiB limit";

        CHECK_EQ(vgpu_test_run_self(args, lib, envs[e], out, sizeof(out)), 0);
        expect(what, out, "nvml memory = 0");
        expect(what, out, "nvml after dlclose: unloaded");
        expect(what, out, "cuda after dlclose: unloaded");
        expect(what, out, "cuda again moved: yes");
        expect(what, out, "cuda again info = 0");
        expect(what, out, "cuda again after dlclose: unloaded");
        expect(what, out, "cuda again alloc 512MiB = 0");
        expect(what, out, "cuda again free = 0");
        expect(what, out, envs[e] == NULL ? "cuda again alloc 2GiB = 0" : "cuda again alloc 2GiB = 2");
        expect(what, out, envs[e] == NULL ? "cuda alloc 2GiB = 0" : "cuda alloc 2GiB = 2");
    }
    return check_report("dlclose_test");
}
