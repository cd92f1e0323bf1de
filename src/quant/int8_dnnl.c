#include "quant/int8_dnnl.h"

#include <math.h>
#include <oneapi/dnnl/dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu_isa.h"
#include "quant/qfloat.h"

/* One primitive call with its arguments; the memories are owned by the step. */
enum { MAX_ARGS = 5 };
typedef struct step {
    dnnl_primitive_t prim;
    dnnl_exec_arg_t args[MAX_ARGS];
    int n_args;
    /* a fused residual whose integers are still needed elsewhere: copied into the
     * output first, since the sum post-op adds what the output holds */
    const void *copy_from;
    void *copy_to;
    size_t copy_bytes_per_sample;
    /* a step computed in C (prim is NULL): a kept-float op, a final pooling's float
     * logits */
    void (*run)(struct dt_int8_dnnl *e, const dt_qop *o, int n);
    const dt_qop *op;
} step;

typedef struct variant {
    int n;
    step *steps; /* [0]: the input's reorder, then one per op */
    int n_steps;
    dnnl_memory_t input; /* the caller's float input: its handle is set per call */
} variant;

struct dt_int8_dnnl {
    const dt_qnet *q;
    int max_batch;
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    void **buf; /* per value: [max_batch, h, w, c] integers, or the float logits */
    int *alias; /* value whose buffer a value shares (itself if its own) */
    float *logits;
    size_t bytes;
    variant v[2];
    int n_variants, next_evict;
    dt_qfloat *kept; /* the ops kept float; NULL if none */
};

#define TRY(call, what)                                                                            \
    do {                                                                                           \
        dnnl_status_t st_ = (call);                                                                \
        if (st_ != dnnl_success)                                                                   \
            return dt_error_set(err, "oneDNN int8: %s failed (status %d)", what, (int)st_);        \
    } while (0)

static void run_or_die(dnnl_status_t st, const char *what) {
    if (st != dnnl_success) {
        fprintf(stderr, "dtrain: oneDNN int8 %s failed at run time (status %d)\n", what, (int)st);
        exit(1);
    }
}

static dnnl_data_type_t type_of(const dt_qvalue *v) {
    return v->is_float ? dnnl_f32 : v->lo < 0 ? dnnl_s8 : dnnl_u8;
}

static size_t per_sample(const dt_qvalue *v) {
    return (size_t)v->c * v->h * v->w * (v->is_float ? sizeof(float) : 1);
}

/* A value as oneDNN sees it: [n, c, h, w] in NHWC. */
static int value_md(dnnl_memory_desc_t *md, const dt_qvalue *v, int n, dt_error *err) {
    dnnl_dims_t dims = {n, v->c, v->h, v->w};
    TRY(dnnl_memory_desc_init_by_tag(md, 4, dims, type_of(v), dnnl_nhwc), "memory descriptor");
    return 0;
}

static int add_arg(step *s, int kind, const dnnl_memory_desc_t *md, dnnl_engine_t engine,
                   void *handle, dt_error *err) {
    dnnl_memory_t mem;
    TRY(dnnl_memory_create(&mem, md, engine, handle), "memory creation");
    s->args[s->n_args].arg = kind;
    s->args[s->n_args].memory = mem;
    s->n_args++;
    return 0;
}

static void step_destroy(step *s) {
    if (s->prim) dnnl_primitive_destroy(s->prim);
    for (int i = 0; i < s->n_args; i++) dnnl_memory_destroy(s->args[i].memory);
    memset(s, 0, sizeof *s);
}

static void variant_destroy(variant *v) {
    for (int i = 0; v->steps && i < v->n_steps; i++) step_destroy(&v->steps[i]);
    free(v->steps);
    memset(v, 0, sizeof *v);
}

/* The primitive of a description with attributes (NULL: none); frees the pd. */
static int make_primitive(step *s, dnnl_primitive_desc_t pd, dt_error *err) {
    dnnl_status_t st = dnnl_primitive_create(&s->prim, pd);
    dnnl_primitive_desc_destroy(pd);
    TRY(st, "primitive creation");
    return 0;
}

/* Weights in the layout the primitive chose, reordered once from the plain s8 ones
 * (oneDNN adds its s8-source compensation in this reorder). */
