/* The simulator's event schedule on hand-computable cases: exact step times for one
 * bucket, what overlap hides with two, the topologies' costs, the parsers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>
#include <math.h>
#include <stdio.h>

#include "parallel/ddp.h"
#include "perfmodel/simulate.h"

/* cmocka here has no double comparison: |a - b| <= tol, printing both on failure. */
#define assert_double_equal(a, b, tol) assert_near((a), (b), (tol), #a, __LINE__)
static void assert_near(double a, double b, double tol, const char *what, int line) {
    if (!(fabs(a - b) <= tol)) {
        print_error("line %d: %s = %.15g, expected %.15g (+- %g)\n", line, what, a, b, tol);
        fail();
    }
}

enum { HALF = 1048576 }; /* floats: 4 MiB, one bucket at --bucket-mb 4 */

/* Two ops of HALF parameters each (op 0 first in forward, so last in backward):
 * forward 1 + 3 ms, backward 2 + 4 ms, other 0.25 ms, update 0.5 ms, batch 10. */
static dt_profile two_ops(dt_profile_op ops[2]) {
    memset(ops, 0, 2 * sizeof *ops);
    ops[0] = (dt_profile_op){.name = "a",
                             .kind = "linear",
                             .forward_s = 1e-3,
                             .backward_s = 2e-3,
                             .param_offset = 0,
                             .param_count = HALF};
    ops[1] = (dt_profile_op){.name = "b",
                             .kind = "linear",
                             .forward_s = 3e-3,
                             .backward_s = 4e-3,
                             .param_offset = HALF,
                             .param_count = HALF};
    return (dt_profile){.model = "two",
                        .batch = 10,
                        .threads = 1,
                        .steps = 1,
                        .params = 2 * HALF,
                        .step_s = 10.75e-3,
                        .sgd_s = 0.5e-3,
                        .other_s = 0.25e-3,
                        .ops = ops,
                        .n_ops = 2};
}

static dt_sim_config config(double bucket_mb, double beta, double alpha) {
    dt_sim_config c = dt_sim_config_default();
    c.batch = 10;
    c.bucket_mb = bucket_mb;
    c.link = (dt_sim_link){alpha, beta, 0};
    c.intra = c.link;
    return c;
}

static void test_one_bucket_step_is_compute_plus_ring(void **state) {
    (void)state;
    dt_profile_op ops[2];
    const dt_profile p = two_ops(ops);
    dt_sim_config c = config(100, 1e9, 10e-6); /* one bucket of 8 MiB */
    dt_sim_result r;
    dt_error err;
    assert_int_equal(dt_simulate(&p, &c, 4, &r, &err), 0);
    assert_int_equal(r.buckets, 1);
    /* ring on 4: 2*3*alpha + 2*3/4 * 8 MiB / beta */
    const double ring = 6 * 10e-6 + 1.5 * 8.0 * HALF / 1e9;
    assert_double_equal(r.comm_s, ring, 1e-12);
    assert_double_equal(r.compute_s, 4.25e-3 + 6e-3 + 0.5e-3, 1e-12);
    assert_double_equal(r.step_s, r.compute_s + ring, 1e-12);
    assert_double_equal(r.exposed_s, ring, 1e-12);
    /* one bucket is only ready when backward ends: overlap changes nothing */
    dt_sim_result flat;
    c.mode = DT_SIM_ALLREDUCE_NO_OVERLAP;
    assert_int_equal(dt_simulate(&p, &c, 4, &flat, &err), 0);
    assert_double_equal(flat.step_s, r.step_s, 1e-12);
    /* twice the batch on a device twice as fast: the same compute */
    c.batch = 20;
    c.compute_speedup = 2;
    assert_int_equal(dt_simulate(&p, &c, 4, &flat, &err), 0);
    assert_double_equal(flat.compute_s, 4.25e-3 + 6e-3 + 0.25e-3, 1e-12); /* update / 2 */
}

