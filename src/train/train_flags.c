#include "train/train_flags.h"

#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "train/train_mode.h"

/* Choice rows: names, parse, current value. */
static const char *lr_schedule_names(void) {
    return "constant, cosine, step";
}
static int lr_schedule_parse(dt_train_config *cfg, const char *text) {
    return dt_lr_kind_parse(text, &cfg->lr_schedule);
}
/* NULL (no value) while the model's recipe is to decide */
static const char *lr_schedule_of(const dt_train_config *cfg) {
    return cfg->lr_schedule == DT_LR_MODEL ? NULL : dt_lr_kind_name(cfg->lr_schedule);
}

static const char *lr_scaling_names(void) {
    return "linear, none";
}
static int lr_scaling_parse(dt_train_config *cfg, const char *text) {
    if (strcmp(text, "linear") && strcmp(text, "none")) return -1;
    cfg->lr_scaling_linear = !strcmp(text, "linear");
    return 0;
}
static const char *lr_scaling_of(const dt_train_config *cfg) {
    return cfg->lr_scaling_linear ? "linear" : "none";
}

static int mode_parse(dt_train_config *cfg, const char *text) {
    const dt_train_mode *mode = dt_train_mode_find(text);
    if (!mode) return -1;
    cfg->mode = mode->name; /* the table's string outlives the argument */
    return 0;
}
/* As dt_train_mode_of reads it: the name, else a library caller's ps.mode. */
static const char *mode_of(const dt_train_config *cfg) {
    return cfg->mode                    ? cfg->mode
           : cfg->ps.mode != DT_PS_NONE ? dt_ps_mode_name(cfg->ps.mode)
                                        : "allreduce";
}

static const char *allreduce_names(void) {
    return "auto, shm, hier, ring, mpi";
}
static int allreduce_parse(dt_train_config *cfg, const char *text) {
    return dt_allreduce_parse(text, &cfg->allreduce);
}
static const char *allreduce_of(const dt_train_config *cfg) {
    return dt_allreduce_name(cfg->allreduce);
}

static const char *comm_dtype_names(void) {
    return "fp32, bf16, fp16";
}
static int comm_dtype_parse(dt_train_config *cfg, const char *text) {
    return dt_comm_dtype_parse(text, &cfg->comm_dtype);
}
static const char *comm_dtype_of(const dt_train_config *cfg) {
    return dt_comm_dtype_name(cfg->comm_dtype);
}

static const char *precision_names(void) {
    return "fp32, bf16";
}
static int precision_parse(dt_train_config *cfg, const char *text) {
    return dt_precision_parse(text, &cfg->precision);
}
static const char *precision_of(const dt_train_config *cfg) {
    return dt_precision_name(cfg->precision);
}

static const char *overlap_names(void) {
    return "auto, on, off";
}
static int overlap_parse(dt_train_config *cfg, const char *text) {
    return dt_overlap_mode_parse(text, &cfg->overlap);
}
static const char *overlap_of(const dt_train_config *cfg) {
    return dt_overlap_mode_name(cfg->overlap);
}

#define FIELD(member) offsetof(dt_train_config, member)
#define INT_ROW(member, lo, hi)                                                                    \
    .kind = DT_FLAG_INT, .field = DT_FIELD_INT, .offset = FIELD(member), .imin = (lo), .imax = (hi)
#define LONG_ROW(member, lo, hi)                                                                   \
    .kind = DT_FLAG_INT, .field = DT_FIELD_LONG, .offset = FIELD(member), .imin = (lo), .imax = (hi)
#define FLOAT_ROW(member, type, lo, hi)                                                            \
    .kind = DT_FLAG_FLOAT, .field = (type), .offset = FIELD(member), .fmin = (lo), .fmax = (hi)
#define STRING_ROW(member) .kind = DT_FLAG_STRING, .field = DT_FIELD_STRING, .offset = FIELD(member)
#define SWITCH_ROW(member, v)                                                                      \
    .kind = DT_FLAG_SWITCH, .field = DT_FIELD_INT, .offset = FIELD(member), .switch_value = (v)
