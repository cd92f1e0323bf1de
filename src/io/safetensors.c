#include "dtrain/safetensors.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/outfile.h"
#include "core/textfile.h"

static size_t dtype_size(const char *dtype) {
    if (!strcmp(dtype, "F32") || !strcmp(dtype, "I32")) return 4;
    if (!strcmp(dtype, "F64") || !strcmp(dtype, "I64")) return 8;
    if (!strcmp(dtype, "F16") || !strcmp(dtype, "BF16") || !strcmp(dtype, "I16")) return 2;
    if (!strcmp(dtype, "U8") || !strcmp(dtype, "I8") || !strcmp(dtype, "BOOL")) return 1;
    return 0;
}

static int read_whole_file(const char *path, uint8_t **out, size_t *bytes, dt_error *err) {
    /* a regular file only, opened without blocking (a FIFO named as weights was waited
     * on forever; a folder "opens" and seeks to LONG_MAX) */
    FILE *f = dt_text_open(path, "", SIZE_MAX, err);
    if (!f) return -1;
    if (fseek(f, 0, SEEK_END) != 0) {
        fclose(f);
        return dt_error_set(err, "cannot seek in %s: %s", path, strerror(errno));
    }
    long size = ftell(f);
    rewind(f);
    if (size < 0) {
        fclose(f);
        return dt_error_set(err, "cannot size %s", path);
    }
    uint8_t *buf = malloc((size_t)size + 1);
    if (!buf) {
        fclose(f);
        return dt_error_set(err, "out of memory reading %s (%ld bytes)", path, size);
    }
    if (fread(buf, 1, (size_t)size, f) != (size_t)size) {
        free(buf);
        fclose(f);
        return dt_error_set(err, "cannot read %s: short read", path);
    }
    fclose(f);
    *out = buf;
    *bytes = (size_t)size;
    return 0;
}

static int parse_tensor(dt_safetensors *st, const cJSON *item, size_t data_bytes,
                        const uint8_t *data, dt_error *err) {
    dt_st_tensor *t = &st->tensors[st->n_tensors];
    memset(t, 0, sizeof *t);
    if (strlen(item->string) >= sizeof t->name)
        return dt_error_set(err, "%s: tensor name too long: %.40s...", st->path, item->string);
    strcpy(t->name, item->string);
    for (int i = 0; i < st->n_tensors; i++) /* cJSON keeps duplicate keys */
        if (!strcmp(st->tensors[i].name, t->name))
            return dt_error_set(err, "%s: tensor %s appears twice in the header", st->path,
                                t->name);
    const cJSON *dtype = cJSON_GetObjectItemCaseSensitive(item, "dtype");
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(item, "shape");
    const cJSON *offs = cJSON_GetObjectItemCaseSensitive(item, "data_offsets");
    if (!cJSON_IsString(dtype) || !cJSON_IsArray(shape) || !cJSON_IsArray(offs) ||
        cJSON_GetArraySize(offs) != 2)
        return dt_error_set(err, "%s: tensor %s: header entry lacks dtype, shape or data_offsets",
                            st->path, t->name);
    size_t esize = dtype_size(dtype->valuestring);
    if (esize == 0 || strlen(dtype->valuestring) >= sizeof t->dtype)
        return dt_error_set(err, "%s: tensor %s: unsupported dtype %s", st->path, t->name,
                            dtype->valuestring);
    strcpy(t->dtype, dtype->valuestring);
    t->ndim = cJSON_GetArraySize(shape);
    if (t->ndim > DT_ST_MAX_DIMS)
        return dt_error_set(err, "%s: tensor %s: %d dimensions (at most %d)", st->path, t->name,
                            t->ndim, DT_ST_MAX_DIMS);
    t->numel = 1;
    for (int i = 0; i < t->ndim; i++) {
        const cJSON *d = cJSON_GetArrayItem(shape, i);
        if (!cJSON_IsNumber(d) || d->valuedouble < 0 || d->valuedouble > 4e9 ||
            d->valuedouble != (double)(int64_t)d->valuedouble)
            return dt_error_set(err, "%s: tensor %s: bad shape", st->path, t->name);
        t->shape[i] = (int64_t)d->valuedouble;
        /* elements beyond the file's bytes cannot be there; also keeps numel from wrapping */
        if (t->shape[i] > 0 && t->numel > data_bytes / (size_t)t->shape[i])
            return dt_error_set(err, "%s: tensor %s: shape larger than the file", st->path,
                                t->name);
        t->numel *= (size_t)t->shape[i];
    }
    const cJSON *b = cJSON_GetArrayItem(offs, 0), *e = cJSON_GetArrayItem(offs, 1);
    if (!cJSON_IsNumber(b) || !cJSON_IsNumber(e) || b->valuedouble < 0 ||
        e->valuedouble < b->valuedouble || e->valuedouble > 1.8e19 ||
        b->valuedouble != (double)(uint64_t)b->valuedouble ||
        e->valuedouble != (double)(uint64_t)e->valuedouble)
        return dt_error_set(err, "%s: tensor %s: bad data_offsets", st->path, t->name);
    size_t begin = (size_t)b->valuedouble, end = (size_t)e->valuedouble;
    if (end > data_bytes)
        return dt_error_set(err,
                            "%s: tensor %s: data ends at byte %zu but the file holds only %zu "
                            "(truncated file?)",
                            st->path, t->name, end, data_bytes);
    if (end - begin != t->numel * esize)
        return dt_error_set(err, "%s: tensor %s: %zu bytes of data for %zu elements of %s",
                            st->path, t->name, end - begin, t->numel, t->dtype);
    for (int i = 0; i < st->n_tensors; i++) { /* two tensors sharing bytes */
        const size_t ob = (size_t)(st->tensors[i].data - data), oe = ob + st->tensors[i].bytes;
        if (begin < oe && ob < end && begin < end && ob < oe)
            return dt_error_set(err, "%s: tensors %s and %s overlap (bytes %zu..%zu and %zu..%zu)",
                                st->path, st->tensors[i].name, t->name, ob, oe, begin, end);
    }
    t->data = data + begin;
    t->bytes = end - begin;
    st->n_tensors++;
    return 0;
}

