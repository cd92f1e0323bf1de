#include "quant/qrun.h"

#include <stdlib.h>
#include <string.h>

#include "quant/int8_dnnl.h"
#include "quant/qemu.h"

struct dt_qrun {
    const dt_qnet *q;
    dt_int8_engine engine;
    int max_batch;
    float *input;
    dt_qemu *emu;
    dt_int8_dnnl *dnnl;
};

int dt_int8_engine_parse(const char *text, dt_int8_engine *out) {
    if (!strcmp(text, "emulate"))
        *out = DT_INT8_EMULATE;
    else if (!strcmp(text, "dnnl"))
        *out = DT_INT8_DNNL;
    else
        return -1;
    return 0;
}

const char *dt_int8_engine_name(dt_int8_engine engine) {
    return engine == DT_INT8_DNNL ? "dnnl" : "emulate";
}

void dt_qrun_destroy(dt_qrun *r) {
    if (!r) return;
    dt_qemu_destroy(r->emu);
    dt_int8_dnnl_destroy(r->dnnl);
    dt_free(r->input);
    free(r);
}

int dt_qrun_create(dt_qrun **out, const dt_qnet *q, dt_int8_engine engine, int max_batch,
                   dt_error *err) {
    dt_qrun *r = calloc(1, sizeof *r);
    if (!r) return dt_error_set(err, "out of memory for the int8 runner");
    r->q = q;
    r->engine = engine;
    r->max_batch = max_batch;
    const dt_qvalue *x = &q->values[0];
    int rc = (r->input = dt_alloc(sizeof(float) * (size_t)x->c * x->h * x->w * (size_t)max_batch,
                                  "int8 inputs", err))
                 ? 0
                 : -1;
    if (rc == 0 && engine == DT_INT8_EMULATE) rc = dt_qemu_create(&r->emu, q, max_batch, err);
    if (rc == 0 && engine == DT_INT8_DNNL) rc = dt_int8_dnnl_create(&r->dnnl, q, max_batch, err);
    if (rc) {
        dt_qrun_destroy(r);
        return -1;
    }
    *out = r;
    return 0;
}

float *dt_qrun_input(dt_qrun *r) {
    return r->input;
}

void dt_qrun_forward(dt_qrun *r, int n) {
    if (r->dnnl)
        dt_int8_dnnl_forward(r->dnnl, r->input, n);
    else
        dt_qemu_forward(r->emu, r->input, n);
}

const float *dt_qrun_logits(const dt_qrun *r) {
    return r->dnnl ? dt_int8_dnnl_logits(r->dnnl) : dt_qemu_logits(r->emu);
}

int dt_qrun_max_batch(const dt_qrun *r) {
    return r->max_batch;
}
