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
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "vgpu_mps_user.h"
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

#define MPS_USER_MAX_FDS 256

/* The server: answers and holds connections until its parent ends. */
static void serve_mps_users(struct pollfd *fds, int nlisten)
{
    int n = nlisten;

    for (;;) {
        if (poll(fds, (nfds_t)n, -1) < 0)
            continue;
        for (int i = n - 1; i >= 0; i--) {
            if (fds[i].revents == 0)
                continue;
            if (i < nlisten) {
                struct ucred cred;
                socklen_t len = sizeof(cred);
                char req[VGPU_MPS_USER_MSG_MAX + 1], rep[64];
                int c = accept4(fds[i].fd, NULL, NULL, SOCK_CLOEXEC);

                if (c < 0)
                    continue;
                if (recv(c, req, sizeof(req), 0) <= 0 ||
                    getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || n == MPS_USER_MAX_FDS) {
                    close(c);
                    continue;
                }
                snprintf(rep, sizeof(rep), VGPU_MPS_USER_ALLOWED " %u\n", (unsigned)cred.uid);
                send(c, rep, strlen(rep), MSG_NOSIGNAL);
                fds[n].fd = c;
                fds[n].events = POLLIN;
                fds[n++].revents = 0;
            } else {
                /* The held connection's process ended (or sent more). */
                close(fds[i].fd);
                fds[i] = fds[--n];
            }
        }
    }
}

int vgpu_test_serve_mps_users(const char *root)
{
    struct pollfd fds[MPS_USER_MAX_FDS];
    int nlisten = 0, ready[2], rc = 0;
    struct dirent *e;
    pid_t parent = getpid(), pid;
    DIR *d = opendir(root);
    char byte = 0;

    if (d == NULL)
        return -errno;
    while ((e = readdir(d)) != NULL && nlisten < MPS_USER_MAX_FDS / 2) {
        struct sockaddr_un addr = {.sun_family = AF_UNIX};
        char dir[PATH_MAX];
        struct stat st;
        int fd;

        if (e->d_name[0] == '.')
            continue;
        snprintf(dir, sizeof(dir), "%s/%s", root, e->d_name);
        if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
            continue;
        snprintf(dir, sizeof(dir), "%s/%s/host", root, e->d_name);
        if (mkdir(dir, 0755) != 0 && errno != EEXIST)
            continue;
        if (snprintf(addr.sun_path, sizeof(addr.sun_path), "%s/%s/%s", root, e->d_name, VGPU_MPS_USER_SOCK) >=
            (int)sizeof(addr.sun_path)) {
            rc = -ENAMETOOLONG;
            break;
        }
        unlink(addr.sun_path);
        fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        if (fd < 0 || bind(fd, (struct sockaddr *)&addr, sizeof(addr)) != 0 || listen(fd, 64) != 0 ||
            chmod(addr.sun_path, 0666) != 0) {
            rc = -errno;
            if (fd >= 0)
                close(fd);
            break;
        }
        fds[nlisten].fd = fd;
        fds[nlisten].events = POLLIN;
        fds[nlisten++].revents = 0;
    }
    closedir(d);
    if (rc == 0 && pipe2(ready, O_CLOEXEC) != 0)
        rc = -errno;
    if (rc != 0) {
        while (nlisten > 0)
            close(fds[--nlisten].fd);
        return rc;
    }
    pid = fork();
    if (pid == 0) {
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
            _exit(1);
        close(ready[0]);
        close(ready[1]);
        serve_mps_users(fds, nlisten);
        _exit(0);
    }
    rc = pid < 0 ? -errno : pid;
    close(ready[1]);
    while (nlisten > 0)
        close(fds[--nlisten].fd);
    if (pid > 0 && read(ready[0], &byte, 1) < 0)
        rc = -errno;
    close(ready[0]);
    return rc;
}
