/* What the oneDNN modules of src/exec share and nothing outside them sees: the
 * engine and stream of a model (dt_dnnl, opaque in conv2d_dnnl.h) and the test of a
 * primitive's implementation. */
#ifndef DTRAIN_EXEC_DNNL_CTX_H
#define DTRAIN_EXEC_DNNL_CTX_H

#include <oneapi/dnnl/dnnl.h>

struct dt_dnnl {
    dnnl_engine_t engine;
    dnnl_stream_t stream;
};

/* 1 when oneDNN chose a JIT or brgemm kernel for pd (not its reference or GEMM-based
 * fallbacks, which in bf16 run far below fp32's speed). */
int dt_dnnl_fast_impl(const_dnnl_primitive_desc_t pd);

/* Ends the process with a line naming `what` if st is not success: at run time
 * oneDNN fails only when out of memory. */
void dt_dnnl_run(dnnl_status_t st, const char *what);

#endif
