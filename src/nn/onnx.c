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

enum { V_ACT = 1, V_CONST = 2 };

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
    /* a Pad of zeros on H and W, folded into the Conv or AveragePool that alone reads it:
     * its pads {top, left, bottom, right} (padded 0 otherwise; id is the Pad's input) */
    int padded;
    int pad[4];
} onnx_value;

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
} name_slot;

typedef struct importer {
    const char *path;
    char folder[4096]; /* the model's folder: external data must be inside it */
    const Onnx__GraphProto *g;
    dt_model *m;
    onnx_value *values;
    int n_values, cap_values;
    name_slot *slots; /* every name of the graph, once each, sorted (index_names) */
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
    int any_output; /* dt_onnx_build_any: the last value may be any shape */
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
                all[n++] = (name_slot){node->input[q], -1, 1, 0, 0};
        for (size_t q = 0; q < node->n_output; q++)
            if (node->output[q] && *node->output[q])
                all[n++] = (name_slot){node->output[q], -1, 0, 0, 0};
    }
    for (size_t i = 0; i < g->n_initializer; i++)
        if (g->initializer[i]->name && *g->initializer[i]->name)
            all[n++] = (name_slot){g->initializer[i]->name, -1, 0, 1, 0};
    for (size_t i = 0; i < g->n_input; i++)
        if (g->input[i]->name && *g->input[i]->name)
            all[n++] = (name_slot){g->input[i]->name, -1, 0, 0, 0};
    qsort(all, n, sizeof *all, slot_order);
    size_t unique = 0; /* merged in place: the counts summed, the marks kept */
    for (size_t i = 0; i < n; i++) {
        if (unique && !strcmp(all[unique - 1].name, all[i].name)) {
            all[unique - 1].readers += all[i].readers;
            all[unique - 1].is_initializer |= all[i].is_initializer;
        } else {
            all[unique++] = all[i];
        }
    }
    im->slots = all;
    im->n_slots = unique;
    return 0;
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

/* Flatten at axis 1, or a Reshape to [N, C*H*W] (0 or -1 for N, -1 for the rest). */
static int import_flatten(importer *im, const Onnx__NodeProto *n, int reshape) {
    onnx_value *x = act_input(im, n, 0);
    if (!x) return -1;
    const dt_value xv = im->m->values[x->id];
    const long long features = (long long)xv.c * xv.h * xv.w;
    if (reshape) {
        const Onnx__TensorProto *shape = const_input(im, n, 1, 0);
        int64_t d[8];
        int count = 0;
        if (!shape || tensor_int64s(im, shape, d, 8, &count)) return -1;
        const int ok = count == 2 && (d[0] == 0 || d[0] == -1) &&
                       (d[1] == -1 || d[1] == features) && !(d[0] == -1 && d[1] == -1);
        if (!ok)
            return fail_node(im, n, "only a reshape to [batch, features] (a flatten) is supported");
    } else if (attr_int(n, "axis", 1) != 1) {
        return fail_node(im, n, "only Flatten at axis 1 is supported");
    }
    /* x's C*H*W was checked against MAX_SAMPLE_VALUES when it was made: an int */
    return set_alias(im, n, dt_model_flatten(im->m, x->id));
}

static int import_gemm(importer *im, const Onnx__NodeProto *n) {
    onnx_value *x = act_input(im, n, 0);
    const Onnx__TensorProto *w = x ? const_input(im, n, 1, 0) : NULL;
    const Onnx__TensorProto *b = w ? const_input(im, n, 2, 1) : NULL;
    if (!w || im->failed) return -1;
    const dt_value xv = im->m->values[x->id];
    const long long in = (long long)xv.c * xv.h * xv.w;
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
    if (!b)
        return fail_node(im, n,
                         "a Gemm without a bias is not supported (dtrain's linear layers "
                         "have one)");
    if (numel_of(b) != out) return fail_node(im, n, "its bias does not have one value per output");
    if (xv.h != 1 || xv.w != 1)
        return fail_node(im, n, "its input is not flat (export a Flatten before it)");
    char name[80];
    op_name(n, w, name, sizeof name);
    const int y = dt_model_linear(im->m, name, x->id, (int)out);
    if (set_output(im, n, y)) return -1;
    const dt_op *op = &im->m->ops[im->m->n_ops - 1];
    if (take(im, n, op->weight, w, !trans_b)) return -1;
    return take(im, n, op->bias, b, 0);
}

