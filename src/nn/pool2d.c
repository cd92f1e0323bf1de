#include "nn/pool2d.h"

#include <stddef.h>
#ifdef __AVX2__
#include <immintrin.h>
#endif

#include "dtrain/kernel.h"
#include "dtrain/model.h"

/* Whether x replaces the running maximum v: the first maximum wins, and a NaN
 * wins and stays, as in PyTorch. */
static inline int takes_over(float x, float v) {
    return x > v || (x != x && v == v);
}

#ifdef __AVX2__
/* takes_over, lane by lane, as a mask (quiet comparisons) */
static inline __m256 takes_over8(__m256 x, __m256 v) {
    return _mm256_or_ps(
        _mm256_cmp_ps(x, v, _CMP_GT_OQ),
        _mm256_and_ps(_mm256_cmp_ps(x, x, _CMP_UNORD_Q), _mm256_cmp_ps(v, v, _CMP_ORD_Q)));
}
#endif

/* One output row of 2x2 stride-2 max pooling: out[ox] and its argmax (index into the
 * plane) over input rows r0 and r0 + w starting at plane index row0. The scan order
 * of the general loop below (a b / c d: a vs b, c vs d, then the two winners), with
 * quiet comparisons and no branch on the data (ReLU outputs tie at 0 often: the
 * scalar loop's mispredicted branches made maxpool a third of lenet5's step): 8
 * outputs at a time with AVX2, a masked tail; scalar without AVX2. */
static void maxpool_2x2_row(float *restrict out, int32_t *restrict am, const float *restrict r0,
                            int w, int32_t row0, int wo) {
    const float *restrict r1 = r0 + w;
    int ox = 0;
#ifdef __AVX2__
    /* deinterleave 16 floats into the 8 even and 8 odd ones, in order */
#define EVEN(lo, hi)                                                                               \
    _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, 0x88)), 0xD8))
#define ODD(lo, hi)                                                                                \
    _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, 0xDD)), 0xD8))
    const __m256i steps = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for (; ox < wo; ox += 8) {
        /* the last few outputs through masks (masked-off lanes are never touched) */
        const int rem = wo - ox < 8 ? wo - ox : 8;
        const __m256i in_lo = _mm256_cmpgt_epi32(_mm256_set1_epi32(2 * rem), lane),
                      in_hi = _mm256_cmpgt_epi32(_mm256_set1_epi32(2 * rem - 8), lane),
                      out_m = _mm256_cmpgt_epi32(_mm256_set1_epi32(rem), lane);
        const __m256 t0 = _mm256_maskload_ps(r0 + 2 * ox, in_lo),
                     t1 = _mm256_maskload_ps(r0 + 2 * ox + 8, in_hi);
        const __m256 b0 = _mm256_maskload_ps(r1 + 2 * ox, in_lo),
                     b1 = _mm256_maskload_ps(r1 + 2 * ox + 8, in_hi);
        const __m256 a = EVEN(t0, t1), b = ODD(t0, t1), c = EVEN(b0, b1), d = ODD(b0, b1);
        const __m256 pick_b = takes_over8(b, a), pick_d = takes_over8(d, c);
        const __m256 va = _mm256_blendv_ps(a, b, pick_b), vc = _mm256_blendv_ps(c, d, pick_d);
        const __m256 pick_c = takes_over8(vc, va);
        const __m256i i0 = _mm256_add_epi32(_mm256_set1_epi32(row0 + 2 * ox), steps);
        /* a true mask is -1: subtracting it adds 1 */
        const __m256i ia = _mm256_sub_epi32(i0, _mm256_castps_si256(pick_b));
        const __m256i ic = _mm256_sub_epi32(_mm256_add_epi32(i0, _mm256_set1_epi32(w)),
                                            _mm256_castps_si256(pick_d));
        _mm256_maskstore_ps(out + ox, out_m, _mm256_blendv_ps(va, vc, pick_c));
        _mm256_maskstore_epi32(am + ox, out_m,
                               _mm256_castps_si256(_mm256_blendv_ps(
                                   _mm256_castsi256_ps(ia), _mm256_castsi256_ps(ic), pick_c)));
    }
