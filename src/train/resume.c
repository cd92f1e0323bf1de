#define _XOPEN_SOURCE 700 /* realpath */
#include "train/resume.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dtrain/checkpoint.h"
#include "dtrain/safetensors.h"
#include "train/train_flags.h"

/* 2: the run log's absolute path and crc32, --precision among the flags; 3: each
 * tensor's crc32 (checkpoint.h) and the model's graph hash */
#define FORMAT "dtrain-checkpoint-3"

/* The flags a resumed run must share with the one that wrote the checkpoint: they
 * change the model, the data order or the arithmetic. Not here: threads, loader
 * workers, --max-steps, --log, --save, --init (the checkpoint replaces its weights). */
static const char *const matched[] = {"model",       "width",
                                      "data",        "epochs",
                                      "batch-size",  "lr",
                                      "momentum",    "weight-decay",
                                      "lr-schedule", "warmup-epochs",
                                      "lr-scaling",  "seed",
                                      "max-samples", "augment",
                                      "no-augment",  "mode",
                                      "allreduce",   "comm-dtype",
                                      "bucket-mb",   "overlap",
                                      "servers",     "replicas-to-aggregate",
                                      "staleness",   "precision",
                                      NULL};

int dt_ckpt_every_parse(const char *text, long *n, dt_ckpt_unit *unit, dt_error *err) {
    *n = 1;
    *unit = DT_CKPT_EPOCHS;
    if (!text) return 0;
    const char *units = text + strspn(text, "0123456789");
    char digits[32];
    const size_t len = (size_t)(units - text);
    if (len == 0 || len >= sizeof digits)
        return dt_error_set(err,
                            "--checkpoint-every expects N steps or N epochs (500steps, "
                            "1epoch), got '%s'",
                            text);
    memcpy(digits, text, len);
    digits[len] = '\0';
    if (!strcmp(units, "steps") || !strcmp(units, "step"))
        *unit = DT_CKPT_STEPS;
    else if (strcmp(units, "epochs") && strcmp(units, "epoch"))
        return dt_error_set(err,
                            "--checkpoint-every expects N steps or N epochs (500steps, "
                            "1epoch), got '%s'",
                            text);
    return dt_parse_long("--checkpoint-every", digits, 1, LONG_MAX, n, err);
}

int dt_resume_file(char *out, size_t size, const char *dir, dt_error *err) {
    if ((size_t)snprintf(out, size, "%s/checkpoint.safetensors", dir) >= size)
        return dt_error_set(err, "checkpoint directory path too long: %.80s...", dir);
    return 0;
}

int dt_resume_lock_path(char *out, size_t size, const char *dir, dt_error *err) {
    if ((size_t)snprintf(out, size, "%s/.launch.lock", dir) >= size)
        return dt_error_set(err, "checkpoint directory path too long: %.80s...", dir);
    return 0;
}

/* The matched flags as "flag.NAME" = value ("" for a switch that is on); flags at
 * their default are absent. */
static int flag_meta(const dt_train_config *cfg, dt_st_meta *meta, int cap, int *n, dt_error *err) {
    const char *argv[128];
    char text[4096];
    const int argc = dt_train_flags_to_argv(cfg, argv, 127, text, sizeof text, err);
    if (argc < 0) return -1;
    for (int i = 0; i < argc; i++) {
        const char *name = argv[i] + 2;
        const dt_train_flag *f = dt_train_flag_find(name);
        const char *value = f && f->kind != DT_FLAG_SWITCH ? argv[++i] : "";
        if (!dt_train_flag_selected(f, matched, NULL)) continue;
        if (*n >= cap) return dt_error_set(err, "too many checkpoint fields");
        if ((size_t)snprintf(meta[*n].key, sizeof meta[*n].key, "flag.%s", name) >=
            sizeof meta[*n].key)
            return dt_error_set(err, "flag name %s too long for a checkpoint field", name);
        if ((size_t)snprintf(meta[*n].value, sizeof meta[*n].value, "%s", value) >=
            sizeof meta[*n].value)
            return dt_error_set(err,
                                "--%s is too long to record in a checkpoint (%zu bytes, "
                                "at most %zu)",
                                name, strlen(value), sizeof meta[*n].value - 1);
        (*n)++;
    }
    return 0;
}

int dt_resume_check_dir(const char *dir, dt_error *err) {
    struct stat st;
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return dt_error_set(err, "cannot create checkpoint directory %s: %s", dir, strerror(errno));
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return dt_error_set(err, "checkpoint directory %s is not a directory", dir);
    return 0;
}

/* The checkpoint's metadata into meta[cap] (*n entries); every value whole, else an
 * error naming it. */
