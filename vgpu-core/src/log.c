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

/* log.c - see log.h. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Process-wide by nature: one stderr, one level. Relaxed atomics suffice. */
static int current_level = VGPU_LOG_WARNING;

void vgpu_log_set_level(enum vgpu_log_level level)
{
    __atomic_store_n(&current_level, (int)level, __ATOMIC_RELAXED);
}

int vgpu_log_parse_level(const char *s, enum vgpu_log_level *level)
{
    static const struct {
        const char *name;
        enum vgpu_log_level level;
    } names[] = {
        {"error", VGPU_LOG_ERROR}, {"warning", VGPU_LOG_WARNING},
        {"info", VGPU_LOG_INFO},   {"debug", VGPU_LOG_DEBUG},
        /* HAMi-core's LIBCUDA_LOG_LEVEL digits. */
        {"0", VGPU_LOG_ERROR},     {"1", VGPU_LOG_WARNING},
        {"2", VGPU_LOG_WARNING},   {"3", VGPU_LOG_INFO},
        {"4", VGPU_LOG_DEBUG},
    };
    if (s == NULL)
        return -1;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (strcmp(s, names[i].name) == 0) {
            *level = names[i].level;
            return 0;
        }
    }
    return -1;
}

void vgpu_log(enum vgpu_log_level level, const char *fmt, ...)
{
    static const char *const tags[] = {"ERROR", "WARNING", "INFO", "DEBUG"};
    char line[512];
    int n;
    va_list ap;

    if ((int)level > __atomic_load_n(&current_level, __ATOMIC_RELAXED))
        return;
    n = snprintf(line, sizeof(line), "[vgpu] %s pid %d: ", tags[level], (int)getpid());
    if (n < 0)
        return;
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
    va_end(ap);
    n = (int)strlen(line);
    line[n++] = '\n';
    /* One write() keeps lines of concurrent processes whole. */
    if (write(STDERR_FILENO, line, (size_t)n) < 0)
        return;
}
