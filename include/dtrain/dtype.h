/* The element types of dtrain's buffers: what a storage holds (activations in f32 or
 * bf16), what the int8 engine runs on (s8, u8, s32), and what a collective sums.
 * bf16 is kept as its 16 bits (uint16_t); the conversions round to nearest even and
 * keep NaN a NaN, as oneDNN's and PyTorch's do, so our loops and oneDNN's primitives
 * agree bit for bit on the values they exchange. */
#ifndef DTRAIN_DTYPE_H
#define DTRAIN_DTYPE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef enum dt_dtype {
    DT_F32,
    DT_BF16,
    DT_S8,
    DT_U8,
    DT_S32,
    DT_F64,
    DT_S64,
    DT_DTYPE_COUNT
} dt_dtype;

/* Bytes of one element; "f32", "bf16", ... */
size_t dt_dtype_size(dt_dtype dtype);
const char *dt_dtype_name(dt_dtype dtype);

static inline uint16_t dt_bf16_from_f32(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even */
    return (uint16_t)(u >> 16);
}

static inline float dt_bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

#endif
