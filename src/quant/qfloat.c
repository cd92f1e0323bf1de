#include "quant/qfloat.h"

#include <stdlib.h>
#include <string.h>

#include "dtrain/backend.h"
#include "dtrain/zoo.h"

struct dt_qfloat {
    dt_model m;
};

void dt_qfloat_destroy(dt_qfloat *f) {
    if (!f) return;
    dt_model_free(&f->m);
    free(f);
}

int dt_qfloat_create(dt_qfloat **out, const dt_qnet *q, int max_batch, dt_error *err) {
    *out = NULL;
    int kept = 0;
    for (int i = 0; i < q->n_ops; i++) kept |= q->ops[i].kind == DT_QOP_FLOAT;
    if (!kept) return 0;
    dt_qfloat *f = calloc(1, sizeof *f);
    if (!f) return dt_error_set(err, "out of memory for the ops kept float");
    if (dt_zoo_build(&f->m, &q->spec, err)) {
        free(f);
        return -1;
    }
    f->m.plain_layouts = 1; /* NCHW float32 everywhere: what the engines convert to */
    f->m.conv_backend = DT_CONV_IM2COL;
    if (dt_model_alloc(&f->m, max_batch, err)) {
        dt_qfloat_destroy(f);
        return -1;
    }
    f->m.training = 0;
    dt_model_init_params(&f->m, 0);
    for (int i = 0; i < q->n_ops; i++) {
        const dt_qop *o = &q->ops[i];
        for (int k = 0; o->kind == DT_QOP_FLOAT && k < 4; k++) {
            const int t = o->float_tensor[k];
            if (t < 0) continue;
            if (t >= f->m.n_tensors || f->m.tensors[t].numel != o->float_count[k]) {
                dt_qfloat_destroy(f);
                return dt_error_set(err, "the float model of %s has no tensor %s of %zu values",
                                    q->model, o->float_name[k], o->float_count[k]);
            }
            memcpy(dt_model_tensor_data(&f->m, t), o->float_data[k],
                   sizeof(float) * o->float_count[k]);
        }
    }
    *out = f;
    return 0;
}

float *dt_qfloat_input(dt_qfloat *f, const dt_qop *o, int k) {
    const dt_op *op = &f->m.ops[o->float_op];
    return dt_model_value_data(&f->m, dt_op_input(&f->m, op, k));
}

int dt_qfloat_holds(const dt_qfloat *f, const dt_qop *o, int k, const dt_qvalue *x) {
    const dt_op *op = &f->m.ops[o->float_op];
    return x->from_float && f->m.values[dt_op_input(&f->m, op, k)].storage == x->float_storage;
}

void dt_qfloat_run(dt_qfloat *f, const dt_qop *o, int n) {
    dt_op *op = &f->m.ops[o->float_op];
    op->impl->forward(&f->m, op, n);
}

const float *dt_qfloat_output(const dt_qfloat *f, const dt_qop *o) {
    const dt_op *op = &f->m.ops[o->float_op];
    return (const float *)f->m.storages[f->m.values[op->out].storage].data;
}
