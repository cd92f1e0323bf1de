/* libFuzzer target for the quantized-file reader: every input is read as a
 * safetensors file and, if its metadata says dtrain-int8, loaded by dt_qnet_load
 * (metadata, then every tensor against the network's structure) for the model its
 * metadata names when that is a small one (logreg, mlp, lenet5: the corpus's), at
 * its default width. Build and run: scripts/fuzz.sh SECONDS quant. */
#include <string.h>

#include "dtrain/safetensors.h"
#include "dtrain/zoo.h"
#include "fuzz_file.h"
#include "quant/quant.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file(data, size, ".safetensors");
    if (!path) return 0;
    dt_safetensors st;
    dt_error err;
    if (dt_safetensors_read(&st, path, &err)) return 0;
    const char *model = dt_safetensors_meta(&st, "model");
    dt_model_spec spec;
    if (dt_qnet_file_is_quantized(&st) && model &&
        (!strcmp(model, "logreg") || !strcmp(model, "mlp") || !strcmp(model, "lenet5")) &&
        dt_zoo_default_spec(&spec, model) == 0) {
        dt_qnet q;
        if (dt_qnet_load(&q, &st, &spec, &err) == 0) dt_qnet_free(&q);
    }
    dt_safetensors_free(&st);
    return 0;
}
