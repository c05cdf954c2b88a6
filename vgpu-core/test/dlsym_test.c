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
 * dlsym_test.c - dlsym and dlvsym give with libvgpu.so what they give
 * without it, except that a function the driver really has comes as our
 * wrapper: NULL where the real lookup gives NULL (driver not loaded, opened
 * RTLD_LOCAL, or lacking the function), with the same dlerror() text.
 *
 * Run without arguments it is the driver: for each driver build (the fake,
 * and the fake without cuCtxCreate_v4 like a CUDA 12.4 driver) and each way
 * of loading it (not at all, dlopen RTLD_LOCAL, RTLD_GLOBAL, as the
 * dependency of a library opened RTLD_LOCAL), it runs "probe" without and
 * with LD_PRELOAD=libvgpu.so and compares the outputs line by line (a
 * pointer counts as equal whichever object it is in). Then it checks that
 * the wrapper is handed out where it should be. VGPU_TEST_LINKED names this
 * program built with DLSYM_TEST_LINKED, linked with the probe library (and
 * so the driver): lookups from a library loaded at startup, after us.
 * Env: VGPU_TEST_PRELOAD_PREFIX, VGPU_TEST_LIB, VGPU_TEST_FAKE_DIR, VGPU_TEST_NOV4_DIR,
 * VGPU_TEST_PROBE_LIB, VGPU_TEST_LINKED.
 */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "probe_run.h"

static const char *const names[] = {
    "cuMemAlloc_v2",   "cuCtxCreate_v4",          "cuGetProcAddress_v2",
    "cuInit",          "cuNoSuchFunction",        "nvmlDeviceGetMemoryInfo",
    "cuDriverGetVersion",
    "nvmlDeviceGetProcessUtilization", NULL,
};

/* One result: "sym vgpu" (our wrapper), "sym" (anything else) or "NULL <dlerror>". */
static void show(const char *what, const char *name, void *p)
{
    Dl_info info;
    const char *err;

    if (p != NULL) {
        printf("%s %s: sym%s\n", what, name,
               dladdr(p, &info) != 0 && strstr(info.dli_fname, "libvgpu") != NULL ? " vgpu" : "");
        return;
    }
    err = dlerror();
    printf("%s %s: NULL %s\n", what, name, err != NULL ? err : "(no error)");
    /* Read once: a second dlerror() is NULL. */
    err = dlerror();
    if (err != NULL)
        printf("%s %s: second dlerror %s\n", what, name, err);
}

#ifdef DLSYM_TEST_LINKED
/* This build links the probe library (and through it the driver): they load at startup. */
void *dlsym_probe_default(const char *name);
void *dlsym_probe_next(const char *name);
#endif

static int probe(const char *dir, const char *mode, const char *probe_lib)
{
    char path[4096];
    void *h = NULL, *self = dlopen(NULL, RTLD_LAZY), *lib = NULL;
    void *(*lib_default)(const char *) = NULL, *(*lib_next)(const char *) = NULL;

#ifdef DLSYM_TEST_LINKED
    lib = self;
    lib_default = dlsym_probe_default;
    lib_next = dlsym_probe_next;
#endif

    snprintf(path, sizeof(path), "%s/libcuda.so.1", dir);
    if (strcmp(mode, "local") == 0 || strcmp(mode, "global") == 0) {
        h = dlopen(path, RTLD_NOW | (strcmp(mode, "global") == 0 ? RTLD_GLOBAL : RTLD_LOCAL));
        if (h == NULL)
            return 2;
    } else if (strcmp(mode, "dep") == 0) {
        lib = dlopen(probe_lib, RTLD_NOW | RTLD_LOCAL);
        if (lib == NULL)
            return 2;
        *(void **)&lib_default = dlsym(lib, "dlsym_probe_default");
        *(void **)&lib_next = dlsym(lib, "dlsym_probe_next");
        if (lib_default == NULL || lib_next == NULL)
            return 2;
    }
    for (int i = 0; names[i] != NULL; i++) {
        const char *n = names[i];

        show("DEFAULT", n, dlsym(RTLD_DEFAULT, n));
        show("NEXT", n, dlsym(RTLD_NEXT, n));
        show("program", n, dlsym(self, n));
        show("vsym DEFAULT", n, dlvsym(RTLD_DEFAULT, n, "VGPU_NO_SUCH_VERSION"));
        if (h != NULL) {
            show("handle", n, dlsym(h, n));
            show("vsym handle", n, dlvsym(h, n, "VGPU_NO_SUCH_VERSION"));
        }
        if (lib != NULL) {
            show("lib DEFAULT", n, lib_default(n));
            show("lib NEXT", n, lib_next(n));
        }
    }
    fflush(stdout);
    return 0;
}

/* Runs exe's probe for dir and mode, preloaded with lib (or not); its stdout in out. */
static int run_exe(const char *exe, const char *dir, const char *mode, const char *lib, char *out,
                   size_t len)
{
    const char *probe_lib = getenv("VGPU_TEST_PROBE_LIB");
    const char *const args[] = {"probe", dir, mode, probe_lib != NULL ? probe_lib : "", NULL};

    return vgpu_test_run_probe(exe, args, lib, NULL, out, len);
}

