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
 * rtld_next_test.c - RTLD_NEXT regression (run preloaded with libvgpu.so,
 * built at -O0): dlsym(RTLD_NEXT) from libnextuser.so must resolve relative
 * to libnextuser.so, i.e. reach libc's getppid.
 */
#include <dlfcn.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "check.h"

pid_t getppid(void);
void *rtld_next_target(void);

int main(void)
{
    Dl_info info;
    void *target;

    CHECK(getppid() == (pid_t)syscall(SYS_getppid));
    target = rtld_next_target();
    CHECK(target != NULL && dladdr(target, &info) != 0);
    if (target != NULL && dladdr(target, &info) != 0)
        CHECK_STR_CONTAINS(info.dli_fname, "libc.so");
    /* The hook is really in place: dlsym itself resolves to libvgpu.so. */
    CHECK(dladdr((void *)dlsym, &info) != 0);
    CHECK_STR_CONTAINS(info.dli_fname, "libvgpu");
    return check_report("rtld_next_test");
}
