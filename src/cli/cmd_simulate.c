/* dtrain simulate: step time, speed-up and the compute / communication split of a
 * data-parallel job on 1..N workers, from a measured per-op profile (simulate.h), as a
 * table, a CSV and the scaling study's plots; or, with --validate, the simulator
 * against measured step times. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "core/threads.h"
#include "dtrain/zoo.h"
#include "perfmodel/profile.h"
#include "perfmodel/simulate.h"
#include "study/report.h"
#include "train/bench.h"

enum { MAX_WORKER_COUNTS = 64 };

static void simulate_usage(FILE *out) {
    fprintf(
        out,
        "usage: dtrain simulate --model M --link RATE[,LATENCY] [options]\n"
        "       dtrain simulate --profile FILE.json --link RATE[,LATENCY] [options]\n"
        "       dtrain simulate --validate FILE.csv [--max-median-error PCT]\n"
        "\n"
        "Predicts the step time of data-parallel training on 1..N workers (N up to 2^20)\n"
        "from a model's measured per-op forward and backward times (dtrain bench\n"
        "--profile-out, or taken here first when no --profile is given), by a discrete-event "
        "schedule of backward and DDP's bucket\n"
        "all-reduces (overlap), without running anything. Prints per worker count the\n"
        "step time, the compute and exposed-communication split, the communication time\n"
        "(hidden or not), speed-up N t(N0) / (N0 t(N)) against the first count N0 of\n"
        "--workers at the same batch per worker, efficiency and images/s. Compute is this "
        "machine's (the profile's) divided by\n"
        "--compute-speedup. Assumes identical workers: no stragglers, and communication\n"
        "that does not slow compute (docs/scaling.md says when to trust it).\n"
        "\n"
        "  --model M            the model (a zoo name or FILE.onnx): without --profile,\n"
        "                       its per-op times are measured here first (as dtrain bench\n"
        "                       --profile-out: fp32, oneDNN, random data, --profile-steps\n"
        "                       steps at --batch-size, this machine's threads); with\n"
        "                       --profile, checked against the profile's model\n"
        "  --profile FILE       per-op times taken elsewhere (dtrain bench --profile-out)\n"
        "  --profile-steps N    steps timed when profiling here (default 10, after 3\n"
        "                       warm-up steps)\n"
        "  --batch-size B       per worker (default: the profile's, or 128 when profiling\n"
        "                       here); compute scales with B\n"
        "  --workers LIST       LO..HI (LO, 2 LO, 4 LO, .. and HI) or N1,N2,..\n"
        "                       (default 1..1024; at most %d counts)\n"
        "  --link RATE[,LAT]    each worker's (node's) link: RATE in bit|kbit|mbit|gbit\n"
        "                       (per second) or B/s|KB/s|MB/s|GB/s, LAT in s|ms|us|ns\n"
        "                       (default 0), e.g. 10gbit,50us\n"
        "  --topology T         ring (default) | tree:K (K workers per node: ring inside\n"
        "                       the node on --intra-link, ring over the nodes on --link) |\n"
        "                       ps:S (S parameter servers; the ps modes)\n"
        "  --intra-link R[,L]   the link inside a node for tree:K (default: --link)\n"
        "  --mode M             allreduce (default, buckets overlapped with backward) |\n"
        "                       allreduce-no-overlap | ps-sync | ps-async\n"
        "  --compute-speedup X  the device's throughput over the profile's (default 1)\n"
        "  --step-time MS       what if: one worker's measured step on the device to\n"
        "                       predict (ms, at --batch-size): the profile's compute\n"
        "                       rescaled to it (a profile taken here, one step timed\n"
        "                       there); instead of --compute-speedup\n"
        "  --bucket-mb MB       gradient bucket size in MiB, as dtrain train (default 25)\n"
        "  --comm-dtype T       fp32 (default) | bf16 | fp16: bytes per gradient value\n"
        "  --dataset-size D     samples per epoch for the epoch times and plots (default\n"
        "                       50000): epoch = D / (N B) steps, not rounded\n"
        "  --out DIR            also write DIR/simulate.csv, simulate.md and the scaling\n"
        "                       study's plots (speedup, epoch_time, compute_comm; gnuplot)\n"
        "  --validate FILE.csv  predict every row of FILE and compare with its measured\n"
        "                       step time. Columns (header, any order): name, profile\n"
        "                       (relative to FILE's folder), workers, batch_size, topology,\n"
        "                       link (a rate), mode, step_ms; optional latency, compute_speedup,\n"
        "                       bucket_mb, intra_link, compute_ms, exposed_ms (measured,\n"
        "                       printed beside the prediction). Prints each row's error and\n"
        "                       the median |error|\n"
        "  --max-median-error PCT  with --validate: exit 1 if the median |error| is above\n"
        "  --help               this text\n",
        MAX_WORKER_COUNTS);
}

/* "LO..HI" (powers of two from LO up, and HI) or "N1,N2,..", ascending, each in
 * [1, 2^20]. */
