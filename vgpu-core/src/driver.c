/* driver.c - see driver.h. */
#include "driver.h"

#include <dlfcn.h>
#include <pthread.h>

#include "log.h"

struct vgpu_cuda_real vgpu_cu;
struct vgpu_nvml_real vgpu_nvml;
void *(*vgpu_real_dlsym)(void *handle, const char *name);

static pthread_once_t dlsym_once = PTHREAD_ONCE_INIT;
static pthread_once_t cuda_once = PTHREAD_ONCE_INIT;
static pthread_once_t nvml_once = PTHREAD_ONCE_INIT;
static int cuda_loaded = -1;
static int nvml_loaded = -1;

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

/* Opens a driver library, preferring the copy the application already loaded. */
static void *open_library(const char *soname)
{
    void *h = dlopen(soname, RTLD_LAZY | RTLD_NOLOAD);

    return h != NULL ? h : dlopen(soname, RTLD_LAZY);
}

#define VGPU_RESOLVE(table, name) *(void **)&(table).name = vgpu_real_dlsym(h, #name);
#define VGPU_RESOLVE_CU(name) VGPU_RESOLVE(vgpu_cu, name)
#define VGPU_RESOLVE_NVML(name) VGPU_RESOLVE(vgpu_nvml, name)

static void load_cuda(void)
{
    void *h;

    vgpu_dlsym_bootstrap();
    h = open_library("libcuda.so.1");
    if (h == NULL || vgpu_real_dlsym == NULL) {
        VGPU_INFO("cannot open libcuda.so.1: %s", dlerror());
        return;
    }
    VGPU_CUDA_WRAPPED(VGPU_RESOLVE_CU)
    VGPU_CUDA_USED(VGPU_RESOLVE_CU)
    cuda_loaded = 0;
}

static void load_nvml(void)
{
    void *h;

    vgpu_dlsym_bootstrap();
    h = open_library("libnvidia-ml.so.1");
    if (h == NULL || vgpu_real_dlsym == NULL) {
        VGPU_INFO("cannot open libnvidia-ml.so.1: %s", dlerror());
        return;
    }
    VGPU_NVML_WRAPPED(VGPU_RESOLVE_NVML)
    VGPU_NVML_USED(VGPU_RESOLVE_NVML)
    nvml_loaded = 0;
}

int vgpu_cuda_load(void)
{
    pthread_once(&cuda_once, load_cuda);
    return cuda_loaded;
}

int vgpu_nvml_load(void)
{
    pthread_once(&nvml_once, load_nvml);
    return nvml_loaded;
}
