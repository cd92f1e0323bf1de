#include "dtrain/checkpoint.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { NAME_BYTES = 160 };

int dt_checkpoint_save(const dt_model *m, const dt_sgd *opt, const dt_st_meta *meta, int n_meta,
                       const char *path, dt_error *err) {
    int n_bn = 0, n_momentum = opt && opt->velocity ? m->n_tensors : 0;
    for (int i = 0; i < m->n_ops; i++) n_bn += m->ops[i].kind == DT_OP_BATCHNORM2D;
    int cap = m->n_tensors + n_bn + n_momentum;
    dt_st_entry *entries = calloc((size_t)cap, sizeof *entries);
    char *names = calloc((size_t)cap, NAME_BYTES);
    if (!entries || !names) {
        free(entries);
        free(names);
        return dt_error_set(err, "out of memory saving %s", path);
    }
    int n = 0;
    for (int i = 0; i < m->n_tensors; i++) {
        const dt_tensor_entry *t = &m->tensors[i];
        dt_st_entry *e = &entries[n++];
        e->name = t->name;
        e->dtype = "F32";
        e->ndim = t->ndim;
        for (int d = 0; d < t->ndim; d++) e->shape[d] = t->shape[d];
        e->data = (t->is_param ? m->params : m->buffers) + t->offset;
    }
    for (int i = 0; i < m->n_ops; i++) {
        const dt_op *op = &m->ops[i];
        if (op->kind != DT_OP_BATCHNORM2D) continue;
        char *name = names + (size_t)n * NAME_BYTES;
        snprintf(name, NAME_BYTES, "%s.num_batches_tracked", op->name);
        dt_st_entry *e = &entries[n++];
        e->name = name;
        e->dtype = "I64";
        e->ndim = 0;
        e->data = &op->num_batches_tracked;
    }
    for (int i = 0; i < n_momentum; i++) {
        const dt_tensor_entry *t = &m->tensors[i];
        if (!t->is_param) continue;
        char *name = names + (size_t)n * NAME_BYTES;
        snprintf(name, NAME_BYTES, "optimizer.momentum.%s", t->name);
        dt_st_entry *e = &entries[n++];
        e->name = name;
        e->dtype = "F32";
        e->ndim = t->ndim;
        for (int d = 0; d < t->ndim; d++) e->shape[d] = t->shape[d];
        e->data = opt->velocity + t->offset;
    }
    int rc = dt_safetensors_write(path, entries, n, meta, n_meta, err);
    free(entries);
    free(names);
    return rc;
}

int dt_checkpoint_load(dt_model *m, dt_sgd *opt, const char *path, dt_error *err) {
    dt_safetensors st;
    if (dt_safetensors_read(&st, path, err)) return -1;
    int rc = 0;
    for (int i = 0; rc == 0 && i < m->n_tensors; i++) {
        const dt_tensor_entry *t = &m->tensors[i];
        rc = dt_safetensors_get_f32(&st, t->name, t->ndim, t->shape, dt_model_tensor_data(m, i),
                                    err);
    }
    for (int i = 0; rc == 0 && i < m->n_ops; i++) {
        dt_op *op = &m->ops[i];
        if (op->kind != DT_OP_BATCHNORM2D) continue;
        char name[NAME_BYTES];
        int32_t count;
        snprintf(name, sizeof name, "%s.num_batches_tracked", op->name);
        if (dt_safetensors_find(&st, name)) {
            rc = dt_safetensors_get_i32(&st, name, 1, &count, err);
            op->num_batches_tracked = count;
        }
    }
    if (rc == 0 && opt && opt->velocity) {
        char name[NAME_BYTES];
        snprintf(name, sizeof name, "optimizer.momentum.%s", m->tensors[0].name);
        int has_momentum = dt_safetensors_find(&st, name) != NULL;
        for (int i = 0; rc == 0 && has_momentum && i < m->n_tensors; i++) {
            const dt_tensor_entry *t = &m->tensors[i];
            if (!t->is_param) continue;
            snprintf(name, sizeof name, "optimizer.momentum.%s", t->name);
            rc = dt_safetensors_get_f32(&st, name, t->ndim, t->shape, opt->velocity + t->offset,
                                        err);
        }
        if (rc == 0 && has_momentum && opt->steps == 0) opt->steps = 1;
        for (size_t i = 0; rc == 0 && has_momentum && i < m->n_params; i++)
            if (!isfinite(opt->velocity[i]))
                rc = dt_error_set(err, "%s: the optimizer's momentum holds NaN or infinite values",
                                  path);
    }
    /* every reader of weights (train --init and --resume, eval, quantize) refuses them */
    if (rc == 0 && dt_model_first_non_finite(m) >= 0)
        rc = dt_error_set(err, "%s: the weights hold NaN or infinite values", path);
    dt_safetensors_free(&st);
    return rc;
}
