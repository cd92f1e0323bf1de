#include "exec/bf16_ops.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "core/cpu_isa.h"
#include "core/rng.h"
#include "dnnl_ctx.h"
#include "nn/pool2d.h"
#include "nn/shortcut_pad.h"

/* These loops are memory-bound: bf16 halves their bytes, so they are written for the
 * compiler's vectoriser (fixed-width inner loops over partial sums or the 16 lanes of
 * a channel block, branch-free selects) and thread over independent outputs. The
 * conversions are dtype.h's, bit for bit (round to nearest even, NaN kept), written
 * without a branch so that they vectorise. */

static inline float bf(uint16_t h) {
    return dt_bf16_to_f32(h);
}

static inline uint16_t rn(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    const uint32_t quiet = (u >> 16) | 0x40u;
    return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? quiet : rounded);
}

/* x > 0 for a bf16 (so not -0, not NaN): the bits lie in [1, 0x7f80] (+inf included). */
static inline int positive(uint16_t h) {
    return (uint16_t)(h - 1u) < 0x7f80u;
}

/* Below this many elements a loop runs on one thread: waking the team costs more. */
enum { PAR_MIN = 1 << 14, BLK = 16, PARTIALS = 32, SPAN_ALIGN = 64 };

/* The elementwise loops run [0, count) split in one span per thread. In AVX2 the
 * conversions cost more than the bytes (rounding to bf16 is ~10 integer operations per
 * 8 values): on a CPU with AVX512-BF16 each span runs through vcvtneps2bf16 instead,
 * which rounds the same way (to nearest even, NaN kept quiet) but flushes denormals
 * (|x| < 2^-126) to zero, as oneDNN's bf16 kernels do. */
typedef void (*span_fn)(void *args, size_t lo, size_t hi, int avx512);

/* core/cpu_isa decides, so ONEDNN_MAX_CPU_ISA=AVX2 takes these loops off AVX-512 too. */
static int has_avx512_bf16(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    return dt_cpu_has_bf16();
#else
    return 0;
#endif
}

