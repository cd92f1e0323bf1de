/* dtrain simulate: step time, speed-up and the compute / communication split of a
 * data-parallel job on 1..N workers, from a measured per-op profile (simulate.h), as a
 * table, a CSV and the scaling study's plots; or, with --validate, the simulator
 * against measured step times. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "dtrain/outfile.h"
#include "dtrain/plots.h"
#include "dtrain/profile.h"
#include "dtrain/simulate.h"
#include "dtrain/sweep.h"
#include "dtrain/textfile.h"

enum { MAX_WORKER_COUNTS = 64 };

static void simulate_usage(FILE *out) {
    fprintf(
        out,
        "usage: dtrain simulate --profile FILE.json --link RATE[,LATENCY] [options]\n"
        "       dtrain simulate --validate FILE.csv [--max-median-error PCT]\n"
        "\n"
        "Predicts the step time of data-parallel training on 1..N workers (N up to 2^20)\n"
        "from a model's measured per-op forward and backward times (dtrain bench\n"
        "--profile-out), by a discrete-event schedule of backward and DDP's bucket\n"
        "all-reduces (overlap), without running anything. Prints per worker count the\n"
        "step time, the compute and exposed-communication split, the communication time\n"
        "(hidden or not), speed-up N t(N0) / (N0 t(N)) against the first count N0 of\n"
        "--workers at the same batch per worker, efficiency and images/s. Compute is this "
        "machine's (the profile's) divided by\n"
        "--compute-speedup. Assumes identical workers: no stragglers, and communication\n"
        "that does not slow compute (docs/scaling.md says when to trust it).\n"
        "\n"
        "  --profile FILE       per-op times (dtrain bench --profile-out FILE)\n"
        "  --model M            check that the profile is of model M\n"
        "  --batch-size B       per worker (default: the profile's); compute scales with B\n"
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
    const char *out_dir;
    double dataset_size;
    int workers[MAX_WORKER_COUNTS], n_workers;
} sim_run;

static void fill_study(dt_scale_study *s, const dt_profile *p, const dt_sim_config *c,
                       double dataset) {
    snprintf(s->model, sizeof s->model, "%s (simulated)", p->model);
    snprintf(s->data, sizeof s->data, "%s", "simulated"); /* plots.c labels its times so */
    snprintf(s->mode, sizeof s->mode, "%s",
             c->mode == DT_SIM_ALLREDUCE_NO_OVERLAP ? "allreduce" : dt_sim_mode_name(c->mode));
    s->servers = c->topology == DT_SIM_PS ? c->servers : 0;
    s->params = (double)p->params;
    s->dataset_size = dataset;
}

static int write_outputs(const char *cmd, const sim_run *run, const dt_profile *p,
                         const dt_sim_config *c, const dt_sim_result *res, const char *table) {
    dt_error err;
    if (dt_make_dirs(run->out_dir, &err)) return cli_fail(cmd, "%s", err.msg);
    char path[4200];
    dt_outfile o;
    snprintf(path, sizeof path, "%s/simulate.csv", run->out_dir);
    if (dt_outfile_open(&o, path, &err)) return cli_fail(cmd, "%s", err.msg);
    fprintf(o.f, "workers,batch_size,step_ms,compute_ms,exposed_ms,comm_ms,speedup,efficiency,"
                 "images_per_s,epoch_s\n");
    for (int i = 0; i < run->n_workers; i++) {
        const dt_sim_result *r = &res[i];
        const double sp = r->workers * res[0].step_s / res[0].workers / r->step_s;
        fprintf(o.f, "%d,%d,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f,%.3f,%.6f\n", r->workers, c->batch,
                1e3 * r->step_s, 1e3 * r->compute_s, 1e3 * r->exposed_s, 1e3 * r->comm_s, sp,
                sp / r->workers * res[0].workers, r->images_per_s,
                r->step_s * run->dataset_size / ((double)r->workers * c->batch));
    }
    if (dt_outfile_commit(&o, &err)) return cli_fail(cmd, "%s", err.msg);

    /* The scaling study's plots from the simulated rows: epoch time = D / (N B) steps. */
    dt_scale_study s = {0};
    fill_study(&s, p, c, run->dataset_size);
    for (int i = 0; i < run->n_workers; i++) {
        const dt_sim_result *r = &res[i];
        const double steps = run->dataset_size / ((double)r->workers * c->batch);
        const double t = r->step_s * steps;
        dt_scale_row row = dt_scale_row_unknown();
        row.procs = r->workers;
        row.batch = c->batch;
        row.t_train = row.t_epoch = row.t_train_min = row.t_train_max = t;
        row.t_epoch_min = row.t_epoch_max = t;
        row.t_data = 0;
        row.t_compute = r->compute_s * steps;
        row.t_comm = r->comm_s * steps;
        row.t_comm_exposed = r->exposed_s * steps;
        if (dt_scale_add_row(&s, &row, &err)) {
            dt_scale_free(&s);
            return cli_fail(cmd, "%s", err.msg);
        }
    }
    char names[DT_MAX_PLOTS][64];
    int n_plots = 0;
    const int plotted = dt_plots_write(&s, run->out_dir, names, &n_plots, &err) == 0;
    dt_scale_free(&s);
    if (!plotted) fprintf(stderr, "dtrain %s: no plots: %s\n", cmd, err.msg);

    snprintf(path, sizeof path, "%s/simulate.md", run->out_dir);
    if (dt_outfile_open(&o, path, &err)) return cli_fail(cmd, "%s", err.msg);
    fprintf(o.f, "# Simulated scaling: %s\n\n```\n%s```\n", p->model, table);
    for (int i = 0; i < n_plots; i++) fprintf(o.f, "\n![%s](%s)\n", names[i], names[i]);
    if (dt_outfile_commit(&o, &err)) return cli_fail(cmd, "%s", err.msg);
    fprintf(stderr, "simulate: %s/simulate.md, simulate.csv%s\n", run->out_dir,
            plotted ? ", plots" : "");
    return 0;
}

