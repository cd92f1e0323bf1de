#include "dtrain/evaluate.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "nn/cross_entropy.h"

/* The class of the largest logit, the first on ties (as the loss counts hits). */
static int predicted_class(const float *logits, int classes) {
    int arg = 0;
    for (int k = 1; k < classes; k++)
        if (logits[k] > logits[arg]) arg = k;
    return arg;
}

static void model_forward(void *ctx, int n) {
    dt_model *m = ctx;
    const int saved = m->training;
    m->training = 0;
    dt_model_forward(m, n);
    m->training = saved;
}

static const float *model_logits(void *ctx) {
    return dt_model_logits(ctx);
}

dt_eval_target dt_eval_target_of_model(dt_model *m) {
    return (dt_eval_target){.input = dt_model_input_data(m),
                            .max_batch = m->max_batch,
                            .classes = m->classes,
                            .forward = model_forward,
                            .logits = model_logits,
                            .ctx = m};
}

int dt_evaluate(dt_model *m, const dt_dataset *ds, const dt_transform *tf, const dt_world *world,
                dt_eval_result *res, dt_error *err) {
    dt_eval_target t = dt_eval_target_of_model(m);
    return dt_evaluate_targets(&t, 1, ds, tf, world, res, NULL, err);
}

enum { MAX_TARGETS = 2 };

int dt_evaluate_targets(const dt_eval_target *t, int n_targets, const dt_dataset *ds,
                        const dt_transform *tf, const dt_world *world, dt_eval_result *res,
                        double *agreement, dt_error *err) {
    if (n_targets < 1 || n_targets > MAX_TARGETS)
        return dt_error_set(err, "evaluation takes 1 or 2 models, not %d", n_targets);
    for (int k = 0; k < n_targets; k++) memset(&res[k], 0, sizeof res[k]);
    const int rank = world ? world->rank : 0, size = world ? world->size : 1;
    const int classes = t[0].classes;
    int batch = t[0].max_batch;
    for (int k = 1; k < n_targets; k++) {
        if (t[k].classes != classes)
            return dt_error_set(err, "the models to compare have %d and %d classes", classes,
                                t[k].classes);
        batch = t[k].max_batch < batch ? t[k].max_batch : batch;
    }
    const size_t sample = (size_t)ds->c * ds->h * ds->w;
    const size_t cells = (size_t)classes * (size_t)classes;
    /* per target: loss x samples, correct, the confusion counts; then agreements */
    const size_t per = 2 + cells, n_sums = per * (size_t)n_targets + 1;
    double *sums = calloc(n_sums, sizeof(double));
    int32_t *labels = malloc(sizeof(int32_t) * (size_t)batch);
    int *first = malloc(sizeof(int) * (size_t)batch);
    float *probs = malloc(sizeof(float) * (size_t)batch * (size_t)classes);
    uint8_t *pixels = malloc(sample * (size_t)omp_get_max_threads()); /* one per thread */
    int ok = sums && labels && first && probs && pixels;
    for (int k = 0; ok && k < n_targets; k++)
        ok = (res[k].confusion = calloc(cells, sizeof(long))) != NULL;
    if (!ok) {
        free(sums), free(labels), free(first), free(probs), free(pixels);
        for (int k = 0; k < n_targets; k++) dt_eval_result_free(&res[k]);
        return dt_error_set(err, "out of memory for evaluation");
    }
    const int mine = (ds->size - rank + size - 1) / size;
    for (int i = 0; i < mine; i += batch) {
        const int n = mine - i < batch ? mine - i : batch;
        float *x = t[0].input;
#pragma omp parallel for schedule(static)
        for (int k = 0; k < n; k++) {
            const int index = rank + (i + k) * size;
            uint8_t *px = pixels + (size_t)omp_get_thread_num() * sample;
            labels[k] = dt_dataset_sample(ds, index, px);
            dt_transform_apply(tf, px, 0, index, x + (size_t)k * sample);
        }
        for (int k = 1; k < n_targets; k++)
            if (t[k].input != x) memcpy(t[k].input, x, sizeof(float) * sample * (size_t)n);
        for (int k = 0; k < n_targets; k++) {
            t[k].forward(t[k].ctx, n);
            const float *logits = t[k].logits(t[k].ctx);
            double *s = sums + per * (size_t)k;
            int hits = 0;
            s[0] += dt_cross_entropy_forward(probs, logits, labels, n, classes, &hits) * n;
            s[1] += hits;
            if (t[k].keep_logits)
                for (int j = 0; j < n; j++)
                    memcpy(t[k].keep_logits + (size_t)(rank + (i + j) * size) * classes,
                           logits + (size_t)j * classes, sizeof(float) * (size_t)classes);
            for (int j = 0; j < n; j++) {
                const int guess = predicted_class(logits + (size_t)j * classes, classes);
                s[2 + (size_t)labels[j] * classes + guess] += 1.0;
                if (k == 0)
                    first[j] = guess;
                else
                    sums[n_sums - 1] += guess == first[j];
            }
        }
    }
    if (size > 1) dt_world_allreduce_doubles(world, sums, (int)n_sums, DT_REDUCE_SUM);
    for (int k = 0; k < n_targets; k++) {
        const double *s = sums + per * (size_t)k;
        res[k].loss = s[0] / ds->size;
        res[k].accuracy = s[1] / ds->size;
        res[k].samples = ds->size;
        res[k].classes = classes;
        for (size_t c = 0; c < cells; c++) res[k].confusion[c] = (long)s[2 + c];
    }
    if (agreement) *agreement = n_targets > 1 ? sums[n_sums - 1] / ds->size : NAN;
    free(sums), free(labels), free(first), free(probs), free(pixels);
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
