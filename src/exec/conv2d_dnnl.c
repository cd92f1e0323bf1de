#include "exec/conv2d_dnnl.h"

#include <oneapi/dnnl/dnnl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dnnl_ctx.h"
#include "dtrain/dtype.h"

/* A tensor as dtrain holds it (plain NCHW/OIHW) and as a primitive wants it. */
typedef struct port {
    dnnl_memory_desc_t user_md, prim_md;
    dnnl_memory_t user_mem, prim_mem; /* prim_mem == user_mem when no reorder */
    dnnl_primitive_t reorder;         /* NULL when the layouts already match */
    int to_user;                      /* reorder direction */
    int slot_is_weight, slot;
} port;

/* The primitives of one batch size. */
typedef struct variant {
    int n;
    dnnl_primitive_t fwd, bwd_data, bwd_weights;
    port f_src, f_wei, f_dst;
    port bw_src, bw_ddst, bw_dwei;
    port bd_ddst, bd_wei, bd_dsrc;
    int bd_ddst_shares_bw; /* bwd-data wants diff_dst exactly as bwd-weights does */
    int keeps_src;         /* forward converts src into the plan's src_keep, where
                              bwd-weights finds it (no second conversion) */
    dnnl_memory_t f_bias, bw_dbias;
    float *dbias_tmp;
    /* The weight gradient as one bf16 matmul (see use_matmul_bwd_weights): bw_ddst
     * reorders diff_dst to [c_out][n, h, w], the input is unfolded into act slot
     * DT_DNNL_COL_SLOT as [n, h, w][kh, kw, c_in], bw_dwei takes the product
     * [c_out][kh, kw, c_in] back to OIHW. NULL: oneDNN's convolution primitive. */
    dnnl_primitive_t bw_matmul;
    dnnl_memory_t mm_ddst, mm_col, mm_dwei;
    int own_dw; /* the weight gradient by dw_backward_weights, not oneDNN */
} variant;

struct dt_conv2d_plan {
    dt_dnnl *ctx;
    dt_conv2d_shape s;
    int has_bias;
    dt_exec_conv2d_io io;
    int bf16; /* multiply in bf16: inputs, weights and incoming gradients converted */
    /* The forward's converted input (bf16, or blocked from NCHW), kept for the weight
     * gradient when both primitives want it alike; owned by the plan, sized for the
     * largest batch. NULL when no variant keeps it. */
    void *src_keep;
    size_t src_keep_bytes;
    variant v[2];
    int n_variants, next_evict;
    dt_dnnl_scratch limits; /* slot sizes the model allocated (max batch) */
};

#define DNNL_TRY(call, what)                                                                       \
    do {                                                                                           \
        dnnl_status_t st_ = (call);                                                                \
        if (st_ != dnnl_success)                                                                   \
            return dt_error_set(err, "oneDNN: %s failed (status %d)", what, (int)st_);             \
    } while (0)

/* At run time a failure can only be out of memory inside oneDNN: end with a line. */
void dt_dnnl_run(dnnl_status_t st, const char *what) {
    if (st != dnnl_success) {
        fprintf(stderr, "dtrain: oneDNN %s failed at run time (status %d)\n", what, (int)st);
        exit(1);
    }
}

int dt_dnnl_create(dt_dnnl **ctx, dt_error *err) {
    *ctx = calloc(1, sizeof **ctx);
    if (!*ctx) return dt_error_set(err, "out of memory creating the oneDNN engine");
    DNNL_TRY(dnnl_engine_create(&(*ctx)->engine, dnnl_cpu, 0), "engine creation");
    DNNL_TRY(dnnl_stream_create(&(*ctx)->stream, (*ctx)->engine, dnnl_stream_default_flags),
             "stream creation");
    return 0;
}

void dt_dnnl_destroy(dt_dnnl *ctx) {
    if (!ctx) return;
    if (ctx->stream) dnnl_stream_destroy(ctx->stream);
    if (ctx->engine) dnnl_engine_destroy(ctx->engine);
    free(ctx);
}

static int port_init(port *p, dt_dnnl *ctx, const dnnl_memory_desc_t *user_md,
                     const dnnl_memory_desc_t *prim_md, int to_user, int accumulate,
                     int slot_is_weight, int slot, dt_dnnl_scratch *needs, dt_error *err) {
    p->user_md = *user_md;
    p->prim_md = *prim_md;
    p->to_user = to_user;
    p->slot_is_weight = slot_is_weight;
    p->slot = slot;
    DNNL_TRY(dnnl_memory_create(&p->user_mem, &p->user_md, ctx->engine, DNNL_MEMORY_NONE),
             "memory creation");
    if (dnnl_memory_desc_equal(user_md, prim_md) && !accumulate) {
        p->prim_mem = p->user_mem;
        return 0;
    }
    DNNL_TRY(dnnl_memory_create(&p->prim_mem, &p->prim_md, ctx->engine, DNNL_MEMORY_NONE),
             "memory creation");
    dnnl_primitive_attr_t attr = NULL;
    if (accumulate) {
        dnnl_post_ops_t ops;
        DNNL_TRY(dnnl_primitive_attr_create(&attr), "attribute creation");
        DNNL_TRY(dnnl_post_ops_create(&ops), "post-op creation");
        DNNL_TRY(dnnl_post_ops_append_sum(ops, 1.0f), "sum post-op");
        DNNL_TRY(dnnl_primitive_attr_set_post_ops(attr, ops), "post-op attribute");
        dnnl_post_ops_destroy(ops);
    }
    dnnl_primitive_desc_t rpd;
    const dnnl_memory_desc_t *from = to_user ? prim_md : user_md, *to = to_user ? user_md : prim_md;
    dnnl_status_t st =
        dnnl_reorder_primitive_desc_create(&rpd, from, ctx->engine, to, ctx->engine, attr);
    if (attr) dnnl_primitive_attr_destroy(attr);
    DNNL_TRY(st, "reorder creation");
    st = dnnl_primitive_create(&p->reorder, rpd);
    dnnl_primitive_desc_destroy(rpd);
    DNNL_TRY(st, "reorder creation");
    size_t bytes = dnnl_memory_desc_get_size(prim_md);
    size_t *need = slot_is_weight ? &needs->weight_bytes[slot] : &needs->act_bytes[slot];
    if (bytes > *need) *need = bytes;
    return 0;
}