#define CHOICE_ROW(names, parse, of)                                                               \
    .kind = DT_FLAG_CHOICE, .choice_names = (names), .choice_parse = (parse), .choice_of = (of)

/* Ranges are those of `dtrain train`; where `scale` had narrower ones (threads
 * 1..256, epochs 1..1000, warm-up 0..1000) the wider one holds for every command. */
static const dt_train_flag flags[] = {
    {.name = "model",
     .value = "M",
     STRING_ROW(model),
     .help = "a zoo model: lenet5 (default), resnet20, alexnet, resnet50, ...\n"
             "(dtrain models lists them all, each with its recipe: the\n"
             "defaults of --lr, --momentum, --weight-decay, --lr-schedule),\n"
             "or FILE.onnx, a CNN/MLP exported from PyTorch (docs/onnx.md)"},
    {.name = "width",
     .value = "W",
     INT_ROW(width, 1, 1024),
     .help = "the first conv's channels, the rest scaled alike (default\n"
             "64 for resnet18 and the ImageNet models, 16 for resnet20..56;\n"
             "smaller = narrower)"},
    {.name = "data",
     .value = "SPEC",
     STRING_ROW(data),
     .per_rank = 1, /* a path may differ between hosts: the fingerprint compares the data */
     .help = "fashion-mnist | fashion-mnist:DIR | mnist:DIR | cifar10:DIR |\n"
             "synthetic:mnist | synthetic:cifar10 | synthetic:imagenet |\n"
             "synthetic:CxHxW (default: fashion-mnist for a 1x28x28 model, else\n"
             "synthetic data of its input shape).\n"
             "Models that can take the data's input shape do (dtrain models)"},
    {.name = "epochs",
     .value = "E",
     INT_ROW(epochs, 1, 100000),
     .help = "passes over the training set (default 1)"},
    {.name = "batch-size",
     .value = "B",
     INT_ROW(batch_size, 1, 1 << 24),
     .help = "samples per step and process (default 128)"},
    {.name = "lr",
     .value = "X",
     FLOAT_ROW(lr, DT_FIELD_FLOAT, 1e-12, 1e6),
     .help = "learning rate (default: the model's recipe; lenet5 0.05)"},
    {.name = "momentum",
     .value = "X",
     FLOAT_ROW(momentum, DT_FIELD_FLOAT, 0.0, 0.999999),
     .help = "SGD momentum (default: the model's recipe; lenet5 0.9)"},
    {.name = "weight-decay",
     .value = "X",
     FLOAT_ROW(weight_decay, DT_FIELD_FLOAT, 0.0, 1.0),
     .help = "L2 weight decay (default: the model's recipe; lenet5 5e-4)"},
    {.name = "lr-schedule",
     .value = "S",
     CHOICE_ROW(lr_schedule_names, lr_schedule_parse, lr_schedule_of),
     .help = "constant | cosine | step (x0.1 at 50% and 75%) (default:\n"
             "the model's recipe; lenet5 cosine)"},
    {.name = "warmup-epochs",
     .value = "K",
     FLOAT_ROW(warmup_epochs, DT_FIELD_DOUBLE, 0.0, 1e6),
     .help = "ramp the rate up linearly over the first K epochs (default 0)"},
    {.name = "lr-scaling",
     .value = "S",
     CHOICE_ROW(lr_scaling_names, lr_scaling_parse, lr_scaling_of),
     .help = "linear: lr x number of processes (use --warmup-epochs)\n| none (default)"},
    {.name = "threads",
     .value = "T",
     INT_ROW(threads, 1, 1024),
     .per_rank = 1,
     .help = "compute threads per process (default: the cores this process\n"
             "may use: its affinity mask, shared with the ranks on its host\n"
             "that the launcher names (mpirun -np 2 on 2 cores: 1); the\n"
             "run log's threads_from says why)"},
    {.name = "seed",
     .value = "S",
     .kind = DT_FLAG_INT,
     .field = DT_FIELD_U64,
     .offset = FIELD(seed),
     .imin = 0,
     .imax = LONG_MAX,
     .help = "seed for initialisation and shuffling (default 0)"},
    {.name = "max-steps",
     .value = "N",
     LONG_ROW(max_steps, 1, LONG_MAX),
     .help = "stop after N steps in total"},
    {.name = "max-samples",
     .value = "N",
     LONG_ROW(max_samples, 1, INT_MAX),
     .help = "train on the first N training samples only"},
    {.name = "test-samples",
     .value = "N",
     LONG_ROW(max_test_samples, 1, INT_MAX),
     .help = "evaluate on the first N test samples only"},
    {.name = "eval-every",
     .value = "N",
     LONG_ROW(eval_every, 1, LONG_MAX),
     .help = "also evaluate every N steps (eval records in the log: elapsed\n"
             "time, step, test accuracy and loss; for accuracy-vs-time curves)"},
    {.name = "eval-samples",
     .value = "N",
     LONG_ROW(eval_samples, 1, INT_MAX),
     .help = "--eval-every evaluates on the first N test samples (default:\n"
             "the whole test set, or --test-samples)"},
    {.name = "loader-workers",
     .value = "W",
     INT_ROW(loader_workers, 0, 64),
     .per_rank = 1,
     .help = "threads decoding batches ahead of training (default 1;\n"
             "0 = decode in the training thread)"},
    {.name = "reinit",
     SWITCH_ROW(reinit, 1),
     .help = "an ONNX --model: start from fresh weights (PyTorch's default\n"
             "initialisation, from --seed) instead of the file's"},
    {.name = "augment",
     SWITCH_ROW(augment, 1),
     .help = "RandomCrop(32, pad 4) + RandomHorizontalFlip on training"},
    {.name = "no-augment",
     SWITCH_ROW(augment, 0),
     .help = "none (default: on for CIFAR-10 data, off for MNIST-like)"},
    {.name = "mode",
     .value = "M",
     CHOICE_ROW(dt_train_mode_names, mode_parse, mode_of),
     .heading = "  Data parallelism: run under mpirun -np N (as root: see docs/distributed.md);\n"
                "  each rank trains on its shard with --batch-size samples per step.",
     .help = "allreduce (default): synchronous SGD with gradient all-reduce\n"
             "| ps-sync | ps-async | ssp: parameter-server training; ranks\n"
             "0..P-1 serve shards of the parameters, the others are workers"},
    {.name = "allreduce",
     .value = "A",
     CHOICE_ROW(allreduce_names, allreduce_parse, allreduce_of),
     .help = "auto (default: timed over the first calls of each bucket\n"
             "size, the fastest of shm, hier, ring and mpi where each\n"
             "can run) | shm (shared memory, one host) | hier (two\n"
             "levels: in each node, then a ring between the nodes) |\n"
             "ring (own reduce-scatter + all-gather) | mpi"},
    {.name = "precision",
     .value = "P",
     CHOICE_ROW(precision_names, precision_parse, precision_of),
     .help = "fp32 (default) | bf16: mixed precision (oneDNN; needs\n"
             "AVX512-BF16 or AMX): activations and their gradients bf16\n"
             "between layers, convs and linears multiply in bf16; weights,\n"
             "their gradients, BatchNorm statistics, the loss and SGD fp32"},
    {.name = "comm-dtype",
     .value = "T",
     CHOICE_ROW(comm_dtype_names, comm_dtype_parse, comm_dtype_of),
     .help = "fp32 (default) | bf16 | fp16: the format gradients travel in\n"
             "(all-reduce and parameter-server pushes; half the bytes,\n"
             "sums stay fp32; 16-bit needs the ring all-reduce)"},
    {.name = "bucket-mb",
     .value = "X",
     FLOAT_ROW(bucket_mb, DT_FIELD_DOUBLE, 1e-6, 1e5),
     .word = "auto",
     .word_value = DT_BUCKET_AUTO,
     .help = "gradient bucket size in MiB (default 25, as DDP), or auto:\n"
             "measured over the first steps among 1, 4, 25 and 100 (the\n"
             "epoch records' bucket_auto say what each took and the choice)"},
    {.name = "overlap",
     .value = "O",
     CHOICE_ROW(overlap_names, overlap_parse, overlap_of),
     .help = "auto (default) | on | off: all-reduce buckets during backward\n"
             "on a communication thread; auto turns it on when every rank's\n"
             "thread gets a core of its own or the ranks span hosts (the run\n"
             "record's overlap_why says which)"},
    {.name = "no-overlap",
     SWITCH_ROW(overlap, DT_OVERLAP_OFF),
     .alias = 1,
     .help = "the same as --overlap off"},
    {.name = "servers",
     .value = "P",
     INT_ROW(ps.servers, 1, 63),
     .help = "parameter servers (default 1)"},
    {.name = "replicas-to-aggregate",
     .value = "K",
     INT_ROW(ps.replicas, 1, 100000),
     .help = "ps-sync: gradients averaged per update (default:\n"
             "all workers); later ones for an old version are dropped"},
    {.name = "staleness",
     .value = "S",
     INT_ROW(ps.staleness, 0, 100000),
     .help = "ssp: a worker may run at most S steps ahead (default 3)"},
    {.name = "test-delay",
     .value = "WORKER:MS",
     .kind = DT_FLAG_PAIR,
     .field = DT_FIELD_INT,
     .offset = FIELD(delay_worker),
     .offset2 = FIELD(delay_ms),
     .per_rank = 1,
     .imin = 0,
     .imax = INT_MAX,
     .help = "testing aid: worker (or rank) WORKER sleeps MS ms every step"},
    {.name = "sys-interval",
     .value = "S",
     FLOAT_ROW(sys_interval, DT_FIELD_DOUBLE, 0.05, 3600.0),
     .help = "seconds between each rank's resource samples (sys records\nin the log; default 1)"},
    {.name = "log",
     .value = "FILE",
     STRING_ROW(log_path),
     .per_rank = 1,
     .heading = "",
     .help = "write the JSON Lines run log to FILE"},
    {.name = "trace",
     .value = "FILE",
     STRING_ROW(trace_path),
     .per_rank = 1,
     .help = "write every worker's timeline to FILE in the Chrome trace\n"
             "format (Perfetto, chrome://tracing): steps, their phases,\n"
             "each bucket's all-reduce, pulls and pushes (docs/trace.md)"},
    {.name = "trace-steps",
     .value = "A:B",
     STRING_ROW(trace_steps),
     .help = "trace steps A to B (counted from 0 over the run; \"A:\" to the\n"
             "end; default all, up to --trace-events)"},
    {.name = "trace-events",
     .value = "N",
     LONG_ROW(trace_events, 1000, 100000000),
     .help = "the most spans a rank keeps (default 200000, about 30 MB of\n"
             "JSON; the steps past it are left out, and the file says so)"},
    {.name = "save",
     .value = "FILE",
     STRING_ROW(save_path),
     .per_rank = 1,
     .help = "write the final weights (safetensors, PyTorch names; the\n"
             "path is checked before training, diverged weights never saved)"},
    {.name = "init",
     .value = "FILE",
     STRING_ROW(init_path),
     .per_rank = 1,
     .help = "start from the weights in FILE (safetensors)"},
    {.name = "checkpoint",
     .value = "DIR",
     STRING_ROW(checkpoint_dir),
     .help = "write the whole training state to DIR/checkpoint.safetensors\n"
             "(atomically: a kill leaves the last good one) every\n"
             "--checkpoint-every, when --max-steps stops and at the end"},
    {.name = "checkpoint-every",
     .value = "Nunit",
     STRING_ROW(checkpoint_every),
     .help = "how often to checkpoint, unit steps or epochs: 500steps,\n"
             "2epochs (default 1epoch)"},
    {.name = "resume",
     .value = "DIR",
     STRING_ROW(resume_dir),
     .help = "continue from DIR's checkpoint (same flags; all-reduce may\n"
             "change the process count; docs/checkpoints.md)"},
};
enum { N_FLAGS = sizeof flags / sizeof *flags };

