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
 * vgpu_reserve.h - reservations on a byte counter shared by threads or
 * processes: add only while the total stays within a limit, without locks.
 *
 * libvgpu.so keeps a claim's usage this way when the claim has no shared
 * region, and the fake driver a simulated GPU's memory; the shared region's
 * locked charge path uses the same bound check (vgpu_reserve_fits).
 */
#ifndef VGPU_RESERVE_H
#define VGPU_RESERVE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* Whether used + size stays within limit (0: no limit) and does not wrap. */
static inline bool vgpu_reserve_fits(uint64_t used, uint64_t size, uint64_t limit)
{
    if (used > UINT64_MAX - size)
        return false;
    return limit == 0 || used + size <= limit;
}

/*
 * Adds size to *counter if the new total fits limit (0: no limit); a
 * compare-and-swap loop, so concurrent reservations never overshoot.
 * Returns 0, or -1 with *counter unchanged.
 */
static inline int vgpu_reserve(_Atomic uint64_t *counter, uint64_t size, uint64_t limit)
{
    uint64_t cur = atomic_load_explicit(counter, memory_order_relaxed);

    do {
        if (!vgpu_reserve_fits(cur, size, limit))
            return -1;
    } while (!atomic_compare_exchange_weak_explicit(counter, &cur, cur + size,
                                                    memory_order_acq_rel, memory_order_relaxed));
    return 0;
}

/* Subtracts size from *counter, stopping at 0 so a double release cannot wrap. */
static inline void vgpu_unreserve(_Atomic uint64_t *counter, uint64_t size)
{
    uint64_t cur = atomic_load_explicit(counter, memory_order_relaxed);

    while (!atomic_compare_exchange_weak_explicit(counter, &cur, cur > size ? cur - size : 0,
                                                  memory_order_acq_rel, memory_order_relaxed)) {
    }
}

#endif
