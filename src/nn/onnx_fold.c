#include "nn/onnx_fold.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef Onnx__TensorProto__DataType elem;
#define T_FLOAT  ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT
#define T_DOUBLE ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE
#define T_INT64  ONNX__TENSOR_PROTO__DATA_TYPE__INT64
#define T_INT32  ONNX__TENSOR_PROTO__DATA_TYPE__INT32
#define T_BOOL   ONNX__TENSOR_PROTO__DATA_TYPE__BOOL

static int failf(char *why, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int failf(char *why, size_t size, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, size, fmt, ap);
    va_end(ap);
    return -1;
}

int dt_fold_is_int(int t) {
    switch (t) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT64:
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT32:
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT16:
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT8:
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT8:
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT16:
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT32:
    case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL:
        return 1;
    default:
        return 0;
    }
}

static int is_float(int t) {
    return t == T_FLOAT || t == T_DOUBLE;
}

void dt_fold_free(dt_fold_tensor *t) {
    free(t->k);
    free(t->c);
    free(t->f);
    t->k = t->c = NULL;
    t->f = NULL;
}

int dt_fold_batch_free(const dt_fold_tensor *t) {
    if (!t->k) return 1;
    for (size_t i = 0; i < t->count; i++)
        if (t->k[i]) return 0;
    return 1;
}

/* An empty tensor of type and shape, its storage allocated (zeros). */
static int make(dt_fold_tensor *t, int type, int rank, const int64_t *dims, char *why,
                size_t size) {
    memset(t, 0, sizeof *t);
    if (!dt_fold_is_int(type) && !is_float(type))
        return failf(why, size, "element type %d is not folded (integers, bool, float, double)",
                     type);
    if (rank < 0 || rank > DT_FOLD_MAX_RANK)
        return failf(why, size, "a constant of rank %d (at most %d)", rank, DT_FOLD_MAX_RANK);
    size_t count = 1;
    for (int i = 0; i < rank; i++) {
        if (dims[i] < 0 || dims[i] > DT_FOLD_MAX_ELEMS)
            return failf(why, size, "a constant's dimension %lld", (long long)dims[i]);
        count *= (size_t)dims[i];
        if (count > DT_FOLD_MAX_ELEMS)
            return failf(why, size,
                         "a constant of more than %d values (shapes are folded, not "
                         "tensors)",
                         DT_FOLD_MAX_ELEMS);
        t->dims[i] = dims[i];
    }
    t->elem_type = type;
    t->rank = rank;
    t->count = count;
    if (dt_fold_is_int(type)) {
        t->k = calloc(count + 1, sizeof *t->k);
        t->c = calloc(count + 1, sizeof *t->c);
        if (!t->k || !t->c) return dt_fold_free(t), failf(why, size, "out of memory");
    } else {
        t->f = calloc(count + 1, sizeof *t->f);
        if (!t->f) return failf(why, size, "out of memory");
    }
    return 0;
}

/* The value an integer element has when it does not depend on N. */
static int64_t fixed(const dt_fold_tensor *t, size_t i) {
    return t->c[i];
}

static double as_double(const dt_fold_tensor *t, size_t i) {
    return t->f ? t->f[i] : (double)t->c[i];
}

/* Every element of t free of N, else the reason naming `what`. */
static int need_batch_free(const dt_fold_tensor *t, const char *what, char *why, size_t size) {
    if (!dt_fold_batch_free(t))
        return failf(why, size,
                     "its %s depends on the batch size N (only linear shape arithmetic "
                     "of N is folded)",
                     what);
    return 0;
}

/* Integer types wrap to their width, as ONNX's integers do. */
static int64_t narrow(int type, int64_t v) {
    switch (type) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT32:
        return (int32_t)v;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT16:
        return (int16_t)v;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT8:
        return (int8_t)v;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT8:
        return (uint8_t)v;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT16:
        return (uint16_t)v;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT32:
        return (uint32_t)v;
    case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL:
        return v != 0;
    default:
        return v;
    }
}

static size_t elem_bytes(int type) {
    switch (type) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT64:
    case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE:
        return 8;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT32:
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT32:
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT:
        return 4;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT16:
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT16:
        return 2;
    default:
        return 1;
    }
}

