/* Parameter-server training: ps-sync with K = W replicas reaches the same parameters
 * as one process with batch W*b on the same samples (relative error <= 1e-5, models
 * without BatchNorm), for P = 1 and P = 2 servers; a push carries its own epoch: the
 * servers count it in that epoch's staleness histogram. (ssp's bound and ps-async's
 * learning are end-to-end checks in test_ps_modes.sh.)
 * Run under mpirun: -np 3 (P = 1, W = 2) and -np 4 (P = 2, W = 2). */
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
#include "dtrain/train_state.h"
#include "dtrain/world.h"
#include "parallel/ps_server.h"
#include "testutil.h"
#include "train/trainer.h"

static dt_world world;

static void test_ps_sync_equals_one_process(void **state) {
    (void)state;
    const int servers = world.size - 2, workers = 2, b = 16;
    char dist[128], single[128];
    snprintf(dist, sizeof dist, "/tmp/dtrain_ps_%d_dist.safetensors", (int)getppid());
    snprintf(single, sizeof single, "/tmp/dtrain_ps_%d_single.safetensors", (int)getppid());
    dt_train_config cfg = equivalence_config("lenet5", b);
    cfg.ps = (dt_ps_config){DT_PS_SYNC, servers, workers, 0, DT_COMM_FP32};
    cfg.save_path = dist;
    dt_error err;
    dt_train_result res;
    if (dt_train(&cfg, &world, NULL, NULL, &res, &err)) fail_msg("%s", err.msg);
    dt_world_barrier(&world, "the test");
    double e = 0.0;
    if (world.rank == 0) {
        dt_train_config one = equivalence_config("lenet5", b * workers);
        one.save_path = single;
        if (dt_train(&one, NULL, NULL, NULL, NULL, &err)) fail_msg("%s", err.msg);
        e = safetensors_rel_error(dist, single);
        print_message("ps-sync, %d server%s x 2 workers x batch %d vs 1 process x batch %d: "
                      "relative error %.2e\n",
                      servers, servers > 1 ? "s" : "", b, 2 * b, e);
        unlink(dist);
        unlink(single);
    }
    dt_world_broadcast(&world, &e, 1, DT_F64, 0, "the error");
    assert_true(e <= 1e-5);
}

/* ps-async, every worker pushes STEPS gradients in epoch 1 and every server must count
 * all of them in epoch 1's histogram. The pulls carry another epoch (3) and the busy
 * and done messages none (0), so a push whose epoch a server took from the message
 * before it (the push once sent 2 of its 3 header values) lands in another row. */
static void test_push_lands_in_its_epoch_histogram(void **state) {
    (void)state;
    enum { STEPS = 5, PUSH_EPOCH = 1, PULL_EPOCH = 3 };
    const int servers = world.size - 2, workers = 2;
    const dt_ps_config cfg = {DT_PS_ASYNC, servers, workers, 0, DT_COMM_FP32};
    dt_model_spec spec;
    assert_int_equal(dt_zoo_default_spec(&spec, "logreg"), 0);
    dt_train_state s;
    dt_error err;
    if (dt_train_state_init(&s, &spec, 1, 7, NULL, 0.01f, 0.0f, 0.0f, &err))
        fail_msg("%s", err.msg);
    int wrong = 0; /* pushes counted in another epoch's row, or not at all */
    if (world.rank < servers) {
        const dt_lr_schedule sched = {DT_LR_CONSTANT, 0.01, 1.0, 0.0, STEPS, 4};
        dt_ps_server_stats st;
        if (dt_ps_serve(&world, &cfg, &s.model, &s.opt, &sched, 0, &st, &err))
            fail_msg("%s", err.msg);
        for (int e = 0; e < DT_PS_MAX_EPOCHS; e++) {
            long n = 0;
            for (int b = 0; b < DT_PS_STALENESS_BINS; b++) n += st.epoch_hist[e][b];
            const long expected = e == PUSH_EPOCH ? (long)workers * STEPS : 0;
            if (n != expected) {
                fprintf(stderr, "server %d: %ld pushes counted in epoch %d, %ld expected\n",
                        world.rank, n, e, expected);
                wrong = 1;
            }
        }
        if (st.applied != (long)workers * STEPS) wrong = 1;
    } else {
        dt_ps_client c;
        if (dt_ps_client_init(&c, &world, &cfg, &s.model, &err)) fail_msg("%s", err.msg);
        for (int step = 0; step < STEPS; step++) {
            c.epoch = PULL_EPOCH;
            dt_ps_pull(&c);
            dt_ps_busy(&c);
            fill_uniform(s.model.grads, s.model.n_params, (uint64_t)(world.rank * 100 + step),
                         -0.01f, 0.01f);
            c.epoch = PUSH_EPOCH;
            dt_ps_push(&c);
        }
        dt_ps_done(&c);
        dt_ps_client_free(&c);
    }
    dt_train_state_free(&s);
    dt_world_allreduce(&world, &wrong, 1, DT_S32, DT_REDUCE_MAX, "the test");
    assert_int_equal(wrong, 0);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ps_sync_equals_one_process),
        cmocka_unit_test(test_push_lands_in_its_epoch_histogram),
    };
    return run_mpi_tests(&world, tests, sizeof tests / sizeof *tests, &argc, &argv);
}
