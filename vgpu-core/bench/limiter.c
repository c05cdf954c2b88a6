/*
 * limiter.c - limit -> achieved SM share of the compute limiter on the
 * simulated plant (test/plant.c), and the mean absolute error.
 *
 * Each cell is one 30 s simulated run of one saturating process (two
 * kernels in flight) with the given kernel length; the share is the mean of
 * NVML's one-second samples over the last 10 s. Goal: MAE <= 2 points.
 */
#include <stdio.h>

#include "plant.h"

#define S 1000000000ull

int main(void)
{
    static const unsigned limits[] = {10, 20, 30, 40, 50, 60, 70, 80, 90, 100};
    static const uint64_t kernels[] = {10000, 100000, 1000000, 10000000, 50000000};
    static struct plant_result res;
    double sum = 0;
    int n = 0;

    printf("limit |");
    for (size_t b = 0; b < sizeof(kernels) / sizeof(kernels[0]); b++)
        printf(" %8.2f ms", kernels[b] / 1e6);
    printf(" | worst error\n");
    for (size_t a = 0; a < sizeof(limits) / sizeof(limits[0]); a++) {
        double worst = 0;

        printf("%4u%% |", limits[a]);
        for (size_t b = 0; b < sizeof(kernels) / sizeof(kernels[0]); b++) {
            struct plant_spec s = {.duration_ns = 30 * S, .nclaims = 1, .nprocs = 1};
            double share, err;

            s.claims[0].limit_percent = limits[a];
            s.procs[0].kernel_ns = kernels[b];
            if (plant_run(&s, &res) != 0) {
                fprintf(stderr, "limiter bench: bad plant spec\n");
                return 1;
            }
            share = plant_mean_share(&res, 0, 20 * S, 30 * S);
            err = share > limits[a] ? share - limits[a] : limits[a] - share;
            worst = err > worst ? err : worst;
            sum += err;
            n++;
            printf(" %10.2f%%", share);
        }
        printf(" | %5.2f\n", worst);
    }
    printf("mean absolute error: %.2f points over %d runs (goal <= 2)\n", sum / n, n);
    return sum / n <= 2 ? 0 : 1;
}
