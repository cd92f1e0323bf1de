/* A quantized network ready to run, on one of its engines: the float emulation of its
 * integer arithmetic (qemu.h) or oneDNN's int8 primitives (int8_dnnl.h). Callers write
 * normalised float inputs and read float logits, whichever engine computes. */
#ifndef DTRAIN_QRUN_H
#define DTRAIN_QRUN_H

#include "dtrain/error.h"
#include "quant/quant.h"

typedef enum dt_int8_engine {
    DT_INT8_EMULATE,
    DT_INT8_DNNL,
} dt_int8_engine;

/* "emulate" | "dnnl"; -1 if unknown. */
int dt_int8_engine_parse(const char *text, dt_int8_engine *out);
const char *dt_int8_engine_name(dt_int8_engine engine);

typedef struct dt_qrun dt_qrun;

/* q must outlive the runner. */
int dt_qrun_create(dt_qrun **r, const dt_qnet *q, dt_int8_engine engine, int max_batch,
                   dt_error *err);
void dt_qrun_destroy(dt_qrun *r);
/* [max_batch, c, h, w]: write the inputs here before forward. */
float *dt_qrun_input(dt_qrun *r);
void dt_qrun_forward(dt_qrun *r, int n);
/* [n, classes] after forward. */
const float *dt_qrun_logits(const dt_qrun *r);
int dt_qrun_max_batch(const dt_qrun *r);

#endif
