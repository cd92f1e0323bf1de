/* Shape arithmetic of an ONNX graph, evaluated once at import (onnx.c calls it before
 * it maps a node to an op): what torch.onnx.export emits around a dynamic batch axis
 * (Shape -> Gather -> Unsqueeze -> Concat -> Reshape, ConstantOfShape, Range, Equal,
 * Where, Cast, Slice, integer Add/Sub/Mul/Div) on small constant tensors. The batch
 * size N stays symbolic: every integer element is a linear form k*N + c, exact in
 * int64; what is not linear in N (N*N, N/3 where 3 does not divide it, a float of N,
 * a tensor whose size depends on N) is refused with the reason. Pure functions:
 * no model, no file. */
#ifndef DTRAIN_ONNX_FOLD_H
#define DTRAIN_ONNX_FOLD_H

#include <stddef.h>
#include <stdint.h>

#include "onnx/onnx.pb-c.h"

enum {
    DT_FOLD_MAX_RANK = 8,
    DT_FOLD_MAX_ELEMS = 1 << 16, /* shapes and their arithmetic, not weights */
};

typedef struct dt_fold_tensor {
    int elem_type; /* ONNX's TensorProto.DataType: INT64, INT32, BOOL, FLOAT, DOUBLE, ... */
    int rank;
    int64_t dims[DT_FOLD_MAX_RANK];
    size_t count;
    int64_t *k, *c; /* integer and bool types: element i is k[i]*N + c[i] */
    double *f;      /* float types */
} dt_fold_tensor;

void dt_fold_free(dt_fold_tensor *t);
/* 1 for the element types kept as linear forms (integers, bool), 0 for floats. */
int dt_fold_is_int(int elem_type);
/* 1 when no element depends on N. */
int dt_fold_batch_free(const dt_fold_tensor *t);
/* A constant (an initializer or a Constant node's value; inline data only). */
int dt_fold_from_proto(const Onnx__TensorProto *p, dt_fold_tensor *out, char *why, size_t size);
/* A batch-free tensor as a TensorProto (raw data, owned: dt_fold_proto_free). */
int dt_fold_to_proto(const dt_fold_tensor *t, Onnx__TensorProto *p, char *why, size_t size);
void dt_fold_proto_free(Onnx__TensorProto *p);
/* ONNX's Shape of a value whose shape is dims_k[i]*N + dims_c[i] (an activation:
 * [N, C, H, W] is k = {1, 0, 0, 0}, c = {0, C, H, W}), with opset 15's start/end. */
int dt_fold_shape(const Onnx__NodeProto *n, int rank, const int64_t *dims_k, const int64_t *dims_c,
                  dt_fold_tensor *out, char *why, size_t size);
/* 1 for the operators dt_fold_node evaluates. */
int dt_fold_takes(const char *op_type);
/* Evaluates node n of the opset on its inputs (ins[i] NULL: an input not given);
 * 0, or -1 with the reason in why. */
int dt_fold_node(const Onnx__NodeProto *n, long long opset, const dt_fold_tensor *const *ins,
                 size_t n_in, dt_fold_tensor *out, char *why, size_t size);

#endif
