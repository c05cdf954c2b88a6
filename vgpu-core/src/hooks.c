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

/* hooks.c - see hooks.h. */
#include "hooks.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "driver.h"
#include "log.h"
#include "process.h"

struct hook {
    const char *name;
    void *wrapper;
    void *const *real; /* member of vgpu_cu / vgpu_nvml; NULL there if the driver lacks it */
    bool nvml;
};

#define CUDA_HOOK(n) {#n, (void *)n, (void *const *)&vgpu_cu.n, false},
#define NVML_HOOK(n) {#n, (void *)n, (void *const *)&vgpu_nvml.n, true},

static const struct hook hooks[] = {
    VGPU_CUDA_WRAPPED(CUDA_HOOK)
    VGPU_NVML_WRAPPED(NVML_HOOK)
};

VGPU_NO_SANITIZE bool vgpu_hook_name_matches(const char *name)
{
    /* No libc calls here: this runs for every dlsym, even inside sanitizer init. */
    if (name[0] == 'c' && name[1] == 'u')
        return name[2] >= 'A' && name[2] <= 'Z';
    if (name[0] == 'n' && name[1] == 'v' && name[2] == 'm' && name[3] == 'l')
        return name[4] >= 'A' && name[4] <= 'Z';
    return false;
}

static const struct hook *find(const char *name)
{
    for (size_t i = 0; i < sizeof(hooks) / sizeof(hooks[0]); i++) {
        if (strcmp(hooks[i].name, name) == 0)
            return &hooks[i];
    }
    return NULL;
}

/* The variant a resolver would pick for symbol by name, version and flags. */
static const struct hook *by_request(const char *symbol, int version, cuuint64_t flags)
{
    const struct hook *h = NULL;
    char name[128];

    if (symbol == NULL || strlen(symbol) + sizeof("_ptsz") > sizeof(name))
        return NULL;
    if (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) {
        snprintf(name, sizeof(name), "%s_ptsz", symbol);
        h = find(name);
    }
    /* Every _v2 we wrap appeared in CUDA 3.2. */
    if (h == NULL && version >= 3020) {
        snprintf(name, sizeof(name), "%s_v2", symbol);
        h = find(name);
    }
    return h != NULL ? h : find(symbol);
}

/*
 * Given what the real cuGetProcAddress returned for (symbol, version,
 * flags), returns the wrapper of the exact variant fn is (its exported name,
 * found with dladdr), or fn itself when we do not wrap that variant.
 */
static void *hook_substitute(const char *symbol, void *fn, int version, cuuint64_t flags)
{
    const struct hook *h = NULL;
    Dl_info info;

    /* The exported name of fn says exactly which variant the driver chose. */
    if (dladdr(fn, &info) != 0 && info.dli_sname != NULL && info.dli_saddr == fn) {
        h = find(info.dli_sname);
    } else {
        /* Unnamed entry point: match it against the exports we resolved, then by request. */
        for (size_t i = 0; i < sizeof(hooks) / sizeof(hooks[0]) && h == NULL; i++) {
            if (*hooks[i].real == fn)
                h = &hooks[i];
        }
        if (h == NULL)
            h = by_request(symbol, version, flags);
    }
    if (h == NULL || h->nvml || *h->real == NULL)
        return fn;
    VGPU_DEBUG("cuGetProcAddress(%s, %d, %llu): wrapped by %s", symbol, version,
               (unsigned long long)flags, h->name);
    return h->wrapper;
}

/*
 * Whether a driver library the process has loaded exports the function h
 * wraps. Never loads one: without libvgpu.so the lookup would fail too.
 */
static bool driver_has(const struct hook *h)
{
    if (!(h->nvml ? vgpu_driver_nvml_present() : vgpu_driver_cuda_present()))
        return false;
    return *h->real != NULL;
}

/* ---------------------------------------------------------------------- */
/* dlsym(RTLD_DEFAULT / RTLD_NEXT): what the lookup gives without us      */
/* ---------------------------------------------------------------------- */

/* Returned to the trampoline for "return NULL, dlerror is set" (see hooks.h). */
char vgpu_dlsym_null;

/* The loaded object that contains addr, or NULL. */
static struct link_map *map_of(const void *addr)
{
    struct link_map *lm = NULL;
    Dl_info info;

    if (dladdr1(addr, &info, (void **)&lm, RTLD_DL_LINKMAP) == 0)
        return NULL;
    return lm;
}

/* libvgpu.so's own entry in the loader's list. */
static struct link_map *self_map(void)
{
    return map_of((const void *)vgpu_dlsym_intercept);
}