static void for_spans(size_t count, span_fn fn, void *args) {
    const int avx512 = has_avx512_bf16();
#pragma omp parallel if (count >= PAR_MIN)
    {
        const size_t nt = (size_t)omp_get_num_threads(), t = (size_t)omp_get_thread_num();
        const size_t per = (count / nt + SPAN_ALIGN - 1) / SPAN_ALIGN * SPAN_ALIGN;
        const size_t lo = t * per < count ? t * per : count,
                     hi = lo + per < count ? lo + per : count;
        if (lo < hi) fn(args, lo, hi, avx512);
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
#define AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))

/* 16 lanes at p (the first `m` of them when masked: the tail only, masked stores are
 * slow on AMD's cores) */
AVX512_BF16 static inline __m512 load16(const uint16_t *p, __mmask16 m) {
    const __m256i h =
        m == 0xffff ? _mm256_loadu_si256((const __m256i *)p) : _mm256_maskz_loadu_epi16(m, p);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

AVX512_BF16 static inline void store16(uint16_t *p, __m512 v, __mmask16 m) {
    const __m256bh h = _mm512_cvtneps_pbh(v);
    if (m == 0xffff)
        _mm256_storeu_si256((__m256i *)p, (__m256i)h);
    else
        _mm256_mask_storeu_epi16(p, m, (__m256i)h);
}

AVX512_BF16 static inline __m512 load16f(const float *p, __mmask16 m) {
    return m == 0xffff ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(m, p);
}

static inline __mmask16 tail_mask(size_t left) {
    return left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1u);
}

/* out = bf16(in) */
AVX512_BF16 static void avx_from_f32(uint16_t *out, const float *in, size_t lo, size_t hi) {
    for (size_t i = lo; i < hi; i += 16) {
        const __mmask16 m = tail_mask(hi - i);
        store16(out + i, load16f(in + i, m), m);
    }
}

AVX512_BF16 static void avx_to_f32(float *out, const uint16_t *in, size_t lo, size_t hi) {
    for (size_t i = lo; i < hi; i += 16) {
        const __mmask16 m = tail_mask(hi - i);
        const __m512 v = load16(in + i, m);
        if (m == 0xffff)
            _mm512_storeu_ps(out + i, v);
        else
            _mm512_mask_storeu_ps(out + i, m, v);
    }
}

/* out = bf16(a + b); b16: b is bf16, else f32 */
AVX512_BF16 static void avx_add(uint16_t *out, const uint16_t *a, const void *b, int b16, size_t lo,
                                size_t hi) {
    for (size_t i = lo; i < hi; i += 16) {
        const __mmask16 m = tail_mask(hi - i);
        const __m512 vb =
            b16 ? load16((const uint16_t *)b + i, m) : load16f((const float *)b + i, m);
        store16(out + i, _mm512_add_ps(load16(a + i, m), vb), m);
    }
}

/* da = bf16(da + g), db = bf16(db + g) */
AVX512_BF16 static void avx_add2(uint16_t *da, uint16_t *db, const uint16_t *g, size_t lo,
                                 size_t hi) {
    for (size_t i = lo; i < hi; i += 16) {
        const __mmask16 m = tail_mask(hi - i);
        const __m512 vg = load16(g + i, m);
        store16(da + i, _mm512_add_ps(load16(da + i, m), vg), m);
        store16(db + i, _mm512_add_ps(load16(db + i, m), vg), m);
    }
}
#endif

typedef struct span_args {
    void *out;
    const void *a, *b;
    void *out2;
} span_args;

static void span_from_f32(void *p, size_t lo, size_t hi, int avx512) {
    span_args *s = p;
    uint16_t *restrict out = s->out;
    const float *restrict in = s->a;
#if defined(__x86_64__) && defined(__GNUC__)
    if (avx512) {
        avx_from_f32(out, in, lo, hi);
        return;
    }
#endif
    (void)avx512;
    for (size_t i = lo; i < hi; i++) out[i] = rn(in[i]);
}

static void span_to_f32(void *p, size_t lo, size_t hi, int avx512) {
    span_args *s = p;
    float *restrict out = s->out;
    const uint16_t *restrict in = s->a;
#if defined(__x86_64__) && defined(__GNUC__)
    if (avx512) {
        avx_to_f32(out, in, lo, hi);
        return;
    }
#endif
    (void)avx512;
    for (size_t i = lo; i < hi; i++) out[i] = bf(in[i]);
}

/* out = bf16(a + b), b bf16 (out2 NULL) or f32 (out2 non-NULL, unused) */
static void span_add(void *p, size_t lo, size_t hi, int avx512) {
    span_args *s = p;
    uint16_t *out = s->out;
    const uint16_t *a = s->a;
    const int b16 = s->out2 == NULL;
#if defined(__x86_64__) && defined(__GNUC__)
    if (avx512) {
        avx_add(out, a, s->b, b16, lo, hi);
        return;
    }
#endif
    (void)avx512;
    if (b16) {
        const uint16_t *b = s->b;
        for (size_t i = lo; i < hi; i++) out[i] = rn(bf(a[i]) + bf(b[i]));
    } else {
        const float *b = s->b;
        for (size_t i = lo; i < hi; i++) out[i] = rn(bf(a[i]) + b[i]);
    }
}

static void span_add2(void *p, size_t lo, size_t hi, int avx512) {
    span_args *s = p;
    uint16_t *da = s->out, *db = s->out2;
    const uint16_t *g = s->a;
#if defined(__x86_64__) && defined(__GNUC__)
    if (avx512) {
        avx_add2(da, db, g, lo, hi);
        return;
    }
#endif
    (void)avx512;
    for (size_t i = lo; i < hi; i++) {
        const float v = bf(g[i]);
        da[i] = rn(bf(da[i]) + v);
        db[i] = rn(bf(db[i]) + v);
    }
}

void dt_bf16_from_f32_n(uint16_t *restrict out, const float *restrict in, size_t count) {
    span_args s = {out, in, NULL, NULL};
    for_spans(count, span_from_f32, &s);
}

void dt_bf16_to_f32_n(float *restrict out, const uint16_t *restrict in, size_t count) {
    span_args s = {out, in, NULL, NULL};
    for_spans(count, span_to_f32, &s);
}

void dt_bf16_add_f32_n(uint16_t *restrict acc, const float *restrict x, size_t count) {
    span_args s = {acc, acc, x, acc}; /* out2 non-NULL: b is f32 */
    for_spans(count, span_add, &s);
}

void dt_f32_add_bf16_n(float *restrict acc, const uint16_t *restrict x, size_t count) {
#pragma omp parallel for schedule(static) if (count >= PAR_MIN)
    for (size_t i = 0; i < count; i++) acc[i] += bf(x[i]);
}

/* ---- ReLU and the residual add ---- */

void dt_bf16_relu_forward(uint16_t *out, const uint16_t *in, size_t count) {
#pragma omp parallel for schedule(static) if (count >= PAR_MIN)
    for (size_t i = 0; i < count; i++) {
        const uint16_t h = in[i];
        out[i] = positive(h) ? h : 0;
    }
}

void dt_bf16_relu_backward(uint16_t *din, const uint16_t *dout, const uint16_t *out, size_t count,
                           int add) {
    if (add) {
#pragma omp parallel for schedule(static) if (count >= PAR_MIN)
        for (size_t i = 0; i < count; i++) {
            const uint16_t sum = rn(bf(din[i]) + bf(dout[i]));
            din[i] = positive(out[i]) ? sum : din[i];
        }
        return;
    }
    if (din == dout) { /* in place: one pointer, so the vectoriser's overlap test passes */
#pragma omp parallel for schedule(static) if (count >= PAR_MIN)
        for (size_t i = 0; i < count; i++) din[i] = positive(out[i]) ? din[i] : 0;
        return;
    }
#pragma omp parallel for schedule(static) if (count >= PAR_MIN)
    for (size_t i = 0; i < count; i++) din[i] = positive(out[i]) ? dout[i] : 0;
}

void dt_bf16_add_forward(uint16_t *out, const uint16_t *a, const uint16_t *b, size_t count) {
    span_args s = {out, a, b, NULL};
    for_spans(count, span_add, &s);
}

/* One gradient of the add: a copy, or an accumulation. */
static void pass_grad(uint16_t *d, const uint16_t *dout, size_t count, int add) {
    if (!add) {
        if (d != dout) memcpy(d, dout, sizeof(uint16_t) * count);
        return;
    }
    span_args s = {d, d, dout, NULL};
    for_spans(count, span_add, &s);
}

void dt_bf16_add_backward(uint16_t *da, uint16_t *db, const uint16_t *dout, size_t count, int add_a,
                          int add_b) {
    if (da && db && add_a && add_b) { /* the common join: one pass over dout */
        span_args s = {da, dout, NULL, db};
        for_spans(count, span_add2, &s);
        return;
    }
    if (da) pass_grad(da, dout, count, add_a);
    if (db) pass_grad(db, dout, count, add_b);
}

/* ---- BatchNorm ---- */

/* Per-plane sums in fp32 with PARTIALS independent partial sums (vector registers, not
 * one latency chain), merged per channel in double: fp32 error over at most a plane,
 * not over n * hw. */
static float sum_plane(const uint16_t *x, int len) {
    float acc[PARTIALS] = {0};
    int p = 0;
    for (; p + PARTIALS <= len; p += PARTIALS)
        for (int l = 0; l < PARTIALS; l++) acc[l] += bf(x[p + l]);
    float s = 0.0f;
    for (; p < len; p++) s += bf(x[p]);
    for (int l = 0; l < PARTIALS; l++) s += acc[l];
    return s;
}

static float sqdev_plane(const uint16_t *x, int len, float center) {
    float acc[PARTIALS] = {0};
    int p = 0;
    for (; p + PARTIALS <= len; p += PARTIALS)
        for (int l = 0; l < PARTIALS; l++) {
            const float d = bf(x[p + l]) - center;
            acc[l] += d * d;
        }
    float s = 0.0f;
    for (; p < len; p++) {
        const float d = bf(x[p]) - center;
        s += d * d;
    }
    for (int l = 0; l < PARTIALS; l++) s += acc[l];
    return s;
}

/* Chan et al.'s merge of (count, mean, M2) with a part of len values, sum s and
 * squared deviations q about `center`: the plane's own mean is s / len, and
 * sum (x - mean)^2 = q - len (mean - center)^2. Two passes per plane (it is in L1 by
 * the second), so a mean far from zero costs no precision, and one pass over memory. */
typedef struct moments {
    double count, mean, m2;
} moments;

static void moments_add(moments *mo, int len, float s, float q, float center) {
    const double nb = len, mean_b = (double)s / nb, off = mean_b - center;
    const double m2_b = fmax((double)q - nb * off * off, 0.0);
    const double n = mo->count + nb, delta = mean_b - mo->mean;
    mo->mean += delta * (nb / n);
    mo->m2 += m2_b + delta * delta * (mo->count * nb / n);
    mo->count = n;
}

/* The statistics of one channel, as dt_batchnorm2d_forward_train keeps them. */
typedef struct bn_coef {
    float mean, scale, shift;
} bn_coef;

static bn_coef bn_finish(const moments *mo, int ch, float *save_mean, float *save_invstd,
                         float *running_mean, float *running_var, const float *weight,
                         const float *bias, float momentum, float eps) {
    const double count = mo->count, mean = mo->mean, var = mo->m2 / count;
    const float invstd = (float)(1.0 / sqrt(var + eps));
    save_mean[ch] = (float)mean;
    save_invstd[ch] = invstd;
    const double unbiased = count > 1 ? mo->m2 / (count - 1) : var;
    running_mean[ch] = (float)((1.0 - momentum) * running_mean[ch] + momentum * mean);
    running_var[ch] = (float)((1.0 - momentum) * running_var[ch] + momentum * unbiased);
    return (bn_coef){(float)mean, weight[ch] * invstd, bias[ch]};
}

static inline float relu_if(float y, int relu) {
    return relu && !(y > 0.0f) ? 0.0f : y;
}

/* out = (in - mean) * scale + shift, as the fp32 kernel computes it, then rounded. */
static void bn_apply_plane(uint16_t *restrict y, const uint16_t *restrict x, int len, bn_coef k,
                           int relu) {
    if (relu)
        for (int p = 0; p < len; p++) {
            const float v = (bf(x[p]) - k.mean) * k.scale + k.shift;
            y[p] = rn(v > 0.0f ? v : 0.0f);
        }
    else
        for (int p = 0; p < len; p++) y[p] = rn((bf(x[p]) - k.mean) * k.scale + k.shift);
}

static void bn_apply_block(uint16_t *restrict y, const uint16_t *restrict x, int hw,
                           const float *mean, const float *scale, const float *shift, int relu) {
    for (int p = 0; p < hw; p++)
        for (int l = 0; l < BLK; l++)
            y[p * BLK + l] =
                rn(relu_if((bf(x[p * BLK + l]) - mean[l]) * scale[l] + shift[l], relu));
}

void dt_bf16_batchnorm2d_forward_train(uint16_t *out, float *save_mean, float *save_invstd,
                                       float *running_mean, float *running_var, const uint16_t *in,
                                       const float *weight, const float *bias, int n, int c, int hw,
                                       float momentum, float eps, int blocked, int relu) {
    if (!blocked) {
#pragma omp parallel for schedule(static)
        for (int ch = 0; ch < c; ch++) {
            moments mo = {0, 0, 0};
            for (int m = 0; m < n; m++) {
                const uint16_t *x = in + ((size_t)m * c + ch) * hw;
                const float s = sum_plane(x, hw), center = s / (float)hw;
                moments_add(&mo, hw, s, sqdev_plane(x, hw, center), center);
            }
            const bn_coef k = bn_finish(&mo, ch, save_mean, save_invstd, running_mean, running_var,
                                        weight, bias, momentum, eps);
            /* the channel's planes were just read: mostly still in L2 */
            for (int m = 0; m < n; m++) {
                const size_t base = ((size_t)m * c + ch) * hw;
                bn_apply_plane(out + base, in + base, hw, k, relu);
            }
        }
        return;
    }
    const int blocks = c / BLK;
#pragma omp parallel for schedule(static)
    for (int cb = 0; cb < blocks; cb++) {
        moments mo[BLK] = {{0, 0, 0}};
        float mean[BLK], scale[BLK], shift[BLK];
        for (int m = 0; m < n; m++) {
            const uint16_t *x = in + ((size_t)m * blocks + cb) * hw * BLK;
            float s0[BLK] = {0}, s1[BLK] = {0}, q0[BLK] = {0}, q1[BLK] = {0}, center[BLK];
            int p = 0;
            for (; p + 2 <= hw; p += 2)
                for (int l = 0; l < BLK; l++) {
                    s0[l] += bf(x[p * BLK + l]);
                    s1[l] += bf(x[(p + 1) * BLK + l]);
                }
            for (; p < hw; p++)
                for (int l = 0; l < BLK; l++) s0[l] += bf(x[p * BLK + l]);
            for (int l = 0; l < BLK; l++) {
                s0[l] += s1[l];
                center[l] = s0[l] / (float)hw;
            }
            for (p = 0; p + 2 <= hw; p += 2)
                for (int l = 0; l < BLK; l++) {
                    const float d0 = bf(x[p * BLK + l]) - center[l];
                    const float d1 = bf(x[(p + 1) * BLK + l]) - center[l];
                    q0[l] += d0 * d0;
                    q1[l] += d1 * d1;
                }
            for (; p < hw; p++)
                for (int l = 0; l < BLK; l++) {
                    const float d = bf(x[p * BLK + l]) - center[l];
                    q0[l] += d * d;
                }
            for (int l = 0; l < BLK; l++) moments_add(&mo[l], hw, s0[l], q0[l] + q1[l], center[l]);
        }
        for (int l = 0; l < BLK; l++) {
            const bn_coef k = bn_finish(&mo[l], cb * BLK + l, save_mean, save_invstd, running_mean,
                                        running_var, weight, bias, momentum, eps);
            mean[l] = k.mean;
            scale[l] = k.scale;
            shift[l] = k.shift;
        }
        for (int m = 0; m < n; m++) {
            const size_t base = ((size_t)m * blocks + cb) * hw * BLK;
            bn_apply_block(out + base, in + base, hw, mean, scale, shift, relu);
        }
    }
}

void dt_bf16_batchnorm2d_forward_eval(uint16_t *out, const uint16_t *in, const float *running_mean,
                                      const float *running_var, const float *weight,
                                      const float *bias, int n, int c, int hw, float eps,
                                      int blocked, int relu) {
    if (!blocked) {
#pragma omp parallel for schedule(static) collapse(2)
        for (int m = 0; m < n; m++)
            for (int ch = 0; ch < c; ch++) {
                const bn_coef k = {running_mean[ch], weight[ch] / sqrtf(running_var[ch] + eps),
                                   bias[ch]};
                const size_t base = ((size_t)m * c + ch) * hw;
                bn_apply_plane(out + base, in + base, hw, k, relu);
            }
        return;
    }
    const int blocks = c / BLK;
#pragma omp parallel for schedule(static) collapse(2)
    for (int m = 0; m < n; m++)
        for (int cb = 0; cb < blocks; cb++) {
            float mean[BLK], scale[BLK], shift[BLK];
            for (int l = 0; l < BLK; l++) {
                const int ch = cb * BLK + l;
                scale[l] = weight[ch] / sqrtf(running_var[ch] + eps);
                shift[l] = bias[ch];
                mean[l] = running_mean[ch];
            }
            const size_t base = ((size_t)m * blocks + cb) * hw * BLK;
            bn_apply_block(out + base, in + base, hw, mean, scale, shift, relu);
        }
}

/* The incoming gradient, masked by the fused ReLU's output when there is one. */
static inline float dy_at(const uint16_t *dout, const uint16_t *relu_out, size_t i) {
    const float g = bf(dout[i]);
    return relu_out && !positive(relu_out[i]) ? 0.0f : g;
}

/* sum(dy) and sum(dy * xhat) over one plane, fp32 partial sums. */
static void bn_grad_sums_plane(const uint16_t *dy, const uint16_t *x, const uint16_t *mask, int len,
                               float mean, float invstd, float *sdy, float *sdyx) {
    float a[PARTIALS] = {0}, b[PARTIALS] = {0};
    int p = 0;
    if (mask)
        for (; p + PARTIALS <= len; p += PARTIALS)
            for (int l = 0; l < PARTIALS; l++) {
                const float g = positive(mask[p + l]) ? bf(dy[p + l]) : 0.0f;
                a[l] += g;
                b[l] += g * ((bf(x[p + l]) - mean) * invstd);
            }
    else
        for (; p + PARTIALS <= len; p += PARTIALS)
            for (int l = 0; l < PARTIALS; l++) {
                const float g = bf(dy[p + l]);
                a[l] += g;
                b[l] += g * ((bf(x[p + l]) - mean) * invstd);
            }
    float sa = 0.0f, sb = 0.0f;
    for (; p < len; p++) {
        const float g = dy_at(dy, mask, (size_t)p);
        sa += g;
        sb += g * ((bf(x[p]) - mean) * invstd);
    }
    for (int l = 0; l < PARTIALS; l++) {
        sa += a[l];
        sb += b[l];
    }
    *sdy = sa;
    *sdyx = sb;
}

/* dx = gamma*invstd/M * (M*dy - sum(dy) - xhat*sum(dy*xhat)), as the fp32 kernel. */

typedef struct bn_grad_coef {
    float mean, invstd, k, mean_dy, mean_dy_xhat;
} bn_grad_coef;

static void bn_grad_plane(uint16_t *restrict dx, const uint16_t *restrict dy,
                          const uint16_t *restrict x, const uint16_t *restrict mask, int len,
                          bn_grad_coef g, int add) {
    for (int p = 0; p < len; p++) {
        const float xhat = (bf(x[p]) - g.mean) * g.invstd;
        const float v = g.k * (dy_at(dy, mask, (size_t)p) - g.mean_dy - xhat * g.mean_dy_xhat);
        dx[p] = rn(add ? bf(dx[p]) + v : v);
    }
}

void dt_bf16_batchnorm2d_backward(uint16_t *din, float *dweight, float *dbias, const uint16_t *dout,
                                  const uint16_t *in, const float *save_mean,
                                  const float *save_invstd, const float *weight,
                                  const uint16_t *relu_out, int n, int c, int hw, int blocked,
                                  int add) {
    const double count = (double)n * hw;
    if (!blocked) {
#pragma omp parallel for schedule(static)
        for (int ch = 0; ch < c; ch++) {
            const float mean = save_mean[ch], invstd = save_invstd[ch];
            double sum_dy = 0.0, sum_dy_xhat = 0.0;
            for (int m = 0; m < n; m++) {
                const size_t base = ((size_t)m * c + ch) * hw;
                float a, b;
                bn_grad_sums_plane(dout + base, in + base, relu_out ? relu_out + base : NULL, hw,
                                   mean, invstd, &a, &b);
                sum_dy += a;
                sum_dy_xhat += b;
            }
            dbias[ch] += (float)sum_dy;
            dweight[ch] += (float)sum_dy_xhat;
            if (!din) continue;
            const bn_grad_coef g = {mean, invstd, weight[ch] * invstd, (float)(sum_dy / count),
                                    (float)(sum_dy_xhat / count)};
            for (int m = 0; m < n; m++) {
                const size_t base = ((size_t)m * c + ch) * hw;
                bn_grad_plane(din + base, dout + base, in + base, relu_out ? relu_out + base : NULL,
                              hw, g, add);
            }
        }
        return;
    }
    const int blocks = c / BLK;
#pragma omp parallel for schedule(static)
    for (int cb = 0; cb < blocks; cb++) {
        float mean[BLK], invstd[BLK], k[BLK], mean_dy[BLK], mean_dy_xhat[BLK];
        double sum_dy[BLK] = {0}, sum_dy_xhat[BLK] = {0};
        for (int l = 0; l < BLK; l++) {
            mean[l] = save_mean[cb * BLK + l];
            invstd[l] = save_invstd[cb * BLK + l];
        }
        for (int m = 0; m < n; m++) {
            const size_t base = ((size_t)m * blocks + cb) * hw * BLK;
            float a[BLK] = {0}, b[BLK] = {0};
            for (int p = 0; p < hw; p++)
                for (int l = 0; l < BLK; l++) {
                    const size_t i = base + (size_t)p * BLK + l;
                    const float g = dy_at(dout, relu_out, i);
                    a[l] += g;
                    b[l] += g * ((bf(in[i]) - mean[l]) * invstd[l]);
                }
            for (int l = 0; l < BLK; l++) {
                sum_dy[l] += a[l];
                sum_dy_xhat[l] += b[l];
            }
        }
        for (int l = 0; l < BLK; l++) {
            const int ch = cb * BLK + l;
            dbias[ch] += (float)sum_dy[l];
            dweight[ch] += (float)sum_dy_xhat[l];
            k[l] = weight[ch] * invstd[l];
            mean_dy[l] = (float)(sum_dy[l] / count);
            mean_dy_xhat[l] = (float)(sum_dy_xhat[l] / count);
        }
        if (!din) continue;
        for (int m = 0; m < n; m++) {
            const size_t base = ((size_t)m * blocks + cb) * hw * BLK;
            for (int p = 0; p < hw; p++)
                for (int l = 0; l < BLK; l++) {
                    const size_t i = base + (size_t)p * BLK + l;
                    const float xhat = (bf(in[i]) - mean[l]) * invstd[l];
                    const float v =
                        k[l] * (dy_at(dout, relu_out, i) - mean_dy[l] - xhat * mean_dy_xhat[l]);
                    din[i] = rn(add ? bf(din[i]) + v : v);
                }
        }
    }
}

/* ---- Pooling ---- */

/* Whether x replaces the running maximum v: the first maximum wins, a NaN wins and
 * stays (pool2d.c's rule). */
static inline int takes_over(float x, float v) {
    return x > v || (x != x && v == v);
}

/* The scalar loops, for CPUs without AVX-512 and the shapes the vector paths leave
 * out. `lanes`: 1 (an NCHW plane) or BLK (a block of 16 channels side by side). */
static void mp_forward_plane(uint16_t *y, int32_t *am, const uint16_t *x, int h, int w, int ho,
                             int wo, int kernel, int stride, int pad, int lanes) {
    for (int oy = 0; oy < ho; oy++) {
        /* the window clipped to the input: padding is -inf, never the maximum */
        const int y0 = oy * stride - pad;
        const int ya = y0 < 0 ? 0 : y0, yb = y0 + kernel < h ? y0 + kernel : h;
        for (int ox = 0; ox < wo; ox++) {
            const int x0 = ox * stride - pad;
            const int xa = x0 < 0 ? 0 : x0, xb = x0 + kernel < w ? x0 + kernel : w;
            const size_t o = (size_t)(oy * wo + ox) * lanes;
            for (int l = 0; l < lanes; l++) {
                int32_t best = ya * w + xa;
                float v = bf(x[(size_t)best * lanes + l]);
                for (int i = ya; i < yb; i++)
                    for (int j = xa; j < xb; j++) {
                        const float px = bf(x[(size_t)(i * w + j) * lanes + l]);
                        const int take = takes_over(px, v);
                        v = take ? px : v;
                        best = take ? i * w + j : best;
                    }
                y[o + l] = x[(size_t)best * lanes + l];
                am[o + l] = best;
            }
        }
    }
}

/* Each input pixel sums the gradients of the windows it won, in the output order the
 * fp32 scatter adds them, and is stored once. */
static void mp_backward_plane(uint16_t *dx, const uint16_t *dy, const int32_t *am, int h, int w,
                              int ho, int wo, int kernel, int stride, int pad, int lanes, int add) {
    const dt_pool_windows wy = {0, h, ho, kernel, stride, pad, pad, 0},
                          wx = {0, w, wo, kernel, stride, pad, pad, 0};
    int ylo = 0, yhi = -1;
    for (int i = 0; i < h; i++) {
        dt_pool_cover_next(&wy, i, &ylo, &yhi);
        int xlo = 0, xhi = -1;
        for (int j = 0; j < w; j++) {
            dt_pool_cover_next(&wx, j, &xlo, &xhi);
            const int32_t pix = i * w + j;
            const size_t at = (size_t)pix * lanes;
            float g[BLK] = {0};
            for (int oy = ylo; oy <= yhi; oy++)
                for (int ox = xlo; ox <= xhi; ox++) {
                    const size_t o = (size_t)(oy * wo + ox) * lanes;
                    for (int l = 0; l < lanes; l++) g[l] += am[o + l] == pix ? bf(dy[o + l]) : 0.0f;
                }
            for (int l = 0; l < lanes; l++) dx[at + l] = rn(add ? bf(dx[at + l]) + g[l] : g[l]);
        }
    }
}

/* NCHW backward with an fp32 band of input rows (BAND floats at most): the fp32
 * kernel's scatter in its order (band[argmax] += dy, output by output), each row
 * rounded and stored once no later window can reach it. A scatter costs a few
 * instructions per output; the gather above re-reads every covering window per pixel. */
enum { BAND = 8192 };

static void mp_store_row(uint16_t *restrict dx, const float *restrict g, int w, int add,
                         int avx512);

static void mp_backward_band(uint16_t *dx, const uint16_t *dy, const int32_t *am, int h, int w,
                             int ho, int wo, int stride, int rows, int pad, int add, float *band,
                             int avx512) {
    memset(band, 0, sizeof(float) * (size_t)rows * w);
    int rb = -pad; /* the band's first row: that of output row oy's windows */
    for (int oy = 0; oy <= ho; oy++) {
        if (oy < ho) {
            const int32_t base = rb * w;
            const int32_t *a = am + (size_t)oy * wo;
            const uint16_t *d = dy + (size_t)oy * wo;
            for (int ox = 0; ox < wo; ox++) band[a[ox] - base] += bf(d[ox]);
        }
        /* rows no later window reaches: `stride` of them, all of them after the last */
        const int done = oy < ho ? stride : h - rb;
        for (int r = 0; r < done; r++) {
            if (rb + r >= 0 && rb + r < h)
                mp_store_row(dx + (size_t)(rb + r) * w, r < rows ? band + (size_t)r * w : NULL, w,
                             add, avx512);
        }
        if (oy == ho) break;
        const int keep = rows - stride; /* >= 0: rows = max(kernel, stride) */
        memmove(band, band + (size_t)stride * w, sizeof(float) * (size_t)keep * w);
        memset(band + (size_t)keep * w, 0, sizeof(float) * (size_t)stride * w);
        rb += stride;
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
/* takes_over on 16 lanes: "not x <= v" is x > v or either a NaN; a NaN v stays. */
AVX512_BF16 static inline __mmask16 takes_over16(__m512 x, __m512 v) {
    return _mm512_mask_cmp_ps_mask(_mm512_cmp_ps_mask(v, v, _CMP_ORD_Q), x, v, _CMP_NLE_UQ);
}

/* 16 floats that hold bf16 values: their 16 bf16, bit for bit */
AVX512_BF16 static inline __m256i bits16(__m512 v) {
    return _mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_castps_si512(v), 16));
}

/* rn() on 16 lanes, exactly (denormals kept): the bf16 in each lane's high half, the
 * low half zero */
AVX512_BF16 static inline __m512i rn16(__m512 f) {
    const __m512i u = _mm512_castps_si512(f), high = _mm512_set1_epi32((int)0xffff0000u);
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    const __m512i rounded = _mm512_and_si512(
        _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), odd), high);
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(
        _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
    return _mm512_mask_mov_epi32(
        rounded, nan, _mm512_and_si512(_mm512_or_si512(u, _mm512_set1_epi32(0x400000)), high));
}

/* The NCHW forward's outputs [oa, ob) of one row (at y, am), stride 2, their windows
 * inside the plane's columns and rows [ya, yb): 16 outputs a vector. The 32-bit lane l
 * of 32 bf16 loaded at column 2 (oa + l) - pad + j holds window l's pixels j (low
 * half: a float once shifted up) and j + 1 (high half: a float once masked), so each
 * load serves two columns of every window, scanned in the scalar loop's order. room:
 * outputs from y[0] to the plane's end; a store may spill over outputs written later. */
AVX512_BF16 __attribute__((always_inline)) static inline void
mp_forward_row_s2(uint16_t *y, int32_t *am, const uint16_t *x, int w, int ya, int yb, int kernel,
                  int pad, int oa, int ob, int room) {
    const __m512i two =
                      _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30),
                  high = _mm512_set1_epi32((int)0xffff0000u);
    for (int ox = oa; ox < ob; ox += 16) {
        const int x0 = 2 * ox - pad;
        const __m512i col = _mm512_add_epi32(_mm512_set1_epi32(x0), two);
        __m512 v = _mm512_setzero_ps();
        __m512i best = _mm512_setzero_si512();
        int first = 1;
        for (int i = ya; i < yb; i++) {
            const uint16_t *r = x + (size_t)i * w + x0;
            for (int j = 0; j < kernel; j += 2) {
                /* the row's pixels from r + j on: at least the 2 * 16 - 1 this reads */
                const int avail = w - x0 - j;
                const __m512i pair =
                    avail >= 32 ? _mm512_loadu_si512(r + j)
                                : _mm512_maskz_loadu_epi16((__mmask32)((1u << avail) - 1u), r + j);
                const __m512i idx = _mm512_add_epi32(col, _mm512_set1_epi32(i * w + j));
                const __m512 lo = _mm512_castsi512_ps(_mm512_slli_epi32(pair, 16));
                if (first) {
                    v = lo, best = idx, first = 0;
                } else {
                    const __mmask16 t = takes_over16(lo, v);
                    v = _mm512_mask_mov_ps(v, t, lo);
                    best = _mm512_mask_mov_epi32(best, t, idx);
                }
                if (j + 1 < kernel) {
                    const __m512 hi = _mm512_castsi512_ps(_mm512_and_si512(pair, high));
                    const __mmask16 t = takes_over16(hi, v);
                    v = _mm512_mask_mov_ps(v, t, hi);
                    best =
                        _mm512_mask_mov_epi32(best, t, _mm512_add_epi32(idx, _mm512_set1_epi32(1)));
                }
            }
        }
        if (ob - ox >= 16 || room - ox >= 16) {
            _mm256_storeu_si256((__m256i *)(y + ox), bits16(v));
            _mm512_storeu_si512(am + ox, best);
        } else {
            const __mmask16 m = (__mmask16)((1u << (ob - ox)) - 1u);
            _mm256_mask_storeu_epi16(y + ox, m, bits16(v));
            _mm512_mask_storeu_epi32(am + ox, m, best);
        }
    }
}