static void port_destroy(port *p) {
    if (p->reorder) dnnl_primitive_destroy(p->reorder);
    if (p->prim_mem && p->prim_mem != p->user_mem) dnnl_memory_destroy(p->prim_mem);
    if (p->user_mem) dnnl_memory_destroy(p->user_mem);
    memset(p, 0, sizeof *p);
}

/* Points the port at the user's buffer and at `prim`, the primitive's copy; for
 * inputs, reorders the user's data into it. Returns the memory the primitive should
 * use. */
static dnnl_memory_t port_enter_into(port *p, dt_dnnl *ctx, void *prim, const void *user) {
    dt_dnnl_run(dnnl_memory_set_data_handle(p->user_mem, (void *)user), "set handle");
    if (!p->reorder) return p->user_mem;
    dt_dnnl_run(dnnl_memory_set_data_handle(p->prim_mem, prim), "set handle");
    if (!p->to_user) {
        dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, p->user_mem}, {DNNL_ARG_TO, p->prim_mem}};
        dt_dnnl_run(dnnl_primitive_execute(p->reorder, ctx->stream, 2, args), "reorder");
    }
    return p->prim_mem;
}

/* port_enter_into the port's scratch slot. */
static dnnl_memory_t port_enter(port *p, dt_dnnl *ctx, const dt_dnnl_scratch *scratch,
                                const void *user) {
    void *slot = p->slot_is_weight ? scratch->weight[p->slot] : scratch->act[p->slot];
    return port_enter_into(p, ctx, slot, user);
}

/* For outputs: moves the primitive's result into the user's buffer. */
static void port_leave(port *p, dt_dnnl *ctx) {
    if (!p->reorder || !p->to_user) return;
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, p->prim_mem}, {DNNL_ARG_TO, p->user_mem}};
    dt_dnnl_run(dnnl_primitive_execute(p->reorder, ctx->stream, 2, args), "reorder");
}

static void variant_destroy(variant *v) {
    port *ports[] = {&v->f_src,   &v->f_wei,   &v->f_dst,  &v->bw_src, &v->bw_ddst,
                     &v->bw_dwei, &v->bd_ddst, &v->bd_wei, &v->bd_dsrc};
    for (size_t i = 0; i < sizeof ports / sizeof *ports; i++) port_destroy(ports[i]);
    if (v->fwd) dnnl_primitive_destroy(v->fwd);
    if (v->bwd_data) dnnl_primitive_destroy(v->bwd_data);
    if (v->bwd_weights) dnnl_primitive_destroy(v->bwd_weights);
    if (v->bw_matmul) dnnl_primitive_destroy(v->bw_matmul);
    dnnl_memory_t mms[] = {v->mm_ddst, v->mm_col, v->mm_dwei};
    for (size_t i = 0; i < sizeof mms / sizeof *mms; i++)
        if (mms[i]) dnnl_memory_destroy(mms[i]);
    if (v->f_bias) dnnl_memory_destroy(v->f_bias);
    if (v->bw_dbias) dnnl_memory_destroy(v->bw_dbias);
    free(v->dbias_tmp);
    memset(v, 0, sizeof *v);
}

static int make_primitive(dnnl_primitive_t *prim, dnnl_primitive_desc_t pd, dt_error *err) {
    DNNL_TRY(dnnl_primitive_create(prim, pd), "primitive creation");
    return 0;
}

/* The shapes of one convolution, for building its primitive descriptors. */
typedef struct conv_geom {
    const dnnl_dims_t *src, *dst, *wei, *strides, *dilates, *pad_l, *pad_r;
    int wei_ndims;                  /* 5 (goihw) for a grouped convolution */
    const dnnl_memory_desc_t *bias; /* NULL: no bias */
} conv_geom;

typedef enum conv_kind { CONV_FORWARD, CONV_BACKWARD_DATA, CONV_BACKWARD_WEIGHTS } conv_kind;

/* One primitive descriptor with operands of type lp (src/weights for forward,
 * diff_dst/weights or src/diff_dst for the backward ones), an activation result (dst,
 * diff_src) of type res and an fp32 weight gradient, any layout; hint: the forward
 * descriptor backward ones follow. */
