/* Single-process training loop: data -> forward/backward -> SGD -> run log.
 * The CLI fills a dt_train_config; progress is reported through a callback so the
 * library prints nothing itself. */
#ifndef DTRAIN_TRAINER_H
#define DTRAIN_TRAINER_H

#include <stdint.h>

#include "dtrain/error.h"
#include "dtrain/lr_schedule.h"
#include "dtrain/world.h"
#include "parallel/allreduce.h"
#include "parallel/overlap.h"
#include "parallel/ps.h"

/* dt_train_config.bucket_mb: measure the bucket size (--bucket-mb auto). */
#define DT_BUCKET_AUTO (-1.0)

typedef struct dt_train_config {
    const char *model;
    int width; /* resnet18 width; 0 = 64 */
    const char *data;
    int epochs;
    int batch_size;
    float lr, momentum, weight_decay;
    dt_lr_kind lr_schedule;
    double warmup_epochs;
    int threads; /* 0: the cores this rank may use, shared with its host's ranks (placement.h) */
    uint64_t seed;
    long max_steps;        /* stop after this many steps in total; 0 = no limit */
    long max_samples;      /* use only the first N training samples; 0 = all */
    long max_test_samples; /* evaluate on the first N test samples; 0 = all */
    int loader_workers;    /* background decoding threads; 0 = decode in the trainer */
    int augment;           /* -1: the dataset's default (crop + flip for CIFAR train) */
    int reinit;            /* an ONNX --model: fresh weights instead of its initializers */
    /* Data parallelism (used when the world has more than one rank). The training
     * mode by name (dt_train_mode_names()); NULL: "allreduce", or the parameter-server
     * mode set in ps.mode by library callers. */
    const char *mode;
    dt_allreduce_algo allreduce;
    dt_comm_dtype comm_dtype;   /* gradients on the wire (all-reduce, ps pushes); fp32 = 0 */
    dt_precision precision;     /* conv2d multiplies in fp32 (0) or bf16 (mixed precision) */
    double bucket_mb;           /* 0: ddp.h's default (25); DT_BUCKET_AUTO: measured */
    dt_overlap_mode overlap;    /* the gradient all-reduce during backward: auto (0), on, off */
    int lr_scaling_linear;      /* multiply lr by the number of processes (with warm-up) */
    dt_ps_config ps;            /* servers, replicas, staleness of the parameter-server modes */
    int delay_worker, delay_ms; /* testing aid: worker delay_worker sleeps delay_ms a step */
    double sys_interval;        /* seconds between a rank's sys records; 0 = 1 */
    long eval_every;            /* evaluate every N steps (eval records); 0 = per epoch only */
    long eval_samples;          /* ... on the first N test samples; 0 = the whole test set */
    const char *log_path, *save_path, *init_path;
    /* train --trace: every worker's timeline to trace_path (Chrome trace format),
     * steps trace_steps ("A:B", "A:", NULL: all) up to trace_events a rank (0: the
     * default, metrics/trace.h) */
    const char *trace_path, *trace_steps;
    long trace_events;
    /* resumable training (resume.h): write checkpoints into checkpoint_dir every
     * checkpoint_every ("500steps", "1epoch"; NULL: every epoch) and at the end;
     * continue from resume_dir's checkpoint */
    const char *checkpoint_dir, *checkpoint_every, *resume_dir;
} dt_train_config;

/* The defaults of `dtrain train` (its --help states them): lenet5, 1 epoch, batch 128,
 * the model's recipe (lr, momentum, weight decay and schedule left unset: lr 0,
 * momentum and weight decay -1, DT_LR_MODEL), threads 0, one loader worker, the
 * dataset's augmentation, allreduce, 1 server, staleness 3. */
dt_train_config dt_train_config_default(void);

/* Fills the recipe fields left unset (as dt_train_config_default leaves them) from
 * cfg->model's recipe (dt_zoo_recipe_of); the ones given stay. dt_train calls it, so
 * its run record and checkpoints hold the values trained with; a caller that shows or
 * passes them on (scale's children, bench's optimizer) calls it once the model is
 * known. -1 with "unknown model ..." if a value is unset and the model unknown. */
int dt_train_config_resolve(dt_train_config *cfg, dt_error *err);

typedef struct dt_train_progress {
    int epoch, epochs;
    long step, steps_per_epoch;
    double loss, images_per_s, eta_s;
    int epoch_done; /* 1 on the call that closes an epoch: test figures are set */
    double test_loss, test_acc, train_acc, t_epoch;
} dt_train_progress;

typedef void (*dt_progress_fn)(void *ctx, const dt_train_progress *p);

typedef struct dt_train_result {
    long steps;
    double final_loss, test_acc, images_per_s;
    int finished; /* --resume found the run finished at `steps`: nothing was done */
    /* on failure, 0: every worker returned it together (flags, files, data, shapes:
     * setup is agreed among the workers before training), the first worker holding the
     * message; 1: this rank failed alone (training under way, or a parameter server),
     * the others are not told: the caller ends the job */
    int alone;
    /* the rank the others waited for most, in the epoch it cost most (-1: none
     * above DT_STRAGGLER_SHARE of a step; metrics/straggler.h), its host, how much
     * slower its own work a step was than the others' and their wait for it a step */
    int straggler, straggler_epoch;
    char straggler_host[96];
    double straggler_slower, straggler_wait_s;
} dt_train_result;

/* world NULL: one process without MPI. With a world, every rank calls dt_train;
 * rank 0 logs, saves and reports progress. */
int dt_train(const dt_train_config *cfg, const dt_world *world, dt_progress_fn progress,
             void *progress_ctx, dt_train_result *result, dt_error *err);

#endif