/* The NCHW forward at stride 2: the vector rows, then the edge outputs (after them:
 * the vector stores may spill over them). more: outputs past the plane this thread
 * writes later (its next planes), which a store may spill over too. */
AVX512_BF16 static void mp_forward_s2(uint16_t *y, int32_t *am, const uint16_t *x, int h, int w,
                                      int ho, int wo, int kernel, int pad, int oa, int ob,
                                      int more) {
    const int stride = 2;
    for (int oy = 0; oy < ho; oy++) {
        const int y0 = oy * stride - pad;
        const int ya = y0 < 0 ? 0 : y0, yb = y0 + kernel < h ? y0 + kernel : h;
        uint16_t *yr = y + (size_t)oy * wo;
        int32_t *ar = am + (size_t)oy * wo;
        /* the common kernels as constants: their scans unrolled */
        if (kernel == 2 && yb - ya == 2)
            mp_forward_row_s2(yr, ar, x, w, ya, ya + 2, 2, pad, oa, ob, (ho - oy) * wo + more);
        else if (kernel == 3 && yb - ya == 3)
            mp_forward_row_s2(yr, ar, x, w, ya, ya + 3, 3, pad, oa, ob, (ho - oy) * wo + more);
        else
            mp_forward_row_s2(yr, ar, x, w, ya, yb, kernel, pad, oa, ob, (ho - oy) * wo + more);
        /* the edge outputs after the vector ones, which may spill over them */
        for (int ox = 0; ox < wo; ox++) {
            if (ox == oa) ox = ob;
            if (ox >= wo) break;
            const int x0 = ox * stride - pad;
            const int xa = x0 < 0 ? 0 : x0, xb = x0 + kernel < w ? x0 + kernel : w;
            int32_t best = ya * w + xa;
            float v = bf(x[best]);
            for (int i = ya; i < yb; i++)
                for (int j = xa; j < xb; j++) {
                    const float px = bf(x[i * w + j]);
                    const int take = takes_over(px, v);
                    v = take ? px : v;
                    best = take ? i * w + j : best;
                }
            yr[ox] = x[best];
            ar[ox] = best;
        }
    }
}

