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
 * fake_state.h - simulated GPU state shared by every process on a node.
 *
 * One file, <state_dir>/state, mapped shared by the fake libcuda (which
 * writes its own process slot) and the fake NVML (which reads all slots).
 * It holds, per process slot and GPU, the bytes that process has in use
 * (a GPU's bytes in use are the sum over the slots: every accounting step
 * is an atomic add or subtract on the process's own records, so a SIGKILL
 * at any instant leaves the accounting exact once the slot is reclaimed)
 * and its busy record on the simulated GPU timeline (fake_gpu.h), and per
 * GPU that timeline.
 *
 * Liveness: a process owns its slot by holding an OFD write lock on one
 * byte (FAKE_LOCK_BASE + slot) of the file for its whole life. The kernel
 * drops the lock when the process dies (also on SIGKILL, and across PID
 * namespaces), so any process that can take the lock knows the owner is
 * gone and returns the slot's memory to the GPU. No lock is held on the
 * allocation or launch paths.
 */
#ifndef VGPU_FAKE_STATE_H
#define VGPU_FAKE_STATE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fake_config.h"
#include "fake_fdscan.h"
#include "fake_gpu.h"
#include "fake_mig.h"

#define FAKE_STATE_MAGIC 0x5453454b41464756ULL /* "VGFAKEST" little-endian */
/*
 * 2: busy time as per-period records on a simulated timeline (fake_gpu.h);
 * 3: kernels queued on a time-sliced engine;
 * 4: no GPU-wide used counter, the sum of the slots' records instead;
 * 5: MIG instances per GPU, an engine per GPU instance, slots bound to an instance;
 * 6: IPC-shared allocations (fake_ipc);
 * 7: exported VMM fds hold their allocation (fake_ipc.fd_kind);
 * 8: MPS clients (fake_slot_mps)
 */
#define FAKE_STATE_VERSION 8u
#define FAKE_MAX_IPC 64
#define FAKE_MAX_SLOTS 64
/* Lock bytes lie beyond the mapped data, one per slot, then one per GPU for MIG changes. */
#define FAKE_LOCK_BASE (1LL << 30)
#define FAKE_MIG_LOCK_BASE (FAKE_LOCK_BASE + FAKE_MAX_SLOTS)

typedef struct fake_slot_dev {
    _Atomic uint64_t used;      /* bytes charged by this process */
    _Atomic uint64_t pending;   /* bytes its allocators are checking against the total */
    _Atomic uint32_t contexts;  /* contexts this process holds on the GPU */
    _Atomic uint32_t mig;       /* MIG instance it runs in: FAKE_MIG_TAG(gi, ci), 0 = whole GPU */
    gpu_busy busy;              /* its kernels' busy time (written under the GPU's engine lock) */
} fake_slot_dev;

typedef struct fake_slot {
    _Atomic uint32_t active;    /* 1 while owned by a live process */
    _Atomic uint32_t pid;       /* pid in the owner's namespace */
    fake_slot_dev dev[FAKE_MAX_GPUS];
} fake_slot;

/*
 * Pid namespace of a slot's owner, and its host pid once some process in the
 * host pid namespace has resolved it (the real driver knows every
 * process's host pid). Kept after the slots instead of in them so that a
 * state file written before these fields existed stays valid: it grows
 * zero-filled, and 0 means unknown.
 */
typedef struct fake_slot_identity {
    _Atomic uint64_t pidns;    /* inode of the owner's /proc/self/ns/pid, 0 = unknown */
    _Atomic uint32_t host_pid; /* 0 = not resolved yet */
    uint32_t reserved;
} fake_slot_identity;

/*
 * The simulated engine of one GPU (fake_gpu.h): every process queues its
 * kernels on it and runs it up to the present under a spin lock. The lock
 * word is the holder's acquisition time with its slot + 1 in the low bits
 * (0 there: a process without a slot). A holder that stalls past
 * FAKE_ENGINE_STEAL_NS and whose slot shows it dead (its lock byte dropped:
 * killed inside), or any holder that stalls past FAKE_ENGINE_STEAL_ANY_NS
 * (stopped, frozen with its container, or without a slot to look at),
 * loses the lock, and the taker repairs the engine's derived fields
 * (gpu_sched_repair). A holder stopped past that may write into the engine
 * once more when it resumes; the next waiter that finds work the engine
 * does not run repairs it again. The holder unlocks only its own word.
 */
typedef struct fake_dev_engine {
    _Atomic uint64_t lock;      /* 0 free, else acquisition time | (slot + 1) */
    gpu_busy busy;              /* union of every process's kernels on the GPU */
    gpu_sched sched;
} fake_dev_engine;

#define FAKE_ENGINE_STEAL_NS 50000000ULL
#define FAKE_ENGINE_STEAL_ANY_NS 1000000000ULL
#define FAKE_ENGINE_SLOT_BITS 7

