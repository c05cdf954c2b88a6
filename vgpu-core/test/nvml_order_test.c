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

/*
 * LD_PRELOAD for a probe: lib (NULL: none) after VGPU_TEST_PRELOAD_PREFIX
 * (the sanitizer runtime, which must come first; then also without lib).
 */
static void preload(const char *lib)
{
    static char buf[8192];
    const char *prefix = getenv("VGPU_TEST_PRELOAD_PREFIX");

    if (prefix != NULL && lib != NULL)
        snprintf(buf, sizeof(buf), "%s:%s", prefix, lib);
    else
        snprintf(buf, sizeof(buf), "%s", prefix != NULL ? prefix : lib != NULL ? lib : "");
    if (buf[0] != '\0')
        setenv("LD_PRELOAD", buf, 1);
    else
        unsetenv("LD_PRELOAD");
}

/* Runs the probe with LD_PRELOAD=lib (unset for NULL) and env (NAME=VALUE or NULL); stdout in out. */
static int run_probe(const char *lib, const char *env, char *out, size_t len)
{
    char exe[4096];
    int fd[2], status;
    size_t n = 0;
    ssize_t r;
    pid_t pid;

    if (readlink("/proc/self/exe", exe, sizeof(exe) - 1) < 0 || pipe(fd) != 0)
        return -1;
    exe[sizeof(exe) - 1] = '\0';
    pid = fork();
    if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        close(fd[1]);
        preload(lib);
        if (env != NULL)
            putenv((char *)env);
        execl(exe, exe, "probe", (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    while (n + 1 < len && (r = read(fd[0], out + n, len - n - 1)) > 0)
        n += (size_t)r;
    out[n] = '\0';
    close(fd[0]);
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
        return -1;
    return WEXITSTATUS(status);
}

static void compare(const char *what, const char *a, const char *b)
{
    size_t line = 1;

    while (*a != '\0' || *b != '\0') {
        size_t la = strcspn(a, "\n"), lb = strcspn(b, "\n");

        if (la != lb || strncmp(a, b, la) != 0) {
            fprintf(stderr, "%s: line %zu differs:\n  driver:       %.*s\n  with libvgpu: %.*s\n",
                    what, line, (int)la, a, (int)lb, b);
            CHECK(0);
        }
        a += la + (a[la] == '\n');
        b += lb + (b[lb] == '\n');
        line++;
    }
}

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
    CHECK_EQ(run_probe(NULL, NULL, want, sizeof(want)), 0);
    CHECK(strstr(want, "before-init NULL nvmlDeviceGetProcessUtilization(dev, NULL, NULL, 0) = 1\n") !=
          NULL);
    CHECK_EQ(run_probe(lib, NULL, got, sizeof(got)), 0);
    compare("preloaded", want, got);
    CHECK_EQ(run_probe(lib, "CUDA_DEVICE_MEMORY_LIMIT=1g", got, sizeof(got)), 0);
    compare("preloaded, env limit", want, got);
    return check_report("nvml_order_test");
}
