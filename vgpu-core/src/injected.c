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

/* injected.c - see injected.h. */
#include "injected.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "log.h"
#include "vgpu_config.h"

#ifndef STATX_MNT_ID
#define STATX_MNT_ID 0x00001000U
#endif

/* A mount table larger than this is not a container's: treat it as unreadable. */
#define MOUNTINFO_MAX (16u << 20)

/* Reads a whole /proc file (its size is unknown until read). Returns NULL with errno set. */
static char *read_proc_text(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    size_t cap = 16384, len = 0;
    char *buf, *bigger;
    ssize_t n;

    if (fd < 0)
        return NULL;
    buf = malloc(cap);
    while (buf != NULL) {
        if (len + 1 == cap) {
            bigger = cap < MOUNTINFO_MAX ? realloc(buf, cap * 2) : NULL;
            if (bigger == NULL) {
                free(buf);
                buf = NULL;
                errno = ENOMEM;
                break;
            }
            buf = bigger;
            cap *= 2;
        }
        n = read(fd, buf + len, cap - 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            free(buf);
            buf = NULL;
            break;
        }
        if (n == 0) {
            buf[len] = '\0';
            break;
        }
        len += (size_t)n;
    }
    close(fd);
    return buf;
}

/* Copies a mountinfo path field, decoding the kernel's \ooo escapes. Returns false if too long. */
static bool decode_path(const char *s, size_t n, char *out, size_t cap)
{
    size_t o = 0;

    for (size_t i = 0; i < n; i++) {
        char c = s[i];

        if (c == '\\' && i + 3 < n && s[i + 1] >= '0' && s[i + 1] <= '3' &&
            s[i + 2] >= '0' && s[i + 2] <= '7' && s[i + 3] >= '0' && s[i + 3] <= '7') {
            c = (char)((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0'));
            i += 3;
        }
        if (o + 1 >= cap)
            return false;
        out[o++] = c;
    }
    out[o] = '\0';
    return true;
}

/* If path is <root>/<name>/config with a plain name, copies name into out. */
static bool config_name(const char *path, const char *root, char out[VGPU_CLAIM_UID_MAX])
{
    size_t rl = strlen(root), nl;
    const char *name, *slash;

    if (strncmp(path, root, rl) != 0 || path[rl] != '/')
        return false;
    name = path + rl + 1;
    slash = strchr(name, '/');
    if (slash == NULL || strcmp(slash, "/" VGPU_CONFIG_FILE) != 0)
        return false;
    nl = (size_t)(slash - name);
    if (nl == 0 || nl >= VGPU_CLAIM_UID_MAX || (nl == 1 && name[0] == '.') ||
        (nl == 2 && name[0] == '.' && name[1] == '.'))
        return false;
    memcpy(out, name, nl);
    out[nl] = '\0';
    return true;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const struct vgpu_injected_config *)a)->name,
                  ((const struct vgpu_injected_config *)b)->name);
}

int vgpu_mountinfo_configs(const char *text, const char *root, struct vgpu_injected_config *out,
                           int max)
{
    char path[PATH_MAX];
    int found = 0;

    for (const char *line = text; line != NULL && *line != '\0';) {
        const char *end = strchr(line, '\n'), *f[5];
        struct vgpu_injected_config c;
        const char *p = line;
        int nf = 0, stored = -1;

        if (end == NULL)
            end = line + strlen(line);
        /* Fields: mount id, parent id, major:minor, root, mount point. */
        while (nf < 5 && p < end) {
            f[nf++] = p;
            while (p < end && *p != ' ')
                p++;
            while (p < end && *p == ' ')
                p++;
        }
        line = *end == '\n' ? end + 1 : end;
        if (nf < 5)
            continue;
        {
            const char *mp_end = memchr(f[4], ' ', (size_t)(end - f[4]));
            size_t mp_len = (size_t)((mp_end != NULL ? mp_end : end) - f[4]);

            if (!decode_path(f[4], mp_len, path, sizeof(path)) || !config_name(path, root, c.name))
                continue;
        }
        if (sscanf(f[0], "%d", &c.mnt_id) != 1 ||
            sscanf(f[2], "%u:%u", &c.dev_major, &c.dev_minor) != 2)
            continue;
        /* Later lines are mounted on top of earlier ones at the same path. */
        for (int i = 0; i < found && i < max; i++) {
            if (strcmp(out[i].name, c.name) == 0)
                stored = i;
        }
        if (stored >= 0) {
            out[stored] = c;
            continue;
        }
        if (found < max)
            out[found] = c;
        found++;
    }
    qsort(out, (size_t)(found < max ? found : max), sizeof(*out), by_name);
    return found;
}