static dnnl_status_t conv_pd(dnnl_primitive_desc_t *pd, dt_dnnl *ctx, const conv_geom *g,
                             conv_kind kind, dnnl_data_type_t lp, dnnl_data_type_t res,
                             const_dnnl_primitive_desc_t hint) {
    dnnl_memory_desc_t src_lp, src_res, wei_lp, wei_f32, dst_lp, dst_res;
    dnnl_status_t st;
    if ((st = dnnl_memory_desc_init_by_tag(&src_lp, 4, *g->src, lp, dnnl_format_tag_any)) ||
        (st = dnnl_memory_desc_init_by_tag(&src_res, 4, *g->src, res, dnnl_format_tag_any)) ||
        (st = dnnl_memory_desc_init_by_tag(&wei_lp, g->wei_ndims, *g->wei, lp,
                                           dnnl_format_tag_any)) ||
        (st = dnnl_memory_desc_init_by_tag(&wei_f32, g->wei_ndims, *g->wei, dnnl_f32,
                                           dnnl_format_tag_any)) ||
        (st = dnnl_memory_desc_init_by_tag(&dst_lp, 4, *g->dst, lp, dnnl_format_tag_any)) ||
        (st = dnnl_memory_desc_init_by_tag(&dst_res, 4, *g->dst, res, dnnl_format_tag_any)))
        return st;
    dnnl_convolution_desc_t d;
    const dnnl_alg_kind_t alg = dnnl_convolution_direct;
    if (kind == CONV_FORWARD)
        st = dnnl_dilated_convolution_forward_desc_init(&d, dnnl_forward_training, alg, &src_lp,
                                                        &wei_lp, g->bias, &dst_res, *g->strides,
                                                        *g->dilates, *g->pad_l, *g->pad_r);
    else if (kind == CONV_BACKWARD_DATA)
        st = dnnl_dilated_convolution_backward_data_desc_init(
            &d, alg, &src_res, &wei_lp, &dst_lp, *g->strides, *g->dilates, *g->pad_l, *g->pad_r);
    else
        st = dnnl_dilated_convolution_backward_weights_desc_init(&d, alg, &src_lp, &wei_f32,
                                                                 g->bias, &dst_lp, *g->strides,
                                                                 *g->dilates, *g->pad_l, *g->pad_r);
    return st ? st : dnnl_primitive_desc_create(pd, &d, NULL, ctx->engine, hint);
}

/* oneDNN's JIT direct and brgemm kernels; the others here are its GEMM-based and
 * reference ones, which in bf16 are far slower than fp32 (lenet5's first conv, one
 * input channel: weight gradient 12.8 ms in bf16 on x64:gemm:jit, 8 ms for the whole
 * fp32 backward pass). */
int dt_dnnl_fast_impl(const_dnnl_primitive_desc_t pd) {
    const char *impl = "";
    if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success) return 0;
    return !strncmp(impl, "jit", 3) || !strncmp(impl, "brg", 3);
}

/* A backward primitive: bf16 where asked (a bf16 forward hint given) and fast, with
 * its activation result of type res_bf16, else fp32 throughout. */
static dnnl_status_t conv_pd_best(dnnl_primitive_desc_t *pd, dt_dnnl *ctx, const conv_geom *g,
                                  conv_kind kind, dnnl_data_type_t res_bf16,
                                  const_dnnl_primitive_desc_t hint_bf16,
                                  const_dnnl_primitive_desc_t hint_f32) {
    if (hint_bf16 && conv_pd(pd, ctx, g, kind, dnnl_bf16, res_bf16, hint_bf16) == dnnl_success) {
        if (dt_dnnl_fast_impl(*pd)) return dnnl_success;
        dnnl_primitive_desc_destroy(*pd);
    }
    return conv_pd(pd, ctx, g, kind, dnnl_f32, dnnl_f32, hint_f32);
}

static dnnl_data_type_t act_type(dt_dtype t) {
    return t == DT_BF16 ? dnnl_bf16 : dnnl_f32;
}

/* oneDNN 2.6's bf16 weight-gradient kernel is slow where the output plane is small:
 * resnet18's 512-channel 3x3 convs on 4x4 maps take 29 ms at batch 128 against 10 ms
 * forward, while the same product as one bf16 matmul ([c_out] x [n*16] times
 * [n*16] x [9*c_in]) takes 16 ms (AMD EPYC, 2 threads; docs/performance.md). At
 * 8x8 both take 16 ms, and at 16x16 and beyond the matmul is slower. So a bf16
 * plan's planes of up to 16 positions take the matmul where the input is bf16 in
 * nChw16c (the unfolding below reads that layout) and the convolution is not grouped. */
static int use_matmul_bwd_weights(const dt_conv2d_shape *s, const dt_exec_conv2d_io *io, int bf16) {
    return bf16 && io->in_dtype == DT_BF16 && io->in_blocked && s->groups == 1 &&
           s->h_out * s->w_out <= 16;
}

/* Builds the matmul weight gradient; 1 if oneDNN has no fast matmul for it (the
 * caller then takes the convolution primitive). */
