/* The training loop: one loop for every mode. The mode's synchronisation strategy
 * (sync.h) does whatever keeps the workers in step; the loop never asks which mode
 * it runs. */
#define _GNU_SOURCE /* renameat2 */
#include "train/trainer.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/cgroup.h"
#include "core/fileset.h"
#include "core/parse.h"
#include "core/placement.h"
#include "core/proc.h"
#include "core/runlock.h"
#include "core/stats.h"
#include "core/sysinfo.h"
#include "core/rng.h"
#include "core/threads.h"
#include "core/timer.h"
#include "data/loader.h"
#include "data/sampler.h"
#include "dtrain/checkpoint.h"
#include "dtrain/dataset.h"
#include "dtrain/evaluate.h"
#include "dtrain/train_state.h"
#include "dtrain/transform.h"
#include "dtrain/version.h"
#include "dtrain/zoo.h"
#include "nn/onnx.h"
#include "train/inputs.h"
#include "metrics/runlog.h"
#include "metrics/straggler.h"
#include "metrics/sysmon.h"
#include "metrics/trace.h"
#include "parallel/ddp.h"
#include "parallel/sync.h"
#include "parallel/sys_records.h"
#include "parallel/trace_records.h"
#include "train/fingerprint.h"
#include "train/resume.h"
#include "train/train_mode.h"

dt_train_config dt_train_config_default(void) {
    dt_train_config cfg = {.model = "lenet5",
                           .epochs = 1,
                           .batch_size = 128,
                           .lr = 0.0f, /* these four: the model's recipe */
                           .momentum = -1.0f,
                           .weight_decay = -1.0f,
                           .lr_schedule = DT_LR_MODEL,
                           .threads = 0, /* the cores this rank may use (placement.h) */
                           .loader_workers = 1,
                           .augment = -1,
                           .mode = "allreduce",
                           .ps = {.servers = 1, .staleness = 3}};
    return cfg;
}

int dt_train_config_resolve(dt_train_config *cfg, dt_error *err) {
    if (cfg->lr > 0 && cfg->momentum >= 0 && cfg->weight_decay >= 0 &&
        cfg->lr_schedule != DT_LR_MODEL)
        return 0; /* every one given: the model is not looked up */
    const dt_zoo_recipe *r = dt_zoo_recipe_of(cfg->model);
    if (!r)
        return dt_error_set(err, "unknown model '%s' (known: %s)", cfg->model ? cfg->model : "",
                            dt_zoo_names());
    if (cfg->lr <= 0) cfg->lr = r->lr;
    if (cfg->momentum < 0) cfg->momentum = r->momentum;
    if (cfg->weight_decay < 0) cfg->weight_decay = r->weight_decay;
    if (cfg->lr_schedule == DT_LR_MODEL) cfg->lr_schedule = r->schedule;
    return 0;
}

typedef struct trainer {
    const dt_train_config *cfg;
    const dt_train_mode *mode;
    const dt_world *job; /* every process; NULL: one process without MPI */
    dt_world workers;    /* the ranks that train: evaluation and metrics reduce over it */
    dt_train_state state;
    dt_dataset train, test;
    dt_transform train_tf, test_tf;
    dt_sampler sampler;
    dt_loader *loader;
    dt_sync sync;
    dt_runlog log;
    dt_sysmon sysmon;        /* every worker rank samples its resources (sys records) */
    dt_worker_record totals; /* this rank's steps and bytes over the run */
    int32_t *labels;         /* [batch] */
    long steps_per_epoch;
    /* resumable training */
    long ckpt_every;
    dt_ckpt_unit ckpt_unit;
    double loss_ref;      /* divergence: the loss's reference (diverging()) */
    long steps_above;     /* steps in a row above DIVERGE_FACTOR * loss_ref */
    int resumed;          /* continuing from a checkpoint */
    dt_resume_point from; /* where (if resumed) */
    long epoch_pos;       /* positions of the epoch's sample list trained on, all ranks */
    long lr_shift;        /* schedule step - global step (nonzero after a rank change) */
    int log_continued;    /* the run log is the interrupted run's, continued */
    long lost_steps;      /* its step records after the checkpoint, cut */
    int finished;         /* --resume of a run with nothing left to do: only --save done */
    char *log_abs;        /* --log's absolute path (rank 0 of a --checkpoint run) */
    dt_runlock ckpt_lock; /* --checkpoint DIR's (rank 0), held for the run */
    /* compute threads, and why that many */
    dt_threads_choice threads;
    /* setup agreed by every worker: a failure from now on is this rank's alone */
    int set_up;
    /* --trace: this rank's timeline (NULL without) */
    dt_trace trace_store, *trace;
    double run_start;   /* the first span's origin on the first worker */
    char (*hosts)[96];  /* [workers] each worker's host (dt_proc_host_name), from setup */
    dt_straggler worst; /* the straggler of the epoch it cost most in (rank -1: none) */
    int worst_epoch;
    double *step_own, *step_whole; /* [steps_per_epoch] an epoch's steps (epoch_sums) */
} trainer;

/* Per-rank sums of an epoch, reduced to max and mean over the workers for the record. */
enum { E_T_LOOP, E_T_TRAIN, E_T_DATA, E_T_COMPUTE, E_T_COMM, E_T_EXPOSED, E_COUNT };

typedef struct epoch_sums {
    double t[E_COUNT];
    long steps;
    /* each step's own time (data wait and compute) and whole time, [steps_per_epoch]:
     * their medians find the straggler, untouched by a first step's warm-up */
    double *own, *whole;
    double loss, correct, images, bytes; /* reduced as sums */
} epoch_sums;

static void trainer_free(trainer *t) {
    dt_sysmon_stop(&t->sysmon);
    dt_sync_destroy(&t->sync);
    dt_loader_destroy(t->loader);
    dt_sampler_free(&t->sampler);
    dt_train_state_free(&t->state);
    dt_dataset_close(&t->train);
    dt_dataset_close(&t->test);
    free(t->labels);
    free(t->log_abs);
    free(t->hosts);
    free(t->step_own);
    free(t->step_whole);
    if (t->trace) dt_trace_free(t->trace);
    dt_runlog_close(&t->log, NULL);
    dt_runlock_release(&t->ckpt_lock);
    dt_world_free(&t->workers);
}

static int open_data(trainer *t, dt_error *err) {
    const dt_train_config *cfg = t->cfg;
    if (dt_train_open_data(&t->train, cfg->model, cfg->data, 1, cfg->max_samples, err)) return -1;
    return dt_train_open_data(&t->test, cfg->model, cfg->data, 0, cfg->max_test_samples, err);
}

/* an error's message travels to the rank that reports it on its own tag */
enum { AGREE_TAG = 7404 };

/* Collective over w: whether every rank's rc is 0. If not, every rank returns -1, and
 * rank `speaker`'s err holds the message of the first rank that failed (naming it if
 * another), so that the job prints one line and every rank ends alike (no abort). */
