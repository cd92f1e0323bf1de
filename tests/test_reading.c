/* The report's reading on hand-made per-config numbers: each config's sentence names
 * the largest loss term with its seconds and share of T(N) - T(1)/N, states a cause
 * only where the numbers support it, and a config measured on a busy machine gets
 * only "re-run". */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "study/reading.h"

/* One config's measured figures (seconds per epoch; -1 = not measured). */
typedef struct fig {
    int procs, batch, threads;
    double t_train, t_compute, t_comm_exposed, t_data, other_cores, cpu_pct;
} fig;

/* throttled (may be NULL): each config's emulated hosts' share of periods out of quota */
static void study_with(dt_scale_study *s, const fig *f, int n, int cores, const double *throttled) {
    memset(s, 0, sizeof *s);
    s->cores = cores;
    dt_error err;
    for (int i = 0; i < n; i++) {
        dt_scale_row r = dt_scale_row_unknown();
        r.procs = f[i].procs;
        r.batch = f[i].batch;
        r.threads = f[i].threads;
        r.t_train = r.t_epoch = f[i].t_train;
        r.t_compute = f[i].t_compute;
        r.t_comm_exposed = r.t_comm = f[i].t_comm_exposed;
        r.t_data = f[i].t_data;
        r.other_cores = f[i].other_cores;
        r.cpu_pct = f[i].cpu_pct;
        if (throttled) r.throttled = throttled[i];
        if (dt_scale_add_row(s, &r, &err)) fail_msg("%s", err.msg);
    }
    if (dt_scale_combine(s, &err)) fail_msg("%s", err.msg); /* marks the busy rows */
}

static void study_of(dt_scale_study *s, const fig *f, int n, int cores) {
    study_with(s, f, n, cores, NULL);
}

static char *reading_text(const dt_scale_study *s) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    dt_reading_write(s, f);
    fclose(f);
    fputs(buf, stdout);
    char *text = strdup(buf); /* (gcc 12 takes buf's text for the local buf itself) */
    free(buf);
    assert_non_null(text);
    return text;
}

/* Copies the text's line about (batch, procs) into line[size]; fails the test if there
 * is none. */
static void config_line(const char *text, int batch, int procs, char *line, size_t size) {
    char head[64];
    snprintf(head, sizeof head, "- Batch %d per process, %d processes:", batch, procs);
    const char *at = strstr(text, head);
    if (!at) fail_msg("no line for batch %d, %d processes", batch, procs);
    const size_t n = strcspn(at, "\n");
    assert_true(n < size);
    memcpy(line, at, n);
    line[n] = '\0';
}

/* The case: 2 processes lose mostly in compute (3.5 s per process against
 * T(1)/2 = 2.5 s) while exposed communication is 0.4 s, each on its own core. */
static void test_compute_loss_is_named_with_contention(void **state) {
    (void)state;
    const fig f[] = {{1, 64, 1, 5.0, 4.9, 0, 0.01, 0.05, 99},
                     {2, 64, 1, 4.2, 3.5, 0.4, 0.02, 0.05, 99}};
    dt_scale_study s;
    study_of(&s, f, 2, 4);
    dt_reading_split x;
    assert_int_equal(dt_reading_split_of(&s, dt_scale_find(&s, 2, 64, 0), &x), 0);
    assert_int_equal(x.measured, 1);
    assert_float_equal(x.ideal, 2.5, 1e-12);
    assert_float_equal(x.lost, 1.7, 1e-12);
    assert_float_equal(x.term[DT_LOSS_COMPUTE], 1.0, 1e-12);
    assert_float_equal(x.term[DT_LOSS_COMM], 0.4, 1e-12);
    assert_float_equal(x.term[DT_LOSS_OTHER], 0.3, 1e-12);
    assert_int_equal(x.largest, DT_LOSS_COMPUTE);
    char *text = reading_text(&s), line[2048];
    config_line(text, 64, 2, line, sizeof line);
    assert_non_null(strstr(line, "2 processes: speed-up 1.19 (efficiency 60%). T(2)"));
    assert_non_null(strstr(line, "T(2) = 4.20 s against T(1)/2 = 2.50 s: 1.70 s lost"));
    assert_non_null(strstr(line,
                           "; the largest is compute, 1.00 s (59% of the loss; 3.50 s per "
                           "process against 2.50), then exposed communication, 0.400 s (24%), "
                           "then other, 0.300 s (18%; step overheads, the slowest rank's "
                           "lag)."));
    assert_non_null(strstr(line, "Loader waits 0.020 s per process"));
    assert_non_null(strstr(line, "Compute per process slowed from 2.50 to 3.50 s (x1.40) while "
                                 "exposed communication was 0.400 s, consistent with "
                                 "memory-bandwidth contention between processes; cores/bandwidth "
                                 "measured: 2 processes x 1 thread on 4 cores (none shared), CPU "
                                 "per rank 99% of a core, memory bandwidth not measured."));
    assert_null(strstr(text, "fewer all-reduces")); /* the canned cause is gone */
    free(text);
    dt_scale_free(&s);
}

