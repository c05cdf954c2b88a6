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
 * injected.h - which claim configs the kubelet plugin injected into this
 * container, the only source of limits (docs/security.md, "Library").
 *
 * The plugin's CDI edits bind-mount each claim's config read-only onto
 * <root>/<claim>/config (root = /usr/local/vgpu/claims). A container cannot
 * create, remove or replace a mount point, so a config counts only if, on
 * the opened file descriptor: it is the mount listed in /proc/self/mountinfo
 * at exactly that path, a regular file, on a read-only mount, owned by root
 * and writable by nobody else. Files that merely exist under the root (in
 * the image, or written by the container) are not configs.
 *
 * A claims root other than the canonical one (VGPU_CLAIMS_ROOT, for tests)
 * is honoured only when no config is mounted at the canonical root, and the
 * same checks apply there: an environment variable can never lift the
 * enforcement of a prepared container.
 */
#ifndef VGPU_INJECTED_H
#define VGPU_INJECTED_H

#include <limits.h>
#include <stdbool.h>

#include "config.h"

#define VGPU_CANONICAL_CLAIMS_ROOT "/usr/local/vgpu/claims"
#define VGPU_MOUNTINFO_PATH "/proc/self/mountinfo"
#define VGPU_INJECTED_MAX 32

/* One config mount point <root>/<name>/config found in the mount table. */
struct vgpu_injected_config {
    char name[VGPU_CLAIM_UID_MAX]; /* the claim directory's name */
    int mnt_id;                    /* mountinfo field 1 */
    unsigned int dev_major, dev_minor;
};

/* What vgpu_injected_find learnt. */
struct vgpu_injected_set {
    char root[PATH_MAX]; /* the claims root in force */
    bool overridden;     /* root came from the override argument */
    bool mountinfo_ok;   /* false: the mount table could not be read */
    int count;           /* config mount points under root (may exceed VGPU_INJECTED_MAX) */
    struct vgpu_injected_config configs[VGPU_INJECTED_MAX]; /* by name; the first ones */
};

/*
 * Parses mountinfo text and stores the config mount points directly under
 * root (an absolute path without trailing '/') into out (at most max, sorted
 * by name, the topmost mount of a path when several are stacked). Returns how
 * many it found: more than max when they did not all fit (then not exact).
 */
int vgpu_mountinfo_configs(const char *text, const char *root, struct vgpu_injected_config *out,
                           int max);

/*
 * Fills set: reads the mount table at mountinfo_path, looks for config mount
 * points under canonical_root and, only if there are none, under override
 * (NULL or "" = none). Logs once when the override is refused or the table
 * cannot be read, unless quiet (a second reader of the same table).
 */
void vgpu_injected_find(const char *mountinfo_path, const char *canonical_root,
                        const char *override, bool quiet, struct vgpu_injected_set *set);

/* Whether set lists a config for the claim directory name. */
bool vgpu_injected_has(const struct vgpu_injected_set *set, const char *name);

/*
 * Opens <root>/<c->name>/config and checks it on the descriptor (see the top
 * of this file). Returns the descriptor, or -1 with a message in err.
 */
int vgpu_injected_open(const char *root, const struct vgpu_injected_config *c,
                       char err[VGPU_ERRMSG_MAX]);

#endif /* VGPU_INJECTED_H */
