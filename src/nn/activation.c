#include "nn/activation.h"

#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <string.h>

#include "dtrain/kernel.h"
#include "dtrain/model.h"

/* Each function is one loop per element type, written once (the bodies below take the
 * element's load and store, and are instantiated for f32 and bf16); the function id
 * is switched on outside the loops, and exp, erf and tanh are branch-free polynomials
 * here rather than libm calls, so that every loop vectorises. Formulas, operand order
 * and the derivatives at kinks are PyTorch 1.13's (aten/src/ATen/native/cpu/
 * Activation.cpp, UnaryOpsKernel.cpp): e.g. Clip's gradient passes where a < x < b, as
 * hardtanh_backward (torch.clamp's also passes at a bound: ReLU6 is hardtanh). */

static const char *const names[DT_ACT_COUNT] = {
    [DT_ACT_CLIP] = "clip",
    [DT_ACT_SIGMOID] = "sigmoid",
    [DT_ACT_HARDSIGMOID] = "hardsigmoid",
    [DT_ACT_HARDSWISH] = "hardswish",
    [DT_ACT_TANH] = "tanh",
    [DT_ACT_LEAKY_RELU] = "leaky_relu",
    [DT_ACT_GELU] = "gelu",
    [DT_ACT_GELU_TANH] = "gelu_tanh",
    [DT_ACT_SILU] = "silu",
};

const char *dt_activation_name(dt_activation_fn fn) {
    return fn >= 0 && fn < DT_ACT_COUNT ? names[fn] : NULL;
}

int dt_activation_runs_in_place(dt_activation act) {
    switch (act.fn) {
    case DT_ACT_CLIP:
    case DT_ACT_SIGMOID:
    case DT_ACT_HARDSIGMOID:
    case DT_ACT_TANH:
        return 1;
    case DT_ACT_LEAKY_RELU:
        return act.a >= 0.0f;
    default:
        return 0;
    }
}

/* ---- the scalar functions, branch-free ---- */

#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* exp(x) by Cephes' expf: x = n ln2 + r, |r| <= ln2 / 2, a degree-6 polynomial in r,
 * 2^n from its bits (n from the 1.5 * 2^23 shifter, no float-to-int conversion, so a
 * NaN stays a NaN without undefined behaviour). Within 2 ulp; x is held in [-87, 88]
 * (2^n stays a normal float), so it returns e^-87 below, e^88 above. */
ALWAYS_INLINE float exp_approx(float x) {
    x = x < -87.0f ? -87.0f : x;
    x = x > 88.0f ? 88.0f : x;
    const float shifter = 12582912.0f;
    const float t = x * 1.44269504088896341f + shifter, n = t - shifter;
    uint32_t bits;
    memcpy(&bits, &t, sizeof bits);
    bits = (bits + 127u) << 23; /* t's low mantissa bits hold n: 2^n */
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    float r = x - n * 0.693359375f;
    r = r + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * (r * r) + r + 1.0f;
    return p * scale;
}

/* tanh by Cephes' tanhf: an odd polynomial below 0.625, 1 - 2 / (e^2|x| + 1) above. */
ALWAYS_INLINE float tanh_approx(float x) {
    const float ax = fabsf(x), s = x * x;
    const float small =
        ((((-5.70498872745e-3f * s + 2.06390887954e-2f) * s - 5.37397155531e-2f) * s +
          1.33314422036e-1f) *
             s -
         3.33332819422e-1f) *
            s * x +
        x;
    const float big = copysignf(1.0f - 2.0f / (exp_approx(ax + ax) + 1.0f), x);
    return ax < 0.625f ? small : big;
}

/* erfc by Numerical Recipes' erfcc (Chebyshev fit): relative error below 1.2e-7 for
 * every z (so the GELU's tail, x Phi(x) for x << 0, keeps its relative accuracy). */
ALWAYS_INLINE float erfc_approx(float z) {
    const float az = fabsf(z), t = 1.0f / (1.0f + 0.5f * az);
    float p = 0.17087277f;
    p = p * t - 0.82215223f;
    p = p * t + 1.48851587f;
    p = p * t - 1.13520398f;
    p = p * t + 0.27886807f;
    p = p * t - 0.18628806f;
    p = p * t + 0.09678418f;
    p = p * t + 0.37409196f;
    p = p * t + 1.00002368f;
    const float r = t * exp_approx(p * t - 1.26551223f - az * az);
    return z >= 0.0f ? r : 2.0f - r;
}

