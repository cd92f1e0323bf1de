/* Training state: everything a run changes as it goes, in one object — what a
 * checkpoint must save and a resume restore. The RNGs are counter-based: weights
 * come from (seed, tensor), the sampler's order from (seed, epoch) and augmentation
 * from (seed, epoch, sample index), so (seed, epoch, step) is the whole random state
 * and the data position within an epoch is step - epoch * steps_per_epoch. */
#ifndef DTRAIN_TRAIN_STATE_H
#define DTRAIN_TRAIN_STATE_H

#include <stdint.h>

#include "dtrain/dataset.h"
#include "dtrain/error.h"
#include "dtrain/lr_schedule.h"
#include "dtrain/model.h"
#include "dtrain/sgd.h"
#include "dtrain/zoo.h"

typedef struct dt_train_state {
    dt_model model;       /* parameters, gradients, BatchNorm running statistics */
    dt_sgd opt;           /* momentum buffers and the optimizer's step count */
    dt_lr_schedule sched; /* the rate at global step `step` */
    int epoch;            /* the epoch being trained, 0-based */
    long step;            /* global steps done */
    uint64_t seed;        /* all randomness derives from it (see above) */
} dt_train_state;

/* A zoo model built to spec (dt_train_model_spec) and allocated for batches of up to
 * max_batch, initialised from seed, then from the weights in init_path if given. */
int dt_train_build_model(dt_model *m, const dt_model_spec *spec, int max_batch, uint64_t seed,
                         const char *init_path, dt_error *err);

/* The spec a run on ds uses: the model at the data's input shape and classes where
 * the model takes them, else its own shape, which must be the data's
 * (dt_zoo_spec_for_data); width > 0 replaces the model's default. */
int dt_train_model_spec(dt_model_spec *spec, const char *model, int width, const dt_dataset *ds,
                        dt_error *err);

/* Opens the train (train = 1) or test split of the data spec for a zoo model: checks
 * that the model takes its images (dt_train_model_spec) and keeps only the first
 * max_samples (0 = all). Training and evaluating saved weights open their data the
 * same way. */
int dt_train_open_data(dt_dataset *ds, const char *model, const char *data, int train,
                       long max_samples, dt_error *err);

/* The model as above plus an SGD optimizer (lr, momentum, weight decay) at step 0.
 * sched is left for the caller, who knows the steps per epoch. */
int dt_train_state_init(dt_train_state *s, const dt_model_spec *spec, int max_batch, uint64_t seed,
                        const char *init_path, float lr, float momentum, float weight_decay,
                        dt_error *err);
void dt_train_state_free(dt_train_state *s);

#endif
