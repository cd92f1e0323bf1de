/* The performance model: NNLS on textbook problems, the loss-curve fit recovering known
 * parameters from noisy curves, the speed fit recovering known thetas, the textbook
 * prediction exercise's optimum, and across jobs: ridge regression, the regression of
 * whole curves predicting a held-out job, the jobs CSV and saved loss fits; fit-jobs'
 * and fit-loss --online's library calls (dt_fit_jobs, dt_loss_refit_per_epoch). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/rng.h"
#include "perfmodel/fitfile.h"
#include "perfmodel/jobs.h"
#include "perfmodel/nnls.h"
#include "perfmodel/perfinput.h"
#include "perfmodel/perfmodel.h"

static void test_nnls_textbook_problems(void **state) {
    (void)state;
    double x[2], res;
    /* Unconstrained optimum already non-negative. */
    const double a1[6] = {1, 0, 0, 1, 1, 1}, b1[3] = {2, 1, 3};
    assert_int_equal(dt_nnls(a1, b1, 3, 2, x, &res), 0);
    assert_float_equal(x[0], 2.0, 1e-12);
    assert_float_equal(x[1], 1.0, 1e-12);
    assert_float_equal(res, 0.0, 1e-12);
    /* The bound is active: x1 would be -1. */
    const double a2[4] = {1, 0, 0, 1}, b2[2] = {1, -1};
    assert_int_equal(dt_nnls(a2, b2, 2, 2, x, &res), 0);
    assert_float_equal(x[0], 1.0, 1e-12);
    assert_float_equal(x[1], 0.0, 1e-12);
    /* MATLAB's lsqnonneg example: x = [0, 0.6929]. */
    const double c[8] = {0.0372, 0.2869, 0.6861, 0.7071, 0.6233, 0.6245, 0.6344, 0.6170};
    const double d[4] = {0.8587, 0.1781, 0.0747, 0.8405};
    assert_int_equal(dt_nnls(c, d, 4, 2, x, &res), 0);
    assert_float_equal(x[0], 0.0, 1e-12);
    assert_float_equal(x[1], 0.6929, 1e-4);
    /* Unconstrained least squares would give x = (2.0, -2.0) here: NNLS must not. */
    const double a3[6] = {1, 1, 1, 2, 1, 3}, b3[3] = {0, -2, -4};
    assert_int_equal(dt_nnls(a3, b3, 3, 2, x, &res), 0);
    assert_true(x[0] >= 0 && x[1] >= 0);
    assert_float_equal(x[0], 0.0, 1e-12); /* b has no positive part to explain */
    assert_float_equal(x[1], 0.0, 1e-12);
}

static void test_loss_fit_recovers_known_curve(void **state) {
    (void)state;
    const dt_loss_fit truth = {0.004, 0.45, 0.25, 0};
    double k[120], l[120];
    dt_rng rng = dt_rng_make(5, 5);
    for (int i = 0; i < 120; i++) {
        k[i] = 25.0 * i;
        l[i] = dt_loss_at(&truth, k[i]) * (1.0 + 0.01 * dt_rng_normal(&rng)); /* 1% noise */
    }
    dt_loss_fit fit;
    dt_error err;
    if (dt_loss_fit_points(k, l, 120, &fit, &err)) fail_msg("%s", err.msg);
    print_message("b0 %.5f (true 0.004), b1 %.4f (0.45), b2 %.4f (0.25), rmse %.4f\n", fit.b0,
                  fit.b1, fit.b2, fit.rmse);
    assert_true(fabs(fit.b0 - truth.b0) / truth.b0 < 0.10);
    assert_true(fabs(fit.b1 - truth.b1) / truth.b1 < 0.10);
    assert_true(fabs(fit.b2 - truth.b2) / truth.b2 < 0.05);
    /* predictions of the exact curve */
    assert_float_equal(dt_loss_step_for_target(&truth, 0.35), (1.0 / 0.1 - 0.45) / 0.004, 1e-9);
    assert_float_equal(dt_loss_step_for_target(&truth, 0.2), -1, 0);
    double kc = dt_loss_step_converged(&truth, 1e-5);
    double slope = truth.b0 / pow(truth.b0 * kc + truth.b1, 2);
    assert_float_equal(slope, 1e-5, 1e-12);
}

