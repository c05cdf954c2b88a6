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

/* driver.c - see driver.h. */
#include "driver.h"

#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
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
 *
 * References: the table is resolved through a handle of the copy the
 * process loaded, and that reference is released at once, so the
 * application's last dlclose unloads the library as without us (then the
 * table is forgotten: vgpu_driver_revalidate). The library keeps a
 * reference only where it calls the driver on its own behalf: a copy it
 * opened itself because none was loaded, and NVML once the library uses it
 * for itself (vgpu_driver_nvml_hold: the limiter's thread and the overhead rule;
 * vgpu_driver_cuda_hold: the limiter's thread reading the events of timed launches).
 */
struct driver_lib {
    const char *soname;
    const char *prefix; /* file names of its copies: libcuda.so.1, libcuda.so.580.95.05 ... */
    void (*resolve)(void *h);
    int loaded;    /* atomic; 1 once the table is filled */
    bool searched; /* the soname was searched for on the library path (once: it cannot change) */
    void *held;    /* our own reference, where the library keeps one (see above) */
    uintptr_t base;              /* the copy the table was resolved from: its load address */
    char path[PATH_MAX];         /* ... and its name in the loader's list */
};

/* Recursive: the driver's own initialisation, run by our dlopen, may reach our dlsym. */
static pthread_mutex_t load_mu = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;

/* glibc's dlerror, for our own messages: ours (hooks.c) serves the application. */
static char *(*libc_dlerror)(void);

VGPU_NO_SANITIZE static void bootstrap(void)
{
    /* dlsym moved into libc at 2.34; older glibc has only the base versions. */
    static const char *const versions[] = {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17"};

    for (size_t i = 0; i < sizeof(versions) / sizeof(versions[0]); i++) {
        void *p = dlvsym(RTLD_NEXT, "dlsym", versions[i]);
        if (p != NULL) {
            *(void **)&vgpu_real_dlsym = p;
            *(void **)&libc_dlerror = dlvsym(RTLD_NEXT, "dlerror", versions[i]);
            return;
        }
    }
}

VGPU_NO_SANITIZE void vgpu_driver_dlsym_bootstrap(void)
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
    vgpu_driver_dlsym_bootstrap();
    if (vgpu_real_dlsym == NULL)
        return -1;
    pthread_mutex_lock(&load_mu);
    if (!l->loaded) {
        bool opened = false;

        h = find_loaded(l);
        if (h == NULL && may_search && !l->searched) {
            l->searched = true;
            h = dlopen(l->soname, RTLD_LAZY);
            opened = h != NULL;
            if (h == NULL)
                VGPU_INFO("cannot open %s: %s (looked for again when the process loads it)",
                          l->soname, libc_dlerror != NULL ? libc_dlerror() : "unknown error");
        }
        if (h != NULL) {
            struct link_map *lm = NULL;

            l->resolve(h);
            if (dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm != NULL) {
                l->base = lm->l_addr;
                snprintf(l->path, sizeof(l->path), "%s", lm->l_name);
            }
            /* A copy we loaded ourselves stays: nobody else holds it. */
            if (opened && l->held == NULL)
                __atomic_store_n(&l->held, h, __ATOMIC_RELEASE);
            else
                dlclose(h);
            __atomic_store_n(&l->loaded, 1, __ATOMIC_RELEASE);
        }
    }
    pthread_mutex_unlock(&load_mu);
    return __atomic_load_n(&l->loaded, __ATOMIC_ACQUIRE) ? 0 : -1;
}

static int same_copy(struct dl_phdr_info *info, size_t size, void *arg)
{
    const struct driver_lib *l = arg;

    (void)size;
    return info->dlpi_addr == l->base && info->dlpi_name != NULL &&
           strcmp(info->dlpi_name, l->path) == 0;
}

/*
 * Forgets l's table when the copy it came from is no longer loaded. No
 * lock: this runs inside dlsym, possibly within the loader's own lock, and
 * a wrong "unloaded" (racing a load) only costs resolving the table again.
 */
static void revalidate(struct driver_lib *l)
{
    if (!__atomic_load_n(&l->loaded, __ATOMIC_ACQUIRE) ||
        __atomic_load_n(&l->held, __ATOMIC_ACQUIRE) != NULL)
        return;
    /* The walk holds the loader's list lock only while it runs: no dl call inside. */
    if (dl_iterate_phdr(same_copy, l) == 0) {
        VGPU_DEBUG("%s was unloaded: its entry points are resolved again when it is loaded",
                   l->path);
        __atomic_store_n(&l->loaded, 0, __ATOMIC_RELEASE);
    }
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

static struct driver_lib cuda_lib = {.soname = "libcuda.so.1", .prefix = "libcuda.so",
                                     .resolve = resolve_cuda};
static struct driver_lib nvml_lib = {.soname = "libnvidia-ml.so.1", .prefix = "libnvidia-ml.so",
                                     .resolve = resolve_nvml};

int vgpu_driver_cuda_load(void)
{
    return load(&cuda_lib, true);
}

int vgpu_driver_nvml_load(void)
{
    return load(&nvml_lib, true);
}

void vgpu_driver_revalidate(void)
{
    revalidate(&cuda_lib);
    revalidate(&nvml_lib);
}

/* Keeps the copy of l the table came from loaded for the life of the process. */
static int hold(struct driver_lib *l)
{
    void *h;

    /* A copy the application has unloaded since: found or opened again. */
    revalidate(l);
    if (load(l, true) != 0)
        return -1;
    pthread_mutex_lock(&load_mu);
    if (l->held == NULL) {
        /* The copy the table came from, by the name the loader lists it under. */
        h = dlopen(l->path[0] != '\0' ? l->path : l->soname, RTLD_LAZY | RTLD_NOLOAD);
        if (h != NULL)
            __atomic_store_n(&l->held, h, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&load_mu);
    return l->held != NULL ? 0 : -1;
}

int vgpu_driver_nvml_hold(void)
{
    return hold(&nvml_lib);
}

int vgpu_driver_cuda_hold(void)
{
    return hold(&cuda_lib);
}

bool vgpu_driver_cuda_present(void)
{
    return load(&cuda_lib, false) == 0;
}

bool vgpu_driver_nvml_present(void)
{
    return load(&nvml_lib, false) == 0;
}

bool vgpu_stream_capturing(CUstream stream, bool ptsz)
{
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    PFN_cuStreamIsCapturing q = ptsz ? vgpu_cu.cuStreamIsCapturing_ptsz : vgpu_cu.cuStreamIsCapturing;

    return q != NULL && q(stream, &st) == CUDA_SUCCESS && st != CU_STREAM_CAPTURE_STATUS_NONE;
}
