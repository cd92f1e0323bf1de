#include "parallel/comm_dtype.h"

#include <string.h>

int dt_comm_dtype_parse(const char *name, dt_comm_dtype *dtype) {
    if (!strcmp(name, "fp32"))
        *dtype = DT_COMM_FP32;
    else if (!strcmp(name, "bf16"))
        *dtype = DT_COMM_BF16;
    else if (!strcmp(name, "fp16"))
        *dtype = DT_COMM_FP16;
    else
        return -1;
    return 0;
}

const char *dt_comm_dtype_name(dt_comm_dtype dtype) {
    return dtype == DT_COMM_BF16 ? "bf16" : dtype == DT_COMM_FP16 ? "fp16" : "fp32";
}

size_t dt_comm_dtype_size(dt_comm_dtype dtype) {
    return dtype == DT_COMM_FP32 ? sizeof(float) : sizeof(uint16_t);
}

static uint32_t bits_of(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float float_of(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint16_t to_bf16(float f) {
    const uint32_t u = bits_of(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u); /* quiet NaN */
    /* round to nearest even: add 0x7fff plus the lowest kept bit, then truncate */
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

static float from_bf16(uint16_t h) {
    return float_of((uint32_t)h << 16);
}

/* fp32 -> IEEE binary16, round to nearest even, saturating at +-65504. */
static uint16_t to_fp16(float f) {
    const uint32_t u = bits_of(f);
    const uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    const uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);  /* NaN */
    if (a == 0x7f800000u) return (uint16_t)(sign | 0x7c00u); /* inf stays inf */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7bffu); /* >= 65520 - half ulp: max */
    if (a < 0x38800000u) {                                   /* below 2^-14: subnormal */
        if (a < 0x33000000u) return sign;                    /* below 2^-25: rounds to 0 */
        const uint32_t mant = (a & 0x007fffffu) | 0x00800000u;
        const int shift = 126 - (int)(a >> 23); /* 14..24: value = mant * 2^-(shift+10) */
        const uint32_t q = mant >> shift, rest = mant & ((1u << shift) - 1u),
                       half = 1u << (shift - 1);
        const uint32_t r = q + (rest > half || (rest == half && (q & 1u)));
        return (uint16_t)(sign | r);
    }
    /* normal: rebias the exponent (127 -> 15), keep 10 mantissa bits, round */
    const uint32_t v = a - 0x38000000u; /* exponent - 112, in place */
    const uint32_t r = (v + 0x0fffu + ((v >> 13) & 1u)) >> 13;
    return (uint16_t)(sign | r);
}

static float from_fp16(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1f) return float_of(sign | 0x7f800000u | (m << 13));
    if (e != 0) return float_of(sign | ((e + 112u) << 23) | (m << 13));
    /* subnormal: m * 2^-24, exact in float */
    const float v = (float)m * 0x1p-24f;
    return sign ? -v : v;
}

void dt_comm_pack(dt_comm_dtype dtype, uint16_t *dst, const float *src, size_t n) {
    if (dtype == DT_COMM_BF16)
        for (size_t i = 0; i < n; i++) dst[i] = to_bf16(src[i]);
    else
        for (size_t i = 0; i < n; i++) dst[i] = to_fp16(src[i]);
}

void dt_comm_unpack(dt_comm_dtype dtype, float *dst, const uint16_t *src, size_t n) {
    if (dtype == DT_COMM_BF16)
        for (size_t i = 0; i < n; i++) dst[i] = from_bf16(src[i]);
    else
        for (size_t i = 0; i < n; i++) dst[i] = from_fp16(src[i]);
}

void dt_comm_unpack_add(dt_comm_dtype dtype, float *dst, const uint16_t *src, size_t n) {
    if (dtype == DT_COMM_BF16)
        for (size_t i = 0; i < n; i++) dst[i] += from_bf16(src[i]);
    else
        for (size_t i = 0; i < n; i++) dst[i] += from_fp16(src[i]);
}

void dt_comm_round(dt_comm_dtype dtype, float *buf, size_t n) {
    if (dtype == DT_COMM_BF16)
        for (size_t i = 0; i < n; i++) buf[i] = from_bf16(to_bf16(buf[i]));
    else if (dtype == DT_COMM_FP16)
        for (size_t i = 0; i < n; i++) buf[i] = from_fp16(to_fp16(buf[i]));
}
