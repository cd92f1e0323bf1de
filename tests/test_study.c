/* The scaling report's maths on hand-made data with known answers, and its bad-input
 * cases. */
#include <math.h>
#include <signal.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>

#include <cmocka.h>
#include <dirent.h>

#include "study/netns.h"
#include "study/plots.h"
#include "study/predict.h"
#include "study/scale_csv.h"
#include "study/scale_report.h"
#include "study/scaling.h"
#include "study/tta.h"

static char path[128];

static void write_csv(const char *text) {
    snprintf(path, sizeof path, "/tmp/dtrain_study_%ld.csv", (long)getpid());
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static char *report_text(dt_scale_study *s) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    dt_scale_write_report(s, f, NULL, 0);
    fclose(f);
    return buf;
}

static void test_known_speedups_comm_and_bandwidth(void **state) {
    (void)state;
    write_csv("procs,batch_size,t_train\n1,32,100\n2,32,60\n4,32,40\n");
    dt_scale_study s;
    memset(&s, 0, sizeof s);
    s.params = 1e6;
    s.dataset_size = 1000;
    dt_error err;
    if (dt_scale_read_csv(&s, path, &err)) fail_msg("%s", err.msg);
    const dt_scale_row *r2 = dt_scale_find(&s, 2, 32, 0), *r4 = dt_scale_find(&s, 4, 32, 0);
    assert_non_null(r2);
    assert_non_null(r4);
    assert_float_equal(dt_scale_strong_speedup(&s, r2), 100.0 / 60.0, 1e-12);
    assert_float_equal(dt_scale_strong_speedup(&s, r4), 2.5, 1e-12);
    /* iterations: ceil(ceil(1000/N)/32) = 32, 16, 8 -> weak = N t(1)/t(N) */
    assert_float_equal(dt_scale_weak_speedup(&s, r2), 2.0 * (100.0 / 32) / (60.0 / 16), 1e-12);
    assert_float_equal(dt_scale_weak_speedup(&s, r4), 4.0 * (100.0 / 32) / (40.0 / 8), 1e-12);
    assert_float_equal(dt_scale_derived_comm(&s, r2), 10.0, 1e-12);
    assert_float_equal(dt_scale_derived_comm(&s, r4), 15.0, 1e-12);
    /* 16 iterations x 2(1)/2 x 4e6 bytes / 10 s; 8 x 2(3)/4 x 4e6 / 15 s */
    assert_float_equal(dt_scale_bandwidth(&s, r2, 10.0), 6.4e6, 1e-3);
    assert_float_equal(dt_scale_bandwidth(&s, r4, 15.0), 3.2e6, 1e-3);
    char *text = report_text(&s);
    assert_non_null(strstr(text, "| 32 | 1.00 | 1.67 | 2.50 |"));  /* strong speed-up row */
    assert_non_null(strstr(text, "| 32 | 100 | 83 | 62 |"));       /* efficiency % */
    assert_non_null(strstr(text, "| 2 | 32 | 16 | 6.4 | 12.8 |")); /* bandwidth MB/s */
    assert_non_null(strstr(text, "## 6. Reading"));
    free(text);
    dt_scale_free(&s);
    unlink(path);
}

static void expect_csv_error(const char *csv, const char *fragment) {
    write_csv(csv);
    dt_scale_study s;
    memset(&s, 0, sizeof s);
    dt_error err;
    assert_int_equal(dt_scale_read_csv(&s, path, &err), -1);
    print_message("  -> %s\n", err.msg);
    assert_non_null(strstr(err.msg, fragment));
    dt_scale_free(&s);
    unlink(path);
}

static void test_bad_csv_is_named(void **state) {
    (void)state;
    expect_csv_error("procs,t_train\n1,10\n", "missing column 'batch_size'");
    expect_csv_error("procs,batch_size,t_train\n1,32,0\n", "times must be positive");
    expect_csv_error("procs,batch_size,t_train\n1,32,-3\n", "times must be positive");
    expect_csv_error("procs,batch_size,t_train\n1,32,abc\n", "t_train is not a number");
    expect_csv_error("procs,batch_size,t_train\n", "no data rows");
}

