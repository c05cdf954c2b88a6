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

/* ptrmap.c - see ptrmap.h. */
#include "ptrmap.h"

#include <stdlib.h>
#include <string.h>

#define INITIAL_CAPACITY 64

/* Device pointers are aligned; a multiplicative mix spreads the low zero bits. */
static size_t slot_of(uint64_t key, size_t capacity)
{
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdULL;
    key ^= key >> 33;
    return (size_t)key & (capacity - 1);
}

static void insert_fresh(struct vgpu_ptrmap_entry *buckets, size_t capacity,
                         const struct vgpu_ptrmap_entry *e)
{
    size_t i = slot_of(e->key, capacity);

    while (buckets[i].key != 0)
        i = (i + 1) & (capacity - 1);
    buckets[i] = *e;
}

static int grow(struct vgpu_ptrmap *m)
{
    size_t cap = m->capacity == 0 ? INITIAL_CAPACITY : m->capacity * 2;
    struct vgpu_ptrmap_entry *b = calloc(cap, sizeof(*b));

    if (b == NULL)
        return -1;
    for (size_t i = 0; i < m->capacity; i++) {
        if (m->buckets[i].key != 0)
            insert_fresh(b, cap, &m->buckets[i]);
    }
    free(m->buckets);
    m->buckets = b;
    m->capacity = cap;
    return 0;
}

struct vgpu_ptrmap_entry *vgpu_ptrmap_get(struct vgpu_ptrmap *m, uint64_t key)
{
    size_t i;

    if (m->capacity == 0 || key == 0)
        return NULL;
    for (i = slot_of(key, m->capacity); m->buckets[i].key != 0; i = (i + 1) & (m->capacity - 1)) {
        if (m->buckets[i].key == key)
            return &m->buckets[i];
    }
    return NULL;
}

int vgpu_ptrmap_put(struct vgpu_ptrmap *m, const struct vgpu_ptrmap_entry *e)
{
    struct vgpu_ptrmap_entry *old;

    if (e->key == 0)
        return -1;
    old = vgpu_ptrmap_get(m, e->key);
    if (old != NULL) {
        *old = *e;
        return 0;
    }
    if ((m->count + 1) * 2 > m->capacity && grow(m) != 0)
        return -1;
    insert_fresh(m->buckets, m->capacity, e);
    m->count++;
    return 0;
}

int vgpu_ptrmap_remove(struct vgpu_ptrmap *m, uint64_t key, struct vgpu_ptrmap_entry *out)
{
    struct vgpu_ptrmap_entry *e = vgpu_ptrmap_get(m, key);
    size_t mask, hole, j;

    if (e == NULL)
        return -1;
    if (out != NULL)
        *out = *e;
    mask = m->capacity - 1;
    hole = (size_t)(e - m->buckets);
    /* Backward-shift: move later members of the probe run into the hole. */
    for (j = (hole + 1) & mask; m->buckets[j].key != 0; j = (j + 1) & mask) {
        size_t home = slot_of(m->buckets[j].key, m->capacity);
        /* Move j into the hole unless its home lies cyclically in (hole, j]. */
        int home_between = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
        if (!home_between) {
            m->buckets[hole] = m->buckets[j];
            hole = j;
        }
    }
    m->buckets[hole].key = 0;
    m->count--;
    return 0;
}

void vgpu_ptrmap_clear(struct vgpu_ptrmap *m)
{
    if (m->buckets != NULL)
        memset(m->buckets, 0, m->capacity * sizeof(*m->buckets));
    m->count = 0;
}

void vgpu_ptrmap_destroy(struct vgpu_ptrmap *m)
{
    free(m->buckets);
    m->buckets = NULL;
    m->capacity = 0;
    m->count = 0;
}

/* Index of the first mapping whose base is >= base. */
static size_t vamap_lower(const struct vgpu_vamap *m, uint64_t base)
{
    size_t lo = 0, hi = m->count;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;

        if (m->v[mid].base < base)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

int vgpu_vamap_put(struct vgpu_vamap *m, const struct vgpu_vamap_entry *e)
{
    size_t i = vamap_lower(m, e->base);

    if (i < m->count && m->v[i].base == e->base) {
        m->v[i] = *e;
        return 0;
    }
    if (m->count == m->capacity) {
        size_t cap = m->capacity == 0 ? INITIAL_CAPACITY : m->capacity * 2;
        struct vgpu_vamap_entry *nv = realloc(m->v, cap * sizeof(*nv));

        if (nv == NULL)
            return -1;
        m->v = nv;
        m->capacity = cap;
    }
    memmove(&m->v[i + 1], &m->v[i], (m->count - i) * sizeof(*m->v));
    m->v[i] = *e;
    m->count++;
    return 0;
}

long vgpu_vamap_take(struct vgpu_vamap *m, uint64_t base, uint64_t size,
                     struct vgpu_vamap_entry **out)
{
    size_t i = vamap_lower(m, base), j, n = 0, kept = 0;
    uint64_t end = size > UINT64_MAX - base ? UINT64_MAX : base + size;
    struct vgpu_vamap_entry *taken;

    *out = NULL;
    for (j = i; j < m->count && m->v[j].base < end; j++)
        n += m->v[j].size <= end - m->v[j].base;
    if (n == 0)
        return 0;
    taken = malloc(n * sizeof(*taken));
    if (taken == NULL)
        return -1;
    n = 0;
    for (j = i; j < m->count && m->v[j].base < end; j++) {
        if (m->v[j].size <= end - m->v[j].base)
            taken[n++] = m->v[j];
        else
            m->v[i + kept++] = m->v[j];
    }
    memmove(&m->v[i + kept], &m->v[j], (m->count - j) * sizeof(*m->v));
    m->count -= n;
    *out = taken;
    return (long)n;
}

void vgpu_vamap_clear(struct vgpu_vamap *m)
{
    m->count = 0;
}