static void test_loss_fit_rejects_bad_input(void **state) {
    (void)state;
    dt_loss_fit fit;
    dt_error err;
    double k[3] = {0, 1, 2}, up[3] = {1, 2, 3}, nan_l[3] = {1, NAN, 0.5};
    assert_int_equal(dt_loss_fit_points(k, up, 2, &fit, &err), -1); /* too few */
    assert_int_equal(dt_loss_fit_points(k, up, 3, &fit, &err), -1); /* not decreasing */
    assert_non_null(strstr(err.msg, "does not decrease"));
    assert_int_equal(dt_loss_fit_points(k, nan_l, 3, &fit, &err), -1);
    assert_non_null(strstr(err.msg, "not finite"));
}

static void test_speed_fit_recovers_known_thetas(void **state) {
    (void)state;
    const double theta[5] = {0.012, 0.05, 0.03, 0.004, 0.01};
    dt_speed_point pts[24];
    int n = 0;
    for (int w = 1; w <= 4; w++)
        for (int p = 1; p <= 3; p++)
            for (int m = 0; m < 2; m++) {
                double f[5], t = 0.0, batch = m ? 512 : 128;
                dt_speed_features(DT_SPEED_PS, w, p, batch, f);
                for (int i = 0; i < 5; i++) t += theta[i] * f[i];
                pts[n++] = (dt_speed_point){w, p, batch, t};
            }
    dt_speed_fit fit;
    dt_error err;
    if (dt_speed_fit_points(DT_SPEED_PS, pts, n, &fit, &err)) fail_msg("%s", err.msg);
    for (int i = 0; i < 5; i++) assert_float_equal(fit.theta[i], theta[i], 1e-9);
    /* a negative step time is refused */
    pts[3].step_time = -1;
    assert_int_equal(dt_speed_fit_points(DT_SPEED_PS, pts, n, &fit, &err), -1);
}

/* The all-reduce form with the wait that grows with compute (scaling.c's "which term
 * fails"): its fifth feature is (w-1)/w x batch/w, and its thetas are recovered from
 * exact times over 1-8 workers and three batch sizes. */
static void test_sync_form_recovers_known_thetas(void **state) {
    (void)state;
    const double theta[5] = {4.5e-5, 2e-4, 1e-4, 3e-5, 1.4e-5};
    dt_speed_point pts[24];
    int n = 0;
    for (int w = 1; w <= 8; w *= 2)
        for (int m = 0; m < 3; m++) {
            double f[5], t = 0.0, batch = 32.0 * (1 << (4 * m)) * w;
            assert_int_equal(dt_speed_features(DT_SPEED_ALLREDUCE_SYNC, w, 0, batch, f), 5);
            assert_float_equal(f[4], (w - 1.0) / w * batch / w, 1e-12);
            for (int i = 0; i < 5; i++) t += theta[i] * f[i];
            pts[n++] = (dt_speed_point){w, 0, batch, t};
        }
    dt_speed_fit fit;
    dt_error err;
    if (dt_speed_fit_points(DT_SPEED_ALLREDUCE_SYNC, pts, n, &fit, &err)) fail_msg("%s", err.msg);
    for (int i = 0; i < 5; i++) assert_float_equal(fit.theta[i], theta[i], 1e-9);
    /* the plain form has four features, the same first four */
    double g[5];
    assert_int_equal(dt_speed_features(DT_SPEED_ALLREDUCE, 4, 0, 512, g), 4);
}