/* MatMul by a [in, out] initializer: a linear layer whose bias the Add after it gives. */
static int import_matmul(importer *im, const Onnx__NodeProto *n) {
    onnx_value *x = act_input(im, n, 0);
    const Onnx__TensorProto *w = x ? const_input(im, n, 1, 0) : NULL;
    if (!w || im->failed) return -1;
    const dt_value xv = im->m->values[x->id];
    if (!dims_are(w, 2)) return fail_node(im, n, "its weight is not 2-D");
    if (xv.h != 1 || xv.w != 1 || w->dims[0] != xv.c)
        return fail_node(im, n, "only a flat input times a [in, out] weight is supported");
    char name[80];
    op_name(n, w, name, sizeof name);
    const int y = dt_model_linear(im->m, name, x->id, (int)w->dims[1]);
    if (set_output(im, n, y)) return -1;
    const dt_op *op = &im->m->ops[im->m->n_ops - 1];
    if (take(im, n, op->weight, w, 1)) return -1;
    im->values[im->n_values - 1].bias_tensor = op->bias;
    im->values[im->n_values - 1].matmul = n;
    return 0;
}

static int import_add(importer *im, const Onnx__NodeProto *n) {
    if (n->n_input != 2) return fail_node(im, n, "an Add of other than two inputs");
    onnx_value *a = find_value(im, n->input[0]), *b = find_value(im, n->input[1]);
    if (!a || !b) {
        act_input(im, n, a ? 1 : 0); /* the message for the undefined one */
        return -1;
    }
    if (a->kind == V_ACT && b->kind == V_ACT) {
        const dt_value av = im->m->values[a->id], bv = im->m->values[b->id];
        if (av.c != bv.c || av.h != bv.h || av.w != bv.w)
            return fail_node(im, n, "its inputs' shapes differ (no broadcasting)");
        return set_output(im, n, dt_model_add(im->m, a->id, b->id));
    }
    onnx_value *act = a->kind == V_ACT ? a : b, *cst = a->kind == V_ACT ? b : a;
    if (act->kind != V_ACT || !act->matmul || readers(im, act->name) != 1)
        return fail_node(im, n,
                         "an Add of a constant is supported only as the bias of the "
                         "MatMul before it");
    if (take(im, n, act->bias_tensor, cst->tensor, 0)) return -1;
    act->matmul = NULL;
    /* the Add's output is the linear layer's own */
    return set_alias(im, n, act->id);
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

/* The first opset whose version of an operator is the one imported here (ONNX's
 * Changelog): BatchNormalization before 9 had `spatial`, Add and Gemm before 7 their
 * `broadcast`, Concat before 4 a default axis, Reshape before 5 a shape attribute, Pad
 * before 2 `paddings`, Dropout before 7 `is_test`; the others are unchanged from 1. */
static const struct {
    const char *op;
    int since;
} first_opset[] = {{"BatchNormalization", 9},
                   {"Add", 7},
                   {"Gemm", 7},
                   {"Concat", 4},
                   {"Reshape", 5},
                   {"Pad", 2},
                   {"Dropout", 7}};

/* How many inputs and outputs each operator has (ONNX's operator specs, opsets 1 to 17;
 * optional ones counted, given or empty): a node of more is a malformed file, and its
 * extra names would be taken as readers. */
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
             {"Concat", 1, ANY_COUNT, 1, 1},
             {"Dropout", 1, 3, 1, 2},
             {"Pad", 1, 3, 1, 1},
             {"Identity", 1, 1, 1, 1}};

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
    if (!strcmp(op, "MaxPool")) return import_pool(im, n, 1);
    if (!strcmp(op, "AveragePool")) return import_pool(im, n, 0);
    if (!strcmp(op, "GlobalAveragePool")) {
        onnx_value *x = act_input(im, n, 0);
        return x ? set_output(im, n, dt_model_adaptive_avgpool2d(im->m, x->id, 1, 1)) : -1;
    }
    if (!strcmp(op, "Flatten")) return import_flatten(im, n, 0);
    if (!strcmp(op, "Reshape")) return import_flatten(im, n, 1);
    if (!strcmp(op, "Gemm")) return import_gemm(im, n);
    if (!strcmp(op, "MatMul")) return import_matmul(im, n);
    if (!strcmp(op, "Add")) return import_add(im, n);
    if (!strcmp(op, "Concat")) return import_concat(im, n);
    if (!strcmp(op, "Dropout")) return import_dropout(im, n);
    if (!strcmp(op, "Pad")) return import_pad(im, n);
    if (!strcmp(op, "Identity")) {
        onnx_value *x = act_input(im, n, 0);
        return x ? set_alias(im, n, x->id) : -1;
    }
    return fail_node(im, n,
                     "not an operator dtrain imports (it takes Conv, BatchNormalization, Relu, "
                     "MaxPool, AveragePool, GlobalAveragePool, Gemm, MatMul + Add, Add, "
                     "Concat, Flatten, Reshape to [batch, features], Dropout, Identity, "
                     "Constant, and a Pad of zeros)");
}

