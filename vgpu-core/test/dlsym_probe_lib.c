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