static const float SQRT1_2 = 0.70710678118654752440f;
static const float INV_SQRT_2PI = 0.39894228040143267794f; /* PyTorch's M_2_SQRTPI M_SQRT1_2 / 2 */
static const float GELU_BETA = 0.79788456080286535588f;    /* sqrt(2 / pi) */
static const float GELU_KAPPA = 0.044715f;

ALWAYS_INLINE float clip_f(float x, float lo, float hi) {
    const float y = x < lo ? lo : x; /* NaN passes, as torch.clamp's */
    return y > hi ? hi : y;
}

ALWAYS_INLINE float sigmoid_f(float x) {
    return 1.0f / (1.0f + exp_approx(-x));
}

ALWAYS_INLINE float hardsigmoid_f(float x, float alpha, float beta) {
    return clip_f(alpha * x + beta, 0.0f, 1.0f);
}

ALWAYS_INLINE float hardswish_f(float x) {
    return x * clip_f(x + 3.0f, 0.0f, 6.0f) / 6.0f;
}

ALWAYS_INLINE float leaky_f(float x, float alpha) {
    return x > 0.0f ? x : x * alpha;
}

/* Phi(x) = (1 + erf(x / sqrt 2)) / 2 = erfc(-x / sqrt 2) / 2 */
ALWAYS_INLINE float normal_cdf(float x) {
    return 0.5f * erfc_approx(-x * SQRT1_2);
}

ALWAYS_INLINE float gelu_f(float x) {
    return x * normal_cdf(x);
}

ALWAYS_INLINE float gelu_tanh_f(float x) {
    const float inner = GELU_BETA * (x + GELU_KAPPA * (x * x * x));
    return 0.5f * x * (1.0f + tanh_approx(inner));
}

ALWAYS_INLINE float silu_f(float x) {
    return x / (1.0f + exp_approx(-x));
}

/* The derivatives, as PyTorch's *_backward kernels (g is the incoming gradient). Those
 * of clip, hardsigmoid, leaky_relu (slope >= 0), sigmoid and tanh follow from the
 * output y alone, so those can run in place (dt_activation_runs_in_place). Clip's
 * "a < x < b" is "a < y < b" for y = clip(x) (a bound stored as y is: in bf16 the one
 * value next to a bound that bf16 cannot hold may differ), hardsigmoid's
 * "0 < a x + b < 1" is "0 < y < 1", leaky_relu's "x > 0" is "y > 0". */

/* hardtanh_backward's test, so a NaN passes its gradient as there */
ALWAYS_INLINE float clip_grad(float g, float y, float lo, float hi) {
    return y <= lo || y >= hi ? 0.0f : g;
}

ALWAYS_INLINE float hardsigmoid_grad(float g, float y, float alpha) {
    return y > 0.0f && y < 1.0f ? g * alpha : 0.0f;
}

ALWAYS_INLINE float hardswish_grad(float g, float x) {
    const float mid = g * (x / 3.0f + 0.5f);
    return x < -3.0f ? 0.0f : (x <= 3.0f ? mid : g);
}

ALWAYS_INLINE float gelu_grad(float g, float x) {
    const float pdf = INV_SQRT_2PI * exp_approx(-0.5f * (x * x));
    return g * (normal_cdf(x) + x * pdf);
}

ALWAYS_INLINE float gelu_tanh_grad(float g, float x) {
    const float x_sq = x * x, inner = GELU_BETA * (x + GELU_KAPPA * (x_sq * x));
    const float t = tanh_approx(inner);
    const float left = 0.5f * x, right = 1.0f + t;
    const float right_derivative =
        left * (1.0f - t * t) * GELU_BETA * (1.0f + 3.0f * GELU_KAPPA * x_sq);
    return g * (0.5f * right + right_derivative);
}

ALWAYS_INLINE float silu_grad(float g, float x) {
    const float s = 1.0f / (1.0f + exp_approx(-x));
    return g * s * (1.0f + x * (1.0f - s));
}

/* ---- one body, two element types ---- */

