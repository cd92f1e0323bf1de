/* All-reduce bus bandwidth, NCCL convention: 2(P-1)/P * bytes / time, for `ring` and
 * `mpi` side by side, sizes 4 KiB .. 64 MiB plus resnet18's gradient (11,173,962
 * floats), with single-core memcpy bandwidth of the same buffer as the yardstick.
 * Buffers are pre-touched and each size is warmed up 5 times (fresh memory on these
 * VMs is slow); the median of REPS timed runs is reported.
 *   mpirun -np 2 bench_allreduce [REPS [BYTES...]]  -> one JSON line per size (rank 0) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/allreduce.h"
#include "dtrain/timer.h"
#include "dtrain/world.h"

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median_time(dt_allreduce *ar, float *buf, size_t n, int reps) {
    double t[64];
    for (int i = -5; i < reps; i++) {
        DT_CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        double t0 = dt_now();
        dt_allreduce_sum(ar, buf, n);
        double dt = dt_now() - t0;
        /* the slowest rank's time is the operation's time */
        DT_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &dt, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
        if (i >= 0) t[i] = dt;
    }
    qsort(t, (size_t)reps, sizeof(double), cmp);
    return t[reps / 2];
}

int main(int argc, char **argv) {
    dt_world w;
    dt_error err;
    if (dt_world_init(&w, &argc, &argv, &err)) {
        fprintf(stderr, "bench_allreduce: %s\n", err.msg);
        return 1;
    }
    int reps = argc > 1 ? atoi(argv[1]) : 11;
    if (reps < 1 || reps > 64) reps = 11;
    size_t sizes[32];
    int n_sizes = 0;
    for (int i = 2; i < argc && n_sizes < 32; i++) /* explicit sizes in bytes */
        sizes[n_sizes++] = (size_t)atol(argv[i]) / sizeof(float);
    if (n_sizes == 0) {
        for (size_t b = 4096; b <= (64u << 20); b *= 4) sizes[n_sizes++] = b / sizeof(float);
        sizes[n_sizes++] = 11173962; /* resnet18's gradient, 44.7 MB */
    }
    size_t max = 0;
    for (int i = 0; i < n_sizes; i++) max = sizes[i] > max ? sizes[i] : max;
    float *buf = dt_alloc(max * sizeof(float), "buffer", &err);
    float *copy = dt_alloc(max * sizeof(float), "buffer", &err);
    dt_allreduce ring, mpi;
    if (!buf || !copy || dt_allreduce_init(&ring, &w, DT_ALLREDUCE_RING, DT_COMM_FP32, max, &err) ||
        dt_allreduce_init(&mpi, &w, DT_ALLREDUCE_MPI, DT_COMM_FP32, max, &err))
        dt_world_abort(&w, "%s", err.msg);
    for (size_t i = 0; i < max; i++) buf[i] = 1.0f, copy[i] = 0.0f;
    for (int i = 0; i < n_sizes; i++) {
        size_t n = sizes[i], bytes = n * sizeof(float);
        double t_ring = median_time(&ring, buf, n, reps);
        double t_mpi = median_time(&mpi, buf, n, reps);
        double t_copy = 1e30;
        for (int k = 0; k < 5; k++) {
            double t0 = dt_now();
            memcpy(copy, buf, bytes);
            double dt = dt_now() - t0;
            t_copy = dt < t_copy ? dt : t_copy;
        }
        double factor = 2.0 * (w.size - 1) / w.size * (double)bytes;
        if (w.rank == 0)
            printf("{\"bench\":\"allreduce\",\"procs\":%d,\"bytes\":%zu,\"ring_ms\":%.3f,"
                   "\"mpi_ms\":%.3f,\"ring_busbw_GBps\":%.3f,\"mpi_busbw_GBps\":%.3f,"
                   "\"ring_over_mpi\":%.2f,\"memcpy_GBps\":%.2f}\n",
                   w.size, bytes, 1e3 * t_ring, 1e3 * t_mpi, factor / t_ring * 1e-9,
                   factor / t_mpi * 1e-9, t_mpi / t_ring, (double)bytes / t_copy * 1e-9);
    }
    dt_allreduce_free(&ring);
    dt_allreduce_free(&mpi);
    dt_free(buf);
    dt_free(copy);
    dt_world_finalize(&w);
    return 0;
}
