/*
 * region_tool.c - the C side of pkg/region's cross-language tests.
 *
 *   region_tool offsets      print "name value" for every size and offset of vgpu_region.h
 *   region_tool write PATH   write the fixture region (see fixture_test.go) to PATH
 *
 * Fields are set by name through the header's structs, so a Go offset that
 * drifts from the header makes the Go reader disagree with this writer.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vgpu_region.h"

#define OFF(type, field) printf("%s.%s %zu\n", #type, #field, offsetof(struct type, field))
#define SIZE(name) printf("%s %llu\n", #name, (unsigned long long)(name))

static void print_offsets(void)
{
    SIZE(VGPU_REGION_SIZE);
    SIZE(VGPU_REGION_MAGIC);
    SIZE(VGPU_REGION_MAJOR);
    SIZE(VGPU_REGION_MAX_DEVICES);
    SIZE(VGPU_REGION_MAX_SLOTS);
    SIZE(VGPU_REGION_UUID_LEN);
    SIZE(VGPU_REGION_HEADER_SIZE);
    SIZE(VGPU_REGION_DEVICE_SIZE);
    SIZE(VGPU_REGION_SLOT_SIZE);
    SIZE(VGPU_REGION_SLOT_DEVICE_SIZE);
    SIZE(VGPU_REGION_DEVICES_OFFSET);
    SIZE(VGPU_REGION_SLOTS_OFFSET);
    SIZE(VGPU_REGION_UNINIT);
    SIZE(VGPU_REGION_INITIALISING);
    SIZE(VGPU_REGION_READY);
    SIZE(VGPU_DEVICE_ACTIVE);
    SIZE(VGPU_SLOT_FREE);
    SIZE(VGPU_SLOT_ACTIVE);
    SIZE(VGPU_INIT_PIDNS_INO);
    SIZE(VGPU_SLOT_FLAG_FAIL_CLOSED);
    OFF(vgpu_region_header, magic);
    OFF(vgpu_region_header, major);
    OFF(vgpu_region_header, minor);
    OFF(vgpu_region_header, init_state);
    OFF(vgpu_region_header, region_size);
    OFF(vgpu_region_header, header_size);
    OFF(vgpu_region_header, device_size);
    OFF(vgpu_region_header, slot_size);
    OFF(vgpu_region_header, max_devices);
    OFF(vgpu_region_header, max_slots);
    OFF(vgpu_region_header, device_count);
    OFF(vgpu_region_header, devices_offset);
    OFF(vgpu_region_header, slots_offset);
    OFF(vgpu_region_header, generation);
    OFF(vgpu_region_header, init_time_ns);
    OFF(vgpu_region_header, slots_in_use);
    OFF(vgpu_region_device, uuid);
    OFF(vgpu_region_device, memory_limit);
    OFF(vgpu_region_device, sm_limit_percent);
    OFF(vgpu_region_device, state);
    OFF(vgpu_region_device, used_bytes);
    OFF(vgpu_region_device, peak_bytes);
    OFF(vgpu_region_device, charge_lock);
    OFF(vgpu_region_device, undo_slot);
    OFF(vgpu_region_device, undo_used_bytes);
    OFF(vgpu_region_device, undo_charged_bytes);
    OFF(vgpu_region_device, refused_processes);
    OFF(vgpu_region_device, compute_policy);
    OFF(vgpu_region_device, sm_util_percent);
    OFF(vgpu_region_device, sm_share_permyriad);
    OFF(vgpu_region_device, sm_share_time_ns);
    OFF(vgpu_region_device, refusals);
    OFF(vgpu_region_device, last_refused_bytes);
    OFF(vgpu_region_device, last_refused_ns);
    OFF(vgpu_region_slot, state);
    OFF(vgpu_region_slot, pid);
    OFF(vgpu_region_slot, host_pid);
    OFF(vgpu_region_slot, seq);
    OFF(vgpu_region_slot, start_time);
    OFF(vgpu_region_slot, pidns);
    OFF(vgpu_region_slot, heartbeat_ns);
    OFF(vgpu_region_slot, flags);
    OFF(vgpu_region_slot, devices);
    OFF(vgpu_region_slot_device, used_bytes);
    OFF(vgpu_region_slot_device, peak_bytes);
    OFF(vgpu_region_slot_device, overhead_bytes);
    OFF(vgpu_region_slot_device, kernel_launches);
    OFF(vgpu_region_slot_device, throttled_ns);
    OFF(vgpu_region_slot_device, sm_util_percent);
    OFF(vgpu_region_slot_device, charged_bytes);
}

static void set_device(struct vgpu_region_device *d, const char *uuid, uint64_t limit, uint32_t sm,
                       uint64_t used, uint64_t peak, uint32_t policy, uint32_t util)
{
    snprintf(d->uuid, sizeof(d->uuid), "%s", uuid);
    d->memory_limit = limit;
    d->sm_limit_percent = sm;
    d->state = VGPU_DEVICE_ACTIVE;
    d->used_bytes = used;
    d->peak_bytes = peak;
    d->compute_policy = policy;
    d->sm_util_percent = util;
}

static void set_usage(struct vgpu_region_slot_device *u, uint64_t used, uint64_t peak,
                      uint64_t overhead, uint64_t launches, uint64_t throttled, uint32_t util)
{
    u->used_bytes = used;
    u->peak_bytes = peak;
    u->overhead_bytes = overhead;
    u->kernel_launches = launches;
    u->throttled_ns = throttled;
    u->sm_util_percent = util;
}

/* The fixture: keep in step with fixtureBytes in fixture_test.go. */
static int write_fixture(const char *path)
{
    struct vgpu_region *r = calloc(1, sizeof(*r));
    struct vgpu_region_header *h;
    struct vgpu_region_slot *s;
    FILE *f;
    int rc = 0;

    if (r == NULL)
        return 1;
    h = &r->header;
    h->magic = VGPU_REGION_MAGIC;
    h->major = VGPU_REGION_MAJOR;
    h->minor = 5; /* 2: slots_in_use; 3: charges; 4: SM share; 5: refusals */
    h->init_state = VGPU_REGION_READY;
    h->region_size = VGPU_REGION_SIZE;
    h->header_size = VGPU_REGION_HEADER_SIZE;
    h->device_size = VGPU_REGION_DEVICE_SIZE;
    h->slot_size = VGPU_REGION_SLOT_SIZE;
    h->max_devices = VGPU_REGION_MAX_DEVICES;
    h->max_slots = VGPU_REGION_MAX_SLOTS;
    h->device_count = 2;
    h->devices_offset = VGPU_REGION_DEVICES_OFFSET;
    h->slots_offset = VGPU_REGION_SLOTS_OFFSET;
    h->generation = 3;
    h->init_time_ns = 1700000000123456789ull;
    h->slots_in_use = 4; /* slots 0 and 3 are active */
    set_device(&r->devices[0], "GPU-11111111-2222-3333-4444-555555555555", 4ull << 30, 30,
               1610612736ull, 2ull << 30, VGPU_POLICY_STRICT, 25);
    r->devices[0].refusals = 7;
    r->devices[0].last_refused_bytes = 3ull << 30;
    r->devices[0].last_refused_ns = 1700000003000000000ull;
    set_device(&r->devices[1], "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee", 8ull << 30, 0,
               512ull << 20, 512ull << 20, VGPU_POLICY_WORK_CONSERVING, 0);

    s = &r->slots[0];
    s->state = VGPU_SLOT_ACTIVE;
    s->pid = 7;
    s->host_pid = 4242;
    s->seq = 6;
    s->start_time = 123456;
    s->pidns = 4026532000ull;
    s->heartbeat_ns = 1700000001000000000ull;
    set_usage(&s->devices[0], 1ull << 30, 3ull << 29, 256ull << 20, 1000, 2500000000ull, 20);
    set_usage(&s->devices[1], 512ull << 20, 512ull << 20, 0, 10, 0, 0);

    s = &r->slots[3];
    s->state = VGPU_SLOT_ACTIVE;
    s->pid = 9;
    s->seq = 2;
    s->start_time = 654321;
    s->pidns = VGPU_INIT_PIDNS_INO;
    s->heartbeat_ns = 1700000002000000000ull;
    set_usage(&s->devices[0], 256ull << 20, 256ull << 20, 0, 50, 0, 5);

    f = fopen(path, "wb");
    if (f == NULL || fwrite(r, sizeof(*r), 1, f) != 1)
        rc = 1;
    if (f != NULL && fclose(f) != 0)
        rc = 1;
    free(r);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "offsets") == 0) {
        print_offsets();
        return 0;
    }
    if (argc == 3 && strcmp(argv[1], "write") == 0)
        return write_fixture(argv[2]);
    fprintf(stderr, "usage: %s offsets | write PATH\n", argv[0]);
    return 2;
}
