/* Worlds split from the process world: a collective over a split world combines its
 * own ranks only, ranks are renumbered in order, and messages stay within it. Run
 * under mpirun with 3 ranks (CTest): rank 0 alone, ranks 1 and 2 together, as a
 * parameter-server job splits one server from two workers. */
#include <mpi.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
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
    dt_world_allreduce_doubles(&part, v, 2, MPI_SUM);
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

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split_world_reduces_over_its_own_ranks),
        cmocka_unit_test(test_split_world_messages_use_its_numbering),
    };
    return run_mpi_tests(&world, tests, sizeof tests / sizeof *tests, &argc, &argv);
}
