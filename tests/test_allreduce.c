/* Ring and shared-memory all-reduces equal MPI_Allreduce on buffers of awkward sizes:
 * one element, fewer elements than ranks, primes, chunk and round boundaries, and
 * resnet18's 44.7 MB gradient. Run under mpirun with 2 and 3 ranks (CTest does both). */
#include <math.h>
#include <mpi.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/rng.h"
#include "dtrain/world.h"
#include "parallel/allreduce.h"
#include "testutil.h"

static dt_world world;

/* The reference is MPI's own all-reduce, over the process world. */
#define CHECK_MPI(call) assert_int_equal((call), MPI_SUCCESS)

static void check_size(dt_allreduce *ar, size_t n, int integers) {
    float *mine = test_alloc(sizeof(float) * n), *ref = test_alloc(sizeof(float) * n);
    dt_rng rng = dt_rng_make(42, (uint64_t)world.rank * 1000003u + n);
    for (size_t i = 0; i < n; i++)
        mine[i] = integers ? (float)(int)(dt_rng_below(&rng, 2001) - 1000) : dt_rng_normal(&rng);
    memcpy(ref, mine, sizeof(float) * n);
    CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, ref, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD));
    dt_allreduce_sum(ar, mine, n);
    if (integers) {
        assert_memory_equal(mine, ref, sizeof(float) * n); /* exact sums: bit-identical */
    } else {
        double e = rel_error(mine, ref, n);
        assert_true(e < 1e-6);
    }
    free(mine);
    free(ref);
}

static void test_ring_equals_mpi_allreduce(void **state) {
    (void)state;
    dt_allreduce ar;
    dt_error err;
    const size_t big = 11173962;
    assert_int_equal(dt_allreduce_init(&ar, &world, DT_ALLREDUCE_RING, DT_COMM_FP32, big, &err), 0);
    ar.chunk_floats = 1000; /* small chunks: many pipeline steps on modest sizes */
    const size_t sizes[] = {1, 2, 3, 5, 7, 997, 1000, 1001, 3001, 65537, 999983};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        check_size(&ar, sizes[i], 1);
        check_size(&ar, sizes[i], 0);
    }
    ar.chunk_floats = 1 << 16;
    check_size(&ar, big, 1);
    check_size(&ar, big, 0);
    if (world.rank == 0)
        print_message("ring == MPI_Allreduce on %d ranks, %zu sizes up to %zu floats\n", world.size,
                      sizeof sizes / sizeof *sizes + 1, big);
    dt_allreduce_free(&ar);
}

/* Shared memory: every rank ends with the same bits (checked against rank 0's), equal to
 * MPI_Allreduce's; small rounds make many rounds of both slot sets, and a
 * later call continues the counters of earlier ones. */
static void test_shm_equals_mpi_allreduce(void **state) {
    (void)state;
    dt_allreduce ar;
    dt_error err;
    const size_t big = 11173962;
    assert_int_equal(dt_allreduce_init(&ar, &world, DT_ALLREDUCE_SHM, DT_COMM_FP32, big, &err), 0);
    assert_non_null(ar.shm);
    assert_string_equal(ar.used, "shm");
    const size_t rounds[] = {1, 5, 1000, 1 << 17};
    const size_t sizes[] = {1, 2, 3, 5, 7, 997, 1000, 1001, 3001, 65537, 999983};
    for (size_t k = 0; k < sizeof rounds / sizeof *rounds; k++) {
        dt_shm_allreduce_set_round(ar.shm, rounds[k]);
        for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
            if (rounds[k] < 100 && sizes[i] > 3001) continue; /* a round per few floats */
            check_size(&ar, sizes[i], 1);
            check_size(&ar, sizes[i], 0);
        }
    }
    dt_shm_allreduce_set_round(ar.shm, 1 << 17);
    check_size(&ar, big, 1);
    check_size(&ar, big, 0);
    float *v = test_alloc(sizeof(float) * 99991), *rank0 = test_alloc(sizeof(float) * 99991);
    dt_rng rng = dt_rng_make(44, (uint64_t)world.rank);
    for (size_t i = 0; i < 99991; i++) v[i] = dt_rng_normal(&rng);
    dt_allreduce_sum(&ar, v, 99991);
    memcpy(rank0, v, sizeof(float) * 99991);
    CHECK_MPI(MPI_Bcast(rank0, 99991, MPI_FLOAT, 0, MPI_COMM_WORLD));
    assert_memory_equal(rank0, v, sizeof(float) * 99991);
    free(v);
    free(rank0);
    dt_allreduce_free(&ar);
}