#undef EVEN
#undef ODD
#endif
    for (; ox < wo; ox++) {
        const float a = r0[2 * ox], b = r0[2 * ox + 1], c = r1[2 * ox], d = r1[2 * ox + 1];
        const int32_t i0 = row0 + 2 * ox;
        const int pick_b = takes_over(b, a), pick_d = takes_over(d, c);
        const float va = pick_b ? b : a, vc = pick_d ? d : c;
        const int pick_c = takes_over(vc, va);
        out[ox] = pick_c ? vc : va;
        am[ox] = pick_c ? i0 + w + pick_d : i0 + pick_b;
    }
}

static void maxpool_forward_plain(float *out, int32_t *argmax, const float *in, int n, int c, int h,
                                  int w, const dt_pool2d_geom *g) {
    const int ho = dt_pool2d_geom_ho(g, h), wo = dt_pool2d_geom_wo(g, w);
    /* every window inside the input: the 2x2 path needs no bounds */
    const int inside = g->pad_top == 0 && g->pad_left == 0 && (ho - 1) * g->stride_h + g->kh <= h &&
                       (wo - 1) * g->stride_w + g->kw <= w;
    const int two_by_two = g->kh == 2 && g->kw == 2 && g->stride_h == 2 && g->stride_w == 2;
#pragma omp parallel for schedule(static)
    for (int plane = 0; plane < n * c; plane++) {
        const float *x = in + (size_t)plane * h * w;
        float *y = out + (size_t)plane * ho * wo;
        int32_t *am = argmax + (size_t)plane * ho * wo;
        if (two_by_two && inside) { /* the common case, branch-free */
            for (int oy = 0; oy < ho; oy++)
                maxpool_2x2_row(y + (size_t)oy * wo, am + (size_t)oy * wo, x + (size_t)(2 * oy) * w,
                                w, 2 * oy * w, wo);
            continue;
        }
        /* The window clipped to the input (padding is -inf, never the maximum; every
         * window holds at least one input pixel). Unclipped, this is the plain scan. */
        for (int oy = 0; oy < ho; oy++) {
            const int y0 = oy * g->stride_h - g->pad_top;
            const int ya = y0 < 0 ? 0 : y0, yb = y0 + g->kh < h ? y0 + g->kh : h;
            for (int ox = 0; ox < wo; ox++) {
                const int x0 = ox * g->stride_w - g->pad_left;
                const int xa = x0 < 0 ? 0 : x0, xb = x0 + g->kw < w ? x0 + g->kw : w;
                int best = ya * w + xa;
                float v = x[best];
                for (int i = ya; i < yb; i++) {
                    for (int j = xa; j < xb; j++) {
                        if (takes_over(x[i * w + j], v)) {
                            v = x[i * w + j];
                            best = i * w + j;
                        }
                    }
                }
                y[oy * wo + ox] = v;
                am[oy * wo + ox] = best;
            }
        }
    }
}

static void maxpool_backward_plain(float *din, const float *dout, const int32_t *argmax, int n,
                                   int c, int h, int w, int ho, int wo) {
#pragma omp parallel for schedule(static)
    for (int plane = 0; plane < n * c; plane++) {
        float *dx = din + (size_t)plane * h * w;
        const float *dy = dout + (size_t)plane * ho * wo;
        const int32_t *am = argmax + (size_t)plane * ho * wo;
        for (int o = 0; o < ho * wo; o++) dx[am[o]] += dy[o];
    }
}

void dt_maxpool2d_forward(float *out, int32_t *argmax, const float *in, int n, int c, int h, int w,
                          int kernel, int stride, int pad, int ceil_mode) {
    const dt_pool2d_geom g = dt_pool2d_square(kernel, stride, pad, ceil_mode);
    maxpool_forward_plain(out, argmax, in, n, c, h, w, &g);
}

