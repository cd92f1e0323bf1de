/* dtrain eval: saved weights on a test split; loss, accuracy, per-class accuracy and
 * the confusion matrix, as text or one JSON line. */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "dtrain/evaluate.h"
#include "dtrain/threads.h"
#include "dtrain/train_state.h"
#include "dtrain/transform.h"

/* The training flags that mean the same here. */
static const char *const eval_shared[] = {"model",   "width",        "data", "batch-size",
                                          "threads", "test-samples", "init", NULL};

static void eval_usage(const cli_flags *flags, FILE *out) {
    fprintf(out, "usage: dtrain eval --init FILE [options]\n"
                 "\n"
                 "Evaluates saved weights (safetensors, as dtrain train --save writes them) on\n"
                 "the test split of the data: loss, accuracy, accuracy per class and the\n"
                 "confusion matrix (rows: true class, columns: predicted class). --init is\n"
                 "required: the figures of random weights are rarely what anyone wants.\n"
                 "\n");
    cli_flags_help(flags, out, NULL);
    fprintf(out,
            "  --json               one JSON line instead of the text: event \"eval\", model,\n"
            "                       data, samples, loss, accuracy, class_accuracy[],\n"
            "                       confusion[true][predicted]\n"
            "  --help               this text\n");
}

static void print_text(const dt_train_config *cfg, const dt_eval_result *r) {
    printf("evaluated %s (weights %s) on the %s test split: %ld samples, loss %.4f, "
           "accuracy %.2f%%\n\n",
           cfg->model, cfg->init_path, cfg->data, r->samples, r->loss, 100.0 * r->accuracy);
    printf("class  samples  accuracy\n");
    for (int c = 0; c < r->classes; c++) {
        long total = 0;
        for (int k = 0; k < r->classes; k++) total += r->confusion[(size_t)c * r->classes + k];
        printf("%5d  %7ld  %7.2f%%\n", c, total, 100.0 * dt_eval_class_accuracy(r, c));
    }
    printf("\nconfusion matrix (rows: true class, columns: predicted class)\n%5s", "");
    for (int k = 0; k < r->classes; k++) printf(" %6d", k);
    for (int c = 0; c < r->classes; c++) {
        printf("\n%5d", c);
        for (int k = 0; k < r->classes; k++)
            printf(" %6ld", r->confusion[(size_t)c * r->classes + k]);
    }
    printf("\n");
}

/* Appends item to array; on failure frees it (nothing else owns it) and returns 0. */
static int append(cJSON *array, cJSON *item) {
    if (item && cJSON_AddItemToArray(array, item)) return 1;
    cJSON_Delete(item);
    return 0;
}

/* The JSON line, built with cJSON so the model and data names are escaped. */
static int print_json(const dt_train_config *cfg, const dt_eval_result *r) {
    cJSON *o = cJSON_CreateObject();
    int ok = o && cJSON_AddStringToObject(o, "event", "eval") &&
             cJSON_AddStringToObject(o, "model", cfg->model) &&
             cJSON_AddStringToObject(o, "data", cfg->data) &&
             cJSON_AddNumberToObject(o, "samples", (double)r->samples) &&
             cJSON_AddNumberToObject(o, "loss", r->loss) &&
             cJSON_AddNumberToObject(o, "accuracy", r->accuracy);
    cJSON *classes = ok ? cJSON_AddArrayToObject(o, "class_accuracy") : NULL;
    cJSON *confusion = classes ? cJSON_AddArrayToObject(o, "confusion") : NULL;
    ok = confusion != NULL;
    for (int c = 0; ok && c < r->classes; c++) {
        /* a class without samples has no accuracy: NaN, which cJSON writes as null */
        cJSON *row = cJSON_CreateArray();
        ok = append(classes, cJSON_CreateNumber(dt_eval_class_accuracy(r, c))) &&
             append(confusion, row);
        for (int k = 0; ok && k < r->classes; k++)
            ok = append(row, cJSON_CreateNumber((double)r->confusion[(size_t)c * r->classes + k]));
    }
    char *text = ok ? cJSON_PrintUnformatted(o) : NULL;
    ok = text && printf("%s\n", text) > 0;
    cJSON_free(text);
    cJSON_Delete(o);
    return ok ? 0 : -1;
}

int cmd_eval(int argc, char **argv) {
    static const struct option own[] = {
        {"json", no_argument, 0, 'j'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    const char *cmd = "eval";
    dt_train_config cfg = dt_train_config_default();
    int json = 0;
    cli_flags flags;
    cli_flags_init(&flags, cmd, eval_shared, NULL, own);
    for (int opt; (opt = cli_flags_next(&flags, argc, argv, &cfg)) != CLI_FLAGS_DONE;) {
        if (opt == CLI_FLAGS_ERROR) return 2;
        if (opt == 'j') json = 1;
        if (opt == 'h') {
            eval_usage(&flags, stdout);
            return 0;
        }
    }
    dt_model_spec spec;
    if (cli_model_and_data(cmd, &cfg, &spec)) return 2;
    if (!cfg.init_path) {
        cli_fail(cmd, "--init FILE is required: the weights to evaluate (see dtrain eval --help)");
        return 2;
    }
    dt_threads_set(cfg.threads);

    dt_error err;
    dt_dataset test;
    dt_model model;
    if (dt_train_open_data(&test, cfg.model, cfg.data, 0, cfg.max_test_samples, &err)) {
        cli_fail(cmd, "%s", err.msg);
        return 1;
    }
    if (dt_train_model_spec(&spec, cfg.model, cfg.width, &test, &err) ||
        dt_train_build_model(&model, &spec, cfg.batch_size, cfg.seed, cfg.init_path, &err)) {
        cli_fail(cmd, "%s", err.msg);
        dt_dataset_close(&test);
        return 1;
    }
    dt_transform tf;
    dt_transform_init(&tf, &test, 0, cfg.seed);
    dt_eval_result result;
    int rc = dt_evaluate(&model, &test, &tf, NULL, &result, &err);
    if (rc)
        cli_fail(cmd, "%s", err.msg);
    else if (json)
        rc = print_json(&cfg, &result) ? cli_fail(cmd, "cannot write the JSON line") : 0;
    else
        print_text(&cfg, &result);
    if (rc == 0 && fflush(stdout)) rc = cli_fail(cmd, "cannot write the results");
    dt_eval_result_free(&result);
    dt_model_free(&model);
    dt_dataset_close(&test);
    return rc ? 1 : 0;
}
