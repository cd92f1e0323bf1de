/* The default thread count and the launcher's rank from given environments and masks
 * (placement.h): mpirun's default binding, --bind-to none, one rank, srun, a host
 * shared by more ranks than cores, and an explicit --threads. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "core/placement.h"

static void test_alone_takes_the_mask(void **state) {
    (void)state;
    char *env[] = {"HOME=/root", NULL};
    dt_threads_choice c;
    dt_threads_choose(0, env, 8, 8, &c);
    assert_int_equal(c.threads, 8);
    assert_string_equal(c.why, "8 cores in the affinity mask");
    dt_threads_choose(0, env, 3, 8, &c); /* taskset -c 0-2 */
    assert_int_equal(c.threads, 3);
    dt_threads_choose(0, env, 0, 4, &c); /* the mask unknown: the host */
    assert_int_equal(c.threads, 4);
    assert_string_equal(c.warning, "");
}

/* mpirun -np 2 on 2 cores binds each rank to one core by default */
static void test_mpirun_bound_to_a_core_runs_one_thread(void **state) {
    (void)state;
    char *env[] = {"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_LOCAL_SIZE=2",
                   "OMPI_MCA_orte_bound_at_launch=1", NULL};
    dt_threads_choice c;
    dt_threads_choose(0, env, 1, 2, &c);
    assert_int_equal(c.threads, 1);
    assert_string_equal(c.why, "1 core in the affinity mask (bound by the launcher: "
                               "OMPI_MCA_orte_bound_at_launch)");
    assert_int_equal(c.local_ranks, 2);
    assert_string_equal(c.warning, "");
}

/* --bind-to none: both ranks see every core, and share them */
static void test_mpirun_unbound_divides_the_mask(void **state) {
    (void)state;
    char *env[] = {"OMPI_COMM_WORLD_LOCAL_SIZE=2", NULL};
    dt_threads_choice c;
    dt_threads_choose(0, env, 2, 2, &c);
    assert_int_equal(c.threads, 1);
    assert_string_equal(c.why, "2 cores in the affinity mask / 2 ranks on this host "
                               "(OMPI_COMM_WORLD_LOCAL_SIZE)");
    dt_threads_choose(0, env, 16, 16, &c);
    assert_int_equal(c.threads, 8);
    /* a container's cpuset narrower than the host, not bound by mpirun: still shared */
    dt_threads_choose(0, env, 4, 64, &c);
    assert_int_equal(c.threads, 2);
    char *more[] = {"OMPI_COMM_WORLD_LOCAL_SIZE=3", NULL}; /* 3 ranks, 2 cores: at least 1 */
    dt_threads_choose(0, more, 2, 2, &c);
    assert_int_equal(c.threads, 1);
    assert_string_equal(c.warning, ""); /* one thread each is the least there is */
}

/* --bind-to socket, 4 ranks on 2 sockets of 8: two ranks share each socket's mask */
static void test_bound_to_a_socket_shares_it(void **state) {
    (void)state;
    char *env[] = {"OMPI_COMM_WORLD_LOCAL_SIZE=4", "OMPI_MCA_orte_bound_at_launch=1", NULL};
    dt_threads_choice c;
    dt_threads_choose(0, env, 8, 16, &c);
    assert_int_equal(c.threads, 4);
    assert_string_equal(c.why, "8 cores in the affinity mask (bound by the launcher: "
                               "OMPI_MCA_orte_bound_at_launch), at most 16 cores / 4 ranks on this "
                               "host (OMPI_COMM_WORLD_LOCAL_SIZE)");
}