void dt_maxpool2d_backward(float *din, const float *dout, const int32_t *argmax, int n, int c,
                           int h, int w, int kernel, int stride, int pad, int ceil_mode) {
    const dt_pool2d_geom g = dt_pool2d_square(kernel, stride, pad, ceil_mode);
    maxpool_backward_plain(din, dout, argmax, n, c, h, w, dt_pool2d_geom_ho(&g, h),
                           dt_pool2d_geom_wo(&g, w));
}

/* Max pooling on nChw16c data: the 16 channels of a block side by side, each
 * scanning its window in the order of the NCHW scan above (same values, same argmax:
 * the pixel index within the plane, stored per channel in the output's layout). */
static void maxpool_forward_blocked(float *out, int32_t *argmax, const float *in, int n, int c,
                                    int h, int w, const dt_pool2d_geom *g) {
    enum { L = 16 };
    const int ho = dt_pool2d_geom_ho(g, h), wo = dt_pool2d_geom_wo(g, w);
#pragma omp parallel for schedule(static)
    for (int mb = 0; mb < n * (c / L); mb++) {
        const float *x = in + (size_t)mb * h * w * L;
        float *y = out + (size_t)mb * ho * wo * L;
        int32_t *am = argmax + (size_t)mb * ho * wo * L;
        for (int oy = 0; oy < ho; oy++) {
            const int y0 = oy * g->stride_h - g->pad_top;
            const int ya = y0 < 0 ? 0 : y0, yb = y0 + g->kh < h ? y0 + g->kh : h;
            for (int ox = 0; ox < wo; ox++) {
                const int x0 = ox * g->stride_w - g->pad_left;
                const int xa = x0 < 0 ? 0 : x0, xb = x0 + g->kw < w ? x0 + g->kw : w;
                const size_t o = (size_t)(oy * wo + ox) * L;
#ifdef __AVX2__
                /* branch-free, 8 channels a vector (see maxpool_2x2_row) */
                for (int half = 0; half < L; half += 8) {
                    __m256 v = _mm256_loadu_ps(x + (size_t)(ya * w + xa) * L + half);
                    __m256 best = _mm256_castsi256_ps(_mm256_set1_epi32(ya * w + xa));
                    for (int i = ya; i < yb; i++)
                        for (int j = xa; j < xb; j++) {
                            const __m256 px = _mm256_loadu_ps(x + (size_t)(i * w + j) * L + half);
                            const __m256 take = takes_over8(px, v);
                            v = _mm256_blendv_ps(v, px, take);
                            best = _mm256_blendv_ps(
                                best, _mm256_castsi256_ps(_mm256_set1_epi32(i * w + j)), take);
                        }
                    _mm256_storeu_ps(y + o + half, v);
                    _mm256_storeu_si256((__m256i *)(am + o + half), _mm256_castps_si256(best));
                }
#else
                float v[L];
                int32_t best[L];
                for (int l = 0; l < L; l++) {
                    v[l] = x[(size_t)(ya * w + xa) * L + l];
                    best[l] = ya * w + xa;
                }
                for (int i = ya; i < yb; i++)
                    for (int j = xa; j < xb; j++) {
                        const float *px = x + (size_t)(i * w + j) * L;
                        for (int l = 0; l < L; l++)
                            if (takes_over(px[l], v[l])) {
                                v[l] = px[l];
                                best[l] = i * w + j;
                            }
                    }
                for (int l = 0; l < L; l++) {
                    y[o + l] = v[l];
                    am[o + l] = best[l];
                }
#endif
            }
        }
    }
}

void dt_maxpool2d_forward_blocked(float *out, int32_t *argmax, const float *in, int n, int c, int h,
                                  int w, int kernel, int stride, int pad, int ceil_mode) {
    const dt_pool2d_geom g = dt_pool2d_square(kernel, stride, pad, ceil_mode);
    maxpool_forward_blocked(out, argmax, in, n, c, h, w, &g);
}

