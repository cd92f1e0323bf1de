/* The CPU that Linux control groups give: where the cpu controller is mounted, and this
 * process's quota in cores (a container's --cpus, an emulated host's share of
 * study/hostcpu.h). cgroup v2's cpu.max and v1's cpu.cfs_quota_us / cpu.cfs_period_us,
 * the smallest along the path from the process's group to the root. */
#ifndef DTRAIN_CGROUP_H
#define DTRAIN_CGROUP_H

#include <stddef.h>

typedef enum dt_cgroup_kind { DT_CGROUP_NONE, DT_CGROUP_V1, DT_CGROUP_V2 } dt_cgroup_kind;

/* Where the controllers are mounted: cpu, v1's cpuacct (its own mount or cpu's) and
 * cpuset ("" where absent). v1 wins where both are mounted, as the kernel binds a
 * controller to one hierarchy at a time; under v2 all are the unified mount. */
typedef struct dt_cgroup_mounts {
    char cpu[256], acct[256], cpuset[256];
} dt_cgroup_mounts;
/* The kind of the cpu controller's hierarchy; NONE when no cgroup has it. */
dt_cgroup_kind dt_cgroup_find_mounts(dt_cgroup_mounts *m);

/* This process's CPU quota in cores; 0 when it has none or it cannot be read. */
double dt_cgroup_cpu_quota(void);

/* Small text files of the cgroup filesystem: read whole (NUL-terminated; -1 when it
 * cannot be opened) and written in one write (-1 with errno). */
int dt_cgroup_read(const char *path, char *buf, size_t size);
int dt_cgroup_write(const char *path, const char *text);

#endif