/* The blocked forward: 16 channels a vector, the scalar loop's scan. */
AVX512_BF16 static void mp_forward_blocked(uint16_t *y, int32_t *am, const uint16_t *x, int h,
                                           int w, int ho, int wo, int kernel, int stride, int pad) {
    for (int oy = 0; oy < ho; oy++) {
        const int y0 = oy * stride - pad;
        const int ya = y0 < 0 ? 0 : y0, yb = y0 + kernel < h ? y0 + kernel : h;
        for (int ox = 0; ox < wo; ox++) {
            const int x0 = ox * stride - pad;
            const int xa = x0 < 0 ? 0 : x0, xb = x0 + kernel < w ? x0 + kernel : w;
            __m512 v = load16(x + (size_t)(ya * w + xa) * BLK, 0xffff);
            __m512i best = _mm512_set1_epi32(ya * w + xa);
            for (int i = ya; i < yb; i++)
                for (int j = i == ya ? xa + 1 : xa; j < xb; j++) {
                    const __m512 px = load16(x + (size_t)(i * w + j) * BLK, 0xffff);
                    const __mmask16 t = takes_over16(px, v);
                    v = _mm512_mask_mov_ps(v, t, px);
                    best = _mm512_mask_mov_epi32(best, t, _mm512_set1_epi32(i * w + j));
                }
            const size_t o = (size_t)(oy * wo + ox) * BLK;
            _mm256_storeu_si256((__m256i *)(y + o), bits16(v));
            _mm512_storeu_si512(am + o, best);
        }
    }
}

/* The blocked backward: the gather of mp_backward_plane, 16 channels a vector. */
AVX512_BF16 static void mp_backward_blocked(uint16_t *dx, const uint16_t *dy, const int32_t *am,
                                            int h, int w, int ho, int wo, int kernel, int stride,
                                            int pad, int add) {
    const dt_pool_windows wy = {0, h, ho, kernel, stride, pad, pad, 0},
                          wx = {0, w, wo, kernel, stride, pad, pad, 0};
    int ylo = 0, yhi = -1;
    for (int i = 0; i < h; i++) {
        dt_pool_cover_next(&wy, i, &ylo, &yhi);
        int xlo = 0, xhi = -1;
        for (int j = 0; j < w; j++) {
            dt_pool_cover_next(&wx, j, &xlo, &xhi);
            const __m512i pix = _mm512_set1_epi32(i * w + j);
            __m512 g = _mm512_setzero_ps();
            for (int oy = ylo; oy <= yhi; oy++)
                for (int ox = xlo; ox <= xhi; ox++) {
                    const size_t o = (size_t)(oy * wo + ox) * BLK;
                    const __mmask16 won = _mm512_cmpeq_epi32_mask(_mm512_loadu_si512(am + o), pix);
                    g = _mm512_mask_add_ps(g, won, g, load16(dy + o, 0xffff));
                }
            uint16_t *d = dx + (size_t)(i * w + j) * BLK;
            if (add) g = _mm512_add_ps(load16(d, 0xffff), g);
            _mm256_storeu_si256((__m256i *)d,
                                _mm512_cvtepi32_epi16(_mm512_srli_epi32(rn16(g), 16)));
        }
    }
}

/* The NCHW backward of 2x2 stride-2 windows inside the plane: output row oy's 16
 * outputs a vector, each writing the 32-bit lane of its two pixels in input rows 2 oy
 * and 2 oy + 1 (as mp_forward_row_s2 reads them); written, a pixel's gradient is
 * 0 + dy (exact: no rounding). Then the column and the row no window covers. */
AVX512_BF16 static void mp_backward_2x2(uint16_t *dx, const uint16_t *dy, const int32_t *am, int h,
                                        int w, int ho, int wo, int add) {
    const __m512i two =
                      _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30),
                  high = _mm512_set1_epi32((int)0xffff0000u);
    const size_t plane = (size_t)h * w;
    for (int oy = 0; oy < ho; oy++) {
        for (int ox = 0; ox < wo; ox += 16) {
            const int rem = wo - ox < 16 ? wo - ox : 16;
            const __mmask16 m = tail_mask((size_t)rem);
            const __mmask32 m2 = rem == 16 ? 0xffffffffu : (__mmask32)((1u << 2 * rem) - 1u);
            const size_t o = (size_t)oy * wo + ox;
            const __m512i a =
                rem == 16 ? _mm512_loadu_si512(am + o) : _mm512_maskz_loadu_epi32(m, am + o);
            const __m512 d = load16(dy + o, m);
            for (int i = 2 * oy; i < 2 * oy + 2; i++) {
                uint16_t *at = dx + (size_t)i * w + 2 * ox;
                const __m512i idx = _mm512_add_epi32(_mm512_set1_epi32(i * w + 2 * ox), two);
                const __mmask16 won_lo = _mm512_mask_cmpeq_epi32_mask(m, a, idx),
                                won_hi = _mm512_mask_cmpeq_epi32_mask(
                                    m, a, _mm512_add_epi32(idx, _mm512_set1_epi32(1)));
                __m512 lo = _mm512_maskz_add_ps(won_lo, _mm512_setzero_ps(), d),
                       hi = _mm512_maskz_add_ps(won_hi, _mm512_setzero_ps(), d);
                __m512i out;
                if (add) {
                    const __m512i old = _mm512_maskz_loadu_epi16(m2, at);
                    lo = _mm512_add_ps(_mm512_castsi512_ps(_mm512_slli_epi32(old, 16)), lo);
                    hi = _mm512_add_ps(_mm512_castsi512_ps(_mm512_and_si512(old, high)), hi);
                    out = _mm512_or_si512(_mm512_srli_epi32(rn16(lo), 16), rn16(hi));
                } else {
                    out = _mm512_or_si512(_mm512_srli_epi32(_mm512_castps_si512(lo), 16),
                                          _mm512_and_si512(_mm512_castps_si512(hi), high));
                }
                /* written, lanes past the outputs are zeros: in a row of one vector
                 * they may spill over pixels stored later (this row's uncovered
                 * column, the next rows) */
                if (rem == 16 || (!add && wo <= 16 && plane - ((size_t)i * w + 2 * ox) >= 32))
                    _mm512_storeu_si512(at, out);
                else
                    _mm512_mask_storeu_epi16(at, m2, out);
            }
        }
        if (w > 2 * wo)
            for (int i = 2 * oy; i < 2 * oy + 2; i++) {
                uint16_t *last = dx + (size_t)i * w + w - 1;
                *last = add ? rn(bf(*last) + 0.0f) : 0;
            }
    }
    for (int i = 2 * ho; i < h; i++)
        for (int j = 0; j < w; j++)
            dx[(size_t)i * w + j] = add ? rn(bf(dx[(size_t)i * w + j]) + 0.0f) : 0;
}

/* The blocked backward of windows that tile the plane (kernel == stride, no padding,
 * every window inside): a pixel lies in one window at most, so output by output, each
 * of its pixels stored once; then the pixels no window covers. */
AVX512_BF16 static void mp_backward_blocked_tiles(uint16_t *dx, const uint16_t *dy,
                                                  const int32_t *am, int h, int w, int ho, int wo,
                                                  int k, int add) {
    for (int oy = 0; oy < ho; oy++)
        for (int ox = 0; ox < wo; ox++) {
            const size_t o = (size_t)(oy * wo + ox) * BLK;
            const __m512i a = _mm512_loadu_si512(am + o);
            const __m512 d = load16(dy + o, 0xffff);
            for (int ky = 0; ky < k; ky++)
                for (int kx = 0; kx < k; kx++) {
                    const int32_t pix = (oy * k + ky) * w + ox * k + kx;
                    const __mmask16 won = _mm512_cmpeq_epi32_mask(a, _mm512_set1_epi32(pix));
                    __m512 g = _mm512_maskz_add_ps(won, _mm512_setzero_ps(), d);
                    uint16_t *p = dx + (size_t)pix * BLK;
                    if (add) g = _mm512_add_ps(load16(p, 0xffff), g);
                    _mm256_storeu_si256((__m256i *)p,
                                        _mm512_cvtepi32_epi16(_mm512_srli_epi32(rn16(g), 16)));
                }
        }
    for (int i = 0; i < h; i++)
        for (int j = i < k * ho ? k * wo : 0; j < w; j++) {
            uint16_t *p = dx + (size_t)(i * w + j) * BLK;
            const __m512 g = add ? load16(p, 0xffff) : _mm512_setzero_ps();
            _mm256_storeu_si256((__m256i *)p,
                                _mm512_cvtepi32_epi16(_mm512_srli_epi32(rn16(g), 16)));
        }
}

AVX512_BF16 static void avx_store_row(uint16_t *restrict dx, const float *restrict g, int w,
                                      int add) {
    for (int j = 0; j < w; j += 16) {
        const __mmask16 m = tail_mask((size_t)(w - j));
        __m512 v = g ? load16f(g + j, m) : _mm512_setzero_ps();
        if (add) v = _mm512_add_ps(load16(dx + j, m), v);
        const __m256i b = _mm512_cvtepi32_epi16(_mm512_srli_epi32(rn16(v), 16));
        if (m == 0xffff)
            _mm256_storeu_si256((__m256i *)(dx + j), b);
        else
            _mm256_mask_storeu_epi16(dx + j, m, b);
    }
}
#endif

/* dx = rn(add ? dx + g : g), g NULL: zeros */
static void mp_store_row(uint16_t *restrict dx, const float *restrict g, int w, int add,
                         int avx512) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (avx512) {
        avx_store_row(dx, g, w, add);
        return;
    }
#endif
    (void)avx512;
    for (int j = 0; j < w; j++) {
        const float v = g ? g[j] : 0.0f;
        dx[j] = rn(add ? bf(dx[j]) + v : v);
    }
}