/* The textbook exercise: theta = (1.02, 2.78, 4.92, 0, 0.02), batch 128: the best worker
 * count minimises 130.56/w + 4.92 w/p: w = 7 for p = 2, w = 10 for p = 4. */
static void test_textbook_exercise_optimum(void **state) {
    (void)state;
    dt_speed_fit fit = {DT_SPEED_PS, 5, {1.02, 2.78, 4.92, 0, 0.02}, 0};
    const int servers[2] = {2, 4}, want[2] = {7, 10};
    for (int s = 0; s < 2; s++) {
        int best = 1;
        for (int w = 1; w <= 99; w++)
            if (dt_speed_step_time(&fit, w, servers[s], 128) <
                dt_speed_step_time(&fit, best, servers[s], 128))
                best = w;
        assert_int_equal(best, want[s]);
    }
}

static void test_ridge_recovers_a_linear_relation(void **state) {
    (void)state;
    double x[20], y[10];
    for (int i = 0; i < 10; i++) {
        x[2 * i] = i, x[2 * i + 1] = (i * 7) % 5;
        y[i] = 2.0 + 3.0 * x[2 * i] - 1.0 * x[2 * i + 1];
    }
    dt_ridge m;
    dt_error err;
    if (dt_ridge_fit(x, y, 10, 2, 1e-9, &m, &err)) fail_msg("%s", err.msg);
    const double unseen[2] = {12, 3};
    assert_float_equal(dt_ridge_predict(&m, unseen), 2 + 36 - 3, 1e-6);
    /* a penalty shrinks the prediction towards the mean */
    dt_ridge shrunk;
    assert_int_equal(dt_ridge_fit(x, y, 10, 2, 100.0, &shrunk, &err), 0);
    double mean = 0;
    for (int i = 0; i < 10; i++) mean += y[i] / 10;
    assert_true(fabs(dt_ridge_predict(&shrunk, unseen) - mean) < fabs(35.0 - mean));
    assert_int_equal(dt_ridge_fit(x, y, 1, 2, 1.0, &m, &err), -1); /* too few jobs */
}

static void test_loss_step_observed_is_the_first_below_target(void **state) {
    (void)state;
    const double k[5] = {10, 20, 30, 40, 50}, l[5] = {1.0, 0.6, 0.45, 0.5, 0.3};
    assert_float_equal(dt_loss_step_observed(k, l, 5, 0.5), 30, 0);  /* not 40 */
    assert_float_equal(dt_loss_step_observed(k, l, 5, 0.45), 30, 0); /* <= */
    assert_float_equal(dt_loss_step_observed(k, l, 5, 1.0), 10, 0);
    assert_float_equal(dt_loss_step_observed(k, l, 5, 0.29), -1, 0); /* never */
}

/* Jobs whose b's are exact linear functions of depth: trained on three, the model
 * predicts the fourth's b's and steps to a target exactly (least squares), in the
 * features' own units too; leave-one-out covers the trained jobs only. */