static void test_single_process_count_says_what_it_cannot_compute(void **state) {
    (void)state;
    write_csv("procs,batch_size,t_train\n1,32,100\n1,128,80\n");
    dt_scale_study s;
    memset(&s, 0, sizeof s);
    dt_error err;
    if (dt_scale_read_csv(&s, path, &err)) fail_msg("%s", err.msg);
    char *text = report_text(&s);
    assert_non_null(strstr(text, "Cannot compute: the study needs a 1-process run and at least "
                                 "one more process count"));
    assert_non_null(strstr(text, "Nothing to read"));
    free(text);
    dt_scale_free(&s);
    unlink(path);
}

/* The text of dir/name (freed by the caller). */
static char *slurp(const char *dir, const char *name) {
    char p[256];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "r");
    assert_non_null(f);
    char *text = calloc(1, 1 << 20);
    assert_non_null(text);
    size_t got = fread(text, 1, (1 << 20) - 1, f);
    assert_true(got > 0);
    fclose(f);
    return text;
}

static void remove_dir(const char *dir) {
    DIR *d = opendir(dir);
    assert_non_null(d);
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char p[512];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        assert_int_equal(unlink(p), 0);
    }
    closedir(d);
    assert_int_equal(rmdir(dir), 0);
}

/* A study of the default sweep's configs in a new folder: dtrain scale's default
 * --procs 1,2 and batch sizes 32, then x4 up to the share of MNIST's 60000 images
 * (32 .. 8192), with a run log of 40 steps each; `with_t_epoch` adds the running time
 * column. */
static void default_sweep(char *dir, int with_t_epoch, dt_scale_study *s) {
    static const int procs[] = {1, 2}, batch[] = {32, 128, 512, 2048, 8192};
    assert_non_null(mkdtemp(dir));
    char csv[4096] = "", log[256];
    size_t used = (size_t)snprintf(csv, sizeof csv, "procs,batch_size,t_train%s\n",
                                   with_t_epoch ? ",t_epoch" : "");
    for (int p = 0; p < 2; p++)
        for (int b = 0; b < 5; b++) {
            used += (size_t)snprintf(csv + used, sizeof csv - used, "%d,%d,%g", procs[p], batch[b],
                                     10.0 / procs[p] + b);
            used += (size_t)snprintf(csv + used, sizeof csv - used, with_t_epoch ? ",%g\n" : "\n",
                                     11.0 / procs[p] + b);
            snprintf(log, sizeof log, "%s/run_p%d_b%d.jsonl", dir, procs[p], batch[b]);
            FILE *f = fopen(log, "w");
            assert_non_null(f);
            fprintf(f,
                    "{\"event\": \"run\", \"model\": \"lenet5\", \"steps_per_epoch\": 20, "
                    "\"epochs\": 2, \"procs\": %d, \"batch_size\": %d}\n",
                    procs[p], batch[b]);
            for (int k = 0; k < 40; k++)
                fprintf(f,
                        "{\"event\": \"step\", \"rank\": 0, \"epoch\": %d, \"step\": %d, "
                        "\"loss\": %g}\n",
                        k / 20, k, 2.0 / (1 + 0.1 * k) + 0.1 * b);
            fclose(f);
        }
    write_csv(csv);
    memset(s, 0, sizeof *s);
    dt_error err;
    if (dt_scale_read_csv(s, path, &err)) fail_msg("%s", err.msg);
    unlink(path);
}

/* The plot command after "set output 'PICTURE'" in a gnuplot script (a copy). */
static char *plot_command(const char *gp, const char *picture) {
    char key[64];
    snprintf(key, sizeof key, "set output '%s'", picture);
    const char *at = strstr(gp, key);
    assert_non_null(at);
    at = strstr(at, "\nplot ");
    assert_non_null(at);
    at += 1;
    const char *end = strchr(at, '\n');
    assert_non_null(end);
    return strndup(at, (size_t)(end - at));
}

