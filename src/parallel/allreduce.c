#include "parallel/allreduce.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/stats.h"
#include "core/timer.h"

#include "world_mpi.h"

enum { RING_TAG = 7301, MAX_CHUNKS = 1024 };

int dt_allreduce_parse(const char *name, dt_allreduce_algo *algo) {
    if (!strcmp(name, "auto"))
        *algo = DT_ALLREDUCE_AUTO;
    else if (!strcmp(name, "mpi"))
        *algo = DT_ALLREDUCE_MPI;
    else if (!strcmp(name, "ring"))
        *algo = DT_ALLREDUCE_RING;
    else if (!strcmp(name, "shm"))
        *algo = DT_ALLREDUCE_SHM;
    else if (!strcmp(name, "hier"))
        *algo = DT_ALLREDUCE_HIER;
    else
        return -1;
    return 0;
}

const char *dt_allreduce_name(dt_allreduce_algo algo) {
    return algo == DT_ALLREDUCE_MPI    ? "mpi"
           : algo == DT_ALLREDUCE_RING ? "ring"
           : algo == DT_ALLREDUCE_SHM  ? "shm"
           : algo == DT_ALLREDUCE_HIER ? "hier"
                                       : "auto";
}

static void levels_free(dt_allreduce_levels *l) {
    if (!l) return;
    if (l->between) dt_allreduce_free(l->between);
    if (l->in_node) dt_allreduce_free(l->in_node);
    free(l->between);
    free(l->in_node);
    dt_world_free(&l->cross);
    dt_world_free(&l->local);
    free(l);
}

/* Whether every rank of w made its part (collective over w). Shared windows and
 * hier's communicators are freed collectively (MPI_Win_free synchronizes), so a rank
 * whose own allocation failed must not free them alone, nor keep them while the
 * others go on: all free together or none does. */
static int all_made(const dt_world *w, int made) {
    double ok = made ? 1.0 : 0.0;
    dt_world_allreduce(w, &ok, 1, DT_F64, DT_REDUCE_MIN, "the all-reduce's setup");
    return ok > 0;
}

/* hier's levels over w's nodes (collective over w): 0 with *out ready, 1 when the
 * nodes hold different numbers of ranks, or, with `two_levels`, there are not 2 nodes
 * of 2 ranks or more (err says so), -1 on an error. */
static int levels_create(dt_allreduce_levels **out, const dt_world *w, dt_comm_dtype dtype,
                         size_t max_floats, int two_levels, dt_error *err) {
    *out = NULL;
    dt_allreduce_levels *l = calloc(1, sizeof *l);
    if (!l) return dt_error_set(err, "out of memory for the two-level all-reduce");
    l->nodes = dt_world_split_nodes(w, &l->local, &l->cross);
    if (l->nodes == 0 || (two_levels && (l->nodes < 2 || l->local.size < 2))) {
        dt_error_set(err, l->nodes ? "one node, or one rank a node"
                                   : "the nodes hold different numbers of ranks");
        levels_free(l);
        return 1;
    }
    l->in_node = calloc(1, sizeof *l->in_node);
    l->between = calloc(1, sizeof *l->between);
    /* agreed first: the node's shared window below is made by all its ranks or none */
    if (!all_made(w, l->in_node && l->between)) {
        dt_error_set(err, "out of memory for the two-level all-reduce%s",
                     l->in_node && l->between ? " (on another rank)" : "");
        levels_free(l);
        return -1;
    }
    /* in a node: shared memory where MPI may use it (the ranks agree), else the ring;
     * a node of one rank has nothing to sum (no buffer) */
    dt_error why;
    const size_t in_node = l->local.size > 1 ? max_floats : 0;
    /* every node must take the same road: shared memory and the ring own different
     * segments (hier's step between the nodes pairs a segment with its namesakes). On
     * emulated hosts Open MPI makes the window in the first namespace only (vader's
     * segments are named by the host name they share): there every node rings */
    int shm = l->local.size == 1 || !dt_allreduce_init(l->in_node, &l->local, DT_ALLREDUCE_SHM,
                                                       DT_COMM_FP32, in_node, &why);
    if (!all_made(w, shm) && shm && l->local.size > 1) {
        dt_allreduce_free(l->in_node); /* the node's ranks agree: they free it together */
        shm = 0;
    }
    int made = shm || !dt_allreduce_init(l->in_node, &l->local, DT_ALLREDUCE_RING, DT_COMM_FP32,
                                         in_node, err);
    /* a rank's segment between the nodes: about max_floats / L, more where shared
     * memory aligns its segments to cache lines; the whole is a safe bound (the ring's
     * scratch is a 1/nodes part of it) */
    made = made &&
           !dt_allreduce_init(l->between, &l->cross, DT_ALLREDUCE_RING, dtype, max_floats, err);
    if (!all_made(w, made)) { /* every rank frees the levels: their windows together */
        if (made) dt_error_set(err, "another rank could not set up the two-level all-reduce");
        levels_free(l);
        return -1;
    }
    *out = l;
    return 0;
}

