/* driver.c - see driver.h. */
#include "driver.h"

#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "log.h"

struct vgpu_cuda_real vgpu_cu;
struct vgpu_nvml_real vgpu_nvml;
void *(*vgpu_real_dlsym)(void *handle, const char *name);

static pthread_once_t dlsym_once = PTHREAD_ONCE_INIT;

/*
 * One driver library. Only success is remembered: an application may load
 * the driver (by full path, from any directory) after it first reached us,
 * so a library not found is looked for again on every later call until it
 * is (docs/security.md explains why failure is never cached).
 */
struct driver_lib {
    const char *soname;
    const char *prefix; /* file names of its copies: libcuda.so.1, libcuda.so.580.95.05 ... */
    void (*resolve)(void *h);
    int loaded;    /* atomic; 1 once the table is filled */
    bool searched; /* the soname was searched for on the library path (once: it cannot change) */
};

/* Recursive: the driver's own initialisation, run by our dlopen, may reach our dlsym. */
static pthread_mutex_t load_mu = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;

VGPU_NO_SANITIZE static void bootstrap(void)
{
    /* dlsym moved into libc at 2.34; older glibc has only the base versions. */
    static const char *const versions[] = {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17"};

    for (size_t i = 0; i < sizeof(versions) / sizeof(versions[0]); i++) {
        void *p = dlvsym(RTLD_NEXT, "dlsym", versions[i]);
        if (p != NULL) {
            *(void **)&vgpu_real_dlsym = p;
            return;
        }
    }
}

VGPU_NO_SANITIZE void vgpu_dlsym_bootstrap(void)
{
    pthread_once(&dlsym_once, bootstrap);
}

struct loaded_search {
    const char *prefix;
    char path[PATH_MAX];
};

static int match_loaded(struct dl_phdr_info *info, size_t size, void *arg)
{
    struct loaded_search *ls = arg;
    const char *base = info->dlpi_name != NULL ? strrchr(info->dlpi_name, '/') : NULL;

    (void)size;
    if (base == NULL || strncmp(base + 1, ls->prefix, strlen(ls->prefix)) != 0)
        return 0;
    snprintf(ls->path, sizeof(ls->path), "%s", info->dlpi_name);
    return 1;
}

/*
 * A copy of the library the process has loaded already, whatever path it
 * came from: by soname (matches copies loaded by full path too), else by
 * the file name of a loaded object (a copy without the usual soname).
 */
static void *find_loaded(const struct driver_lib *l)
{
    struct loaded_search ls = {.prefix = l->prefix};
    void *h = dlopen(l->soname, RTLD_LAZY | RTLD_NOLOAD);

    if (h != NULL)
        return h;
    /* dlopen is called after the walk: the walk holds the loader's list lock. */
    if (dl_iterate_phdr(match_loaded, &ls) != 0)
        h = dlopen(ls.path, RTLD_LAZY | RTLD_NOLOAD);
    return h;
}

/* Fills l's table once the library is found; may_search: also dlopen it by soname. */
static int load(struct driver_lib *l, bool may_search)
{
    void *h;

    if (__atomic_load_n(&l->loaded, __ATOMIC_ACQUIRE))
        return 0;
    vgpu_dlsym_bootstrap();
    if (vgpu_real_dlsym == NULL)
        return -1;
    pthread_mutex_lock(&load_mu);
    if (!l->loaded) {
        h = find_loaded(l);
        if (h == NULL && may_search && !l->searched) {
            l->searched = true;
            h = dlopen(l->soname, RTLD_LAZY);
            if (h == NULL)
                VGPU_INFO("cannot open %s: %s (looked for again when the process loads it)",
                          l->soname, dlerror());
        }
        if (h != NULL) {
            l->resolve(h);
            __atomic_store_n(&l->loaded, 1, __ATOMIC_RELEASE);
        }
    }
    pthread_mutex_unlock(&load_mu);
    return __atomic_load_n(&l->loaded, __ATOMIC_ACQUIRE) ? 0 : -1;
}

#define VGPU_RESOLVE(table, name) *(void **)&(table).name = vgpu_real_dlsym(h, #name);
#define VGPU_RESOLVE_CU(name) VGPU_RESOLVE(vgpu_cu, name)
#define VGPU_RESOLVE_NVML(name) VGPU_RESOLVE(vgpu_nvml, name)

static void resolve_cuda(void *h)
{
    VGPU_CUDA_WRAPPED(VGPU_RESOLVE_CU)
    VGPU_CUDA_USED(VGPU_RESOLVE_CU)
}

static void resolve_nvml(void *h)
{
    VGPU_NVML_WRAPPED(VGPU_RESOLVE_NVML)
    VGPU_NVML_USED(VGPU_RESOLVE_NVML)
}

static struct driver_lib cuda_lib = {"libcuda.so.1", "libcuda.so", resolve_cuda, 0, false};
static struct driver_lib nvml_lib = {"libnvidia-ml.so.1", "libnvidia-ml.so", resolve_nvml, 0, false};

int vgpu_cuda_load(void)
{
    return load(&cuda_lib, true);
}

int vgpu_nvml_load(void)
{
    return load(&nvml_lib, true);
}

bool vgpu_cuda_present(void)
{
    return load(&cuda_lib, false) == 0;
}

bool vgpu_nvml_present(void)
{
    return load(&nvml_lib, false) == 0;
}

bool vgpu_stream_capturing(CUstream stream, bool ptsz)
{
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    PFN_cuStreamIsCapturing q = ptsz ? vgpu_cu.cuStreamIsCapturing_ptsz : vgpu_cu.cuStreamIsCapturing;

    return q != NULL && q(stream, &st) == CUDA_SUCCESS && st != CU_STREAM_CAPTURE_STATUS_NONE;
}
