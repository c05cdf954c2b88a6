/*
 * fake_check.h - minimal assertion helpers for the fake driver tests.
 */
#ifndef VGPU_FAKE_CHECK_H
#define VGPU_FAKE_CHECK_H

#include <stdio.h>

extern int fake_check_failures;

/* Records a failure (with location) when cond is false; keeps going. */
#define CHECK(cond)                                                              \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
            fake_check_failures++;                                               \
        }                                                                        \
    } while (0)

/* Compares two integers, printing both on mismatch. */
#define CHECK_EQ(a, b)                                                           \
    do {                                                                         \
        long long a_ = (long long)(a), b_ = (long long)(b);                      \
        if (a_ != b_) {                                                          \
            fprintf(stderr, "%s:%d: CHECK_EQ failed: %s = %lld, %s = %lld\n", __FILE__, \
                    __LINE__, #a, a_, #b, b_);                                   \
            fake_check_failures++;                                               \
        }                                                                        \
    } while (0)

#endif /* VGPU_FAKE_CHECK_H */