/* Engines per GPU for its compute instances. */
#define FAKE_MIG_ENGINES 7

/* A slot's binding to compute instance ci of GPU instance gi (gi >= 1). */
#define FAKE_MIG_TAG(gi, ci) ((uint32_t)(gi) | ((uint32_t)(ci) << 8))
#define FAKE_MIG_TAG_GI(t) ((t) & 0xffu)
#define FAKE_MIG_TAG_CI(t) ((t) >> 8)

/*
 * A MIG instance in the state file. Written only under the GPU's MIG lock
 * (an OFD lock on byte FAKE_MIG_LOCK_BASE + GPU): the fields first, `live`
 * last (and cleared first), so a process killed at any instant leaves
 * either the old or the new instance, never half of one.
 */
typedef struct fake_mig_ci {
    _Atomic uint32_t live;
    uint32_t profile;      /* NVML_COMPUTE_INSTANCE_PROFILE_* */
    uint32_t start, size;  /* compute slices within the GPU instance */
    uint32_t engine;       /* its engine: mig_engines[GPU][engine] */
} fake_mig_ci;

typedef struct fake_mig_gi {
    _Atomic uint32_t live;
    uint32_t profile;      /* NVML_GPU_INSTANCE_PROFILE_* */
    uint32_t start, size;  /* memory slices */
    fake_mig_ci ci[FAKE_MIG_MAX_CI]; /* by compute-instance id */
} fake_mig_gi;

/* The instances of one GPU, by GPU-instance id (entry 0 unused). */
typedef struct fake_mig_gpu {
    fake_mig_gi gi[FAKE_MIG_MAX_GI + 1];
} fake_mig_gpu;

/*
 * Device memory exported with cuIpcGetMemHandle: the physical memory lives
 * while any process holds it (the exporter until it frees it, importers
 * until they close it), whoever exits or is killed first. Its bytes leave
 * the exporter's slot when it is exported and count for the GPU (and for
 * every holder's NVML figure) while holders is not 0. claim is the
 * creator's slot + 1 from the moment it takes the free record until the
 * last holder drops it; a record claimed by a dead creator with no holder
 * is freed by the reclaimer. holders changes only by compare-and-swap.
 *
 * A VMM allocation exported as a POSIX fd is also held by that fd's open
 * file description, as NVIDIA's resource manager holds the exported object
 * until the fd closes: with fd_kind set, a record whose holders are all
 * gone lives on (and counts for the GPU, for no process's NVML figure)
 * while fake_fdscan_open finds the description in some process, and an
 * import through the fd still succeeds.
 */
typedef struct fake_ipc {
    _Atomic uint64_t holders; /* bit s: slot s holds it */
    _Atomic uint32_t claim;   /* 0 free, else creator's slot + 1 */
    uint32_t dev;             /* physical GPU index */
    _Atomic uint64_t id;      /* unique per export (the handle carries it) */
    uint64_t bytes;
    _Atomic uint32_t fd_kind; /* version 7: FAKE_FDSCAN_*, set at the first fd export */
    uint32_t reserved;
    uint64_t fd_dev, fd_ino, fd_tag; /* the export's file and eventfd counter (fake_fdscan.h) */
} fake_ipc;

/*
 * A process that is an MPS client (cuInit connected to a control daemon):
 * the daemon is known by its control socket's file (device and inode), the
 * share by the CUDA_MPS_ACTIVE_THREAD_PERCENTAGE it read, in per mille,
 * the memory limit by device 0's entry of the NVIDIA_GPU_MEMORY_LIMITS it
 * read (recorded for tests, not enforced). Written once by the owner at
 * cuInit, sock_ino last (0: not a client).
 */
typedef struct fake_slot_mps {
    uint64_t sock_dev;
    _Atomic uint64_t sock_ino;
    _Atomic uint32_t share_pm;       /* 1..1000 */
    _Atomic uint32_t driver_mem_mib; /* 0: unset or unreadable */
} fake_slot_mps;

typedef struct fake_state_file {
    _Atomic uint64_t magic;
    _Atomic uint32_t version;
    uint32_t reserved;
    fake_slot slots[FAKE_MAX_SLOTS];
    fake_slot_identity ident[FAKE_MAX_SLOTS];
    fake_dev_engine engines[FAKE_MAX_GPUS];
    fake_mig_gpu mig[FAKE_MAX_GPUS];
    /*
     * Each compute instance's own engine (its SMs are its own): its kernels
     * run on its compute slices only. A GPU has at most 7 compute instances
     * (one compute slice each at least), each live one owns one engine.
     */
    fake_dev_engine mig_engines[FAKE_MAX_GPUS][FAKE_MIG_ENGINES];
    _Atomic uint64_t ipc_next_id; /* version 6 */
    fake_ipc ipc[FAKE_MAX_IPC];
    fake_slot_mps mps[FAKE_MAX_SLOTS]; /* version 8 */
} fake_state_file;