static int agree(const dt_world *w, int rc, int speaker, dt_error *err) {
    if (w->size < 2) return rc ? -1 : 0;
    double first = rc ? w->rank : w->size;
    dt_world_allreduce_doubles(w, &first, 1, DT_REDUCE_MIN);
    const int from = (int)first;
    if (from >= w->size) return 0;
    if (from != speaker && w->rank == from)
        dt_world_send_bytes(w, err->msg, sizeof err->msg, speaker, AGREE_TAG, "an error's message");
    if (from != speaker && w->rank == speaker) {
        dt_error theirs;
        dt_world_recv_bytes(w, theirs.msg, sizeof theirs.msg, from, AGREE_TAG,
                            "an error's message");
        theirs.msg[sizeof theirs.msg - 1] = 0;
        dt_error_set(err, "rank %d: %s", dt_world_job_rank_of(w, from), theirs.msg);
    }
    if (w->rank != speaker && !rc) dt_error_set(err, "rank %d failed", from);
    return -1;
}

/* Collective over w: whether every rank runs the same thing. On a mismatch every rank
 * returns the error; `speaker` prints it. */
static int ranks_agree(const dt_world *w, dt_fingerprint *fp, int filled, int speaker,
                       dt_error *err) {
    int rc = agree(w, filled, speaker, err);
    if (rc == 0) rc = agree(w, dt_fingerprint_compare(w, fp, err), speaker, err);
    dt_fingerprint_free(fp);
    return rc;
}

/* The RNG stream of the dropout seed of rank 0 (rank r: + r), apart from the tensors'
 * initialisation streams (0 .. tensors - 1). */
#define DROPOUT_STREAM 0xd0d0000000000000ULL

/* Loads --resume's checkpoint into the state: weights, momentum, step and epoch;
 * its numbers checked against this run. A run with nothing left to do sets
 * t->finished (its weights are loaded: --save writes them). */
static int resume(trainer *t, dt_error *err) {
    const dt_train_config *cfg = t->cfg;
    const dt_resume_run run = {cfg->epochs, t->train.size, cfg->batch_size};
    if (dt_resume_load(cfg->resume_dir, cfg, &run, &t->state.model, &t->state.opt, &t->from, err))
        return -1;
    if (t->from.workers != t->workers.size && t->mode->has_servers)
        return dt_error_set(err,
                            "--resume %s: the checkpoint was written by %d workers, this run "
                            "has %d (%s resumes on the same number; only allreduce may change "
                            "it)",
                            cfg->resume_dir, t->from.workers, t->workers.size, t->mode->name);
    t->finished = dt_resume_finished(&t->from, cfg->epochs, cfg->max_steps);
    t->resumed = 1;
    t->state.step = t->from.step;
    t->state.epoch = t->from.epoch;
    /* one training forward per step: dropout's next masks are the uninterrupted run's */
    t->state.model.dropout_calls = (uint64_t)t->from.step;
    return 0;
}

/* Rank 0 of a run that writes checkpoints, before any work: every metadata value of
 * its checkpoints fits whole, and the run log's absolute path is known. */
static int check_checkpoint(trainer *t, dt_error *err) {
    const dt_train_config *cfg = t->cfg;
    if (cfg->log_path && dt_resume_log_path(cfg->log_path, &t->log_abs, err)) return -1;
    return dt_resume_check_meta(cfg, t->log_abs, err);
}

/* Rank 0 opens the run log. A resumed run whose checkpoint has a log continues it
 * only when --log names that very file and its bytes up to the checkpoint are the
 * same; another --log must not exist yet (a new log); no --log is refused (the old
 * log would stop at the checkpoint without saying why). The log is left as it was
 * on any refusal. */
static int open_log(trainer *t, dt_error *err) {
    const dt_train_config *cfg = t->cfg;
    const char *dir = cfg->resume_dir, *path = cfg->log_path;
    const dt_resume_point *from = &t->from;
    const int had_log = t->resumed && from->log_offset >= 0;
    if (had_log && !path)
        return dt_error_set(err,
                            "--resume %s: the run goes on in its log %s; give --log with that "
                            "path to continue it, or --log NEW to start a new log",
                            dir, from->log);
    if (t->resumed && path) {
        if (!t->log_abs && dt_resume_log_path(path, &t->log_abs, err)) return -1;
        t->log_continued = had_log && !strcmp(t->log_abs, from->log);
        struct stat st;
        if (!t->log_continued && lstat(path, &st) == 0)
            return had_log ? dt_error_set(err,
                                          "--resume %s: --log %s is not the checkpoint's run "
                                          "log (%s); give that one to continue it, or a file "
                                          "that does not exist to start a new log",
                                          dir, path, from->log)
                           : dt_error_set(err,
                                          "--resume %s: --log %s exists and the checkpoint's "
                                          "run had no log; give a file that does not exist to "
                                          "start a new log",
                                          dir, path);
    }
    if (!t->log_continued) return dt_runlog_open(&t->log, path, err);
    dt_error why;
    if (dt_runlog_open_resume(&t->log, t->log_abs, from->log_offset, from->log_crc, &t->lost_steps,
                              &why))
        return dt_error_set(err, "--resume %s: %s", dir, why.msg);
    return 0;
}

/* The files rank 0 reads and writes (fileset.h), before any work: the checkpoint
 * folder is made first so its file can be told apart from the others. --resume DIR
 * and --checkpoint DIR may name one folder: its checkpoint is read whole at setup,
 * then replaced. */
static int check_files(const dt_train_config *cfg, dt_error *err) {
    if (cfg->checkpoint_dir && dt_resume_check_dir(cfg->checkpoint_dir, err)) return -1;
    dt_fileset files;
    dt_fileset_init(&files);
    dt_fileset_input(&files, "--init", cfg->init_path);
    int resume_is_checkpoint = 0;
    if (cfg->resume_dir && cfg->checkpoint_dir) {
        struct stat a, b;
        resume_is_checkpoint = stat(cfg->resume_dir, &a) == 0 &&
                               stat(cfg->checkpoint_dir, &b) == 0 && a.st_dev == b.st_dev &&
                               a.st_ino == b.st_ino;
    }
    if (!resume_is_checkpoint)
        dt_fileset_add_in(&files, "--resume", cfg->resume_dir, "checkpoint.safetensors", 0);
    dt_fileset_add_in(&files, "--checkpoint", cfg->checkpoint_dir, "checkpoint.safetensors", 1);
    dt_train_inputs_add(&files, cfg->model, cfg->data);
    dt_fileset_output(&files, "--log", cfg->log_path);
    dt_fileset_output(&files, "--trace", cfg->trace_path);
    dt_fileset_output(&files, "--save", cfg->save_path);
    int rc = dt_fileset_check(&files, err);
    dt_fileset_free(&files);
    if (rc == 0 && dt_onnx_is_path(cfg->save_path) && !dt_onnx_is_path(cfg->model))
        rc = dt_error_set(err,
                          "--save %s: an ONNX file is written back into an imported graph; "
                          "this --model is %s (save it as .safetensors)",
                          cfg->save_path, cfg->model);
    /* another run's checkpoint (or this one's, started again without --resume) is not
     * replaced by a fresh start */
    char held[4096];
    struct stat st;
    if (rc == 0 && cfg->checkpoint_dir && !resume_is_checkpoint) {
        rc = dt_resume_file(held, sizeof held, cfg->checkpoint_dir, err);
        if (rc == 0 && lstat(held, &st) == 0)
            rc = dt_error_set(err,
                              "--checkpoint %s already holds a checkpoint: add --resume %s to "
                              "continue that run, or give another folder",
                              cfg->checkpoint_dir, cfg->checkpoint_dir);
    }
    return rc;
}

