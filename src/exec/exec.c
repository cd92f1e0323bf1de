#include "exec/exec.h"

#include <stdlib.h>
#include <string.h>

#include "core/cpu_isa.h"
#include "dtrain/backend.h"
#include "dtrain/kernel.h"
#include "exec/conv2d_dnnl.h"

struct dt_exec {
    dt_conv_backend conv_backend;
    dt_precision precision;
    dt_dnnl *dnnl; /* DT_CONV_DNNL: engine + stream */
    dt_dnnl_scratch dnnl_scratch;
    float *workspace; /* DT_CONV_IM2COL: shared by all layers */
    size_t workspace_floats;
};

struct dt_exec_conv2d {
    dt_conv2d_shape s;         /* for the planned (largest) batch */
    dt_conv2d_plan *dnnl_plan; /* NULL on im2col */
    int writes_din;            /* backward writes din instead of adding to it */
};

int dt_exec_create(dt_exec **exec, dt_conv_backend conv_backend, dt_precision precision,
                   dt_error *err) {
    dt_exec *e = calloc(1, sizeof *e);
    if (!e) return dt_error_set(err, "out of memory creating the execution context");
    e->conv_backend = conv_backend;
    e->precision = precision;
    *exec = e;
    if (precision == DT_PRECISION_BF16 && conv_backend != DT_CONV_DNNL)
        return dt_error_set(err, "bf16 precision needs the oneDNN conv backend (not im2col)");
    if (conv_backend == DT_CONV_DNNL && dt_dnnl_create(&e->dnnl, err)) return -1;
    if (precision == DT_PRECISION_BF16 && !dt_cpu_has_bf16()) {
        /* name the cap if one is set: the CPU may well have bf16 */
        const char *var = "ONEDNN_MAX_CPU_ISA", *cap = getenv(var);
        if (!cap || !*cap) cap = getenv(var = "DNNL_MAX_CPU_ISA");
        return dt_error_set(err,
                            "bf16 precision: this CPU (%s%s%s%s%s) has neither AVX512-BF16 nor AMX "
                            "(oneDNN would emulate it slowly); use --precision fp32",
                            dt_cpu_isa_name(), cap && *cap ? "; " : "", cap && *cap ? var : "",
                            cap && *cap ? "=" : "", cap && *cap ? cap : "");
    }
    return 0;
}

dt_dnnl *dt_exec_dnnl(dt_exec *exec) {
    return exec->dnnl;
}

void dt_exec_destroy(dt_exec *exec) {
    if (!exec) return;
    for (int k = 0; k < DT_DNNL_ACT_SLOTS; k++) dt_free(exec->dnnl_scratch.act[k]);
    for (int k = 0; k < DT_DNNL_WEIGHT_SLOTS; k++) dt_free(exec->dnnl_scratch.weight[k]);
    dt_dnnl_destroy(exec->dnnl);
    dt_free(exec->workspace);
    free(exec);
}

int dt_exec_conv2d_plan(dt_exec *exec, const dt_conv2d_shape *s, int has_bias,
                        const dt_exec_conv2d_io *io, dt_exec_conv2d **conv, dt_error *err) {
    dt_exec_conv2d *c = calloc(1, sizeof *c);
    if (!c) return dt_error_set(err, "out of memory for a conv plan");
    c->s = *s;
    *conv = c;
    if (exec->conv_backend == DT_CONV_DNNL) {
        c->writes_din = io && io->din_sole_writer;
        return dt_conv2d_plan_create(&c->dnnl_plan, exec->dnnl, s, has_bias, io,
                                     exec->precision == DT_PRECISION_BF16, &exec->dnnl_scratch,
                                     err);
    }
    if (io && (io->in_blocked || io->out_blocked))
        return dt_error_set(err, "conv2d: blocked activations need the oneDNN backend");
    if (io && (io->in_dtype != DT_F32 || io->out_dtype != DT_F32))
        return dt_error_set(err, "conv2d: bf16 activations need the oneDNN backend");
    size_t need = dt_conv2d_workspace_floats(s);
    if (need > exec->workspace_floats) exec->workspace_floats = need;
    return 0;
}

size_t dt_exec_conv2d_own_bytes(const dt_exec_conv2d *conv) {
    return conv->dnnl_plan ? dt_conv2d_plan_own_bytes(conv->dnnl_plan) : 0;
}

int dt_exec_conv2d_alloc(dt_exec_conv2d *conv, dt_error *err) {
    return conv->dnnl_plan ? dt_conv2d_plan_alloc(conv->dnnl_plan, err) : 0;
}

int dt_exec_conv2d_writes_din(const dt_exec_conv2d *conv) {
    return conv->writes_din;
}

void dt_exec_conv2d_destroy(dt_exec_conv2d *conv) {
    if (!conv) return;
    dt_conv2d_plan_destroy(conv->dnnl_plan);
    free(conv);
}

size_t dt_exec_scratch_bytes(const dt_exec *exec) {
    size_t bytes = sizeof(float) * exec->workspace_floats;
    for (int k = 0; k < DT_DNNL_ACT_SLOTS; k++) bytes += exec->dnnl_scratch.act_bytes[k];
    for (int k = 0; k < DT_DNNL_WEIGHT_SLOTS; k++) bytes += exec->dnnl_scratch.weight_bytes[k];
    return bytes;
}

