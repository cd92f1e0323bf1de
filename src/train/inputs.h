/* The files a command reads beside those its own flags name (--init, --resume,
 * --compare): the --model file when it is an ONNX graph, the external-data files it
 * names, and the data's files (every
 * name a reader of that spec opens, dt_dataset_each_file), added to a fileset as
 * inputs, so that no output of train, eval, quantize or bench replaces the model or
 * the data ("--log m.onnx would overwrite --model m.onnx (the same file)"). */
#ifndef DTRAIN_TRAIN_INPUTS_H
#define DTRAIN_TRAIN_INPUTS_H

#include "core/fileset.h"

/* model: a zoo name or an ONNX path; data: a data spec or NULL. */
void dt_train_inputs_add(dt_fileset *files, const char *model, const char *data);

#endif