/* The reading's line of (batch, procs) in the study of figures f over `cores` cores. */
static void reading_line(const fig *f, int n, int cores, int batch, int procs, char *line,
                         size_t size) {
    dt_scale_study s;
    study_of(&s, f, n, cores);
    char *text = reading_text(&s);
    config_line(text, batch, procs, line, size);
    free(text);
    dt_scale_free(&s);
}

/* Communication dominates: named with its share; no compute cause is stated. */
static void test_comm_loss_is_named_without_a_compute_cause(void **state) {
    (void)state;
    const fig f[] = {{1, 64, 1, 5.0, 4.9, 0, 0.01, 0.05, 99},
                     {2, 64, 1, 4.0, 2.6, 1.2, 0.02, 0.05, 99}};
    char line[2048];
    reading_line(f, 2, 4, 64, 2, line, sizeof line);
    assert_non_null(
        strstr(line, "the largest is exposed communication, 1.20 s (80% of the loss), then"));
    assert_null(strstr(line, "memory-bandwidth"));
    assert_null(strstr(line, "Compute per process slowed"));
}

/* More threads than cores: the compute slowdown is put down to shared cores, never
 * to memory bandwidth. */
static void test_oversubscribed_compute_says_shared_cores(void **state) {
    (void)state;
    const fig f[] = {{1, 64, 2, 5.0, 4.9, 0, 0.01, 0.05, 190},
                     {2, 64, 2, 4.2, 3.5, 0.4, 0.02, 0.05, 95}};
    char line[2048];
    reading_line(f, 2, 2, 64, 2, line, sizeof line);
    assert_non_null(strstr(line, "the largest is compute, 1.00 s (59% of the loss;"));
    assert_non_null(
        strstr(line, "2 processes x 2 threads exceed the 2 cores, so they shared cores"));
    assert_null(strstr(line, "memory-bandwidth"));
}

/* One thread per process on every core: no core spare for the loader threads and MPI,
 * so no memory-bandwidth claim either. */
static void test_all_cores_taken_rules_out_nothing(void **state) {
    (void)state;
    const fig f[] = {{1, 64, 1, 5.0, 4.9, 0, 0.01, 0.05, 99},
                     {2, 64, 1, 4.2, 3.5, 0.4, 0.02, 0.05, 99}};
    char line[2048];
    reading_line(f, 2, 2, 64, 2, line, sizeof line);
    assert_non_null(strstr(line, "Compute per process slowed from 2.50 to 3.50 s (x1.40): 2 "
                                 "processes x 1 thread take all 2 cores, none spare for the loader "
                                 "threads and MPI, so shared cores are not ruled out."));
    assert_null(strstr(line, "memory-bandwidth"));
}

/* A busy config gets "re-run" with the cores others used and nothing else; when its
 * 1-process run was the busy one, the line says so. The other batch is still read. */
static void test_busy_configs_get_only_rerun(void **state) {
    (void)state;
    const fig f[] = {
        {1, 64, 1, 5.0, 4.9, 0, 0.01, 0.05, 99},   {2, 64, 1, 4.2, 3.5, 0.4, 0.02, 0.80, 99},
        {1, 256, 1, 4.0, 3.9, 0, 0.01, 0.60, 99},  {2, 256, 1, 2.5, 2.1, 0.3, 0.02, 0.05, 99},
        {1, 1024, 1, 4.0, 3.9, 0, 0.01, 0.05, 99}, {2, 1024, 1, 2.2, 2.02, 0.03, 0.02, 0.05, 99}};
    dt_scale_study s;
    study_of(&s, f, 6, 4);
    char *text = reading_text(&s), line[2048];
    config_line(text, 64, 2, line, sizeof line);
    assert_string_equal(line, "- Batch 64 per process, 2 processes: re-run (machine busy: other "
                              "processes used 0.80 cores).");
    config_line(text, 256, 2, line, sizeof line);
    assert_string_equal(line, "- Batch 256 per process, 2 processes: re-run (machine busy: other "
                              "processes used 0.60 cores during the 1-process run).");
    config_line(text, 1024, 2, line, sizeof line);
    assert_non_null(strstr(line, "the largest is other, 0.150 s (75% of the loss;"));
    /* the batch comparison needs both ends trusted: batch 64 is busy */
    assert_null(strstr(text, "the speed-up goes from"));
    free(text);
    dt_scale_free(&s);
}

