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
 * hooks.h - the table of wrapped names and the lookups that hand our
 * wrappers out: dlsym (any handle) and cuGetProcAddress; dlerror after a
 * lookup we answered NULL.
 */
#ifndef VGPU_HOOKS_H
#define VGPU_HOOKS_H

#include <stdbool.h>

#include "vgpu_cuda.h"

/* True for names libvgpu.so may intercept: cu[A-Z]* and nvml[A-Z]*. */
bool vgpu_hook_name_matches(const char *name);

/*
 * Called by the dlsym trampoline with dlsym's arguments and the caller's
 * return address. Returns our wrapper where the real lookup would give the
 * function (the driver's, or anything past libvgpu.so where we are found
 * first) and the loaded driver has it; &vgpu_dlsym_null where the real
 * lookup would find only our export (the trampoline then returns NULL, and
 * dlerror() says what it would say without us); NULL to let the real dlsym
 * run with the caller's return address intact (RTLD_NEXT keeps its
 * meaning).
 */
void *vgpu_dlsym_intercept(void *handle, const char *name, const void *caller);

/* The marker vgpu_dlsym_intercept returns for "the answer is NULL". */
extern char vgpu_dlsym_null;

/*
 * The exported dlerror: the real one, except right after a lookup that
 * vgpu_dlsym_intercept answered NULL, where it gives the message the real
 * lookup would have left without libvgpu.so.
 */
char *dlerror(void);

#endif /* VGPU_HOOKS_H */
