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

/* probe_run.c - see probe_run.h. */
#include "probe_run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

void vgpu_test_preload(const char *lib)
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

int vgpu_test_run_probe(const char *exe, const char *const args[], const char *lib,
                        const char *env, char *out, size_t len)
{
    const char *argv[16];
    int fd[2], status, argc = 0;
    size_t n = 0;
    ssize_t r;
    pid_t pid;

    argv[argc++] = exe;
    for (int i = 0; args[i] != NULL && argc < 15; i++)
        argv[argc++] = args[i];
    argv[argc] = NULL;
    if (pipe(fd) != 0)
        return -1;
    pid = fork();
    if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        close(fd[1]);
        vgpu_test_preload(lib);
        if (env != NULL)
            putenv((char *)env);
        execv(exe, (char *const *)argv);
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

int vgpu_test_run_self(const char *const args[], const char *lib, const char *env, char *out,
                       size_t len)
{
    static char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

    if (n < 0)
        return -1;
    exe[n] = '\0';
    return vgpu_test_run_probe(exe, args, lib, env, out, len);
}

void vgpu_test_compare_lines(const char *what, const char *a_name, const char *a,
                             const char *b_name, const char *b, int first_only)
{
    size_t line = 1;

    while (*a != '\0' || *b != '\0') {
        size_t la = strcspn(a, "\n"), lb = strcspn(b, "\n");

        if (la != lb || strncmp(a, b, la) != 0) {
            fprintf(stderr, "%s: line %zu differs:\n  %s %.*s\n  %s %.*s\n", what, line, a_name,
                    (int)la, a, b_name, (int)lb, b);
            CHECK(0);
            if (first_only)
                return;
        }
        a += la + (a[la] == '\n');
        b += lb + (b[lb] == '\n');
        line++;
    }
}