static void maxpool_backward_blocked(float *din, const float *dout, const int32_t *argmax, int n,
                                     int c, int h, int w, int ho, int wo) {
    enum { L = 16 };
#pragma omp parallel for schedule(static)
    for (int mb = 0; mb < n * (c / L); mb++) {
        float *dx = din + (size_t)mb * h * w * L;
        const float *dy = dout + (size_t)mb * ho * wo * L;
        const int32_t *am = argmax + (size_t)mb * ho * wo * L;
        for (int o = 0; o < ho * wo; o++)
            for (int l = 0; l < L; l++) dx[(size_t)am[o * L + l] * L + l] += dy[o * L + l];
    }
}

void dt_maxpool2d_backward_blocked(float *din, const float *dout, const int32_t *argmax, int n,
                                   int c, int h, int w, int kernel, int stride, int pad,
                                   int ceil_mode) {
    const dt_pool2d_geom g = dt_pool2d_square(kernel, stride, pad, ceil_mode);
    maxpool_backward_blocked(din, dout, argmax, n, c, h, w, dt_pool2d_geom_ho(&g, h),
                             dt_pool2d_geom_wo(&g, w));
}

void dt_maxpool2d_forward_geom(float *out, int32_t *argmax, const float *in, int n, int c, int h,
                               int w, const dt_pool2d_geom *g, int in_blocked) {
    (in_blocked ? maxpool_forward_blocked : maxpool_forward_plain)(out, argmax, in, n, c, h, w, g);
}

void dt_maxpool2d_backward_geom(float *din, const float *dout, const int32_t *argmax, int n, int c,
                                int h, int w, const dt_pool2d_geom *g, int in_blocked) {
    (in_blocked ? maxpool_backward_blocked : maxpool_backward_plain)(
        din, dout, argmax, n, c, h, w, dt_pool2d_geom_ho(g, h), dt_pool2d_geom_wo(g, w));
}

/* One loop for both layouts: `lanes` channels side by side (1: an NCHW plane, 16: an
 * nChw16c block), so block mb's input starts at mb * h * w * lanes and its lane l is
 * output plane mb * lanes + l. Inlined with a constant lanes, the blocked case runs
 * 16 channels a vector; each channel's sum keeps the per-plane order (the same bits). */
static inline void avgpool_forward_lanes(float *out, const float *in, int blocks, int lanes,
                                         const dt_pool_windows *wy, const dt_pool_windows *wx) {
    const int h = wy->in, w = wx->in, ho = wy->out, wo = wx->out;
    const float inv = dt_pool_avg_inv(wy, wx);
#pragma omp parallel for schedule(static)
    for (int mb = 0; mb < blocks; mb++) {
        const float *x = in + (size_t)mb * h * w * lanes;
        float *y = out + (size_t)mb * lanes * ho * wo;
        for (int oy = 0; oy < ho; oy++)
            for (int ox = 0; ox < wo; ox++) {
                const int y0 = dt_pool_win_start(wy, oy), y1 = dt_pool_win_end(wy, oy),
                          x0 = dt_pool_win_start(wx, ox), x1 = dt_pool_win_end(wx, ox);
                float acc[16] = {0};
                for (int i = y0; i < y1; i++)
                    for (int j = x0; j < x1; j++) {
                        const float *px = x + (size_t)(i * w + j) * lanes;
                        for (int l = 0; l < lanes; l++) acc[l] += px[l];
                    }
                for (int l = 0; l < lanes; l++)
                    y[((size_t)l * ho + oy) * wo + ox] =
                        dt_pool_avg_scale(wy, wx, oy, ox, acc[l], inv);
            }
    }
}

/* Each output's scaled gradient added to its window's cells, outputs in order (a cell
 * of overlapping windows gets them in that order). */