/* The first control character of s (a byte below 0x20, or 0x7f), or NULL. */
static const char *control_char(const char *s) {
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f) return s;
    return NULL;
}

static int refuse_control(const char *path, const char *key, const char *value, dt_error *err) {
    const char *c = control_char(key);
    if (!c) c = control_char(value);
    if (!c) return 0;
    char shown[DT_ST_META_KEY_MAX];
    snprintf(shown, sizeof shown, "%s", key);
    for (char *k = shown; *k; k++)
        if (control_char(k) == k) *k = '?';
    return dt_error_set(err, "%s: metadata entry %s holds a control character (byte 0x%02x)", path,
                        shown, (unsigned)(unsigned char)*c);
}

int dt_safetensors_read(dt_safetensors *st, const char *path, dt_error *err) {
    memset(st, 0, sizeof *st);
    snprintf(st->path, sizeof st->path, "%s", path);
    if (read_whole_file(path, &st->file, &st->file_bytes, err)) return -1;
    if (st->file_bytes < 8) {
        dt_safetensors_free(st);
        return dt_error_set(err, "%s: not a safetensors file (%zu bytes, truncated?)", path,
                            st->file_bytes);
    }
    uint64_t header_len = 0;
    for (int i = 7; i >= 0; i--) header_len = (header_len << 8) | st->file[i];
    if (header_len > st->file_bytes - 8) {
        size_t have = st->file_bytes;
        dt_safetensors_free(st);
        return dt_error_set(err,
                            "%s: header claims %llu bytes but the file has %zu (truncated or not "
                            "safetensors)",
                            path, (unsigned long long)header_len, have);
    }
    cJSON *root = cJSON_ParseWithLength((const char *)st->file + 8, (size_t)header_len);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        dt_safetensors_free(st);
        return dt_error_set(err, "%s: header is not a JSON object", path);
    }
    int count = cJSON_GetArraySize(root);
    const cJSON *metadata = cJSON_GetObjectItemCaseSensitive(root, "__metadata__");
    const int n_entries = cJSON_IsObject(metadata) ? cJSON_GetArraySize(metadata) : 0;
    if (n_entries > DT_ST_META_MAX) { /* rather than dropping some silently */
        cJSON_Delete(root);
        dt_safetensors_free(st);
        return dt_error_set(err, "%s: more than %d metadata entries (%d)", path, DT_ST_META_MAX,
                            n_entries);
    }
    st->tensors = calloc((size_t)count + 1, sizeof(dt_st_tensor));
    st->meta = calloc((size_t)n_entries + 1, sizeof(dt_st_meta));
    if (!st->tensors || !st->meta) {
        cJSON_Delete(root);
        dt_safetensors_free(st);
        return dt_error_set(err, "out of memory reading %s", path);
    }
    const uint8_t *data = st->file + 8 + header_len;
    size_t data_bytes = st->file_bytes - 8 - (size_t)header_len;
    const cJSON *item;
    cJSON_ArrayForEach(item, root) {
        if (!strcmp(item->string, "__metadata__")) {
            const cJSON *kv;
            cJSON_ArrayForEach(kv, item) {
                if (!cJSON_IsString(kv)) continue;
                if (st->n_meta >= n_entries) { /* a second __metadata__ object */
                    cJSON_Delete(root);
                    dt_safetensors_free(st);
                    return dt_error_set(err, "%s: more than one __metadata__ object", path);
                }
                dt_st_meta *m = &st->meta[st->n_meta];
                if ((size_t)snprintf(m->key, sizeof m->key, "%s", kv->string) >= sizeof m->key ||
                    (size_t)snprintf(m->value, sizeof m->value, "%s", kv->valuestring) >=
                        sizeof m->value) { /* rather than cutting it */
                    dt_error_set(err,
                                 "%s: metadata entry %.40s is too long (keys up to %zu bytes, "
                                 "values up to %zu)",
                                 path, kv->string, sizeof m->key - 1, sizeof m->value - 1);
                    cJSON_Delete(root); /* kv->string with it */
                    dt_safetensors_free(st);
                    return -1;
                }
                if (refuse_control(path, m->key, m->value, err)) {
                    cJSON_Delete(root);
                    dt_safetensors_free(st);
                    return -1;
                }
                st->n_meta++;
            }
            continue;
        }
        if (!cJSON_IsObject(item) || parse_tensor(st, item, data_bytes, data, err)) {
            if (!cJSON_IsObject(item))
                dt_error_set(err, "%s: header entry %s is not an object", path, item->string);
            cJSON_Delete(root);
            dt_safetensors_free(st);
            return -1;
        }
    }
    cJSON_Delete(root);
    return 0;
}

