/* Worlds split from the process world: a collective over a split world combines its
 * own ranks only, ranks are renumbered in order, and messages stay within it. Run
 * under mpirun with 3 ranks (CTest): rank 0 alone, ranks 1 and 2 together, as a
 * parameter-server job splits one server from two workers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "dtrain/world.h"
#include "testutil.h"

static dt_world world;

static void test_split_world_reduces_over_its_own_ranks(void **state) {
    (void)state;
    const int color = world.rank == 0 ? 0 : 1;
    dt_world part;
    dt_world_split(&world, color, world.rank, &part);
    assert_int_equal(part.size, color == 0 ? 1 : world.size - 1);
    assert_int_equal(part.rank, color == 0 ? 0 : world.rank - 1);
    assert_int_equal(part.job_rank, world.rank);
    double v[2] = {world.rank + 1.0, world.rank};
    dt_world_allreduce_doubles(&part, v, 2, DT_REDUCE_SUM);
    if (color == 0) {
        assert_true(v[0] == 1.0 && v[1] == 0.0);
    } else { /* ranks 1 .. size-1 */
        const double n = world.size - 1;
        assert_true(v[0] == n * (n + 3) / 2 && v[1] == n * (n + 1) / 2);
    }
    dt_world_free(&part);
}

static void test_split_world_messages_use_its_numbering(void **state) {
    (void)state;
    const int color = world.rank == 0 ? 0 : 1;
    dt_world part;
    dt_world_split(&world, color, -world.rank, &part); /* reversed order by key */
    if (color == 1) {
        assert_int_equal(part.rank, world.size - 1 - world.rank);
        int token = 1000 + world.rank;
        if (part.rank == 0) dt_world_send_bytes(&part, &token, sizeof token, 1, 5, "test send");
        if (part.rank == 1) {
            int got = 0;
            dt_world_recv_bytes(&part, &got, sizeof got, 0, 5, "test receive");
            assert_int_equal(got, 1000 + world.size - 1); /* from the highest job rank */
        }
    }
    dt_world_barrier(&part, "test barrier");
    dt_world_free(&part);
}

/* The collectives of the interface, each element type and reduction, on a split world
 * and the process world: what MPI would give, computed by hand. */
static void test_collectives_of_each_type(void **state) {
    (void)state;
    const int p = world.size, r = world.rank;
    int32_t i32[3] = {r, -r, 7};
    dt_world_allreduce(&world, i32, 3, DT_S32, DT_REDUCE_SUM, "s32 sum");
    assert_int_equal(i32[0], p * (p - 1) / 2);
    assert_int_equal(i32[1], -p * (p - 1) / 2);
    assert_int_equal(i32[2], 7 * p);
    int64_t big = ((int64_t)1 << 40) + r;
    dt_world_allreduce(&world, &big, 1, DT_S64, DT_REDUCE_MAX, "s64 max");
    assert_true(big == ((int64_t)1 << 40) + p - 1);
    float f = 0.5f + (float)r;
    dt_world_allreduce(&world, &f, 1, DT_F32, DT_REDUCE_MIN, "f32 min");
    assert_true(f == 0.5f);
    double d[2] = {r == 1 ? 2.5 : 0.0, 1.0};
    dt_world_broadcast(&world, d, 2, DT_F64, 1, "broadcast from rank 1");
    assert_true(d[0] == 2.5 && d[1] == 1.0);
    unsigned char mine[2] = {(unsigned char)(10 + r), (unsigned char)(20 + r)}, all[2 * 8];
    assert_true(p <= 8);
    dt_world_allgather(&world, mine, all, 2, DT_U8, "u8 gather");
    for (int k = 0; k < p; k++) {
        assert_int_equal(all[2 * k], 10 + k);
        assert_int_equal(all[2 * k + 1], 20 + k);
    }
    int local = 0, spans = 1;
    dt_world_hosts(&world, &local, &spans);
    assert_int_equal(local, p); /* the test runs on one host */
    assert_int_equal(spans, 0);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split_world_reduces_over_its_own_ranks),
        cmocka_unit_test(test_split_world_messages_use_its_numbering),
        cmocka_unit_test(test_collectives_of_each_type),
    };
    return run_mpi_tests(&world, tests, sizeof tests / sizeof *tests, &argc, &argv);
}
