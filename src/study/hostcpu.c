#define _GNU_SOURCE
#include "study/hostcpu.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* A host's group folders: in the cpu hierarchy (always: its usage and, for a quota,
 * the limit), v1's cpuacct (usage) and, for cores of its own, the cpuset hierarchy;
 * "" where not used. Under v2 all three are one folder. */
typedef struct group_dirs {
    char cpu[600], acct[600], cpuset[600];
} group_dirs;

static void dirs_of(const dt_cgroup_mounts *m, dt_cgroup_kind kind, int cpuset, const char *prefix,
                    int i, group_dirs *g) {
    snprintf(g->cpu, sizeof g->cpu, "%s/%s-h%d", m->cpu, prefix, i);
    g->acct[0] = g->cpuset[0] = 0;
    if (kind == DT_CGROUP_V1) snprintf(g->acct, sizeof g->acct, "%s/%s-h%d", m->acct, prefix, i);
    if (cpuset && m->cpuset[0] && (kind == DT_CGROUP_V1))
        snprintf(g->cpuset, sizeof g->cpuset, "%s/%s-h%d", m->cpuset, prefix, i);
}

/* Ends every process in the group at dir, then removes it; tries for up to 1 s, as a
 * killed process leaves its group only once it has exited. */
static void remove_group(const char *dir) {
    if (!dir[0]) return;
    char procs[700], list[8192];
    snprintf(procs, sizeof procs, "%s/cgroup.procs", dir);
    for (int tries = 0; tries < 100; tries++) {
        if (dt_cgroup_read(procs, list, sizeof list) == 0)
            for (char *p = list; *p;) {
                char *end;
                const long pid = strtol(p, &end, 10);
                if (end == p) break;
                if (pid > 1 && pid != (long)getpid()) kill((pid_t)pid, SIGKILL);
                p = end;
            }
        if (rmdir(dir) == 0 || errno == ENOENT) return;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

void dt_hostcpu_down(dt_hostcpu *c) {
    dt_cgroup_mounts m;
    if (c->made > 0 && dt_cgroup_find_mounts(&m) == c->kind)
        for (int i = c->made; i >= 1; i--) {
            group_dirs g;
            dirs_of(&m, c->kind, c->limit == DT_HOSTCPU_CPUSET, c->prefix, i, &g);
            remove_group(g.cpuset);
            remove_group(g.acct);
            remove_group(g.cpu);
        }
    c->made = 0;
}

/* The CPUs of the cpuset at dir (a list "0-3,6"), in order, into cpus; the count. */
static int cpuset_cpus(const char *dir, int *cpus, int max) {
    char path[700], text[512];
    snprintf(path, sizeof path, "%s/cpuset.effective_cpus", dir);
    if (dt_cgroup_read(path, text, sizeof text) != 0) {
        snprintf(path, sizeof path, "%s/cpuset.cpus", dir);
        if (dt_cgroup_read(path, text, sizeof text) != 0) return 0;
    }
    int n = 0;
    for (char *p = text; *p && *p != '\n' && n < max;) {
        char *end;
        const long a = strtol(p, &end, 10);
        if (end == p) break;
        long b = a;
        if (*end == '-') {
            p = end + 1;
            b = strtol(p, &end, 10);
            if (end == p) break;
        }
        for (long k = a; k <= b && n < max; k++) cpus[n++] = (int)k;
        p = *end == ',' ? end + 1 : end;
    }
    return n;
}

/* Writes text into dir/file; err names both on failure. */
static int put(const char *dir, const char *file, const char *text, dt_error *err) {
    char path[700];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    if (dt_cgroup_write(path, text))
        return dt_error_set(err, "cannot write '%s' to %s: %s", text, path, strerror(errno));
    return 0;
}

static int make_dir(const char *dir, dt_error *err) {
    if (!dir[0] || mkdir(dir, 0755) == 0) return 0;
    return dt_error_set(err, "cannot make the cgroup %s: %s", dir, strerror(errno));
}

int dt_hostcpu_up(dt_hostcpu *c, const char *prefix, int hosts, dt_hostcpu_limit limit, double cpus,
                  dt_error *err) {
    memset(c, 0, sizeof *c);
    if (hosts < 1 || hosts > DT_HOSTCPU_MAX_HOSTS ||
        (limit == DT_HOSTCPU_QUOTA && !(cpus >= 0.01 && cpus <= 1024)))
        return dt_error_set(err,
                            "host CPU shares: %d hosts of %g cores (1 to %d hosts, 0.01 to "
                            "1024 cores each)",
                            hosts, cpus, DT_HOSTCPU_MAX_HOSTS);
    dt_cgroup_mounts m;
    c->kind = dt_cgroup_find_mounts(&m);
    if (c->kind == DT_CGROUP_NONE)
        return dt_error_set(err, "no cgroup with the cpu controller is mounted "
                                 "(/proc/self/mounts)");
    c->hosts = hosts;
    c->limit = limit;
    /* the kernel's least quota is 1 ms: a share under half a core takes a longer period */
    c->period_us = DT_HOSTCPU_PERIOD_US;
    if (limit == DT_HOSTCPU_QUOTA && cpus * (double)c->period_us < 1000)
        c->period_us = (long)ceil(1000.0 / cpus);
    snprintf(c->prefix, sizeof c->prefix, "%s", prefix);
    int *machine = c->machine, n_cpus = 0;
    if (limit == DT_HOSTCPU_CPUSET) {
        if (c->kind != DT_CGROUP_V1 || !m.cpuset[0])
            return dt_error_set(err, "cores of their own for the hosts need cgroup v1's cpuset "
                                     "controller, which this machine does not mount");
        n_cpus = cpuset_cpus(m.cpuset, machine, (int)(sizeof c->machine / sizeof *machine));
        c->n_machine = n_cpus;
        if (n_cpus < 1) return dt_error_set(err, "cannot read the CPUs of %s", m.cpuset);
        cpus = (double)n_cpus / hosts;
    }
    c->cpus = cpus;
    if (c->kind == DT_CGROUP_V2 && put(m.cpu, "cgroup.subtree_control", "+cpu", err)) return -1;
    char mems[256] = "0";
    if (limit == DT_HOSTCPU_CPUSET) {
        char path[700];
        snprintf(path, sizeof path, "%s/cpuset.mems", m.cpuset);
        if (dt_cgroup_read(path, mems, sizeof mems) == 0) mems[strcspn(mems, "\n")] = 0;
    }
    const long quota = lround(cpus * (double)c->period_us);
    for (int i = 1; i <= hosts; i++) {
        group_dirs g;
        dirs_of(&m, c->kind, limit == DT_HOSTCPU_CPUSET, prefix, i, &g);
        if (make_dir(g.cpu, err)) goto fail;
        c->made = i; /* from here its removal removes whatever of it exists */
        if (make_dir(g.acct, err) || make_dir(g.cpuset, err)) goto fail;
        char text[64];
        if (limit == DT_HOSTCPU_QUOTA) {
            if (c->kind == DT_CGROUP_V2) {
                snprintf(text, sizeof text, "%ld %ld", quota, c->period_us);
                if (put(g.cpu, "cpu.max", text, err)) goto fail;
            } else {
                snprintf(text, sizeof text, "%ld", c->period_us);
                if (put(g.cpu, "cpu.cfs_period_us", text, err)) goto fail;
                snprintf(text, sizeof text, "%ld", quota);
                if (put(g.cpu, "cpu.cfs_quota_us", text, err)) goto fail;
            }
        } else {
            /* hosts spread evenly: with more hosts than CPUs, neighbours share one; with
             * fewer, each gets its run of CPUs */
            const int first = (i - 1) * n_cpus / hosts;
            const int last = i * n_cpus / hosts - 1 > first ? i * n_cpus / hosts - 1 : first;
            c->first[i - 1] = first;
            c->last[i - 1] = last;
            if (last > first)
                snprintf(text, sizeof text, "%d-%d", machine[first], machine[last]);
            else
                snprintf(text, sizeof text, "%d", machine[first]);
            if (put(g.cpuset, "cpuset.mems", mems, err) || put(g.cpuset, "cpuset.cpus", text, err))
                goto fail;
        }
    }
    return 0;
fail:
    dt_hostcpu_down(c);
    return -1;
}

int dt_hostcpu_cpus_of(const dt_hostcpu *c, int host, int *cpus, int max) {
    if (c->limit != DT_HOSTCPU_CPUSET || host < 1 || host > c->made) return 0;
    int n = 0;
    for (int k = c->first[host - 1]; k <= c->last[host - 1] && n < max; k++)
        cpus[n++] = c->machine[k];
    return n;
}

/* The value after "key " on a line of a cpu.stat text; -1 if absent. */
static double stat_value(const char *text, const char *key) {
    const size_t n = strlen(key);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (!strncmp(p, key, n) && p[n] == ' ') return strtod(p + n + 1, NULL);
    return -1;
}

int dt_hostcpu_read(const dt_hostcpu *c, int host, dt_hostcpu_usage *u) {
    memset(u, 0, sizeof *u);
    dt_cgroup_mounts m;
    if (host < 1 || host > c->made || dt_cgroup_find_mounts(&m) != c->kind) return -1;
    group_dirs g;
    dirs_of(&m, c->kind, 0, c->prefix, host, &g);
    char path[700], text[1024];
    snprintf(path, sizeof path, "%s/cpu.stat", g.cpu);
    if (dt_cgroup_read(path, text, sizeof text)) return -1;
    u->periods = (long)stat_value(text, "nr_periods");
    u->throttled = (long)stat_value(text, "nr_throttled");
    if (c->kind == DT_CGROUP_V2) {
        u->cpu_s = stat_value(text, "usage_usec") * 1e-6;
    } else {
        snprintf(path, sizeof path, "%s/cpuacct.usage", g.acct);
        if (dt_cgroup_read(path, text, sizeof text)) return -1;
        u->cpu_s = strtod(text, NULL) * 1e-9;
    }
    return u->periods < 0 || u->throttled < 0 || u->cpu_s < 0 ? -1 : 0;
}

int dt_hostcpu_join(const char *prefix, int host, dt_error *err) {
    dt_cgroup_mounts m;
    const dt_cgroup_kind kind = dt_cgroup_find_mounts(&m);
    if (kind == DT_CGROUP_NONE) return 0;
    group_dirs g;
    dirs_of(&m, kind, 1, prefix, host, &g);
    if (access(g.cpu, F_OK) != 0) return 0; /* no shares in this run */
    char pid[32];
    snprintf(pid, sizeof pid, "%ld", (long)getpid());
    const char *dirs[3] = {g.cpu, g.acct, g.cpuset};
    for (int k = 0; k < 3; k++) {
        if (!dirs[k][0] || (k == 2 && access(dirs[k], F_OK) != 0)) continue;
        char path[700];
        snprintf(path, sizeof path, "%s/cgroup.procs", dirs[k]);
        if (dt_cgroup_write(path, pid))
            return dt_error_set(err, "cannot join host %d's CPU share (%s): %s", host, path,
                                strerror(errno));
    }
    return 0;
}

/* "dtrain-<pid>-h<i>" -> pid, or 0 when name is not one of ours. */
static long owner_of_group(const char *name) {
    if (strncmp(name, "dtrain-", 7)) return 0;
    char *end;
    errno = 0;
    const long pid = strtol(name + 7, &end, 10);
    if (errno || end == name + 7 || pid < 1 || strncmp(end, "-h", 2)) return 0;
    char *rest;
    const long host = strtol(end + 2, &rest, 10);
    return rest != end + 2 && !*rest && host >= 1 ? pid : 0;
}

int dt_hostcpu_remove_stale(int *removed, dt_error *err) {
    (void)err;
    *removed = 0;
    dt_cgroup_mounts m;
    if (dt_cgroup_find_mounts(&m) == DT_CGROUP_NONE) return 0;
    const char *roots[3] = {m.cpuset, m.acct, m.cpu};
    for (int k = 0; k < 3; k++) {
        const char *root = roots[k];
        int seen = 0; /* a hierarchy mounted twice (cpu,cpuacct) is walked once */
        for (int j = 0; j < k; j++) seen |= !strcmp(roots[j], root);
        if (!root[0] || seen) continue;
        DIR *d = opendir(root);
        if (!d) continue;
        char names[256][64];
        int n = 0;
        for (struct dirent *e; (e = readdir(d)) && n < 256;) {
            const long pid = owner_of_group(e->d_name);
            const size_t len = strlen(e->d_name);
            if (pid && len < sizeof names[0] && kill((pid_t)pid, 0) != 0 && errno == ESRCH)
                memcpy(names[n++], e->d_name, len + 1);
        }
        closedir(d);
        for (int i = 0; i < n; i++) {
            char dir[600];
            if ((size_t)snprintf(dir, sizeof dir, "%s/%s", root, names[i]) >= sizeof dir) continue;
            remove_group(dir);
            *removed += k == 2;
        }
    }
    return 0;
}