const dt_train_flag *dt_train_flags(int *count) {
    *count = N_FLAGS;
    return flags;
}

const dt_train_flag *dt_train_flag_find(const char *name) {
    for (int i = 0; i < N_FLAGS; i++)
        if (!strcmp(flags[i].name, name)) return &flags[i];
    return NULL;
}

static int name_listed(const char *name, const char *const *list) {
    for (; list && *list; list++)
        if (!strcmp(*list, name)) return 1;
    return 0;
}

int dt_train_flag_selected(const dt_train_flag *flag, const char *const *only,
                           const char *const *except) {
    return (!only || name_listed(flag->name, only)) && !name_listed(flag->name, except);
}

static void *field_at(dt_train_config *cfg, size_t offset) {
    return (char *)cfg + offset;
}
static const void *field_in(const dt_train_config *cfg, size_t offset) {
    return (const char *)cfg + offset;
}

/* Digits, the only form a pair's halves take ("2:150"; not " 2", "+2" or "2x"). */
static int parse_pair_half(const char *flag, const dt_train_flag *f, const char *text,
                           const char *whole, long *out, dt_error *err) {
    if (!*text || text[strspn(text, "0123456789")])
        return dt_error_set(err, "%s expects %s, got '%s'", flag, f->value, whole);
    return dt_parse_long(flag, text, f->imin, f->imax, out, err);
}