static int add_weights(step *s, dt_int8_dnnl *e, dnnl_primitive_desc_t pd, const dt_qop *o,
                       const dnnl_memory_desc_t *user_md, dt_error *err) {
    const dnnl_memory_desc_t *want = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    dnnl_memory_t user, mine;
    TRY(dnnl_memory_create(&user, user_md, e->engine, o->weight), "weights memory");
    dnnl_status_t st = dnnl_memory_create(&mine, want, e->engine, DNNL_MEMORY_ALLOCATE);
    if (st != dnnl_success) {
        dnnl_memory_destroy(user);
        TRY(st, "weights memory");
    }
    dnnl_primitive_desc_t rpd;
    dnnl_primitive_t reorder = NULL;
    st = dnnl_reorder_primitive_desc_create(&rpd, user_md, e->engine, want, e->engine, NULL);
    if (st == dnnl_success) {
        st = dnnl_primitive_create(&reorder, rpd);
        dnnl_primitive_desc_destroy(rpd);
    }
    if (st == dnnl_success) {
        dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, user}, {DNNL_ARG_TO, mine}};
        st = dnnl_primitive_execute(reorder, e->stream, 2, args);
        if (st == dnnl_success) st = dnnl_stream_wait(e->stream);
    }
    if (reorder) dnnl_primitive_destroy(reorder);
    dnnl_memory_destroy(user);
    if (st != dnnl_success) {
        dnnl_memory_destroy(mine);
        TRY(st, "weights reorder");
    }
    e->bytes += dnnl_memory_desc_get_size(want);
    s->args[s->n_args].arg = DNNL_ARG_WEIGHTS;
    s->args[s->n_args].memory = mine;
    s->n_args++;
    return 0;
}

/* Output scales, the fused residual (sum) and the lab's clamp (clip) of a layer. */
static int layer_attr(dnnl_primitive_attr_t *attr, const dt_int8_dnnl *e, const dt_qop *o,
                      dt_error *err) {
    const dt_qvalue *y = &e->q->values[o->out];
    TRY(dnnl_primitive_attr_create(attr), "attributes");
    TRY(dnnl_primitive_attr_set_output_scales(*attr, o->n_scales, o->n_scales > 1 ? 1 << 1 : 0,
                                              o->output_scale),
        "output scales");
    dnnl_post_ops_t ops;
    TRY(dnnl_post_ops_create(&ops), "post-ops");
    dnnl_status_t st = dnnl_success;
    if (o->residual >= 0)
        st = dnnl_post_ops_append_sum_v2(ops, o->residual_scale,
                                         type_of(&e->q->values[o->residual]));
    /* u8 saturation is the ReLU of [0, 255] and s8's the clamp of [-128, 127]; the lab's
     * [0, 127] needs a clip (to integers, so clip-then-round is round-then-clamp) */
    if (st == dnnl_success && !y->is_float && y->lo == 0 && y->hi < 255)
        st = dnnl_post_ops_append_eltwise(ops, 1.0f, dnnl_eltwise_clip, 0.0f, (float)y->hi);
    if (st == dnnl_success) st = dnnl_primitive_attr_set_post_ops(*attr, ops);
    dnnl_post_ops_destroy(ops);
    TRY(st, "post-ops");
    return 0;
}

/* Whether an implementation's name holds one of `avoid`'s names (NULL-terminated). */
static int avoided(const char *name, const char *const *avoid) {
    for (int i = 0; avoid[i]; i++)
        if (strstr(name, avoid[i])) return 1;
    return 0;
}

/* The first implementation oneDNN offers for a layer, except those whose names hold
 * one of `avoid` (NULL: none avoided). */
static dnnl_status_t first_impl(dnnl_primitive_desc_t *pd, const void *op_desc,
                                dnnl_primitive_attr_t attr, dnnl_engine_t engine,
                                const char *const *avoid) {
    if (!avoid) return dnnl_primitive_desc_create(pd, op_desc, attr, engine, NULL);
    dnnl_primitive_desc_iterator_t it;
    dnnl_status_t st = dnnl_primitive_desc_iterator_create(&it, op_desc, attr, engine, NULL);
    if (st != dnnl_success) return st;
    for (;;) {
        *pd = dnnl_primitive_desc_iterator_fetch(it);
        const char *name = NULL;
        if (!*pd ||
            dnnl_primitive_desc_query(*pd, dnnl_query_impl_info_str, 0, &name) != dnnl_success) {
            st = dnnl_runtime_error;
            break;
        }
        if (!name || !avoided(name, avoid)) break;
        dnnl_primitive_desc_destroy(*pd);
        *pd = NULL;
        st = dnnl_primitive_desc_iterator_next(it);
        if (st != dnnl_success) break;
    }
    if (st != dnnl_success && *pd) {
        dnnl_primitive_desc_destroy(*pd);
        *pd = NULL;
    }
    dnnl_primitive_desc_iterator_destroy(it);
    return st;
}

