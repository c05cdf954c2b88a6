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
 * fake_mps_control.c - a fake nvidia-cuda-mps-control, the MPS control
 * daemon and its client, answering as NVIDIA's does (docs/mps.md, "What
 * NVIDIA's daemon does"; fake/README.md "MPS").
 *
 *   nvidia-cuda-mps-control -d   starts the daemon in CUDA_MPS_PIPE_DIRECTORY
 *                                and returns once it serves
 *   nvidia-cuda-mps-control      sends each line of standard input to the
 *                                daemon and prints its answers
 *
 * The daemon serves one connection at a time on the sockets "control" and
 * "control_privileged"; the fake libcuda's MPS client connects to "control"
 * at cuInit and reports its share ("client ..." line), which the daemon
 * writes to control.log.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PID_FILE "nvidia-cuda-mps-control.pid"

/* The daemon's settings: what the get_ commands report. */
struct settings {
    double percentage;   /* default active-thread percentage */
    long long pinned_mib[64]; /* default pinned limit per device index, -1 = unset */
};

static FILE *control_log;
static char pipe_dir[4096], log_dir[4096];

static void logf_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* One control.log line, in the real daemon's "[time Control pid] text" form. */
static void logf_(const char *fmt, ...)
{
    struct timespec ts;
    struct tm tm;
    char when[32];
    va_list ap;

    if (control_log == NULL)
        return;
    clock_gettime(CLOCK_REALTIME, &ts);
    localtime_r(&ts.tv_sec, &tm);
    strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
    fprintf(control_log, "[%s.%03ld Control %d] ", when, ts.tv_nsec / 1000000, (int)getpid());
    va_start(ap, fmt);
    vfprintf(control_log, fmt, ap);
    va_end(ap);
    fputc('\n', control_log);
    fflush(control_log);
}

static void path_in(char *out, size_t len, const char *dir, const char *name)
{
    snprintf(out, len, "%s/%s", dir, name);
}