static int parse_pair(const char *flag, const dt_train_flag *f, dt_train_config *cfg,
                      const char *text, dt_error *err) {
    const char *colon = strchr(text, ':');
    char first[32];
    if (!colon || (size_t)(colon - text) >= sizeof first)
        return dt_error_set(err, "%s expects %s, got '%s'", flag, f->value, text);
    memcpy(first, text, (size_t)(colon - text));
    first[colon - text] = 0;
    long a = 0, b = 0;
    if (parse_pair_half(flag, f, first, text, &a, err) ||
        parse_pair_half(flag, f, colon + 1, text, &b, err))
        return -1;
    *(int *)field_at(cfg, f->offset) = (int)a;
    *(int *)field_at(cfg, f->offset2) = (int)b;
    return 0;
}

/* "a, b, c" -> "a, b or c" for the error message. */
static void names_with_or(const char *names, char *out, size_t size) {
    const char *last = NULL;
    for (const char *p = strstr(names, ", "); p; p = strstr(p + 2, ", ")) last = p;
    if (!last)
        snprintf(out, size, "%s", names);
    else
        snprintf(out, size, "%.*s or %s", (int)(last - names), names, last + 2);
}

int dt_train_flag_parse(const dt_train_flag *f, dt_train_config *cfg, const char *text,
                        dt_error *err) {
    char flag[64];
    snprintf(flag, sizeof flag, "--%s", f->name);
    void *field = field_at(cfg, f->offset);
    long v = 0;
    double x = 0;
    switch (f->kind) {
    case DT_FLAG_INT:
        if (dt_parse_long(flag, text, f->imin, f->imax, &v, err)) return -1;
        if (f->field == DT_FIELD_INT)
            *(int *)field = (int)v;
        else if (f->field == DT_FIELD_LONG)
            *(long *)field = v;
        else
            *(uint64_t *)field = (uint64_t)v;
        return 0;
    case DT_FLAG_FLOAT:
        if (f->word && !strcmp(text, f->word))
            x = f->word_value;
        else if (dt_parse_double(flag, text, f->fmin, f->fmax, &x, err))
            return f->word ? dt_error_set(err, "%s must be %s or a number from %g to %g, got '%s'",
                                          flag, f->word, f->fmin, f->fmax, text)
                           : -1;
        if (f->field == DT_FIELD_FLOAT)
            *(float *)field = (float)x;
        else
            *(double *)field = x;
        return 0;
    case DT_FLAG_STRING:
        *(const char **)field = text;
        return 0;
    case DT_FLAG_SWITCH:
        *(int *)field = f->switch_value;
        return 0;
    case DT_FLAG_CHOICE:
        if (f->choice_parse(cfg, text) == 0) return 0;
        char names[256];
        names_with_or(f->choice_names(), names, sizeof names);
        return dt_error_set(err, "%s must be %s, got '%s'", flag, names, text);
    case DT_FLAG_PAIR:
        return parse_pair(flag, f, cfg, text, err);
    }
    return dt_error_set(err, "%s: unknown flag kind", flag);
}