static int matmul_bwd_weights_init(variant *v, dt_dnnl *ctx, const dt_conv2d_shape *s, int n,
                                   const dnnl_memory_desc_t *dst_u, const dnnl_memory_desc_t *wei_u,
                                   dt_dnnl_scratch *needs, dt_error *err) {
    const dnnl_dim_t rows = (dnnl_dim_t)n * s->h_out * s->w_out,
                     taps = (dnnl_dim_t)s->kh * s->kw * s->c_in;
    dnnl_dims_t a_dims = {s->c_out, rows}, b_dims = {rows, taps}, c_dims = {s->c_out, taps};
    dnnl_memory_desc_t a, b, c;
    DNNL_TRY(dnnl_memory_desc_init_by_tag(&a, 2, a_dims, dnnl_bf16, dnnl_ab), "md");
    DNNL_TRY(dnnl_memory_desc_init_by_tag(&b, 2, b_dims, dnnl_bf16, dnnl_ab), "md");
    DNNL_TRY(dnnl_memory_desc_init_by_tag(&c, 2, c_dims, dnnl_f32, dnnl_ab), "md");
    dnnl_matmul_desc_t md;
    dnnl_primitive_desc_t pd;
    if (dnnl_matmul_desc_init(&md, &a, &b, NULL, &c) != dnnl_success ||
        dnnl_primitive_desc_create(&pd, &md, NULL, ctx->engine, NULL) != dnnl_success)
        return 1;
    if (!dt_dnnl_fast_impl(pd)) {
        dnnl_primitive_desc_destroy(pd);
        return 1;
    }
    int rc = make_primitive(&v->bw_matmul, pd, err);
    dnnl_primitive_desc_destroy(pd);
    if (rc) return rc;
    /* diff_dst as [c_out][n, h, w]: dims (n, c, h, w) with c outermost */
    dnnl_dims_t dst_dims = {n, s->c_out, s->h_out, s->w_out};
    dnnl_memory_desc_t ddst_cnhw, dwei_ohwi;
    DNNL_TRY(dnnl_memory_desc_init_by_tag(&ddst_cnhw, 4, dst_dims, dnnl_bf16, dnnl_bacd), "md");
    dnnl_dims_t wei_dims = {s->c_out, s->c_in, s->kh, s->kw};
    DNNL_TRY(dnnl_memory_desc_init_by_tag(&dwei_ohwi, 4, wei_dims, dnnl_f32, dnnl_acdb), "md");
    if (port_init(&v->bw_ddst, ctx, dst_u, &ddst_cnhw, 0, 0, 0, 1, needs, err) ||
        port_init(&v->bw_dwei, ctx, wei_u, &dwei_ohwi, 1, 1, 1, 2, needs, err))
        return -1;
    DNNL_TRY(dnnl_memory_create(&v->mm_ddst, &a, ctx->engine, DNNL_MEMORY_NONE), "memory");
    DNNL_TRY(dnnl_memory_create(&v->mm_col, &b, ctx->engine, DNNL_MEMORY_NONE), "memory");
    DNNL_TRY(dnnl_memory_create(&v->mm_dwei, &c, ctx->engine, DNNL_MEMORY_NONE), "memory");
    size_t col_bytes = (size_t)rows * (size_t)taps * sizeof(uint16_t);
    if (col_bytes > needs->act_bytes[DT_DNNL_COL_SLOT])
        needs->act_bytes[DT_DNNL_COL_SLOT] = col_bytes;
    return 0;
}

/* The bf16 input x (nChw16c) unfolded as col[n, oh, ow][kh, kw, c_in]: each tap's
 * channels are 16-channel blocks of x, copied whole; taps in the padding are zeros. */
static void unfold_nchw16c(uint16_t *col, const uint16_t *x, const dt_conv2d_shape *s, int n) {
    const int cb_n = s->c_in / 16, plane = s->h_out * s->w_out;
    const size_t taps = (size_t)s->kh * s->kw * s->c_in, rows = (size_t)n * plane;
#pragma omp parallel for schedule(static)
    for (size_t r = 0; r < rows; r++) {
        const int b = (int)(r / plane), oh = (int)(r % plane) / s->w_out,
                  ow = (int)(r % plane) % s->w_out;
        uint16_t *row = col + r * taps;
        for (int kh = 0; kh < s->kh; kh++)
            for (int kw = 0; kw < s->kw; kw++) {
                uint16_t *dst = row + (size_t)(kh * s->kw + kw) * s->c_in;
                const int ih = oh * s->stride_h - s->pad_top + kh * s->dilation,
                          iw = ow * s->stride_w - s->pad_left + kw * s->dilation;
                if (ih < 0 || ih >= s->h_in || iw < 0 || iw >= s->w_in) {
                    memset(dst, 0, sizeof(uint16_t) * s->c_in);
                    continue;
                }
                for (int cb = 0; cb < cb_n; cb++)
                    memcpy(dst + 16 * cb,
                           x + ((((size_t)b * cb_n + cb) * s->h_in + ih) * s->w_in + iw) * 16,
                           16 * sizeof(uint16_t));
            }
    }
}

/* oneDNN 2.6's depthwise weight-gradient kernel (jit_dw) refuses planes smaller than
 * its kernel allows (ih < kh + (-pad) mod stride: mobilenet_v2's 2x2 and 1x1 planes at a
 * 32x32 input) and kernels wider than 3 (EfficientNet's 5x5); its fallback,
 * x64:gemm:jit, runs tiny GEMMs channel by channel: 338 of a 480 ms mobilenet_v2 step
 * (batch 64, 1 thread, ONEDNN_VERBOSE). Such a gradient is kh * kw multiply-adds per
 * output element, memory-bound: this loop, vectorised over a 16-channel block (nChw16c)
 * or strided (NCHW), takes it instead whenever oneDNN's pick is not a fast kernel.
 * fp32 only (a bf16 plan keeps oneDNN's). */
static int own_dw_fits(const dt_conv2d_shape *s, const dt_exec_conv2d_io *io, int bf16) {
    return !bf16 && io->in_dtype == DT_F32 && io->out_dtype == DT_F32 && s->groups > 1 &&
           s->groups == s->c_in && s->groups == s->c_out;
}

/* dweight[c][ky][kx] += sum over images and output positions of
 * dout[c][oy][ox] * in[c][oy * sh - pad_top + ky * d][ox * sw - pad_left + kx * d];
 * dbias[c] += sum of dout[c]. */
