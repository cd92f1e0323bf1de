/* All-reduce bus bandwidth, NCCL convention: 2(P-1)/P * bytes / time, for dtrain's
 * `shm` (when the ranks share memory), `hier` (when they span nodes with several
 * ranks on each), `ring` and `mpi` side by side with two
 * yardsticks: a plain ring of blocking MPI_Sendrecv calls (whole segments, no
 * pipelining: what a textbook ring over MPI does) and single-core memcpy of the same
 * buffer. Sizes 4 KiB .. 64 MiB plus resnet18's gradient (11,173,962 floats).
 * Buffers are pre-touched and each size is warmed up 5 times (fresh memory on these
 * VMs is slow); the median of REPS timed runs is reported, each rep running every
 * column once in a fresh random order (the same on every rank) so that a slow moment
 * hits every algorithm and none always runs after the same one.
 * auto is dtrain's --allreduce auto, the same chooser as training's, timed after it
 * has measured and chosen for the size; shm, ring and mpi run on auto's own window and
 * buffers, so auto differs from them in the choosing alone. auto_over_best is the
 * median over reps of auto's time over the best candidate's (by median) in the same
 * rep. chosen_again is auto's choice once more, called as the candidates are: its
 * again_over_best (1 when nothing but the calls' noise differs) is the control, the
 * noise floor auto_over_best is read against. Single calls vary by +-20% here.
 *   mpirun -np 2 bench_allreduce [REPS [BYTES...]]  -> one JSON line per size (rank 0)
 *   DTRAIN_SHM_ROUND=floats sets the shared-memory round (for tuning its default). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "core/rng.h"
#include "core/timer.h"
#include "dtrain/world.h"
#include "parallel/allreduce.h"
#include "train/train_flags.h"

/* The yardsticks talk MPI themselves, over the process world (the bench's world). */
#define CHECK_MPI(call)                                                                            \
    do {                                                                                           \
        if ((call) != MPI_SUCCESS) dt_world_abort(NULL, "%s failed", #call);                       \
    } while (0)

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
        CHECK_MPI(MPI_Sendrecv(buf + SEG_BEGIN(out), (int)SEG_COUNT(out), MPI_FLOAT, right, 1, tmp,
                               (int)SEG_COUNT(in), MPI_FLOAT, left, 1, MPI_COMM_WORLD,
                               MPI_STATUS_IGNORE));
        float *dst = buf + SEG_BEGIN(in);
        for (size_t i = 0; i < SEG_COUNT(in); i++) dst[i] += tmp[i];
    }
    for (int s = 0; s < p - 1; s++) {
        const int out = (r + 1 - s + p) % p, in = (r - s + p) % p;
        CHECK_MPI(MPI_Sendrecv(buf + SEG_BEGIN(out), (int)SEG_COUNT(out), MPI_FLOAT, right, 2,
                               buf + SEG_BEGIN(in), (int)SEG_COUNT(in), MPI_FLOAT, left, 2,
                               MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    }
#undef SEG_BEGIN
#undef SEG_COUNT
}

/* What this rank got of the cores while it ran an all-reduce: CPU seconds against wall
 * seconds, and the times the kernel took the core away (involuntary switches). A rank
 * that waits spins, so CPU < wall means it was descheduled in the guest; long waits
 * with CPU = wall and no switches mean the virtual CPU itself stopped (host steal). */
typedef struct cpu_share {
    double wall, cpu;
    long involuntary;
} cpu_share;

static double cpu_seconds(long *involuntary) {
    struct rusage u;
    if (getrusage(RUSAGE_SELF, &u)) return 0;
    *involuntary = u.ru_nivcsw;
    return (double)u.ru_utime.tv_sec + (double)u.ru_stime.tv_sec +
           1e-6 * (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

/* AGAIN: auto's chosen algorithm once more, called as the candidates are: the control.
 * Its ratio to the best (the same code when auto chose the best) is the method's noise
 * floor in the same run, against which auto_over_best is read. */
enum { ALGOS = 7, SHM = 0, PLAIN = 3, AUTO = 4, AGAIN = 5, HIER = 6, MAX_REPS = 64 };
static const char *const algo_names[ALGOS] = {"shm",  "ring",         "mpi", "plain_ring",
                                              "auto", "chosen_again", "hier"};
/* the columns that are auto's candidates, by column */
static const dt_allreduce_algo candidate_of[ALGOS] = {[SHM] = DT_ALLREDUCE_SHM,
                                                      [1] = DT_ALLREDUCE_RING,
                                                      [2] = DT_ALLREDUCE_MPI,
                                                      [HIER] = DT_ALLREDUCE_HIER};

/* One timed call of column a (a candidate on auto's resources, auto itself, or the
 * plain ring); the slowest rank's time is the operation's time. */
static double time_once(const dt_world *w, dt_allreduce *ar, int a, dt_allreduce_algo chosen,
                        float *buf, float *tmp, size_t n, cpu_share *share) {
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    long iv0 = 0, iv1 = 0;
    const double c0 = share ? cpu_seconds(&iv0) : 0;
    double t0 = dt_now();
    if (a == AUTO)
        dt_allreduce_sum(ar, buf, n);
    else if (a == PLAIN)
        plain_ring(w, buf, tmp, n);
    else if (a == AGAIN)
        dt_allreduce_sum_with(ar, chosen, buf, n);
    else
        dt_allreduce_sum_with(ar, candidate_of[a], buf, n);
    double dt = dt_now() - t0;
    if (share) {
        share->cpu += cpu_seconds(&iv1) - c0;
        share->wall += dt;
        share->involuntary += iv1 - iv0;
    }
    CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &dt, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
    return dt;
}

/* Adds the window's figures since the last reset to sum, and resets them. */
static void shm_stats_add(dt_shm_stats *sum, dt_shm_allreduce *window) {
    dt_shm_stats one;
    dt_shm_allreduce_stats(window, &one, 1);
    sum->calls += one.calls, sum->rounds += one.rounds, sum->waits += one.waits;
    sum->yield_waits += one.yield_waits, sum->nap_waits += one.nap_waits;
    sum->naps += one.naps, sum->t_wait += one.t_wait;
    if (one.longest_wait > sum->longest_wait) sum->longest_wait = one.longest_wait;
    for (int f = 0; f < DT_SHM_PHASES; f++) sum->t_phase[f] += one.t_phase[f];
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
    /* One instance, auto's: shm, ring and mpi are timed on its own window and buffers
     * (dt_allreduce_sum_with), so that auto and the candidates it picks from differ in
     * the choosing alone. With a second instance for the shm column, the second shm
     * window created timed 1.04-1.46x slower than the first at 16 KiB-4 MiB on this VM,
     * whichever column used it: a property of the instance, not of the algorithm. */
    dt_allreduce automatic;
    if (!buf || !copy ||
        dt_allreduce_init(&automatic, &w, DT_ALLREDUCE_AUTO, DT_COMM_FP32, max, &err))
        dt_world_abort(&w, "%s", err.msg);
    /* shm where the ranks can share memory (auto says why not) */
    const int have_shm = automatic.shm != NULL;
    /* hier where the ranks span nodes, several on each (auto's candidate then) */
    const int have_hier = automatic.levels != NULL;
    /* the columns this run has */
    int runs[ALGOS];
    for (int a = 0; a < ALGOS; a++) runs[a] = (a != SHM || have_shm) && (a != HIER || have_hier);
    if (!have_shm && w.rank == 0) fprintf(stderr, "bench_allreduce: %s\n", automatic.used);
    const char *round = getenv("DTRAIN_SHM_ROUND"), *naps = getenv("DTRAIN_SHM_NAPS"),
               *spin = getenv("DTRAIN_SHM_SPIN_US");
    if (have_shm) {
        if (round)
            dt_shm_allreduce_set_round(
                automatic.shm, (size_t)parse_count("DTRAIN_SHM_ROUND", round, 1 << 17, 1L << 30));
        if (naps) dt_shm_allreduce_set_naps(automatic.shm, !strcmp(naps, "1"));
        if (spin)
            dt_shm_allreduce_set_spin(
                automatic.shm, 1e-6 * (double)parse_count("DTRAIN_SHM_SPIN_US", spin, 1, 1000000));
    }
    for (size_t i = 0; i < max; i++) buf[i] = 1.0f, copy[i] = 0.0f;
    dt_rng rng = dt_rng_make(1, 0); /* one seed: the same orders on every rank */
    for (int i = 0; i < n_sizes; i++) {
        size_t n = sizes[i], bytes = n * sizeof(float);
        double t[ALGOS][MAX_REPS], med[ALGOS];
        /* shm's own calls' figures (auto's calls use the same window) */
        dt_shm_stats st = {0}, one;
        /* every algorithm's calls are wrapped alike (two getrusage calls outside the
         * timed part) */
        cpu_share shares[ALGOS] = {{0, 0, 0}}, share;
        /* auto measures on its first calls of a size: time it once it has chosen, as a
         * training run spends nearly all its steps (its measuring is in the run log) */
        dt_allreduce_algo choice = DT_ALLREDUCE_AUTO;
        for (int k = 0; k < 64 && !dt_allreduce_auto_chosen(&automatic, n, &choice); k++)
            dt_allreduce_sum(&automatic, buf, n);
        if (choice == DT_ALLREDUCE_AUTO)
            dt_world_abort(&w, "bench_allreduce: auto had not chosen after 64 calls of %zu bytes",
                           bytes);
        for (int rep = -5; rep < reps; rep++) {
            /* a fresh order each rep, the same on every rank (one seed): with a rotation
             * of one order each column always followed the same one, and the shm call
             * after the plain ring measured 1.1-1.6x slower than the one after auto's
             * (the same code on the same window: the cache the previous call left) */
            int order[ALGOS];
            for (int k = 0; k < ALGOS; k++) order[k] = k;
            for (int k = ALGOS - 1; k > 0; k--) {
                const int j = (int)dt_rng_below(&rng, (uint32_t)k + 1), x = order[k];
                order[k] = order[j], order[j] = x;
            }
            for (int k = 0; k < ALGOS; k++) {
                const int a = order[k];
                if (!runs[a]) continue;
                if (a == SHM) dt_shm_allreduce_stats(automatic.shm, &one, 1);
                const double dt = time_once(&w, &automatic, a, choice, buf, copy, n,
                                            rep >= 0 ? &shares[a] : NULL);
                if (rep >= 0) t[a][rep] = dt;
                if (a == SHM && rep >= 0) shm_stats_add(&st, automatic.shm);
            }
        }
        double sorted[ALGOS][MAX_REPS];
        for (int a = 0; a < ALGOS; a++) {
            med[a] = -1;
            if (!runs[a]) continue;
            memcpy(sorted[a], t[a], (size_t)reps * sizeof(double));
            qsort(sorted[a], (size_t)reps, sizeof(double), cmp);
            med[a] = sorted[a][reps / 2];
        }
        /* auto against the best of the three it chooses from (by median): the median of
         * the per-rep ratios, each rep's two calls a moment apart, so that the machine's
         * slow minutes (shm's 44.7 MB call took 4-15 ms over one hour here) cancel */
        int best_candidate = -1; /* ring and mpi always run */
        for (int a = 0; a < ALGOS; a++)
            if (candidate_of[a] != DT_ALLREDUCE_AUTO && med[a] > 0 &&
                (best_candidate < 0 || med[a] < med[best_candidate]))
                best_candidate = a;
        double ratio[MAX_REPS], control[MAX_REPS];
        for (int rep = 0; rep < reps; rep++) {
            ratio[rep] = t[AUTO][rep] / t[best_candidate][rep];
            control[rep] = t[AGAIN][rep] / t[best_candidate][rep];
        }
        qsort(ratio, (size_t)reps, sizeof(double), cmp);
        qsort(control, (size_t)reps, sizeof(double), cmp);
        double t_copy = 1e30;
        for (int k = 0; k < 5; k++) {
            double t0 = dt_now();
            memcpy(copy, buf, bytes);
            double dt = dt_now() - t0;
            t_copy = dt < t_copy ? dt : t_copy;
        }
        /* every rank's shm figures over the timed runs: where the time went */
        enum { FIELDS = 7 + DT_SHM_PHASES };
        double mine[FIELDS] = {0}, all[8 * FIELDS] = {0};
        if (have_shm) {
            const double per = 1e3 / (reps > 0 ? reps : 1);
            mine[0] = (double)st.waits / reps, mine[1] = (double)st.yield_waits / reps;
            mine[2] = (double)st.nap_waits / reps, mine[3] = (double)st.naps / reps;
            mine[4] = st.longest_wait * 1e3;
            for (int f = 0; f < DT_SHM_PHASES; f++) mine[5 + f] = st.t_phase[f] * per;
            share = shares[0];
            mine[5 + DT_SHM_PHASES] = share.wall > 0 ? share.cpu / share.wall : 0;
            mine[6 + DT_SHM_PHASES] = (double)share.involuntary / reps;
        }
        if (w.size <= 8)
            CHECK_MPI(
                MPI_Gather(mine, FIELDS, MPI_DOUBLE, all, FIELDS, MPI_DOUBLE, 0, MPI_COMM_WORLD));
        double factor = 2.0 * (w.size - 1) / w.size * (double)bytes;
        if (w.rank == 0) {
            printf("{\"bench\":\"allreduce\",\"procs\":%d,\"bytes\":%zu", w.size, bytes);
            for (int a = 0; a < ALGOS; a++)
                if (med[a] > 0)
                    printf(",\"%s_ms\":%.3f,\"%s_busbw_GBps\":%.3f", algo_names[a], 1e3 * med[a],
                           algo_names[a], factor / med[a] * 1e-9);
            const double best = med[0] > 0 ? med[0] : med[1];
            dt_allreduce_auto_chosen(&automatic, n, &choice);
            printf(",\"auto_chose\":\"%s\",\"auto_over_best\":%.2f,\"again_over_best\":%.2f",
                   dt_allreduce_name(choice), ratio[reps / 2], control[reps / 2]);
            printf(",\"best_over_plain_ring\":%.2f,\"best_over_mpi\":%.2f,\"memcpy_GBps\":%.2f",
                   med[3] / best, med[2] / best, (double)bytes / t_copy * 1e-9);
            /* per call, each rank: waits entered, reaching yield, reaching nap, naps, the
             * longest wait (ms); ms in wait-free, copy-in, wait-in, reduce, wait-out,
             * copy-out; CPU / wall seconds; involuntary context switches */
            if (have_shm && w.size <= 8) {
                printf(",\"shm_ranks\":[");
                for (int k = 0; k < w.size; k++) {
                    printf("%s[", k ? "," : "");
                    for (int f = 0; f < FIELDS; f++)
                        printf("%s%.3g", f ? "," : "", all[k * FIELDS + f]);
                    printf("]");
                }
                printf("]");
            }
            printf("}\n");
        }
    }
    char measured[2048];
    dt_allreduce_auto_report(&automatic, measured, sizeof measured);
    if (w.rank == 0) printf("{\"bench\":\"allreduce_auto\",\"measured\":\"%s\"}\n", measured);
    dt_allreduce_free(&automatic);
    dt_free(buf);
    dt_free(copy);
    dt_world_finalize(&w);
    return 0;
}
