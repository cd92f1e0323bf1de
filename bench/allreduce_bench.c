/* All-reduce bus bandwidth, NCCL convention: 2(P-1)/P * bytes / time, for dtrain's
 * `shm` (when the ranks share memory), `ring` and `mpi` side by side with two
 * yardsticks: a plain ring of blocking MPI_Sendrecv calls (whole segments, no
 * pipelining: what a textbook ring over MPI does) and single-core memcpy of the same
 * buffer. Sizes 4 KiB .. 64 MiB plus resnet18's gradient (11,173,962 floats).
 * Buffers are pre-touched and each size is warmed up 5 times (fresh memory on these
 * VMs is slow); the median of REPS timed runs is reported, REPS alternating rounds
 * (shm, ring, mpi, plain, shm, ...) so that a slow moment hits every algorithm.
 *   mpirun -np 2 bench_allreduce [REPS [BYTES...]]  -> one JSON line per size (rank 0)
 *   DTRAIN_SHM_ROUND=floats sets the shared-memory round (for tuning its default). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/allreduce.h"
#include "dtrain/timer.h"
#include "dtrain/train_flags.h"
#include "dtrain/world.h"

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The textbook ring: reduce-scatter then all-gather, one blocking MPI_Sendrecv of a
 * whole segment per step. */
static void plain_ring(const dt_world *w, float *buf, float *tmp, size_t n) {
    const int p = w->size, r = w->rank, right = (r + 1) % p, left = (r + p - 1) % p;
    const size_t seg = (n + (size_t)p - 1) / (size_t)p;
#define SEG_BEGIN(i) ((size_t)(i)*seg < n ? (size_t)(i)*seg : n)
#define SEG_COUNT(i) (SEG_BEGIN((i) + 1) - SEG_BEGIN(i))
    for (int s = 0; s < p - 1; s++) {
        const int out = (r - s + p) % p, in = (r - s - 1 + 2 * p) % p;
        DT_CHECK_MPI(MPI_Sendrecv(buf + SEG_BEGIN(out), (int)SEG_COUNT(out), MPI_FLOAT, right, 1,
                                  tmp, (int)SEG_COUNT(in), MPI_FLOAT, left, 1, w->comm,
                                  MPI_STATUS_IGNORE));
        float *dst = buf + SEG_BEGIN(in);
        for (size_t i = 0; i < SEG_COUNT(in); i++) dst[i] += tmp[i];
    }
    for (int s = 0; s < p - 1; s++) {
        const int out = (r + 1 - s + p) % p, in = (r - s + p) % p;
        DT_CHECK_MPI(MPI_Sendrecv(buf + SEG_BEGIN(out), (int)SEG_COUNT(out), MPI_FLOAT, right, 2,
                                  buf + SEG_BEGIN(in), (int)SEG_COUNT(in), MPI_FLOAT, left, 2,
                                  w->comm, MPI_STATUS_IGNORE));
    }
#undef SEG_BEGIN
#undef SEG_COUNT
}

enum { ALGOS = 4, MAX_REPS = 64 };
static const char *const algo_names[ALGOS] = {"shm", "ring", "mpi", "plain_ring"};

/* One timed call of algorithm a (NULL ar: the plain ring); the slowest rank's time is
 * the operation's time. */
static double time_once(const dt_world *w, dt_allreduce *ar, float *buf, float *tmp, size_t n) {
    DT_CHECK_MPI(MPI_Barrier(w->comm));
    double t0 = dt_now();
    if (ar)
        dt_allreduce_sum(ar, buf, n);
    else
        plain_ring(w, buf, tmp, n);
    double dt = dt_now() - t0;
    DT_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &dt, 1, MPI_DOUBLE, MPI_MAX, w->comm));
    return dt;
}

/* Strict positive integer up to most, else `fallback` with a warning. */
static long parse_count(const char *what, const char *text, long fallback, long most) {
    long v;
    dt_error err;
    if (dt_parse_long(what, text, 1, most, &v, &err)) {
        fprintf(stderr, "bench_allreduce: %s; using %ld\n", err.msg, fallback);
        return fallback;
    }
    return v;
}