static void dw_backward_weights(const dt_conv2d_shape *s, const dt_exec_conv2d_io *io, int n,
                                float *dweight, float *dbias, const float *dout, const float *in) {
    enum { L = 16 };
    const int C = s->c_in, taps = s->kh * s->kw, blocks = (C + L - 1) / L;
    const size_t in_plane = (size_t)s->h_in * s->w_in, out_plane = (size_t)s->h_out * s->w_out;
    /* nChw16c: a block's 16 channels are adjacent, a position 16 apart; NCHW: a channel
     * a plane apart, a position 1 */
    const size_t in_lane = io->in_blocked ? 1 : in_plane,
                 out_lane = io->out_blocked ? 1 : out_plane;
    const size_t in_pos = io->in_blocked ? L : 1, out_pos = io->out_blocked ? L : 1;
    const size_t in_image = (size_t)(io->in_blocked ? blocks * L : C) * in_plane;
    const size_t out_image = (size_t)(io->out_blocked ? blocks * L : C) * out_plane;
#pragma omp parallel for schedule(static)
    for (int blk = 0; blk < blocks; blk++) {
        const int lanes = C - blk * L < L ? C - blk * L : L;
        /* the block's first channel: block blk of nChw16c, or channel blk * 16 of NCHW */
        const size_t in0 = (size_t)blk * L * in_plane, out0 = (size_t)blk * L * out_plane;
        for (int t = 0; t < taps; t++) {
            const int ky = t / s->kw, kx = t % s->kw;
            float acc[L] = {0};
            for (int b = 0; b < n; b++)
                for (int oy = 0; oy < s->h_out; oy++) {
                    const int iy = oy * s->stride_h - s->pad_top + ky * s->dilation;
                    if (iy < 0 || iy >= s->h_in) continue;
                    for (int ox = 0; ox < s->w_out; ox++) {
                        const int ix = ox * s->stride_w - s->pad_left + kx * s->dilation;
                        if (ix < 0 || ix >= s->w_in) continue;
                        const size_t ip = (size_t)iy * s->w_in + ix,
                                     op = (size_t)oy * s->w_out + ox;
                        const float *x = in + b * in_image + in0 + ip * in_pos;
                        const float *g = dout + b * out_image + out0 + op * out_pos;
                        for (int l = 0; l < lanes; l++) acc[l] += g[l * out_lane] * x[l * in_lane];
                    }
                }
            for (int l = 0; l < lanes; l++) dweight[(size_t)(blk * L + l) * taps + t] += acc[l];
        }
        if (dbias) {
            float acc[L] = {0};
            for (int b = 0; b < n; b++)
                for (size_t op = 0; op < out_plane; op++) {
                    const float *g = dout + b * out_image + out0 + op * out_pos;
                    for (int l = 0; l < lanes; l++) acc[l] += g[l * out_lane];
                }
            for (int l = 0; l < lanes; l++) dbias[blk * L + l] += acc[l];
        }
    }
}

