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

/* mps_user_reply.c - the replies of vgpu_mps_user.h; see mps_user.h. */
#include "mps_user.h"

#include <stdio.h>
#include <string.h>

/* Parses a plain decimal uint32 of n bytes at s: digits, no leading zero. */
static int parse_u32(const char *s, size_t n, uint32_t *out)
{
    uint64_t v = 0;

    if (n == 0 || n > 10 || (n > 1 && s[0] == '0'))
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    if (v > UINT32_MAX)
        return -1;
    *out = (uint32_t)v;
    return 0;
}

/* "GPU-" then hex digits and dashes, 5..64 bytes. */
static bool valid_gpu(const char *s, size_t n)
{
    if (n < 5 || n > 64 || strncmp(s, "GPU-", 4) != 0)
        return false;
    for (size_t i = 4; i < n; i++) {
        char c = s[i];

        if (c != '-' && !(c >= '0' && c <= '9') && !(c >= 'a' && c <= 'f') && !(c >= 'A' && c <= 'F'))
            return false;
    }
    return true;
}

#define MAX_FIELDS 6

/* Splits the line (without its newline) at single spaces; -1 past MAX_FIELDS. */
static int split(const char *s, size_t n, const char *f[MAX_FIELDS], size_t fl[MAX_FIELDS])
{
    int k = 0;
    size_t start = 0;

    for (size_t i = 0; i <= n; i++) {
        if (i < n && s[i] != ' ')
            continue;
        if (k == MAX_FIELDS)
            return -1;
        f[k] = s + start;
        fl[k] = i - start;
        k++;
        start = i + 1;
    }
    return k;
}

static bool is(const char *f, size_t n, const char *word)
{
    return n == strlen(word) && memcmp(f, word, n) == 0;
}

int vgpu_mps_user_reply_parse(const char *msg, size_t len, struct vgpu_mps_user_reply *out)
{
    const char *f[MAX_FIELDS];
    size_t fl[MAX_FIELDS];
    int k;

    memset(out, 0, sizeof(*out));
    if (len == 0 || len > VGPU_MPS_USER_MSG_MAX || msg[len - 1] != '\n')
        return -1;
    k = split(msg, len - 1, f, fl);
    if (k == 2 && is(f[0], fl[0], VGPU_MPS_USER_ALLOWED)) {
        out->allowed = true;
        return parse_u32(f[1], fl[1], &out->asker);
    }
    if (k < 2 || !is(f[0], fl[0], VGPU_MPS_USER_REFUSED))
        return -1;
    if (k == 5 && is(f[1], fl[1], VGPU_MPS_USER_REFUSED_USER)) {
        if (!valid_gpu(f[2], fl[2]) || parse_u32(f[3], fl[3], &out->served) != 0 ||
            parse_u32(f[4], fl[4], &out->asker) != 0)
            return -1;
        memcpy(out->gpu, f[2], fl[2]);
        snprintf(out->reason, sizeof(out->reason), "%s", VGPU_MPS_USER_REFUSED_USER);
        return 0;
    }
    if (k == 2 && is(f[1], fl[1], VGPU_MPS_USER_REFUSED_REQUEST)) {
        snprintf(out->reason, sizeof(out->reason), "%s", VGPU_MPS_USER_REFUSED_REQUEST);
        return 0;
    }
    if (k == 3 && is(f[1], fl[1], VGPU_MPS_USER_REFUSED_LIMIT)) {
        snprintf(out->reason, sizeof(out->reason), "%s", VGPU_MPS_USER_REFUSED_LIMIT);
        return parse_u32(f[2], fl[2], &out->limit);
    }
    return -1;
}

void vgpu_mps_user_reply_message(const struct vgpu_mps_user_reply *r, char *buf, size_t size)
{
    if (r->allowed)
        snprintf(buf, size, "MPS allowed for uid %u", r->asker);
    else if (strcmp(r->reason, VGPU_MPS_USER_REFUSED_USER) == 0)
        snprintf(buf, size, "MPS on %s serves uid %u until its clients end; this process runs as uid %u",
                 r->gpu, r->served, r->asker);
    else if (strcmp(r->reason, VGPU_MPS_USER_REFUSED_LIMIT) == 0)
        snprintf(buf, size, "the claim's processes already hold %u MPS connections, its bound", r->limit);
    else
        snprintf(buf, size, "the kubelet plugin found the request malformed");
}