int dt_allreduce_init(dt_allreduce *ar, const dt_world *w, dt_allreduce_algo algo,
                      dt_comm_dtype dtype, size_t max_floats, dt_error *err) {
    memset(ar, 0, sizeof *ar);
    if (algo == DT_ALLREDUCE_HIER) {
        ar->world = w;
        ar->algo = algo;
        ar->dtype = dtype;
        snprintf(ar->used, sizeof ar->used, "hier: one rank");
        if (w->size == 1) return 0;
        const int rc = levels_create(&ar->levels, w, dtype, max_floats, 0, err);
        if (rc > 0) {
            dt_error why = *err;
            dt_error_set(err, "--allreduce hier: %s", why.msg);
        }
        if (rc) return -1;
        const dt_allreduce_levels *l = ar->levels;
        /* the 16-bit wire is the link's between nodes; on one node nothing would use it,
         * and a run recorded as bf16 would have summed in fp32 */
        if (dtype != DT_COMM_FP32 && l->nodes == 1) {
            dt_error_set(err,
                         "--allreduce hier --comm-dtype %s: the %d ranks share one node, where "
                         "hier sums in fp32 (%s) and sends nothing between nodes, the only "
                         "place its 16-bit wire is used; give --allreduce ring for %s here",
                         dt_comm_dtype_name(dtype), w->size, dt_allreduce_name(l->in_node->algo),
                         dt_comm_dtype_name(dtype));
            levels_free(ar->levels);
            ar->levels = NULL;
            return -1;
        }
        char wire[48] = "";
        if (dtype != DT_COMM_FP32)
            snprintf(wire, sizeof wire, ", %s between nodes", dt_comm_dtype_name(dtype));
        if (l->local.size == 1)
            snprintf(ar->used, sizeof ar->used, "hier: %d nodes x 1 rank, the ring between them%s",
                     l->nodes, wire);
        else
            snprintf(ar->used, sizeof ar->used, "hier: %d nodes x %d ranks, %s in a node%s",
                     l->nodes, l->local.size, dt_allreduce_name(l->in_node->algo), wire);
        return 0;
    }
    if (dtype != DT_COMM_FP32 && algo == DT_ALLREDUCE_MPI) {
        dt_error_set(err,
                     "--comm-dtype %s needs dtrain's ring all-reduce (--allreduce ring or "
                     "auto): MPI has no %s sum",
                     dt_comm_dtype_name(dtype), dt_comm_dtype_name(dtype));
        return -1;
    }
    if (dtype != DT_COMM_FP32 && algo == DT_ALLREDUCE_SHM) {
        dt_error_set(err,
                     "--comm-dtype %s needs dtrain's ring all-reduce (--allreduce ring or "
                     "auto): shared memory gains nothing from rounding",
                     dt_comm_dtype_name(dtype));
        return -1;
    }
    ar->world = w;
    ar->algo = algo;
    ar->dtype = dtype;
    snprintf(ar->used, sizeof ar->used, "%s",
             dtype != DT_COMM_FP32 ? "ring" : dt_allreduce_name(algo));
    if (dtype == DT_COMM_FP32 && w->size > 1 &&
        (algo == DT_ALLREDUCE_AUTO || algo == DT_ALLREDUCE_SHM)) {
        dt_error why;
        const int rc = dt_shm_allreduce_create(&ar->shm, w, &why);
        if (rc < 0 || (rc > 0 && algo == DT_ALLREDUCE_SHM)) {
            dt_error_set(err, "%s%s", rc > 0 ? "--allreduce shm: " : "", why.msg);
            return -1;
        }
        if (rc == 0 && algo == DT_ALLREDUCE_SHM) return 0; /* the ring's buffers are not needed */
        if (rc == 0) ar->candidates[ar->n_candidates++] = DT_ALLREDUCE_SHM;
        /* no shared memory for all: hier where the ranks span nodes, several on each */
        if (rc > 0) {
            dt_error no_levels;
            const int lv = levels_create(&ar->levels, w, dtype, max_floats, 1, &no_levels);
            if (lv < 0) return dt_error_set(err, "%s", no_levels.msg);
            if (lv == 0) ar->candidates[ar->n_candidates++] = DT_ALLREDUCE_HIER;
        }
        ar->candidates[ar->n_candidates++] = DT_ALLREDUCE_RING;
        ar->candidates[ar->n_candidates++] = DT_ALLREDUCE_MPI;
        if (rc == 0)
            snprintf(ar->used, sizeof ar->used, "shm, ring or mpi by measure");
        else if (ar->levels)
            snprintf(ar->used, sizeof ar->used, "hier, ring or mpi by measure (no shm: %.50s)",
                     why.msg);
        else
            snprintf(ar->used, sizeof ar->used, "ring or mpi by measure (no shm: %.60s)", why.msg);
    }
    ar->chunk_floats = 1 << 16; /* 256 KiB */
    /* one segment, and one more float; SIZE_MAX stays SIZE_MAX (refused below) */
    const size_t part = max_floats / (size_t)w->size;
    ar->scratch_floats = part < SIZE_MAX ? part + 1 : part;
    if (ar->scratch_floats > SIZE_MAX / sizeof(float)) /* its bytes would wrap around */
        dt_error_set(err, "cannot allocate the ring all-reduce buffer: %zu floats is too many",
                     ar->scratch_floats);
    else
        ar->scratch = dt_alloc(sizeof(float) * ar->scratch_floats, "ring all-reduce buffer", err);
    if (ar->scratch && dtype != DT_COMM_FP32) {
        ar->wire_send = dt_alloc(sizeof(uint16_t) * ar->scratch_floats, "ring send buffer", err);
        ar->wire_recv = ar->wire_send ? dt_alloc(sizeof(uint16_t) * ar->scratch_floats,
                                                 "ring receive buffer", err)
                                      : NULL;
    }
    const int made = ar->scratch && (dtype == DT_COMM_FP32 || ar->wire_recv);
    /* with a shared window or hier's levels made (auto), the ranks free them together */
    const int together = ar->shm || ar->levels;
    if (together ? !all_made(w, made) : !made) {
        if (made) dt_error_set(err, "another rank could not allocate its all-reduce buffers");
        dt_allreduce_free(ar);
        return -1;
    }
    return 0;
}

