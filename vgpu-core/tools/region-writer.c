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
 * region-writer - writes a shared-region file in a known state, for the Go
 * reader's cross-language tests (pkg/contract/region builds and runs it) and for
 * manual checks. Fields are set by name through the header's structs, so a
 * Go offset that drifts from the header makes the Go reader disagree with it.
 *
 * Options and usage: region-writer --help.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "parse.h"
#include "vgpu_region.h"

static const char usage_text[] =
    "usage: region-writer [options] FILE\n"
    "       region-writer --layout\n"
    "       region-writer --fixture FILE\n"
    "       region-writer --check-config FILE\n"
    "\n"
    "  --device UUID,LIMIT,USED[,SM]      add a device record (peak = USED)\n"
    "  --slot PID,START,DEV,USED[,OVERHEAD]\n"
    "                                     make PID's slot active (pid namespace of\n"
    "                                     this tool, host pid = PID) and set its\n"
    "                                     bytes on device record DEV (peak = USED)\n"
    "  --seq N                            seqlock value of the last slot (odd = mid-write)\n"
    "  --state uninit|initialising|ready  header init_state (default ready)\n"
    "  --major N                          layout major version (default VGPU_REGION_MAJOR)\n"
    "  --magic N                          magic number (default VGPU_REGION_MAGIC)\n"
    "  --generation N                     header generation (default 1)\n"
    "  --size N                           truncate or extend the file to N bytes at the end\n"
    "  --layout                           print \"name value\" for every size and offset\n"
    "                                     of vgpu_region.h and exit\n"
    "  --fixture FILE                     write the fixed region pkg/contract/region's tests\n"
    "                                     compare the Go reader and writer with\n"
    "  --check-config FILE                parse FILE (a claim config, \"-\" = stdin) with\n"
    "                                     the library's own parser and size limit:\n"
    "                                     exit 0 if libvgpu.so can apply all of it, else\n"
    "                                     print the library's line \"invalid claim config\n"
    "                                     FILE:LINE: REASON\" and exit 1 (pkg/node/prepare\n"
    "                                     feeds the plugin's real output through it)\n"
    "\n"
    "Numbers are decimal (0x... accepted for --magic). Exit status 0, or 2 with\n"
    "a message naming the bad argument.\n";

static int usage_error(const char *what, const char *arg)
{
    fprintf(stderr, "region-writer: %s: %s\n(region-writer --help for usage)\n", what,
            arg != NULL ? arg : "");
    return 2;
}

#define OFF(type, field) printf("%s.%s %zu\n", #type, #field, offsetof(struct type, field))
#define SIZE(name) printf("%s %llu\n", #name, (unsigned long long)(name))

/* Prints "name value" for every size and offset of vgpu_region.h (--layout). */
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
    SIZE(VGPU_REGION_SHARED_OFFSET);
    SIZE(VGPU_REGION_SHARED_SIZE);
    SIZE(VGPU_REGION_MAX_SHARED);
    SIZE(VGPU_REGION_SHARED_KEY_LEN);
    SIZE(VGPU_SHARED_FREE);
    SIZE(VGPU_SHARED_LIVE);
    SIZE(VGPU_SHARED_KIND_IPC);
    SIZE(VGPU_SHARED_KIND_VMM_FD);
    SIZE(VGPU_SHARED_KIND_VMM_FABRIC);
    SIZE(VGPU_UNDO_SLOT_MASK);
    SIZE(VGPU_UNDO_SHARED_SHIFT);
    SIZE(VGPU_UNDO_SHARED_MASK);
    SIZE(VGPU_UNDO_SHARED_WAS_LIVE);
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
    OFF(vgpu_region_shared, key);
    OFF(vgpu_region_shared, bytes);
    OFF(vgpu_region_shared, device);
    OFF(vgpu_region_shared, state);
    OFF(vgpu_region_shared, holders);
    OFF(vgpu_region_shared, kind);
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

/* The fixture of pkg/contract/region's tests (--fixture): keep in step with fixtureBytes in
 * pkg/contract/region/fixture_test.go. */
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

