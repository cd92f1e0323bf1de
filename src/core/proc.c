#define _GNU_SOURCE
#include "core/proc.h"

#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <unistd.h>

extern char **environ;

/* environ plus the defaults whose name is unset, or NULL (out of memory). */
static char **environment_with(const char *const *defaults) {
    size_t n = 0, extra = 0;
    while (environ[n]) n++;
    while (defaults[extra]) extra++;
    char **env = malloc((n + extra + 1) * sizeof *env);
    if (!env) return NULL;
    memcpy(env, environ, n * sizeof *env);
    const size_t inherited = n;
    for (size_t i = 0; i < extra; i++) {
        const char *eq = strchr(defaults[i], '=');
        const size_t len = eq ? (size_t)(eq - defaults[i]) : strlen(defaults[i]);
        int set = 0;
        for (size_t k = 0; k < inherited && !set; k++)
            set = !strncmp(environ[k], defaults[i], len) && environ[k][len] == '=';
        if (!set) env[n++] = (char *)defaults[i];
    }
    env[n] = NULL;
    return env;
}

/* fd onto target in the child (async-signal-safe calls only); -1 on failure. */
static int put(int fd, int target) {
    if (fd < 0) return 0;
    if (fd != target) return dup2(fd, target) < 0 ? -1 : 0;
    const int flags = fcntl(fd, F_GETFD); /* dup2 onto itself keeps close-on-exec */
    return flags < 0 || fcntl(fd, F_SETFD, flags & ~FD_CLOEXEC) < 0 ? -1 : 0;
}

/* Opens path for a redirection, or takes fd; -2 when nothing is redirected. */
static int open_redirect(const char *path, int fd, int for_writing, dt_error *err) {
    if (!path) return fd > 0 ? fd : -2;
    if (!for_writing) {
        const int got = open(path, O_RDONLY | O_CLOEXEC);
        if (got < 0) dt_error_set(err, "cannot open %s: %s", path, strerror(errno));
        return got;
    }
    /* an output (a run's stderr file): never through a symlink, and truncated only when
     * it is a regular file; /dev/null is the one device taken */
    const int got = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0666);
    struct stat st;
    if (got < 0) {
        dt_error_set(err, "cannot write %s: %s", path,
                     errno == ELOOP ? "a symbolic link (not followed)" : strerror(errno));
        return -1;
    }
    const char *why = NULL;
    if (fstat(got, &st) != 0)
        why = strerror(errno);
    else if (S_ISREG(st.st_mode) && ftruncate(got, 0) != 0)
        why = strerror(errno);
    else if (!S_ISREG(st.st_mode) && strcmp(path, "/dev/null") != 0)
        why = "not a regular file";
    if (why) {
        dt_error_set(err, "cannot write %s: %s", path, why);
        close(got);
        return -1;
    }
    return got;
}

