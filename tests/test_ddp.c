/* The defining property of synchronous SGD: N ranks with per-rank batch b reach the
 * same parameters as one process with batch N*b on the same samples (models without
 * BatchNorm; relative error <= 1e-5 after several steps), for both all-reduce
 * algorithms, with and without overlap, and bucket sizes that put bucket boundaries
 * inside tensors. Run under mpirun -np 2. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "dtrain/safetensors.h"
#include "dtrain/world.h"
#include "testutil.h"
#include "train/trainer.h"

static dt_world world;
static char single_path[128];

/* Rank 0 trains alone with batch world*b, writing single_path. */
static void train_single(const char *model, int b) {
    if (world.rank == 0) {
        dt_train_config cfg = equivalence_config(model, b * world.size);
        cfg.save_path = single_path;
        dt_error err;
        if (dt_train(&cfg, NULL, NULL, NULL, NULL, &err)) fail_msg("%s", err.msg);
    }
    dt_world_barrier(&world, "the test");
}

static void check_distributed(const char *model, int b, dt_allreduce_algo algo, int overlap,
                              double bucket_mb) {
    char path[128];
    snprintf(path, sizeof path, "/tmp/dtrain_ddp_%d_dist.safetensors", (int)getppid());
    dt_train_config cfg = equivalence_config(model, b);
    cfg.allreduce = algo;
    cfg.overlap = overlap ? DT_OVERLAP_ON : DT_OVERLAP_OFF;
    cfg.bucket_mb = bucket_mb;
    cfg.save_path = path;
    dt_error err;
    dt_train_result res;
    if (dt_train(&cfg, &world, NULL, NULL, &res, &err)) fail_msg("%s", err.msg);
    assert_int_equal(res.steps, 6);
    dt_world_barrier(&world, "the test");
    double e = 0.0;
    if (world.rank == 0) {
        e = safetensors_rel_error(path, single_path);
        print_message("%s: %d ranks x batch %d vs 1 x %d, %s, %s, buckets of %g MiB: relative "
                      "error %.2e\n",
                      model, world.size, b, b * world.size, dt_allreduce_name(algo),
                      overlap ? "overlap" : "no overlap", bucket_mb, e);
        unlink(path);
    }
    dt_world_broadcast(&world, &e, 1, DT_F64, 0, "the error");
    assert_true(e <= 1e-5);
}

static void test_two_ranks_equal_one_rank_lenet5(void **state) {
    (void)state;
    train_single("lenet5", 16);
    check_distributed("lenet5", 16, DT_ALLREDUCE_RING, 1, 25);
    check_distributed("lenet5", 16, DT_ALLREDUCE_RING, 1, 0.02); /* ~5,000 floats: splits */
    check_distributed("lenet5", 16, DT_ALLREDUCE_RING, 0, 0.05);
    check_distributed("lenet5", 16, DT_ALLREDUCE_MPI, 1, 0.02);
    check_distributed("lenet5", 16, DT_ALLREDUCE_MPI, 0, 25);
}

static void test_two_ranks_equal_one_rank_mlp(void **state) {
    (void)state;
    train_single("mlp", 8);
    check_distributed("mlp", 8, DT_ALLREDUCE_RING, 1, 0.3);
    check_distributed("mlp", 8, DT_ALLREDUCE_AUTO, 1, 25);
    check_distributed("mlp", 8, DT_ALLREDUCE_MPI, 0, 0.3);
    if (world.rank == 0) unlink(single_path);
}

int main(int argc, char **argv) {
    snprintf(single_path, sizeof single_path, "/tmp/dtrain_ddp_%d_single.safetensors",
             (int)getppid());
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_ranks_equal_one_rank_lenet5),
        cmocka_unit_test(test_two_ranks_equal_one_rank_mlp),
    };
    return run_mpi_tests(&world, tests, sizeof tests / sizeof *tests, &argc, &argv);
}
