/* Model weights and checkpoints as safetensors with PyTorch state_dict names, so a
 * file moves between dtrain and torch's load_state_dict / save_file both ways.
 * A checkpoint adds the optimizer's momentum buffers ("optimizer.momentum.<param>")
 * and `meta` key/values in __metadata__. Writes are atomic. */
#ifndef DTRAIN_CHECKPOINT_H
#define DTRAIN_CHECKPOINT_H

#include "dtrain/error.h"
#include "dtrain/model.h"
#include "dtrain/safetensors.h"
#include "dtrain/sgd.h"

/* opt may be NULL (weights only). */
int dt_checkpoint_save(const dt_model *m, const dt_sgd *opt, const dt_st_meta *meta, int n_meta,
                       const char *path, dt_error *err);

/* Loads every parameter and buffer of m from path (all must be present with their
 * exact shapes; extra tensors are ignored). If opt is not NULL and the file holds
 * momentum buffers, restores them too. */
int dt_checkpoint_load(dt_model *m, dt_sgd *opt, const char *path, dt_error *err);

#endif