/* Without VNNI: oneDNN 2.6's AVX2 int8 1x1 kernel gives a strided 1x1 convolution
 * (resnet18's shortcuts) wrong integers in a few places when it runs on 2 threads
 * (different ones from run to run; right on 1 thread), where its general kernel is
 * exact; and a signed input must reach a direct convolution kernel, which halves the
 * (even) weights, not a GEMM (an "ip:" or "gemm:" convolution: gemm_s8s8s32 shifts the
 * input to u8 and saturates). A layer that is both avoids both. */
const char *const *dt_int8_dnnl_avoided(const dt_qnet *q, const dt_qop *o) {
    static const char *const strided_1x1[] = {"1x1", NULL},
                             *const signed_in[] = {"ip:", "gemm", NULL},
                             *const both[] = {"ip:", "gemm", "1x1", NULL};
    if (dt_cpu_has_int8_vnni()) return NULL;
    const int is_signed = q->values[o->in].lo < 0;
    const int is_strided_1x1 = o->kind == DT_QOP_CONV && o->kernel == 1 && o->stride > 1;
    return is_signed && is_strided_1x1 ? both
           : is_signed                 ? signed_in
           : is_strided_1x1            ? strided_1x1
                                       : NULL;
}

/* The rest of a layer with weights once its operation is described (a convolution or
 * an inner product): its primitive with the layer's scales and fused ops, the weights
 * reordered into the primitive's layout, its arguments. */
static int layer_step(step *s, dt_int8_dnnl *e, const dt_qop *o, const void *op_desc,
                      const char *what, const dnnl_memory_desc_t *src,
                      const dnnl_memory_desc_t *wei_user, const dnnl_memory_desc_t *bias,
                      const dnnl_memory_desc_t *dst, dt_error *err) {
    dnnl_primitive_attr_t attr;
    if (layer_attr(&attr, e, o, err)) return -1;
    const char *const *avoid = dt_int8_dnnl_avoided(e->q, o);
    dnnl_primitive_desc_t pd = NULL;
    dnnl_status_t st = first_impl(&pd, op_desc, attr, e->engine, avoid);
    dnnl_primitive_attr_destroy(attr);
    if (st != dnnl_success)
        return dt_error_set(err, "oneDNN int8: no %s for %s (status %d)", what, o->name, (int)st);
    if (add_weights(s, e, pd, o, wei_user, err)) {
        dnnl_primitive_desc_destroy(pd);
        return -1;
    }
    if (make_primitive(s, pd, err) ||
        add_arg(s, DNNL_ARG_SRC, src, e->engine, e->buf[o->in], err) ||
        add_arg(s, DNNL_ARG_BIAS, bias, e->engine, o->bias, err) ||
        add_arg(s, DNNL_ARG_DST, dst, e->engine, e->buf[o->out], err))
        return -1;
    return 0;
}

/* The convolution step from its input and output descriptions: the weights [c_out,
 * wdims...] as oneDNN likes them (from the file's oihw; grouped: [g, c_out / g, c_in / g,
 * k, k], goihw), the s32 bias; taps dil - 1 apart (0: dense). */
static int conv_desc_step(step *s, dt_int8_dnnl *e, const dt_qop *o, dnnl_memory_desc_t *src,
                          dnnl_memory_desc_t *dst, int wndims, const dnnl_dims_t wdims,
                          const dnnl_dims_t strides, const dnnl_dims_t dil, const dnnl_dims_t pad_l,
                          const dnnl_dims_t pad_r, dt_error *err) {
    dnnl_memory_desc_t wei_any, wei_user, bias;
    dnnl_dims_t bdims = {o->c_out};
    TRY(dnnl_memory_desc_init_by_tag(&wei_any, wndims, wdims, dnnl_s8, dnnl_format_tag_any), "md");
    TRY(dnnl_memory_desc_init_by_tag(&wei_user, wndims, wdims, dnnl_s8,
                                     wndims == 5 ? dnnl_goihw : dnnl_oihw),
        "md");
    TRY(dnnl_memory_desc_init_by_tag(&bias, 1, bdims, dnnl_s32, dnnl_x), "md");
    dnnl_convolution_desc_t cd;
    TRY(dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_inference,
                                                   dnnl_convolution_direct, src, &wei_any, &bias,
                                                   dst, strides, dil, pad_l, pad_r),
        "convolution description");
    return layer_step(s, e, o, &cd, "convolution", src, &wei_user, &bias, dst, err);
}