void dt_allreduce_free(dt_allreduce *ar) {
    dt_shm_allreduce_destroy(ar->shm);
    ar->shm = NULL;
    levels_free(ar->levels);
    ar->levels = NULL;
    dt_free(ar->scratch);
    dt_free(ar->wire_send);
    dt_free(ar->wire_recv);
    ar->scratch = NULL;
    ar->wire_send = ar->wire_recv = NULL;
}

static void segment(size_t n, int parts, int i, size_t *begin, size_t *count) {
    dt_allreduce_segment(n, parts, i, 1, begin, count);
}

/* One ring step: post the receives of rc values from the left neighbour into recv and
 * the sends of sc values from send to the right, chunk by chunk; values are of MPI type
 * `type`, `elem` bytes each; requests go to reqs[0 .. *nr) (receives, in chunk order) and
 * reqs[*nr .. *nr + *ns) (sends). */
static void post_step(dt_allreduce *ar, void *recv, size_t rc, const void *send, size_t sc,
                      size_t chunk, MPI_Datatype type, size_t elem, int left, int right,
                      MPI_Request *reqs, int *nr, int *ns) {
    *nr = (int)((rc + chunk - 1) / chunk);
    *ns = (int)((sc + chunk - 1) / chunk);
    for (int k = 0; k < *nr; k++) {
        size_t off = (size_t)k * chunk, len = rc - off < chunk ? rc - off : chunk;
        DT_CHECK_MPI(MPI_Irecv((char *)recv + off * elem, (int)len, type, left, RING_TAG,
                               dt_world_mpi(ar->world), &reqs[k]));
    }
    for (int k = 0; k < *ns; k++) {
        size_t off = (size_t)k * chunk, len = sc - off < chunk ? sc - off : chunk;
        DT_CHECK_MPI(MPI_Isend((const char *)send + off * elem, (int)len, type, right, RING_TAG,
                               dt_world_mpi(ar->world), &reqs[*nr + k]));
        ar->bytes_sent += (long long)(len * elem);
    }
}

