/* The run-log reader reads any valid JSON the same (whitespace, key order, extra
 * fields, unknown events, number spellings), names the file and line of a bad line,
 * skips a last line cut short by a killed run, and reads back what the writer wrote. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "metrics/runlog.h"
#include "metrics/straggler.h"

static char path[128];

static const char *write_log(const char *text) {
    snprintf(path, sizeof path, "/tmp/dtrain_runlog_%ld.jsonl", (long)getpid());
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_true(fputs(text, f) >= 0);
    assert_int_equal(fclose(f), 0);
    return path;
}

static void test_compact_and_spaced_reordered_read_the_same(void **state) {
    (void)state;
    const char *compact =
        "{\"event\":\"run\",\"model\":\"lenet5\",\"procs\":2,\"steps_per_epoch\":4,\"epochs\":2}\n"
        "{\"event\":\"step\",\"rank\":0,\"epoch\":0,\"step\":3,\"loss\":2.25,\"lr\":0.001}\n"
        "{\"event\":\"epoch\",\"epoch\":0,\"t_epoch\":1.5,\"bytes_sent\":1000}\n";
    const char *spaced = /* json.dumps(sort_keys=True): spaces, keys sorted, 5.0, 1e-3 */
        "{\"epochs\": 2.0, \"event\": \"run\", \"model\": \"lenet5\", \"procs\": 2, "
        "\"steps_per_epoch\": 4}\n"
        "\n"
        "{\"epoch\": 0, \"event\": \"step\", \"extra\": [1, {\"a\": null}], \"loss\": 2.25, "
        "\"lr\": 1e-3, \"rank\": 0, \"step\": 3.0}\n"
        "{\"event\": \"gpu\", \"util\": 99}\n"
        "  {\"bytes_sent\": 1e3, \"epoch\": 0, \"event\": \"epoch\", \"t_epoch\": 15e-1}  \n";
    dt_runlog_contents a, b;
    dt_error err;
    assert_int_equal(dt_runlog_load(write_log(compact), &a, &err), 0);
    assert_int_equal(dt_runlog_load(write_log(spaced), &b, &err), 0);
    assert_true(a.has_run && b.has_run);
    assert_string_equal(b.run.model, "lenet5");
    assert_int_equal(b.run.epochs, 2);
    assert_int_equal(b.run.steps_per_epoch, 4);
    assert_int_equal(b.run.servers, -1); /* absent */
    assert_true(isnan(b.run.lr));
    assert_int_equal(a.n_steps, 1);
    assert_int_equal(b.n_steps, 1);
    assert_int_equal(b.steps[0].step, 3);
    assert_true(a.steps[0].loss == b.steps[0].loss && a.steps[0].lr == b.steps[0].lr);
    assert_int_equal(b.n_epochs, 1);
    assert_true(a.epochs[0].t_epoch == b.epochs[0].t_epoch);
    assert_int_equal(b.epochs[0].bytes_sent, 1000);
    assert_int_equal(b.unknown_events, 1);
    assert_int_equal(b.truncated_lines, 0);
    dt_runlog_contents_free(&a);
    dt_runlog_contents_free(&b);
    unlink(path);
}

static void expect_error(const char *text, const char *fragment) {
    dt_runlog_contents c;
    dt_error err;
    assert_int_equal(dt_runlog_load(write_log(text), &c, &err), -1);
    if (!strstr(err.msg, fragment)) fail_msg("'%s' does not say '%s'", err.msg, fragment);
    assert_non_null(strstr(err.msg, path));
    assert_null(c.steps);
    unlink(path);
}