/* Element i of raw little-endian bytes (this host's order, as onnx.c reads floats). */
static void raw_get(const uint8_t *raw, int type, size_t i, dt_fold_tensor *t) {
    const uint8_t *p = raw + i * elem_bytes(type);
    switch (type) {
    case T_INT64: {
        int64_t v;
        memcpy(&v, p, 8);
        t->c[i] = v;
        break;
    }
    case T_DOUBLE:
        memcpy(&t->f[i], p, 8);
        break;
    case T_FLOAT: {
        float v;
        memcpy(&v, p, 4);
        t->f[i] = v;
        break;
    }
    case T_INT32: {
        int32_t v;
        memcpy(&v, p, 4);
        t->c[i] = v;
        break;
    }
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT32: {
        uint32_t v;
        memcpy(&v, p, 4);
        t->c[i] = v;
        break;
    }
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT16: {
        int16_t v;
        memcpy(&v, p, 2);
        t->c[i] = v;
        break;
    }
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT16: {
        uint16_t v;
        memcpy(&v, p, 2);
        t->c[i] = v;
        break;
    }
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT8:
        t->c[i] = (int8_t)*p;
        break;
    default: /* uint8, bool */
        t->c[i] = narrow(type, *p);
        break;
    }
}

int dt_fold_from_proto(const Onnx__TensorProto *p, dt_fold_tensor *out, char *why, size_t size) {
    int64_t dims[DT_FOLD_MAX_RANK];
    if (p->n_dims > DT_FOLD_MAX_RANK)
        return failf(why, size, "a constant of rank %zu (at most %d)", p->n_dims, DT_FOLD_MAX_RANK);
    for (size_t i = 0; i < p->n_dims; i++) dims[i] = p->dims[i];
    if (make(out, p->data_type, (int)p->n_dims, dims, why, size)) return -1;
    const size_t n = out->count, type = (size_t)p->data_type;
    if (p->has_data_location && p->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
        dt_fold_free(out);
        return failf(why, size, "a shape constant kept in an external file");
    }
    if (p->has_raw_data && p->raw_data.len) {
        if (p->raw_data.len != n * elem_bytes((int)type)) {
            dt_fold_free(out);
            return failf(why, size, "a constant of %zu bytes where its shape needs %zu",
                         p->raw_data.len, n * elem_bytes((int)type));
        }
        for (size_t i = 0; i < n; i++) raw_get(p->raw_data.data, (int)type, i, out);
        return 0;
    }
    size_t have = type == T_INT64    ? p->n_int64_data
                  : type == T_FLOAT  ? p->n_float_data
                  : type == T_DOUBLE ? p->n_double_data
                  : type == ONNX__TENSOR_PROTO__DATA_TYPE__UINT32 ||
                          type == ONNX__TENSOR_PROTO__DATA_TYPE__UINT64
                      ? p->n_uint64_data
                      : p->n_int32_data;
    if (have != n) {
        dt_fold_free(out);
        return failf(why, size, "a constant of %zu values where its shape needs %zu", have, n);
    }
    for (size_t i = 0; i < n; i++) {
        if (type == T_INT64)
            out->c[i] = p->int64_data[i];
        else if (type == T_FLOAT)
            out->f[i] = p->float_data[i];
        else if (type == T_DOUBLE)
            out->f[i] = p->double_data[i];
        else if (type == ONNX__TENSOR_PROTO__DATA_TYPE__UINT32)
            out->c[i] = (int64_t)p->uint64_data[i];
        else
            out->c[i] = narrow((int)type, p->int32_data[i]);
    }
    return 0;
}

int dt_fold_to_proto(const dt_fold_tensor *t, Onnx__TensorProto *p, char *why, size_t size) {
    onnx__tensor_proto__init(p);
    if (need_batch_free(t, "value", why, size)) return -1;
    const size_t eb = elem_bytes(t->elem_type);
    p->dims = calloc((size_t)t->rank + 1, sizeof *p->dims);
    p->raw_data.data = calloc(t->count * eb + 1, 1);
    if (!p->dims || !p->raw_data.data) {
        dt_fold_proto_free(p);
        return failf(why, size, "out of memory");
    }
    p->n_dims = (size_t)t->rank;
    for (int i = 0; i < t->rank; i++) p->dims[i] = t->dims[i];
    p->has_data_type = 1;
    p->data_type = t->elem_type;
    p->has_raw_data = 1;
    p->raw_data.len = t->count * eb;
    for (size_t i = 0; i < t->count; i++) {
        uint8_t *q = p->raw_data.data + i * eb;
        if (t->elem_type == T_FLOAT) {
            const float v = (float)t->f[i];
            memcpy(q, &v, 4);
        } else if (t->elem_type == T_DOUBLE) {
            memcpy(q, &t->f[i], 8);
        } else {
            const int64_t v = t->c[i]; /* little-endian host: the low bytes first */
            memcpy(q, &v, eb);
        }
    }
    return 0;
}

void dt_fold_proto_free(Onnx__TensorProto *p) {
    free(p->dims);
    free(p->raw_data.data);
    p->dims = NULL;
    p->raw_data.data = NULL;
    p->n_dims = 0;
    p->raw_data.len = 0;
}

/* ------------------------------------------------------------------ attributes */

