/* dtrain models: every model of the zoo with its parameters, forward FLOPs per sample,
 * default input shape and default training recipe, as a table or one JSON line per
 * model. */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "dtrain/model.h"
#include "dtrain/zoo.h"

/* What the command prints of one model. */
typedef struct model_row {
    const char *name;
    dt_model_spec spec;
    size_t params;
    double flops; /* forward, one sample */
    int takes_data_shape;
    const dt_zoo_recipe *recipe;
} model_row;

static void models_usage(FILE *out) {
    fprintf(out, "usage: dtrain models [--json] [MODEL ...]\n"
                 "\n"
                 "Lists every model of the zoo, or the MODELs named (zoo names or ONNX files,\n"
                 "FILE.onnx: docs/onnx.md): parameters, forward FLOPs per sample (conv and\n"
                 "linear multiply-adds x2, at the default input), the default input shape and\n"
                 "whether the model also takes other input shapes (then train, eval and bench\n"
                 "use the data's shape), and its recipe: the lr, momentum, weight decay and\n"
                 "schedule that train, scale and bench use for the flags not given (from the\n"
                 "model's reference recipe where there is one; batch 128 for all; the step\n"
                 "schedule is x0.1 at 50%% and 75%% of the epochs). Only the graph is built: no\n"
                 "memory for weights or activations, so the biggest models list as fast as the\n"
                 "smallest.\n"
                 "\n"
                 "  --json               one JSON line per model: model, params, flops,\n"
                 "                       input [c, h, w], classes, width, any_input, recipe\n"
                 "                       {lr, momentum, weight_decay, lr_schedule, source}\n"
                 "  --help               this text\n");
}

/* Builds the graph only (dt_model_alloc is never called): the parameter count is the
 * graph's tensor sizes, and the FLOPs follow from its shapes. */
static int measure(model_row *row, const char *name, dt_error *err) {
    memset(row, 0, sizeof *row);
    row->name = name;
    if (dt_zoo_spec_of(&row->spec, name, err)) return -1;
    dt_model m;
    if (dt_zoo_build(&m, &row->spec, err)) return -1;
    row->params = m.n_params;
    row->flops = dt_model_forward_flops(&m, 1);
    row->takes_data_shape = dt_zoo_fixed_input(name) == NULL;
    row->recipe = dt_zoo_recipe_of(name);
    dt_model_free(&m);
    return 0;
}

/* 11173962 -> "11,173,962" */
static void with_commas(char *out, size_t size, size_t n) {
    char digits[32];
    int len = snprintf(digits, sizeof digits, "%zu", n), k = 0;
    for (int i = 0; i < len && (size_t)k + 2 < size; i++) {
        if (i > 0 && (len - i) % 3 == 0) out[k++] = ',';
        out[k++] = digits[i];
    }
    out[k] = '\0';
}

/* 81199104 -> "81.2 M" */
static void si(char *out, size_t size, double x) {
    const char *units = " KMGT";
    int u = 0;
    while (x >= 1000.0 && u < 4) {
        x /= 1000.0;
        u++;
    }
    snprintf(out, size, "%.3g %c", x, units[u]);
}

static int print_text(const model_row *r) {
    char params[32], flops[32], shape[48];
    with_commas(params, sizeof params, r->params);
    si(flops, sizeof flops, r->flops);
    snprintf(shape, sizeof shape, "%dx%dx%d", r->spec.in_c, r->spec.in_h, r->spec.in_w);
    const dt_zoo_recipe *rc = r->recipe;
    return printf("%-14s %12s %14s  %-10s %-6s %6g %8g %7g  %s\n", r->name, params, flops, shape,
                  r->takes_data_shape ? "yes" : "no", rc->lr, rc->momentum, rc->weight_decay,
                  dt_lr_kind_name(rc->schedule)) > 0;
}

/* A recipe's float as the decimal it was written as (0.05, not 0.0500000007). */
static double decimal(float v) {
    char text[32];
    snprintf(text, sizeof text, "%.7g", v);
    return strtod(text, NULL);
}