static void test_bad_line_names_file_and_line(void **state) {
    (void)state;
    char where[160];
    write_log("");
    snprintf(where, sizeof where, "%s:3: not valid JSON", path);
    expect_error("{\"event\":\"run\"}\n"
                 "{\"event\":\"step\",\"rank\":0,\"step\":0,\"loss\":2.3}\n"
                 "{\"event\":\"step\",\"rank\":0,\"step\":1,\"loss\":2.2\n" /* no brace */
                 "{\"event\":\"step\",\"rank\":0,\"step\":2,\"loss\":2.1}\n",
                 where);
    snprintf(where, sizeof where, "%s:2: \"step\" is not an integer", path);
    expect_error("{\"event\":\"run\"}\n{\"event\":\"step\",\"rank\":0,\"step\":1.5,\"loss\":2}\n",
                 where);
    expect_error("{\"event\":\"step\",\"rank\":0,\"step\":1,\"loss\":\"low\"}\n",
                 "\"loss\" is not a number");
    expect_error("{\"event\":\"step\",\"rank\":0,\"step\":1}\n", "without \"loss\"");
    expect_error("{\"rank\":0}\n", "no \"event\"");
    expect_error("[1,2]\n", "not a JSON object");
    expect_error("{\"event\":\"run\"} trailing\n", "not valid JSON");
}

static void test_truncated_last_line_is_skipped_and_counted(void **state) {
    (void)state;
    dt_runlog_contents c;
    dt_error err;
    assert_int_equal(dt_runlog_load(write_log("{\"event\":\"run\",\"epochs\":2}\n"
                                              "{\"event\":\"epoch\",\"epoch\":0}\n"
                                              "{\"event\":\"epoch\",\"epo"),
                                    &c, &err),
                     0);
    assert_int_equal(c.n_epochs, 1);
    assert_int_equal(c.truncated_lines, 1);
    dt_runlog_contents_free(&c);
    /* a complete last line without its newline is not cut short */
    assert_int_equal(dt_runlog_load(write_log("{\"event\":\"epoch\",\"epoch\":0}"), &c, &err), 0);
    assert_int_equal(c.n_epochs, 1);
    assert_int_equal(c.truncated_lines, 0);
    dt_runlog_contents_free(&c);
    unlink(path);
}

static void test_non_finite_numbers_read_as_nan(void **state) {
    (void)state;
    dt_runlog_contents c;
    dt_error err;
    assert_int_equal(dt_runlog_load(write_log("{\"event\":\"step\",\"rank\":0,\"step\":0,"
                                              "\"loss\":nan,\"lr\":-inf,\"t_data\":null}\n"
                                              "{\"event\": \"step\", \"rank\": 0, \"step\": 1, "
                                              "\"loss\": NaN, \"lr\": Infinity, \"t_pull\": "
                                              "-Infinity, \"note\": \"nan inf\"}\n"),
                                    &c, &err),
                     0);
    assert_int_equal(c.n_steps, 2);
    assert_true(isnan(c.steps[0].loss) && isnan(c.steps[0].lr) && isnan(c.steps[0].t_data));
    assert_true(isnan(c.steps[1].loss) && isnan(c.steps[1].lr) && isnan(c.steps[1].t_pull));
    dt_runlog_contents_free(&c);
    unlink(path);
}

static void test_writer_output_reads_back(void **state) {
    (void)state;
    write_log("");
    dt_runlog log;
    dt_error err;
    assert_int_equal(dt_runlog_open(&log, path, &err), 0);
    dt_run_record run = {.params = 61706,
                         .procs = 3,
                         .epochs = 2,
                         .lr = 0.05,
                         .overlap = 1,
                         .seed = 42,
                         .workers = 2,
                         .servers = 1};
    snprintf(run.model, sizeof run.model, "lenet5");
    snprintf(run.data, sizeof run.data, "fashion-mnist:/a \"quoted\"\\dir\n");
    dt_runlog_run(&log, &run);
    dt_step_record step = {.rank = 0, .step = 7, .loss = NAN, .bytes_sent = 1LL << 40};
    dt_runlog_step(&log, &step);
    dt_ps_server_record server = {.server = 1, .busy_s = 0.25, .staleness_hist = {3, 2, 1}};
    dt_runlog_ps_server(&log, &server);
    dt_ps_epoch_record pe = {.server = 1, .epoch = 0, .dropped = 4, .staleness_hist = {5}};
    dt_runlog_ps_epoch(&log, &pe);
    assert_int_equal(dt_runlog_close(&log, &err), 0);

    dt_runlog_contents c;
    assert_int_equal(dt_runlog_load(path, &c, &err), 0);
    assert_string_equal(c.run.data, run.data);
    assert_int_equal(c.run.params, 61706);
    assert_int_equal(c.run.overlap, 1);
    assert_int_equal(c.run.seed, 42);
    assert_true(c.run.lr == 0.05);
    assert_int_equal(c.n_steps, 1);
    assert_true(isnan(c.steps[0].loss)); /* written as null */
    assert_int_equal(c.steps[0].bytes_sent, 1LL << 40);
    assert_int_equal(c.n_ps_servers, 1);
    assert_int_equal(c.ps_servers[0].staleness_hist[1], 2);
    assert_true(c.ps_servers[0].busy_s == 0.25);
    assert_int_equal(c.n_ps_epochs, 1);
    assert_int_equal(c.ps_epochs[0].dropped, 4);
    assert_int_equal(c.ps_epochs[0].staleness_hist[0], 5);
    dt_runlog_contents_free(&c);
    unlink(path);
}

