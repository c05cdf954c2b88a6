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

/* gen_ours.c - prints decls.def evaluated with our headers as #defines for check_real.c. */
#include <stddef.h>
#include <stdio.h>

#include "vgpu_cuda.h"
#include "vgpu_nvml.h"

int main(void)
{
#define SIZE(T) printf("#define OURS_SIZE_%s %zuULL\n", #T, sizeof(T));
#define OFF(T, f) printf("#define OURS_OFF_%s_%s %zuULL\n", #T, #f, offsetof(T, f));
#define VAL(v) printf("#define OURS_VAL_%s %lluULL\n", #v, (unsigned long long)(v));
#include "decls.def"
    return 0;
}