static void test_overlap_hides_the_backward_after_the_first_bucket(void **state) {
    (void)state;
    dt_profile_op ops[2];
    const dt_profile p = two_ops(ops);
    dt_sim_config c = config(4, 1e9, 0);
    dt_sim_result on, off;
    dt_error err;
    assert_int_equal(dt_simulate(&p, &c, 2, &on, &err), 0);
    c.mode = DT_SIM_ALLREDUCE_NO_OVERLAP;
    assert_int_equal(dt_simulate(&p, &c, 2, &off, &err), 0);
    assert_int_equal(on.buckets, 2);
    assert_int_equal(on.buckets, dt_ddp_bucket_total(p.params, dt_ddp_bucket_floats(4)));
    const double bucket = 4.0 * HALF / 1e9; /* ring on 2: 2(P-1)/P n / beta = n / beta */
    /* bucket 0 (op b's gradient) starts when b's backward ends, at F + 4 ms, and runs
     * while a's backward (2 ms) does, bucket 1 follows it: step = F + 4 ms + 2 buckets */
    const double forward = 4.25e-3;
    assert_double_equal(on.step_s, forward + 4e-3 + 2 * bucket + 0.5e-3, 1e-12);
    assert_double_equal(off.step_s, forward + 6e-3 + 2 * bucket + 0.5e-3, 1e-12);
    assert_double_equal(off.step_s - on.step_s, 2e-3, 1e-12); /* a's backward, hidden */
    assert_double_equal(on.comm_s, off.comm_s, 1e-12);
    /* a link so fast that bucket 0 ends before a's backward: only bucket 1 shows */
    c = config(4, 1e12, 0);
    assert_int_equal(dt_simulate(&p, &c, 2, &on, &err), 0);
    assert_double_equal(on.exposed_s, 4.0 * HALF / 1e12, 1e-15);
}

static void test_one_worker_has_no_communication(void **state) {
    (void)state;
    dt_profile_op ops[2];
    const dt_profile p = two_ops(ops);
    const dt_sim_config c = config(4, 1e6, 1.0);
    dt_sim_result r;
    dt_error err;
    assert_int_equal(dt_simulate(&p, &c, 1, &r, &err), 0);
    assert_double_equal(r.comm_s, 0, 0);
    assert_double_equal(r.step_s, r.compute_s, 0);
    assert_double_equal(r.images_per_s, 10 / r.step_s, 1e-9);
}

static void test_topology_costs(void **state) {
    (void)state;
    dt_sim_config c = config(25, 1e9, 1e-5);
    const double n = 1e8;
    const double ring8 = 14 * 1e-5 + 14.0 / 8 * n / 1e9;
    assert_double_equal(dt_sim_allreduce_s(&c, 8, n), ring8, 1e-12);
    assert_double_equal(dt_sim_allreduce_s(&c, 1, n), 0, 0);
    dt_error err;
    assert_int_equal(dt_sim_parse_topology("tree:1", &c, &err), 0);
    assert_double_equal(dt_sim_allreduce_s(&c, 8, n), ring8, 1e-12); /* a node each */
    /* 8 workers, 4 per node: half a ring inside twice, a ring of 2 nodes between */
    assert_int_equal(dt_sim_parse_topology("tree:4", &c, &err), 0);
    c.intra = (dt_sim_link){1e-6, 1e10, 0};
    const double half = 3 * 1e-6 + 0.75 * n / 1e10;
    assert_double_equal(dt_sim_allreduce_s(&c, 8, n), 2 * half + 2 * 1e-5 + n / 1e9, 1e-12);
    assert_double_equal(dt_sim_allreduce_s(&c, 3, n), 2 * (2e-6 + 2.0 / 3 * n / 1e10), 1e-12);
}

static void test_parameter_servers(void **state) {
    (void)state;
    dt_profile_op ops[2];
    const dt_profile p = two_ops(ops);
    dt_sim_config c = config(25, 1e9, 1e-4);
    dt_error err;
    c.mode = DT_SIM_PS_SYNC;
    assert_int_equal(dt_sim_parse_topology("ps:2", &c, &err), 0);
    dt_sim_result r;
    const double bytes = 8.0 * HALF;
    /* 8 workers on 2 servers: each server takes 8 x half the gradient, 4x a worker's */
    assert_int_equal(dt_simulate(&p, &c, 8, &r, &err), 0);
    const double transfer = 1e-4 + 4 * bytes / 1e9;
    assert_double_equal(r.compute_s, 10.25e-3, 1e-12);
    assert_double_equal(r.step_s, 10.25e-3 + 2 * transfer + 0.25e-3, 1e-12);
    /* 1 worker on 2 servers: its own link is the bottleneck */
    assert_int_equal(dt_simulate(&p, &c, 1, &r, &err), 0);
    assert_double_equal(r.comm_s, 2 * (1e-4 + bytes / 1e9), 1e-12);
    /* async: the servers' round of 8 pushes and pulls against a worker's own cycle */
    c.mode = DT_SIM_PS_ASYNC;
    assert_int_equal(dt_simulate(&p, &c, 8, &r, &err), 0);
    assert_double_equal(r.step_s, 8 * (2 * bytes / 2 / 1e9 + 0.25e-3), 1e-12);
    /* a ps mode needs the ps topology, and the other way round */
    c.topology = DT_SIM_RING;
    assert_int_equal(dt_simulate(&p, &c, 8, &r, &err), -1);
    assert_non_null(strstr(err.msg, "ps:S"));
}

/* An emulated link's token bucket (tbf): after the link idled, the first burst_bytes
 * cross at once, the rest at the rate; it refills at the rate while the link is idle. */