/* Where MPI is told not to use shared memory (as dtrain's emulated hosts do), auto
 * falls back to the ring and says why, and an explicit shm is refused. */
static void test_shm_follows_mpi_btl(void **state) {
    (void)state;
    assert_true(dt_shm_allowed_by_btl(NULL));
    assert_true(dt_shm_allowed_by_btl(""));
    assert_true(dt_shm_allowed_by_btl("self,vader,tcp"));
    assert_true(dt_shm_allowed_by_btl("sm,self"));
    assert_true(dt_shm_allowed_by_btl("^openib"));
    assert_false(dt_shm_allowed_by_btl("self,tcp"));
    assert_false(dt_shm_allowed_by_btl("^vader"));
    assert_false(dt_shm_allowed_by_btl("^tcp,sm"));
    assert_false(dt_shm_allowed_by_btl("self,smcuda"));
    const char *old = getenv("OMPI_MCA_btl");
    char saved[256] = "";
    if (old) snprintf(saved, sizeof saved, "%s", old);
    assert_int_equal(setenv("OMPI_MCA_btl", "self,tcp", 1), 0);
    dt_allreduce ar;
    dt_error err;
    assert_int_equal(dt_allreduce_init(&ar, &world, DT_ALLREDUCE_AUTO, DT_COMM_FP32, 1000, &err),
                     0);
    assert_null(ar.shm);
    assert_non_null(strstr(ar.used, "OMPI_MCA_btl=self,tcp"));
    float v[1000];
    for (int i = 0; i < 1000; i++) v[i] = 1.0f;
    dt_allreduce_sum(&ar, v, 1000);
    assert_float_equal(v[999], (float)world.size, 0);
    dt_allreduce_free(&ar);
    assert_int_equal(dt_allreduce_init(&ar, &world, DT_ALLREDUCE_SHM, DT_COMM_FP32, 1000, &err),
                     -1);
    assert_non_null(strstr(err.msg, "--allreduce shm: MPI was told not to use shared memory"));
    if (old)
        setenv("OMPI_MCA_btl", saved, 1);
    else
        unsetenv("OMPI_MCA_btl");
    assert_int_equal(dt_allreduce_init(&ar, &world, DT_ALLREDUCE_SHM, DT_COMM_BF16, 1000, &err),
                     -1);
    assert_non_null(strstr(err.msg, "needs dtrain's ring all-reduce"));
}

/* --allreduce auto: every call sums right while it measures; every rank chooses the same
 * algorithm for each size; the report names each candidate's time and the choice. */
static void test_auto_measures_and_agrees(void **state) {
    (void)state;
    dt_allreduce ar;
    dt_error err;
    const size_t sizes[] = {1000, 300001};
    assert_int_equal(dt_allreduce_init(&ar, &world, DT_ALLREDUCE_AUTO, DT_COMM_FP32, 300001, &err),
                     0);
    assert_int_equal(ar.n_candidates, 3); /* shm, ring, mpi: one host */
    for (int call = 0; call < 48; call++) /* at most 8 rounds of 3 turns of 2 calls */
        for (int i = 0; i < 2; i++) check_size(&ar, sizes[i], call & 1);
    char report[512];
    dt_allreduce_auto_report(&ar, report, sizeof report);
    print_message("auto on %d ranks: %s\n", world.size, report);
    for (int i = 0; i < 2; i++) {
        dt_allreduce_algo algo;
        assert_true(dt_allreduce_auto_chosen(&ar, sizes[i], &algo));
        int32_t mine = (int32_t)algo, all[16];
        assert_true(world.size <= 16);
        dt_world_allgather(&world, &mine, all, 1, DT_S32, "the choices");
        for (int r = 0; r < world.size; r++) assert_int_equal(all[r], mine);
    }
    assert_non_null(strstr(report, "0.004 MB: shm "));
    assert_non_null(strstr(report, "; 1.2 MB: shm "));
    assert_non_null(strstr(report, " ms, ring ")); /* shm's time, or its one call's */
    assert_non_null(strstr(report, " ms, mpi "));
    assert_non_null(strstr(report, "-> "));
    dt_allreduce_free(&ar);
}