static int variant_init(variant *v, dt_dnnl *ctx, const dt_conv2d_shape *s0, int n, int has_bias,
                        const dt_exec_conv2d_io *io, int bf16, int matmul_ok,
                        dt_dnnl_scratch *needs, dt_error *err) {
    const dt_conv2d_shape *s = s0;
    dnnl_dims_t src_dims = {n, s->c_in, s->h_in, s->w_in};
    dnnl_dims_t dst_dims = {n, s->c_out, s->h_out, s->w_out};
    /* grouped: [groups, c_out / groups, c_in / groups, kh, kw], the same bytes as
     * dtrain's [c_out, c_in / groups, kh, kw] */
    const int grouped = s->groups > 1, G = s->groups;
    dnnl_dims_t wei_dims = {s->c_out, s->c_in, s->kh, s->kw};
    if (grouped) {
        const dnnl_dims_t gdims = {G, s->c_out / G, s->c_in / G, s->kh, s->kw};
        memcpy(wei_dims, gdims, sizeof gdims);
    }
    const int wei_ndims = grouped ? 5 : 4;
    dnnl_dims_t bias_dims = {s->c_out};
    dnnl_dims_t strides = {s->stride_h, s->stride_w};
    dnnl_dims_t dilates = {s->dilation - 1, s->dilation - 1}; /* oneDNN counts the gaps */
    dnnl_dims_t pad_l = {s->pad_top, s->pad_left};
    /* PyTorch floors the output size; oneDNN wants the right padding that makes
     * (in + pad_l + pad_r - span) / stride + 1 land exactly on it. */
    const int span_h = (s->kh - 1) * s->dilation + 1, span_w = (s->kw - 1) * s->dilation + 1;
    dnnl_dims_t pad_r = {(s->h_out - 1) * s->stride_h + span_h - s->h_in - s->pad_top,
                         (s->w_out - 1) * s->stride_w + span_w - s->w_in - s->pad_left};
    dnnl_memory_desc_t src_u, dst_u, wei_u, bias_u;
    v->n = n;
    DNNL_TRY(dnnl_memory_desc_init_by_tag(&src_u, 4, src_dims, act_type(io->in_dtype),
                                          io->in_blocked ? dnnl_nChw16c : dnnl_nchw),
             "md");
    DNNL_TRY(dnnl_memory_desc_init_by_tag(&dst_u, 4, dst_dims, act_type(io->out_dtype),
                                          io->out_blocked ? dnnl_nChw16c : dnnl_nchw),
             "md");
    DNNL_TRY(dnnl_memory_desc_init_by_tag(&wei_u, wei_ndims, wei_dims, dnnl_f32,
                                          grouped ? dnnl_goihw : dnnl_oihw),
             "md");
    DNNL_TRY(dnnl_memory_desc_init_by_tag(&bias_u, 1, bias_dims, dnnl_f32, dnnl_x), "md");
    const conv_geom g = {.src = &src_dims,
                         .dst = &dst_dims,
                         .wei = &wei_dims,
                         .strides = &strides,
                         .dilates = &dilates,
                         .wei_ndims = wei_ndims,
                         .pad_l = &pad_l,
                         .pad_r = &pad_r,
                         .bias = has_bias ? &bias_u : NULL};
    /* fp32 primitives, and with bf16 the bf16 ones where oneDNN has a fast kernel for
     * them; each forward descriptor is the hint of the backward ones of its type. */
    /* A bf16 primitive writes a bf16 activation directly (no fp32 result to convert);
     * an input gradient it must add to goes through fp32 (one rounding of the sum). */
    const dnnl_data_type_t dst_t = act_type(io->out_dtype);
    const dnnl_data_type_t dsrc_t = io->din_sole_writer ? act_type(io->in_dtype) : dnnl_f32;
    dnnl_primitive_desc_t fpd_bf16 = NULL, fpd_f32 = NULL, fpd, bdpd, bwpd;
    if (bf16 && conv_pd(&fpd_bf16, ctx, &g, CONV_FORWARD, dnnl_bf16, dst_t, NULL) != dnnl_success)
        fpd_bf16 = NULL;
    if (conv_pd(&fpd_f32, ctx, &g, CONV_FORWARD, dnnl_f32, dnnl_f32, NULL) != dnnl_success) {
        if (fpd_bf16) dnnl_primitive_desc_destroy(fpd_bf16);
        return dt_error_set(err, "oneDNN: convolution forward failed");
    }
    fpd = fpd_bf16 && dt_dnnl_fast_impl(fpd_bf16) ? fpd_bf16 : fpd_f32;
    int rc = make_primitive(&v->fwd, fpd, err);
    rc = rc ? rc
            : port_init(&v->f_src, ctx, &src_u,
                        dnnl_primitive_desc_query_md(fpd, dnnl_query_src_md, 0), 0, 0, 0, 0, needs,
                        err);
    rc = rc ? rc
            : port_init(&v->f_wei, ctx, &wei_u,
                        dnnl_primitive_desc_query_md(fpd, dnnl_query_weights_md, 0), 0, 0, 1, 0,
                        needs, err);
    rc = rc ? rc
            : port_init(&v->f_dst, ctx, &dst_u,
                        dnnl_primitive_desc_query_md(fpd, dnnl_query_dst_md, 0), 1, 0, 0, 1, needs,
                        err);
    int conv_bwd_weights = 1; /* 0: the weight gradient is a matmul or dw_backward_weights */
    if (rc == 0 && matmul_ok && use_matmul_bwd_weights(s, io, bf16)) {
        int m = matmul_bwd_weights_init(v, ctx, s, n, &dst_u, &wei_u, needs, err);
        if (m < 0)
            rc = m;
        else
            conv_bwd_weights = m; /* 1: no fast matmul */
    }
    if (rc == 0 && conv_bwd_weights &&
        conv_pd_best(&bwpd, ctx, &g, CONV_BACKWARD_WEIGHTS, dnnl_f32, fpd_bf16, fpd_f32))
        rc = dt_error_set(err, "oneDNN: convolution backward-weights failed");
    if (rc == 0 && conv_bwd_weights && !dt_dnnl_fast_impl(bwpd) && own_dw_fits(s, io, bf16)) {
        dnnl_primitive_desc_destroy(bwpd);
        v->own_dw = 1;
        conv_bwd_weights = 0;
    }
    if (rc == 0 && conv_bwd_weights) {
        rc = make_primitive(&v->bwd_weights, bwpd, err);
        rc = rc ? rc
                : port_init(&v->bw_src, ctx, &src_u,
                            dnnl_primitive_desc_query_md(bwpd, dnnl_query_src_md, 0), 0, 0, 0, 0,
                            needs, err);
        rc = rc ? rc
                : port_init(&v->bw_ddst, ctx, &dst_u,
                            dnnl_primitive_desc_query_md(bwpd, dnnl_query_diff_dst_md, 0), 0, 0, 0,
                            1, needs, err);
        rc = rc ? rc
                : port_init(&v->bw_dwei, ctx, &wei_u,
                            dnnl_primitive_desc_query_md(bwpd, dnnl_query_diff_weights_md, 0), 1, 1,
                            1, 2, needs, err);
        dnnl_primitive_desc_destroy(bwpd);
    }
    /* The same conversion of src twice (forward, then weight gradient) is done once. */
    v->keeps_src = rc == 0 && v->f_src.reorder && v->bw_src.reorder &&
                   dnnl_memory_desc_equal(&v->f_src.prim_md, &v->bw_src.prim_md);
    if (rc == 0 && conv_pd_best(&bdpd, ctx, &g, CONV_BACKWARD_DATA, dsrc_t, fpd_bf16, fpd_f32))
        rc = dt_error_set(err, "oneDNN: convolution backward-data failed");
    if (rc == 0) {
        const dnnl_memory_desc_t *ddst =
            dnnl_primitive_desc_query_md(bdpd, dnnl_query_diff_dst_md, 0);
        v->bd_ddst_shares_bw =
            !v->bw_matmul && !v->own_dw && dnnl_memory_desc_equal(ddst, &v->bw_ddst.prim_md);
        rc = make_primitive(&v->bwd_data, bdpd, err);
        if (!v->bd_ddst_shares_bw)
            rc = rc ? rc : port_init(&v->bd_ddst, ctx, &dst_u, ddst, 0, 0, 0, 2, needs, err);
        rc = rc ? rc
                : port_init(&v->bd_wei, ctx, &wei_u,
                            dnnl_primitive_desc_query_md(bdpd, dnnl_query_weights_md, 0), 0, 0, 1,
                            1, needs, err);
        rc = rc ? rc
                : port_init(&v->bd_dsrc, ctx, &src_u,
                            dnnl_primitive_desc_query_md(bdpd, dnnl_query_diff_src_md, 0), 1,
                            !io->din_sole_writer, 0, 0, needs, err);
        dnnl_primitive_desc_destroy(bdpd);
    }
    if (fpd_bf16) dnnl_primitive_desc_destroy(fpd_bf16);
    dnnl_primitive_desc_destroy(fpd_f32);
    if (rc) return rc;
    if (has_bias) {
        v->dbias_tmp = calloc((size_t)s->c_out, sizeof(float));
        if (!v->dbias_tmp) return dt_error_set(err, "out of memory for a conv plan");
        DNNL_TRY(dnnl_memory_create(&v->f_bias, &bias_u, ctx->engine, DNNL_MEMORY_NONE), "memory");
        DNNL_TRY(dnnl_memory_create(&v->bw_dbias, &bias_u, ctx->engine, v->dbias_tmp), "memory");
    }
    return 0;
}

