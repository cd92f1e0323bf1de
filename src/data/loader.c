#include "data/loader.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/error.h"

typedef enum { SLOT_FREE, SLOT_FILLING, SLOT_READY } slot_state;

typedef struct slot {
    float *x;
    int32_t *y;
    int n;
    long batch; /* which batch of the epoch it holds */
    slot_state state;
} slot;

struct dt_loader {
    const dt_dataset *ds;
    const dt_transform *t;
    int batch, workers, depth;
    size_t sample_floats;
    slot *slots;
    pthread_t *threads;
    uint8_t **scratch; /* one sample of pixels per worker (+1 for synchronous use) */

    pthread_mutex_t lock;
    pthread_cond_t work;  /* a slot was freed or an epoch started */
    pthread_cond_t ready; /* a batch was filled */
    const int *indices;
    int count, epoch;
    long n_batches, next_claim, next_consume;
    int stop;
};

static void fill(dt_loader *l, slot *s, long b, int epoch, const int *indices, int count,
                 uint8_t *scratch) {
    long first = b * l->batch;
    int n = (int)(count - first < l->batch ? count - first : l->batch);
    dt_transform_batch(l->t, l->ds, indices + first, n, epoch, scratch, s->x, s->y);
    s->n = n;
    s->batch = b;
}

static void *worker_main(void *arg) {
    dt_loader *l = ((void **)arg)[0];
    uint8_t *scratch = ((void **)arg)[1];
    free(arg);
    pthread_mutex_lock(&l->lock);
    for (;;) {
        while (!l->stop && (l->next_claim >= l->n_batches ||
                            l->slots[l->next_claim % l->depth].state != SLOT_FREE))
            pthread_cond_wait(&l->work, &l->lock);
        if (l->stop) break;
        long b = l->next_claim++;
        slot *s = &l->slots[b % l->depth];
        s->state = SLOT_FILLING;
        const int *indices = l->indices;
        int count = l->count, epoch = l->epoch;
        pthread_mutex_unlock(&l->lock);
        fill(l, s, b, epoch, indices, count, scratch);
        pthread_mutex_lock(&l->lock);
        s->state = SLOT_READY;
        pthread_cond_broadcast(&l->ready);
    }
    pthread_mutex_unlock(&l->lock);
    return NULL;
}

int dt_loader_create(dt_loader **loader, const dt_dataset *ds, const dt_transform *t, int batch,
                     int workers, int depth, dt_error *err) {
    if (workers < 0) return dt_error_set(err, "loader: --loader-workers must be >= 0");
    dt_loader *l = calloc(1, sizeof *l);
    if (!l) return dt_error_set(err, "loader: out of memory");
    l->ds = ds;
    l->t = t;
    l->batch = batch;
    l->workers = workers;
    l->depth = workers == 0 ? 1 : (depth > 0 ? depth : 2 * workers);
    l->sample_floats = (size_t)ds->c * ds->h * ds->w;
    pthread_mutex_init(&l->lock, NULL);
    pthread_cond_init(&l->work, NULL);
    pthread_cond_init(&l->ready, NULL);
    l->slots = calloc((size_t)l->depth, sizeof(slot));
    l->scratch = calloc((size_t)workers + 1, sizeof(uint8_t *));
    l->threads = calloc((size_t)workers + 1, sizeof(pthread_t));
    int ok = l->slots && l->scratch && l->threads;
    for (int i = 0; ok && i < l->depth; i++) {
        l->slots[i].x = dt_alloc(sizeof(float) * l->sample_floats * batch, "loader batches", err);
        l->slots[i].y = dt_alloc(sizeof(int32_t) * batch, "loader batches", err);
        ok = l->slots[i].x && l->slots[i].y;
    }
    for (int i = 0; ok && i <= workers; i++)
        ok = (l->scratch[i] = malloc(l->sample_floats)) != NULL;
    if (!ok) {
        l->workers = 0; /* no threads to join yet */
        dt_loader_destroy(l);
        return dt_error_set(err, "loader: out of memory for %d batches of %d", depth, batch);
    }
    for (int i = 0; i < workers; i++) {
        void **arg = malloc(2 * sizeof(void *));
        if (!arg || (arg[0] = l, arg[1] = l->scratch[i],
                     pthread_create(&l->threads[i], NULL, worker_main, arg) != 0)) {
            free(arg);
            l->workers = i;
            dt_loader_destroy(l);
            return dt_error_set(err, "loader: cannot start worker thread %d", i);
        }
    }
    *loader = l;
    return 0;
}

void dt_loader_destroy(dt_loader *l) {
    if (!l) return;
    pthread_mutex_lock(&l->lock);
    l->stop = 1;
    pthread_cond_broadcast(&l->work);
    pthread_mutex_unlock(&l->lock);
    for (int i = 0; i < l->workers; i++) pthread_join(l->threads[i], NULL);
    for (int i = 0; l->slots && i < l->depth; i++) {
        dt_free(l->slots[i].x);
        dt_free(l->slots[i].y);
    }
    for (int i = 0; l->scratch && i <= l->workers; i++) free(l->scratch[i]);
    free(l->slots);
    free(l->scratch);
    free(l->threads);
    pthread_mutex_destroy(&l->lock);
    pthread_cond_destroy(&l->work);
    pthread_cond_destroy(&l->ready);
    free(l);
}

void dt_loader_start_epoch(dt_loader *l, const int *indices, int count, int epoch) {
    pthread_mutex_lock(&l->lock);
    l->indices = indices;
    l->count = count;
    l->epoch = epoch;
    l->n_batches = (count + l->batch - 1) / l->batch;
    l->next_claim = 0;
    l->next_consume = 0;
    for (int i = 0; i < l->depth; i++) l->slots[i].state = SLOT_FREE;
    pthread_cond_broadcast(&l->work);
    pthread_mutex_unlock(&l->lock);
}

int dt_loader_next(dt_loader *l, const float **x, const int32_t **y) {
    if (l->next_consume >= l->n_batches) return 0;
    slot *s = &l->slots[l->next_consume % l->depth];
    if (l->workers == 0) {
        fill(l, s, l->next_consume, l->epoch, l->indices, l->count, l->scratch[0]);
        s->state = SLOT_READY;
    } else {
        pthread_mutex_lock(&l->lock);
        while (s->state != SLOT_READY || s->batch != l->next_consume)
            pthread_cond_wait(&l->ready, &l->lock);
        pthread_mutex_unlock(&l->lock);
    }
    *x = s->x;
    *y = s->y;
    return s->n;
}

void dt_loader_release(dt_loader *l) {
    pthread_mutex_lock(&l->lock);
    l->slots[l->next_consume % l->depth].state = SLOT_FREE;
    l->next_consume++;
    pthread_cond_broadcast(&l->work);
    pthread_mutex_unlock(&l->lock);
}
