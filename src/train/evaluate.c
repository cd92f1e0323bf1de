#include "dtrain/evaluate.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* The class of the largest logit, the first on ties (as the loss counts hits). */
static int predicted_class(const float *logits, int classes) {
    int arg = 0;
    for (int k = 1; k < classes; k++)
        if (logits[k] > logits[arg]) arg = k;
    return arg;
}

int dt_evaluate(dt_model *m, const dt_dataset *ds, const dt_transform *tf, const dt_world *world,
                dt_eval_result *res, dt_error *err) {
    memset(res, 0, sizeof *res);
    const int rank = world ? world->rank : 0, size = world ? world->size : 1;
    const int classes = m->classes;
    const size_t sample = dt_model_input_floats_per_sample(m);
    const size_t cells = (size_t)classes * (size_t)classes;
    /* sums[0] loss x samples, sums[1] correct, then the confusion counts */
    double *sums = calloc(2 + cells, sizeof(double));
    int32_t *labels = malloc(sizeof(int32_t) * (size_t)m->max_batch);
    uint8_t *pixels = malloc(sample * (size_t)omp_get_max_threads()); /* one per thread */
    res->confusion = calloc(cells, sizeof(long));
    if (!sums || !labels || !pixels || !res->confusion) {
        free(sums), free(labels), free(pixels);
        dt_eval_result_free(res);
        return dt_error_set(err, "out of memory for evaluation");
    }
    const int saved_training = m->training;
    m->training = 0;
    const int mine = (ds->size - rank + size - 1) / size;
    for (int i = 0; i < mine; i += m->max_batch) {
        const int n = mine - i < m->max_batch ? mine - i : m->max_batch;
        float *x = dt_model_input_data(m);
#pragma omp parallel for schedule(static)
        for (int k = 0; k < n; k++) {
            const int index = rank + (i + k) * size;
            uint8_t *px = pixels + (size_t)omp_get_thread_num() * sample;
            labels[k] = dt_dataset_sample(ds, index, px);
            dt_transform_apply(tf, px, 0, index, x + (size_t)k * sample);
        }
        dt_model_forward(m, n);
        int hits = 0;
        sums[0] += dt_model_loss(m, labels, n, &hits) * n;
        sums[1] += hits;
        const float *logits = dt_model_logits(m);
        for (int k = 0; k < n; k++) {
            const int guess = predicted_class(logits + (size_t)k * classes, classes);
            sums[2 + (size_t)labels[k] * classes + guess] += 1.0;
        }
    }
    m->training = saved_training;
    if (size > 1) dt_world_allreduce_doubles(world, sums, (int)(2 + cells), MPI_SUM);
    res->loss = sums[0] / ds->size;
    res->accuracy = sums[1] / ds->size;
    res->samples = ds->size;
    res->classes = classes;
    for (size_t c = 0; c < cells; c++) res->confusion[c] = (long)sums[2 + c];
    free(sums), free(labels), free(pixels);
    return 0;
}

double dt_eval_class_accuracy(const dt_eval_result *res, int cls) {
    long total = 0;
    for (int k = 0; k < res->classes; k++) total += res->confusion[(size_t)cls * res->classes + k];
    return total ? (double)res->confusion[(size_t)cls * res->classes + cls] / (double)total : NAN;
}

void dt_eval_result_free(dt_eval_result *res) {
    free(res->confusion);
    res->confusion = NULL;
}
