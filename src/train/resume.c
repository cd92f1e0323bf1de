#include "dtrain/resume.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dtrain/checkpoint.h"
#include "dtrain/safetensors.h"
#include "dtrain/train_flags.h"

#define FORMAT "dtrain-checkpoint-1"

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
                                      "staleness",   NULL};

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
        snprintf(meta[*n].key, sizeof meta[*n].key, "flag.%s", name);
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

int dt_resume_save(const char *dir, const dt_train_config *cfg, const dt_model *m,
                   const dt_sgd *opt, const dt_resume_point *p, dt_error *err) {
    char path[4096];
    enum { CAP = 64 };
    dt_st_meta meta[CAP];
    int n = 0;
    if (dt_resume_file(path, sizeof path, dir, err) || dt_resume_check_dir(dir, err)) return -1;
    memset(meta, 0, sizeof meta);
#define META(k, ...)                                                                               \
    do {                                                                                           \
        snprintf(meta[n].key, sizeof meta[n].key, "%s", k);                                        \
        snprintf(meta[n].value, sizeof meta[n].value, __VA_ARGS__);                                \
        n++;                                                                                       \
    } while (0)
    META("format", "%s", FORMAT);
    META("model", "%s", cfg->model);
    META("step", "%ld", p->step);
    META("epoch", "%d", p->epoch);
    META("epoch_pos", "%ld", p->epoch_pos);
    META("workers", "%d", p->workers);
    META("opt_steps", "%ld", p->opt_steps);
    META("log_offset", "%ld", p->log_offset);
    META("log", "%s", p->log);
#undef META
    if (flag_meta(cfg, meta, CAP, &n, err)) return -1;
    return dt_checkpoint_save(m, opt, meta, n, path, err);
}

static int meta_long(const dt_safetensors *st, const char *path, const char *key, long min,
                     long *out, dt_error *err) {
    const char *v = dt_safetensors_meta(st, key);
    dt_error why;
    if (!v || dt_parse_long(key, v, min, LONG_MAX, out, &why))
        return dt_error_set(err, "checkpoint %s: missing or bad '%s' in its metadata", path, key);
    return 0;
}

/* The first matched flag whose value differs, as a one-line error. */
static int check_flags(const dt_safetensors *st, const char *dir, const dt_train_config *cfg,
                       dt_error *err) {
    enum { CAP = 64 };
    dt_st_meta now[CAP];
    int n = 0;
    if (flag_meta(cfg, now, CAP, &n, err)) return -1;
    for (const char *const *name = matched; *name; name++) {
        char key[64];
        snprintf(key, sizeof key, "flag.%s", *name);
        const char *then = dt_safetensors_meta(st, key), *here = NULL;
        for (int i = 0; i < n; i++)
            if (!strcmp(now[i].key, key)) here = now[i].value;
        if (!then && !here) continue;
        if (then && here && !strcmp(then, here)) continue;
        const dt_train_flag *f = dt_train_flag_find(*name);
        if (f && f->kind == DT_FLAG_SWITCH)
            return dt_error_set(err,
                                "--resume %s: the checkpoint was written %s --%s, this run is %s "
                                "it (resume with the same flags)",
                                dir, then ? "with" : "without", *name, here ? "with" : "without");
        char a[320], b[320];
        snprintf(a, sizeof a, then ? "--%s %s" : "the default --%s", *name, then);
        snprintf(b, sizeof b, here ? "--%s %s" : "the default --%s", *name, here);
        return dt_error_set(err,
                            "--resume %s: the checkpoint was written with %s, this run has %s "
                            "(resume with the same flags)",
                            dir, a, b);
    }
    return 0;
}

int dt_resume_load(const char *dir, const dt_train_config *cfg, dt_model *m, dt_sgd *opt,
                   dt_resume_point *p, dt_error *err) {
    char path[4096];
    if (dt_resume_file(path, sizeof path, dir, err)) return -1;
    struct stat sb;
    if (stat(path, &sb) != 0)
        return dt_error_set(err, "--resume %s: no checkpoint there (%s: %s)", dir, path,
                            strerror(errno));
    dt_safetensors st;
    if (dt_safetensors_read(&st, path, err)) return -1;
    memset(p, 0, sizeof *p);
    const char *format = dt_safetensors_meta(&st, "format");
    const char *log = dt_safetensors_meta(&st, "log");
    long epoch = 0, workers = 0;
    int rc = 0;
    if (!format || strcmp(format, FORMAT))
        rc = dt_error_set(err,
                          "--resume %s: %s is not a dtrain training checkpoint (weights "
                          "only? use --init for those)",
                          dir, path);
    if (rc == 0)
        rc = meta_long(&st, path, "step", 0, &p->step, err) ||
                     meta_long(&st, path, "epoch", 0, &epoch, err) ||
                     meta_long(&st, path, "epoch_pos", 0, &p->epoch_pos, err) ||
                     meta_long(&st, path, "workers", 1, &workers, err) ||
                     meta_long(&st, path, "opt_steps", 0, &p->opt_steps, err) ||
                     meta_long(&st, path, "log_offset", -1, &p->log_offset, err)
                 ? -1
                 : 0;
    if (rc == 0 && (epoch > INT_MAX || workers > INT_MAX))
        rc = dt_error_set(err, "checkpoint %s: epoch or workers out of range", path);
    if (rc == 0) rc = check_flags(&st, dir, cfg, err);
    p->epoch = (int)epoch;
    p->workers = (int)workers;
    snprintf(p->log, sizeof p->log, "%s", log ? log : "");
    dt_safetensors_free(&st);
    if (rc == 0) rc = dt_checkpoint_load(m, opt, path, err);
    if (rc == 0 && opt) opt->steps = p->opt_steps;
    return rc;
}
