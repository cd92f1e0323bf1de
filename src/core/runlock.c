#define _GNU_SOURCE
#include "core/runlock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Field 4 (ppid) or 22 (start time, clock ticks since boot) of /proc/PID/stat, or -1. */
static long long stat_field(long pid, int field) {
    char path[64], text[1024];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    const size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = 0;
    /* "pid (comm) state ppid ...": comm may hold spaces and parentheses */
    const char *p = strrchr(text, ')');
    if (!p) return -1;
    p++;
    for (int i = 3; i <= field; i++) {
        while (*p == ' ') p++;
        if (!*p) return -1;
        if (i == field) {
            char *end;
            const long long v = strtoll(p, &end, 10);
            return end == p ? -1 : v;
        }
        while (*p && *p != ' ') p++;
    }
    return -1;
}

/* Whether pid started this process (its parent, or theirs, ...). pid 1 counts: launch
 * may be a container's first process. */
static int is_ancestor(long pid) {
    for (long p = getppid(), hops = 0; p > 0 && hops < 64; p = (long)stat_field(p, 4), hops++) {
        if (p == pid) return 1;
        if (p == 1) break;
    }
    return 0;
}

static void host_name(char *out, size_t size) {
    if (gethostname(out, size) != 0) snprintf(out, size, "?");
    out[size - 1] = 0;
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

/* Locks bytes [start, start + len) of fd (len 0: to the end): 0 when locked, 1 when
 * another process holds them (*holder says who), -1 on an error (errno). */
static int take(int fd, off_t start, off_t len, struct flock *holder) {
    for (int tries = 0; tries < 10; tries++) {
        struct flock lock = {
            .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = start, .l_len = len};
        if (fcntl(fd, F_SETLK, &lock) == 0) return 0;
        if (errno != EACCES && errno != EAGAIN) return -1;
        *holder =
            (struct flock){.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = start, .l_len = len};
        if (fcntl(fd, F_GETLK, holder) != 0) return -1;
        if (holder->l_type != F_UNLCK) return 1;
    } /* released in between each time: say so as an error */
    errno = EAGAIN;
    return -1;
}

/* The identity a supervisor wrote in the lock file ("PID HOST START"), or "". */
static void read_identity(int fd, char *out, size_t size) {
    const ssize_t n = pread(fd, out, size - 1, 0);
    out[n > 0 ? n : 0] = 0;
    out[strcspn(out, "\n")] = 0;
}

/* The one-line refusal: the holder by its pid and command, or by what its lock file
 * says where the kernel cannot name it here (another pid namespace: pid 0; another
 * host over a network file system). */
static int refuse(const struct flock *holder, const char *identity, const char *what,
                  const char *policy, dt_error *err) {
    char command[64], pid[200], host[128];
    long file_pid = 0;
    char file_host[128] = "";
    if (identity && sscanf(identity, "%ld %127s", &file_pid, file_host) != 2) file_pid = 0;
    host_name(host, sizeof host);
    /* on a network file system the kernel's pid may be another host's: the file's
     * host says so */
    const int elsewhere = file_pid > 0 && strcmp(file_host, host) != 0;
    if (holder->l_pid > 0 && !elsewhere) {
        holder_command((long)holder->l_pid, command, sizeof command);
        snprintf(pid, sizeof pid, "pid %ld", (long)holder->l_pid);
    } else if (file_pid > 0) {
        snprintf(command, sizeof command, "dtrain launch");
        snprintf(pid, sizeof pid, "pid %ld on %s, as its lock file says", file_pid, file_host);
    } else {
        snprintf(command, sizeof command, "dtrain");
        snprintf(pid, sizeof pid, "a pid not visible here");
    }
    return dt_error_set(err, "%s is in use by another %s (%s): %s; wait for it to end or stop it",
                        what, command, pid, policy);
}

int dt_runlock_fd(int fd, const char *what, const char *policy, dt_error *err) {
    struct flock holder;
    const int r = take(fd, 0, 0, &holder);
    if (r < 0) return dt_error_set(err, "cannot lock %s: %s", what, strerror(errno));
    return r ? refuse(&holder, NULL, what, policy, err) : 0;
}

/* Opens path as a lock file: a regular file of its own (it is rewritten: never another
 * file's name for it). */
static int open_lock_file(const char *path, dt_error *err) {
    const int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) return dt_error_set(err, "cannot open %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1) {
        close(fd);
        return dt_error_set(
            err, "cannot use %s as the lock: not a regular file of its own (a link?)", path);
    }
    return fd;
}

