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
 * log.h - stderr logging of libvgpu.so, prefixed "[vgpu]".
 *
 * The level comes from the claim config (log_level) or LIBCUDA_LOG_LEVEL and
 * is set once during lazy initialisation; nothing is printed before that
 * unless it is an error.
 */
#ifndef VGPU_LOG_H
#define VGPU_LOG_H

enum vgpu_log_level {
    VGPU_LOG_ERROR = 0,
    VGPU_LOG_WARNING = 1,
    VGPU_LOG_INFO = 2,
    VGPU_LOG_DEBUG = 3,
};

/* Sets the level below which messages are dropped. */
void vgpu_log_set_level(enum vgpu_log_level level);

/*
 * Parses "error|warning|info|debug" or the HAMi digits "0".."4" (4 = debug)
 * into *level. Returns 0, or -1 for anything else (*level unchanged).
 */
int vgpu_log_parse_level(const char *s, enum vgpu_log_level *level);

/* Prints one line "[vgpu] <LEVEL> pid <pid>: <message>" when level is enabled. */
void vgpu_log(enum vgpu_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#define VGPU_ERROR(...) vgpu_log(VGPU_LOG_ERROR, __VA_ARGS__)
#define VGPU_WARN(...) vgpu_log(VGPU_LOG_WARNING, __VA_ARGS__)
#define VGPU_INFO(...) vgpu_log(VGPU_LOG_INFO, __VA_ARGS__)
#define VGPU_DEBUG(...) vgpu_log(VGPU_LOG_DEBUG, __VA_ARGS__)

#endif /* VGPU_LOG_H */
