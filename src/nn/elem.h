/* One loop body for both activation dtypes: an op's loop is written once as a static
 * inline function taking `bf16` (0: f32, 1: bf16) and reading and writing activations
 * through these, and instantiated twice with a constant, so each copy compiles to the
 * plain loop of its type. Arithmetic is f32; a bf16 store rounds once (dtype.h). */
#ifndef DTRAIN_ELEM_H
#define DTRAIN_ELEM_H

#include <stddef.h>
#include <stdint.h>

#include "dtrain/dtype.h"

static inline float dt_elem_load(const void *p, size_t i, int bf16) {
    return bf16 ? dt_bf16_to_f32(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}

static inline void dt_elem_store(void *p, size_t i, float v, int bf16) {
    if (bf16)
        ((uint16_t *)p)[i] = dt_bf16_from_f32(v);
    else
        ((float *)p)[i] = v;
}

/* p[i] += v (a gradient's accumulation) */
static inline void dt_elem_add(void *p, size_t i, float v, int bf16) {
    dt_elem_store(p, i, dt_elem_load(p, i, bf16) + v, bf16);
}

#endif
