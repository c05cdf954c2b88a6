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