/* Runs the simulation over the worker counts; prints (and keeps) the table. */
static int simulate_all(const char *cmd, const sim_run *run, const dt_profile *p,
                        const dt_sim_config *c) {
    dt_sim_result res[MAX_WORKER_COUNTS];
    dt_error err;
    for (int i = 0; i < run->n_workers; i++)
        if (dt_simulate(p, c, run->workers[i], &res[i], &err)) return cli_fail(cmd, "%s", err.msg);
    enum { TABLE_CAP = 16384 };
    char *table = malloc(TABLE_CAP);
    if (!table) return cli_fail(cmd, "out of memory");
    size_t used = 0;
    used += (size_t)snprintf(
        table + used, TABLE_CAP - used,
        "model %s, batch %d per worker, mode %s, %d bucket(s) of <= %g MiB, compute x%g\n"
        "speed-up = N t(1)/t(N) against %d worker(s) at the same batch per worker\n"
        "%8s %11s %11s %11s %11s %9s %7s %12s\n",
        p->model, c->batch, dt_sim_mode_name(c->mode), res[0].buckets, c->bucket_mb,
        c->compute_speedup, res[0].workers, "workers", "step_ms", "compute_ms", "exposed_ms",
        "comm_ms", "speedup", "eff%", "images/s");
    for (int i = 0; i < run->n_workers && used < TABLE_CAP; i++) {
        const dt_sim_result *r = &res[i];
        const double sp = r->workers * res[0].step_s / res[0].workers / r->step_s;
        used += (size_t)snprintf(
            table + used, TABLE_CAP - used, "%8d %11.3f %11.3f %11.3f %11.3f %9.2f %7.1f %12.1f\n",
            r->workers, 1e3 * r->step_s, 1e3 * r->compute_s, 1e3 * r->exposed_s, 1e3 * r->comm_s,
            sp, 100.0 * sp / r->workers * res[0].workers, r->images_per_s);
    }
    fputs(table, stdout);
    int rc = run->out_dir ? write_outputs(cmd, run, p, c, res, table) : 0;
    free(table);
    return rc ? -1 : 0;
}

/* --validate: the CSV of measured configs. */
enum {
    V_NAME,
    V_PROFILE,
    V_WORKERS,
    V_BATCH,
    V_TOPOLOGY,
    V_LINK,
    V_MODE,
    V_STEP,
    V_LATENCY,
    V_SPEEDUP,
    V_BUCKET,
    V_INTRA,
    V_COMPUTE,
    V_EXPOSED,
    V_COLUMNS
};
static const char *const v_columns[V_COLUMNS] = {
    "name",      "profile",    "workers",    "batch_size", "topology",
    "link",      "mode",       "step_ms",    "latency",    "compute_speedup",
    "bucket_mb", "intra_link", "compute_ms", "exposed_ms"};
enum { V_REQUIRED = V_LATENCY, MAX_ROWS = 1000 };