static int parse_workers(const char *cmd, const char *text, int *out, int *n) {
    const long max = 1L << 20;
    const char *dots = strstr(text, "..");
    *n = 0;
    if (dots) {
        char lo_text[32];
        const size_t len = (size_t)(dots - text);
        long lo, hi;
        if (len == 0 || len >= sizeof lo_text) goto bad;
        memcpy(lo_text, text, len);
        lo_text[len] = 0;
        if (cli_parse_int(cmd, "--workers (LO)", lo_text, 1, max, &lo) ||
            cli_parse_int(cmd, "--workers (HI)", dots + 2, lo, max, &hi))
            return -1;
        for (long w = lo; w < hi && *n < MAX_WORKER_COUNTS; w *= 2) out[(*n)++] = (int)w;
        if (*n < MAX_WORKER_COUNTS) out[(*n)++] = (int)hi;
        return 0;
    }
    char buf[1024];
    if (strlen(text) >= sizeof buf) goto bad;
    snprintf(buf, sizeof buf, "%s", text);
    char *save = NULL;
    if (!buf[0] || buf[0] == ',' || buf[strlen(buf) - 1] == ',' || strstr(buf, ",,")) goto bad;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        long w;
        if (*n >= MAX_WORKER_COUNTS) {
            cli_fail(cmd, "--workers '%s': at most %d worker counts", text, MAX_WORKER_COUNTS);
            return -1;
        }
        if (cli_parse_int(cmd, "--workers", tok, 1, max, &w)) return -1;
        if (*n > 0 && w <= out[*n - 1]) {
            cli_fail(cmd, "--workers '%s': counts must increase", text);
            return -1;
        }
        out[(*n)++] = (int)w;
    }
    return 0;
bad:
    cli_fail(cmd, "--workers expects LO..HI (e.g. 1..1024) or a list N1,N2,.., got '%s'", text);
    return -1;
}

static int parse_dtype_bytes(const char *text, double *bytes) {
    if (!strcmp(text, "fp32"))
        *bytes = 4.0;
    else if (!strcmp(text, "bf16") || !strcmp(text, "fp16"))
        *bytes = 2.0;
    else
        return -1;
    return 0;
}

typedef struct sim_run {
    const char *out_dir, *profile; /* --out, --profile (or NULL) */
    double dataset_size;
    int workers[MAX_WORKER_COUNTS], n_workers;
} sim_run;

/* Runs the simulation over the worker counts; prints the table (and writes --out's). */
static int simulate_all(const char *cmd, const sim_run *run, const dt_profile *p,
                        const dt_sim_config *c) {
    dt_sim_result res[MAX_WORKER_COUNTS];
    dt_error err, plot_err;
    if (dt_sim_sweep(p, c, run->workers, run->n_workers, res, &err))
        return cli_fail(cmd, "%s", err.msg);
    enum { TABLE_CAP = 16384 };
    char *table = malloc(TABLE_CAP);
    if (!table) return cli_fail(cmd, "out of memory");
    dt_sim_table(p, c, res, run->n_workers, table, TABLE_CAP);
    fputs(table, stdout);
    int plotted = 0, rc = 0;
    if (run->out_dir)
        rc = dt_report_simulated(p, c, res, run->n_workers, run->dataset_size, table, run->out_dir,
                                 run->profile, &plotted, &plot_err, &err);
    free(table);
    if (run->out_dir && !plotted && plot_err.msg[0])
        fprintf(stderr, "dtrain %s: no plots: %s\n", cmd, plot_err.msg);
    if (rc) return cli_fail(cmd, "%s", err.msg);
    if (run->out_dir)
        fprintf(stderr, "simulate: %s/simulate.md, simulate.csv%s\n", run->out_dir,
                plotted ? ", plots" : "");
    return 0;
}