static int lock_checkpoint_dir(trainer *t, dt_error *err) {
    const char *dir = t->cfg->checkpoint_dir;
    char path[4200], what[4200];
    snprintf(what, sizeof what, "--checkpoint %s", dir);
    if (dt_resume_check_dir(dir, err) || dt_resume_lock_path(path, sizeof path, dir, err))
        return -1;
    return dt_runlock_job(&t->ckpt_lock, path, what, DT_RESUME_LOCK_POLICY, err);
}

/* --trace-steps "A:B" or "A:" (to the end) into first, last (-1: the end). */
static int parse_trace_steps(const char *text, long *first, long *last, dt_error *err) {
    *first = 0, *last = -1;
    if (!text) return 0;
    const char *colon = strchr(text, ':');
    char a[32] = "";
    if (!colon || (size_t)(colon - text) >= sizeof a)
        return dt_error_set(err, "--trace-steps '%s': expected A:B or A: (steps from 0)", text);
    memcpy(a, text, (size_t)(colon - text));
    if (dt_parse_long("--trace-steps", a, 0, LONG_MAX, first, err) ||
        (colon[1] && dt_parse_long("--trace-steps", colon + 1, *first, LONG_MAX, last, err)))
        return -1;
    return 0;
}

static int start_trace(trainer *t, dt_error *err) {
    const dt_train_config *cfg = t->cfg;
    long first, last;
    if (parse_trace_steps(cfg->trace_steps, &first, &last, err) ||
        dt_trace_init(&t->trace_store, first, last,
                      cfg->trace_events > 0 ? (size_t)cfg->trace_events : DT_TRACE_DEFAULT_EVENTS,
                      err))
        return -1;
    t->trace = &t->trace_store;
    return 0;
}

/* Every worker's spans to the first, which writes the file: at the end of a run that
 * ended well on every worker (the clocks are measured again, a collective). */
static int write_trace(trainer *t, dt_error *err) {
    dt_trace_clock_measure(&t->workers, &t->trace->clock, 1);
    dt_trace_rank *ranks;
    dt_trace_gather(&t->workers, t->trace, t->job ? t->job->rank : 0, &ranks);
    if (!ranks) return 0;
    for (int r = 0; r < t->workers.size; r++)
        snprintf(ranks[r].host, sizeof ranks[r].host, "%s", t->hosts[r]);
    char version[96];
    snprintf(version, sizeof version, "%s (%s)", dt_version(), dt_version_commit());
    const dt_trace_meta meta = {.version = version,
                                .first = t->trace->first,
                                .last = t->trace->last,
                                .cap = t->trace->cap,
                                .steps_traced = t->trace->steps_traced,
                                .steps_left_out = t->trace->steps_left_out,
                                .t_origin = t->run_start};
    const int rc = dt_trace_write(t->cfg->trace_path, ranks, t->workers.size, &meta, err);
    dt_trace_ranks_free(ranks, t->workers.size);
    return rc;
}

/* What each rank sets up by itself: files, data, model, loader. */
static int setup_local(trainer *t, dt_error *err) {
    const dt_train_config *cfg = t->cfg;
    const dt_world *w = &t->workers;
    dt_model_spec spec; /* the model at the data's shape, where it takes it */
    /* one run per checkpoint folder (the one that writes it locks it; launch's job finds
     * launch holding it beside it: core/runlock), before anything there is looked at */
    if (w->rank == 0 && cfg->checkpoint_dir && lock_checkpoint_dir(t, err)) return -1;
    /* a typo in --save must not cost the whole run, nor may an output replace an input */
    if (w->rank == 0 && check_files(cfg, err)) return -1;
    if (w->rank == 0 && cfg->checkpoint_dir && check_checkpoint(t, err)) return -1;
    if (open_data(t, err) || dt_train_model_spec(&spec, cfg->model, cfg->width, &t->train, err))
        return -1;
    spec.precision = cfg->precision;
    spec.reinit = cfg->reinit;
    if (dt_train_state_init(&t->state, &spec, cfg->batch_size, cfg->seed, cfg->init_path, cfg->lr,
                            cfg->momentum, cfg->weight_decay, err))
        return -1;
    /* --save: its metadata writable (the model's name: no control character), and for
     * FILE.onnx what its write needs, before the run it would keep */
    dt_st_meta save_meta = {"model", ""};
    snprintf(save_meta.value, sizeof save_meta.value, "%s", cfg->model);
    if (w->rank == 0 && cfg->save_path &&
        dt_safetensors_meta_check(&save_meta, 1, cfg->save_path, err))
        return -1;
    if (w->rank == 0 && cfg->save_path && dt_onnx_is_path(cfg->save_path) &&
        dt_onnx_save_check(&t->state.model, cfg->model, cfg->save_path, err))
        return -1;
    /* Dropout's masks: from the run's seed, another stream per rank so that ranks drop
     * different units, as independent replicas would. */
    dt_rng dropout_rng = dt_rng_make(cfg->seed, DROPOUT_STREAM + (uint64_t)w->rank);
    t->state.model.dropout_seed = dt_rng_next_u64(&dropout_rng);
    t->labels = malloc(sizeof(int32_t) * (size_t)cfg->batch_size);
    if (!t->labels) return dt_error_set(err, "out of memory for the labels");
    dt_transform_init(&t->train_tf, &t->train, cfg->augment < 0 ? t->train.augment : cfg->augment,
                      cfg->seed);
    dt_transform_init(&t->test_tf, &t->test, 0, cfg->seed);
    if (dt_sampler_init(&t->sampler, t->train.size, w->rank, w->size, 1, cfg->seed, err) ||
        dt_loader_create(&t->loader, &t->train, &t->train_tf, cfg->batch_size, cfg->loader_workers,
                         0, err))
        return -1;
    t->steps_per_epoch = (t->sampler.num_samples + cfg->batch_size - 1) / cfg->batch_size;
    if (w->size > 1) { /* the straggler's medians */
        t->step_own = malloc(sizeof(double) * (size_t)(t->steps_per_epoch + 1));
        t->step_whole = malloc(sizeof(double) * (size_t)(t->steps_per_epoch + 1));
        if (!t->step_own || !t->step_whole)
            return dt_error_set(err, "out of memory for %ld steps' times", t->steps_per_epoch);
    }
    return cfg->trace_path ? start_trace(t, err) : 0;
}

/* Every worker's host name (dt_proc_host_name) to all: the straggler's and the run
 * record's (how many hosts). */