/* Plane `plane` of the forward, whose thread writes the planes up to `end` after it. */
static void mp_forward_range(uint16_t *out, int32_t *argmax, const uint16_t *in, int plane, int end,
                             int h, int w, int ho, int wo, int kernel, int stride, int pad, int oa,
                             int ob, int lanes, int avx512) {
    const uint16_t *x = in + (size_t)plane * h * w * lanes;
    uint16_t *y = out + (size_t)plane * ho * wo * lanes;
    int32_t *am = argmax + (size_t)plane * ho * wo * lanes;
#if defined(__x86_64__) && defined(__GNUC__)
    if (avx512 && lanes == BLK) {
        mp_forward_blocked(y, am, x, h, w, ho, wo, kernel, stride, pad);
        return;
    }
    if (avx512 && stride == 2 && oa < ob) {
        const long long later = (long long)(end - plane - 1) * ho * wo;
        mp_forward_s2(y, am, x, h, w, ho, wo, kernel, pad, oa, ob, later < 16 ? (int)later : 16);
        return;
    }
#endif
    (void)oa, (void)ob, (void)end, (void)avx512;
    mp_forward_plane(y, am, x, h, w, ho, wo, kernel, stride, pad, lanes);
}

void dt_bf16_maxpool2d_forward(uint16_t *out, int32_t *argmax, const uint16_t *in, int n, int c,
                               int h, int w, int kernel, int stride, int pad, int ceil_mode,
                               int blocked) {
    const int ho = dt_pool2d_out_size_padded(h, kernel, stride, pad, ceil_mode),
              wo = dt_pool2d_out_size_padded(w, kernel, stride, pad, ceil_mode);
    const int lanes = blocked ? BLK : 1, avx512 = has_avx512_bf16();
    /* the NCHW vector path's outputs: those whose windows lie inside the columns */
    const int oa = (pad + 1) / 2, ob_fit = (w + pad - kernel) / 2 + 1;
    const int ob = w + pad - kernel < 0 ? oa : ob_fit < wo ? ob_fit : wo;
    const int planes = n * c / lanes;
    /* a plane: one channel (NCHW) or one block of 16 channels side by side; a thread
     * runs a range of them, in order */
#pragma omp parallel
    {
        const int nt = omp_get_num_threads(), t = omp_get_thread_num();
        const int lo = (int)((long long)planes * t / nt),
                  hi = (int)((long long)planes * (t + 1) / nt);
        for (int plane = lo; plane < hi; plane++)
            mp_forward_range(out, argmax, in, plane, hi, h, w, ho, wo, kernel, stride, pad, oa, ob,
                             lanes, avx512);
    }
}

void dt_bf16_maxpool2d_backward(uint16_t *din, const uint16_t *dout, const int32_t *argmax, int n,
                                int c, int h, int w, int kernel, int stride, int pad, int ceil_mode,
                                int blocked, int add) {
    const int ho = dt_pool2d_out_size_padded(h, kernel, stride, pad, ceil_mode),
              wo = dt_pool2d_out_size_padded(w, kernel, stride, pad, ceil_mode);
    const int lanes = blocked ? BLK : 1, avx512 = has_avx512_bf16();
    const int inside_2x2 = kernel == 2 && stride == 2 && pad == 0 && 2 * ho <= h && 2 * wo <= w;
    const int rows = kernel > stride ? kernel : stride;
    const int tiles = kernel == stride && pad == 0 && kernel * ho <= h && kernel * wo <= w;
    const int band = !blocked && (size_t)rows * w <= BAND;
#pragma omp parallel for schedule(static)
    for (int plane = 0; plane < n * c / lanes; plane++) {
        uint16_t *dx = din + (size_t)plane * h * w * lanes;
        const uint16_t *dy = dout + (size_t)plane * ho * wo * lanes;
        const int32_t *am = argmax + (size_t)plane * ho * wo * lanes;
#if defined(__x86_64__) && defined(__GNUC__)
        if (avx512 && blocked && tiles) {
            mp_backward_blocked_tiles(dx, dy, am, h, w, ho, wo, kernel, add);
            continue;
        }
        if (avx512 && blocked) {
            mp_backward_blocked(dx, dy, am, h, w, ho, wo, kernel, stride, pad, add);
            continue;
        }
        if (avx512 && inside_2x2) {
            mp_backward_2x2(dx, dy, am, h, w, ho, wo, add);
            continue;
        }
#endif
        (void)inside_2x2, (void)tiles;
        if (band) {
            float g[BAND];
            mp_backward_band(dx, dy, am, h, w, ho, wo, stride, rows, pad, add, g, avx512);
            continue;
        }
        mp_backward_plane(dx, dy, am, h, w, ho, wo, kernel, stride, pad, lanes, add);
    }
}

/* Average pooling, fixed windows (kernel, stride, no padding) or adaptive ones
 * (nn/pool2d.h's dt_pool_windows), in one loop per direction: `lanes` channels side by
 * side (1: NCHW, BLK: nChw16c), block mb's lane l the output plane mb * lanes + l. A
 * constant lanes vectorises the blocked case; the forward sums in the fp32 kernel's
 * order and scales by its rule (dt_pool_avg_scale), so the same bits before rounding. */
static inline void avg_forward_lanes(uint16_t *out, const uint16_t *in, int blocks, int lanes,
                                     const dt_pool_windows *wy, const dt_pool_windows *wx) {
    const int h = wy->in, w = wx->in, ho = wy->out, wo = wx->out;
    const float inv = dt_pool_avg_inv(wy, wx);
#pragma omp parallel for schedule(static)
    for (int mb = 0; mb < blocks; mb++) {
        const uint16_t *x = in + (size_t)mb * h * w * lanes;
        uint16_t *y = out + (size_t)mb * lanes * ho * wo;
        for (int oy = 0; oy < ho; oy++)
            for (int ox = 0; ox < wo; ox++) {
                const int y0 = dt_pool_win_start(wy, oy), y1 = dt_pool_win_end(wy, oy),
                          x0 = dt_pool_win_start(wx, ox), x1 = dt_pool_win_end(wx, ox);
                float acc[BLK] = {0};
                for (int i = y0; i < y1; i++)
                    for (int j = x0; j < x1; j++) {
                        const uint16_t *px = x + (size_t)(i * w + j) * lanes;
                        for (int l = 0; l < lanes; l++) acc[l] += bf(px[l]);
                    }
                for (int l = 0; l < lanes; l++)
                    y[((size_t)l * ho + oy) * wo + ox] =
                        rn(dt_pool_avg_scale(wy, wx, oy, ox, acc[l], inv));
            }
    }
}

static inline void avg_backward_lanes(uint16_t *din, const uint16_t *dout, int blocks, int lanes,
                                      const dt_pool_windows *wy, const dt_pool_windows *wx,
                                      int add) {
    const int h = wy->in, w = wx->in, ho = wy->out, wo = wx->out;
    const float inv = dt_pool_avg_inv(wy, wx);
#pragma omp parallel for schedule(static)
    for (int mb = 0; mb < blocks; mb++) {
        uint16_t *dx = din + (size_t)mb * h * w * lanes;
        const uint16_t *dy = dout + (size_t)mb * lanes * ho * wo;
        int ylo = 0, yhi = -1;
        for (int i = 0; i < h; i++) {
            dt_pool_cover_next(wy, i, &ylo, &yhi);
            int xlo = 0, xhi = -1;
            for (int j = 0; j < w; j++) {
                dt_pool_cover_next(wx, j, &xlo, &xhi);
                float g[BLK] = {0};
                for (int oy = ylo; oy <= yhi; oy++)
                    for (int ox = xlo; ox <= xhi; ox++)
                        for (int l = 0; l < lanes; l++)
                            g[l] += dt_pool_avg_scale(wy, wx, oy, ox,
                                                      bf(dy[((size_t)l * ho + oy) * wo + ox]), inv);
                uint16_t *d = dx + (size_t)(i * w + j) * lanes;
                for (int l = 0; l < lanes; l++) d[l] = rn(add ? bf(d[l]) + g[l] : g[l]);
            }
        }
    }
}

static void avg_forward(uint16_t *out, const uint16_t *in, int n, int c, const dt_pool_windows *wy,
                        const dt_pool_windows *wx, int in_blocked) {
    if (in_blocked)
        avg_forward_lanes(out, in, n * c / BLK, BLK, wy, wx);
    else
        avg_forward_lanes(out, in, n * c, 1, wy, wx);
}

static void avg_backward(uint16_t *din, const uint16_t *dout, int n, int c,
                         const dt_pool_windows *wy, const dt_pool_windows *wx, int in_blocked,
                         int add) {
    if (in_blocked)
        avg_backward_lanes(din, dout, n * c / BLK, BLK, wy, wx, add);
    else
        avg_backward_lanes(din, dout, n * c, 1, wy, wx, add);
}

void dt_bf16_avgpool2d_windows_forward(uint16_t *out, const uint16_t *in, int n, int c,
                                       const dt_pool_windows *wy, const dt_pool_windows *wx,
                                       int in_blocked) {
    avg_forward(out, in, n, c, wy, wx, in_blocked);
}

void dt_bf16_avgpool2d_windows_backward(uint16_t *din, const uint16_t *dout, int n, int c,
                                        const dt_pool_windows *wy, const dt_pool_windows *wx,
                                        int in_blocked, int add) {
    avg_backward(din, dout, n, c, wy, wx, in_blocked, add);
}

void dt_bf16_avgpool2d_forward(uint16_t *out, const uint16_t *in, int n, int c, int h, int w,
                               int kernel, int stride, int in_blocked) {
    const dt_pool2d_geom g = dt_pool2d_square(kernel, stride, 0, 0);
    dt_pool_windows wy, wx;
    dt_avgpool2d_windows_of(&g, 0, h, w, &wy, &wx);
    avg_forward(out, in, n, c, &wy, &wx, in_blocked);
}

void dt_bf16_avgpool2d_backward(uint16_t *din, const uint16_t *dout, int n, int c, int h, int w,
                                int kernel, int stride, int in_blocked, int add) {
    const dt_pool2d_geom g = dt_pool2d_square(kernel, stride, 0, 0);
    dt_pool_windows wy, wx;
    dt_avgpool2d_windows_of(&g, 0, h, w, &wy, &wx);
    avg_backward(din, dout, n, c, &wy, &wx, in_blocked, add);
}

/* The global pool's backward (one cell): every pixel gets its plane's dy / (h w). */
static void global_backward(uint16_t *din, const uint16_t *dout, int n, int c, int hw, int blocked,
                            int add) {
    const int lanes = blocked ? BLK : 1;
#pragma omp parallel for schedule(static)
    for (int mb = 0; mb < n * c / lanes; mb++) {
        float g[BLK];
        for (int l = 0; l < lanes; l++) g[l] = bf(dout[(size_t)mb * lanes + l]) / (float)hw;
        uint16_t *dx = din + (size_t)mb * hw * lanes;
        if (!blocked) {
            for (int p = 0; p < hw; p++) dx[p] = rn(add ? bf(dx[p]) + g[0] : g[0]);
            continue;
        }
        for (int p = 0; p < hw; p++)
            for (int l = 0; l < BLK; l++) {
                uint16_t *d = dx + (size_t)p * BLK + l;
                *d = rn(add ? bf(*d) + g[l] : g[l]);
            }
    }
}

void dt_bf16_adaptive_avgpool2d_forward(uint16_t *out, const uint16_t *in, int n, int c, int h,
                                        int w, int ho, int wo, int in_blocked) {
    const dt_pool_windows wy = {1, h, ho, 0, 0, 0, 0, 0}, wx = {1, w, wo, 0, 0, 0, 0, 0};
    avg_forward(out, in, n, c, &wy, &wx, in_blocked);
}