static int build_meta(const dt_train_config *cfg, const dt_resume_point *p, dt_st_meta *meta,
                      int cap, int *n, dt_error *err) {
    char v[9][32];
    snprintf(v[7], sizeof v[7], "%016llx", (unsigned long long)p->graph);
    snprintf(v[0], sizeof v[0], "%ld", p->step);
    snprintf(v[1], sizeof v[1], "%d", p->epoch);
    snprintf(v[2], sizeof v[2], "%ld", p->epoch_pos);
    snprintf(v[3], sizeof v[3], "%d", p->workers);
    snprintf(v[4], sizeof v[4], "%ld", p->opt_steps);
    snprintf(v[5], sizeof v[5], "%ld", p->log_offset);
    snprintf(v[6], sizeof v[6], "%lu", p->log_crc);
    const char *const fields[][2] = {
        {"format", FORMAT},  {"model", cfg->model}, {"step", v[0]},      {"epoch", v[1]},
        {"epoch_pos", v[2]}, {"workers", v[3]},     {"opt_steps", v[4]}, {"log_offset", v[5]},
        {"log_crc32", v[6]}, {"log", p->log},       {"graph", v[7]}};
    *n = 0;
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++, (*n)++) {
        snprintf(meta[*n].key, sizeof meta[*n].key, "%s", fields[i][0]);
        if ((size_t)snprintf(meta[*n].value, sizeof meta[*n].value, "%s", fields[i][1]) >=
            sizeof meta[*n].value)
            return dt_error_set(err,
                                "checkpoint field %s is too long to record (%zu bytes, at most "
                                "%zu)",
                                fields[i][0], strlen(fields[i][1]), sizeof meta[*n].value - 1);
    }
    return flag_meta(cfg, meta, cap, n, err);
}

enum { META_CAP = 64 };

int dt_resume_log_path(const char *log, char **out, dt_error *err) {
    *out = NULL;
    const char *slash = strrchr(log, '/');
    const char *name = slash ? slash + 1 : log;
    if (!*name) return dt_error_set(err, "--log %s names a folder, not a file", log);
    char *dir = slash ? strndup(log, (size_t)(slash - log) + 1) : strdup(".");
    if (!dir) return dt_error_set(err, "out of memory for the run log's path");
    char *real = realpath(dir, NULL);
    const int e = errno;
    free(dir);
    if (!real)
        return dt_error_set(err, "--log %s: cannot resolve its folder: %s", log, strerror(e));
    const size_t n = strlen(real) + 1 + strlen(name) + 1;
    *out = malloc(n);
    if (*out) snprintf(*out, n, "%s%s%s", real, strcmp(real, "/") ? "/" : "", name);
    free(real);
    return *out ? 0 : dt_error_set(err, "out of memory for the run log's path");
}

int dt_resume_check_meta(const dt_train_config *cfg, const char *log, dt_error *err) {
    dt_resume_point p = {.step = LONG_MAX,
                         .epoch = INT_MAX,
                         .epoch_pos = LONG_MAX,
                         .workers = INT_MAX,
                         .opt_steps = LONG_MAX,
                         .log_offset = LONG_MAX,
                         .log_crc = 0xffffffffUL};
    if (log && (size_t)snprintf(p.log, sizeof p.log, "%s", log) >= sizeof p.log)
        return dt_error_set(err,
                            "--log %.80s...: its absolute path is too long to record in a "
                            "checkpoint (%zu bytes, at most %zu)",
                            log, strlen(log), sizeof p.log - 1);
    dt_st_meta *meta = calloc(META_CAP, sizeof *meta);
    if (!meta) return dt_error_set(err, "out of memory for the checkpoint's metadata");
    int n;
    int rc = build_meta(cfg, &p, meta, META_CAP, &n, err);
    if (rc == 0) rc = dt_safetensors_meta_check(meta, n, "the checkpoint", err);
    free(meta);
    return rc;
}

int dt_resume_save(const char *dir, const dt_train_config *cfg, const dt_model *m,
                   const dt_sgd *opt, const dt_resume_point *p, dt_error *err) {
    char path[4096];
    if (dt_resume_file(path, sizeof path, dir, err) || dt_resume_check_dir(dir, err)) return -1;
    dt_st_meta *meta = calloc(META_CAP, sizeof *meta);
    if (!meta) return dt_error_set(err, "out of memory for the checkpoint's metadata");
    int n;
    dt_resume_point at = *p;
    at.graph = dt_model_graph_hash(m);
    int rc = build_meta(cfg, &at, meta, META_CAP, &n, err);
    if (rc == 0) rc = dt_checkpoint_save(m, opt, meta, n, path, err);
    free(meta);
    return rc;
}

