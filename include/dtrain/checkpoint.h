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

/* Checks each tensor of st against the crc32 that dt_checkpoint_save records in its
 * metadata (tensor_crc32.*); a file without them passes unless `required` (a file
 * from PyTorch or an older dtrain has none). The error names the tensor. */
int dt_checkpoint_verify(const dt_safetensors *st, int required, dt_error *err);

/* Loads every parameter and buffer of m from path (all must be present with their
 * exact shapes; extra tensors are ignored). If opt is not NULL and the file holds
 * momentum buffers, restores them too. Checksums, where the file has them, are
 * checked first (dt_checkpoint_verify). */
int dt_checkpoint_load(dt_model *m, dt_sgd *opt, const char *path, dt_error *err);

#endif
