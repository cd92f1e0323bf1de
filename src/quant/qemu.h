/* The float emulation of a quantized network's integer arithmetic (quant.h gives the
 * formulas): integers held exactly (accumulators in double, im2col + dgemm), the
 * requantization in float32 in oneDNN's order, so it computes what the int8 path
 * computes, in any C compiler, on any machine. Slow; the reference. */
#ifndef DTRAIN_QEMU_H
#define DTRAIN_QEMU_H

#include <stdint.h>

#include "dtrain/error.h"
#include "quant/quant.h"

typedef struct dt_qemu dt_qemu;

int dt_qemu_create(dt_qemu **e, const dt_qnet *q, int max_batch, dt_error *err);
void dt_qemu_destroy(dt_qemu *e);
/* x: [n, c, h, w] normalised floats, n <= max_batch. */
void dt_qemu_forward(dt_qemu *e, const float *x, int n);
/* [n, classes]: the float logits, or the int8 ones divided by their scale. */
const float *dt_qemu_logits(const dt_qemu *e);
/* A value's integers after the last forward, [n, c, h, w] (tests, the report). */
const int16_t *dt_qemu_value(const dt_qemu *e, int value);

#endif
