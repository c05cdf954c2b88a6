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

/* burstfile.c - see burstfile.h. */
#include "burstfile.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* Parses the grant: digits only up to '\n', no sign, no leading zero, at most the maximum. */
static bool grant_field(const char **p, const char *end, uint64_t *out)
{
    const char *s = *p;
    uint64_t v = 0;

    if (s >= end || *s < '0' || *s > '9' || (*s == '0' && s + 1 < end && s[1] != '\n'))
        return false;
    for (; s < end && *s >= '0' && *s <= '9'; s++) {
        v = v * 10 + (uint64_t)(*s - '0');
        if (v > VGPU_BURST_MAX_GRANT)
            return false; /* checked at each digit: no overflow */
    }
    if (s >= end || *s != '\n')
        return false;
    *p = s + 1;
    *out = v;
    return true;
}

int vgpu_burstfile_parse(const char *text, size_t len, struct vgpu_burst_grant *out, int max,
                         char err[VGPU_ERRMSG_MAX])
{
    const char *p = text, *end = text + len;
    int n = 0, line = 1;

    if (len > VGPU_BURST_MAX_BYTES) {
        snprintf(err, VGPU_ERRMSG_MAX, "%zu bytes, more than %d", len, VGPU_BURST_MAX_BYTES);
        return -1;
    }
    if (len < strlen(VGPU_BURST_HEADER) ||
        memcmp(text, VGPU_BURST_HEADER, strlen(VGPU_BURST_HEADER)) != 0) {
        snprintf(err, VGPU_ERRMSG_MAX, "line 1: want \"version=1\"");
        return -1;
    }
    p += strlen(VGPU_BURST_HEADER);
    while (p < end) {
        char uuid[VGPU_BURST_UUID_LEN + 1];
        uint64_t bytes;

        line++;
        if (n == max) {
            snprintf(err, VGPU_ERRMSG_MAX, "line %d: more than %d GPUs", line, max);
            return -1;
        }
        if ((size_t)(end - p) < strlen(VGPU_BURST_KEYWORD) + VGPU_BURST_UUID_LEN + 1 ||
            memcmp(p, VGPU_BURST_KEYWORD, strlen(VGPU_BURST_KEYWORD)) != 0 ||
            p[strlen(VGPU_BURST_KEYWORD) + VGPU_BURST_UUID_LEN] != ' ') {
            snprintf(err, VGPU_ERRMSG_MAX, "line %d: want \"gpu <uuid> <bytes>\"", line);
            return -1;
        }
        memcpy(uuid, p + strlen(VGPU_BURST_KEYWORD), VGPU_BURST_UUID_LEN);
        uuid[VGPU_BURST_UUID_LEN] = '\0';
        if (!vgpu_uuid_valid(uuid)) {
            snprintf(err, VGPU_ERRMSG_MAX, "line %d: not a GPU UUID", line);
            return -1;
        }
        p += strlen(VGPU_BURST_KEYWORD) + VGPU_BURST_UUID_LEN + 1;
        if (!grant_field(&p, end, &bytes)) {
            snprintf(err, VGPU_ERRMSG_MAX, "line %d: grant not a decimal number of bytes up to %llu",
                     line, (unsigned long long)VGPU_BURST_MAX_GRANT);
            return -1;
        }
        for (int i = 0; i < n; i++) {
            if (strcasecmp(out[i].uuid, uuid) == 0) {
                snprintf(err, VGPU_ERRMSG_MAX, "line %d: GPU %s listed twice", line, uuid);
                return -1;
            }
        }
        memcpy(out[n].uuid, uuid, sizeof(uuid));
        out[n].bytes = bytes;
        n++;
    }
    return n;
}

uint64_t vgpu_burstfile_lookup(const struct vgpu_burst_grant *g, int n, const char *uuid)
{
    for (int i = 0; i < n; i++) {
        if (strcasecmp(g[i].uuid, uuid) == 0)
            return g[i].bytes;
    }
    return 0;
}

uint64_t vgpu_burstfile_limit(uint64_t guarantee, uint64_t grant)
{
    return grant > UINT64_MAX - guarantee ? UINT64_MAX : guarantee + grant;
}
