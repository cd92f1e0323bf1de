#include "train/inputs.h"

#include "dtrain/dataset.h"
#include "nn/onnx.h"

static void add_data_file(void *files, const char *path) {
    dt_fileset_input(files, "--data", path);
}

void dt_train_inputs_add(dt_fileset *files, const char *model, const char *data) {
    if (model && dt_onnx_is_path(model)) dt_fileset_input(files, "--model", model);
    if (data) dt_dataset_each_file(data, add_data_file, files);
}