static int print_json(const model_row *r) {
    cJSON *o = cJSON_CreateObject();
    int ok = o && cJSON_AddStringToObject(o, "model", r->name) &&
             cJSON_AddNumberToObject(o, "params", (double)r->params) &&
             cJSON_AddNumberToObject(o, "flops", r->flops);
    cJSON *input = ok ? cJSON_AddArrayToObject(o, "input") : NULL;
    const int dims[3] = {r->spec.in_c, r->spec.in_h, r->spec.in_w};
    ok = input != NULL;
    for (int i = 0; ok && i < 3; i++) {
        cJSON *d = cJSON_CreateNumber(dims[i]);
        ok = d && cJSON_AddItemToArray(input, d);
        if (!ok) cJSON_Delete(d);
    }
    ok = ok && cJSON_AddNumberToObject(o, "classes", r->spec.classes) &&
         cJSON_AddNumberToObject(o, "width", r->spec.width) &&
         cJSON_AddBoolToObject(o, "any_input", r->takes_data_shape);
    cJSON *recipe = ok ? cJSON_AddObjectToObject(o, "recipe") : NULL;
    ok = recipe && cJSON_AddNumberToObject(recipe, "lr", decimal(r->recipe->lr)) &&
         cJSON_AddNumberToObject(recipe, "momentum", decimal(r->recipe->momentum)) &&
         cJSON_AddNumberToObject(recipe, "weight_decay", decimal(r->recipe->weight_decay)) &&
         cJSON_AddStringToObject(recipe, "lr_schedule", dt_lr_kind_name(r->recipe->schedule)) &&
         cJSON_AddStringToObject(recipe, "source", r->recipe->source);
    char *text = ok ? cJSON_PrintUnformatted(o) : NULL;
    ok = text && printf("%s\n", text) > 0;
    cJSON_free(text);
    cJSON_Delete(o);
    return ok;
}

/* The models named (all the zoo's if none), measured first, then printed: a MODEL
 * that is none prints only its error (exit 2). */
static int list_models(const char *cmd, const char **names, int n_names, int json) {
    const int count = n_names ? n_names : dt_zoo_count();
    model_row *rows = calloc((size_t)count + 1, sizeof *rows);
    if (!rows) {
        cli_fail(cmd, "out of memory");
        return 1;
    }
    for (int i = 0; i < count; i++) {
        dt_error err;
        if (measure(&rows[i], n_names ? names[i] : dt_zoo_name(i), &err)) {
            cli_fail(cmd, "%s", err.msg);
            free(rows);
            return 2;
        }
    }
    int ok =
        json || printf("%-14s %12s %14s  %-10s %-6s %6s %8s %7s  %s\n", "model", "parameters",
                       "FLOPs/sample", "input", "other", "lr", "momentum", "wd", "schedule") >= 0;
    for (int i = 0; ok && i < count; i++) ok = json ? print_json(&rows[i]) : print_text(&rows[i]);
    free(rows);
    if (!ok || fflush(stdout)) {
        cli_fail(cmd, "cannot write the list");
        return 1;
    }
    return 0;
}

int cmd_models(int argc, char **argv) {
    static const struct option own[] = {
        {"json", no_argument, 0, 'j'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    static const char *const no_shared[] = {NULL}; /* no training flag applies */
    const char *cmd = "models";
    dt_train_config cfg = dt_train_config_default();
    /* MODEL arguments apart from the options (none of which takes a value) */
    char **opts = malloc(((size_t)argc + 1) * sizeof *opts);
    const char **names = malloc(((size_t)argc + 1) * sizeof *names);
    if (!opts || !names) {
        free(opts);
        free(names);
        cli_fail(cmd, "out of memory");
        return 1;
    }
    int n_opts = 0, n_names = 0, json = 0, rc = -1;
    for (int i = 0; i < argc; i++) {
        if (i > 0 && argv[i][0] != '-')
            names[n_names++] = argv[i];
        else
            opts[n_opts++] = argv[i];
    }
    opts[n_opts] = NULL;
    cli_flags flags;
    cli_flags_init(&flags, cmd, no_shared, NULL, own);
    for (int opt; rc < 0 && (opt = cli_flags_next(&flags, n_opts, opts, &cfg)) != CLI_FLAGS_DONE;) {
        if (opt == CLI_FLAGS_ERROR) rc = 2;
        if (opt == 'j') json = 1;
        if (opt == 'h') {
            models_usage(stdout);
            rc = 0;
        }
    }
    if (rc < 0) rc = list_models(cmd, names, n_names, json);
    free(opts);
    free(names);
    return rc;
}