static int meta_long(const dt_safetensors *st, const char *dir, const char *key, long min, long max,
                     long *out, dt_error *err) {
    const char *v = dt_safetensors_meta(st, key);
    dt_error why;
    if (!v || dt_parse_long(key, v, min, max, out, &why))
        return dt_error_set(err, "--resume %s: the checkpoint's %s is %s%s%s (want %ld..%ld)", dir,
                            key, v ? "'" : "missing", v ? v : "", v ? "'" : "", min, max);
    return 0;
}

int dt_resume_parse(const dt_safetensors *st, const char *dir, dt_resume_point *p, dt_error *err) {
    memset(p, 0, sizeof *p);
    const char *format = dt_safetensors_meta(st, "format");
    if (format && !strcmp(format, "dtrain-checkpoint-1"))
        return dt_error_set(err,
                            "--resume %s: the checkpoint was written by an older dtrain "
                            "(dtrain-checkpoint-1, without its run log's checksum and "
                            "--precision); its weights go on with --init "
                            "%s/checkpoint.safetensors --checkpoint NEWDIR (momentum and "
                            "position start afresh)",
                            dir, dir);
    if (format && !strcmp(format, "dtrain-checkpoint-2"))
        return dt_error_set(err,
                            "--resume %s: the checkpoint was written by an older dtrain "
                            "(dtrain-checkpoint-2, without checksums of its tensors and its "
                            "graph), so it cannot be verified; its weights go on with --init "
                            "%s/checkpoint.safetensors --checkpoint NEWDIR (momentum and "
                            "position start afresh)",
                            dir, dir);
    if (!format || strcmp(format, FORMAT))
        return dt_error_set(err,
                            "--resume %s: its checkpoint.safetensors is not a dtrain training "
                            "checkpoint (weights only? use --init for those)",
                            dir);
    long epoch, workers, crc;
    if (meta_long(st, dir, "step", 0, LONG_MAX, &p->step, err) ||
        meta_long(st, dir, "epoch", 0, INT_MAX, &epoch, err) ||
        meta_long(st, dir, "epoch_pos", 0, LONG_MAX, &p->epoch_pos, err) ||
        meta_long(st, dir, "workers", 1, INT_MAX, &workers, err) ||
        meta_long(st, dir, "opt_steps", 0, LONG_MAX, &p->opt_steps, err) ||
        meta_long(st, dir, "log_offset", -1, LONG_MAX, &p->log_offset, err) ||
        meta_long(st, dir, "log_crc32", 0, 0xffffffffL, &crc, err))
        return -1;
    const char *graph = dt_safetensors_meta(st, "graph");
    char *end = NULL;
    if (graph) p->graph = strtoull(graph, &end, 16);
    if (!graph || strlen(graph) != 16 || *end)
        return dt_error_set(err,
                            "--resume %s: the checkpoint's graph is %s%s%s (want 16 hex digits)",
                            dir, graph ? "'" : "missing", graph ? graph : "", graph ? "'" : "");
    p->epoch = (int)epoch;
    p->workers = (int)workers;
    p->log_crc = (unsigned long)crc;
    const char *log = dt_safetensors_meta(st, "log");
    if (!log) return dt_error_set(err, "--resume %s: the checkpoint's log is missing", dir);
    snprintf(p->log, sizeof p->log, "%s", log); /* the reader bounds every value */
    if (p->log_offset >= 0 && log[0] != '/')
        return dt_error_set(
            err, "--resume %s: the checkpoint's log '%.80s' is not an absolute path", dir, log);
    if (p->log_offset < 0 && log[0])
        return dt_error_set(err, "--resume %s: the checkpoint's log '%.80s' has no log_offset", dir,
                            log);
    return 0;
}

int dt_resume_check_run(const dt_resume_point *p, const char *dir, const dt_resume_run *run,
                        dt_error *err) {
    if (p->epoch > run->epochs)
        return dt_error_set(err, "--resume %s: the checkpoint is at epoch %d, past --epochs %d",
                            dir, p->epoch, run->epochs);
    const long per_worker = (run->samples + p->workers - 1) / p->workers;
    const long padded = per_worker * p->workers;
    if (p->epoch_pos > padded || (p->epoch == run->epochs && p->epoch_pos > 0))
        return dt_error_set(err,
                            "--resume %s: the checkpoint's epoch_pos %ld is past its epoch "
                            "(%ld samples, %ld per worker of %d)",
                            dir, p->epoch_pos, run->samples, per_worker, p->workers);
    /* every epoch takes at least 1 step and at most one per batch of the samples (one
     * worker), the positions done of this epoch at least 1 and at most one a batch */
    const long spe_max = (run->samples + run->batch_size - 1) / run->batch_size;
    const long lo = p->epoch + (p->epoch_pos > 0);
    const long hi = p->epoch * spe_max + (p->epoch_pos + run->batch_size - 1) / run->batch_size;
    if (p->step < lo || p->step > hi)
        return dt_error_set(err,
                            "--resume %s: the checkpoint's step %ld does not fit epoch %d "
                            "position %ld (at most %ld steps an epoch: %ld..%ld)",
                            dir, p->step, p->epoch, p->epoch_pos, spe_max, lo, hi);
    if (p->opt_steps > 0 && (p->opt_steps - 1) / p->workers >= p->step)
        return dt_error_set(err,
                            "--resume %s: the checkpoint's opt_steps %ld is more than one "
                            "update per worker and step (step %ld, workers %d)",
                            dir, p->opt_steps, p->step, p->workers);
    return 0;
}