static const Onnx__AttributeProto *attr(const Onnx__NodeProto *n, const char *name) {
    for (size_t i = 0; i < n->n_attribute; i++)
        if (n->attribute[i]->name && !strcmp(n->attribute[i]->name, name)) return n->attribute[i];
    return NULL;
}

static long long attr_int(const Onnx__NodeProto *n, const char *name, long long fallback) {
    const Onnx__AttributeProto *a = attr(n, name);
    return a && a->has_i ? (long long)a->i : fallback;
}

/* A list of integers from attribute `name` (older opsets) or from input `input`
 * (newer); *count -1 when neither is given. */
static int int_list(const Onnx__NodeProto *n, const char *name, const dt_fold_tensor *input,
                    int64_t *out, int max, int *count, char *why, size_t size) {
    *count = -1;
    const Onnx__AttributeProto *a = attr(n, name);
    if (input) {
        if (!dt_fold_is_int(input->elem_type) || input->count > (size_t)max)
            return failf(why, size, "its %s are not a short list of integers", name);
        if (need_batch_free(input, name, why, size)) return -1;
        for (size_t i = 0; i < input->count; i++) out[i] = fixed(input, i);
        *count = (int)input->count;
    } else if (a && a->n_ints) {
        if (a->n_ints > (size_t)max) return failf(why, size, "its %s has too many entries", name);
        for (size_t i = 0; i < a->n_ints; i++) out[i] = a->ints[i];
        *count = (int)a->n_ints;
    }
    return 0;
}

/* An axis in [-rank, rank) made non-negative, or -1. */
static int axis_of(int64_t axis, int rank) {
    if (axis < -rank || axis >= rank) return -1;
    return (int)(axis < 0 ? axis + rank : axis);
}

/* ------------------------------------------------------------------ the ops */

int dt_fold_shape(const Onnx__NodeProto *n, int rank, const int64_t *dims_k, const int64_t *dims_c,
                  dt_fold_tensor *out, char *why, size_t size) {
    long long start = attr_int(n, "start", 0), end = attr_int(n, "end", rank);
    if (start < 0) start += rank;
    if (end < 0) end += rank;
    start = start < 0 ? 0 : start > rank ? rank : start;
    end = end < 0 ? 0 : end > rank ? rank : end;
    const int64_t len = end > start ? end - start : 0;
    if (make(out, T_INT64, 1, &len, why, size)) return -1;
    for (int64_t i = 0; i < len; i++) {
        out->k[i] = dims_k[start + i];
        out->c[i] = dims_c[start + i];
    }
    return 0;
}

/* numpy's broadcast of a and b's shapes into out's; -1 if they do not broadcast. */
static int broadcast_shape(const dt_fold_tensor *a, const dt_fold_tensor *b, int *rank,
                           int64_t *dims) {
    *rank = a->rank > b->rank ? a->rank : b->rank;
    for (int i = 0; i < *rank; i++) {
        const int ia = i - (*rank - a->rank), ib = i - (*rank - b->rank);
        const int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
        if (da != db && da != 1 && db != 1) return -1;
        dims[i] = da == 1 ? db : da;
    }
    return 0;
}

/* The element of t that output position `flat` of shape (rank, dims) reads under
 * broadcasting. */
static size_t broadcast_index(const dt_fold_tensor *t, int rank, const int64_t *dims, size_t flat) {
    size_t index = 0, stride = 1;
    for (int i = rank - 1; i >= 0; i--) {
        const size_t pos = flat % (size_t)dims[i];
        flat /= (size_t)dims[i];
        const int it = i - (rank - t->rank);
        if (it >= 0) {
            if (t->dims[it] != 1) index += pos * stride;
            stride *= (size_t)t->dims[it];
        }
    }
    return index;
}

enum { OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_EQUAL };

