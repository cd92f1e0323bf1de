/* dtrain quantize as a library call: float weights and the first images of the
 * training split -> an int8 network written as safetensors, with the float weights'
 * absolute path, size and hash in its metadata (so eval can compare with them), and
 * optionally the per-layer report. */
#ifndef DTRAIN_QUANTIZE_FILE_H
#define DTRAIN_QUANTIZE_FILE_H

#include <stdio.h>

#include "dtrain/error.h"
#include "quant/quant.h"
#include "train/trainer.h"

typedef struct dt_quantize_file_options {
    /* model, data, width, batch size, seed and the float weights (init_path) */
    const dt_train_config *cfg;
    const char *out;        /* the quantized network */
    const char *report_dir; /* the per-layer report, or NULL */
    long calib_samples;     /* the first N training images */
    dt_quant_config qc;     /* scheme, weights, calibration method */
    int autocal; /* --calib-method auto: the candidate that keeps the most held-out images
                  * right (its scores written to out) */
} dt_quantize_file_options;

/* Checks the files (nothing written replaces the weights read, nor another output),
 * quantizes, saves and writes the line naming what it made to out. */
int dt_quantize_file(const dt_quantize_file_options *o, FILE *out, dt_error *err);

#endif