int main(int argc, char **argv) {
    dt_world w;
    dt_error err;
    if (dt_world_init(&w, &argc, &argv, &err)) {
        fprintf(stderr, "bench_allreduce: %s\n", err.msg);
        return 1;
    }
    int reps = argc > 1 ? (int)parse_count("REPS", argv[1], 11, MAX_REPS) : 11;
    size_t sizes[32];
    int n_sizes = 0;
    for (int i = 2; i < argc && n_sizes < 32; i++) /* explicit sizes in bytes */
        sizes[n_sizes++] = (size_t)parse_count("BYTES", argv[i], 1 << 20, 1L << 32) / sizeof(float);
    if (n_sizes == 0) {
        for (size_t b = 4096; b <= (64u << 20); b *= 4) sizes[n_sizes++] = b / sizeof(float);
        sizes[n_sizes++] = 11173962; /* resnet18's gradient, 44.7 MB */
    }
    size_t max = 1;
    for (int i = 0; i < n_sizes; i++) max = sizes[i] > max ? sizes[i] : max;
    float *buf = dt_alloc(max * sizeof(float), "buffer", &err);
    float *copy = dt_alloc(max * sizeof(float), "buffer", &err);
    dt_allreduce shm, ring, mpi;
    if (!buf || !copy || dt_allreduce_init(&shm, &w, DT_ALLREDUCE_AUTO, DT_COMM_FP32, max, &err) ||
        dt_allreduce_init(&ring, &w, DT_ALLREDUCE_RING, DT_COMM_FP32, max, &err) ||
        dt_allreduce_init(&mpi, &w, DT_ALLREDUCE_MPI, DT_COMM_FP32, max, &err))
        dt_world_abort(&w, "%s", err.msg);
    if (!shm.shm && w.rank == 0) fprintf(stderr, "bench_allreduce: %s\n", shm.used);
    const char *round = getenv("DTRAIN_SHM_ROUND");
    if (round && shm.shm)
        dt_shm_allreduce_set_round(
            shm.shm, (size_t)parse_count("DTRAIN_SHM_ROUND", round, 1 << 17, 1L << 30));
    dt_allreduce *const algos[ALGOS] = {shm.shm ? &shm : NULL, &ring, &mpi, NULL};
    for (size_t i = 0; i < max; i++) buf[i] = 1.0f, copy[i] = 0.0f;
    for (int i = 0; i < n_sizes; i++) {
        size_t n = sizes[i], bytes = n * sizeof(float);
        double t[ALGOS][MAX_REPS], med[ALGOS];
        for (int rep = -5; rep < reps; rep++)
            for (int a = 0; a < ALGOS; a++) {
                if (a == 0 && !algos[0]) continue;
                const double dt = time_once(&w, algos[a], buf, copy, n);
                if (rep >= 0) t[a][rep] = dt;
            }
        for (int a = 0; a < ALGOS; a++) {
            med[a] = -1;
            if (a == 0 && !algos[0]) continue;
            qsort(t[a], (size_t)reps, sizeof(double), cmp);
            med[a] = t[a][reps / 2];
        }
        double t_copy = 1e30;
        for (int k = 0; k < 5; k++) {
            double t0 = dt_now();
            memcpy(copy, buf, bytes);
            double dt = dt_now() - t0;
            t_copy = dt < t_copy ? dt : t_copy;
        }
        double factor = 2.0 * (w.size - 1) / w.size * (double)bytes;
        if (w.rank == 0) {
            printf("{\"bench\":\"allreduce\",\"procs\":%d,\"bytes\":%zu", w.size, bytes);
            for (int a = 0; a < ALGOS; a++)
                if (med[a] > 0)
                    printf(",\"%s_ms\":%.3f,\"%s_busbw_GBps\":%.3f", algo_names[a], 1e3 * med[a],
                           algo_names[a], factor / med[a] * 1e-9);
            const double best = med[0] > 0 ? med[0] : med[1];
            printf(",\"best_over_plain_ring\":%.2f,\"best_over_mpi\":%.2f,\"memcpy_GBps\":%.2f}\n",
                   med[3] / best, med[2] / best, (double)bytes / t_copy * 1e-9);
        }
    }
    dt_allreduce_free(&shm);
    dt_allreduce_free(&ring);
    dt_allreduce_free(&mpi);
    dt_free(buf);
    dt_free(copy);
    dt_world_finalize(&w);
    return 0;
}
