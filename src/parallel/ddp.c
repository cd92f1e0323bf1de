#include "parallel/ddp.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/stats.h"
#include "core/timer.h"

typedef struct bucket {
    size_t begin, count; /* range of the gradient buffer */
    size_t produced;     /* floats of it backward has written this step */
    double ready;        /* with a trace: when backward completed it this step */
} bucket;

/* --bucket-mb auto: the sizes tried, those of them that cut the buffer into different
 * numbers of buckets. The next step always goes to the candidate with the fewest
 * counted steps (the first among equals), so each is used until it counts one — until
 * the all-reduce has an algorithm for all of its call sizes (--allreduce auto measures
 * new sizes over their first calls: those steps say nothing about the bucket size) —
 * and then they take turns, to SAMPLES each; the median step time (begin of backward
 * to the end of the exchange, the slowest rank's) decides. After MAX_STEPS the best
 * measured so far. */
enum { BUCKET_CHOICES = 4, BUCKET_SAMPLES = 3, BUCKET_MAX_STEPS = 400 };
static const double bucket_choices_mib[BUCKET_CHOICES] = {1, 4, 25, 100};

typedef struct bucket_tuner {
    int n; /* candidates (1: every size cuts alike); 0: a fixed size in mib[0] */
    double mib[BUCKET_CHOICES];
    double step_s[BUCKET_CHOICES][BUCKET_SAMPLES];
    int counted[BUCKET_CHOICES];
    int current; /* the candidate the buckets are cut for */
    int chosen;  /* -1 while measuring */
    long steps;  /* steps while measuring */
    double t_begin;
    int ready; /* at this step's begin, every bucket size had its algorithm */
} bucket_tuner;

struct dt_ddp {
    const dt_world *world;
    dt_model *model;
    dt_allreduce ar;
    int overlap;
    bucket *buckets; /* buckets[0] is the last range of the buffer: ready first */
    int n_buckets;
    bucket_tuner tune;

    /* Communication thread: takes ready buckets in order, all-reduces them. */
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake, done;
    int next_ready; /* buckets [0, next_ready) are ready to go */
    int next_done;  /* buckets [0, next_done) are reduced */
    int stop;
    double t_comm;
    long long bytes_at_begin; /* ar.bytes_sent when the step began */
    dt_trace *trace;          /* NULL: none */
};

static void reduce_bucket(dt_ddp *d, int b) {
    float *g = d->model->grads + d->buckets[b].begin;
    size_t n = d->buckets[b].count;
    const double t0 = d->trace ? dt_now() : 0.0;
    const long long sent = d->ar.bytes_sent;
    dt_allreduce_sum(&d->ar, g, n);
    const float scale = 1.0f / (float)d->world->size;
    for (size_t i = 0; i < n; i++) g[i] *= scale;
    if (d->trace)
        dt_trace_bucket(d->trace, b, d->buckets[b].ready, t0, dt_now(), d->ar.bytes_sent - sent);
}

static void *comm_main(void *arg) {
    dt_ddp *d = arg;
    pthread_mutex_lock(&d->lock);
    for (;;) {
        while (!d->stop && d->next_done >= d->next_ready) pthread_cond_wait(&d->wake, &d->lock);
        if (d->stop) break;
        int b = d->next_done;
        pthread_mutex_unlock(&d->lock);
        double t0 = dt_now();
        reduce_bucket(d, b);
        double dt = dt_now() - t0;
        pthread_mutex_lock(&d->lock);
        d->t_comm += dt;
        d->next_done++;
        pthread_cond_broadcast(&d->done);
    }
    pthread_mutex_unlock(&d->lock);
    return NULL;
}

/* Backward hook: count what an op wrote into each bucket it touches; hand over the
 * buckets that are complete (they complete in order, from the buffer's end). */
static void on_grads_ready(void *ctx, size_t offset, size_t count) {
    dt_ddp *d = ctx;
    int ready = -1;
    for (int b = 0; b < d->n_buckets; b++) {
        bucket *k = &d->buckets[b];
        size_t lo = offset > k->begin ? offset : k->begin;
        size_t hi = offset + count < k->begin + k->count ? offset + count : k->begin + k->count;
        if (hi > lo) k->produced += hi - lo;
        if (hi > lo && d->trace && k->produced == k->count) k->ready = dt_now();
    }
    while (ready + 1 < d->n_buckets &&
           d->buckets[ready + 1].produced == d->buckets[ready + 1].count)
        ready++;
    if (!d->overlap) return;
    pthread_mutex_lock(&d->lock);
    if (ready + 1 > d->next_ready) {
        d->next_ready = ready + 1;
        pthread_cond_signal(&d->wake);
    }
    pthread_mutex_unlock(&d->lock);
}

size_t dt_ddp_bucket_floats(double bucket_mb) {
    const size_t per = (size_t)(bucket_mb * 1048576.0 / sizeof(float));
    return per < 1 ? 1 : per;
}

