#define _GNU_SOURCE /* strdup, fileno with -std=c11 */
#include "core/outfile.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The folder of path ("." for a bare name), malloc'd. */
static char *folder_of(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash) return strdup(".");
    if (slash == path) return strdup("/");
    return strndup(path, (size_t)(slash - path));
}

int dt_outfile_check(const char *path, dt_error *err) {
    if (!*path) return dt_error_set(err, "cannot write '': empty file name");
    if (path[strlen(path) - 1] == '/') return dt_error_set(err, "cannot write %s: a folder", path);
    struct stat st;
    if (lstat(path, &st) == 0) {
        if (S_ISLNK(st.st_mode))
            return dt_error_set(err, "cannot write %s: a symbolic link (not replaced)", path);
        if (S_ISDIR(st.st_mode)) return dt_error_set(err, "cannot write %s: a folder", path);
        if (!S_ISREG(st.st_mode))
            return dt_error_set(err, "cannot write %s: not a regular file (not replaced)", path);
    } else if (errno != ENOENT) {
        return dt_error_set(err, "cannot write %s: %s", path, strerror(errno));
    }
    char *dir = folder_of(path);
    if (!dir) return dt_error_set(err, "out of memory writing %s", path);
    int rc = 0;
    if (stat(dir, &st) != 0)
        rc = dt_error_set(err, "cannot write %s: folder %s: %s", path, dir, strerror(errno));
    else if (!S_ISDIR(st.st_mode))
        rc = dt_error_set(err, "cannot write %s: %s is not a folder", path, dir);
    else if (access(dir, W_OK | X_OK) != 0)
        rc = dt_error_set(err, "cannot write %s: folder %s: %s", path, dir, strerror(errno));
    free(dir);
    return rc;
}

/* FNV-1a of the whole path: tells apart targets whose names share a long prefix. */
static uint64_t path_hash(const char *path) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (const unsigned char *c = (const unsigned char *)path; *c; c++)
        h = (h ^ *c) * 0x100000001b3ULL;
    return h;
}

enum { NAME_PREFIX = 64 }; /* bytes of the target's name kept in the temporary name */

/* ".<name prefix>.<hash>." : what every temporary file of this target starts with. */
static char *tmp_stem(const char *path) {
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    char stem[NAME_PREFIX + 40];
    snprintf(stem, sizeof stem, ".%.*s.%016llx.", NAME_PREFIX, base,
             (unsigned long long)path_hash(path));
    return strdup(stem);
}

/* Removes the temporary files of this target left by saves that were killed (their
 * process is gone); those of a live process are left alone. */
static void remove_stale(const char *dir, const char *stem) {
    DIR *d = opendir(dir);
    if (!d) return;
    const size_t n = strlen(stem);
    for (struct dirent *e; (e = readdir(d));) {
        if (strncmp(e->d_name, stem, n) != 0) continue;
        char *end;
        errno = 0;
        long pid = strtol(e->d_name + n, &end, 10);
        if (errno || end == e->d_name + n || strcmp(end, ".tmp") != 0 || pid <= 0) continue;
        if (pid == (long)getpid() || kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
        char *stale = malloc(strlen(dir) + strlen(e->d_name) + 2);
        if (!stale) break;
        sprintf(stale, "%s/%s", dir, e->d_name);
        unlink(stale); /* best effort: a leftover is harmless */
        free(stale);
    }
    closedir(d);
}

int dt_outfile_open(dt_outfile *o, const char *path, dt_error *err) {
    memset(o, 0, sizeof *o);
    if (dt_outfile_check(path, err)) return -1;
    char *dir = folder_of(path), *stem = tmp_stem(path);
    o->path = strdup(path);
    if (dir && stem && o->path) {
        o->tmp = malloc(strlen(dir) + strlen(stem) + 32);
        if (o->tmp) sprintf(o->tmp, "%s/%s%ld.tmp", dir, stem, (long)getpid());
    }
    if (!o->tmp) {
        free(dir), free(stem), free(o->path);
        return dt_error_set(err, "out of memory writing %s", path);
    }
    remove_stale(dir, stem);
    free(dir);
    free(stem);
    int fd = open(o->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd >= 0) o->f = fdopen(fd, "wb");
    if (!o->f) {
        int e = errno;
        if (fd >= 0) close(fd), unlink(o->tmp);
        dt_error_set(err, "cannot write %s: %s", path, strerror(e));
        free(o->tmp), free(o->path);
        memset(o, 0, sizeof *o);
        return -1;
    }
    return 0;
}

void dt_outfile_discard(dt_outfile *o) {
    if (o->f) fclose(o->f);
    if (o->tmp) unlink(o->tmp);
    free(o->tmp);
    free(o->path);
    memset(o, 0, sizeof *o);
}

int dt_outfile_commit(dt_outfile *o, dt_error *err) {
    int e = 0;
    if (fflush(o->f) != 0)
        e = errno;
    else if (ferror(o->f)) {
        /* stdio's error flag keeps no errno: one more byte, to a file about to be
         * removed, says why (EFBIG past `ulimit -f`, ENOSPC) */
        clearerr(o->f);
        e = fputc(0, o->f) == EOF || fflush(o->f) != 0 ? errno : EIO;
        if (!e) e = EIO;
    } else if (fsync(fileno(o->f)) != 0)
        e = errno;
    if (fclose(o->f) != 0 && !e) e = errno;
    o->f = NULL;
    /* the target may have become a symlink or device since the check: refuse it still */
    if (!e && dt_outfile_check(o->path, err)) {
        dt_outfile_discard(o);
        return -1;
    }
    if (!e && rename(o->tmp, o->path) != 0) e = errno;
    if (e) {
        dt_error_set(err, "cannot write %s: %s", o->path, strerror(e));
        dt_outfile_discard(o);
        return -1;
    }
    free(o->tmp);
    free(o->path);
    memset(o, 0, sizeof *o);
    return 0;
}