/* The chunk size that keeps a step within MAX_CHUNKS requests. */
static size_t ring_chunk(const dt_allreduce *ar, size_t n) {
    const size_t p = (size_t)ar->world->size, max_seg = (n + p - 1) / p;
    size_t chunk = ar->chunk_floats;
    if ((max_seg + chunk - 1) / chunk > MAX_CHUNKS) chunk = (max_seg + MAX_CHUNKS - 1) / MAX_CHUNKS;
    return chunk;
}

/* The ring's first half: after p-1 steps rank r holds the sum of segment (r+1) mod p
 * (ring_owned). */
static void ring_reduce_scatter(dt_allreduce *ar, float *buf, size_t n) {
    const dt_world *w = ar->world;
    const int p = w->size, r = w->rank, right = (r + 1) % p, left = (r + p - 1) % p;
    MPI_Request reqs[2 * MAX_CHUNKS];
    const size_t chunk = ring_chunk(ar, n);
    for (int s = 0; s < p - 1; s++) {
        size_t sb, sc, rb, rc;
        segment(n, p, (r - s + p) % p, &sb, &sc);
        segment(n, p, (r - s - 1 + 2 * p) % p, &rb, &rc);
        int nr, ns;
        post_step(ar, ar->scratch, rc, buf + sb, sc, chunk, MPI_FLOAT, sizeof(float), left, right,
                  reqs, &nr, &ns);
        for (int k = 0; k < nr; k++) { /* reduce chunk k while later ones travel */
            dt_world_wait_all(w, 1, &reqs[k], left, "ring all-reduce");
            size_t off = (size_t)k * chunk, len = rc - off < chunk ? rc - off : chunk;
            float *dst = buf + rb + off;
            const float *src = ar->scratch + off;
            for (size_t i = 0; i < len; i++) dst[i] += src[i];
        }
        dt_world_wait_all(w, ns, reqs + nr, right, "ring all-reduce");
    }
}

/* The segment rank r holds after ring_reduce_scatter, and gives in ring_all_gather. */
static void ring_owned(const dt_allreduce *ar, size_t n, size_t *begin, size_t *count) {
    segment(n, ar->world->size, (ar->world->rank + 1) % ar->world->size, begin, count);
}

/* The ring's second half: each rank's owned segment passed around, straight into place. */
static void ring_all_gather(dt_allreduce *ar, float *buf, size_t n) {
    const dt_world *w = ar->world;
    const int p = w->size, r = w->rank, right = (r + 1) % p, left = (r + p - 1) % p;
    MPI_Request reqs[2 * MAX_CHUNKS];
    const size_t chunk = ring_chunk(ar, n);
    for (int s = 0; s < p - 1; s++) {
        size_t sb, sc, rb, rc;
        segment(n, p, (r + 1 - s + p) % p, &sb, &sc);
        segment(n, p, (r - s + p) % p, &rb, &rc);
        int nr, ns;
        post_step(ar, buf + rb, rc, buf + sb, sc, chunk, MPI_FLOAT, sizeof(float), left, right,
                  reqs, &nr, &ns);
        dt_world_wait_all(w, nr + ns, reqs, left, "ring all-reduce");
    }
}

static void ring(dt_allreduce *ar, float *buf, size_t n) {
    ring_reduce_scatter(ar, buf, n);
    ring_all_gather(ar, buf, n);
}

/* The ring with 16-bit values on the wire (comm_dtype.h): each rank adds what it
 * receives into its fp32 buffer, so sums are fp32 and only transfers round. The owner
 * of each reduced segment rounds it as the others will receive it, so every rank ends
 * with the same values. */