/* The head of the loader's list: the program (glibc's caller for an address in no object). */
static struct link_map *program_map(struct link_map *any)
{
    while (any != NULL && any->l_prev != NULL)
        any = any->l_prev;
    return any;
}

/* Whether lm comes before libvgpu.so in the loader's list (the program, earlier preloads). */
static bool before_self(const struct link_map *lm, struct link_map *self)
{
    for (struct link_map *p = self != NULL ? self->l_prev : NULL; p != NULL; p = p->l_prev) {
        if (p == lm)
            return true;
    }
    return false;
}

/* Whether b comes after a in the loader's list. */
static bool after(const struct link_map *b, const struct link_map *a)
{
    for (const struct link_map *p = a != NULL ? a->l_next : NULL; p != NULL; p = p->l_next) {
        if (p == b)
            return true;
    }
    return false;
}

/*
 * The name glibc's messages give lm: its file name, the program's name for
 * the program (its l_name is empty; dladdr names it as the loader does).
 */
static void object_name(struct link_map *lm, char *buf, size_t len)
{
    Dl_info info;

    if (lm != NULL && lm->l_name != NULL && lm->l_name[0] != '\0')
        snprintf(buf, len, "%s", lm->l_name);
    else if (lm != NULL && dladdr(lm->l_ld, &info) != 0 && info.dli_fname != NULL)
        snprintf(buf, len, "%s", info.dli_fname);
    else
        buf[0] = '\0';
}

/*
 * dlerror for a lookup we answered NULL ourselves. glibc names the object
 * the lookup was made from (the caller, or the handle's object) in its
 * message, and none of our own lookups can fail under that name. So the
 * real error is produced by a failing lookup of the same name from
 * libvgpu.so, and our dlerror gives that message with libvgpu.so's name
 * replaced by the caller's, only while the real dlerror still holds exactly
 * that message (any dl call of the application's in between replaces or
 * clears it, as without us).
 */
static __thread struct {
    bool pending;
    char primed[512];  /* the real message our failing lookup left */
    char message[768]; /* what dlerror returns instead */
} dl_error;

static char *(*real_dlerror)(void);
static pthread_once_t dlerror_once = PTHREAD_ONCE_INIT;

/* d_ptr of a dynamic entry as an address (glibc relocates them in place on most targets). */
static const void *dyn_ptr(const struct link_map *lm, ElfW(Addr) p)
{
    return (const void *)(p < lm->l_addr ? p + lm->l_addr : p);
}

/* Whether symbol s, with names in str, is a function named name that its object defines. */
static int defines(const ElfW(Sym) *s, const char *str, const char *name)
{
    return s->st_shndx != SHN_UNDEF && ELF64_ST_TYPE(s->st_info) == STT_FUNC &&
           strcmp(str + s->st_name, name) == 0;
}

/*
 * The address of the function name defined by lm, from its dynamic symbol
 * table (GNU or SysV hash), without any dl call: a dl call would clear the
 * very error dlerror is asked for.
 */
static void *elf_lookup(const struct link_map *lm, const char *name)
{
    const ElfW(Sym) *sym = NULL;
    const char *str = NULL;
    const uint32_t *gnu = NULL, *sysv = NULL;
    uint32_t hash = 5381;

    for (const ElfW(Dyn) *d = lm->l_ld; d->d_tag != DT_NULL; d++) {
        if (d->d_tag == DT_SYMTAB)
            sym = dyn_ptr(lm, d->d_un.d_ptr);
        else if (d->d_tag == DT_STRTAB)
            str = dyn_ptr(lm, d->d_un.d_ptr);
        else if (d->d_tag == DT_GNU_HASH)
            gnu = dyn_ptr(lm, d->d_un.d_ptr);
        else if (d->d_tag == DT_HASH)
            sysv = dyn_ptr(lm, d->d_un.d_ptr);
    }
    if (sym == NULL || str == NULL)
        return NULL;
    if (gnu != NULL) {
        uint32_t nbuckets = gnu[0], symoffset = gnu[1], bloom_words = gnu[2], i;
        const uint32_t *buckets = (const uint32_t *)((const ElfW(Addr) *)(gnu + 4) + bloom_words);
        const uint32_t *chain = buckets + nbuckets;

        for (const char *c = name; *c != '\0'; c++)
            hash = hash * 33 + (unsigned char)*c;
        if (nbuckets == 0 || (i = buckets[hash % nbuckets]) < symoffset)
            return NULL;
        for (;; i++) {
            if ((chain[i - symoffset] | 1) == (hash | 1) && defines(&sym[i], str, name))
                return (void *)(lm->l_addr + sym[i].st_value);
            if (chain[i - symoffset] & 1)
                return NULL;
        }
    }
    if (sysv != NULL) {
        uint32_t nbucket = sysv[0];
        const uint32_t *chain = sysv + 2 + nbucket;

        hash = 0;
        for (const char *c = name; *c != '\0'; c++) {
            hash = (hash << 4) + (unsigned char)*c;
            hash = (hash ^ ((hash >> 24) & 0xf0)) & 0x0fffffff;
        }
        for (uint32_t i = nbucket != 0 ? sysv[2 + hash % nbucket] : 0; i != 0; i = chain[i]) {
            if (defines(&sym[i], str, name))
                return (void *)(lm->l_addr + sym[i].st_value);
        }
    }
    return NULL;
}

