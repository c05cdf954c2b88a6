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
 * load_test.c - the driver libraries may be loaded in any order, from any
 * path, after the application first reached libvgpu.so.
 *
 * This program is not linked with the fakes, and they are not on its library
 * path: like an application that ships or locates the driver itself, it
 * probes dlsym(RTLD_DEFAULT, "cu...") first, then dlopens libcuda by full
 * path and allocates through dlsym'd entry points; after its first CUDA calls
 * it dlopens NVML by full path and asks for memory info. Every step must
 * work and be limited exactly as when the libraries were loaded first.
 *
 * Run without arguments it is the driver (writes a claim limiting GPU 0 to
 * 1 GiB, runs "scenario" preloaded in a private mount namespace with the
 * claim mounted read-only; needs root, skipped otherwise).
 * Env: VGPU_TEST_LIB, VGPU_TEST_PRELOAD_PREFIX, VGPU_TEST_FAKE_DIR.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "claimns.h"
#include "vgpu_cuda.h"
#include "vgpu_nvml.h"
#include "vgpu_region.h"

#define MiB (1024ull * 1024ull)
#define GiB (1024ull * MiB)

#define SYM(h, name) ((PFN_##name)dlsym((h), #name))

static int scenario(const char *fake_dir)
{
    char path[4096];
    void *cuda, *nvml;
    CUcontext ctx;
    CUdeviceptr p = 0, q = 0;
    size_t f = 0, t = 0;
    nvmlDevice_t dev;
    nvmlMemory_t mem;

    /* Probing before the driver is loaded finds nothing, as without libvgpu.so, our exports
     * included (test/dlsym_test.c compares every answer and dlerror). */
    CHECK(dlsym(RTLD_DEFAULT, "cuInit") == NULL);
    CHECK(dlsym(RTLD_DEFAULT, "cuGetProcAddress_v2") == NULL);
    CHECK(dlsym(RTLD_DEFAULT, "nvmlDeviceGetMemoryInfo") == NULL);
    CHECK(dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD) == NULL);

    snprintf(path, sizeof(path), "%s/libcuda.so.1", fake_dir);
    cuda = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    CHECK(cuda != NULL);
    if (cuda == NULL)
        return 1;
    CHECK(SYM(cuda, cuInit)(0) == CUDA_SUCCESS);
    CHECK(SYM(cuda, cuDevicePrimaryCtxRetain)(&ctx, 0) == CUDA_SUCCESS);
    CHECK(SYM(cuda, cuCtxSetCurrent)(ctx) == CUDA_SUCCESS);
    /* Limited: 1 GiB. */
    CHECK(SYM(cuda, cuMemGetInfo_v2)(&f, &t) == CUDA_SUCCESS);
    CHECK_EQ_U64(t, GiB);
    CHECK(SYM(cuda, cuMemAlloc_v2)(&p, 2 * GiB) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(SYM(cuda, cuMemAlloc_v2)(&p, 768 * MiB) == CUDA_SUCCESS);
    /* Opened RTLD_LOCAL: the probe path still finds nothing; the handle's wrapper is limited. */
    CHECK(dlsym(RTLD_DEFAULT, "cuMemAlloc_v2") == NULL);
    CHECK(SYM(cuda, cuMemAlloc_v2)(&q, 512 * MiB) == CUDA_ERROR_OUT_OF_MEMORY);

    /* NVML by full path after the first CUDA calls. */
    snprintf(path, sizeof(path), "%s/libnvidia-ml.so.1", fake_dir);
    nvml = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    CHECK(nvml != NULL);
    if (nvml == NULL)
        return 1;
    CHECK(SYM(nvml, nvmlInit_v2)() == NVML_SUCCESS);
    CHECK(SYM(nvml, nvmlDeviceGetHandleByIndex_v2)(0, &dev) == NVML_SUCCESS);
    CHECK(SYM(nvml, nvmlDeviceGetMemoryInfo)(dev, &mem) == NVML_SUCCESS);
    CHECK_EQ_U64(mem.total, GiB);
    CHECK_EQ_U64(mem.used, 768 * MiB);
    CHECK(SYM(cuda, cuMemFree_v2)(p) == CUDA_SUCCESS);
    CHECK(SYM(cuda, cuMemGetInfo_v2)(&f, &t) == CUDA_SUCCESS);
    CHECK_EQ_U64(f, GiB);
    return check_failures != 0;
}

/* GPU 0's UUID, asked of the fake directly (this process is not preloaded). */
static int uuid0(const char *fake_dir, char out[64])
{
    char path[4096], *p = out;
    void *cuda;
    CUuuid u;

    snprintf(path, sizeof(path), "%s/libcuda.so.1", fake_dir);
    if ((cuda = dlopen(path, RTLD_NOW | RTLD_LOCAL)) == NULL || SYM(cuda, cuInit)(0) != 0 ||
        SYM(cuda, cuDeviceGetUuid_v2)(&u, 0) != 0)
        return -1;
    p += sprintf(p, "GPU-");
    for (int i = 0; i < 16; i++)
        p += sprintf(p, "%s%02x", i == 4 || i == 6 || i == 8 || i == 10 ? "-" : "",
                     (unsigned char)u.bytes[i]);
    return 0;
}

int main(int argc, char **argv)
{
    const char *fake_dir = getenv("VGPU_TEST_FAKE_DIR"), *lib = getenv("VGPU_TEST_LIB");
    const char *prefix = getenv("VGPU_TEST_PRELOAD_PREFIX");
    char root[] = "/tmp/vgpu-loadtest-XXXXXX", uuid[64], preload[8192], cmd[600];
    int ns, st;
    pid_t pid;

    if (fake_dir == NULL || lib == NULL) {
        fprintf(stderr, "load_test: needs VGPU_TEST_FAKE_DIR and VGPU_TEST_LIB\n");
        return 2;
    }
    if (argc == 2 && strcmp(argv[1], "scenario") == 0)
        return scenario(fake_dir);
    ns = vgpu_test_claims_ns_supported();
    if (ns != 0) {
        check_unavailable("load_test", "claims must be read-only mounts in a private mount namespace, "
                          "which needs root (unshare(CLONE_NEWNS): %s)", strerror(-ns));
        return check_report("load_test");
    }
    if (mkdtemp(root) == NULL || rmdir(root) != 0 || uuid0(fake_dir, uuid) != 0 ||
        vgpu_test_make_claim(root, uuid) != 0) {
        fprintf(stderr, "load_test: cannot set up the claim under %s\n", root);
        return 1;
    }
    snprintf(preload, sizeof(preload), "%s%s%s", prefix ? prefix : "", prefix ? ":" : "", lib);
    fflush(NULL);
    pid = fork();
    if (pid == 0) {
        if (vgpu_test_enter_claims_ns(root) != 0)
            _exit(125);
        setenv("VGPU_CLAIMS_ROOT", root, 1);
        setenv("LD_PRELOAD", preload, 1);
        unsetenv("LD_LIBRARY_PATH"); /* the fakes must be reachable only by full path */
        execl(argv[0], argv[0], "scenario", (char *)NULL);
        _exit(127);
    }
    waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "load_test: scenario exit status %d\n", st);
        check_failures++;
    } else {
        printf("ok   driver and NVML loaded by full path after probing\n");
    }
    snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
    if (system(cmd) != 0)
        fprintf(stderr, "load_test: cannot remove %s\n", root);
    return check_report("load_test");
}
