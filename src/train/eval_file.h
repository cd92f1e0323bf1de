/* dtrain eval as a library call: weights from a safetensors file on the test split of
 * the data. A float file: loss, accuracy, accuracy per class and the confusion matrix.
 * A quantized file (dtrain quantize --out): the same of the int8 network, beside the
 * float weights it was made from (its metadata names them; used if unchanged) or
 * those of `compare`, with their top-1 agreement. */
#ifndef DTRAIN_EVAL_FILE_H
#define DTRAIN_EVAL_FILE_H

#include <stdio.h>

#include "dtrain/error.h"
#include "quant/qrun.h"
#include "train/trainer.h"

typedef struct dt_eval_file_options {
    /* model, data, width, batch size, seed, test samples and the weights (init_path) */
    const dt_train_config *cfg;
    const char *compare; /* float weights to compare a quantized file with, or NULL */
    const char *logits;  /* every sample's logits and label written there, or NULL */
    dt_int8_engine engine;
    /* engine named by --int8-engine: where oneDNN would not be exact it is refused, as
     * bench refuses it; the default falls back to the emulation with a note */
    int engine_given;
    int json; /* one JSON line instead of the text */
} dt_eval_file_options;

/* Checks the files (--logits replaces neither weights file), evaluates and writes the
 * text or the JSON line to out. */
int dt_eval_file(const dt_eval_file_options *o, FILE *out, dt_error *err);

#endif
