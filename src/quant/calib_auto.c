#include "quant/calib_auto.h"

#include "quant/int8_dnnl.h"

dt_calib_choice dt_calib_candidate(int i) {
    /* entropy first: the default before auto, kept on a tie */
    static const dt_calib_choice candidates[DT_CALIB_CANDIDATES] = {{DT_CALIB_ENTROPY, 0},
                                                                    {DT_CALIB_PERCENTILE, 99.99},
                                                                    {DT_CALIB_MINMAX, 0},
                                                                    {DT_CALIB_3SIGMA, 0}};
    return candidates[i];
}

/* How many held-out images the int8 network q gets right. */
static long score(const dt_qnet *q, dt_quant_feed held, void *ctx, const int32_t *labels,
                  long held_n, dt_int8_engine engine, int batch, dt_error *err) {
    dt_qrun *run;
    char why[160];
    /* the lab's full range without VNNI: the emulation's integers, which the file gets */
    if (engine == DT_INT8_DNNL && !dt_int8_dnnl_exact_here(q, why, sizeof why))
        engine = DT_INT8_EMULATE;
    if (dt_qrun_create(&run, q, engine, batch, err)) return -1;
    const int classes = q->spec.classes;
    long right = 0, seen = 0;
    for (int b = 0;; b++) {
        const int n = held(ctx, b, dt_qrun_input(run), batch, err);
        if (n < 0) right = -1;
        if (n <= 0) break;
        dt_qrun_forward(run, n);
        const float *logits = dt_qrun_logits(run);
        for (int i = 0; i < n && seen < held_n; i++, seen++) {
            const float *row = logits + (size_t)i * classes;
            int top = 0;
            for (int k = 1; k < classes; k++)
                if (row[k] > row[top]) top = k;
            right += top == labels[seen];
        }
    }
    dt_qrun_destroy(run);
    return right;
}

int dt_calib_auto(dt_model *m, const dt_model_spec *spec, const dt_quant_config *base,
                  dt_quant_feed calib, void *calib_ctx, dt_quant_feed held, void *held_ctx,
                  const int32_t *labels, long held_n, dt_int8_engine engine, int batch,
                  dt_calib_trial *trials, int *best, dt_error *err) {
    *best = 0;
    for (int i = 0; i < DT_CALIB_CANDIDATES; i++) {
        dt_quant_config cfg = *base;
        cfg.calib = dt_calib_candidate(i);
        cfg.report = 0;
        trials[i] = (dt_calib_trial){cfg.calib, -1};
        dt_qnet q;
        if (dt_qnet_build(&q, m, spec, cfg.scheme, err)) return -1;
        int rc = dt_quantize(&q, m, &cfg, calib, calib_ctx, err);
        if (rc == 0) {
            trials[i].right = score(&q, held, held_ctx, labels, held_n, engine, batch, err);
            rc = trials[i].right < 0 ? -1 : 0;
        }
        dt_qnet_free(&q);
        if (rc) return -1;
        if (trials[i].right > trials[*best].right) *best = i;
    }
    return 0;
}
