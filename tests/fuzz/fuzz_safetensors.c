/* libFuzzer target for the safetensors reader: every input is read as a file, and
 * every tensor it accepts is fetched as F32 with its own shape and as I32/I64 counts.
 * Build and run: scripts/fuzz.sh SECONDS safetensors. */
#include <stdlib.h>

#include "dtrain/safetensors.h"
#include "fuzz_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file(data, size, ".safetensors");
    if (!path) return 0;
    dt_safetensors st;
    dt_error err;
    if (dt_safetensors_read(&st, path, &err)) return 0;
    for (int i = 0; i < st.n_tensors; i++) {
        const dt_st_tensor *t = &st.tensors[i];
        int shape[DT_ST_MAX_DIMS];
        for (int d = 0; d < t->ndim; d++) shape[d] = (int)t->shape[d];
        float *f = malloc(sizeof(float) * (t->numel ? t->numel : 1));
        if (f) dt_safetensors_get_f32(&st, t->name, t->ndim, shape, f, &err);
        free(f);
        int32_t *v = malloc(sizeof(int32_t) * (t->numel ? t->numel : 1));
        if (v) dt_safetensors_get_i32(&st, t->name, t->numel, v, &err);
        free(v);
    }
    dt_safetensors_meta(&st, "model");
    dt_safetensors_free(&st);
    return 0;
}
