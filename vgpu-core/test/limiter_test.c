/*
 * limiter_test.c - the compute limiter (src/limiter.c) against the simulated
 * plant (test/plant.c): deterministic, no threads, no clocks.
 *
 * Checks: token-bucket admission rules; for limits 10..90 % and kernels of
 * 10 us..50 ms, steady-state error <= 2 points (mean of the last 10 s of a
 * 30 s run) with the settling time printed; two claims at 30 and 70 on one
 * GPU; a process joining mid-run; workConserving with and without
 * contention, and priority.
 */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "plant.h"

#define S 1000000000ull
#define US 1000ull
#define MS 1000000ull

static struct plant_result res;

static double absd(double v)
{
    return v < 0 ? -v : v;
}

static void test_bucket(void)
{
    struct vgpu_region_device d;

    memset(&d, 0, sizeof(d));
    vgpu_bucket_init(&d, 0.5, 1000);
    /* 50 ms of refill at 50 %: 25 ms of tokens, full. */
    CHECK_EQ_U64(d.bucket_capacity, 25 * MS);
    CHECK_EQ_U64(d.bucket_tokens, 25 * MS);
    CHECK(vgpu_bucket_take(&d, 10 * MS));
    CHECK(vgpu_bucket_take(&d, 10 * MS));
    /* 5 ms left: a 10 ms launch waits, and is told to wait for the 5 ms it lacks. */
    CHECK(!vgpu_bucket_take(&d, 10 * MS));
    CHECK_EQ_U64(d.bucket_tokens, 5 * MS);
    CHECK_EQ_U64(vgpu_bucket_wait_ns(&d, 10 * MS), VGPU_WAIT_MAX_NS);
    CHECK_EQ_U64(vgpu_bucket_wait_ns(&d, 6 * MS), 2 * MS);
    /* Refill credits rate x elapsed once, capped at the capacity. */
    vgpu_bucket_refill(&d, 1000 + 4 * MS);
    CHECK_EQ_U64(d.bucket_tokens, 7 * MS);
    vgpu_bucket_refill(&d, 1000 + 4 * MS);
    CHECK_EQ_U64(d.bucket_tokens, 7 * MS);
    vgpu_bucket_refill(&d, 1000 + 10 * S);
    CHECK_EQ_U64(d.bucket_tokens, 25 * MS);
    /* A kernel larger than the bucket runs on a full bucket and leaves a debt. */
    CHECK(vgpu_bucket_take(&d, 100 * MS));
    CHECK(d.bucket_tokens == -75 * (int64_t)MS);
    CHECK(!vgpu_bucket_take(&d, 100 * MS));
    CHECK(!vgpu_bucket_take(&d, 1));
    /* Open: everything passes; closing again starts from a full bucket. */
    vgpu_bucket_open(&d);
    CHECK(vgpu_bucket_is_open(&d));
    for (int i = 0; i < 1000; i++)
        CHECK(vgpu_bucket_take(&d, 50 * MS));
    vgpu_bucket_set_rate(&d, 0.1, 2 * S);
    CHECK(!vgpu_bucket_is_open(&d));
    CHECK_EQ_U64(d.bucket_tokens, 5 * MS);
    /* A tiny rate keeps a minimum capacity so short kernels still pass. */
    vgpu_bucket_set_rate(&d, 0.0001, 3 * S);
    CHECK_EQ_U64(d.bucket_capacity, VGPU_BUCKET_MIN_CAPACITY);
}

static void test_steady_state(void)
{
    static const unsigned limits[] = {10, 30, 50, 70, 90};
    static const uint64_t kernels[] = {10 * US, 100 * US, 1 * MS, 10 * MS, 50 * MS};
    double sum = 0;
    int n = 0;

    printf("limit  kernel    share   error  settling\n");
    for (size_t a = 0; a < sizeof(limits) / sizeof(limits[0]); a++) {
        for (size_t b = 0; b < sizeof(kernels) / sizeof(kernels[0]); b++) {
            struct plant_spec s = {.duration_ns = 30 * S, .nclaims = 1, .nprocs = 1};
            double share, band;

            s.claims[0].limit_percent = limits[a];
            s.procs[0].kernel_ns = kernels[b];
            CHECK(plant_run(&s, &res) == 0);
            share = plant_mean_share(&res, 0, 20 * S, 30 * S);
            /* One kernel is this many points of NVML's one-second window. */
            band = 100.0 * (double)kernels[b] / (double)VGPU_CTL_WINDOW_NS;
            band = band > 2 ? band : 2;
            printf("%4u%%  %6.2f ms  %6.2f%%  %+5.2f  %5.1f s\n", limits[a], kernels[b] / 1e6,
                   share, share - limits[a],
                   plant_settling_ns(&res, 0, limits[a], band) / 1e9);
            CHECK(absd(share - limits[a]) <= 2.0);
            CHECK(plant_settling_ns(&res, 0, limits[a], band) <= 20 * S);
            sum += absd(share - limits[a]);
            n++;
        }
    }
    printf("mean absolute error %.2f points\n", sum / n);
    CHECK(sum / n <= 2.0);
}