static int binary(int op, const dt_fold_tensor *a, const dt_fold_tensor *b, dt_fold_tensor *out,
                  char *why, size_t size) {
    if (a->elem_type != b->elem_type)
        return failf(why, size, "its inputs' element types differ (%d, %d)", a->elem_type,
                     b->elem_type);
    int rank;
    int64_t dims[DT_FOLD_MAX_RANK];
    if (broadcast_shape(a, b, &rank, dims))
        return failf(why, size, "its inputs' shapes do not broadcast");
    const int type = a->elem_type;
    if (make(out, op == OP_EQUAL ? T_BOOL : type, rank, dims, why, size)) return -1;
    for (size_t i = 0; i < out->count; i++) {
        const size_t ia = broadcast_index(a, rank, dims, i), ib = broadcast_index(b, rank, dims, i);
        if (is_float(type)) {
            const double x = a->f[ia], y = b->f[ib];
            if (op == OP_EQUAL)
                out->c[i] = x == y;
            else
                out->f[i] = op == OP_ADD   ? x + y
                            : op == OP_SUB ? x - y
                            : op == OP_MUL ? x * y
                                           : x / y;
            if (out->f && type == T_FLOAT) out->f[i] = (float)out->f[i];
            continue;
        }
        const int64_t ka = a->k[ia], ca = a->c[ia], kb = b->k[ib], cb = b->c[ib];
        int64_t k = 0, c = 0;
        int overflow = 0;
        switch (op) {
        case OP_ADD:
            overflow = __builtin_add_overflow(ka, kb, &k) || __builtin_add_overflow(ca, cb, &c);
            break;
        case OP_SUB:
            overflow = __builtin_sub_overflow(ka, kb, &k) || __builtin_sub_overflow(ca, cb, &c);
            break;
        case OP_MUL:
            if (ka && kb) {
                dt_fold_free(out);
                return failf(why, size, "it multiplies N by N (not linear in the batch size)");
            }
            overflow = __builtin_mul_overflow(ka, cb, &k) || __builtin_mul_overflow(kb, ca, &c);
            k += c; /* one of the two terms is 0 */
            overflow = overflow || __builtin_mul_overflow(ca, cb, &c);
            break;
        case OP_DIV:
            if (kb) {
                dt_fold_free(out);
                return failf(why, size, "it divides by the batch size N (not linear in N)");
            }
            if (cb == 0) {
                dt_fold_free(out);
                return failf(why, size, "an integer division by zero");
            }
            if (ka && (ka % cb || ca % cb)) {
                dt_fold_free(out);
                return failf(why, size,
                             "it divides %lld*N + %lld by %lld, which is exact only for some N",
                             (long long)ka, (long long)ca, (long long)cb);
            }
            k = ka / cb, c = ca / cb; /* C's truncation, as ONNX's integer Div */
            break;
        case OP_EQUAL:
            k = 0, c = ca == cb;
            if (ka != kb) {
                /* equal only at N = (cb - ca) / (ka - kb): a batch is at least 1, so where
                 * that is no positive integer they are never equal (torch's expand
                 * compares its shape [N, -1, -1] with -1) */
                const int64_t d = ka - kb, e = cb - ca;
                if (e % d == 0 && e / d >= 1) {
                    dt_fold_free(out);
                    return failf(why, size,
                                 "it compares values that are equal only for a batch of %lld",
                                 (long long)(e / d));
                }
                c = 0;
            }
            break;
        }
        if (overflow) {
            dt_fold_free(out);
            return failf(why, size, "an integer overflow");
        }
        out->k[i] = op == OP_EQUAL ? 0 : k;
        out->c[i] = op == OP_EQUAL ? c : narrow(type, c);
    }
    return 0;
}

static void copy_elem(dt_fold_tensor *out, size_t o, const dt_fold_tensor *in, size_t i) {
    if (out->f)
        out->f[o] = in->f[i];
    else
        out->k[o] = in->k[i], out->c[o] = in->c[i];
}

static int64_t numel(int rank, const int64_t *dims, int from, int to) {
    int64_t n = 1;
    for (int i = from; i < to && i < rank; i++) n *= dims[i];
    return n;
}

static int fold_gather(const Onnx__NodeProto *n, const dt_fold_tensor *data,
                       const dt_fold_tensor *idx, dt_fold_tensor *out, char *why, size_t size) {
    const int axis = axis_of(attr_int(n, "axis", 0), data->rank);
    if (axis < 0) return failf(why, size, "its axis is outside its data's %d axes", data->rank);
    if (!dt_fold_is_int(idx->elem_type) || need_batch_free(idx, "indices", why, size))
        return failf(why, size, "its indices are not integers free of N");
    const int rank = data->rank - 1 + idx->rank;
    if (rank > DT_FOLD_MAX_RANK) return failf(why, size, "its output has rank %d", rank);
    int64_t dims[DT_FOLD_MAX_RANK];
    int r = 0;
    for (int i = 0; i < axis; i++) dims[r++] = data->dims[i];
    for (int i = 0; i < idx->rank; i++) dims[r++] = idx->dims[i];
    for (int i = axis + 1; i < data->rank; i++) dims[r++] = data->dims[i];
    if (make(out, data->elem_type, rank, dims, why, size)) return -1;
    const int64_t outer = numel(data->rank, data->dims, 0, axis),
                  inner = numel(data->rank, data->dims, axis + 1, data->rank),
                  along = data->dims[axis];
    size_t o = 0;
    for (int64_t a = 0; a < outer; a++)
        for (size_t j = 0; j < idx->count; j++) {
            int64_t at = fixed(idx, j);
            if (at < 0) at += along;
            if (at < 0 || at >= along) {
                dt_fold_free(out);
                return failf(why, size, "index %lld is outside an axis of %lld",
                             (long long)fixed(idx, j), (long long)along);
            }
            for (int64_t q = 0; q < inner; q++)
                copy_elem(out, o++, data, (size_t)((a * along + at) * inner + q));
        }
    return 0;
}

