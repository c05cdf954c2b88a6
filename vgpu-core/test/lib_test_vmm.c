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
 * lib_test_vmm.c - lib_test scenarios: VMM memory (cuMemCreate / cuMemMap /
 * cuMemRelease / cuMemUnmap / cuMemRetainAllocationHandle) is charged for as
 * long as the driver holds it, whatever the order of release and unmap.
 *
 * The driver's side of each check is the fake driver's own per-process
 * count, read from its state file (fake/fake_state.h) as ground truth: the
 * claim's counter must equal what the driver allocations of the claim's
 * live processes hold.
 */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "lib_test.h"
#include "vgpu_cuda.h"

#include "../fake/fake_state.h"

#define GRAN (2 * MiB) /* the fake's VMM granularity */

static const CUmemAllocationProp prop = {
    .type = CU_MEM_ALLOCATION_TYPE_PINNED,
    .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};

/* Bytes the fake driver holds for this process on GPU 0 (its own count, the ground truth). */
static uint64_t driver_held(void)
{
    static const fake_state_file *f;
    const char *dir = getenv("VGPU_FAKE_STATE_DIR");

    if (f == NULL) {
        char path[4096];
        int fd;
        void *p;

        snprintf(path, sizeof(path), "%s/state", dir != NULL ? dir : "/tmp/vgpu-fake-state");
        fd = open(path, O_RDONLY | O_CLOEXEC);
        CHECK(fd >= 0);
        if (fd < 0)
            return UINT64_MAX;
        p = mmap(NULL, sizeof(*f), PROT_READ, MAP_SHARED, fd, 0);
        close(fd);
        CHECK(p != MAP_FAILED);
        if (p == MAP_FAILED)
            return UINT64_MAX;
        f = p;
    }
    for (int i = 0; i < FAKE_MAX_SLOTS; i++) {
        if (atomic_load(&f->slots[i].active) && atomic_load(&f->slots[i].pid) == (uint32_t)getpid())
            return atomic_load(&f->slots[i].dev[0].used);
    }
    return 0;
}

/* What our own slot of the claim's region has charged (tracked + overhead). */
static uint64_t own_charged(void)
{
    struct region_view v;

    if (!region_view(claim_region(), getenv("VGPU_TEST_UUID0"), &v))
        return UINT64_MAX;
    return v.own_charged;
}

/* The claim counter, our slot's charge and the driver's count agree on want. */
#define CHECK_HELD(want)                                                                           \
    do {                                                                                           \
        CHECK_EQ_U64(driver_held(), (want));                                                       \
        CHECK_EQ_U64(used0(), (want));                                                             \
        CHECK_EQ_U64(own_charged(), (want));                                                       \
    } while (0)

static void set_access(CUdeviceptr va, size_t size)
{
    CUmemAccessDesc acc = {.location = prop.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};

    CHECK(cuMemSetAccess(va, size, &acc, 1) == CUDA_SUCCESS);
}

/*
 * NVIDIA's vectorAddMMAP sample: create, reserve, map, set access, release
 * the handle at once; the memory lives until the unmap. Under a 1 GiB claim
 * two 512 MiB rounds fit and the third is refused; memory queries in
 * between never turn the held memory into uncounted (or unchecked) overhead.
 */
void sc_vmm_sample(void)
{
    CUdeviceptr va[4] = {0};
    int made = 0;

    ctx_on(0);
    CHECK_HELD(0);
    for (int r = 0; r < 4; r++) {
        CUmemGenericAllocationHandle h = 0;
        CUresult rc = cuMemCreate(&h, 512 * MiB, &prop, 0);

        if (rc != CUDA_SUCCESS) {
            CHECK(rc == CUDA_ERROR_OUT_OF_MEMORY);
            break;
        }
        made++;
        CHECK(cuMemAddressReserve(&va[r], 512 * MiB, 0, 0, 0) == CUDA_SUCCESS);
        CHECK(cuMemMap(va[r], 512 * MiB, 0, h, 0) == CUDA_SUCCESS);
        set_access(va[r], 512 * MiB);
        CHECK(cuMemRelease(h) == CUDA_SUCCESS);
        CHECK_HELD((uint64_t)made * 512 * MiB);
    }
    CHECK_EQ_U64(made, 2);
    /* A memory query refreshes the overhead rule: nothing is added, the limit stays full. */
    CHECK_EQ_U64(mem_free(), 0);
    CHECK_HELD(GiB);
    {
        CUdeviceptr p = 0;

        CHECK(cuMemAlloc_v2(&p, GRAN) == CUDA_ERROR_OUT_OF_MEMORY);
    }
    for (int r = 0; r < made; r++) {
        CHECK(cuMemUnmap(va[r], 512 * MiB) == CUDA_SUCCESS);
        CHECK_HELD((uint64_t)(made - r - 1) * 512 * MiB);
        CHECK(cuMemAddressFree(va[r], 512 * MiB) == CUDA_SUCCESS);
    }
    CHECK_EQ_U64(mem_free(), GiB);
    CHECK_HELD(0);
}

