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
 * probe_run.h - the with-and-without comparison the transparency tests
 * share: run a probe program once without libvgpu.so and once with it,
 * capture what it prints, and compare the two outputs line by line.
 */
#ifndef VGPU_TEST_PROBE_RUN_H
#define VGPU_TEST_PROBE_RUN_H

#include <stddef.h>

/*
 * Sets LD_PRELOAD for a probe: lib (NULL: none) after
 * VGPU_TEST_PRELOAD_PREFIX (the sanitizer runtime, which must come first,
 * and so is preloaded without lib too).
 */
void vgpu_test_preload(const char *lib);

/*
 * Runs exe with args (NULL-terminated, args[0] first after exe itself),
 * lib preloaded (vgpu_test_preload) and env ("K=V", or NULL) added; its
 * stdout goes to out (at most len - 1 bytes, NUL-terminated). Returns its
 * exit status, or -1 when it could not run or did not exit.
 */
int vgpu_test_run_probe(const char *exe, const char *const args[], const char *lib,
                        const char *env, char *out, size_t len);

/* vgpu_test_run_probe of this program itself (/proc/self/exe). */
int vgpu_test_run_self(const char *const args[], const char *lib, const char *env, char *out,
                       size_t len);

/*
 * Compares two outputs line by line and counts a failed check for each
 * difference (only the first when first_only), printing the line number and
 * both lines, labelled a_name and b_name.
 */
void vgpu_test_compare_lines(const char *what, const char *a_name, const char *a,
                             const char *b_name, const char *b, int first_only);

#endif /* VGPU_TEST_PROBE_RUN_H */