/* Output dims of a copy of t as (rank, dims): same elements in order. */
static int reshaped(const dt_fold_tensor *t, int rank, const int64_t *dims, dt_fold_tensor *out,
                    char *why, size_t size) {
    if (make(out, t->elem_type, rank, dims, why, size)) return -1;
    if (out->count != t->count) {
        dt_fold_free(out);
        return failf(why, size, "%zu values reshaped to %zu", t->count, out->count);
    }
    for (size_t i = 0; i < t->count; i++) copy_elem(out, i, t, i);
    return 0;
}

static int fold_unsqueeze(const Onnx__NodeProto *n, const dt_fold_tensor *t,
                          const dt_fold_tensor *axes_in, int squeeze, dt_fold_tensor *out,
                          char *why, size_t size) {
    int64_t axes[DT_FOLD_MAX_RANK];
    int count;
    if (int_list(n, "axes", axes_in, axes, DT_FOLD_MAX_RANK, &count, why, size)) return -1;
    int64_t dims[DT_FOLD_MAX_RANK];
    int drop[DT_FOLD_MAX_RANK] = {0}, rank = 0;
    if (squeeze) {
        if (count < 0)
            for (int i = 0; i < t->rank; i++) drop[i] = t->dims[i] == 1;
        for (int j = 0; j < count; j++) {
            const int a = axis_of(axes[j], t->rank);
            if (a < 0 || t->dims[a] != 1)
                return failf(why, size, "axis %lld is not an axis of size 1", (long long)axes[j]);
            drop[a] = 1;
        }
        for (int i = 0; i < t->rank; i++)
            if (!drop[i]) dims[rank++] = t->dims[i];
        return reshaped(t, rank, dims, out, why, size);
    }
    if (count < 1) return failf(why, size, "no axes given");
    const int out_rank = t->rank + count;
    if (out_rank > DT_FOLD_MAX_RANK) return failf(why, size, "its output has rank %d", out_rank);
    int ones[DT_FOLD_MAX_RANK] = {0};
    for (int j = 0; j < count; j++) {
        const int a = axis_of(axes[j], out_rank);
        if (a < 0 || ones[a]++) return failf(why, size, "its axes are not distinct axes");
    }
    for (int i = 0, k = 0; i < out_rank; i++) dims[i] = ones[i] ? 1 : t->dims[k++];
    return reshaped(t, out_rank, dims, out, why, size);
}

static int fold_concat(const Onnx__NodeProto *n, const dt_fold_tensor *const *ins, size_t n_in,
                       dt_fold_tensor *out, char *why, size_t size) {
    const dt_fold_tensor *a = ins[0];
    const int axis = axis_of(attr_int(n, "axis", 0), a->rank);
    if (axis < 0) return failf(why, size, "its axis is outside its inputs' %d axes", a->rank);
    int64_t dims[DT_FOLD_MAX_RANK];
    memcpy(dims, a->dims, sizeof dims);
    dims[axis] = 0;
    for (size_t i = 0; i < n_in; i++) {
        const dt_fold_tensor *b = ins[i];
        if (!b || b->rank != a->rank || b->elem_type != a->elem_type)
            return failf(why, size, "its inputs differ in rank or element type");
        for (int d = 0; d < a->rank; d++)
            if (d != axis && b->dims[d] != a->dims[d])
                return failf(why, size, "its inputs' shapes differ off the axis");
        dims[axis] += b->dims[axis];
    }
    if (make(out, a->elem_type, a->rank, dims, why, size)) return -1;
    const int64_t outer = numel(a->rank, a->dims, 0, axis),
                  inner = numel(a->rank, a->dims, axis + 1, a->rank);
    size_t o = 0;
    for (int64_t q = 0; q < outer; q++)
        for (size_t i = 0; i < n_in; i++) {
            const int64_t run = ins[i]->dims[axis] * inner;
            for (int64_t e = 0; e < run; e++) copy_elem(out, o++, ins[i], (size_t)(q * run + e));
        }
    return 0;
}

