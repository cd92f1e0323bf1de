#include "train/fingerprint.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/train_flags.h"

void dt_fingerprint_init(dt_fingerprint *fp) {
    memset(fp, 0, sizeof *fp);
}

void dt_fingerprint_free(dt_fingerprint *fp) {
    for (int i = 0; i < fp->n; i++) free(fp->values[i]);
    free(fp->values);
    free(fp->names);
    memset(fp, 0, sizeof *fp);
}

int dt_fingerprint_add(dt_fingerprint *fp, const char *name, const char *value, dt_error *err) {
    if (fp->n == fp->cap) {
        const int cap = fp->cap ? 2 * fp->cap : 64;
        char(*names)[64] = realloc(fp->names, sizeof *names * (size_t)cap);
        if (names) fp->names = names;
        char **values = realloc(fp->values, sizeof *values * (size_t)cap);
        if (values) fp->values = values;
        if (!names || !values) return dt_error_set(err, "out of memory for the rank fingerprint");
        fp->cap = cap;
    }
    char *copy = strdup(value);
    if (!copy) return dt_error_set(err, "out of memory for the rank fingerprint");
    snprintf(fp->names[fp->n], sizeof fp->names[fp->n], "%s", name);
    fp->values[fp->n++] = copy;
    return 0;
}

int dt_fingerprint_config(dt_fingerprint *fp, const dt_train_config *cfg, dt_error *err) {
    int count;
    const dt_train_flag *flags = dt_train_flags(&count);
    for (int i = 0; i < count; i++) {
        if (flags[i].per_rank || flags[i].alias) continue;
        char name[64], buf[64];
        snprintf(name, sizeof name, "--%s", flags[i].name);
        const char *value = dt_train_flag_value(&flags[i], cfg, buf, sizeof buf);
        if (dt_fingerprint_add(fp, name, value ? value : "(not given)", err)) return -1;
    }
    return 0;
}

int dt_fingerprint_model(dt_fingerprint *fp, const dt_model *m, const dt_dataset *train,
                         const dt_dataset *test, dt_error *err) {
    char v[160];
    snprintf(v, sizeof v, "%zu", m->n_params);
    if (dt_fingerprint_add(fp, "the model's parameter count", v, err)) return -1;
    snprintf(v, sizeof v, "%d", m->n_tensors);
    if (dt_fingerprint_add(fp, "the model's tensor count", v, err)) return -1;
    snprintf(v, sizeof v, "%d", train->size);
    if (dt_fingerprint_add(fp, "the training samples", v, err)) return -1;
    snprintf(v, sizeof v, "%d", test->size);
    if (dt_fingerprint_add(fp, "the test samples", v, err)) return -1;
    snprintf(v, sizeof v, "%dx%dx%d, %d classes", train->c, train->h, train->w, train->classes);
    if (dt_fingerprint_add(fp, "the data's images", v, err)) return -1;
    for (int i = 0; i < m->n_tensors; i++) {
        const dt_tensor_entry *t = &m->tensors[i];
        int len = snprintf(v, sizeof v, "%s [", t->name);
        for (int d = 0; d < t->ndim && len > 0 && (size_t)len < sizeof v; d++)
            len += snprintf(v + len, sizeof v - (size_t)len, "%s%d", d ? ", " : "", t->shape[d]);
        if (len > 0 && (size_t)len < sizeof v) snprintf(v + len, sizeof v - (size_t)len, "]");
        char name[64];
        snprintf(name, sizeof name, "the model's tensor %d", i);
        if (dt_fingerprint_add(fp, name, v, err)) return -1;
    }
    /* last: a differing tensor is named above; equal tensors in another graph (a stale
     * copy of --model on one host) are caught here */
    snprintf(v, sizeof v, "%016llx", (unsigned long long)dt_model_graph_hash(m));
    return dt_fingerprint_add(fp, "the model's graph (hash of its ops and shapes)", v, err);
}

/* FNV-1a over the name and the value: equal items hash equal on every rank. */
static uint64_t item_hash(const dt_fingerprint *fp, int i) {
    uint64_t h = 0xcbf29ce484222325ULL;
    const char *parts[2] = {fp->names[i], fp->values[i]};
    for (int p = 0; p < 2; p++)
        for (const unsigned char *c = (const unsigned char *)parts[p]; *c || p == 0; c++) {
            h = (h ^ *c) * 0x100000001b3ULL;
            if (!*c) break; /* the name's terminator separates it from the value */
        }
    return h;
}