static inline void avgpool_backward_lanes(float *din, const float *dout, int blocks, int lanes,
                                          const dt_pool_windows *wy, const dt_pool_windows *wx) {
    const int h = wy->in, w = wx->in, ho = wy->out, wo = wx->out;
    const float inv = dt_pool_avg_inv(wy, wx);
#pragma omp parallel for schedule(static)
    for (int mb = 0; mb < blocks; mb++) {
        float *dx = din + (size_t)mb * h * w * lanes;
        const float *dy = dout + (size_t)mb * lanes * ho * wo;
        for (int oy = 0; oy < ho; oy++)
            for (int ox = 0; ox < wo; ox++) {
                const int y0 = dt_pool_win_start(wy, oy), y1 = dt_pool_win_end(wy, oy),
                          x0 = dt_pool_win_start(wx, ox), x1 = dt_pool_win_end(wx, ox);
                float g[16];
                for (int l = 0; l < lanes; l++)
                    g[l] =
                        dt_pool_avg_scale(wy, wx, oy, ox, dy[((size_t)l * ho + oy) * wo + ox], inv);
                for (int i = y0; i < y1; i++)
                    for (int j = x0; j < x1; j++) {
                        float *px = dx + (size_t)(i * w + j) * lanes;
                        for (int l = 0; l < lanes; l++) px[l] += g[l];
                    }
            }
    }
}

/* Two calls each, a constant lane count in each: the inlined loop is specialised. */
void dt_avgpool2d_windows_forward(float *out, const float *in, int n, int c,
                                  const dt_pool_windows *wy, const dt_pool_windows *wx,
                                  int in_blocked) {
    if (in_blocked)
        avgpool_forward_lanes(out, in, n * c / 16, 16, wy, wx);
    else
        avgpool_forward_lanes(out, in, n * c, 1, wy, wx);
}

void dt_avgpool2d_windows_backward(float *din, const float *dout, int n, int c,
                                   const dt_pool_windows *wy, const dt_pool_windows *wx,
                                   int in_blocked) {
    if (in_blocked)
        avgpool_backward_lanes(din, dout, n * c / 16, 16, wy, wx);
    else
        avgpool_backward_lanes(din, dout, n * c, 1, wy, wx);
}

void dt_avgpool2d_windows_of(const dt_pool2d_geom *g, int count_include_pad, int h, int w,
                             dt_pool_windows *wy, dt_pool_windows *wx) {
    const dt_pool_windows y = {0,           h,          dt_pool2d_geom_ho(g, h), g->kh,
                               g->stride_h, g->pad_top, g->pad_bottom,           count_include_pad},
                          x = {0,
                               w,
                               dt_pool2d_geom_wo(g, w),
                               g->kw,
                               g->stride_w,
                               g->pad_left,
                               g->pad_right,
                               count_include_pad};
    *wy = y;
    *wx = x;
}

void dt_avgpool2d_forward(float *out, const float *in, int n, int c, int h, int w, int kernel,
                          int stride, int in_blocked) {
    const dt_pool2d_geom g = dt_pool2d_square(kernel, stride, 0, 0);
    dt_pool_windows wy, wx;
    dt_avgpool2d_windows_of(&g, 0, h, w, &wy, &wx);
    dt_avgpool2d_windows_forward(out, in, n, c, &wy, &wx, in_blocked);
}

void dt_avgpool2d_backward(float *din, const float *dout, int n, int c, int h, int w, int kernel,
                           int stride, int in_blocked) {
    const dt_pool2d_geom g = dt_pool2d_square(kernel, stride, 0, 0);
    dt_pool_windows wy, wx;
    dt_avgpool2d_windows_of(&g, 0, h, w, &wy, &wx);
    dt_avgpool2d_windows_backward(din, dout, n, c, &wy, &wx, in_blocked);
}

/* The ops in the model graph. Max pooling's state is the argmax of every output
 * element for the largest batch. */