static int fold_slice(const Onnx__NodeProto *n, long long opset, const dt_fold_tensor *const *ins,
                      size_t n_in, dt_fold_tensor *out, char *why, size_t size) {
    const dt_fold_tensor *t = ins[0];
    int64_t starts[DT_FOLD_MAX_RANK], ends[DT_FOLD_MAX_RANK], axes[DT_FOLD_MAX_RANK],
        steps[DT_FOLD_MAX_RANK];
    int ns, ne, na = -1, nst = -1;
    const int inputs = opset >= 10;
    if (int_list(n, "starts", inputs && n_in > 1 ? ins[1] : NULL, starts, DT_FOLD_MAX_RANK, &ns,
                 why, size) ||
        int_list(n, "ends", inputs && n_in > 2 ? ins[2] : NULL, ends, DT_FOLD_MAX_RANK, &ne, why,
                 size) ||
        int_list(n, "axes", inputs && n_in > 3 ? ins[3] : NULL, axes, DT_FOLD_MAX_RANK, &na, why,
                 size) ||
        (inputs &&
         int_list(n, "steps", n_in > 4 ? ins[4] : NULL, steps, DT_FOLD_MAX_RANK, &nst, why, size)))
        return -1;
    if (ns < 0 || ns != ne || (na >= 0 && na != ns) || (nst >= 0 && nst != ns))
        return failf(why, size, "its starts, ends, axes and steps differ in length");
    int64_t lo[DT_FOLD_MAX_RANK], step[DT_FOLD_MAX_RANK], dims[DT_FOLD_MAX_RANK];
    for (int d = 0; d < t->rank; d++) lo[d] = 0, step[d] = 1, dims[d] = t->dims[d];
    for (int j = 0; j < ns; j++) {
        const int a = axis_of(na >= 0 ? axes[j] : j, t->rank);
        if (a < 0)
            return failf(why, size, "axis %lld is not an axis", (long long)(na >= 0 ? axes[j] : j));
        const int64_t st = nst >= 0 ? steps[j] : 1, dim = t->dims[a];
        if (st == 0) return failf(why, size, "a step of 0");
        int64_t s = starts[j], e = ends[j];
        if (s < 0) s += dim;
        if (e < 0 && e > INT64_MIN + dim) e += dim;
        if (st > 0) {
            s = s < 0 ? 0 : s > dim ? dim : s;
            e = e < 0 ? 0 : e > dim ? dim : e;
            dims[a] = e > s ? (e - s + st - 1) / st : 0;
        } else {
            s = s < 0 ? 0 : s > dim - 1 ? dim - 1 : s;
            e = e < -1 ? -1 : e > dim - 1 ? dim - 1 : e;
            dims[a] = s > e ? (s - e - st - 1) / -st : 0;
        }
        lo[a] = s, step[a] = st;
    }
    if (make(out, t->elem_type, t->rank, dims, why, size)) return -1;
    for (size_t o = 0; o < out->count; o++) {
        size_t rest = o, src = 0, stride = 1;
        for (int d = t->rank - 1; d >= 0; d--) {
            const size_t pos = rest % (size_t)dims[d];
            rest /= (size_t)dims[d];
            src += (size_t)(lo[d] + (int64_t)pos * step[d]) * stride;
            stride *= (size_t)t->dims[d];
        }
        copy_elem(out, o, t, src);
    }
    return 0;
}

static int fold_constant_of_shape(const Onnx__NodeProto *n, const dt_fold_tensor *shape,
                                  dt_fold_tensor *out, char *why, size_t size) {
    if (!dt_fold_is_int(shape->elem_type) || shape->rank != 1 || shape->count > DT_FOLD_MAX_RANK)
        return failf(why, size, "its shape is not a short list of integers");
    if (need_batch_free(shape, "output's shape", why, size)) return -1;
    int64_t dims[DT_FOLD_MAX_RANK];
    for (size_t i = 0; i < shape->count; i++) dims[i] = fixed(shape, i);
    dt_fold_tensor value = {0};
    const Onnx__AttributeProto *a = attr(n, "value");
    if (a && a->t) {
        if (dt_fold_from_proto(a->t, &value, why, size)) return -1;
        if (value.count != 1) {
            dt_fold_free(&value);
            return failf(why, size, "its value is not one element");
        }
    }
    const int type = a && a->t ? value.elem_type : T_FLOAT;
    if (make(out, type, (int)shape->count, dims, why, size)) return dt_fold_free(&value), -1;
    for (size_t i = 0; i < out->count && a && a->t; i++) copy_elem(out, i, &value, 0);
    dt_fold_free(&value);
    return 0;
}