int dt_conv2d_plan_create(dt_conv2d_plan **plan, dt_dnnl *ctx, const dt_conv2d_shape *s,
                          int has_bias, const dt_exec_conv2d_io *io, int bf16,
                          dt_dnnl_scratch *needs, dt_error *err) {
    dt_conv2d_plan *p = calloc(1, sizeof *p);
    if (!p) return dt_error_set(err, "out of memory for a conv plan");
    p->ctx = ctx;
    p->s = *s;
    p->has_bias = has_bias;
    p->bf16 = bf16;
    if (io) p->io = *io;
    if ((p->io.in_blocked && s->c_in % 16) || (p->io.out_blocked && s->c_out % 16)) {
        free(p);
        return dt_error_set(err, "conv2d: blocked activations need channels in multiples of 16");
    }
    if ((p->io.in_dtype != DT_F32 && p->io.in_dtype != DT_BF16) ||
        (p->io.out_dtype != DT_F32 && p->io.out_dtype != DT_BF16)) {
        free(p);
        return dt_error_set(err, "conv2d: activations must be f32 or bf16");
    }
    if (variant_init(&p->v[0], ctx, s, s->n, has_bias, &p->io, bf16, 1, needs, err)) {
        variant_destroy(&p->v[0]);
        free(p);
        return -1;
    }
    if (p->v[0].keeps_src) p->src_keep_bytes = dnnl_memory_desc_get_size(&p->v[0].f_src.prim_md);
    p->n_variants = 1;
    p->next_evict = 1;
    p->limits = *needs;
    *plan = p;
    return 0;
}

int dt_conv2d_plan_wgrad_is_matmul(const dt_conv2d_plan *plan) {
    return plan->v[0].bw_matmul != NULL; /* the full batch's variant, never evicted */
}

const char *dt_conv2d_plan_impl(const dt_conv2d_plan *plan, int pass) {
    const variant *v = &plan->v[0];
    if (pass == 2 && v->bw_matmul) return "matmul";
    if (pass == 2 && v->own_dw) return "dtrain depthwise";
    const_dnnl_primitive_t prim = pass == 0 ? v->fwd : pass == 1 ? v->bwd_data : v->bwd_weights;
    const_dnnl_primitive_desc_t pd = NULL;
    const char *impl = "";
    if (!prim || dnnl_primitive_get_primitive_desc(prim, &pd) != dnnl_success ||
        dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success)
        return "";
    return impl ? impl : "";
}

size_t dt_conv2d_plan_own_bytes(const dt_conv2d_plan *plan) {
    return plan->src_keep_bytes;
}

int dt_conv2d_plan_alloc(dt_conv2d_plan *plan, dt_error *err) {
    if (!plan->src_keep_bytes || plan->src_keep) return 0;
    plan->src_keep = dt_alloc(plan->src_keep_bytes, "a conv's converted input", err);
    return plan->src_keep ? 0 : -1;
}

void dt_conv2d_plan_destroy(dt_conv2d_plan *plan) {
    if (!plan) return;
    for (int i = 0; i < plan->n_variants; i++) variant_destroy(&plan->v[i]);
    dt_free(plan->src_keep);
    free(plan);
}

/* The primitives for batch n: the full batch is built at creation; one other size
 * (the last partial batch, an evaluation batch) is built on first use and kept. */
static variant *variant_for(dt_conv2d_plan *p, int n) {
    for (int i = 0; i < p->n_variants; i++)
        if (p->v[i].n == n) return &p->v[i];
    variant *v = &p->v[1];
    if (p->n_variants == 2) variant_destroy(v);
    p->n_variants = 2;
    dt_dnnl_scratch needs;
    memset(&needs, 0, sizeof needs);
    dt_error err;
    /* the full batch's variant chose the weight gradient's path; this one follows it
     * (its scratch is the full batch's) */
    if (variant_init(v, p->ctx, &p->s, n, p->has_bias, &p->io, p->bf16,
                     dt_conv2d_plan_wgrad_is_matmul(p), &needs, &err)) {
        fprintf(stderr, "dtrain: conv2d for batch %d: %s\n", n, err.msg);
        exit(1);
    }
    for (int i = 0; i < DT_DNNL_ACT_SLOTS; i++)
        if (needs.act_bytes[i] > p->limits.act_bytes[i]) {
            fprintf(stderr, "dtrain: conv2d for batch %d needs more scratch than batch %d\n", n,
                    p->s.n);
            exit(1);
        }
    if (v->keeps_src && dnnl_memory_desc_get_size(&v->f_src.prim_md) > p->src_keep_bytes)
        v->keeps_src = 0; /* cannot happen: a smaller batch needs less */
    return v;
}

void dt_conv2d_plan_forward(dt_conv2d_plan *plan, const dt_dnnl_scratch *scratch, int n, void *out,
                            const void *in, const float *weight, const float *bias) {
    dt_dnnl *ctx = plan->ctx;
    variant *v = variant_for(plan, n);
    dnnl_memory_t src = v->keeps_src && plan->src_keep
                            ? port_enter_into(&v->f_src, ctx, plan->src_keep, in)
                            : port_enter(&v->f_src, ctx, scratch, in);
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, src},
                               {DNNL_ARG_WEIGHTS, port_enter(&v->f_wei, ctx, scratch, weight)},
                               {DNNL_ARG_DST, port_enter(&v->f_dst, ctx, scratch, out)},
                               {DNNL_ARG_BIAS, v->f_bias}};
    if (v->f_bias) dt_dnnl_run(dnnl_memory_set_data_handle(v->f_bias, (void *)bias), "set handle");
    dt_dnnl_run(dnnl_primitive_execute(v->fwd, ctx->stream, v->f_bias ? 4 : 3, args), "forward");
    port_leave(&v->f_dst, ctx);
    dt_dnnl_run(dnnl_stream_wait(ctx->stream), "stream wait");
}

