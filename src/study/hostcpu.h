/* Emulated hosts' CPU: each host (a network namespace of netns.h) gets a cgroup with a
 * CPU bandwidth quota, so that a host of the emulation computes as a host with that many
 * cores would, whatever the other hosts do (Mininet's CPULimitedHost). cgroup v2's
 * cpu.max where the machine mounts it with the cpu controller, else v1's
 * cpu.cfs_quota_us / cpu.cfs_period_us (and v1's cpuacct for the usage), both as root.
 *
 * Groups are named as the namespaces, dtrain-<pid>-h<i>, so that a later run removes
 * what a SIGKILLed one left (dt_hostcpu_remove_stale). A process enters its host's
 * group before it starts anything there (dt_hostcpu_join: mpirun's rsh agent and the
 * mpirun of host 1), so every rank and daemon of the host is inside. */
#ifndef DTRAIN_HOSTCPU_H
#define DTRAIN_HOSTCPU_H

#include "core/cgroup.h"
#include "dtrain/error.h"

enum { DT_HOSTCPU_MAX_HOSTS = 64 };

/* How a host's CPU is limited: a quota of X cores (CFS bandwidth control: the host
 * runs until its quota of a period is spent, then waits for the next period), or CPUs
 * of its own (a cpuset: the hosts spread evenly over the machine's CPUs, neighbours
 * sharing one when there are more hosts than CPUs). */
typedef enum dt_hostcpu_limit { DT_HOSTCPU_QUOTA, DT_HOSTCPU_CPUSET } dt_hostcpu_limit;

typedef struct dt_hostcpu {
    dt_cgroup_kind kind;
    dt_hostcpu_limit limit;
    int hosts, made; /* groups made so far, for teardown */
    double cpus;     /* each host's share, in cores (a cpuset's: CPUs / hosts) */
    long period_us;  /* the quota's period */
    char prefix[32]; /* dtrain-<pid>, as the namespaces */
    /* CPUs of their own: the machine's CPUs in order, and host i's run of them,
     * machine[first[i - 1]] .. machine[last[i - 1]] */
    int machine[256], n_machine;
    int first[DT_HOSTCPU_MAX_HOSTS], last[DT_HOSTCPU_MAX_HOSTS];
} dt_hostcpu;

/* A host's CPU since its group was made (the counters only grow). */
typedef struct dt_hostcpu_usage {
    double cpu_s;   /* CPU time of all its processes */
    long periods;   /* quota periods in which it ran (0 without a quota) */
    long throttled; /* ... of those, the ones in which it ran out of its quota */
} dt_hostcpu_usage;

/* The quota's period, 2 ms: a host that has spent its quota waits for the rest of the
 * period, messages it has received included, so the period bounds that wait. The
 * kernel's least quota is 1 ms: a share under 0.5 cores gets a period of 1 ms / share. */
enum { DT_HOSTCPU_PERIOD_US = 2000 };

/* Makes hosts groups of prefix, each limited to cpus cores (a quota) or to CPUs of its
 * own (cpus ignored). Where the machine has no
 * cgroup with a cpu controller or it cannot be written (no privilege), returns -1 with
 * err saying so and leaves nothing behind. */
int dt_hostcpu_up(dt_hostcpu *c, const char *prefix, int hosts, dt_hostcpu_limit limit, double cpus,
                  dt_error *err);
/* Removes the groups, ending processes still inside. Safe to call twice. */
void dt_hostcpu_down(dt_hostcpu *c);
/* The CPUs host i (1-based) runs on, as CPU numbers into cpus (room for max): the
 * count; 0 when the hosts have no CPUs of their own (a quota, or none). */
int dt_hostcpu_cpus_of(const dt_hostcpu *c, int host, int *cpus, int max);
/* Host i's (1-based) counters; -1 when they cannot be read. */
int dt_hostcpu_read(const dt_hostcpu *c, int host, dt_hostcpu_usage *u);

/* Moves the calling process into host i's group of prefix, when that group exists (a
 * sweep with shares made it); 0 when it does not (no shares: nothing to join), -1 with
 * err when it exists and cannot be joined. */
int dt_hostcpu_join(const char *prefix, int host, dt_error *err);

/* Removes groups named dtrain-<pid>-h* whose pid no longer runs; *removed counts them. */
int dt_hostcpu_remove_stale(int *removed, dt_error *err);

#endif
