/* The number format gradients travel in (--comm-dtype): fp32, or 16-bit bf16 / fp16 to
 * halve the bytes (the Theano-MPI study sent fp16). Conversion rounds to nearest even;
 * sums stay in fp32 on each rank, so only the values on the wire are rounded.
 *   bf16  fp32's range, 8 significant bits: no overflow, ~3 decimal digits.
 *   fp16  11 significant bits but a range of +-65504: larger magnitudes saturate to
 *         +-65504 (not inf), magnitudes below 2^-24 become 0. Gradients that large mean
 *         training has diverged; gradients that small barely move a weight anyway.
 * NaN and inf stay NaN and inf in both, so a diverged rank is still caught downstream. */
#ifndef DTRAIN_COMM_DTYPE_H
#define DTRAIN_COMM_DTYPE_H

#include <stddef.h>
#include <stdint.h>

typedef enum dt_comm_dtype { DT_COMM_FP32, DT_COMM_BF16, DT_COMM_FP16 } dt_comm_dtype;

int dt_comm_dtype_parse(const char *name, dt_comm_dtype *dtype);
const char *dt_comm_dtype_name(dt_comm_dtype dtype);
/* Bytes per value on the wire: 4 or 2. */
size_t dt_comm_dtype_size(dt_comm_dtype dtype);

/* dst[i] = src[i] rounded to dtype (bf16 or fp16 only). */
void dt_comm_pack(dt_comm_dtype dtype, uint16_t *dst, const float *src, size_t n);
/* dst[i] = src[i] as float. */
void dt_comm_unpack(dt_comm_dtype dtype, float *dst, const uint16_t *src, size_t n);
/* dst[i] += src[i] as float. */
void dt_comm_unpack_add(dt_comm_dtype dtype, float *dst, const uint16_t *src, size_t n);
/* buf[i] = buf[i] rounded to dtype and back: the value every other rank receives. */
void dt_comm_round(dt_comm_dtype dtype, float *buf, size_t n);

#endif
