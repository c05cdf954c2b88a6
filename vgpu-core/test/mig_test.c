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
 * mig_test.c - libvgpu.so inside a MIG instance (docs/mig.md, "libvgpu.so
 * keying"). A claim whose config names the instance's MIG- UUID limits the
 * instance that CUDA_VISIBLE_DEVICES makes the process's one CUDA device,
 * although CUDA reports the instance's UUID with a GPU- prefix: CUDA and
 * NVML show the limit as the instance's size, allocations past it are
 * refused, and the region's device record names the MIG- UUID, which the
 * plugin's monitor matches. A config naming only the parent GPU does not
 * limit the instance.
 *
 * Run without arguments it is the driver: it creates a 3g.71gb instance on
 * the fake H200 (VGPU_FAKE_MIG_GEOMETRY, set by the Makefile) through the
 * fake NVML, writes the claim as the plugin would and runs itself preloaded
 * with libvgpu.so (VGPU_TEST_LIB) in a private mount namespace, as root.
 */
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "claimns.h"
#include "fake_nvml_mig.h"
#include "vgpu_cuda.h"
#include "vgpu_nvml.h"
#include "vgpu_region.h"

#define MiB (1ULL << 20)
#define GiB (1ULL << 30)

static char self_exe[4096];

/* The limited child: the instance is its one device, held to the claim's 1 GiB. */
static int child_limited(void)
{
    const char *mig = getenv("MIG_TEST_UUID");
    size_t total = 0, free_b = 0;
    CUdeviceptr a = 0, b = 0;
    CUcontext ctx;
    int n = 0;
    nvmlDevice_t dev;
    nvmlMemory_t mem = {0};

    CHECK_EQ(cuInit(0), CUDA_SUCCESS);
    CHECK_EQ(cuDeviceGetCount(&n), CUDA_SUCCESS);
    CHECK_EQ(n, 1);
    CHECK_EQ(cuDeviceTotalMem_v2(&total, 0), CUDA_SUCCESS);
    CHECK_EQ_U64(total, GiB);
    CHECK_EQ(cuCtxCreate_v2(&ctx, 0, 0), CUDA_SUCCESS);
    CHECK_EQ(cuMemAlloc_v2(&a, 768 * MiB), CUDA_SUCCESS);
    CHECK_EQ(cuMemAlloc_v2(&b, 512 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_EQ(cuMemGetInfo_v2(&free_b, &total), CUDA_SUCCESS);
    CHECK_EQ_U64(total, GiB);
    CHECK(free_b <= 256 * MiB);
    /* NVML's view of the instance (nvidia-smi's MIG device row) shows the claim too. */
    CHECK_EQ(nvmlInit_v2(), NVML_SUCCESS);
    CHECK_EQ(nvmlDeviceGetHandleByUUID(mig, &dev), NVML_SUCCESS);
    CHECK_EQ(nvmlDeviceGetMemoryInfo(dev, &mem), NVML_SUCCESS);
    CHECK_EQ_U64(mem.total, GiB);
    CHECK(mem.used >= 768 * MiB);
    CHECK_EQ(cuMemFree_v2(a), CUDA_SUCCESS);
    return check_failures != 0;
}

/* The unlimited child: a config naming the parent GPU leaves the instance alone. */
static int child_unlimited(void)
{
    size_t total = 0;
    CUdeviceptr a = 0;
    CUcontext ctx;

    CHECK_EQ(cuInit(0), CUDA_SUCCESS);
    CHECK_EQ(cuDeviceTotalMem_v2(&total, 0), CUDA_SUCCESS);
    CHECK(total > 70 * GiB);
    CHECK_EQ(cuCtxCreate_v2(&ctx, 0, 0), CUDA_SUCCESS);
    CHECK_EQ(cuMemAlloc_v2(&a, 2 * GiB), CUDA_SUCCESS);
    CHECK_EQ(cuMemFree_v2(a), CUDA_SUCCESS);
    return check_failures != 0;
}

/* Runs this program as name, preloaded, in root's claims namespace; returns its status. */
static int run_child(const char *name, const char *root, const char *mig)
{
    pid_t pid = fork();
    int st;

    if (pid == 0) {
        setenv("LD_PRELOAD", getenv("VGPU_TEST_LIB"), 1);
        setenv("VGPU_CLAIMS_ROOT", root, 1);
        setenv("CUDA_VISIBLE_DEVICES", mig, 1);
        setenv("MIG_TEST_UUID", mig, 1);
        if (vgpu_test_enter_claims_ns(root) != 0)
            _exit(125);
        execl(self_exe, self_exe, name, (char *)NULL);
        _exit(127);
    }
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Whether the claim's region names the device uuid in its first device record. */
static bool region_names(const char *root, const char *uuid)
{
    char path[512];
    const struct vgpu_region *r;
    bool named;
    int fd;

    snprintf(path, sizeof(path), "%s/a/shm/region", root);
    fd = open(path, O_RDONLY);
    if (fd < 0)
        return false;
    r = mmap(NULL, VGPU_REGION_SIZE, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (r == MAP_FAILED)
        return false;
    named = r->header.device_count >= 1 && strcasecmp(r->devices[0].uuid, uuid) == 0;
    munmap((void *)r, VGPU_REGION_SIZE);
    return named;
}

static int driver(void)
{
    char state[] = "/tmp/vgpu-mig-test-XXXXXX", root[600], mig[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    char parent[NVML_DEVICE_UUID_V2_BUFFER_SIZE], cmd[700];
    nvmlDevice_t gpu, handle;
    nvmlGpuInstance_t gi;
    nvmlComputeInstance_t ci;

    if (vgpu_test_claims_ns_supported() != 0) {
        printf("mig_test: SKIP (needs root for a private mount namespace)\n");
        return 0;
    }
    CHECK(mkdtemp(state) != NULL);
    setenv("VGPU_FAKE_STATE_DIR", state, 1);
    snprintf(root, sizeof(root), "%s/claims", state);
    CHECK_EQ(nvmlInit_v2(), NVML_SUCCESS);
    CHECK_EQ(nvmlDeviceGetHandleByIndex_v2(0, &gpu), NVML_SUCCESS);
    CHECK_EQ(nvmlDeviceGetUUID(gpu, parent, sizeof(parent)), NVML_SUCCESS);
    CHECK_EQ(nvmlDeviceCreateGpuInstance(gpu, NVML_GPU_INSTANCE_PROFILE_3_SLICE, &gi), NVML_SUCCESS);
    CHECK_EQ(nvmlGpuInstanceCreateComputeInstance(gi, NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE, &ci),
             NVML_SUCCESS);
    CHECK_EQ(nvmlDeviceGetMigDeviceHandleByIndex(gpu, 0, &handle), NVML_SUCCESS);
    CHECK_EQ(nvmlDeviceGetUUID(handle, mig, sizeof(mig)), NVML_SUCCESS);
    CHECK(strncmp(mig, "MIG-", 4) == 0);
    if (check_failures != 0)
        return check_report("mig_test");

    /* The config names the instance, in upper case: UUIDs compare as CUDA does. */
    char upper[sizeof(mig)];
    for (size_t i = 0; i < sizeof(upper); i++)
        upper[i] = i >= 4 && mig[i] >= 'a' && mig[i] <= 'f' ? (char)(mig[i] - 'a' + 'A') : mig[i];
    CHECK_EQ(vgpu_test_make_claim(root, upper), 0);
    CHECK_EQ(run_child("child-limited", root, mig), 0);
    CHECK(region_names(root, mig));

    snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
    CHECK(system(cmd) == 0);
    CHECK_EQ(vgpu_test_make_claim(root, parent), 0);
    CHECK_EQ(run_child("child-unlimited", root, mig), 0);

    CHECK_EQ(nvmlComputeInstanceDestroy(ci), NVML_SUCCESS);
    CHECK_EQ(nvmlGpuInstanceDestroy(gi), NVML_SUCCESS);
    nvmlShutdown();
    snprintf(cmd, sizeof(cmd), "rm -rf %s", state);
    CHECK(system(cmd) == 0);
    return check_report("mig_test");
}

int main(int argc, char **argv)
{
    ssize_t n = readlink("/proc/self/exe", self_exe, sizeof(self_exe) - 1);

    if (n > 0)
        self_exe[n] = '\0';
    if (argc > 1 && strcmp(argv[1], "child-limited") == 0)
        return child_limited();
    if (argc > 1 && strcmp(argv[1], "child-unlimited") == 0)
        return child_unlimited();
    return driver();
}
