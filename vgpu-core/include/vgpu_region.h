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
 * vgpu_region.h - layout of the per-claim shared region (contract).
 *
 * One file per claim, <claimdir>/shm/region, created zero-filled and exactly
 * VGPU_REGION_SIZE bytes long by the kubelet plugin (or by libvgpu.so itself
 * when it runs standalone). Every process of every container using the claim
 * maps it read-write; the plugin's monitor only reads it with pread.
 *
 * Byte order is little-endian; every field has a fixed offset checked below
 * and mirrored by the Go package pkg/contract/region. Readers must treat every value as
 * untrusted (the file is writable by the container) and clamp it.
 *
 * Layout:
 *   [0, 256)                       struct vgpu_region_header
 *   [256, 256 + 16 * 256)          struct vgpu_region_device[VGPU_REGION_MAX_DEVICES]
 *   [4352, 4352 + 24 * 160)        struct vgpu_region_shared[VGPU_REGION_MAX_SHARED] (minor 7)
 *   [8192, 8192 + 512 * 1152)      struct vgpu_region_slot[VGPU_REGION_MAX_SLOTS]
 *
 * Init protocol: a zero-filled file has init_state VGPU_REGION_UNINIT. The
 * first process to attach takes an OFD write lock on byte 0 of the file,
 * moves init_state to VGPU_REGION_INITIALISING with compare-and-swap (or
 * takes over a stale INITIALISING left by a process that died while holding
 * the lock: the kernel released its lock), writes the header and device
 * records, bumps generation and publishes VGPU_REGION_READY with a release
 * store. Later processes see READY without locking; others wait on the lock.
 *
 * Slots are claimed under the same OFD lock (a rare operation, once per
 * process) and never move. The owner of slot i holds an OFD write lock on
 * byte VGPU_REGION_SIZE + i (past the end of the file) for its lifetime; the
 * kernel drops it when the process dies (SIGKILL included), so any process
 * of any container sharing the file can tell a dead owner. pid, pid
 * namespace inode and process start time (field 22 of /proc/<pid>/stat)
 * identify the owner for readers, and decide liveness where locks cannot be
 * queried. Dead owners' slots are reclaimed, and their bytes returned to the
 * device counters, under the region lock; the reclaimer takes the dead
 * owner's slot lock while it does, so nobody takes it for the dead owner.
 *
 * Charging (minor 3): device.used_bytes == sum over active slots of
 * devices[d].charged_bytes, at every instant a reader can observe without
 * the charge lock, whatever process died when. Every change of used_bytes
 * (reservation, release, overhead, reclaim of a dead slot) changes one
 * slot's charged_bytes by the same amount, under the device's charge_lock
 * (a spin lock naming the holder's slot): the holder first writes the undo
 * record (undo_used_bytes, undo_charged_bytes, then undo_slot with a release
 * store), then both counters, then clears undo_slot. A process that finds
 * the lock held by a dead slot takes it over by compare-and-swap and, if
 * undo_slot is set, restores both counters from the record: the dead
 * holder's change is undone whatever instant it died at. Reclaim returns a
 * dead slot's charged_bytes, which includes reservations in flight, so
 * nothing leaks and nothing is returned twice.
 *
 * Shared allocations (minor 7): device.used_bytes == sum over active slots of
 * charged_bytes + sum over live shared records of bytes. Exporting moves an
 * allocation's bytes from the exporter's charged_bytes into a new record
 * (holders = the exporter) in one recoverable change; importers of the claim
 * add themselves as holders and are charged nothing; the last holder's drop
 * (close, the exporter's free, reclaim of a dead holder) takes the bytes off
 * used_bytes and frees the record in one recoverable change. undo_slot then
 * also names the record (VGPU_UNDO_SHARED_*) so that the undo restores it.
 */
#ifndef VGPU_REGION_H
#define VGPU_REGION_H

#include <stddef.h>
#include <stdint.h>

/* "VGPUREG1" read as a little-endian 64-bit integer. */
#define VGPU_REGION_MAGIC 0x3147455255504756ULL
/* Readers refuse a different major; a newer minor only adds fields in reserved space. */
#define VGPU_REGION_MAJOR 1
/*
 * 1: slot device launch_cost_ns (compute limiter); 2: header slots_in_use;
 * 3: exact charging (device charge lock and undo record, slot device
 * charged_bytes, slot flags, device refused_processes);
 * 4: device sm_share_permyriad, sm_share_time_ns (achieved SM share);
 * 5: device refusals / last_refused_bytes / last_refused_ns (limit hits);
 * 6: slot device pending_charge_us (launch charges waiting for their turn);
 * 7: shared allocation records (memory exported to other processes) in the
 *    space between the device records and the slots, undo_slot's share bits
 */
#define VGPU_REGION_MINOR 7

#define VGPU_REGION_MAX_DEVICES 16
#define VGPU_REGION_MAX_SLOTS 512
#define VGPU_REGION_UUID_LEN 48 /* "GPU-" + 36 chars + NUL, padded */

#define VGPU_REGION_HEADER_SIZE 256
#define VGPU_REGION_DEVICE_SIZE 256
#define VGPU_REGION_SLOT_SIZE 1152
#define VGPU_REGION_SLOT_DEVICE_SIZE 64
#define VGPU_REGION_DEVICES_OFFSET 256
#define VGPU_REGION_SLOTS_OFFSET 8192
/* Shared allocation records (minor 7): in what was reserved space before the slots. */
#define VGPU_REGION_SHARED_OFFSET 4352
#define VGPU_REGION_SHARED_SIZE 160
#define VGPU_REGION_MAX_SHARED 24
#define VGPU_REGION_SHARED_KEY_LEN 64
/* Total file size: 598016 bytes (146 pages of 4 KiB). */
#define VGPU_REGION_SIZE \
    (VGPU_REGION_SLOTS_OFFSET + VGPU_REGION_MAX_SLOTS * VGPU_REGION_SLOT_SIZE)

/* header.init_state */
#define VGPU_REGION_UNINIT 0u
#define VGPU_REGION_INITIALISING 1u
#define VGPU_REGION_READY 2u

/* device.state */
#define VGPU_DEVICE_UNUSED 0u
#define VGPU_DEVICE_ACTIVE 1u

/* slot.state */
#define VGPU_SLOT_FREE 0u
#define VGPU_SLOT_ACTIVE 1u

/* device.compute_policy (published copy of the claim's config value) */
#define VGPU_POLICY_STRICT 0u
#define VGPU_POLICY_WORK_CONSERVING 1u
#define VGPU_POLICY_DISABLED 2u

/* shared.state */
#define VGPU_SHARED_FREE 0u
#define VGPU_SHARED_LIVE 1u

/* shared.kind: what the key is */
#define VGPU_SHARED_KIND_IPC 1u   /* the 64 bytes of a CUipcMemHandle */
/*
 * A VMM handle exported as a POSIX fd. A regular file: its st_dev (8 bytes
 * LE), st_ino (8), rest 0. Any other file (NVIDIA's driver: an open of its
 * control node, one inode for all): 16 zero bytes, then the nonce of the
 * exporter's OFD lock on the open file description (8 bytes LE, never 0),
 * rest 0; so the two forms never match each other.
 */
#define VGPU_SHARED_KIND_VMM_FD 2u
#define VGPU_SHARED_KIND_VMM_FABRIC 3u /* a VMM handle exported as a CUmemFabricHandle (64 bytes) */

/*
 * device.undo_slot (minor 7): bits 0-15 the changed slot's index + 1, bits
 * 16-23 the shared record the change also made (index + 1, 0 = none), bit 24
 * set when that record was live before the change (then the change dropped
 * the slot as its last holder), clear when it was free (the change created
 * it with the slot as its only holder).
 */
#define VGPU_UNDO_SLOT_MASK 0xffffu
#define VGPU_UNDO_SHARED_SHIFT 16
#define VGPU_UNDO_SHARED_MASK 0xffu
#define VGPU_UNDO_SHARED_WAS_LIVE (1u << 24)

/* slot.flags */
#define VGPU_SLOT_FLAG_FAIL_CLOSED 1u /* the owner refuses every allocation (region replaced) */

/* Inode of the initial pid namespace: slot.pidns equal to it means pid is a host pid. */
#define VGPU_INIT_PIDNS_INO 0xEFFFFFFCULL

/* Region header (offset 0, 256 bytes). */
struct vgpu_region_header {
    uint64_t magic;           /*   0 VGPU_REGION_MAGIC once initialised */
    uint16_t major;           /*   8 VGPU_REGION_MAJOR */
    uint16_t minor;           /*  10 VGPU_REGION_MINOR */
    uint32_t init_state;      /*  12 VGPU_REGION_UNINIT/INITIALISING/READY (CAS) */
    uint64_t region_size;     /*  16 VGPU_REGION_SIZE */
    uint32_t header_size;     /*  24 VGPU_REGION_HEADER_SIZE */
    uint32_t device_size;     /*  28 VGPU_REGION_DEVICE_SIZE */
    uint32_t slot_size;       /*  32 VGPU_REGION_SLOT_SIZE */
    uint32_t max_devices;     /*  36 VGPU_REGION_MAX_DEVICES */
    uint32_t max_slots;       /*  40 VGPU_REGION_MAX_SLOTS */
    uint32_t device_count;    /*  44 device records in use, 0..max_devices */
    uint64_t devices_offset;  /*  48 VGPU_REGION_DEVICES_OFFSET */
    uint64_t slots_offset;    /*  56 VGPU_REGION_SLOTS_OFFSET */
    uint64_t generation;      /*  64 incremented by every (re)initialisation */
    uint64_t init_time_ns;    /*  72 CLOCK_REALTIME of the last initialisation */
    uint32_t slots_in_use;    /*  80 1 + highest slot index ever claimed (minor 2): readers
                                     need not look past it */
    uint8_t reserved[172];    /*  84 zero */
};

/*
 * One GPU of the claim (256 bytes, four cache lines: identity, memory
 * counter, compute bucket, refiller lease; the hot counters do not share a
 * line).
 */
struct vgpu_region_device {
    /* line 0: identity, written at initialisation */
    char uuid[VGPU_REGION_UUID_LEN]; /*   0 "GPU-...", NUL-terminated */
    uint64_t memory_limit;           /*  48 bytes, 0 = unlimited (informational copy) */
    uint32_t sm_limit_percent;       /*  56 0..100, 0 = unlimited (informational copy) */
    uint32_t state;                  /*  60 VGPU_DEVICE_UNUSED/ACTIVE */
    /* line 1: claim-wide memory accounting */
    uint64_t used_bytes;             /*  64 reservation counter (CAS): tracked + overhead of live slots */
    uint64_t peak_bytes;             /*  72 high-water mark of used_bytes */
    /*
     * Charge lock (minor 3): used_bytes and every slot's charged_bytes on
     * this device change only under it, together, with an undo record, so
     * the holder's death at any instant can be rolled back exactly (see
     * "Charging" below).
     */
    uint32_t charge_lock;            /*  80 0 = free, else holder's slot index + 1 */
    uint32_t undo_slot;              /*  84 0 = no change in progress, else slot index + 1 */
    uint64_t undo_used_bytes;        /*  88 used_bytes before the change in progress */
    uint64_t undo_charged_bytes;     /*  96 that slot's charged_bytes before it */
    uint64_t refused_processes;      /* 104 processes that failed closed for want of a free
                                            slot (cumulative) */
    uint8_t reserved1[16];           /* 112 */
    /* line 2: compute limiter token bucket (issue 4) */
    int64_t bucket_tokens;           /* 128 current balance */
    uint64_t bucket_capacity;        /* 136 maximum balance */
    uint64_t bucket_refill_rate;     /* 144 tokens per second */
    uint64_t bucket_last_refill_ns;  /* 152 CLOCK_MONOTONIC of the last refill */
    uint32_t compute_policy;         /* 160 VGPU_POLICY_* */
    uint32_t sm_util_percent;        /* 164 last measured claim-wide SM utilisation */
    uint32_t sm_share_permyriad;     /* 168 achieved SM share, 0.01 % units, averaged over
                                        ~10 s by the refiller (minor 4) */
    uint32_t reserved2a;             /* 172 */
    uint64_t sm_share_time_ns;       /* 176 CLOCK_REALTIME of its last update, 0 = never */
    uint8_t reserved2[8];            /* 184 */
    /* line 3: refiller ownership lease (issue 4) */
    uint32_t refiller_pid;           /* 192 */
    uint32_t reserved3;              /* 196 */
    uint64_t refiller_start_time;    /* 200 /proc/<pid>/stat field 22 of the refiller */
    uint64_t refiller_pidns;         /* 208 pid namespace inode of the refiller */
    uint64_t refiller_lease_ns;      /* 216 CLOCK_MONOTONIC at which the lease expires */
    uint64_t refiller_generation;    /* 224 bumped at every takeover */
    /* limit hits (minor 5): allocations refused with CUDA_ERROR_OUT_OF_MEMORY */
    uint64_t refusals;               /* 232 count, claim-wide */
    uint64_t last_refused_bytes;     /* 240 requested size of the last refused allocation */
    uint64_t last_refused_ns;        /* 248 CLOCK_REALTIME of the last refusal */
};

/*
 * A shared allocation (minor 7, 160 bytes): device memory one process of the
 * claim exported (cuIpcGetMemHandle) and that processes of the claim hold
 * (the exporter until it frees it, importers until they close it). Its bytes
 * left the exporter's slot when it was exported and are on the device's
 * used_bytes for as long as the record is live; they leave it with the last
 * holder (reclaim of a dead holder included). Changes that move used_bytes or
 * a slot's charged_bytes (creation, the last holder's drop) happen under the
 * device's charge lock with the undo record; adding or dropping a holder that
 * is not the last is one atomic store under the same lock.
 */
struct vgpu_region_shared {
    uint8_t key[VGPU_REGION_SHARED_KEY_LEN]; /*   0 the driver's handle bytes */
    uint64_t bytes;                          /*  64 charged to the claim while live */
    uint32_t device;                         /*  72 device record index */
    uint32_t state;                          /*  76 VGPU_SHARED_FREE/LIVE */
    uint64_t holders[VGPU_REGION_MAX_SLOTS / 64]; /* 80 bit s: slot s holds it */
    uint32_t kind;                           /* 144 VGPU_SHARED_KIND_* */
    uint8_t reserved[12];                    /* 148 */
};

/* Per-device usage of one process (64 bytes). */
struct vgpu_region_slot_device {
    uint64_t used_bytes;      /*  0 bytes of tracked allocations */
    uint64_t peak_bytes;      /*  8 high-water mark of used_bytes */
    uint64_t overhead_bytes;  /* 16 context/module memory beyond tracked bytes (NVML) */
    uint64_t kernel_launches; /* 24 (issue 4) */
    uint64_t throttled_ns;    /* 32 time launches waited for tokens (issue 4) */
    uint32_t sm_util_percent; /* 40 last sampled SM utilisation (issue 4) */
    uint32_t pending_charge_us; /* 44 (minor 6) launch charges (us) taken from the bucket by launches
                                   still waiting for their turn: a dead process's are given
                                   back when its slot is reclaimed */
    uint64_t launch_cost_ns;  /* 48 estimated GPU ns per launch of this process, set by the
                                 refiller (minor 1; on a MIG instance by the process itself,
                                 from its timed launches, for the refiller only); 0 = not
                                 estimated yet */
    uint64_t charged_bytes;   /* 56 bytes this process has added to the device's used_bytes:
                                 used + overhead + reservations in flight (minor 3) */
};

/*
 * A process slot (1152 bytes). Index d of devices[] refers to device record
 * d. seq is a seqlock written only by the owner: odd while the owner updates
 * devices[]; readers retry until they read the same even value twice.
 */
struct vgpu_region_slot {
    uint32_t state;        /*   0 VGPU_SLOT_FREE/ACTIVE */
    uint32_t pid;          /*   4 pid in the owner's pid namespace */
    uint32_t host_pid;     /*   8 pid in the initial namespace, 0 = unknown */
    uint32_t seq;          /*  12 seqlock */
    uint64_t start_time;   /*  16 /proc/<pid>/stat field 22 (clock ticks since boot) */
    uint64_t pidns;        /*  24 inode of the owner's /proc/self/ns/pid */
    uint64_t heartbeat_ns; /*  32 CLOCK_REALTIME of the slot claim / last overhead refresh */
    uint32_t flags;        /*  40 VGPU_SLOT_FLAG_* (minor 3) */
    uint8_t reserved[84];  /*  44 */
    struct vgpu_region_slot_device devices[VGPU_REGION_MAX_DEVICES]; /* 128 */
};

/* The whole mapped file. */
struct vgpu_region {
    struct vgpu_region_header header;
    struct vgpu_region_device devices[VGPU_REGION_MAX_DEVICES];
    struct vgpu_region_shared shared[VGPU_REGION_MAX_SHARED]; /* minor 7 */
    struct vgpu_region_slot slots[VGPU_REGION_MAX_SLOTS];
};

_Static_assert(sizeof(struct vgpu_region_header) == VGPU_REGION_HEADER_SIZE, "header size");
_Static_assert(offsetof(struct vgpu_region_header, init_state) == 12, "init_state offset");
_Static_assert(offsetof(struct vgpu_region_header, region_size) == 16, "region_size offset");
_Static_assert(offsetof(struct vgpu_region_header, device_count) == 44, "device_count offset");
_Static_assert(offsetof(struct vgpu_region_header, devices_offset) == 48, "devices_offset offset");
_Static_assert(offsetof(struct vgpu_region_header, generation) == 64, "generation offset");
_Static_assert(offsetof(struct vgpu_region_header, init_time_ns) == 72, "init_time_ns offset");
_Static_assert(offsetof(struct vgpu_region_header, slots_in_use) == 80, "slots_in_use offset");
_Static_assert(sizeof(struct vgpu_region_device) == VGPU_REGION_DEVICE_SIZE, "device size");
_Static_assert(offsetof(struct vgpu_region_device, memory_limit) == 48, "memory_limit offset");
_Static_assert(offsetof(struct vgpu_region_device, state) == 60, "device state offset");
_Static_assert(offsetof(struct vgpu_region_device, used_bytes) == 64, "used_bytes offset");
_Static_assert(offsetof(struct vgpu_region_device, peak_bytes) == 72, "peak_bytes offset");
_Static_assert(offsetof(struct vgpu_region_device, charge_lock) == 80, "charge_lock offset");
_Static_assert(offsetof(struct vgpu_region_device, undo_slot) == 84, "undo_slot offset");
_Static_assert(offsetof(struct vgpu_region_device, undo_used_bytes) == 88, "undo_used offset");
_Static_assert(offsetof(struct vgpu_region_device, undo_charged_bytes) == 96, "undo_charged offset");
_Static_assert(offsetof(struct vgpu_region_device, refused_processes) == 104, "refused offset");
_Static_assert(offsetof(struct vgpu_region_device, bucket_tokens) == 128, "bucket offset");
_Static_assert(offsetof(struct vgpu_region_device, compute_policy) == 160, "policy offset");
_Static_assert(offsetof(struct vgpu_region_device, sm_util_percent) == 164, "sm util offset");
_Static_assert(offsetof(struct vgpu_region_device, sm_share_permyriad) == 168, "sm share offset");
_Static_assert(offsetof(struct vgpu_region_device, sm_share_time_ns) == 176, "sm share time offset");
_Static_assert(offsetof(struct vgpu_region_device, refiller_pid) == 192, "refiller offset");
_Static_assert(offsetof(struct vgpu_region_device, refiller_lease_ns) == 216, "lease offset");
_Static_assert(offsetof(struct vgpu_region_device, refiller_generation) == 224, "refiller gen offset");
_Static_assert(offsetof(struct vgpu_region_device, refusals) == 232, "refusals offset");
_Static_assert(offsetof(struct vgpu_region_device, last_refused_bytes) == 240, "last refused bytes offset");
_Static_assert(offsetof(struct vgpu_region_device, last_refused_ns) == 248, "last refused time offset");
_Static_assert(sizeof(struct vgpu_region_shared) == VGPU_REGION_SHARED_SIZE, "shared size");
_Static_assert(offsetof(struct vgpu_region_shared, bytes) == 64, "shared bytes offset");
_Static_assert(offsetof(struct vgpu_region_shared, device) == 72, "shared device offset");
_Static_assert(offsetof(struct vgpu_region_shared, state) == 76, "shared state offset");
_Static_assert(offsetof(struct vgpu_region_shared, holders) == 80, "shared holders offset");
_Static_assert(offsetof(struct vgpu_region_shared, kind) == 144, "shared kind offset");
_Static_assert(offsetof(struct vgpu_region, shared) == VGPU_REGION_SHARED_OFFSET, "shared offset");
_Static_assert(VGPU_REGION_SHARED_OFFSET + VGPU_REGION_MAX_SHARED * VGPU_REGION_SHARED_SIZE ==
               VGPU_REGION_SLOTS_OFFSET, "shared records fill the space before the slots");
_Static_assert(VGPU_REGION_MAX_SHARED < VGPU_UNDO_SHARED_MASK, "shared index fits undo_slot");
_Static_assert(sizeof(struct vgpu_region_slot_device) == VGPU_REGION_SLOT_DEVICE_SIZE, "slot device size");
_Static_assert(offsetof(struct vgpu_region_slot_device, overhead_bytes) == 16, "overhead offset");
_Static_assert(offsetof(struct vgpu_region_slot_device, throttled_ns) == 32, "throttled offset");
_Static_assert(offsetof(struct vgpu_region_slot_device, sm_util_percent) == 40, "slot sm util offset");
_Static_assert(offsetof(struct vgpu_region_slot_device, pending_charge_us) == 44, "pending offset");
_Static_assert(offsetof(struct vgpu_region_slot_device, launch_cost_ns) == 48, "launch cost offset");
_Static_assert(offsetof(struct vgpu_region_slot_device, charged_bytes) == 56, "charged offset");
_Static_assert(sizeof(struct vgpu_region_slot) == VGPU_REGION_SLOT_SIZE, "slot size");
_Static_assert(offsetof(struct vgpu_region_slot, start_time) == 16, "start_time offset");
_Static_assert(offsetof(struct vgpu_region_slot, pidns) == 24, "pidns offset");
_Static_assert(offsetof(struct vgpu_region_slot, heartbeat_ns) == 32, "heartbeat offset");
_Static_assert(offsetof(struct vgpu_region_slot, flags) == 40, "slot flags offset");
_Static_assert(offsetof(struct vgpu_region_slot, devices) == 128, "slot devices offset");
_Static_assert(offsetof(struct vgpu_region, devices) == VGPU_REGION_DEVICES_OFFSET, "devices offset");
_Static_assert(offsetof(struct vgpu_region, slots) == VGPU_REGION_SLOTS_OFFSET, "slots offset");
_Static_assert(sizeof(struct vgpu_region) == VGPU_REGION_SIZE, "region size");
_Static_assert(VGPU_REGION_SIZE == 598016, "region size is part of the contract");

#endif /* VGPU_REGION_H */
