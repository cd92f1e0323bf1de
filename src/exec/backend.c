#include "dtrain/backend.h"

#include <stdlib.h>
#include <string.h>

#include "dtrain/kernel.h"
#include "exec/bf16_kernels.h"
#include "exec/exec.h"
#include "nn/transpose.h"

/* Tried in order for each op: the first that accepts the op's dtypes wins. A bf16
 * kernel accepts only bf16 activations (linear: also an f32 side), an f32 one only
 * f32, conv2d any mix; so the order matters only among kernels of one dtype. */
static const dt_kernel *const cpu_kernels[] = {
    &dt_conv2d_kernel,
    &dt_linear_f32_kernel,
    &dt_linear_bf16_kernel,
    &dt_batchnorm2d_f32_kernel,
    &dt_batchnorm2d_bf16_kernel,
    &dt_relu_f32_kernel,
    &dt_relu_bf16_kernel,
    &dt_maxpool2d_f32_kernel,
    &dt_maxpool2d_bf16_kernel,
    &dt_avgpool2d_f32_kernel,
    &dt_avgpool2d_bf16_kernel,
    &dt_add_f32_kernel,
    &dt_add_bf16_kernel,
    &dt_shortcut_pad_f32_kernel,
    &dt_shortcut_pad_bf16_kernel,
    &dt_dropout_f32_kernel,
    &dt_dropout_bf16_kernel,
    &dt_concat_f32_kernel,
    &dt_concat_bf16_kernel,
    &dt_adaptive_avgpool2d_f32_kernel,
    &dt_adaptive_avgpool2d_bf16_kernel,
    &dt_transpose_f32_kernel,
    &dt_transpose_bf16_kernel,
    /* the elementwise kernels (any layout) before the broadcasting ones (NCHW) */
    &dt_binary_f32_kernel,
    &dt_binary_bf16_kernel,
    &dt_binary_bcast_f32_kernel,
    &dt_binary_bcast_bf16_kernel,
    &dt_reduce_mean_f32_kernel,
    &dt_reduce_mean_bf16_kernel,
    &dt_activation_f32_kernel,
    &dt_activation_bf16_kernel,
    &dt_softmax_f32_kernel,
    &dt_softmax_bf16_kernel,
    &dt_layernorm_f32_kernel,
    &dt_layernorm_bf16_kernel,
    &dt_matmul_f32_kernel,
    &dt_matmul_bf16_kernel,
    &dt_slice_f32_kernel,
    &dt_slice_bf16_kernel,
    &dt_expand_param_f32_kernel,
    &dt_expand_param_bf16_kernel,
    &dt_pad2d_f32_kernel,
    &dt_pad2d_bf16_kernel,
};

const dt_kernel *const *dt_cpu_kernels(size_t *count) {
    *count = sizeof cpu_kernels / sizeof *cpu_kernels;
    return cpu_kernels;
}

static void *cpu_alloc(void *ctx, size_t bytes, const char *what, dt_error *err) {
    (void)ctx;
    return dt_alloc(bytes, what, err);
}

static void cpu_free(void *ctx, void *p) {
    (void)ctx;
    dt_free(p);
}

static void cpu_memset0(void *ctx, void *p, size_t bytes) {
    (void)ctx;
    memset(p, 0, bytes);
}

static void cpu_destroy(void *ctx) {
    dt_exec_destroy(ctx);
}

static int cpu_backend_create(dt_model *m, dt_error *err) {
    dt_backend *b = calloc(1, sizeof *b);
    if (!b) return dt_error_set(err, "out of memory creating the CPU backend");
    *b = (dt_backend){
        .name = "cpu",
        .alloc = cpu_alloc,
        .free = cpu_free,
        .memset0 = cpu_memset0,
        .kernels = cpu_kernels,
        .n_kernels = sizeof cpu_kernels / sizeof *cpu_kernels,
        .destroy = cpu_destroy,
    };
    m->backend = b;
    dt_exec *exec = NULL;
    int rc = dt_exec_create(&exec, m->conv_backend, m->precision, err);
    b->ctx = exec; /* owned by the backend even when creation failed half way */
    return rc;
}