/* --validate: the simulator against a CSV of measured configs. */
static int validate(const char *cmd, const char *path, double max_median) {
    dt_sim_validation v;
    dt_error err;
    if (dt_sim_validate(path, stdout, &v, &err)) return cli_fail(cmd, "%s", err.msg), 1;
    printf("\n%d configs: median |error| %.1f%%, largest %.1f%%\n", v.n, v.median, v.largest);
    if (max_median >= 0 && v.median > max_median)
        return cli_fail(cmd, "median |error| %.1f%% is above --max-median-error %g%%", v.median,
                        max_median),
               1;
    return 0;
}

int cmd_simulate(int argc, char **argv) {
    static const struct option opts[] = {{"profile", required_argument, 0, 'p'},
                                         {"model", required_argument, 0, 'm'},
                                         {"batch-size", required_argument, 0, 'b'},
                                         {"workers", required_argument, 0, 'w'},
                                         {"link", required_argument, 0, 'l'},
                                         {"intra-link", required_argument, 0, 'i'},
                                         {"topology", required_argument, 0, 't'},
                                         {"mode", required_argument, 0, 'M'},
                                         {"compute-speedup", required_argument, 0, 's'},
                                         {"bucket-mb", required_argument, 0, 'B'},
                                         {"comm-dtype", required_argument, 0, 'c'},
                                         {"dataset-size", required_argument, 0, 'd'},
                                         {"out", required_argument, 0, 'o'},
                                         {"validate", required_argument, 0, 'v'},
                                         {"max-median-error", required_argument, 0, 'e'},
                                         {"profile-steps", required_argument, 0, 'S'},
                                         {"step-time", required_argument, 0, 'T'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *cmd = "simulate", *profile_path = NULL, *model = NULL, *link = NULL, *intra = NULL,
               *validate_path = NULL;
    dt_sim_config c = dt_sim_config_default();
    sim_run run = {.out_dir = NULL, .dataset_size = 50000, .n_workers = 0};
    long batch = 0, profile_steps = 10;
    double max_median = -1, step_ms = 0;
    int speedup_given = 0;
    dt_error err;
    int opt;
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (opt) {
        case 'p':
            profile_path = optarg;
            break;
        case 'm':
            model = optarg;
            break;
        case 'b':
            if (cli_parse_int(cmd, "--batch-size", optarg, 1, 1L << 24, &batch)) return 2;
            break;
        case 'w':
            if (parse_workers(cmd, optarg, run.workers, &run.n_workers)) return 2;
            break;
        case 'l':
            link = optarg;
            break;
        case 'i':
            intra = optarg;
            break;
        case 't':
            if (dt_sim_parse_topology(optarg, &c, &err)) return cli_fail(cmd, "%s", err.msg), 2;
            break;
        case 'M':
            if (dt_sim_parse_mode(optarg, &c.mode, &err)) return cli_fail(cmd, "%s", err.msg), 2;
            break;
        case 's':
            if (cli_parse_float(cmd, "--compute-speedup", optarg, 1e-6, 1e9, &c.compute_speedup))
                return 2;
            speedup_given = 1;
            break;
        case 'B':
            if (cli_parse_float(cmd, "--bucket-mb", optarg, 1e-6, 1e6, &c.bucket_mb)) return 2;
            break;
        case 'c':
            if (parse_dtype_bytes(optarg, &c.bytes_per_param))
                return cli_fail(cmd, "--comm-dtype must be fp32, bf16 or fp16, got '%s'", optarg),
                       2;
            break;
        case 'd':
            if (cli_parse_float(cmd, "--dataset-size", optarg, 1, 1e15, &run.dataset_size))
                return 2;
            break;
        case 'o':
            run.out_dir = optarg;
            break;
        case 'v':
            validate_path = optarg;
            break;
        case 'e':
            if (cli_parse_float(cmd, "--max-median-error", optarg, 0, 1e9, &max_median)) return 2;
            break;
        case 'S':
            if (cli_parse_int(cmd, "--profile-steps", optarg, 1, 1000000, &profile_steps)) return 2;
            break;
        case 'T':
            if (cli_parse_float(cmd, "--step-time", optarg, 1e-6, 1e9, &step_ms)) return 2;
            break;
        case 'h':
            simulate_usage(stdout);
            return 0;
        default:
            return cli_bad_option(cmd, argv, optind);
        }
    }
    if (cli_no_extra_args(cmd, argc, argv, optind)) return 2;
    if (step_ms > 0 && speedup_given)
        return cli_fail(cmd, "--step-time and --compute-speedup both rescale compute: give one"), 2;
    if (validate_path) return validate(cmd, validate_path, max_median);
    if (!profile_path && !model)
        return cli_fail(cmd, "--model M (profiled here) or --profile FILE (dtrain bench "
                             "--profile-out FILE) is required"),
               2;
    if (!profile_path) { /* a usage error before any work */
        dt_model_spec spec;
        if (dt_zoo_spec_of(&spec, model, &err)) return cli_fail(cmd, "%s", err.msg), 2;
    }
    if (!link) return cli_fail(cmd, "--link RATE[,LATENCY] is required (e.g. 10gbit,50us)"), 2;
    if (dt_sim_parse_link(link, &c.link, &err)) return cli_fail(cmd, "--link: %s", err.msg), 2;
    c.intra = c.link;
    if (intra && dt_sim_parse_link(intra, &c.intra, &err))
        return cli_fail(cmd, "--intra-link: %s", err.msg), 2;
    if (run.n_workers == 0 && parse_workers(cmd, "1..1024", run.workers, &run.n_workers)) return 2;
    run.profile = profile_path;
    /* --out before any profiling: a study's folder is not written into */
    if (run.out_dir && dt_report_simulated_check(run.out_dir, profile_path, &err))
        return cli_fail(cmd, "%s", err.msg), 1;
    dt_profile p = {0};
    int rc = 0;
    if (profile_path) {
        if (dt_profile_read(&p, profile_path, &err)) return cli_fail(cmd, "%s", err.msg), 1;
        if (model && strcmp(model, p.model))
            rc = cli_fail(cmd, "--model %s, but %s is a profile of %s", model, profile_path,
                          p.model);
    } else {
        const int threads = cli_threads(cmd, 0);
        dt_threads_set(threads);
        const int at = batch > 0 ? (int)batch : 128;
        fprintf(stderr, "simulate: profiling %s at batch %d here (%ld steps, %d threads)\n", model,
                at, profile_steps, threads);
        const dt_bench_span span = {.steps = profile_steps};
        if (dt_bench_profile(&p, model, 0, NULL, 0, at, &span, threads, &err))
            return cli_fail(cmd, "%s", err.msg), 1;
        fprintf(stderr, "simulate: %.1f ms a step on this machine\n", p.step_s * 1e3);
    }
    c.batch = batch > 0 ? (int)batch : p.batch;
    if (rc == 0 && step_ms > 0) {
        double here_s = 0;
        if (dt_sim_speedup_to_step(&p, &c, step_ms * 1e-3, &c.compute_speedup, &here_s, &err))
            rc = cli_fail(cmd, "%s", err.msg);
        else
            fprintf(stderr,
                    "simulate: a step of %.3f ms there against %.3f ms in the profile, at batch "
                    "%d: compute x%.4g\n",
                    step_ms, here_s * 1e3, c.batch, 1 / c.compute_speedup);
    }
    if (rc == 0) rc = simulate_all(cmd, &run, &p, &c);
    dt_profile_free(&p);
    return rc ? 1 : 0;
}