static void test_curve_model_predicts_a_held_out_job(void **state) {
    (void)state;
    const double depth[4] = {20, 32, 44, 56};
    double b[12];
    for (int i = 0; i < 4; i++) {
        b[3 * i] = 0.006 - 5e-5 * depth[i];
        b[3 * i + 1] = 0.4 + 0.01 * depth[i];
        b[3 * i + 2] = 0.25 - 0.001 * depth[i];
    }
    const int train[4] = {1, 1, 1, 0};
    dt_curve_model m;
    dt_error err;
    if (dt_curve_model_fit(depth, b, train, 4, 1, 0.0, &m, &err)) fail_msg("%s", err.msg);
    dt_loss_fit c = dt_curve_model_predict(&m, &depth[3]);
    assert_float_equal(c.b0, b[9], 1e-12);
    assert_float_equal(c.b1, b[10], 1e-12);
    assert_float_equal(c.b2, b[11], 1e-12);
    const dt_loss_fit truth = {b[9], b[10], b[11], 0};
    assert_float_equal(dt_loss_step_for_target(&c, 0.3), dt_loss_step_for_target(&truth, 0.3),
                       1e-6);
    double coef;
    assert_float_equal(dt_ridge_unscaled(&m.b[1], &coef), 0.4, 1e-12);
    assert_float_equal(coef, 0.01, 1e-12);
    /* a penalty shrinks the slope: the extrapolation moves towards the trained mean */
    dt_curve_model shrunk;
    assert_int_equal(dt_curve_model_fit(depth, b, train, 4, 1, 1.0, &shrunk, &err), 0);
    dt_ridge_unscaled(&shrunk.b[1], &coef);
    assert_true(coef > 0 && coef < 0.01);
    /* leave-one-out over the trained rows: each from the other two, exact; the
     * held-out row is not among them */
    dt_loss_fit pred[4];
    int ok[4];
    assert_int_equal(dt_curve_model_leave_one_out(depth, b, train, 4, 1, 0.0, pred, ok, &err), 0);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(ok[i], 1);
        assert_float_equal(pred[i].b0, b[3 * i], 1e-12);
        assert_float_equal(pred[i].b2, b[3 * i + 2], 1e-12);
    }
    assert_int_equal(ok[3], 0);
    /* two trained rows leave one for each leave-one-out fit: none can be made */
    const int two[4] = {1, 0, 1, 0};
    assert_int_equal(dt_curve_model_leave_one_out(depth, b, two, 4, 1, 0.0, pred, ok, &err), 0);
    for (int i = 0; i < 4; i++) assert_int_equal(ok[i], 0);
    const int one[4] = {0, 0, 1, 0};
    assert_int_equal(dt_curve_model_fit(depth, b, one, 4, 1, 0.0, &m, &err), -1);
    assert_non_null(strstr(err.msg, "too few jobs"));
    /* NULL: every row */
    assert_int_equal(dt_curve_model_fit(depth, b, NULL, 4, 1, 0.0, &m, &err), 0);
    assert_float_equal(dt_curve_model_predict(&m, &depth[0]).b1, b[1], 1e-12);
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_true(fputs(text, f) >= 0);
    assert_int_equal(fclose(f), 0);
}

static void test_job_table_skips_comments(void **state) {
    (void)state;
    char path[128];
    snprintf(path, sizeof path, "/tmp/dtrain_jobs_%ld.csv", (long)getpid());
    write_text(path, "# made by a script\n# at commit abc\nname,depth,b0\nr20,20,0.5\n"
                     "# between rows\n\nr56,56,0.25\n");
    static dt_job_table t;
    dt_error err;
    if (dt_job_table_read(path, &t, &err)) fail_msg("%s", err.msg);
    assert_int_equal(t.n_cols, 3);
    assert_string_equal(t.header[1], "depth");
    assert_int_equal(t.n_rows, 2);
    assert_string_equal(t.names[1], "r56");
    assert_float_equal(t.v[1][dt_job_table_column(&t, "b0")], 0.25, 0);
    /* line numbers in errors count the comments */
    write_text(path, "# comment\nname,depth\nr20,twenty\n");
    assert_int_equal(dt_job_table_read(path, &t, &err), -1);
    assert_non_null(strstr(err.msg, "line 3: depth is not a number"));
    write_text(path, "# only a comment\n");
    assert_int_equal(dt_job_table_read(path, &t, &err), -1);
    assert_non_null(strstr(err.msg, "is empty"));
    unlink(path);
}