void dt_bf16_adaptive_avgpool2d_backward(uint16_t *din, const uint16_t *dout, int n, int c, int h,
                                         int w, int ho, int wo, int in_blocked, int add) {
    if (ho == 1 && wo == 1) {
        global_backward(din, dout, n, c, h * w, in_blocked, add);
        return;
    }
    const dt_pool_windows wy = {1, h, ho, 0, 0, 0, 0, 0}, wx = {1, w, wo, 0, 0, 0, 0, 0};
    avg_backward(din, dout, n, c, &wy, &wx, in_blocked, add);
}

/* ---- Dropout, concat, shortcut_pad ---- */

/* dropout.c's mask and scale, element for element. */
static inline int dropout_keeps(dt_dropout_key key, size_t i, float p) {
    dt_rng rng = {key.seed, key.stream, key.counter + i};
    return dt_rng_uniform(&rng) >= p;
}

static inline float dropout_scale(float p) {
    return p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
}

void dt_bf16_dropout_forward(uint16_t *out, const uint16_t *in, size_t count, float p,
                             dt_dropout_key key) {
    const float scale = dropout_scale(p);
#pragma omp parallel for schedule(static) if (count >= PAR_MIN)
    for (size_t i = 0; i < count; i++)
        out[i] = dropout_keeps(key, i, p) ? rn(bf(in[i]) * scale) : 0;
}

void dt_bf16_dropout_backward(uint16_t *din, const uint16_t *dout, size_t count, float p,
                              dt_dropout_key key, int add) {
    const float scale = dropout_scale(p);
#pragma omp parallel for schedule(static) if (count >= PAR_MIN)
    for (size_t i = 0; i < count; i++) {
        if (dropout_keeps(key, i, p)) {
            const float g = bf(dout[i]) * scale;
            din[i] = rn(add ? bf(din[i]) + g : g);
        } else if (!add) {
            din[i] = 0;
        }
    }
}

void dt_bf16_concat_part_forward(uint16_t *out, const uint16_t *in, size_t outer, int total,
                                 int offset, int size, size_t inner) {
    const size_t block = (size_t)size * inner;
#pragma omp parallel for schedule(static)
    for (size_t o = 0; o < outer; o++)
        memcpy(out + (o * total + offset) * inner, in + o * block, sizeof(uint16_t) * block);
}

void dt_bf16_concat_part_backward(uint16_t *din, const uint16_t *dout, size_t outer, int total,
                                  int offset, int size, size_t inner, int add) {
    const size_t block = (size_t)size * inner;
#pragma omp parallel for schedule(static)
    for (size_t o = 0; o < outer; o++) {
        const uint16_t *dy = dout + (o * total + offset) * inner;
        uint16_t *dx = din + o * block;
        if (!add)
            memcpy(dx, dy, sizeof(uint16_t) * block);
        else
            for (size_t i = 0; i < block; i++) dx[i] = rn(bf(dx[i]) + bf(dy[i]));
    }
}

void dt_bf16_concat_forward(uint16_t *out, const uint16_t *const *ins, const int *channels,
                            int count, int n, int hw) {
    int total = 0;
    for (int k = 0; k < count; k++) total += channels[k];
    for (int k = 0, offset = 0; k < count; offset += channels[k++])
        dt_bf16_concat_part_forward(out, ins[k], (size_t)n, total, offset, channels[k], (size_t)hw);
}

void dt_bf16_concat_backward(uint16_t *const *dins, const uint16_t *dout, const int *channels,
                             int count, int n, int hw, const int *add) {
    int total = 0;
    for (int k = 0; k < count; k++) total += channels[k];
    for (int k = 0, offset = 0; k < count; offset += channels[k++])
        if (dins[k])
            dt_bf16_concat_part_backward(dins[k], dout, (size_t)n, total, offset, channels[k],
                                         (size_t)hw, !add || add[k]);
}

void dt_bf16_shortcut_pad_forward(uint16_t *out, const uint16_t *in, int n, int c_in, int h, int w,
                                  int c_out, int pad_lo, int stride) {
    const int ho = dt_shortcut_pad_out_size(h, stride), wo = dt_shortcut_pad_out_size(w, stride);
    const size_t plane = (size_t)ho * wo;
#pragma omp parallel for schedule(static)
    for (int p = 0; p < n * c_out; p++) {
        const int s = p / c_out, ch = p % c_out - pad_lo;
        uint16_t *y = out + (size_t)p * plane;
        if (ch < 0 || ch >= c_in) {
            memset(y, 0, sizeof(uint16_t) * plane);
            continue;
        }
        const uint16_t *x = in + ((size_t)s * c_in + ch) * h * w;
        for (int oy = 0; oy < ho; oy++)
            for (int ox = 0; ox < wo; ox++)
                y[oy * wo + ox] = x[(size_t)oy * stride * w + (size_t)ox * stride];
    }
}

void dt_bf16_shortcut_pad_backward(uint16_t *din, const uint16_t *dout, int n, int c_in, int h,
                                   int w, int c_out, int pad_lo, int stride, int add) {
    const int ho = dt_shortcut_pad_out_size(h, stride), wo = dt_shortcut_pad_out_size(w, stride);
    const size_t plane = (size_t)ho * wo;
#pragma omp parallel for schedule(static)
    for (int p = 0; p < n * c_in; p++) {
        const int s = p / c_in, ch = p % c_in;
        uint16_t *dx = din + (size_t)p * h * w;
        const uint16_t *dy = dout + ((size_t)s * c_out + ch + pad_lo) * plane;
        if (!add) memset(dx, 0, sizeof(uint16_t) * h * w); /* the pixels skipped get nothing */
        for (int oy = 0; oy < ho; oy++)
            for (int ox = 0; ox < wo; ox++) {
                uint16_t *d = dx + (size_t)oy * stride * w + (size_t)ox * stride;
                *d = add ? rn(bf(*d) + bf(dy[oy * wo + ox])) : dy[oy * wo + ox];
            }
    }
}

/* ---- Linear on oneDNN's bf16 matmul ----
 *
 * forward      out[n, o]  = in[n, i] . W^T[i, o] + bias   (W^T: the bf16 copy, "ba")
 * backward-data din[n, i] (+)= dout[n, o] . W[o, i]
 * backward-weights dW[o, i] += dout^T[o, n] . in[n, i]    (dout^T: "ba"; a sum post-op)
 * The transposes are strides of the same buffers, never copies. */

typedef struct lin_variant {
    int n;
    dnnl_primitive_t fwd, bwd_data[2], bwd_weights; /* bwd_data[add] */
    dnnl_memory_t f_src, f_wei, f_bias, f_dst;
    dnnl_memory_t d_ddst, d_wei, d_dsrc;
    dnnl_memory_t w_ddst, w_src, w_dwei;
} lin_variant;

struct dt_bf16_linear {
    dt_dnnl *ctx;
    int max_batch, in_f, out_f, has_bias;
    dt_dtype in_dtype, out_dtype;
    uint16_t *wei;  /* [out_f, in_f]: forward's bf16 copy of the weight */
    uint16_t *src;  /* [max_batch, in_f]: forward's bf16 copy of an f32 input, or NULL */
    uint16_t *ddst; /* [max_batch, out_f]: backward's bf16 copy of an f32 dout, or NULL */
    size_t own_bytes;
    lin_variant v[2];
    int n_variants;
};

#define LIN_TRY(call, what)                                                                        \
    do {                                                                                           \
        dnnl_status_t st_ = (call);                                                                \
        if (st_ != dnnl_success)                                                                   \
            return dt_error_set(err, "oneDNN: linear %s failed (status %d)", what, (int)st_);      \
    } while (0)

static dnnl_data_type_t dnnl_type(dt_dtype t) {
    return t == DT_BF16 ? dnnl_bf16 : dnnl_f32;
}

/* A 2-D descriptor of rows x cols; transposed: stored as [cols, rows] row-major. */
static dnnl_status_t md2(dnnl_memory_desc_t *md, int rows, int cols, dnnl_data_type_t type,
                         int transposed) {
    dnnl_dims_t dims = {rows, cols};
    return dnnl_memory_desc_init_by_tag(md, 2, dims, type, transposed ? dnnl_ba : dnnl_ab);
}

static int lin_matmul(dnnl_primitive_t *prim, dnnl_memory_t *mems, dt_dnnl *ctx,
                      const dnnl_memory_desc_t *src, const dnnl_memory_desc_t *wei,
                      const dnnl_memory_desc_t *bias, const dnnl_memory_desc_t *dst, int accumulate,
                      const char *what, dt_error *err) {
    dnnl_matmul_desc_t d;
    LIN_TRY(dnnl_matmul_desc_init(&d, src, wei, bias, dst), what);
    dnnl_primitive_attr_t attr = NULL;
    if (accumulate) {
        dnnl_post_ops_t ops;
        LIN_TRY(dnnl_primitive_attr_create(&attr), "attribute");
        LIN_TRY(dnnl_post_ops_create(&ops), "post-op");
        LIN_TRY(dnnl_post_ops_append_sum(ops, 1.0f), "sum post-op");
        LIN_TRY(dnnl_primitive_attr_set_post_ops(attr, ops), "post-op attribute");
        dnnl_post_ops_destroy(ops);
    }
    dnnl_primitive_desc_t pd;
    dnnl_status_t st = dnnl_primitive_desc_create(&pd, &d, attr, ctx->engine, NULL);
    if (attr) dnnl_primitive_attr_destroy(attr);
    LIN_TRY(st, what);
    st = dnnl_primitive_create(prim, pd);
    dnnl_primitive_desc_destroy(pd);
    LIN_TRY(st, what);
    const dnnl_memory_desc_t *mds[3] = {src, wei, dst};
    for (int k = 0; k < 3; k++)
        if (mems && !mems[k])
            LIN_TRY(dnnl_memory_create(&mems[k], mds[k], ctx->engine, DNNL_MEMORY_NONE), "memory");
    return 0;
}

static void lin_variant_destroy(lin_variant *v) {
    dnnl_primitive_t prims[] = {v->fwd, v->bwd_data[0], v->bwd_data[1], v->bwd_weights};
    for (size_t k = 0; k < sizeof prims / sizeof *prims; k++)
        if (prims[k]) dnnl_primitive_destroy(prims[k]);
    dnnl_memory_t mems[] = {v->f_src, v->f_wei,  v->f_bias, v->f_dst, v->d_ddst,
                            v->d_wei, v->d_dsrc, v->w_ddst, v->w_src, v->w_dwei};
    for (size_t k = 0; k < sizeof mems / sizeof *mems; k++)
        if (mems[k]) dnnl_memory_destroy(mems[k]);
    memset(v, 0, sizeof *v);
}