static size_t storage_bytes(const dt_storage *s, int max_batch) {
    return dt_dtype_size(s->dtype) * s->per_sample * (size_t)max_batch;
}

/* Assigns each storage's gradient to a pooled slot. Backward time t runs from 0 (the
 * loss) to n_ops (the first op); a storage's gradient lives from the backward of its
 * last user to the backward of its first writer. Slots are reused greedily. */
static int plan_grad_slots(dt_model *m, int max_batch, dt_error *err) {
    const int n = m->n_storages;
    int *slot_free_after = calloc((size_t)n, sizeof(int));
    m->grad_slot_bytes = calloc((size_t)n, sizeof(size_t));
    m->grad_slots = calloc((size_t)n, sizeof(void *));
    if (!slot_free_after || !m->grad_slot_bytes || !m->grad_slots) {
        free(slot_free_after);
        return dt_error_set(err, "out of memory while planning gradient buffers");
    }
    m->n_grad_slots = 0;
    for (int t = 0; t <= m->n_ops; t++) {
        for (int si = 0; si < n; si++) {
            dt_storage *s = &m->storages[si];
            if (!s->needs_grad || m->n_ops - s->last_user != t) continue;
            size_t need = dt_dtype_size(s->dtype) * s->per_sample * (size_t)max_batch;
            int best = -1;
            for (int k = 0; k < m->n_grad_slots; k++) {
                if (slot_free_after[k] >= t) continue;
                /* Prefer the smallest slot that fits, else the largest one to grow. */
                if (best < 0) {
                    best = k;
                    continue;
                }
                int fits_k = m->grad_slot_bytes[k] >= need,
                    fits_b = m->grad_slot_bytes[best] >= need;
                if ((fits_k && !fits_b) ||
                    (fits_k && fits_b && m->grad_slot_bytes[k] < m->grad_slot_bytes[best]) ||
                    (!fits_k && !fits_b && m->grad_slot_bytes[k] > m->grad_slot_bytes[best]))
                    best = k;
            }
            if (best < 0) best = m->n_grad_slots++;
            if (m->grad_slot_bytes[best] < need) m->grad_slot_bytes[best] = need;
            slot_free_after[best] = m->n_ops - s->first_writer;
            s->grad_slot = best;
        }
    }
    free(slot_free_after);
    return 0;
}

/* The k-th storage an op reads (k < dt_op_n_inputs). */
static int input_storage(const dt_model *m, const dt_op *op, int k) {
    return m->values[dt_op_input(m, op, k)].storage;
}

static int layout_root(int *parent, int s) {
    while (parent[s] != s) s = parent[s] = parent[parent[s]];
    return s;
}

/* Counts each storage's readers and picks its layout. Ops that keep one layout from
 * input to output (BatchNorm, ReLU, add) tie their storages into a group; a group is
 * blocked when the oneDNN backend computes the convs, every channel count in it is a
 * multiple of 16 and every op touching it handles blocked data, so activations stay
 * blocked from one conv to the next (the reorders on both sides of every conv were
 * a quarter of resnet50's conv time). */
