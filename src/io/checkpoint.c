#include "dtrain/checkpoint.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

enum { NAME_BYTES = 160 };

/* Checksums: zlib's crc32 of each tensor's bytes, as 8 hex digits, comma-separated in
 * the order of the tensors' names (strcmp), in metadata values "tensor_crc32.0",
 * "tensor_crc32.1", ... of up to CRCS_PER_VALUE each (a value holds at most
 * DT_ST_META_VALUE_MAX bytes). By name, not by the writer's order: a file is checked
 * without knowing the model that wrote it. */
enum { CRCS_PER_VALUE = 400 }; /* 9 bytes each */
#define CRC_KEY "tensor_crc32"

typedef struct named_crc {
    const char *name;
    unsigned long crc;
} named_crc;

static int by_name(const void *a, const void *b) {
    return strcmp(((const named_crc *)a)->name, ((const named_crc *)b)->name);
}

static unsigned long bytes_crc(const void *data, size_t bytes) {
    return crc32_z(crc32_z(0L, Z_NULL, 0), data, bytes);
}

static size_t entry_bytes(const dt_st_entry *e) {
    size_t n = !strcmp(e->dtype, "I64") ? 8 : !strcmp(e->dtype, "I8") ? 1 : 4;
    for (int d = 0; d < e->ndim; d++) n *= (size_t)e->shape[d];
    return n;
}

/* meta[n_meta ..] += the checksum values of the entries; *n_out the new count. */
static int add_crcs(const dt_st_entry *entries, int n, dt_st_meta *meta, int n_meta, int cap,
                    int *n_out, const char *path, dt_error *err) {
    named_crc *crcs = calloc((size_t)(n > 0 ? n : 1), sizeof *crcs);
    if (!crcs) return dt_error_set(err, "out of memory saving %s", path);
    for (int i = 0; i < n; i++)
        crcs[i] =
            (named_crc){entries[i].name, bytes_crc(entries[i].data, entry_bytes(&entries[i]))};
    qsort(crcs, (size_t)n, sizeof *crcs, by_name);
    for (int i = 0; i < n; i += CRCS_PER_VALUE, n_meta++) {
        if (n_meta >= cap) {
            free(crcs);
            return dt_error_set(err, "%s: too many tensors (%d) to record their checksums", path,
                                n);
        }
        dt_st_meta *m = &meta[n_meta];
        snprintf(m->key, sizeof m->key, CRC_KEY ".%d", i / CRCS_PER_VALUE);
        size_t len = 0; /* CRCS_PER_VALUE * CRC_TEXT fits a value */
        for (int j = i; j < n && j < i + CRCS_PER_VALUE; j++)
            len += (size_t)snprintf(m->value + len, sizeof m->value - len, "%s%08lx",
                                    j > i ? "," : "", crcs[j].crc);
    }
    free(crcs);
    *n_out = n_meta;
    return 0;
}

int dt_checkpoint_verify(const dt_safetensors *st, int required, dt_error *err) {
    if (!dt_safetensors_meta(st, CRC_KEY ".0"))
        return required ? dt_error_set(err, "%s: its tensors carry no checksums", st->path) : 0;
    named_crc *crcs = calloc((size_t)(st->n_tensors > 0 ? st->n_tensors : 1), sizeof *crcs);
    if (!crcs) return dt_error_set(err, "out of memory checking %s", st->path);
    for (int i = 0; i < st->n_tensors; i++) crcs[i] = (named_crc){st->tensors[i].name, 0};
    qsort(crcs, (size_t)st->n_tensors, sizeof *crcs, by_name);
    int rc = 0, i = 0;
    for (int chunk = 0; rc == 0; chunk++) {
        char key[32];
        snprintf(key, sizeof key, CRC_KEY ".%d", chunk);
        const char *v = dt_safetensors_meta(st, key);
        if (!v) break;
        for (const char *p = v; rc == 0 && *p; i++) {
            char *end;
            const unsigned long want = strtoul(p, &end, 16);
            if (end - p != 8 || (*end && *end != ',') || i >= st->n_tensors) {
                rc = dt_error_set(err,
                                  "%s: its checksums (%s) do not match its %d tensors: the "
                                  "file is damaged",
                                  st->path, key, st->n_tensors);
                break;
            }
            const dt_st_tensor *t = dt_safetensors_find(st, crcs[i].name);
            const unsigned long got = bytes_crc(t->data, t->bytes);
            if (got != want)
                rc = dt_error_set(err,
                                  "%s: tensor %s does not match its checksum (crc32 %08lx, "
                                  "recorded %08lx): the file is damaged",
                                  st->path, t->name, got, want);
            p = *end ? end + 1 : end;
        }
    }
    if (rc == 0 && i != st->n_tensors)
        rc = dt_error_set(err, "%s: %d checksums for %d tensors: the file is damaged", st->path, i,
                          st->n_tensors);
    free(crcs);
    return rc;
}

