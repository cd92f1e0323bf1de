/* The ONNX importer (onnx.h): protobuf-c reads the file with the parser generated from
 * Debian's onnx.proto (libonnx-dev); each node becomes one dt_model_* call. */
#define _XOPEN_SOURCE 700 /* realpath */
#include "nn/onnx.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/outfile.h"
#include "core/textfile.h"
#include "nn/onnx_fold.h"
#include "onnx/onnx.pb-c.h"

/* protobuf's own limit on a message; bigger models keep their weights in external files */
#define MAX_FILE_BYTES ((size_t)2 << 30)
/* a dimension beyond this is a corrupt or hostile file, not a model */
#define MAX_DIM (1 << 24)
/* values a sample of any activation (1 GiB of floats): C*H*W past it, or past int,
 * is a hostile file, not an image model */
#define MAX_SAMPLE_VALUES (1LL << 28)
/* parameters and buffers, all layers together (4 GiB of floats; VGG-16 has 138 M): each
 * initializer may declare 2^32 values, and a sparse external file backs any number */
#define MAX_PARAMETERS ((size_t)1 << 30)
/* the largest CNN exports have a few thousand nodes (GoogLeNet's: 199); a file of more is
 * refused before any work */
#define MAX_NODES 20000
/* and the names of values (node inputs and outputs, initializers, graph inputs) */
#define MAX_NAMES (1 << 20)
/* the opsets of ONNX's default domain dtrain imports: up to ONNX 1.12's newest (the
 * exports and conformance cases it is tested on: 1 to 15) */
#define MAX_OPSET 17

int dt_onnx_is_path(const char *name) {
    const size_t n = name ? strlen(name) : 0;
    return n > 5 && !strcmp(name + n - 5, ".onnx");
}

/* ------------------------------------------------------------------ reading */

/* protobuf-c unpacks nested messages by recursion: a file of subgraphs nested thousands
 * deep (an attribute's graph holding a node whose attribute holds a graph...) would
 * overflow the stack. This walks the wire format first, with a stack of its own, the
 * schema telling which length-delimited fields are messages. An exported CNN nests 8
 * deep (model, graph, value info, type, tensor type, shape, dimension). It also counts
 * the nodes and every field: protobuf-c keeps a record of each field it scans (about 32
 * bytes) and allocates each message, so a file of millions of 2-byte fields would cost
 * gigabytes before the node cap could refuse it. The elements of a packed list of
 * varints count too (each 1 byte on the wire, 8 in memory); packed floats and raw_data,
 * where the weights are, cost what they weigh. Exported CNNs hold about 28 fields a node
 * (GoogLeNet's 199 nodes: 5,565), so 2^21 is 100 a node at the node cap. Returns what is
 * past its bound (0 if none: a malformed file is left to unpack to refuse). */
#define MAX_NESTING 32
#define MAX_FIELDS  (1 << 21)
enum { WIRE_OK, WIRE_TOO_DEEP, WIRE_TOO_MANY_NODES, WIRE_TOO_MANY_FIELDS };
/* a packed repeated field of varints: its elements each cost a scanned value */
static int packed_varints(const ProtobufCFieldDescriptor *f) {
    if (!f || f->label != PROTOBUF_C_LABEL_REPEATED) return 0;
    switch (f->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_BOOL:
    case PROTOBUF_C_TYPE_ENUM:
        return 1;
    default:
        return 0;
    }
}
static int wire_check(const uint8_t *p, size_t len) {
    struct {
        const ProtobufCMessageDescriptor *desc;
        size_t end;
    } stack[MAX_NESTING];
    int depth = 0;
    long long nodes = 0, fields = 0;
    stack[0].desc = &onnx__model_proto__descriptor;
    stack[0].end = len;
    size_t pos = 0;
    for (;;) {
        while (depth > 0 && pos == stack[depth].end) depth--;
        if (pos >= stack[depth].end) return 0; /* the end of the file (or malformed) */
        uint64_t key = 0, size = 0;
        int shift = 0;
        do { /* the varint key */
            if (pos >= stack[depth].end || shift > 63) return 0;
            key |= (uint64_t)(p[pos] & 0x7F) << shift;
            shift += 7;
        } while (p[pos++] & 0x80);
        const unsigned wire = (unsigned)(key & 7);
        if (++fields > MAX_FIELDS) return WIRE_TOO_MANY_FIELDS;
        size_t skip = 0;
        if (wire == 0) { /* a varint */
            while (pos < stack[depth].end && (p[pos] & 0x80)) pos++;
            skip = 1;
        } else if (wire == 1) {
            skip = 8;
        } else if (wire == 5) {
            skip = 4;
        } else if (wire == 2) {
            shift = 0;
            do {
                if (pos >= stack[depth].end || shift > 63) return 0;
                size |= (uint64_t)(p[pos] & 0x7F) << shift;
                shift += 7;
            } while (p[pos++] & 0x80);
            if (size > stack[depth].end - pos) return 0;
            const ProtobufCFieldDescriptor *f =
                protobuf_c_message_descriptor_get_field(stack[depth].desc, (unsigned)(key >> 3));
            if (packed_varints(f)) { /* one per byte that ends a varint */
                for (size_t i = 0; i < (size_t)size; i++)
                    if (!(p[pos + i] & 0x80) && ++fields > MAX_FIELDS) return WIRE_TOO_MANY_FIELDS;
            }
            if (f && f->type == PROTOBUF_C_TYPE_MESSAGE) {
                if (depth + 1 >= MAX_NESTING) return WIRE_TOO_DEEP;
                if (f->descriptor == &onnx__node_proto__descriptor && ++nodes > MAX_NODES)
                    return WIRE_TOO_MANY_NODES;
                depth++;
                stack[depth].desc = f->descriptor;
                stack[depth].end = pos + (size_t)size;
                continue;
            }
            skip = (size_t)size;
        } else {
            return 0; /* groups or garbage: not protobuf-c's to parse either */
        }
        if (skip > stack[depth].end - pos) return 0;
        pos += skip;
    }
}

static Onnx__ModelProto *load_model(const char *path, dt_error *err) {
    size_t len = 0;
    char *bytes = dt_file_read(path, "ONNX model", MAX_FILE_BYTES, &len, err);
    if (!bytes) return NULL;
    const int wire = wire_check((const uint8_t *)bytes, len);
    if (wire != WIRE_OK) {
        free(bytes);
        if (wire == WIRE_TOO_DEEP)
            dt_error_set(err,
                         "%s: messages nested more than %d deep (subgraphs, which dtrain does "
                         "not import)",
                         path, MAX_NESTING);
        else if (wire == WIRE_TOO_MANY_NODES)
            dt_error_set(err, "%s: more than the %d nodes that dtrain imports", path, MAX_NODES);
        else
            dt_error_set(err, "%s: more than %d protobuf fields (not a CNN's graph)", path,
                         MAX_FIELDS);
        return NULL;
    }
    Onnx__ModelProto *model = onnx__model_proto__unpack(NULL, len, (const uint8_t *)bytes);
    free(bytes);
    if (!model) {
        dt_error_set(err,
                     "%s: not an ONNX model (its protobuf does not parse: truncated, or "
                     "another format)",
                     path);
        return NULL;
    }
    if (!model->graph) {
        onnx__model_proto__free_unpacked(model, NULL);
        dt_error_set(err, "%s: an ONNX model without a graph", path);
        return NULL;
    }
    return model;
}

/* ------------------------------------------------------------------ the import */

enum { V_ACT = 1, V_CONST = 2, V_SHAPE = 3 };
enum { MHA_MAX_RANK = 3 };

typedef struct onnx_value {
    const char *name; /* the ONNX name, owned by the proto */
    int kind;         /* V_ACT (an activation: dtrain value `id`) or V_CONST (`tensor`) */
    int id;
    const Onnx__TensorProto *tensor;
    int from_constant;               /* V_CONST: a Constant node's value */
    const Onnx__NodeProto *taken_by; /* V_CONST: the node that took it as a weight */
    /* a MatMul's output whose bias no Add has given yet: that MatMul and the bias's
     * tensor entry (matmul NULL otherwise) */
    const Onnx__NodeProto *matmul;
    int bias_tensor;
    /* V_CONST folded at import (onnx_fold.h), owned: its elements (k*N + c), and as a
     * TensorProto (`tensor` points at it) when no element depends on N */
    dt_fold_tensor *fold;
    Onnx__TensorProto *folded_proto;
    /* V_CONST: a Transpose (perm [1, 0]) of the 2-D initializer `tensor`: a MatMul by
     * it is a linear layer whose weight the file holds as dtrain does, [out, in] */
    int transposed_weight;
    /* V_SHAPE: a value inside nn.MultiheadAttention's export, which dtrain computes
     * batch-first in ops of its own (import_mha, from node `inside`): only its ONNX
     * shape is known, axis d of k[d]*N + c[d], for the Shape nodes that read it */
    const Onnx__NodeProto *inside;
    int shape_rank;
    int64_t shape_k[MHA_MAX_RANK], shape_c[MHA_MAX_RANK];
    /* a Pad of zeros on H and W, folded into the Conv or AveragePool that alone reads it:
     * its pads {top, left, bottom, right} (padded 0 otherwise; id is the Pad's input) */
    int padded;
    int pad[4];
} onnx_value;

/* What a node import_mha took in must hold once its shape arithmetic is folded: a
 * Reshape's target (rank axes, k[d]*N + c[d]) or a Slice's bounds (c[0] to c[1] of
 * the last axis). */
typedef struct shape_check {
    size_t node;
    int rank;
    int64_t k[MHA_MAX_RANK], c[MHA_MAX_RANK];
} shape_check;

/* One tensor entry's starting values: `count` floats from an initializer. */
typedef struct pending_copy {
    int entry;
    const Onnx__TensorProto *tensor;
    int transpose; /* a Gemm's B given [in, out]: stored [out, in] */
    int variance;  /* a BatchNormalization's running variance: no value below 0 */
} pending_copy;

/* A name of the graph: its value (an index into values, -1 until defined) and how many
 * node inputs read it (counted once, over the whole graph). */
typedef struct name_slot {
    const char *name;
    int value;
    int readers;
    int is_initializer;
    int transposed; /* (writing back) a Gemm's B of transB 0 or a MatMul's: [in, out] */
    int producer;   /* the node whose output it is (-1: an input, an initializer) */
    int first;      /* its readers: reader_nodes[first .. first + readers) */
} name_slot;

typedef struct importer {
    const char *path;
    char folder[4096]; /* the model's folder: external data must be inside it */
    const Onnx__GraphProto *g;
    dt_model *m;
    onnx_value *values;
    int n_values, cap_values;
    name_slot *slots;  /* every name of the graph, once each, sorted (index_names) */
    int *reader_nodes; /* each name's reading nodes in graph order (name_slot.first) */
    size_t n_slots;
    /* per dtrain storage: the reads still to come of any name it holds (an Identity,
     * Flatten, Reshape or Pad gives a storage a second name); an in-place ReLU needs 1 */
    int *storage_readers;
    int cap_storage_readers;
    long long opset; /* of the default domain */
    pending_copy *copies;
    int n_copies, cap_copies;
    dt_error *err;
    int failed;
    int any_output;    /* dt_onnx_build_any: the last value may be any shape */
    size_t node_index; /* the node being imported */
    /* per node of the graph: 1 when an earlier node's import took it in (a pattern's
     * later nodes: GELU, SiLU, the decomposed LayerNorm, attention); 2: taken in, and
     * its shape_check to run when reached */
    unsigned char *fused;
    shape_check *checks;
    int n_checks, cap_checks;
} importer;