static int maxpool2d_op_plan(dt_model *m, dt_op *op, int max_batch, size_t *bytes, dt_error *err) {
    (void)err;
    *bytes += sizeof(int32_t) * dt_model_value_floats(m, op->out, max_batch);
    return 0;
}

static int maxpool2d_op_alloc(dt_model *m, dt_op *op, int max_batch, dt_error *err) {
    size_t count = dt_model_value_floats(m, op->out, max_batch);
    op->state = dt_alloc(sizeof(int32_t) * count, "maxpool indices", err);
    return op->state ? 0 : -1;
}

static void maxpool2d_op_free(dt_model *m, dt_op *op) {
    (void)m;
    dt_free(op->state);
    op->state = NULL;
}

static void maxpool2d_op_forward(dt_model *m, dt_op *op, int n) {
    const dt_value *x = &m->values[op->in];
    const dt_pool2d_geom g = dt_op_pool_geom(op);
    dt_maxpool2d_forward_geom(dt_model_value_data(m, op->out), op->state,
                              dt_model_value_data(m, op->in), n, x->c, x->h, x->w, &g,
                              dt_model_value_blocked(m, op->in));
}

static void maxpool2d_op_backward(dt_model *m, dt_op *op, int n) {
    const dt_value *x = &m->values[op->in];
    const dt_pool2d_geom g = dt_op_pool_geom(op);
    float *din = dt_model_value_grad(m, op->in);
    if (din)
        dt_maxpool2d_backward_geom(din, dt_model_value_grad(m, op->out), op->state, n, x->c, x->h,
                                   x->w, &g, dt_model_value_blocked(m, op->in));
}

const dt_op_class dt_maxpool2d_op = {
    .name = "maxpool2d",
};

/* The CPU backend's f32 kernel: the loops above. */
const dt_kernel dt_maxpool2d_f32_kernel = {
    .kind = DT_OP_MAXPOOL2D,
    .name = "maxpool2d.f32",
    .dtype = DT_F32,
    .layouts = DT_OP_SAME_LAYOUT,
    .plan = maxpool2d_op_plan,
    .alloc = maxpool2d_op_alloc,
    .free = maxpool2d_op_free,
    .forward = maxpool2d_op_forward,
    .backward = maxpool2d_op_backward,
};

static void avgpool2d_op_forward(dt_model *m, dt_op *op, int n) {
    const dt_value *x = &m->values[op->in];
    const dt_pool2d_geom g = dt_op_pool_geom(op);
    dt_pool_windows wy, wx;
    dt_avgpool2d_windows_of(&g, op->count_include_pad, x->h, x->w, &wy, &wx);
    dt_avgpool2d_windows_forward(dt_model_value_data(m, op->out), dt_model_value_data(m, op->in), n,
                                 x->c, &wy, &wx, dt_model_value_blocked(m, op->in));
}

static void avgpool2d_op_backward(dt_model *m, dt_op *op, int n) {
    const dt_value *x = &m->values[op->in];
    float *din = dt_model_value_grad(m, op->in);
    if (!din) return;
    const dt_pool2d_geom g = dt_op_pool_geom(op);
    dt_pool_windows wy, wx;
    dt_avgpool2d_windows_of(&g, op->count_include_pad, x->h, x->w, &wy, &wx);
    dt_avgpool2d_windows_backward(din, dt_model_value_grad(m, op->out), n, x->c, &wy, &wx,
                                  dt_model_value_blocked(m, op->in));
}

const dt_op_class dt_avgpool2d_op = {
    .name = "avgpool2d",
};

/* The CPU backend's f32 kernel: the loops above. */
const dt_kernel dt_avgpool2d_f32_kernel = {
    .kind = DT_OP_AVGPOOL2D,
    .name = "avgpool2d.f32",
    .dtype = DT_F32,
    .layouts = DT_OP_ANY_IN_PLAIN_OUT,
    .forward = avgpool2d_op_forward,
    .backward = avgpool2d_op_backward,
};
