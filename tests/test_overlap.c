/* The --overlap auto rule (overlap.h): on when every rank's communication thread gets
 * a core of its own or the ranks span hosts, off otherwise; and the mode names. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "parallel/overlap.h"

static void test_spare_cores_turn_overlap_on(void **state) {
    (void)state;
    char why[160];
    /* 2 ranks x (1 thread + 1) = 4 cores */
    assert_int_equal(dt_overlap_auto(4, 4, 2, 1, 0, why, sizeof why), 1);
    assert_non_null(strstr(why, "on: 2 ranks x (1 threads + 1 communication) <= 4 cores"));
    assert_int_equal(dt_overlap_auto(16, 16, 4, 3, 0, why, sizeof why), 1);
}

static void test_no_spare_core_on_one_host_turns_it_off(void **state) {
    (void)state;
    char why[160];
    /* the measured case: 2 ranks x 1 thread on 2 cores */
    assert_int_equal(dt_overlap_auto(2, 2, 2, 1, 0, why, sizeof why), 0);
    assert_non_null(strstr(why, "off: 2 ranks x (1 threads + 1 communication) > 2 cores"));
    assert_int_equal(dt_overlap_auto(4, 4, 2, 2, 0, why, sizeof why), 0);
    assert_int_equal(dt_overlap_auto(1, 1, 1, 1, 0, why, sizeof why), 0);
    /* mpirun's default binding: each rank on one core of many */
    assert_int_equal(dt_overlap_auto(64, 1, 2, 1, 0, why, sizeof why), 0);
    assert_non_null(strstr(why, "off: 1 threads + 1 communication > the 1 cores this rank"));
}

static void test_ranks_on_several_hosts_overlap(void **state) {
    (void)state;
    char why[160];
    assert_int_equal(dt_overlap_auto(2, 1, 2, 1, 1, why, sizeof why), 1);
    assert_non_null(strstr(why, "span hosts"));
}

static void test_cores_are_counted(void **state) {
    (void)state;
    assert_true(dt_overlap_host_cores() >= 1);
    assert_true(dt_overlap_own_cores() >= 1);
    assert_true(dt_overlap_own_cores() <= dt_overlap_host_cores());
}

static void test_mode_names_round_trip(void **state) {
    (void)state;
    const char *names[] = {"auto", "on", "off"};
    for (int i = 0; i < 3; i++) {
        dt_overlap_mode m;
        assert_int_equal(dt_overlap_mode_parse(names[i], &m), 0);
        assert_string_equal(dt_overlap_mode_name(m), names[i]);
    }
    dt_overlap_mode m = DT_OVERLAP_ON;
    assert_int_equal(dt_overlap_mode_parse("yes", &m), -1);
    assert_int_equal(m, DT_OVERLAP_ON);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spare_cores_turn_overlap_on),
        cmocka_unit_test(test_no_spare_core_on_one_host_turns_it_off),
        cmocka_unit_test(test_ranks_on_several_hosts_overlap),
        cmocka_unit_test(test_cores_are_counted),
        cmocka_unit_test(test_mode_names_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
