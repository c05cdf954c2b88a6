/*
 * hooks.h - the table of wrapped names and the lookups that hand our
 * wrappers out: dlsym (any handle) and cuGetProcAddress.
 */
#ifndef VGPU_HOOKS_H
#define VGPU_HOOKS_H

#include <stdbool.h>

#include "vgpu_cuda.h"

/* True for names libvgpu.so may intercept: cu[A-Z]* and nvml[A-Z]*. */
bool vgpu_hook_name_matches(const char *name);

/*
 * Given what the real cuGetProcAddress returned for (symbol, version,
 * flags), returns the wrapper of the exact variant fn is (its exported name,
 * found with dladdr), or fn itself when we do not wrap that variant.
 */
void *vgpu_hook_substitute(const char *symbol, void *fn, int version, cuuint64_t flags);

/*
 * Called by the dlsym trampoline: returns our wrapper if the lookup of name
 * in handle is one we intercept, or NULL to let the real dlsym run with the
 * caller's return address intact (RTLD_NEXT keeps its meaning).
 */
void *vgpu_dlsym_intercept(void *handle, const char *name);

#endif /* VGPU_HOOKS_H */