static int lin_variant_init(lin_variant *v, const dt_bf16_linear *lin, int n, dt_error *err) {
    const int I = lin->in_f, O = lin->out_f;
    dnnl_memory_desc_t src, wei_t, bias, dst, ddst, wei, dsrc, ddst_t, dwei;
    v->n = n;
    LIN_TRY(md2(&src, n, I, dnnl_bf16, 0), "md");
    LIN_TRY(md2(&wei_t, I, O, dnnl_bf16, 1), "md");
    LIN_TRY(md2(&bias, 1, O, dnnl_f32, 0), "md");
    LIN_TRY(md2(&dst, n, O, dnnl_type(lin->out_dtype), 0), "md");
    LIN_TRY(md2(&ddst, n, O, dnnl_bf16, 0), "md");
    LIN_TRY(md2(&wei, O, I, dnnl_bf16, 0), "md");
    LIN_TRY(md2(&dsrc, n, I, dnnl_type(lin->in_dtype), 0), "md");
    LIN_TRY(md2(&ddst_t, O, n, dnnl_bf16, 1), "md");
    LIN_TRY(md2(&dwei, O, I, dnnl_f32, 0), "md");
    dnnl_memory_t f[3] = {0}, d[3] = {0}, w[3] = {0};
    int rc = lin_matmul(&v->fwd, f, lin->ctx, &src, &wei_t, lin->has_bias ? &bias : NULL, &dst, 0,
                        "forward", err);
    v->f_src = f[0], v->f_wei = f[1], v->f_dst = f[2];
    if (!rc)
        rc = lin_matmul(&v->bwd_data[0], d, lin->ctx, &ddst, &wei, NULL, &dsrc, 0, "backward-data",
                        err);
    if (!rc)
        rc = lin_matmul(&v->bwd_data[1], NULL, lin->ctx, &ddst, &wei, NULL, &dsrc, 1,
                        "backward-data", err);
    v->d_ddst = d[0], v->d_wei = d[1], v->d_dsrc = d[2];
    if (!rc)
        rc = lin_matmul(&v->bwd_weights, w, lin->ctx, &ddst_t, &src, NULL, &dwei, 1,
                        "backward-weights", err);
    v->w_ddst = w[0], v->w_src = w[1], v->w_dwei = w[2];
    if (!rc && lin->has_bias)
        LIN_TRY(dnnl_memory_create(&v->f_bias, &bias, lin->ctx->engine, DNNL_MEMORY_NONE),
                "memory");
    return rc;
}

int dt_bf16_linear_create(dt_bf16_linear **lin, dt_dnnl *ctx, int max_batch, int in_f, int out_f,
                          int has_bias, dt_dtype in_dtype, dt_dtype out_dtype, dt_error *err) {
    *lin = NULL;
    if ((in_dtype != DT_F32 && in_dtype != DT_BF16) ||
        (out_dtype != DT_F32 && out_dtype != DT_BF16))
        return dt_error_set(err, "linear: bf16 plan takes f32 or bf16 activations, not %s -> %s",
                            dt_dtype_name(in_dtype), dt_dtype_name(out_dtype));
    dt_bf16_linear *l = calloc(1, sizeof *l);
    if (!l) return dt_error_set(err, "out of memory for a linear plan");
    *l = (dt_bf16_linear){.ctx = ctx,
                          .max_batch = max_batch,
                          .in_f = in_f,
                          .out_f = out_f,
                          .has_bias = has_bias,
                          .in_dtype = in_dtype,
                          .out_dtype = out_dtype};
    const size_t wei = sizeof(uint16_t) * in_f * out_f,
                 src = in_dtype == DT_F32 ? sizeof(uint16_t) * max_batch * in_f : 0,
                 ddst = out_dtype == DT_F32 ? sizeof(uint16_t) * max_batch * out_f : 0;
    l->own_bytes = wei + src + ddst;
    if (!(l->wei = dt_alloc(wei, "a linear layer's bf16 weight", err)) ||
        (src && !(l->src = dt_alloc(src, "a linear layer's bf16 input", err))) ||
        (ddst && !(l->ddst = dt_alloc(ddst, "a linear layer's bf16 gradient", err))) ||
        lin_variant_init(&l->v[0], l, max_batch, err)) {
        dt_bf16_linear_destroy(l);
        return -1;
    }
    l->n_variants = 1;
    *lin = l;
    return 0;
}

void dt_bf16_linear_destroy(dt_bf16_linear *lin) {
    if (!lin) return;
    for (int k = 0; k < 2; k++) lin_variant_destroy(&lin->v[k]);
    dt_free(lin->wei);
    dt_free(lin->src);
    dt_free(lin->ddst);
    free(lin);
}

size_t dt_bf16_linear_own_bytes(const dt_bf16_linear *lin) {
    return lin->own_bytes;
}

/* The primitives for batch n: the largest batch's are built at creation, one other
 * size on first use (the last partial batch, evaluation), replaced by the next. */
static lin_variant *lin_variant_for(dt_bf16_linear *lin, int n) {
    for (int k = 0; k < lin->n_variants; k++)
        if (lin->v[k].n == n) return &lin->v[k];
    if (n > lin->max_batch) {
        fprintf(stderr, "dtrain: linear planned for batch %d run at %d\n", lin->max_batch, n);
        exit(1);
    }
    lin_variant *v = &lin->v[1];
    lin_variant_destroy(v);
    lin->n_variants = 2;
    dt_error err;
    if (lin_variant_init(v, lin, n, &err)) {
        fprintf(stderr, "dtrain: linear for batch %d: %s\n", n, err.msg);
        exit(1);
    }
    return v;
}

static void set_handle(dnnl_memory_t mem, const void *p) {
    dt_dnnl_run(dnnl_memory_set_data_handle(mem, (void *)p), "set handle");
}

void dt_bf16_linear_forward(dt_bf16_linear *lin, int n, void *out, const void *in,
                            const float *weight, const float *bias) {
    lin_variant *v = lin_variant_for(lin, n);
    dt_bf16_from_f32_n(lin->wei, weight, (size_t)lin->in_f * lin->out_f);
    const void *src = in;
    if (lin->in_dtype == DT_F32) {
        dt_bf16_from_f32_n(lin->src, in, (size_t)n * lin->in_f);
        src = lin->src;
    }
    set_handle(v->f_src, src);
    set_handle(v->f_wei, lin->wei);
    set_handle(v->f_dst, out);
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, v->f_src},
                               {DNNL_ARG_WEIGHTS, v->f_wei},
                               {DNNL_ARG_DST, v->f_dst},
                               {DNNL_ARG_BIAS, v->f_bias}};
    if (v->f_bias) set_handle(v->f_bias, bias);
    dt_dnnl_run(dnnl_primitive_execute(v->fwd, lin->ctx->stream, v->f_bias ? 4 : 3, args),
                "linear forward");
    dt_dnnl_run(dnnl_stream_wait(lin->ctx->stream), "stream wait");
}

void dt_bf16_linear_backward(dt_bf16_linear *lin, int n, void *din, float *dweight, float *dbias,
                             const void *dout, const void *in, int add) {
    lin_variant *v = lin_variant_for(lin, n);
    const int O = lin->out_f;
    const uint16_t *ddst = dout;
    if (lin->out_dtype == DT_F32) {
        dt_bf16_from_f32_n(lin->ddst, dout, (size_t)n * O);
        ddst = lin->ddst;
    }
    if (dbias) { /* from the gradient as given (f32 logits' gradient unrounded) */
        for (int r = 0; r < n; r++) {
            if (lin->out_dtype == DT_F32) {
                const float *row = (const float *)dout + (size_t)r * O;
                for (int o = 0; o < O; o++) dbias[o] += row[o];
            } else {
                const uint16_t *row = (const uint16_t *)dout + (size_t)r * O;
                for (int o = 0; o < O; o++) dbias[o] += bf(row[o]);
            }
        }
    }
    set_handle(v->w_ddst, ddst);
    set_handle(v->w_src, lin->in_dtype == DT_F32 ? (const void *)lin->src : in);
    set_handle(v->w_dwei, dweight);
    dnnl_exec_arg_t wargs[3] = {
        {DNNL_ARG_SRC, v->w_ddst}, {DNNL_ARG_WEIGHTS, v->w_src}, {DNNL_ARG_DST, v->w_dwei}};
    dt_dnnl_run(dnnl_primitive_execute(v->bwd_weights, lin->ctx->stream, 3, wargs),
                "linear backward-weights");
    if (din) {
        set_handle(v->d_ddst, ddst);
        set_handle(v->d_wei, lin->wei);
        set_handle(v->d_dsrc, din);
        dnnl_exec_arg_t dargs[3] = {
            {DNNL_ARG_SRC, v->d_ddst}, {DNNL_ARG_WEIGHTS, v->d_wei}, {DNNL_ARG_DST, v->d_dsrc}};
        dt_dnnl_run(dnnl_primitive_execute(v->bwd_data[add ? 1 : 0], lin->ctx->stream, 3, dargs),
                    "linear backward-data");
    }
    dt_dnnl_run(dnnl_stream_wait(lin->ctx->stream), "stream wait");
}

/* ---- BatchNorm plan: oneDNN's bf16 batch normalization on nChw16c ---- */

typedef struct bn_variant {
    int n;
    dnnl_primitive_t train, eval, bwd;
    dnnl_memory_t src, dst, ddst, dsrc, mean, var, scale, shift, dscale, dshift, ws;
} bn_variant;

struct dt_bf16_batchnorm {
    dt_dnnl *ctx;
    int max_batch, c, hw, blocked, relu;
    float eps;
    int on_dnnl; /* nChw16c and oneDNN gave its JIT kernel; else the loops */
    void *ws;    /* the fused ReLU's mask for the largest batch, or NULL */
    size_t ws_bytes;
    float *dscale, *dshift, *zeros; /* [c]: oneDNN's parameter gradients; its unused shift */
    float *var;                     /* [c]: the batch variance oneDNN gives and takes */
    bn_variant v[2];
    int n_variants;
};

#define BN_TRY(call, what)                                                                         \
    do {                                                                                           \
        dnnl_status_t st_ = (call);                                                                \
        if (st_ != dnnl_success)                                                                   \
            return dt_error_set(err, "oneDNN: batchnorm %s failed (status %d)", what, (int)st_);   \
    } while (0)

static void bn_variant_destroy(bn_variant *v) {
    dnnl_primitive_t prims[] = {v->train, v->eval, v->bwd};
    for (size_t k = 0; k < sizeof prims / sizeof *prims; k++)
        if (prims[k]) dnnl_primitive_destroy(prims[k]);
    dnnl_memory_t mems[] = {v->src,   v->dst,   v->ddst,   v->dsrc,   v->mean, v->var,
                            v->scale, v->shift, v->dscale, v->dshift, v->ws};
    for (size_t k = 0; k < sizeof mems / sizeof *mems; k++)
        if (mems[k]) dnnl_memory_destroy(mems[k]);
    memset(v, 0, sizeof *v);
}

static int bn_pd_fast(const_dnnl_primitive_desc_t pd) {
    const char *impl = "";
    return dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success &&
           strstr(impl, "jit") != NULL;
}