/*
 * One handle mapped at two addresses, retained from an address, released
 * before and after its unmaps, a range cutting a mapping: the bytes are
 * charged once, for exactly as long as the driver keeps them.
 */
void sc_vmm_alias(void)
{
    CUmemGenericAllocationHandle h = 0, r1 = 0, r2 = 0, x = 0;
    CUdeviceptr va = 0;

    ctx_on(0);
    CHECK(cuMemCreate(&h, 512 * MiB, &prop, 0) == CUDA_SUCCESS);
    CHECK(cuMemAddressReserve(&va, 2 * GiB, 0, 0, 0) == CUDA_SUCCESS);
    CHECK(cuMemMap(va, 512 * MiB, 0, h, 0) == CUDA_SUCCESS);
    CHECK(cuMemMap(va + GiB, 512 * MiB, 0, h, 0) == CUDA_SUCCESS);
    set_access(va, 512 * MiB);
    set_access(va + GiB, 512 * MiB);
    CHECK_HELD(512 * MiB); /* aliasing maps the same memory: charged once */
    /* Retained from either address: the same allocation, not charged again. */
    CHECK(cuMemRetainAllocationHandle(&r1, (void *)(uintptr_t)(va + 4 * MiB)) == CUDA_SUCCESS);
    CHECK(cuMemRetainAllocationHandle(&r2, (void *)(uintptr_t)(va + GiB)) == CUDA_SUCCESS);
    CHECK_EQ_U64(r1, h);
    CHECK_EQ_U64(r2, h);
    CHECK_HELD(512 * MiB);
    CHECK(cuMemCreate(&x, 600 * MiB, &prop, 0) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(cuMemRelease(h) == CUDA_SUCCESS);
    CHECK(cuMemRelease(r1) == CUDA_SUCCESS);
    CHECK_HELD(512 * MiB);
    /* A range cutting a mapping is refused by the driver and changes nothing. */
    CHECK(cuMemUnmap(va, 256 * MiB) != CUDA_SUCCESS);
    CHECK_HELD(512 * MiB);
    CHECK(cuMemUnmap(va, 512 * MiB) == CUDA_SUCCESS);
    CHECK_HELD(512 * MiB); /* still mapped at va + 1 GiB, and r2 holds it */
    CHECK(cuMemRelease(r2) == CUDA_SUCCESS);
    CHECK_HELD(512 * MiB); /* every reference released: the second mapping holds it */
    CHECK(cuMemRelease(r2) != CUDA_SUCCESS); /* one release too many: the driver refuses */
    CHECK_HELD(512 * MiB);
    /* Retained again from the surviving mapping after every release. */
    CHECK(cuMemRetainAllocationHandle(&r1, (void *)(uintptr_t)(va + GiB)) == CUDA_SUCCESS);
    CHECK(cuMemUnmap(va + GiB, 512 * MiB) == CUDA_SUCCESS);
    CHECK_HELD(512 * MiB); /* the new reference holds it */
    CHECK(cuMemRelease(r1) == CUDA_SUCCESS);
    CHECK_HELD(0);
    /* Two handles mapped side by side, unmapped by one range. */
    CHECK(cuMemCreate(&h, 256 * MiB, &prop, 0) == CUDA_SUCCESS);
    CHECK(cuMemCreate(&x, 256 * MiB, &prop, 0) == CUDA_SUCCESS);
    CHECK(cuMemMap(va, 256 * MiB, 0, h, 0) == CUDA_SUCCESS);
    CHECK(cuMemMap(va + 256 * MiB, 256 * MiB, 0, x, 0) == CUDA_SUCCESS);
    CHECK(cuMemRelease(x) == CUDA_SUCCESS);
    CHECK_HELD(512 * MiB);
    CHECK(cuMemUnmap(va, 512 * MiB) == CUDA_SUCCESS);
    CHECK_HELD(256 * MiB); /* h is not released yet */
    CHECK(cuMemRelease(h) == CUDA_SUCCESS);
    CHECK_HELD(0);
    CHECK(cuMemAddressFree(va, 2 * GiB) == CUDA_SUCCESS);
}

/*
 * PyTorch's expandable segments: one large VA reservation (beyond the
 * limit: address space is free), chunks of 2..20 MiB mapped and unmapped at
 * random, each its own handle released right after mapping or only after
 * the unmap, unmaps of one chunk or of a run of adjacent chunks. After
 * every step the claim's counter is exactly the physical memory mapped or
 * held, and a chunk that does not fit under the limit is refused.
 */
void sc_vmm_expandable(void)
{
    enum { SLOTS = 256 };
    struct chunk {
        uint64_t size; /* 0: free slot */
        CUmemGenericAllocationHandle h;
        bool released;
    } c[SLOTS] = {{0}};
    const uint64_t slot_va = 20 * MiB;
    CUdeviceptr va = 0;
    unsigned seed = 12345;
    uint64_t model = 0, refused = 0;

    ctx_on(0);
    CHECK(cuMemAddressReserve(&va, SLOTS * slot_va, 0, 0, 0) == CUDA_SUCCESS);
    for (int step = 0; step < 3000 && check_failures == 0; step++) {
        int i = rand_r(&seed) % SLOTS;

        if (c[i].size == 0) {
            uint64_t size = GRAN * (1 + rand_r(&seed) % 10);
            CUresult rc = cuMemCreate(&c[i].h, size, &prop, 0);

            if (model + size > GiB) {
                CHECK(rc == CUDA_ERROR_OUT_OF_MEMORY);
                refused++;
                continue;
            }
            CHECK(rc == CUDA_SUCCESS);
            if (rc != CUDA_SUCCESS)
                break;
            CHECK(cuMemMap(va + i * slot_va, size, 0, c[i].h, 0) == CUDA_SUCCESS);
            set_access(va + i * slot_va, size);
            c[i].size = size;
            c[i].released = rand_r(&seed) % 2 == 0;
            if (c[i].released)
                CHECK(cuMemRelease(c[i].h) == CUDA_SUCCESS);
            model += size;
        } else if (rand_r(&seed) % 4 == 0) {
            /* A run of adjacent slots unmapped by one call, mapped from several handles. */
            int n = 1 + rand_r(&seed) % 4;

            if (i + n > SLOTS)
                n = SLOTS - i;
            CHECK(cuMemUnmap(va + i * slot_va, n * slot_va) == CUDA_SUCCESS);
            /* The released chunks are gone; the others are held until released. */
            for (int j = i; j < i + n; j++) {
                if (c[j].size != 0 && c[j].released) {
                    model -= c[j].size;
                    c[j].size = 0;
                }
            }
            CHECK_EQ_U64(used0(), model);
            for (int j = i; j < i + n; j++) {
                if (c[j].size != 0) {
                    CHECK(cuMemRelease(c[j].h) == CUDA_SUCCESS);
                    model -= c[j].size;
                    c[j].size = 0;
                    CHECK_EQ_U64(used0(), model);
                }
            }
        } else {
            CHECK(cuMemUnmap(va + i * slot_va, c[i].size) == CUDA_SUCCESS);
            if (!c[i].released) {
                CHECK_EQ_U64(used0(), model);
                CHECK(cuMemRelease(c[i].h) == CUDA_SUCCESS);
            }
            model -= c[i].size;
            c[i].size = 0;
        }
        CHECK_HELD(model);
    }
    CHECK(refused > 0); /* the limit was reached, and held */
    for (int i = 0; i < SLOTS; i++) {
        if (c[i].size == 0)
            continue;
        CHECK(cuMemUnmap(va + i * slot_va, c[i].size) == CUDA_SUCCESS);
        if (!c[i].released)
            CHECK(cuMemRelease(c[i].h) == CUDA_SUCCESS);
    }
    CHECK_HELD(0);
    CHECK(cuMemAddressFree(va, SLOTS * slot_va) == CUDA_SUCCESS);
}

/*
 * Helper killed at random instants: random VMM steps (create, map, release
 * before or after the unmap, retain, aliasing maps). Between steps it checks
 * its own slot's charge against the driver's count of its memory and exits
 * 3 on a difference; the parent kills it mid-step.
 */
int sc_vmm_churn(const char *seed_arg)
{
    enum { SLOTS = 8 };
    struct {
        CUmemGenericAllocationHandle h;
        int refs;  /* handle references we hold */
        int maps;  /* 0..2 mappings, at slot VA and slot VA + 32 MiB */
    } s[SLOTS] = {{0}};
    unsigned seed = (unsigned)strtoul(seed_arg, NULL, 10);
    CUdeviceptr va = 0;

    ctx_on(0);
    if (cuMemAddressReserve(&va, SLOTS * 64 * MiB, 0, 0, 0) != CUDA_SUCCESS)
        return 1;
    printf("ready\n");
    fflush(stdout);
    for (;;) {
        int i = rand_r(&seed) % SLOTS;
        CUdeviceptr at = va + i * 64 * MiB;

        if (s[i].refs == 0 && s[i].maps == 0) {
            if (cuMemCreate(&s[i].h, GRAN * (1 + rand_r(&seed) % 8), &prop, 0) == CUDA_SUCCESS)
                s[i].refs = 1;
        } else {
            switch (rand_r(&seed) % 4) {
            case 0:
                if (s[i].refs > 0 && s[i].maps < 2 &&
                    cuMemMap(at + s[i].maps * 32 * MiB, GRAN, 0, s[i].h, 0) == CUDA_SUCCESS)
                    s[i].maps++;
                break;
            case 1:
                if (s[i].refs > 0 && cuMemRelease(s[i].h) == CUDA_SUCCESS)
                    s[i].refs--;
                break;
            case 2:
                if (s[i].maps > 0 && cuMemUnmap(at + (s[i].maps - 1) * 32 * MiB, GRAN) ==
                                         CUDA_SUCCESS)
                    s[i].maps--;
                break;
            default:
                if (s[i].maps > 0 && cuMemRetainAllocationHandle(&s[i].h, (void *)(uintptr_t)at) ==
                                         CUDA_SUCCESS)
                    s[i].refs++;
                break;
            }
        }
        if (own_charged() != driver_held()) {
            fprintf(stderr, "vmm_churn: charged %llu, driver holds %llu\n",
                    (unsigned long long)own_charged(), (unsigned long long)driver_held());
            return 3;
        }
    }
}

/*
 * SIGKILL at random instants between map, release and unmap (vmm_churn),
 * while this process holds 100 MiB only through a mapping: after each kill
 * the claim's counter is what the survivors' driver allocations hold, and 0
 * once every one is gone.
 */
void sc_vmm_kill(void)
{
    const char *kills_env = getenv("VGPU_TEST_KILLS");
    int kills = kills_env != NULL ? atoi(kills_env) : 300, bad = 0;
    unsigned seed = (unsigned)getpid();
    CUmemGenericAllocationHandle h = 0, x = 0;
    struct region_view v;
    CUdeviceptr va = 0;

    ctx_on(0);
    CHECK(cuMemCreate(&h, 100 * MiB, &prop, 0) == CUDA_SUCCESS);
    CHECK(cuMemAddressReserve(&va, 100 * MiB, 0, 0, 0) == CUDA_SUCCESS);
    CHECK(cuMemMap(va, 100 * MiB, 0, h, 0) == CUDA_SUCCESS);
    CHECK(cuMemRelease(h) == CUDA_SUCCESS);
    CHECK_HELD(100 * MiB);
    for (int k = 0; k < kills; k++) {
        int st = kill_helper_at_random("vmm_churn", &seed);

        /* Exit 3: the helper saw its charge differ from the driver's count. */
        CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
        /* Refused (we hold 100 MiB): reclaims the dead process on the way. */
        CHECK(cuMemCreate(&x, GiB, &prop, 0) == CUDA_ERROR_OUT_OF_MEMORY);
        CHECK(region_view(claim_region(), getenv("VGPU_TEST_UUID0"), &v));
        if (v.used != v.charged_sum || v.used != driver_held() || v.used != 100 * MiB ||
            v.active != 1) {
            fprintf(stderr, "after kill %d: used %llu, live charges %llu, driver holds %llu, "
                    "%d active slot(s)\n", k, (unsigned long long)v.used,
                    (unsigned long long)v.charged_sum, (unsigned long long)driver_held(),
                    v.active);
            if (++bad == 3)
                break;
        }
    }
    CHECK_EQ_U64(bad, 0);
    CHECK(cuMemUnmap(va, 100 * MiB) == CUDA_SUCCESS);
    CHECK_HELD(0);
    CHECK(region_view(claim_region(), getenv("VGPU_TEST_UUID0"), &v));
    CHECK_EQ_U64(v.used, 0);
    CHECK_EQ_U64(v.charged_sum, 0);
    CHECK(cuMemAddressFree(va, 100 * MiB) == CUDA_SUCCESS);
}

/* Two threads of vmm_threads: one releases a handle while the other unmaps its only mapping. */
struct race {
    pthread_barrier_t start, done;
    CUmemGenericAllocationHandle h;
    CUdeviceptr va;
    CUcontext ctx;
    int rounds;
    CUresult rc[2];
};

static void *race_side(struct race *r, int side)
{
    CHECK(cuCtxSetCurrent(r->ctx) == CUDA_SUCCESS);
    for (int i = 0; i < r->rounds; i++) {
        pthread_barrier_wait(&r->start);
        r->rc[side] = side == 0 ? cuMemRelease(r->h) : cuMemUnmap(r->va, 4 * MiB);
        pthread_barrier_wait(&r->done);
    }
    return NULL;
}

static void *race_release(void *arg)
{
    return race_side(arg, 0);
}

static void *race_unmap(void *arg)
{
    return race_side(arg, 1);
}

/*
 * The last reference released and the last mapping unmapped at the same
 * time, from two threads, many times: whichever finishes last returns the
 * bytes, exactly once; the counter never drifts from the driver's count.
 */
void sc_vmm_threads(void)
{
    struct race r = {.rounds = getenv("VGPU_TEST_VALGRIND") != NULL ? 100 : 2000};
    pthread_t a, b;

    r.ctx = ctx_on(0);
    CHECK(cuMemAddressReserve(&r.va, 4 * MiB, 0, 0, 0) == CUDA_SUCCESS);
    pthread_barrier_init(&r.start, NULL, 3);
    pthread_barrier_init(&r.done, NULL, 3);
    CHECK(pthread_create(&a, NULL, race_release, &r) == 0);
    CHECK(pthread_create(&b, NULL, race_unmap, &r) == 0);
    for (int i = 0; i < r.rounds; i++) {
        CHECK(cuMemCreate(&r.h, 4 * MiB, &prop, 0) == CUDA_SUCCESS);
        CHECK(cuMemMap(r.va, 4 * MiB, 0, r.h, 0) == CUDA_SUCCESS);
        CHECK_HELD(4 * MiB);
        pthread_barrier_wait(&r.start);
        pthread_barrier_wait(&r.done);
        CHECK(r.rc[0] == CUDA_SUCCESS && r.rc[1] == CUDA_SUCCESS);
        CHECK_HELD(0);
        if (check_failures != 0) {
            fprintf(stderr, "vmm_threads: round %d\n", i);
            _exit(1); /* the threads wait for the next round */
        }
    }
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    CHECK(cuMemAddressFree(r.va, 4 * MiB) == CUDA_SUCCESS);
}

/*
 * VMM allocations in host memory (CU_MEM_LOCATION_TYPE_HOST_NUMA, CUDA
 * 12.2+) are the host's: under a 1 GiB claim 2 GiB of them are made and
 * mapped without a charge, the granularity query answers for them, and
 * the claim's 1 GiB of device memory stays whole beside them.
 */
void sc_vmm_host_numa(void)
{
    CUmemAllocationProp host = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {.type = CU_MEM_LOCATION_TYPE_HOST_NUMA, .id = 0}};
    CUmemAllocationProp dev = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                               .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    CUmemAllocationProp back;
    CUmemGenericAllocationHandle h = 0, d = 0;
    size_t gran = 0;
    CUdeviceptr va = 0;

    ctx_on(0);
    CHECK(cuMemGetAllocationGranularity(&gran, &host, CU_MEM_ALLOC_GRANULARITY_MINIMUM) ==
          CUDA_SUCCESS);
    CHECK(gran != 0 && GiB % gran == 0);
    CHECK(cuMemCreate(&h, 2 * GiB, &host, 0) == CUDA_SUCCESS);
    CHECK(cuMemGetAllocationPropertiesFromHandle(&back, h) == CUDA_SUCCESS);
    CHECK_EQ_U64(back.location.type, CU_MEM_LOCATION_TYPE_HOST_NUMA);
    CHECK(cuMemAddressReserve(&va, 2 * GiB, 0, 0, 0) == CUDA_SUCCESS);
    CHECK(cuMemMap(va, 2 * GiB, 0, h, 0) == CUDA_SUCCESS);
    CHECK_EQ_U64(used0(), 0);
    CHECK(cuMemCreate(&d, GiB, &dev, 0) == CUDA_SUCCESS);
    CHECK_EQ_U64(used0(), GiB);
    CHECK(cuMemRelease(d) == CUDA_SUCCESS);
    CHECK(cuMemUnmap(va, 2 * GiB) == CUDA_SUCCESS);
    CHECK(cuMemAddressFree(va, 2 * GiB) == CUDA_SUCCESS);
    CHECK(cuMemRelease(h) == CUDA_SUCCESS);
    CHECK_EQ_U64(used0(), 0);
}