/*
 * The real dlerror: the first definition past libvgpu.so in the loader's
 * list (glibc's, in libc or, before 2.34, libdl), as RTLD_NEXT would find it.
 */
static void dlerror_bootstrap(void)
{
    for (struct link_map *lm = self_map(); lm != NULL && real_dlerror == NULL; lm = lm->l_next) {
        if (lm != self_map())
            *(void **)&real_dlerror = elf_lookup(lm, "dlerror");
    }
    /* No symbol table to read (never seen): the loader finds it, at the cost of one error. */
    if (real_dlerror == NULL) {
        vgpu_driver_dlsym_bootstrap();
        if (vgpu_real_dlsym != NULL)
            *(void **)&real_dlerror = vgpu_real_dlsym(RTLD_NEXT, "dlerror");
    }
}

/* Answers NULL for name as seen from object `from`; the global scope past us lacks name. */
static void *fail(struct link_map *from, const char *name)
{
    char self_name[512], from_name[512];
    const char *msg;
    size_t n;

    pthread_once(&dlerror_once, dlerror_bootstrap);
    dl_error.pending = false;
    object_name(self_map(), self_name, sizeof(self_name));
    object_name(from, from_name, sizeof(from_name));
    n = strlen(self_name);
    if (real_dlerror != NULL && vgpu_real_dlsym(RTLD_NEXT, name) == NULL &&
        (msg = real_dlerror()) != NULL && n > 0 && strncmp(msg, self_name, n) == 0 &&
        strlen(msg) < sizeof(dl_error.primed)) {
        snprintf(dl_error.primed, sizeof(dl_error.primed), "%s", msg);
        snprintf(dl_error.message, sizeof(dl_error.message), "%s%s", from_name, msg + n);
        dl_error.pending = true;
    }
    /* Leave the real error in place again: it is how dlerror knows nothing came between. */
    vgpu_real_dlsym(RTLD_NEXT, name);
    return &vgpu_dlsym_null;
}

char *dlerror(void)
{
    char *r;

    pthread_once(&dlerror_once, dlerror_bootstrap);
    if (real_dlerror == NULL)
        return NULL;
    r = real_dlerror();
    if (dl_error.pending) {
        dl_error.pending = false;
        if (r != NULL && strcmp(r, dl_error.primed) == 0)
            return dl_error.message;
    }
    return r;
}

/*
 * The answer when the lookup from `from` would find our export first: what
 * lies past libvgpu.so (w, NULL if nothing) decides. Our wrapper where the
 * loaded driver has the function, else what the application gets without
 * us, NULL included.
 */
static void *past_us(const struct hook *h, const char *name, void *w, struct link_map *from)
{
    if (w == NULL)
        return fail(from, name);
    return driver_has(h) ? h->wrapper : w;
}

/* A lookup of name in the object's own scope (it and its dependencies), never ours. */
static void *in_own_scope(const struct hook *h, const struct link_map *lm, const char *name)
{
    void *handle, *r = NULL;

    if (lm == NULL || lm->l_name == NULL || lm->l_name[0] == '\0')
        return NULL;
    handle = dlopen(lm->l_name, RTLD_LAZY | RTLD_NOLOAD);
    if (handle == NULL)
        return NULL;
    r = vgpu_real_dlsym(handle, name);
    dlclose(handle);
    return r == h->wrapper ? NULL : r;
}

/*
 * dlsym(RTLD_DEFAULT or RTLD_NEXT, name) for a wrapped name, from the
 * object `from`. Returns NULL to forward the call to the real dlsym
 * unchanged (the answer is the same with and without us).
 */