/* The default sweep's study (with or without t_epoch) in dir, its plots written; the
 * gnuplot script (the caller frees it and the study). */
static char *plots_of_default_sweep(char *dir, int with_t_epoch, dt_scale_study *s) {
    default_sweep(dir, with_t_epoch, s);
    char names[DT_MAX_PLOTS][64];
    int n = 0;
    dt_error err;
    if (dt_plots_write(s, dir, names, &n, &err)) fail_msg("%s", err.msg);
    return slurp(dir, "plots.gp");
}

/* The default sweep's loss plot: gnuplot's 8 default colours gave batch 32 and 8192
 * (and every curve 8 apart) one colour; now a colour per batch size, a dash pattern
 * per process count: no two curves share both. */
static void test_loss_curves_differ_in_colour_or_dash(void **state) {
    (void)state;
    char dir[] = "/tmp/dtrain_plots_XXXXXX";
    dt_scale_study s;
    char *gp = plots_of_default_sweep(dir, 1, &s), *plot = plot_command(gp, "loss.png");
    char styles[16][64];
    int curves = 0;
    for (const char *c = strstr(plot, "'loss_p"); c; c = strstr(c + 1, "'loss_p")) {
        const char *lc = strstr(c, " lc rgb '"), *title = strstr(c, " title ");
        assert_non_null(lc);
        assert_non_null(title);
        assert_true(lc < title && curves < 16);
        snprintf(styles[curves], sizeof styles[curves], "%.*s", (int)(title - lc), lc);
        print_message("  curve %d:%s\n", curves, styles[curves]);
        for (int k = 0; k < curves; k++)
            if (!strcmp(styles[k], styles[curves]))
                fail_msg("curves %d and %d share%s", k, curves, styles[k]);
        curves++;
    }
    assert_int_equal(curves, 10);
    /* the running time, named as such (every config has t_epoch) */
    assert_non_null(strstr(gp, "set ylabel 'running time per epoch, t_epoch (s: with data "
                               "waits, without evaluation)' noenhanced"));
    free(plot);
    free(gp);
    dt_scale_free(&s);
    remove_dir(dir);
}

/* epoch_time.png says which time it draws: without t_epoch (a --times CSV of
 * training times), the training time, never a mix. */
static void test_epoch_time_plot_names_training_time(void **state) {
    (void)state;
    char dir[] = "/tmp/dtrain_plots_XXXXXX";
    dt_scale_study s;
    char *gp = plots_of_default_sweep(dir, 0, &s);
    assert_non_null(strstr(gp, "set title 'Training time of the measured epoch vs batch size "
                               "per process'"));
    assert_non_null(strstr(gp, "set ylabel 'training time per epoch, t_train (s: without data "
                               "waits)' noenhanced"));
    char *p1 = slurp(dir, "epoch_p1.dat");
    assert_non_null(strstr(p1, "32 10\n")); /* t_train of 1 process, batch 32 */
    free(p1);
    free(gp);
    dt_scale_free(&s);
    remove_dir(dir);
}

/* A time-to-target study's config: its row (100 iterations of t_train s, repeats) ... */
static void tta_config(dt_scale_study *s, int procs, int batch, double t_train, int repeats) {
    dt_scale_row row = dt_scale_row_unknown();
    row.procs = procs;
    row.batch = batch;
    row.iterations = 100;
    row.t_train = row.t_epoch = t_train;
    row.repeats = repeats;
    dt_error err;
    if (dt_scale_add_row(s, &row, &err)) fail_msg("%s", err.msg);
}