static void test_parse_line_alone(void **state) {
    (void)state;
    dt_runlog_entry e;
    dt_error err;
    assert_int_equal(
        dt_runlog_parse_line("{ \"steps_per_epoch\" : 25, \"event\" : \"run\" }\n", &e, &err), 0);
    assert_int_equal(e.event, DT_EVENT_RUN);
    assert_int_equal(e.run.steps_per_epoch, 25);
    assert_int_equal(dt_runlog_parse_line("{\"event\":\"gpu\",\"util\":0.9}", &e, &err), 0);
    assert_int_equal(e.event, DT_EVENT_OTHER);
    assert_int_equal(dt_runlog_parse_line("{\"event\":\"run\",\"epochs\":1e400}", &e, &err), -1);
}

/* The straggler (metrics/straggler.h): the slowest rank, against the others' median,
 * named only past the share; the trainer's epoch records carry what this returns. */
static void test_straggler_named_past_the_share(void **state) {
    (void)state;
    dt_straggler s;
    /* rank 2 takes 6 ms of its own a step, the others 4, 4.2 and 3.8: median 4 */
    const double own[4] = {0.004, 0.0042, 0.006, 0.0038};
    assert_int_equal(dt_straggler_find(own, 4, 0.0025, DT_STRAGGLER_SHARE, &s), 1);
    assert_int_equal(s.rank, 2);
    assert_true(fabs(s.wait_s - 0.002) < 1e-12);
    assert_true(fabs(s.slower - 0.5) < 1e-12);
    assert_true(fabs(s.share - 0.8) < 1e-12);
    /* the same 2 ms in a 40 ms step is 5%: nobody named, the figures still given */
    assert_int_equal(dt_straggler_find(own, 4, 0.040, DT_STRAGGLER_SHARE, &s), 0);
    assert_int_equal(s.rank, -1);
    assert_true(fabs(s.share - 0.05) < 1e-12);
    /* equal ranks, one rank, no step: nobody */
    const double even[2] = {0.004, 0.004};
    assert_int_equal(dt_straggler_find(even, 2, 0.005, DT_STRAGGLER_SHARE, &s), 0);
    assert_int_equal(dt_straggler_find(own, 1, 0.005, DT_STRAGGLER_SHARE, &s), 0);
    assert_int_equal(dt_straggler_find(own, 4, 0.0, DT_STRAGGLER_SHARE, &s), 0);
    /* two ranks: the other's time is the median */
    const double two[2] = {0.009, 0.004};
    assert_int_equal(dt_straggler_find(two, 2, 0.008, DT_STRAGGLER_SHARE, &s), 1);
    assert_int_equal(s.rank, 0);
    assert_true(fabs(s.wait_s - 0.005) < 1e-12);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_compact_and_spaced_reordered_read_the_same),
        cmocka_unit_test(test_bad_line_names_file_and_line),
        cmocka_unit_test(test_truncated_last_line_is_skipped_and_counted),
        cmocka_unit_test(test_non_finite_numbers_read_as_nan),
        cmocka_unit_test(test_writer_output_reads_back),
        cmocka_unit_test(test_parse_line_alone),
        cmocka_unit_test(test_straggler_named_past_the_share),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