void dt_train_flags_help(FILE *out, const char *const *only, const char *const *except) {
    enum { COLUMN = 21 }; /* where the help text starts, after two spaces */
    for (int i = 0; i < N_FLAGS; i++) {
        const dt_train_flag *f = &flags[i];
        if (!dt_train_flag_selected(f, only, except)) continue;
        if (f->heading) fprintf(out, "\n%s%s", f->heading, *f->heading ? "\n" : "");
        char left[64];
        snprintf(left, sizeof left, "--%s%s%s", f->name, f->value ? " " : "",
                 f->value ? f->value : "");
        const int pad = (int)strlen(left) < COLUMN ? COLUMN - (int)strlen(left) : 3;
        fprintf(out, "  %s%*s", left, pad, "");
        for (const char *line = f->help; *line;) {
            const size_t n = strcspn(line, "\n");
            fprintf(out, "%.*s\n", (int)n, line);
            line += n;
            if (*line) fprintf(out, "%*s", COLUMN + 2, ""), line++;
        }
    }
}

/* The shortest text that reads back as the same value (0.05, not 0.0500000007). */
static void format_number(char *out, size_t size, double v, int single) {
    for (int digits = 1; digits <= 17; digits++) {
        snprintf(out, size, "%.*g", digits, v);
        const double back = strtod(out, NULL);
        if (single ? (float)back == (float)v : back == v) return;
    }
}