/* Splits s at commas into at most max fields (s is modified). Returns the count. */
static int split(char *s, char *fields[], int max)
{
    int n = 0;
    char *save = NULL;

    for (char *t = strtok_r(s, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
        if (n == max)
            return max + 1;
        fields[n++] = t;
    }
    return n;
}

static int num(const char *s, uint64_t max, uint64_t *out)
{
    return vgpu_parse_uint(s, max, out);
}

static int add_device(struct vgpu_region *r, char *arg)
{
    char *f[4];
    int n = split(arg, f, 4);
    uint64_t limit, used, sm = 0;
    struct vgpu_region_device *d;

    if (n < 3 || n > 4 || !vgpu_uuid_valid(f[0]) || num(f[1], UINT64_MAX, &limit) != 0 ||
        num(f[2], UINT64_MAX, &used) != 0 || (n == 4 && num(f[3], 100, &sm) != 0))
        return -1;
    if (r->header.device_count == VGPU_REGION_MAX_DEVICES)
        return -1;
    d = &r->devices[r->header.device_count++];
    snprintf(d->uuid, sizeof(d->uuid), "%s", f[0]);
    d->memory_limit = limit;
    d->sm_limit_percent = (uint32_t)sm;
    d->state = VGPU_DEVICE_ACTIVE;
    d->used_bytes = used;
    d->peak_bytes = used;
    return 0;
}

static struct vgpu_region_slot *last_slot;

static int add_slot(struct vgpu_region *r, char *arg, uint64_t pidns)
{
    char *f[5];
    int n = split(arg, f, 5);
    uint64_t pid, start, dev, used, overhead = 0;
    struct vgpu_region_slot *sl = NULL;

    if (n < 4 || n > 5 || num(f[0], INT32_MAX, &pid) != 0 || pid == 0 ||
        num(f[1], UINT64_MAX, &start) != 0 || num(f[2], VGPU_REGION_MAX_DEVICES - 1, &dev) != 0 ||
        num(f[3], UINT64_MAX, &used) != 0 || (n == 5 && num(f[4], UINT64_MAX, &overhead) != 0))
        return -1;
    for (int i = 0; i < VGPU_REGION_MAX_SLOTS && sl == NULL; i++) {
        if (r->slots[i].state == VGPU_SLOT_ACTIVE && r->slots[i].pid == pid)
            sl = &r->slots[i];
    }
    for (int i = 0; i < VGPU_REGION_MAX_SLOTS && sl == NULL; i++) {
        if (r->slots[i].state == VGPU_SLOT_FREE)
            sl = &r->slots[i];
    }
    if (sl == NULL)
        return -1;
    sl->state = VGPU_SLOT_ACTIVE;
    if (r->header.slots_in_use < (uint32_t)(sl - r->slots) + 1)
        r->header.slots_in_use = (uint32_t)(sl - r->slots) + 1;
    sl->pid = (uint32_t)pid;
    sl->host_pid = (uint32_t)pid;
    sl->start_time = start;
    sl->pidns = pidns;
    sl->devices[dev].used_bytes = used;
    sl->devices[dev].peak_bytes = used;
    sl->devices[dev].overhead_bytes = overhead;
    /* As the library keeps it (minor 3): what the process has put on the device's counter. */
    sl->devices[dev].charged_bytes = used + overhead;
    last_slot = sl;
    return 0;
}

/*
 * --check-config: reads at most one byte past VGPU_CONFIG_MAX_BYTES, as the
 * library does, so that a file over the limit is refused like there.
 */
static int check_config(const char *path)
{
    static char buf[VGPU_CONFIG_MAX_BYTES + 1];
    static struct vgpu_claim_config cfg;
    char err[VGPU_ERRMSG_MAX];
    unsigned line = 0;
    size_t len = 0;
    ssize_t n;
    int fd = strcmp(path, "-") == 0 ? 0 : open(path, O_RDONLY | O_CLOEXEC);

    if (fd < 0) {
        printf("invalid claim config %s:0: cannot open: %s\n", path, strerror(errno));
        return 1;
    }
    while (len < sizeof(buf) && (n = read(fd, buf + len, sizeof(buf) - len)) != 0) {
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            printf("invalid claim config %s:0: cannot read: %s\n", path, strerror(errno));
            if (fd != 0)
                close(fd);
            return 1;
        }
        len += (size_t)n;
    }
    if (fd != 0)
        close(fd);
    if (vgpu_config_parse(buf, len, &cfg, err, &line) != 0) {
        printf("invalid claim config %s:%u: %s\n", path, line, err);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct vgpu_region *r;
    const char *path = NULL;
    uint64_t size = VGPU_REGION_SIZE, v;
    struct stat st;
    int fd, rc = 0;

    if (argc == 2 && strcmp(argv[1], "--help") == 0) {
        fputs(usage_text, stdout);
        return 0;
    }
    if (argc < 2) {
        fputs(usage_text, stderr);
        return 2;
    }
    if (argc == 2 && strcmp(argv[1], "--layout") == 0) {
        print_offsets();
        return 0;
    }
    if (argc == 3 && strcmp(argv[1], "--fixture") == 0)
        return write_fixture(argv[2]);
    if (argc == 3 && strcmp(argv[1], "--check-config") == 0)
        return check_config(argv[2]);
    r = calloc(1, sizeof(*r));
    if (r == NULL)
        return usage_error("out of memory", NULL);
    r->header = (struct vgpu_region_header){
        .magic = VGPU_REGION_MAGIC, .major = VGPU_REGION_MAJOR, .minor = VGPU_REGION_MINOR,
        .init_state = VGPU_REGION_READY, .region_size = VGPU_REGION_SIZE,
        .header_size = VGPU_REGION_HEADER_SIZE, .device_size = VGPU_REGION_DEVICE_SIZE,
        .slot_size = VGPU_REGION_SLOT_SIZE, .max_devices = VGPU_REGION_MAX_DEVICES,
        .max_slots = VGPU_REGION_MAX_SLOTS, .devices_offset = VGPU_REGION_DEVICES_OFFSET,
        .slots_offset = VGPU_REGION_SLOTS_OFFSET, .generation = 1};
    for (int i = 1; i < argc && rc == 0; i++) {
        const char *opt = argv[i];
        char *arg = i + 1 < argc ? argv[i + 1] : NULL;

        if (opt[0] != '-') {
            if (path != NULL)
                rc = usage_error("more than one FILE", opt);
            path = opt;
            continue;
        }
        if (arg == NULL) {
            rc = usage_error("missing value for", opt);
            break;
        }
        i++;
        if (strcmp(opt, "--device") == 0) {
            if (add_device(r, arg) != 0)
                rc = usage_error("--device wants UUID,LIMIT,USED[,SM] (at most 16)", arg);
        } else if (strcmp(opt, "--slot") == 0) {
            uint64_t ns = stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0;
            if (add_slot(r, arg, ns) != 0)
                rc = usage_error("--slot wants PID,START,DEV,USED[,OVERHEAD]", arg);
        } else if (strcmp(opt, "--seq") == 0) {
            if (last_slot == NULL || num(arg, UINT32_MAX, &v) != 0)
                rc = usage_error("--seq wants a number after a --slot", arg);
            else
                last_slot->seq = (uint32_t)v;
        } else if (strcmp(opt, "--state") == 0) {
            if (strcmp(arg, "uninit") == 0)
                r->header.init_state = VGPU_REGION_UNINIT;
            else if (strcmp(arg, "initialising") == 0)
                r->header.init_state = VGPU_REGION_INITIALISING;
            else if (strcmp(arg, "ready") == 0)
                r->header.init_state = VGPU_REGION_READY;
            else
                rc = usage_error("--state wants uninit|initialising|ready", arg);
        } else if (strcmp(opt, "--major") == 0) {
            if (num(arg, UINT16_MAX, &v) != 0)
                rc = usage_error("--major wants 0..65535", arg);
            else
                r->header.major = (uint16_t)v;
        } else if (strcmp(opt, "--magic") == 0) {
            char *end;
            errno = 0;
            v = strtoull(arg, &end, 0);
            if (errno != 0 || *end != '\0' || arg[0] == '-')
                rc = usage_error("--magic wants a number", arg);
            else
                r->header.magic = v;
        } else if (strcmp(opt, "--generation") == 0) {
            if (num(arg, UINT64_MAX, &v) != 0)
                rc = usage_error("--generation wants a number", arg);
            else
                r->header.generation = v;
        } else if (strcmp(opt, "--size") == 0) {
            if (num(arg, UINT64_MAX, &size) != 0)
                rc = usage_error("--size wants a byte count", arg);
        } else {
            rc = usage_error("unknown option", opt);
        }
    }
    if (rc == 0 && path == NULL)
        rc = usage_error("missing", "FILE");
    if (rc != 0) {
        free(r);
        return rc;
    }
    fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0666);
    /* fchmod: 0666 like the plugin's regions, whatever the umask. */
    if (fd < 0 || fchmod(fd, 0666) != 0 || pwrite(fd, r, sizeof(*r), 0) != (ssize_t)sizeof(*r) ||
        ftruncate(fd, (off_t)size) != 0) {
        fprintf(stderr, "region-writer: %s: %s\n", path, strerror(errno));
        rc = 1;
    }
    if (fd >= 0)
        close(fd);
    free(r);
    return rc;
}
