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
 * rtld_next_lib.c - a library loaded after libvgpu.so that interposes
 * getppid and forwards with dlsym(RTLD_NEXT, ...), as tracing and
 * allocator libraries do. Built at -O0. If libvgpu.so's dlsym lost the
 * caller, RTLD_NEXT would resolve relative to libvgpu.so and find this very
 * function again (endless recursion).
 */
#include <dlfcn.h>
#include <unistd.h>

pid_t getppid(void);
void *rtld_next_target(void);

/* Where RTLD_NEXT led, for the test to inspect. */
static void *next_getppid;

void *rtld_next_target(void)
{
    return next_getppid;
}

pid_t getppid(void)
{
    pid_t (*real)(void);

    *(void **)&real = dlsym(RTLD_NEXT, "getppid");
    next_getppid = *(void **)&real;
    if (real == NULL || real == getppid)
        return -1;
    return real();
}