static void ring_wire(dt_allreduce *ar, float *buf, size_t n) {
    const dt_world *w = ar->world;
    const int p = w->size, r = w->rank, right = (r + 1) % p, left = (r + p - 1) % p;
    MPI_Request reqs[2 * MAX_CHUNKS];
    const size_t chunk = ring_chunk(ar, n);
    for (int s = 0; s < p - 1; s++) {
        size_t sb, sc, rb, rc;
        segment(n, p, (r - s + p) % p, &sb, &sc);
        segment(n, p, (r - s - 1 + 2 * p) % p, &rb, &rc);
        dt_comm_pack(ar->dtype, ar->wire_send, buf + sb, sc);
        int nr, ns;
        post_step(ar, ar->wire_recv, rc, ar->wire_send, sc, chunk, MPI_UINT16_T, sizeof(uint16_t),
                  left, right, reqs, &nr, &ns);
        for (int k = 0; k < nr; k++) {
            dt_world_wait_all(w, 1, &reqs[k], left, "ring all-reduce");
            size_t off = (size_t)k * chunk, len = rc - off < chunk ? rc - off : chunk;
            dt_comm_unpack_add(ar->dtype, buf + rb + off, ar->wire_recv + off, len);
        }
        dt_world_wait_all(w, ns, reqs + nr, right, "ring all-reduce");
    }
    size_t ob, oc;
    segment(n, p, (r + 1) % p, &ob, &oc);
    dt_comm_round(ar->dtype, buf + ob, oc);
    for (int s = 0; s < p - 1; s++) {
        size_t sb, sc, rb, rc;
        segment(n, p, (r + 1 - s + p) % p, &sb, &sc);
        segment(n, p, (r - s + p) % p, &rb, &rc);
        dt_comm_pack(ar->dtype, ar->wire_send, buf + sb, sc);
        int nr, ns;
        post_step(ar, ar->wire_recv, rc, ar->wire_send, sc, chunk, MPI_UINT16_T, sizeof(uint16_t),
                  left, right, reqs, &nr, &ns);
        dt_world_wait_all(w, nr + ns, reqs, left, "ring all-reduce");
        dt_comm_unpack(ar->dtype, buf + rb, ar->wire_recv, rc);
    }
}

/* What a ring sends per rank for n floats, 2(P-1)/P n: the bytes counted for shm and
 * mpi, whose own traffic is not seen (a model, so that reports compare across
 * algorithms). */
static long long ring_volume(int p, size_t n) {
    return (long long)(2.0 * (p - 1) / p * (double)n * sizeof(float));
}

/* hier's step between nodes on the segment a rank holds reduced (dt_shm_segment_fn) */
static void between_nodes(void *levels, float *segment, size_t count) {
    dt_allreduce_levels *l = levels;
    dt_allreduce_sum(l->between, segment, count);
}

/* hier (allreduce.h): in the node a reduce-scatter (shared memory, else the ring), each
 * rank's reduced segment all-reduced between the nodes, then an all-gather in the node:
 * 2(L-1)/L of the buffer through the node's memory or links, as the simulator's tree:K
 * counts it (until 2026-11-28 two whole sums, twice that). */
static void hier(dt_allreduce *ar, float *buf, size_t n) {
    dt_allreduce_levels *l = ar->levels;
    dt_allreduce *in = l->in_node;
    const long long before = in->bytes_sent + l->between->bytes_sent;
    if (l->local.size == 1) {
        dt_allreduce_sum(l->between, buf, n);
    } else if (in->algo == DT_ALLREDUCE_SHM) {
        dt_shm_allreduce_sum_between(in->shm, buf, n, between_nodes, l);
        in->bytes_sent += ring_volume(l->local.size, n);
    } else {
        size_t b, c;
        ring_reduce_scatter(in, buf, n);
        ring_owned(in, n, &b, &c);
        between_nodes(l, buf + b, c);
        ring_all_gather(in, buf, n);
    }
    ar->bytes_sent += in->bytes_sent + l->between->bytes_sent - before;
}