static void test_every_algorithm_sums(void **state) {
    (void)state;
    const dt_allreduce_algo algos[] = {DT_ALLREDUCE_AUTO, DT_ALLREDUCE_MPI, DT_ALLREDUCE_RING,
                                       DT_ALLREDUCE_SHM, DT_ALLREDUCE_HIER};
    for (int a = 0; a < 5; a++) {
        dt_allreduce ar;
        dt_error err;
        assert_int_equal(dt_allreduce_init(&ar, &world, algos[a], DT_COMM_FP32, 100000, &err), 0);
        float v[100000];
        for (int i = 0; i < 100000; i++) v[i] = (float)(world.rank + 1);
        dt_allreduce_sum(&ar, v, 100000);
        float want = (float)(world.size * (world.size + 1) / 2);
        for (int i = 0; i < 100000; i += 997) assert_float_equal(v[i], want, 0);
        assert_true(ar.bytes_sent > 0);
        dt_allreduce_free(&ar);
    }
}

/* hier: integer values, so that every order of summation gives the exact sum: equal to
 * MPI's all-reduce on every rank, on whatever nodes the ranks run, at sizes that leave
 * segments uneven or empty, and past one round of the shared window (131,072 floats:
 * each round's segments go between the nodes in turn). On one node (the suite's runs)
 * also the same bits as the shared-memory sum for any values: its reduce-scatter, each
 * rank's segment between the nodes (alone here), its all-gather.
 * tests/test_two_hosts.sh runs the first part over two emulated nodes of two ranks,
 * with the ring and with shared memory inside a node. */
static void test_hier(void **state) {
    (void)state;
    const size_t sizes[] = {1, 2, 3, 1001, 65537, 300001};
    const size_t most = 300001;
    dt_allreduce hier, shm;
    dt_error err;
    assert_int_equal(dt_allreduce_init(&hier, &world, DT_ALLREDUCE_HIER, DT_COMM_FP32, most, &err),
                     0);
    print_message("hier on %d ranks: %s\n", world.size, hier.used);
    const int one_node = strstr(hier.used, "hier: 1 nodes x ") != NULL;
    if (one_node)
        assert_int_equal(
            dt_allreduce_init(&shm, &world, DT_ALLREDUCE_SHM, DT_COMM_FP32, most, &err), 0);
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        const size_t n = sizes[k];
        float *a = test_alloc(sizeof(float) * n), *b = test_alloc(sizeof(float) * n);
        dt_rng rng = dt_rng_make(7, (uint64_t)world.rank * 1000003u + n);
        for (size_t i = 0; i < n; i++) a[i] = b[i] = (float)((int)dt_rng_below(&rng, 2001) - 1000);
        dt_allreduce_sum(&hier, a, n);
        CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, b, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD));
        assert_memory_equal(a, b, sizeof(float) * n);
        if (one_node) {
            for (size_t i = 0; i < n; i++) a[i] = b[i] = dt_rng_normal(&rng);
            dt_allreduce_sum(&hier, a, n);
            dt_allreduce_sum(&shm, b, n);
            assert_memory_equal(a, b, sizeof(float) * n);
        }
        free(a);
        free(b);
    }
    dt_allreduce_free(&hier);
    if (one_node) dt_allreduce_free(&shm);
}

/* A 16-bit wire: every rank ends with the same values, within the format's rounding of
 * the fp32 sum (each of the p-1 transfers of a partial sum rounds once, and the owner
 * rounds the total), in half the bytes; MPI_Allreduce with it is refused. */
