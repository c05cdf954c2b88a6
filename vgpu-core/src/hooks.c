/* hooks.c - see hooks.h. */
#include "hooks.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "driver.h"
#include "log.h"

struct hook {
    const char *name;
    void *wrapper;
    void *const *real; /* member of vgpu_cu / vgpu_nvml; NULL there if the driver lacks it */
    bool nvml;
};

#define CUDA_HOOK(n) {#n, (void *)n, (void *const *)&vgpu_cu.n, false},
#define NVML_HOOK(n) {#n, (void *)n, (void *const *)&vgpu_nvml.n, true},

static const struct hook hooks[] = {
    VGPU_CUDA_WRAPPED(CUDA_HOOK)
    VGPU_NVML_WRAPPED(NVML_HOOK)
};

VGPU_NO_SANITIZE bool vgpu_hook_name_matches(const char *name)
{
    /* No libc calls here: this runs for every dlsym, even inside sanitizer init. */
    if (name[0] == 'c' && name[1] == 'u')
        return name[2] >= 'A' && name[2] <= 'Z';
    if (name[0] == 'n' && name[1] == 'v' && name[2] == 'm' && name[3] == 'l')
        return name[4] >= 'A' && name[4] <= 'Z';
    return false;
}

static const struct hook *find(const char *name)
{
    for (size_t i = 0; i < sizeof(hooks) / sizeof(hooks[0]); i++) {
        if (strcmp(hooks[i].name, name) == 0)
            return &hooks[i];
    }
    return NULL;
}

/* The variant a resolver would pick for symbol by name, version and flags. */
static const struct hook *by_request(const char *symbol, int version, cuuint64_t flags)
{
    const struct hook *h = NULL;
    char name[128];

    if (symbol == NULL || strlen(symbol) + sizeof("_ptsz") > sizeof(name))
        return NULL;
    if (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) {
        snprintf(name, sizeof(name), "%s_ptsz", symbol);
        h = find(name);
    }
    /* Every _v2 we wrap appeared in CUDA 3.2. */
    if (h == NULL && version >= 3020) {
        snprintf(name, sizeof(name), "%s_v2", symbol);
        h = find(name);
    }
    return h != NULL ? h : find(symbol);
}

void *vgpu_hook_substitute(const char *symbol, void *fn, int version, cuuint64_t flags)
{
    const struct hook *h = NULL;
    Dl_info info;

    /* The exported name of fn says exactly which variant the driver chose. */
    if (dladdr(fn, &info) != 0 && info.dli_sname != NULL && info.dli_saddr == fn) {
        h = find(info.dli_sname);
    } else {
        /* Unnamed entry point: match it against the exports we resolved, then by request. */
        for (size_t i = 0; i < sizeof(hooks) / sizeof(hooks[0]) && h == NULL; i++) {
            if (*hooks[i].real == fn)
                h = &hooks[i];
        }
        if (h == NULL)
            h = by_request(symbol, version, flags);
    }
    if (h == NULL || h->nvml || *h->real == NULL)
        return fn;
    VGPU_DEBUG("cuGetProcAddress(%s, %d, %llu): wrapped by %s", symbol, version,
               (unsigned long long)flags, h->name);
    return h->wrapper;
}

/*
 * Whether a driver library the process has loaded exports the function h
 * wraps. Never loads one: without libvgpu.so the lookup would fail too.
 */
static bool driver_has(const struct hook *h)
{
    if (!(h->nvml ? vgpu_nvml_present() : vgpu_cuda_present()))
        return false;
    return *h->real != NULL;
}

VGPU_NO_SANITIZE void *vgpu_dlsym_intercept(void *handle, const char *name)
{
    const struct hook *h;

    vgpu_dlsym_bootstrap();
    if (name == NULL || !vgpu_hook_name_matches(name))
        return NULL;
    h = find(name);
    if (h == NULL)
        return NULL;
    if (handle == RTLD_DEFAULT || handle == RTLD_NEXT) {
        if (!driver_has(h))
            return NULL;
    } else if (vgpu_real_dlsym == NULL || vgpu_real_dlsym(handle, name) == NULL) {
        /* The handle does not export it: let the real dlsym fail and set dlerror. */
        return NULL;
    }
    return h->wrapper;
}
