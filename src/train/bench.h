/* dtrain bench as a library call: full training steps (zero gradients, forward, loss,
 * backward, the recipe's SGD update) or forward passes (--infer, fp32 or int8) on
 * random data; 3 warm-up steps, then the median and the mean rate. One JSON line per
 * run, written from a field table (the keys and formats tests/test_models.sh,
 * bench/compare_torch.sh and the bench scripts parse):
 *   training:  model, conv, width, params, batch_size, threads, layouts, precision,
 *              steps, images_per_s, ms_per_step (median), gflops, blas_core
 *   inference: model, mode ("infer"), dtype, engine, width, batch_size, threads, steps,
 *              images_per_s, ms_per_batch (median), gops, blas_core */
#ifndef DTRAIN_BENCH_H
#define DTRAIN_BENCH_H

#include <stdio.h>

#include "dtrain/error.h"
#include "dtrain/model.h"
#include "exec/exec.h"
#include "quant/qrun.h"

/* How many steps bench times (after 3 warm-up steps): at least `steps`, and in
 * training more, up to max_steps, until they add up to min_seconds (0: just steps). */
typedef struct dt_bench_span {
    long steps, max_steps;
    double min_seconds;
} dt_bench_span;

typedef struct dt_bench_options {
    const char *model;  /* the zoo name, as printed */
    dt_model_spec spec; /* the model to build (its width already taken from --width) */
    const char *data;   /* --data: the model takes its input shape and classes; or NULL */
    const struct dt_dataset *dataset; /* or the data already open (the caller's), or NULL */
    int width;                        /* --width as given (0: the model's own), for --data's spec */
    const char *init;                 /* --init: the weights (--infer), or NULL */
    int infer, int8, plain_layouts;
    dt_int8_engine engine;
    dt_conv_backend backend;
    dt_precision precision;
    int batch, threads;
    dt_bench_span span;              /* the steps timed */
    float momentum, weight_decay;    /* the recipe's: the update train does */
    int profile;                     /* --profile: time per layer kind to `profile_table` */
    const char *profile_out;         /* --profile-out: each op's time as JSON, or NULL */
    struct dt_profile *profile_into; /* or each op's time into this (the caller frees it with
                                        dt_profile_free), or NULL */
    int feed;           /* --feed: steps take their batches from data through train's loader */
    int loader_workers; /* with feed: its threads (0: the step decodes) */
    int load;           /* --load: after the warm-up steps print "load: warm" and run steps until
                           killed, answering each byte on stdin with their median (bench.c's
                           run_load): what a rank puts on the machine, beside a measurement */
} dt_bench_options;

/* The flags that cannot go together and the files of --profile-out, before any work
 * (a usage error: the CLI exits 2). */
int dt_bench_check(const dt_bench_options *o, dt_error *err);

/* Builds the model, times the steps, writes the JSON line to `out` (NULL: none), with
 * o->profile the per-kind table to `profile_table`, with o->profile_out the profile
 * file, with o->profile_into the profile in memory. */
int dt_bench_run(const dt_bench_options *o, FILE *out, FILE *profile_table, dt_error *err);

/* Each op's forward and backward time of `model` (a zoo name or FILE.onnx, fp32 on
 * oneDNN) at `batch` over the span's training steps on this machine with `threads`
 * threads (already set), as `dtrain bench --profile-out` takes it: what `simulate` and
 * `scale` predict from when given no profile. With `data` (else NULL: random samples,
 * the model's own input shape) the model takes the data's shape and each step its
 * batch through train's loader with `loader_workers` threads (bench --feed), whose
 * time lands in the profile's other_ms. */
int dt_bench_profile(struct dt_profile *p, const char *model, int width,
                     const struct dt_dataset *data, int loader_workers, int batch,
                     const dt_bench_span *span, int threads, dt_error *err);

#endif
