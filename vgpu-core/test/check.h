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
 * check.h - minimal assertions for every C test of vgpu-core (library, fake
 * drivers, limiter): a failed check prints where and what, counts, and lets
 * the test go on so one run shows every failure.
 */
#ifndef VGPU_CHECK_H
#define VGPU_CHECK_H

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * The failure count of the program. Weak, so that a test program split into
 * several files (lib_test) has one counter, not one per file.
 */
__attribute__((weak)) int check_failures;
/* The parts of the program that could not run here (check_unavailable). */
__attribute__((weak)) int check_unrun;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);               \
            check_failures++;                                                                      \
        }                                                                                          \
    } while (0)

#define CHECK_EQ_U64(a, b)                                                                         \
    do {                                                                                           \
        uint64_t a_ = (uint64_t)(a), b_ = (uint64_t)(b);                                           \
        if (a_ != b_) {                                                                            \
            fprintf(stderr, "%s:%d: CHECK failed: %s == %s (%" PRIu64 " != %" PRIu64 ")\n",        \
                    __FILE__, __LINE__, #a, #b, a_, b_);                                           \
            check_failures++;                                                                      \
        }                                                                                          \
    } while (0)

/* Compares two signed integers (or enum results), printing both on mismatch. */
#define CHECK_EQ(a, b)                                                                             \
    do {                                                                                           \
        long long a_ = (long long)(a), b_ = (long long)(b);                                        \
        if (a_ != b_) {                                                                            \
            fprintf(stderr, "%s:%d: CHECK failed: %s == %s (%lld != %lld)\n", __FILE__, __LINE__, \
                    #a, #b, a_, b_);                                                               \
            check_failures++;                                                                      \
        }                                                                                          \
    } while (0)

#define CHECK_STR_CONTAINS(hay, needle)                                                            \
    do {                                                                                           \
        if (strstr((hay), (needle)) == NULL) {                                                     \
            fprintf(stderr, "%s:%d: CHECK failed: \"%s\" contains \"%s\"\n", __FILE__, __LINE__,   \
                    (hay), (needle));                                                              \
            check_failures++;                                                                      \
        }                                                                                          \
    } while (0)

/*
 * A part of the test (what, e.g. "lib_test" or "lib_test hostpid") cannot
 * run on this machine, for the reason fmt says (typically: no private mount
 * namespace without root). Under CI (the CI environment variable set, as
 * .ci/run does) that is a failed check: there a suite that did not run must
 * not pass. Elsewhere it prints "skip WHAT: reason", counts the part for
 * check_report and appends "WHAT: reason" to the file VGPU_TEST_SKIP_LOG
 * names, from which `make test` tells how many suites did not run.
 */
__attribute__((format(printf, 2, 3))) static inline void check_unavailable(const char *what,
                                                                             const char *fmt, ...)
{
    const char *ci = getenv("CI"), *log = getenv("VGPU_TEST_SKIP_LOG");
    char why[512];
    va_list ap;
    FILE *f;

    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    if (ci != NULL && ci[0] != '\0') {
        fprintf(stderr, "%s: CHECK failed: did not run under CI: %s\n", what, why);
        check_failures++;
        return;
    }
    printf("skip %s: %s\n", what, why);
    check_unrun++;
    if (log != NULL && log[0] != '\0' && (f = fopen(log, "a")) != NULL) {
        fprintf(f, "%s: %s\n", what, why);
        fclose(f);
    }
}

/* Ends a test program: prints a summary, returns its exit status. */
static inline int check_report(const char *prog)
{
    if (check_failures != 0) {
        fprintf(stderr, "%s: %d check(s) FAILED\n", prog, check_failures);
        return 1;
    }
    if (check_unrun != 0)
        printf("%s: all checks that ran passed; %d part(s) did not run (skip lines above)\n", prog,
               check_unrun);
    else
        printf("%s: all checks passed\n", prog);
    return 0;
}

#endif /* VGPU_CHECK_H */
