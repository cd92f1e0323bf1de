#include "study/predict.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/outfile.h"
#include "core/textfile.h"
#include "core/threads.h"
#include "parallel/overlap.h"
#include "perfmodel/simulate.h"
#include "train/bench.h"

/* Ranks on one machine talk through dtrain's shared-memory all-reduce: its bus
 * bandwidth by bench_allreduce here is 7.4 GB/s at 256 KiB and about 8 GB/s at 44.7 MB
 * (docs/distributed.md), a few microseconds a call at 4 KiB. */
static const double SHM_BYTES_PER_S = 8e9, SHM_LATENCY_S = 2.5e-6;
/* Steps each profile times (after bench's 3 warm-up steps). */
enum { PROFILE_STEPS = 10 };

static const char *const COLUMNS[] = {"procs",      "batch",   "threads",    "step_ms",
                                      "compute_ms", "comm_ms", "exposed_ms", "network"};
enum { N_COLUMNS = sizeof COLUMNS / sizeof *COLUMNS };

/* The simulator's view of the study's network for procs processes, and its words. */
static void network_config(const dt_sweep_config *cfg, const dt_scale_network *net, int procs,
                           dt_sim_config *c, char *words, size_t size) {
    const dt_sim_link shm = {.latency_s = SHM_LATENCY_S, .bytes_per_s = SHM_BYTES_PER_S};
    c->intra = c->link = shm;
    c->topology = DT_SIM_RING;
    int local_ranks = procs, spans = 0;
    if (net->hosts > 0 && procs > 1) {
        const int per = net->ranks_per_host > 0 ? net->ranks_per_host : 1;
        c->link = (dt_sim_link){.latency_s = net->delay_s, .bytes_per_s = net->rate_bps / 8};
        spans = procs > per;
        local_ranks = procs < per ? procs : per;
        if (per > 1 && spans) {
            c->topology = DT_SIM_TREE;
            c->per_node = per;
        }
        snprintf(words, size, "emulated hosts: %g Mbit/s and %g us a message; %d rank(s) a host",
                 net->rate_bps * 1e-6, net->delay_s * 1e6, per);
    } else {
        snprintf(words, size, "shared memory: %g GB/s; %g us a message", SHM_BYTES_PER_S * 1e-9,
                 SHM_LATENCY_S * 1e6);
    }
    /* the overlap the run gets: --overlap, else train's rule (mpirun binds each of
     * one or two ranks to a core of its own) */
    int overlap = cfg->train.overlap == DT_OVERLAP_ON;
    if (cfg->train.overlap == DT_OVERLAP_AUTO) {
        char why[256];
        overlap = dt_overlap_auto(dt_overlap_host_cores(), local_ranks <= 2 ? 1 : 0, local_ranks,
                                  cfg->train.threads > 0 ? cfg->train.threads : 1, spans, why,
                                  sizeof why);
    }
    c->mode = overlap ? DT_SIM_ALLREDUCE : DT_SIM_ALLREDUCE_NO_OVERLAP;
}

/* Whether OUT/predicted.csv has a row for every config of the grid at these threads: a
 * resumed sweep keeps the predictions made before its first runs (made again only with
 * --force, which measures everything again too). */
static int predictions_cover(const dt_sweep_config *cfg, int threads) {
    dt_scale_study old;
    memset(&old, 0, sizeof old);
    dt_error err;
    int covered = dt_scale_read_predictions(&old, cfg->out_dir, &err) == 1;
    for (int b = 0; b < cfg->n_batches && covered; b++)
        for (int k = 0; k < cfg->n_procs && covered; k++) {
            int found = 0;
            for (int i = 0; i < old.n_predicted && !found; i++)
                found = old.predicted[i].procs == cfg->procs[k] &&
                        old.predicted[i].batch == cfg->batches[b] &&
                        old.predicted[i].threads == threads;
            covered = found;
        }
    free(old.predicted);
    return covered;
}