void dt_safetensors_free(dt_safetensors *st) {
    free(st->tensors);
    free(st->meta);
    free(st->file);
    st->tensors = NULL;
    st->meta = NULL;
    st->file = NULL;
    st->n_tensors = st->n_meta = 0;
}

const dt_st_tensor *dt_safetensors_find(const dt_safetensors *st, const char *name) {
    for (int i = 0; i < st->n_tensors; i++)
        if (!strcmp(st->tensors[i].name, name)) return &st->tensors[i];
    return NULL;
}

const char *dt_safetensors_meta(const dt_safetensors *st, const char *key) {
    for (int i = 0; i < st->n_meta; i++)
        if (!strcmp(st->meta[i].key, key)) return st->meta[i].value;
    return NULL;
}

static void format_shape(char *buf, size_t size, int ndim, const int64_t *shape) {
    size_t used = (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < ndim && used < size; i++)
        used +=
            (size_t)snprintf(buf + used, size - used, i ? ", %lld" : "%lld", (long long)shape[i]);
    if (used < size) snprintf(buf + used, size - used, "]");
}

int dt_safetensors_get(const dt_safetensors *st, const char *name, const char *dtype, int ndim,
                       const int *shape, void *out, dt_error *err) {
    const dt_st_tensor *t = dt_safetensors_find(st, name);
    if (!t) return dt_error_set(err, "%s: tensor %s is missing", st->path, name);
    if (strcmp(t->dtype, dtype))
        return dt_error_set(err, "%s: tensor %s has dtype %s, expected %s", st->path, name,
                            t->dtype, dtype);
    int same = t->ndim == ndim;
    for (int i = 0; same && i < ndim; i++) same = t->shape[i] == shape[i];
    if (!same) {
        int64_t want[DT_ST_MAX_DIMS];
        for (int i = 0; i < ndim; i++) want[i] = shape[i];
        char got_s[96], want_s[96];
        format_shape(got_s, sizeof got_s, t->ndim, t->shape);
        format_shape(want_s, sizeof want_s, ndim, want);
        return dt_error_set(err, "%s: tensor %s has shape %s, expected %s", st->path, name, got_s,
                            want_s);
    }
    memcpy(out, t->data, t->bytes); /* safetensors is little-endian, as is x86-64 */
    return 0;
}