static void test_srun(void **state) {
    (void)state;
    /* srun -n 3 -c 4 on 16 cores, bound: SLURM_CPUS_PER_TASK within the mask */
    char *cpt[] = {"PMIX_RANK=2",
                   "SLURM_PROCID=2",
                   "SLURM_CPUS_PER_TASK=4",
                   "SLURM_STEP_TASKS_PER_NODE=3",
                   "SLURM_CPU_BIND_TYPE=mask_cpu:",
                   NULL};
    dt_threads_choice c;
    dt_threads_choose(0, cpt, 4, 16, &c);
    assert_int_equal(c.threads, 4);
    assert_string_equal(c.why, "SLURM_CPUS_PER_TASK=4, 4 cores in the affinity mask");
    /* srun -n 2 without binding (a cgroup of the step's 2 cpus on a 64-core node):
     * this node's count from "2(x2),1" with SLURM_NODEID=1 */
    char *cg[] = {"PMI_RANK=3", "SLURM_STEP_TASKS_PER_NODE=2(x2),1", "SLURM_NODEID=1", NULL};
    dt_threads_choose(0, cg, 2, 64, &c);
    assert_int_equal(c.threads, 1);
    assert_string_equal(c.why, "2 cores in the affinity mask / 2 ranks on this host "
                               "(SLURM_STEP_TASKS_PER_NODE)");
    char *last[] = {"SLURM_STEP_TASKS_PER_NODE=2(x2),1", "SLURM_NODEID=2", NULL};
    dt_threads_choose(0, last, 2, 64, &c);
    assert_int_equal(c.local_ranks, 1);
    /* srun --cpu-bind=cores -n 2: one core each */
    char *bound[] = {"SLURM_STEP_TASKS_PER_NODE=2", "SLURM_CPU_BIND_TYPE=mask_cpu:", NULL};
    dt_threads_choose(0, bound, 1, 2, &c);
    assert_int_equal(c.threads, 1);
    assert_string_equal(c.why,
                        "1 core in the affinity mask (bound by the launcher: SLURM_CPU_BIND_TYPE)");
    /* malformed counts are ignored, as if unset */
    char *bad[] = {"SLURM_STEP_TASKS_PER_NODE=2(x", "OMPI_COMM_WORLD_LOCAL_SIZE=two", NULL};
    dt_threads_choose(0, bad, 2, 2, &c);
    assert_int_equal(c.local_ranks, 1);
    assert_int_equal(c.threads, 2);
}

static void test_explicit_threads_win_and_warn_when_too_many(void **state) {
    (void)state;
    char *env[] = {"OMPI_COMM_WORLD_LOCAL_SIZE=2", "OMPI_MCA_orte_bound_at_launch=1", NULL};
    dt_threads_choice c;
    dt_threads_choose(2, env, 1, 2, &c);
    assert_int_equal(c.threads, 2);
    assert_string_equal(c.why, "--threads");
    assert_string_equal(c.warning,
                        "2 ranks on this host x 2 threads = 4 threads on 2 cores: they compete "
                        "for cores (give fewer --threads, or leave it to its default)");
    dt_threads_choose(1, env, 1, 2, &c);
    assert_string_equal(c.warning, "");
    char *alone[] = {NULL};
    dt_threads_choose(4, alone, 2, 2, &c); /* one process: its own business */
    assert_int_equal(c.threads, 4);
    assert_string_not_equal(c.warning, "");
}

static void test_launcher_rank(void **state) {
    (void)state;
    char *none[] = {"PATH=/bin", NULL};
    assert_int_equal(dt_placement_rank(none), -1);
    char *ompi[] = {"SLURM_PROCID=0", "OMPI_COMM_WORLD_RANK=3", "PMIX_RANK=3", NULL};
    assert_int_equal(dt_placement_rank(ompi), 3); /* mpirun's rank, not the daemon's task */
    char *pmi[] = {"PMI_RANK=1", NULL};
    assert_int_equal(dt_placement_rank(pmi), 1);
    char *slurm[] = {"SLURM_PROCID=5", NULL};
    assert_int_equal(dt_placement_rank(slurm), 5);
    char *bad[] = {"OMPI_COMM_WORLD_RANK=x", "PMIX_RANK=2", NULL};
    assert_int_equal(dt_placement_rank(bad), 2);
    char *prefix[] = {"PMIX_RANKS=4", NULL}; /* another variable's name */
    assert_int_equal(dt_placement_rank(prefix), -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alone_takes_the_mask),
        cmocka_unit_test(test_mpirun_bound_to_a_core_runs_one_thread),
        cmocka_unit_test(test_mpirun_unbound_divides_the_mask),
        cmocka_unit_test(test_bound_to_a_socket_shares_it),
        cmocka_unit_test(test_srun),
        cmocka_unit_test(test_explicit_threads_win_and_warn_when_too_many),
        cmocka_unit_test(test_launcher_rank),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
