/* Evaluation: a model in inference mode (BatchNorm uses its running statistics) over
 * a dataset's samples, with loss, accuracy and the confusion matrix. Under several
 * ranks each takes every size-th sample from its own rank and the sums are combined
 * over the world, so every rank gets the figures of the whole set. */
#ifndef DTRAIN_EVALUATE_H
#define DTRAIN_EVALUATE_H

#include "dtrain/dataset.h"
#include "dtrain/error.h"
#include "dtrain/model.h"
#include "dtrain/transform.h"
#include "dtrain/world.h"

typedef struct dt_eval_result {
    double loss;     /* mean cross-entropy */
    double accuracy; /* fraction correct */
    long samples;
    int classes;
    long *confusion; /* [classes, classes]: row = true class, column = predicted; owned */
} dt_eval_result;

/* Evaluates the first ds->size samples of ds, decoded by tf (no augmentation), in
 * batches of up to m->max_batch. world NULL or of one rank: this process alone. */
int dt_evaluate(dt_model *m, const dt_dataset *ds, const dt_transform *tf, const dt_world *world,
                dt_eval_result *res, dt_error *err);

/* Anything that turns a batch of inputs into logits: a float model, a quantized
 * network's emulation, its int8 engine. */
typedef struct dt_eval_target {
    float *input; /* [max_batch, c, h, w], written before forward */
    int max_batch, classes;
    void (*forward)(void *ctx, int n); /* input -> logits */
    const float *(*logits)(void *ctx); /* [n, classes] after forward */
    void *ctx;
    float *keep_logits; /* NULL, or [ds->size, classes]: every sample's logits, by index */
} dt_eval_target;

/* A dt_model (in inference mode while it runs) as a target. */
dt_eval_target dt_eval_target_of_model(dt_model *m);

/* Evaluates n_targets (1 or 2) targets on the same samples, in batches of the
 * smallest max_batch: res[k] for each; with two, *agreement (if not NULL) is the
 * fraction of samples whose top-1 class the second target shares with the first. */
int dt_evaluate_targets(const dt_eval_target *t, int n_targets, const dt_dataset *ds,
                        const dt_transform *tf, const dt_world *world, dt_eval_result *res,
                        double *agreement, dt_error *err);
/* Correct / total of one class (NaN if the class has no sample). */
double dt_eval_class_accuracy(const dt_eval_result *res, int cls);
void dt_eval_result_free(dt_eval_result *res);

#endif