typedef struct fake_state {
    int fd;
    fake_state_file *file;
    int slot; /* owned slot, -1 for readers */
} fake_state;

/* One process as seen by NVML. */
typedef struct fake_proc {
    uint32_t mig;     /* FAKE_MIG_TAG of its instance, 0 = whole GPU */
    unsigned int pid; /* host pid where the caller can resolve it, else the owner's own pid */
    uint64_t used;
    unsigned int sm_util; /* NVML's sensor: percent of its window with a kernel running */
    uint64_t window_end;  /* CLOCK_MONOTONIC end of the window sm_util describes */
} fake_proc;

/*
 * Opens (creating if needed, mode 0666 in a 0777 directory) and maps the
 * state file under dir. With own_slot, claims a process slot. Returns 0, or
 * -1 with a message in err.
 */
int fake_state_open(fake_state *st, const char *dir, int own_slot, char *err, size_t errlen);

/* Unmaps and closes; the slot (if any) is reclaimed by the next observer. */
void fake_state_close(fake_state *st);

/*
 * Charges bytes on GPU dev to this process against the GPU's physical
 * total, atomically across processes (one add to the process's own
 * record). Returns 0, or -1 when the GPU would exceed total (after
 * reclaiming dead processes once).
 */
int fake_state_reserve(fake_state *st, int dev, uint64_t bytes, uint64_t total);

/* Returns bytes previously charged with fake_state_reserve. */
void fake_state_release(fake_state *st, int dev, uint64_t bytes);

/* Adjusts the number of contexts this process holds on dev by delta. */
void fake_state_contexts(fake_state *st, int dev, int delta);

/*
 * Queues a kernel of this process (ns long, on its stream, a process-wide
 * id; small: a grid smaller than the GPU) on dev's engine, launched now;
 * the engine starts it when it picks it and records its busy time then.
 * Returns its ticket, or -1 when this process's queue on dev is full
 * (fake_state_wait_room).
 */
int64_t fake_state_submit(fake_state *st, int dev, uint32_t stream, bool small, uint64_t ns);

/* Blocks until this process's queue on dev has room for a kernel. */
void fake_state_wait_room(fake_state *st, int dev);

/* Blocks until the kernel ticket of this process on dev, and its stream's kernels before it, have run. */
void fake_state_wait_stream(fake_state *st, int dev, uint32_t stream, uint64_t ticket);

/* Blocks until every kernel this process has queued on dev has run. */
void fake_state_wait_all(fake_state *st, int dev);

/*
 * The GPU time of an event this process recorded on stream (its id) at
 * record_ns, after ticket last - 1 of the stream (last 0: the stream had
 * nothing queued then): when the stream's kernels before it have ended, or
 * record_ns if later. A kernel timed between two events thus counts the
 * time it waited for the engine (other streams' full grids, other
 * processes' time slices) besides its run. Returns true and sets *at once
 * the event has completed by now, false while it has not.
 */
bool fake_state_event_time(fake_state *st, int dev, uint32_t stream, uint64_t last,
                           uint64_t record_ns, uint64_t *at);

/*
 * Ground truth for tests: busy ns of the process with the given pid (as
 * the slot records it, the owner's own pid; 0 = the whole GPU) on dev in
 * [from, to), the engine run up to now first. Returns -1 when no live slot
 * has that pid.
 */
int64_t fake_state_true_busy(fake_state *st, int dev, unsigned int pid, uint64_t from,
                             uint64_t to);

/*
 * The kernel driver knows every process by its host pid from its first
 * call. The fake learns it from whoever looks from the host pid namespace:
 * called there, this records the host pid of every live process not yet
 * resolved, so that callers in containers report host pids too (see
 * fake_state_processes). A no-op in any other pid namespace or before the
 * state is open. The node's NVML users call it through memory queries and
 * XID event waits (the kubelet plugin's health watcher waits all the time).
 */
void fake_state_resolve_host_pids(fake_state *st);

/*
 * Bytes in use on dev by all live processes (dead ones reclaimed first);
 * also resolves host pids (fake_state_resolve_host_pids).
 */
uint64_t fake_state_used(fake_state *st, int dev);

/*
 * Lists live processes holding a context or memory on dev into out (up to
 * max entries). Returns the number of such processes (may exceed max).
 * Pids are reported as the real driver does, in the host pid namespace: a
 * process in another pid namespace is found in the caller's /proc by its
 * namespace inode and its innermost NSpid (and the result is remembered in
 * the state file when the caller is in the host namespace); when the
 * caller cannot see it (the caller is itself in a child namespace), the
 * owner's own pid is reported. The engine is run up to now first.
 */