static int plan_layouts(dt_model *m, dt_error *err) {
    int *parent = malloc(sizeof(int) * (size_t)m->n_storages);
    int *ok = malloc(sizeof(int) * (size_t)m->n_storages);
    if (!parent || !ok) {
        free(parent);
        free(ok);
        return dt_error_set(err, "out of memory while planning activation layouts");
    }
    for (int si = 0; si < m->n_storages; si++) {
        parent[si] = si;
        m->storages[si].readers = 0;
        m->storages[si].grad_written = 0;
        m->storages[si].blocked = 0;
        ok[si] = si > 0 && m->conv_backend == DT_CONV_DNNL && !m->plain_layouts;
    }
    /* each storage's first value: its views (Reshape, Flatten) must agree with it */
    int *first = malloc(sizeof(int) * (size_t)m->n_storages);
    if (!first) {
        free(parent);
        free(ok);
        return dt_error_set(err, "out of memory while planning activation layouts");
    }
    for (int si = 0; si < m->n_storages; si++) first[si] = -1;
    for (int v = 0; v < m->n_values; v++) {
        const dt_value *x = &m->values[v];
        /* blocked means [n, c/16, h, w, 16]: only an image's storage, seen by every value
         * on it as the same image, can be; a reshape or a value of another rank keeps
         * its storage plain, so blocked layouts stop there and the ops at its edges
         * convert, as they do at a linear layer */
        if (x->rank != 3 || x->c % 16 != 0) ok[x->storage] = 0;
        if (first[x->storage] < 0)
            first[x->storage] = v;
        else if (memcmp(m->values[first[x->storage]].dims, x->dims, sizeof x->dims))
            ok[x->storage] = 0;
    }
    free(first);
    ok[m->values[m->n_values - 1].storage] = 0; /* the logits */
    for (int i = 0; i < m->n_ops; i++) {
        const dt_op *op = &m->ops[i];
        const int n_in = dt_op_n_inputs(op), out = m->values[op->out].storage;
        for (int k = 0; k < n_in; k++)
            if (input_storage(m, op, k) != out) m->storages[input_storage(m, op, k)].readers++;
        switch (op->impl->layouts) {
        case DT_OP_PLAIN_ONLY:
            for (int k = 0; k < n_in; k++) ok[input_storage(m, op, k)] = 0;
            ok[out] = 0;
            break;
        case DT_OP_ANY_IN_PLAIN_OUT:
            ok[out] = 0;
            break;
        case DT_OP_SAME_LAYOUT:
            for (int k = 0; k < n_in; k++)
                parent[layout_root(parent, input_storage(m, op, k))] = layout_root(parent, out);
            break;
        case DT_OP_ANY_LAYOUTS:
            break;
        }
    }
    for (int si = 0; si < m->n_storages; si++)
        if (!ok[si]) ok[layout_root(parent, si)] = 0;
    for (int si = 0; si < m->n_storages; si++)
        m->storages[si].blocked = ok[layout_root(parent, si)];
    free(parent);
    free(ok);
    return 0;
}

/* The first kernel of the op's kind in the backend's table that runs it with its
 * storages' present dtypes, or NULL. */
static const dt_kernel *find_kernel(const dt_model *m, const dt_op *op) {
    const int n_in = dt_op_n_inputs(op), out = m->values[op->out].storage;
    for (size_t i = 0; i < m->backend->n_kernels; i++) {
        const dt_kernel *k = m->backend->kernels[i];
        if (k->kind != op->kind) continue;
        if (k->accepts) {
            if (k->accepts(m, op)) return k;
            continue;
        }
        int all = m->storages[out].dtype == k->dtype;
        for (int j = 0; j < n_in; j++)
            all = all && m->storages[input_storage(m, op, j)].dtype == k->dtype;
        if (all) return k;
    }
    return NULL;
}

/* Each storage's dtype and each op's kernel. With bf16 precision every storage starts
 * bf16 but the model's input (the loader's f32 samples) and its logits (the loss's
 * f32); an op no kernel runs with its storages' dtypes turns them all f32, until
 * every op has a kernel. Every op has an f32 one, so this ends. */
static int plan_dtypes(dt_model *m, dt_error *err) {
    const int logits = m->values[m->n_values - 1].storage;
    for (int si = 0; si < m->n_storages; si++)
        m->storages[si].dtype =
            m->precision == DT_PRECISION_BF16 && si != 0 && si != logits ? DT_BF16 : DT_F32;
    for (int changed = 1; changed;) {
        changed = 0;
        for (int i = 0; i < m->n_ops; i++) {
            const dt_op *op = &m->ops[i];
            if (find_kernel(m, op)) continue;
            const int n_in = dt_op_n_inputs(op);
            for (int j = 0; j <= n_in; j++) { /* the inputs, then the output */
                dt_storage *st =
                    &m->storages[j < n_in ? input_storage(m, op, j) : m->values[op->out].storage];
                if (st->dtype != DT_F32) {
                    st->dtype = DT_F32;
                    changed = 1;
                }
            }
        }
    }
    for (int i = 0; i < m->n_ops; i++) {
        dt_op *op = &m->ops[i];
        op->relu_fused = 0;
        if (!(op->impl = find_kernel(m, op)))
            return dt_error_set(err, "backend %s has no %s kernel for op %d (%s)", m->backend->name,
                                dt_op_kind_name(op->kind), i, op->name);
    }
    /* A bf16 BatchNorm followed by the in-place ReLU of its output applies the ReLU
     * itself (one pass over the activations instead of two, each way). */
    for (int i = 0; i + 1 < m->n_ops; i++) {
        dt_op *bn = &m->ops[i], *relu = &m->ops[i + 1];
        if (bn->impl == &dt_batchnorm2d_bf16_kernel && relu->impl == &dt_relu_bf16_kernel &&
            m->values[relu->in].storage == m->values[bn->out].storage) {
            bn->relu_fused = 1;
            relu->impl = &dt_relu_fused_kernel;
        }
    }
    return 0;
}