/* ... and a repeat's log (0: the first) in dir: rank 0's loss at each step, loss(k, arg). */
static void tta_log(const char *dir, int procs, int batch, int repeat, int steps,
                    double (*loss)(int k, const double *arg), const double *arg) {
    char log[256], suffix[16] = "";
    if (repeat > 0) snprintf(suffix, sizeof suffix, "_r%d", repeat + 1);
    snprintf(log, sizeof log, "%s/run_p%d_b%d%s.jsonl", dir, procs, batch, suffix);
    FILE *f = fopen(log, "w");
    assert_non_null(f);
    fprintf(f, "{\"event\": \"run\", \"model\": \"lenet5\", \"epochs\": 1}\n");
    for (int k = 0; k < steps; k++)
        fprintf(f,
                "{\"event\": \"step\", \"rank\": 0, \"epoch\": 0, \"step\": %d, \"loss\": %.9g}\n",
                k, loss(k, arg));
    assert_int_equal(fclose(f), 0);
}

/* Time to target on runs whose steps to the target follow S(G) = 50 + 6400 / G exactly
 * (losses falling as a power of the step, as the crossing's local fit reads them, from
 * 2.3 and reaching 0.5 there): the fit finds both terms, leave-one-out
 * errs by under 1%, the run that stops short is not counted against the model, the
 * fastest (workers, batch) is the one the formula gives, and the recommendation
 * waits for the simulator's error on the grid. */
static double known_steps(double g) {
    return 50.0 + 6400.0 / g;
}

/* 0.5 at step *target_step, a power of the step, within 0.3 .. 2.3 */
static double power_loss(int k, const double *target_step) {
    return fmax(0.3, fmin(2.3, 0.5 * pow((k + 1) / *target_step, -0.7)));
}

static void test_time_to_target_known_curves(void **state) {
    (void)state;
    static const int procs[] = {1, 2}, batch[] = {16, 64, 256};
    char dir[] = "/tmp/dtrain_tta_XXXXXX";
    assert_non_null(mkdtemp(dir));
    dt_scale_study s = {.dataset_size = 60000};
    dt_error err;
    for (int p = 0; p < 2; p++)
        for (int b = 0; b < 3; b++) {
            const double g = (double)procs[p] * batch[b], target_step = known_steps(g);
            /* every run twice its steps to target, except G = 512: 40 steps, short */
            const int steps = g == 512 ? 40 : (int)(2 * target_step);
            tta_config(&s, procs[p], batch[b], 1.0 + b, 1); /* measured step: 10, 20, 30 ms */
            tta_log(dir, procs[p], batch[b], 0, steps, power_loss, &target_step);
        }
    /* the simulator's steps past the machine: 1 .. 8 workers; the grid's own */
    s.predicted = calloc(3 * 4 + 6, sizeof *s.predicted);
    assert_non_null(s.predicted);
    for (int b = 0; b < 3; b++)
        for (int w = 1; w <= 8; w *= 2)
            s.predicted[s.n_predicted++] = (dt_scale_predicted){
                .procs = w, .batch = batch[b], .beyond = 1, .step_s = 0.01 * (b + 1) + 0.002 * w};
    dt_scale_tta *t;
    if (dt_scale_tta_compute(&s, dir, 0.5, &t, &err)) fail_msg("%s", err.msg);
    assert_non_null(t);
    assert_int_equal(t->n_runs, 6);
    assert_int_equal(t->n_reached, 5);
    assert_true(t->fitted);
    print_message("  S_min %.4g (50), E_min %.5g (6400), median %.3g%%, worst %.3g%%\n", t->s_min,
                  t->e_min, 100 * t->median, 100 * t->worst);
    assert_true(fabs(t->s_min - 50) < 1.0 && fabs(t->e_min - 6400) < 64);
    assert_int_equal(t->n_errors, 5);
    assert_true(t->worst < 0.01);
    assert_int_equal(t->n_early, 0); /* 40 steps of G = 512 are under its 62.5 */
    assert_true(t->g_lo == 16 && t->g_hi == 256);
    int best = -1;
    double best_time = INFINITY;
    for (int i = 0; i < t->n_points; i++) {
        const dt_tta_point *pt = &t->points[i];
        const double expect = known_steps((double)pt->workers * pt->batch) * pt->step_s;
        assert_true(fabs(pt->time_s - expect) < 0.02 * expect);
        assert_int_equal(pt->extrapolated, pt->workers * pt->batch > 256);
        if (expect < best_time) best_time = expect, best = i;
    }
    assert_int_equal(t->n_points, 12);
    assert_int_equal(t->best, best);
    /* no grid predictions: the simulator's error is unknown, nothing is recommended */
    assert_true(t->speed_median < 0);
    assert_false(t->recommend);
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    assert_non_null(mem);
    dt_scale_tta_write(t, mem);
    fclose(mem);
    assert_non_null(strstr(text, "Target: training loss **0.500** (`--target-loss`)"));
    assert_non_null(strstr(text, "**No recommendation**: the simulated step has no error"));
    free(text);
    free(t);
    /* the grid predicted within 5% of the measured steps: now it recommends, within the
     * global batches that reached the target */
    for (int p = 0; p < 2; p++)
        for (int b = 0; b < 3; b++)
            s.predicted[s.n_predicted++] = (dt_scale_predicted){
                .procs = procs[p], .batch = batch[b], .step_s = 1.05 * (1.0 + b) / 100};
    if (dt_scale_tta_compute(&s, dir, 0.5, &t, &err)) fail_msg("%s", err.msg);
    assert_true(fabs(t->speed_median - 0.05) < 1e-9);
    assert_true(t->recommend);
    assert_false(t->points[t->best_in_range].extrapolated);
    s.tta = t; /* the plot: a curve per batch size, the fastest marked */
    char names[DT_MAX_PLOTS][64];
    int n = 0;
    if (dt_plots_write(&s, dir, names, &n, &err)) fail_msg("%s", err.msg);
    char *gp = slurp(dir, "plots.gp"), *plot = plot_command(gp, "time_to_target.png");
    assert_non_null(strstr(plot, "'tta_b16.dat'"));
    assert_non_null(strstr(plot, "'tta_b256.dat'"));
    free(plot);
    free(gp);
    /* asynchronous modes: no global batch sets the steps, so no model is offered */
    snprintf(s.mode, sizeof s.mode, "ps-async");
    dt_scale_tta *none = NULL;
    assert_int_equal(dt_scale_tta_compute(&s, dir, 0.5, &none, &err), -1);
    assert_null(none);
    assert_non_null(strstr(err.msg, "ps-async: workers update the model one at a time"));
    dt_scale_free(&s);
    remove_dir(dir);
}

