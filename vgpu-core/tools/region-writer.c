/*
 * region-writer - writes a shared-region file in a known state, for the Go
 * reader's cross-language tests (pkg/region) and for manual checks.
 *
 * usage: region-writer [options] FILE
 *        region-writer --layout
 *
 *   --device UUID,LIMIT,USED[,SM]      add a device record (peak = USED)
 *   --slot PID,START,DEV,USED[,OVERHEAD]
 *                                      make PID's slot active (pid namespace of
 *                                      this tool, host pid = PID) and set its
 *                                      bytes on device record DEV (peak = USED)
 *   --seq N                            seqlock value of the last slot (odd = mid-write)
 *   --state uninit|initialising|ready  header init_state (default ready)
 *   --major N                          layout major version (default VGPU_REGION_MAJOR)
 *   --magic N                          magic number (default VGPU_REGION_MAGIC)
 *   --generation N                     header generation (default 1)
 *   --size N                           truncate or extend the file to N bytes at the end
 *   --layout                           print sizes and offsets as JSON and exit
 *
 * Numbers are decimal (0x... accepted for --magic). Exit status 0, or 2 with
 * a message naming the bad argument.
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

static int usage_error(const char *what, const char *arg)
{
    fprintf(stderr, "region-writer: %s: %s\n(run with no arguments for usage)\n", what,
            arg != NULL ? arg : "");
    return 2;
}

static void print_layout(void)
{
    printf("{\"size\":%d,\"magic\":%llu,\"major\":%d,\"minor\":%d,"
           "\"maxDevices\":%d,\"maxSlots\":%d,\"uuidLen\":%d,"
           "\"headerSize\":%d,\"deviceSize\":%d,\"slotSize\":%d,\"slotDeviceSize\":%d,"
           "\"devicesOffset\":%d,\"slotsOffset\":%d,"
           "\"header\":{\"initState\":%zu,\"regionSize\":%zu,\"deviceCount\":%zu,"
           "\"generation\":%zu,\"initTimeNs\":%zu},"
           "\"device\":{\"uuid\":%zu,\"memoryLimit\":%zu,\"smLimitPercent\":%zu,\"state\":%zu,"
           "\"usedBytes\":%zu,\"peakBytes\":%zu,\"bucketTokens\":%zu,\"computePolicy\":%zu,"
           "\"smUtilPercent\":%zu,\"refillerPid\":%zu,\"refillerLeaseNs\":%zu},"
           "\"slot\":{\"state\":%zu,\"pid\":%zu,\"hostPid\":%zu,\"seq\":%zu,\"startTime\":%zu,"
           "\"pidns\":%zu,\"heartbeatNs\":%zu,\"devices\":%zu},"
           "\"slotDevice\":{\"usedBytes\":%zu,\"peakBytes\":%zu,\"overheadBytes\":%zu,"
           "\"kernelLaunches\":%zu,\"throttledNs\":%zu,\"smUtilPercent\":%zu}}\n",
           VGPU_REGION_SIZE, (unsigned long long)VGPU_REGION_MAGIC, VGPU_REGION_MAJOR,
           VGPU_REGION_MINOR, VGPU_REGION_MAX_DEVICES, VGPU_REGION_MAX_SLOTS,
           VGPU_REGION_UUID_LEN, VGPU_REGION_HEADER_SIZE, VGPU_REGION_DEVICE_SIZE,
           VGPU_REGION_SLOT_SIZE, VGPU_REGION_SLOT_DEVICE_SIZE, VGPU_REGION_DEVICES_OFFSET,
           VGPU_REGION_SLOTS_OFFSET, offsetof(struct vgpu_region_header, init_state),
           offsetof(struct vgpu_region_header, region_size),
           offsetof(struct vgpu_region_header, device_count),
           offsetof(struct vgpu_region_header, generation),
           offsetof(struct vgpu_region_header, init_time_ns),
           offsetof(struct vgpu_region_device, uuid),
           offsetof(struct vgpu_region_device, memory_limit),
           offsetof(struct vgpu_region_device, sm_limit_percent),
           offsetof(struct vgpu_region_device, state),
           offsetof(struct vgpu_region_device, used_bytes),
           offsetof(struct vgpu_region_device, peak_bytes),
           offsetof(struct vgpu_region_device, bucket_tokens),
           offsetof(struct vgpu_region_device, compute_policy),
           offsetof(struct vgpu_region_device, sm_util_percent),
           offsetof(struct vgpu_region_device, refiller_pid),
           offsetof(struct vgpu_region_device, refiller_lease_ns),
           offsetof(struct vgpu_region_slot, state), offsetof(struct vgpu_region_slot, pid),
           offsetof(struct vgpu_region_slot, host_pid), offsetof(struct vgpu_region_slot, seq),
           offsetof(struct vgpu_region_slot, start_time),
           offsetof(struct vgpu_region_slot, pidns),
           offsetof(struct vgpu_region_slot, heartbeat_ns),
           offsetof(struct vgpu_region_slot, devices),
           offsetof(struct vgpu_region_slot_device, used_bytes),
           offsetof(struct vgpu_region_slot_device, peak_bytes),
           offsetof(struct vgpu_region_slot_device, overhead_bytes),
           offsetof(struct vgpu_region_slot_device, kernel_launches),
           offsetof(struct vgpu_region_slot_device, throttled_ns),
           offsetof(struct vgpu_region_slot_device, sm_util_percent));
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

int main(int argc, char **argv)
{
    struct vgpu_region *r;
    const char *path = NULL;
    uint64_t size = VGPU_REGION_SIZE, v;
    struct stat st;
    int fd, rc = 0;

    if (argc == 2 && strcmp(argv[1], "--layout") == 0) {
        print_layout();
        return 0;
    }
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
        rc = usage_error("usage: region-writer [--device ...] [--slot ...] [...] FILE | --layout",
                         NULL);
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