typedef float (*load_fn)(const void *p, size_t i);
typedef void (*store_fn)(void *p, size_t i, float v);
typedef float (*round_fn)(float v); /* v as a store then a load give it back */

ALWAYS_INLINE float load_f32(const void *p, size_t i) {
    return ((const float *)p)[i];
}

ALWAYS_INLINE void store_f32(void *p, size_t i, float v) {
    ((float *)p)[i] = v;
}

ALWAYS_INLINE float load_bf16(const void *p, size_t i) {
    return dt_bf16_to_f32(((const uint16_t *)p)[i]);
}

ALWAYS_INLINE float round_f32(float v) {
    return v;
}

ALWAYS_INLINE float round_bf16(float v) {
    return dt_bf16_to_f32(dt_bf16_from_f32(v));
}

/* dtype.h's rounding (to nearest even, NaN kept quiet), without its branch */
ALWAYS_INLINE void store_bf16(void *p, size_t i, float v) {
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16, quiet = (u >> 16) | 0x40u;
    ((uint16_t *)p)[i] = (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? quiet : rounded);
}

/* out[lo, hi) = f(in[lo, hi)) */
/* The arrays of a call are each either disjoint or the same (in place): the loops carry
 * no dependence from one element to the next, which ivdep tells the vectoriser (out ==
 * in would otherwise fail its overlap test and run scalar). */
#define EACH_ELEMENT(i) _Pragma("GCC ivdep") for (size_t i = lo; i < hi; i++)

ALWAYS_INLINE void forward_body(const dt_activation *act, void *out, const void *in, size_t lo,
                                size_t hi, load_fn ld, store_fn st) {
    const float a = act->a, b = act->b;
    switch (act->fn) {
    case DT_ACT_CLIP:
        EACH_ELEMENT(i) st(out, i, clip_f(ld(in, i), a, b));
        break;
    case DT_ACT_SIGMOID:
        EACH_ELEMENT(i) st(out, i, sigmoid_f(ld(in, i)));
        break;
    case DT_ACT_HARDSIGMOID:
        EACH_ELEMENT(i) st(out, i, hardsigmoid_f(ld(in, i), a, b));
        break;
    case DT_ACT_HARDSWISH:
        EACH_ELEMENT(i) st(out, i, hardswish_f(ld(in, i)));
        break;
    case DT_ACT_TANH:
        EACH_ELEMENT(i) st(out, i, tanh_approx(ld(in, i)));
        break;
    case DT_ACT_LEAKY_RELU:
        EACH_ELEMENT(i) st(out, i, leaky_f(ld(in, i), a));
        break;
    case DT_ACT_GELU:
        EACH_ELEMENT(i) st(out, i, gelu_f(ld(in, i)));
        break;
    case DT_ACT_GELU_TANH:
        EACH_ELEMENT(i) st(out, i, gelu_tanh_f(ld(in, i)));
        break;
    case DT_ACT_SILU:
        EACH_ELEMENT(i) st(out, i, silu_f(ld(in, i)));
        break;
    case DT_ACT_COUNT:
        break;
    }
}

/* din[i] = v, or din[i] + v */
ALWAYS_INLINE void put(void *din, size_t i, float v, int add, load_fn ld, store_fn st) {
    st(din, i, add ? ld(din, i) + v : v);
}