static int gather_hosts(trainer *t, dt_error *err) {
    const dt_world *w = &t->workers;
    char host[96] = "";
    dt_proc_host_name(host, sizeof host);
    t->hosts = calloc((size_t)w->size, sizeof *t->hosts);
    if (!t->hosts) return dt_error_set(err, "out of memory for the ranks' host names");
    if (w->size > 1)
        dt_world_allgather(w, host, t->hosts, sizeof host, DT_U8, "the ranks' host names");
    else
        memcpy(t->hosts[0], host, sizeof host);
    return 0;
}

/* Every failure here is agreed among the workers before the next exchange: a missing
 * file or a bad shape, on one rank or all, ends every rank alike with one line from
 * the first worker (no abort). */
static int setup(trainer *t, dt_error *err) {
    const dt_train_config *cfg = t->cfg;
    const dt_world *w = &t->workers;
    if (agree(w, setup_local(t, err), 0, err)) return -1;
    dt_fingerprint fp; /* before the first exchange of model-sized buffers */
    dt_fingerprint_init(&fp);
    if (w->size > 1 &&
        ranks_agree(w, &fp, dt_fingerprint_model(&fp, &t->state.model, &t->train, &t->test, err), 0,
                    err))
        return -1;
    t->state.sched = (dt_lr_schedule){
        cfg->lr_schedule,   cfg->lr,    cfg->lr_scaling_linear ? w->size : 1.0, cfg->warmup_epochs,
        t->steps_per_epoch, cfg->epochs};
    if (agree(w, cfg->resume_dir ? resume(t, err) : 0, 0, err)) return -1;
    if (t->finished) return 0; /* dt_train says so; nothing else is touched */
    dt_ps_config ps = cfg->ps;
    ps.mode = t->mode->ps_mode;
    ps.comm_dtype = cfg->comm_dtype;
    const dt_sync_setup sync = {.job = t->job,
                                .workers = w,
                                .model = &t->state.model,
                                .opt = &t->state.opt,
                                .allreduce = cfg->allreduce,
                                .comm_dtype = cfg->comm_dtype,
                                .bucket_mb = cfg->bucket_mb,
                                .overlap = cfg->overlap,
                                .ps = ps,
                                .epochs = cfg->epochs,
                                .trace = t->trace};
    const dt_sync_kind *kind = w->size == 1 && t->mode->alone ? t->mode->alone : t->mode->workers;
    int rc = dt_sync_create(&t->sync, kind, &sync, err);
    if (rc == 0) rc = gather_hosts(t, err);
    if (rc == 0 && w->rank == 0) {
        rc = open_log(t, err);
        t->log.flush_all = cfg->checkpoint_dir != NULL;
    }
    return agree(w, rc, 0, err);
}

static void log_run(trainer *t) {
    const dt_train_config *cfg = t->cfg;
    const int procs = t->job ? t->job->size : 1;
    dt_run_record r = {.params = (long long)t->state.model.n_params,
                       .procs = procs,
                       .batch_size = cfg->batch_size,
                       .global_batch = cfg->batch_size * t->workers.size,
                       .dataset_size = t->train.size,
                       .steps_per_epoch = t->steps_per_epoch,
                       .epochs = cfg->epochs,
                       .lr = cfg->lr,
                       .warmup_epochs = cfg->warmup_epochs,
                       .momentum = cfg->momentum,
                       .weight_decay = cfg->weight_decay,
                       .threads = t->threads.threads,
                       .loader_workers = cfg->loader_workers,
                       /* auto: 0, its choice in the epoch records' bucket_auto */
                       .bucket_mb = cfg->bucket_mb == 0  ? DT_DDP_BUCKET_MB_DEFAULT
                                    : cfg->bucket_mb > 0 ? cfg->bucket_mb
                                                         : 0,
                       .buckets = cfg->bucket_mb < 0 ? 0 : t->sync.buckets,
                       .overlap = t->sync.overlap,
                       .seed = (unsigned long long)cfg->seed,
                       .workers = t->workers.size,
                       .servers = procs - t->workers.size,
                       .cpu_quota = dt_cgroup_cpu_quota()};
    snprintf(r.model, sizeof r.model, "%s", cfg->model);
    snprintf(r.mode, sizeof r.mode, "%s",
             t->sync.kind == t->mode->alone ? t->sync.kind->name : t->mode->name);
    snprintf(r.data, sizeof r.data, "%s", cfg->data);
    snprintf(r.lr_scaling, sizeof r.lr_scaling, "%s", cfg->lr_scaling_linear ? "linear" : "none");
    snprintf(r.lr_schedule, sizeof r.lr_schedule, "%s", dt_lr_kind_name(cfg->lr_schedule));
    snprintf(r.allreduce, sizeof r.allreduce, "%s", dt_allreduce_name(cfg->allreduce));
    snprintf(r.comm_dtype, sizeof r.comm_dtype, "%s", dt_comm_dtype_name(cfg->comm_dtype));
    snprintf(r.precision, sizeof r.precision, "%s", dt_precision_name(cfg->precision));
    snprintf(r.overlap_why, sizeof r.overlap_why, "%s", t->sync.overlap_why);
    snprintf(r.threads_from, sizeof r.threads_from, "%s", t->threads.why);
    snprintf(r.allreduce_used, sizeof r.allreduce_used, "%s", t->sync.allreduce_used);
    snprintf(r.version, sizeof r.version, "%s (%s)", dt_version(), dt_version_commit());
    dt_sysinfo sys;
    dt_sysinfo_read(&sys);
    snprintf(r.cpu, sizeof r.cpu, "%s", sys.cpu);
    r.cpus = sys.cpus;
    r.memory_gib = sys.memory_gib;
    snprintf(r.isa, sizeof r.isa, "%s", sys.isa);
    char mpi[96] = "";
    if (t->job) dt_world_library(mpi, sizeof mpi);
    r.hosts = 0; /* distinct host names among the workers */
    for (int i = 0; t->hosts && i < t->workers.size; i++) {
        int seen = 0;
        for (int j = 0; j < i && !seen; j++) seen = !strcmp(t->hosts[i], t->hosts[j]);
        r.hosts += !seen;
    }
    snprintf(r.host, sizeof r.host, "%s", t->hosts ? t->hosts[0] : "");
    snprintf(r.libraries, sizeof r.libraries, "%s%s%s", sys.libraries, mpi[0] ? ", " : "", mpi);
    dt_runlog_run(&t->log, &r);
}

/* A traced step's spans: the step on its track, its phases one after another. */
static void trace_step(dt_trace *tr, long step, double t0, double t1, const double phase[4],
                       double t2, long long bytes) {
    static const dt_trace_name names[4] = {DT_SPAN_FORWARD, DT_SPAN_BACKWARD, DT_SPAN_EXCHANGE,
                                           DT_SPAN_OPTIMIZER};
    dt_trace_add(tr, DT_TRACK_STEPS, DT_SPAN_STEP, t0, t2, step, 0, bytes);
    dt_trace_add(tr, DT_TRACK_COMPUTE, DT_SPAN_DATA, t0, t1, step, 0, 0);
    for (int i = 0; i < 4; i++)
        dt_trace_add(tr, DT_TRACK_COMPUTE, names[i], phase[i], i < 3 ? phase[i + 1] : t2, step, 0,
                     0);
    dt_trace_step_end(tr);
}