int dt_resume_finished(const dt_resume_point *p, int epochs, long max_steps) {
    return p->epoch >= epochs || (max_steps > 0 && p->step >= max_steps);
}

/* What a checkpoint without the recipe flags was written with: before each model had
 * its recipe (dt_train_config_resolve writes them all), these defaults held for all. */
static const char *legacy_default(const char *name) {
    static const char *const was[][2] = {{"lr", "0.1"},
                                         {"momentum", "0.9"},
                                         {"weight-decay", "0.0005"},
                                         {"lr-schedule", "constant"}};
    for (size_t i = 0; i < sizeof was / sizeof *was; i++)
        if (!strcmp(was[i][0], name)) return was[i][1];
    return NULL;
}

/* The first matched flag whose value differs, as a one-line error. */
static int check_flags(const dt_safetensors *st, const char *dir, const dt_train_config *cfg,
                       dt_error *err) {
    dt_st_meta *now = calloc(META_CAP, sizeof *now);
    if (!now) return dt_error_set(err, "out of memory for the checkpoint's metadata");
    int n = 0, rc = flag_meta(cfg, now, META_CAP, &n, err);
    for (const char *const *name = matched; rc == 0 && *name; name++) {
        char key[64];
        snprintf(key, sizeof key, "flag.%s", *name);
        const char *then = dt_safetensors_meta(st, key), *here = NULL;
        if (!then) then = legacy_default(*name);
        for (int i = 0; i < n; i++)
            if (!strcmp(now[i].key, key)) here = now[i].value;
        if (!then && !here) continue;
        if (then && here && !strcmp(then, here)) continue;
        const dt_train_flag *f = dt_train_flag_find(*name);
        if (f && f->kind == DT_FLAG_SWITCH) {
            rc = dt_error_set(err,
                              "--resume %s: the checkpoint was written %s --%s, this run is %s "
                              "it (resume with the same flags)",
                              dir, then ? "with" : "without", *name, here ? "with" : "without");
            break;
        }
        char a[320], b[320];
        snprintf(a, sizeof a, then ? "--%s %s" : "the default --%s", *name, then);
        snprintf(b, sizeof b, here ? "--%s %s" : "the default --%s", *name, here);
        rc = dt_error_set(err,
                          "--resume %s: the checkpoint was written with %s, this run has %s "
                          "(resume with the same flags)",
                          dir, a, b);
    }
    free(now);
    return rc;
}

int dt_resume_load(const char *dir, const dt_train_config *cfg, const dt_resume_run *run,
                   dt_model *m, dt_sgd *opt, dt_resume_point *p, dt_error *err) {
    char path[4096];
    if (dt_resume_file(path, sizeof path, dir, err)) return -1;
    struct stat sb;
    if (stat(path, &sb) != 0)
        return dt_error_set(err, "--resume %s: no checkpoint there (%s: %s)", dir, path,
                            strerror(errno));
    dt_safetensors st;
    if (dt_safetensors_read(&st, path, err)) return -1;
    int rc = dt_resume_parse(&st, dir, p, err);
    if (rc == 0) rc = check_flags(&st, dir, cfg, err);
    const unsigned long long graph = dt_model_graph_hash(m);
    if (rc == 0 && p->graph != graph)
        rc = dt_error_set(err,
                          "--resume %s: the checkpoint was written for another graph of --model "
                          "%s (graph hash %016llx, this run's %016llx): the model changed since",
                          dir, cfg->model, (unsigned long long)p->graph, graph);
    if (rc == 0) rc = dt_resume_check_run(p, dir, run, err);
    if (rc == 0) rc = dt_checkpoint_verify(&st, 1, err);
    dt_safetensors_free(&st);
    /* a finished run's weights too: --save writes them */
    if (rc == 0) rc = dt_checkpoint_load(m, opt, path, err);
    if (rc == 0 && opt) opt->steps = p->opt_steps;
    return rc;
}