ALWAYS_INLINE void backward_body(const dt_activation *act, void *din, const void *dout,
                                 const void *x, const void *y, size_t lo, size_t hi, int add,
                                 load_fn ld, store_fn st, round_fn rd) {
    const float a = act->a, b = act->b;
    switch (act->fn) {
    case DT_ACT_CLIP: { /* the bounds as y holds them */
        const float lo_y = rd(a), hi_y = rd(b);
        EACH_ELEMENT(i) put(din, i, clip_grad(ld(dout, i), ld(y, i), lo_y, hi_y), add, ld, st);
        break;
    }
    case DT_ACT_SIGMOID: /* PyTorch's sigmoid_backward: g (1 - y) y */
        EACH_ELEMENT(i) {
            const float yi = ld(y, i);
            put(din, i, ld(dout, i) * (1.0f - yi) * yi, add, ld, st);
        }
        break;
    case DT_ACT_HARDSIGMOID:
        EACH_ELEMENT(i) put(din, i, hardsigmoid_grad(ld(dout, i), ld(y, i), a), add, ld, st);
        break;
    case DT_ACT_HARDSWISH:
        EACH_ELEMENT(i)
        put(din, i, hardswish_grad(ld(dout, i), ld(x, i)), add, ld, st);
        break;
    case DT_ACT_TANH: /* tanh_backward: g (1 - y^2) */
        EACH_ELEMENT(i) {
            const float yi = ld(y, i);
            put(din, i, ld(dout, i) * (1.0f - yi * yi), add, ld, st);
        }
        break;
    case DT_ACT_LEAKY_RELU: /* x > 0 ? g : g a; at 0 the slope a, as PyTorch */
        if (a >= 0.0f) {
            EACH_ELEMENT(i) {
                const float g = ld(dout, i);
                put(din, i, ld(y, i) > 0.0f ? g : g * a, add, ld, st);
            }
        } else { /* a negative slope flips the sign: only x tells */
            EACH_ELEMENT(i) {
                const float g = ld(dout, i);
                put(din, i, ld(x, i) > 0.0f ? g : g * a, add, ld, st);
            }
        }
        break;
    case DT_ACT_GELU:
        EACH_ELEMENT(i) put(din, i, gelu_grad(ld(dout, i), ld(x, i)), add, ld, st);
        break;
    case DT_ACT_GELU_TANH:
        EACH_ELEMENT(i)
        put(din, i, gelu_tanh_grad(ld(dout, i), ld(x, i)), add, ld, st);
        break;
    case DT_ACT_SILU:
        EACH_ELEMENT(i) put(din, i, silu_grad(ld(dout, i), ld(x, i)), add, ld, st);
        break;
    case DT_ACT_COUNT:
        break;
    }
}

/* The instances: f32 and bf16, the gradient written or added. */

static void forward_f32(const dt_activation *act, void *out, const void *in, size_t lo, size_t hi) {
    forward_body(act, out, in, lo, hi, load_f32, store_f32);
}

static void forward_bf16(const dt_activation *act, void *out, const void *in, size_t lo,
                         size_t hi) {
    forward_body(act, out, in, lo, hi, load_bf16, store_bf16);
}

static void backward_f32(const dt_activation *act, void *din, const void *dout, const void *x,
                         const void *y, size_t lo, size_t hi, int add) {
    if (add)
        backward_body(act, din, dout, x, y, lo, hi, 1, load_f32, store_f32, round_f32);
    else
        backward_body(act, din, dout, x, y, lo, hi, 0, load_f32, store_f32, round_f32);
}

static void backward_bf16(const dt_activation *act, void *din, const void *dout, const void *x,
                          const void *y, size_t lo, size_t hi, int add) {
    if (add)
        backward_body(act, din, dout, x, y, lo, hi, 1, load_bf16, store_bf16, round_bf16);
    else
        backward_body(act, din, dout, x, y, lo, hi, 0, load_bf16, store_bf16, round_bf16);
}

/* Below this many elements a loop runs on one thread: waking the team costs more. */
enum { PAR_MIN = 1 << 14, SPAN_ALIGN = 64 };

/* This thread's share of [0, count): whole vectors, so no two threads share a line. */
static void my_span(size_t count, size_t *lo, size_t *hi) {
    const size_t nt = (size_t)omp_get_num_threads(), t = (size_t)omp_get_thread_num();
    const size_t per = (count / nt + SPAN_ALIGN - 1) / SPAN_ALIGN * SPAN_ALIGN;
    *lo = t * per < count ? t * per : count;
    *hi = *lo + per < count ? *lo + per : count;
}

void dt_activation_forward(const dt_activation *act, dt_dtype dtype, void *out, const void *in,
                           size_t count) {
#pragma omp parallel if (count >= PAR_MIN)
    {
        size_t lo, hi;
        my_span(count, &lo, &hi);
        if (dtype == DT_BF16)
            forward_bf16(act, out, in, lo, hi);
        else
            forward_f32(act, out, in, lo, hi);
    }
}

void dt_activation_backward(const dt_activation *act, dt_dtype dtype, void *din, const void *dout,
                            const void *x, const void *y, size_t count, int add) {
#pragma omp parallel if (count >= PAR_MIN)
    {
        size_t lo, hi;
        my_span(count, &lo, &hi);
        if (dtype == DT_BF16)
            backward_bf16(act, din, dout, x, y, lo, hi, add);
        else
            backward_f32(act, din, dout, x, y, lo, hi, add);
    }
}