static void test_16bit_wire(void **state) {
    (void)state;
    const dt_comm_dtype types[] = {DT_COMM_BF16, DT_COMM_FP16};
    const size_t sizes[] = {1, 2, 3, 1001, 65537, 999983};
    for (int t = 0; t < 2; t++) {
        /* unit roundoff of the format: 2^-8 (bf16), 2^-11 (fp16) */
        const double u = types[t] == DT_COMM_BF16 ? 0x1p-8 : 0x1p-11;
        dt_allreduce ar, ar32;
        dt_error err;
        assert_int_equal(dt_allreduce_init(&ar, &world, DT_ALLREDUCE_AUTO, types[t], 999983, &err),
                         0);
        assert_int_equal(
            dt_allreduce_init(&ar32, &world, DT_ALLREDUCE_RING, DT_COMM_FP32, 999983, &err), 0);
        ar.chunk_floats = ar32.chunk_floats = 1000;
        for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
            const size_t n = sizes[k];
            float *mine = test_alloc(sizeof(float) * n), *ref = test_alloc(sizeof(float) * n),
                  *abs_sum = test_alloc(sizeof(float) * n), *rank0 = test_alloc(sizeof(float) * n);
            dt_rng rng = dt_rng_make(43, (uint64_t)world.rank * 1000003u + n);
            for (size_t i = 0; i < n; i++) mine[i] = dt_rng_normal(&rng) * 1e-2f;
            memcpy(ref, mine, sizeof(float) * n);
            for (size_t i = 0; i < n; i++) abs_sum[i] = mine[i] < 0 ? -mine[i] : mine[i];
            CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, ref, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD));
            CHECK_MPI(
                MPI_Allreduce(MPI_IN_PLACE, abs_sum, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD));
            const long long b16 = ar.bytes_sent, b32 = ar32.bytes_sent;
            float *copy = test_alloc(sizeof(float) * n);
            memcpy(copy, mine, sizeof(float) * n);
            dt_allreduce_sum(&ar, mine, n);
            dt_allreduce_sum(&ar32, copy, n);
            /* error bound: p roundings of values bounded by the sum of magnitudes, each
             * relative u, or below fp16's normal range absolute half a step (2^-25) */
            for (size_t i = 0; i < n; i++) {
                const double bound =
                    world.size * (u * abs_sum[i] + (types[t] == DT_COMM_FP16 ? 0x1p-25 : 0));
                if (!(fabs((double)mine[i] - ref[i]) <= bound))
                    fail_msg("%s n=%zu i=%zu: %g vs %g (bound %g)", dt_comm_dtype_name(types[t]), n,
                             i, mine[i], ref[i], bound);
            }
            memcpy(rank0, mine, sizeof(float) * n);
            CHECK_MPI(MPI_Bcast(rank0, (int)n, MPI_FLOAT, 0, MPI_COMM_WORLD));
            assert_memory_equal(rank0, mine, sizeof(float) * n); /* same on every rank */
            if (n >= 1001) assert_int_equal(2 * (ar.bytes_sent - b16), ar32.bytes_sent - b32);
            free(mine), free(ref), free(abs_sum), free(rank0), free(copy);
        }
        dt_allreduce_free(&ar);
        dt_allreduce_free(&ar32);
        assert_int_equal(dt_allreduce_init(&ar, &world, DT_ALLREDUCE_MPI, types[t], 10, &err), -1);
        assert_non_null(strstr(err.msg, "needs dtrain's ring all-reduce"));
    }
}

/* An allocation failing on one rank only (rank 0 asks for buffers past the address
 * space): init fails on every rank, and every rank frees what it made together with
 * the others (a shared window freed by one rank alone, or kept by the others, left
 * MPI_Win_free waiting on the other side, and leaked on the failing one); the world
 * and a new all-reduce work after it. */
static void test_init_fails_together(void **state) {
    (void)state;
    const dt_allreduce_algo algos[] = {DT_ALLREDUCE_AUTO, DT_ALLREDUCE_HIER, DT_ALLREDUCE_RING};
    for (size_t k = 0; k < sizeof algos / sizeof *algos; k++) {
        dt_allreduce ar;
        dt_error err = {{0}};
        const size_t floats = world.rank == 0 ? SIZE_MAX : 1024;
        const int rc = dt_allreduce_init(&ar, &world, algos[k], DT_COMM_FP32, floats, &err);
        print_message("%s, rank %d: %d (%s)\n", dt_allreduce_name(algos[k]), world.rank, rc,
                      err.msg);
        if (algos[k] == DT_ALLREDUCE_RING) { /* no window: only the failing rank fails */
            assert_int_equal(rc, world.rank == 0 ? -1 : 0);
            if (rc == 0) dt_allreduce_free(&ar);
            continue;
        }
        assert_int_equal(rc, -1);
        assert_non_null(strstr(err.msg, world.rank == 0 ? "is too many" : "another rank"));
        assert_null(ar.shm);
        assert_null(ar.levels);
    }
    dt_allreduce ar;
    dt_error err;
    float v[3] = {1, 2, (float)world.rank};
    assert_int_equal(dt_allreduce_init(&ar, &world, DT_ALLREDUCE_AUTO, DT_COMM_FP32, 3, &err), 0);
    dt_allreduce_sum(&ar, v, 3);
    assert_true(v[0] == (float)world.size && v[2] == (float)(world.size * (world.size - 1) / 2));
    dt_allreduce_free(&ar);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ring_equals_mpi_allreduce),
        cmocka_unit_test(test_shm_equals_mpi_allreduce),
        cmocka_unit_test(test_shm_follows_mpi_btl),
        cmocka_unit_test(test_every_algorithm_sums),
        cmocka_unit_test(test_hier),
        cmocka_unit_test(test_auto_measures_and_agrees),
        cmocka_unit_test(test_16bit_wire),
        cmocka_unit_test(test_init_fails_together),
    };
    return run_mpi_tests(&world, tests, sizeof tests / sizeof *tests, &argc, &argv);
}