/* The primitives for batch n; *fast 0 when oneDNN offers only a slow kernel. */
static int bn_variant_init(bn_variant *v, const dt_bf16_batchnorm *bn, int n, int *fast,
                           size_t *ws_bytes, dt_error *err) {
    dnnl_engine_t eng = bn->ctx->engine;
    dnnl_dims_t dims = {n, bn->c, bn->hw, 1}, cdims = {bn->c};
    dnnl_memory_desc_t data, stat;
    v->n = n;
    BN_TRY(dnnl_memory_desc_init_by_tag(&data, 4, dims, dnnl_bf16, dnnl_nChw16c), "md");
    BN_TRY(dnnl_memory_desc_init_by_tag(&stat, 1, cdims, dnnl_f32, dnnl_x), "md");
    const unsigned flags =
        dnnl_use_scale | dnnl_use_shift | (bn->relu ? (unsigned)dnnl_fuse_norm_relu : 0u);
    dnnl_batch_normalization_desc_t td, ed, bd;
    dnnl_primitive_desc_t tpd = NULL, epd = NULL, bpd = NULL;
    BN_TRY(dnnl_batch_normalization_forward_desc_init(&td, dnnl_forward_training, &data, bn->eps,
                                                      flags),
           "forward");
    BN_TRY(dnnl_batch_normalization_forward_desc_init(&ed, dnnl_forward_inference, &data, bn->eps,
                                                      flags | dnnl_use_global_stats),
           "inference");
    BN_TRY(dnnl_batch_normalization_backward_desc_init(&bd, dnnl_backward, &data, &data, bn->eps,
                                                       flags),
           "backward");
    int rc = 0;
    if (dnnl_primitive_desc_create(&tpd, &td, NULL, eng, NULL) ||
        dnnl_primitive_desc_create(&epd, &ed, NULL, eng, NULL) ||
        dnnl_primitive_desc_create(&bpd, &bd, NULL, eng, tpd))
        rc = dt_error_set(err, "oneDNN: no bf16 batch normalization");
    *fast = rc == 0 && bn_pd_fast(tpd) && bn_pd_fast(epd) && bn_pd_fast(bpd);
    if (rc == 0 && *fast) {
        *ws_bytes = bn->relu ? dnnl_memory_desc_get_size(
                                   dnnl_primitive_desc_query_md(tpd, dnnl_query_workspace_md, 0))
                             : 0;
        dnnl_memory_t *data_mems[] = {&v->src, &v->dst, &v->ddst, &v->dsrc};
        dnnl_memory_t *stat_mems[] = {&v->mean,  &v->var,    &v->scale,
                                      &v->shift, &v->dscale, &v->dshift};
        for (size_t k = 0; rc == 0 && k < 4; k++)
            if (dnnl_memory_create(data_mems[k], &data, eng, DNNL_MEMORY_NONE))
                rc = dt_error_set(err, "oneDNN: batchnorm memory failed");
        for (size_t k = 0; rc == 0 && k < 6; k++)
            if (dnnl_memory_create(stat_mems[k], &stat, eng, DNNL_MEMORY_NONE))
                rc = dt_error_set(err, "oneDNN: batchnorm memory failed");
        if (rc == 0 && bn->relu &&
            dnnl_memory_create(&v->ws,
                               dnnl_primitive_desc_query_md(tpd, dnnl_query_workspace_md, 0), eng,
                               DNNL_MEMORY_NONE))
            rc = dt_error_set(err, "oneDNN: batchnorm memory failed");
        if (rc == 0 &&
            (dnnl_primitive_create(&v->train, tpd) || dnnl_primitive_create(&v->eval, epd) ||
             dnnl_primitive_create(&v->bwd, bpd)))
            rc = dt_error_set(err, "oneDNN: batchnorm primitive creation failed");
    }
    if (tpd) dnnl_primitive_desc_destroy(tpd);
    if (epd) dnnl_primitive_desc_destroy(epd);
    if (bpd) dnnl_primitive_desc_destroy(bpd);
    return rc;
}

int dt_bf16_batchnorm_create(dt_bf16_batchnorm **bn, dt_dnnl *ctx, int max_batch, int c, int hw,
                             int blocked, int relu, float eps, dt_error *err) {
    *bn = NULL;
    if (blocked && c % BLK)
        return dt_error_set(err, "batchnorm: nChw16c needs c in 16s, not %d", c);
    dt_bf16_batchnorm *b = calloc(1, sizeof *b);
    if (!b) return dt_error_set(err, "out of memory for a batchnorm plan");
    *b = (dt_bf16_batchnorm){.ctx = ctx,
                             .max_batch = max_batch,
                             .c = c,
                             .hw = hw,
                             .blocked = blocked,
                             .relu = relu,
                             .eps = eps};
    int fast = 0;
    if (blocked && (!(b->dscale = calloc((size_t)c, sizeof(float))) ||
                    !(b->dshift = calloc((size_t)c, sizeof(float))) ||
                    !(b->zeros = calloc((size_t)c, sizeof(float))) ||
                    !(b->var = calloc((size_t)c, sizeof(float))))) {
        dt_bf16_batchnorm_destroy(b);
        return dt_error_set(err, "out of memory for a batchnorm plan");
    }
    if (blocked && bn_variant_init(&b->v[0], b, max_batch, &fast, &b->ws_bytes, err)) {
        dt_bf16_batchnorm_destroy(b);
        return -1;
    }
    if (blocked && !fast) bn_variant_destroy(&b->v[0]); /* the loops, then */
    b->on_dnnl = blocked && fast;
    b->n_variants = b->on_dnnl;
    if (b->ws_bytes && !(b->ws = dt_alloc(b->ws_bytes, "a batchnorm's ReLU mask", err))) {
        dt_bf16_batchnorm_destroy(b);
        return -1;
    }
    *bn = b;
    return 0;
}

void dt_bf16_batchnorm_destroy(dt_bf16_batchnorm *bn) {
    if (!bn) return;
    for (int k = 0; k < 2; k++) bn_variant_destroy(&bn->v[k]);
    dt_free(bn->ws);
    free(bn->dscale);
    free(bn->dshift);
    free(bn->zeros);
    free(bn->var);
    free(bn);
}

size_t dt_bf16_batchnorm_own_bytes(const dt_bf16_batchnorm *bn) {
    return bn->ws_bytes;
}

static bn_variant *bn_variant_for(dt_bf16_batchnorm *bn, int n) {
    for (int k = 0; k < bn->n_variants; k++)
        if (bn->v[k].n == n) return &bn->v[k];
    if (n > bn->max_batch) {
        fprintf(stderr, "dtrain: batchnorm planned for batch %d run at %d\n", bn->max_batch, n);
        exit(1);
    }
    bn_variant *v = &bn->v[1];
    bn_variant_destroy(v);
    bn->n_variants = 2;
    dt_error err;
    int fast;
    size_t ws_bytes = 0;
    if (bn_variant_init(v, bn, n, &fast, &ws_bytes, &err) || !fast || ws_bytes > bn->ws_bytes) {
        fprintf(stderr, "dtrain: batchnorm for batch %d: %s\n", n,
                fast ? err.msg : "no fast oneDNN kernel where the full batch had one");
        exit(1);
    }
    return v;
}

static void bn_execute(dt_dnnl *ctx, dnnl_primitive_t prim, dnnl_exec_arg_t *args, int count,
                       const char *what) {
    dt_dnnl_run(dnnl_primitive_execute(prim, ctx->stream, count, args), what);
    dt_dnnl_run(dnnl_stream_wait(ctx->stream), "stream wait");
}

void dt_bf16_batchnorm_forward_train(dt_bf16_batchnorm *bn, int n, uint16_t *out, float *save_mean,
                                     float *save_invstd, float *running_mean, float *running_var,
                                     const uint16_t *in, const float *weight, const float *bias,
                                     float momentum) {
    if (!bn->on_dnnl) {
        dt_bf16_batchnorm2d_forward_train(out, save_mean, save_invstd, running_mean, running_var,
                                          in, weight, bias, n, bn->c, bn->hw, momentum, bn->eps,
                                          bn->blocked, bn->relu);
        return;
    }
    bn_variant *v = bn_variant_for(bn, n);
    set_handle(v->src, in);
    set_handle(v->dst, out);
    set_handle(v->mean, save_mean);
    set_handle(v->var, bn->var);
    set_handle(v->scale, weight);
    set_handle(v->shift, bias);
    dnnl_exec_arg_t args[7] = {{DNNL_ARG_SRC, v->src},     {DNNL_ARG_DST, v->dst},
                               {DNNL_ARG_MEAN, v->mean},   {DNNL_ARG_VARIANCE, v->var},
                               {DNNL_ARG_SCALE, v->scale}, {DNNL_ARG_SHIFT, v->shift},
                               {DNNL_ARG_WORKSPACE, v->ws}};
    if (v->ws) set_handle(v->ws, bn->ws);
    bn_execute(bn->ctx, v->train, args, v->ws ? 7 : 6, "batchnorm forward");
    /* the invstd the fp32 kernel saves, and PyTorch's running statistics, as
     * dt_batchnorm2d_forward_train computes them from the variance */
    const double count = (double)n * bn->hw;
    for (int ch = 0; ch < bn->c; ch++) {
        const double var = bn->var[ch], unbiased = count > 1 ? var * count / (count - 1) : var;
        save_invstd[ch] = (float)(1.0 / sqrt(var + bn->eps));
        running_mean[ch] =
            (float)((1.0 - momentum) * running_mean[ch] + momentum * (double)save_mean[ch]);
        running_var[ch] = (float)((1.0 - momentum) * running_var[ch] + momentum * unbiased);
    }
}

void dt_bf16_batchnorm_forward_eval(dt_bf16_batchnorm *bn, int n, uint16_t *out, const uint16_t *in,
                                    const float *running_mean, const float *running_var,
                                    const float *weight, const float *bias) {
    if (!bn->on_dnnl) {
        dt_bf16_batchnorm2d_forward_eval(out, in, running_mean, running_var, weight, bias, n, bn->c,
                                         bn->hw, bn->eps, bn->blocked, bn->relu);
        return;
    }
    bn_variant *v = bn_variant_for(bn, n);
    set_handle(v->src, in);
    set_handle(v->dst, out);
    set_handle(v->mean, running_mean);
    set_handle(v->var, running_var);
    set_handle(v->scale, weight);
    set_handle(v->shift, bias);
    dnnl_exec_arg_t args[6] = {{DNNL_ARG_SRC, v->src},     {DNNL_ARG_DST, v->dst},
                               {DNNL_ARG_MEAN, v->mean},   {DNNL_ARG_VARIANCE, v->var},
                               {DNNL_ARG_SCALE, v->scale}, {DNNL_ARG_SHIFT, v->shift}};
    bn_execute(bn->ctx, v->eval, args, 6, "batchnorm inference");
}

void dt_bf16_batchnorm_backward(dt_bf16_batchnorm *bn, int n, uint16_t *din, float *dweight,
                                float *dbias, const uint16_t *dout, const uint16_t *in,
                                const uint16_t *out, const float *save_mean,
                                const float *save_invstd, const float *weight, int add) {
    if (!bn->on_dnnl || add || !din) { /* oneDNN writes din, and always computes it */
        dt_bf16_batchnorm2d_backward(din, dweight, dbias, dout, in, save_mean, save_invstd, weight,
                                     bn->relu ? out : NULL, n, bn->c, bn->hw, bn->blocked, add);
        return;
    }
    bn_variant *v = bn_variant_for(bn, n);
    set_handle(v->src, in);
    set_handle(v->ddst, dout);
    set_handle(v->dsrc, din);
    set_handle(v->mean, save_mean);
    /* oneDNN takes the variance: var + eps = 1 / invstd^2 (invstd holds var + eps to
     * fp32 precision, all that oneDNN uses of it) */
    for (int ch = 0; ch < bn->c; ch++)
        bn->var[ch] = (float)(1.0 / ((double)save_invstd[ch] * save_invstd[ch]) - bn->eps);
    set_handle(v->var, bn->var);
    set_handle(v->scale, weight);
    set_handle(v->shift, bn->zeros); /* asked for, not read: the mask is the workspace */
    set_handle(v->dscale, bn->dscale);
    set_handle(v->dshift, bn->dshift);
    dnnl_exec_arg_t args[10] = {{DNNL_ARG_SRC, v->src},           {DNNL_ARG_DIFF_DST, v->ddst},
                                {DNNL_ARG_MEAN, v->mean},         {DNNL_ARG_VARIANCE, v->var},
                                {DNNL_ARG_SCALE, v->scale},       {DNNL_ARG_SHIFT, v->shift},
                                {DNNL_ARG_DIFF_SRC, v->dsrc},     {DNNL_ARG_DIFF_SCALE, v->dscale},
                                {DNNL_ARG_DIFF_SHIFT, v->dshift}, {DNNL_ARG_WORKSPACE, v->ws}};
    if (v->ws) set_handle(v->ws, bn->ws);
    bn_execute(bn->ctx, v->bwd, args, v->ws ? 10 : 9, "batchnorm backward");
    for (int ch = 0; ch < bn->c; ch++) {
        dweight[ch] += bn->dscale[ch];
        dbias[ch] += bn->dshift[ch];
    }
}
