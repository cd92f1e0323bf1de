#include "parallel/shm_allreduce.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/timer.h"
#include "parallel/overlap.h"
#include "world_mpi.h"

enum {
    LINE = 64,               /* bytes: one counter per cache line, no false sharing */
    SEG_ALIGN = 16,          /* floats: segments start on cache lines */
    SETS = 2,                /* slot sets: round k+1 fills one while round k is read */
    DEFAULT_ROUND = 1 << 17, /* floats (512 KiB): fastest of 16 Ki .. 512 Ki floats here */
};

/* A rank's counters, at the start of its part of the window: the number of rounds it
 * has copied in (posted), reduced its segment of (reduced), and copied out (done). */
typedef struct counters {
    _Atomic uint64_t posted;
    char pad0[LINE - sizeof(uint64_t)];
    _Atomic uint64_t reduced;
    char pad1[LINE - sizeof(uint64_t)];
    _Atomic uint64_t done;
    char pad2[LINE - sizeof(uint64_t)];
} counters;

struct dt_shm_allreduce {
    const dt_world *world;
    MPI_Win win;
    int p, r;
    size_t seg_cap;      /* floats per slot: the largest segment of a round */
    size_t round_floats; /* floats per round, at most p * seg_cap */
    uint64_t round;      /* rounds this rank has finished, over all calls */
    counters **ctl;      /* [p]: every rank's counters */
    float **slots;       /* [p]: every rank's slots, SETS x (p + 1) x seg_cap */
    int naps;            /* waits may sleep (ranks outnumber cores) */
    double spin_s;       /* waits spin this long before they yield */
    dt_shm_stats stats;  /* where the time went, for the benchmark */
};

int dt_shm_allowed_by_btl(const char *btl) {
    if (!btl || !*btl) return 1;
    const int excluding = btl[0] == '^';
    int named = 0;
    const char *s = btl + excluding;
    while (*s) {
        size_t len = strcspn(s, ",");
        if ((len == 5 && !strncmp(s, "vader", 5)) || (len == 2 && !strncmp(s, "sm", 2))) named = 1;
        s += len;
        if (*s == ',') s++;
    }
    return excluding ? !named : named;
}

/* Slot j of set `set` in rank k's part: rank k's values of segment j (j != k), or,
 * for j == p, rank k's reduced segment. */
static float *slot(const dt_shm_allreduce *s, int k, uint64_t set, int j) {
    return s->slots[k] + ((size_t)set * (size_t)(s->p + 1) + (size_t)j) * s->seg_cap;
}

static size_t part_bytes(int p, size_t seg_cap) {
    return sizeof(counters) + sizeof(float) * (size_t)SETS * (size_t)(p + 1) * seg_cap;
}

static size_t round_up(size_t n, size_t to) {
    return (n + to - 1) / to * to;
}