int dt_exec_alloc_scratch(dt_exec *exec, dt_error *err) {
    dt_dnnl_scratch *scratch = &exec->dnnl_scratch;
    for (int k = 0; k < DT_DNNL_ACT_SLOTS; k++)
        if (scratch->act_bytes[k] &&
            !(scratch->act[k] = dt_alloc(scratch->act_bytes[k], "conv scratch", err)))
            return -1;
    for (int k = 0; k < DT_DNNL_WEIGHT_SLOTS; k++)
        if (scratch->weight_bytes[k] &&
            !(scratch->weight[k] = dt_alloc(scratch->weight_bytes[k], "conv scratch", err)))
            return -1;
    if (exec->workspace_floats &&
        !(exec->workspace =
              dt_alloc(sizeof(float) * exec->workspace_floats, "conv workspace", err)))
        return -1;
    return 0;
}

void dt_exec_conv2d_forward(dt_exec *exec, dt_exec_conv2d *conv, int n, void *out, const void *in,
                            const float *weight, const float *bias) {
    if (conv->dnnl_plan) {
        dt_conv2d_plan_forward(conv->dnnl_plan, &exec->dnnl_scratch, n, out, in, weight, bias);
        return;
    }
    dt_conv2d_shape s = conv->s;
    s.n = n;
    dt_conv2d_forward(out, in, weight, bias, exec->workspace, &s);
}

void dt_exec_conv2d_backward(dt_exec *exec, dt_exec_conv2d *conv, int n, void *din, float *dweight,
                             float *dbias, const void *dout, const void *in, const float *weight) {
    if (conv->dnnl_plan) {
        dt_conv2d_plan_backward(conv->dnnl_plan, &exec->dnnl_scratch, n, din, dweight, dbias, dout,
                                in, weight);
        return;
    }
    dt_conv2d_shape s = conv->s;
    s.n = n;
    dt_conv2d_backward(din, dweight, dbias, dout, in, weight, exec->workspace, &s);
}

/* The conv2d kernel of the CPU backend: the op holds the plan this context gave it. */

static int conv2d_op_plan(dt_model *m, dt_op *op, int max_batch, size_t *bytes, dt_error *err) {
    const dt_value *x = &m->values[op->in];
    const dt_tensor_entry *w = &m->tensors[op->weight];
    dt_conv2d_shape s;
    const int pads[4] = {op->pad_top, op->pad_left, op->pad_bottom, op->pad_right};
    dt_conv2d_shape_make_rect(&s, max_batch, x->c, x->h, x->w, w->shape[0], op->kh, op->kw,
                              op->stride_h, op->stride_w, pads, op->dilation, op->groups);
    dt_storage *in = &m->storages[x->storage];
    dt_exec_conv2d_io io = {
        .in_blocked = in->blocked,
        .out_blocked = dt_model_value_blocked(m, op->out),
        .din_sole_writer = in->readers == 1,
        .in_dtype = in->dtype,
        .out_dtype = dt_model_value_dtype(m, op->out),
    };
    if (dt_exec_conv2d_plan((dt_exec *)m->backend->ctx, &s, op->bias >= 0, &io,
                            (dt_exec_conv2d **)&op->state, err))
        return -1;
    in->grad_written = dt_exec_conv2d_writes_din(op->state);
    *bytes += dt_exec_conv2d_own_bytes(op->state);
    return 0;
}

static int conv2d_op_alloc(dt_model *m, dt_op *op, int max_batch, dt_error *err) {
    (void)m, (void)max_batch;
    return dt_exec_conv2d_alloc(op->state, err);
}

static void conv2d_op_free(dt_model *m, dt_op *op) {
    (void)m;
    dt_exec_conv2d_destroy(op->state);
    op->state = NULL;
}

static void conv2d_op_forward(dt_model *m, dt_op *op, int n) {
    dt_exec_conv2d_forward((dt_exec *)m->backend->ctx, op->state, n, dt_model_value_ptr(m, op->out),
                           dt_model_value_ptr(m, op->in), dt_model_param(m, op->weight),
                           dt_model_param(m, op->bias));
}

static void conv2d_op_backward(dt_model *m, dt_op *op, int n) {
    dt_exec_conv2d_backward((dt_exec *)m->backend->ctx, op->state, n,
                            dt_model_value_grad_ptr(m, op->in), dt_model_param_grad(m, op->weight),
                            dt_model_param_grad(m, op->bias), dt_model_value_grad_ptr(m, op->out),
                            dt_model_value_ptr(m, op->in), dt_model_param(m, op->weight));
}

/* Any mix of f32 and bf16 activations: oneDNN converts at the edges of a bf16 region
 * (the model's f32 input). bf16 storages exist only with DT_PRECISION_BF16, which
 * dt_exec_create allows only on oneDNN. */
static int conv2d_accepts(const dt_model *m, const dt_op *op) {
    (void)m, (void)op;
    return 1;
}

const dt_kernel dt_conv2d_kernel = {
    .kind = DT_OP_CONV2D,
    .name = "conv2d",
    .dtype = DT_F32,
    .accepts = conv2d_accepts,
    .layouts = DT_OP_ANY_LAYOUTS,
    .plan = conv2d_op_plan,
    .alloc = conv2d_op_alloc,
    .free = conv2d_op_free,
    .forward = conv2d_op_forward,
    .backward = conv2d_op_backward,
};
