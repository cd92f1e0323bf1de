/* Rank fingerprints: before training, every rank of a world shows the others what it
 * is about to run (the training options that must match, the model's tensors, the
 * data's shape and size), so ranks started with different flags end the job at once,
 * naming the option, the value on each side and the ranks, instead of corrupting a
 * buffer or waiting for a peer that will never send. */
#ifndef DTRAIN_FINGERPRINT_H
#define DTRAIN_FINGERPRINT_H

#include "dtrain/dataset.h"
#include "dtrain/error.h"
#include "dtrain/model.h"
#include "dtrain/world.h"
#include "train/trainer.h"

/* What a rank shows: named values compared as text, in an order every rank shares. */
typedef struct dt_fingerprint {
    int n, cap;
    char (*names)[64];
    char **values; /* owned */
} dt_fingerprint;

void dt_fingerprint_init(dt_fingerprint *fp);
void dt_fingerprint_free(dt_fingerprint *fp);
/* Adds one item; -1 with err when out of memory. */
int dt_fingerprint_add(dt_fingerprint *fp, const char *name, const char *value, dt_error *err);

/* Every training flag that must match on all ranks (the flag table's rows not marked
 * per_rank), as "--name" = its value. */
int dt_fingerprint_config(dt_fingerprint *fp, const dt_train_config *cfg, dt_error *err);
/* The model (parameter count, each tensor's name and shape, its graph's hash:
 * dt_model_graph_hash) and the data the sampler
 * splits (training and test samples, image shape, classes). */
int dt_fingerprint_model(dt_fingerprint *fp, const dt_model *m, const dt_dataset *train,
                         const dt_dataset *test, dt_error *err);

/* Collective over w: 0 if every rank holds the same items; otherwise -1 on every rank
 * with the same one-line message ("ranks disagree on --batch-size: 32 on rank 0, 64
 * on rank 1"; ranks as in the process world). */
int dt_fingerprint_compare(const dt_world *w, const dt_fingerprint *fp, dt_error *err);

#endif