/* The exchange ends the ranks' setup, whose length differs between ranks by what
 * each loads and builds (rank 0 also opens the log and checks the save path): on a
 * loaded machine a 224x224 model's setup took rank 0 over 25 s longer than rank 1,
 * and the normal no-progress limit called that a dead rank. A rank that dies during
 * setup ends the job through mpirun; this wait only has to catch a hung one, so it
 * allows 24 times the usual limit (10 minutes by default). */
enum { SETUP_TIMEOUT_FACTOR = 24 };

static void allgather(const dt_world *w, const void *mine, void *all, int count, dt_dtype type,
                      const char *what) {
    dt_world setup = *w;
    setup.timeout_s = w->timeout_s * SETUP_TIMEOUT_FACTOR;
    dt_world_allgather(&setup, mine, all, (size_t)count, type, what);
}

enum { VALUE_SHOWN = 200 }; /* characters of a value a mismatch message shows */

int dt_fingerprint_compare(const dt_world *w, const dt_fingerprint *fp, dt_error *err) {
    const char *what = "the ranks' fingerprints";
    if (!w || w->size < 2) return 0;
    /* 1. each rank's item count, a hash of all items and its rank in the process world */
    uint64_t mine[3] = {(uint64_t)fp->n, 0, (uint64_t)w->job_rank};
    uint64_t *hashes = malloc(sizeof *hashes * (size_t)(fp->n > 0 ? fp->n : 1));
    uint64_t *heads = malloc(sizeof *heads * 3 * (size_t)w->size);
    if (!hashes || !heads) {
        free(hashes);
        free(heads);
        dt_world_abort(w, "out of memory for the rank fingerprint");
    }
    for (int i = 0; i < fp->n; i++) {
        hashes[i] = item_hash(fp, i);
        mine[1] = (mine[1] ^ hashes[i]) * 0x100000001b3ULL;
    }
    allgather(w, mine, heads, 3, DT_S64, what);
    int same = 1;
    uint64_t common = heads[0];
    for (int r = 1; r < w->size; r++) {
        same &= heads[3 * r] == heads[0] && heads[3 * r + 1] == heads[1];
        if (heads[3 * r] < common) common = heads[3 * r];
    }
    if (same) {
        free(hashes);
        free(heads);
        return 0;
    }
    /* 2. the item hashes of the items every rank has: the first that differs */
    const int m = (int)common;
    uint64_t *all = malloc(sizeof *all * (size_t)(m > 0 ? m : 1) * (size_t)w->size);
    char *values = malloc((size_t)VALUE_SHOWN * (size_t)w->size);
    if (!all || !values) {
        free(hashes), free(heads), free(all), free(values);
        dt_world_abort(w, "out of memory for the rank fingerprint");
    }
    allgather(w, hashes, all, m, DT_S64, what);
    int item = m, other = -1;
    for (int i = 0; i < m && other < 0; i++)
        for (int r = 1; r < w->size && other < 0; r++)
            if (all[(size_t)r * (size_t)m + (size_t)i] != all[i]) item = i, other = r;
    if (other < 0) /* equal up to the shorter list: the first rank whose count differs */
        for (int r = 1; r < w->size && other < 0; r++)
            if (heads[3 * r] != heads[0]) other = r;
    /* 3. the values of that item, as text */
    char value[VALUE_SHOWN];
    snprintf(value, sizeof value, "%s", item < fp->n ? fp->values[item] : "(none)");
    allgather(w, value, values, VALUE_SHOWN, DT_U8, what);
    char name[64];
    snprintf(name, sizeof name, "%s", item < fp->n ? fp->names[item] : "their settings");
    dt_error_set(err, "ranks disagree on %s: %s on rank %d, %s on rank %d", name, values,
                 (int)heads[2], values + (size_t)other * VALUE_SHOWN, (int)heads[3 * other + 2]);
    free(hashes), free(heads), free(all), free(values);
    return -1;
}