/* realpath of root, or root itself when it does not resolve (then nothing is mounted there). */
static void resolve_root(const char *root, char out[PATH_MAX])
{
    if (realpath(root, out) == NULL)
        snprintf(out, PATH_MAX, "%s", root);
}

void vgpu_injected_find(const char *mountinfo_path, const char *canonical_root,
                        const char *override, bool quiet, struct vgpu_injected_set *set)
{
    char *text = read_proc_text(mountinfo_path);

    memset(set, 0, sizeof(*set));
    resolve_root(canonical_root, set->root);
    set->mountinfo_ok = text != NULL;
    if (text == NULL) {
        if (!quiet)
            VGPU_ERROR("cannot read %s: %s", mountinfo_path, strerror(errno));
        return;
    }
    set->count = vgpu_mountinfo_configs(text, set->root, set->configs, VGPU_INJECTED_MAX);
    if (override != NULL && override[0] != '\0') {
        if (set->count > 0) {
            if (!quiet)
                VGPU_WARN("ignoring VGPU_CLAIMS_ROOT=%.200s: the kubelet plugin injected claims "
                          "under %s",
                          override, set->root);
        } else {
            resolve_root(override, set->root);
            set->overridden = true;
            set->count = vgpu_mountinfo_configs(text, set->root, set->configs, VGPU_INJECTED_MAX);
        }
    }
    free(text);
}

bool vgpu_injected_has(const struct vgpu_injected_set *set, const char *name)
{
    for (int i = 0; i < set->count && i < VGPU_INJECTED_MAX; i++) {
        if (strcmp(set->configs[i].name, name) == 0)
            return true;
    }
    return false;
}

/*
 * A file owned by root outside the container's user namespace shows as the
 * kernel's overflow uid there; the container can create neither.
 */
static bool owned_by_root(uid_t uid)
{
    char buf[32];
    int fd;
    ssize_t n;
    unsigned long overflow = 65534;

    if (uid == 0)
        return true;
    fd = open("/proc/sys/kernel/overflowuid", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (n > 0) {
            buf[n] = '\0';
            overflow = strtoul(buf, NULL, 10);
        }
    }
    return uid == (uid_t)overflow;
}

int vgpu_injected_open(const char *root, const struct vgpu_injected_config *c,
                       char err[VGPU_ERRMSG_MAX])
{
    char path[PATH_MAX + VGPU_CLAIM_UID_MAX + 16];
    struct statx stx;
    struct statvfs vfs;
    int fd;

    snprintf(path, sizeof(path), "%s/%s/" VGPU_CONFIG_FILE, root, c->name);
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) {
        snprintf(err, VGPU_ERRMSG_MAX, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    /* Everything below is checked on the open file, so it cannot change under us. */
    if (statx(fd, "", AT_EMPTY_PATH, STATX_BASIC_STATS | STATX_MNT_ID, &stx) != 0) {
        snprintf(err, VGPU_ERRMSG_MAX, "%s: cannot stat: %s", path, strerror(errno));
    } else if (!S_ISREG(stx.stx_mode)) {
        snprintf(err, VGPU_ERRMSG_MAX, "%s: not a regular file", path);
    } else if ((stx.stx_mask & STATX_MNT_ID) != 0 ? stx.stx_mnt_id != (uint64_t)c->mnt_id
               : (stx.stx_dev_major != c->dev_major || stx.stx_dev_minor != c->dev_minor)) {
        snprintf(err, VGPU_ERRMSG_MAX, "%s: not the file mounted there", path);
    } else if (fstatvfs(fd, &vfs) != 0 || (vfs.f_flag & ST_RDONLY) == 0) {
        snprintf(err, VGPU_ERRMSG_MAX, "%s: not a read-only mount", path);
    } else if (!owned_by_root(stx.stx_uid) || (stx.stx_mode & (S_IWGRP | S_IWOTH)) != 0) {
        snprintf(err, VGPU_ERRMSG_MAX, "%s: not owned by root or writable by others (uid %u, mode %o)",
                 path, stx.stx_uid, stx.stx_mode & 07777);
    } else {
        return fd;
    }
    close(fd);
    return -1;
}