int dt_scale_predict(const dt_sweep_config *cfg, const dt_scale_network *net, FILE *progress,
                     dt_error *err) {
    if (cfg->train.mode && strcmp(cfg->train.mode, "allreduce")) {
        if (!cfg->quiet)
            fprintf(progress,
                    "no prediction for mode %s (the simulator's schedule is "
                    "all-reduce's here)\n",
                    cfg->train.mode);
        return 0;
    }
    const int threads = cfg->train.threads > 0 ? cfg->train.threads : 1;
    char path[4200];
    snprintf(path, sizeof path, "%s/predicted.csv", cfg->out_dir);
    if (!cfg->force && predictions_cover(cfg, threads)) { /* made before the first runs */
        if (!cfg->quiet) fprintf(progress, "predictions kept from before the first runs\n");
        return 0;
    }
    dt_outfile f;
    if (dt_make_dirs(cfg->out_dir, err) || dt_outfile_open(&f, path, err)) return -1;
    for (int i = 0; i < N_COLUMNS; i++) fprintf(f.f, "%s%s", i ? "," : "", COLUMNS[i]);
    fputc('\n', f.f);
    const int saved_threads = dt_threads_get();
    dt_threads_set(threads);
    int rc = 0;
    for (int b = 0; b < cfg->n_batches && rc == 0; b++) {
        dt_profile p = {0};
        dt_error why;
        if (dt_bench_profile(&p, cfg->train.model, cfg->batches[b], PROFILE_STEPS, threads,
                             &why)) { /* e.g. a batch that does not fit: the sweep says so */
            if (!cfg->quiet)
                fprintf(progress, "no prediction at batch %d: %s\n", cfg->batches[b], why.msg);
            dt_profile_free(&p);
            continue;
        }
        if (!cfg->quiet)
            fprintf(progress, "predicting: %s at batch %d, %d thread%s: %.2f ms a step here\n",
                    cfg->train.model, cfg->batches[b], threads, threads > 1 ? "s" : "",
                    p.step_s * 1e3);
        for (int k = 0; k < cfg->n_procs && rc == 0; k++) {
            dt_sim_config c = dt_sim_config_default();
            char words[160];
            network_config(cfg, net, cfg->procs[k], &c, words, sizeof words);
            c.batch = cfg->batches[b];
            if (cfg->train.bucket_mb > 0) c.bucket_mb = cfg->train.bucket_mb;
            c.bytes_per_param = cfg->train.comm_dtype == DT_COMM_FP32 ? 4 : 2;
            dt_sim_result r;
            if (dt_simulate(&p, &c, cfg->procs[k], &r, err)) {
                rc = -1;
                break;
            }
            for (char *c = words; *c; c++) /* one CSV field */
                if (*c == ',') *c = ';';
            fprintf(f.f, "%d,%d,%d,%.6g,%.6g,%.6g,%.6g,%s%s\n", cfg->procs[k], cfg->batches[b],
                    threads, r.step_s * 1e3, r.compute_s * 1e3, r.comm_s * 1e3, r.exposed_s * 1e3,
                    words, c.mode == DT_SIM_ALLREDUCE ? " (overlap)" : " (no overlap)");
        }
        dt_profile_free(&p);
    }
    dt_threads_set(saved_threads);
    if (rc) {
        dt_outfile_discard(&f);
        return -1;
    }
    return dt_outfile_commit(&f, err);
}

