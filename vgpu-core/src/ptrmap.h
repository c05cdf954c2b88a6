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
 * ptrmap.h - open-addressing hash map from a 64-bit handle (device pointer,
 * VMM handle, array handle) to what was charged for it.
 *
 * Not synchronised: the owner (accounting code) holds its process mutex
 * around every call. Linear probing with backward-shift deletion (no
 * tombstones), power-of-two capacity, growth at 50% load.
 */
#ifndef VGPU_PTRMAP_H
#define VGPU_PTRMAP_H

#include <stddef.h>
#include <stdint.h>

struct vgpu_ptrmap_entry {
    uint64_t key;      /* 0 marks an empty bucket; key 0 is never stored */
    uint64_t size;     /* bytes charged */
    int16_t device;    /* CUDA ordinal charged */
    uint16_t part;     /* index of the claim (vgpu_gpu.parts) charged */
    uint32_t refcount; /* VMM handles: cuMemCreate + retains not yet released */
    union {
        uint64_t pool; /* pool allocations: the CUmemoryPool they came from */
        struct {
            uint32_t maps;   /* VMM handles: live (or in-flight) cuMemMap mappings of it */
            uint32_t shared; /* VMM handles: shared record held (index + 1), 0 = none */
        };
    };
};

struct vgpu_ptrmap {
    struct vgpu_ptrmap_entry *buckets;
    size_t capacity; /* power of two, or 0 before the first insert */
    size_t count;
};

/* Inserts or replaces key. Returns 0, or -1 if memory for growth is unavailable. */
int vgpu_ptrmap_put(struct vgpu_ptrmap *m, const struct vgpu_ptrmap_entry *e);

/* Returns the entry for key (valid until the next put/remove), or NULL. */
struct vgpu_ptrmap_entry *vgpu_ptrmap_get(struct vgpu_ptrmap *m, uint64_t key);

/* Removes key, copying the entry to *out when out is not NULL. Returns 0, or -1 if absent. */
int vgpu_ptrmap_remove(struct vgpu_ptrmap *m, uint64_t key, struct vgpu_ptrmap_entry *out);

/* Forgets every entry, keeping the allocation (safe in a fork child). */
void vgpu_ptrmap_clear(struct vgpu_ptrmap *m);

/* Frees the buckets. */
void vgpu_ptrmap_destroy(struct vgpu_ptrmap *m);

/*
 * VA map: the virtual address ranges mapped to VMM handles (cuMemMap), kept
 * sorted by base address so that an unmap of a range finds every mapping
 * inside it. Not synchronised either (same owner, same mutex).
 */
struct vgpu_vamap_entry {
    uint64_t base;   /* first mapped address */
    uint64_t size;   /* bytes mapped */
    uint64_t handle; /* the CUmemGenericAllocationHandle mapped there */
};

struct vgpu_vamap {
    struct vgpu_vamap_entry *v; /* sorted by base, ranges never overlap */
    size_t count, capacity;
};

/* Inserts a mapping (replacing one with the same base). Returns 0, or -1 without memory. */
int vgpu_vamap_put(struct vgpu_vamap *m, const struct vgpu_vamap_entry *e);

/*
 * Removes every mapping lying wholly inside [base, base + size) and returns
 * them in *out (malloc'd, the caller frees it; NULL when none). Mappings
 * that only overlap the range stay. Returns how many were removed, or -1
 * without memory (then nothing is removed).
 */
long vgpu_vamap_take(struct vgpu_vamap *m, uint64_t base, uint64_t size,
                     struct vgpu_vamap_entry **out);

/* Forgets every mapping, keeping the allocation (safe in a fork child). */
void vgpu_vamap_clear(struct vgpu_vamap *m);

#endif /* VGPU_PTRMAP_H */
