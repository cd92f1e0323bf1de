#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include "core/placement.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char **environ;

static const char *env_get(char *const *env, const char *name) {
    const size_t len = strlen(name);
    for (; env && *env; env++)
        if (!strncmp(*env, name, len) && (*env)[len] == '=') return *env + len + 1;
    return NULL;
}

/* A whole number in [lo, hi] at the start of text, its end in *end. */
static int leading_long(const char *text, long lo, long hi, long *out, const char **end) {
    char *stop;
    errno = 0;
    const long v = strtol(text, &stop, 10);
    if (errno || stop == text || v < lo || v > hi || *text == '-' || *text == '+' || *text == ' ')
        return -1;
    *out = v;
    *end = stop;
    return 0;
}

/* NAME as a whole number in [lo, hi]; -1 if unset or not one (ignored, as if unset). */
static int env_long(char *const *env, const char *name, long lo, long hi, long *out) {
    const char *text = env_get(env, name), *end;
    if (!text || leading_long(text, lo, hi, out, &end) || *end) return -1;
    return 0;
}

int dt_placement_rank(char *const *env) {
    static const char *const names[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK",
                                        "SLURM_PROCID"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        long rank;
        if (env_long(env, names[i], 0, 1L << 30, &rank) == 0) return (int)rank;
    }
    return -1;
}

int dt_placement_rank_here(void) {
    return dt_placement_rank(environ);
}

/* Slurm's tasks per node, "2(x3),1": the count of node `node` (0-based). */
static int slurm_tasks_on_node(const char *text, long node, long *out) {
    long seen = 0;
    for (const char *p = text; *p;) {
        long count, repeat = 1;
        if (leading_long(p, 1, 1L << 20, &count, &p)) return -1;
        if (!strncmp(p, "(x", 2)) {
            if (leading_long(p + 2, 1, 1L << 20, &repeat, &p) || *p != ')') return -1;
            p++;
        }
        if (node < seen + repeat) {
            *out = count;
            return 0;
        }
        seen += repeat;
        if (*p == ',')
            p++;
        else if (*p)
            return -1;
    }
    return -1;
}

/* The ranks on this host as the launcher says, and which variable said it (NULL: none
 * does, 1). */
static int local_ranks(char *const *env, const char **from) {
    long k;
    *from = NULL;
    if (env_long(env, "OMPI_COMM_WORLD_LOCAL_SIZE", 1, 1L << 20, &k) == 0) {
        *from = "OMPI_COMM_WORLD_LOCAL_SIZE";
        return (int)k;
    }
    if (env_long(env, "MPI_LOCALNRANKS", 1, 1L << 20, &k) == 0) {
        *from = "MPI_LOCALNRANKS";
        return (int)k;
    }
    const char *per_node = env_get(env, "SLURM_STEP_TASKS_PER_NODE");
    long node = 0;
    if (per_node && env_long(env, "SLURM_NODEID", 0, 1L << 20, &node)) node = 0;
    if (per_node && slurm_tasks_on_node(per_node, node, &k) == 0) {
        *from = "SLURM_STEP_TASKS_PER_NODE";
        return (int)k;
    }
    return 1;
}

/* Whether the launcher bound this rank to cores of its own, and the variable saying
 * so; -1 if the launcher does not say. */
static int bound_by_launcher(char *const *env, const char **var) {
    if (env_get(env, "OMPI_COMM_WORLD_LOCAL_SIZE")) {
        const char *b = env_get(env, "OMPI_MCA_orte_bound_at_launch");
        *var = "OMPI_MCA_orte_bound_at_launch";
        return b && !strcmp(b, "1");
    }
    const char *type = env_get(env, "SLURM_CPU_BIND_TYPE");
    if (type && *type) {
        *var = "SLURM_CPU_BIND_TYPE";
        return strncmp(type, "none", 4) != 0;
    }
    /* a step's tasks without a binding share the step's cpuset (task/cgroup): a mask
     * of one cpu per task (Slurm's default -c 1) divides to 1 all the same */
    if (env_get(env, "SLURM_STEP_TASKS_PER_NODE")) return 0;
    return -1;
}

void dt_threads_choose(int asked, char *const *env, int mask_cores, int host_cores,
                       dt_threads_choice *out) {
    memset(out, 0, sizeof *out);
    if (host_cores < 1) host_cores = 1;
    const int n = mask_cores > 0 ? mask_cores : host_cores;
    if (n > host_cores) host_cores = n;
    const char *k_from;
    const int k = local_ranks(env, &k_from);
    out->local_ranks = k;
    out->host_cores = host_cores;
    const char *cores = n == 1 ? "core" : "cores";
    long per_task;
    const char *bound_var = NULL;
    int bound = bound_by_launcher(env, &bound_var);
    if (bound < 0) {
        bound = n < host_cores;
        bound_var = NULL;
    }
    if (asked > 0) {
        out->threads = asked;
        snprintf(out->why, sizeof out->why, "--threads");
    } else if (env_long(env, "SLURM_CPUS_PER_TASK", 1, 1L << 20, &per_task) == 0 &&
               !env_get(env, "OMPI_COMM_WORLD_LOCAL_SIZE")) {
        out->threads = per_task < n ? (int)per_task : n;
        snprintf(out->why, sizeof out->why, "SLURM_CPUS_PER_TASK=%ld, %d %s in the affinity mask",
                 per_task, n, cores);
    } else if (k <= 1) {
        out->threads = n;
        snprintf(out->why, sizeof out->why, "%d %s in the affinity mask%s", n, cores,
                 k_from ? " (1 rank on this host)" : "");
    } else if (bound) {
        const int share = host_cores / k > 0 ? host_cores / k : 1;
        out->threads = n < share ? n : share;
        if (bound_var)
            snprintf(out->why, sizeof out->why,
                     "%d %s in the affinity mask (bound by the launcher: %s)", n, cores, bound_var);
        else
            snprintf(out->why, sizeof out->why,
                     "%d %s in the affinity mask (narrower than the host's %d: bound by the "
                     "launcher)",
                     n, cores, host_cores);
        if (out->threads < n) {
            const size_t used = strlen(out->why);
            snprintf(out->why + used, sizeof out->why - used,
                     ", at most %d cores / %d ranks on this host (%s)", host_cores, k, k_from);
        }
    } else {
        out->threads = n / k > 0 ? n / k : 1;
        snprintf(out->why, sizeof out->why,
                 "%d %s in the affinity mask / %d ranks on this host (%s)", n, cores, k, k_from);
    }
    if (out->threads > 1 && (long)k * out->threads > host_cores)
        snprintf(out->warning, sizeof out->warning,
                 "%d ranks on this host x %d threads = %ld threads on %d cores: they compete "
                 "for cores (give fewer --threads, or leave it to its default)",
                 k, out->threads, (long)k * out->threads, host_cores);
}

void dt_threads_choose_here(int asked, dt_threads_choice *out) {
    const long online = sysconf(_SC_NPROCESSORS_ONLN);
    cpu_set_t set;
    const int mask = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
    dt_threads_choose(asked, environ, mask, online > 0 ? (int)online : 1, out);
}
