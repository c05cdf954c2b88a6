/* claimns.c - see claimns.h. */
#include "claimns.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

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