static int conv_step(step *s, dt_int8_dnnl *e, const dt_qop *o, int n, dt_error *err) {
    const dt_qvalue *x = &e->q->values[o->in], *y = &e->q->values[o->out];
    dnnl_memory_desc_t src, dst;
    const int g = o->groups, k = o->kernel, span = (k - 1) * o->dilation + 1;
    dnnl_dims_t wplain = {o->c_out, o->c_in, k, k};
    dnnl_dims_t wgroup = {g, o->c_out / g, o->c_in / g, k, k};
    dnnl_dims_t strides = {o->stride, o->stride}, pad_l = {o->pad, o->pad};
    dnnl_dims_t dil = {o->dilation - 1, o->dilation - 1};
    dnnl_dims_t pad_r = {(y->h - 1) * o->stride + span - x->h - o->pad,
                         (y->w - 1) * o->stride + span - x->w - o->pad};
    if (value_md(&src, x, n, err) || value_md(&dst, y, n, err)) return -1;
    return conv_desc_step(s, e, o, &src, &dst, g > 1 ? 5 : 4, g > 1 ? wgroup : wplain, strides, dil,
                          pad_l, pad_r, err);
}

/* A linear layer as the convolution it is: a kernel the size of its input, one output
 * pixel ([n, c_out, 1, 1] in NHWC is [n, c_out]). For a signed input: oneDNN's s8 x s8
 * inner product (gemm_s8s8s32) shifts the input to u8 and, without VNNI, sums pairs in
 * 16 bits with saturation, where its convolution halves the (even) weights instead,
 * exactly. */
static int linear_as_conv_step(step *s, dt_int8_dnnl *e, const dt_qop *o, int n, dt_error *err) {
    const dt_qvalue *x = &e->q->values[o->in], *y = &e->q->values[o->out];
    dnnl_memory_desc_t src, dst;
    dnnl_dims_t wdims = {o->c_out, x->c, x->h, x->w}, ddims = {n, o->c_out, 1, 1};
    dnnl_dims_t strides = {1, 1}, pad = {0, 0}, dil = {0, 0};
    if (value_md(&src, x, n, err)) return -1;
    TRY(dnnl_memory_desc_init_by_tag(&dst, 4, ddims, type_of(y), dnnl_nhwc), "md");
    return conv_desc_step(s, e, o, &src, &dst, 4, wdims, strides, dil, pad, pad, err);
}

static int linear_step(step *s, dt_int8_dnnl *e, const dt_qop *o, int n, dt_error *err) {
    const dt_qvalue *x = &e->q->values[o->in], *y = &e->q->values[o->out];
    if (x->lo < 0 && !dt_cpu_has_int8_vnni()) return linear_as_conv_step(s, e, o, n, err);
    dnnl_memory_desc_t src, dst, wei_any, wei_user, bias;
    /* 4-D weights over the input's (c, h, w): oneDNN matches them to its NHWC layout,
     * and the plain [out, c*h*w] rows are PyTorch's flatten order */
    dnnl_dims_t wdims = {o->c_out, x->c, x->h, x->w}, bdims = {o->c_out}, ddims = {n, o->c_out};
    if (value_md(&src, x, n, err)) return -1;
    TRY(dnnl_memory_desc_init_by_tag(&dst, 2, ddims, type_of(y), dnnl_nc), "md");
    TRY(dnnl_memory_desc_init_by_tag(&wei_any, 4, wdims, dnnl_s8, dnnl_format_tag_any), "md");
    TRY(dnnl_memory_desc_init_by_tag(&wei_user, 4, wdims, dnnl_s8, dnnl_oihw), "md");
    TRY(dnnl_memory_desc_init_by_tag(&bias, 1, bdims, dnnl_s32, dnnl_x), "md");
    dnnl_inner_product_desc_t ipd;
    TRY(dnnl_inner_product_forward_desc_init(&ipd, dnnl_forward_inference, &src, &wei_any, &bias,
                                             &dst),
        "inner product description");
    return layer_step(s, e, o, &ipd, "inner product", &src, &wei_user, &bias, &dst, err);
}

/* Pooling over kh x kw windows (sh, sw) apart from -pad; the right and bottom padding
 * reach the last window (ceil_mode's). Max pooling's padding never wins; average
 * pooling is never padded (quant.c's fits). */
/* A final average pooling's float logits (quant.h), in C as the emulation computes
 * them: the window's integer sum times 1 / its size, over the input's scale. */
