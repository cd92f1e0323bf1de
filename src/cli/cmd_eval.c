/* dtrain eval: saved weights on a test split; loss, accuracy, per-class accuracy and
 * the confusion matrix, as text or one JSON line. */
#define _GNU_SOURCE
#include <stdio.h>

#include "cli.h"
#include "core/threads.h"
#include "dtrain/train_state.h"
#include "quant/qrun.h"
#include "train/eval_file.h"

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
                 "\n"
                 "A quantized file (dtrain quantize --out) runs as int8 and is compared with the\n"
                 "float weights it was made from (their path is in its metadata; used if the\n"
                 "file there is unchanged) or those given by --compare: top-1 agreement.\n"
                 "\n");
    cli_flags_help(flags, out, NULL);
    fprintf(out,
            "  --json               one JSON line instead of the text: event \"eval\", model,\n"
            "                       data, samples, loss, accuracy, class_names[] (null for\n"
            "                       synthetic data), class_accuracy[],\n"
            "                       confusion[true][predicted]; for int8 also int8, engine,\n"
            "                       scheme, float_accuracy, agreement\n"
            "  --compare FILE       float weights to compare a quantized file with\n"
            "  --logits FILE        also write every test sample's logits (of the int8 network\n"
            "                       for a quantized file) and label: safetensors, logits F32\n"
            "                       [samples, classes], labels I32 [samples]\n"
            "  --int8-engine E      dnnl (oneDNN's int8 primitives, default) | emulate (the\n"
            "                       float emulation of the integer arithmetic: the same\n"
            "                       integers, slowly)\n"
            "  --help               this text\n");
}

int cmd_eval(int argc, char **argv) {
    static const struct option own[] = {{"json", no_argument, 0, 'j'},
                                        {"compare", required_argument, 0, 'c'},
                                        {"int8-engine", required_argument, 0, 'e'},
                                        {"logits", required_argument, 0, 'l'},
                                        {"help", no_argument, 0, 'h'},
                                        {0, 0, 0, 0}};
    const char *cmd = "eval";
    dt_train_config cfg = dt_train_config_default();
    int json = 0;
    const char *compare = NULL, *logits_path = NULL;
    dt_int8_engine engine = DT_INT8_DNNL;
    int engine_given = 0;
    cli_flags flags;
    cli_flags_init(&flags, cmd, eval_shared, NULL, own);
    for (int opt; (opt = cli_flags_next(&flags, argc, argv, &cfg)) != CLI_FLAGS_DONE;) {
        if (opt == CLI_FLAGS_ERROR) return 2;
        if (opt == 'j') json = 1;
        if (opt == 'c') compare = optarg;
        if (opt == 'l') logits_path = optarg;
        engine_given |= opt == 'e';
        if (opt == 'e' && dt_int8_engine_parse(optarg, &engine)) {
            cli_fail(cmd, "--int8-engine must be emulate or dnnl, got '%s'", optarg);
            return 2;
        }
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
    dt_threads_set(cli_threads(cmd, cfg.threads));

    dt_error err;
    const dt_eval_file_options o = {&cfg, compare, logits_path, engine, engine_given, json};
    int rc = dt_eval_file(&o, stdout, &err);
    if (rc == 0 && fflush(stdout)) rc = dt_error_set(&err, "cannot write the results");
    if (rc) cli_fail(cmd, "%s", err.msg);
    return rc ? 1 : 0;
}