/* One call of a concrete algorithm (shm only where init made its window). */
static void run(dt_allreduce *ar, dt_allreduce_algo algo, float *buf, size_t n) {
    const dt_world *w = ar->world;
    if (algo == DT_ALLREDUCE_HIER) {
        hier(ar, buf, n);
        return;
    }
    if (algo == DT_ALLREDUCE_SHM) {
        dt_shm_allreduce_sum(ar->shm, buf, n);
        ar->bytes_sent += ring_volume(w->size, n);
        return;
    }
    if (algo == DT_ALLREDUCE_RING) {
        ring(ar, buf, n);
        return;
    }
    MPI_Request req;
    DT_CHECK_MPI(MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM,
                                dt_world_mpi(ar->world), &req));
    dt_world_wait_all(w, 1, &req, (w->rank + 1) % w->size, "MPI_Allreduce");
    ar->bytes_sent += ring_volume(w->size, n);
}

/* --allreduce auto, as Horovod's autotuning: every call size (a DDP bucket, a size of
 * the benchmark) has its own tuner. It first runs the candidates in turn, round after
 * round, timing each call; every timing is agreed over the ranks (an all-reduce of
 * one double), so every rank holds the same figures and makes the same choices: the
 * order of trials and the winner never diverge. A timed call starts after a barrier
 * (in training the ranks reach a bucket at different times, tens of ms apart at the
 * first step, and that skew is no algorithm's cost), and the figure is the maximum over
 * the ranks: the call is done when the last rank has the sum. Round 0 warms each candidate up
 * (first touches, MPI's buffers); after round 1, candidates over PRUNE times the best
 * in both their calls are dropped (MPI's all-reduce of 44.7 MB took 0.2-1.5 s here,
 * against 5-40 ms), never on one call: on the busy machine single calls of shm took
 * 2-6 ms against its 4 us at 16 and 64 KiB. The others run until the counted calls
 * add up to BUDGET_S (at least TUNE_ROUNDS - 1 rounds, at most MAX_ROUNDS - 1) and
 * the fastest by its best call is chosen. Each candidate's turn is two calls in a row,
 * only the second timed: a call right after another algorithm's (MPI's, at 64 MiB, runs
 * through every cache) is not what the chosen one's calls in a row will take, and with
 * single interleaved calls auto chose the ring at 64 MiB and at 4 KiB in runs where shm
 * then ran 1.6-2.4x faster for the rest of the run (docs/distributed.md). Four counted
 * rounds, not two: shm's calls at 64 MiB swing 6-20 ms within a run.
 * After that the chosen one is watched: the last SAMPLES calls of every WATCH are timed
 * the same way, and if their agreed median moved more than SHIFT times from the time
 * the choice was made on, the size is measured again. Before them, each runner-up that
 * measured within SHIFT of the choice does two of the WATCH calls, the second timed
 * (real calls: the sum is the same), and if one runs faster than the chosen one's median by
 * RUNNER_UP, the size is measured again too: a choice made in a slow minute of the
 * winner is not kept for the whole run. That costs at most two calls at SHIFT times the
 * chosen one's per runner-up per WATCH calls (< 2%). Untimed calls take no barrier: at
 * 4 KiB one costs as much as the all-reduce. */
enum { TUNE_ROUNDS = 5, MAX_ROUNDS = 8, PRUNE = 8, WATCH = 128, SAMPLES = DT_AUTO_SAMPLES };
/* Small sizes take more rounds, until the counted calls add up to this: a 16 KiB call
 * takes microseconds, and the best of two is at the mercy of one interruption. */
static const double BUDGET_S = 1e-3;
static const double SHIFT = 2.0;
static const double RUNNER_UP = 1.25;

static dt_allreduce_tuner *tuner_of(dt_allreduce *ar, size_t n) {
    for (int i = 0; i < DT_AUTO_SIZES; i++) {
        dt_allreduce_tuner *t = &ar->tuners[i];
        if (t->floats == n) return t;
        if (t->floats == 0) {
            memset(t, 0, sizeof *t);
            t->floats = n;
            t->chosen = -1;
            return t;
        }
    }
    return NULL; /* more sizes than tuners: the rule below */
}

/* The slowest rank's time from the barrier: the call is over when every rank holds the
 * sum, and the step waits for the last. (The fastest rank's time, used before, favoured
 * algorithms that finish unevenly: on 2 hosts x 2 ranks MPI's all-reduce of 2.8 MB was
 * done on its first rank in 26 ms and on its last in 69, the ring on all in 35, and auto
 * chose MPI's.) The same figure on every rank. */
