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
 * lib_test.h - what the files of the library test program share: lib_test.c
 * (the driver: claims, expectations, main) and the scenarios it runs
 * preloaded, by topic in lib_test_memory.c, lib_test_sharing.c and
 * lib_test_nvml.c, with their helpers in lib_test_helpers.c.
 */
#ifndef VGPU_LIB_TEST_H
#define VGPU_LIB_TEST_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "vgpu_cuda.h"

#define MiB (1024ull * 1024ull)
#define GiB (1024ull * MiB)
#define PHYS (16 * GiB) /* VGPU_FAKE_GPU_MEMORY in the Makefile */

extern char self_exe[4096]; /* this program, re-run for scenarios and helpers */
extern char root[256];      /* claims root of the current scenario */
extern char uuids[2][64];   /* fake GPU UUIDs */

/* Helpers used inside preloaded scenario processes (lib_test_helpers.c). */

/* Makes a context on CUDA device dev current and returns it. */
CUcontext ctx_on(int dev);
/* Claim-wide used bytes of uuid in the region at path (read-only, as the monitor does). */
uint64_t region_used(const char *path, const char *uuid);
uint64_t now_realtime_ns(void);
/* Refusal counters of device record 0 of the claim's region (read-only, as the monitor does). */
uint64_t refusals0(uint64_t *last_bytes, uint64_t *last_ns);
/* Path of the claim's region (CUDA_DEVICE_MEMORY_SHARED_CACHE). */
char *claim_region(void);
/* Claim-wide used bytes on GPU 0. */
uint64_t used0(void);
/* Free and total memory of the current context's device, as CUDA reports them. */
uint64_t mem_free(void);
uint64_t mem_total(void);
/* Starts this program with args, its stdin and stdout piped to us. */
pid_t spawn_helper(char *const args[], int *to, int *from);
/* Reads one line from fd into buf. */
void read_line(int fd, char *buf, size_t len);
/* Runs this program's helper scenario with a seed drawn from *seed, waits for its "ready" line,
 * SIGKILLs it 0..3 ms later and returns its wait status. */
int kill_helper_at_random(const char *scenario, unsigned *seed);
/* A pool on GPU 0 whose release threshold keeps everything it reserves. */
CUmemoryPool keeping_pool(void);

/* What the region says about device uuid: the invariant's terms. */
struct region_view {
    uint64_t used;        /* device.used_bytes */
    uint64_t charged_sum; /* sum over active slots of charged_bytes */
    uint64_t shared_sum;  /* sum over live shared records on the device of bytes (minor 7) */
    int shared_live;      /* live shared records on the device */
    uint64_t own_charged; /* the caller's slot, by pid */
    int active;           /* active slots */
    uint32_t lock, undo;  /* charge_lock, undo_slot */
    uint64_t refused;     /* refused_processes */
    int fail_closed;      /* active slots flagged fail closed */
};
bool region_view(const char *path, const char *uuid, struct region_view *v);

/* Scenarios: run in a preloaded process by name (see main in lib_test.c). */

/* lib_test_memory.c */
void sc_limit(void);
void sc_paths(void);
void sc_procaddr(void);
int sc_hold(const char *bytes);
int sc_grab(void);
void sc_pools(void);
void sc_graphs(void);
void sc_contexts(void);
void sc_green_ctx(void);
int sc_pgrab(void);
void sc_pool_race(void);
void sc_pooldev(void);

/* lib_test_sharing.c */
void sc_share(void);
int sc_churn(const char *seed_arg);
void sc_killstress(void);
/* Helper of fake_killstress: allocates and frees on the fake driver in four threads for ever. */
int sc_fake_churn(const char *seed_arg);
/*
 * SIGKILLs sc_fake_churn at random instants, kills times, with the caller not
 * preloaded: the fake GPU's used memory must come back to what it was.
 */
void fake_killstress(int kills);
void sc_lastkill(void);
void sc_race(void);
void sc_fail_closed(void);
void sc_closed(void);
void sc_replaced(void);
void sc_twoclaims(void);
void sc_twoclaims_capped(void);

/* lib_test_nvml.c */
void sc_expect_total(void);
void sc_nvml(void);
void sc_overhead(void);
void sc_hostpid(void);
void sc_unlimited_counted(void);
void sc_ext_memory(void);
void sc_vmm_host_numa(void);
int sc_busyhold(const char *bytes);
void sc_nvml_procs(void);
void sc_fork(void);
void sc_idle(void);

/* lib_test_order.c: every export called before cuInit, then the limit. */
int sc_order(const char *symbol);
/* Checks the export list against the table and runs "order:<symbol>" for each row with run. */
void expect_call_order(void (*run)(const char *name));
/* lib_test_ipc.c: VMM shareable handles */
int sc_vmm_share_export(const char *mib);
int sc_vmm_share_import(const char *mib);
void sc_vmm_share_exporter_gone(void);
void sc_vmm_share_two_importers(void);
void sc_vmm_share_foreign(void);
int sc_vmm_share_churn(const char *seed_arg);
void sc_vmm_share_kill(void);
int sc_vmm_share_fabric_import(void);
void sc_vmm_share_fabric(void);
void sc_vmm_share_devfd(void);
void sc_vmm_share_fd_hold(void);
void sc_vmm_share_fd_many(void);
void sc_vmm_devfd_fd_hold(void);
void sc_vmm_devfd_moved(void);
void sc_vmm_devfd_exporter_gone(void);
void sc_vmm_devfd_two_importers(void);
void sc_vmm_devfd_kill(void);
void sc_vmm_devfd_foreign(void);
void sc_vmm_devfd_forged(void);

/* lib_test_vmm.c */
void sc_vmm_sample(void);
void sc_vmm_alias(void);
void sc_vmm_expandable(void);
int sc_vmm_churn(const char *seed_arg);
void sc_vmm_kill(void);
void sc_vmm_threads(void);
/* lib_test_ipc.c: memory shared between processes (cuIpc*). */
void sc_ipc_exporter_gone(void);
void sc_ipc_two_importers(void);
void sc_ipc_foreign(void);
void sc_ipc_kill(void);
void sc_ipc_hostile(void);
/* Helpers: "ipc_export <MiB> [<foreign>]", "ipc_import", "ipc_churn <seed>". */
int sc_ipc_export(const char *mib);
int sc_ipc_import(void);
int sc_ipc_churn(const char *seed_arg);

#endif /* VGPU_LIB_TEST_H */