static int fail(importer *im, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(importer *im, const char *fmt, ...) {
    if (im->failed) return -1;
    im->failed = 1;
    char what[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    /* names come from the file: a newline or an escape would make the one line many,
     * or rewrite the terminal */
    for (char *c = what; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = '?';
    return dt_error_set(im->err, "%s: %s", im->path, what);
}

static int fail_node(importer *im, const Onnx__NodeProto *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail_node(importer *im, const Onnx__NodeProto *n, const char *fmt, ...) {
    char why[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    return fail(im, "node '%s' (%s): %s", n->name && *n->name ? n->name : "(unnamed)",
                n->op_type ? n->op_type : "?", why);
}

static int slot_order(const void *a, const void *b) {
    return strcmp(((const name_slot *)a)->name, ((const name_slot *)b)->name);
}

/* The name's slot (NULL if the graph has no such name): a binary search of the sorted
 * table, O(log n) whatever the names (a hash table without a secret key could be
 * flooded with names chosen to collide). */
static name_slot *slot_of(const importer *im, const char *name) {
    if (!name || !*name || !im->n_slots) return NULL;
    const name_slot key = {.name = name};
    return bsearch(&key, im->slots, im->n_slots, sizeof key, slot_order);
}

static onnx_value *find_value(importer *im, const char *name) {
    const name_slot *s = slot_of(im, name);
    return s && s->value >= 0 ? &im->values[s->value] : NULL;
}
static onnx_value *add_value(importer *im, const char *name, int kind) {
    if (!name || !*name) {
        fail(im, "a value without a name");
        return NULL;
    }
    if (find_value(im, name)) {
        fail(im, "the value '%s' is defined twice (ONNX values are assigned once)", name);
        return NULL;
    }
    if (im->n_values == im->cap_values) {
        const int cap = im->cap_values ? 2 * im->cap_values : 64;
        onnx_value *v = realloc(im->values, (size_t)cap * sizeof *v);
        if (!v) {
            fail(im, "out of memory");
            return NULL;
        }
        im->values = v;
        im->cap_values = cap;
    }
    name_slot *s = slot_of(im, name);
    if (!s) { /* index_names holds every name of the graph */
        fail(im, "the value '%s' is missing from the name table", name);
        return NULL;
    }
    s->value = im->n_values;
    onnx_value *v = &im->values[im->n_values++];
    memset(v, 0, sizeof *v);
    v->name = name;
    v->kind = kind;
    v->id = -1;
    return v;
}

static int add_copy(importer *im, int entry, const Onnx__TensorProto *t, int transpose) {
    if (im->n_copies == im->cap_copies) {
        const int cap = im->cap_copies ? 2 * im->cap_copies : 64;
        pending_copy *c = realloc(im->copies, (size_t)cap * sizeof *c);
        if (!c) return fail(im, "out of memory");
        im->copies = c;
        im->cap_copies = cap;
    }
    im->copies[im->n_copies++] = (pending_copy){entry, t, transpose, 0};
    return 0;
}

/* A tensor's element count from its dims, each in [0, MAX_DIM]; -1 past that. */
/* A tensor's name for messages (a Constant node's tensor may have none). */
static const char *tname(const Onnx__TensorProto *t) {
    return t->name && *t->name ? t->name : "(a Constant node's value)";
}

static long long numel_of(const Onnx__TensorProto *t) {
    long long n = 1;
    for (size_t i = 0; i < t->n_dims; i++) {
        if (t->dims[i] < 0 || t->dims[i] > MAX_DIM) return -1;
        n *= t->dims[i];
        if (n > (1LL << 32)) return -1;
    }
    return n;
}

/* The bytes of an initializer kept in an external file: "location" relative to the
 * model's folder (no absolute path, no ".."), "offset" and "length". */
static int external_bytes(importer *im, const Onnx__TensorProto *t, size_t want, void *out) {
    const char *location = NULL;
    long long offset = 0, length = -1;
    for (size_t i = 0; i < t->n_external_data; i++) {
        const Onnx__StringStringEntryProto *e = t->external_data[i];
        if (!e->key || !e->value) continue;
        char *end = NULL;
        if (!strcmp(e->key, "location")) {
            location = e->value;
        } else if (!strcmp(e->key, "offset") || !strcmp(e->key, "length")) {
            errno = 0;
            const long long v = strtoll(e->value, &end, 10);
            if (errno || end == e->value || *end || v < 0)
                return fail(im, "initializer '%s': external data %s '%s' is not a byte count",
                            tname(t), e->key, e->value);
            if (!strcmp(e->key, "offset"))
                offset = v;
            else
                length = v;
        }
    }
    if (!location || !*location)
        return fail(im, "initializer '%s': external data without a location", tname(t));
    if (location[0] == '/' || !strcmp(location, "..") || !strncmp(location, "../", 3) ||
        strstr(location, "/../") ||
        (strlen(location) >= 3 && !strcmp(location + strlen(location) - 3, "/..")))
        return fail(im,
                    "initializer '%s': external data '%s' is outside the model's folder (an "
                    "absolute path or '..')",
                    tname(t), location);
    if (length >= 0 && (size_t)length != want)
        return fail(im, "initializer '%s': external data of %lld bytes, its shape needs %zu",
                    tname(t), length, want);
    char file[8192];
    if (snprintf(file, sizeof file, "%s/%s", im->folder, location) >= (int)sizeof file)
        return fail(im, "initializer '%s': external data path too long", tname(t));
    /* a symbolic link may still lead out of the folder: compare the real paths */
    char real_file[PATH_MAX], real_folder[PATH_MAX];
    if (!realpath(file, real_file) || !realpath(im->folder, real_folder))
        return fail(im, "initializer '%s': cannot open its external data %s: %s", tname(t), file,
                    strerror(errno));
    const size_t fl = strlen(real_folder);
    if (strncmp(real_file, real_folder, fl) || (real_file[fl] != '/' && fl > 1))
        return fail(im, "initializer '%s': external data '%s' leads outside the model's folder",
                    tname(t), location);
    /* non-blocking: a FIFO without a writer opens at once (and is refused), as
     * core/textfile opens; then blocking reads of a regular file */
    const int fd = open(real_file, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return fail(im, "initializer '%s': cannot open its external data %s: %s", tname(t), file,
                    strerror(errno));
    struct stat st;
    if (fstat(fd, &st)) {
        const int why = errno;
        close(fd);
        return fail(im, "initializer '%s': cannot read its external data %s: %s", tname(t), file,
                    strerror(why));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return fail(im, "initializer '%s': its external data %s is %s, not a regular file",
                    tname(t), file,
                    S_ISFIFO(st.st_mode)   ? "a FIFO"
                    : S_ISDIR(st.st_mode)  ? "a directory"
                    : S_ISCHR(st.st_mode)  ? "a character device"
                    : S_ISBLK(st.st_mode)  ? "a block device"
                    : S_ISSOCK(st.st_mode) ? "a socket"
                                           : "something else");
    }
    const int flags = fcntl(fd, F_GETFL);
    FILE *f = flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) ? NULL : fdopen(fd, "rb");
    if (!f) {
        const int why = errno;
        close(fd);
        return fail(im, "initializer '%s': cannot open its external data %s: %s", tname(t), file,
                    strerror(why));
    }
    /* out NULL: only that the bytes are there */
    /* the size from fstat, compared without a sum (offset near 2^63 overflowed it) */
    int rc = 0;
    if (offset > (long long)st.st_size || want > (unsigned long long)st.st_size - offset)
        rc = fail(im, "initializer '%s': its external data %s holds %lld bytes, not %lld + %zu",
                  tname(t), file, (long long)st.st_size, offset, want);
    else if (out && (fseeko(f, (off_t)offset, SEEK_SET) || fread(out, 1, want, f) != want))
        rc = fail(im, "initializer '%s': cannot read its external data %s", tname(t), file);
    fclose(f);
    return rc;
}

/* count floats of a FLOAT tensor into out (raw_data little-endian as this host, the
 * typed field, or an external file); out NULL: only checks that they are there. */
static int tensor_floats(importer *im, const Onnx__TensorProto *t, float *out, size_t count) {
    if (t->data_type != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT)
        return fail(im, "initializer '%s': element type %d, not float", tname(t), t->data_type);
    const size_t bytes = count * sizeof(float);
    if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
        return external_bytes(im, t, bytes, out);
    if (t->has_raw_data && t->raw_data.len) {
        if (t->raw_data.len != bytes)
            return fail(im, "initializer '%s': %zu bytes of data, its shape needs %zu", tname(t),
                        t->raw_data.len, bytes);
        if (out) memcpy(out, t->raw_data.data, bytes);
        return 0;
    }
    if (t->n_float_data != count)
        return fail(im, "initializer '%s': %zu values, its shape needs %zu", tname(t),
                    t->n_float_data, count);
    if (out && count) memcpy(out, t->float_data, bytes);
    return 0;
}

/* An INT64 constant's values (a Reshape's shape), at most `max`. */
static int tensor_int64s(importer *im, const Onnx__TensorProto *t, int64_t *out, int max,
                         int *count) {
    const long long n = numel_of(t);
    if (t->data_type != ONNX__TENSOR_PROTO__DATA_TYPE__INT64 || n < 0 || n > max)
        return fail(im, "the constant '%s' is not a short list of int64", tname(t));
    *count = (int)n;
    if (t->has_raw_data && t->raw_data.len) {
        if (t->raw_data.len != (size_t)n * sizeof(int64_t))
            return fail(im, "the constant '%s': %zu bytes for %lld int64", tname(t),
                        t->raw_data.len, n);
        memcpy(out, t->raw_data.data, t->raw_data.len);
        return 0;
    }
    if (t->n_int64_data != (size_t)n)
        return fail(im, "the constant '%s': %zu values for %lld", tname(t), t->n_int64_data, n);
    for (long long i = 0; i < n; i++) out[i] = t->int64_data[i];
    return 0;
}

/* A scalar float constant (Dropout's ratio). */
static int tensor_scalar(importer *im, const Onnx__TensorProto *t, float *out) {
    if (numel_of(t) != 1) return fail(im, "the constant '%s' is not a scalar", tname(t));
    if (t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT) return tensor_floats(im, t, out, 1);
    if (t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE) {
        double d;
        if (t->has_raw_data && t->raw_data.len == sizeof d)
            memcpy(&d, t->raw_data.data, sizeof d);
        else if (t->n_double_data == 1)
            d = t->double_data[0];
        else
            return fail(im, "the constant '%s' has no value", tname(t));
        *out = (float)d;
        return 0;
    }
    return fail(im, "the constant '%s' is not a float", tname(t));
}

static const Onnx__AttributeProto *attr(const Onnx__NodeProto *n, const char *name) {
    for (size_t i = 0; i < n->n_attribute; i++)
        if (n->attribute[i]->name && !strcmp(n->attribute[i]->name, name)) return n->attribute[i];
    return NULL;
}

static long long attr_int(const Onnx__NodeProto *n, const char *name, long long fallback) {
    const Onnx__AttributeProto *a = attr(n, name);
    return a && a->has_i ? (long long)a->i : fallback;
}

static float attr_float(const Onnx__NodeProto *n, const char *name, float fallback) {
    const Onnx__AttributeProto *a = attr(n, name);
    return a && a->has_f ? a->f : fallback;
}

/* An INTS attribute with `want` entries all equal (square kernels, one stride, one
 * pad); absent: fallback. -1 if the entries differ or are out of range. */
static int attr_same_ints(const Onnx__NodeProto *n, const char *name, size_t want, int fallback) {
    const Onnx__AttributeProto *a = attr(n, name);
    if (!a || a->n_ints == 0) return fallback;
    if (a->n_ints != want) return -1;
    for (size_t i = 1; i < a->n_ints; i++)
        if (a->ints[i] != a->ints[0]) return -1;
    return a->ints[0] >= 0 && a->ints[0] <= MAX_DIM ? (int)a->ints[0] : -1;
}

/* auto_pad absent, empty or NOTSET: the pads are explicit (a bytes field: no NUL) */
static int explicit_pads(const Onnx__NodeProto *n) {
    const Onnx__AttributeProto *a = attr(n, "auto_pad");
    if (!a || !a->has_s || a->s.len == 0) return 1;
    return a->s.len == 6 && !memcmp(a->s.data, "NOTSET", 6);
}

/* How many node inputs read the value `name`. */
static int readers(const importer *im, const char *name) {
    const name_slot *s = slot_of(im, name);
    return s ? s->readers : 0;
}

/* Counts the graph's names and their readers, once: a sorted table then answers both in
 * O(log n) (the import was quadratic in the node count). */
static int index_names(importer *im) {
    const Onnx__GraphProto *g = im->g;
    size_t names = g->n_input + g->n_initializer;
    for (size_t i = 0; i < g->n_node; i++) names += g->node[i]->n_input + g->node[i]->n_output;
    if (names > MAX_NAMES)
        return fail(im, "%zu names of values, past the %d that dtrain imports", names, MAX_NAMES);
    name_slot *all = calloc(names + 1, sizeof *all);
    if (!all) return fail(im, "out of memory for %zu names", names);
    /* every occurrence: a node's input reads its name, an initializer marks it */
    size_t n = 0;
    for (size_t i = 0; i < g->n_node; i++) {
        const Onnx__NodeProto *node = g->node[i];
        for (size_t q = 0; q < node->n_input; q++)
            if (node->input[q] && *node->input[q])
                all[n++] = (name_slot){node->input[q], -1, 1, 0, 0, -1, 0};
        for (size_t q = 0; q < node->n_output; q++)
            if (node->output[q] && *node->output[q])
                all[n++] = (name_slot){node->output[q], -1, 0, 0, 0, (int)i, 0};
    }
    for (size_t i = 0; i < g->n_initializer; i++)
        if (g->initializer[i]->name && *g->initializer[i]->name)
            all[n++] = (name_slot){g->initializer[i]->name, -1, 0, 1, 0, -1, 0};
    for (size_t i = 0; i < g->n_input; i++)
        if (g->input[i]->name && *g->input[i]->name)
            all[n++] = (name_slot){g->input[i]->name, -1, 0, 0, 0, -1, 0};
    qsort(all, n, sizeof *all, slot_order);
    size_t unique = 0; /* merged in place: the counts summed, the marks kept */
    for (size_t i = 0; i < n; i++) {
        if (unique && !strcmp(all[unique - 1].name, all[i].name)) {
            all[unique - 1].readers += all[i].readers;
            all[unique - 1].is_initializer |= all[i].is_initializer;
            if (all[unique - 1].producer < 0) all[unique - 1].producer = all[i].producer;
        } else {
            all[unique++] = all[i];
        }
    }
    im->slots = all;
    im->n_slots = unique;
    /* each name's readers, node by node: the patterns ask who reads a value without
     * walking the whole graph (a walk per pattern made long chains quadratic) */
    size_t total = 0;
    for (size_t i = 0; i < unique; i++) {
        all[i].first = (int)total;
        total += (size_t)all[i].readers;
    }
    im->reader_nodes = malloc((total + 1) * sizeof *im->reader_nodes);
    int *filled = calloc(unique + 1, sizeof *filled);
    if (!im->reader_nodes || !filled) {
        free(filled);
        return fail(im, "out of memory for %zu names' readers", unique);
    }
    for (size_t i = 0; i < g->n_node; i++)
        for (size_t q = 0; q < g->node[i]->n_input; q++) {
            const name_slot *s = slot_of(im, g->node[i]->input[q]);
            if (s) im->reader_nodes[s->first + filled[s - all]++] = (int)i;
        }
    free(filled);
    return 0;
}

/* The nodes reading `name`, in graph order (a node reading it twice, twice): *count of
 * them (0 and NULL for a name no node reads). */
static const int *readers_of(const importer *im, const char *name, int *count) {
    const name_slot *s = slot_of(im, name);
    *count = s ? s->readers : 0;
    return *count ? im->reader_nodes + s->first : NULL;
}

/* Value id's storage now holds the name `name` too: its reads still to come add up
 * (alias = 1: the name is another for a storage whose reads are counted, and the node
 * making it was one of those reads; 0: a storage new, or rewritten in place). */
static int note_readers(importer *im, int id, const char *name, int alias) {
    const int st = im->m->values[id].storage;
    if (st >= im->cap_storage_readers) {
        int cap = im->cap_storage_readers ? im->cap_storage_readers : 64;
        while (cap <= st) cap *= 2;
        int *grown = realloc(im->storage_readers, (size_t)cap * sizeof *grown);
        if (!grown) return fail(im, "out of memory");
        memset(grown + im->cap_storage_readers, 0,
               (size_t)(cap - im->cap_storage_readers) * sizeof *grown);
        im->storage_readers = grown;
        im->cap_storage_readers = cap;
    }
    im->storage_readers[st] =
        alias ? im->storage_readers[st] + readers(im, name) - 1 : readers(im, name);
    return 0;
}

/* A Pad of zeros that its reader cannot fold (a MaxPool, a second reader) becomes a pad2d
 * op of its own, made where that reader first needs it. */
static int materialize_pad(importer *im, const Onnx__NodeProto *n, onnx_value *v) {
    const int id = dt_model_pad2d(im->m, v->id, v->pad, 0.0f);
    if (id < 0) return fail_node(im, n, "%s", im->m->build_error.msg);
    v->id = id;
    v->padded = 0;
    return note_readers(im, id, v->name, 0);
}

/* The node's i-th input as an activation, or NULL after failing. */
static onnx_value *act_input(importer *im, const Onnx__NodeProto *n, size_t i) {
    if (i >= n->n_input || !n->input[i] || !*n->input[i]) {
        fail_node(im, n, "an input is missing");
        return NULL;
    }
    onnx_value *v = find_value(im, n->input[i]);
    if (!v) {
        fail_node(im, n,
                  "its input '%s' is not defined before it (undefined, or the graph is not in "
                  "topological order: a cycle)",
                  n->input[i]);
        return NULL;
    }
    if (v->kind == V_SHAPE) {
        fail_node(im, n,
                  "its input '%s' is inside the multi-head attention dtrain imports whole "
                  "from node '%s': only its shape may be read",
                  n->input[i], v->inside->name ? v->inside->name : "(unnamed)");
        return NULL;
    }
    if (v->kind != V_ACT) {
        /* an eval-mode export shares a weight through an Identity of it */
        const int identity = n->op_type && !strcmp(n->op_type, "Identity");
        fail_node(im, n, "its input '%s' is a constant where dtrain needs an activation%s",
                  n->input[i],
                  identity ? " (an eval-mode export's shared weight: export with "
                             "training=torch.onnx.TrainingMode.TRAINING, as docs/onnx.md shows)"
                           : "");
        return NULL;
    }
    if (v->padded && materialize_pad(im, n, v)) return NULL;
    return v;
}

/* act_input for a Conv or a pool, which fold a Pad of zeros before them into their own
 * pads: pad[4] gets the Pad's {top, left, bottom, right} (zeros if none). */
static onnx_value *act_input_padded(importer *im, const Onnx__NodeProto *n, size_t i, int pad[4],
                                    int can_fold) {
    pad[0] = pad[1] = pad[2] = pad[3] = 0;
    onnx_value *v = i < n->n_input && n->input[i] ? find_value(im, n->input[i]) : NULL;
    /* a MaxPool pads with -inf, an AveragePool with pads of its own that it does not
     * count would count the zeros differently, and a second reader needs them: those get
     * the padded copy (act_input makes it) */
    if (!v || !v->padded || !can_fold || readers(im, v->name) != 1) return act_input(im, n, i);
    memcpy(pad, v->pad, sizeof v->pad);
    return v;
}

/* An INTS attribute of exactly `want` entries in [lo, MAX_DIM] into out; absent: out
 * keeps its values. -1 if malformed. */
static int attr_ints(const Onnx__NodeProto *n, const char *name, size_t want, int lo, int *out) {
    const Onnx__AttributeProto *a = attr(n, name);
    if (!a || a->n_ints == 0) return 0;
    if (a->n_ints != want) return -1;
    for (size_t i = 0; i < want; i++)
        if (a->ints[i] < lo || a->ints[i] > MAX_DIM) return -1;
    for (size_t i = 0; i < want; i++) out[i] = (int)a->ints[i];
    return 0;
}

/* The node's i-th input as a constant (an initializer or a Constant node's), or NULL
 * (optional = 1: absent is fine; else it fails). */
static const Onnx__TensorProto *const_input(importer *im, const Onnx__NodeProto *n, size_t i,
                                            int optional) {
    if (i >= n->n_input || !n->input[i] || !*n->input[i]) {
        if (!optional) fail_node(im, n, "an input is missing");
        return NULL;
    }
    onnx_value *v = find_value(im, n->input[i]);
    if (!v || v->kind != V_CONST) {
        fail_node(im, n,
                  "its input '%s' must be an initializer or constant (dtrain trains weights it "
                  "holds itself)",
                  n->input[i]);
        return NULL;
    }
    if (!v->tensor) /* folded, and a function of the batch size */
        fail_node(im, n,
                  "its input '%s' depends on the batch size N, where dtrain needs a constant",
                  n->input[i]);
    return v->tensor;
}

/* A sample's values c*h*w, each factor checked before the product (the product of three
 * 2^25 sides wraps 64 bits); -1 past MAX_SAMPLE_VALUES. */
static long long sample_values(long long c, long long h, long long w) {
    long long ch, chw;
    if (c < 0 || h < 0 || w < 0 || c > MAX_SAMPLE_VALUES || h > MAX_SAMPLE_VALUES ||
        w > MAX_SAMPLE_VALUES || __builtin_mul_overflow(c, h, &ch) ||
        __builtin_mul_overflow(ch, w, &chw) || chw > MAX_SAMPLE_VALUES)
        return -1;
    return chw;
}

/* The node's output as a new activation with dtrain value id. */
static int set_output(importer *im, const Onnx__NodeProto *n, int id) {
    if (id < 0) {
        fail_node(im, n, "%s", im->m->build_error.msg);
        return -1;
    }
    if (n->n_output < 1 || !n->output[0] || !*n->output[0])
        return fail_node(im, n, "it has no output");
    const dt_value *x = &im->m->values[id];
    if (dt_model_value_floats(im->m, id, 1) > (size_t)MAX_SAMPLE_VALUES)
        return fail_node(im, n, "its output of %zu values a sample is past the %lld dtrain takes",
                         dt_model_value_floats(im->m, id, 1), MAX_SAMPLE_VALUES);
    if (sample_values(x->c, x->h, x->w) < 0)
        return fail_node(im, n,
                         "its output of %dx%dx%d is past the %lld values a sample dtrain "
                         "takes",
                         x->c, x->h, x->w, MAX_SAMPLE_VALUES);
    onnx_value *v = add_value(im, n->output[0], V_ACT);
    if (!v) return -1;
    v->id = id;
    return note_readers(im, id, n->output[0], 0);
}

/* The node's output as another name of input x's storage (Identity, a Pad of zeros,
 * Flatten, Reshape, a MatMul's Add). */
static int set_alias(importer *im, const Onnx__NodeProto *n, int id) {
    if (id < 0) {
        fail_node(im, n, "%s", im->m->build_error.msg);
        return -1;
    }
    if (n->n_output < 1 || !n->output[0] || !*n->output[0])
        return fail_node(im, n, "it has no output");
    onnx_value *v = add_value(im, n->output[0], V_ACT);
    if (!v) return -1;
    v->id = id;
    return note_readers(im, id, n->output[0], 1);
}

/* The dtrain op name for a node: the prefix of its weight's name when that ends in
 * ".weight" (PyTorch's module path), else the node's name. */
static void op_name(const Onnx__NodeProto *n, const Onnx__TensorProto *weight, char *out,
                    size_t size) {
    const char *w = weight && weight->name ? weight->name : "";
    const size_t len = strlen(w);
    if (len > 7 && !strcmp(w + len - 7, ".weight") && len - 7 < size) {
        memcpy(out, w, len - 7);
        out[len - 7] = '\0';
        return;
    }
    snprintf(out, size, "%s", n->name && *n->name ? n->name : (n->op_type ? n->op_type : "op"));
}

/* Gives tensor entry `entry` the initializer's name and its values. */
static int take(importer *im, const Onnx__NodeProto *n, int entry, const Onnx__TensorProto *t,
                int transpose) {
    dt_tensor_entry *e = &im->m->tensors[entry];
    /* what --save and checkpoints could not write back is refused before any training */
    onnx_value *v = t->name && *t->name ? find_value(im, t->name) : NULL;
    if (!v || v->kind != V_CONST || v->tensor != t || v->from_constant)
        return fail_node(im, n,
                         "its weight '%s' is a Constant node's value: dtrain trains initializers "
                         "only (--save writes those back)",
                         tname(t));
    if (v->taken_by) {
        const Onnx__NodeProto *o = v->taken_by;
        return fail_node(im, n,
                         "initializer '%s' is also node '%s''s: tied weights are not supported "
                         "(each layer trains its own)",
                         tname(t), o->name && *o->name ? o->name : "(unnamed)");
    }
    v->taken_by = n;
    if (numel_of(t) != (long long)e->numel) {
        return fail_node(im, n, "initializer '%s' has %lld values where dtrain's %s has %zu",
                         tname(t), numel_of(t), e->name, e->numel);
    }
    if (t->name && *t->name) {
        if (strlen(t->name) >= sizeof e->name) {
            return fail_node(im, n, "initializer name '%.60s...' is longer than %zu characters",
                             t->name, sizeof e->name - 1);
        }
        snprintf(e->name, sizeof e->name, "%s", t->name);
    }
    return add_copy(im, entry, t, transpose);
}

static int dims_are(const Onnx__TensorProto *t, size_t ndim) {
    return t && t->n_dims == ndim && numel_of(t) >= 0;
}

static int import_conv(importer *im, const Onnx__NodeProto *n) {
    int folded[4];
    onnx_value *x = act_input_padded(im, n, 0, folded, 1);
    const Onnx__TensorProto *w = x ? const_input(im, n, 1, 0) : NULL;
    const Onnx__TensorProto *b = w ? const_input(im, n, 2, 1) : NULL;
    if (!w || im->failed) return -1;
    if (!dims_are(w, 4)) return fail_node(im, n, "its weight is not 4-D (only 2-D convolutions)");
    const dt_value xv = im->m->values[x->id];
    const long long groups = attr_int(n, "group", 1);
    const int dilation = attr_same_ints(n, "dilations", 2, 1);
    if (dilation < 1)
        return fail_node(im, n, "only equal dilations (>= 1) along both axes are supported");
    if (groups < 1 || groups > xv.c || xv.c % groups || w->dims[0] % groups)
        return fail_node(im, n, "group %lld does not divide its %d input and %lld output channels",
                         groups, xv.c, (long long)w->dims[0]);
    if (!explicit_pads(n))
        return fail_node(im, n, "auto_pad is not supported (export with explicit pads)");
    int k[2] = {(int)w->dims[2], (int)w->dims[3]}, stride[2] = {1, 1}, pads[4] = {0, 0, 0, 0};
    if (attr_ints(n, "kernel_shape", 2, 1, k) || k[0] != w->dims[2] || k[1] != w->dims[3])
        return fail_node(im, n, "its kernel_shape is not its weight's [kh, kw]");
    if (attr_ints(n, "strides", 2, 1, stride))
        return fail_node(im, n, "its strides are not two values >= 1");
    if (attr_ints(n, "pads", 4, 0, pads))
        return fail_node(im, n, "its pads are not four values >= 0 (top, left, bottom, right)");
    for (int i = 0; i < 4; i++) pads[i] += folded[i];
    if (w->dims[1] * groups != xv.c) {
        return fail_node(im, n,
                         "its weight takes %lld channels in each of %lld groups, its input has %d",
                         (long long)w->dims[1], groups, xv.c);
    }
    if (b && (!dims_are(b, 1) || b->dims[0] != w->dims[0]))
        return fail_node(im, n, "its bias does not match its output channels");
    /* the output's size before dtrain's model computes it in size_t (a wrap to 0 made a
     * 2^64-value output look empty); a pad wider than the kernel is legal (PyTorch's 1x1
     * convolution with padding 1), so only the output's size bounds it */
    const long long span_h = (long long)dilation * (k[0] - 1) + 1,
                    span_w = (long long)dilation * (k[1] - 1) + 1;
    const long long padded_h = (long long)xv.h + pads[0] + pads[2],
                    padded_w = (long long)xv.w + pads[1] + pads[3];
    if (padded_h >= span_h && padded_w >= span_w) {
        const long long ho = (padded_h - span_h) / stride[0] + 1,
                        wo = (padded_w - span_w) / stride[1] + 1;
        if (sample_values(w->dims[0], ho, wo) < 0)
            return fail_node(im, n,
                             "its output of %lldx%lldx%lld is past the %lld values a sample "
                             "dtrain takes",
                             (long long)w->dims[0], ho, wo, MAX_SAMPLE_VALUES);
    }
    char name[80];
    op_name(n, w, name, sizeof name);
    const int y = dt_model_conv2d_rect(im->m, name, x->id, (int)w->dims[0], k[0], k[1], stride[0],
                                       stride[1], pads, dilation, (int)groups, b != NULL);
    if (set_output(im, n, y)) return -1;
    const dt_op *op = &im->m->ops[im->m->n_ops - 1];
    if (take(im, n, op->weight, w, 0)) return -1;
    return b ? take(im, n, op->bias, b, 0) : 0;
}

static int import_batchnorm(importer *im, const Onnx__NodeProto *n) {
    onnx_value *x = act_input(im, n, 0);
    const Onnx__TensorProto *t[4];
    for (int i = 0; i < 4; i++) t[i] = x ? const_input(im, n, (size_t)i + 1, 0) : NULL;
    if (im->failed) return -1;
    const dt_value xv = im->m->values[x->id];
    for (int i = 0; i < 4; i++)
        if (!dims_are(t[i], 1) || t[i]->dims[0] != xv.c)
            return fail_node(im, n,
                             "its scale, bias, mean and variance must each have one "
                             "value per channel");
    /* ONNX's momentum is the running average's weight on the old value, PyTorch's the
     * batch's: torch's 0.1 exports as 0.9f, 0.01 as 0.99f, MNASNet's 0.0003 as 0.9997f.
     * 1 - the float is rounded to 6 decimals (the float's error near 1 is 3e-8), so those
     * read back as torch's own 0.1f, 0.01f and 0.0003f. */
    const float onnx_momentum = attr_float(n, "momentum", 0.9f);
    if (!(onnx_momentum >= 0.0f && onnx_momentum <= 1.0f))
        return fail_node(im, n, "its momentum %g is not in [0, 1]", (double)onnx_momentum);
    const float momentum = (float)(round((1.0 - (double)onnx_momentum) * 1e6) / 1e6);
    const float eps = attr_float(n, "epsilon", 1e-5f);
    if (!(isfinite(eps) && eps > 0.0f))
        return fail_node(im, n, "its epsilon %g is not a positive finite number", (double)eps);
    char name[80];
    op_name(n, t[0], name, sizeof name);
    const int y = dt_model_batchnorm2d_momentum(im->m, name, x->id, eps, momentum);
    if (set_output(im, n, y)) return -1;
    const dt_op *op = &im->m->ops[im->m->n_ops - 1];
    const int entries[4] = {op->weight, op->bias, op->running_mean, op->running_var};
    for (int i = 0; i < 4; i++)
        if (take(im, n, entries[i], t[i], 0)) return -1;
    im->copies[im->n_copies - 1].variance = 1;
    return 0;
}

static int import_pool(importer *im, const Onnx__NodeProto *n, int max) {
    int k[2] = {0, 0}, stride[2] = {1, 1}, pads[4] = {0, 0, 0, 0}, folded[4];
    if (attr_ints(n, "kernel_shape", 2, 1, k) || k[0] < 1)
        return fail_node(im, n, "only 2-D pooling (kernel_shape of two values >= 1) is supported");
    if (attr_ints(n, "strides", 2, 1, stride))
        return fail_node(im, n, "its strides are not two values >= 1");
    if (attr_ints(n, "pads", 4, 0, pads))
        return fail_node(im, n, "its pads are not four values >= 0 (top, left, bottom, right)");
    const long long ceil_mode = attr_int(n, "ceil_mode", 0);
    long long count_pad = max ? 0 : attr_int(n, "count_include_pad", 0);
    const int own_pads = pads[0] || pads[1] || pads[2] || pads[3];
    /* zeros folded in count in the divisor: exact with count_include_pad, or where the
     * node has no pads of its own (every window then counts kh * kw cells either way) */
    onnx_value *x = act_input_padded(im, n, 0, folded, !max && (count_pad || !own_pads));
    if (!x) return -1;
    if (folded[0] || folded[1] || folded[2] || folded[3]) count_pad = 1;
    for (int i = 0; i < 4; i++) pads[i] += folded[i];
    if (n->n_output > 1 && n->output[1] && *n->output[1])
        return fail_node(im, n, "its Indices output is not supported");
    if (!explicit_pads(n))
        return fail_node(im, n, "auto_pad is not supported (export with explicit pads)");
    if (attr_same_ints(n, "dilations", 2, 1) != 1)
        return fail_node(im, n, "dilated pooling is not supported");
    if (max && attr_int(n, "storage_order", 0) != 0)
        return fail_node(im, n, "storage_order 1 is not supported");
    if (pads[0] >= k[0] || pads[2] >= k[0] || pads[1] >= k[1] || pads[3] >= k[1])
        return fail_node(im, n,
                         "its pads %d,%d,%d,%d reach past its %dx%d window: a window of padding "
                         "alone",
                         pads[0], pads[1], pads[2], pads[3], k[0], k[1]);
    return set_output(im, n,
                      dt_model_pool2d_rect(im->m, max ? DT_OP_MAXPOOL2D : DT_OP_AVGPOOL2D, x->id,
                                           k[0], k[1], stride[0], stride[1], pads, ceil_mode != 0,
                                           count_pad != 0));
}

/* ------------------------------------------------------------------ views and folds */

/* The fold of the node's input i: a folded value's own, or a constant's read into
 * *tmp (freed by the caller); NULL after failing. */
/* The most inputs of a node folded at import (a Concat of shape pieces: a few). */
enum { FOLD_MAX_INPUTS = 64 };

static const dt_fold_tensor *fold_input(importer *im, const Onnx__NodeProto *n, size_t i,
                                        dt_fold_tensor *tmp) {
    memset(tmp, 0, sizeof *tmp);
    if (i >= n->n_input || !n->input[i] || !*n->input[i]) {
        fail_node(im, n, "an input is missing");
        return NULL;
    }
    onnx_value *v = find_value(im, n->input[i]);
    if (!v || v->kind != V_CONST) {
        if (!v)
            act_input(im, n, i); /* its message for the undefined */
        else
            fail_node(im, n, "its input '%s' must be a constant (or shape arithmetic dtrain folds)",
                      n->input[i]);
        return NULL;
    }
    if (v->fold) return v->fold;
    char why[300];
    if (dt_fold_from_proto(v->tensor, tmp, why, sizeof why)) {
        fail_node(im, n, "its input '%s': %s", n->input[i], why);
        return NULL;
    }
    return tmp;
}

/* A short list of integers free of N from input i (Squeeze's and Unsqueeze's axes). */
static int const_ints(importer *im, const Onnx__NodeProto *n, size_t i, int64_t *out, int max,
                      int *count) {
    dt_fold_tensor tmp;
    const dt_fold_tensor *t = fold_input(im, n, i, &tmp);
    if (!t) return -1;
    int rc = 0;
    if (!dt_fold_is_int(t->elem_type) || t->count > (size_t)max || !dt_fold_batch_free(t))
        rc = fail_node(im, n, "its input '%s' is not a short list of integers", n->input[i]);
    for (size_t q = 0; rc == 0 && q < t->count; q++) out[q] = t->c[q];
    *count = (int)t->count;
    dt_fold_free(&tmp);
    return rc;
}

/* Folds a node whose inputs are all constants or shapes (onnx_fold.h), once, here:
 * 0 folded, -1 failed, 1 not foldable (an input is an activation, or a float
 * initializer: a weight some op trains), for the op dispatch to take. */
static int try_fold(importer *im, const Onnx__NodeProto *n) {
    const char *op = n->op_type ? n->op_type : "";
    const dt_fold_tensor *ins[FOLD_MAX_INPUTS] = {0};
    dt_fold_tensor tmp[FOLD_MAX_INPUTS], out;
    memset(tmp, 0, sizeof tmp);
    char why[300] = "";
    int rc;
    if (n->n_input > FOLD_MAX_INPUTS || n->n_output != 1) return 1;
    onnx_value *x = n->n_input ? find_value(im, n->input[0]) : NULL;
    if (!strcmp(op, "Shape") && !x) return act_input(im, n, 0) ? 1 : -1;
    if (!strcmp(op, "Shape") && x->kind == V_ACT) {
        /* an activation's shape: [N, dims...], N symbolic */
        const dt_value *xv = &im->m->values[x->id];
        int64_t k[DT_VALUE_MAX_RANK + 1] = {1}, c[DT_VALUE_MAX_RANK + 1] = {0};
        for (int d = 0; d < xv->rank; d++) c[d + 1] = xv->dims[d];
        rc = dt_fold_shape(n, xv->rank + 1, k, c, &out, why, sizeof why);
    } else if (!strcmp(op, "Shape") && x->kind == V_SHAPE) {
        rc = dt_fold_shape(n, x->shape_rank, x->shape_k, x->shape_c, &out, why, sizeof why);
    } else if (!strcmp(op, "Shape") && x->kind == V_CONST) {
        /* a constant's shape, a weight's too: its dims, never its (maybe large) data */
        int64_t k[DT_FOLD_MAX_RANK] = {0}, c[DT_FOLD_MAX_RANK] = {0};
        const int rank = x->fold ? x->fold->rank : (int)x->tensor->n_dims;
        if (rank > DT_FOLD_MAX_RANK) return fail_node(im, n, "its input has %d axes", rank);
        for (int d = 0; d < rank; d++) c[d] = x->fold ? x->fold->dims[d] : x->tensor->dims[d];
        rc = dt_fold_shape(n, rank, k, c, &out, why, sizeof why);
    } else {
        for (size_t i = 0; i < n->n_input; i++) {
            if (!n->input[i] || !*n->input[i]) continue; /* an optional input not given */
            const onnx_value *v = find_value(im, n->input[i]);
            const name_slot *sl = slot_of(im, n->input[i]);
            if (!v) return act_input(im, n, i) ? 1 : -1; /* names the undefined input */
            if (v->kind != V_CONST) return 1;
            if (!v->fold && sl && sl->is_initializer &&
                (v->tensor->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT ||
                 v->tensor->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE))
                return 1;
        }
        for (size_t i = 0; i < n->n_input; i++) {
            if (!n->input[i] || !*n->input[i]) continue;
            if (!(ins[i] = fold_input(im, n, i, &tmp[i]))) break;
        }
        rc = im->failed ? -1 : dt_fold_node(n, im->opset, ins, n->n_input, &out, why, sizeof why);
        for (size_t i = 0; i < n->n_input; i++) dt_fold_free(&tmp[i]);
        if (im->failed) return -1;
    }
    if (rc) return fail_node(im, n, "%s", why);
    onnx_value *v = add_value(im, n->output[0], V_CONST);
    dt_fold_tensor *kept = malloc(sizeof *kept);
    if (!v || !kept) {
        free(kept);
        dt_fold_free(&out);
        return v ? fail(im, "out of memory") : -1;
    }
    *kept = out;
    v->fold = kept;
    v->from_constant = 1; /* never a weight */
    if (dt_fold_batch_free(kept)) {
        v->folded_proto = malloc(sizeof *v->folded_proto);
        if (!v->folded_proto) return fail(im, "out of memory");
        if (dt_fold_to_proto(kept, v->folded_proto, why, sizeof why)) {
            free(v->folded_proto);
            v->folded_proto = NULL;
            return fail_node(im, n, "%s", why);
        }
        v->tensor = v->folded_proto;
    }
    return 0;
}

/* k*N + c as a message writes it: "N", "2*N", "2*N + 1". */
static const char *form_text(int64_t k, int64_t c, char *buf, size_t size) {
    char kn[32] = "";
    if (k == 1)
        snprintf(kn, sizeof kn, "N");
    else if (k)
        snprintf(kn, sizeof kn, "%lld*N", (long long)k);
    if (!k)
        snprintf(buf, size, "%lld", (long long)c);
    else if (!c)
        snprintf(buf, size, "%s", kn);
    else
        snprintf(buf, size, "%s %c %lld", kn, c < 0 ? '-' : '+',
                 c < 0 ? -(long long)c : (long long)c);
    return buf;
}

/* Reshape of an activation: a view. Its shape [N, dims...] may hold 0 (copy the input's
 * axis, allowzero 0) and one -1; the batch axis stays first and whole. */
static int import_reshape(importer *im, const Onnx__NodeProto *n) {
    onnx_value *x = act_input(im, n, 0);
    if (!x) return -1;
    const dt_value xv = im->m->values[x->id];
    const long long per = (long long)im->m->storages[xv.storage].per_sample;
    dt_fold_tensor tmp;
    const dt_fold_tensor *t = fold_input(im, n, 1, &tmp);
    if (!t) return -1;
    int dims[DT_VALUE_MAX_RANK], infer = -1, rc = 0, batch_inferred = 0;
    char text[80];
    long long known = 1;
    const int rank = (int)t->count - 1;
    const int allowzero = attr_int(n, "allowzero", 0) != 0;
    if (!dt_fold_is_int(t->elem_type) || t->rank != 1)
        rc = fail_node(im, n, "its shape is not a list of integers");
    else if (rank < 1 || rank > DT_VALUE_MAX_RANK)
        rc = fail_node(im, n, "a reshape to rank %d; dtrain keeps [batch, 1 to %d axes]", rank + 1,
                       DT_VALUE_MAX_RANK);
    else if (t->k[0] == 1 && t->c[0] == 0)
        ; /* N itself */
    else if (t->k[0] == 0 && t->c[0] == 0 && !allowzero)
        ; /* the input's batch axis */
    else if (t->k[0] == 0 && t->c[0] == -1)
        batch_inferred = 1;
    else if (t->k[0])
        rc = fail_node(im, n,
                       "its shape's first axis is %s, not the batch N: dtrain keeps the batch "
                       "axis first and whole",
                       form_text(t->k[0], t->c[0], text, sizeof text));
    else
        rc = fail_node(im, n,
                       "a reshape to a fixed batch of %lld (export with a dynamic batch axis, as "
                       "docs/onnx.md shows)",
                       (long long)t->c[0]);
    for (int i = 0; rc == 0 && i < rank; i++) {
        const int64_t k = t->k[i + 1], c = t->c[i + 1];
        if (k)
            rc = fail_node(im, n,
                           "its shape's axis %d is %s: it merges the batch axis into another "
                           "(as N*heads), which dtrain does not do (it keeps N first and whole)",
                           i + 1, form_text(k, c, text, sizeof text));
        else if (c == 0 && !allowzero && i < xv.rank)
            dims[i] = xv.dims[i];
        else if (c == -1 && infer < 0 && !batch_inferred)
            infer = i;
        else if (c < 1 || c > MAX_DIM)
            rc = fail_node(im, n, "its shape's axis %d is %lld", i + 1, (long long)c);
        else
            dims[i] = (int)c;
        if (rc == 0 && i != infer) known *= dims[i];
        if (rc == 0 && known > per)
            rc = fail_node(im, n,
                           "its shape holds more values a sample than its input's %lld: it "
                           "would move values across the batch axis",
                           per);
    }
    dt_fold_free(&tmp);
    if (rc) return -1;
    if (infer >= 0) {
        if (per % known)
            return fail_node(im, n, "its -1 axis does not divide its input's %lld values a sample",
                             per);
        dims[infer] = (int)(per / known);
        known = per;
    }
    if (known != per)
        return fail_node(im, n,
                         "its shape holds %lld values a sample, its input %lld: it would move "
                         "values across the batch axis",
                         known, per);
    return set_alias(im, n, dt_model_reshape(im->m, x->id, rank, dims));
}

/* Flatten at axis a >= 1: [N, d1 * ... * d(a-1), rest] is [N, features] when the axes
 * between are ones; otherwise it would merge the batch axis with them. */
static int import_flatten(importer *im, const Onnx__NodeProto *n) {
    onnx_value *x = act_input(im, n, 0);
    if (!x) return -1;
    const dt_value xv = im->m->values[x->id];
    const int full = xv.rank + 1;
    long long axis = attr_int(n, "axis", 1);
    if (axis < 0) axis += full;
    if (axis < 0 || axis > full) return fail_node(im, n, "its axis is outside its input's axes");
    if (axis == 0)
        return fail_node(im, n,
                         "Flatten at axis 0 makes [1, N*...], folding the batch axis into the "
                         "features: dtrain keeps the batch axis first");
    for (int d = 0; d < axis - 1; d++)
        if (xv.dims[d] != 1)
            return fail_node(im, n,
                             "Flatten at axis %lld merges the batch axis with the %d after it: "
                             "dtrain keeps the batch axis first and whole",
                             axis, xv.dims[d]);
    return set_alias(im, n, dt_model_flatten(im->m, x->id));
}

/* Squeeze and Unsqueeze of an activation: views; the batch axis stays. */
static int import_squeeze(importer *im, const Onnx__NodeProto *n, int squeeze) {
    onnx_value *x = act_input(im, n, 0);
    if (!x) return -1;
    const dt_value xv = im->m->values[x->id];
    int64_t axes[DT_VALUE_MAX_RANK + 1];
    int count = -1;
    if (im->opset >= 13) {
        if (n->n_input > 1 && n->input[1] && *n->input[1] &&
            const_ints(im, n, 1, axes, DT_VALUE_MAX_RANK + 1, &count))
            return -1;
    } else {
        const Onnx__AttributeProto *a = attr(n, "axes");
        if (a && a->n_ints) {
            if (a->n_ints > DT_VALUE_MAX_RANK + 1) return fail_node(im, n, "too many axes");
            count = (int)a->n_ints;
            for (int i = 0; i < count; i++) axes[i] = a->ints[i];
        }
    }
    const int full = xv.rank + 1, out_full = squeeze ? full : full + (count > 0 ? count : 0);
    int mark[DT_VALUE_MAX_RANK + 8] = {0}, dims[DT_VALUE_MAX_RANK], rank = 0;
    if (!squeeze && count < 1) return fail_node(im, n, "no axes given");
    if (out_full - 1 > DT_VALUE_MAX_RANK)
        return fail_node(im, n, "its output has %d axes a sample, past dtrain's %d", out_full - 1,
                         DT_VALUE_MAX_RANK);
    for (int i = 0; i < count; i++) {
        const int64_t a = axes[i] < 0 ? axes[i] + out_full : axes[i];
        if (a < 0 || a >= out_full || mark[a]++)
            return fail_node(im, n, "axis %lld is not an axis of its %s", (long long)axes[i],
                             squeeze ? "input" : "output");
        if (a == 0)
            return fail_node(im, n, "it %s the batch axis (axis 0): dtrain keeps it first",
                             squeeze ? "squeezes" : "puts a new axis before");
        if (squeeze && xv.dims[a - 1] != 1)
            return fail_node(im, n, "axis %lld has size %d, not 1", (long long)a, xv.dims[a - 1]);
    }
    if (squeeze) {
        for (int d = 0; d < xv.rank; d++)
            if (!(count < 0 ? xv.dims[d] == 1 : mark[d + 1])) dims[rank++] = xv.dims[d];
    } else {
        for (int a = 1, d = 0; a < out_full; a++) dims[rank++] = mark[a] ? 1 : xv.dims[d++];
    }
    if (rank < 1)
        return fail_node(im, n,
                         "its output is [batch] alone; dtrain's values keep at least one axis a "
                         "sample");
    return set_alias(im, n, dt_model_reshape(im->m, x->id, rank, dims));
}

/* Transpose with the batch axis first (perm[0] = 0): an op, or a view if the rest stays. */
static int import_mha(importer *im, const Onnx__NodeProto *n, onnx_value *x);
static int import_transpose(importer *im, const Onnx__NodeProto *n) {
    onnx_value *x = act_input(im, n, 0);
    if (!x) return -1;
    const dt_value xv = im->m->values[x->id];
    const int full = xv.rank + 1;
    const Onnx__AttributeProto *a = attr(n, "perm");
    int perm[DT_VALUE_MAX_RANK + 1] = {0}, identity = 1;
    if (a && a->n_ints) {
        if (a->n_ints != (size_t)full)
            return fail_node(im, n, "its perm has %zu entries for %d axes", a->n_ints, full);
        for (int i = 0; i < full; i++)
            perm[i] = a->ints[i] >= 0 && a->ints[i] < full ? (int)a->ints[i] : -1;
    } else {
        for (int i = 0; i < full; i++) perm[i] = full - 1 - i; /* ONNX's default: reversed */
    }
    if (full == 3 && perm[0] == 1 && perm[1] == 0 && perm[2] == 2)
        return import_mha(im, n, x); /* nn.MultiheadAttention's export, or refused */
    if (perm[0] != 0)
        return fail_node(im, n,
                         "it moves the batch axis (perm[0] = %d): dtrain keeps the batch axis "
                         "first (and imports such a Transpose only as the start of "
                         "nn.MultiheadAttention's export)",
                         perm[0]);
    int sample_perm[DT_VALUE_MAX_RANK], seen[DT_VALUE_MAX_RANK + 1] = {0};
    for (int i = 1; i < full; i++) {
        if (perm[i] < 1 || seen[perm[i]]++)
            return fail_node(im, n, "its perm is not a permutation of its %d axes", full);
        sample_perm[i - 1] = perm[i] - 1;
        identity = identity && perm[i] == i;
    }
    if (identity) return set_alias(im, n, x->id);
    return set_output(im, n, dt_model_transpose(im->m, x->id, sample_perm));
}

static int import_gemm(importer *im, const Onnx__NodeProto *n) {
    onnx_value *x = act_input(im, n, 0);
    const Onnx__TensorProto *w = x ? const_input(im, n, 1, 0) : NULL;
    const Onnx__TensorProto *b = w ? const_input(im, n, 2, 1) : NULL;
    if (!w || im->failed) return -1;
    const dt_value xv = im->m->values[x->id];
    /* a value of rank 2 or more a sample that is not an image: its rows are the batch's
     * positions (a Gemm on [batch * tokens, features], where the batch was merged into
     * the rows): a linear over the last axis */
    const int rows = xv.rank != 1 && xv.rank != 3;
    const long long in = rows ? (long long)xv.dims[xv.rank - 1] : (long long)xv.c * xv.h * xv.w;
    if (attr_int(n, "transA", 0) != 0) return fail_node(im, n, "transA is not supported");
    if (attr_float(n, "alpha", 1.0f) != 1.0f || attr_float(n, "beta", 1.0f) != 1.0f)
        return fail_node(im, n, "alpha or beta other than 1 is not supported");
    const int trans_b = attr_int(n, "transB", 0) != 0;
    if (!dims_are(w, 2)) return fail_node(im, n, "its weight is not 2-D");
    const long long out = trans_b ? w->dims[0] : w->dims[1],
                    w_in = trans_b ? w->dims[1] : w->dims[0];
    if (w_in != in) {
        return fail_node(im, n, "its weight takes %lld features, its input has %lld", w_in, in);
    }
    /* no C: a linear layer without bias (nn.Linear(bias=False)) */
    if (b && numel_of(b) != out)
        return fail_node(im, n, "its bias does not have one value per output");
    if (!rows && (xv.h != 1 || xv.w != 1))
        return fail_node(im, n, "its input is not flat (export a Flatten before it)");
    char name[80];
    op_name(n, w, name, sizeof name);
    const int y = rows ? dt_model_linear_last_axis(im->m, name, x->id, (int)out, b != NULL)
                       : dt_model_linear_bias(im->m, name, x->id, (int)out, b != NULL);
    if (set_output(im, n, y)) return -1;
    const dt_op *op = &im->m->ops[im->m->n_ops - 1];
    if (take(im, n, op->weight, w, !trans_b)) return -1;
    return b ? take(im, n, op->bias, b, 0) : 0;
}

/* MatMul by a [in, out] initializer: a linear layer whose bias the Add after it gives. */
static int import_matmul_activations(importer *im, const Onnx__NodeProto *n, onnx_value *a,
                                     onnx_value *b);
static int import_matmul_last_axis(importer *im, const Onnx__NodeProto *n, onnx_value *x,
                                   const Onnx__TensorProto *w, int transposed_weight);

/* Whether a MatMul by a weight has a bias: its output's one reader, within
 * PATTERN_LOOKAHEAD nodes, is an Add whose other input is not an activation (that Add
 * then gives the linear layer its bias). Otherwise it is nn.Linear(bias=False)'s export,
 * a linear layer without one. */
static long sole_reader_after(const importer *im, const char *name, size_t from);
static int matmul_bias_follows(importer *im, const Onnx__NodeProto *n) {
    if (n->n_output < 1 || !n->output[0]) return 0;
    const long r = sole_reader_after(im, n->output[0], im->node_index);
    if (r < 0) return 0;
    const Onnx__NodeProto *add = im->g->node[r];
    if (!add->op_type || strcmp(add->op_type, "Add") || add->n_input != 2 || !add->input[0] ||
        !add->input[1])
        return 0;
    const char *other = !strcmp(add->input[0], n->output[0]) ? add->input[1] : add->input[0];
    const onnx_value *v = find_value(im, other);
    return !v || v->kind != V_ACT;
}

static int import_matmul(importer *im, const Onnx__NodeProto *n) {
    onnx_value *x = act_input(im, n, 0);
    if (!x) return -1;
    onnx_value *b = n->input[1] && *n->input[1] ? find_value(im, n->input[1]) : NULL;
    if (b && b->kind == V_ACT) return import_matmul_activations(im, n, x, b);
    const dt_value xv = im->m->values[x->id];
    const int flat = xv.rank == 1 || (xv.rank == 3 && xv.h == 1 && xv.w == 1);
    if (b && b->kind == V_CONST && (b->transposed_weight || !flat))
        return import_matmul_last_axis(im, n, x, b->tensor, b->transposed_weight);
    const Onnx__TensorProto *w = const_input(im, n, 1, 0);
    if (!w || im->failed) return -1;
    if (!dims_are(w, 2)) return fail_node(im, n, "its weight is not 2-D");
    if (xv.h != 1 || xv.w != 1 || w->dims[0] != xv.c)
        return fail_node(im, n, "only a flat input times a [in, out] weight is supported");
    char name[80];
    op_name(n, w, name, sizeof name);
    const int bias = matmul_bias_follows(im, n);
    const int y = dt_model_linear_bias(im->m, name, x->id, (int)w->dims[1], bias);
    if (set_output(im, n, y)) return -1;
    const dt_op *op = &im->m->ops[im->m->n_ops - 1];
    if (take(im, n, op->weight, w, 1)) return -1;
    im->values[im->n_values - 1].bias_tensor = op->bias;
    im->values[im->n_values - 1].matmul = bias ? n : NULL;
    return 0;
}

/* Whether an initializer is a trainable parameter or a constant. torch.onnx.export names
 * a module's parameters by their state_dict paths ("encoder.pos_embedding", "gamma") and
 * the constants it makes "onnx::Mul_123" (or puts them in Constant nodes): so an
 * initializer is trained unless a Constant node gave it or its name starts "onnx::".
 * (docs/onnx.md, "Parameters and constants") */
static int trainable_initializer(const onnx_value *v) {
    return !v->from_constant && v->tensor->name && strncmp(v->tensor->name, "onnx::", 6) != 0;
}

/* Add, Sub, Mul, Div with NumPy broadcasting: between two activations (the same rank:
 * both have the batch axis), or an activation and a parameter or constant (the same for
 * every sample). A same-shape Add of two activations is the residual add; an Add of a
 * constant after a MatMul, that linear layer's bias. One function, so that a pass that
 * folds constant arithmetic can run before it. */
static int import_binary(importer *im, const Onnx__NodeProto *n) {
    const char *op = n->op_type ? n->op_type : "";
    dt_binary_func func = !strcmp(op, "Add")   ? DT_BINARY_ADD
                          : !strcmp(op, "Sub") ? DT_BINARY_SUB
                          : !strcmp(op, "Mul") ? DT_BINARY_MUL
                                               : DT_BINARY_DIV;
    if (n->n_input != 2) return fail_node(im, n, "other than two inputs");
    onnx_value *a = find_value(im, n->input[0]), *b = find_value(im, n->input[1]);
    if (!a || !b) {
        act_input(im, n, a ? 1 : 0); /* the message for the undefined one */
        return -1;
    }
    if (a->kind == V_ACT && b->kind == V_ACT) {
        const dt_value av = im->m->values[a->id], bv = im->m->values[b->id];
        int same = av.rank == bv.rank;
        for (int d = 0; same && d < av.rank; d++) same = av.dims[d] == bv.dims[d];
        /* a vector [F] adds to an image [F, 1, 1], as dt_model_add takes them */
        if (!same && dt_model_value_is_image(im->m, a->id) && dt_model_value_is_image(im->m, b->id))
            same = av.c == bv.c && av.h == bv.h && av.w == bv.w;
        if (func == DT_BINARY_ADD && same)
            return set_output(im, n, dt_model_add(im->m, a->id, b->id));
        if (av.rank != bv.rank)
            return fail_node(im, n,
                             "its inputs have %d and %d axes: an activation's batch axis "
                             "broadcasts only against another's",
                             av.rank + 1, bv.rank + 1);
        return set_output(im, n, dt_model_binary(im->m, func, a->id, b->id));
    }
    if (a->kind != V_ACT && b->kind != V_ACT)
        return fail_node(im, n, "both its inputs are constants: nothing to compute per sample");
    onnx_value *act = a->kind == V_ACT ? a : b, *cst = a->kind == V_ACT ? b : a;
    if (func == DT_BINARY_ADD && act->matmul && readers(im, act->name) == 1) {
        if (take(im, n, act->bias_tensor, cst->tensor, 0)) return -1;
        act->matmul = NULL;
        /* the Add's output is the linear layer's own */
        return set_alias(im, n, act->id);
    }
    if (act == b) { /* the tensor first */
        if (func == DT_BINARY_SUB) func = DT_BINARY_SUB_REVERSED;
        if (func == DT_BINARY_DIV) func = DT_BINARY_DIV_REVERSED;
    }
    const Onnx__TensorProto *t = cst->tensor;
    const int rank = im->m->values[act->id].rank;
    if (!trainable_initializer(cst)) { /* a constant: one value, kept in the op */
        float value;
        if (t->data_type != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT &&
            t->data_type != ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE)
            return fail_node(im, n, "its constant '%s' is not float or double (element type %d)",
                             tname(t), t->data_type);
        if (numel_of(t) != 1)
            return fail_node(im, n,
                             "its constant '%s' has %lld values: dtrain takes constants of one "
                             "value (a tensor it trains is an initializer named as a parameter, "
                             "docs/onnx.md)",
                             tname(t), numel_of(t));
        if (tensor_scalar(im, t, &value)) return -1;
        if (!isfinite(value)) return fail_node(im, n, "its constant '%s' is not finite", tname(t));
        return set_output(im, n, dt_model_binary_scalar(im->m, func, act->id, value));
    }
    if (t->data_type != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT)
        return fail_node(im, n, "its initializer '%s' is not float (element type %d)", tname(t),
                         t->data_type);
    if (t->n_dims > 4 || numel_of(t) < 1)
        return fail_node(im, n, "its initializer '%s' is not a tensor of 0 to 4 axes with values",
                         tname(t));
    if ((int)t->n_dims == rank + 1 && t->dims[0] != 1)
        return fail_node(im, n,
                         "its initializer '%s' has %lld along the batch axis: a tensor the same "
                         "for every sample has 1 there",
                         tname(t), (long long)t->dims[0]);
    if (strlen(t->name) >= sizeof im->m->tensors[0].name)
        return fail_node(im, n, "initializer name '%.60s...' is longer than %zu characters",
                         t->name, sizeof im->m->tensors[0].name - 1);
    int shape[4];
    for (size_t d = 0; d < t->n_dims; d++) shape[d] = (int)t->dims[d];
    if (set_output(im, n,
                   dt_model_binary_param(im->m, t->name, func, act->id, (int)t->n_dims, shape)))
        return -1;
    return take(im, n, im->m->ops[im->m->n_ops - 1].weight, t, 0);
}

/* ReduceMean over per-sample axes (the attribute, or opset 18's input); over an image's
 * H and W, the global average pool (which reads blocked activations), flattened
 * without keepdims. */
static int import_reduce_mean(importer *im, const Onnx__NodeProto *n) {
    onnx_value *x = act_input(im, n, 0);
    if (!x) return -1;
    const dt_value xv = im->m->values[x->id];
    const long long keepdims = attr_int(n, "keepdims", 1);
    int64_t axes[DT_VALUE_MAX_RANK + 1];
    int count = -1;
    const Onnx__AttributeProto *a = attr(n, "axes");
    if (n->n_input > 1 && n->input[1] && *n->input[1]) {
        if (im->opset < 18)
            return fail_node(im, n, "an axes input before opset 18 (an attribute there)");
        const Onnx__TensorProto *t = const_input(im, n, 1, 0);
        if (!t || tensor_int64s(im, t, axes, DT_VALUE_MAX_RANK + 1, &count)) return -1;
    } else if (a) {
        if (a->n_ints > DT_VALUE_MAX_RANK + 1)
            return fail_node(im, n, "more axes than its input has");
        count = (int)a->n_ints;
        for (int i = 0; i < count; i++) axes[i] = a->ints[i];
    }
    if (count <= 0) {
        if (attr_int(n, "noop_with_empty_axes", 0)) return set_alias(im, n, x->id);
        return fail_node(im, n,
                         "a mean over every axis, the batch's too (dtrain's ops keep each "
                         "sample's own)");
    }
    unsigned mask = 0;
    const int r = xv.rank + 1; /* ONNX's axes count the batch */
    for (int i = 0; i < count; i++) {
        const long long ax = axes[i] < 0 ? axes[i] + r : axes[i];
        if (ax < 0 || ax >= r)
            return fail_node(im, n, "axis %lld of an input of %d axes", (long long)axes[i], r);
        if (ax == 0)
            return fail_node(im, n,
                             "a mean over the batch axis (dtrain's ops keep each sample's own)");
        if (mask >> (ax - 1) & 1u) return fail_node(im, n, "axis %lld twice", (long long)axes[i]);
        mask |= 1u << (ax - 1);
    }
    if (xv.rank == 3 && mask == 6u) { /* without keepdims, a flat view of its [C, 1, 1] */
        const int pooled = dt_model_adaptive_avgpool2d(im->m, x->id, 1, 1);
        return set_output(im, n, keepdims || pooled < 0 ? pooled : dt_model_flatten(im->m, pooled));
    }
    return set_output(im, n, dt_model_reduce_mean(im->m, x->id, mask, keepdims != 0));
}

/* Concat of any number of activations of one rank along any axis but the batch's. */
static int import_concat(importer *im, const Onnx__NodeProto *n) {
    const Onnx__AttributeProto *axis_attr = attr(n, "axis");
    if (!axis_attr || !axis_attr->has_i) return fail_node(im, n, "it has no axis");
    int *ids = malloc(sizeof(int) * n->n_input);
    if (!ids) return fail_node(im, n, "out of memory for its %zu inputs", n->n_input);
    long long values = 0; /* a sample's, summed in 64 bits: many inputs of 2^28 pass int */
    for (size_t i = 0; i < n->n_input; i++) {
        const onnx_value *v = act_input(im, n, i);
        if (!v) {
            free(ids);
            return -1;
        }
        ids[i] = v->id;
        values += (long long)im->m->storages[im->m->values[v->id].storage].per_sample;
    }
    const int rank = im->m->values[ids[0]].rank + 1; /* ONNX's, the batch axis counted */
    long long axis = axis_attr->i;
    if (axis < 0) axis += rank;
    int rc = 0;
    if (axis < 0 || axis >= rank)
        rc = fail_node(im, n, "its axis %lld is outside its rank-%d inputs",
                       (long long)axis_attr->i, rank);
    else if (axis == 0)
        rc = fail_node(im, n, "a Concat along the batch axis (axis 0) is not supported");
    else if (values > MAX_SAMPLE_VALUES)
        rc = fail_node(im, n, "its output has %lld values a sample, past the %lld dtrain takes",
                       values, MAX_SAMPLE_VALUES);
    else
        rc = set_output(im, n, dt_model_concat_axis(im->m, ids, (int)n->n_input, (int)axis - 1));
    free(ids);
    return rc;
}

/* Pad, constant mode, of an image's H and W: no padding is the identity; zeros are
 * folded into the padding of the Conv or AveragePool reading them alone
 * (act_input_padded), or else become a pad2d op where first read (materialize_pad);
 * another value is a pad2d op. */
static int import_pad(importer *im, const Onnx__NodeProto *n) {
    onnx_value *x = act_input(im, n, 0);
    if (!x) return -1;
    int64_t pads[16];
    int count = 0;
    const Onnx__AttributeProto *a = attr(n, "pads");
    if (a) { /* opset 2 to 10: an attribute */
        if (a->n_ints > 16) return fail_node(im, n, "more than 16 pads");
        count = (int)a->n_ints;
        for (int i = 0; i < count; i++) pads[i] = a->ints[i];
    } else { /* opset 11 on: an input */
        const Onnx__TensorProto *t = const_input(im, n, 1, 0);
        if (!t || tensor_int64s(im, t, pads, 16, &count)) return -1;
    }
    const Onnx__AttributeProto *mode = attr(n, "mode");
    if (mode && mode->has_s && !(mode->s.len == 8 && !memcmp(mode->s.data, "constant", 8)))
        return fail_node(im, n, "only constant padding is supported (its mode is '%.*s')",
                         (int)(mode->s.len < 32 ? mode->s.len : 32), (const char *)mode->s.data);
    float value = attr_float(n, "value", 0.0f);
    if (n->n_input > 2 && n->input[2] && *n->input[2]) {
        const Onnx__TensorProto *t = const_input(im, n, 2, 0);
        if (!t || tensor_scalar(im, t, &value)) return -1;
    }
    if (n->n_input > 3 && n->input[3] && *n->input[3])
        return fail_node(im, n, "its axes input (opset 18) is not supported");
    int any = 0;
    for (int i = 0; i < count; i++) any |= pads[i] != 0;
    if (!any) return set_alias(im, n, x->id);
    const dt_value xv = im->m->values[x->id];
    if (count != 8 || xv.rank != 3)
        return fail_node(im, n, "only padding of an image's height and width is supported");
    for (int i = 0; i < 8; i++)
        if (pads[i] < 0 || pads[i] > MAX_DIM)
            return fail_node(im, n, "its pads must be in 0 .. %d (negative ones crop)", MAX_DIM);
    if (pads[0] || pads[1] || pads[4] || pads[5])
        return fail_node(im, n, "only padding of an image's height and width is supported");
    if (!isfinite(value)) return fail_node(im, n, "its value %g is not finite", (double)value);
    if (value != 0.0f) { /* a pad2d op: nothing else pads with it */
        const int p[4] = {(int)pads[2], (int)pads[3], (int)pads[6], (int)pads[7]};
        return set_output(im, n, dt_model_pad2d(im->m, x->id, p, value));
    }
    if (n->n_output < 1 || !n->output[0] || !*n->output[0])
        return fail_node(im, n, "it has no output");
    onnx_value *v = add_value(im, n->output[0], V_ACT);
    if (!v) return -1;
    v->id = x->id;
    v->padded = 1;
    /* ONNX's [x1_begin, x2_begin, ..., x1_end, ...]: H and W are axes 2 and 3 */
    v->pad[0] = (int)pads[2], v->pad[1] = (int)pads[3], v->pad[2] = (int)pads[6],
    v->pad[3] = (int)pads[7];
    return note_readers(im, x->id, n->output[0], 1);
}

static int import_dropout(importer *im, const Onnx__NodeProto *n) {
    onnx_value *x = act_input(im, n, 0);
    if (!x) return -1;
    float p = attr_float(n, "ratio", 0.5f);
    if (n->n_input > 1 && n->input[1] && *n->input[1]) {
        const Onnx__TensorProto *r = const_input(im, n, 1, 0);
        if (!r || tensor_scalar(im, r, &p)) return -1;
    }
    if (!(p >= 0.0f && p <= 1.0f)) return fail_node(im, n, "its ratio is not in [0, 1]");
    return set_output(im, n, dt_model_dropout(im->m, x->id, p));
}

/* ------------------------------------------------------------------ activations */

/* The activation of x: in place (its memory spared) where the function's gradient
 * follows from its output and no other node reads x under any name (as Relu). */
static int add_activation(importer *im, const onnx_value *x, dt_activation act) {
    if (dt_activation_runs_in_place(act) && im->storage_readers[im->m->values[x->id].storage] == 1)
        return dt_model_activation_in_place(im->m, x->id, act);
    return dt_model_activation(im->m, x->id, act);
}

static int import_activation(importer *im, const Onnx__NodeProto *n, dt_activation act) {
    onnx_value *x = act_input(im, n, 0);
    return x ? set_output(im, n, add_activation(im, x, act)) : -1;
}

/* A Cast of a float constant to float: torch.onnx 1.13 casts ReLU6's bounds (0 and 6)
 * to the input's type before its Clip. The output is the same constant. */
static int import_cast_of_constant(importer *im, const Onnx__NodeProto *n) {
    onnx_value *x = find_value(im, n->n_input == 1 ? n->input[0] : NULL);
    if (!x || x->kind != V_CONST || x->tensor->data_type != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT ||
        attr_int(n, "to", -1) != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT)
        return fail_node(im, n, "only a Cast of a float constant to float is supported");
    if (n->n_output != 1 || !n->output[0] || !*n->output[0])
        return fail_node(im, n, "it has no output");
    onnx_value *v = add_value(im, n->output[0], V_CONST);
    if (!v) return -1;
    v->tensor = x->tensor;
    v->from_constant = 1; /* not an initializer of its own: never a weight */
    return 0;
}

/* Clip's bounds: attributes before opset 11, optional constant inputs from it; absent
 * is unbounded. */
static int import_clip(importer *im, const Onnx__NodeProto *n) {
    onnx_value *x = act_input(im, n, 0);
    if (!x) return -1;
    float bound[2] = {attr_float(n, "min", -INFINITY), attr_float(n, "max", INFINITY)};
    if (im->opset < 11 && n->n_input > 1)
        return fail_node(im, n, "opset %lld's Clip takes its bounds as attributes, not inputs",
                         im->opset);
    for (size_t i = 1; i < n->n_input && i < 3; i++) {
        if (!n->input[i] || !*n->input[i]) continue; /* absent */
        const Onnx__TensorProto *t = const_input(im, n, i, 0);
        if (!t || tensor_scalar(im, t, &bound[i - 1])) return -1;
    }
    if (isnan(bound[0]) || isnan(bound[1])) return fail_node(im, n, "a bound is NaN");
    return set_output(im, n,
                      add_activation(im, x, (dt_activation){DT_ACT_CLIP, bound[0], bound[1]}));
}

/* torch.onnx writes GELU and SiLU as small subgraphs, found here from their first
 * node and imported as one activation: its nodes follow one another, with the
 * Constant nodes of their scalars between them, so each next one is looked for among
 * the few nodes after the last (no index of readers needed). */
enum { PATTERN_LOOKAHEAD = 16 };

/* The node among the PATTERN_LOOKAHEAD after node `from` that reads `name`, when it is
 * the name's only reader in the graph; -1 otherwise. */
static long sole_reader_after(const importer *im, const char *name, size_t from) {
    int count;
    const int *r = readers_of(im, name, &count);
    if (count != 1 || (size_t)r[0] <= from || (size_t)r[0] > from + PATTERN_LOOKAHEAD) return -1;
    return im->fused[r[0]] ? -1 : r[0];
}

/* ------------------------------------------------ the transformer's ops (issue 41) */

/* The node's `axis` attribute as a per-sample axis of x (ONNX counts the batch axis as
 * 0; dtrain's per-sample axes start after it), or -1 after failing: the batch axis is
 * refused, an op along it would mix samples. */
static int sample_axis(importer *im, const Onnx__NodeProto *n, const dt_value *x, long long axis) {
    const long long rank = x->rank + 1;
    const long long a = axis < 0 ? axis + rank : axis;
    if (a < 0 || a >= rank)
        return fail_node(im, n, "axis %lld of an input of %lld dimensions", axis, rank);
    if (a == 0)
        return fail_node(im, n,
                         "axis 0 is the batch axis: dtrain's samples are independent, an op "
                         "along the batch is not supported");
    return (int)(a - 1);
}

/* A constant list of integers (int64 or int32: ONNX's index types), at most max. */
static int tensor_ints(importer *im, const Onnx__TensorProto *t, int64_t *out, int max,
                       int *count) {
    if (t->data_type != ONNX__TENSOR_PROTO__DATA_TYPE__INT32)
        return tensor_int64s(im, t, out, max, count);
    const long long n = numel_of(t);
    if (n < 0 || n > max)
        return fail(im, "the constant '%s' is not a short list of int32", tname(t));
    *count = (int)n;
    if (t->has_raw_data && t->raw_data.len) {
        if (t->raw_data.len != (size_t)n * sizeof(int32_t))
            return fail(im, "the constant '%s': %zu bytes for %lld int32", tname(t),
                        t->raw_data.len, n);
        for (long long i = 0; i < n; i++) {
            int32_t v;
            memcpy(&v, t->raw_data.data + i * sizeof v, sizeof v);
            out[i] = v;
        }
        return 0;
    }
    if (t->n_int32_data != (size_t)n)
        return fail(im, "the constant '%s': %zu values for %lld", tname(t), t->n_int32_data, n);
    for (long long i = 0; i < n; i++) out[i] = t->int32_data[i];
    return 0;
}

/* Softmax, LogSoftmax: opset 13's on one axis; before 13, over every axis from `axis`
 * (default 1) to the end taken as one. */
static int import_softmax(importer *im, const Onnx__NodeProto *n, int log_softmax) {
    onnx_value *x = act_input(im, n, 0);
    if (!x) return -1;
    const dt_value xv = im->m->values[x->id];
    const int coerced = im->opset < 13;
    const int a = sample_axis(im, n, &xv, attr_int(n, "axis", coerced ? 1 : -1));
    if (a < 0) return -1;
    return set_output(im, n, dt_model_softmax(im->m, x->id, a, log_softmax, coerced));
}

/* LayerNormalization (opset 17): Scale and the optional B of the normalised axes'
 * shape, trained; the Mean and InvStdDev outputs are not produced. */
static int import_layernorm(importer *im, const Onnx__NodeProto *n) {
    onnx_value *x = act_input(im, n, 0);
    const Onnx__TensorProto *scale = x ? const_input(im, n, 1, 0) : NULL;
    const Onnx__TensorProto *bias = scale ? const_input(im, n, 2, 1) : NULL;
    if (!scale || im->failed) return -1;
    const dt_value xv = im->m->values[x->id];
    const int a = sample_axis(im, n, &xv, attr_int(n, "axis", -1));
    if (a < 0) return -1;
    const float eps = attr_float(n, "epsilon", 1e-5f);
    if (!(isfinite(eps) && eps > 0.0f))
        return fail_node(im, n, "its epsilon %g is not a positive finite number", (double)eps);
    const size_t axes = (size_t)(xv.rank - a);
    for (int k = 0; k < 2; k++) {
        const Onnx__TensorProto *t = k ? bias : scale;
        if (!t) continue;
        int same = t->n_dims == axes && numel_of(t) >= 0;
        for (size_t d = 0; same && d < axes; d++) same = t->dims[d] == xv.dims[a + d];
        if (!same)
            return fail_node(im, n, "its %s is not of the normalised axes' shape (no broadcasting)",
                             k ? "bias" : "scale");
    }
    char name[80];
    op_name(n, scale, name, sizeof name);
    const int y = dt_model_layernorm(im->m, name, x->id, a, eps, bias != NULL);
    if (set_output(im, n, y)) return -1;
    const dt_op *op = &im->m->ops[im->m->n_ops - 1];
    if (take(im, n, op->weight, scale, 0)) return -1;
    return bias ? take(im, n, op->bias, bias, 0) : 0;
}

/* A Transpose of a 2-D initializer (perm [1, 0]): PyTorch's export of nn.Linear as
 * MatMul(x, W^T). The weight stays the initializer, read as dtrain holds it. */
static int import_transpose_weight(importer *im, const Onnx__NodeProto *n,
                                   const Onnx__TensorProto *t) {
    const Onnx__AttributeProto *perm = attr(n, "perm");
    const int swapped = !perm || (perm->n_ints == 2 && perm->ints[0] == 1 && perm->ints[1] == 0);
    if (!dims_are(t, 2) || !swapped)
        return fail_node(im, n, "only a Transpose of a 2-D weight (perm [1, 0]) is supported");
    onnx_value *v = add_value(im, n->output[0], V_CONST);
    if (!v) return -1;
    v->tensor = t;
    v->transposed_weight = 1;
    return 0;
}

/* MatMul of two activations: a batched matrix product, [.., M, K] x [.., K, N]. */
static int import_matmul_activations(importer *im, const Onnx__NodeProto *n, onnx_value *a,
                                     onnx_value *b) {
    const dt_value av = im->m->values[a->id], bv = im->m->values[b->id];
    if (av.rank < 2 || bv.rank != av.rank)
        return fail_node(im, n,
                         "a MatMul of two activations needs both of at least 3 dimensions and "
                         "of one rank ([batch, .., M, K] x [batch, .., K, N]), not %d and %d",
                         av.rank + 1, bv.rank + 1);
    return set_output(im, n, dt_model_matmul(im->m, a->id, b->id));
}

/* MatMul of an activation of rank >= 2 a sample by a [in, out] weight (or the
 * Transpose of an [out, in] one): a linear layer over the last axis, its bias the Add
 * after it. */
static int import_matmul_last_axis(importer *im, const Onnx__NodeProto *n, onnx_value *x,
                                   const Onnx__TensorProto *w, int transposed_weight) {
    const dt_value xv = im->m->values[x->id];
    if (!dims_are(w, 2)) return fail_node(im, n, "its weight is not 2-D");
    /* a flat input (a vector, or an image of 1 x 1) is read whole, as import_matmul's */
    const int flat = xv.rank == 1 || (xv.rank == 3 && xv.h == 1 && xv.w == 1);
    const long long in = transposed_weight ? w->dims[1] : w->dims[0],
                    out = transposed_weight ? w->dims[0] : w->dims[1];
    const long long x_in = flat ? (long long)xv.c : xv.dims[xv.rank - 1];
    if (in != x_in || out < 1 || out > MAX_DIM)
        return fail_node(im, n, "its weight takes %lld features, its input's last axis has %lld",
                         in, x_in);
    char name[80];
    op_name(n, w, name, sizeof name);
    const int bias = matmul_bias_follows(im, n);
    const int y = flat ? dt_model_linear_bias(im->m, name, x->id, (int)out, bias)
                       : dt_model_linear_last_axis(im->m, name, x->id, (int)out, bias);
    if (set_output(im, n, y)) return -1;
    const dt_op *op = &im->m->ops[im->m->n_ops - 1];
    if (take(im, n, op->weight, w, !transposed_weight)) return -1;
    im->values[im->n_values - 1].bias_tensor = op->bias;
    im->values[im->n_values - 1].matmul = bias ? n : NULL;
    return 0;
}

/* Gather of constant indices along a sample axis: one index drops the axis (scalar
 * indices: the class token, x[:, 0]) or keeps it (a list of one); a list of evenly
 * spaced rising indices is a slice. */
static int import_gather(importer *im, const Onnx__NodeProto *n) {
    onnx_value *x = act_input(im, n, 0);
    if (!x) return -1;
    const onnx_value *iv = n->input[1] && *n->input[1] ? find_value(im, n->input[1]) : NULL;
    if (iv && iv->kind == V_ACT)
        return fail_node(im, n,
                         "its indices '%s' are computed: only constant indices are supported",
                         n->input[1]);
    const Onnx__TensorProto *t = const_input(im, n, 1, 0);
    if (!t || im->failed) return -1;
    const dt_value xv = im->m->values[x->id];
    const int a = sample_axis(im, n, &xv, attr_int(n, "axis", 0));
    if (a < 0) return -1;
    int64_t idx[256];
    int count = 0;
    if (t->n_dims > 1 || tensor_ints(im, t, idx, 256, &count)) {
        if (!im->failed) fail_node(im, n, "only scalar or 1-D indices are supported");
        return -1;
    }
    const int len = xv.dims[a];
    for (int i = 0; i < count; i++) {
        if (idx[i] < -len || idx[i] >= len)
            return fail_node(im, n, "index %lld is outside an axis of %d", (long long)idx[i], len);
        if (idx[i] < 0) idx[i] += len;
    }
    const long long step = count > 1 ? idx[1] - idx[0] : 1;
    int even = count >= 1 && step >= 1;
    for (int i = 1; even && i < count; i++) even = idx[i] - idx[i - 1] == step;
    if (!even)
        return fail_node(im, n, "only indices evenly spaced and rising (a slice) are supported");
    return set_output(
        im, n, dt_model_slice(im->m, x->id, a, (int)idx[0], count, (int)step, t->n_dims == 1));
}

/* Slice (opset 10's inputs): constant starts, ends, axes and steps; a range that
 * covers its whole axis (the batch's, say) takes nothing away and makes no op. */
static int import_slice(importer *im, const Onnx__NodeProto *n) {
    onnx_value *x = act_input(im, n, 0);
    if (!x) return -1;
    int64_t v[4][DT_VALUE_MAX_RANK + 1];
    int count[4] = {0, 0, -1, -1};
    for (int k = 0; k < 4; k++) {
        const int optional = k >= 2;
        if (optional && ((size_t)k + 1 >= n->n_input || !*n->input[k + 1])) continue;
        const Onnx__TensorProto *t = const_input(im, n, (size_t)k + 1, 0);
        if (!t || tensor_ints(im, t, v[k], DT_VALUE_MAX_RANK + 1, &count[k])) return -1;
    }
    if (count[0] != count[1] || (count[2] >= 0 && count[2] != count[0]) ||
        (count[3] >= 0 && count[3] != count[0]))
        return fail_node(im, n, "its starts, ends, axes and steps differ in length");
    int id = x->id;
    for (int i = 0; i < count[0]; i++) {
        const dt_value xv = im->m->values[id];
        const long long rank = xv.rank + 1, axis = count[2] >= 0 ? v[2][i] : i;
        const long long a = axis < 0 ? axis + rank : axis;
        const long long step = count[3] >= 0 ? v[3][i] : 1;
        if (a < 0 || a >= rank)
            return fail_node(im, n, "axis %lld of an input of %lld dimensions", axis, rank);
        if (step < 1) return fail_node(im, n, "only positive steps are supported");
        if (a == 0) {
            if (v[0][i] == 0 && v[1][i] >= INT32_MAX) continue; /* the whole batch */
            return fail_node(im, n, "a slice of the batch axis is not supported");
        }
        const long long len = xv.dims[a - 1];
        long long start = v[0][i] < 0 ? v[0][i] + len : v[0][i];
        long long end = v[1][i] < 0 ? v[1][i] + len : v[1][i];
        start = start < 0 ? 0 : start > len ? len : start;
        end = end < 0 ? 0 : end > len ? len : end;
        if (end <= start)
            return fail_node(im, n, "an empty slice (dtrain's values have no empty axes)");
        const long long elements = (end - start + step - 1) / step;
        if (start == 0 && elements == len && step == 1) continue; /* all of it */
        id = dt_model_slice(im->m, id, (int)(a - 1), (int)start, (int)elements, (int)step, 1);
        if (id < 0) return set_output(im, n, id);
    }
    return id == x->id ? set_alias(im, n, id) : set_output(im, n, id);
}

/* Split into slices along a sample axis: equal parts, or the sizes given (the `split`
 * input from opset 13, the attribute before). Each output is its own slice. */
static int import_split(importer *im, const Onnx__NodeProto *n) {
    onnx_value *x = act_input(im, n, 0);
    if (!x) return -1;
    const dt_value xv = im->m->values[x->id];
    const int a = sample_axis(im, n, &xv, attr_int(n, "axis", 0));
    if (a < 0) return -1;
    int64_t sizes[64];
    int count = -1;
    if (n->n_input > 1 && n->input[1] && *n->input[1]) {
        const Onnx__TensorProto *t = const_input(im, n, 1, 0);
        if (!t || tensor_ints(im, t, sizes, 64, &count)) return -1;
    } else if (attr(n, "split")) {
        const Onnx__AttributeProto *s = attr(n, "split");
        if (s->n_ints > 64) return fail_node(im, n, "more than 64 parts");
        count = (int)s->n_ints;
        for (int i = 0; i < count; i++) sizes[i] = s->ints[i];
    }
    const int outputs = (int)n->n_output, len = xv.dims[a];
    if (count < 0) {
        if (outputs < 1 || len % outputs)
            return fail_node(im, n, "%d equal parts of an axis of %d", outputs, len);
        count = outputs;
        for (int i = 0; i < count; i++) sizes[i] = len / outputs;
    }
    if (count != outputs) return fail_node(im, n, "%d sizes for %d outputs", count, outputs);
    long long start = 0;
    for (int i = 0; i < count; i++) {
        if (sizes[i] < 1)
            return fail_node(im, n, "an empty part (dtrain's values have no empty axes)");
        start += sizes[i];
    }
    if (start != len) return fail_node(im, n, "parts of %lld for an axis of %d", start, len);
    /* made last part first: the first output is then the newest value, as a graph
     * ending in it needs (the logits are the last value) */
    for (int i = count - 1; i >= 0; i--) {
        start -= sizes[i];
        const int y = dt_model_slice(im->m, x->id, a, (int)start, (int)sizes[i], 1, 1);
        if (y < 0) return set_output(im, n, y);
        if (!n->output[i] || !*n->output[i]) continue; /* an output no one names */
        onnx_value *v = add_value(im, n->output[i], V_ACT);
        if (!v) return -1;
        v->id = y;
        if (note_readers(im, y, n->output[i], 0)) return -1;
    }
    return 0;
}

/* Expand of a parameter [1, ..] to the batch ([N, ..]): ViT's class token. The shape
 * must be constant (folded at import): its first entry is the batch, whatever its
 * value; the others must be the parameter's own (no broadcasting inside a sample). */
static int import_expand(importer *im, const Onnx__NodeProto *n) {
    const onnx_value *p = find_value(im, n->input[0]);
    if (!p || p->kind != V_CONST)
        return fail_node(im, n,
                         "only an Expand of a parameter (an initializer) over the batch is "
                         "supported");
    const Onnx__TensorProto *w = p->tensor;
    /* the shape, folded at import: its first entry the batch (N, or 1 that Expand
     * broadcasts to the batch's size), the others free of N */
    dt_fold_tensor tmp;
    const dt_fold_tensor *shape = fold_input(im, n, 1, &tmp);
    if (!shape) return -1;
    int64_t dims[DT_VALUE_MAX_RANK + 1];
    const int count = (int)shape->count;
    int known = dt_fold_is_int(shape->elem_type) && shape->rank == 1 && count >= 1 &&
                count <= DT_VALUE_MAX_RANK + 1;
    for (int d = 0; known && d < count; d++) {
        known = shape->k[d] == 0 || (d == 0 && shape->k[d] == 1 && shape->c[d] == 0);
        dims[d] = shape->k[d] ? -1 : shape->c[d];
    }
    dt_fold_free(&tmp);
    if (!known)
        return fail_node(im, n,
                         "its shape '%s' is not [batch, ..] with the axes after the batch's "
                         "constant",
                         n->input[1]);
    int same = w->n_dims >= 2 && w->n_dims <= 4 && (int)w->n_dims == count && w->dims[0] == 1 &&
               numel_of(w) > 0;
    for (int d = 1; same && d < count; d++) same = dims[d] == 1 || dims[d] == w->dims[d];
    if (!same)
        return fail_node(im, n,
                         "only an Expand of a [1, ..] parameter along the batch axis is "
                         "supported (the other axes as the parameter's)");
    int per[DT_VALUE_MAX_RANK];
    for (int d = 1; d < count; d++) per[d - 1] = (int)w->dims[d];
    const int y = dt_model_expand_param(im->m, tname(w), count - 1, per);
    if (set_output(im, n, y)) return -1;
    return take(im, n, im->m->ops[im->m->n_ops - 1].weight, w, 0);
}

/* ------------------------------------ LayerNorm as PyTorch exports it before opset 17 */

/* The one node of type `op` reading `name` (-1: none, or several readers). */
static long node_reading(const importer *im, const char *name, const char *op) {
    int count;
    const int *r = readers_of(im, name, &count);
    if (count != 1) return -1;
    const Onnx__NodeProto *n = im->g->node[r[0]];
    return strcmp(n->op_type ? n->op_type : "", op) ? -1 : r[0];
}

/* A float or double scalar's value, or -1 (nothing failed: a pattern just differs). */
static int scalar_of(const Onnx__TensorProto *t, double *out) {
    if (!t || numel_of(t) != 1) return -1;
    if (t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT) {
        float f;
        if (t->has_raw_data && t->raw_data.len == sizeof f)
            memcpy(&f, t->raw_data.data, sizeof f);
        else if (t->n_float_data == 1)
            f = t->float_data[0];
        else
            return -1;
        *out = f;
        return 0;
    }
    if (t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE) {
        if (t->has_raw_data && t->raw_data.len == sizeof *out)
            memcpy(out, t->raw_data.data, sizeof *out);
        else if (t->n_double_data == 1)
            *out = t->double_data[0];
        else
            return -1;
        return 0;
    }
    return -1;
}

/* The scalar constant `name`: an initializer, a Constant node imported already, or
 * one between the node being imported (the pattern's first) and PATTERN_LOOKAHEAD
 * nodes after node `upto` (not imported yet: it comes between the pattern's nodes).
 * -1 when it is none of these. */
static int constant_named(importer *im, const char *name, size_t upto, double *out) {
    const onnx_value *v = find_value(im, name);
    if (v) return v->kind == V_CONST ? scalar_of(v->tensor, out) : -1;
    const Onnx__GraphProto *g = im->g;
    for (size_t i = im->node_index + 1; i < g->n_node && i <= upto + PATTERN_LOOKAHEAD; i++) {
        const Onnx__NodeProto *n = g->node[i];
        if (n->op_type && !strcmp(n->op_type, "Constant") && n->n_output == 1 && n->output[0] &&
            !strcmp(n->output[0], name)) {
            const Onnx__AttributeProto *a = attr(n, "value");
            return a && a->t ? scalar_of(a->t, out) : -1;
        }
    }
    return -1;
}

/* One node of a pattern: its op, reading the previous node's output (the pattern's
 * input x for the first) and, for a binary op, `arg`: x again, or a scalar constant. */
typedef enum pattern_arg { ARG_NONE, ARG_X, ARG_CONST } pattern_arg;
typedef struct pattern_step {
    const char *op;
    pattern_arg arg;
    double value;
} pattern_step;

enum { PATTERN_MAX_STEPS = 9 };
typedef struct pattern {
    const char *what; /* for messages */
    dt_activation_fn fn;
    int steps;
    pattern_step step[PATTERN_MAX_STEPS];
} pattern;

#define SQRT2     1.41421356237309504880
#define SQRT_2_PI 0.79788456080286535588 /* sqrt(2 / pi) */
/* torch.onnx 1.13's gelu symbolic (x / sqrt 2 -> Erf -> + 1 -> * x -> * 0.5), and
 * x * (1 / sqrt 2) instead of the division; and its tanh approximation. The final two
 * multiplies (by x, by 0.5) commute: import_gelu also tries each with them swapped. */
static const pattern gelu_patterns[] = {
    {"GELU",
     DT_ACT_GELU,
     5,
     {{"Div", ARG_CONST, SQRT2},
      {"Erf", ARG_NONE, 0},
      {"Add", ARG_CONST, 1},
      {"Mul", ARG_X, 0},
      {"Mul", ARG_CONST, 0.5}}},
    {"GELU",
     DT_ACT_GELU,
     5,
     {{"Mul", ARG_CONST, 1 / SQRT2},
      {"Erf", ARG_NONE, 0},
      {"Add", ARG_CONST, 1},
      {"Mul", ARG_X, 0},
      {"Mul", ARG_CONST, 0.5}}},
    {"GELU (tanh)",
     DT_ACT_GELU_TANH,
     9,
     {{"Mul", ARG_X, 0},
      {"Mul", ARG_X, 0},
      {"Mul", ARG_CONST, 0.044715},
      {"Add", ARG_X, 0},
      {"Mul", ARG_CONST, SQRT_2_PI},
      {"Tanh", ARG_NONE, 0},
      {"Add", ARG_CONST, 1},
      {"Mul", ARG_X, 0},
      {"Mul", ARG_CONST, 0.5}}},
};

static int default_domain(const Onnx__NodeProto *n) {
    return !n->domain || !*n->domain || !strcmp(n->domain, "ai.onnx");
}

/* Whether node n is step s reading `prev`, x being the pattern's input. */
static int is_step(importer *im, const Onnx__NodeProto *n, const pattern_step *s, const char *prev,
                   const char *x, size_t at) {
    if (!n->op_type || strcmp(n->op_type, s->op) || !default_domain(n) || n->n_output != 1 ||
        !n->output[0] || !*n->output[0])
        return 0;
    if (s->arg == ARG_NONE) return n->n_input == 1 && n->input[0] && !strcmp(n->input[0], prev);
    if (n->n_input != 2 || !n->input[0] || !n->input[1]) return 0;
    const char *other;
    if (!strcmp(n->input[0], prev))
        other = n->input[1];
    else if (strcmp(s->op, "Div") && !strcmp(n->input[1], prev)) /* Add, Mul: either side */
        other = n->input[0];
    else
        return 0;
    if (s->arg == ARG_X) return !strcmp(other, x);
    double v;
    return constant_named(im, other, at, &v) == 0 && fabs(v - s->value) <= 1e-6 * fabs(s->value);
}

/* Matches pattern p from node `start` (its first step) on input x: the node index of
 * each step into at[]; the number of steps matched. */
static int match_pattern(importer *im, const pattern *p, size_t start, const char *x, long *at) {
    const Onnx__GraphProto *g = im->g;
    const char *prev = x;
    long i = (long)start;
    for (int s = 0; s < p->steps; s++) {
        if (s > 0 && (i = sole_reader_after(im, prev, (size_t)i)) < 0) return s;
        const Onnx__NodeProto *n = g->node[i];
        if (!is_step(im, n, &p->step[s], prev, x, (size_t)i)) return s;
        at[s] = i;
        prev = n->output[0];
    }
    return p->steps;
}

/* A Div or Mul that starts GELU's subgraph: the whole of it imported as one op (0), or
 * refused (-1) where an Erf follows but the rest differs (ONNX's Erf alone is not
 * imported). 1: not a GELU's start (the node is imported as itself). */
static int import_gelu(importer *im, const Onnx__NodeProto *n) {
    if (n->n_input != 2 || !n->input[0] || !n->input[1]) return 1;
    const onnx_value *x = find_value(im, n->input[0]);
    if ((!x || x->kind != V_ACT) && !strcmp(n->op_type, "Mul")) x = find_value(im, n->input[1]);
    if (!x || x->kind != V_ACT) return 1;
    long at[PATTERN_MAX_STEPS], erf_at = -1;
    int erf_steps = 0;
    for (size_t k = 0; k < 2 * (sizeof gelu_patterns / sizeof *gelu_patterns); k++) {
        pattern swapped = gelu_patterns[k / 2]; /* odd k: its final two steps swapped */
        if (k % 2) {
            const pattern_step last = swapped.step[swapped.steps - 1];
            swapped.step[swapped.steps - 1] = swapped.step[swapped.steps - 2];
            swapped.step[swapped.steps - 2] = last;
        }
        const pattern *p = &swapped;
        const int matched = match_pattern(im, p, im->node_index, x->name, at);
        if (matched == p->steps) {
            for (int s = 1; s < p->steps; s++) im->fused[at[s]] = 1;
            const int y = dt_model_activation(im->m, x->id, (dt_activation){p->fn, 0, 0});
            return set_output(im, im->g->node[at[p->steps - 1]], y);
        }
        if (p->fn == DT_ACT_GELU && matched >= 2 && matched > erf_steps)
            erf_steps = matched, erf_at = at[1];
    }
    if (erf_at < 0) return 1;
    const Onnx__NodeProto *erf = im->g->node[erf_at];
    return fail_node(im, erf,
                     "Erf is imported only inside GELU's decomposition (x / sqrt(2), Erf, + 1, "
                     "* x, * 0.5: torch.onnx's nn.GELU), and the nodes after this one differ "
                     "from it at step %d of 5",
                     erf_steps + 1);
}

/* Node n (Sigmoid, HardSigmoid) as `alone`, or as *times_x when its one reader is
 * Mul(its input, it): torch.onnx's nn.SiLU, and nn.Hardswish before opset 14. One op,
 * which keeps no intermediate activation for backward. */
static int import_gate(importer *im, const Onnx__NodeProto *n, dt_activation alone,
                       const dt_activation *times_x) {
    onnx_value *x = act_input(im, n, 0);
    if (!x) return -1;
    if (times_x && n->n_output == 1 && n->output[0] && *n->output[0]) {
        const long r = sole_reader_after(im, n->output[0], im->node_index);
        const Onnx__NodeProto *mul = r >= 0 ? im->g->node[r] : NULL;
        const pattern_step step = {"Mul", ARG_X, 0};
        if (mul && is_step(im, mul, &step, n->output[0], n->input[0], (size_t)r)) {
            im->fused[r] = 1;
            return set_output(im, mul, dt_model_activation(im->m, x->id, *times_x));
        }
    }
    return set_output(im, n, add_activation(im, x, alone));
}

static int import_hardsigmoid(importer *im, const Onnx__NodeProto *n) {
    const float alpha = attr_float(n, "alpha", 0.2f), beta = attr_float(n, "beta", 0.5f);
    const dt_activation alone = {DT_ACT_HARDSIGMOID, alpha, beta};
    /* x * hardsigmoid(x) is HardSwish only with HardSwish's own alpha and beta */
    const dt_activation hardswish = {DT_ACT_HARDSWISH, 0, 0};
    const int is_hardswish = fabsf(alpha - 1.0f / 6.0f) <= 1e-7f && beta == 0.5f;
    return import_gate(im, n, alone, is_hardswish ? &hardswish : NULL);
}

/* The constant named `name`: an initializer, a Constant node's value defined already,
 * or one defined later in the graph (the decomposition's exponent and epsilon are). */
static const Onnx__TensorProto *constant_tensor_named(importer *im, const char *name) {
    const onnx_value *v = find_value(im, name);
    if (v) return v->kind == V_CONST ? v->tensor : NULL;
    const name_slot *s = slot_of(im, name);
    const Onnx__NodeProto *n = s && s->producer >= 0 ? im->g->node[s->producer] : NULL;
    if (!n || !n->op_type || strcmp(n->op_type, "Constant") || n->n_output != 1) return NULL;
    const Onnx__AttributeProto *a = attr(n, "value");
    return a ? a->t : NULL;
}

/* A float scalar constant's value, or NAN. */
static float scalar_named(importer *im, const char *name) {
    const Onnx__TensorProto *t = constant_tensor_named(im, name);
    float v;
    if (!t || numel_of(t) != 1 || t->data_type != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT ||
        tensor_floats(im, t, &v, 1))
        return NAN;
    return v;
}

/* The other input of a two-input node than `name` (NULL if it reads `name` twice). */
static const char *other_input(const Onnx__NodeProto *n, const char *name) {
    if (n->n_input != 2) return NULL;
    if (!strcmp(n->input[0], name)) return strcmp(n->input[1], name) ? n->input[1] : NULL;
    return !strcmp(n->input[1], name) ? n->input[0] : NULL;
}

/* ReduceMean's axes as the last `k` axes of a value of `rank` per-sample axes (the
 * batch axis not counted); 0 if they are not. */
static int last_axes(const Onnx__NodeProto *n, int rank) {
    const Onnx__AttributeProto *a = attr(n, "axes");
    if (!a || a->n_ints < 1 || a->n_ints > (size_t)rank || attr_int(n, "keepdims", 1) != 1)
        return 0;
    const int k = (int)a->n_ints;
    unsigned seen = 0;
    for (int i = 0; i < k; i++) {
        const long long ax = a->ints[i] < 0 ? a->ints[i] + rank + 1 : a->ints[i];
        if (ax < rank + 1 - k || ax > rank) return 0;
        seen |= 1u << (ax - (rank + 1 - k));
    }
    return seen == (1u << k) - 1 ? k : 0;
}

/* PyTorch's LayerNorm before opset 17, starting at its first ReduceMean:
 *   mean = ReduceMean(x), d = Sub(x, mean), var = ReduceMean(Pow(d, 2)),
 *   y = Add(Mul(Div(d, Sqrt(Add(var, eps))), weight), bias)
 * over the last axes, each intermediate read by the next node alone: one layernorm op,
 * the other eight nodes taken in. 1: imported; 0: not this pattern (nothing done). */
static int import_decomposed_layernorm(importer *im, const Onnx__NodeProto *n) {
    const onnx_value *x = n->n_input == 1 ? find_value(im, n->input[0]) : NULL;
    if (!x || x->kind != V_ACT || n->n_output != 1) return 0;
    const dt_value xv = im->m->values[x->id];
    const int k = last_axes(n, xv.rank);
    if (!k || xv.rank - k < 0 || k > 4) return 0;
    /* d = x - mean: x's readers are this ReduceMean and the Sub, at least */
    long sub = node_reading(im, n->output[0], "Sub");
    if (sub < 0) return 0;
    const Onnx__NodeProto *s = im->g->node[sub];
    if (s->n_input != 2 || strcmp(s->input[0], n->input[0]) || strcmp(s->input[1], n->output[0]))
        return 0;
    /* d is read by Pow and Div */
    const char *d = s->output[0];
    if (readers(im, d) != 2) return 0;
    long pow = -1, div = -1;
    int count;
    const int *r = readers_of(im, d, &count);
    for (int k = 0; k < count; k++) {
        const Onnx__NodeProto *c = im->g->node[r[k]];
        if (c->n_input != 2 || strcmp(c->input[0], d)) continue;
        if (c->op_type && !strcmp(c->op_type, "Pow")) pow = r[k];
        if (c->op_type && !strcmp(c->op_type, "Div")) div = r[k];
    }
    if (pow < 0 || div < 0 || scalar_named(im, im->g->node[pow]->input[1]) != 2.0f) return 0;
    const long mean2 = node_reading(im, im->g->node[pow]->output[0], "ReduceMean");
    if (mean2 < 0 || last_axes(im->g->node[mean2], xv.rank) != k) return 0;
    const long add_eps = node_reading(im, im->g->node[mean2]->output[0], "Add");
    if (add_eps < 0) return 0;
    const char *eps_name = other_input(im->g->node[add_eps], im->g->node[mean2]->output[0]);
    const float eps = eps_name ? scalar_named(im, eps_name) : NAN;
    if (!(isfinite(eps) && eps > 0.0f)) return 0;
    const long sqrt_node = node_reading(im, im->g->node[add_eps]->output[0], "Sqrt");
    if (sqrt_node < 0 || strcmp(im->g->node[div]->input[1], im->g->node[sqrt_node]->output[0]) ||
        readers(im, im->g->node[sqrt_node]->output[0]) != 1)
        return 0;
    const long mul = node_reading(im, im->g->node[div]->output[0], "Mul");
    if (mul < 0) return 0;
    const char *w_name = other_input(im->g->node[mul], im->g->node[div]->output[0]);
    const long add_b = node_reading(im, im->g->node[mul]->output[0], "Add");
    if (!w_name || add_b < 0) return 0;
    const char *b_name = other_input(im->g->node[add_b], im->g->node[mul]->output[0]);
    const onnx_value *wv = find_value(im, w_name), *bv = b_name ? find_value(im, b_name) : NULL;
    if (!wv || wv->kind != V_CONST || !bv || bv->kind != V_CONST) return 0;
    /* the pattern holds: from here, a mismatch is the file's error */
    const int a = xv.rank - k;
    for (int q = 0; q < 2; q++) {
        const Onnx__TensorProto *t = q ? bv->tensor : wv->tensor;
        int same = t->n_dims == (size_t)k && numel_of(t) >= 0;
        for (int i = 0; same && i < k; i++) same = t->dims[i] == xv.dims[a + i];
        if (!same)
            return fail_node(im, im->g->node[q ? add_b : mul],
                             "LayerNorm's %s is not of the normalised axes' shape",
                             q ? "bias" : "weight");
    }
    const long taken[] = {sub, pow, mean2, add_eps, sqrt_node, div, mul, add_b};
    for (size_t i = 0; i < sizeof taken / sizeof *taken; i++) im->fused[taken[i]] = 1;
    char name[80];
    op_name(n, wv->tensor, name, sizeof name);
    const Onnx__NodeProto *last = im->g->node[add_b];
    const int y = dt_model_layernorm(im->m, name, x->id, a, eps, 1);
    if (set_output(im, last, y)) return -1;
    const dt_op *op = &im->m->ops[im->m->n_ops - 1];
    if (take(im, im->g->node[mul], op->weight, wv->tensor, 0)) return -1;
    return take(im, last, op->bias, bv->tensor, 0) ? -1 : 1;
}

/* ------------------------------------------------------------------ multi-head attention */

/* nn.MultiheadAttention (batch_first) exports F.multi_head_attention_forward, which
 * moves the batch axis: [N, T, E] -> Transpose -> [T, N, E] -> MatMul by in_proj_weight^T,
 * Add in_proj_bias -> three Slices of E (q, k, v) -> each Reshape [T, N*h, d] -> Transpose
 * to [N*h, T, d] (k: [N*h, d, T]) -> q / sqrt(d) -> MatMul q k^T -> Softmax -> MatMul by
 * v -> Transpose [T, N*h, d] -> Reshape [T*N, E] -> Gemm by out_proj -> Reshape
 * [T, N, E] -> Transpose back to [N, T, E], with shape arithmetic (Shape, Gather, Div,
 * Concat ...) beside it. dtrain keeps the batch axis first, so the whole subgraph is
 * taken at its first Transpose and computed batch-first by ops of its own: a linear
 * layer over the last axis, slices, reshapes, transposes [T, h, d] -> [h, T, d], the
 * scale, batched matmuls, softmax. The nodes in between are taken in; the values they
 * make are known only by their ONNX shapes (V_SHAPE), for the Shape nodes that read
 * them; the targets of the Reshapes and the bounds of the Slices are checked once
 * their shape arithmetic is folded (check_shapes). */

typedef struct mha_match {
    importer *im;
    const Onnx__NodeProto *first;
} mha_match;

static int mha_differs(const mha_match *a, const Onnx__NodeProto *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int mha_differs(const mha_match *a, const Onnx__NodeProto *n, const char *fmt, ...) {
    char what[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return fail_node(a->im, n,
                     "%s, where nn.MultiheadAttention's export (the only Transpose of the batch "
                     "axis dtrain imports, from node '%s') differs",
                     what, a->first->name ? a->first->name : "(unnamed)");
}

/* The nodes reading `name` other than Shape nodes (which read only its shape): how
 * many, the first `max` of them in idx. */
static int data_readers(const importer *im, const char *name, long *idx, int max) {
    int count = 0, reads;
    const int *r = readers_of(im, name, &reads);
    for (int k = 0; k < reads; k++) {
        const Onnx__NodeProto *n = im->g->node[r[k]];
        if ((k && r[k] == r[k - 1]) || (n->op_type && !strcmp(n->op_type, "Shape"))) continue;
        if (count < max) idx[count] = r[k];
        count++;
    }
    return count;
}

static long producer_of(const importer *im, const char *name) {
    const name_slot *s = slot_of(im, name);
    return s ? s->producer : -1;
}

static int is_op(const Onnx__NodeProto *n, const char *op) {
    return n->op_type && !strcmp(n->op_type, op) && default_domain(n);
}

/* The one node (Shape nodes aside) reading prev's output: an `op` reading it as input
 * `pos` (-1: any); else -1 after failing. */
static long mha_next(const mha_match *a, const Onnx__NodeProto *prev, const char *op, int pos) {
    long idx[2];
    const char *out = prev->n_output == 1 ? prev->output[0] : NULL;
    const int count = out ? data_readers(a->im, out, idx, 2) : 0;
    if (count != 1)
        return mha_differs(a, prev, "its output is read by %d nodes besides Shape, not by one %s",
                           count, op);
    const Onnx__NodeProto *n = a->im->g->node[idx[0]];
    /* the nodes taken in skip import_node's arity check: their input counts here */
    const size_t ins = n->n_input;
    const size_t want = !strcmp(op, "Transpose") || !strcmp(op, "Softmax") ? 1
                        : !strcmp(op, "Gemm")                              ? 3
                                                                           : 2;
    if (is_op(n, op) && ins != want)
        return mha_differs(a, n, "%zu inputs (a %s takes %zu)", ins, op, want);
    if (!is_op(n, op) || n->n_output != 1 ||
        (pos >= 0 && ((size_t)pos >= n->n_input || strcmp(n->input[pos], out))))
        return mha_differs(a, n, "it reads '%s' where a %s (its input %d) would", out, op, pos);
    return idx[0];
}

static int perm_is(const Onnx__NodeProto *n, int rank, const int *want) {
    const Onnx__AttributeProto *p = attr(n, "perm");
    if (!p || p->n_ints != (size_t)rank) return 0;
    for (int i = 0; i < rank; i++)
        if (p->ints[i] != want[i]) return 0;
    return 1;
}

/* An initializer (not a Constant node's value) of the given dims, or NULL. */
static const Onnx__TensorProto *initializer_of(importer *im, const char *name, int rank,
                                               const long long *dims) {
    const onnx_value *v = name ? find_value(im, name) : NULL;
    const name_slot *s = name ? slot_of(im, name) : NULL;
    if (!v || v->kind != V_CONST || v->from_constant || !s || !s->is_initializer ||
        !dims_are(v->tensor, (size_t)rank))
        return NULL;
    for (int i = 0; i < rank; i++)
        if (v->tensor->dims[i] != dims[i]) return NULL;
    return v->tensor;
}

static int shape_value(importer *im, const Onnx__NodeProto *first, const Onnx__NodeProto *n,
                       int rank, const int64_t *k, const int64_t *c) {
    onnx_value *v = add_value(im, n->output[0], V_SHAPE);
    if (!v) return -1;
    v->inside = first;
    v->shape_rank = rank;
    for (int d = 0; d < rank; d++) {
        v->shape_k[d] = k[d];
        v->shape_c[d] = c[d];
    }
    return 0;
}

static int add_check(importer *im, long node, int rank, const int64_t *k, const int64_t *c) {
    if (im->n_checks == im->cap_checks) {
        const int cap = im->cap_checks ? 2 * im->cap_checks : 16;
        shape_check *grown = realloc(im->checks, (size_t)cap * sizeof *grown);
        if (!grown) return fail(im, "out of memory");
        im->checks = grown;
        im->cap_checks = cap;
    }
    shape_check *s = &im->checks[im->n_checks++];
    memset(s, 0, sizeof *s);
    s->node = (size_t)node;
    s->rank = rank;
    for (int d = 0; d < rank; d++) {
        s->k[d] = k ? k[d] : 0;
        s->c[d] = c[d];
    }
    im->fused[node] = 2;
    return 0;
}

/* Input i of node n folded to `count` integers free of N equal to want[] (axes:
 * want_alt[] too); 0, or -1 with the reason in why. */
static int folded_ints_are(importer *im, const Onnx__NodeProto *n, size_t i, const int64_t *want,
                           const int64_t *want_k, int count, char *why, size_t size) {
    if (i >= n->n_input || !n->input[i] || !*n->input[i]) {
        snprintf(why, size, "its input %zu is missing", i);
        return -1;
    }
    dt_fold_tensor tmp;
    const dt_fold_tensor *t = fold_input(im, n, i, &tmp);
    if (!t) return -1;
    int same = dt_fold_is_int(t->elem_type) && t->count == (size_t)count;
    for (int q = 0; same && q < count; q++)
        same = t->c[q] == want[q] && t->k[q] == (want_k ? want_k[q] : 0);
    if (!same) {
        size_t used = (size_t)snprintf(why, size, "its input '%s' is [", n->input[i]);
        for (size_t q = 0; dt_fold_is_int(t->elem_type) && q < t->count && q < 8 && used < size;
             q++) {
            char form[64];
            used += (size_t)snprintf(why + used, size - used, "%s%s", q ? ", " : "",
                                     form_text(t->k[q], t->c[q], form, sizeof form));
        }
        if (used < size) used += (size_t)snprintf(why + used, size - used, "], not [");
        for (int q = 0; q < count && used < size; q++) {
            char form[64];
            used += (size_t)snprintf(why + used, size - used, "%s%s", q ? ", " : "",
                                     form_text(want_k ? want_k[q] : 0, want[q], form, sizeof form));
        }
        if (used < size) snprintf(why + used, size - used, "]");
    }
    dt_fold_free(&tmp);
    return same ? 0 : -1;
}

/* Node i, taken in by import_mha, now that its shape arithmetic is folded: its
 * Reshape target or Slice bounds as the batch-first ops computed them. */
static int check_shapes(importer *im, size_t i) {
    const shape_check *s = NULL;
    for (int q = 0; q < im->n_checks && !s; q++)
        if (im->checks[q].node == i) s = &im->checks[q];
    if (!s) return 0;
    const Onnx__NodeProto *n = im->g->node[i];
    char why[300] = "";
    int rc;
    if (is_op(n, "Reshape")) {
        rc = folded_ints_are(im, n, 1, s->c, s->k, s->rank, why, sizeof why);
    } else {
        const int64_t start = s->c[0], end = s->c[1], last = -1, alt = 2, one = 1;
        rc = folded_ints_are(im, n, 1, &start, NULL, 1, why, sizeof why);
        if (!rc) rc = folded_ints_are(im, n, 2, &end, NULL, 1, why, sizeof why);
        if (!rc && folded_ints_are(im, n, 3, &last, NULL, 1, why, sizeof why))
            rc = folded_ints_are(im, n, 3, &alt, NULL, 1, why, sizeof why);
        if (!rc && n->n_input > 4 && n->input[4] && *n->input[4])
            rc = folded_ints_are(im, n, 4, &one, NULL, 1, why, sizeof why);
    }
    if (rc && !im->failed)
        return fail_node(im, n, "%s, in the multi-head attention dtrain imports whole", why);
    return rc ? -1 : 0;
}

static int built(importer *im, const Onnx__NodeProto *n, int id) {
    if (id < 0) fail_node(im, n, "%s", im->m->build_error.msg);
    return id;
}

/* nn.MultiheadAttention's export from its first Transpose n (perm [1, 0, 2] of an
 * activation [N, T, E]): 0 imported, -1 failed naming the node where it differs. */
static int import_mha(importer *im, const Onnx__NodeProto *n, onnx_value *x) {
    const mha_match a = {im, n};
    const Onnx__GraphProto *g = im->g;
    /* x points into im->values, which the V_SHAPE values below may move */
    const int x_id = x->id;
    const dt_value xv = im->m->values[x_id];
    const long long T = xv.dims[0], E = xv.dims[1];
    static const int swap[] = {1, 0, 2}, to_dt[] = {1, 2, 0}, swap2[] = {1, 0};
    /* a batch Transpose that starts no attention is refused as one: its reader not the
     * in-projection's MatMul */
    long first_reader[1];
    const int n_readers = data_readers(im, n->output[0], first_reader, 1);
    const Onnx__NodeProto *r0 = n_readers == 1 ? g->node[first_reader[0]] : NULL;
    if (!r0 || !is_op(r0, "MatMul") || r0->n_input != 2 || strcmp(r0->input[0], n->output[0]))
        return fail_node(im, n,
                         "it moves the batch axis (perm [1, 0, 2]): dtrain keeps the batch axis "
                         "first, and takes such a Transpose only as the start of "
                         "nn.MultiheadAttention's export, read by its in-projection MatMul alone "
                         "(here by %d node%s besides Shape%s%s)",
                         n_readers, n_readers == 1 ? "" : "s", r0 ? ", a " : "",
                         r0 && r0->op_type ? r0->op_type : "");
    /* the in-projection: MatMul by the Transpose of in_proj_weight [3E, E], Add its bias */
    const long mm = mha_next(&a, n, "MatMul", 0);
    if (mm < 0) return -1;
    const long wt = producer_of(im, g->node[mm]->input[1]);
    const long long w_dims[] = {3 * E, E}, b_dims[] = {3 * E};
    const Onnx__TensorProto *w_in =
        wt >= 0 && is_op(g->node[wt], "Transpose") && g->node[wt]->n_input == 1 &&
                (perm_is(g->node[wt], 2, swap2) || !attr(g->node[wt], "perm")) &&
                readers(im, g->node[mm]->input[1]) == 1
            ? initializer_of(im, g->node[wt]->input[0], 2, w_dims)
            : NULL;
    if (!w_in)
        return mha_differs(&a, g->node[mm],
                           "its weight is not the Transpose of an initializer [%lld, %lld] "
                           "(in_proj_weight) read by it alone",
                           3 * E, E);
    const long add = mha_next(&a, g->node[mm], "Add", -1);
    if (add < 0) return -1;
    const Onnx__TensorProto *b_in =
        initializer_of(im, other_input(g->node[add], g->node[mm]->output[0]), 1, b_dims);
    if (!b_in)
        return mha_differs(&a, g->node[add], "it does not add an initializer [%lld] (in_proj_bias)",
                           3 * E);
    /* q, k, v: three Slices of E, each Reshaped and Transposed; told apart by what reads
     * them (q is scaled, k transposed [1, 2, 0], v the second MatMul's) */
    long sl[3], rs[3], tr[3], role[3] = {-1, -1, -1}; /* role: the slice of q, k, v */
    if (data_readers(im, g->node[add]->output[0], sl, 3) != 3)
        return mha_differs(&a, g->node[add], "its output is not read by three Slices (q, k, v)");
    for (int i = 0; i < 3; i++) {
        const Onnx__NodeProto *s = g->node[sl[i]];
        if (!is_op(s, "Slice") || s->n_input < 3 || s->n_input > 5 ||
            strcmp(s->input[0], g->node[add]->output[0]) || s->n_output != 1)
            return mha_differs(&a, s,
                               "it reads the in-projection where a Slice of q, k or v would");
        if ((rs[i] = mha_next(&a, s, "Reshape", 0)) < 0 ||
            (tr[i] = mha_next(&a, g->node[rs[i]], "Transpose", 0)) < 0)
            return -1;
        const Onnx__NodeProto *t = g->node[tr[i]];
        long after[1];
        const int r =
            perm_is(t, 3, to_dt)   ? 1
            : !perm_is(t, 3, swap) ? -1
            : data_readers(im, t->output[0], after, 1) == 1 && is_op(g->node[after[0]], "MatMul")
                ? 2
                : 0;
        if (r < 0 || role[r] >= 0)
            return mha_differs(&a, t,
                               "it is not the one Transpose of q, k or v (perm [1, 0, 2] "
                               "for q and v, [1, 2, 0] for k)");
        role[r] = i;
    }
    const long q = role[0], k = role[1], v = role[2];
    /* the scale: q / sqrt(d), or q * (1 / sqrt(d)); it fixes d and the heads */
    long scale_node = -1;
    {
        long idx[1];
        if (data_readers(im, g->node[tr[q]]->output[0], idx, 1) == 1) scale_node = idx[0];
    }
    const Onnx__NodeProto *sc = scale_node >= 0 ? g->node[scale_node] : NULL;
    const int divide = sc && is_op(sc, "Div");
    const char *scale_name = sc && (divide || is_op(sc, "Mul")) && sc->n_input == 2 &&
                                     !strcmp(sc->input[0], g->node[tr[q]]->output[0])
                                 ? sc->input[1]
                                 : NULL;
    const float sv = scale_name ? scalar_named(im, scale_name) : NAN;
    const double s2 = divide ? (double)sv * sv : 1.0 / ((double)sv * sv);
    const long long d = isfinite(sv) && sv > 0 && s2 < (double)MAX_DIM ? llround(s2) : 0;
    if (!d || E % d || fabs((divide ? sv : 1.0 / sv) - sqrt((double)d)) > 1e-5 * sqrt((double)d))
        return mha_differs(&a, sc ? sc : g->node[tr[q]],
                           "q is not scaled by 1 / sqrt(d) of a head size d dividing E = %lld", E);
    const long long h = E / d;
    const long mm1 = mha_next(&a, sc, "MatMul", 0);
    if (mm1 < 0 || mha_next(&a, g->node[tr[k]], "MatMul", 1) != mm1) return -1;
    const long smx = mha_next(&a, g->node[mm1], "Softmax", 0);
    if (smx < 0) return -1;
    const long long sm_axis = attr_int(g->node[smx], "axis", im->opset < 13 ? 1 : -1);
    if (sm_axis != -1 && sm_axis != 2)
        return mha_differs(&a, g->node[smx], "its axis is %lld, not the last (-1)", sm_axis);
    const long mm2 = mha_next(&a, g->node[smx], "MatMul", 0);
    if (mm2 < 0 || mha_next(&a, g->node[tr[v]], "MatMul", 1) != mm2) return -1;
    const long back = mha_next(&a, g->node[mm2], "Transpose", 0);
    if (back < 0) return -1;
    if (!perm_is(g->node[back], 3, swap))
        return mha_differs(&a, g->node[back], "its perm is not [1, 0, 2]");
    const long flat = mha_next(&a, g->node[back], "Reshape", 0);
    const long gemm = flat < 0 ? -1 : mha_next(&a, g->node[flat], "Gemm", 0);
    if (gemm < 0) return -1;
    const Onnx__NodeProto *gn = g->node[gemm];
    const long long wo_dims[] = {E, E}, bo_dims[] = {E};
    const Onnx__TensorProto *w_out =
        gn->n_input == 3 && attr_int(gn, "transB", 0) == 1 && attr_int(gn, "transA", 0) == 0 &&
                attr_float(gn, "alpha", 1) == 1.0f && attr_float(gn, "beta", 1) == 1.0f
            ? initializer_of(im, gn->input[1], 2, wo_dims)
            : NULL;
    const Onnx__TensorProto *b_out = w_out ? initializer_of(im, gn->input[2], 1, bo_dims) : NULL;
    if (!b_out)
        return mha_differs(&a, gn,
                           "it is not x W^T + b (transB 1, alpha and beta 1) by initializers "
                           "[%lld, %lld] and [%lld] (out_proj)",
                           E, E, E);
    const long unflat = mha_next(&a, gn, "Reshape", 0);
    const long last = unflat < 0 ? -1 : mha_next(&a, g->node[unflat], "Transpose", 0);
    if (last < 0) return -1;
    if (!perm_is(g->node[last], 3, swap))
        return mha_differs(&a, g->node[last], "its perm is not [1, 0, 2]");

    /* the pattern holds: the ONNX shapes of its values, its nodes taken in, the checks */
    const int64_t n1[] = {0, 1, 0}, tne[] = {T, 0, E}, tn3e[] = {T, 0, 3 * E};
    const int64_t nh[] = {0, h, 0}, tnhd[] = {T, 0, d}, hn0[] = {h, 0, 0};
    const int64_t htd[] = {0, T, d}, hdt[] = {0, d, T}, htt[] = {0, T, T};
    const int64_t tn[] = {T, 0}, te[] = {0, E};
    int rc = shape_value(im, n, n, 3, n1, tne) || shape_value(im, n, g->node[mm], 3, n1, tn3e) ||
             shape_value(im, n, g->node[add], 3, n1, tn3e);
    for (int i = 0; i < 3 && !rc; i++) {
        const int is_k = i == (int)k;
        rc = shape_value(im, n, g->node[sl[i]], 3, n1, tne) ||
             shape_value(im, n, g->node[rs[i]], 3, nh, tnhd) ||
             shape_value(im, n, g->node[tr[i]], 3, hn0, is_k ? hdt : htd);
        const int64_t bounds[] = {(i == (int)q   ? 0
                                   : i == (int)k ? 1
                                                 : 2) *
                                      E,
                                  (i == (int)q   ? 1
                                   : i == (int)k ? 2
                                                 : 3) *
                                      E};
        rc = rc || add_check(im, sl[i], 2, NULL, bounds) || add_check(im, rs[i], 3, nh, tnhd);
    }
    rc = rc || shape_value(im, n, sc, 3, hn0, htd) ||
         shape_value(im, n, g->node[mm1], 3, hn0, htt) ||
         shape_value(im, n, g->node[smx], 3, hn0, htt) ||
         shape_value(im, n, g->node[mm2], 3, hn0, htd) ||
         shape_value(im, n, g->node[back], 3, nh, tnhd) ||
         shape_value(im, n, g->node[flat], 2, tn, te) || shape_value(im, n, gn, 2, tn, te) ||
         shape_value(im, n, g->node[unflat], 3, n1, tne) || add_check(im, flat, 2, tn, te) ||
         add_check(im, unflat, 3, n1, tne);
    if (rc) return -1;
    const long taken[] = {mm,   add,  scale_node, mm1,   smx,   mm2,
                          back, gemm, last,       tr[0], tr[1], tr[2]};
    for (size_t i = 0; i < sizeof taken / sizeof *taken; i++)
        if (taken[i] > (long)im->node_index)
            im->fused[taken[i]] = 1;
        else
            return mha_differs(&a, g->node[taken[i]], "it comes before the attention's start");
    if (wt > (long)im->node_index)
        im->fused[wt] = 1;
    else if (wt >= 0 && !find_value(im, g->node[wt]->output[0]))
        return mha_differs(&a, g->node[wt], "it is not imported before the attention's start");

    /* batch-first: x [T, E] -> qkv [T, 3E] -> q, k, v [T, E] -> [T, h, d] -> [h, T, d] */
    dt_model *m = im->m;
    char name[80];
    const char *wn = w_in->name;
    const size_t wl = strlen(wn), tail = strlen("_weight");
    if (wl > tail && !strcmp(wn + wl - tail, "_weight") && wl - tail < sizeof name)
        snprintf(name, sizeof name, "%.*s", (int)(wl - tail), wn);
    else
        snprintf(name, sizeof name, "%s", n->name && *n->name ? n->name : "attention");
    const int qkv =
        built(im, g->node[mm], dt_model_linear_last_axis(m, name, x_id, (int)(3 * E), 1));
    if (qkv < 0) return -1;
    const dt_op *in_op = &m->ops[m->n_ops - 1];
    if (take(im, g->node[mm], in_op->weight, w_in, 0) ||
        take(im, g->node[add], in_op->bias, b_in, 0))
        return -1;
    int heads[3];
    const int dims3[] = {(int)T, (int)h, (int)d};
    for (int i = 0; i < 3; i++) {
        const int start = (i == (int)q ? 0 : i == (int)k ? 1 : 2) * (int)E;
        int y = built(im, g->node[sl[i]], dt_model_slice(m, qkv, 1, start, (int)E, 1, 1));
        if (y >= 0) y = built(im, g->node[rs[i]], dt_model_reshape(m, y, 3, dims3));
        if (y >= 0)
            y = built(im, g->node[tr[i]], dt_model_transpose(m, y, i == (int)k ? to_dt : swap));
        if (y < 0) return -1;
        heads[i] = y;
    }
    int y = built(im, sc,
                  dt_model_binary_scalar(m, divide ? DT_BINARY_DIV : DT_BINARY_MUL, heads[q], sv));
    if (y >= 0) y = built(im, g->node[mm1], dt_model_matmul(m, y, heads[k]));
    if (y >= 0) y = built(im, g->node[smx], dt_model_softmax(m, y, 2, 0, 0));
    if (y >= 0) y = built(im, g->node[mm2], dt_model_matmul(m, y, heads[v]));
    if (y >= 0) y = built(im, g->node[back], dt_model_transpose(m, y, swap));
    const int dims2[] = {(int)T, (int)E};
    if (y >= 0) y = built(im, g->node[flat], dt_model_reshape(m, y, 2, dims2));
    if (y < 0) return -1;
    op_name(gn, w_out, name, sizeof name);
    if (set_output(im, g->node[last], dt_model_linear_last_axis(m, name, y, (int)E, 1))) return -1;
    const dt_op *out_op = &m->ops[m->n_ops - 1];
    return take(im, gn, out_op->weight, w_out, 0) || take(im, gn, out_op->bias, b_out, 0) ? -1 : 0;
}

/* The first opset whose version of an operator is the one imported here (ONNX's
 * Changelog): BatchNormalization before 9 had `spatial`, Add and Gemm before 7 their
 * `broadcast`, Concat before 4 a default axis, Reshape before 5 a shape attribute, Pad
 * before 2 `paddings`, Dropout before 7 `is_test`; the others are unchanged from 1. */
static const struct {
    const char *op;
    int since;
} first_opset[] = {{"BatchNormalization", 9},
                   {"Add", 7},
                   {"Sub", 7},
                   {"Mul", 7},
                   {"Div", 7},
                   {"Gemm", 7},
                   {"Concat", 4},
                   {"Reshape", 5},
                   {"Pad", 2},
                   {"Dropout", 7},
                   {"Slice", 10},
                   {"Expand", 8}};

/* How many inputs and outputs each operator has (ONNX's operator specs, opsets 1 to 17;
 * optional ones counted, given or empty): a node of more is a malformed file, and its
 * extra names would be taken as readers. It is also the list of the operators dtrain
 * imports: every operator import_node takes has its row here (refuse_lacking_ops names
 * the graph's others, all at once, before importing). */
enum { ANY_COUNT = 0xffff }; /* max_in of an operator taking any number (Concat) */
static const struct {
    const char *op;
    unsigned short min_in, max_in, min_out, max_out;
} arity[] = {{"Constant", 0, 0, 1, 1},
             {"Conv", 2, 3, 1, 1},
             {"BatchNormalization", 5, 5, 1, 5},
             {"Relu", 1, 1, 1, 1},
             {"MaxPool", 1, 1, 1, 2},
             {"AveragePool", 1, 1, 1, 1},
             {"GlobalAveragePool", 1, 1, 1, 1},
             {"Flatten", 1, 1, 1, 1},
             {"Reshape", 2, 2, 1, 1},
             {"Gemm", 2, 3, 1, 1},
             {"MatMul", 2, 2, 1, 1},
             {"Add", 2, 2, 1, 1},
             {"Sub", 2, 2, 1, 1},
             {"Mul", 2, 2, 1, 1},
             {"Div", 2, 2, 1, 1},
             {"ReduceMean", 1, 2, 1, 1},
             {"Concat", 1, ANY_COUNT, 1, 1},
             {"Dropout", 1, 3, 1, 2},
             {"Pad", 1, 3, 1, 1},
             {"Identity", 1, 1, 1, 1},
             {"Transpose", 1, 1, 1, 1},
             {"Squeeze", 1, 2, 1, 1},
             {"Unsqueeze", 1, 2, 1, 1},
             {"Shape", 1, 1, 1, 1},
             {"ConstantOfShape", 1, 1, 1, 1},
             {"Range", 3, 3, 1, 1},
             {"Gather", 2, 2, 1, 1},
             {"Slice", 1, 5, 1, 1},
             {"Equal", 2, 2, 1, 1},
             {"Where", 3, 3, 1, 1},
             {"Cast", 1, 1, 1, 1},
             {"Expand", 2, 2, 1, 1},
             {"Clip", 1, 3, 1, 1},
             {"Sigmoid", 1, 1, 1, 1},
             {"HardSigmoid", 1, 1, 1, 1},
             {"HardSwish", 1, 1, 1, 1},
             {"Tanh", 1, 1, 1, 1},
             {"LeakyRelu", 1, 1, 1, 1},
             {"Erf", 1, 1, 1, 1},
             {"Softmax", 1, 1, 1, 1},
             {"LogSoftmax", 1, 1, 1, 1},
             {"LayerNormalization", 2, 3, 1, 3},
             {"Split", 1, 2, 1, 64},
             {"Pow", 2, 2, 1, 1},
             {"Sqrt", 1, 1, 1, 1}};

/* the refusal of a node whose operator dtrain lacks (import_node, refuse_lacking_ops) */
#define NOT_IMPORTED "not an operator dtrain imports (docs/onnx.md lists the ones it does)"

static int import_node(importer *im, const Onnx__NodeProto *n) {
    const char *op = n->op_type ? n->op_type : "";
    if (n->domain && *n->domain && strcmp(n->domain, "ai.onnx"))
        return fail_node(im, n, "an operator outside the standard ONNX domain");
    for (size_t i = 0; i < sizeof arity / sizeof *arity; i++) {
        if (strcmp(op, arity[i].op)) continue;
        char range[32];
        if (n->n_input < arity[i].min_in || n->n_input > arity[i].max_in) {
            snprintf(range, sizeof range,
                     arity[i].max_in == ANY_COUNT         ? "%d or more"
                     : arity[i].min_in == arity[i].max_in ? "%d"
                                                          : "%d to %d",
                     arity[i].min_in, arity[i].max_in);
            return fail_node(im, n, "%zu inputs, where %s takes %s", n->n_input, op, range);
        }
        if (n->n_output < arity[i].min_out || n->n_output > arity[i].max_out) {
            snprintf(range, sizeof range, arity[i].min_out == arity[i].max_out ? "%d" : "%d to %d",
                     arity[i].min_out, arity[i].max_out);
            return fail_node(im, n, "%zu outputs, where %s gives %s", n->n_output, op, range);
        }
    }
    for (size_t i = 0; i < sizeof first_opset / sizeof *first_opset; i++)
        if (!strcmp(op, first_opset[i].op) && im->opset < first_opset[i].since)
            return fail_node(im, n,
                             "opset %lld's %s is not the one dtrain imports (opset %d or later)",
                             im->opset, op, first_opset[i].since);
    if (!strcmp(op, "Constant")) {
        const Onnx__AttributeProto *a = attr(n, "value");
        if (!a || !a->t || n->n_output < 1)
            return fail_node(im, n, "only Constant nodes with a tensor value are supported");
        onnx_value *v = add_value(im, n->output[0], V_CONST);
        if (!v) return -1;
        v->tensor = a->t;
        v->from_constant = 1;
        return 0;
    }
    /* shape arithmetic on constants and shapes: evaluated here, once (onnx_fold.h); a
     * node reading an activation (or a weight) falls through to its op */
    if (dt_fold_takes(op)) {
        const int folded = try_fold(im, n);
        if (folded <= 0) return folded;
    }
    /* the ops of images read C, H, W: other ranks are refused here, by name, before
     * their checks would read a value of rank 4 as 0 channels */
    if (!strcmp(op, "Conv") || !strcmp(op, "BatchNormalization") || !strcmp(op, "MaxPool") ||
        !strcmp(op, "AveragePool") || !strcmp(op, "GlobalAveragePool")) {
        /* found, not taken: act_input would make a Pad before a Conv its own op (the
         * importer below takes its input, or names what is wrong with it) */
        const onnx_value *x = n->n_input > 0 && n->input[0] ? find_value(im, n->input[0]) : NULL;
        if (x && x->kind == V_ACT && im->m->values[x->id].rank != 3)
            return fail_node(im, n,
                             "its input has %d axes a sample; %s takes images [batch, C, H, W]",
                             im->m->values[x->id].rank, op);
    }
    if (!strcmp(op, "Conv")) return import_conv(im, n);
    if (!strcmp(op, "BatchNormalization")) return import_batchnorm(im, n);
    if (!strcmp(op, "Relu")) {
        onnx_value *x = act_input(im, n, 0);
        if (!x) return -1;
        if (im->storage_readers[im->m->values[x->id].storage] > 1)
            return fail_node(im, n,
                             "its input is also read by another node (under this name or one of "
                             "its aliases: Identity, Flatten, Reshape, Pad), and dtrain's ReLU "
                             "works in place");
        return set_output(im, n, dt_model_relu(im->m, x->id));
    }
    if (!strcmp(op, "Div") || !strcmp(op, "Mul")) {
        const int rc = import_gelu(im, n);
        if (rc <= 0) return rc; /* 1: not the start of a GELU */
    }
    if (!strcmp(op, "Cast")) return import_cast_of_constant(im, n);
    if (!strcmp(op, "Clip")) return import_clip(im, n);
    if (!strcmp(op, "Sigmoid")) {
        const dt_activation silu = {DT_ACT_SILU, 0, 0};
        return import_gate(im, n, (dt_activation){DT_ACT_SIGMOID, 0, 0}, &silu);
    }
    if (!strcmp(op, "HardSigmoid")) return import_hardsigmoid(im, n);
    if (!strcmp(op, "HardSwish"))
        return import_activation(im, n, (dt_activation){DT_ACT_HARDSWISH, 0, 0});
    if (!strcmp(op, "Tanh")) return import_activation(im, n, (dt_activation){DT_ACT_TANH, 0, 0});
    if (!strcmp(op, "LeakyRelu"))
        return import_activation(
            im, n, (dt_activation){DT_ACT_LEAKY_RELU, attr_float(n, "alpha", 0.01f), 0});
    if (!strcmp(op, "Erf"))
        return fail_node(im, n,
                         "Erf is imported only inside GELU's decomposition (x / sqrt(2), Erf, "
                         "+ 1, * x, * 0.5: torch.onnx's nn.GELU), and no such pattern leads to it");
    if (!strcmp(op, "MaxPool")) return import_pool(im, n, 1);
    if (!strcmp(op, "AveragePool")) return import_pool(im, n, 0);
    if (!strcmp(op, "GlobalAveragePool")) {
        onnx_value *x = act_input(im, n, 0);
        return x ? set_output(im, n, dt_model_adaptive_avgpool2d(im->m, x->id, 1, 1)) : -1;
    }
    if (!strcmp(op, "Flatten")) return import_flatten(im, n);
    if (!strcmp(op, "Reshape")) return import_reshape(im, n);
    if (!strcmp(op, "Squeeze")) return import_squeeze(im, n, 1);
    if (!strcmp(op, "Unsqueeze")) return import_squeeze(im, n, 0);
    if (!strcmp(op, "Transpose") && n->n_input == 1) {
        const onnx_value *w = find_value(im, n->input[0]);
        if (w && w->kind == V_CONST) return import_transpose_weight(im, n, w->tensor);
    }
    if (!strcmp(op, "Transpose")) return import_transpose(im, n);
    if (!strcmp(op, "Gemm")) return import_gemm(im, n);
    if (!strcmp(op, "MatMul")) return import_matmul(im, n);
    if (!strcmp(op, "ReduceMean")) {
        const int rc = import_decomposed_layernorm(im, n);
        if (rc) return rc < 0 ? -1 : 0;
    }
    if (!strcmp(op, "Add") || !strcmp(op, "Sub") || !strcmp(op, "Mul") || !strcmp(op, "Div"))
        return import_binary(im, n);
    if (!strcmp(op, "ReduceMean")) return import_reduce_mean(im, n);
    if (!strcmp(op, "Concat")) return import_concat(im, n);
    if (!strcmp(op, "Softmax")) return import_softmax(im, n, 0);
    if (!strcmp(op, "LogSoftmax")) return import_softmax(im, n, 1);
    if (!strcmp(op, "LayerNormalization")) return import_layernorm(im, n);
    if (!strcmp(op, "Gather")) return import_gather(im, n);
    if (!strcmp(op, "Slice")) return import_slice(im, n);
    if (!strcmp(op, "Split")) return import_split(im, n);
    if (!strcmp(op, "Expand")) return import_expand(im, n);
    if (!strcmp(op, "Pow") || !strcmp(op, "Sqrt"))
        return fail_node(im, n,
                         "%s is imported only inside LayerNorm's decomposition (ReduceMean, Sub, "
                         "Pow 2, ReduceMean, Add eps, Sqrt, Div, Mul, Add: PyTorch's nn.LayerNorm "
                         "before opset 17), and no such pattern leads to it",
                         op);
    if (!strcmp(op, "Dropout")) return import_dropout(im, n);
    if (!strcmp(op, "Pad")) return import_pad(im, n);
    if (!strcmp(op, "Identity")) {
        onnx_value *x = act_input(im, n, 0);
        return x ? set_alias(im, n, x->id) : -1;
    }
    return fail_node(im, n, NOT_IMPORTED);
}

/* Whether import_node takes this operator: a row of `arity`, in ONNX's default domain.
 */
static int op_known(const Onnx__NodeProto *n) {
    if (n->domain && *n->domain && strcmp(n->domain, "ai.onnx")) return 0;
    for (size_t i = 0; i < sizeof arity / sizeof *arity; i++)
        if (n->op_type && !strcmp(n->op_type, arity[i].op)) return 1;
    return 0;
}

typedef struct lacking_node {
    const Onnx__NodeProto *node;
    size_t index; /* in the graph */
    int count;    /* a group's nodes (refuse_lacking_ops) */
} lacking_node;

static int operator_order(const Onnx__NodeProto *x, const Onnx__NodeProto *y) {
    const int c = strcmp(x->domain ? x->domain : "", y->domain ? y->domain : "");
    return c ? c : strcmp(x->op_type ? x->op_type : "", y->op_type ? y->op_type : "");
}

/* by operator, then graph order */
static int lacking_order(const void *a, const void *b) {
    const lacking_node *x = a, *y = b;
    const int c = operator_order(x->node, y->node);
    return c ? c : (x->index > y->index) - (x->index < y->index);
}

/* the operators in the order the graph meets them (each group by its first node) */
static int first_met_order(const void *a, const void *b) {
    const lacking_node *x = a, *y = b;
    return (x->index > y->index) - (x->index < y->index);
}

/* Every operator of the graph dtrain lacks, refused in one line before any import,
 * with its node count (and the first node's name): a user learns all a model needs at
 * once, not one operator a try, nor a limit of a known one (a BatchNorm's momentum)
 * first. A graph of one such node gets import_node's line, naming that node. Sorting
 * keeps it O(n log n) whatever the names. */
static int refuse_lacking_ops(importer *im) {
    const Onnx__GraphProto *g = im->g;
    size_t n = 0, one = 0;
    for (size_t i = 0; i < g->n_node; i++)
        if (!op_known(g->node[i])) {
            n++;
            one = i;
        }
    if (n == 0) return 0;
    if (n == 1) {
        const Onnx__NodeProto *node = g->node[one];
        if (node->domain && *node->domain && strcmp(node->domain, "ai.onnx"))
            return fail_node(im, node, "an operator outside the standard ONNX domain");
        return fail_node(im, node, NOT_IMPORTED);
    }
    lacking_node *all = calloc(n, sizeof *all);
    if (!all) return fail(im, "out of memory");
    n = 0;
    for (size_t i = 0; i < g->n_node; i++)
        if (!op_known(g->node[i])) all[n++] = (lacking_node){g->node[i], i, 1};
    qsort(all, n, sizeof *all, lacking_order);
    size_t kinds = 0; /* the groups, each its first node, in place */
    for (size_t i = 0; i < n; i++) {
        if (kinds && !operator_order(all[kinds - 1].node, all[i].node))
            all[kinds - 1].count++;
        else
            all[kinds++] = all[i];
    }
    qsort(all, kinds, sizeof *all, first_met_order);
    char list[300];
    size_t used = 0, shown = 0;
    list[0] = '\0';
    for (size_t k = 0; k < kinds; k++) {
        const Onnx__NodeProto *node = all[k].node;
        const char *domain = node->domain && *node->domain ? node->domain : "";
        const char *op = node->op_type ? node->op_type : "?";
        char item[200];
        if (k == 0)
            snprintf(item, sizeof item, "%s%s%s (%d node%s, first '%.60s')", domain,
                     *domain ? ":" : "", op, all[k].count, all[k].count == 1 ? "" : "s",
                     node->name && *node->name ? node->name : "(unnamed)");
        else
            snprintf(item, sizeof item, "%s%s%s (%d)", domain, *domain ? ":" : "", op,
                     all[k].count);
        /* room kept for ", and N more" */
        if (used + strlen(item) + 2 + 24 >= sizeof list) break;
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", k ? ", " : "", item);
        shown++;
    }
    if (shown < kinds) snprintf(list + used, sizeof list - used, ", and %zu more", kinds - shown);
    free(all);
    return fail(im, "dtrain lacks %zu operator%s this graph needs: %s", kinds,
                kinds == 1 ? "" : "s", list);
}

/* Whether a Conv input is a tensor the exporter computed rather than a parameter of the
 * model: PyTorch names those "onnx::Conv_N"; the model's own keep their state-dict
 * names. (Where two came out equal, one is an Identity of the other: refused as that.)
 * The refusals below are kept short: fail() holds 400 characters, node names included.
 */
static int exporter_computed(const importer *im, const char *name) {
    const name_slot *s = slot_of(im, name);
    return s && s->is_initializer && !strncmp(name, "onnx::", 6);
}

#define EXPORT_FIX                                                                                 \
    "export with training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False "            \
    "(docs/onnx.md)"

/* Exports that lost what training needs, refused before import with their cause and the
 * export flags that avoid it. torch.onnx.export's default, an eval-mode export (with or
 * without constant folding: PyTorch 1.13 fuses in eval mode either way), folds each
 * BatchNorm into the convolution before it: the Conv's weight and bias become new
 * tensors named "onnx::Conv_N" and the BatchNorms are gone, so the graph imported
 * without them (134,826 parameters against 134,858), silently; equal folded tensors
 * (the zero biases of a fresh model) come out once, shared through an Identity of an
 * initializer. An export of a model in eval mode under TrainingMode.PRESERVE keeps the
 * BatchNorms but shares equal weights the same way. */
static int refuse_lossy_export(importer *im) {
    const Onnx__GraphProto *g = im->g;
    for (size_t i = 0; i < g->n_node; i++) {
        const Onnx__NodeProto *n = g->node[i];
        if (!n->op_type) continue;
        if (!strcmp(n->op_type, "Conv")) {
            for (size_t k = 1; k < n->n_input && k < 3; k++)
                if (exporter_computed(im, n->input[k]))
                    return fail_node(im, n,
                                     "its %s '%s' was computed by the exporter: an eval-mode "
                                     "export folds each BatchNorm "
                                     "into the convolution before it, and dtrain would train "
                                     "without them; " EXPORT_FIX,
                                     k == 1 ? "weight" : "bias", n->input[k]);
        } else if (!strcmp(n->op_type, "Identity") && n->n_input == 1) {
            const name_slot *s = slot_of(im, n->input[0]);
            if (s && s->is_initializer)
                return fail_node(im, n,
                                 "its input '%s' is a constant where dtrain needs an "
                                 "activation: an eval-mode export %s through an "
                                 "Identity; " EXPORT_FIX,
                                 n->input[0],
                                 exporter_computed(im, n->input[0])
                                     ? "folds each BatchNorm into the convolution before it and "
                                       "shares equal folded tensors"
                                     : "shares equal weights");
        }
    }
    return 0;
}

/* The graph's one data input (the inputs that are not initializers): [batch, dims...],
 * any rank (images [batch, C, H, W] the common case); the batch axis any size or
 * symbolic. */
static int data_input(importer *im, const Onnx__ValueInfoProto **out, int *rank, int *dims) {
    const Onnx__GraphProto *g = im->g;
    *out = NULL;
    for (size_t i = 0; i < g->n_input; i++) {
        const Onnx__ValueInfoProto *in = g->input[i];
        if (!in->name || !*in->name) return fail(im, "a graph input without a name");
        const name_slot *s = slot_of(im, in->name);
        if (s && s->is_initializer) continue;
        if (*out)
            return fail(im, "the graph has more than one data input ('%s', '%s')", (*out)->name,
                        in->name);
        *out = in;
    }
    if (!*out) return fail(im, "the graph has no data input");
    const Onnx__TypeProto *t = (*out)->type;
    if (!t || t->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !t->tensor_type ||
        !t->tensor_type->shape)
        return fail(im, "the input '%s' is not a tensor of known shape", (*out)->name);
    const Onnx__TypeProto__Tensor *tt = t->tensor_type;
    if (tt->elem_type != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT)
        return fail(im, "the input '%s' is not float", (*out)->name);
    const Onnx__TensorShapeProto *s = tt->shape;
    if (s->n_dim < 2 || s->n_dim > DT_VALUE_MAX_RANK + 1)
        return fail(im,
                    "the input '%s' has %zu dimensions; dtrain feeds [batch, 1 to %d axes] "
                    "(images [batch, C, H, W])",
                    (*out)->name, s->n_dim, DT_VALUE_MAX_RANK);
    long long values = 1;
    for (size_t i = 1; i < s->n_dim; i++) {
        const Onnx__TensorShapeProto__Dimension *d = s->dim[i];
        if (d->value_case != ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE ||
            d->dim_value < 1 || d->dim_value > 65536)
            return fail(im, "the input '%s': dimension %zu is not a fixed size in 1..65536",
                        (*out)->name, i);
        dims[i - 1] = (int)d->dim_value;
    }
    *rank = (int)s->n_dim - 1;
    for (int i = 0; i < *rank && values <= MAX_SAMPLE_VALUES; i++) values *= dims[i];
    if (values > MAX_SAMPLE_VALUES && *rank == 3) /* each side <= 2^16: exact */
        return fail(im,
                    "the input '%s' has %dx%dx%d = %lld values a sample, past the %lld dtrain "
                    "takes",
                    (*out)->name, dims[0], dims[1], dims[2], values, MAX_SAMPLE_VALUES);
    if (values > MAX_SAMPLE_VALUES)
        return fail(im, "the input '%s' has more than the %lld values a sample dtrain takes",
                    (*out)->name, MAX_SAMPLE_VALUES);
    return 0;
}

static void importer_free(importer *im) {
    for (int i = 0; i < im->n_values; i++) {
        if (im->values[i].fold) {
            dt_fold_free(im->values[i].fold);
            free(im->values[i].fold);
        }
        if (im->values[i].folded_proto) {
            dt_fold_proto_free(im->values[i].folded_proto);
            free(im->values[i].folded_proto);
        }
    }
    free(im->fused);
    free(im->checks);
    free(im->slots);
    free(im->reader_nodes);
    free(im->storage_readers);
    free(im->values);
    free(im->copies);
}

/* Starting values training would fail on late, under another name (a NaN loss, a
 * diverged test loss): refused at import, naming the initializer, as --init refuses
 * weights that hold NaN. */
static int check_values(importer *im, const pending_copy *pc, const float *v, size_t count) {
    for (size_t i = 0; i < count; i++) {
        if (!isfinite(v[i]))
            return fail(im, "initializer '%s' holds NaN or infinite values", tname(pc->tensor));
        if (pc->variance && v[i] < 0.0f)
            return fail(im, "initializer '%s' holds a negative variance", tname(pc->tensor));
    }
    return 0;
}

/* Maps the graph onto m (built, not allocated) and fills m->imported. */
static int import_graph(importer *im, const dt_model_spec *spec) {
    const Onnx__GraphProto *g = im->g;
    const Onnx__ValueInfoProto *input;
    int rank = 0, dims[DT_VALUE_MAX_RANK] = {0};
    if (g->n_node > MAX_NODES)
        return fail(im, "%zu nodes, past the %d that dtrain imports", g->n_node, MAX_NODES);
    if (index_names(im) || refuse_lacking_ops(im) || refuse_lossy_export(im) ||
        data_input(im, &input, &rank, dims))
        return -1;
    /* training's data sets feed images: other ranks are for graphs built as such
     * (dt_onnx_build_any: the node tests) */
    if (rank != 3 && !im->any_output)
        return fail(im,
                    "the input '%s' has %d axes a sample; dtrain's data sets feed images "
                    "[batch, C, H, W]",
                    input->name, rank);
    if (spec->in_c && (spec->in_c != dims[0] || spec->in_h != dims[1] || spec->in_w != dims[2]))
        return fail(im, "the graph takes %dx%dx%d inputs, not %dx%dx%d", dims[0], dims[1], dims[2],
                    spec->in_c, spec->in_h, spec->in_w);
    if (g->n_output < 1 || !g->output[0]->name) return fail(im, "the graph has no output");
    dt_model *m = im->m;
    const int x = dt_model_input_shape(m, rank, dims);
    onnx_value *v = add_value(im, input->name, V_ACT);
    if (!v) return -1;
    v->id = x;
    if (note_readers(im, x, input->name, 0)) return -1;
    for (size_t i = 0; i < g->n_initializer; i++) {
        const Onnx__TensorProto *t = g->initializer[i];
        if (!t->name || !*t->name) return fail(im, "an initializer without a name");
        /* safetensors' header entry, the checkpoint's momentum and step counts */
        const size_t len = strlen(t->name), tail = strlen(".num_batches_tracked");
        if (!strcmp(t->name, "__metadata__") || !strncmp(t->name, "optimizer.momentum.", 19) ||
            (len >= tail && !strcmp(t->name + len - tail, ".num_batches_tracked")))
            return fail(im, "initializer '%s': a name safetensors and checkpoints reserve",
                        t->name);
        if (numel_of(t) < 0) return fail(im, "initializer '%s': dimensions out of range", t->name);
        if (find_value(im, t->name)) continue; /* an input with a default: the input wins */
        v = add_value(im, t->name, V_CONST);
        if (!v) return -1;
        v->tensor = t;
    }
    /* in order: a name read before it is defined is reported by the node reading it */
    if (!(im->fused = calloc(g->n_node + 1, 1))) return fail(im, "out of memory");
    for (size_t i = 0; i < g->n_node && !im->failed; i++) {
        const Onnx__NodeProto *n = g->node[i];
        if (im->fused[i] == 2 && check_shapes(im, i)) return -1;
        if (im->fused[i]) continue; /* imported with an earlier node */
        im->node_index = i;
        if (import_node(im, n)) return -1;
        for (size_t k = 0; k < n->n_output; k++) {
            /* outputs past the first (BatchNormalization's running statistics in
             * training mode, Dropout's mask) must not be read: dtrain does not produce
             * them */
            if (k > 0 && n->output[k] && *n->output[k] && readers(im, n->output[k]) > 0 &&
                !find_value(im, n->output[k]))
                return fail_node(im, n,
                                 "a node reads one of its later outputs, which dtrain "
                                 "does not produce");
        }
    }
    if (im->failed) return -1;
    const onnx_value *y = find_value(im, g->output[0]->name);
    if (!y || y->kind != V_ACT)
        return fail(im, "the graph's output '%s' is not computed by its nodes", g->output[0]->name);
    if (y->padded)
        return fail(im,
                    "the graph's output '%s' is a Pad: dtrain trains a chain that ends in "
                    "the logits",
                    g->output[0]->name);
    if (y->id != m->n_values - 1)
        return fail(im,
                    "the graph's output '%s' is not its last node's: dtrain trains a chain "
                    "that ends in the logits",
                    g->output[0]->name);
    const dt_value yv = m->values[y->id];
    if ((yv.h != 1 || yv.w != 1) && !im->any_output) {
        if (yv.rank != 3)
            return fail(im, "the graph's output '%s' has %d axes a sample, not [batch, classes]",
                        g->output[0]->name, yv.rank);
        return fail(im, "the graph's output '%s' is %dx%dx%d, not [batch, classes]",
                    g->output[0]->name, yv.c, yv.h, yv.w);
    }
    for (size_t i = 1; i < g->n_output; i++)
        if (g->output[i]->name && *g->output[i]->name) {
            /* training-mode exports list BatchNorm's running statistics as outputs too:
             * those dtrain keeps itself; anything else is a second head */
            const onnx_value *o = find_value(im, g->output[i]->name);
            if (o && o->kind == V_ACT)
                return fail(im, "the graph has a second output '%s' (dtrain trains one head)",
                            g->output[i]->name);
        }
    m->classes = yv.c ? yv.c : (int)m->storages[yv.storage].per_sample;
    if (m->build_failed) return fail(im, "%s", m->build_error.msg);
    if (m->n_ops == 0) return fail(im, "the graph has no layer dtrain computes");
    for (int i = 0; i < im->n_values; i++)
        if (im->values[i].matmul)
            return fail_node(im, im->values[i].matmul,
                             "the Add that reads it gives no bias dtrain can take (an activation, "
                             "not an initializer)");
    /* every trainable tensor must come from the file */
    char *found = calloc((size_t)m->n_tensors + 1, 1);
    if (!found) return fail(im, "out of memory");
    for (int k = 0; k < im->n_copies; k++) found[im->copies[k].entry] = 1;
    for (int t = 0; t < m->n_tensors; t++)
        if (!found[t]) {
            free(found);
            return fail(im, "dtrain's %s has no initializer in the file", m->tensors[t].name);
        }
    free(found);
    if (m->n_params + m->n_buffers > MAX_PARAMETERS)
        return fail(im, "%zu parameters and buffers, past the %zu dtrain takes",
                    m->n_params + m->n_buffers, MAX_PARAMETERS);
    /* the starting values, parameters then buffers; with reinit (and for the spec) only
     * checked, not copied: the graph, not its numbers */
    if (!spec->reinit) {
        m->imported = calloc(m->n_params + m->n_buffers + 1, sizeof(float));
        if (!m->imported) return fail(im, "out of memory for the initializers");
    }
    float *tmp = NULL; /* a transposed weight as the file holds it */
    int rc = 0;
    for (int k = 0; k < im->n_copies && rc == 0; k++) {
        const pending_copy *pc = &im->copies[k];
        const dt_tensor_entry *e = &m->tensors[pc->entry];
        float *dst = m->imported ? m->imported + (e->is_param ? 0 : m->n_params) + e->offset : NULL;
        if (!pc->transpose || !dst) {
            rc = tensor_floats(im, pc->tensor, dst, e->numel);
            if (rc == 0 && dst) rc = check_values(im, pc, dst, e->numel);
            continue;
        }
        float *grown = realloc(tmp, e->numel * sizeof(float) + 1);
        if (!grown) {
            rc = fail(im, "out of memory");
            break;
        }
        tmp = grown;
        rc = tensor_floats(im, pc->tensor, tmp, e->numel);
        const int rows = e->shape[0], cols = e->shape[1]; /* [out, in] from [in, out] */
        for (int r = 0; rc == 0 && r < rows; r++)
            for (int q = 0; q < cols; q++) dst[(size_t)r * cols + q] = tmp[(size_t)q * rows + r];
        if (rc == 0) rc = check_values(im, pc, dst, e->numel);
    }
    free(tmp);
    return rc;
}

static void folder_of(const char *path, char *out, size_t size) {
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(out, size, ".");
    else if (slash == path)
        snprintf(out, size, "/");
    else
        snprintf(out, size, "%.*s", (int)(slash - path), path);
}

static void model_name(const char *path, char *out, size_t size) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    snprintf(out, size, "%s", base);
}

/* The opset of ONNX's default domain ("" or "ai.onnx") the model declares: within
 * 1..MAX_OPSET (each operator's own first version is checked by its node). */
static int default_opset(const Onnx__ModelProto *model, long long *opset, const char *path,
                         dt_error *err) {
    *opset = -1;
    for (size_t i = 0; i < model->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = model->opset_import[i];
        if (!o->domain || !*o->domain || !strcmp(o->domain, "ai.onnx"))
            *opset = o->has_version ? (long long)o->version : -1;
    }
    if (*opset < 0)
        return dt_error_set(err, "%s: the model declares no opset of ONNX's default domain", path);
    if (*opset < 1)
        return dt_error_set(err, "%s: opset %lld of ONNX's default domain is not a version", path,
                            *opset);
    if (*opset > MAX_OPSET)
        return dt_error_set(err,
                            "%s: opset %lld of ONNX's default domain is past %d, the newest "
                            "dtrain imports (ONNX 1.12)",
                            path, *opset, MAX_OPSET);
    return 0;
}

static int build(dt_model *m, const dt_model_spec *spec, int any_output, dt_error *err) {
    memset(m, 0, sizeof *m);
    Onnx__ModelProto *model = load_model(spec->name, err);
    if (!model) return -1;
    char name[32];
    model_name(spec->name, name, sizeof name);
    dt_model_init_empty(m, name, spec->classes ? spec->classes : 1);
    m->precision = spec->precision;
    importer im = {
        .path = spec->name, .g = model->graph, .m = m, .err = err, .any_output = any_output};
    folder_of(spec->name, im.folder, sizeof im.folder);
    int rc = default_opset(model, &im.opset, spec->name, err);
    if (rc == 0) rc = import_graph(&im, spec);
    if (rc == 0 && spec->classes && spec->classes != m->classes)
        rc = dt_error_set(err, "%s: the graph outputs %d classes, not %d", spec->name, m->classes,
                          spec->classes);
    importer_free(&im);
    onnx__model_proto__free_unpacked(model, NULL);
    if (rc) dt_model_free(m);
    return rc ? -1 : 0;
}

int dt_onnx_build(dt_model *m, const dt_model_spec *spec, dt_error *err) {
    return build(m, spec, 0, err);
}

int dt_onnx_build_any(dt_model *m, const dt_model_spec *spec, dt_error *err) {
    return build(m, spec, 1, err);
}

int dt_onnx_spec(dt_model_spec *spec, const char *path, dt_error *err) {
    memset(spec, 0, sizeof *spec);
    spec->name = path;
    /* the graph alone: the weights are checked, not copied (the build copies them) */
    const dt_model_spec look = {.name = path, .reinit = 1};
    dt_model m;
    if (dt_onnx_build(&m, &look, err)) return -1;
    const dt_value in = m.values[0];
    spec->in_c = in.c, spec->in_h = in.h, spec->in_w = in.w;
    spec->classes = m.classes;
    dt_model_free(&m);
    return 0;
}

/* ------------------------------------------------------------------ writing back */

/* An initializer as read (put back before the proto is freed: its allocator owns the
 * originals) and the trained values put in its place (ours). */
typedef struct saved_data {
    Onnx__TensorProto *t, as_read;
    uint8_t *ours;
} saved_data;

int dt_onnx_save(const dt_model *m, const char *source, const char *out, dt_error *err) {
    if (!dt_onnx_is_path(source))
        return dt_error_set(err, "--save %s: an ONNX file needs an ONNX --model (this one is %s)",
                            out, source);
    Onnx__ModelProto *model = load_model(source, err);
    if (!model) return -1;
    Onnx__GraphProto *g = model->graph;
    saved_data *saved = calloc(g->n_initializer + 1, sizeof *saved);
    int n_saved = 0, rc = saved ? 0 : dt_error_set(err, "out of memory");
    size_t total = 0;
    /* the weights the import transposed from [in, out] into dtrain's [out, in] go back
     * as the file holds them */
    importer names = {.path = source, .g = g, .err = err};
    if (rc == 0 && index_names(&names)) rc = -1;
    for (size_t i = 0; rc == 0 && i < g->n_node; i++) {
        const Onnx__NodeProto *n = g->node[i];
        const char *op = n->op_type ? n->op_type : "";
        name_slot *s = n->n_input > 1 ? slot_of(&names, n->input[1]) : NULL;
        if (s && (!strcmp(op, "MatMul") || (!strcmp(op, "Gemm") && !attr_int(n, "transB", 0))))
            s->transposed = 1;
    }
    for (size_t i = 0; rc == 0 && i < g->n_initializer; i++) {
        Onnx__TensorProto *t = g->initializer[i];
        const int k = t->name ? dt_model_find_tensor(m, t->name) : -1;
        if (k < 0) continue; /* not a tensor of dtrain's: kept as it was */
        const dt_tensor_entry *e = &m->tensors[k];
        const size_t bytes = e->numel * sizeof(float);
        total += bytes;
        if (total > MAX_FILE_BYTES) {
            rc = dt_error_set(err, "--save %s: the weights are past protobuf's 2 GiB", out);
            break;
        }
        saved_data *s = &saved[n_saved++];
        *s = (saved_data){t, *t, malloc(bytes + 1)};
        if (!s->ours) {
            rc = dt_error_set(err, "out of memory");
            break;
        }
        /* dt_model_tensor_data's arrays, read only */
        const float *values = (e->is_param ? m->params : m->buffers) + e->offset;
        const name_slot *ns = slot_of(&names, t->name);
        if (ns && ns->transposed && e->ndim == 2) {
            const size_t rows = (size_t)e->shape[0], cols = (size_t)e->shape[1]; /* [out, in] */
            float *file = (float *)(void *)s->ours;                              /* [in, out] */
            for (size_t r = 0; r < rows; r++)
                for (size_t q = 0; q < cols; q++) file[q * rows + r] = values[r * cols + q];
        } else {
            memcpy(s->ours, values, bytes);
        }
        t->has_raw_data = 1;
        t->raw_data.data = s->ours;
        t->raw_data.len = bytes;
        t->n_float_data = 0;
        t->float_data = NULL;
        t->n_external_data = 0;
        t->external_data = NULL;
        t->has_data_location = 0;
        t->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__DEFAULT;
    }
    uint8_t *packed = NULL;
    size_t len = 0;
    if (rc == 0) {
        len = onnx__model_proto__get_packed_size(model);
        packed = malloc(len + 1);
        if (!packed) rc = dt_error_set(err, "out of memory for %zu bytes", len);
    }
    if (rc == 0) {
        onnx__model_proto__pack(model, packed);
        dt_outfile o;
        rc = dt_outfile_open(&o, out, err);
        if (rc == 0 && fwrite(packed, 1, len, o.f) != len) {
            dt_outfile_discard(&o);
            rc = dt_error_set(err, "--save %s: write failed", out);
        } else if (rc == 0) {
            rc = dt_outfile_commit(&o, err);
        }
    }
    free(packed);
    for (int i = 0; i < n_saved; i++) {
        free(saved[i].ours);
        *saved[i].t = saved[i].as_read;
    }
    free(saved);
    free(names.slots);
    free(names.reader_nodes);
    onnx__model_proto__free_unpacked(model, NULL);
    return rc ? -1 : 0;
}

int dt_onnx_save_check(const dt_model *m, const char *source, const char *out, dt_error *err) {
    const size_t bytes = (m->n_params + m->n_buffers) * sizeof(float);
    if (bytes > MAX_FILE_BYTES)
        return dt_error_set(err,
                            "--save %s: the weights (%.2f GiB) are past protobuf's 2 GiB, which "
                            "an ONNX file cannot hold inline; save them as .safetensors",
                            out, (double)bytes / (double)((size_t)1 << 30));
    Onnx__ModelProto *model = load_model(source, err); /* the graph the save writes back */
    if (!model) return -1;
    onnx__model_proto__free_unpacked(model, NULL);
    return 0;
}

static void each_external_of(const Onnx__TensorProto *t, const char *folder,
                             void (*fn)(void *ctx, const char *file), void *ctx) {
    if (!t || !t->has_data_location ||
        t->data_location != ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
        return;
    for (size_t i = 0; i < t->n_external_data; i++) {
        const Onnx__StringStringEntryProto *e = t->external_data[i];
        if (!e->key || !e->value || strcmp(e->key, "location") || !*e->value) continue;
        char file[8192]; /* as external_bytes names it */
        if (snprintf(file, sizeof file, "%s/%s", folder, e->value) < (int)sizeof file)
            fn(ctx, file);
    }
}

int dt_onnx_each_external(const char *path, void (*fn)(void *ctx, const char *file), void *ctx) {
    dt_error ignored;
    Onnx__ModelProto *model = load_model(path, &ignored);
    if (!model) return -1;
    char folder[4096];
    folder_of(path, folder, sizeof folder);
    const Onnx__GraphProto *g = model->graph;
    for (size_t i = 0; i < g->n_initializer; i++)
        each_external_of(g->initializer[i], folder, fn, ctx);
    for (size_t i = 0; i < g->n_node; i++) {
        const Onnx__NodeProto *n = g->node[i];
        if (!n->op_type || strcmp(n->op_type, "Constant")) continue;
        for (size_t k = 0; k < n->n_attribute; k++)
            each_external_of(n->attribute[k]->t, folder, fn, ctx);
    }
    onnx__model_proto__free_unpacked(model, NULL);
    return 0;
}
