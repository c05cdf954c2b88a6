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
 * parse.h - strict parsers for sizes and small integers.
 *
 * Values come from env vars and the claim config, i.e. from people and
 * plugins; anything ambiguous is rejected rather than guessed.
 */
#ifndef VGPU_PARSE_H
#define VGPU_PARSE_H

#include <stdint.h>

/*
 * Parses a memory size: optional surrounding whitespace, decimal digits (no
 * sign, no leading zero except "0" itself, no fraction, no hex/octal), then
 * an optional binary unit: one of k K m M g G t T, optionally followed by
 * "i", "iB" or "B" (all units are powers of 1024, as HAMi's env values
 * "<n>m" and "<n>g" mean MiB and GiB). "0" means unlimited.
 * Returns 0 and sets *out, -EINVAL for malformed text, -ERANGE on overflow.
 */
int vgpu_parse_size(const char *s, uint64_t *out);

/*
 * Parses a plain decimal integer in [0, max] with the same rules as
 * vgpu_parse_size but no unit. Returns 0, -EINVAL or -ERANGE.
 */
int vgpu_parse_uint(const char *s, uint64_t max, uint64_t *out);

#endif /* VGPU_PARSE_H */
