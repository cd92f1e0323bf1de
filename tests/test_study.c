/* The scaling report's maths on hand-made data with known answers, and its bad-input
 * cases. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "dtrain/scaling.h"

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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known_speedups_comm_and_bandwidth),
        cmocka_unit_test(test_bad_csv_is_named),
        cmocka_unit_test(test_single_process_count_says_what_it_cannot_compute),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