int dt_safetensors_get_f32(const dt_safetensors *st, const char *name, int ndim, const int *shape,
                           float *out, dt_error *err) {
    return dt_safetensors_get(st, name, "F32", ndim, shape, out, err);
}

int dt_safetensors_get_i32(const dt_safetensors *st, const char *name, size_t count, int32_t *out,
                           dt_error *err) {
    const dt_st_tensor *t = dt_safetensors_find(st, name);
    if (!t) return dt_error_set(err, "%s: tensor %s is missing", st->path, name);
    if (t->numel != count)
        return dt_error_set(err, "%s: tensor %s has %zu elements, expected %zu", st->path, name,
                            t->numel, count);
    if (!strcmp(t->dtype, "I32")) {
        memcpy(out, t->data, t->bytes);
    } else if (!strcmp(t->dtype, "I64")) {
        for (size_t i = 0; i < count; i++) {
            int64_t v;
            memcpy(&v, t->data + 8 * i, 8);
            out[i] = (int32_t)v;
        }
    } else {
        return dt_error_set(err, "%s: tensor %s has dtype %s, expected I64 or I32", st->path, name,
                            t->dtype);
    }
    return 0;
}

int dt_safetensors_meta_check(const dt_st_meta *meta, int n_meta, const char *path, dt_error *err) {
    for (int i = 0; i < n_meta; i++)
        if (refuse_control(path, meta[i].key, meta[i].value, err)) return -1;
    return 0;
}

int dt_safetensors_write(const char *path, const dt_st_entry *entries, int n_entries,
                         const dt_st_meta *meta, int n_meta, dt_error *err) {
    if (dt_safetensors_meta_check(meta, n_meta, path, err)) return -1;
    cJSON *root = cJSON_CreateObject();
    if (!root) return dt_error_set(err, "out of memory writing %s", path);
    if (n_meta > 0) {
        cJSON *m = cJSON_AddObjectToObject(root, "__metadata__");
        for (int i = 0; m && i < n_meta; i++)
            cJSON_AddStringToObject(m, meta[i].key, meta[i].value);
    }
    size_t offset = 0;
    for (int i = 0; i < n_entries; i++) {
        const dt_st_entry *e = &entries[i];
        size_t numel = 1;
        for (int d = 0; d < e->ndim; d++) numel *= (size_t)e->shape[d];
        size_t bytes = numel * dtype_size(e->dtype);
        cJSON *t = cJSON_AddObjectToObject(root, e->name);
        cJSON *shape = t ? cJSON_AddArrayToObject(t, "shape") : NULL;
        cJSON *offs = t ? cJSON_AddArrayToObject(t, "data_offsets") : NULL;
        if (!t || !shape || !offs || !cJSON_AddStringToObject(t, "dtype", e->dtype)) {
            cJSON_Delete(root);
            return dt_error_set(err, "out of memory writing %s", path);
        }
        for (int d = 0; d < e->ndim; d++)
            cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)e->shape[d]));
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)offset));
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)(offset + bytes)));
        offset += bytes;
    }
    char *json = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!json) return dt_error_set(err, "out of memory writing %s", path);
    size_t json_len = strlen(json);
    size_t padded = (json_len + 7) / 8 * 8; /* keep the data 8-byte aligned */
    uint8_t len_bytes[8];
    for (int i = 0; i < 8; i++) len_bytes[i] = (uint8_t)((uint64_t)padded >> (8 * i));

    dt_outfile out;
    if (dt_outfile_open(&out, path, err)) {
        free(json);
        return -1;
    }
    int failed = fwrite(len_bytes, 1, 8, out.f) != 8 ||
                 fwrite(json, 1, json_len, out.f) != json_len ||
                 fwrite("        ", 1, padded - json_len, out.f) != padded - json_len;
    free(json);
    for (int i = 0; !failed && i < n_entries; i++) {
        const dt_st_entry *e = &entries[i];
        size_t numel = 1;
        for (int d = 0; d < e->ndim; d++) numel *= (size_t)e->shape[d];
        const size_t bytes = numel * dtype_size(e->dtype);
        failed = fwrite(e->data, 1, bytes, out.f) != bytes;
    }
    if (failed) {
        dt_error_set(err, "cannot write %s: %s", path, strerror(errno));
        dt_outfile_discard(&out);
        return -1;
    }
    return dt_outfile_commit(&out, err);
}