const char *dt_train_flag_value(const dt_train_flag *f, const dt_train_config *cfg, char *buf,
                                size_t size) {
    const void *field = field_in(cfg, f->offset);
    switch (f->kind) {
    case DT_FLAG_INT:
        if (f->field == DT_FIELD_INT)
            snprintf(buf, size, "%d", *(const int *)field);
        else if (f->field == DT_FIELD_LONG)
            snprintf(buf, size, "%ld", *(const long *)field);
        else
            snprintf(buf, size, "%" PRIu64, *(const uint64_t *)field);
        return buf;
    case DT_FLAG_FLOAT:
        if (f->word && f->field == DT_FIELD_DOUBLE && *(const double *)field == f->word_value)
            return f->word;
        if (f->field == DT_FIELD_FLOAT)
            format_number(buf, size, *(const float *)field, 1);
        else
            format_number(buf, size, *(const double *)field, 0);
        return buf;
    case DT_FLAG_STRING:
        return *(const char *const *)field;
    case DT_FLAG_SWITCH:
        return *(const int *)field == f->switch_value ? "" : NULL;
    case DT_FLAG_CHOICE:
        return f->choice_of(cfg);
    case DT_FLAG_PAIR:
        snprintf(buf, size, "%d:%d", *(const int *)field, *(const int *)field_in(cfg, f->offset2));
        return buf;
    }
    return NULL;
}

int dt_train_flags_to_argv(const dt_train_config *cfg, const char **argv, int max_args, char *text,
                           size_t text_size, dt_error *err) {
    const dt_train_config defaults = dt_train_config_default();
    int n = 0;
    size_t used = 0;
    for (int i = 0; i < N_FLAGS; i++) {
        const dt_train_flag *f = &flags[i];
        if (f->alias) continue;
        char mine[64], theirs[64];
        const char *value = dt_train_flag_value(f, cfg, mine, sizeof mine);
        const char *base = dt_train_flag_value(f, &defaults, theirs, sizeof theirs);
        if (!value || (base && !strcmp(value, base))) continue;
        const int entries = f->kind == DT_FLAG_SWITCH ? 1 : 2;
        /* the flag name and a number's text live in text[]; strings stay in cfg */
        const size_t need = strlen(f->name) + 3 + (value == mine ? strlen(mine) + 1 : 0);
        if (n + entries > max_args || used + need > text_size)
            return dt_error_set(err, "too little room for the arguments of dtrain train");
        char *name = text + used;
        used += (size_t)snprintf(name, text_size - used, "--%s", f->name) + 1;
        argv[n++] = name;
        if (entries == 1) continue;
        if (value == mine) {
            char *copy = text + used;
            used += (size_t)snprintf(copy, text_size - used, "%s", mine) + 1;
            value = copy;
        }
        argv[n++] = value;
    }
    argv[n] = NULL;
    return n;
}