int dt_proc_spawn(dt_proc *p, const char *const *argv, const dt_proc_opts *o, dt_error *err) {
    static const dt_proc_opts none = {0};
    if (!o) o = &none;
    p->pid = -1;
    p->group = o->new_group;
    int fds[3] = {-2, -2, -2}, report[2] = {-1, -1}, rc = -1;
    char **env = NULL;
    if ((fds[0] = open_redirect(o->stdin_path, o->stdin_fd, 0, err)) == -1 ||
        (fds[1] = open_redirect(o->stdout_path, o->stdout_fd, 1, err)) == -1 ||
        (fds[2] = open_redirect(o->stderr_path, o->stderr_fd, 1, err)) == -1)
        goto done;
    if (o->env_defaults && !(env = environment_with(o->env_defaults))) {
        dt_error_set(err, "cannot run %s: out of memory", argv[0]);
        goto done;
    }
    /* exec's errno comes back through this pipe; it closes when exec succeeds */
    if (pipe2(report, O_CLOEXEC) != 0) {
        dt_error_set(err, "cannot run %s: cannot make a pipe: %s", argv[0], strerror(errno));
        goto done;
    }
    const pid_t parent = getpid();
    const pid_t pid = fork();
    if (pid < 0) {
        dt_error_set(err, "cannot run %s: %s", argv[0], strerror(errno));
        goto done;
    }
    if (pid == 0) {
        if (o->new_group) setpgid(0, 0);
        /* the parent may have died before the death signal was set: then nobody sends it */
        if (o->death_signal &&
            (prctl(PR_SET_PDEATHSIG, o->death_signal) != 0 || getppid() != parent))
            _exit(127);
        /* the parent's handlers (until exec resets them) must not run here; ignored
         * signals stay ignored, as exec leaves them */
        const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
        for (int i = 0; i < 3; i++) {
            struct sigaction sa;
            if (sigaction(sigs[i], NULL, &sa) == 0 && sa.sa_handler != SIG_IGN)
                signal(sigs[i], SIG_DFL);
        }
        int e = 0;
        if (put(fds[0], 0) || put(fds[1], 1) || put(fds[2], 2))
            e = errno;
        else {
            if (env)
                execvpe(argv[0], (char *const *)argv, env);
            else
                execvp(argv[0], (char *const *)argv);
            e = errno;
        }
        while (write(report[1], &e, sizeof e) < 0 && errno == EINTR) {
        }
        _exit(127);
    }
    p->pid = pid;
    if (o->new_group) setpgid(pid, pid); /* also here: the child may not have run yet */
    close(report[1]);
    report[1] = -1;
    int e = 0;
    ssize_t got;
    while ((got = read(report[0], &e, sizeof e)) < 0 && errno == EINTR) {
    }
    if (got == (ssize_t)sizeof e) { /* it could not run: reap it, say why */
        dt_proc_wait(p, 1, NULL, NULL);
        p->pid = -1;
        dt_error_set(err, "cannot run %s: %s", argv[0], strerror(e));
        goto done;
    }
    rc = 0;
done:
    for (int i = 0; i < 3; i++) /* ours, not the caller's descriptors */
        if (fds[i] >= 0 && (i == 0 ? o->stdin_path : i == 1 ? o->stdout_path : o->stderr_path))
            close(fds[i]);
    if (report[0] >= 0) close(report[0]);
    if (report[1] >= 0) close(report[1]);
    free(env);
    return rc;
}

int dt_proc_wait(dt_proc *p, int block, int *status, struct rusage *usage) {
    int st = 0;
    for (;;) {
        const pid_t r = wait4(p->pid, &st, block ? 0 : WNOHANG, usage);
        if (r == p->pid) break;
        if (r == 0) return 0;
        if (errno != EINTR) return -1;
    }
    if (status) *status = st;
    return 1;
}

void dt_proc_kill(const dt_proc *p, int sig) {
    if (p->pid > 0) kill(p->group ? -p->pid : p->pid, sig);
}

void dt_proc_describe(int status, char *out, size_t size) {
    if (WIFEXITED(status))
        snprintf(out, size, "exit status %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(out, size, "killed by signal %d (%s)", WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
    else
        snprintf(out, size, "wait status %d", status);
}

size_t dt_proc_file(const char *pid, const char *name, char *buf, size_t size) {
    char path[300];
    snprintf(path, sizeof path, "/proc/%s/%s", pid, name);
    buf[0] = 0;
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    const size_t n = fread(buf, 1, size - 1, f);
    fclose(f);
    buf[n] = 0;
    return n;
}

int dt_proc_stat(const char *pid, char *state, long *pgrp) {
    char text[1024];
    if (!dt_proc_file(pid, "stat", text, sizeof text)) return 0;
    /* "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses */
    const char *close = strrchr(text, ')');
    long ppid;
    return close && sscanf(close + 1, " %c %ld %ld", state, &ppid, pgrp) == 3;
}

void dt_proc_host_name(char *out, size_t size) {
    char host[256] = "";
    if (gethostname(host, sizeof host - 1)) snprintf(host, sizeof host, "unknown host");
    snprintf(out, size, "%s", host);
    /* `ip netns identify`'s way: the named namespace with our namespace's inode */
    struct stat self;
    DIR *d = opendir("/run/netns");
    if (!d || stat("/proc/self/ns/net", &self)) {
        if (d) closedir(d);
        return;
    }
    for (const struct dirent *e; (e = readdir(d));) {
        char path[300];
        struct stat st;
        if (e->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "/run/netns/%s", e->d_name);
        if (!stat(path, &st) && st.st_ino == self.st_ino && st.st_dev == self.st_dev) {
            snprintf(out, size, "%s/%s", host, e->d_name);
            break;
        }
    }
    closedir(d);
}
