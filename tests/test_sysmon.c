/* The resource sampler takes a record about every interval with every field in a
 * sane range, its CPU figures add up to the CPU time the process really used (on a
 * busy machine a spinning process gets less than a core, so the test compares with
 * the process's own clock, not with 100%), counts the MPI bytes it is told about, and
 * its records survive a trip through the run log. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/timer.h"
#include "metrics/runlog.h"
#include "metrics/sysmon.h"

static double cpu_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void test_samples_in_sane_ranges(void **state) {
    (void)state;
    dt_sysmon m;
    dt_error err;
    const double cpu0 = cpu_seconds();
    assert_int_equal(dt_sysmon_start(&m, 3, 0.25, &err), 0);
    dt_sysmon_add_mpi_bytes(&m, 1000);
    volatile double x = 0; /* spin: this process's CPU should read near 100% */
    for (double end = dt_now() + 1.1; dt_now() < end;) x += 1.0;
    dt_sysmon_add_mpi_bytes(&m, 234);
    dt_sys_record *r;
    long n;
    assert_int_equal(dt_sysmon_take(&m, &r, &n), 0);
    const double cpu1 = cpu_seconds();
    dt_sysmon_stop(&m);
    /* 1.1 s at 0.25 s: 4, or 3 when the thread woke late (each interval starts at the
     * last sample, so a delay pushes the rest later); 2 leaves room for a loaded box */
    assert_in_range(n, 2, 4);
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    for (long i = 0; i < n; i++) {
        assert_int_equal(r[i].rank, 3);
        assert_int_equal(r[i].cores, cores);
        /* however late the thread wakes, a record covers at least an interval */
        assert_true(r[i].t - (i ? r[i - 1].t : 0) >= 0.25);
        assert_true(r[i].cpu_user >= 0 && r[i].cpu_sys >= 0);
        /* one spinning thread: at most a core (plus the clock's rounding) */
        assert_true(r[i].cpu_user + r[i].cpu_sys <= 100.0 * cores + 30);
        assert_true(r[i].machine_cpu >= 0 && r[i].machine_cpu <= 100.0 + 1e-9);
        assert_true(r[i].other_cores >= 0 && r[i].other_cores <= cores);
        assert_true(r[i].rss_bytes > (1 << 20));
        assert_true(r[i].net_rx >= 0 && r[i].net_tx >= 0);
        assert_true(r[i].mpi_sent == 1000 || r[i].mpi_sent == 1234);
    }
    /* CPU % x interval, summed, is the CPU time used up to the last sample: at most
     * what the process's clock shows until now, and at least that less the time spun
     * after the last sample (under 0.25 s + clock ticks) */
    double cpu = 0, prev_t = 0;
    for (long i = 0; i < n; i++) {
        cpu += (r[i].cpu_user + r[i].cpu_sys) / 100.0 * (r[i].t - prev_t);
        prev_t = r[i].t;
    }
    const double used = cpu1 - cpu0, tick = 2.0 / sysconf(_SC_CLK_TCK) * n;
    print_message("sampled CPU %.3f s, process clock %.3f s over %ld samples\n", cpu, used, n);
    assert_true(cpu <= used + tick + 0.02);
    assert_true(cpu >= used - (1.1 - prev_t) - tick - 0.02);
    assert_true(cpu > 0);
    /* a written record reads back with its fields */
    char path[128];
    snprintf(path, sizeof path, "/tmp/dtrain_sysmon_%ld.jsonl", (long)getpid());
    dt_runlog log;
    assert_int_equal(dt_runlog_open(&log, path, &err), 0);
    dt_runlog_sys(&log, &r[0]);
    assert_int_equal(dt_runlog_close(&log, &err), 0);
    const dt_load_record load = {
        .wall_s = 2, .machine_cores = 1.5, .run_cores = 1, .other_cores = 0.5, .cores = 2};
    assert_int_equal(dt_runlog_append_load(path, &load, &err), 0);
    dt_runlog_contents c;
    assert_int_equal(dt_runlog_load(path, &c, &err), 0);
    assert_int_equal(c.n_sys, 1);
    assert_int_equal(c.sys[0].rank, 3);
    assert_true(c.sys[0].rss_bytes == r[0].rss_bytes);
    assert_true(c.sys[0].mpi_sent == r[0].mpi_sent);
    assert_true(fabs(c.sys[0].t - r[0].t) < 1e-3 * r[0].t + 1e-3);
    assert_true(c.has_load);
    assert_true(c.load.other_cores == 0.5 && c.load.cores == 2);
    dt_runlog_contents_free(&c);
    unlink(path);
    free(r);
}