int dt_shm_allreduce_create(dt_shm_allreduce **out, const dt_world *w, dt_error *err) {
    *out = NULL;
    int local = 0, spans = 0;
    dt_world_hosts(w, &local, &spans);
    const int btl_ok = dt_shm_allowed_by_btl(getenv("OMPI_MCA_btl"));
    double ok = !spans && btl_ok; /* every rank must take the same road */
    dt_world_allreduce_doubles(w, &ok, 1, DT_REDUCE_MIN);
    if (!ok) {
        if (spans)
            dt_error_set(err, "the ranks run on more than one host");
        else if (!btl_ok)
            dt_error_set(err, "MPI was told not to use shared memory (OMPI_MCA_btl=%s)",
                         getenv("OMPI_MCA_btl"));
        else
            dt_error_set(err, "another rank was told not to use shared memory (OMPI_MCA_btl)");
        return 1;
    }
    dt_shm_allreduce *s = calloc(1, sizeof *s);
    if (!s) return dt_error_set(err, "out of memory for the shared-memory all-reduce");
    s->world = w;
    s->p = w->size;
    s->r = w->rank;
    s->seg_cap = round_up((DEFAULT_ROUND + (size_t)s->p - 1) / (size_t)s->p, SEG_ALIGN);
    s->round_floats = DEFAULT_ROUND;
    /* Ranks with a core each spin 100 us before they yield and never nap: under EEVDF a
     * yield hands the core to any runnable task for a slice, and a 20 us nanosleep took
     * 150 us on average here (4.6 ms at worst). After only 64 polls, nearly every wait
     * of a 44.7 MB all-reduce yielded (70-117 a call), and with other work on the
     * machine the call took 26-43 ms against 11-21 ms this way (docs/distributed.md).
     * Ranks that outnumber the cores yield at once and nap: a spinning rank holds the
     * core its peer needs. */
    const int oversubscribed = local > dt_overlap_host_cores();
    s->naps = oversubscribed;
    s->spin_s = oversubscribed ? 0.0 : 100e-6;
    s->ctl = calloc((size_t)s->p, sizeof *s->ctl);
    s->slots = calloc((size_t)s->p, sizeof *s->slots);
    if (!s->ctl || !s->slots) {
        free(s->ctl);
        free(s->slots);
        free(s);
        return dt_error_set(err, "out of memory for the shared-memory all-reduce");
    }
    MPI_Info info;
    DT_CHECK_MPI(MPI_Info_create(&info));
    /* each rank's part on its own pages (first touch by its owner, below) */
    DT_CHECK_MPI(MPI_Info_set(info, "alloc_shared_noncontig", "true"));
    void *base = NULL;
    int rc = MPI_Win_allocate_shared((MPI_Aint)part_bytes(s->p, s->seg_cap), 1, info,
                                     dt_world_mpi(w), &base, &s->win);
    MPI_Info_free(&info);
    /* a failure is the same on every rank (MPI decides from the communicator) but the
     * answer is agreed anyway: a rank must never wait for a window its peer lacks */
    double have = rc == MPI_SUCCESS;
    dt_world_allreduce_doubles(w, &have, 1, DT_REDUCE_MIN);
    int *model = NULL, flag = 0;
    if (have) {
        DT_CHECK_MPI(MPI_Win_get_attr(s->win, MPI_WIN_MODEL, &model, &flag));
        /* plain loads and stores (C11 atomics) need the unified memory model */
        double unified = flag && *model == MPI_WIN_UNIFIED;
        dt_world_allreduce_doubles(w, &unified, 1, DT_REDUCE_MIN);
        if (!unified) have = 0;
    }
    if (!have) {
        if (rc == MPI_SUCCESS) MPI_Win_free(&s->win);
        free(s->ctl);
        free(s->slots);
        free(s);
        dt_error_set(err, rc == MPI_SUCCESS
                              ? "MPI's shared window does not have the unified memory model"
                              : "MPI could not make a shared-memory window over the ranks");
        return 1;
    }
    for (int k = 0; k < s->p; k++) {
        MPI_Aint size = 0;
        int disp = 0;
        void *part = NULL;
        DT_CHECK_MPI(MPI_Win_shared_query(s->win, k, &size, &disp, &part));
        s->ctl[k] = part;
        s->slots[k] = (float *)((char *)part + sizeof(counters));
    }
    counters *mine = s->ctl[s->r];
    atomic_init(&mine->posted, 0);
    atomic_init(&mine->reduced, 0);
    atomic_init(&mine->done, 0);
    memset(s->slots[s->r], 0, part_bytes(s->p, s->seg_cap) - sizeof(counters));
    dt_world_barrier(w, "the shared-memory all-reduce's window");
    /* Map the peers' parts into this process now, a read per page: else the first calls
     * of each slot set fault them in (a first 4 KiB all-reduce took 0.1 ms against 3 us,
     * twice, once per set, and --allreduce auto dropped shm there). */
    volatile const char *page;
    char sum = 0;
    for (int k = 0; k < s->p; k++)
        if (k != s->r)
            for (size_t off = 0; off < part_bytes(s->p, s->seg_cap); off += 4096) {
                page = (const char *)s->ctl[k] + off;
                sum = (char)(sum + *page);
            }
    (void)sum;
    *out = s;
    return 0;
}