static void test_token_bucket(void **state) {
    (void)state;
    dt_profile_op ops[2];
    const dt_profile p = two_ops(ops);
    dt_sim_result r;
    dt_error err;
    /* one bucket of 8 MiB on 4 workers: idle since the step before's update (0.5 ms) and
     * this step's compute (10.25 ms): a full bucket of 2 MB pays for the first bytes */
    dt_sim_config c = config(100, 1e9, 0);
    c.link.burst_bytes = 2e6;
    assert_int_equal(dt_simulate(&p, &c, 4, &r, &err), 0);
    const double link_bytes = 1.5 * 8.0 * HALF;
    assert_double_equal(r.comm_s, (link_bytes - 2e6) / 1e9, 1e-12);
    /* a deeper bucket holds only what 10.75 ms at the rate put into it */
    c.link.burst_bytes = 1e9;
    assert_int_equal(dt_simulate(&p, &c, 4, &r, &err), 0);
    assert_double_equal(r.comm_s, (link_bytes - 10.75e-3 * 1e9) / 1e9, 1e-12);
    /* two buckets on 2 workers, 3 MB deep: bucket 0 at F + 4 ms takes it whole, runs
     * 4 MiB - 3 MB at the rate; bucket 1 at F + 6 ms finds what refilled since */
    c = config(4, 1e9, 0);
    c.link.burst_bytes = 3e6;
    assert_int_equal(dt_simulate(&p, &c, 2, &r, &err), 0);
    const double forward = 4.25e-3, bucket = 4.0 * HALF;
    const double first = (bucket - 3e6) / 1e9, first_end = forward + 4e-3 + first;
    const double refilled = (forward + 6e-3 - first_end) * 1e9;
    const double second = (bucket - refilled) / 1e9;
    assert_double_equal(r.comm_s, first + second, 1e-12);
    assert_double_equal(r.step_s, forward + 6e-3 + second + 0.5e-3, 1e-12);
    /* parameter servers: each port's bucket refills over the step's compute; 8 workers
     * on 2 servers: a server's port gets 4 x 8 MiB, the first 5 MB at once */
    c = config(25, 1e9, 1e-4);
    c.link.burst_bytes = 5e6;
    c.mode = DT_SIM_PS_SYNC;
    assert_int_equal(dt_sim_parse_topology("ps:2", &c, &err), 0);
    assert_int_equal(dt_simulate(&p, &c, 8, &r, &err), 0);
    assert_double_equal(r.comm_s, 2 * (1e-4 + (4 * 8.0 * HALF - 5e6) / 1e9), 1e-12);
}

static void test_parsers_refuse_bad_text(void **state) {
    (void)state;
    dt_sim_link l;
    dt_sim_config c = dt_sim_config_default();
    dt_sim_mode m;
    dt_error err;
    assert_int_equal(dt_sim_parse_link("10gbit,50us", &l, &err), 0);
    assert_double_equal(l.bytes_per_s, 1.25e9, 1e-3);
    assert_double_equal(l.latency_s, 50e-6, 1e-15);
    assert_int_equal(dt_sim_parse_link("12.5GB/s", &l, &err), 0);
    assert_double_equal(l.latency_s, 0, 0);
    const char *bad_links[] = {"10",     "fast",    "10gbit,", "-1gbit", "0gbit", "10gbit,5 years",
                               " 1gbit", "1gbit,x", "nangbit", "infgbit"};
    for (size_t i = 0; i < sizeof bad_links / sizeof *bad_links; i++) {
        assert_int_equal(dt_sim_parse_link(bad_links[i], &l, &err), -1);
        assert_non_null(strstr(err.msg, bad_links[i]));
    }
    const char *bad_topologies[] = {"mesh", "tree:", "tree:0", "tree:4x", "ps:", "ps:-1", ""};
    for (size_t i = 0; i < sizeof bad_topologies / sizeof *bad_topologies; i++)
        assert_int_equal(dt_sim_parse_topology(bad_topologies[i], &c, &err), -1);
    assert_int_equal(dt_sim_parse_mode("ps-async", &m, &err), 0);
    assert_int_equal(m, DT_SIM_PS_ASYNC);
    assert_int_equal(dt_sim_parse_mode("gossip", &m, &err), -1);
    assert_non_null(strstr(err.msg, "gossip"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_bucket_step_is_compute_plus_ring),
        cmocka_unit_test(test_overlap_hides_the_backward_after_the_first_bucket),
        cmocka_unit_test(test_one_worker_has_no_communication),
        cmocka_unit_test(test_topology_costs),
        cmocka_unit_test(test_parameter_servers),
        cmocka_unit_test(test_token_bucket),
        cmocka_unit_test(test_parsers_refuse_bad_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