int dt_model_alloc(dt_model *m, int max_batch, dt_error *err) {
    if (m->build_failed) return dt_error_set(err, "%s", m->build_error.msg);
    if (m->n_ops == 0) return dt_error_set(err, "model %s has no layers", m->name);
    if (max_batch < 1) return dt_error_set(err, "batch size must be at least 1, got %d", max_batch);
    if (m->backend) return dt_error_set(err, "model %s is allocated already", m->name);
    m->max_batch = max_batch;
    m->storages[m->values[m->n_values - 1].storage].last_user = m->n_ops; /* the loss */
    if (cpu_backend_create(m, err) || plan_dtypes(m, err) || plan_grad_slots(m, max_batch, err) ||
        plan_layouts(m, err))
        return -1;
    dt_backend *b = m->backend;
    dt_exec *exec = b->ctx;

    /* Everything this model will hold, summed before touching any of it: the graph's
     * buffers, each op's own state and the backend's scratch. */
    double bytes = 4.0 * (double)(2 * m->n_params + m->n_buffers + (size_t)max_batch * m->classes);
    for (int i = 0; i < m->n_storages; i++)
        bytes += (double)storage_bytes(&m->storages[i], max_batch);
    for (int k = 0; k < m->n_grad_slots; k++) bytes += (double)m->grad_slot_bytes[k];
    size_t op_bytes = 0;
    for (int i = 0; i < m->n_ops; i++) {
        const dt_kernel *k = m->ops[i].impl;
        if (k->plan && k->plan(m, &m->ops[i], max_batch, &op_bytes, err)) return -1;
    }
    bytes += (double)op_bytes + (double)dt_exec_scratch_bytes(exec);
    double phys = (double)dt_physical_memory_bytes();
    if (bytes > 0.85 * phys)
        return dt_error_set(err,
                            "batch size %d does not fit in memory: model %s would need %.1f GiB, "
                            "this machine has %.1f GiB",
                            max_batch, m->name, bytes / 1073741824.0, phys / 1073741824.0);

    if (!(m->params = dt_alloc(sizeof(float) * m->n_params, "parameters", err))) return -1;
    if (!(m->grads = dt_alloc(sizeof(float) * m->n_params, "gradients", err))) return -1;
    if (!(m->buffers = dt_alloc(sizeof(float) * (m->n_buffers + 1), "buffers", err))) return -1;
    if (!(m->probs = dt_alloc(sizeof(float) * max_batch * m->classes, "probabilities", err)))
        return -1;
    if (dt_exec_alloc_scratch(exec, err)) return -1;
    for (int i = 0; i < m->n_storages; i++) {
        dt_storage *s = &m->storages[i];
        if (!(s->data = b->alloc(b->ctx, storage_bytes(s, max_batch), "activations", err)))
            return -1;
    }
    for (int k = 0; k < m->n_grad_slots; k++)
        if (!(m->grad_slots[k] =
                  b->alloc(b->ctx, m->grad_slot_bytes[k], "activation gradients", err)))
            return -1;
    for (int i = 0; i < m->n_storages; i++)
        if (m->storages[i].grad_slot >= 0)
            m->storages[i].grad = m->grad_slots[m->storages[i].grad_slot];
    for (int i = 0; i < m->n_ops; i++) {
        const dt_kernel *k = m->ops[i].impl;
        if (k->alloc && k->alloc(m, &m->ops[i], max_batch, err)) return -1;
    }
    return 0;
}
