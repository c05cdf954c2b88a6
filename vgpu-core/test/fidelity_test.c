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
 * fidelity_test.c - libvgpu.so against a fake driver that behaves like the
 * real one where it matters for interception.
 *
 * - The driver's own cuGetProcAddress returns the driver's own functions
 *   even with libvgpu.so preloaded (the fake is linked -Bsymbolic, as the
 *   real driver binds its table internally), so the pointer an application
 *   gets from the wrapper is libvgpu.so's only because the library's
 *   substitution ran. The test reads the fake's own resolver from its ELF
 *   symbol table (our dlsym would hand out the wrapper) to see both sides.
 * - Pinned host memory (cuMemAllocHost_v2, cuMemHostAlloc,
 *   cuMemHostRegister_v2 and their frees) passes through and never counts
 *   against the GPU limit.
 * - The legacy entry points cuMemAlloc, cuMemFree, cuMemGetInfo and
 *   cuDeviceTotalMem (no _v2) are limited like the _v2 ones.
 *
 * Run without arguments it is the driver (claim: GPU 0 limited to 1 GiB,
 * mounted read-only in a private mount namespace; needs root, skipped
 * otherwise); "scenario" runs preloaded, linked with -lcuda like lib_test.
 * Env: VGPU_TEST_LIB, VGPU_TEST_PRELOAD_PREFIX.
 */
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "claimns.h"
#include "vgpu_cuda.h"
#include "vgpu_region.h"

#define MiB (1024ull * 1024ull)
#define GiB (1024ull * MiB)

/* Claim-wide used bytes of GPU 0 in the claim's region. */
static uint64_t used0(void)
{
    char path[600];
    struct vgpu_region r;
    int fd;
    uint64_t used = UINT64_MAX;

    snprintf(path, sizeof(path), "%s/a/shm/region", getenv("VGPU_CLAIMS_ROOT"));
    fd = open(path, O_RDONLY);
    if (fd >= 0 && pread(fd, &r, sizeof(r), 0) == (ssize_t)sizeof(r)) {
        for (uint32_t i = 0; i < r.header.device_count && i < VGPU_REGION_MAX_DEVICES; i++) {
            if (strcmp(r.devices[i].uuid, getenv("VGPU_TEST_UUID0")) == 0)
                used = r.devices[i].used_bytes;
        }
    }
    if (fd >= 0)
        close(fd);
    return used;
}

/* The file a function pointer lies in. */
static const char *file_of(void *fn)
{
    Dl_info info;

    return dladdr(fn, &info) != 0 && info.dli_fname != NULL ? info.dli_fname : "?";
}

static const char *name_of(void *fn)
{
    Dl_info info;

    return dladdr(fn, &info) != 0 && info.dli_sname != NULL && info.dli_saddr == fn
               ? info.dli_sname : "?";
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);

    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/*
 * The definition of name in the shared object that holds anchor, read from
 * the object's file (.dynsym), so no dlsym, ours or the loader's, is involved.
 */
static void *own_symbol(void *anchor, const char *name)
{
    Dl_info info;
    struct stat st;
    const Elf64_Ehdr *eh;
    const Elf64_Shdr *sh;
    void *map = MAP_FAILED, *found = NULL;
    int fd = -1;

    if (dladdr(anchor, &info) == 0 || (fd = open(info.dli_fname, O_RDONLY)) < 0 ||
        fstat(fd, &st) != 0 ||
        (map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0)) == MAP_FAILED)
        goto out;
    eh = map;
    sh = (const Elf64_Shdr *)((const char *)map + eh->e_shoff);
    for (int i = 0; i < eh->e_shnum && found == NULL; i++) {
        const Elf64_Sym *sym;
        const char *strtab;

        if (sh[i].sh_type != SHT_DYNSYM)
            continue;
        sym = (const Elf64_Sym *)((const char *)map + sh[i].sh_offset);
        strtab = (const char *)map + sh[sh[i].sh_link].sh_offset;
        for (size_t k = 0; k < sh[i].sh_size / sizeof(*sym); k++) {
            if (sym[k].st_shndx != SHN_UNDEF && strcmp(strtab + sym[k].st_name, name) == 0)
                found = (char *)info.dli_fbase + sym[k].st_value;
        }
    }
out:
    if (map != MAP_FAILED)
        munmap(map, (size_t)st.st_size);
    if (fd >= 0)
        close(fd);
    return found;
}

