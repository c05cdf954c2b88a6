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
 * contract-parse - parses a file of a contract between the kubelet plugin
 * and libvgpu.so with the library's own parser and prints what it read in a
 * canonical form, for the cross-language tests of the Go packages under
 * pkg/contract/ (each builds and runs it, and compares with its Go parser).
 *
 * Options and usage: contract-parse --help.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "burst.h"
#include "burstfile.h"
#include "config.h"
#include "hostpids.h"

static const char usage_text[] =
    "usage: contract-parse FORMAT FILE\n"
    "       contract-parse --constants\n"
    "\n"
    "FORMAT is the contract FILE (\"-\" = stdin) is read as:\n"
    "  hostpids     a claim's host/pids (vgpu_hostpids.h); prints\n"
    "               \"<pidns> <pid> <start time> <host pid>\" per entry\n"
    "  burstfile    a claim's host/burst (vgpu_burstfile.h); prints \"<uuid> <bytes>\"\n"
    "               per GPU\n"
    "  burstreply   a reply on host/burst.sock as the library reads it\n"
    "               (vgpu_burstsock.h); prints \"granted\" or \"refused <reason>\"\n"
    "  config       a claim's config (vgpu_config.h); prints \"claim <claim>\",\n"
    "               \"compute_policy <n>\", \"priority <n>\", \"log_level <n|->\",\n"
    "               \"enforcement <0|1>\", then per device \"device <k> <uuid>\n"
    "               <memory bytes> <sm percent>\" and, for an MPS client,\n"
    "               \" mps <thread percent> <pinned bytes> <driver bytes>\"\n"
    "\n"
    "The first line printed is \"ok\" or \"refused: REASON\" (the library's reason),\n"
    "the entries follow an \"ok\". The file is read as the library reads it: at most\n"
    "one byte past the format's size limit. --constants prints \"NAME VALUE\" for the\n"
    "limits of every format. Exit status 0, or 2 with a message naming the bad\n"
    "argument or the file that cannot be read.\n";

#define CONST(name) printf("%s %llu\n", #name, (unsigned long long)(name))

/* Prints every format's limits (--constants). */
static void print_constants(void)
{
    CONST(VGPU_HOSTPIDS_MAX);
    CONST(VGPU_HOSTPIDS_MAX_BYTES);
    CONST(VGPU_PID_MAX);
    CONST(VGPU_BURST_MAX_BYTES);
    CONST(VGPU_BURST_MAX_GRANT);
    CONST(VGPU_BURST_MAX_GPUS);
    CONST(VGPU_BURST_MSG_MAX);
    CONST(VGPU_CONFIG_VERSION);
    CONST(VGPU_CONFIG_MAX_BYTES);
    CONST(VGPU_CONFIG_LINE_MAX);
    CONST(VGPU_CLAIM_UID_MAX);
    CONST(VGPU_CONFIG_MPS_DRIVER_MIN);
    CONST(VGPU_REGION_MAX_DEVICES);
}

/* Reads at most cap bytes of path ("-" = stdin) into buf; returns the length or -1. */
static ssize_t read_file(const char *path, char *buf, size_t cap)
{
    int fd = strcmp(path, "-") == 0 ? STDIN_FILENO : open(path, O_RDONLY | O_CLOEXEC);
    size_t len = 0;
    ssize_t n;

    if (fd < 0)
        return -1;
    while (len < cap && (n = read(fd, buf + len, cap - len)) != 0) {
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            len = (size_t)-1;
            break;
        }
        len += (size_t)n;
    }
    if (fd != STDIN_FILENO)
        close(fd);
    return (ssize_t)len;
}

/* hostpids: the size limit of hostpids.c's refresh, then vgpu_hostpids_parse. */
static int parse_hostpids(const char *text, size_t len)
{
    static struct vgpu_hostpid_entry e[VGPU_HOSTPIDS_MAX];
    char err[VGPU_ERRMSG_MAX];
    int n;

    if (len > VGPU_HOSTPIDS_MAX_BYTES) {
        printf("refused: larger than %d bytes\n", VGPU_HOSTPIDS_MAX_BYTES);
        return 0;
    }
    n = vgpu_hostpids_parse(text, len, e, VGPU_HOSTPIDS_MAX, err);
    if (n < 0) {
        printf("refused: %s\n", err);
        return 0;
    }
    printf("ok\n");
    for (int i = 0; i < n; i++)
        printf("%llu %u %llu %u\n", (unsigned long long)e[i].pidns, e[i].pid,
               (unsigned long long)e[i].start_time, e[i].host_pid);
    return 0;
}