static void test_two_claims(void)
{
    struct plant_spec s = {.duration_ns = 30 * S, .nclaims = 2, .nprocs = 3};

    s.claims[0].limit_percent = 30;
    s.claims[1].limit_percent = 70;
    s.procs[0] = (struct plant_proc_spec){.claim = 0, .kernel_ns = 1 * MS};
    s.procs[1] = (struct plant_proc_spec){.claim = 1, .kernel_ns = 200 * US};
    s.procs[2] = (struct plant_proc_spec){.claim = 1, .kernel_ns = 5 * MS};
    CHECK(plant_run(&s, &res) == 0);
    printf("claims at 30/70 on one GPU: %.2f%% / %.2f%%\n",
           plant_mean_share(&res, 0, 20 * S, 30 * S), plant_mean_share(&res, 1, 20 * S, 30 * S));
    CHECK(absd(plant_mean_share(&res, 0, 20 * S, 30 * S) - 30) <= 2);
    CHECK(absd(plant_mean_share(&res, 1, 20 * S, 30 * S) - 70) <= 2);
}

static void test_join(void)
{
    struct plant_spec s = {.duration_ns = 40 * S, .nclaims = 1, .nprocs = 2};
    double before, after;

    s.claims[0].limit_percent = 30;
    s.procs[0] = (struct plant_proc_spec){.claim = 0, .kernel_ns = 1 * MS};
    s.procs[1] = (struct plant_proc_spec){.claim = 0, .kernel_ns = 100 * US, .start_ns = 15 * S};
    CHECK(plant_run(&s, &res) == 0);
    before = plant_mean_share(&res, 0, 8 * S, 15 * S);
    after = plant_mean_share(&res, 0, 25 * S, 40 * S);
    printf("process joining at 15 s: claim share %.2f%% before, %.2f%% after\n", before, after);
    CHECK(absd(before - 30) <= 2);
    CHECK(absd(after - 30) <= 2);
    /* Both processes really ran after the join. */
    CHECK(res.launches[1] > 0);
}

static void test_work_conserving(void)
{
    struct plant_spec s = {.duration_ns = 30 * S, .nclaims = 2, .nprocs = 2};
    double alone, shared, other;

    s.claims[0] = (struct plant_claim_spec){.limit_percent = 30,
                                            .policy = VGPU_POLICY_WORK_CONSERVING};
    s.claims[1].limit_percent = 50;
    s.procs[0] = (struct plant_proc_spec){.claim = 0, .kernel_ns = 1 * MS};
    s.procs[1] = (struct plant_proc_spec){.claim = 1, .kernel_ns = 1 * MS, .start_ns = 15 * S};
    CHECK(plant_run(&s, &res) == 0);
    alone = plant_mean_share(&res, 0, 5 * S, 15 * S);
    shared = plant_mean_share(&res, 0, 22 * S, 30 * S);
    other = plant_mean_share(&res, 1, 22 * S, 30 * S);
    printf("workConserving 30%%: %.2f%% alone, %.2f%% (other claim %.2f%%) contended\n", alone,
           shared, other);
    CHECK(alone > 95);
    CHECK(absd(shared - 30) <= 2);
    CHECK(absd(other - 50) <= 2);

    /* High priority: contention with the other claim never throttles it. */
    s.claims[0].high_priority = true;
    CHECK(plant_run(&s, &res) == 0);
    shared = plant_mean_share(&res, 0, 22 * S, 30 * S);
    printf("workConserving 30%%, high priority: %.2f%% contended\n", shared);
    CHECK(shared > 45);

    /* disabled: never limited. */
    s.claims[0] = (struct plant_claim_spec){.limit_percent = 30, .policy = VGPU_POLICY_DISABLED};
    s.procs[1].start_ns = 0;
    CHECK(plant_run(&s, &res) == 0);
    CHECK(plant_mean_share(&res, 0, 20 * S, 30 * S) > 45);
}

static void test_bad_spec(void)
{
    struct plant_spec s = {.duration_ns = 1 * S, .nclaims = 1, .nprocs = 1};

    s.procs[0].claim = 3;
    s.procs[0].kernel_ns = MS;
    CHECK(plant_run(&s, &res) == -1);
    s.procs[0].claim = 0;
    s.claims[0].limit_percent = 101;
    CHECK(plant_run(&s, &res) == -1);
}

int main(void)
{
    test_bucket();
    test_steady_state();
    test_two_claims();
    test_join();
    test_work_conserving();
    test_bad_spec();
    return check_report("limiter_test");
}
