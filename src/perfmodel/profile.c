#include "perfmodel/profile.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/outfile.h"
#include "core/textfile.h"

/* A profile of the biggest zoo model has a few hundred ops: far below this. */
enum { MAX_PROFILE_BYTES = 64 << 20, MAX_PROFILE_OPS = 100000 };

void dt_profile_free(dt_profile *p) {
    free(p->ops);
    p->ops = NULL;
    p->n_ops = 0;
}

int dt_profile_from_model(dt_profile *p, const dt_model *m, const char *model, int width, int batch,
                          int threads, long steps, double mean_s, double median_s, double sgd_s,
                          dt_error *err) {
    memset(p, 0, sizeof *p);
    if (!m->op_forward_s || steps < 1 || !(mean_s > 0) || !(median_s > 0))
        return dt_error_set(err, "the model was not profiled");
    if (strlen(model) >= sizeof p->model) /* a profile names its model whole, or not at all */
        return dt_error_set(err, "cannot profile %.64s...: a name of %zu bytes (at most %zu)",
                            model, strlen(model), sizeof p->model - 1);
    const double scale = median_s / mean_s;
    p->ops = calloc((size_t)m->n_ops, sizeof *p->ops);
    if (!p->ops) return dt_error_set(err, "out of memory for the profile");
    snprintf(p->model, sizeof p->model, "%s", model);
    p->width = width;
    p->batch = batch;
    p->threads = threads;
    p->steps = steps;
    p->params = m->n_params;
    p->step_s = median_s;
    p->sgd_s = sgd_s * scale;
    p->n_ops = m->n_ops;
    double in_ops = 0.0;
    for (int i = 0; i < m->n_ops; i++) {
        const dt_op *op = &m->ops[i];
        dt_profile_op *o = &p->ops[i];
        snprintf(o->name, sizeof o->name, "%s", op->name);
        snprintf(o->kind, sizeof o->kind, "%s", dt_op_kind_name(op->kind));
        o->forward_s = scale * m->op_forward_s[i] / (double)steps;
        o->backward_s = scale * m->op_backward_s[i] / (double)steps;
        in_ops += o->forward_s + o->backward_s;
        if (op->weight >= 0) { /* as dt_model_backward reports it to on_grads_ready */
            const dt_tensor_entry *w = &m->tensors[op->weight];
            o->param_offset = w->offset;
            o->param_count = w->numel + (op->bias >= 0 ? m->tensors[op->bias].numel : 0);
        }
    }
    p->other_s = p->step_s - p->sgd_s - in_ops;
    if (p->other_s < 0) p->other_s = 0; /* timer granularity */
    return 0;
}

/* s as a JSON string, quotes included: names come from ONNX files too (a path, a
 * node's name), which may hold quotes, backslashes or control characters. */
static void json_string(FILE *f, const char *s) {
    putc('"', f);
    for (const unsigned char *c = (const unsigned char *)s; *c; c++)
        if (*c == '"' || *c == '\\')
            fprintf(f, "\\%c", *c);
        else if (*c < 0x20)
            fprintf(f, "\\u%04x", *c);
        else
            putc(*c, f);
    putc('"', f);
}

int dt_profile_write(const dt_profile *p, const char *path, dt_error *err) {
    dt_outfile out;
    if (dt_outfile_open(&out, path, err)) return -1;
    FILE *f = out.f;
    fputs("{\"profile\": \"dtrain-ops\", \"model\": ", f);
    json_string(f, p->model);
    fprintf(f,
            ", \"width\": %d, \"batch_size\": %d, \"threads\": %d, \"steps\": %ld, "
            "\"params\": %zu,\n \"step_ms\": %.6f, \"sgd_ms\": %.6f, \"other_ms\": %.6f,\n "
            "\"ops\": [\n",
            p->width, p->batch, p->threads, p->steps, p->params, 1e3 * p->step_s, 1e3 * p->sgd_s,
            1e3 * p->other_s);
    for (int i = 0; i < p->n_ops; i++) {
        const dt_profile_op *o = &p->ops[i];
        fputs("  {\"name\": ", f);
        json_string(f, o->name);
        fprintf(f,
                ", \"kind\": \"%s\", \"forward_ms\": %.6f, \"backward_ms\": %.6f, "
                "\"param_offset\": %zu, \"param_count\": %zu}%s\n",
                o->kind, 1e3 * o->forward_s, 1e3 * o->backward_s, o->param_offset, o->param_count,
                i + 1 < p->n_ops ? "," : "");
    }
    fputs(" ]}\n", f);
    return dt_outfile_commit(&out, err);
}

/* A number field: present, finite, within [lo, hi]. */
static int field(const cJSON *obj, const char *key, double lo, double hi, double *out,
                 const char *path, const char *where, dt_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!cJSON_IsNumber(v))
        return dt_error_set(err, "profile %s: %s: '%s' missing or not a number", path, where, key);
    if (!isfinite(v->valuedouble) || v->valuedouble < lo || v->valuedouble > hi)
        return dt_error_set(err, "profile %s: %s: '%s' = %g is outside [%g, %g]", path, where, key,
                            v->valuedouble, lo, hi);
    *out = v->valuedouble;
    return 0;
}