/* Writes "PID HOST START" into fd and who[size]. */
static int write_identity(int fd, const char *path, char *who, size_t size, dt_error *err) {
    char host[128];
    host_name(host, sizeof host);
    const int n =
        snprintf(who, size, "%ld %s %lld", (long)getpid(), host, stat_field((long)getpid(), 22));
    char line[200];
    const int m = snprintf(line, sizeof line, "%s\n", who);
    if (n < 0 || (size_t)n >= size || m < 0 || (size_t)m >= sizeof line)
        return dt_error_set(err, "cannot write %s: the host name is too long", path);
    if (ftruncate(fd, 0) != 0 || pwrite(fd, line, (size_t)m, 0) != m)
        return dt_error_set(err, "cannot write %s: %s", path, strerror(errno));
    return 0;
}

int dt_runlock_file(dt_runlock *l, const char *path, const char *what, const char *policy,
                    dt_error *err) {
    l->fd = -1;
    l->who[0] = 0;
    const int fd = open_lock_file(path, err);
    if (fd < 0) return -1;
    if (dt_runlock_fd(fd, what, policy, err) ||
        write_identity(fd, path, l->who, sizeof l->who, err)) {
        close(fd);
        return -1;
    }
    l->fd = fd;
    return 0;
}

int dt_runlock_supervise(dt_runlock *l, const char *path, const char *what, const char *policy,
                         dt_error *err) {
    l->fd = -1;
    l->who[0] = 0;
    const int fd = open_lock_file(path, err);
    if (fd < 0) return -1;
    struct flock holder;
    const int r = take(fd, 0, 2, &holder); /* a launch (byte 0) or a train (byte 1) */
    char identity[200] = "";
    if (r == 1 && holder.l_start == 0) read_identity(fd, identity, sizeof identity);
    if (r != 0) {
        const int e = errno;
        close(fd);
        if (r < 0) return dt_error_set(err, "cannot lock %s: %s", what, strerror(e));
        return refuse(&holder, identity[0] ? identity : NULL, what, policy, err);
    }
    /* byte 1 goes to the job only once the file names us */
    if (write_identity(fd, path, l->who, sizeof l->who, err)) {
        close(fd);
        return -1;
    }
    const struct flock job = {.l_type = F_UNLCK, .l_whence = SEEK_SET, .l_start = 1, .l_len = 1};
    if (fcntl(fd, F_SETLK, &job) != 0) {
        const int e = errno;
        close(fd);
        return dt_error_set(err, "cannot unlock byte 1 of %s: %s", path, strerror(e));
    }
    l->fd = fd;
    return 0;
}

/* Whether the launch holding byte 0 of fd (holder, identity: what its file says) is
 * the one this process runs under: the one its environment names, or, without the
 * variable, its ancestor on this host. */
static int is_our_launch(const struct flock *holder, const char *identity) {
    const char *mine = getenv(DT_RUNLOCK_ENV);
    if (mine) return !strcmp(mine, identity);
    char host[128], file_host[128] = "";
    long file_pid;
    host_name(host, sizeof host);
    if (sscanf(identity, "%ld %127s", &file_pid, file_host) != 2) return 0;
    return holder->l_pid > 0 && !strcmp(host, file_host) && is_ancestor((long)holder->l_pid);
}

int dt_runlock_job(dt_runlock *l, const char *path, const char *what, const char *policy,
                   dt_error *err) {
    l->fd = -1;
    l->who[0] = 0;
    const int fd = open_lock_file(path, err);
    if (fd < 0) return -1;
    /* byte 1 first: from here no launch can start on DIR, and a launch that holds byte
     * 0 wrote its file before it let byte 1 go */
    struct flock writer,
        launch = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1};
    const int r = take(fd, 1, 1, &writer);
    if (r < 0 || fcntl(fd, F_GETLK, &launch) != 0) {
        const int e = errno;
        close(fd);
        return dt_error_set(err, "cannot lock %s: %s", what, strerror(e));
    }
    char identity[200] = "";
    if (launch.l_type != F_UNLCK) read_identity(fd, identity, sizeof identity);
    int rc = 0;
    if (launch.l_type != F_UNLCK && !is_our_launch(&launch, identity))
        rc = refuse(&launch, identity[0] ? identity : NULL, what, policy, err);
    else if (r > 0) /* another train on DIR, maybe under the same launch */
        rc = refuse(&writer, NULL, what, policy, err);
    if (rc) {
        close(fd);
        return -1;
    }
    l->fd = fd;
    return 0;
}

void dt_runlock_release(dt_runlock *l) {
    if (l->fd >= 0) close(l->fd);
    l->fd = -1;
}