static void pooled_logits_run(dt_int8_dnnl *e, const dt_qop *o, int n) {
    const dt_qvalue *x = &e->q->values[o->in], *y = &e->q->values[o->out];
    const int adaptive = o->kind == DT_QOP_ADAPTIVE_AVGPOOL;
    const int kh = adaptive ? x->h / y->h : o->kernel, kw = adaptive ? x->w / y->w : o->kernel;
    const int sh = adaptive ? kh : o->stride, sw = adaptive ? kw : o->stride;
    const float inv = 1.0f / (float)(kh * kw);
    const int8_t *s8 = e->buf[o->in];
    const uint8_t *u8 = e->buf[o->in];
    float *out = e->buf[o->out];
    for (size_t s = 0; s < (size_t)n; s++)
        for (int c = 0; c < x->c; c++)
            for (int oy = 0; oy < y->h; oy++)
                for (int ox = 0; ox < y->w; ox++) {
                    int sum = 0;
                    for (int ky = 0; ky < kh; ky++)
                        for (int kx = 0; kx < kw; kx++) {
                            const size_t row = s * x->h + (size_t)(oy * sh + ky);
                            const size_t at = (row * x->w + (size_t)(ox * sw + kx)) * x->c + c;
                            sum += x->lo < 0 ? s8[at] : u8[at];
                        }
                    out[((s * y->c + c) * y->h + oy) * y->w + ox] =
                        dt_qfloat_pooled_logit(sum, inv, x->scale);
                }
}

static int pool_step(step *s, dt_int8_dnnl *e, const dt_qop *o, int n, dnnl_alg_kind_t alg, int kh,
                     int kw, int sh, int sw, dt_error *err) {
    const dt_qvalue *x = &e->q->values[o->in], *y = &e->q->values[o->out];
    if (y->is_float) {
        s->run = pooled_logits_run;
        s->op = o;
        return 0;
    }
    dnnl_memory_desc_t src, dst;
    dnnl_dims_t strides = {sh, sw}, kernel = {kh, kw}, pad = {o->pad, o->pad};
    dnnl_dims_t pad_r = {(y->h - 1) * sh + kh - x->h - o->pad,
                         (y->w - 1) * sw + kw - x->w - o->pad};
    if (value_md(&src, x, n, err) || value_md(&dst, y, n, err)) return -1;
    dnnl_pooling_desc_t pd_desc;
    TRY(dnnl_pooling_forward_desc_init(&pd_desc, dnnl_forward_inference, alg, &src, &dst, strides,
                                       kernel, pad, pad_r),
        "pooling description");
    dnnl_primitive_desc_t pd;
    TRY(dnnl_primitive_desc_create(&pd, &pd_desc, NULL, e->engine, NULL), "pooling");
    if (make_primitive(s, pd, err) ||
        add_arg(s, DNNL_ARG_SRC, &src, e->engine, e->buf[o->in], err) ||
        add_arg(s, DNNL_ARG_DST, &dst, e->engine, e->buf[o->out], err))
        return -1;
    return 0;
}

static int maxpool_step(step *s, dt_int8_dnnl *e, const dt_qop *o, int n, dt_error *err) {
    return pool_step(s, e, o, n, dnnl_pooling_max, o->kernel, o->kernel, o->stride, o->stride, err);
}

static int avgpool_step(step *s, dt_int8_dnnl *e, const dt_qop *o, int n, dt_error *err) {
    return pool_step(s, e, o, n, dnnl_pooling_avg_exclude_padding, o->kernel, o->kernel, o->stride,
                     o->stride, err);
}

static int adaptive_avgpool_step(step *s, dt_int8_dnnl *e, const dt_qop *o, int n, dt_error *err) {
    const dt_qvalue *x = &e->q->values[o->in], *y = &e->q->values[o->out];
    const int kh = x->h / y->h, kw = x->w / y->w;
    return pool_step(s, e, o, n, dnnl_pooling_avg_exclude_padding, kh, kw, kh, kw, err);
}

/* A concat: each input's integers reordered into its channels of the output (a
 * sub-memory of its NHWC buffer); they share its scale, so this copies them (a u8 input
 * of a signed concat holds at most 127). One step per input. */
static int concat_step(step *s, dt_int8_dnnl *e, const dt_qop *o, int n, dt_error *err) {
    const dt_qvalue *y = &e->q->values[o->out];
    dnnl_memory_desc_t whole;
    if (value_md(&whole, y, n, err)) return -1;
    int at = 0;
    for (int k = 0; k < o->n_ins; k++) {
        const dt_qvalue *x = &e->q->values[o->ins[k]];
        dnnl_memory_desc_t src, part;
        dnnl_dims_t dims = {n, x->c, x->h, x->w}, offsets = {0, at, 0, 0};
        if (value_md(&src, x, n, err)) return -1;
        TRY(dnnl_memory_desc_init_submemory(&part, &whole, dims, offsets), "sub-memory");
        dnnl_primitive_desc_t pd;
        TRY(dnnl_reorder_primitive_desc_create(&pd, &src, e->engine, &part, e->engine, NULL),
            "concat reorder");
        if (make_primitive(&s[k], pd, err) ||
            add_arg(&s[k], DNNL_ARG_FROM, &src, e->engine, e->buf[o->ins[k]], err) ||
            add_arg(&s[k], DNNL_ARG_TO, &part, e->engine, e->buf[o->out], err))
            return -1;
        at += x->c;
    }
    return 0;
}