void dt_shm_allreduce_destroy(dt_shm_allreduce *s) {
    if (!s) return;
    MPI_Win_free(&s->win);
    free(s->ctl);
    free(s->slots);
    free(s);
}

void dt_shm_allreduce_set_naps(dt_shm_allreduce *s, int naps) {
    s->naps = naps;
}

void dt_shm_allreduce_set_spin(dt_shm_allreduce *s, double seconds) {
    s->spin_s = seconds;
}

void dt_shm_allreduce_set_round(dt_shm_allreduce *s, size_t floats) {
    const size_t most = s->seg_cap * (size_t)s->p;
    s->round_floats = floats < (size_t)s->p ? (size_t)s->p : floats > most ? most : floats;
}

/* Waits until every other rank's counter (at byte offset `which` in its counters) has
 * reached `at_least`: spinning first (64 polls, then for spin_s: the peer is usually
 * microseconds away), then yielding the core, then, where ranks outnumber cores,
 * sleeping in growing naps of up to NAP_MAX_NS after 1 ms (a waiting rank must not take
 * cycles from the peer it waits for), and ending the job after the world's timeout. */
static void wait_peers(dt_shm_allreduce *s, size_t which, uint64_t at_least, const char *stage) {
    enum { SPINS = 64, YIELD_NS = 1000000, NAP_MAX_NS = 200000 };
    for (int k = 0; k < s->p; k++) {
        if (k == s->r) continue;
        _Atomic uint64_t *c = (_Atomic uint64_t *)((char *)s->ctl[k] + which);
        if (atomic_load_explicit(c, memory_order_acquire) >= at_least) continue;
        s->stats.waits++;
        const double start = dt_now();
        long nap_ns = 20000;
        int yielded = 0, napped = 0;
        for (long spins = 1;; spins++) {
            if (atomic_load_explicit(c, memory_order_acquire) >= at_least) break;
            if (spins < SPINS) continue;
            const double waited = dt_now() - start;
            if (waited > s->world->timeout_s)
                dt_world_abort(s->world,
                               "shared-memory all-reduce (%s): no progress with rank %d for "
                               "%g s (it died or hangs)",
                               stage, dt_world_job_rank_of(s->world, k), s->world->timeout_s);
            if (waited < s->spin_s) continue; /* the peer is likely microseconds away */
            if (waited < YIELD_NS * 1e-9 || !s->naps) {
                if (!yielded) s->stats.yield_waits++, yielded = 1;
                sched_yield();
                continue;
            }
            if (!napped) s->stats.nap_waits++, napped = 1;
            s->stats.naps++;
            const struct timespec nap = {0, nap_ns};
            nanosleep(&nap, NULL);
            nap_ns = nap_ns * 2 < NAP_MAX_NS ? nap_ns * 2 : NAP_MAX_NS;
        }
        const double waited = dt_now() - start;
        s->stats.t_wait += waited;
        if (waited > s->stats.longest_wait) s->stats.longest_wait = waited;
    }
}

void dt_allreduce_segment(size_t n, int parts, int i, size_t align, size_t *begin, size_t *count) {
    const size_t seg = round_up((n + (size_t)parts - 1) / (size_t)parts, align),
                 b = seg * (size_t)i;
    *begin = b < n ? b : n;
    const size_t e = b + seg < n ? b + seg : n;
    *count = e > *begin ? e - *begin : 0;
}

/* out = the sum over ranks, in rank order, of their values of this segment; mine are
 * `own` (rank r's), the others' in their slots. Blocked so that each block's partial
 * sums stay in cache across the p passes. */