/* Runs this program's probe (see run_exe). */
static int run_probe(const char *dir, const char *mode, const char *lib, char *out, size_t len)
{
    const char *probe_lib = getenv("VGPU_TEST_PROBE_LIB");
    const char *const args[] = {"probe", dir, mode, probe_lib != NULL ? probe_lib : "", NULL};

    return vgpu_test_run_self(args, lib, NULL, out, len);
}

/* The output with every "sym vgpu" read as "sym": where a pointer points is compared apart. */
static void plain(const char *in, char *out, size_t len)
{
    size_t o = 0;

    for (const char *p = in; *p != '\0' && o + 1 < len;) {
        if (strncmp(p, "sym vgpu", 8) == 0) {
            memcpy(out + o, "sym", 3);
            o += 3;
            p += 8;
        } else {
            out[o++] = *p++;
        }
    }
    out[o] = '\0';
}

static bool has_line(const char *out, const char *line)
{
    for (const char *p = out; (p = strstr(p, line)) != NULL; p++) {
        if ((p == out || p[-1] == '\n') && (p[strlen(line)] == '\n' || p[strlen(line)] == '\0'))
            return true;
    }
    return false;
}

#define EXPECT_LINE(out, line)                                                                     \
    do {                                                                                           \
        if (!has_line(out, line))                                                                  \
            fprintf(stderr, "missing line: %s\n", line);                                           \
        CHECK(has_line(out, line));                                                                \
    } while (0)

int main(int argc, char **argv)
{
    static char without[1 << 16], with[1 << 16], a[1 << 16], b[1 << 16];
    const char *lib = getenv("VGPU_TEST_LIB"), *fake = getenv("VGPU_TEST_FAKE_DIR");
    const char *nov4 = getenv("VGPU_TEST_NOV4_DIR"), *linked = getenv("VGPU_TEST_LINKED");
    static const char *const modes[] = {"none", "local", "global", "dep"};

    if (argc == 5 && strcmp(argv[1], "probe") == 0)
        return probe(argv[2], argv[3], argv[4]);
    if (lib == NULL || fake == NULL || nov4 == NULL) {
        fprintf(stderr, "dlsym_test: set VGPU_TEST_LIB, VGPU_TEST_FAKE_DIR, VGPU_TEST_NOV4_DIR\n");
        return 2;
    }
    for (int d = 0; d < 2; d++) {
        const char *dir = d == 0 ? fake : nov4;

        for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
            char what[256];

            /* The probe library links the standard fake only. */
            if (d == 1 && strcmp(modes[m], "dep") == 0)
                continue;
            snprintf(what, sizeof(what), "%s %s", d == 0 ? "fake" : "fake without cuCtxCreate_v4",
                     modes[m]);
            CHECK_EQ(run_probe(dir, modes[m], NULL, without, sizeof(without)), 0);
            CHECK_EQ(run_probe(dir, modes[m], lib, with, sizeof(with)), 0);
            plain(with, b, sizeof(b));
            plain(without, a, sizeof(a));
            vgpu_test_compare_lines(what, "without:", a, "with:   ", b, 1);
            CHECK(strstr(without, "sym vgpu") == NULL);
            if (strcmp(modes[m], "global") == 0) {
                EXPECT_LINE(with, "DEFAULT cuMemAlloc_v2: sym vgpu");
                EXPECT_LINE(with, "NEXT cuMemAlloc_v2: sym vgpu");
                EXPECT_LINE(with, "program cuMemAlloc_v2: sym vgpu");
                if (d == 0)
                    EXPECT_LINE(with, "DEFAULT cuCtxCreate_v4: sym vgpu");
                else
                    CHECK(strstr(with, "\nDEFAULT cuCtxCreate_v4: NULL ") != NULL);
            }
            if (strcmp(modes[m], "local") == 0 || strcmp(modes[m], "global") == 0) {
                EXPECT_LINE(with, "handle cuMemAlloc_v2: sym vgpu");
                EXPECT_LINE(with, "handle cuInit: sym vgpu");
                EXPECT_LINE(with, "handle cuDriverGetVersion: sym");
            }
            if (strcmp(modes[m], "dep") == 0) {
                EXPECT_LINE(with, "lib DEFAULT cuMemAlloc_v2: sym vgpu");
                EXPECT_LINE(with, "lib NEXT cuMemAlloc_v2: sym vgpu");
                EXPECT_LINE(with, "lib DEFAULT cuInit: sym vgpu");
                EXPECT_LINE(with, "lib DEFAULT cuDriverGetVersion: sym");
            }
        }
    }
    /* The driver linked through a library loaded after us: its RTLD_NEXT lookups see it. */
    if (linked != NULL) {
        CHECK_EQ(run_exe(linked, fake, "linked", NULL, without, sizeof(without)), 0);
        CHECK_EQ(run_exe(linked, fake, "linked", lib, with, sizeof(with)), 0);
        plain(with, b, sizeof(b));
        plain(without, a, sizeof(a));
        vgpu_test_compare_lines("fake linked", "without:", a, "with:   ", b, 1);
        EXPECT_LINE(with, "DEFAULT cuMemAlloc_v2: sym vgpu");
        EXPECT_LINE(with, "lib DEFAULT cuMemAlloc_v2: sym vgpu");
        EXPECT_LINE(with, "lib NEXT cuMemAlloc_v2: sym vgpu");
        EXPECT_LINE(with, "lib NEXT cuInit: sym vgpu");
        EXPECT_LINE(with, "lib NEXT cuDriverGetVersion: sym");
    }
    return check_report("dlsym_test");
}