static int whole(double x) {
    return x == floor(x);
}

static int string_field(const cJSON *obj, const char *key, char *out, size_t cap, const char *path,
                        const char *where, dt_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!cJSON_IsString(v) || strlen(v->valuestring) >= cap)
        return dt_error_set(err, "profile %s: %s: '%s' missing, not a string or too long", path,
                            where, key);
    snprintf(out, cap, "%s", v->valuestring);
    return 0;
}

static int read_op(dt_profile_op *o, const cJSON *item, size_t params, const char *path, int index,
                   dt_error *err) {
    char where[32];
    snprintf(where, sizeof where, "op %d", index);
    double fwd = 0, bwd = 0, off = 0, count = 0;
    const double huge = 9.0e15; /* exact in a double */
    if (!cJSON_IsObject(item))
        return dt_error_set(err, "profile %s: %s is not an object", path, where);
    if (string_field(item, "name", o->name, sizeof o->name, path, where, err) ||
        string_field(item, "kind", o->kind, sizeof o->kind, path, where, err) ||
        field(item, "forward_ms", 0, 1e9, &fwd, path, where, err) ||
        field(item, "backward_ms", 0, 1e9, &bwd, path, where, err) ||
        field(item, "param_offset", 0, huge, &off, path, where, err) ||
        field(item, "param_count", 0, huge, &count, path, where, err))
        return -1;
    if (!whole(off) || !whole(count) || off + count > (double)params)
        return dt_error_set(err,
                            "profile %s: %s: parameters [%.0f, %.0f) are not whole or lie "
                            "outside the model's %zu",
                            path, where, off, off + count, params);
    o->forward_s = fwd * 1e-3;
    o->backward_s = bwd * 1e-3;
    o->param_offset = (size_t)off;
    o->param_count = (size_t)count;
    return 0;
}

int dt_profile_read(dt_profile *p, const char *path, dt_error *err) {
    memset(p, 0, sizeof *p);
    char *text = dt_text_file_read(path, "profile", MAX_PROFILE_BYTES, err);
    if (!text) return -1;
    cJSON *root = cJSON_ParseWithOpts(text, NULL, 1);
    free(text);
    if (!root) return dt_error_set(err, "profile %s is not JSON", path);
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(root, "profile");
    const cJSON *ops = cJSON_GetObjectItemCaseSensitive(root, "ops");
    double width = 0, batch = 0, threads = 0, steps = 0, params = 0, step = 0, sgd = 0, other = 0;
    int rc = 0;
    if (!cJSON_IsString(kind) || strcmp(kind->valuestring, "dtrain-ops"))
        rc = dt_error_set(err, "%s is not a profile (dtrain bench --profile-out)", path);
    else if (string_field(root, "model", p->model, sizeof p->model, path, "top", err) ||
             field(root, "width", 0, 1 << 20, &width, path, "top", err) ||
             field(root, "batch_size", 1, 1 << 24, &batch, path, "top", err) ||
             field(root, "threads", 1, 4096, &threads, path, "top", err) ||
             field(root, "steps", 1, 1e9, &steps, path, "top", err) ||
             field(root, "params", 1, 9.0e15, &params, path, "top", err) ||
             field(root, "step_ms", 0, 1e9, &step, path, "top", err) ||
             field(root, "sgd_ms", 0, 1e9, &sgd, path, "top", err) ||
             field(root, "other_ms", 0, 1e9, &other, path, "top", err))
        rc = -1;
    else if (!whole(width) || !whole(batch) || !whole(threads) || !whole(steps) || !whole(params))
        rc = dt_error_set(err,
                          "profile %s: width, batch_size, threads, steps and params must "
                          "be whole numbers",
                          path);
    else if (!cJSON_IsArray(ops) || cJSON_GetArraySize(ops) < 1 ||
             cJSON_GetArraySize(ops) > MAX_PROFILE_OPS)
        rc = dt_error_set(err, "profile %s: 'ops' must be a list of 1 to %d ops", path,
                          MAX_PROFILE_OPS);
    if (rc == 0) {
        p->width = (int)width;
        p->batch = (int)batch;
        p->threads = (int)threads;
        p->steps = (long)steps;
        p->params = (size_t)params;
        p->step_s = step * 1e-3;
        p->sgd_s = sgd * 1e-3;
        p->other_s = other * 1e-3;
        p->n_ops = cJSON_GetArraySize(ops);
        p->ops = calloc((size_t)p->n_ops, sizeof *p->ops);
        if (!p->ops) rc = dt_error_set(err, "out of memory for profile %s", path);
    }
    int index = 0;
    const cJSON *item;
    if (rc == 0) cJSON_ArrayForEach(item, ops) {
            if (read_op(&p->ops[index], item, p->params, path, index, err)) {
                rc = -1;
                break;
            }
            index++;
        }
    cJSON_Delete(root);
    if (rc) dt_profile_free(p);
    return rc;
}