static int concat_steps(const dt_qop *o) {
    return o->n_ins;
}

/* A kept-float op between NHWC integers: the inputs of int8 ops dequantized into the
 * float model's NCHW (qfloat.h's arithmetic, as the emulation), the op run, its output
 * quantized back to NHWC. */
static void float_run(dt_int8_dnnl *e, const dt_qop *o, int n) {
    for (int k = 0; k < o->n_ins; k++) {
        if (o->ins[k] < 0) continue; /* none, or a constant the float model holds */
        const dt_qvalue *x = &e->q->values[o->ins[k]];
        if (dt_qfloat_holds(e->kept, o, k, x)) continue;
        float *dst = dt_qfloat_input(e->kept, o, k);
        const int8_t *s8 = e->buf[o->ins[k]];
        const uint8_t *u8 = e->buf[o->ins[k]];
        const size_t hw = (size_t)x->h * x->w;
        for (size_t s = 0; s < (size_t)n; s++)
            for (size_t p = 0; p < hw; p++)
                for (size_t c = 0; c < (size_t)x->c; c++) {
                    const size_t from = (s * hw + p) * x->c + c;
                    dst[(s * x->c + c) * hw + p] =
                        dt_qfloat_dequantize(x->lo < 0 ? s8[from] : u8[from], x->scale);
                }
    }
    dt_qfloat_run(e->kept, o, n);
    const dt_qvalue *y = &e->q->values[o->out];
    const float *src = dt_qfloat_output(e->kept, o);
    int8_t *s8 = e->buf[o->out];
    uint8_t *u8 = e->buf[o->out];
    const size_t hw = (size_t)y->h * y->w;
    for (size_t s = 0; s < (size_t)n; s++)
        for (size_t c = 0; c < (size_t)y->c; c++)
            for (size_t p = 0; p < hw; p++) {
                const int q = dt_qfloat_quantize(src[(s * y->c + c) * hw + p], y);
                const size_t to = (s * hw + p) * y->c + c;
                if (y->lo < 0)
                    s8[to] = (int8_t)q;
                else
                    u8[to] = (uint8_t)q;
            }
}

/* A kept-float op: run in C (float_run). */
static int float_step(step *s, dt_int8_dnnl *e, const dt_qop *o, int n, dt_error *err) {
    (void)e;
    (void)n;
    (void)err;
    s->run = float_run;
    s->op = o;
    return 0;
}

/* How each kind of op runs (quant.h): the primitive of one op for batch n, with its
 * arguments. One row per kind, matched by designator. */
typedef struct int8_kernel {
    int (*make)(step *s, dt_int8_dnnl *e, const dt_qop *o, int n, dt_error *err);
    int (*steps)(const dt_qop *o); /* how many steps it fills (NULL: one) */
} int8_kernel;

static const int8_kernel int8_kernels[] = {
    [DT_QOP_CONV] = {conv_step, NULL},
    [DT_QOP_LINEAR] = {linear_step, NULL},
    [DT_QOP_MAXPOOL] = {maxpool_step, NULL},
    [DT_QOP_AVGPOOL] = {avgpool_step, NULL},
    [DT_QOP_ADAPTIVE_AVGPOOL] = {adaptive_avgpool_step, NULL},
    [DT_QOP_CONCAT] = {concat_step, concat_steps},
    [DT_QOP_FLOAT] = {float_step, NULL},
};
_Static_assert(sizeof int8_kernels / sizeof *int8_kernels == DT_QOP_COUNT,
               "one int8 engine row per quantized op kind");

/* The input: float NCHW -> the first value's integers in NHWC, q = sat(rint(x * scale)). */
static int input_step(step *s, variant *v, dt_int8_dnnl *e, int n, dt_error *err) {
    const dt_qvalue *x = &e->q->values[0];
    dnnl_memory_desc_t from, to;
    dnnl_dims_t dims = {n, x->c, x->h, x->w};
    TRY(dnnl_memory_desc_init_by_tag(&from, 4, dims, dnnl_f32, dnnl_nchw), "md");
    if (value_md(&to, x, n, err)) return -1;
    dnnl_primitive_attr_t attr;
    TRY(dnnl_primitive_attr_create(&attr), "attributes");
    dnnl_status_t st = dnnl_primitive_attr_set_output_scales(attr, 1, 0, &x->scale);
    dnnl_primitive_desc_t pd;
    if (st == dnnl_success)
        st = dnnl_reorder_primitive_desc_create(&pd, &from, e->engine, &to, e->engine, attr);
    dnnl_primitive_attr_destroy(attr);
    TRY(st, "input reorder");
    if (make_primitive(s, pd, err) ||
        add_arg(s, DNNL_ARG_FROM, &from, e->engine, DNNL_MEMORY_NONE, err) ||
        add_arg(s, DNNL_ARG_TO, &to, e->engine, e->buf[0], err))
        return -1;
    v->input = s->args[0].memory;
    return 0;
}

