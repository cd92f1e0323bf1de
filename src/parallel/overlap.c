#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include "parallel/overlap.h"

#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

const char *dt_overlap_mode_name(dt_overlap_mode mode) {
    return mode == DT_OVERLAP_ON ? "on" : mode == DT_OVERLAP_OFF ? "off" : "auto";
}

int dt_overlap_mode_parse(const char *name, dt_overlap_mode *mode) {
    if (!strcmp(name, "auto"))
        *mode = DT_OVERLAP_AUTO;
    else if (!strcmp(name, "on"))
        *mode = DT_OVERLAP_ON;
    else if (!strcmp(name, "off"))
        *mode = DT_OVERLAP_OFF;
    else
        return -1;
    return 0;
}

int dt_overlap_auto(int host_cores, int own_cores, int local_ranks, int threads, int spans_hosts,
                    char *why, size_t why_size) {
    const long need = (long)local_ranks * ((long)threads + 1);
    if (spans_hosts) {
        snprintf(why, why_size, "on: the ranks span hosts (communication waits on the network)");
        return 1;
    }
    if ((long)threads + 1 > own_cores) {
        snprintf(why, why_size,
                 "off: %d threads + 1 communication > the %d cores this rank is bound to (the "
                 "communication thread would compete with compute)",
                 threads, own_cores);
        return 0;
    }
    if (need > host_cores) {
        snprintf(why, why_size,
                 "off: %d ranks x (%d threads + 1 communication) > %d cores, one host (the "
                 "communication thread would compete with compute)",
                 local_ranks, threads, host_cores);
        return 0;
    }
    snprintf(why, why_size, "on: %d ranks x (%d threads + 1 communication) <= %d cores",
             local_ranks, threads, host_cores);
    return 1;
}

int dt_overlap_host_cores(void) {
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

int dt_overlap_own_cores(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
    return dt_overlap_host_cores();
}
