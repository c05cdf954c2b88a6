/* check_real.c - static asserts: NVIDIA's cuda.h / nvml.h agree with our declarations. */
#include <cuda.h>
#include <nvml.h>
#include <stddef.h>

#include "ours.h"

#define SIZE(T) _Static_assert(sizeof(T) == OURS_SIZE_##T, "sizeof " #T);
#define OFF(T, f) _Static_assert(offsetof(T, f) == OURS_OFF_##T##_##f, "offsetof " #T "." #f);
#define VAL(v) _Static_assert((unsigned long long)(v) == OURS_VAL_##v, "value of " #v);
#include "decls.def"

int main(void)
{
    return 0;
}
