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

/* parse.c - see parse.h. */
#include "parse.h"

#include <errno.h>
#include <stddef.h>

static int is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* Parses the digits at *p, advancing it. Leading zeros are refused (octal ambiguity). */
static int parse_digits(const char **p, uint64_t *out)
{
    const char *s = *p;
    uint64_t v = 0;

    if (!is_digit(*s))
        return -EINVAL;
    if (s[0] == '0' && is_digit(s[1]))
        return -EINVAL;
    for (; is_digit(*s); s++) {
        uint64_t d = (uint64_t)(*s - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -ERANGE;
        v = v * 10 + d;
    }
    *p = s;
    *out = v;
    return 0;
}

/* Returns the shift of a unit letter, or -1. */
static int unit_shift(char c)
{
    switch (c) {
    case 'k': case 'K': return 10;
    case 'm': case 'M': return 20;
    case 'g': case 'G': return 30;
    case 't': case 'T': return 40;
    default: return -1;
    }
}

int vgpu_parse_size(const char *s, uint64_t *out)
{
    uint64_t v;
    int shift = 0;
    int rc;

    if (s == NULL)
        return -EINVAL;
    while (is_space(*s))
        s++;
    rc = parse_digits(&s, &v);
    if (rc != 0)
        return rc;
    if (*s != '\0' && !is_space(*s)) {
        shift = unit_shift(*s);
        if (shift < 0)
            return -EINVAL;
        s++;
        if (s[0] == 'i' && s[1] == 'B')
            s += 2;
        else if (s[0] == 'i' || s[0] == 'B')
            s++;
    }
    while (is_space(*s))
        s++;
    if (*s != '\0')
        return -EINVAL;
    if (shift > 0 && v > (UINT64_MAX >> shift))
        return -ERANGE;
    *out = v << shift;
    return 0;
}

int vgpu_parse_uint(const char *s, uint64_t max, uint64_t *out)
{
    uint64_t v;
    int rc;

    if (s == NULL)
        return -EINVAL;
    while (is_space(*s))
        s++;
    rc = parse_digits(&s, &v);
    if (rc != 0)
        return rc;
    while (is_space(*s))
        s++;
    if (*s != '\0')
        return -EINVAL;
    if (v > max)
        return -ERANGE;
    *out = v;
    return 0;
}
