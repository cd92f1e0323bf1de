/* The ops of a quantized network kept float (DT_QOP_FLOAT, quant.h): the float model
 * of the network's graph, allocated for the batch in plain NCHW float32 with those ops'
 * parameters from the file, runs each of them; the engines write its int8 inputs into
 * it dequantized and quantize its output, with the arithmetic below, so both engines
 * compute the same integers. */
#ifndef DTRAIN_QFLOAT_H
#define DTRAIN_QFLOAT_H

#include <math.h>

#include "dtrain/error.h"
#include "quant/quant.h"

typedef struct dt_qfloat dt_qfloat;

/* *f = NULL if q keeps no op float. */
int dt_qfloat_create(dt_qfloat **f, const dt_qnet *q, int max_batch, dt_error *err);
void dt_qfloat_destroy(dt_qfloat *f);
/* Where kept-float op o reads its k-th input: [max_batch, per sample] floats, NCHW. */
float *dt_qfloat_input(dt_qfloat *f, const dt_qop *o, int k);
/* Whether the float model already holds kept-float op o's k-th input: x, written by a
 * kept-float op into the storage o reads (not through a dropout, whose copy the float
 * model never makes: then x's integers are dequantized). */
int dt_qfloat_holds(const dt_qfloat *f, const dt_qop *o, int k, const dt_qvalue *x);
/* Runs op o on n samples. */
void dt_qfloat_run(dt_qfloat *f, const dt_qop *o, int n);
/* Its output after dt_qfloat_run, NCHW. */
const float *dt_qfloat_output(const dt_qfloat *f, const dt_qop *o);

/* The conversions at a kept-float op's edges: x = q / scale; q = clamp(rint(x * scale)). */
static inline float dt_qfloat_dequantize(int q, float scale) {
    return (float)q / scale;
}

static inline int dt_qfloat_quantize(float x, const dt_qvalue *v) {
    const float r = rintf(x * v->scale);
    return r > (float)v->hi ? v->hi : r >= (float)v->lo ? (int)r : v->lo; /* NaN: lo */
}

/* A final average pooling's float logit: the window's sum times 1 / (its size), not
 * rounded, over the input's scale (both engines, quant.h). */
static inline float dt_qfloat_pooled_logit(int sum, float inv_size, float scale) {
    return (float)sum * inv_size / scale;
}

#endif