/* 0.5 at step 800, a power of the step; with arg[0], 0.05 more over steps 800-849;
 * less arg[1] */
static double bumped_loss(int k, const double *arg) {
    const double bump = arg[0] > 0 && k >= 800 && k < 850 ? 0.05 : 0.0;
    return 0.5 * pow((k + 1) / 800.0, -0.7) + bump - arg[1];
}

/* Two configs at the same global batch whose losses follow the same power law, 0.5 at
 * step 800 of 2000, one with a bump of +0.05 over the 50 steps from 800 (one window of
 * 1/40): the crossing is read from the trend of the windows around it, so the bumped
 * one reaches the target within 3% of the clean one (its first window at or below the
 * target comes a window later: 6% of the steps). Their repeats' curves (repeat 2: the
 * same losses less 0.01) are averaged. */
static void test_time_to_target_reads_the_trend(void **state) {
    (void)state;
    char dir[] = "/tmp/dtrain_tta_XXXXXX";
    assert_non_null(mkdtemp(dir));
    dt_scale_study s = {.dataset_size = 60000};
    dt_error err;
    /* {bump, less}: the clean and the bumped config, each repeat 2 lower by 0.01 */
    static const double plain_args[2][2] = {{0, 0}, {0, 0.01}},
                        bump_args[2][2] = {{1, 0}, {1, 0.01}};
    tta_config(&s, 1, 64, 1.0, 2);
    tta_config(&s, 2, 32, 1.0, 2);
    for (int r = 0; r < 2; r++) {
        tta_log(dir, 1, 64, r, 2000, bumped_loss, plain_args[r]);
        tta_log(dir, 2, 32, r, 2000, bumped_loss, bump_args[r]);
    }
    dt_scale_tta *t;
    if (dt_scale_tta_compute(&s, dir, 0.495, &t, &err)) fail_msg("%s", err.msg);
    assert_non_null(t);
    assert_int_equal(t->n_runs, 2);
    /* runs go by batch size: 2 x 32 (bumped), then 1 x 64 */
    const double bumped = t->runs[0].observed, clean = t->runs[1].observed;
    print_message("  clean %.1f, bumped %.1f steps\n", clean, bumped);
    assert_int_equal(t->runs[0].seeds, 2);
    assert_int_equal(t->runs[1].seeds, 2);
    /* the mean curve is 0.005 below the clean one: 0.495 at step 800 */
    assert_true(fabs(clean - 800) < 0.01 * 800);
    assert_true(fabs(bumped - clean) < 0.03 * clean);
    free(t);
    dt_scale_free(&s);
    remove_dir(dir);
}