/* The driver's own resolver returns its own functions; the wrapper substitutes ours. */
static void substitution(void)
{
    /* The driver's file, from a name libvgpu.so does not wrap. */
    PFN_cuGetProcAddress_v2 raw = own_symbol((void *)cuDriverGetVersion, "cuGetProcAddress_v2");
    const char *fake = file_of((void *)cuDriverGetVersion);
    CUdriverProcAddressQueryResult status;
    void *fn = NULL, *self = NULL, *w = NULL;
    CUdeviceptr p = 0;

    CHECK(raw != NULL && strcmp(file_of((void *)raw), fake) == 0);
    if (raw == NULL)
        return;
    CHECK(raw("cuMemAlloc", &fn, 12000, 0, &status) == CUDA_SUCCESS);
    CHECK(strcmp(file_of(fn), fake) == 0);
    CHECK(strcmp(name_of(fn), "cuMemAlloc_v2") == 0);
    CHECK(raw("cuGetProcAddress", &self, 12000, 0, NULL) == CUDA_SUCCESS && self == (void *)raw);

    /* What the application gets: our wrapper of that exact variant, and it is limited. */
    CHECK(cuGetProcAddress_v2("cuMemAlloc", &w, 12000, 0, &status) == CUDA_SUCCESS);
    CHECK(w != fn && ends_with(file_of(w), "libvgpu.so"));
    CHECK(strcmp(name_of(w), "cuMemAlloc_v2") == 0);
    CHECK(((PFN_cuMemAlloc_v2)w)(&p, 2 * GiB) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(((PFN_cuMemAlloc_v2)w)(&p, 512 * MiB) == CUDA_SUCCESS);
    CHECK_EQ_U64(used0(), 512 * MiB);
    CHECK(cuMemFree_v2(p) == CUDA_SUCCESS);
    CHECK_EQ_U64(used0(), 0);
    /* Per-thread variant, named by the driver's pointer. */
    CHECK(raw("cuLaunchKernel", &fn, 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
              NULL) == CUDA_SUCCESS && strcmp(file_of(fn), fake) == 0);
    CHECK(cuGetProcAddress_v2("cuLaunchKernel", &w, 12000,
                              CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, NULL) == CUDA_SUCCESS);
    CHECK(ends_with(file_of(w), "libvgpu.so") && strcmp(name_of(w), "cuLaunchKernel_ptsz") == 0);
    /* A name we do not wrap comes back as the driver's own. */
    CHECK(cuGetProcAddress_v2("cuDriverGetVersion", &w, 12000, 0, NULL) == CUDA_SUCCESS &&
          w == (void *)cuDriverGetVersion);
    /* cuInit is wrapped (the library starts there, before the driver reads its environment). */
    CHECK(cuGetProcAddress_v2("cuInit", &w, 12000, 0, NULL) == CUDA_SUCCESS &&
          ends_with(file_of(w), "libvgpu.so"));
}

/* Pinned host memory is not GPU memory: far beyond the GPU limit, nothing charged. */
static void pinned_host(void)
{
    void *a = NULL, *b = NULL, *c = NULL;
    char *reg = malloc(MiB);
    PFN_cuMemAllocHost_v2 alloc_host = NULL;
    size_t f = 0, t = 0;

    CHECK(cuMemAllocHost_v2(&a, 2 * GiB) == CUDA_SUCCESS && a != NULL);
    CHECK(cuMemHostAlloc(&b, 2 * GiB, 0) == CUDA_SUCCESS && b != NULL);
    if (a != NULL && b != NULL) {
        ((char *)a)[GiB] = 1; /* real host memory */
        ((char *)b)[0] = 1;
    }
    CHECK(reg != NULL && cuMemHostRegister_v2(reg, MiB, 0) == CUDA_SUCCESS);
    CHECK(cuGetProcAddress_v2("cuMemAllocHost", (void **)&alloc_host, 12000, 0, NULL) ==
          CUDA_SUCCESS);
    CHECK(alloc_host != NULL && alloc_host == cuMemAllocHost_v2);
    CHECK(alloc_host != NULL && alloc_host(&c, GiB) == CUDA_SUCCESS);
    CHECK(dlsym(RTLD_DEFAULT, "cuMemHostAlloc") == (void *)cuMemHostAlloc);
    CHECK_EQ_U64(used0(), 0);
    CHECK(cuMemGetInfo_v2(&f, &t) == CUDA_SUCCESS);
    CHECK_EQ_U64(t, GiB);
    CHECK_EQ_U64(f, GiB);
    CHECK(cuMemFreeHost(a) == CUDA_SUCCESS);
    CHECK(cuMemFreeHost(b) == CUDA_SUCCESS);
    CHECK(c == NULL || cuMemFreeHost(c) == CUDA_SUCCESS);
    CHECK(cuMemHostUnregister(reg) == CUDA_SUCCESS);
    CHECK(cuMemHostUnregister(reg) == CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
    free(reg);
}

/* The legacy (CUDA < 3.2) entry points are limited like the _v2 ones. */
static void legacy(void)
{
    CUdeviceptr_v1 p = 0, q = 0;
    unsigned int f = 0, t = 0, total = 0;
    PFN_cuMemAlloc viaproc = NULL, viadlsym;
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);

    CHECK(cuMemAlloc(&p, 0x80000000u) == CUDA_ERROR_OUT_OF_MEMORY && p == 0);
    CHECK(cuMemAlloc(&p, 512 * MiB) == CUDA_SUCCESS && p != 0);
    CHECK_EQ_U64(used0(), 512 * MiB);
    CHECK(cuMemGetInfo(&f, &t) == CUDA_SUCCESS);
    CHECK_EQ_U64(t, GiB);
    CHECK_EQ_U64(f, 512 * MiB);
    CHECK(cuDeviceTotalMem(&total, 0) == CUDA_SUCCESS);
    CHECK_EQ_U64(total, GiB);
    /* Reached by a CUDA 3.0 resolver request and by dlsym on the driver's handle. */
    CHECK(cuGetProcAddress("cuMemAlloc", (void **)&viaproc, 3000, 0) == CUDA_SUCCESS);
    CHECK(viaproc == cuMemAlloc);
    viadlsym = h != NULL ? (PFN_cuMemAlloc)dlsym(h, "cuMemAlloc") : NULL;
    CHECK(viadlsym == cuMemAlloc);
    CHECK(viadlsym != NULL && viadlsym(&q, 768 * MiB) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(cuMemFree(p) == CUDA_SUCCESS);
    CHECK_EQ_U64(used0(), 0);
    CHECK(cuMemGetInfo(&f, NULL) == CUDA_SUCCESS);
    CHECK_EQ_U64(f, GiB);
}

static int scenario(void)
{
    CUcontext ctx;

    CHECK(cuInit(0) == CUDA_SUCCESS);
    CHECK(cuDevicePrimaryCtxRetain(&ctx, 0) == CUDA_SUCCESS);
    CHECK(cuCtxSetCurrent(ctx) == CUDA_SUCCESS);
    substitution();
    pinned_host();
    legacy();
    return check_failures != 0;
}

int main(int argc, char **argv)
{
    const char *lib = getenv("VGPU_TEST_LIB"), *prefix = getenv("VGPU_TEST_PRELOAD_PREFIX");
    char root[] = "/tmp/vgpu-fidelity-XXXXXX", uuid[64], preload[8192], cmd[600], *p = uuid;
    CUuuid u;
    int ns, st;
    pid_t pid;

    if (argc == 2 && strcmp(argv[1], "scenario") == 0)
        return scenario();
    if (lib == NULL) {
        fprintf(stderr, "fidelity_test: needs VGPU_TEST_LIB\n");
        return 2;
    }
    ns = vgpu_test_claims_ns_supported();
    if (ns != 0) {
        check_unavailable("fidelity_test", "claims must be read-only mounts in a private mount "
                          "namespace, which needs root (unshare(CLONE_NEWNS): %s)", strerror(-ns));
        return check_report("fidelity_test");
    }
    /* Not preloaded here: the driver asks the fake directly. */
    CHECK(cuInit(0) == CUDA_SUCCESS && cuDeviceGetUuid_v2(&u, 0) == CUDA_SUCCESS);
    p += sprintf(p, "GPU-");
    for (int i = 0; i < 16; i++)
        p += sprintf(p, "%s%02x", i == 4 || i == 6 || i == 8 || i == 10 ? "-" : "",
                     (unsigned char)u.bytes[i]);
    if (mkdtemp(root) == NULL || rmdir(root) != 0 || vgpu_test_make_claim(root, uuid) != 0) {
        fprintf(stderr, "fidelity_test: cannot set up the claim under %s\n", root);
        return 1;
    }
    snprintf(preload, sizeof(preload), "%s%s%s", prefix ? prefix : "", prefix ? ":" : "", lib);
    fflush(NULL);
    pid = fork();
    if (pid == 0) {
        if (vgpu_test_enter_claims_ns(root) != 0)
            _exit(125);
        setenv("VGPU_CLAIMS_ROOT", root, 1);
        setenv("VGPU_TEST_UUID0", uuid, 1);
        setenv("LD_PRELOAD", preload, 1);
        execl(argv[0], argv[0], "scenario", (char *)NULL);
        _exit(127);
    }
    waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "fidelity_test: scenario exit status %d\n", st);
        check_failures++;
    } else {
        printf("ok   substitution path, pinned host memory, legacy entry points\n");
    }
    snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
    if (system(cmd) != 0)
        fprintf(stderr, "fidelity_test: cannot remove %s\n", root);
    return check_report("fidelity_test");
}