int fake_state_processes(fake_state *st, int dev, uint64_t now, fake_proc *out, int max);

/*
 * NVML's sensor for the whole GPU: percent of its window during which any
 * kernel ran on dev (the engine run up to now first).
 */
unsigned int fake_state_device_util(fake_state *st, int dev, uint64_t now);

/*
 * This process is an MPS client of the control daemon whose socket file is
 * (sock_dev, sock_ino), held to share_pm per mille of each GPU's SMs, that
 * read a memory limit of driver_mem_mib MiB (0: none) for device 0 (cuInit,
 * before any launch).
 */
void fake_state_set_mps(fake_state *st, uint64_t sock_dev, uint64_t sock_ino, uint32_t share_pm,
                        uint32_t driver_mem_mib);

/*
 * Ground truth for tests: whether the live process with the given pid (the
 * owner's own) is an MPS client, and its share in per mille (*share_pm).
 */
bool fake_state_mps_client(fake_state *st, unsigned int pid, uint32_t *share_pm);

/*
 * Ground truth for tests: whether the live process with the given pid is an
 * MPS client, and device 0's memory limit in MiB it read from
 * NVIDIA_GPU_MEMORY_LIMITS in cuInit (*mib, 0: none or unreadable).
 */
bool fake_state_mps_driver_mem(fake_state *st, unsigned int pid, uint32_t *mib);

/* Returns dead processes' slots and memory to the pool. */
void fake_state_reclaim(fake_state *st);

/*
 * Binds this process's work on dev to MIG compute instance (gi, ci): its
 * memory is charged against that GPU instance's (fake_state_reserve's total
 * then is the instance's) and its kernels run on the instance's engine.
 * Called before any allocation or launch on dev (cuInit).
 */
void fake_state_bind_mig(fake_state *st, int dev, unsigned int gi, unsigned int ci);

/*
 * Bytes in use on dev inside GPU instance gi (0: on the whole GPU, every
 * instance included), dead processes reclaimed first.
 */
uint64_t fake_state_used_mig(fake_state *st, int dev, unsigned int gi);

/*
 * As fake_state_processes, only the processes bound to MIG tag mig (0: all),
 * or with gi_only, to any compute instance of the tag's GPU instance.
 */
int fake_state_processes_mig(fake_state *st, int dev, uint32_t mig, bool gi_only, uint64_t now,
                             fake_proc *out, int max);

/*
 * Ground truth for tests: busy ns of compute instance mig's engine on dev
 * in [from, to), -1 if it is gone.
 */
int64_t fake_state_mig_true_busy(fake_state *st, int dev, uint32_t mig, uint64_t from,
                                 uint64_t to);

/* Takes (blocking) or drops the MIG lock of dev; returns 0 on success. */
int fake_state_mig_lock(fake_state *st, int dev, bool lock);

/*
 * Whether some live process is bound to GPU instance gi of dev (ci < 0: to
 * any of its compute instances) and holds a context or memory there.
 */
bool fake_state_mig_in_use(fake_state *st, int dev, unsigned int gi, int ci);

/* Starts engine e (0..FAKE_MIG_ENGINES-1) of dev afresh (a compute instance created). */
void fake_state_mig_engine_reset(fake_state *st, int dev, unsigned int e);

/*
 * cuIpcGetMemHandle: moves bytes this process has charged on GPU dev into
 * a new shared record held by this process. Returns its index (and its id
 * in *id), or -1 when every record is taken.
 */
int fake_state_ipc_export(fake_state *st, int dev, uint64_t bytes, uint64_t *id);

/*
 * cuIpcOpenMemHandle: adds this process as a holder of record idx if it is
 * still the export id. Returns 0, 1 when this process holds it already, or
 * -1 when it is gone; *dev and *bytes receive the record's GPU and size.
 */
int fake_state_ipc_open(fake_state *st, int idx, uint64_t id, int *dev, uint64_t *bytes);

/* Drops this process as a holder of record idx (cuIpcCloseMemHandle, the exporter's free). */
void fake_state_ipc_drop(fake_state *st, int idx);

/*
 * Record idx was exported as an fd of kind, file (dev, ino) and eventfd
 * counter tag (fake_fdscan.h): from now on that fd holds it too.
 */
void fake_state_ipc_fd_exported(fake_state *st, int idx, uint32_t kind, uint64_t dev,
                                uint64_t ino, uint64_t tag);

/*
 * Whether record x lives on only through an exported fd that is still open
 * somewhere (no holder left); one whose fds are all closed is freed here.
 */
bool fake_state_ipc_fd_held(fake_ipc *x);

#endif /* VGPU_FAKE_STATE_H */
