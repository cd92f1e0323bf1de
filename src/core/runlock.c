#define _GNU_SOURCE
#include "core/runlock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The parent of pid from /proc/PID/stat, or -1. */
static long parent_of(long pid) {
    char path[64], text[1024];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    const size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = 0;
    /* "pid (comm) state ppid ...": comm may hold spaces and parentheses */
    const char *close = strrchr(text, ')');
    long ppid;
    char state;
    if (!close || sscanf(close + 1, " %c %ld", &state, &ppid) != 2) return -1;
    return ppid;
}

static int is_ancestor(long pid) {
    for (long p = getppid(), hops = 0; p > 1 && hops < 64; p = parent_of(p), hops++)
        if (p == pid) return 1;
    return 0;
}

/* "dtrain launch" for a holder whose command line is `.../dtrain launch ...`, else
 * "dtrain" (a holder on another host of a network file system, or gone). */
static void holder_command(long pid, char *out, size_t size) {
    snprintf(out, size, "dtrain");
    char path[64], cmd[512];
    snprintf(path, sizeof path, "/proc/%ld/cmdline", pid);
    FILE *f = fopen(path, "r");
    if (!f) return;
    const size_t n = fread(cmd, 1, sizeof cmd - 1, f);
    fclose(f);
    cmd[n] = 0;
    const size_t first = strlen(cmd);
    const char *base = strrchr(cmd, '/') ? strrchr(cmd, '/') + 1 : cmd;
    if (strncmp(base, "dtrain", 6) || first + 1 >= n) return;
    const char *sub = cmd + first + 1;
    if (*sub && strlen(sub) < 32 && sub[0] != '-') snprintf(out, size, "dtrain %s", sub);
}

int dt_runlock_fd(int fd, const char *what, const char *policy, int *by_ancestor, dt_error *err) {
    if (by_ancestor) *by_ancestor = 0;
    for (int tries = 0;; tries++) {
        struct flock lock = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
        if (fcntl(fd, F_SETLK, &lock) == 0) return 0;
        if ((errno != EACCES && errno != EAGAIN) || tries == 10)
            return dt_error_set(err, "cannot lock %s: %s", what, strerror(errno));
        struct flock who = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
        if (fcntl(fd, F_GETLK, &who) == 0 && who.l_type != F_UNLCK) {
            if (is_ancestor((long)who.l_pid)) {
                if (by_ancestor) *by_ancestor = 1;
                return 0;
            }
            char holder[64];
            holder_command((long)who.l_pid, holder, sizeof holder);
            return dt_error_set(err,
                                "%s is in use by another %s (pid %ld): %s; wait for it to end "
                                "or stop it",
                                what, holder, (long)who.l_pid, policy);
        } /* released in between: try again */
    }
}

int dt_runlock_file(dt_runlock *l, const char *path, const char *what, const char *policy,
                    dt_error *err) {
    l->fd = -1;
    const int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) return dt_error_set(err, "cannot open %s: %s", path, strerror(errno));
    struct stat st; /* rewritten below: never another file's name for it */
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1) {
        close(fd);
        return dt_error_set(
            err, "cannot use %s as the lock: not a regular file of its own (a link?)", path);
    }
    int by_ancestor;
    if (dt_runlock_fd(fd, what, policy, &by_ancestor, err)) {
        close(fd);
        return -1;
    }
    if (by_ancestor) { /* the ancestor's file and pid stay as they are */
        close(fd);
        return 0;
    }
    char text[32];
    const int n = snprintf(text, sizeof text, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, text, (size_t)n, 0) != n) {
        const int e = errno;
        close(fd);
        return dt_error_set(err, "cannot write %s: %s", path, strerror(e));
    }
    l->fd = fd;
    return 0;
}

void dt_runlock_release(dt_runlock *l) {
    if (l->fd >= 0) close(l->fd);
    l->fd = -1;
}