static void test_loss_fit_file_keeps_the_observed_step(void **state) {
    (void)state;
    char path[128], text[1024] = {0};
    snprintf(path, sizeof path, "/tmp/dtrain_lossfit_%ld.json", (long)getpid());
    const dt_loss_fit fit = {0.004, 0.45, 0.25, 0.01};
    dt_error err;
    if (dt_loss_fit_save(path, &fit, 999, 812.5, 0.3, 750, &err)) fail_msg("%s", err.msg);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    assert_true(fread(text, 1, sizeof text - 1, f) > 0);
    fclose(f);
    assert_non_null(strstr(text, "\"target_loss\":\t0.3"));
    assert_non_null(strstr(text, "\"observed_step\":\t750"));
    dt_loss_fit back;
    double last, conv;
    if (dt_loss_fit_load(path, &back, &last, &conv, &err)) fail_msg("%s", err.msg);
    assert_float_equal(back.b0, fit.b0, 0);
    assert_float_equal(conv, 812.5, 0);
    /* no target: neither key */
    if (dt_loss_fit_save(path, &fit, 999, 812.5, -1, -1, &err)) fail_msg("%s", err.msg);
    f = fopen(path, "r");
    assert_non_null(f);
    memset(text, 0, sizeof text);
    assert_true(fread(text, 1, sizeof text - 1, f) > 0);
    fclose(f);
    assert_null(strstr(text, "observed_step"));
    unlink(path);
}

static void test_greedy_allocation_follows_marginal_gain(void **state) {
    (void)state;
    dt_job jobs[2] = {{.name = "long",
                       .remaining_steps = 10000,
                       .batch = 128,
                       .speed = {DT_SPEED_PS, 5, {0.01, 0.1, 0.02, 0, 0.001}, 0}},
                      {.name = "short",
                       .remaining_steps = 100,
                       .batch = 128,
                       .speed = {DT_SPEED_PS, 5, {0.01, 0.1, 0.02, 0, 0.001}, 0}}};
    dt_error err;
    assert_int_equal(dt_allocate_greedy(jobs, 2, 12, &err), 0);
    int used = jobs[0].workers + jobs[0].servers + jobs[1].workers + jobs[1].servers;
    assert_true(used <= 12);
    assert_true(jobs[0].workers > jobs[1].workers); /* the long job gains more per worker */
    /* a budget below one worker and one server per job is refused */
    assert_int_equal(dt_allocate_greedy(jobs, 2, 3, &err), -1);
    assert_non_null(strstr(err.msg, "cannot give each of 2 jobs"));
}

/* fit-jobs' library call: features chosen, jobs held out and predicted by the model of
 * the others, an unseen job; a flag's fault told from the file's. */
static void test_fit_jobs_holds_out_and_predicts(void **state) {
    (void)state;
    char path[128];
    snprintf(path, sizeof path, "/tmp/dtrain_fitjobs_%ld.csv", (long)getpid());
    write_text(path, "# jobs\nname,depth,batch,b0,b1,b2\na,20,128,0.0031,1.12,0.21\n"
                     "b,32,128,0.0024,1.31,0.24\nc,44,256,0.0015,1.58,0.26\n"
                     "d,56,256,0.0012,1.70,0.29\n");
    static dt_fit_jobs_result r;
    dt_error err;
    dt_fit_jobs_opts o = {path, "depth", "a", "40", 1.0, 1};
    if (dt_fit_jobs(&o, &r, &err)) fail_msg("%s", err.msg);
    assert_int_equal(r.n_features, 1);
    assert_string_equal(r.table.header[r.feat[0]], "depth");
    assert_int_equal(r.n_train, 3);
    assert_int_equal(r.train[0], 0);
    for (int i = 0; i < 4; i++) assert_int_equal(r.ok[i], 1);
    const double depth_a = 20, depth_unseen = 40;
    const dt_loss_fit held = dt_curve_model_predict(&r.model, &depth_a),
                      unseen = dt_curve_model_predict(&r.model, &depth_unseen);
    assert_float_equal(r.curve[0].b1, held.b1, 1e-12);
    assert_int_equal(r.has_unseen, 1);
    assert_float_equal(r.unseen.b1, unseen.b1, 1e-12);
    assert_float_equal(dt_loss_fit_param(&r.curve[0], 2), r.curve[0].b2, 0);
    /* without --features: every column but name, the b's (and steps_to_target) */
    o = (dt_fit_jobs_opts){path, NULL, NULL, NULL, 1.0, 1};
    if (dt_fit_jobs(&o, &r, &err)) fail_msg("%s", err.msg);
    assert_int_equal(r.n_features, 2);
    assert_int_equal(r.n_train, 4);
    /* a column named twice is the flag's fault, a column missing is the file's */
    o.features = "depth,depth";
    assert_int_equal(dt_fit_jobs(&o, &r, &err), -1);
    assert_int_equal(r.bad_flag, 1);
    o.features = "width";
    assert_int_equal(dt_fit_jobs(&o, &r, &err), -1);
    assert_int_equal(r.bad_flag, 0);
    assert_non_null(strstr(err.msg, "no column 'width'"));
    /* holding out all but one job leaves too few to fit */
    o = (dt_fit_jobs_opts){path, NULL, "a,b,c", NULL, 1.0, 1};
    assert_int_equal(dt_fit_jobs(&o, &r, &err), -1);
    assert_non_null(strstr(err.msg, "(after --hold-out)"));
    unlink(path);
}