int dt_scale_read_predictions(dt_scale_study *s, const char *dir, dt_error *err) {
    char path[4200];
    snprintf(path, sizeof path, "%s/predicted.csv", dir);
    FILE *probe = fopen(path, "r");
    if (!probe) return 0;
    fclose(probe);
    dt_csv csv;
    if (dt_csv_open(&csv, path, err)) return -1;
    int col[N_COLUMNS], got = dt_csv_next(&csv, err), rc = 0;
    if (got <= 0) {
        dt_csv_close(&csv);
        return got < 0 ? -1 : dt_error_set(err, "%s is empty", path);
    }
    for (int i = 0; i < N_COLUMNS; i++) {
        col[i] = -1;
        for (int j = 0; j < csv.n; j++)
            if (!strcmp(csv.field[j], COLUMNS[i])) col[i] = j;
        if (col[i] < 0) {
            dt_csv_close(&csv);
            return dt_error_set(err, "%s: no '%s' column", path, COLUMNS[i]);
        }
    }
    free(s->predicted);
    s->predicted = NULL;
    s->n_predicted = 0;
    int cap = 0;
    while (rc == 0 && (got = dt_csv_next(&csv, err)) == 1) {
        if (csv.n != N_COLUMNS) {
            rc = dt_error_set(err, "%s line %ld: %d fields where the header has %d", path,
                              csv.in.lineno, csv.n, N_COLUMNS);
            break;
        }
        double v[7];
        const double hi[7] = {1 << 20, 1 << 24, 1 << 16, 1e12, 1e12, 1e12, 1e12};
        for (int i = 0; i < 7 && rc == 0; i++)
            rc = dt_csv_field_number(&csv, COLUMNS[i], csv.field[col[i]], i < 3 ? 1 : 0, hi[i],
                                     &v[i], err);
        if (rc) break;
        if (s->n_predicted == cap) {
            cap = cap ? 2 * cap : 16;
            dt_scale_predicted *grown = realloc(s->predicted, sizeof *grown * (size_t)cap);
            if (!grown) {
                rc = dt_error_set(err, "out of memory reading %s", path);
                break;
            }
            s->predicted = grown;
        }
        s->predicted[s->n_predicted++] = (dt_scale_predicted){
            .procs = (int)v[0],
            .batch = (int)v[1],
            .threads = (int)v[2],
            .step_s = v[3] * 1e-3,
            .compute_s = v[4] * 1e-3,
            .comm_s = v[5] * 1e-3,
            .exposed_s = v[6] * 1e-3,
        };
        snprintf(s->predicted_on, sizeof s->predicted_on, "%s", csv.field[col[7]]);
    }
    if (got < 0) rc = -1;
    dt_csv_close(&csv);
    return rc ? -1 : 1;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void dt_scale_write_predictions(const dt_scale_study *s, FILE *out) {
    if (s->n_predicted == 0) return;
    fprintf(out,
            "\n## Predicted before measuring\n\n`scale` profiled the model here at each batch "
            "size with the threads each run gets (bench's training step on random data: no "
            "data loading) and simulated every config's step before the first run "
            "(`predicted.csv`; communication over %s). Measured step: the measured epoch's "
            "time / its steps.\n\n| procs | batch | threads | predicted step (ms) | compute "
            "(ms) | exposed comm (ms) | measured step (ms) | error | |\n"
            "|---|---|---|---|---|---|---|---|---|\n",
            s->predicted_on);
    double *errors = malloc(sizeof(double) * (size_t)s->n_predicted);
    int n_errors = 0, busy = 0;
    for (int i = 0; i < s->n_predicted; i++) {
        const dt_scale_predicted *p = &s->predicted[i];
        const dt_scale_row *r = dt_scale_find(s, p->procs, p->batch, 0);
        fprintf(out, "| %d | %d | %d | %.2f | %.2f | %.2f |", p->procs, p->batch, p->threads,
                p->step_s * 1e3, p->compute_s * 1e3, p->exposed_s * 1e3);
        const double t = r ? (r->t_epoch > 0 ? r->t_epoch : r->t_train) : -1;
        if (!r || r->iterations <= 0 || t <= 0) {
            fputs(" not measured | | |\n", out);
            continue;
        }
        const double measured = t / (double)r->iterations, e = (p->step_s - measured) / measured;
        fprintf(out, " %.2f | %+.1f%% | %s |\n", measured * 1e3, 100 * e,
                r->busy ? "busy: left out" : "");
        if (r->busy)
            busy++;
        else if (errors)
            errors[n_errors++] = fabs(e);
    }
    if (n_errors > 0) {
        qsort(errors, (size_t)n_errors, sizeof *errors, cmp_double);
        const double median = n_errors % 2
                                  ? errors[n_errors / 2]
                                  : 0.5 * (errors[n_errors / 2 - 1] + errors[n_errors / 2]);
        fprintf(out,
                "\n**Median |error| %.1f%%** over %d config%s (worst %.1f%%); %d measured on a "
                "busy machine left out.\n",
                100 * median, n_errors, n_errors > 1 ? "s" : "", 100 * errors[n_errors - 1], busy);
    } else {
        fprintf(out,
                "\n**No median |error|**: no config was measured on a quiet machine (%d busy "
                "left out).\n",
                busy);
    }
    free(errors);
}