static int compare_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int strict_double(const char *text, double lo, double hi, double *out) {
    if (!text[0] || strchr(" \t+", text[0])) return -1;
    char *end;
    errno = 0;
    const double v = strtod(text, &end);
    if (*end || errno || !isfinite(v) || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

/* One row: the config from its fields, the prediction, the error against step_ms. */
static int validate_row(const char *path, int lineno, char **f, const int *col, double *err_pct,
                        char *line_out, size_t cap, dt_error *err) {
    dt_sim_config c = dt_sim_config_default();
    double workers, batch, step_ms;
    const char *bad = NULL;
    int bad_col = 0;
    if (strict_double(f[col[V_WORKERS]], 1, 1 << 20, &workers) || workers != floor(workers))
        bad = "workers", bad_col = col[V_WORKERS];
    else if (strict_double(f[col[V_BATCH]], 1, 1 << 24, &batch) || batch != floor(batch))
        bad = "batch_size", bad_col = col[V_BATCH];
    else if (strict_double(f[col[V_STEP]], 1e-9, 1e9, &step_ms))
        bad = "step_ms", bad_col = col[V_STEP];
    else if (col[V_SPEEDUP] >= 0 && f[col[V_SPEEDUP]][0]) {
        if (strict_double(f[col[V_SPEEDUP]], 1e-9, 1e9, &c.compute_speedup))
            bad = "compute_speedup", bad_col = col[V_SPEEDUP];
    }
    if (!bad && col[V_BUCKET] >= 0 && f[col[V_BUCKET]][0] &&
        strict_double(f[col[V_BUCKET]], 1e-6, 1e6, &c.bucket_mb))
        bad = "bucket_mb", bad_col = col[V_BUCKET];
    if (bad) return dt_error_set(err, "%s line %d: bad %s '%s'", path, lineno, bad, f[bad_col]);
    c.batch = (int)batch;
    dt_error why;
    char link[128];
    if (snprintf(link, sizeof link, "%s%s%s", f[col[V_LINK]], col[V_LATENCY] >= 0 ? "," : "",
                 col[V_LATENCY] >= 0 ? f[col[V_LATENCY]] : "") >= (int)sizeof link)
        return dt_error_set(err, "%s line %d: link and latency longer than %zu characters", path,
                            lineno, sizeof link - 1);
    if (dt_sim_parse_link(link, &c.link, &why) ||
        dt_sim_parse_topology(f[col[V_TOPOLOGY]], &c, &why) ||
        dt_sim_parse_mode(f[col[V_MODE]], &c.mode, &why))
        return dt_error_set(err, "%s line %d: %s", path, lineno, why.msg);
    c.intra = c.link;
    if (col[V_INTRA] >= 0 && f[col[V_INTRA]][0] &&
        dt_sim_parse_link(f[col[V_INTRA]], &c.intra, &why))
        return dt_error_set(err, "%s line %d: %s", path, lineno, why.msg);
    /* the profile beside the CSV */
    char profile_path[4200];
    const char *slash = strrchr(path, '/');
    const int used = f[col[V_PROFILE]][0] == '/' || !slash
                         ? snprintf(profile_path, sizeof profile_path, "%s", f[col[V_PROFILE]])
                         : snprintf(profile_path, sizeof profile_path, "%.*s/%s",
                                    (int)(slash - path), path, f[col[V_PROFILE]]);
    if (used < 0 || used >= (int)sizeof profile_path) /* never a cut name: another file */
        return dt_error_set(err, "%s line %d: the profile's path is longer than %zu bytes", path,
                            lineno, sizeof profile_path - 1);
    dt_profile p;
    if (dt_profile_read(&p, profile_path, &why))
        return dt_error_set(err, "%s line %d: %s", path, lineno, why.msg);
    dt_sim_result r;
    const int rc = dt_simulate(&p, &c, (int)workers, &r, &why);
    dt_profile_free(&p);
    if (rc) return dt_error_set(err, "%s line %d: %s", path, lineno, why.msg);
    *err_pct = 100.0 * (1e3 * r.step_s - step_ms) / step_ms;
    char measured_split[64] = "";
    double mc, me;
    if (col[V_COMPUTE] >= 0 && col[V_EXPOSED] >= 0 &&
        !strict_double(f[col[V_COMPUTE]], 0, 1e9, &mc) &&
        !strict_double(f[col[V_EXPOSED]], 0, 1e9, &me))
        snprintf(measured_split, sizeof measured_split, "%.2f / %.2f", mc, me);
    snprintf(line_out, cap, "| %s | %d | %s | %s | %s | %.2f | %s | %.2f | %.2f / %.2f | %+.1f%% |",
             f[col[V_NAME]], (int)workers, f[col[V_TOPOLOGY]], link, f[col[V_MODE]], step_ms,
             measured_split[0] ? measured_split : "-", 1e3 * r.step_s, 1e3 * r.compute_s,
             1e3 * r.exposed_s, *err_pct);
    return 0;
}

static int validate(const char *cmd, const char *path, double max_median) {
    dt_csv csv;
    dt_error err;
    if (dt_csv_open(&csv, path, &err)) return cli_fail(cmd, "%s", err.msg), 1;
    char out[1024];
    char **f = csv.field;
    int col[V_COLUMNS], n_fields = 0, n = 0, rc = 0, got;
    double *errors = malloc(sizeof(double) * MAX_ROWS);
    if (!errors) {
        dt_csv_close(&csv);
        return cli_fail(cmd, "out of memory"), 1;
    }
    for (int i = 0; i < V_COLUMNS; i++) col[i] = -1;
    printf("| config | workers | topology | link | mode | measured ms | measured compute / "
           "exposed ms | predicted ms | predicted compute / exposed ms | error |\n"
           "|---|---|---|---|---|---|---|---|---|---|\n");
    while (rc == 0 && (got = dt_csv_next(&csv, &err)) != 0) { /* '#' comments skipped */
        if (got < 0) {
            rc = cli_fail(cmd, "%s", err.msg);
            break;
        }
        const int k = csv.n, lineno = (int)csv.in.lineno;
        if (n_fields == 0) { /* the header */
            n_fields = k;
            for (int i = 0; i < k; i++)
                for (int c = 0; c < V_COLUMNS; c++)
                    if (!strcmp(f[i], v_columns[c])) col[c] = i;
            for (int c = 0; c < V_REQUIRED && rc == 0; c++)
                if (col[c] < 0) rc = cli_fail(cmd, "%s: no '%s' column", path, v_columns[c]);
            continue;
        }
        if (k != n_fields) {
            rc = cli_fail(cmd, "%s line %d: %d fields, the header has %d", path, lineno, k,
                          n_fields);
            break;
        }
        if (n == MAX_ROWS) {
            rc = cli_fail(cmd, "%s: more than %d rows", path, MAX_ROWS);
            break;
        }
        if (validate_row(path, lineno, f, col, &errors[n], out, sizeof out, &err)) {
            rc = cli_fail(cmd, "%s", err.msg);
            break;
        }
        puts(out);
        errors[n] = fabs(errors[n]);
        n++;
    }
    dt_csv_close(&csv);
    if (rc == 0 && n == 0) rc = cli_fail(cmd, "%s has no rows", path);
    if (rc == 0) {
        qsort(errors, (size_t)n, sizeof(double), compare_double);
        const double median = n % 2 ? errors[n / 2] : 0.5 * (errors[n / 2 - 1] + errors[n / 2]);
        printf("\n%d configs: median |error| %.1f%%, largest %.1f%%\n", n, median, errors[n - 1]);
        if (max_median >= 0 && median > max_median) {
            cli_fail(cmd, "median |error| %.1f%% is above --max-median-error %g%%", median,
                     max_median);
            rc = -1;
        }
    }
    free(errors);
    return rc ? 1 : 0;
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
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *cmd = "simulate", *profile_path = NULL, *model = NULL, *link = NULL, *intra = NULL,
               *validate_path = NULL;
    dt_sim_config c = dt_sim_config_default();
    sim_run run = {.out_dir = NULL, .dataset_size = 50000, .n_workers = 0};
    long batch = 0;
    double max_median = -1;
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
        case 'h':
            simulate_usage(stdout);
            return 0;
        default:
            return cli_bad_option(cmd, argv, optind);
        }
    }
    if (cli_no_extra_args(cmd, argc, argv, optind)) return 2;
    if (validate_path) return validate(cmd, validate_path, max_median);
    if (!profile_path)
        return cli_fail(cmd, "--profile FILE is required (make one with dtrain bench "
                             "--profile-out FILE)"),
               2;
    if (!link) return cli_fail(cmd, "--link RATE[,LATENCY] is required (e.g. 10gbit,50us)"), 2;
    if (dt_sim_parse_link(link, &c.link, &err)) return cli_fail(cmd, "--link: %s", err.msg), 2;
    c.intra = c.link;
    if (intra && dt_sim_parse_link(intra, &c.intra, &err))
        return cli_fail(cmd, "--intra-link: %s", err.msg), 2;
    if (run.n_workers == 0 && parse_workers(cmd, "1..1024", run.workers, &run.n_workers)) return 2;
    dt_profile p;
    if (dt_profile_read(&p, profile_path, &err)) return cli_fail(cmd, "%s", err.msg), 1;
    int rc = 0;
    if (model && strcmp(model, p.model))
        rc = cli_fail(cmd, "--model %s, but %s is a profile of %s", model, profile_path, p.model);
    c.batch = batch > 0 ? (int)batch : p.batch;
    if (rc == 0) rc = simulate_all(cmd, &run, &p, &c);
    dt_profile_free(&p);
    return rc ? 1 : 0;
}