/* fit-loss --online's refits: one per epoch on the points before its end; on an exact
 * curve every refit with enough points predicts what the full fit does. */
static void test_loss_refit_per_epoch_predicts_the_full_fit(void **state) {
    (void)state;
    enum { N = 50 };
    double k[N], l[N];
    for (int i = 0; i < N; i++) k[i] = 10.0 * i + 9, l[i] = 1.0 / (0.01 * k[i] + 1) + 0.5;
    dt_loss_refit *rows;
    int n_rows;
    dt_error err;
    if (dt_loss_refit_per_epoch(k, l, N, 100, 10, 0.7, 1e-5, &rows, &n_rows, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(n_rows, 5);
    for (int e = 0; e < n_rows; e++) {
        assert_int_equal(rows[e].epoch, e + 1);
        assert_int_equal(rows[e].points, 10 * (e + 1));
        assert_int_equal(rows[e].fitted, 1);
        assert_int_equal(rows[e].b1_at_bound, 0);
        assert_float_equal(rows[e].predicted, 400, 1); /* 1/(0.7 - 0.5) = 0.01 k + 1 */
    }
    free(rows);
    /* epochs of 20 steps: the first refit has 2 points, too few */
    if (dt_loss_refit_per_epoch(k, l, N, 20, 10, 0.7, 1e-5, &rows, &n_rows, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(n_rows, 25);
    assert_int_equal(rows[0].points, 2);
    assert_int_equal(rows[0].fitted, 0);
    assert_int_equal(rows[1].fitted, 1);
    free(rows);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nnls_textbook_problems),
        cmocka_unit_test(test_loss_fit_recovers_known_curve),
        cmocka_unit_test(test_loss_fit_rejects_bad_input),
        cmocka_unit_test(test_speed_fit_recovers_known_thetas),
        cmocka_unit_test(test_sync_form_recovers_known_thetas),
        cmocka_unit_test(test_textbook_exercise_optimum),
        cmocka_unit_test(test_ridge_recovers_a_linear_relation),
        cmocka_unit_test(test_loss_step_observed_is_the_first_below_target),
        cmocka_unit_test(test_curve_model_predicts_a_held_out_job),
        cmocka_unit_test(test_job_table_skips_comments),
        cmocka_unit_test(test_loss_fit_file_keeps_the_observed_step),
        cmocka_unit_test(test_greedy_allocation_follows_marginal_gain),
        cmocka_unit_test(test_fit_jobs_holds_out_and_predicts),
        cmocka_unit_test(test_loss_refit_per_epoch_predicts_the_full_fit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
