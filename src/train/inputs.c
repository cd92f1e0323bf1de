#include "train/inputs.h"

#include "dtrain/dataset.h"
#include "nn/onnx.h"

static void add_data_file(void *files, const char *path) {
    dt_fileset_input(files, "--data", path);
}

static void add_external_file(void *files, const char *path) {
    dt_fileset_input(files, "--model's external data", path);
}

void dt_train_inputs_add(dt_fileset *files, const char *model, const char *data) {
    if (model && dt_onnx_is_path(model)) {
        dt_fileset_input(files, "--model", model);
        dt_onnx_each_external(model, add_external_file, files);
    }
    if (data) dt_dataset_each_file(data, add_data_file, files);
}
