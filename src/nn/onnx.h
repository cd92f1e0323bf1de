/* Models from ONNX files (what torch.onnx.export writes): the graph's nodes mapped onto
 * dtrain's own ops, one op-table row each (no second runtime), its initializers the
 * starting weights under their ONNX names. A graph the importer cannot train is
 * refused with the node's name, its op type and why — never guessed. docs/onnx.md. */
#ifndef DTRAIN_NN_ONNX_H
#define DTRAIN_NN_ONNX_H

#include "dtrain/error.h"
#include "dtrain/model.h"
#include "dtrain/zoo.h"

/* Whether a --model names an ONNX file (ends in ".onnx") rather than a zoo row. */
int dt_onnx_is_path(const char *name);

/* The graph's input shape (C x H x W; the batch dimension is free) and classes (its
 * output's size). spec->name is the path. */
int dt_onnx_spec(dt_model_spec *spec, const char *path, dt_error *err);

/* Builds the graph (not yet allocated) with the file's initializers as the starting
 * values (m->imported). spec's shape must be the graph's; width has no meaning here. */
int dt_onnx_build(dt_model *m, const dt_model_spec *spec, dt_error *err);

/* As dt_onnx_build, but the graph may end in an activation of any shape (m->classes is
 * then its channels): single-node graphs, as ONNX's own node tests are, run forward. */
int dt_onnx_build_any(dt_model *m, const dt_model_spec *spec, dt_error *err);

/* Writes out: the graph of the ONNX file `source` (the model's --model) with each
 * initializer named like one of m's tensors holding m's current values, inline; the
 * rest of the graph byte for byte as it was (onnxruntime and PyTorch read it as the
 * export). Atomic (core/outfile.h): out is replaced whole or not at all. */
int dt_onnx_save(const dt_model *m, const char *source, const char *out, dt_error *err);
/* Before training, what dt_onnx_save will need: the weights within protobuf's 2 GiB
 * and the source graph still readable. One line naming out on error. */
int dt_onnx_save_check(const dt_model *m, const char *source, const char *out, dt_error *err);

/* Calls fn(ctx, file) for each external-data file the ONNX file at path names (the
 * model's folder joined with the tensor's location, as the import opens it): files
 * the model reads, which no output may replace. -1 when path does not load (the
 * import then says why). */
int dt_onnx_each_external(const char *path, void (*fn)(void *ctx, const char *file), void *ctx);

#endif