int dt_ddp_bucket_total(size_t n_params, size_t per) {
    return (int)((n_params + per - 1) / per);
}

void dt_ddp_bucket_range(size_t n_params, size_t per, int b, size_t *begin, size_t *count) {
    const size_t end = n_params - (size_t)b * per; /* from the end of the buffer */
    *begin = end > per ? end - per : 0;
    *count = end - *begin;
}

/* Cuts the buffer into buckets of mib (between steps; buckets has room for the most). */
static void cut_buckets(dt_ddp *d, double mib) {
    const size_t per = dt_ddp_bucket_floats(mib);
    d->n_buckets = dt_ddp_bucket_total(d->model->n_params, per);
    for (int b = 0; b < d->n_buckets; b++)
        dt_ddp_bucket_range(d->model->n_params, per, b, &d->buckets[b].begin, &d->buckets[b].count);
}

/* Whether every bucket's call size has its algorithm: always, unless --allreduce auto
 * measures (a 16-bit wire takes the ring at every size, allreduce.c). */
static int buckets_have_algorithms(const dt_ddp *d) {
    if (d->ar.algo != DT_ALLREDUCE_AUTO || d->ar.dtype != DT_COMM_FP32) return 1;
    dt_allreduce_algo algo;
    for (int b = 0; b < d->n_buckets; b++)
        if (!dt_allreduce_auto_chosen(&d->ar, d->buckets[b].count, &algo)) return 0;
    return 1;
}

/* The median of a candidate's counted steps (a copy: the samples keep their order). */
static double median_of(const double *v, int n) {
    double s[BUCKET_SAMPLES];
    memcpy(s, v, (size_t)n * sizeof *s);
    return dt_median(s, n);
}

static void choose_bucket(dt_ddp *d) {
    bucket_tuner *t = &d->tune;
    int best = -1;
    double best_s = 0.0;
    for (int c = 0; c < t->n; c++) {
        if (!t->counted[c]) continue;
        const double m = median_of(t->step_s[c], t->counted[c]);
        if (best < 0 || m < best_s) best = c, best_s = m;
    }
    t->chosen = best < 0 ? t->current : best;
    cut_buckets(d, t->mib[t->chosen]);
}

/* After a measuring step: its time, agreed over the ranks, then the next cut. */
static void tune_after_step(dt_ddp *d) {
    bucket_tuner *t = &d->tune;
    double v[2] = {dt_now() - t->t_begin, t->ready ? 0.0 : 1.0};
    dt_world_allreduce_doubles(d->world, v, 2, DT_REDUCE_MAX); /* the slowest; any not ready */
    t->steps++;
    const int c = t->current;
    if (v[1] == 0.0 && t->counted[c] < BUCKET_SAMPLES) t->step_s[c][t->counted[c]++] = v[0];
    int next = 0;
    for (int k = 1; k < t->n; k++)
        if (t->counted[k] < t->counted[next]) next = k;
    if (t->counted[next] >= BUCKET_SAMPLES || t->steps >= BUCKET_MAX_STEPS) {
        choose_bucket(d);
    } else if (next != c) {
        t->current = next;
        cut_buckets(d, t->mib[next]);
    }
}

void dt_ddp_bucket_report(const dt_ddp *d, char *out, size_t size) {
    const bucket_tuner *t = &d->tune;
    out[0] = 0;
    if (!size || !t->n) return;
    if (t->n == 1) {
        snprintf(out, size, "%g MiB (%d): every size tried makes as many buckets", t->mib[0],
                 d->n_buckets);
        return;
    }
    size_t used = 0;
    for (int c = 0; c < t->n && used < size; c++) {
        const int buckets =
            dt_ddp_bucket_total(d->model->n_params, dt_ddp_bucket_floats(t->mib[c]));
        int k = t->counted[c]
                    ? snprintf(out + used, size - used, "%s%g MiB (%d) %.1f ms", c ? ", " : "",
                               t->mib[c], buckets, 1e3 * median_of(t->step_s[c], t->counted[c]))
                    : snprintf(out + used, size - used, "%s%g MiB (%d) -", c ? ", " : "", t->mib[c],
                               buckets);
        used += k > 0 ? (size_t)k : 0;
    }
    if (used >= size) return;
    if (t->chosen >= 0)
        snprintf(out + used, size - used, " -> %g MiB (%d bucket%s, after %ld steps)",
                 t->mib[t->chosen], d->n_buckets, d->n_buckets == 1 ? "" : "s", t->steps);
    else
        snprintf(out + used, size - used, " -> measuring (%ld steps so far)", t->steps);
}

const char *dt_ddp_allreduce_used(const dt_ddp *ddp) {
    return ddp->ar.used;
}

void dt_ddp_allreduce_report(const dt_ddp *ddp, char *out, size_t size) {
    dt_allreduce_auto_report(&ddp->ar, out, size);
}