/* A launch that hung names the rsh agents that never entered their host, with where
 * they wait: a stand-in agent (a shell whose arguments are an agent's: netns-rsh, the
 * prefix, an option, host 3's address) is listed as host 3's, sleeping. */
static void test_netns_processes_names_waiting_agents(void **state) {
    (void)state;
    dt_netns n = {.hosts = 1};
    snprintf(n.prefix, sizeof n.prefix, "dtrain-%d", (int)getpid());
    const pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        execl("/bin/sh", "sh", "-c", "sleep 30; true", "netns-rsh", n.prefix, "-x", "10.213.0.3",
              "orted", (char *)NULL);
        _exit(127);
    }
    char out[2048] = "", expect[64];
    snprintf(expect, sizeof expect, "h3: agent %d, state S, waiting in ", (int)child);
    for (int tries = 0; tries < 200 && !strstr(out, expect); tries++) {
        nanosleep(&(struct timespec){0, 10000000}, NULL); /* until the child runs sh */
        dt_netns_processes(&n, out, sizeof out);
    }
    print_message("  %s\n", out);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    assert_non_null(strstr(out, "h1: (namespace gone); rsh agents not yet in their host:"));
    assert_non_null(strstr(out, expect));
}

/* A run that diverged: its curve ends at the last finite window, never a NaN point. */
static void test_loss_curve_of_diverged_run_ends_before_nan(void **state) {
    (void)state;
    char log[] = "/tmp/dtrain_diverged_XXXXXX";
    const int fd = mkstemp(log);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    assert_non_null(f);
    fprintf(f, "{\"event\": \"run\", \"model\": \"lenet5\", \"epochs\": 1}\n");
    for (int k = 0; k < 80; k++) /* windows of 2 steps; steps 50.. are NaN */
        fprintf(f, "{\"event\": \"step\", \"rank\": 0, \"epoch\": 0, \"step\": %d, \"loss\": %s}\n",
                k, k < 50 ? "1.5" : "NaN");
    fclose(f);
    double k[DT_TTA_CURVE_POINTS], l[DT_TTA_CURVE_POINTS], first;
    int n;
    long steps;
    dt_error err;
    assert_int_equal(dt_tta_loss_curve(log, k, l, &n, &first, &steps, &err), 1);
    assert_int_equal(steps, 80);
    assert_int_equal(n, 25);
    assert_true(first == 1.5 && l[n - 1] == 1.5 && k[n - 1] == 49);
    unlink(log);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known_speedups_comm_and_bandwidth),
        cmocka_unit_test(test_bad_csv_is_named),
        cmocka_unit_test(test_single_process_count_says_what_it_cannot_compute),
        cmocka_unit_test(test_loss_curves_differ_in_colour_or_dash),
        cmocka_unit_test(test_epoch_time_plot_names_training_time),
        cmocka_unit_test(test_time_to_target_known_curves),
        cmocka_unit_test(test_time_to_target_reads_the_trend),
        cmocka_unit_test(test_netns_processes_names_waiting_agents),
        cmocka_unit_test(test_loss_curve_of_diverged_run_ends_before_nan),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