/* The weight (and bias) gradient by oneDNN's convolution primitive. */
static void conv_backward_weights(dt_conv2d_plan *plan, variant *v, const dt_dnnl_scratch *scratch,
                                  float *dweight, float *dbias, const void *dout, const void *in) {
    dt_dnnl *ctx = plan->ctx;
    dnnl_memory_t src;
    if (v->keeps_src && plan->src_keep) { /* the forward's conversion of this input */
        dt_dnnl_run(dnnl_memory_set_data_handle(v->bw_src.prim_mem, plan->src_keep), "set handle");
        src = v->bw_src.prim_mem;
    } else {
        src = port_enter(&v->bw_src, ctx, scratch, in);
    }
    dnnl_exec_arg_t wargs[4] = {
        {DNNL_ARG_SRC, src},
        {DNNL_ARG_DIFF_DST, port_enter(&v->bw_ddst, ctx, scratch, dout)},
        {DNNL_ARG_DIFF_WEIGHTS, port_enter(&v->bw_dwei, ctx, scratch, dweight)},
        {DNNL_ARG_DIFF_BIAS, v->bw_dbias}};
    dt_dnnl_run(dnnl_primitive_execute(v->bwd_weights, ctx->stream, v->bw_dbias ? 4 : 3, wargs),
                "backward weights");
    port_leave(&v->bw_dwei, ctx);
    if (v->bw_dbias && dbias)
        for (int o = 0; o < plan->s.c_out; o++) dbias[o] += v->dbias_tmp[o];
}

/* The weight (and bias) gradient as one bf16 matmul: diff_dst [c_out][rows] times the
 * unfolded input [rows][taps], rows = n * h_out * w_out. */
static void matmul_backward_weights(dt_conv2d_plan *plan, variant *v,
                                    const dt_dnnl_scratch *scratch, int n, float *dweight,
                                    float *dbias, const void *dout, const void *in) {
    dt_dnnl *ctx = plan->ctx;
    const dt_conv2d_shape *s = &plan->s;
    dnnl_memory_t ddst = port_enter(&v->bw_ddst, ctx, scratch, dout);
    void *ddst_data = NULL;
    dt_dnnl_run(dnnl_memory_get_data_handle(ddst, &ddst_data), "get handle");
    uint16_t *col = scratch->act[DT_DNNL_COL_SLOT];
    unfold_nchw16c(col, in, s, n);
    dnnl_memory_t dwei = port_enter(&v->bw_dwei, ctx, scratch, dweight);
    void *dwei_data = NULL;
    dt_dnnl_run(dnnl_memory_get_data_handle(dwei, &dwei_data), "get handle");
    dt_dnnl_run(dnnl_memory_set_data_handle(v->mm_ddst, ddst_data), "set handle");
    dt_dnnl_run(dnnl_memory_set_data_handle(v->mm_col, col), "set handle");
    dt_dnnl_run(dnnl_memory_set_data_handle(v->mm_dwei, dwei_data), "set handle");
    dnnl_exec_arg_t args[3] = {
        {DNNL_ARG_SRC, v->mm_ddst}, {DNNL_ARG_WEIGHTS, v->mm_col}, {DNNL_ARG_DST, v->mm_dwei}};
    dt_dnnl_run(dnnl_primitive_execute(v->bw_matmul, ctx->stream, 3, args), "backward weights");
    port_leave(&v->bw_dwei, ctx);
    if (dbias) { /* the sum of each output channel's diff_dst, a row of ddst_data */
        dt_dnnl_run(dnnl_stream_wait(ctx->stream), "stream wait");
        const size_t rows = (size_t)n * s->h_out * s->w_out;
        const uint16_t *d = ddst_data;
#pragma omp parallel for schedule(static)
        for (int o = 0; o < s->c_out; o++) {
            float sum = 0;
            for (size_t r = 0; r < rows; r++) sum += dt_bf16_to_f32(d[(size_t)o * rows + r]);
            dbias[o] += sum;
        }
    }
}

void dt_conv2d_plan_backward(dt_conv2d_plan *plan, const dt_dnnl_scratch *scratch, int n, void *din,
                             float *dweight, float *dbias, const void *dout, const void *in,
                             const float *weight) {
    dt_dnnl *ctx = plan->ctx;
    variant *v = variant_for(plan, n);
    if (v->bw_matmul) {
        matmul_backward_weights(plan, v, scratch, n, dweight, dbias, dout, in);
    } else if (v->own_dw) {
        dw_backward_weights(&plan->s, &plan->io, n, dweight, dbias, dout, in);
    } else {
        conv_backward_weights(plan, v, scratch, dweight, dbias, dout, in);
    }
    if (din) {
        /* diff_dst already sits in act slot 1 in the layout bwd-data wants, if shared. */
        dnnl_memory_t ddst = v->bd_ddst_shares_bw ? v->bw_ddst.prim_mem
                                                  : port_enter(&v->bd_ddst, ctx, scratch, dout);
        dnnl_exec_arg_t dargs[3] = {
            {DNNL_ARG_DIFF_DST, ddst},
            {DNNL_ARG_WEIGHTS, port_enter(&v->bd_wei, ctx, scratch, weight)},
            {DNNL_ARG_DIFF_SRC, port_enter(&v->bd_dsrc, ctx, scratch, din)}};
        dt_dnnl_run(dnnl_primitive_execute(v->bwd_data, ctx->stream, 3, dargs), "backward data");
        port_leave(&v->bd_dsrc, ctx);
    }
    dt_dnnl_run(dnnl_stream_wait(ctx->stream), "stream wait");
}