static int fold_range(const dt_fold_tensor *start, const dt_fold_tensor *limit,
                      const dt_fold_tensor *delta, dt_fold_tensor *out, char *why, size_t size) {
    if (start->count != 1 || limit->count != 1 || delta->count != 1)
        return failf(why, size, "its start, limit and delta are not scalars");
    if (need_batch_free(start, "start", why, size) || need_batch_free(limit, "limit", why, size) ||
        need_batch_free(delta, "delta", why, size))
        return -1;
    const int type = start->elem_type;
    int64_t count;
    if (is_float(type)) {
        const double s = start->f[0], l = limit->f[0], d = delta->f[0];
        if (d == 0 || !isfinite(s) || !isfinite(l) || !isfinite(d))
            return failf(why, size, "a delta of 0 or a bound not finite");
        const double c = ceil((l - s) / d);
        count = c > 0 ? (c > DT_FOLD_MAX_ELEMS ? DT_FOLD_MAX_ELEMS + 1 : (int64_t)c) : 0;
        if (make(out, type, 1, &count, why, size)) return -1;
        for (int64_t i = 0; i < count; i++) {
            out->f[i] = s + (double)i * d;
            if (type == T_FLOAT) out->f[i] = (float)((float)s + (float)i * (float)d);
        }
        return 0;
    }
    const int64_t s = start->c[0], l = limit->c[0], d = delta->c[0];
    if (d == 0) return failf(why, size, "a delta of 0");
    const double c = ceil(((double)l - (double)s) / (double)d);
    count = c > 0 ? (c > DT_FOLD_MAX_ELEMS ? DT_FOLD_MAX_ELEMS + 1 : (int64_t)c) : 0;
    if (make(out, type, 1, &count, why, size)) return -1;
    for (int64_t i = 0; i < count; i++) out->c[i] = narrow(type, s + i * d);
    return 0;
}

static int fold_where(const dt_fold_tensor *cond, const dt_fold_tensor *x, const dt_fold_tensor *y,
                      dt_fold_tensor *out, char *why, size_t size) {
    if (!dt_fold_is_int(cond->elem_type) || need_batch_free(cond, "condition", why, size))
        return failf(why, size, "its condition is not a boolean free of N");
    if (x->elem_type != y->elem_type) return failf(why, size, "its x and y types differ");
    int rank, rank2;
    int64_t dims[DT_FOLD_MAX_RANK], dims2[DT_FOLD_MAX_RANK];
    if (broadcast_shape(x, y, &rank, dims)) return failf(why, size, "x and y do not broadcast");
    dt_fold_tensor xy = {.rank = rank};
    memcpy(xy.dims, dims, sizeof dims);
    if (broadcast_shape(cond, &xy, &rank2, dims2))
        return failf(why, size, "its condition does not broadcast");
    if (make(out, x->elem_type, rank2, dims2, why, size)) return -1;
    for (size_t i = 0; i < out->count; i++) {
        const int take_x = cond->c[broadcast_index(cond, rank2, dims2, i)] != 0;
        const dt_fold_tensor *src = take_x ? x : y;
        copy_elem(out, i, src, broadcast_index(src, rank2, dims2, i));
    }
    return 0;
}

static int fold_cast(const Onnx__NodeProto *n, const dt_fold_tensor *t, dt_fold_tensor *out,
                     char *why, size_t size) {
    const int to = (int)attr_int(n, "to", -1);
    if (make(out, to, t->rank, t->dims, why, size)) return -1;
    for (size_t i = 0; i < t->count; i++) {
        if (is_float(to)) {
            if (t->k && t->k[i]) {
                dt_fold_free(out);
                return failf(why, size, "it casts a value of N to a float");
            }
            out->f[i] = to == T_FLOAT ? (float)as_double(t, i) : as_double(t, i);
        } else if (t->f) {
            const double v = t->f[i];
            if (!(fabs(v) < 9.2e18)) {
                dt_fold_free(out);
                return failf(why, size, "it casts %g to an integer", v);
            }
            out->c[i] = narrow(to, to == T_BOOL ? v != 0 : (int64_t)v);
        } else {
            if (t->k[i] && to == T_BOOL) {
                dt_fold_free(out);
                return failf(why, size, "it casts a value of N to bool");
            }
            out->k[i] = t->k[i];
            out->c[i] = narrow(to, t->c[i]);
        }
    }
    return 0;
}

/* Reshape of a constant (0 copies the input's axis, -1 takes the rest). */
static int fold_reshape(const Onnx__NodeProto *n, const dt_fold_tensor *t,
                        const dt_fold_tensor *shape, dt_fold_tensor *out, char *why, size_t size) {
    if (!dt_fold_is_int(shape->elem_type) || shape->count > DT_FOLD_MAX_RANK ||
        need_batch_free(shape, "shape", why, size))
        return failf(why, size, "its shape is not a short list of integers free of N");
    int64_t dims[DT_FOLD_MAX_RANK], known = 1;
    int infer = -1;
    const int allowzero = attr_int(n, "allowzero", 0) != 0;
    for (size_t i = 0; i < shape->count; i++) {
        dims[i] = fixed(shape, i);
        if (dims[i] == 0 && !allowzero) dims[i] = (int)i < t->rank ? t->dims[i] : -2;
        if (dims[i] == -1 && infer < 0)
            infer = (int)i;
        else if (dims[i] < 0)
            return failf(why, size, "its shape holds %lld", (long long)fixed(shape, i));
        else
            known *= dims[i];
    }
    if (infer >= 0) dims[infer] = known ? (int64_t)t->count / known : 0;
    return reshaped(t, (int)shape->count, dims, out, why, size);
}