/* Arithmetic operations of each formula above, exp, erf and tanh one each (a compare
 * or a select one too). */
static const struct {
    double forward, backward;
} flops_per_element[DT_ACT_COUNT] = {
    [DT_ACT_CLIP] = {2, 2},      [DT_ACT_SIGMOID] = {4, 3},    [DT_ACT_HARDSIGMOID] = {4, 4},
    [DT_ACT_HARDSWISH] = {5, 5}, [DT_ACT_TANH] = {1, 3},       [DT_ACT_LEAKY_RELU] = {2, 2},
    [DT_ACT_GELU] = {6, 12},     [DT_ACT_GELU_TANH] = {9, 17}, [DT_ACT_SILU] = {4, 7},
};

double dt_activation_forward_flops_per_element(dt_activation_fn fn) {
    return fn >= 0 && fn < DT_ACT_COUNT ? flops_per_element[fn].forward : 0.0;
}

double dt_activation_backward_flops_per_element(dt_activation_fn fn) {
    return fn >= 0 && fn < DT_ACT_COUNT ? flops_per_element[fn].backward : 0.0;
}

/* ---- the op in the model graph: on any layout and rank, in place or not ---- */

static double activation_forward_flops(const dt_model *m, const dt_op *op, int n) {
    return dt_activation_forward_flops_per_element(op->act.fn) *
           (double)dt_model_value_floats(m, op->out, n);
}

static double activation_train_flops(const dt_model *m, const dt_op *op, int n) {
    return (dt_activation_forward_flops_per_element(op->act.fn) +
            dt_activation_backward_flops_per_element(op->act.fn)) *
           (double)dt_model_value_floats(m, op->out, n);
}

const dt_op_class dt_activation_op = {
    .name = "activation",
    .flops = activation_train_flops,
    .forward_flops = activation_forward_flops,
};

static int in_place(const dt_model *m, const dt_op *op) {
    return m->values[op->in].storage == m->values[op->out].storage;
}

/* The op is the only reader of its input: its backward writes the input's gradient
 * (sparing the model's zeroing pass) instead of adding to it. In place, the gradient
 * is its output's, rewritten where it lies (as ReLU's), and others may read it. */
static int activation_plan(dt_model *m, dt_op *op, int max_batch, size_t *bytes, dt_error *err) {
    (void)max_batch, (void)bytes, (void)err;
    dt_storage *s = &m->storages[m->values[op->in].storage];
    if (!in_place(m, op) && s->readers == 1) s->grad_written = 1;
    return 0;
}

static void activation_op_forward(dt_model *m, dt_op *op, int n) {
    dt_activation_forward(&op->act, dt_model_value_dtype(m, op->out),
                          dt_model_value_ptr(m, op->out), dt_model_value_ptr(m, op->in),
                          dt_model_value_floats(m, op->in, n));
}

static void activation_op_backward(dt_model *m, dt_op *op, int n) {
    void *din = dt_model_value_grad_ptr(m, op->in);
    if (!din) return;
    const int add = !in_place(m, op) && !m->storages[m->values[op->in].storage].grad_written;
    dt_activation_backward(&op->act, dt_model_value_dtype(m, op->in), din,
                           dt_model_value_grad_ptr(m, op->out), dt_model_value_ptr(m, op->in),
                           dt_model_value_ptr(m, op->out), dt_model_value_floats(m, op->in, n),
                           add);
}

/* The CPU backend's kernels: the loops above, once per element type. */
const dt_kernel dt_activation_f32_kernel = {
    .kind = DT_OP_ACTIVATION,
    .name = "activation.f32",
    .dtype = DT_F32,
    .layouts = DT_OP_SAME_LAYOUT,
    .plan = activation_plan,
    .forward = activation_op_forward,
    .backward = activation_op_backward,
};

const dt_kernel dt_activation_bf16_kernel = {
    .kind = DT_OP_ACTIVATION,
    .name = "activation.bf16",
    .dtype = DT_BF16,
    .layouts = DT_OP_SAME_LAYOUT,
    .plan = activation_plan,
    .forward = activation_op_forward,
    .backward = activation_op_backward,
};