static void *special_lookup(const struct hook *h, void *handle, const char *name,
                            struct link_map *from)
{
    struct link_map *self = self_map();
    void *next;

    if (handle == RTLD_DEFAULT) {
        /*
         * The caller's scope starts with the global one, where we are: the
         * real lookup finds us unless an object before us defines name.
         */
        if (vgpu_real_dlsym(RTLD_DEFAULT, name) != h->wrapper)
            return NULL;
        next = vgpu_real_dlsym(RTLD_NEXT, name);
        /* An object opened RTLD_LOCAL also sees its own dependencies. */
        if (next == NULL && from != self && from != program_map(self))
            next = in_own_scope(h, from, name);
        return past_us(h, name, next, from);
    }
    /* RTLD_NEXT: the objects after the caller. From before us, that is us first. */
    if (from == program_map(self) || before_self(from, self))
        return past_us(h, name, vgpu_real_dlsym(RTLD_NEXT, name), from);
    /*
     * From after us the real lookup never sees us. Where the first
     * definition past us is the driver's and lies after the caller too, it
     * is the real answer: our wrapper stands in for it.
     */
    next = vgpu_real_dlsym(RTLD_NEXT, name);
    if (next != NULL && driver_has(h) && next == *h->real && after(map_of(next), from))
        return h->wrapper;
    /*
     * A library opened with the driver among its own dependencies: glibc
     * looks past it in that tree (its dependencies come after it there).
     */
    next = in_own_scope(h, from, name);
    if (next != NULL && driver_has(h) && next == *h->real)
        return h->wrapper;
    return NULL;
}

static void *lookup(void *handle, const char *name, const void *caller);

VGPU_NO_SANITIZE void *vgpu_dlsym_intercept(void *handle, const char *name, const void *caller)
{
    vgpu_driver_dlsym_bootstrap();
    if (name == NULL || !vgpu_hook_name_matches(name) || vgpu_real_dlsym == NULL)
        return NULL;
    return lookup(handle, name, caller);
}

/* The lookup of a cu[A-Z]* / nvml[A-Z]* name (protocol: vgpu_dlsym_intercept). */
static void *lookup(void *handle, const char *name, const void *caller)
{
    const struct hook *h = find(name);
    struct link_map *from, *self;
    void *r;

    if (h == NULL)
        return NULL;
    /* A driver the application unloaded and loaded again is resolved afresh. */
    vgpu_driver_revalidate();
    if (handle == RTLD_DEFAULT || handle == RTLD_NEXT) {
        self = self_map();
        from = map_of(caller);
        if (from == NULL)
            from = program_map(self);
        return special_lookup(h, handle, name, from);
    }
    r = vgpu_real_dlsym(handle, name);
    if (r == NULL) {
        /* The handle does not export it: let the real dlsym fail and set dlerror. */
        return NULL;
    }
    if (r != h->wrapper)
        return h->wrapper;
    /* The handle's scope holds us (the program's handle): what lies past us decides. */
    {
        struct link_map *lm = NULL;

        if (dlinfo(handle, RTLD_DI_LINKMAP, &lm) != 0)
            lm = NULL;
        return past_us(h, name, vgpu_real_dlsym(RTLD_NEXT, name), lm);
    }
}

/*
 * cuGetProcAddress(_v2): the driver's resolver answers (with the caller's
 * version and flags, so flags and symbolStatus are the driver's), then the
 * pointer it gave is replaced by our wrapper of that exact variant.
 */
CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
    CUresult rc;

    if (vgpu_driver_cuda_load() != 0 || vgpu_cu.cuGetProcAddress == NULL)
        return CUDA_ERROR_NOT_INITIALIZED;
    vgpu_process_init();
    rc = vgpu_cu.cuGetProcAddress(symbol, pfn, cudaVersion, flags);
    if (rc == CUDA_SUCCESS && pfn != NULL && *pfn != NULL)
        *pfn = hook_substitute(symbol, *pfn, cudaVersion, flags);
    return rc;
}

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                             CUdriverProcAddressQueryResult *symbolStatus)
{
    CUresult rc;

    if (vgpu_driver_cuda_load() != 0 || vgpu_cu.cuGetProcAddress_v2 == NULL)
        return CUDA_ERROR_NOT_INITIALIZED;
    vgpu_process_init();
    rc = vgpu_cu.cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, symbolStatus);
    if (rc == CUDA_SUCCESS && pfn != NULL && *pfn != NULL)
        *pfn = hook_substitute(symbol, *pfn, cudaVersion, flags);
    return rc;
}