static double agreed(const dt_allreduce *ar, double seconds) {
    dt_world_allreduce(ar->world, &seconds, 1, DT_F64, DT_REDUCE_MAX, "--allreduce auto's timing");
    return seconds;
}

/* Forgets this size's choice: its calls are measured again from the warm-up. */
static void measure_again(dt_allreduce_tuner *t) {
    t->chosen = -1;
    t->round = t->next = t->warmed = 0;
    t->spent_s = 0;
    for (int c = 0; c < DT_AUTO_CANDIDATES; c++) t->best_s[c] = 0;
}

/* One call of candidate c after a barrier: its agreed time. */
static double timed_call(dt_allreduce *ar, int c, float *buf, size_t n) {
    dt_world_barrier(ar->world, "--allreduce auto's measurement");
    const double t0 = dt_now();
    run(ar, ar->candidates[c], buf, n);
    return agreed(ar, dt_now() - t0);
}

/* Watching the chosen algorithm (see above). */
static void watch_call(dt_allreduce *ar, dt_allreduce_tuner *t, float *buf, size_t n) {
    const long k = t->calls++ % WATCH;
    /* the runner-ups' slots: the calls just before the samples, two per candidate (an
     * untimed one, then a timed one, as when measuring) */
    const long tries_from = WATCH - SAMPLES - 2 * DT_AUTO_CANDIDATES;
    if (k >= tries_from && k < WATCH - SAMPLES) {
        const int c = (int)((k - tries_from) / 2);
        if (c < ar->n_candidates && c != t->chosen && t->best_s[c] > 0 &&
            t->measured_s[c] < SHIFT * t->chosen_s) {
            if ((k - tries_from) % 2 == 0)
                run(ar, ar->candidates[c], buf, n);
            else
                t->tried_s[c] = timed_call(ar, c, buf, n);
            return;
        }
    }
    if (k < WATCH - SAMPLES) {
        run(ar, ar->candidates[t->chosen], buf, n);
        return;
    }
    dt_world_barrier(ar->world, "--allreduce auto's measurement");
    const double t0 = dt_now();
    run(ar, ar->candidates[t->chosen], buf, n);
    t->window[k - (WATCH - SAMPLES)] = dt_now() - t0;
    if (k < WATCH - 1) return;
    double sorted[SAMPLES];
    memcpy(sorted, t->window, sizeof sorted);
    const double now = agreed(ar, dt_median(sorted, SAMPLES));
    t->watched_s = now;
    int again = now > SHIFT * t->chosen_s || now * SHIFT < t->chosen_s;
    for (int c = 0; c < ar->n_candidates; c++) {
        if (t->tried_s[c] > 0 && t->tried_s[c] * RUNNER_UP < now) again = 1;
        t->tried_s[c] = 0;
    }
    if (again) measure_again(t);
}

static void tune_call(dt_allreduce *ar, dt_allreduce_tuner *t, float *buf, size_t n) {
    if (t->chosen >= 0) {
        watch_call(ar, t, buf, n);
        return;
    }
    /* measuring: the next candidate not pruned, in turn */
    while (t->best_s[t->next] < 0) t->next++;
    const int c = t->next;
    if (!t->warmed) { /* the turn's first call, after another algorithm's: untimed */
        run(ar, ar->candidates[c], buf, n);
        t->warmed = 1;
        return;
    }
    t->warmed = 0;
    const double dt = timed_call(ar, c, buf, n);
    if (t->round == 0) {
        t->warm_s[c] = dt; /* the warm-up: only for dropping */
    } else {
        if (t->best_s[c] == 0 || dt < t->best_s[c]) t->best_s[c] = dt;
        t->spent_s += dt;
    }
    do t->next++;
    while (t->next < ar->n_candidates && t->best_s[t->next] < 0);
    if (t->next < ar->n_candidates) return;
    /* a round is over */
    double best = 0;
    for (int k = 0; k < ar->n_candidates; k++)
        if (t->best_s[k] > 0 && (best == 0 || t->best_s[k] < best)) best = t->best_s[k];
    if (t->round == 1) /* drop what was slow twice: one call may be interrupted */
        for (int k = 0; k < ar->n_candidates; k++)
            if (t->best_s[k] > PRUNE * best && t->warm_s[k] > PRUNE * best)
                t->best_s[k] = -t->best_s[k];
    t->next = 0;
    if (++t->round < TUNE_ROUNDS || (t->spent_s < BUDGET_S && t->round < MAX_ROUNDS)) {
        while (t->best_s[t->next] < 0) t->next++;
        return;
    }
    int chosen = 0;
    for (int k = 1; k < ar->n_candidates; k++)
        if (t->best_s[k] > 0 && (t->best_s[chosen] <= 0 || t->best_s[k] < t->best_s[chosen]))
            chosen = k;
    for (int k = 0; k < ar->n_candidates; k++) t->measured_s[k] = fabs(t->best_s[k]);
    t->chosen = chosen;
    t->chosen_s = t->watched_s = t->best_s[chosen];
    t->calls = 0;
    t->tunings++;
}

