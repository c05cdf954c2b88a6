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