/* numpy's broadcast of t to `shape` (Expand). */
static int fold_expand(const dt_fold_tensor *t, const dt_fold_tensor *shape, dt_fold_tensor *out,
                       char *why, size_t size) {
    if (!dt_fold_is_int(shape->elem_type) || shape->count > DT_FOLD_MAX_RANK)
        return failf(why, size, "its shape is not a short list of integers");
    if (need_batch_free(shape, "output's shape", why, size)) return -1;
    dt_fold_tensor s = {.rank = (int)shape->count};
    for (size_t i = 0; i < shape->count; i++) s.dims[i] = fixed(shape, i);
    int rank;
    int64_t dims[DT_FOLD_MAX_RANK];
    if (broadcast_shape(t, &s, &rank, dims))
        return failf(why, size, "its shape does not broadcast");
    if (make(out, t->elem_type, rank, dims, why, size)) return -1;
    for (size_t i = 0; i < out->count; i++) copy_elem(out, i, t, broadcast_index(t, rank, dims, i));
    return 0;
}

static const char *const folded_ops[] = {
    "Shape", "Gather",   "Unsqueeze", "Squeeze", "Concat", "Slice", "ConstantOfShape",
    "Range", "Equal",    "Where",     "Cast",    "Add",    "Sub",   "Mul",
    "Div",   "Identity", "Reshape",   "Expand"};

int dt_fold_takes(const char *op) {
    for (size_t i = 0; i < sizeof folded_ops / sizeof *folded_ops; i++)
        if (!strcmp(op, folded_ops[i])) return 1;
    return 0;
}

int dt_fold_node(const Onnx__NodeProto *n, long long opset, const dt_fold_tensor *const *ins,
                 size_t n_in, dt_fold_tensor *out, char *why, size_t size) {
    const char *op = n->op_type ? n->op_type : "";
    memset(out, 0, sizeof *out);
    if (n_in < 1 || !ins[0]) return failf(why, size, "its first input is missing");
#define NEED(count)                                                                                \
    do {                                                                                           \
        for (size_t q_ = 0; q_ < (count); q_++)                                                    \
            if (q_ >= n_in || !ins[q_]) return failf(why, size, "an input is missing");            \
    } while (0)
    if (!strcmp(op, "Shape")) {
        int64_t k[DT_FOLD_MAX_RANK] = {0};
        return dt_fold_shape(n, ins[0]->rank, k, ins[0]->dims, out, why, size);
    }
    if (!strcmp(op, "Identity"))
        return reshaped(ins[0], ins[0]->rank, ins[0]->dims, out, why, size);
    if (!strcmp(op, "Gather")) {
        NEED(2);
        return fold_gather(n, ins[0], ins[1], out, why, size);
    }
    if (!strcmp(op, "Unsqueeze") || !strcmp(op, "Squeeze"))
        return fold_unsqueeze(n, ins[0], opset >= 13 && n_in > 1 ? ins[1] : NULL, op[0] == 'S', out,
                              why, size);
    if (!strcmp(op, "Concat")) {
        NEED(n_in);
        return fold_concat(n, ins, n_in, out, why, size);
    }
    if (!strcmp(op, "Slice")) return fold_slice(n, opset, ins, n_in, out, why, size);
    if (!strcmp(op, "ConstantOfShape")) return fold_constant_of_shape(n, ins[0], out, why, size);
    if (!strcmp(op, "Range")) {
        NEED(3);
        return fold_range(ins[0], ins[1], ins[2], out, why, size);
    }
    if (!strcmp(op, "Where")) {
        NEED(3);
        return fold_where(ins[0], ins[1], ins[2], out, why, size);
    }
    if (!strcmp(op, "Cast")) return fold_cast(n, ins[0], out, why, size);
    if (!strcmp(op, "Reshape")) {
        NEED(2);
        return fold_reshape(n, ins[0], ins[1], out, why, size);
    }
    if (!strcmp(op, "Expand")) {
        NEED(2);
        return fold_expand(ins[0], ins[1], out, why, size);
    }
    const int bop = !strcmp(op, "Add")     ? OP_ADD
                    : !strcmp(op, "Sub")   ? OP_SUB
                    : !strcmp(op, "Mul")   ? OP_MUL
                    : !strcmp(op, "Div")   ? OP_DIV
                    : !strcmp(op, "Equal") ? OP_EQUAL
                                           : -1;
    if (bop >= 0) {
        NEED(2);
        return binary(bop, ins[0], ins[1], out, why, size);
    }
#undef NEED
    return failf(why, size, "not an operator the importer folds");
}