int dt_checkpoint_save(const dt_model *m, const dt_sgd *opt, const dt_st_meta *meta, int n_meta,
                       const char *path, dt_error *err) {
    int n_bn = 0, n_momentum = opt && opt->velocity ? m->n_tensors : 0;
    for (int i = 0; i < m->n_ops; i++) n_bn += m->ops[i].kind == DT_OP_BATCHNORM2D;
    int cap = m->n_tensors + n_bn + n_momentum;
    dt_st_entry *entries = calloc((size_t)cap, sizeof *entries);
    char *names = calloc((size_t)cap, NAME_BYTES);
    if (!entries || !names) {
        free(entries);
        free(names);
        return dt_error_set(err, "out of memory saving %s", path);
    }
    int n = 0;
    for (int i = 0; i < m->n_tensors; i++) {
        const dt_tensor_entry *t = &m->tensors[i];
        dt_st_entry *e = &entries[n++];
        e->name = t->name;
        e->dtype = "F32";
        e->ndim = t->ndim;
        for (int d = 0; d < t->ndim; d++) e->shape[d] = t->shape[d];
        e->data = (t->is_param ? m->params : m->buffers) + t->offset;
    }
    for (int i = 0; i < m->n_ops; i++) {
        const dt_op *op = &m->ops[i];
        if (op->kind != DT_OP_BATCHNORM2D) continue;
        char *name = names + (size_t)n * NAME_BYTES;
        snprintf(name, NAME_BYTES, "%s.num_batches_tracked", op->name);
        dt_st_entry *e = &entries[n++];
        e->name = name;
        e->dtype = "I64";
        e->ndim = 0;
        e->data = &op->num_batches_tracked;
    }
    for (int i = 0; i < n_momentum; i++) {
        const dt_tensor_entry *t = &m->tensors[i];
        if (!t->is_param) continue;
        char *name = names + (size_t)n * NAME_BYTES;
        snprintf(name, NAME_BYTES, "optimizer.momentum.%s", t->name);
        dt_st_entry *e = &entries[n++];
        e->name = name;
        e->dtype = "F32";
        e->ndim = t->ndim;
        for (int d = 0; d < t->ndim; d++) e->shape[d] = t->shape[d];
        e->data = opt->velocity + t->offset;
    }
    /* the caller's metadata, then the checksums: at most as many entries as the reader
     * takes (DT_ST_META_MAX) */
    const int needed = n_meta + (n + CRCS_PER_VALUE - 1) / CRCS_PER_VALUE;
    dt_st_meta *all = needed <= DT_ST_META_MAX ? calloc((size_t)needed + 1, sizeof *all) : NULL;
    int n_all = 0, rc = -1;
    if (needed > DT_ST_META_MAX)
        dt_error_set(err, "%s: too many tensors (%d) and metadata entries (%d) for one file", path,
                     n, n_meta);
    else if (!all)
        dt_error_set(err, "out of memory saving %s", path);
    else {
        if (n_meta > 0) memcpy(all, meta, sizeof *all * (size_t)n_meta);
        rc = add_crcs(entries, n, all, n_meta, needed, &n_all, path, err);
    }
    if (rc == 0) rc = dt_safetensors_write(path, entries, n, all, n_all, err);
    free(all);
    free(entries);
    free(names);
    return rc;
}

int dt_checkpoint_load(dt_model *m, dt_sgd *opt, const char *path, dt_error *err) {
    dt_safetensors st;
    if (dt_safetensors_read(&st, path, err)) return -1;
    int rc = dt_checkpoint_verify(&st, 0, err);
    for (int i = 0; rc == 0 && i < m->n_tensors; i++) {
        const dt_tensor_entry *t = &m->tensors[i];
        rc = dt_safetensors_get_f32(&st, t->name, t->ndim, t->shape, dt_model_tensor_data(m, i),
                                    err);
    }
    for (int i = 0; rc == 0 && i < m->n_ops; i++) {
        dt_op *op = &m->ops[i];
        if (op->kind != DT_OP_BATCHNORM2D) continue;
        char name[NAME_BYTES];
        int32_t count;
        snprintf(name, sizeof name, "%s.num_batches_tracked", op->name);
        if (dt_safetensors_find(&st, name)) {
            rc = dt_safetensors_get_i32(&st, name, 1, &count, err);
            op->num_batches_tracked = count;
        }
    }
    if (rc == 0 && opt && opt->velocity) {
        char name[NAME_BYTES];
        snprintf(name, sizeof name, "optimizer.momentum.%s", m->tensors[0].name);
        int has_momentum = dt_safetensors_find(&st, name) != NULL;
        for (int i = 0; rc == 0 && has_momentum && i < m->n_tensors; i++) {
            const dt_tensor_entry *t = &m->tensors[i];
            if (!t->is_param) continue;
            snprintf(name, sizeof name, "optimizer.momentum.%s", t->name);
            rc = dt_safetensors_get_f32(&st, name, t->ndim, t->shape, opt->velocity + t->offset,
                                        err);
        }
        if (rc == 0 && has_momentum && opt->steps == 0) opt->steps = 1;
        for (size_t i = 0; rc == 0 && has_momentum && i < m->n_params; i++)
            if (!isfinite(opt->velocity[i]))
                rc = dt_error_set(err, "%s: the optimizer's momentum holds NaN or infinite values",
                                  path);
    }
    /* every reader of weights (train --init and --resume, eval, quantize) refuses them */
    if (rc == 0 && dt_model_first_non_finite(m) >= 0)
        rc = dt_error_set(err, "%s: the weights hold NaN or infinite values", path);
    dt_safetensors_free(&st);
    return rc;
}
