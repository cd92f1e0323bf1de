/* --calib-method auto: the calibration method that changes the float model's answers
 * least. Each candidate (entropy, percentile:99.99, minmax, 3sigma) calibrates on the
 * first part of the calibration images and runs as int8 on the held-out rest; the one
 * whose top-1 matches the given labels (quantize gives the float model's top-1) on the
 * most held-out images wins (a tie goes to the earlier in that list). The caller then
 * calibrates with the winner on every image. */
#ifndef DTRAIN_CALIB_AUTO_H
#define DTRAIN_CALIB_AUTO_H

#include <stdint.h>

#include "quant/qrun.h"
#include "quant/quant.h"

enum { DT_CALIB_CANDIDATES = 4 };

typedef struct dt_calib_trial {
    dt_calib_choice choice;
    long right; /* held-out images whose int8 top-1 is their label (labels[i]) */
} dt_calib_trial;

/* The candidates in order of preference. */
dt_calib_choice dt_calib_candidate(int i);

/* m: the allocated float model of spec; base: the scheme and weights granularity (its
 * calib ignored). calib/calib_ctx: the images calibrated on; held/held_ctx: the held-out
 * images, whose labels are labels[held_n], run on `engine` in batches of `batch`.
 * Fills trials[DT_CALIB_CANDIDATES] and *best (an index into them). */
int dt_calib_auto(dt_model *m, const dt_model_spec *spec, const dt_quant_config *base,
                  dt_quant_feed calib, void *calib_ctx, dt_quant_feed held, void *held_ctx,
                  const int32_t *labels, long held_n, dt_int8_engine engine, int batch,
                  dt_calib_trial *trials, int *best, dt_error *err);

#endif
