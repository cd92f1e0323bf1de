/* The defining property of synchronous SGD: N ranks with per-rank batch b reach the
 * same parameters as one process with batch N*b on the same samples (models without
 * BatchNorm; relative error <= 1e-5 after several steps), for both all-reduce
 * algorithms, with and without overlap, and bucket sizes that put bucket boundaries
 * inside tensors, or that change between steps (--bucket-mb auto, which then says what
 * it measured and chose in the epoch record). Run under mpirun -np 2. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/textfile.h"
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

/* What the run log's epoch record says of --bucket-mb auto (1: as it should). mlp's
 * 269,322 floats make 2 buckets of 1 MiB and 1 of anything larger; with a fixed
 * algorithm every step counts (1 each in turn, then 2 more each: chosen after 6), while
 * auto's algorithm measures each new size over many calls, so 6 steps are still
 * measuring. A fixed size says nothing. Removes the log. */
static double bucket_record_ok(const char *log, dt_allreduce_algo algo, double bucket_mb) {
    dt_error err;
    char *text = dt_text_file_read(log, "run log", (size_t)1 << 20, &err);
    unlink(log);
    if (!text) {
        print_message("%s\n", err.msg);
        return 0.0;
    }
    const char *said = strstr(text, "\"bucket_auto\":\"");
    int ok;
    if (bucket_mb > 0) {
        ok = !said || said[15] == '"';
    } else if (algo != DT_ALLREDUCE_AUTO) {
        ok = said && strstr(said, "\"bucket_auto\":\"1 MiB (2) ") && strstr(said, ", 4 MiB (1) ") &&
             !strstr(said, "25 MiB") &&
             (strstr(said, " bucket, after 6 steps)\"") ||
              strstr(said, " buckets, after 6 steps)\""));
    } else {
        ok = said && strstr(said, " -> measuring (6 steps so far)\"");
    }
    if (said) print_message("%.*s\n", (int)strcspn(said + 15, "\"") + 16, said);
    free(text);
    return ok ? 1.0 : 0.0;
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
    char log[128];
    snprintf(log, sizeof log, "/tmp/dtrain_ddp_%d_dist.jsonl", (int)getppid());
    cfg.log_path = log;
    dt_error err;
    dt_train_result res;
    if (dt_train(&cfg, &world, NULL, NULL, &res, &err)) fail_msg("%s", err.msg);
    assert_int_equal(res.steps, 6);
    dt_world_barrier(&world, "the test");
    double e = 0.0;
    if (world.rank == 0) {
        e = safetensors_rel_error(path, single_path);
        char buckets[32] = "auto";
        if (bucket_mb > 0) snprintf(buckets, sizeof buckets, "%g MiB", bucket_mb);
        print_message("%s: %d ranks x batch %d vs 1 x %d, %s, %s, buckets of %s: relative "
                      "error %.2e\n",
                      model, world.size, b, b * world.size, dt_allreduce_name(algo),
                      overlap ? "overlap" : "no overlap", buckets, e);
        unlink(path);
    }
    dt_world_broadcast(&world, &e, 1, DT_F64, 0, "the error");
    assert_true(e <= 1e-5);
    /* rank 0 reads the log; every rank then asserts, so a failure never leaves rank 1
     * in the next run's collectives alone */
    double log_ok = 1.0;
    if (world.rank == 0) log_ok = bucket_record_ok(log, algo, bucket_mb);
    dt_world_broadcast(&world, &log_ok, 1, DT_F64, 0, "the log check");
    assert_true(log_ok == 1.0);
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
    check_distributed("mlp", 8, DT_ALLREDUCE_RING, 1, DT_BUCKET_AUTO);
    check_distributed("mlp", 8, DT_ALLREDUCE_AUTO, 0, DT_BUCKET_AUTO);
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