/* burstfile: vgpu_burstfile_parse as burst.c's refresh calls it (its size check included). */
static int parse_burstfile(const char *text, size_t len)
{
    struct vgpu_burst_grant g[VGPU_BURST_MAX_GPUS];
    char err[VGPU_ERRMSG_MAX];
    int n = vgpu_burstfile_parse(text, len, g, VGPU_BURST_MAX_GPUS, err);

    if (n < 0) {
        printf("refused: %s\n", err);
        return 0;
    }
    printf("ok\n");
    for (int i = 0; i < n; i++)
        printf("%s %llu\n", g[i].uuid, (unsigned long long)g[i].bytes);
    return 0;
}

/* burstreply: vgpu_burst_parse_reply as vgpu_burst_ask calls it; its why says granted, refused or malformed. */
static int parse_burstreply(const char *text, size_t len)
{
    static const char refused[] = "refused: ";
    char why[64];

    if (vgpu_burst_parse_reply(text, len, why) == 0) {
        printf("ok\ngranted\n");
        return 0;
    }
    if (strncmp(why, refused, strlen(refused)) == 0) {
        printf("ok\nrefused %s\n", why + strlen(refused));
        return 0;
    }
    printf("refused: %s\n", why);
    return 0;
}

/* config: vgpu_config_parse as gpus.c calls it on what vgpu_config_read read. */
static int parse_config(const char *text, size_t len)
{
    static struct vgpu_claim_config cfg;
    char err[VGPU_ERRMSG_MAX];

    if (vgpu_config_parse(text, len, &cfg, err, NULL) != 0) {
        printf("refused: %s\n", err);
        return 0;
    }
    printf("ok\nclaim %s\ncompute_policy %u\npriority %d\n", cfg.claim, cfg.compute_policy,
           (int)cfg.priority);
    if (cfg.has_log_level)
        printf("log_level %d\n", (int)cfg.log_level);
    else
        printf("log_level -\n");
    printf("enforcement %d\n", cfg.enforcement ? 1 : 0);
    for (uint32_t k = 0; k < cfg.device_count; k++) {
        const struct vgpu_claim_device *d = &cfg.devices[k];

        printf("device %u %s %llu %u", k, d->uuid, (unsigned long long)d->memory_limit, d->sm_limit);
        if (d->mps)
            printf(" mps %u %llu %llu", d->mps_active_thread_percent,
                   (unsigned long long)d->mps_pinned_memory_limit,
                   (unsigned long long)d->mps_driver_memory_limit);
        printf("\n");
    }
    return 0;
}

static const struct format {
    const char *name;
    size_t max_bytes;
    int (*parse)(const char *text, size_t len);
} formats[] = {
    {"hostpids", VGPU_HOSTPIDS_MAX_BYTES, parse_hostpids},
    {"burstfile", VGPU_BURST_MAX_BYTES, parse_burstfile},
    {"burstreply", VGPU_BURST_MSG_MAX, parse_burstreply},
    {"config", VGPU_CONFIG_MAX_BYTES, parse_config},
};

int main(int argc, char **argv)
{
    static char buf[1 << 20];

    if (argc == 2 && strcmp(argv[1], "--help") == 0) {
        fputs(usage_text, stdout);
        return 0;
    }
    if (argc == 2 && strcmp(argv[1], "--constants") == 0) {
        print_constants();
        return 0;
    }
    if (argc != 3) {
        fputs(usage_text, stderr);
        return 2;
    }
    for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]); i++) {
        ssize_t len;

        if (strcmp(argv[1], formats[i].name) != 0)
            continue;
        len = read_file(argv[2], buf, formats[i].max_bytes + 1);
        if (len < 0) {
            fprintf(stderr, "contract-parse: %s: %s\n", argv[2], strerror(errno));
            return 2;
        }
        return formats[i].parse(buf, (size_t)len);
    }
    fprintf(stderr, "contract-parse: unknown format: %s\n(contract-parse --help for usage)\n", argv[1]);
    return 2;
}