/* A listening socket at dir/name (a stale one from a killed daemon is replaced); -1 on error. */
static int listen_at(const char *name)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    int fd;

    if (snprintf(addr.sun_path, sizeof(addr.sun_path), "%s/%s", pipe_dir, name) >=
        (int)sizeof(addr.sun_path))
        return -1;
    unlink(addr.sun_path);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&addr, sizeof(addr)) != 0 || listen(fd, 16) != 0) {
        logf_("Failed to listen on %s: %s", addr.sun_path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

/* "<n>{M,G,T}" or bytes without a unit, as MiB; -1 if it is not that. */
static long long parse_mib(const char *s)
{
    char *end;
    long long v;

    errno = 0;
    v = strtoll(s, &end, 10);
    if (errno != 0 || end == s || v < 0)
        return -1;
    if (strcmp(end, "M") == 0)
        return v;
    if (strcmp(end, "G") == 0)
        return v * 1024;
    if (strcmp(end, "T") == 0)
        return v * 1024 * 1024;
    if (*end == '\0')
        return v / (1024 * 1024);
    return -1;
}

/* Answers one command line into answer ("" for none). Returns 1 for quit. */
static int command(struct settings *st, char *line, char *answer, size_t len)
{
    char *argv[4] = {0};
    int argc = 0;

    answer[0] = '\0';
    for (char *save = NULL, *tok = strtok_r(line, " \t", &save); tok != NULL && argc < 4;
         tok = strtok_r(NULL, " \t", &save))
        argv[argc++] = tok;
    if (argc == 0)
        return 0;
    if (strcmp(argv[0], "client") == 0) {
        /* The fake libcuda's MPS client: "client pid=<pid> active_thread_percentage=<v>". */
        logf_("New client %s connected, %s", argc > 1 ? argv[1] : "", argc > 2 ? argv[2] : "");
        return 0;
    }
    if (strcmp(argv[0], "quit") == 0 && argc == 1)
        return 1;
    if (strcmp(argv[0], "get_default_active_thread_percentage") == 0 && argc == 1) {
        snprintf(answer, len, "%.1f", st->percentage);
    } else if (strcmp(argv[0], "set_default_active_thread_percentage") == 0 && argc == 2) {
        char *end;
        double v = strtod(argv[1], &end);

        /* Like NVIDIA's: a value out of range is ignored without a word. */
        if (end != argv[1] && *end == '\0' && v >= 1 && v <= 100) {
            st->percentage = v;
            snprintf(answer, len, "%.1f", v);
        }
    } else if (strcmp(argv[0], "set_default_device_pinned_mem_limit") == 0 && argc == 3) {
        long long dev = atoll(argv[1]), mib = parse_mib(argv[2]);

        if (dev >= 0 && dev < 64 && mib >= 0)
            st->pinned_mib[dev] = mib;
    } else if (strcmp(argv[0], "get_default_device_pinned_mem_limit") == 0 && argc == 2) {
        long long dev = atoll(argv[1]);

        /* Reported in whole GiB, rounded down, as NVIDIA's daemon does (1500M reads as 1G). */
        if (dev >= 0 && dev < 64 && st->pinned_mib[dev] >= 0)
            snprintf(answer, len, "%lldG", st->pinned_mib[dev] / 1024);
    } else if (strcmp(argv[0], "get_server_list") == 0 && argc == 1) {
        /* No server: the fake runs no MPS server process. */
    } else {
        snprintf(answer, len, "Unknown command");
    }
    return 0;
}

/* Serves one connection to its end; returns 1 if it asked the daemon to quit. */
static int serve(struct settings *st, int fd)
{
    char buf[4096], answer[256];
    size_t have = 0;
    ssize_t n;

    while ((n = read(fd, buf + have, sizeof(buf) - 1 - have)) > 0) {
        char *line = buf, *nl;

        have += (size_t)n;
        buf[have] = '\0';
        while ((nl = strchr(line, '\n')) != NULL) {
            *nl = '\0';
            if (line[0] != '\0' && strncmp(line, "client ", 7) != 0)
                logf_("Cmd:%s", line);
            if (command(st, line, answer, sizeof(answer)) == 1)
                return 1;
            if (answer[0] != '\0') {
                logf_("%s", answer);
                size_t alen = strlen(answer);
                answer[alen] = '\n';
                if (send(fd, answer, alen + 1, MSG_NOSIGNAL) != (ssize_t)alen + 1)
                    return 0;
            }
            line = nl + 1;
        }
        have -= (size_t)(line - buf);
        memmove(buf, line, have);
        if (have == sizeof(buf) - 1)
            have = 0; /* a line too long: dropped */
    }
    return 0;
}

/* The daemon proper, in the background; ready is closed once it serves. */
static int daemon_main(int ready)
{
    struct settings st = {.percentage = 100.0};
    char path[4200];
    int socks[2], fd, devnull;
    struct pollfd pfd[2];

    for (int i = 0; i < 64; i++)
        st.pinned_mib[i] = -1;
    path_in(path, sizeof(path), log_dir, "control.log");
    control_log = fopen(path, "ae");
    if (control_log == NULL)
        return 1;
    if ((socks[0] = listen_at("control")) < 0 || (socks[1] = listen_at("control_privileged")) < 0)
        return 1;
    path_in(path, sizeof(path), pipe_dir, "control_lock");
    if ((fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644)) < 0) {
        logf_("Cannot create %s: %s", path, strerror(errno));
        return 1;
    }
    close(fd);
    path_in(path, sizeof(path), pipe_dir, "log");
    if (mkfifo(path, 0644) != 0 && errno != EEXIST) {
        logf_("Cannot create %s: %s", path, strerror(errno));
        return 1;
    }
    path_in(path, sizeof(path), pipe_dir, PID_FILE);
    {
        FILE *f = fopen(path, "we");

        if (f == NULL || fprintf(f, "%d\n", (int)getpid()) < 0 || fclose(f) != 0) {
            logf_("Cannot write %s", path);
            return 1;
        }
    }
    logf_("Starting control daemon using socket %s/control", pipe_dir);
    devnull = open("/dev/null", O_RDWR);
    if (devnull >= 0) {
        dup2(devnull, 0);
        dup2(devnull, 1);
        dup2(devnull, 2);
        close(devnull);
    }
    close(ready);
    for (int i = 0; i < 2; i++)
        pfd[i] = (struct pollfd){.fd = socks[i], .events = POLLIN};
    for (;;) {
        if (poll(pfd, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            return 1;
        }
        for (int i = 0; i < 2; i++) {
            int c;

            if (!(pfd[i].revents & POLLIN) || (c = accept4(socks[i], NULL, NULL, SOCK_CLOEXEC)) < 0)
                continue;
            logf_("NEW UI");
            if (serve(&st, c) == 1) {
                close(c);
                unlink(path);
                logf_("Exit with status 0");
                return 0;
            }
            close(c);
        }
    }
}

/* -d: refuses a second daemon, starts one in the background, returns once it serves. */
static int start_daemon(void)
{
    char path[4200], buf[32] = "", c;
    int ready[2];
    pid_t pid;
    FILE *f;

    path_in(path, sizeof(path), pipe_dir, PID_FILE);
    if ((f = fopen(path, "re")) != NULL) {
        long old = fgets(buf, sizeof(buf), f) != NULL ? strtol(buf, NULL, 10) : 0;

        fclose(f);
        if (old > 0 && kill((pid_t)old, 0) == 0) {
            fprintf(stderr, "An instance of this daemon is already running\n");
            return 1;
        }
    }
    if (pipe(ready) != 0)
        return 1;
    pid = fork();
    if (pid < 0)
        return 1;
    if (pid == 0) {
        close(ready[0]);
        setsid();
        if (fork() != 0)
            _exit(0); /* the daemon is the grandchild: no terminal, not our child */
        _exit(daemon_main(ready[1]));
    }
    close(ready[1]);
    /* The daemon closes its end once it serves (or exits). */
    while (read(ready[0], &c, 1) > 0)
        ;
    close(ready[0]);
    waitpid(pid, NULL, 0);
    return 0;
}

/* No flag: each line of standard input to the daemon, its answers to standard output. */
static int client(void)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    char buf[4096];
    ssize_t n;
    int fd;

    snprintf(addr.sun_path, sizeof(addr.sun_path), "%s/control", pipe_dir);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof(addr)) != 0) {
        fprintf(stderr, "Cannot find MPS control daemon process\n");
        return 1;
    }
    while ((n = read(0, buf, sizeof(buf))) > 0) {
        if (send(fd, buf, (size_t)n, MSG_NOSIGNAL) != n)
            return 1;
    }
    shutdown(fd, SHUT_WR);
    while ((n = read(fd, buf, sizeof(buf))) > 0) {
        if (fwrite(buf, 1, (size_t)n, stdout) != (size_t)n)
            return 1;
    }
    close(fd);
    return fflush(stdout) == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    const char *p = getenv("CUDA_MPS_PIPE_DIRECTORY"), *l = getenv("CUDA_MPS_LOG_DIRECTORY");
    struct stat st;

    snprintf(pipe_dir, sizeof(pipe_dir), "%s", p != NULL && p[0] != '\0' ? p : "/tmp/nvidia-mps");
    snprintf(log_dir, sizeof(log_dir), "%s", l != NULL && l[0] != '\0' ? l : "/var/log/nvidia-mps");
    if (argc == 2 && strcmp(argv[1], "-d") == 0) {
        if (stat(pipe_dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
            fprintf(stderr, "Cannot access CUDA_MPS_PIPE_DIRECTORY=%s\n", pipe_dir);
            return 1;
        }
        return start_daemon();
    }
    if (argc == 1)
        return client();
    fprintf(stderr, "usage: nvidia-cuda-mps-control [-d]\n");
    return 1;
}