/* One step: batch in, forward, loss, backward, exchange, update, step record.
 * Returns the loss (NaN/inf is the caller's to report) and adds to the epoch sums. */
static double train_step(trainer *t, int epoch, epoch_sums *e) {
    const dt_train_config *cfg = t->cfg;
    dt_model *m = &t->state.model;
    const int traced = t->trace && dt_trace_step_begin(t->trace, t->state.step);
    double phase[4] = {0, 0, 0, 0}; /* traced: forward, backward, exchange, optimizer begin */
    const double t0 = dt_now();
    const float *bx;
    const int32_t *by;
    const int n = dt_loader_next(t->loader, &bx, &by);
    const double t1 = dt_now(); /* t_data: the wait; the copy is t_train's */
    memcpy(dt_model_input_data(m), bx, sizeof(float) * dt_model_input_floats_per_sample(m) * n);
    memcpy(t->labels, by, sizeof(int32_t) * n);
    dt_loader_release(t->loader);
    const double lr = dt_lr_at(&t->state.sched, t->state.step + t->lr_shift);
    t->state.opt.lr = (float)lr;
    dt_step_comm c;
    memset(&c, 0, sizeof c);
    dt_model_zero_grad(m);
    dt_sync_step_begin(&t->sync, epoch, &c);
    if (traced) phase[0] = dt_now();
    dt_model_forward(m, n);
    int hits = 0;
    const double loss = dt_model_loss(m, t->labels, n, &hits);
    if (!isfinite(loss)) return loss;
    if (traced) phase[1] = dt_now();
    dt_model_backward(m, t->labels, n);
    if (cfg->delay_ms > 0 && t->workers.rank == cfg->delay_worker) {
        struct timespec ts = {cfg->delay_ms / 1000, (cfg->delay_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    if (traced) phase[2] = dt_now();
    dt_sync_after_backward(&t->sync, &c);
    if (traced) phase[3] = dt_now();
    dt_sync_update(&t->sync, &c);
    const double t2 = dt_now();
    if (traced) trace_step(t->trace, t->state.step, t0, t1, phase, t2, c.bytes_sent);
    e->t[E_T_DATA] += t1 - t0;
    if (e->own && e->steps < t->steps_per_epoch) {
        e->own[e->steps] = t1 - t0 + (t2 - t1 - c.t_comm_exposed);
        e->whole[e->steps] = t2 - t0;
    }
    e->steps++;
    e->t[E_T_TRAIN] += t2 - t1;
    e->t[E_T_COMPUTE] += t2 - t1 - c.t_comm_exposed;
    e->t[E_T_COMM] += c.t_comm;
    e->t[E_T_EXPOSED] += c.t_comm_exposed;
    e->bytes += (double)c.bytes_sent;
    dt_sysmon_add_mpi_bytes(&t->sysmon, c.bytes_sent);
    t->totals.steps++;
    t->totals.bytes_sent += c.bytes_sent;
    t->totals.bytes_received += c.bytes_received;
    t->totals.t_comm += c.t_comm;
    e->loss += loss * n;
    e->correct += hits;
    e->images += n;
    const dt_step_record rec = {.rank = t->workers.rank,
                                .epoch = epoch,
                                .step = t->state.step,
                                .loss = loss,
                                .lr = lr,
                                .t_data = t1 - t0,
                                .t_compute = t2 - t1 - c.t_comm_exposed,
                                .t_comm = c.t_comm,
                                .t_comm_exposed = c.t_comm_exposed,
                                .bytes_sent = c.bytes_sent,
                                .t_pull = c.t_pull,
                                .t_push = c.t_push,
                                .t_wait = c.t_wait,
                                .bytes_received = c.bytes_received};
    dt_runlog_step(&t->log, &rec);
    t->state.step++;
    return loss;
}

/* Collective over the workers: each one's median own time a step this epoch (its data
 * wait and compute: all but the exchange) to all, and the straggler among them, if any
 * (metrics/straggler.h); the worst so far is kept for the run's summary. */
static void find_straggler(trainer *t, int epoch, const epoch_sums *e, dt_straggler *s) {
    const dt_world *w = &t->workers;
    const int n = (int)(e->steps < t->steps_per_epoch ? e->steps : t->steps_per_epoch);
    const double mine[2] = {n > 0 ? dt_median(e->own, n) : 0.0,
                            n > 0 ? dt_median(e->whole, n) : 0.0};
    double *all = malloc(sizeof(double) * 2 * (size_t)w->size);
    if (!all) dt_world_abort(w, "out of memory for the ranks' step times");
    dt_world_allgather(w, mine, all, 2, DT_F64, "the ranks' step times");
    double step = 0.0; /* the mean of the ranks' median steps */
    for (int r = 0; r < w->size; r++) {
        step += all[2 * r + 1] / w->size;
        all[r] = all[2 * r]; /* own times first, in place */
    }
    dt_straggler_find(all, w->size, step, DT_STRAGGLER_SHARE, s);
    free(all);
    if (s->rank >= 0 && (t->worst.rank < 0 || s->share > t->worst.share))
        t->worst = *s, t->worst_epoch = epoch;
}

/* The epoch record: times as max and mean over the workers, totals summed. */
static dt_epoch_record epoch_record(trainer *t, int epoch, const epoch_sums *e) {
    double max[E_COUNT], mean[E_COUNT], totals[4] = {e->loss, e->correct, e->images, e->bytes};
    memcpy(max, e->t, sizeof max);
    memcpy(mean, e->t, sizeof mean);
    if (t->workers.size > 1) {
        dt_world_allreduce_doubles(&t->workers, max, E_COUNT, DT_REDUCE_MAX);
        dt_world_allreduce_doubles(&t->workers, mean, E_COUNT, DT_REDUCE_SUM);
        for (int i = 0; i < E_COUNT; i++) mean[i] /= t->workers.size;
        dt_world_allreduce_doubles(&t->workers, totals, 4, DT_REDUCE_SUM);
    }
    const double images = totals[2] > 0 ? totals[2] : 1;
    dt_straggler s = {.rank = -1};
    if (t->workers.size > 1) find_straggler(t, epoch, e, &s);
    dt_epoch_record r = {.epoch = epoch,
                         .train_loss = totals[0] / images,
                         .train_acc = totals[1] / images,
                         .t_epoch = max[E_T_LOOP],
                         .t_train = max[E_T_TRAIN],
                         .t_data = max[E_T_DATA],
                         .t_compute = max[E_T_COMPUTE],
                         .t_comm = max[E_T_COMM],
                         .t_comm_exposed = max[E_T_EXPOSED],
                         .t_epoch_mean = mean[E_T_LOOP],
                         .t_train_mean = mean[E_T_TRAIN],
                         .t_data_mean = mean[E_T_DATA],
                         .t_compute_mean = mean[E_T_COMPUTE],
                         .t_comm_mean = mean[E_T_COMM],
                         .t_comm_exposed_mean = mean[E_T_EXPOSED],
                         .bytes_sent = (long long)totals[3],
                         .images = (long long)totals[2],
                         .straggler = s.rank,
                         .straggler_slower = s.slower,
                         .straggler_wait = s.wait_s};
    if (s.rank >= 0) snprintf(r.straggler_host, sizeof r.straggler_host, "%s", t->hosts[s.rank]);
    return r;
}

/* Rank 0 writes the sys records every worker took since the last call: its own, then
 * each other rank's in rank order. Collective over the workers. */
static int log_sys(trainer *t, dt_error *err) {
    dt_sys_record *recs;
    long n;
    if (dt_sysmon_take(&t->sysmon, &recs, &n)) return dt_error_set(err, "out of memory (sys)");
    for (long i = 0; i < n; i++) snprintf(recs[i].role, sizeof recs[i].role, "worker");
    const dt_world *w = &t->workers;
    if (w->rank > 0) {
        dt_sys_records_send(w, 0, recs, n);
        free(recs);
        return 0;
    }
    for (long i = 0; i < n; i++) dt_runlog_sys(&t->log, &recs[i]);
    free(recs);
    for (int r = 1; r < w->size; r++) {
        if (dt_sys_records_recv(w, r, &recs, &n, err)) return -1;
        for (long i = 0; i < n; i++) dt_runlog_sys(&t->log, &recs[i]);
        free(recs);
    }
    return 0;
}

/* worker totals travel on their own tag, after the sys records */
enum { WORKER_TAG = 7403 };

/* Rank 0 writes every worker's totals, its own first (collective over the workers). */
static void log_workers(trainer *t) {
    const dt_world *w = &t->workers;
    t->totals.rank = w->rank;
    if (w->rank > 0) {
        dt_world_send_bytes(w, &t->totals, sizeof t->totals, 0, WORKER_TAG, "worker totals");
        return;
    }
    dt_runlog_worker(&t->log, &t->totals);
    for (int r = 1; r < w->size; r++) {
        dt_worker_record theirs;
        dt_world_recv_bytes(w, &theirs, sizeof theirs, r, WORKER_TAG, "worker totals");
        dt_runlog_worker(&t->log, &theirs);
    }
}

/* samples > 0: only the first samples of the test set (a shallow view of it). */
static int evaluate_some(trainer *t, long samples, double *loss, double *acc, dt_error *err) {
    dt_dataset view = t->test;
    if (samples > 0 && samples < view.size) view.size = (int)samples;
    dt_eval_result r;
    if (dt_evaluate(&t->state.model, &view, &t->test_tf, &t->workers, &r, err)) return -1;
    *loss = r.loss;
    *acc = r.accuracy;
    dt_eval_result_free(&r);
    return 0;
}

static int evaluate(trainer *t, double *loss, double *acc, dt_error *err) {
    return evaluate_some(t, 0, loss, acc, err);
}

/* --eval-every: an eval record after this step; the time it takes goes to *eval_time
 * (kept out of the epoch's times and the records' t_train). */
static int eval_during(trainer *t, int epoch, double run_start, double *eval_time, dt_error *err) {
    const double t0 = dt_now();
    double loss, acc;
    if (evaluate_some(t, t->cfg->eval_samples, &loss, &acc, err)) return -1;
    const long size = t->test.size;
    const long n =
        t->cfg->eval_samples > 0 && t->cfg->eval_samples < size ? t->cfg->eval_samples : size;
    const dt_eval_record r = {.epoch = epoch,
                              .step = t->state.step,
                              .t = t0 - run_start,
                              .t_train = t0 - run_start - *eval_time,
                              .test_loss = loss,
                              .test_acc = acc,
                              .samples = n};
    dt_runlog_eval(&t->log, &r);
    *eval_time += dt_now() - t0;
    dt_trace_add(t->trace, DT_TRACK_STEPS, DT_SPAN_EVAL, t0, dt_now(), -1, 0, 0);
    return 0;
}

static void report(trainer *t, dt_progress_fn progress, void *ctx, const dt_train_progress *p) {
    if (progress && t->workers.rank == 0) progress(ctx, p);
}

/* Divergence, as train --help states it: a loss that is NaN or infinite at any step,
 * or above DIVERGE_FACTOR times its reference for DIVERGE_STEPS steps in a row. The
 * reference is this process's first step loss, at least ln(classes) (chance level, so
 * a run resumed near zero loss is not held to a tiny one). Healthy runs spike far:
 * logreg under ssp on synthetic data reached 132 times its start for 2 steps and ended
 * at 100% accuracy (3 runs: 77x, 80x, 132x); lenet5 at --lr 5 went 8.1e7, 1.3e11,
 * 3.6e19, 3.2e18 from its fifth step (1e7 and more times its start), then fell back
 * to chance (10% accuracy) with a finite epoch loss of 6.5e17 (issue 25). A loss of
 * 10^4 times chance is a softmax saturated by logits tens of thousands apart. */
#define DIVERGE_FACTOR 1e4
enum { DIVERGE_STEPS = 3 };

/* The rate a divergence message names: the schedule's peak (--lr, linearly scaled),
 * not the rate at the failing step (a cosine schedule ends an epoch near 0). */
static double peak_lr(const trainer *t) {
    return t->state.sched.base_lr * t->state.sched.scale;
}

static int diverging(trainer *t, double loss) {
    if (!(t->loss_ref > 0)) {
        const double chance =
            log((double)(t->state.model.classes > 1 ? t->state.model.classes : 2));
        t->loss_ref = loss > chance ? loss : chance;
    }
    t->steps_above = loss > DIVERGE_FACTOR * t->loss_ref ? t->steps_above + 1 : 0;
    return t->steps_above >= DIVERGE_STEPS;
}

/* Writes the checkpoint of the state after t->state.step steps, to continue at
 * position pos of epoch `epoch`. Every worker calls it (the strategy may gather the
 * state from elsewhere); the first writes. */
static int checkpoint_now(trainer *t, int epoch, long pos, dt_error *err);
static int checkpoint(trainer *t, int epoch, long pos, dt_error *err) {
    if (!t->cfg->checkpoint_dir) return 0;
    const double t0 = dt_now();
    const int rc = checkpoint_now(t, epoch, pos, err);
    dt_trace_add(t->trace, DT_TRACK_STEPS, DT_SPAN_CHECKPOINT, t0, dt_now(), -1, 0, 0);
    return rc;
}

static int checkpoint_now(trainer *t, int epoch, long pos, dt_error *err) {
    const dt_train_config *cfg = t->cfg;
    if (dt_sync_collect(&t->sync, err)) return -1;
    if (t->workers.rank != 0) return 0;
    dt_resume_point p = {.step = t->state.step,
                         .epoch = epoch,
                         .epoch_pos = pos,
                         .workers = t->workers.size,
                         .opt_steps = t->state.opt.steps,
                         .log_offset = -1};
    /* the log as a resumed run must find it: where, how long, which bytes */
    if (t->log_abs && dt_runlog_prefix(&t->log, &p.log_offset, &p.log_crc) == 0)
        snprintf(p.log, sizeof p.log, "%s", t->log_abs); /* fits: dt_resume_check_meta */
    else
        p.log_offset = -1;
    return dt_resume_save(cfg->checkpoint_dir, cfg, &t->state.model, &t->state.opt, &p, err);
}

/* Moves the file from to to without replacing one there: renameat2's NOREPLACE, or,
 * where the file system lacks it, link() (which fails on an existing name) and
 * unlink(). -1 with errno (EEXIST: taken). */
static int move_no_replace(const char *from, const char *to) {
    if (renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE) == 0) return 0;
    if (errno != EINVAL && errno != ENOSYS) return -1;
    if (link(from, to) != 0) return -1;
    unlink(from);
    return 0;
}

/* Saves the weights where --save FILE.onnx could not go: FILE.safetensors beside it, or
 * FILE.N.safetensors (N = 1..99) while that name is taken: written whole under a name
 * of this process's, then moved to the first free name without replacing anything (an
 * input, another run's file, one created meanwhile). 0 with out filled. */
static int save_beside(const dt_model *m, const dt_st_meta *meta, int n_meta, const char *onnx,
                       char *out, size_t size, dt_error *err) {
    const size_t stem = strlen(onnx) - strlen(".onnx"); /* dt_onnx_is_path: it ends so */
    char tmp[4300];
    if ((size_t)snprintf(tmp, sizeof tmp, "%.*s.safetensors.%ld.saving", (int)stem, onnx,
                         (long)getpid()) >= sizeof tmp)
        return dt_error_set(err, "no free name beside it for the weights");
    if (dt_checkpoint_save(m, NULL, meta, n_meta, tmp, err)) return -1;
    for (int n = 0; n < 100; n++) {
        char suffix[32] = "";
        if (n) snprintf(suffix, sizeof suffix, ".%d", n);
        if ((size_t)snprintf(out, size, "%.*s%s.safetensors", (int)stem, onnx, suffix) >= size)
            break;
        if (move_no_replace(tmp, out) == 0) return 0;
        if (errno != EEXIST) {
            const int e = errno;
            unlink(tmp);
            return dt_error_set(err, "cannot write %s: %s", out, strerror(e));
        }
    }
    unlink(tmp);
    return dt_error_set(err, "no free name beside it for the weights");
}

/* --save: the first worker writes the weights after step t->state.step. An ONNX file
 * that cannot be written at the end (the --model file moved during the run) does not
 * lose the run: the weights go to a safetensors file beside it, and the run fails
 * with one line saying where they are. */
static int save_weights(const trainer *t, dt_error *err) {
    const dt_train_config *cfg = t->cfg;
    if (!cfg->save_path || t->workers.rank != 0) return 0;
    dt_st_meta meta[2] = {{"model", ""}, {"step", ""}};
    snprintf(meta[0].value, sizeof meta[0].value, "%s", cfg->model);
    snprintf(meta[1].value, sizeof meta[1].value, "%ld", t->state.step);
    if (!dt_onnx_is_path(cfg->save_path))
        return dt_checkpoint_save(&t->state.model, NULL, meta, 2, cfg->save_path, err);
    dt_error why;
    if (dt_onnx_save(&t->state.model, cfg->model, cfg->save_path, &why) == 0) return 0;
    char alt[4200];
    dt_error alt_err;
    if (save_beside(&t->state.model, meta, 2, cfg->save_path, alt, sizeof alt, &alt_err))
        return dt_error_set(err, "%s; the weights could not be saved beside it either: %s", why.msg,
                            alt_err.msg);
    return dt_error_set(err, "%s; the trained weights are in %s instead (--init reads them)",
                        why.msg, alt);
}

static int run(trainer *t, dt_progress_fn progress, void *ctx, dt_train_result *result,
               dt_error *err) {
    const dt_train_config *cfg = t->cfg;
    const long spe = t->steps_per_epoch;
    const long global_batch = (long)cfg->batch_size * t->workers.size;
    double last_loss = NAN, images_per_s = 0.0, test_loss = NAN, test_acc = NAN;
    const double run_start = t->run_start = dt_now();
    double eval_time = 0; /* all evaluation so far: not training time */
    int stop = 0;
    for (int epoch = t->state.epoch; epoch < cfg->epochs && !stop; epoch++) {
        t->state.epoch = epoch;
        /* a resumed epoch: the rest of its sample list, split over this run's ranks */
        const long start = t->resumed && epoch == t->from.epoch ? t->from.epoch_pos : 0;
        int count;
        const int *indices = dt_sampler_epoch_from(&t->sampler, epoch, start, &count);
        const long steps = (count + cfg->batch_size - 1) / cfg->batch_size, skipped = spe - steps;
        /* the schedule goes on from the same point of the epoch on this run's scale of
         * steps (0 unless the process count changed) */
        if (t->resumed && epoch == t->from.epoch)
            t->lr_shift = epoch * spe + skipped - t->state.step;
        dt_loader_start_epoch(t->loader, indices, count, epoch);
        t->epoch_pos = start;
        epoch_sums e;
        memset(&e, 0, sizeof e);
        e.own = t->step_own, e.whole = t->step_whole;
        const double epoch_start = dt_now(), eval_before = eval_time;
        int ckpt_at_end = 0;
        for (long step = 0; step < steps && !stop; step++) {
            last_loss = train_step(t, epoch, &e);
            if (isfinite(last_loss) && diverging(t, last_loss))
                return dt_error_set(err,
                                    "the weights diverged at epoch %d step %ld on rank %d: the "
                                    "loss stayed above %g (%g times its start) for %d "
                                    "steps, now %g (learning rate %g too high?); stopping "
                                    "without saving",
                                    epoch, skipped + step, t->workers.rank,
                                    DIVERGE_FACTOR * t->loss_ref, DIVERGE_FACTOR, DIVERGE_STEPS,
                                    last_loss, peak_lr(t));
            if (!isfinite(last_loss))
                return dt_error_set(err,
                                    "loss is %s at epoch %d step %ld on rank %d (learning rate "
                                    "%g too high?); stopping without saving",
                                    isnan(last_loss) ? "NaN" : "infinite", epoch, skipped + step,
                                    t->workers.rank, peak_lr(t));
            t->epoch_pos += global_batch;
            const double elapsed = dt_now() - epoch_start;
            images_per_s = e.images * t->workers.size / elapsed;
            const long left = (cfg->epochs - epoch) * spe - skipped - step - 1;
            report(t, progress, ctx,
                   &(dt_train_progress){.epoch = epoch,
                                        .epochs = cfg->epochs,
                                        .step = skipped + step + 1,
                                        .steps_per_epoch = spe,
                                        .loss = last_loss,
                                        .images_per_s = images_per_s,
                                        .eta_s = elapsed / (step + 1) * left});
            stop = cfg->max_steps > 0 && t->state.step >= cfg->max_steps;
            if (cfg->eval_every > 0 && t->state.step % cfg->eval_every == 0 &&
                eval_during(t, epoch, run_start, &eval_time, err))
                return -1;
            const int due = t->ckpt_unit == DT_CKPT_STEPS && t->state.step % t->ckpt_every == 0;
            /* after an epoch's last step, the checkpoint waits for its record */
            if (step == steps - 1)
                ckpt_at_end = due || stop;
            else if ((due || stop) && checkpoint(t, epoch, t->epoch_pos, err))
                return -1;
        }
        e.t[E_T_LOOP] = dt_now() - epoch_start - (eval_time - eval_before);
        dt_sync_epoch_end(&t->sync, epoch);
        dt_epoch_record er = epoch_record(t, epoch, &e);
        dt_sync_describe(&t->sync, &er);
        const double eval_start = dt_now();
        if (evaluate(t, &test_loss, &test_acc, err)) return -1;
        if (!isfinite(test_loss) || dt_model_first_non_finite(&t->state.model) >= 0)
            return dt_error_set(err,
                                "the weights diverged in epoch %d (test loss %s; learning rate %g "
                                "too high?); stopping without saving",
                                epoch, isfinite(test_loss) ? "finite, weights not" : "not finite",
                                peak_lr(t));
        er.test_loss = test_loss;
        er.test_acc = test_acc;
        er.t_eval = dt_now() - eval_start;
        dt_trace_add(t->trace, DT_TRACK_STEPS, DT_SPAN_EVAL, eval_start, eval_start + er.t_eval, -1,
                     0, 0);
        eval_time += er.t_eval;
        dt_runlog_epoch(&t->log, &er);
        if (log_sys(t, err)) return -1;
        if (t->log.write_failed) /* a full disk: stop now, not after the last epoch */
            return dt_error_set(err, "cannot write %s: %s", cfg->log_path,
                                strerror(t->log.write_failed));
        report(t, progress, ctx,
               &(dt_train_progress){.epoch = epoch,
                                    .epochs = cfg->epochs,
                                    .step = spe,
                                    .steps_per_epoch = spe,
                                    .loss = er.train_loss,
                                    .images_per_s = images_per_s,
                                    .epoch_done = 1,
                                    .test_loss = test_loss,
                                    .test_acc = test_acc,
                                    .train_acc = er.train_acc,
                                    .t_epoch = er.t_epoch});
        /* a run stopped inside the epoch has its checkpoint there already */
        const int epoch_due = t->ckpt_unit == DT_CKPT_EPOCHS && (epoch + 1) % t->ckpt_every == 0;
        if ((ckpt_at_end || ((epoch_due || epoch + 1 == cfg->epochs) && !stop)) &&
            checkpoint(t, epoch + 1, 0, err))
            return -1;
    }
    if (log_sys(t, err)) return -1;
    log_workers(t);
    int replaced = 0;
    if (dt_sync_finish(&t->sync, &t->log, &replaced, err) ||
        (replaced && evaluate(t, &test_loss, &test_acc, err)))
        return -1;
    if (t->trace && write_trace(t, err)) return -1;
    if (save_weights(t, err)) return -1;
    if (result)
        *result = (dt_train_result){.steps = t->state.step,
                                    .final_loss = last_loss,
                                    .test_acc = test_acc,
                                    .images_per_s = images_per_s,
                                    .straggler = t->worst.rank,
                                    .straggler_epoch = t->worst_epoch,
                                    .straggler_slower = t->worst.slower,
                                    .straggler_wait_s = t->worst.wait_s};
    if (result && t->worst.rank >= 0)
        snprintf(result->straggler_host, sizeof result->straggler_host, "%s",
                 t->hosts[t->worst.rank]);
    return dt_runlog_close(&t->log, err);
}

int dt_train(const dt_train_config *given, const dt_world *job, dt_progress_fn progress,
             void *progress_ctx, dt_train_result *result, dt_error *err) {
    dt_train_config resolved = *given; /* the flags left unset take the model's recipe */
    if (dt_train_config_resolve(&resolved, err)) return -1;
    const dt_train_config *cfg = &resolved;
    trainer t;
    memset(&t, 0, sizeof t);
    t.ckpt_lock.fd = -1;
    t.worst.rank = -1;
    t.cfg = cfg;
    t.job = job;
    if (dt_train_mode_of(cfg, &t.mode, err) ||
        dt_ckpt_every_parse(cfg->checkpoint_every, &t.ckpt_every, &t.ckpt_unit, err))
        return -1;
    if (cfg->checkpoint_every && !cfg->checkpoint_dir)
        return dt_error_set(err, "--checkpoint-every needs --checkpoint DIR");
    const int procs = job ? job->size : 1;
    const int servers = t.mode->has_servers ? cfg->ps.servers : 0;
    if (t.mode->has_servers && (!job || servers < 1 || procs <= servers))
        return dt_error_set(err, "%s needs more processes than --servers %d (got %d)", t.mode->name,
                            cfg->ps.servers, procs);
    if (job && job->size > 1) { /* every rank, servers included, before any other message */
        dt_fingerprint fp;
        dt_fingerprint_init(&fp);
        if (ranks_agree(job, &fp, dt_fingerprint_config(&fp, cfg, err), servers, err)) return -1;
    }
    if (!job) {
        t.workers = (dt_world){.comm = NULL, .rank = 0, .size = 1, .timeout_s = 25.0};
    } else if (servers > 0) { /* ranks 0..servers-1 serve, the others train */
        dt_world_split(job, job->rank < servers, job->rank, &t.workers);
        if (job->rank < servers) {
            dt_world_free(&t.workers);
            const int rc = t.mode->serve(cfg, job, err);
            if (rc && result) result->alone = 1;
            return rc;
        }
    } else {
        t.workers = *job;
        t.workers.owns_comm = 0;
    }
    dt_threads_choose_here(cfg->threads, &t.threads);
    dt_threads_set(t.threads.threads);
    int rc = setup(&t, err);
    t.set_up = rc == 0;
    if (rc == 0 && t.finished) { /* nothing to train, the log untouched: --save's file only */
        rc = save_weights(&t, err);
        if (rc == 0 && result) *result = (dt_train_result){.steps = t.from.step, .finished = 1};
        if (rc && result) result->alone = 1;
        trainer_free(&t);
        return rc;
    }
    if (rc == 0)
        rc = dt_sysmon_start(&t.sysmon, t.workers.rank,
                             cfg->sys_interval > 0 ? cfg->sys_interval : 1.0, err);
    if (rc == 0) {
        if (!t.log_continued) log_run(&t);
        if (t.resumed)
            dt_runlog_resume(&t.log, &(dt_resume_record){.step = t.from.step,
                                                         .epoch = t.from.epoch,
                                                         .procs = job ? job->size : 1,
                                                         .lost_steps = t.lost_steps});
        if (t.trace) dt_trace_clock_measure(&t.workers, &t.trace->clock, 0);
        rc = run(&t, progress, progress_ctx, result, err);
    }
    if (rc && t.set_up && result) result->alone = 1; /* after setup: the others are not told */
    trainer_free(&t);
    return rc;
}