static void reduce_segment(const dt_shm_allreduce *s, uint64_t set, float *restrict own,
                           float *restrict out, size_t count) {
    enum { BLOCK = 2048 };
    for (size_t b0 = 0; b0 < count; b0 += BLOCK) {
        const size_t len = count - b0 < BLOCK ? count - b0 : BLOCK;
        const float *first = s->r == 0 ? own + b0 : slot(s, 0, set, s->r) + b0;
        const float *second = s->r == 1 ? own + b0 : slot(s, 1, set, s->r) + b0;
        float *restrict o = out + b0;
        for (size_t i = 0; i < len; i++) o[i] = first[i] + second[i];
        for (int k = 2; k < s->p; k++) {
            const float *restrict x = k == s->r ? own + b0 : slot(s, k, set, s->r) + b0;
            for (size_t i = 0; i < len; i++) o[i] += x[i];
        }
        memcpy(own + b0, o, sizeof(float) * len);
    }
}

void dt_shm_allreduce_sum(dt_shm_allreduce *s, float *buf, size_t n) {
    dt_shm_allreduce_sum_between(s, buf, n, NULL, NULL);
}

void dt_shm_allreduce_sum_between(dt_shm_allreduce *s, float *buf, size_t n,
                                  dt_shm_segment_fn between, void *ctx) {
    const int p = s->p, r = s->r;
    counters *mine = s->ctl[r];
    dt_shm_stats *st = &s->stats;
    st->calls++;
    for (size_t off = 0; off < n; off += s->round_floats) {
        const size_t len = n - off < s->round_floats ? n - off : s->round_floats;
        const uint64_t k = s->round, set = k % SETS;
        float *chunk = buf + off;
        double t0 = dt_now(), t1;
        /* this set was last read by the peers in round k - SETS */
        if (k >= SETS) wait_peers(s, offsetof(counters, done), k - SETS + 1, "slots free");
        t1 = dt_now(), st->t_phase[DT_SHM_WAIT_FREE] += t1 - t0, t0 = t1;
        for (int j = 0; j < p; j++) {
            if (j == r) continue;
            size_t b, c;
            dt_allreduce_segment(len, p, j, SEG_ALIGN, &b, &c);
            memcpy(slot(s, r, set, j), chunk + b, sizeof(float) * c);
        }
        atomic_store_explicit(&mine->posted, k + 1, memory_order_release);
        t1 = dt_now(), st->t_phase[DT_SHM_COPY_IN] += t1 - t0, t0 = t1;
        wait_peers(s, offsetof(counters, posted), k + 1, "values in");
        t1 = dt_now(), st->t_phase[DT_SHM_WAIT_IN] += t1 - t0, t0 = t1;
        size_t b, c;
        dt_allreduce_segment(len, p, r, SEG_ALIGN, &b, &c);
        reduce_segment(s, set, chunk + b, slot(s, r, set, p), c);
        if (between) { /* the peers copy the segment as `between` left it */
            between(ctx, chunk + b, c);
            memcpy(slot(s, r, set, p), chunk + b, sizeof(float) * c);
        }
        atomic_store_explicit(&mine->reduced, k + 1, memory_order_release);
        t1 = dt_now(), st->t_phase[DT_SHM_REDUCE] += t1 - t0, t0 = t1;
        wait_peers(s, offsetof(counters, reduced), k + 1, "sums out");
        t1 = dt_now(), st->t_phase[DT_SHM_WAIT_OUT] += t1 - t0, t0 = t1;
        for (int j = 0; j < p; j++) {
            if (j == r) continue;
            dt_allreduce_segment(len, p, j, SEG_ALIGN, &b, &c);
            memcpy(chunk + b, slot(s, j, set, p), sizeof(float) * c);
        }
        atomic_store_explicit(&mine->done, k + 1, memory_order_release);
        t1 = dt_now(), st->t_phase[DT_SHM_COPY_OUT] += t1 - t0;
        s->round = k + 1;
        st->rounds++;
    }
}

void dt_shm_allreduce_stats(dt_shm_allreduce *s, dt_shm_stats *out, int reset) {
    *out = s->stats;
    if (reset) memset(&s->stats, 0, sizeof s->stats);
}
