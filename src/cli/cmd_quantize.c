/* dtrain quantize: float weights + calibration images -> an int8 network (safetensors),
 * optionally with the per-layer report. */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "core/threads.h"
#include "dtrain/train_state.h"
#include "quant/quant.h"
#include "train/quantize_file.h"

static const char *const quantize_shared[] = {"model",   "width", "data", "batch-size",
                                              "threads", "init",  NULL};

static void quantize_usage(const cli_flags *flags, FILE *out) {
    fprintf(out, "usage: dtrain quantize --init W.safetensors --out Q.safetensors [options]\n"
                 "\n"
                 "Post-training int8 quantization: runs the first N training images of the data\n"
                 "through the float model, chooses every activation's range from them, and\n"
                 "writes int8 weights, int32 biases and the scales as a safetensors file that\n"
                 "dtrain eval and dtrain bench --infer --int8 run. BatchNorm is folded into the\n"
                 "convolution before it; ReLU and residual adds are fused into their layer;\n"
                 "ops with no int8 form are kept float (listed).\n"
                 "docs/quantization.md describes the schemes and the file.\n"
                 "\n");
    cli_flags_help(flags, out, NULL);
    fprintf(out,
            "\n"
            "  --out FILE           the quantized network (required; written atomically)\n"
            "  --calib-samples N    calibration images: the first N of the training split\n"
            "                       (default 512)\n"
            "  --scheme S           symmetric (default): symmetric int8 weights, activations\n"
            "                       s8 or u8 after ReLU, float logits | lab: the course lab's\n"
            "                       arithmetic (step = (max - min) / 127 per layer, chained\n"
            "                       output scales, int8 logits)\n"
            "  --weights G          per-channel (default for symmetric) | per-tensor (the\n"
            "                       lab's, its only one)\n"
            "  --calib-method M     how activation ranges are chosen: minmax | percentile:P\n"
            "                       (e.g. percentile:99.99) | 3sigma | entropy (TensorRT's\n"
            "                       KL-divergence search) | auto: each of entropy,\n"
            "                       percentile:99.99, minmax, 3sigma calibrates on the first\n"
            "                       half of the images and runs as int8 on the second; the\n"
            "                       one agreeing most with float32's top-1 there wins (a\n"
            "                       tie: the earlier) and calibrates on all (printed).\n"
            "                       Default auto (symmetric),\n"
            "                       minmax (lab)\n"
            "  --report DIR         per-layer table (report.md, layers.csv) and histograms\n"
            "                       (weights.png/svg, activations.png/svg) in DIR\n"
            "  --help               this text\n");
}

/* The calibration images: the first `count` samples of a split, decoded without
 * augmentation, batch by batch. */
int cmd_quantize(int argc, char **argv) {
    static const struct option own[] = {{"out", required_argument, 0, 'o'},
                                        {"calib-samples", required_argument, 0, 'n'},
                                        {"scheme", required_argument, 0, 's'},
                                        {"weights", required_argument, 0, 'w'},
                                        {"calib-method", required_argument, 0, 'm'},
                                        {"report", required_argument, 0, 'r'},
                                        {"help", no_argument, 0, 'h'},
                                        {0, 0, 0, 0}};
    const char *cmd = "quantize";
    dt_train_config cfg = dt_train_config_default();
    const char *out_path = NULL, *report_dir = NULL;
    long calib_samples = 512;
    dt_quant_config qc = {.scheme = DT_QUANT_SYMMETRIC};
    int weights_given = 0, method_given = 0, autocal = 0;
    dt_error err;
    cli_flags flags;
    cli_flags_init(&flags, cmd, quantize_shared, NULL, own);
    for (int opt; (opt = cli_flags_next(&flags, argc, argv, &cfg)) != CLI_FLAGS_DONE;) {
        switch (opt) {
        case CLI_FLAGS_ERROR:
            return 2;
        case 'o':
            out_path = optarg;
            break;
        case 'r':
            report_dir = optarg;
            break;
        case 'n':
            if (cli_parse_int(cmd, "--calib-samples", optarg, 1, 1L << 30, &calib_samples))
                return 2;
            break;
        case 's':
            if (dt_quant_scheme_parse(optarg, &qc.scheme)) {
                cli_fail(cmd, "--scheme must be symmetric or lab, got '%s'", optarg);
                return 2;
            }
            break;
        case 'w':
            if (strcmp(optarg, "per-tensor") && strcmp(optarg, "per-channel")) {
                cli_fail(cmd, "--weights must be per-tensor or per-channel, got '%s'", optarg);
                return 2;
            }
            qc.per_channel = !strcmp(optarg, "per-channel");
            weights_given = 1;
            break;
        case 'm':
            autocal = !strcmp(optarg, "auto");
            if (!autocal && dt_calib_parse(optarg, &qc.calib, &err)) {
                if (strncmp(optarg, "percentile:", 11)) /* the library's list lacks auto */
                    cli_fail(cmd,
                             "--calib-method must be auto, minmax, percentile:P, 3sigma or "
                             "entropy, got '%s'",
                             optarg);
                else
                    cli_fail(cmd, "%s", err.msg);
                return 2;
            }
            method_given = 1;
            break;
        case 'h':
            quantize_usage(&flags, stdout);
            return 0;
        }
    }
    if (!weights_given) qc.per_channel = qc.scheme == DT_QUANT_SYMMETRIC;
    if (!method_given) {
        qc.calib.method = DT_CALIB_MINMAX; /* the lab's */
        autocal = qc.scheme == DT_QUANT_SYMMETRIC;
    }
    qc.report = report_dir != NULL;
    dt_model_spec spec;
    if (cli_model_and_data(cmd, &cfg, &spec)) return 2;
    if (!cfg.init_path) {
        cli_fail(cmd, "--init FILE is required: the float weights to quantize");
        return 2;
    }
    if (!out_path) {
        cli_fail(cmd, "--out FILE is required: where to write the quantized network");
        return 2;
    }
    if (qc.scheme == DT_QUANT_LAB && qc.per_channel) {
        cli_fail(cmd, "--scheme lab quantizes weights per layer; --weights per-channel needs "
                      "--scheme symmetric");
        return 2;
    }
    dt_threads_set(cli_threads(cmd, cfg.threads));
    const dt_quantize_file_options o = {&cfg, out_path, report_dir, calib_samples, qc, autocal};
    const int rc = dt_quantize_file(&o, stdout, &err);
    if (rc) cli_fail(cmd, "%s", err.msg);
    return rc ? 1 : 0;
}