static const dt_sys_reading reading0 = {.t = 10,
                                        .proc_user = 1,
                                        .proc_sys = 0.2,
                                        .busy = 1000,
                                        .total = 2000,
                                        .have_proc = 1,
                                        .have_machine = 1};

/* The flaky record's case: a sample 1.74 ms after the previous one, the process's clock
 * a 10 ms tick further (574% by division), the machine's ticks not moved. It is no
 * record; the next sample's interval starts at the last record's end and its figures
 * are the whole interval's. */
static void test_short_interval_merged(void **state) {
    (void)state;
    dt_sys_reading soon = reading0;
    soon.t += 0.00174;
    soon.proc_user += 0.01;
    dt_sys_record r = {.cpu_user = 7};
    assert_int_equal(dt_sysmon_cpu_between(&reading0, &soon, 2, 100, &r), 1);
    assert_true(r.cpu_user == 7); /* untouched */
    dt_sys_reading later = reading0;
    later.t += 1;
    later.proc_user += 0.9;
    later.proc_sys += 0.05;
    later.busy += 180;
    later.total += 200;
    assert_int_equal(dt_sysmon_cpu_between(&reading0, &later, 2, 100, &r), 0);
    assert_true(fabs(r.cpu_user - 90) < 1e-9 && fabs(r.cpu_sys - 5) < 1e-9);
    assert_true(fabs(r.machine_cpu - 90) < 1e-9);
    assert_true(fabs(r.other_cores - (1.8 - 0.95)) < 1e-9);
}

/* A figure is unknown (-1) exactly when what it is computed from is. */
static void test_unknown_consistently(void **state) {
    (void)state;
    dt_sys_reading b = reading0;
    b.t += 1;
    b.proc_user += 0.5;
    b.busy += 100;
    b.total += 200;
    dt_sys_record r;
    dt_sys_reading no_machine = b;
    no_machine.have_machine = 0;
    assert_int_equal(dt_sysmon_cpu_between(&reading0, &no_machine, 2, 100, &r), 0);
    assert_true(fabs(r.cpu_user - 50) < 1e-9 && r.cpu_sys == 0);
    assert_true(r.machine_cpu == -1 && r.other_cores == -1);
    dt_sys_reading no_proc = reading0;
    no_proc.have_proc = 0;
    assert_int_equal(dt_sysmon_cpu_between(&no_proc, &b, 2, 100, &r), 0);
    assert_true(r.cpu_user == -1 && r.cpu_sys == -1 && r.other_cores == -1);
    assert_true(fabs(r.machine_cpu - 50) < 1e-9);
    dt_sys_reading frozen = b; /* a second with no tick counted: not 0% nor 100% */
    frozen.busy = reading0.busy;
    frozen.total = reading0.total;
    assert_int_equal(dt_sysmon_cpu_between(&reading0, &frozen, 2, 100, &r), 0);
    assert_true(fabs(r.cpu_user - 50) < 1e-9);
    assert_true(r.machine_cpu == -1 && r.other_cores == -1);
    /* iowait stepping back (proc(5)) leaves busy ahead of total: at most every core */
    dt_sys_reading ahead = b;
    ahead.busy = reading0.busy + 210;
    assert_int_equal(dt_sysmon_cpu_between(&reading0, &ahead, 2, 100, &r), 0);
    assert_true(r.machine_cpu == 100 && r.other_cores >= 0 && r.other_cores <= 2);
}

static void test_stop_without_samples(void **state) {
    (void)state;
    dt_sysmon m;
    dt_error err;
    assert_int_equal(dt_sysmon_start(&m, 0, 10.0, &err), 0);
    const double t0 = dt_now();
    dt_sysmon_stop(&m); /* wakes the thread at once, not after 10 s */
    assert_true(dt_now() - t0 < 1.0);
    dt_sysmon_stop(&m); /* twice is harmless */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_samples_in_sane_ranges),
        cmocka_unit_test(test_short_interval_merged),
        cmocka_unit_test(test_unknown_consistently),
        cmocka_unit_test(test_stop_without_samples),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