/* Emulated hosts out of their CPU quota beyond DT_SCALE_THROTTLED_MAX of the periods:
 * the config is unfaithful, flagged busy (re-measured, left out of fits) and read as
 * "re-run" with the share; at the bound it is not. */
static void test_throttled_hosts_make_a_config_unfaithful(void **state) {
    (void)state;
    const fig f[] = {{1, 64, 1, 5.0, 4.9, 0, 0.01, 0.05, 99},
                     {2, 64, 1, 4.2, 3.5, 0.4, 0.02, 0.05, 99},
                     {1, 256, 1, 4.0, 3.9, 0, 0.01, 0.05, 99},
                     {2, 256, 1, 2.5, 2.1, 0.3, 0.02, 0.05, 99}};
    const double throttled[] = {-1, 0.56, -1, DT_SCALE_THROTTLED_MAX};
    dt_scale_study s;
    study_with(&s, f, 4, 4, throttled);
    const dt_scale_row *bad = dt_scale_find(&s, 2, 64, 0), *edge = dt_scale_find(&s, 2, 256, 0);
    assert_true(bad->unfaithful && bad->busy);
    assert_true(!edge->unfaithful && !edge->busy);
    char *text = reading_text(&s), line[2048];
    config_line(text, 64, 2, line, sizeof line);
    assert_string_equal(line, "- Batch 64 per process, 2 processes: re-run (unfaithful: an "
                              "emulated host ran out of its CPU quota in 56% of periods).");
    free(text);
    dt_scale_free(&s);
}

/* Every config busy: the reading says just that, and "re-run" per config. */
static void test_all_busy_says_nothing_causal(void **state) {
    (void)state;
    const fig f[] = {{1, 64, 1, 5.0, 4.9, 0, 0.01, 0.70, 99},
                     {2, 64, 1, 4.2, 3.5, 0.4, 0.02, 0.05, 99},
                     {1, 256, 1, 4.0, 3.9, 0, 0.01, 0.05, 99},
                     {2, 256, 1, 3.0, 2.8, 0.1, 0.02, 1.50, 99}};
    dt_scale_study s;
    study_of(&s, f, 4, 4);
    char *text = reading_text(&s);
    assert_non_null(strstr(text, "Nothing to read: no multi-process config is to be trusted"));
    assert_non_null(strstr(text, "re-run (machine busy: other processes used 0.70 cores during "
                                 "the 1-process run)"));
    assert_non_null(strstr(text, "re-run (machine busy: other processes used 1.50 cores)"));
    const char *causal[] = {"largest", "lost",   "speed-up 1",  "consistent",
                            "slowed",  "scales", "stops paying"};
    for (size_t i = 0; i < sizeof causal / sizeof *causal; i++)
        if (strstr(text, causal[i])) fail_msg("an all-busy reading says '%s'", causal[i]);
    free(text);
    dt_scale_free(&s);
}

/* Two trusted batch sizes: the batch comparison gives the split at both ends. */
static void test_batch_effect_cites_the_split(void **state) {
    (void)state;
    const fig f[] = {{1, 64, 1, 5.0, 4.9, 0, 0.01, 0.05, 99},
                     {2, 64, 1, 4.0, 2.6, 1.2, 0.02, 0.05, 99},
                     {1, 256, 1, 4.0, 3.9, 0, 0.01, 0.05, 99},
                     {2, 256, 1, 2.5, 2.1, 0.3, 0.02, 0.05, 99}};
    dt_scale_study s;
    study_of(&s, f, 4, 4);
    char *text = reading_text(&s);
    assert_non_null(strstr(text, "With 2 processes, the speed-up goes from 1.25 at batch 64 to "
                                 "1.60 at batch 256; the time lost against T(1)/N goes from 1.50 s "
                                 "(largest: exposed communication, 1.20 s) to 0.500 s (largest: "
                                 "exposed communication, 0.300 s), exposed communication from 1.20 "
                                 "to 0.300 s"));
    free(text);
    dt_scale_free(&s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_compute_loss_is_named_with_contention),
        cmocka_unit_test(test_comm_loss_is_named_without_a_compute_cause),
        cmocka_unit_test(test_oversubscribed_compute_says_shared_cores),
        cmocka_unit_test(test_all_cores_taken_rules_out_nothing),
        cmocka_unit_test(test_busy_configs_get_only_rerun),
        cmocka_unit_test(test_throttled_hosts_make_a_config_unfaithful),
        cmocka_unit_test(test_all_busy_says_nothing_causal),
        cmocka_unit_test(test_batch_effect_cites_the_split),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
