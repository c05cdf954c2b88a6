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
 * nvml_order_test.c - where libvgpu.so has nothing to add, an NVML wrapper
 * answers as the driver does, in the driver's order of checks: every wrapper
 * is called before nvmlInit, with NULL and invalid arguments, after init and
 * after nvmlShutdown, and each return code must be the one the fake NVML
 * gives called directly (without LD_PRELOAD).
 *
 * Run without arguments it is the driver: it runs "probe" without the
 * library, preloaded with it, and preloaded with an environment limit
 * (CUDA_DEVICE_MEMORY_LIMIT: GPUs enforced, the claim's view applies), and
 * compares the outputs line by line. Env: VGPU_TEST_LIB.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "probe_run.h"
#include "vgpu_nvml.h"

nvmlReturn_t nvmlInit_v2(void);
nvmlReturn_t nvmlShutdown(void);
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device);

typedef nvmlReturn_t (*procs_fn)(nvmlDevice_t, unsigned int *, nvmlProcessInfo_t *);

/* Every argument shape of every wrapped function on device dev, one line each. */
static void calls(const char *phase, nvmlDevice_t dev)
{
    static const struct {
        const char *name;
        procs_fn fn;
    } procs[] = {
        {"nvmlDeviceGetComputeRunningProcesses", (procs_fn)nvmlDeviceGetComputeRunningProcesses},
        {"nvmlDeviceGetComputeRunningProcesses_v2", nvmlDeviceGetComputeRunningProcesses_v2},
        {"nvmlDeviceGetComputeRunningProcesses_v3", nvmlDeviceGetComputeRunningProcesses_v3},
        {"nvmlDeviceGetGraphicsRunningProcesses", (procs_fn)nvmlDeviceGetGraphicsRunningProcesses},
        {"nvmlDeviceGetGraphicsRunningProcesses_v2", nvmlDeviceGetGraphicsRunningProcesses_v2},
        {"nvmlDeviceGetGraphicsRunningProcesses_v3", nvmlDeviceGetGraphicsRunningProcesses_v3},
    };
    nvmlProcessInfo_t infos[16];
    nvmlProcessUtilizationSample_t samples[16];
    nvmlMemory_t mem;
    nvmlMemory_v2_t mem2;
    nvmlUtilization_t util;
    unsigned int n;

#define SHOW(call) printf("%s %s = %d\n", phase, #call, (int)(call))
    SHOW(nvmlDeviceGetMemoryInfo(dev, NULL));
    SHOW(nvmlDeviceGetMemoryInfo(dev, &mem));
    SHOW(nvmlDeviceGetMemoryInfo_v2(dev, NULL));
    mem2.version = 0;
    SHOW(nvmlDeviceGetMemoryInfo_v2(dev, &mem2));
    mem2.version = nvmlMemory_v2;
    SHOW(nvmlDeviceGetMemoryInfo_v2(dev, &mem2));
    for (size_t i = 0; i < sizeof(procs) / sizeof(procs[0]); i++) {
        printf("%s %s(NULL, NULL) = %d\n", phase, procs[i].name, (int)procs[i].fn(dev, NULL, NULL));
        n = 0;
        printf("%s %s(0, NULL) = %d\n", phase, procs[i].name, (int)procs[i].fn(dev, &n, NULL));
        n = 4;
        printf("%s %s(4, NULL) = %d\n", phase, procs[i].name, (int)procs[i].fn(dev, &n, NULL));
        n = 16;
        printf("%s %s(16, buf) = %d\n", phase, procs[i].name, (int)procs[i].fn(dev, &n, infos));
    }
    SHOW(nvmlDeviceGetProcessUtilization(dev, NULL, NULL, 0));
    SHOW(nvmlDeviceGetProcessUtilization(dev, samples, NULL, 0));
    n = 0;
    SHOW(nvmlDeviceGetProcessUtilization(dev, NULL, &n, 0));
    n = 16;
    SHOW(nvmlDeviceGetProcessUtilization(dev, samples, &n, 0));
    SHOW(nvmlDeviceGetUtilizationRates(dev, NULL));
    SHOW(nvmlDeviceGetUtilizationRates(dev, &util));
#undef SHOW
}

static int probe(void)
{
    nvmlDevice_t dev = NULL;

    calls("before-init NULL", NULL);
    if (nvmlInit_v2() != NVML_SUCCESS || nvmlDeviceGetHandleByIndex_v2(0, &dev) != NVML_SUCCESS)
        return 2;
    calls("init NULL", NULL);
    calls("init dev0", dev);
    nvmlShutdown();
    calls("shutdown dev0", dev);
    fflush(stdout);
    return 0;
}

static const char *const probe_args[] = {"probe", NULL};

int main(int argc, char **argv)
{
    static char want[1 << 16], got[1 << 16];
    const char *lib = getenv("VGPU_TEST_LIB");

    if (argc == 2 && strcmp(argv[1], "probe") == 0)
        return probe();
    if (lib == NULL) {
        fprintf(stderr, "nvml_order_test: set VGPU_TEST_LIB\n");
        return 2;
    }
    CHECK_EQ(vgpu_test_run_self(probe_args, NULL, NULL, want, sizeof(want)), 0);
    CHECK(strstr(want, "before-init NULL nvmlDeviceGetProcessUtilization(dev, NULL, NULL, 0) = 1\n") !=
          NULL);
    CHECK_EQ(vgpu_test_run_self(probe_args, lib, NULL, got, sizeof(got)), 0);
    vgpu_test_compare_lines("preloaded", "driver:      ", want, "with libvgpu:", got, 0);
    CHECK_EQ(vgpu_test_run_self(probe_args, lib, "CUDA_DEVICE_MEMORY_LIMIT=1g", got, sizeof(got)), 0);
    vgpu_test_compare_lines("preloaded, env limit", "driver:      ", want, "with libvgpu:", got, 0);
    return check_report("nvml_order_test");
}
