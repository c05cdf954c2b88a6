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
 * dlsym_probe_lib.c - a library linked with -lcuda that dlsym_test opens
 * RTLD_LOCAL: its lookups are made from an object whose own scope holds the
 * driver while the program's does not.
 */
#include <dlfcn.h>

void *dlsym_probe_default(const char *name);
void *dlsym_probe_next(const char *name);

/* dlsym(RTLD_DEFAULT, name) made from this library. */
void *dlsym_probe_default(const char *name)
{
    return dlsym(RTLD_DEFAULT, name);
}

/* dlsym(RTLD_NEXT, name) made from this library. */
void *dlsym_probe_next(const char *name)
{
    return dlsym(RTLD_NEXT, name);
}