static int variant_init(variant *v, dt_int8_dnnl *e, int n, dt_error *err) {
    const dt_qnet *q = e->q;
    v->n = n;
    int count = 1;
    for (int i = 0; i < q->n_ops; i++)
        count +=
            int8_kernels[q->ops[i].kind].steps ? int8_kernels[q->ops[i].kind].steps(&q->ops[i]) : 1;
    v->steps = calloc((size_t)count, sizeof(step));
    if (!v->steps) return dt_error_set(err, "out of memory for the int8 engine");
    v->n_steps = count;
    if (input_step(&v->steps[0], v, e, n, err)) return -1;
    for (int i = 0, at = 1; i < q->n_ops; i++) {
        const dt_qop *o = &q->ops[i];
        step *s = &v->steps[at];
        at += int8_kernels[o->kind].steps ? int8_kernels[o->kind].steps(o) : 1;
        if (!int8_kernels[o->kind].make)
            return dt_error_set(err, "the int8 engine has no %s kernel (%s)",
                                dt_qop_class_of(o->kind)->name, o->name);
        if (int8_kernels[o->kind].make(s, e, o, n, err)) return -1;
        if (o->residual >= 0 && e->alias[o->out] != e->alias[o->residual]) {
            s->copy_from = e->buf[o->residual];
            s->copy_to = e->buf[o->out];
            s->copy_bytes_per_sample = per_sample(&q->values[o->out]);
        }
    }
    return 0;
}

void dt_int8_dnnl_destroy(dt_int8_dnnl *e) {
    if (!e) return;
    for (int i = 0; i < e->n_variants; i++) variant_destroy(&e->v[i]);
    for (int v = 0; e->buf && v < e->q->n_values; v++)
        if (e->alias[v] == v) dt_free(e->buf[v]);
    free(e->buf);
    free(e->alias);
    if (e->stream) dnnl_stream_destroy(e->stream);
    dt_qfloat_destroy(e->kept);
    if (e->engine) dnnl_engine_destroy(e->engine);
    dt_free(e->logits);
    free(e);
}

/* Buffers: one per value, except that a fused residual conv writes over its
 * shortcut's integers when no later layer reads them (resnet18's blocks), which saves a
 * copy and a buffer per block. */
static int alloc_buffers(dt_int8_dnnl *e, dt_error *err) {
    const dt_qnet *q = e->q;
    e->buf = calloc((size_t)q->n_values, sizeof(void *));
    e->alias = malloc(sizeof(int) * (size_t)q->n_values);
    if (!e->buf || !e->alias) return dt_error_set(err, "out of memory for the int8 engine");
    for (int v = 0; v < q->n_values; v++) e->alias[v] = v;
    for (int i = 0; i < q->n_ops; i++) {
        const int r = q->ops[i].residual;
        /* nor when the convolution reads it too (x + conv(x)): it would overwrite its input */
        if (r < 0 || per_sample(&q->values[r]) != per_sample(&q->values[q->ops[i].out]) ||
            q->ops[i].in == r)
            continue;
        int read_later = 0;
        for (int j = i + 1; j < q->n_ops; j++) read_later |= dt_qop_reads(&q->ops[j], r);
        if (!read_later) e->alias[q->ops[i].out] = e->alias[r];
    }
    for (int v = 0; v < q->n_values; v++) {
        if (e->alias[v] != v) continue;
        const size_t bytes = per_sample(&q->values[v]) * (size_t)e->max_batch;
        if (!(e->buf[v] = dt_alloc(bytes, "int8 activations", err))) return -1;
        e->bytes += bytes;
    }
    for (int v = 0; v < q->n_values; v++) e->buf[v] = e->buf[e->alias[v]];
    const dt_qvalue *last = &q->values[q->ops[q->n_ops - 1].out];
    if (!last->is_float &&
        !(e->logits =
              dt_alloc(sizeof(float) * (size_t)e->max_batch * (size_t)last->c, "logits", err)))
        return -1;
    return 0;
}

