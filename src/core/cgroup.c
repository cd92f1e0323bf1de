#define _GNU_SOURCE
#include "core/cgroup.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int dt_cgroup_read(const char *path, char *buf, size_t size) {
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    size_t used = 0;
    while (used + 1 < size) {
        const ssize_t got = read(fd, buf + used, size - 1 - used);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) break;
        used += (size_t)got;
    }
    close(fd);
    buf[used] = 0;
    return 0;
}

int dt_cgroup_write(const char *path, const char *text) {
    const int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    const size_t len = strlen(text);
    ssize_t put;
    do put = write(fd, text, len);
    while (put < 0 && errno == EINTR);
    const int saved = errno;
    close(fd);
    errno = saved;
    return put == (ssize_t)len ? 0 : -1;
}

/* Whether word is one of the items of list, separated by sep. */
static int has_word(const char *list, const char *word, char sep) {
    const size_t n = strlen(word);
    for (const char *p = list; p && *p;) {
        const char *end = strchr(p, sep);
        const size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && !strncmp(p, word, n)) return 1;
        p = end ? end + 1 : NULL;
    }
    return 0;
}

dt_cgroup_kind dt_cgroup_find_mounts(dt_cgroup_mounts *m) {
    memset(m, 0, sizeof *m);
    char *cpu = m->cpu, *acct = m->acct;
    const size_t size = sizeof m->cpu;
    int v2_cpuset = 0;
    FILE *f = fopen("/proc/self/mounts", "re");
    if (!f) return DT_CGROUP_NONE;
    char line[1024], v2[256] = "";
    while (fgets(line, sizeof line, f)) {
        char dev[256], dir[256], type[64], opts[512];
        if (sscanf(line, "%255s %255s %63s %511s", dev, dir, type, opts) != 4) continue;
        if (!strcmp(type, "cgroup2") && !v2[0]) {
            char path[300], controllers[512];
            snprintf(path, sizeof path, "%s/cgroup.controllers", dir);
            if (dt_cgroup_read(path, controllers, sizeof controllers) == 0) {
                controllers[strcspn(controllers, "\n")] = 0;
                if (has_word(controllers, "cpu", ' ')) {
                    snprintf(v2, sizeof v2, "%s", dir);
                    v2_cpuset = has_word(controllers, "cpuset", ' ');
                }
            }
        } else if (!strcmp(type, "cgroup")) {
            if (has_word(opts, "cpu", ',') && !cpu[0]) snprintf(cpu, size, "%s", dir);
            if (has_word(opts, "cpuacct", ',') && !acct[0]) snprintf(acct, size, "%s", dir);
            if (has_word(opts, "cpuset", ',') && !m->cpuset[0])
                snprintf(m->cpuset, sizeof m->cpuset, "%s", dir);
        }
    }
    fclose(f);
    if (cpu[0] && acct[0]) return DT_CGROUP_V1;
    acct[0] = 0;
    if (v2[0]) {
        snprintf(cpu, size, "%s", v2);
        if (v2_cpuset)
            snprintf(m->cpuset, sizeof m->cpuset, "%s", v2);
        else
            m->cpuset[0] = 0;
        return DT_CGROUP_V2;
    }
    memset(m, 0, sizeof *m);
    return DT_CGROUP_NONE;
}

/* The group's quota in cores at dir (v1 or v2 files), 0 for none. */
static double quota_at(const char *dir, dt_cgroup_kind kind) {
    char path[1100], text[128];
    if (kind == DT_CGROUP_V2) {
        snprintf(path, sizeof path, "%s/cpu.max", dir);
        if (dt_cgroup_read(path, text, sizeof text)) return 0;
        char quota[32];
        long period = 0;
        if (sscanf(text, "%31s %ld", quota, &period) != 2 || !strcmp(quota, "max") || period <= 0)
            return 0;
        const double q = strtod(quota, NULL);
        return q > 0 ? q / (double)period : 0;
    }
    snprintf(path, sizeof path, "%s/cpu.cfs_quota_us", dir);
    if (dt_cgroup_read(path, text, sizeof text)) return 0;
    const double q = strtod(text, NULL);
    snprintf(path, sizeof path, "%s/cpu.cfs_period_us", dir);
    if (q <= 0 || dt_cgroup_read(path, text, sizeof text)) return 0;
    const double period = strtod(text, NULL);
    return period > 0 ? q / period : 0;
}

double dt_cgroup_cpu_quota(void) {
    dt_cgroup_mounts m;
    const dt_cgroup_kind kind = dt_cgroup_find_mounts(&m);
    const char *cpu = m.cpu;
    if (kind == DT_CGROUP_NONE) return 0;
    FILE *f = fopen("/proc/self/cgroup", "re");
    if (!f) return 0;
    /* "N:cpu,cpuacct:/path" (v1) or "0::/path" (v2) */
    char line[1024], rel[700] = "";
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char *a = strchr(line, ':'), *b = a ? strchr(a + 1, ':') : NULL;
        if (!b) continue;
        *b = 0;
        const int match =
            kind == DT_CGROUP_V2 ? !strcmp(line, "0") && a[1] == 0 : has_word(a + 1, "cpu", ',');
        if (match && strlen(b + 1) < sizeof rel) {
            snprintf(rel, sizeof rel, "%s", b + 1);
            found = 1;
        }
    }
    fclose(f);
    if (!found) return 0;
    /* the smallest quota from the process's group up to the mount's root */
    double least = 0;
    for (;;) {
        char dir[1000];
        snprintf(dir, sizeof dir, "%s%s", cpu, rel);
        const double q = quota_at(dir, kind);
        if (q > 0 && (least == 0 || q < least)) least = q;
        char *slash = strrchr(rel, '/');
        if (!slash || slash == rel) {
            if (!rel[0] || !strcmp(rel, "/")) break;
            rel[0] = 0; /* the root itself next */
            continue;
        }
        *slash = 0;
    }
    return least;
}