void dt_allreduce_sum(dt_allreduce *ar, float *buf, size_t n) {
    const dt_world *w = ar->world;
    if (w->size == 1 || n == 0) return;
    /* a 16-bit wire: the ring's (init refused mpi and shm with one); hier's is between
     * the nodes only, in its `between` level */
    if (ar->dtype != DT_COMM_FP32 && ar->algo != DT_ALLREDUCE_HIER) {
        ring_wire(ar, buf, n);
        return;
    }
    dt_allreduce_algo algo = ar->algo;
    if (algo == DT_ALLREDUCE_AUTO) {
        dt_allreduce_tuner *t = tuner_of(ar, n);
        if (t) {
            tune_call(ar, t, buf, n);
            return;
        }
        algo = ar->shm                                  ? DT_ALLREDUCE_SHM
               : n * sizeof(float) >= DT_RING_MIN_BYTES ? DT_ALLREDUCE_RING
                                                        : DT_ALLREDUCE_MPI;
    }
    run(ar, algo, buf, n);
}

void dt_allreduce_sum_with(dt_allreduce *ar, dt_allreduce_algo algo, float *buf, size_t n) {
    int found = 0;
    for (int k = 0; k < ar->n_candidates; k++) found |= ar->candidates[k] == algo;
    if (!found || ar->dtype != DT_COMM_FP32)
        dt_world_abort(ar->world, "all-reduce: %s is not one of auto's candidates here",
                       dt_allreduce_name(algo));
    if (ar->world->size > 1 && n > 0) run(ar, algo, buf, n);
}

int dt_allreduce_auto_chosen(const dt_allreduce *ar, size_t n, dt_allreduce_algo *algo) {
    for (int i = 0; i < DT_AUTO_SIZES && ar->tuners[i].floats; i++) {
        const dt_allreduce_tuner *t = &ar->tuners[i];
        if (t->floats != n || t->chosen < 0) continue;
        *algo = ar->candidates[t->chosen];
        return 1;
    }
    return 0;
}

void dt_allreduce_auto_report(const dt_allreduce *ar, char *out, size_t size) {
    size_t used = 0;
    out[0] = 0;
    for (int i = 0; i < DT_AUTO_SIZES && ar->tuners[i].floats && used < size; i++) {
        const dt_allreduce_tuner *t = &ar->tuners[i];
        int k = snprintf(out + used, size - used, "%s%.4g MB: ", i ? "; " : "",
                         (double)t->floats * sizeof(float) * 1e-6);
        used += k > 0 ? (size_t)k : 0;
        if (t->tunings == 0) {
            k = snprintf(out + used, size > used ? size - used : 0, "measuring");
            used += k > 0 ? (size_t)k : 0;
            continue;
        }
        for (int c = 0; c < ar->n_candidates && used < size; c++) {
            k = snprintf(out + used, size - used, "%s %.3f%s ms, ",
                         dt_allreduce_name(ar->candidates[c]), t->measured_s[c] * 1e3,
                         t->best_s[c] < 0 ? " (dropped)" : "");
            used += k > 0 ? (size_t)k : 0;
        }
        if (used < size) {
            k = snprintf(out + used, size - used, "-> %s (%d measurement%s, now %.3f ms)",
                         dt_allreduce_name(ar->candidates[t->chosen]), t->tunings,
                         t->tunings > 1 ? "s" : "", t->watched_s * 1e3);
            used += k > 0 ? (size_t)k : 0;
        }
    }
}