int dt_int8_dnnl_exact_here(const dt_qnet *q, char *why, size_t why_size) {
    if (dt_cpu_has_int8_vnni()) return 1;
    for (int i = 0; i < q->n_ops; i++) {
        const dt_qop *o = &q->ops[i];
        const dt_qvalue *x = &q->values[o->in];
        if (!dt_qop_class_of(o->kind)->weight_dims) continue;
        if (x->lo >= 0 && x->hi > 127) {
            snprintf(why, why_size, "layer %s reads 8-bit activations ([0, %d])", o->name, x->hi);
            return 0;
        }
        const size_t count = dt_qop_weight_count(o);
        for (size_t k = 0; x->lo < 0 && k < count; k++)
            if (o->weight[k] & 1) {
                snprintf(why, why_size, "layer %s has odd weights on a signed input", o->name);
                return 0;
            }
    }
    return 1;
}

int dt_int8_dnnl_create(dt_int8_dnnl **out, const dt_qnet *q, int max_batch, dt_error *err) {
    char why[160];
    if (!dt_int8_dnnl_exact_here(q, why, sizeof why))
        return dt_error_set(err,
                            "int8 on oneDNN is not exact on this CPU (%s, no AVX512-VNNI): %s; "
                            "quantize again here (7-bit activations) or use --int8-engine "
                            "emulate",
                            dt_cpu_isa_name(), why);
    dt_int8_dnnl *e = calloc(1, sizeof *e);
    if (!e) return dt_error_set(err, "out of memory for the int8 engine");
    e->q = q;
    e->max_batch = max_batch;
    int rc =
        dnnl_engine_create(&e->engine, dnnl_cpu, 0) != dnnl_success ||
                dnnl_stream_create(&e->stream, e->engine, dnnl_stream_default_flags) != dnnl_success
            ? dt_error_set(err, "oneDNN int8: engine creation failed")
            : 0;
    if (rc == 0) rc = alloc_buffers(e, err);
    if (rc == 0) rc = dt_qfloat_create(&e->kept, q, max_batch, err);
    if (rc == 0) {
        e->n_variants = 1;
        rc = variant_init(&e->v[0], e, max_batch, err);
    }
    if (rc) {
        dt_int8_dnnl_destroy(e);
        return -1;
    }
    e->next_evict = 1;
    *out = e;
    return 0;
}

/* The primitives for batch n: the full batch's, or one other size kept. */
static variant *variant_for(dt_int8_dnnl *e, int n) {
    for (int i = 0; i < e->n_variants; i++)
        if (e->v[i].n == n) return &e->v[i];
    variant *v = &e->v[1];
    if (e->n_variants == 2) variant_destroy(v);
    e->n_variants = 2;
    dt_error err;
    if (variant_init(v, e, n, &err)) {
        fprintf(stderr, "dtrain: int8 engine for batch %d: %s\n", n, err.msg);
        exit(1);
    }
    return v;
}

void dt_int8_dnnl_forward(dt_int8_dnnl *e, const float *x, int n) {
    variant *v = variant_for(e, n);
    run_or_die(dnnl_memory_set_data_handle(v->input, (void *)x), "input handle");
    for (int i = 0; i < v->n_steps; i++) {
        step *s = &v->steps[i];
        if (s->run) {
            run_or_die(dnnl_stream_wait(e->stream), "stream wait");
            s->run(e, s->op, n);
            continue;
        }
        if (s->copy_from) memcpy(s->copy_to, s->copy_from, s->copy_bytes_per_sample * (size_t)n);
        run_or_die(dnnl_primitive_execute(s->prim, e->stream, s->n_args, s->args), "forward");
    }
    run_or_die(dnnl_stream_wait(e->stream), "stream wait");
    const dt_qnet *q = e->q;
    const int last_v = q->ops[q->n_ops - 1].out;
    const dt_qvalue *last = &q->values[last_v];
    if (!last->is_float) {
        const int8_t *s8 = e->buf[last_v];
        const uint8_t *u8 = e->buf[last_v];
        for (size_t k = 0; k < (size_t)n * last->c; k++)
            e->logits[k] = (float)(last->lo < 0 ? s8[k] : u8[k]) / last->scale;
    }
}

const float *dt_int8_dnnl_logits(const dt_int8_dnnl *e) {
    const dt_qnet *q = e->q;
    const int last_v = q->ops[q->n_ops - 1].out;
    return q->values[last_v].is_float ? e->buf[last_v] : e->logits;
}

size_t dt_int8_dnnl_bytes(const dt_int8_dnnl *e) {
    return e->bytes;
}

const void *dt_int8_dnnl_value(const dt_int8_dnnl *e, int value) {
    /* a fused residual's integers are overwritten by the block's output */
    for (int i = 0; i < e->q->n_ops; i++)
        if (e->q->ops[i].residual == value && e->alias[e->q->ops[i].out] == e->alias[value])
            return NULL;
    return e->buf[value];
}