/* The graph's one data input (the inputs that are not initializers): its C x H x W. */
static int data_input(importer *im, const Onnx__ValueInfoProto **out, int *c, int *h, int *w) {
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
    if (s->n_dim != 4)
        return fail(im,
                    "the input '%s' has %zu dimensions; dtrain feeds images [batch, C, H, W] "
                    "(export with that shape, and a Flatten for an MLP)",
                    (*out)->name, s->n_dim);
    int dims[3];
    for (int i = 1; i < 4; i++) {
        const Onnx__TensorShapeProto__Dimension *d = s->dim[i];
        if (d->value_case != ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE ||
            d->dim_value < 1 || d->dim_value > 65536)
            return fail(im, "the input '%s': dimension %d is not a fixed size in 1..65536",
                        (*out)->name, i);
        dims[i - 1] = (int)d->dim_value;
    }
    const long long values = (long long)dims[0] * dims[1] * dims[2];
    if (values > MAX_SAMPLE_VALUES)
        return fail(im,
                    "the input '%s' has %dx%dx%d = %lld values a sample, past the %lld dtrain "
                    "takes",
                    (*out)->name, dims[0], dims[1], dims[2], values, MAX_SAMPLE_VALUES);
    *c = dims[0], *h = dims[1], *w = dims[2];
    return 0;
}

static void importer_free(importer *im) {
    free(im->slots);
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
    int c = 0, h = 0, w = 0;
    if (g->n_node > MAX_NODES)
        return fail(im, "%zu nodes, past the %d that dtrain imports", g->n_node, MAX_NODES);
    if (index_names(im) || data_input(im, &input, &c, &h, &w)) return -1;
    if (spec->in_c && (spec->in_c != c || spec->in_h != h || spec->in_w != w))
        return fail(im, "the graph takes %dx%dx%d inputs, not %dx%dx%d", c, h, w, spec->in_c,
                    spec->in_h, spec->in_w);
    if (g->n_output < 1 || !g->output[0]->name) return fail(im, "the graph has no output");
    dt_model *m = im->m;
    const int x = dt_model_input(m, c, h, w);
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
    for (size_t i = 0; i < g->n_node && !im->failed; i++) {
        const Onnx__NodeProto *n = g->node[i];
        if (import_node(im, n)) return -1;
        for (size_t k = 0; k < n->n_output; k++) {
            /* outputs past the first (BatchNormalization's running statistics in training
             * mode, Dropout's mask) must not be read: dtrain does not produce them */
            if (k > 0 && n->output[k] && *n->output[k] && readers(im, n->output[k]) > 0)
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
    if ((yv.h != 1 || yv.w != 1) && !im->any_output)
        return fail(im, "the graph's output '%s' is %dx%dx%d, not [batch, classes]",
                    g->output[0]->name, yv.c, yv.h, yv.w);
    for (size_t i = 1; i < g->n_output; i++)
        if (g->output[i]->name && *g->output[i]->name) {
            /* training-mode exports list BatchNorm's running statistics as outputs too:
             * those dtrain keeps itself; anything else is a second head */
            const onnx_value *o = find_value(im, g->output[i]->name);
            if (o && o->kind == V_ACT)
                return fail(im, "the graph has a second output '%s' (dtrain trains one head)",
                            g->output[i]->name);
        }
    m->classes = yv.c;
    if (m->build_failed) return fail(im, "%s", m->build_error.msg);
    if (m->n_ops == 0) return fail(im, "the graph has no layer dtrain computes");
    for (int i = 0; i < im->n_values; i++)
        if (im->values[i].matmul)
            return fail_node(im, im->values[i].matmul,
                             "no Add of a bias follows it (dtrain's linear layers have one)");
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
