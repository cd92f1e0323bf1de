/* Resumable training: the checkpoint directory of `train --checkpoint DIR` and
 * `--resume DIR`. DIR/checkpoint.safetensors holds the weights, BatchNorm buffers,
 * the optimizer's momentum (checkpoint.h) and, in __metadata__, where training stands
 * (below) plus every flag that must be equal to continue (model, data, batch size,
 * learning rate, seed, mode, ...). It is written to a temporary file and renamed, so
 * a kill at any time leaves the previous checkpoint or the new one, whole. The RNGs
 * are counter-based (train_state.h), so this is the whole random state too. */
#ifndef DTRAIN_RESUME_H
#define DTRAIN_RESUME_H

#include <stddef.h>
#include <stdint.h>

#include "dtrain/error.h"
#include "dtrain/model.h"
#include "dtrain/safetensors.h"
#include "dtrain/sgd.h"
#include "train/trainer.h"

/* --checkpoint-every N{steps|epochs} */
typedef enum dt_ckpt_unit { DT_CKPT_STEPS, DT_CKPT_EPOCHS } dt_ckpt_unit;

/* Parses "500steps", "1epoch", "2epochs" (NULL: 1 epoch). */
int dt_ckpt_every_parse(const char *text, long *n, dt_ckpt_unit *unit, dt_error *err);

/* Where training stands at a checkpoint. */
typedef struct dt_resume_point {
    long step;                      /* global steps done (the run log's next step number) */
    int epoch;                      /* the epoch to continue */
    long epoch_pos;                 /* positions of that epoch's padded sample list already trained
                                     * on by all ranks together (dt_sampler_epoch_from) */
    int workers;                    /* training processes when it was written */
    long opt_steps;                 /* optimizer steps (parameter server: the servers' updates) */
    long log_offset;                /* bytes of the run log then; -1: no log */
    unsigned long log_crc;          /* zlib crc32 of those bytes */
    char log[DT_ST_META_VALUE_MAX]; /* the run log's absolute path ("" if none) */
    uint64_t graph;                 /* dt_model_graph_hash of the model (set by dt_resume_save) */
} dt_resume_point;

/* What the run that resumes is: the bounds a checkpoint's numbers must keep. */
typedef struct dt_resume_run {
    int epochs;     /* --epochs */
    long samples;   /* training samples of an epoch (after --max-samples) */
    int batch_size; /* per worker */
} dt_resume_run;

/* dir's checkpoint file into out[size]. */
int dt_resume_file(char *out, size_t size, const char *dir, dt_error *err);

/* dir's lock file (DIR/.launch.lock, core/runlock) into out[size]: launch holds it
 * while it supervises a job on DIR, train while it writes checkpoints there. */
int dt_resume_lock_path(char *out, size_t size, const char *dir, dt_error *err);
#define DT_RESUME_LOCK_POLICY "one run per checkpoint directory"

/* Creates dir if needed and checks it is a directory: at the start of training, so a
 * typo does not cost the run. */
int dt_resume_check_dir(const char *dir, dt_error *err);

/* The run log's absolute path as a checkpoint records it: the real path of its
 * folder (symlinks resolved) and its name; *out is malloc'd. */
int dt_resume_log_path(const char *log, char **out, dt_error *err);

/* At setup, before any step: whether every metadata value of this run's checkpoints
 * fits whole (their file is checked with the command's other outputs, fileset.h);
 * log: the run log's absolute path or NULL. */
int dt_resume_check_meta(const dt_train_config *cfg, const char *log, dt_error *err);

/* Writes the checkpoint of a run configured by cfg (creating dir if needed). */
int dt_resume_save(const char *dir, const dt_train_config *cfg, const dt_model *m,
                   const dt_sgd *opt, const dt_resume_point *p, dt_error *err);

/* A checkpoint's __metadata__ (dir names it in errors) into *p, without a model:
 * the format, every number in its type's range, the log fields together. One line
 * naming the field on error. */
int dt_resume_parse(const dt_safetensors *st, const char *dir, dt_resume_point *p, dt_error *err);

/* *p against the run that resumes: epoch <= epochs, epoch_pos within the epoch's
 * padded sample list as the checkpoint's workers split it, step within the steps
 * the epochs before and the positions done can have taken, opt_steps at most one
 * update per worker and step. One line naming the field on error. */
int dt_resume_check_run(const dt_resume_point *p, const char *dir, const dt_resume_run *run,
                        dt_error *err);

/* Whether the run of *p has nothing left to do: every epoch done, or --max-steps
 * (max_steps > 0) reached. */
int dt_resume_finished(const dt_resume_point *p, int epochs, long max_steps);

/* Reads dir's checkpoint: refuses one written with other flags (one line naming the
 * flag and both values), for another graph than m's, whose numbers do not fit run, or
 * whose tensors do not match their checksums (one line naming the tensor); loads m and
 * opt (opt may be NULL) and fills *p. A finished run (dt_resume_finished) loads them
 * too (its --save writes them). */
int dt_resume_load(const char *dir, const dt_train_config *cfg, const dt_resume_run *run,
                   dt_model *m, dt_sgd *opt, dt_resume_point *p, dt_error *err);

#endif
