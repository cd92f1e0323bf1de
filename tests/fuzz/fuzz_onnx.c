/* libFuzzer target for the ONNX importer (src/nn/onnx.c): every input is written as
 * a .onnx file and imported (the spec: shape and classes; then the graph and its
 * initializers). Refusals are fine; a crash, leak, hang or sanitizer report is not.
 * The corpus: tests/fuzz/corpus_onnx (small exports). Build and run:
 * scripts/fuzz.sh SECONDS onnx. */
#include "dtrain/zoo.h"
#include "fuzz_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file(data, size, ".onnx");
    if (!path) return 0;
    dt_model_spec spec;
    dt_error err;
    dt_model m;
    if (dt_zoo_spec_of(&spec, path, &err) == 0 && dt_zoo_build(&m, &spec, &err) == 0)
        dt_model_free(&m);
    return 0;
}
