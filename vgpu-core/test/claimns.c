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

/* claimns.c - see claimns.h. */
#include "claimns.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "vgpu_region.h"

int vgpu_test_bind_claims(const char *root)
{
    DIR *d = opendir(root);
    struct dirent *e;
    char path[PATH_MAX];
    struct stat st;
    int rc = 0;

    if (d == NULL)
        return errno == ENOENT ? 0 : -errno;
    while (rc == 0 && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "%s/%s/config", root, e->d_name);
        if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        if (chmod(path, 0644) != 0 || mount(path, path, "none", MS_BIND, NULL) != 0 ||
            mount("none", path, "none", MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV,
                  NULL) != 0)
            rc = -errno;
    }
    closedir(d);
    return rc;
}

int vgpu_test_enter_claims_ns(const char *root)
{
    /* Private: our mounts must not propagate back to the host's namespace. */
    if (unshare(CLONE_NEWNS) != 0 || mount("none", "/", "none", MS_REC | MS_PRIVATE, NULL) != 0)
        return -errno;
    return vgpu_test_bind_claims(root);
}

int vgpu_test_claims_ns_supported(void)
{
    int st, p[2], rc = -ENOSYS;
    pid_t pid;

    if (pipe(p) != 0)
        return -errno;
    fflush(NULL);
    pid = fork();
    if (pid == 0) {
        rc = 0;
        if (unshare(CLONE_NEWNS) != 0 || mount("none", "/", "none", MS_REC | MS_PRIVATE, NULL) != 0)
            rc = -errno;
        if (write(p[1], &rc, sizeof(rc)) != (ssize_t)sizeof(rc))
            _exit(1);
        _exit(0);
    }
    close(p[1]);
    if (pid < 0 || read(p[0], &rc, sizeof(rc)) != (ssize_t)sizeof(rc))
        rc = pid < 0 ? -errno : -ENOSYS;
    close(p[0]);
    if (pid > 0)
        waitpid(pid, &st, 0);
    return rc;
}

int vgpu_test_make_claim(const char *root, const char *uuid)
{
    char path[512], cfg[512];
    FILE *f;
    int fd;

    snprintf(path, sizeof(path), "mkdir -p %s/a/shm", root);
    if (system(path) != 0)
        return -1;
    snprintf(cfg, sizeof(cfg),
             "version=1\nclaim=a\ndevice.count=1\ndevice.0.uuid=%s\n"
             "device.0.memory_limit_bytes=%llu\ndevice.0.sm_limit_percent=0\n",
             uuid, (unsigned long long)(1ull << 30));
    snprintf(path, sizeof(path), "%s/a/config", root);
    if ((f = fopen(path, "w")) == NULL)
        return -1;
    fputs(cfg, f);
    fclose(f);
    snprintf(path, sizeof(path), "%s/a/shm/region", root);
    fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0666);
    if (fd < 0 || ftruncate(fd, VGPU_REGION_SIZE) != 0)
        return -1;
    close(fd);
    return 0;
}