int dt_ddp_create(dt_ddp **ddp, const dt_world *w, dt_model *m, dt_allreduce_algo algo,
                  dt_comm_dtype dtype, double bucket_mb, int overlap, dt_error *err) {
    dt_ddp *d = calloc(1, sizeof *d);
    if (!d) return dt_error_set(err, "out of memory for the gradient buckets");
    d->world = w;
    d->model = m;
    d->overlap = overlap;
    /* auto: the candidates that make different numbers of buckets, smallest first */
    if (bucket_mb >= 0) {
        d->tune.mib[0] = bucket_mb > 0 ? bucket_mb : DT_DDP_BUCKET_MB_DEFAULT;
    } else {
        for (int c = 0, last = -1; c < BUCKET_CHOICES; c++) {
            const int k =
                dt_ddp_bucket_total(m->n_params, dt_ddp_bucket_floats(bucket_choices_mib[c]));
            if (k == last) continue;
            d->tune.mib[d->tune.n++] = bucket_choices_mib[c];
            last = k;
        }
    }
    d->tune.chosen = d->tune.n > 1 ? -1 : 0; /* one way to cut: nothing to measure */
    const int kinds = d->tune.n ? d->tune.n : 1;
    const int most = dt_ddp_bucket_total(m->n_params, dt_ddp_bucket_floats(d->tune.mib[0]));
    const size_t largest = dt_ddp_bucket_floats(d->tune.mib[kinds - 1]);
    d->buckets = calloc((size_t)most, sizeof(bucket));
    if (!d->buckets || dt_allreduce_init(&d->ar, w, algo, dtype,
                                         largest < m->n_params ? largest : m->n_params, err)) {
        free(d->buckets);
        free(d);
        return err && err->msg[0] ? -1 : dt_error_set(err, "out of memory for the buckets");
    }
    cut_buckets(d, d->tune.mib[0]);
    pthread_mutex_init(&d->lock, NULL);
    pthread_cond_init(&d->wake, NULL);
    pthread_cond_init(&d->done, NULL);
    if (overlap && pthread_create(&d->thread, NULL, comm_main, d) != 0) {
        dt_allreduce_free(&d->ar);
        free(d->buckets);
        free(d);
        return dt_error_set(err, "cannot start the communication thread");
    }
    m->on_grads_ready = on_grads_ready;
    m->on_grads_ctx = d;
    *ddp = d;
    return 0;
}

void dt_ddp_destroy(dt_ddp *d) {
    if (!d) return;
    if (d->overlap) {
        pthread_mutex_lock(&d->lock);
        d->stop = 1;
        pthread_cond_broadcast(&d->wake);
        pthread_mutex_unlock(&d->lock);
        pthread_join(d->thread, NULL);
    }
    d->model->on_grads_ready = NULL;
    pthread_mutex_destroy(&d->lock);
    pthread_cond_destroy(&d->wake);
    pthread_cond_destroy(&d->done);
    dt_allreduce_free(&d->ar);
    free(d->buckets);
    free(d);
}

void dt_ddp_set_trace(dt_ddp *d, dt_trace *trace) {
    d->trace = trace;
}

int dt_ddp_bucket_count(const dt_ddp *d) {
    return d->n_buckets;
}

void dt_ddp_broadcast_model(dt_ddp *d) {
    dt_model *m = d->model;
    dt_world_broadcast_floats(d->world, m->params, m->n_params);
    if (m->n_buffers) dt_world_broadcast_floats(d->world, m->buffers, m->n_buffers);
}

void dt_ddp_begin_step(dt_ddp *d) {
    if (d->tune.chosen < 0) {
        d->tune.ready = buckets_have_algorithms(d);
        d->tune.t_begin = dt_now();
    }
    for (int b = 0; b < d->n_buckets; b++) d->buckets[b].produced = 0, d->buckets[b].ready = 0.0;
    pthread_mutex_lock(&d->lock);
    d->next_ready = d->next_done = 0;
    d->t_comm = 0.0;
    d->bytes_at_begin = d->ar.bytes_sent;
    pthread_mutex_unlock(&d->lock);
}

void dt_ddp_finish_step(dt_ddp *d, dt_comm_stats *stats) {
    double t0 = dt_now();
    if (d->overlap) {
        pthread_mutex_lock(&d->lock);
        if (d->next_ready < d->n_buckets) { /* buckets no op touched (none in our zoo) */
            d->next_ready = d->n_buckets;
            pthread_cond_signal(&d->wake);
        }
        while (d->next_done < d->n_buckets) pthread_cond_wait(&d->done, &d->lock);
        stats->t_comm = d->t_comm;
        pthread_mutex_unlock(&d->lock);
        stats->t_comm_exposed = dt_now() - t0;
    } else {
        for (int b = 0; b < d->n_buckets; b++) reduce_bucket(d, b);
        stats->t_comm = stats->t_comm_exposed = dt_now() - t0;
    }
    stats->bytes_sent = d->ar.bytes_sent - d->bytes_at_begin;
    if (d->tune.chosen < 0) tune_after_step(d);
}
